/* dirty: a memory-heavy rank for checkpoint tests and benchmarks. Allocates MIB MiB (first
 * argument, default 64) filled with half-compressible data, then for SECONDS seconds (second
 * argument, default 10) prints a heartbeat every second. Each SIGUSR1 (gos-kill -s USR1 JOB)
 * rewrites the next PERCENT percent (third argument, default 5) of the heap, contiguously,
 * and prints "dirty: pass K done". SIGTERM ends the run early. At the end it prints a checksum
 * of the heap and exits 0.
 * The checksum depends only on the number of passes, so a restored run can be compared with
 * an uninterrupted one. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t g_requests = 0;
static volatile sig_atomic_t g_stop = 0;

static void OnUsr1(int sig) {
  (void)sig;
  g_requests++;
}

static void OnTerm(int sig) {
  (void)sig;
  g_stop = 1;
}

/* xorshift64*: 8 bytes per step; the upper half of each 16-byte block is zero, so zstd
 * compresses the heap about 2:1 and content-defined cuts still see varied data. */
static void Fill(uint64_t* p, size_t words, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < words; i += 2) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p[i] = x * 0x2545F4914F6CDD1Dull;
    if (i + 1 < words) p[i + 1] = 0;
  }
}

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  const double seconds = argc > 2 ? atof(argv[2]) : 10;
  const double percent = argc > 3 ? atof(argv[3]) : 5;
  const size_t words = mib * (1u << 20) / 8;
  uint64_t* heap = malloc(words * 8);
  if (heap == NULL) {
    fprintf(stderr, "dirty: cannot allocate %zu MiB\n", mib);
    return 1;
  }
  Fill(heap, words, 1);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnUsr1;
  sigaction(SIGUSR1, &sa, NULL);
  sa.sa_handler = OnTerm;
  sigaction(SIGTERM, &sa, NULL);
  const size_t span = (size_t)(words * percent / 100.0) & ~(size_t)1;
  printf("dirty: %zu MiB ready\n", mib);
  fflush(stdout);
  int passes = 0, beat = 0;
  const double start = Now();
  double next_beat = start + 1;
  while (!g_stop && Now() - start < seconds) {
    while (passes < g_requests) {
      size_t first = (passes * span) % (words - span + 1);
      Fill(heap + first, span, 1000 + (uint64_t)passes);
      passes++;
      printf("dirty: pass %d done\n", passes);
      fflush(stdout);
    }
    if (Now() >= next_beat) {
      printf("dirty: second %d\n", ++beat);
      fflush(stdout);
      next_beat += 1;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < words; ++i) sum = sum * 31 + heap[i];
  printf("dirty: passes=%d checksum=%016llx\n", passes, (unsigned long long)sum);
  free(heap);
  return 0;
}
