// Dumping and restoring one rank with CRIU (the criu binary, run as a child).
//
// A rank's process tree is what LaunchRank made: gos-rank-init, PID 1 of its own PID
// namespace, in the job's freezer cgroup, with the rank as its child. Its fds 0/1/2 (and the
// rank's) are pipes to the nodeagent and init's fd 3 is the status pipe; the rank may also
// map its BCS channel file (/dev/shm/...) MAP_SHARED — that file's contents are not part of
// the dump (the caller saves and recreates it).
//
// DumpRank leaves the tree running (criu --leave-running); the freezer cgroup keeps the state
// the caller gave it (frozen stays frozen). It records in the image dir, in gos-fds, which
// pipe (inode) was init's stdin/stdout/stderr/status.
//
// RestoreRank recreates the tree from an image dir in a fresh PID namespace, as a child of the
// calling process (so the caller reaps it and gets init's status on the new status pipe,
// exactly as for LaunchRank), with new pipes in place of the dumped ones, and inside the given
// freezer cgroup before any restored task runs (so a FROZEN cgroup keeps the rank stopped
// until the caller thaws it). The files the tree had open or mapped (its executable, the
// channel file, ...) must exist at their dumped paths.
//
// Both run criu as a child of the calling thread and wait for that pid (deadline 60 s, then
// criu is killed and DEADLINE_EXCEEDED returned): the caller must not reap children it does
// not know (waitpid(-1, ...)) while they run. As with LaunchRank, the restored init's parent
// is the calling thread, and its PR_SET_PDEATHSIG(SIGKILL) fires when that thread exits:
// call RestoreRank from a thread that lives as long as the rank. If a restore fails after
// criu created the root task, criu kills it but cannot reap it (it is not criu's child): an
// unknown zombie child of the caller may be left for its waitpid(-1) reaper. Neither call
// keeps state; calls for different ranks may run concurrently.
#ifndef GOS_NODEAGENT_CRIU_H_
#define GOS_NODEAGENT_CRIU_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gos/fd.h"
#include "gos/status.h"
#include "launcher.h"

namespace gos::nodeagent {

// The criu binary: $GOS_CRIU; else gos's own CRIU of an installed nodeagent,
// <prefix>/libexec/gos/criu (gos/programs.h; never a system criu); else, from a build tree,
// the one scripts/setup builds, /usr/local/sbin/criu; else criu on PATH.
std::string CriuPath();

// Bytes in the regular files under dir (0 if it does not exist).
uint64_t DirBytes(const std::string& dir);

// The pages a dump of the tree rooted at init_pid would take (present or swapped, not the zero
// page, not a file's unwritten page) and how many of them were written since a dump with
// DumpRequest::track protected them (all of them in memory nothing tracks), summed over the
// tree's processes: PAGEMAP_SCAN's PAGE_IS_WRITTEN, as criu reads it.
struct WrittenPages {
  uint64_t dumped = 0;
  uint64_t written = 0;
};
StatusOr<WrittenPages> CountWrittenPages(pid_t init_pid);

// Whether `criu` (default: CriuPath()) can track written pages for incremental dumps
// (`criu check --feature gos_track_mem`, scripts/criu-patches/0006); if not, *why says why.
bool CriuCanTrack(const std::string& criu, std::string* why);

// A dumped process's userfaultfd, which keeps its written-page tracking alive between dumps
// (docs/specs/checkpoint.md, "Incremental dumps"). pid: as the host sees it.
struct TrackedProcess {
  int32_t pid = 0;
  Fd uffd;
};

struct DumpRequest {
  pid_t init_pid = -1;         // the rank's gos-rank-init (host pid): root of the dumped tree
  std::string images_dir;      // existing, empty directory; gos-fds, criu's dump.log and
                               // criu.out (its stdout/stderr) go here as well
  std::string freezer_cgroup;  // the job's freezer cgroup directory (FreezerCgroup::path())
  std::string criu;            // default: CriuPath()
  // Called with criu's pidfd once criu runs, and with -1 once it has ended (before that fd is
  // closed). Meanwhile the fd may be used to kill criu (pidfd_send_signal): a dump of a tree
  // that was killed can hang until the deadline, holding the tree's tasks traced.
  std::function<void(int pidfd)> on_running;
  // Incremental dumps (criu --track-mem with gos's tracking; CriuCanTrack must hold): the
  // dump tracks what every process of the tree writes from now on, and hands the tracking on
  // in DumpResult::tracking. `held` is what an earlier dump of this tree handed on (sent to
  // criu; the caller may close its copies afterwards). With `parent` (the images dir of that
  // dump, relative to images_dir) only the pages written since it are dumped, the rest marked
  // as in the parent.
  bool track = false;
  const std::vector<TrackedProcess>* held = nullptr;
  std::string parent;
};

struct DumpResult {
  int64_t ms = 0;                        // wall time of the dump
  uint64_t bytes = 0;                    // size of the image dir (all regular files in it)
  std::vector<TrackedProcess> tracking;  // DumpRequest::track: one per dumped process
};

// Errors carry the last lines of criu's log and name the pid. ABORTED: criu died in the middle
// (killed by a signal, or at the deadline): the tree may carry criu's parasite code and must
// not run again (it would die of SIGTRAP once thawed).
StatusOr<DumpResult> DumpRank(const DumpRequest& req);

struct RestoreRequest {
  std::string images_dir;    // as DumpRank left it (plus whatever the caller added); the
                             // restore adds restore.log, restore.pid and criu.out to it
  std::string cgroup_procs;  // freezer cgroup.procs the restored tree must be in. Required.
  std::string criu;          // default: CriuPath()
};

// Returns like LaunchRank: pid is the restored gos-rank-init (the caller's child), the fds the
// caller's ends of the new stdin/stdout/stderr/status pipes (same flags as LaunchRank's).
// Errors carry the last lines of criu's restore log.
StatusOr<RankProcess> RestoreRank(const RestoreRequest& req);

}  // namespace gos::nodeagent

#endif  // GOS_NODEAGENT_CRIU_H_
