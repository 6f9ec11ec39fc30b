// gos-rank-init: PID 1 of a rank's PID namespace (started by LaunchRank).
//
//   gos-rank-init -- PROGRAM ARGV0 [ARGS...]
//
// Forks the rank (execve(PROGRAM, ARGV0 ARGS..., inherited environment)), forwards SIGINT,
// SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT and SIGWINCH to it, reaps every child
// (orphans re-parent to PID 1), and when the rank exits writes its raw wait status (int32) to
// fd 3 and exits with the rank's exit code, or 128+signal. The kernel then kills whatever is
// left in the namespace. A PID-namespace init ignores signals it has no handler for, so
// without this process Ctrl-C would silently not reach a rank; CRIU dumps the namespace
// through it.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

extern char** environ;

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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || strcmp(argv[1], "--") != 0) {
    fprintf(stderr, "usage: gos-rank-init -- PROGRAM ARGV0 [ARGS...]\n");
    return 127;
  }
  const char* program = argv[2];
  char* default_argv[] = {argv[2], nullptr};
  char** rank_argv = argc > 3 ? argv + 3 : default_argv;

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
    execve(program, rank_argv, environ);
    int err = errno;
    dprintf(STDERR_FILENO, "gos-rank-init: cannot execute %s: %s\n", program, strerror(err));
    _exit(127);
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
