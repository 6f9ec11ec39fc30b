// Test support: real child processes with captured output, killed and reaped on destruction
// so no test leaves a process behind.
#ifndef GOS_TESTS_SUPPORT_SUBPROCESS_H_
#define GOS_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
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

// gos's binaries: $GOS_BIN_DIR, else ../bin next to the test binaries.
std::string GosBinDir();
std::string GosBin(const std::string& name);
// A built example program (build/examples/NAME).
std::string GosExample(const std::string& name);

// A whole file ("" if it cannot be read).
std::string ReadFile(const std::string& path);
// Polls pred every 20 ms until it holds (true) or the timeout passes (false).
bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// Live (non-zombie) processes other than this one whose command line or executable contains
// `needle`, with their command lines; and those, one per line, for a failure message.
std::map<pid_t, std::string> FindProcesses(const std::string& needle);
std::string DescribeProcesses(const std::map<pid_t, std::string>& procs);

// One finished command: exit code as a shell reports it (128+signal, -1 if it timed out),
// merged output.
struct RunResult {
  std::string command;
  int code = -1;
  std::string output;
  double seconds = 0;
  std::string Describe() const;
};
// Runs argv to completion (killed at the timeout) with extra environment entries.
RunResult Run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              std::chrono::seconds timeout);

}  // namespace gos::testing

#endif  // GOS_TESTS_SUPPORT_SUBPROCESS_H_
