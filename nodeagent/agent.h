// The gos nodeagent: one per node. Joins the coordinator (HELLO over an authenticated TCP
// channel, then the primitives' group), executes strobes — freezes and thaws local ranks so
// that only the scheduled gang row runs, launches, signals and forgets jobs — stores staged
// files, streams rank output back, and reports local termination with XFER-AND-SIGNAL into
// the coordinator's exit table.
#ifndef GOS_NODEAGENT_AGENT_H_
#define GOS_NODEAGENT_AGENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "gos/os/auth.h"
#include "gos/status.h"

namespace gos::nodeagent {

struct AgentOptions {
  // Coordinator's nodeagent address "host:port", or a coordinator data dir whose
  // coordinator.addr names it. Required.
  std::string coordinator;
  // Cluster key file (mode 0600). Default: <data dir>/cluster.key when `coordinator` is a dir.
  std::string key_file;
  // Node name, unique in the cluster. Default: the host name.
  std::string name;
  // Job dirs live in <state_dir>/jobs/<id>. Default: /var/lib/gos/nodeagent/<name>.
  std::string state_dir;
  // Freezer cgroups: <cgroup_root>/<name>.<pid>/j<job>. Default: /sys/fs/cgroup/freezer/gos.
  std::string cgroup_root = "/sys/fs/cgroup/freezer/gos";
  // Checkpoint dumps (<scratch_dir>/ckpt), e.g. on a tmpfs; restore images always go to
  // <state_dir>/restore. Default: state_dir. When a dump would not fit, the node's kept dumps go
  // first (other jobs', then the job's own) if that makes room, else it spills to
  // <state_dir>/ckpt-spill (not kept).
  std::string scratch_dir;
  // Working directories of the ranks' gos-rank-init (one each, for CRIU's dumps; see
  // launcher.h): <init_root>/<cluster tag>/j<job>-r<rank>, removed with the rank (a nodeagent
  // killed with its ranks leaves its empty directories behind). Default: /run/gos/init.
  std::string init_root = os::kDefaultInitRoot;
  // gos-rank-init. Default: GosProgram("gos-rank-init", kLibexec) (gos/programs.h): the
  // install's libexec/gos, else next to this executable.
  std::string init_path;
  // Cores to report. Default: 0 = online CPUs.
  uint32_t cores = 0;
  // Node id to ask for. Default: 0 = any.
  uint32_t requested_node = 0;
  // Exit when the coordinator goes away (embedded cluster); otherwise reconnect. Default: false.
  bool exit_with_coordinator = false;
  // How long to keep trying to reach the coordinator. Default: 30 s.
  std::chrono::milliseconds connect_timeout{30000};
};

class NodeAgent {
 public:
  static StatusOr<std::unique_ptr<NodeAgent>> Create(const AgentOptions& options);
  virtual ~NodeAgent() = default;
  // Serves until Stop() or the coordinator goes away (with exit_with_coordinator).
  virtual Status Run() = 0;
  // Async-signal-safe.
  virtual void Stop() = 0;
};

}  // namespace gos::nodeagent

#endif  // GOS_NODEAGENT_AGENT_H_
