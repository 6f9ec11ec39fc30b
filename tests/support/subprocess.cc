#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace gos::testing {

StatusOr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env) {
  if (argv.empty()) return InvalidArgumentError("empty argv");
  Subprocess p;
  char tmpl[] = "/tmp/gos-test-output-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return ErrnoError(errno, "mkstemp");
  p.log_path_ = tmpl;
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  for (const auto& e : env) envs.push_back(e);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoError(errno, "fork");
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    // Die with the test, so a crashed test leaves nothing behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execvpe(cargv[0], cargv.data(), cenv.data());
    dprintf(fd, "exec %s: %s\n", cargv[0], strerror(errno));
    _exit(127);
  }
  close(fd);
  p.pid_ = pid;
  return p;
}

Subprocess::Subprocess(Subprocess&& o) noexcept
    : pid_(o.pid_), status_(o.status_), log_path_(std::move(o.log_path_)) {
  o.pid_ = -1;
  o.log_path_.clear();
}

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    KillAndReap();
    pid_ = o.pid_;
    status_ = o.status_;
    log_path_ = std::move(o.log_path_);
    o.pid_ = -1;
    o.log_path_.clear();
  }
  return *this;
}

Subprocess::~Subprocess() { KillAndReap(); }

void Subprocess::KillAndReap() {
  if (pid_ > 0 && !status_) {
    kill(pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
  }
  pid_ = -1;
  if (!log_path_.empty()) unlink(log_path_.c_str());
  log_path_.clear();
}

std::optional<int> Subprocess::Wait(std::chrono::steady_clock::time_point deadline) {
  if (status_) return status_;
  auto delay = std::chrono::milliseconds(1);
  while (true) {
    int st;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(20));
  }
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0 && !status_) kill(pid_, sig);
}

std::string Subprocess::output() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Subprocess::OutputContains(const std::string& text) const {
  return output().find(text) != std::string::npos;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

std::string TestBinDir() {
  const char* d = std::getenv("GOS_TEST_BIN_DIR");
  if (d != nullptr && *d != '\0') return d;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string exe(buf, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

}  // namespace gos::testing
