// Launching one rank: a child of the nodeagent that is PID 1 of a fresh PID namespace
// (gos-rank-init), optionally inside a freezer cgroup, which starts the rank as its only
// direct child, forwards signals to it, reaps orphans and reports the rank's wait status.
//
//   nodeagent --clone(CLONE_NEWPID | CLONE_VM | CLONE_VFORK)--> gos-rank-init (pid 1 inside)
//             --fork/exec--> rank (pid 2)
//
// When gos-rank-init exits, the kernel kills whatever is left in the namespace, so a rank
// leaves no process behind. No private mount namespace is made, so CRIU can dump the tree.
//
// gos-rank-init keeps the caller's user (root, for a nodeagent) and gets an empty
// environment; only the rank, its child, switches to RankSpec's user, cwd and environment.
// CRIU needs that: to dump a tree whose root is a PID-namespace init, its parasite mounts a
// /proc of that namespace from inside the root task, in the task's working directory -
// which needs privilege, and a directory no concurrent dump uses (RankSpec::init_dir).
#ifndef GOS_NODEAGENT_LAUNCHER_H_
#define GOS_NODEAGENT_LAUNCHER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::nodeagent {

struct RankSpec {
  // Absolute path of the program to exec. Required.
  std::string program;
  // argv, argv[0] included. Default: empty = {program}.
  std::vector<std::string> argv;
  // The complete environment of the rank, "K=V" entries (nothing is inherited from the
  // caller). Default: empty.
  std::vector<std::string> env;
  // Working directory. If chdir fails, the rank fails: a message on its stderr and exit 127.
  // Default: empty = "/".
  std::string cwd;
  // Run the rank as this user: setgroups({gid}), setgid(gid), setuid(uid) unless both already
  // equal the caller's effective ids (gos-rank-init stays the caller's). Default: 0 / 0.
  uid_t uid = 0;
  gid_t gid = 0;
  // Working directory of gos-rank-init: a directory of the caller's that no other rank uses
  // (CRIU dumps mount a /proc in it for a moment). The caller creates and later removes it.
  // Default: empty = "/" (then dumps of two such ranks must not overlap).
  std::string init_dir;
  // cgroup.procs file (FreezerCgroup::procs_file()). LaunchRank moves init into it, and init
  // waits for that (--go-fd) before it does anything, so init, the rank and everything it
  // spawns live in that cgroup, and it is already in when LaunchRank returns. The cgroup may be
  // FROZEN: the rank then starts at Thaw. Default: "" = none.
  std::string cgroup_procs;
  // CPUs the rank (init, the rank and all they start) is bound to before init execs
  // (cpu_bind.h). Default: empty = not bound (the caller's affinity).
  std::vector<int> cpus;
  // Path of the gos-rank-init binary. Required.
  std::string init_path;
};

struct RankProcess {
  // gos-rank-init's pid, as seen by the caller; the caller's child, to be reaped by it.
  pid_t pid = -1;
  // The rank's stdin, write end (blocking, O_CLOEXEC). Close it to send EOF.
  int stdin_fd = -1;
  // The rank's stdout / stderr, read ends (O_NONBLOCK, O_CLOEXEC).
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Read end (O_NONBLOCK, O_CLOEXEC): init writes the rank's raw wait status (4 bytes,
  // native-endian int32) here just before it exits. Feed it to RankWaitStatus.
  int status_fd = -1;
  // gos-rank-init's working directory (RankSpec::init_dir; for a restored rank, the dumped
  // one, recreated): the caller removes it when the rank is gone. Empty: "/".
  std::string init_dir;
};

// Starts a rank. The caller owns and must close all four fds of the result, and must reap
// result.pid (waitpid) - e.g. from its SIGCHLD handling. Safe to call from any thread of a
// multi-threaded process: the child shares the caller's memory (not a copy of it: a fork of
// a big process costs ~10 ms) and runs only async-signal-safe code until it execs init; the
// calling thread waits for that execve. Never waits for the child to make progress after it
// (so it cannot hang on a FROZEN cgroup).
//
// Returns an error only if the rank could not be started at all (bad spec, pipe or clone
// failure). Failures after the clone (cgroup join, user switch, chdir, exec of init or of the
// program) are reported the way a shell reports them: a line on the rank's stderr and exit
// status 127.
StatusOr<RankProcess> LaunchRank(const RankSpec& spec);

// Decodes the final outcome once RankProcess::pid has been reaped with wait status
// init_wait_status: if init reported the rank's wait status on status_fd, that is returned;
// otherwise init itself died or failed before starting the rank (e.g. it was SIGKILLed, or
// setup failed with 127) and init_wait_status is returned. Use WIFEXITED etc. on the result.
// Does not close status_fd.
int RankWaitStatus(int status_fd, int init_wait_status);

}  // namespace gos::nodeagent

#endif  // GOS_NODEAGENT_LAUNCHER_H_
