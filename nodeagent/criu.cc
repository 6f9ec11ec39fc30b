// Dumping and restoring one rank with the criu binary.
//
// Dump: criu dump --tree INIT --leave-running --freeze-cgroup CG. The caller has normally
// frozen CG already; criu then only seizes the (frozen) tasks and, because it found the cgroup
// FROZEN, leaves it FROZEN when it is done (it thaws only a cgroup it froze itself). Before the
// dump we record which pipes init's fds 0-3 were (readlink of /proc/INIT/fd/N, e.g.
// "pipe:[4711]") in IMAGES/gos-fds: criu calls these pipes "external" (their other ends live in
// the nodeagent) and a restore must be told what to put in their place.
//
// Restore: criu restore --restore-detached --restore-sibling --leave-stopped
//          --manage-cgroups=ignore --inherit-fd fd[N]:pipe:[INODE] ...
//   --restore-sibling: criu clones the root task (gos-rank-init) with CLONE_PARENT, so the
//     restored init is a child of *our* process, not of criu; when criu exits, init keeps its
//     parent, so the PR_SET_PDEATHSIG(SIGKILL) LaunchRank gave it (criu restores it) fires only
//     if our process dies - the same contract as for a launched rank - and we reap it and read
//     its status pipe exactly as for LaunchRank. The root task is cloned with CLONE_NEWPID
//     (criu sees that the dumped root was a PID-namespace init), so restored PIDs never collide
//     with live ones, not even with the still-running original.
//   --inherit-fd: the dumped pipes are replaced by new ones whose child ends criu gets as fds
//     3..6; everything in the tree that had the old pipe (init and the rank share 0-2) gets
//     the new one.
//   --manage-cgroups=ignore + --leave-stopped: the dumped cgroup path belongs to the old job
//     (and maybe another node), so criu must not recreate it. Instead criu leaves every
//     restored task stopped (SIGSTOP); we move each task into RestoreRequest::cgroup_procs,
//     and only then SIGCONT them. In a FROZEN cgroup the continued tasks go straight into the
//     freezer, so no restored instruction runs before the caller thaws the cgroup.
// Incremental dumps (DumpRequest::track): criu dump --track-mem [--prev-images-dir P] with
// GOS_CRIU_TRACK_FD=3, fd 3 one end of a SOCK_SEQPACKET socket pair over which the userfaultfds
// of the tree's processes go to criu and come back (docs/specs/checkpoint.md, "Incremental
// dumps"; scripts/criu-patches/0006).
// criu runs as our child (posix_spawn) with its stdio in IMAGES/criu.out and a deadline, so a
// stuck criu is killed instead of hanging the nodeagent. Its log (-o) is IMAGES/dump.log or
// IMAGES/restore.log; errors carry its last lines.
#include "criu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "freezer.h"
#include "gos/fd.h"
#include "gos/files.h"
#include "gos/log.h"
#include "gos/programs.h"
#include "pagemap_scan.h"

extern char** environ;

namespace gos::nodeagent {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kFdsFile[] = "gos-fds";
constexpr char kInitCwdFile[] = "gos-init-cwd";
constexpr char kDumpLog[] = "dump.log";
constexpr char kRestoreLog[] = "restore.log";
constexpr char kCriuOutput[] = "criu.out";
constexpr char kRestorePidFile[] = "restore.pid";
// init's fds that are pipes to the nodeagent: stdin, stdout, stderr, status.
constexpr int kRankFds = 4;
// The criu child gets the new pipes' child ends at these fds (fd[N] in --inherit-fd).
constexpr int kFirstInheritFd = 3;
// A dump or restore of one small rank takes well under a second; this only bounds a criu
// that hangs (e.g. on a task stuck in D state).
constexpr auto kCriuDeadline = std::chrono::seconds(60);
constexpr int kLogTailLines = 10;

std::string JoinPath(const std::string& dir, const char* name) { return dir + "/" + name; }

// The last `lines` lines of a file, or a note that it could not be read.
std::string LogTail(const std::string& path, int lines = kLogTailLines) {
  std::ifstream in(path);
  if (!in) return "(no log at " + path + ")";
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(std::move(line));
    if (tail.size() > static_cast<size_t>(lines)) tail.pop_front();
  }
  std::string out = "last lines of " + path + ":";
  for (const auto& l : tail) out += "\n  " + l;
  return out;
}

std::string DescribeStatus(int st) {
  if (WIFEXITED(st)) return "exited with code " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
  return "wait status " + std::to_string(st);
}

// Runs criu with `args` (argv[0] = criu). Its stdin is /dev/null, its stdout and stderr go to
// output_path (appended), and pass[i] becomes its fd kFirstInheritFd + i; no other fd of ours
// is inherited. Returns criu's wait status; DEADLINE_EXCEEDED (criu killed) after the deadline.
// `running`, if set, is told criu's pidfd while criu runs (see DumpRequest::on_running).
// `env`, if not empty, is criu's whole environment.
StatusOr<int> RunCriu(const std::vector<std::string>& args, const std::string& output_path,
                      const std::vector<int>& pass,
                      const std::function<void(int)>& running = nullptr,
                      const std::vector<std::string>& env = {}) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // The sources go above every target fd first, so no dup2 of the spawn clobbers a later one.
  std::vector<Fd> high;
  for (int fd : pass) {
    int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 64);
    if (h < 0) return ErrnoError(errno, "dup of a pipe for criu");
    high.emplace_back(h);
  }

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&fa, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0600);
  ::posix_spawn_file_actions_adddup2(&fa, 1, 2);
  for (size_t i = 0; i < high.size(); ++i) {
    ::posix_spawn_file_actions_adddup2(&fa, high[i].get(), kFirstInheritFd + static_cast<int>(i));
  }
  ::posix_spawn_file_actions_addclosefrom_np(&fa, kFirstInheritFd + static_cast<int>(pass.size()));
  // criu must not inherit our signal mask or ignored signals (it relies on SIGCHLD).
  sigset_t none, all;
  ::sigemptyset(&none);
  ::sigfillset(&all);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &all);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc =
      ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), env.empty() ? environ : envp.data());
  ::posix_spawn_file_actions_destroy(&fa);
  ::posix_spawnattr_destroy(&attr);
  high.clear();
  if (rc != 0) return ErrnoError(rc, "spawn " + args[0]);

  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    if (running) running(pidfd);
    pollfd pfd{pidfd, POLLIN, 0};
    const auto deadline = Clock::now() + kCriuDeadline;
    int ready = 0;
    while (true) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) break;
      ready = ::poll(&pfd, 1, static_cast<int>(left));
      if (ready >= 0 || errno != EINTR) break;
    }
    if (running) running(-1);
    ::close(pidfd);
    if (ready == 0) {
      ::kill(pid, SIGKILL);
      int st;
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      return DeadlineExceededError("criu did not finish within " +
                                   std::to_string(kCriuDeadline.count()) + " s; killed it");
    }
  }
  int st = 0;
  while (true) {
    pid_t r = ::waitpid(pid, &st, 0);
    if (r == pid) break;
    if (r < 0 && errno == EINTR) continue;
    return ErrnoError(errno, "waitpid for criu");
  }
  return st;
}

// Root's alone, as every file of an images dir.
Status WriteFile(const std::string& path, const std::string& text) {
  return WriteFileWithMode(path, text, kPrivateFile);
}

// Every process of the tree rooted at root (root included), parents before children, from
// /proc/PID/task/TID/children.
std::vector<pid_t> ProcessTree(pid_t root) {
  std::vector<pid_t> out = {root};
  std::set<pid_t> seen = {root};
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string task_dir = "/proc/" + std::to_string(out[i]) + "/task";
    DIR* d = ::opendir(task_dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(task_dir + "/" + e->d_name + "/children");
      pid_t child;
      while (in >> child) {
        if (seen.insert(child).second) out.push_back(child);
      }
    }
    ::closedir(d);
  }
  return out;
}

Status WriteProcs(const std::string& procs_file, pid_t pid) {
  Fd fd(::open(procs_file.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, "open " + procs_file);
  std::string text = std::to_string(pid);
  ssize_t n = ::write(fd.get(), text.data(), text.size());
  if (n != static_cast<ssize_t>(text.size())) {
    return ErrnoError(n < 0 ? errno : EIO, "write pid " + text + " to " + procs_file);
  }
  return OkStatus();
}

// Incremental dumps: the socket criu hands the userfaultfds over (checkpoint.md, "Incremental
// dumps"): a message is an i32 pid with one fd attached.
Status SendTracked(int sock, const TrackedProcess& p) {
  char control[CMSG_SPACE(sizeof(int))] = {};
  int32_t pid = p.pid;
  iovec iov{&pid, sizeof pid};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int fd = p.uffd.get();
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (::sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof pid) {
    return ErrnoError(errno, "handing criu the userfaultfd of pid " + std::to_string(p.pid));
  }
  return OkStatus();
}

std::vector<TrackedProcess> ReceiveTracked(int sock) {
  std::vector<TrackedProcess> out;
  while (true) {
    char control[CMSG_SPACE(sizeof(int))] = {};
    int32_t pid = 0;
    iovec iov{&pid, sizeof pid};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n <= 0) break;
    int fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      }
    }
    if (fd < 0) continue;
    TrackedProcess p;
    p.pid = pid;
    p.uffd.Reset(fd);
    if (n == sizeof pid) out.push_back(std::move(p));
  }
  return out;
}

void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int st;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    std::error_code fec;
    if (e.is_regular_file(fec)) {
      uint64_t n = e.file_size(fec);
      if (!fec) total += n;
    }
  }
  return total;
}

StatusOr<WrittenPages> CountWrittenPages(pid_t init_pid) {
  WrittenPages out;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (pid_t pid : ProcessTree(init_pid)) {
    const std::string path = "/proc/" + std::to_string(pid) + "/pagemap";
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoError(errno, "open " + path);
    std::array<pagemap::Region, 512> regions;
    // Up to the end of the highest mapping (the scan refuses a range past the task's address
    // space; the vsyscall page is not in it).
    uint64_t start = 0, end = 0;
    {
      std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
      for (std::string line; std::getline(maps, line);) {
        const size_t dash = line.find('-');
        if (dash == std::string::npos) continue;
        const uint64_t e = std::strtoull(line.c_str() + dash + 1, nullptr, 16);
        if (e < (uint64_t{1} << 56)) end = std::max(end, e);
      }
    }
    while (start < end) {
      pagemap::ScanArg a{};
      a.size = sizeof a;
      a.start = start;
      a.end = end;
      a.vec = reinterpret_cast<uint64_t>(regions.data());
      a.vec_len = regions.size();
      a.category_inverted = pagemap::kPfnZero | pagemap::kFile;
      a.category_mask = pagemap::kPfnZero | pagemap::kFile;
      a.category_anyof_mask = pagemap::kPresent | pagemap::kSwapped;
      a.return_mask = pagemap::kWritten;
      const int n = ::ioctl(fd.get(), pagemap::kScan, &a);
      if (n < 0) return ErrnoError(errno, "PAGEMAP_SCAN of " + path);
      for (int i = 0; i < n; ++i) {
        const uint64_t pages = (regions[i].end - regions[i].start) / static_cast<uint64_t>(page);
        out.dumped += pages;
        if (regions[i].categories & pagemap::kWritten) out.written += pages;
      }
      if (a.walk_end <= start) break;
      start = a.walk_end;
    }
  }
  return out;
}

bool CriuCanTrack(const std::string& criu_path, std::string* why) {
  const std::string criu = criu_path.empty() ? CriuPath() : criu_path;
  auto st = RunCriu({criu, "check", "--feature", "gos_track_mem"}, "/dev/null", {});
  if (st.ok() && *st == 0) return true;
  if (why != nullptr) {
    *why = !st.ok() ? st.status().ToString()
                    : "`" + criu + " check --feature gos_track_mem` " + DescribeStatus(*st) +
                          " (a CRIU without gos's patch 0006, or a kernel without userfaultfd "
                          "write-protection and PAGEMAP_SCAN: Linux >= 6.7)";
  }
  return false;
}

std::string CriuPath() {
  const char* env = std::getenv("GOS_CRIU");
  if (env != nullptr && *env != '\0') return env;
  if (std::string dir = InstalledDir(ProgramDir::kLibexec); !dir.empty()) {
    std::string installed = dir + "/criu";
    if (::access(installed.c_str(), X_OK) == 0) return installed;
  }
  if (::access("/usr/local/sbin/criu", X_OK) == 0) return "/usr/local/sbin/criu";
  return "criu";
}

StatusOr<DumpResult> DumpRank(const DumpRequest& req) {
  if (req.init_pid <= 0) return InvalidArgumentError("DumpRank: no init pid");
  if (req.images_dir.empty()) return InvalidArgumentError("DumpRank: no images dir");
  if (req.freezer_cgroup.empty()) return InvalidArgumentError("DumpRank: no freezer cgroup");
  const auto start = Clock::now();
  const std::string pid = std::to_string(req.init_pid);
  const std::string what = "criu dump of rank init pid " + pid;

  // Which pipes init's stdio and status fds are; a restore needs their inodes. A missing fd
  // (closed) is simply not listed; a missing /proc entry is left for criu to report.
  std::string fds;
  for (int fd = 0; fd < kRankFds; ++fd) {
    std::array<char, 256> target;
    std::string link = "/proc/" + pid + "/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), target.data(), target.size() - 1);
    if (n <= 0) continue;
    fds += std::to_string(fd) + " " + std::string(target.data(), static_cast<size_t>(n)) + "\n";
  }

  // init's working directory, which the restore must recreate (see launcher.h).
  std::string init_cwd;
  {
    std::error_code ec;
    init_cwd = std::filesystem::read_symlink("/proc/" + pid + "/cwd", ec).string();
  }

  const std::string criu = req.criu.empty() ? CriuPath() : req.criu;
  const std::string log = JoinPath(req.images_dir, kDumpLog);
  std::vector<std::string> args = {
      criu, "dump",
      // The rank's init (PID 1 of its namespace) and everything below it.
      "--tree", pid, "--images-dir", req.images_dir, "--log-file", log,
      // The dump is a checkpoint: the rank goes on afterwards.
      "--leave-running",
      // Use the job's (normally already FROZEN) freezer cgroup instead of stopping tasks one
      // by one with ptrace; criu leaves a cgroup it found FROZEN frozen.
      "--freeze-cgroup", req.freezer_cgroup,
      // The job's cgroup is the nodeagent's business, recreated by it at restore.
      "--manage-cgroups=ignore"};
  // Incremental dumps: criu gets one end of a socket pair as fd 3 (GOS_CRIU_TRACK_FD), the
  // userfaultfds of the last dump on it, and hands on this dump's.
  Fd ours, theirs;
  std::vector<std::string> env;
  if (req.track) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return ErrnoError(errno, what + ": socketpair");
    }
    ours.Reset(sv[0]);
    theirs.Reset(sv[1]);
    if (req.held != nullptr) {
      for (const TrackedProcess& p : *req.held) {
        GOS_RETURN_IF_ERROR(SendTracked(ours.get(), p).WithContext(what));
      }
    }
    args.push_back("--track-mem");
    if (!req.parent.empty()) {
      args.push_back("--prev-images-dir");
      args.push_back(req.parent);
    }
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "GOS_CRIU_TRACK_FD=", 18) != 0) env.push_back(*e);
    }
    env.push_back("GOS_CRIU_TRACK_FD=" + std::to_string(kFirstInheritFd));
  }
  std::vector<int> pass;
  if (req.track) pass.push_back(theirs.get());
  auto st = RunCriu(args, JoinPath(req.images_dir, kCriuOutput), pass, req.on_running, env);
  theirs.Reset();
  // A criu that dies in the middle (killed, by the OOM killer or at the deadline) may leave its
  // parasite code in a task it was dumping: the tree must not run again.
  if (!st.ok() && st.status().code() == StatusCode::kDeadlineExceeded) {
    return AbortedError(what + ": " + st.status().message() +
                        "; the dumped tasks may still carry criu's parasite code");
  }
  if (!st.ok()) return st.status().WithContext(what);
  if (WIFSIGNALED(*st)) {
    return AbortedError(what + ": criu was " + DescribeStatus(*st) +
                        " in the middle of the dump; the dumped tasks may still carry its "
                        "parasite code");
  }
  if (*st != 0) {
    return InternalError(what + " failed (" + DescribeStatus(*st) + "); " + LogTail(log));
  }
  GOS_RETURN_IF_ERROR(WriteFile(JoinPath(req.images_dir, kFdsFile), fds));
  GOS_RETURN_IF_ERROR(WriteFile(JoinPath(req.images_dir, kInitCwdFile), init_cwd));

  DumpResult r;
  if (req.track) r.tracking = ReceiveTracked(ours.get());
  r.ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  r.bytes = DirBytes(req.images_dir);
  GOS_LOG(kDebug, "criu") << "dumped init pid " << pid << " to " << req.images_dir << " in " << r.ms
                          << " ms, " << r.bytes << " bytes";
  return r;
}

StatusOr<RankProcess> RestoreRank(const RestoreRequest& req) {
  if (req.images_dir.empty()) return InvalidArgumentError("RestoreRank: no images dir");
  if (req.cgroup_procs.empty()) return InvalidArgumentError("RestoreRank: no cgroup.procs");
  const std::string what = "criu restore from " + req.images_dir;

  // Which dumped pipe each of init's fds 0-3 was.
  std::array<std::string, kRankFds> dumped;
  {
    std::ifstream in(JoinPath(req.images_dir, kFdsFile));
    if (!in) {
      return NotFoundError(what + ": no " + kFdsFile + " (not a DumpRank image dir?)");
    }
    int fd;
    std::string target;
    while (in >> fd >> target) {
      if (fd >= 0 && fd < kRankFds) dumped[static_cast<size_t>(fd)] = target;
    }
  }

  // init's working directory (a per-rank directory, see launcher.h) must exist again.
  std::string init_dir;
  if (auto cwd = ReadWholeFile(JoinPath(req.images_dir, kInitCwdFile));
      cwd.ok() && !cwd->empty() && (*cwd)[0] == '/' && *cwd != "/") {
    // Root's, as LaunchRank's caller made it (NodeAgentImpl::InitDir): criu checks the mode.
    if (Status s = MakeDir(*cwd, kPrivateDir); !s.ok()) {
      return InternalError(what + ": cannot create " + *cwd + ": " + s.message());
    }
    init_dir = *cwd;
  }
  // A restore that fails leaves no directory behind.
  auto cleanup = [&] {
    if (!init_dir.empty()) ::rmdir(init_dir.c_str());
  };

  // New pipes, flags as LaunchRank's. ours[i] is the caller's end, theirs[i] the rank's.
  std::array<Fd, kRankFds> ours, theirs;
  for (int i = 0; i < kRankFds; ++i) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe for a restored rank");
    const bool is_stdin = i == 0;
    ours[i].Reset(is_stdin ? p[1] : p[0]);
    theirs[i].Reset(is_stdin ? p[0] : p[1]);
    if (!is_stdin) {
      int flags = ::fcntl(ours[i].get(), F_GETFL);
      if (flags < 0 || ::fcntl(ours[i].get(), F_SETFL, flags | O_NONBLOCK) != 0) {
        return ErrnoError(errno, "fcntl O_NONBLOCK");
      }
    }
  }

  const std::string criu = req.criu.empty() ? CriuPath() : req.criu;
  const std::string log = JoinPath(req.images_dir, kRestoreLog);
  const std::string pidfile = JoinPath(req.images_dir, kRestorePidFile);
  ::unlink(pidfile.c_str());
  std::vector<std::string> args = {
      criu, "restore", "--images-dir", req.images_dir, "--log-file", log,
      // criu exits once the tree is restored; the tree does not stay criu's child...
      "--restore-detached",
      // ...but becomes ours (see the file comment).
      "--restore-sibling",
      // Where criu says the restored root is (its pid as we see it).
      "--pidfile", pidfile,
      // The dumped cgroup is not ours to recreate; the tasks join req.cgroup_procs below,
      // while still stopped.
      "--manage-cgroups=ignore", "--leave-stopped"};
  std::vector<int> pass;
  for (int i = 0; i < kRankFds; ++i) {
    if (dumped[static_cast<size_t>(i)].empty()) continue;
    args.push_back("--inherit-fd");
    args.push_back("fd[" + std::to_string(kFirstInheritFd + static_cast<int>(pass.size())) +
                   "]:" + dumped[static_cast<size_t>(i)]);
    pass.push_back(theirs[i].get());
  }
  auto st = RunCriu(args, JoinPath(req.images_dir, kCriuOutput), pass);
  for (auto& fd : theirs) fd.Reset();
  if (!st.ok() || *st != 0) cleanup();
  if (!st.ok()) return st.status().WithContext(what);
  if (*st != 0) {
    return InternalError(what + " failed (" + DescribeStatus(*st) + "); " + LogTail(log));
  }

  pid_t root = -1;
  {
    std::ifstream in(pidfile);
    if (!(in >> root) || root <= 0) {
      cleanup();
      return InternalError(what + ": criu succeeded but wrote no pid to " + pidfile);
    }
  }
  // Stopped tasks: walk the tree, move it into the cgroup, then let it go (into the freezer,
  // if the cgroup is FROZEN). Processes the caller's namespace sees are the whole tree: it is
  // stopped, so it cannot fork while we walk it.
  const std::vector<pid_t> tree = ProcessTree(root);
  for (pid_t p : tree) {
    Status s = WriteProcs(req.cgroup_procs, p);
    if (!s.ok()) {
      KillAndReap(root);
      cleanup();
      return s.WithContext(what + ": restored init pid " + std::to_string(root));
    }
  }
  for (pid_t p : tree) ::kill(p, SIGCONT);

  RankProcess rp;
  rp.pid = root;
  rp.stdin_fd = ours[0].Release();
  rp.stdout_fd = ours[1].Release();
  rp.stderr_fd = ours[2].Release();
  rp.status_fd = ours[3].Release();
  rp.init_dir = init_dir;
  GOS_LOG(kDebug, "criu") << "restored " << req.images_dir << " as init pid " << root << " ("
                          << tree.size() << " processes) in " << req.cgroup_procs;
  return rp;
}

}  // namespace gos::nodeagent
