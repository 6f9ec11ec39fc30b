// gos-coordinator: the machine manager daemon. Parses flags into CoordinatorOptions and runs.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "coordinator.h"
#include "gos/log.h"
#include "gos/os/config.h"
#include "gos/os/flags.h"
#include "gos/round_trace.h"

namespace {

constexpr const char* kUsage = R"(usage: gos-coordinator --data-dir DIR --nodes K [options]

The gos machine manager: node registry, gang matrix, strobe clock, failure detection.
Clients connect to DIR/coordinator.sock; nodeagents to --listen with the cluster key
DIR/cluster.key (created on first start, mode 0600).

Defaults come from /etc/gos/gos.conf or $GOS_CONFIG (docs/config.md); options override it.

options:
  --data-dir DIR          job/node tables (RocksDB), cluster key, socket
                          (required, unless gos.conf has state_dir or $GOS_STATE_DIR is set)
  --nodes K               nodeagents forming the cluster
                          (required, unless gos.conf has nodes)
  --listen HOST:PORT      address for nodeagents            (default 127.0.0.1:0)
  --socket PATH           client socket             (default DIR/coordinator.sock)
  --timeslice DUR         strobe quantum, e.g. 10ms, 500us; >= 100us  (default 10ms)
  --idle-strobe DUR       strobe period with no job (heartbeat)      (default 100ms)
  --mpl N                 multiprogramming level (gang matrix rows)      (default 2)
  --failure-timeout DUR   silence after which a node is down           (default 2s)
  --join-timeout DUR      wait for all nodeagents to join             (default 60s)
  --provider NAME         libfabric provider   (default $GOS_FABRIC_PROVIDER or tcp;ofi_rxm)
  --fanout K              fan-out of multicast/query trees               (default 4)
  --exit-when-idle        exit once a job ran and no job or client is left
  --keep N                checkpoint epochs kept per job                  (default 2)
  --ckpt-level L          zstd level of checkpoint chunks, 1..19          (default 1)
  --keep-logs N           replay logs kept, of the most recent jobs; 0 = all (default 1000)
  -h, --help              this text
)";

gos::coordinator::Coordinator* g_coordinator = nullptr;

void OnSignal(int) {
  if (g_coordinator) g_coordinator->Stop();
}

}  // namespace

int main(int argc, char** argv) {
  gos::os::Config cfg;
  if (int rc = gos::os::LoadConfigForMain("gos-coordinator", &cfg); rc >= 0) return rc;
  gos::coordinator::CoordinatorOptions o{.data_dir = cfg.state_dir,
                                         .listen = cfg.listen,
                                         .nodes = cfg.nodes,
                                         .timeslice = cfg.timeslice,
                                         .mpl = cfg.mpl,
                                         .failure_timeout = cfg.failure_timeout,
                                         .provider = cfg.provider,
                                         .keep = cfg.checkpoint.keep,
                                         .keep_logs = cfg.keep_logs};
  gos::os::Flags flags(argc, argv, kUsage);
  flags.String("--data-dir", &o.data_dir);
  flags.U32("--nodes", &o.nodes);
  flags.String("--listen", &o.listen);
  flags.String("--socket", &o.socket);
  flags.Duration("--timeslice", &o.timeslice, 1000);
  flags.Duration("--idle-strobe", &o.idle_strobe);
  flags.U32("--mpl", &o.mpl);
  flags.Duration("--failure-timeout", &o.failure_timeout);
  flags.Duration("--join-timeout", &o.join_timeout);
  flags.String("--provider", &o.provider);
  flags.U32("--fanout", &o.fanout);
  flags.Bool("--exit-when-idle", &o.exit_when_idle);
  uint32_t level = cfg.checkpoint.level;
  flags.U32("--keep", &o.keep);
  flags.U32("--ckpt-level", &level);
  flags.U32("--keep-logs", &o.keep_logs);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  o.ckpt_level = static_cast<int32_t>(level);
  if (o.keep == 0 || level < 1 || level > 19) {
    std::fprintf(stderr, "gos-coordinator: --keep must be >= 1 and --ckpt-level 1..19\n");
    return 2;
  }
  if (o.data_dir.empty() || o.nodes == 0) {
    std::fprintf(stderr,
                 "gos-coordinator: --data-dir (or state_dir in gos.conf) and --nodes (or nodes) "
                 "are required "
                 "(see --help)\n");
    return 2;
  }
  auto c = gos::coordinator::Coordinator::Create(o);
  if (!c.ok()) {
    std::fprintf(stderr, "gos-coordinator: %s\n", c.status().ToString().c_str());
    return 1;
  }
  g_coordinator = c->get();
  // The round trace (docs/specs/round-trace.md), if $GOS_ROUND_TRACE asks for it.
  gos::round_trace::Start({gos::round_trace::Role::kCoordinator, 0, -1, 0});
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  gos::Status s = (*c)->Run();
  g_coordinator = nullptr;
  if (!s.ok()) {
    std::fprintf(stderr, "gos-coordinator: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
