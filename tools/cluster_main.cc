// gos-cluster: start, stop and inspect a persistent local cluster (coordinator plus K
// nodeagents on this machine), optionally with each nodeagent in its own network namespace.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "client.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "gos/prim/prim.h"
#include "gos/programs.h"
#include "netns.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-cluster up|down|status [options]
       gos-cluster rejoin NODE

  up       start a coordinator and K nodeagents on this machine, in the background; jobs
           run on it until `gos-cluster down` (gos-run, gos-ps and gos-kill find it through
           the state dir, $GOS_STATE_DIR or ~/.local/state/gos)
  down     stop it (root only): every job is killed
  status   its nodes and jobs (like gos-ps)
  rejoin   start node NODE's nodeagent again (root only), with the command `up` started it
           with, after it died: it joins the running cluster in place of the node that is
           down, and jobs can use the node again (jobs it ran were failed or restarted when
           it went down)

options for up:
  -N, --nodes K           nodeagents                                       (default 4)
      --timeslice DUR     strobe quantum                                (default 10ms)
      --mpl M             multiprogramming level                           (default 2)
      --failure-timeout DUR                                              (default 2s)
      --keep-logs N       replay logs kept, of the most recent jobs; 0 = all (default 1000)
      --provider NAME     libfabric provider between the nodes: tcp;ofi_rxm (default; shm
                          for a 1-node cluster; $GOS_FABRIC_PROVIDER overrides), shm (about
                          twice as fast per message, but a node killed with kill -9 can
                          leave the others stuck in libfabric for good), tcp
      --scratch-dir DIR   where each node writes its checkpoint dumps: DIR/<node name>
                          (default: the node's state dir; on another file system a restart
                          copies a node's dump instead of linking it)
      --netns             each nodeagent in a network namespace of its own, on a bridge
                          (198.19.K.0/24), like separate hosts: tcp;ofi_rxm between them;
                          `down` removes the namespaces (root only)
  -h, --help              this text
)";

// gos-cluster rejoin NODE: 0 once the node is up again; 1 if it cannot be (with the reason,
// the nodeagent's own when it gave up); 2 for a bad node id.
int Rejoin(const std::string& running, const std::string& state, const std::string& arg) {
  if (running.empty()) {
    std::fprintf(stderr, "gos-cluster: no cluster is running\n");
    return 1;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "gos-cluster: rejoin starts a nodeagent: root only\n");
    return 1;
  }
  std::vector<uint32_t> ids;
  std::string error;
  if (!ParseNodeList(arg, &ids, &error) || ids.size() != 1) {
    std::fprintf(stderr, "gos-cluster: rejoin: give one node id (%s)\n",
                 error.empty() ? arg.c_str() : error.c_str());
    return 2;
  }
  const uint32_t node = ids[0];
  using SteadyClock = std::chrono::steady_clock;
  auto ps = QueryPs(running, SteadyClock::now() + std::chrono::seconds(10));
  if (!ps.ok()) {
    std::fprintf(stderr, "gos-cluster: %s\n", ps.status().message().c_str());
    return 1;
  }
  auto find = [node](const os::PsReply& r) -> const os::PsNode* {
    for (const auto& n : r.nodes) {
      if (n.id == node) return &n;
    }
    return nullptr;
  };
  const os::PsNode* n = find(*ps);
  if (n == nullptr) {
    std::fprintf(stderr, "gos-cluster: the cluster has no node %u (it has %zu)\n", node,
                 ps->nodes.size());
    return 2;
  }
  if (n->up) {
    std::fprintf(stderr, "gos-cluster: node %u (%s) is up: nothing to rejoin\n", node,
                 n->host.c_str());
    return 1;
  }
  auto pid = StartNodeAgentAgain(state, node);
  if (!pid.ok()) {
    std::fprintf(stderr, "gos-cluster: %s\n", pid.status().message().c_str());
    return 1;
  }
  const std::string log = NodeAgentLog(state, node);
  auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  while (true) {
    int status;
    if (waitpid(*pid, &status, WNOHANG) == *pid) {
      const std::string why = DaemonFatal(log, "gos-nodeagent");
      std::fprintf(stderr, "gos-cluster: node %u's nodeagent exited: %s (log: %s)\n", node,
                   why.empty() ? "see its log" : why.c_str(), log.c_str());
      return 1;
    }
    auto r = QueryPs(running, SteadyClock::now() + std::chrono::seconds(5));
    if (r.ok()) {
      if (const os::PsNode* m = find(*r); m != nullptr && m->up) break;
    }
    if (SteadyClock::now() > deadline) {
      std::fprintf(stderr,
                   "gos-cluster: node %u did not come up within 30 s; its nodeagent (pid %d) "
                   "keeps trying (log: %s)\n",
                   node, *pid, log.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("gos-cluster: node %u is up again (nodeagent pid %d; log %s)\n", node, *pid,
              log.c_str());
  return 0;
}

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-cluster"); rc >= 0) return rc;
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
  if (flags.positional().empty() ||
      flags.positional().size() != (flags.positional()[0] == "rejoin" ? 2u : 1u)) {
    std::fprintf(stderr, "gos-cluster: say up, down, status or rejoin NODE (see --help)\n");
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
      const std::string why = DaemonFatal(state + "/log/coordinator.log", "gos-coordinator");
      std::fprintf(stderr, "gos-cluster: the cluster did not form: %s (logs in %s/log)\n",
                   why.empty() ? s.message().c_str() : why.c_str(), state.c_str());
      return 1;
    }
    (*c)->Detach();
    std::printf("gos-cluster: %u node%s up over %s; coordinator socket %s; logs in %s/log\n", nodes,
                nodes == 1 ? "" : "s", (*c)->provider().c_str(), (*c)->socket().c_str(),
                state.c_str());
    return 0;
  }
  if (verb == "down") {
    if (running.empty()) {
      std::fprintf(stderr, "gos-cluster: no cluster is running\n");
      return 1;
    }
    // Its daemons, to wait for: a namespace removed under a nodeagent that has not yet read
    // the coordinator's goodbye would leave that agent waiting on a dead link.
    const std::vector<pid_t> daemons = LocalClusterDaemons(state);
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
    for (pid_t p : WaitOrStopDaemons(daemons, std::chrono::seconds(10))) {
      std::fprintf(stderr, "gos-cluster: daemon pid %d did not exit within 10 s; stopped it\n", p);
    }
    RemoveNetnsHosts(state);
    RemoveClusterFiles(state);
    // What nodes killed with SIGKILL during the cluster's life left in /dev/shm.
    prim::SweepDeadShmRegions("/dev/shm");
    std::printf("gos-cluster: stopped\n");
    return 0;
  }
  if (verb == "status") {
    if (running.empty()) {
      std::printf("gos-cluster: no cluster is running (state dir %s)\n", state.c_str());
      return 3;
    }
    std::string ps = GosProgram("gos-ps", ProgramDir::kBin);
    execl(ps.c_str(), "gos-ps", nullptr);
    std::perror("gos-cluster: exec gos-ps");
    return 1;
  }
  if (verb == "rejoin") return Rejoin(running, state, flags.positional()[1]);
  std::fprintf(stderr, "gos-cluster: unknown command %s (up, down, status or rejoin)\n",
               verb.c_str());
  return 2;
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
