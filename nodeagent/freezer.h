// A cgroup v1 freezer cgroup: one per job per node; holds the inits and ranks of the job so
// the nodeagent can stop (FROZEN) and resume (THAWED) them together at strobe boundaries, and
// CRIU can dump them with --freeze-cgroup.
//
// Thread-safety: a FreezerCgroup is not synchronised; use one from one thread at a time.
#ifndef GOS_NODEAGENT_FREEZER_H_
#define GOS_NODEAGENT_FREEZER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gos/status.h"

namespace gos::nodeagent {

// The cgroup v1 freezer hierarchy on this machine.
inline constexpr char kFreezerMount[] = "/sys/fs/cgroup/freezer";

class FreezerCgroup {
 public:
  // Creates (mkdir -p) root/name, e.g. root="/sys/fs/cgroup/freezer/gos", name="n3/j17", and
  // takes ownership of it (an existing directory is adopted). Missing intermediate
  // directories are created and left in place by Destroy(). Errors: FAILED_PRECONDITION if
  // root is not inside a mounted cgroup v1 hierarchy with the freezer controller;
  // PERMISSION_DENIED if it is not writable; INVALID_ARGUMENT for an empty or escaping name.
  static StatusOr<std::unique_ptr<FreezerCgroup>> Create(const std::string& root,
                                                         const std::string& name);

  FreezerCgroup(const FreezerCgroup&) = delete;
  FreezerCgroup& operator=(const FreezerCgroup&) = delete;
  // Best-effort Destroy(); a failure is logged.
  ~FreezerCgroup();

  // The cgroup directory, e.g. "/sys/fs/cgroup/freezer/gos/n3/j17".
  const std::string& path() const { return path_; }
  // path()/cgroup.procs: a process joins by writing "0" (itself) or its pid here.
  std::string procs_file() const { return path_ + "/cgroup.procs"; }

  // Moves process pid (all its threads) into this cgroup.
  Status AddProcess(pid_t pid);

  // Writes FROZEN to freezer.state. If wait, polls until the state reads FROZEN, starting
  // with ~50 us steps; DEADLINE_EXCEEDED after 2 s (the cgroup is left FREEZING).
  Status Freeze(bool wait = true);
  // Writes THAWED and polls until the state reads THAWED (deadline 2 s).
  Status Thaw();
  // "THAWED", "FREEZING" or "FROZEN".
  StatusOr<std::string> State() const;
  // The processes (thread-group ids, as seen in the caller's PID namespace) in the cgroup,
  // sorted; empty if it cannot be read.
  std::vector<pid_t> Pids() const;

  // SIGKILLs every process in the cgroup (thawing first, so the kill is delivered), waits
  // until it is empty, then removes the directory. DEADLINE_EXCEEDED if processes survive
  // for 5 s. Idempotent: a second call, or a call after the directory vanished, is OK.
  Status Destroy();

 private:
  explicit FreezerCgroup(std::string path) : path_(std::move(path)) {}
  Status SetState(const char* state, bool wait);

  std::string path_;
  bool destroyed_ = false;
};

// The whole contents of a (small) file: cgroup control files, checkpoint metadata.
StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace gos::nodeagent

#endif  // GOS_NODEAGENT_FREEZER_H_
