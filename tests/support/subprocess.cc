#include "tests/support/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

std::string GosBinDir() {
  const char* d = std::getenv("GOS_BIN_DIR");
  return d != nullptr && *d != '\0' ? d : TestBinDir() + "/../bin";
}
std::string GosBin(const std::string& name) { return GosBinDir() + "/" + name; }
std::string GosExample(const std::string& name) { return GosBinDir() + "/../examples/" + name; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::map<pid_t, std::string> FindProcesses(const std::string& needle) {
  std::map<pid_t, std::string> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == getpid()) continue;
    const std::string dir = "/proc/" + std::to_string(pid);
    std::string cmd = ReadFile(dir + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    std::error_code ec;
    std::string exe = std::filesystem::read_symlink(dir + "/exe", ec).string();
    std::string stat = ReadFile(dir + "/stat");
    size_t paren = stat.rfind(')');
    bool zombie = paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
    if (!zombie && (cmd + " " + exe).find(needle) != std::string::npos) out[pid] = cmd;
  }
  ::closedir(d);
  return out;
}

std::string DescribeProcesses(const std::map<pid_t, std::string>& procs) {
  std::string s;
  for (const auto& [pid, what] : procs) s += "  " + std::to_string(pid) + ": " + what + "\n";
  return s;
}

std::string RunResult::Describe() const {
  char t[32];
  std::snprintf(t, sizeof t, "%.2f s", seconds);
  return "`" + command + "`: exit " + std::to_string(code) + " after " + t + "\n--- output:\n" +
         output + "---\n";
}

RunResult Run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              std::chrono::seconds timeout) {
  RunResult r;
  for (const auto& a : argv) r.command += (r.command.empty() ? "" : " ") + a;
  auto start = std::chrono::steady_clock::now();
  auto p = Subprocess::Start(argv, env);
  if (!p.ok()) {
    r.output = "did not start: " + p.status().ToString();
    return r;
  }
  std::optional<int> status = p->Wait(start + timeout);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.output = p->output();
  if (!status) {
    r.output += "\n[timed out after " + std::to_string(timeout.count()) + " s]\n";
    return r;  // the Subprocess kills and reaps it
  }
  r.code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
  return r;
}

}  // namespace gos::testing
