// Test support: real child processes with captured output, killed and reaped on destruction
// so no test leaves a process behind.
#ifndef GOS_TESTS_SUPPORT_SUBPROCESS_H_
#define GOS_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::testing {

class Subprocess {
 public:
  // Starts argv[0] (searched in PATH) with extra "K=V" environment entries; stdout and
  // stderr go to one temporary file, read back by output().
  static StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env = {});
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // Waits until exit or the deadline; returns the wait status, or nullopt on timeout.
  std::optional<int> Wait(std::chrono::steady_clock::time_point deadline);
  void Signal(int sig);
  std::string output() const;
  // True if output() contains text.
  bool OutputContains(const std::string& text) const;

 private:
  Subprocess() = default;
  void KillAndReap();
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_path_;
};

// "exit 3", "signal 9 (Killed)".
std::string DescribeWaitStatus(int status);

// Directory of test helper binaries ($GOS_TEST_BIN_DIR, else next to this executable).
std::string TestBinDir();

}  // namespace gos::testing

#endif  // GOS_TESTS_SUPPORT_SUBPROCESS_H_
