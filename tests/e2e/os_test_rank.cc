// A rank for the global-OS integration tests (os_test.cc). Every mode prints "ready" once it
// runs, so a test knows the rank has started.
//
//   os_test_rank spin SECONDS    burns SECONDS of CPU time (0 = forever), then exits 0
//   os_test_rank sleep MS        waits MS of wall-clock time (0 = forever), then exits 0
//   os_test_rank ignore-int      ignores SIGINT, waits forever
//   os_test_rank netns           prints "netns <inode of /proc/self/ns/net>", exits 0
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

double Now(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void Ready() {
  std::printf("ready\n");
  std::fflush(stdout);
}

int Spin(double seconds) {
  Ready();
  const double start = Now(CLOCK_PROCESS_CPUTIME_ID);
  volatile unsigned long sink = 0;
  while (seconds <= 0 || Now(CLOCK_PROCESS_CPUTIME_ID) - start < seconds) {
    for (int i = 0; i < 100000; ++i) sink = sink + static_cast<unsigned long>(i);
  }
  std::printf("spun %.2f s\n", seconds);
  return 0;
}

int Sleep(long ms) {
  Ready();
  const double end = Now(CLOCK_MONOTONIC) + static_cast<double>(ms) / 1e3;
  while (ms <= 0 || Now(CLOCK_MONOTONIC) < end) {
    timespec ts{0, 10'000'000};
    nanosleep(&ts, nullptr);
  }
  std::printf("slept %ld ms\n", ms);
  return 0;
}

int IgnoreInt() {
  signal(SIGINT, SIG_IGN);
  Ready();
  while (true) pause();
}

int Netns() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0) {
    std::perror("/proc/self/ns/net");
    return 1;
  }
  std::printf("netns %llu\n", static_cast<unsigned long long>(st.st_ino));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "spin" && argc == 3) return Spin(std::atof(argv[2]));
  if (mode == "sleep" && argc == 3) return Sleep(std::atol(argv[2]));
  if (mode == "ignore-int") return IgnoreInt();
  if (mode == "netns") return Netns();
  std::fprintf(stderr, "usage: os_test_rank spin SECONDS | sleep MS | ignore-int | netns\n");
  return 2;
}
