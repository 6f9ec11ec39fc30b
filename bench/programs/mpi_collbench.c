/* mpi_collbench: latency of MPI_Barrier and of MPI_Allreduce of one double (8 B, MPI_SUM) over
 * all ranks, ITERS times each (first argument, default 1000) after 10 warm-up calls. Prints
 * "barrier RANKS USEC" and "allreduce_8B RANKS USEC": microseconds per call, the slowest
 * rank's average. The Allreduce result is checked (exit 1 if wrong). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double Slowest(double local) {
  double worst = 0;
  MPI_Allreduce(&local, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long iters = argc > 1 ? atol(argv[1]) : 1000;
  if (iters < 1) iters = 1;

  for (int i = 0; i < 10; ++i) MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (long i = 0; i < iters; ++i) MPI_Barrier(MPI_COMM_WORLD);
  const double barrier = Slowest(MPI_Wtime() - t0) / (double)iters * 1e6;

  double in = rank + 1.0, out = 0;
  int bad = 0;
  for (int i = 0; i < 10; ++i) MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  for (long i = 0; i < iters; ++i) {
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    bad |= out != size * (size + 1) / 2.0;
  }
  const double allreduce = Slowest(MPI_Wtime() - t0) / (double)iters * 1e6;
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("barrier %d %.3f\n", size, barrier);
    printf("allreduce_8B %d %.3f\n", size, allreduce);
    if (any_bad) printf("allreduce result WRONG\n");
  }
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
