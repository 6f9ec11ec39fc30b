// A rank for the security test (security_test.cc): it holds secrets in memory and waits to be
// checkpointed, so the test can look for them in every file gos writes.
//
//   secret_rank     reads $GOS_TEST_SECRET (letters a-z) and one line of stdin; keeps the
//                   secret reversed, and the stdin line, in heap buffers (nowhere else: they
//                   are what a dump of its memory holds); prints "ready <the secret in rot13>"
//                   (its output: a third string only the output holds); then sleeps forever,
//                   touching the buffers now and then.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main() {
  const char* secret = std::getenv("GOS_TEST_SECRET");
  if (secret == nullptr || *secret == '\0') {
    std::fprintf(stderr, "secret_rank: GOS_TEST_SECRET is not set\n");
    return 2;
  }
  const size_t n = std::strlen(secret);
  // Heap buffers, on purpose: what a dump of the process's memory holds.
  auto* reversed = static_cast<volatile char*>(std::malloc(n + 1));
  std::string shown(secret);
  for (size_t i = 0; i < n; ++i) {
    reversed[i] = secret[n - 1 - i];
    const char c = secret[i];
    if (c >= 'a' && c <= 'z') shown[i] = static_cast<char>('a' + (c - 'a' + 13) % 26);
  }
  reversed[n] = '\0';
  char line[256] = {};
  if (std::fgets(line, sizeof line, stdin) == nullptr) line[0] = '\0';
  auto* input = static_cast<volatile char*>(std::malloc(sizeof line));
  for (size_t i = 0; i < sizeof line; ++i) input[i] = line[i];
  std::printf("ready %s\n", shown.c_str());
  std::fflush(stdout);
  for (unsigned long tick = 0;; ++tick) {
    timespec ts{0, 20'000'000};
    nanosleep(&ts, nullptr);
    // Keeps the buffers alive and their pages dirty between epochs.
    reversed[tick % n] = reversed[tick % n];
    input[0] = input[0];
  }
}
