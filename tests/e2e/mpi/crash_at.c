/* crash_at KIND N: every rank does Allreduces; rank 2 (of 4 or more) dies in its Nth, of the
 * signal KIND names: segv (writes through NULL), bus (touches an mmap of a file beyond its end),
 * fpe (integer division by zero), ill (__builtin_trap), abrt (a failed assert). Each crash is
 * in a function of its own, on the line marked "crash here: KIND", which the replay test finds
 * in gdb's backtrace of the held rank. */
#define _GNU_SOURCE
#undef NDEBUG /* the assert must fire in every build type */
#include <assert.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

__attribute__((noinline)) static void crash_segv(void) {
  volatile int* volatile nowhere = NULL;
  *nowhere = 1; /* crash here: segv */
}

__attribute__((noinline)) static void crash_bus(void) {
  int fd = memfd_create("crash_at", 0);
  if (fd < 0 || ftruncate(fd, 4096) != 0) abort();
  volatile char* page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (page == MAP_FAILED || ftruncate(fd, 0) != 0) abort();
  page[0] = 1; /* crash here: bus */
}

__attribute__((noinline)) static int crash_fpe(int n) {
  volatile int zero = 0;
  return n / zero; /* crash here: fpe */
}

__attribute__((noinline)) static void crash_ill(void) { __builtin_trap(); /* crash here: ill */ }

__attribute__((noinline)) static void crash_abrt(int rank) {
  assert(rank != 2); /* crash here: abrt */
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* kind = argc > 1 ? argv[1] : "segv";
  const int n = argc > 2 ? atoi(argv[2]) : 5;
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  long sum = 0;
  for (int i = 1; i <= n + 5; ++i) {
    long mine = rank * 1000 + i, all = 0;
    if (rank == 2 && i == n) {
      printf("rank 2 crashes (%s) in Allreduce %d\n", kind, i);
      fflush(stdout);
      if (strcmp(kind, "segv") == 0) crash_segv();
      if (strcmp(kind, "bus") == 0) crash_bus();
      if (strcmp(kind, "fpe") == 0) sum += crash_fpe(i);
      if (strcmp(kind, "ill") == 0) crash_ill();
      if (strcmp(kind, "abrt") == 0) crash_abrt(rank);
    }
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    sum += all;
  }
  printf("rank %d: sum %ld\n", rank, sum);
  MPI_Finalize();
  return 0;
}
