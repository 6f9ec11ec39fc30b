#include "gos/log.h"

#include <pthread.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace gos {
namespace {

LogLevel LevelFromEnv() {
  const char* v = std::getenv("GOS_LOG_LEVEL");
  if (v == nullptr) return LogLevel::kWarn;
  if (std::strcmp(v, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(v, "info") == 0) return LogLevel::kInfo;
  if (std::strcmp(v, "error") == 0) return LogLevel::kError;
  return LogLevel::kWarn;
}

std::atomic<int>& Level() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

}  // namespace

LogLevel CurrentLogLevel() {
  return static_cast<LogLevel>(Level().load(std::memory_order_relaxed));
}
void SetLogLevel(LogLevel level) { Level().store(static_cast<int>(level)); }

LogLine::LogLine(LogLevel level, std::string_view subsystem) : level_(level) {
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm t;
  localtime_r(&tv.tv_sec, &t);
  char ts[32];
  std::snprintf(ts, sizeof ts, "%02d:%02d:%02d.%06ld", t.tm_hour, t.tm_min, t.tm_sec,
                static_cast<long>(tv.tv_usec));
  out_ << "gos[" << subsystem << "] " << kLetters[static_cast<int>(level_)] << ' ' << ts << ' ';
}

LogLine::~LogLine() {
  out_ << '\n';
  std::string s = out_.str();
  ssize_t rc = ::write(STDERR_FILENO, s.data(), s.size());
  (void)rc;
}

void SetThreadName(const char* name) {
  char buf[16];
  std::strncpy(buf, name, sizeof buf - 1);
  buf[sizeof buf - 1] = '\0';
  pthread_setname_np(pthread_self(), buf);
}

}  // namespace gos
