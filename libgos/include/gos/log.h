// One named logger per subsystem (after Seastar): GOS_LOG(kInfo, "prim") << "joined";
// Lines go to stderr as "gos[prim] I 12:00:00.123456 node 3: text". The level comes from
// GOS_LOG_LEVEL (debug|info|warn|error; Default: warn). Thread-safe: one write(2) per line.
#ifndef GOS_LOG_H_
#define GOS_LOG_H_

#include <sstream>
#include <string_view>

namespace gos {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

LogLevel CurrentLogLevel();
void SetLogLevel(LogLevel level);

// Names the calling thread (at most 15 characters are kept), so that `top -H`, `ps -L`,
// perf and gdb tell a daemon's threads apart: "prim-progress", "agent-strobe", ...
void SetThreadName(const char* name);

class LogLine {
 public:
  LogLine(LogLevel level, std::string_view subsystem);
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  template <typename T>
  LogLine& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream out_;
};

}  // namespace gos

// GOS_LOG(kWarn, "prim") << ...; GOS_LOG_AT(level_expression, "prim") << ...
#define GOS_LOG(level, subsystem) GOS_LOG_AT(::gos::LogLevel::level, subsystem)
#define GOS_LOG_AT(level_expr, subsystem)                                               \
  for (::gos::LogLevel gos_log_level_ = (level_expr), *gos_log_once_ = &gos_log_level_; \
       gos_log_once_ != nullptr && gos_log_level_ >= ::gos::CurrentLogLevel();          \
       gos_log_once_ = nullptr)                                                         \
  ::gos::LogLine(gos_log_level_, subsystem)

#endif  // GOS_LOG_H_
