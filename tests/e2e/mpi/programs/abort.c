/* abort: rank 1 (rank 0 when alone) calls MPI_Abort(MPI_COMM_WORLD, 3) while every other rank
 * waits in an MPI_Recv that nothing will match. The whole job must end, with a non-zero exit.
 * Reaching the end of the program is a failure. */
#include <time.h>

#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "abort");
  const int victim = g_size > 1 ? 1 : 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == victim) {
    struct timespec ts = {0, 100 * 1000 * 1000}; /* let the others block in MPI_Recv */
    nanosleep(&ts, NULL);
    printf("abort: rank %d calls MPI_Abort(MPI_COMM_WORLD, 3)\n", g_rank);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
    printf("FAIL abort: MPI_Abort returned on rank %d\n", g_rank);
    return 1;
  }
  int v;
  MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  printf("FAIL abort: rank %d's MPI_Recv returned\n", g_rank);
  return 1;
}
