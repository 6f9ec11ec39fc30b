/* Rank 0 reads numbers from stdin, one per line, until end of input; every rank gets their
 * count and sum, scales the sum by (rank + 1), and rank 0 prints the total. Its output
 * depends on the job's input, which record/replay must reproduce. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long long v[2] = {0, 0}; /* sum, lines */
  if (rank == 0) {
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
      v[0] += atoll(line);
      v[1]++;
    }
  }
  MPI_Bcast(v, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  long long mine = v[0] * (rank + 1), total = 0;
  MPI_Reduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("stdin_sum: %lld lines, sum %lld, scaled total %lld\n", v[1], v[0], total);
  MPI_Finalize();
  return 0;
}
