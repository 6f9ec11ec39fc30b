#include "crash_watch.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "gos/log.h"

namespace gos::nodeagent {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(2);
constexpr auto kReleaseTimeout = std::chrono::seconds(2);
// Seizes refused (EPERM: CRIU holds a rank it is restoring) before the watch gives up on it.
constexpr int kMaxSeizeFailures = 2500;

bool IsFatal(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT;
}

// True if the process has a handler for sig (its "SigCgt" mask in /proc/PID/status): then the
// signal is the program's business, and goes through.
bool Handles(pid_t pid, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const uint64_t mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (mask >> (sig - 1)) & 1;
  }
  return false;
}

const char* CodeName(int sig, int code) {
  switch (code) {
    case SI_USER:
      return "SI_USER";
    case SI_TKILL:
      return "SI_TKILL";
    case SI_QUEUE:
      return "SI_QUEUE";
    case SI_KERNEL:
      return "SI_KERNEL";
    default:
      break;
  }
  switch (sig) {
    case SIGSEGV:
      return code == SEGV_MAPERR   ? "SEGV_MAPERR"
             : code == SEGV_ACCERR ? "SEGV_ACCERR"
             : code == SEGV_BNDERR ? "SEGV_BNDERR"
             : code == SEGV_PKUERR ? "SEGV_PKUERR"
                                   : nullptr;
    case SIGBUS:
      return code == BUS_ADRALN   ? "BUS_ADRALN"
             : code == BUS_ADRERR ? "BUS_ADRERR"
             : code == BUS_OBJERR ? "BUS_OBJERR"
                                  : nullptr;
    case SIGFPE:
      return code == FPE_INTDIV   ? "FPE_INTDIV"
             : code == FPE_INTOVF ? "FPE_INTOVF"
             : code == FPE_FLTDIV ? "FPE_FLTDIV"
             : code == FPE_FLTOVF ? "FPE_FLTOVF"
             : code == FPE_FLTUND ? "FPE_FLTUND"
             : code == FPE_FLTRES ? "FPE_FLTRES"
             : code == FPE_FLTINV ? "FPE_FLTINV"
             : code == FPE_FLTSUB ? "FPE_FLTSUB"
                                  : nullptr;
    case SIGILL:
      return code == ILL_ILLOPC   ? "ILL_ILLOPC"
             : code == ILL_ILLOPN ? "ILL_ILLOPN"
             : code == ILL_ILLADR ? "ILL_ILLADR"
             : code == ILL_ILLTRP ? "ILL_ILLTRP"
             : code == ILL_PRVOPC ? "ILL_PRVOPC"
             : code == ILL_PRVREG ? "ILL_PRVREG"
             : code == ILL_COPROC ? "ILL_COPROC"
             : code == ILL_BADSTK ? "ILL_BADSTK"
                                  : nullptr;
    default:
      return nullptr;
  }
}

bool HasAddress(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL;
}

uint64_t ProgramCounter(pid_t tid) {
  user_regs_struct regs{};
  iovec iov{&regs, sizeof regs};
  if (::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_PRSTATUS), &iov) != 0) return 0;
#if defined(__x86_64__)
  return regs.rip;
#elif defined(__aarch64__)
  return regs.pc;
#else
  return 0;
#endif
}

// The first child of init (a rank's gos-rank-init has only the rank), 0 if none yet, -1 if
// init is gone.
pid_t ChildOf(pid_t init) {
  std::ifstream in("/proc/" + std::to_string(init) + "/task/" + std::to_string(init) + "/children");
  if (!in) return -1;
  long pid = 0;
  return in >> pid ? static_cast<pid_t>(pid) : 0;
}

std::vector<pid_t> Threads(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9') out.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  return out;
}

std::string FindInPath(const std::string& name) {
  const char* env = std::getenv("PATH");
  std::string path = std::string(env != nullptr ? env : "") + ":/usr/bin:/bin:/usr/local/bin";
  std::stringstream ss(path);
  for (std::string dir; std::getline(ss, dir, ':');) {
    if (dir.empty()) continue;
    std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

}  // namespace

std::string DescribeCrash(const Crash& c) {
  const char* abbrev = sigabbrev_np(c.signo);
  const char* descr = sigdescr_np(c.signo);
  const char* code = CodeName(c.signo, c.code);
  char buf[256];
  std::snprintf(buf, sizeof buf, "SIG%s (%s, %s)", abbrev != nullptr ? abbrev : "?",
                descr != nullptr ? descr : "?",
                code != nullptr ? code : ("si_code " + std::to_string(c.code)).c_str());
  std::string out = buf;
  if (HasAddress(c.signo)) {
    std::snprintf(buf, sizeof buf, " at address 0x%" PRIx64, c.addr);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, ", pc 0x%" PRIx64, c.pc);
  return out + buf;
}

std::string TopFrames(pid_t pid, uint32_t uid, uint32_t gid, int frames,
                      std::chrono::seconds timeout) {
  const std::string gdb = FindInPath("gdb");
  if (gdb.empty()) return "(no frames: gdb is not installed on this node)";
  // Everything the child needs is made before the fork: a multi-threaded parent's child may
  // only make async-signal-safe calls.
  const std::string pid_arg = std::to_string(pid), bt = "bt " + std::to_string(frames);
  std::vector<std::string> args = {
      gdb,  "-nx",   "-batch", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
      "-p", pid_arg, "-ex",    bt};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string env_path = "PATH=/usr/bin:/bin", env_home = "HOME=/", env_lc = "LC_ALL=C";
  char* envp[] = {env_path.data(), env_home.data(), env_lc.data(), nullptr};
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return std::string("(no frames: pipe: ") + strerror(errno) + ")";
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const bool switch_user = uid != ::geteuid() || gid != ::getegid();
  pid_t child = ::fork();
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &dfl, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::syscall(SYS_close_range, 3U, ~0U, 0U);
    if (switch_user) {
      gid_t groups[1] = {gid};
      if (::setgroups(1, groups) != 0 || ::setresgid(gid, gid, gid) != 0 ||
          ::setresuid(uid, uid, uid) != 0) {
        _exit(126);
      }
    }
    ::execve(argv[0], argv.data(), envp);
    _exit(127);
  }
  ::close(fds[1]);
  if (null_fd >= 0) ::close(null_fd);
  if (child < 0) {
    ::close(fds[0]);
    return std::string("(no frames: fork: ") + strerror(errno) + ")";
  }
  std::string out;
  const auto deadline = Clock::now() + timeout;
  bool timed_out = false;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < (1u << 20)) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::string lines, last;
  std::stringstream ss(out);
  for (std::string line; std::getline(ss, line);) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line.size() > 300) line = line.substr(0, 300) + "...";
      lines += (lines.empty() ? "" : "\n") + line;
    } else {
      last = line;
    }
  }
  if (!lines.empty()) return lines;
  if (timed_out)
    return "(no frames: gdb took longer than " + std::to_string(timeout.count()) + " s)";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 126) {
    return "(no frames: cannot run gdb as uid " + std::to_string(uid) + ")";
  }
  return "(no frames: gdb said: " + (last.empty() ? std::string("nothing") : last) + ")";
}

CrashWatch::CrashWatch(std::function<void(const Crash&)> on_crash)
    : on_crash_(std::move(on_crash)) {
  thread_ = std::thread([this] { Loop(); });
}

CrashWatch::~CrashWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CrashWatch::Watch(uint64_t job, uint32_t rank, pid_t init_pid, uint32_t uid, uint32_t gid) {
  if (init_pid <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    watch_requests_.push_back({job, rank, init_pid, uid, gid, 0});
  }
  cv_.notify_all();
}

void CrashWatch::Release(uint64_t job, std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    release_requests_.emplace_back(job, std::move(done));
  }
  cv_.notify_all();
}

void CrashWatch::Forget(uint64_t job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    forget_requests_.push_back(job);
  }
  cv_.notify_all();
}

void CrashWatch::Loop() {
  SetThreadName("agent-crashes");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    TakeRequests(lock);
    lock.unlock();
    SeizeNew();
    // A copy of the tids: OnStop adds and removes tracees.
    std::vector<pid_t> tids;
    for (const auto& [tid, t] : tracees_) tids.push_back(tid);
    for (pid_t tid : tids) {
      if (!tracees_.count(tid)) continue;
      int status = 0;
      pid_t r = ::waitpid(tid, &status, __WALL | WNOHANG);
      if (r == tid) {
        OnStop(tid, status);
      } else if (r < 0 && errno == ECHILD) {
        tracees_.erase(tid);  // traced no more (it exited and was reaped)
      }
    }
    Finish();
    lock.lock();
    const bool busy = !tracees_.empty() || !watched_.empty() || !releasing_.empty();
    auto pending = [&] {
      return stop_ || !watch_requests_.empty() || !release_requests_.empty() ||
             !forget_requests_.empty();
    };
    if (busy) {
      cv_.wait_for(lock, kPoll, pending);
    } else {
      cv_.wait(lock, pending);
    }
  }
}

void CrashWatch::TakeRequests(std::unique_lock<std::mutex>& lock) {
  auto watch = std::move(watch_requests_);
  auto release = std::move(release_requests_);
  auto forget = std::move(forget_requests_);
  watch_requests_.clear();
  release_requests_.clear();
  forget_requests_.clear();
  lock.unlock();
  for (Watched& w : watch) watched_.push_back(w);
  for (uint64_t job : forget) {
    std::erase_if(watched_, [&](const Watched& w) { return w.job == job; });
  }
  for (auto& [job, done] : release) {
    std::erase_if(watched_, [&](const Watched& w) { return w.job == job; });
    Releasing& r = releasing_[job];
    r.done.push_back(std::move(done));
    r.deadline = Clock::now() + kReleaseTimeout;
    // Each stops (if the caller's SIGSTOP has not stopped it yet) and is detached there.
    for (const auto& [tid, t] : tracees_) {
      if (t.job == job) ::ptrace(PTRACE_INTERRUPT, tid, 0, 0);
    }
  }
  lock.lock();
}

void CrashWatch::SeizeNew() {
  std::erase_if(watched_, [&](Watched& w) {
    const pid_t pid = ChildOf(w.init);
    if (pid < 0) return true;  // init is gone: so is the rank
    if (pid == 0) return false;
    if (SeizeProcess(w, pid)) return true;
    if (++w.failures < kMaxSeizeFailures) return false;
    GOS_LOG(kWarn, "crashes") << "job " << w.job << " rank " << w.rank << " (pid " << pid
                              << "): cannot trace it (" << strerror(errno)
                              << "): a crash of it will not be held";
    return true;
  });
}

bool CrashWatch::SeizeProcess(const Watched& w, pid_t pid) {
  std::set<pid_t> tried;
  bool any = false;
  // Threads may start while the others are seized: until a listing shows no new one.
  for (int round = 0; round < 100; ++round) {
    bool added = false;
    for (pid_t tid : Threads(pid)) {
      if (tried.count(tid) || tracees_.count(tid)) continue;
      tried.insert(tid);
      if (::ptrace(PTRACE_SEIZE, tid, 0, reinterpret_cast<void*>(PTRACE_O_TRACECLONE)) != 0) {
        if (errno == ESRCH) continue;  // the thread ended
        if (!any) return false;
        GOS_LOG(kWarn, "crashes") << "job " << w.job << " rank " << w.rank << ": cannot trace "
                                  << "thread " << tid << ": " << strerror(errno);
        continue;
      }
      tracees_[tid] = Tracee{w.job, w.rank, pid, w.uid, w.gid, false};
      any = added = true;
    }
    if (!added) break;
  }
  if (any) {
    GOS_LOG(kDebug, "crashes") << "job " << w.job << " rank " << w.rank << ": tracing pid " << pid;
  }
  return any;
}

void CrashWatch::OnStop(pid_t tid, int status) {
  auto it = tracees_.find(tid);
  if (it == tracees_.end()) return;
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    tracees_.erase(it);
    return;
  }
  if (!WIFSTOPPED(status)) return;
  Tracee& t = it->second;
  const int sig = WSTOPSIG(status);
  const int event = status >> 16;
  const bool letting_go = releasing_.count(t.job) || held_.count(t.tgid);
  if (event == PTRACE_EVENT_CLONE) {
    unsigned long child = 0;
    if (::ptrace(PTRACE_GETEVENTMSG, tid, 0, &child) == 0 && child > 0) {
      tracees_[static_cast<pid_t>(child)] = Tracee{t.job, t.rank, t.tgid, t.uid, t.gid, true};
    }
    if (letting_go) {
      Detach(tid, 0);
    } else {
      ::ptrace(PTRACE_CONT, tid, 0, 0);
    }
    return;
  }
  if (event == PTRACE_EVENT_STOP) {
    if (letting_go) {
      Detach(tid, 0);  // in a group stop it stays stopped
      return;
    }
    if (t.fresh) {  // a new thread's first stop
      t.fresh = false;
      ::ptrace(PTRACE_CONT, tid, 0, 0);
      return;
    }
    siginfo_t si;
    if (::ptrace(PTRACE_GETSIGINFO, tid, 0, &si) != 0 && errno == EINVAL) {
      ::ptrace(PTRACE_LISTEN, tid, 0, 0);  // a group stop: it stays stopped until SIGCONT
    } else {
      ::ptrace(PTRACE_CONT, tid, 0, 0);
    }
    return;
  }
  if (event != 0) {  // no other event is asked for
    ::ptrace(PTRACE_CONT, tid, 0, 0);
    return;
  }
  // A signal is about to be delivered.
  if (IsFatal(sig) && !Handles(t.tgid, sig)) {
    Hold(tid, t, sig);
    return;
  }
  if (letting_go) {
    Detach(tid, sig);
  } else {
    ::ptrace(PTRACE_CONT, tid, 0, reinterpret_cast<void*>(static_cast<long>(sig)));
  }
}

void CrashWatch::Hold(pid_t tid, const Tracee& t, int sig) {
  Crash c;
  c.job = t.job;
  c.rank = t.rank;
  c.pid = t.tgid;
  c.tid = tid;
  c.signo = sig;
  c.uid = t.uid;
  c.gid = t.gid;
  siginfo_t si{};
  if (::ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0) {
    c.code = si.si_code;
    if (HasAddress(sig)) c.addr = reinterpret_cast<uintptr_t>(si.si_addr);
  }
  c.pc = ProgramCounter(tid);
  const pid_t tgid = t.tgid;
  // SIGSTOP replaces the fatal signal: the rank stops with its registers at the fault.
  Detach(tid, SIGSTOP);
  held_[tgid] = c;
  // Its other threads join the stop; each is detached at its stop.
  for (const auto& [other, o] : tracees_) {
    if (o.tgid == tgid) ::ptrace(PTRACE_INTERRUPT, other, 0, 0);
  }
  GOS_LOG(kInfo, "crashes") << "job " << c.job << " rank " << c.rank << " (pid " << c.pid
                            << ") held at " << DescribeCrash(c);
}

void CrashWatch::Detach(pid_t tid, int sig) {
  if (::ptrace(PTRACE_DETACH, tid, 0, reinterpret_cast<void*>(static_cast<long>(sig))) != 0 &&
      errno != ESRCH) {
    GOS_LOG(kWarn, "crashes") << "detach " << tid << ": " << strerror(errno);
  }
  tracees_.erase(tid);
}

void CrashWatch::Finish() {
  for (auto it = held_.begin(); it != held_.end();) {
    const pid_t tgid = it->first;
    const bool traced = std::any_of(tracees_.begin(), tracees_.end(),
                                    [&](const auto& e) { return e.second.tgid == tgid; });
    if (traced) {
      ++it;
      continue;
    }
    Crash c = it->second;
    it = held_.erase(it);
    if (on_crash_) on_crash_(c);
  }
  const auto now = Clock::now();
  for (auto it = releasing_.begin(); it != releasing_.end();) {
    const uint64_t job = it->first;
    const bool traced = std::any_of(tracees_.begin(), tracees_.end(),
                                    [&](const auto& e) { return e.second.job == job; });
    if (traced && now < it->second.deadline) {
      ++it;
      continue;
    }
    if (traced) {
      GOS_LOG(kWarn, "crashes") << "job " << job << ": a rank did not stop in "
                                << kReleaseTimeout.count() << " s; still traced";
    }
    auto done = std::move(it->second.done);
    it = releasing_.erase(it);
    for (auto& d : done) d();
  }
}

}  // namespace gos::nodeagent
