// Holding a crashing rank of a replay at its crash (docs/specs/replay.md, "A crash").
//
// A CrashWatch is one thread that traces ranks (PTRACE_SEIZE, every thread of each, and the
// threads they make later). Every signal goes through unchanged but a fatal one (SIGSEGV,
// SIGBUS, SIGFPE, SIGILL, SIGABRT) the rank does not handle: at its delivery stop the thread
// is still at the faulting instruction. The watch reads the signal's siginfo and the program
// counter and detaches injecting SIGSTOP in place of the signal, so the rank sits in a plain
// job-control stop with its registers at the fault, traced by nobody: gdb -p sees the
// faulting frame, and `continue` executes the faulting instruction again.
//
// The watching thread is the tracer: ptrace requests for a tracee are valid only from it, and
// only it waits for them (by tid, __WALL: never waitpid(-1), so the caller's children are not
// taken from it; nor does it take the caller's). It polls every 2 ms while it traces anything.
// A tracee's exit is seen by its real parent (gos-rank-init) only once the watch has waited
// for it, so at most those 2 ms later.
#ifndef GOS_NODEAGENT_CRASH_WATCH_H_
#define GOS_NODEAGENT_CRASH_WATCH_H_

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gos::nodeagent {

// A rank held at its crash.
struct Crash {
  uint64_t job = 0;
  uint32_t rank = 0;
  pid_t pid = 0;  // the rank (its thread group), in the caller's PID namespace
  pid_t tid = 0;  // the thread that got the signal
  int signo = 0;
  int code = 0;       // siginfo's si_code
  uint64_t addr = 0;  // siginfo's si_addr (SIGSEGV, SIGBUS: the address; SIGFPE, SIGILL: the
                      // instruction's); 0 for other signals
  uint64_t pc = 0;    // the program counter at the stop
  uint32_t uid = 0, gid = 0;  // the rank's user (Watch)
};

// "SIGSEGV (Segmentation fault, SEGV_MAPERR) at address 0x0, pc 0x401136".
std::string DescribeCrash(const Crash& c);

// The top `frames` frames of the stopped process pid, one "#N ..." line each, read by
// `gdb -nx -batch -p PID -ex "bt N"` run as uid/gid (auto-loading nothing), killed after
// `timeout`. The process stays stopped. Without gdb, or if it shows no frame, one line that
// says why. Call from a thread that may have children (the one gdb runs as is waited for by
// pid).
std::string TopFrames(pid_t pid, uint32_t uid, uint32_t gid, int frames,
                      std::chrono::seconds timeout);

class CrashWatch {
 public:
  // on_crash is called on the watching thread once a rank is held at its crash and every
  // thread of it is detached (it may take its time: the watch waits meanwhile).
  explicit CrashWatch(std::function<void(const Crash&)> on_crash);
  // Stops the thread; the kernel detaches whatever it still traces (a stopped rank stays
  // stopped, the others run on).
  ~CrashWatch();
  CrashWatch(const CrashWatch&) = delete;
  CrashWatch& operator=(const CrashWatch&) = delete;

  // Traces rank `rank` of `job`: the only child of init_pid (gos-rank-init), as soon as it has
  // one. uid/gid: the rank's user (Crash, TopFrames). Any thread.
  void Watch(uint64_t job, uint32_t rank, pid_t init_pid, uint32_t uid, uint32_t gid);
  // Lets go of the job's ranks, each at its next stop (the caller has sent them SIGSTOP, or
  // they are interrupted): a stopped rank stays stopped. Then calls `done` on the watching
  // thread (at once if none is traced; after 2 s whatever is left). Any thread; never waits.
  void Release(uint64_t job, std::function<void()> done);
  // The job is gone (killed): its ranks are watched no more (those traced exit). Any thread.
  void Forget(uint64_t job);

 private:
  struct Watched {
    uint64_t job = 0;
    uint32_t rank = 0;
    pid_t init = 0;
    uint32_t uid = 0, gid = 0;
    int failures = 0;  // seizes that failed (EPERM: CRIU still restoring it)
  };
  struct Tracee {
    uint64_t job = 0;
    uint32_t rank = 0;
    pid_t tgid = 0;
    uint32_t uid = 0, gid = 0;
    bool fresh = false;  // attached by a clone: its first stop is its start
  };
  struct Releasing {
    std::vector<std::function<void()>> done;
    std::chrono::steady_clock::time_point deadline;
  };

  void Loop();
  void TakeRequests(std::unique_lock<std::mutex>& lock);
  void SeizeNew();
  bool SeizeProcess(const Watched& w, pid_t pid);
  void OnStop(pid_t tid, int status);
  void Hold(pid_t tid, const Tracee& t, int sig);
  void Detach(pid_t tid, int sig);
  void Finish();

  std::function<void(const Crash&)> on_crash_;

  std::mutex mu_;  // guards the request queues and stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<Watched> watch_requests_;
  std::vector<std::pair<uint64_t, std::function<void()>>> release_requests_;
  std::vector<uint64_t> forget_requests_;

  // The watching thread's own state.
  std::vector<Watched> watched_;             // not seized yet
  std::map<pid_t, Tracee> tracees_;          // by tid
  std::map<pid_t, Crash> held_;              // by tgid: held, its other threads still traced
  std::map<uint64_t, Releasing> releasing_;  // by job

  std::thread thread_;
};

}  // namespace gos::nodeagent

#endif  // GOS_NODEAGENT_CRASH_WATCH_H_
