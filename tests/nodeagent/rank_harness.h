// Test support for the launcher and freezer tests: paths of the binaries under test, the
// reason to skip (not root, no freezer), and Rank, a launched rank whose output is collected
// and which is killed and reaped on destruction so no test leaves a process behind.
#ifndef GOS_TESTS_NODEAGENT_RANK_HARNESS_H_
#define GOS_TESTS_NODEAGENT_RANK_HARNESS_H_

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nodeagent/freezer.h"
#include "nodeagent/launcher.h"
#include "tests/support/subprocess.h"

namespace gos::nodeagent::testing {

using Clock = std::chrono::steady_clock;

// Where gos-rank-init is: $GOS_BIN_DIR, else ../bin from the test executable.
inline std::string InitPath() {
  const char* d = std::getenv("GOS_BIN_DIR");
  std::string dir = (d != nullptr && *d != '\0') ? d : gos::testing::TestBinDir() + "/../bin";
  return dir + "/gos-rank-init";
}

inline std::string HelperPath() { return gos::testing::TestBinDir() + "/launcher_test_helper"; }

// Why these tests cannot run on this machine, or "" if they can.
inline std::string SkipReason() {
  if (::geteuid() != 0) return "needs root (PID namespaces, cgroups, setuid)";
  if (::access((std::string(kFreezerMount) + "/cgroup.procs").c_str(), W_OK) != 0) {
    return std::string("no writable cgroup v1 freezer hierarchy at ") + kFreezerMount;
  }
  if (::access(InitPath().c_str(), X_OK) != 0) return "gos-rank-init not built at " + InitPath();
  if (::access(HelperPath().c_str(), X_OK) != 0) {
    return "launcher_test_helper not built at " + HelperPath();
  }
  return "";
}

// A root for this test process's cgroups, so parallel test runs do not collide.
inline std::string TestCgroupRoot() {
  return std::string(kFreezerMount) + "/gos-test-" + std::to_string(::getpid());
}

// Polls cond until it holds or the deadline passes (short sleeps between tries).
template <typename Cond>
bool PollUntil(Cond cond, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto step = std::chrono::microseconds(100);
  while (true) {
    if (cond()) return true;
    if (Clock::now() >= deadline) return false;
    ::usleep(static_cast<useconds_t>(step.count()));
    step = std::min(step * 2, std::chrono::microseconds(10'000));
  }
}

// Thaws the freezer cgroup pid is in, if any, so a SIGKILL to it is acted on. Cleanup must
// not hang on a process a failed test left frozen.
inline void ThawFreezerOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find(":freezer:");
    if (at == std::string::npos) continue;
    std::string cg = line.substr(at + 9);
    if (cg == "/") return;
    std::ofstream(std::string(kFreezerMount) + cg + "/freezer.state") << "THAWED";
  }
}

// SIGKILLs and reaps a child of this process, even if it is frozen.
inline void KillAndReap(pid_t pid) {
  ThawFreezerOf(pid);
  ::kill(pid, SIGKILL);
  int st;
  ::waitpid(pid, &st, 0);
}

class Rank {
 public:
  static StatusOr<std::unique_ptr<Rank>> Launch(const RankSpec& spec) {
    GOS_ASSIGN_OR_RETURN(RankProcess p, LaunchRank(spec));
    return std::make_unique<Rank>(p);
  }
  // Takes over a launched rank.
  explicit Rank(const RankProcess& p) : p_(p) {}
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;
  ~Rank() {
    if (!init_status_) KillAndReap(p_.pid);
    for (int fd : {p_.stdin_fd, p_.stdout_fd, p_.stderr_fd, p_.status_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }

  const RankProcess& process() const { return p_; }
  pid_t pid() const { return p_.pid; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

  bool WriteStdin(const std::string& data) {
    return ::write(p_.stdin_fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  }
  void CloseStdin() {
    if (p_.stdin_fd >= 0) ::close(p_.stdin_fd);
    p_.stdin_fd = -1;
  }

  // Collects stdout and stderr until both reach EOF (true) or the timeout passes (false).
  bool ReadToEof(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return Pump([] { return false; }, timeout);
  }
  // Collects output until stdout contains text (true), or EOF / timeout (false).
  bool ReadUntilStdout(const std::string& text,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return Pump([&] { return out_.find(text) != std::string::npos; }, timeout) &&
           out_.find(text) != std::string::npos;
  }

  // Waits for init to exit and reaps it; its wait status, or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (init_status_) return init_status_;
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, p_.pid, 0));
    if (pidfd < 0) return std::nullopt;
    pollfd pfd{pidfd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
    ::close(pidfd);
    if (ready != 1) return std::nullopt;
    int st;
    if (::waitpid(p_.pid, &st, 0) != p_.pid) return std::nullopt;
    init_status_ = st;
    return init_status_;
  }
  // The rank's wait status (after Wait()).
  int RankStatus() {
    if (!rank_status_) rank_status_ = RankWaitStatus(p_.status_fd, init_status_.value_or(-1));
    return *rank_status_;
  }

 private:
  template <typename Done>
  bool Pump(Done done, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!done()) {
      std::vector<pollfd> fds;
      if (!out_eof_) fds.push_back({p_.stdout_fd, POLLIN, 0});
      if (!err_eof_) fds.push_back({p_.stderr_fd, POLLIN, 0});
      if (fds.empty()) return true;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0) return false;
      for (const auto& f : fds) {
        if (f.revents == 0) continue;
        bool is_out = f.fd == p_.stdout_fd;
        char buf[4096];
        ssize_t n = ::read(f.fd, buf, sizeof buf);
        if (n > 0) {
          (is_out ? out_ : err_).append(buf, static_cast<size_t>(n));
        } else if (n == 0) {
          (is_out ? out_eof_ : err_eof_) = true;
        }
      }
    }
    return true;
  }

  RankProcess p_;
  std::string out_, err_;
  bool out_eof_ = false, err_eof_ = false;
  std::optional<int> init_status_;
  std::optional<int> rank_status_;
};

}  // namespace gos::nodeagent::testing

#endif  // GOS_TESTS_NODEAGENT_RANK_HARNESS_H_
