#include "launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <vector>

#include "cpu_bind.h"
#include "gos/fd.h"
#include "gos/log.h"

namespace gos::nodeagent {
namespace {

// Everything the cloned child needs, prepared before the clone: between clone and execve
// the child may only make async-signal-safe calls (no allocation; another thread of the
// caller may have held the malloc lock at the moment of the clone).
struct ChildPlan {
  // The child's ends of the pipes: become fds 0, 1, 2, 3; go_fd becomes fd 4.
  int stdin_fd, stdout_fd, stderr_fd, status_fd;
  int go_fd;   // read end; -1 if there is no cgroup to join
  int env_fd;  // memfd holding the rank's environment; becomes fd 5
  const char* init_cwd;
  const char* init_path;
  char* const* init_argv;
  bool bind;  // set the affinity to `cpus` before exec
  cpu_set_t cpus;
};

// A fixed-size message buffer, so failures in the child can be reported in one write(2)
// without allocating.
class ChildMessage {
 public:
  ChildMessage& Add(const char* s) {
    while (*s != '\0' && len_ < buf_.size()) buf_[len_++] = *s++;
    return *this;
  }
  ChildMessage& AddErrno(int err) {
    const char* desc = strerrordesc_np(err);
    if (desc != nullptr) return Add(desc);
    char digits[16];
    size_t n = 0;
    unsigned v = static_cast<unsigned>(err);
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0 && n < sizeof digits);
    Add("errno ");
    while (n > 0 && len_ < buf_.size()) buf_[len_++] = digits[--n];
    return *this;
  }
  void WriteTo(int fd) {
    if (len_ == buf_.size()) buf_[len_ - 1] = '\n';
    ssize_t r = ::write(fd, buf_.data(), len_);
    (void)r;
  }

 private:
  std::array<char, 1024> buf_;
  size_t len_ = 0;
};

[[noreturn]] void ChildFail(const char* what, const char* arg, int err) {
  ChildMessage m;
  m.Add("gos-rank-launch: cannot ").Add(what);
  if (arg != nullptr) m.Add(" ").Add(arg);
  m.Add(": ").AddErrno(err).Add("\n");
  m.WriteTo(STDERR_FILENO);
  _exit(127);
}

// Runs in the cloned child: PID 1 of the new PID namespace, on a stack of its own in the
// caller's memory (CLONE_VM | CLONE_VFORK: the caller's thread waits until the execve). All
// signals are blocked (the parent blocked them around the clone) and stay blocked across
// execve, so a signal sent before init is ready stays pending for init to forward instead of
// being dropped (PID 1 ignores signals it has no handler for).
[[noreturn]] void RunChild(const ChildPlan& p) {
  // The caller's handlers must not run here, and ignored signals would stay ignored across
  // execve: reset every disposition.
  struct sigaction dfl;
  ::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }

  // Move the fds above 5 first, so none of them is clobbered by the dup2s below.
  int src[6] = {p.stdin_fd, p.stdout_fd, p.stderr_fd, p.status_fd, p.go_fd, p.env_fd};
  int tmp[6];
  for (int i = 0; i < 6; ++i) {
    tmp[i] = -1;
    if (src[i] < 0) continue;
    tmp[i] = ::fcntl(src[i], F_DUPFD_CLOEXEC, 6);
    if (tmp[i] < 0) ChildFail("dup", "pipe", errno);
  }
  for (int i = 0; i < 6; ++i) {
    if (tmp[i] >= 0 && ::dup2(tmp[i], i) < 0) ChildFail("dup2", "pipe", errno);
  }
  // Nothing of the caller's leaks into the rank: close every other fd (4 too, if unused).
  if (p.go_fd < 0) ::close(4);
  if (::syscall(SYS_close_range, 6U, ~0U, 0U) != 0) {
    for (unsigned fd = 6; fd < 65536; ++fd) ::close(static_cast<int>(fd));
  }

  // fd 4, when there is a cgroup to join, is for gos-rank-init (--go-fd 4): it waits there
  // until LaunchRank has moved it into the cgroup (this process shares the caller's memory
  // until its execve, and the caller waits for that: no waiting here).

  if (p.bind && ::sched_setaffinity(0, sizeof p.cpus, &p.cpus) != 0) {
    // A hint, not a condition: the rank runs unbound, and says so.
    ChildMessage m;
    m.Add("gos-rank-launch: cannot bind to its CPUs (running unbound): ").AddErrno(errno).Add("\n");
    m.WriteTo(STDERR_FILENO);
  }
  if (::setsid() < 0) ChildFail("setsid", nullptr, errno);
  // init keeps the caller's identity (the user switch is init's child's, the rank's) and an
  // empty environment: the rank's comes through fd 5, so nothing of the user's (LD_PRELOAD,
  // ...) reaches a process that runs with the caller's privileges.
  if (::chdir(p.init_cwd) != 0) ChildFail("chdir to", p.init_cwd, errno);
  // If the nodeagent dies (kill -9, crash), its ranks die with it: no orphan outlives the
  // node's agent.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  char* const no_env[] = {nullptr};
  ::execve(p.init_path, p.init_argv, no_env);
  ChildFail("execute", p.init_path, errno);
}

int ChildMain(void* plan) { RunChild(*static_cast<const ChildPlan*>(plan)); }

constexpr size_t kChildStackBytes = 64u << 10;

struct Pipe {
  Fd read, write;
};

Status MakePipe(Pipe* p, const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError(errno, std::string("pipe for ") + what);
  p->read.Reset(fds[0]);
  p->write.Reset(fds[1]);
  return OkStatus();
}

Status SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoError(errno, "fcntl O_NONBLOCK");
  }
  return OkStatus();
}

Status WriteProcs(const std::string& procs_file, pid_t pid) {
  int fd = ::open(procs_file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open " + procs_file);
  std::string text = std::to_string(pid);
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return ErrnoError(n < 0 ? err : EIO, "write pid " + text + " to " + procs_file);
  }
  return OkStatus();
}

}  // namespace

StatusOr<RankProcess> LaunchRank(const RankSpec& spec) {
  if (spec.program.empty() || spec.program[0] != '/') {
    return InvalidArgumentError("rank program '" + spec.program + "' is not an absolute path");
  }
  if (spec.init_path.empty()) return InvalidArgumentError("no gos-rank-init path given");
  if (!spec.cwd.empty() && spec.cwd[0] != '/') {
    return InvalidArgumentError("rank cwd '" + spec.cwd + "' is not an absolute path");
  }

  if (!spec.init_dir.empty() && spec.init_dir[0] != '/') {
    return InvalidArgumentError("init dir '" + spec.init_dir + "' is not an absolute path");
  }

  // argv of init: gos-rank-init [--user UID:GID] --cwd DIR --env-fd 5 -- PROGRAM ARGV0 ARGS...
  const std::string user = std::to_string(spec.uid) + ":" + std::to_string(spec.gid);
  const std::string cwd = spec.cwd.empty() ? "/" : spec.cwd;
  std::vector<std::string> args = {"gos-rank-init"};
  if (spec.uid != ::geteuid() || spec.gid != ::getegid()) {
    args.insert(args.end(), {"--user", user});
  }
  args.insert(args.end(), {"--cwd", cwd, "--env-fd", "5"});
  if (!spec.cgroup_procs.empty()) args.insert(args.end(), {"--go-fd", "4"});
  args.insert(args.end(), {"--", spec.program});
  if (spec.argv.empty()) {
    args.push_back(spec.program);
  } else {
    args.insert(args.end(), spec.argv.begin(), spec.argv.end());
  }
  std::vector<char*> init_argv;
  for (auto& a : args) init_argv.push_back(a.data());
  init_argv.push_back(nullptr);

  // The rank's environment, NUL-terminated entries, for init to read from fd 5.
  Fd env(::memfd_create("gos-rank-env", MFD_CLOEXEC));
  if (env.get() < 0) return ErrnoError(errno, "memfd_create for the rank's environment");
  {
    std::string block;
    for (const auto& e : spec.env) block.append(e).push_back('\0');
    size_t done = 0;
    while (done < block.size()) {
      ssize_t n = ::write(env.get(), block.data() + done, block.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return ErrnoError(errno, "write the rank's environment");
      done += static_cast<size_t>(n);
    }
  }

  Pipe in, out, err, status, go;
  GOS_RETURN_IF_ERROR(MakePipe(&in, "stdin"));
  GOS_RETURN_IF_ERROR(MakePipe(&out, "stdout"));
  GOS_RETURN_IF_ERROR(MakePipe(&err, "stderr"));
  GOS_RETURN_IF_ERROR(MakePipe(&status, "status"));
  const bool join_cgroup = !spec.cgroup_procs.empty();
  if (join_cgroup) GOS_RETURN_IF_ERROR(MakePipe(&go, "cgroup sync"));
  GOS_RETURN_IF_ERROR(SetNonBlocking(out.read.get()));
  GOS_RETURN_IF_ERROR(SetNonBlocking(err.read.get()));
  GOS_RETURN_IF_ERROR(SetNonBlocking(status.read.get()));

  ChildPlan plan;
  plan.stdin_fd = in.read.get();
  plan.stdout_fd = out.write.get();
  plan.stderr_fd = err.write.get();
  plan.status_fd = status.write.get();
  plan.go_fd = join_cgroup ? go.read.get() : -1;
  plan.env_fd = env.get();
  plan.init_cwd = spec.init_dir.empty() ? "/" : spec.init_dir.c_str();
  plan.init_path = spec.init_path.c_str();
  plan.init_argv = init_argv.data();
  plan.bind = !spec.cpus.empty();
  plan.cpus = CpuSetOf(spec.cpus);

  // Block every signal around the clone: the child must not run the caller's handlers
  // before it has reset them, and keeps them blocked until init has set up forwarding.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  // fork semantics (child continues on a copy of this stack), child is PID 1 of a new
  // PID namespace. No CLONE_NEWNS: CRIU must be able to dump the tree.
  // The child shares this memory until its execve (CLONE_VM) and this thread waits for that
  // (CLONE_VFORK), as posix_spawn does: a fork's copy of the nodeagent's page tables (the
  // fabric's buffers, ~70 MiB on a 4-node local cluster) and the child's teardown of it at
  // execve cost ~10 ms of CPU a rank, most of a 1000-rank launch (docs/benchmarks.md).
  std::vector<char> child_stack(kChildStackBytes);
  auto* stack_top = reinterpret_cast<void*>(
      (reinterpret_cast<uintptr_t>(child_stack.data()) + child_stack.size()) & ~uintptr_t{63});
  int pid = ::clone(ChildMain, stack_top, CLONE_VM | CLONE_VFORK | CLONE_NEWPID | SIGCHLD, &plan);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return ErrnoError(clone_errno, "clone(CLONE_NEWPID)");

  if (join_cgroup) {
    // The caller moves the child (gos-rank-init by now, waiting on --go-fd) rather than the
    // child joining itself, so that LaunchRank returns with the child inside, and never waits
    // on it: the cgroup may be FROZEN, and a child that joined a frozen cgroup would freeze
    // before it could say so. A Freeze() right after LaunchRank returns covers the new rank.
    // go.read stays open here until the byte is written: a child that already died must
    // not turn the write into a SIGPIPE for the caller.
    Status joined = WriteProcs(spec.cgroup_procs, static_cast<pid_t>(pid));
    if (joined.ok()) {
      ssize_t n = ::write(go.write.get(), "g", 1);
      if (n != 1) joined = ErrnoError(errno, "write to cgroup sync pipe");
    }
    go.read.Reset();
    if (!joined.ok()) {
      // The child sees EOF and exits 127; its stderr says why, as for any start failure.
      std::string msg = "gos-rank-launch: cannot join cgroup: " + joined.message() + "\n";
      ssize_t n = ::write(err.write.get(), msg.data(), msg.size());
      (void)n;
      GOS_LOG(kWarn, "launcher") << "rank " << spec.program << ": " << joined.ToString();
    }
    go.write.Reset();
  }
  in.read.Reset();
  out.write.Reset();
  err.write.Reset();
  status.write.Reset();

  RankProcess rp;
  rp.pid = static_cast<pid_t>(pid);
  rp.init_dir = spec.init_dir;
  rp.stdin_fd = in.write.Release();
  rp.stdout_fd = out.read.Release();
  rp.stderr_fd = err.read.Release();
  rp.status_fd = status.read.Release();
  GOS_LOG(kDebug, "launcher") << "launched " << spec.program << " under init pid " << rp.pid
                              << (join_cgroup ? " in " + spec.cgroup_procs : std::string());
  return rp;
}

int RankWaitStatus(int status_fd, int init_wait_status) {
  int32_t rank_status = 0;
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&rank_status);
  while (got < sizeof rank_status) {
    ssize_t n = ::read(status_fd, bytes + got, sizeof rank_status - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF or EAGAIN: init never reported.
    got += static_cast<size_t>(n);
  }
  return got == sizeof rank_status ? rank_status : init_wait_status;
}

}  // namespace gos::nodeagent
