// A rank for the CRIU zero-page test: private anonymous memory that is partly zero.
//
//   criu_zeros GO_FILE
//
// Maps 32 MiB: 8 MiB of a pseudo-random pattern, 16 MiB written with zeros (resident, all
// zero), 8 MiB never touched. Forks a child that shares it copy-on-write and, in its own copy,
// zeroes the first 2 MiB (pages the parent keeps non-zero) and sets one byte in the zero range.
// Both take a checksum of the 32 MiB, print "ready", and poll for GO_FILE every 10 ms; once it
// exists, each checks its memory against its checksum. The parent prints "parent ok" or
// "parent BAD", "child ok" or "child BAD" (the child's exit code), and exits 0 only if both
// are ok.
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kBytes = 32 * kMiB;

uint64_t Checksum(const unsigned char* p) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < kBytes; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, sizeof w);
    h = (h ^ w) * 1099511628211ull;
  }
  return h;
}

void Say(const std::string& s) {
  std::string line = s + "\n";
  if (write(STDOUT_FILENO, line.data(), line.size()) < 0) _exit(3);
}

bool WaitAndCheck(const char* go, const unsigned char* mem, uint64_t want) {
  while (access(go, F_OK) != 0) {
    timespec ts{0, 10'000'000};
    nanosleep(&ts, nullptr);
  }
  return Checksum(mem) == want;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: criu_zeros GO_FILE\n");
    return 2;
  }
  void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    return 2;
  }
  auto* mem = static_cast<unsigned char*>(m);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < 8 * kMiB; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(mem + i, &x, sizeof x);
  }
  memset(mem + 8 * kMiB, 0xff, 16 * kMiB);  // resident first, then zero
  memset(mem + 8 * kMiB, 0, 16 * kMiB);

  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 2;
  }
  if (child == 0) {
    memset(mem, 0, 2 * kMiB);
    mem[20 * kMiB + 123] = 7;
    const uint64_t want = Checksum(mem);
    Say("ready");
    return WaitAndCheck(argv[1], mem, want) ? 0 : 1;
  }
  const uint64_t want = Checksum(mem);
  Say("ready");
  const bool ok = WaitAndCheck(argv[1], mem, want);
  Say(ok ? "parent ok" : "parent BAD");
  int status = 0;
  const bool child_ok =
      waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  Say(child_ok ? "child ok" : "child BAD");
  return ok && child_ok ? 0 : 1;
}
