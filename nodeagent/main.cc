// gos-nodeagent: the per-node daemon. Parses flags into AgentOptions and runs.
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "agent.h"
#include "gos/os/config.h"
#include "gos/os/flags.h"
#include "gos/round_trace.h"

namespace {

constexpr const char* kUsage = R"(usage: gos-nodeagent --coordinator ADDR|DIR [options]

The gos node daemon: joins the coordinator, runs strobes, launches, freezes and thaws the
node's ranks, streams their output. Runs as root (PID namespaces, cgroups, setuid).

Defaults come from /etc/gos/gos.conf or $GOS_CONFIG (docs/config.md); options override it.

options:
  --coordinator ADDR|DIR  coordinator's nodeagent address host:port, or its data dir
                          (reads DIR/coordinator.addr and DIR/cluster.key)      (required)
  --key-file FILE         cluster key (mode 0600)         (default DIR/cluster.key)
  --name NAME             node name, unique in the cluster      (default host name)
  --state-dir DIR         job dirs        (default /var/lib/gos/nodeagent/NAME; with
                          state_dir in gos.conf or $GOS_STATE_DIR: that/nodeagent/NAME)
  --cgroup-root DIR       freezer cgroups     (default /sys/fs/cgroup/freezer/gos)
  --scratch-dir DIR       checkpoint dumps, restore images   (default state dir)
  --init-root DIR         rank inits' working dirs         (default /run/gos/init)
  --cores N               cores to report                  (default online CPUs)
  --node ID               node id to ask for: once the cluster has formed, only one
                          that is down (this node joins again in its place) (default any)
  --connect-timeout DUR   how long to try to reach the coordinator    (default 30s)
  --exit-with-coordinator exit when the coordinator goes away or drops this node (else
                          reconnect: to a restarted coordinator, or in its own place
                          after being declared down)
  -h, --help              this text
)";

gos::nodeagent::NodeAgent* g_agent = nullptr;

void OnSignal(int) {
  if (g_agent) g_agent->Stop();
}

}  // namespace

int main(int argc, char** argv) {
  gos::os::Config cfg;
  if (int rc = gos::os::LoadConfigForMain("gos-nodeagent", &cfg); rc >= 0) return rc;
  gos::nodeagent::AgentOptions o{
      .coordinator = cfg.coordinator, .key_file = cfg.key_file, .scratch_dir = cfg.scratch_dir};
  gos::os::Flags flags(argc, argv, kUsage);
  flags.String("--coordinator", &o.coordinator);
  flags.String("--key-file", &o.key_file);
  flags.String("--name", &o.name);
  flags.String("--state-dir", &o.state_dir);
  flags.String("--cgroup-root", &o.cgroup_root);
  flags.String("--init-root", &o.init_root);
  flags.String("--scratch-dir", &o.scratch_dir);
  flags.U32("--cores", &o.cores);
  flags.U32("--node", &o.requested_node);
  flags.Duration("--connect-timeout", &o.connect_timeout);
  flags.Bool("--exit-with-coordinator", &o.exit_with_coordinator);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  char host[256] = {};
  if (o.state_dir.empty() && !cfg.state_dir.empty() && gethostname(host, sizeof host - 1) == 0) {
    o.state_dir = cfg.state_dir + "/nodeagent/" + (o.name.empty() ? host : o.name);
  }
  if (o.coordinator.empty()) {
    std::fprintf(stderr, "gos-nodeagent: --coordinator is required (see --help)\n");
    return 2;
  }
  auto a = gos::nodeagent::NodeAgent::Create(o);
  if (!a.ok()) {
    std::fprintf(stderr, "gos-nodeagent: %s\n", a.status().ToString().c_str());
    return 1;
  }
  g_agent = a->get();
  // The round trace (docs/specs/round-trace.md), if $GOS_ROUND_TRACE asks for it.
  gos::round_trace::Start({gos::round_trace::Role::kNodeAgent, o.requested_node, -1, 0});
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  gos::Status s = (*a)->Run();
  g_agent = nullptr;
  if (!s.ok()) {
    std::fprintf(stderr, "gos-nodeagent: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
