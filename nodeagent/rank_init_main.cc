// gos-rank-init: PID 1 of a rank's PID namespace (started by LaunchRank).
//
//   gos-rank-init [--user UID:GID] [--cwd DIR] [--env-fd FD] [--go-fd FD] -- PROGRAM ARGV0
//   [ARGS...]
//
// With --go-fd, first waits for one byte on FD (LaunchRank moved it into the job's cgroup);
// EOF instead (the move failed, LaunchRank wrote why to stderr) makes it exit 127.
// Forks the rank - which switches to UID:GID (supplementary groups: just GID), changes to
// DIR and execs PROGRAM with ARGV0 ARGS... and the environment read from FD (NUL-terminated
// "K=V" entries; without --env-fd, none) - while init itself keeps its user, working
// directory and (empty) environment: CRIU dumps the namespace through init with privileges
// the rank must not have (see launcher.h). A failed switch, chdir or exec is reported on
// stderr as "gos-rank-init: cannot ..." and the rank exits 127. Init forwards SIGINT,
// SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT and SIGWINCH to it, reaps every child
// (orphans re-parent to PID 1), and when the rank exits writes its raw wait status (int32) to
// fd 3 and exits with the rank's exit code, or 128+signal. The kernel then kills whatever is
// left in the namespace. A PID-namespace init ignores signals it has no handler for, so
// without this process Ctrl-C would silently not reach a rank; CRIU dumps the namespace
// through it.
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

constexpr int kStatusFd = 3;
constexpr int kForwarded[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                              SIGUSR1, SIGUSR2, SIGCONT, SIGWINCH};

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 127;
}

[[noreturn]] void Finish(int rank_status, bool report) {
  if (report) {
    int32_t s = rank_status;
    ssize_t n;
    do {
      n = write(kStatusFd, &s, sizeof s);
    } while (n < 0 && errno == EINTR);
  }
  _exit(ExitCodeOf(rank_status));
}

[[noreturn]] void RankFail(const char* what, const char* arg, int err) {
  dprintf(STDERR_FILENO, "gos-rank-init: cannot %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "",
          strerror(err));
  _exit(127);
}

// The rank's environment: NUL-terminated entries from fd (read from offset 0), then closed.
bool ReadEnvironment(int fd, std::string* block) {
  char buf[65536];
  off_t off = 0;
  while (true) {
    ssize_t n = pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    block->append(buf, static_cast<size_t>(n));
    off += n;
  }
  close(fd);
  return true;
}

int Usage() {
  fprintf(stderr,
          "usage: gos-rank-init [--user UID:GID] [--cwd DIR] [--env-fd FD] [--go-fd FD] -- PROGRAM "
          "ARGV0 "
          "[ARGS...]\n");
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const char* cwd = nullptr;
  int env_fd = -1;
  int go_fd = -1;
  int i = 1;
  for (; i + 1 < argc && strcmp(argv[i], "--") != 0; i += 2) {
    if (strcmp(argv[i], "--user") == 0) {
      unsigned long u, g;
      if (sscanf(argv[i + 1], "%lu:%lu", &u, &g) != 2) return Usage();
      switch_user = true;
      uid = static_cast<uid_t>(u);
      gid = static_cast<gid_t>(g);
    } else if (strcmp(argv[i], "--cwd") == 0) {
      cwd = argv[i + 1];
    } else if (strcmp(argv[i], "--env-fd") == 0) {
      env_fd = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--go-fd") == 0) {
      go_fd = atoi(argv[i + 1]);
    } else {
      return Usage();
    }
  }
  if (i + 1 >= argc || strcmp(argv[i], "--") != 0) return Usage();
  const char* program = argv[i + 1];
  char* default_argv[] = {argv[i + 1], nullptr};
  char** rank_argv = argc > i + 2 ? argv + i + 2 : default_argv;

  if (go_fd >= 0) {
    // Inside the job's cgroup from here on (frozen here if it is FROZEN, until its Thaw).
    char c = 0;
    ssize_t n;
    do {
      n = read(go_fd, &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(127);
    close(go_fd);
  }

  std::string env_block;
  if (env_fd >= 0 && !ReadEnvironment(env_fd, &env_block)) {
    fprintf(stderr, "gos-rank-init: cannot read the environment: %s\n", strerror(errno));
    return 127;
  }
  if (!env_block.empty() && env_block.back() != '\0') env_block.push_back('\0');
  std::vector<char*> rank_env;
  for (size_t at = 0; at < env_block.size(); at = env_block.find('\0', at) + 1) {
    rank_env.push_back(env_block.data() + at);
  }
  rank_env.push_back(nullptr);

  // fd 3 carries the status to the launcher; the rank must not inherit it.
  const bool report = fcntl(kStatusFd, F_SETFD, FD_CLOEXEC) == 0;

  // Receive the forwarded signals and SIGCHLD synchronously; everything else is unblocked
  // (LaunchRank hands over with all signals blocked, so none sent early was lost).
  sigset_t wait_set;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGCHLD);
  for (int sig : kForwarded) sigaddset(&wait_set, sig);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, nullptr);  // SIG_IGN here would make children reap themselves.
  if (sigprocmask(SIG_SETMASK, &wait_set, nullptr) != 0) {
    fprintf(stderr, "gos-rank-init: sigprocmask: %s\n", strerror(errno));
    return 127;
  }

  pid_t rank = fork();
  if (rank < 0) {
    fprintf(stderr, "gos-rank-init: fork: %s\n", strerror(errno));
    return 127;
  }
  if (rank == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (switch_user) {
      gid_t groups[1] = {gid};
      if (setgroups(1, groups) != 0) RankFail("setgroups", nullptr, errno);
      if (setresgid(gid, gid, gid) != 0) RankFail("setgid", nullptr, errno);
      if (setresuid(uid, uid, uid) != 0) RankFail("setuid", nullptr, errno);
    }
    if (cwd != nullptr && chdir(cwd) != 0) RankFail("chdir to", cwd, errno);
    execve(program, rank_argv, rank_env.data());
    RankFail("execute", program, errno);
  }

  while (true) {
    siginfo_t info;
    int sig = sigwaitinfo(&wait_set, &info);
    if (sig < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "gos-rank-init: sigwaitinfo: %s\n", strerror(errno));
      kill(rank, SIGKILL);
      return 127;
    }
    if (sig != SIGCHLD) {
      kill(rank, sig);
      continue;
    }
    // SIGCHLDs coalesce: reap everything that has exited.
    while (true) {
      int status;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) break;
      if (pid == rank) Finish(status, report);
    }
  }
}
