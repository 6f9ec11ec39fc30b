/* pi: pi = integral of 4 / (1 + x^2) over [0, 1] by the midpoint rule with N intervals
 * (argument, default 10^7), intervals dealt round-robin to the ranks. Rank 0 broadcasts N,
 * the partial sums are reduced to rank 0, which prints pi, its error against M_PI and the
 * time taken. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long long n = 10000000;
  if (rank == 0 && argc > 1) n = strtoll(argv[1], NULL, 10);
  if (n < 1) n = 1;

  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  const double h = 1.0 / (double)n;
  double sum = 0.0;
  for (long long i = rank; i < n; i += size) {
    const double x = h * ((double)i + 0.5);
    sum += 4.0 / (1.0 + x * x);
  }
  double part = h * sum, pi = 0.0;
  MPI_Reduce(&part, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  const double elapsed = MPI_Wtime() - start;

  if (rank == 0) {
    printf("pi: %d ranks, %lld intervals: pi = %.16f, error = %.3e, time = %.6f s\n", size, n, pi,
           fabs(pi - M_PI), elapsed);
  }
  MPI_Finalize();
  return 0;
}
