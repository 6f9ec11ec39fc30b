// CPU-bound worker for bench/gos-gang-bench: does a fixed amount of integer work (no system
// calls, no memory traffic) and prints when it started and ended on CLOCK_MONOTONIC (one clock
// for the whole machine, so runs of several processes can be laid side by side), its wall time
// and its CPU time.
//
//   bench-spin ITERATIONS     -> "iterations=N start_ms=S end_ms=E wall_ms=W cpu_ms=C"
//   bench-spin --calibrate MS -> the ITERATIONS that take about MS ms of CPU here
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double NowMs(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

// An xorshift chain: every step depends on the previous one, so the compiler cannot
// vectorise or skip it, and the time is proportional to the iterations.
static uint64_t Work(uint64_t iterations) {
  uint64_t x = 88172645463325252ull;
  for (uint64_t i = 0; i < iterations; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--calibrate") == 0) {
    double target = atof(argv[2]);
    uint64_t n = 1u << 20;
    for (;;) {
      double t0 = NowMs(CLOCK_PROCESS_CPUTIME_ID);
      volatile uint64_t sink = Work(n);
      (void)sink;
      double dt = NowMs(CLOCK_PROCESS_CPUTIME_ID) - t0;
      if (dt > 50.0) {
        printf("%llu\n", (unsigned long long)((double)n * target / dt));
        return 0;
      }
      n *= 2;
    }
  }
  if (argc != 2) {
    fprintf(stderr, "usage: bench-spin ITERATIONS | bench-spin --calibrate MS\n");
    return 2;
  }
  uint64_t n = strtoull(argv[1], NULL, 10);
  double w0 = NowMs(CLOCK_MONOTONIC), c0 = NowMs(CLOCK_PROCESS_CPUTIME_ID);
  volatile uint64_t sink = Work(n);
  (void)sink;
  double w1 = NowMs(CLOCK_MONOTONIC), c1 = NowMs(CLOCK_PROCESS_CPUTIME_ID);
  printf("iterations=%llu start_ms=%.3f end_ms=%.3f wall_ms=%.3f cpu_ms=%.3f\n",
         (unsigned long long)n, w0, w1, w1 - w0, c1 - c0);
  return 0;
}
