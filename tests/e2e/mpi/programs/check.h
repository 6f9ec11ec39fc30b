/* Shared by the MPI semantics programs (plain, portable MPI C; checked against Open MPI too).
 *
 * StartTest() initialises MPI; CHECK(cond, fmt, ...) records a failure and prints
 * "FAIL <name> rank R line L: <cond>: <detail>" (the first 20 per rank); FinishTest() agrees on
 * the outcome over MPI_COMM_WORLD, prints "OK <name>" (rank 0) when every rank passed, and
 * returns the exit code: 0, or 1 if any rank failed. */
#ifndef GOS_TESTS_MPI_PROGRAMS_CHECK_H_
#define GOS_TESTS_MPI_PROGRAMS_CHECK_H_

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* g_name = "?";
static int g_rank = -1, g_size = 0, g_failures = 0;

#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      if (++g_failures <= 20) {                                                   \
        printf("FAIL %s rank %d line %d: %s: ", g_name, g_rank, __LINE__, #cond); \
        printf(__VA_ARGS__);                                                      \
        printf("\n");                                                             \
        fflush(stdout);                                                           \
      }                                                                           \
    }                                                                             \
  } while (0)

/* An MPI call that must succeed (with MPI_ERRORS_RETURN installed; otherwise MPI aborts). */
#define CHECK_MPI(call)                                                  \
  do {                                                                   \
    int check_rc_ = (call);                                              \
    CHECK(check_rc_ == MPI_SUCCESS, "%s returned %d", #call, check_rc_); \
  } while (0)

static inline void StartTest(int* argc, char*** argv, const char* name) {
  g_name = name;
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}

static inline int FinishTest(void) {
  int total = 0;
  MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    if (total == 0) {
      printf("OK %s\n", g_name);
    } else {
      printf("FAILED %s: %d failed checks\n", g_name, total);
    }
    fflush(stdout);
  }
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}

/* A word of a reproducible pattern: distinct per (seed, index). */
static inline uint32_t Pattern(uint32_t seed, size_t i) {
  return (uint32_t)i * 2654435761u ^ (seed * 40503u + 0x9e3779b9u);
}

/* The rank this one exchanges with: rank^1, or itself when that does not exist. */
static inline int Partner(void) {
  int p = g_rank ^ 1;
  return p < g_size ? p : g_rank;
}

#endif /* GOS_TESTS_MPI_PROGRAMS_CHECK_H_ */
