// gos-cluster: start, stop and inspect a persistent local cluster (coordinator plus K
// nodeagents on this machine), optionally with each nodeagent in its own network namespace.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "tools/client.h"
#include "tools/netns.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-cluster up|down|status [options]

  up       start a coordinator and K nodeagents on this machine, in the background; jobs
           run on it until `gos-cluster down` (gos-run, gos-ps and gos-kill find it through
           the state dir, $GOS_STATE_DIR or ~/.local/state/gos)
  down     stop it (root only): every job is killed
  status   its nodes and jobs (like gos-ps)

options for up:
  -N, --nodes K           nodeagents                                       (default 4)
      --timeslice DUR     strobe quantum                                (default 10ms)
      --mpl M             multiprogramming level                           (default 2)
      --failure-timeout DUR                                              (default 2s)
      --keep-logs N       replay logs kept, of the most recent jobs; 0 = all (default 1000)
      --provider NAME     libfabric provider between the nodes: shm (default: all are on
                          this host; $GOS_FABRIC_PROVIDER overrides), tcp;ofi_rxm, tcp
      --scratch-dir DIR   where each node writes its checkpoint dumps: DIR/<node name>
                          (default: the node's state dir; on another file system a restart
                          copies a node's dump instead of linking it)
      --netns             each nodeagent in a network namespace of its own, on a bridge
                          (198.19.K.0/24), like separate hosts: tcp;ofi_rxm between them;
                          `down` removes the namespaces (root only)
  -h, --help              this text
)";

int Main(int argc, char** argv) {
  uint32_t nodes = 4;
  std::string timeslice, mpl, failure_timeout, keep_logs, provider, scratch_dir;
  bool netns = false;
  os::Flags flags(argc, argv, kUsage);
  flags.U32("-N|--nodes", &nodes, 1);
  flags.String("--timeslice", &timeslice);
  flags.String("--mpl", &mpl);
  flags.String("--failure-timeout", &failure_timeout);
  flags.String("--keep-logs", &keep_logs);
  flags.String("--provider", &provider);
  flags.String("--scratch-dir", &scratch_dir);
  flags.Bool("--netns", &netns);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "gos-cluster: say up, down or status (see --help)\n");
    return 2;
  }
  const std::string& verb = flags.positional()[0];
  std::string state = StateDir();
  std::string running = FindCoordinator();
  if (verb == "up") {
    if (!running.empty()) {
      std::fprintf(stderr, "gos-cluster: a coordinator already answers at %s\n", running.c_str());
      return 1;
    }
    LocalClusterOptions o;
    o.nodes = nodes;
    o.timeslice = timeslice;
    o.mpl = mpl;
    o.failure_timeout = failure_timeout;
    o.keep_logs = keep_logs;
    o.provider = provider;
    o.scratch_dir = scratch_dir;
    o.netns = netns;
    o.embedded = false;
    o.detach = true;
    auto c = LocalCluster::Start(o);
    if (!c.ok()) {
      std::fprintf(stderr, "gos-cluster: %s\n", c.status().message().c_str());
      return 1;
    }
    Status s = WaitForNodes((*c)->socket(), nodes,
                            std::chrono::steady_clock::now() + std::chrono::seconds(60));
    if (!s.ok()) {
      (*c)->Kill();  // waits for the daemons: the coordinator's log is complete after it
      RemoveNetnsHosts(state);
      // The coordinator's own reason, when it gave up (e.g. the fabric refused the group).
      const std::string why = CoordinatorFatal(state + "/log/coordinator.log");
      std::fprintf(stderr, "gos-cluster: the cluster did not form: %s (logs in %s/log)\n",
                   why.empty() ? s.message().c_str() : why.c_str(), state.c_str());
      return 1;
    }
    (*c)->Detach();
    std::printf("gos-cluster: %u nodes up; coordinator socket %s; logs in %s/log\n", nodes,
                (*c)->socket().c_str(), state.c_str());
    return 0;
  }
  if (verb == "down") {
    if (running.empty()) {
      std::fprintf(stderr, "gos-cluster: no cluster is running\n");
      return 1;
    }
    auto ch = ConnectCoordinator(running);
    Status s = ch.ok() ? (*ch)->Send(os::Frame::kShutdown, {}) : ch.status();
    auto f = s.ok() ? (*ch)->Receive(std::chrono::steady_clock::now() + std::chrono::seconds(10))
                    : StatusOr<os::FrameIn>(s);
    if (!f.ok() || f->type != os::Frame::kOk) {
      auto text = f.ok() ? os::DecodeText(f->payload) : StatusOr<std::string>(f.status());
      std::fprintf(stderr, "gos-cluster: %s\n",
                   text.ok() ? text->c_str() : text.status().message().c_str());
      return 1;
    }
    // Wait until the socket stops answering, then remove the namespaces (--netns).
    for (int i = 0; i < 500 && !FindCoordinator().empty(); ++i) usleep(10000);
    RemoveNetnsHosts(state);
    std::printf("gos-cluster: stopped\n");
    return 0;
  }
  if (verb == "status") {
    if (running.empty()) {
      std::printf("gos-cluster: no cluster is running (state dir %s)\n", state.c_str());
      return 3;
    }
    std::string ps = BinDir() + "/gos-ps";
    execl(ps.c_str(), "gos-ps", nullptr);
    std::perror("gos-cluster: exec gos-ps");
    return 1;
  }
  std::fprintf(stderr, "gos-cluster: unknown command %s (up, down or status)\n", verb.c_str());
  return 2;
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
