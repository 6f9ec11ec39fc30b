/* unreceived: rank 0 sends rank 1 a small (eager) message with tag 7 that rank 1 never
 * receives, and both call MPI_Finalize. Erroneous on purpose: gos keeps an eager message in
 * its sender until a rank receives it, so rank 0's MPI_Finalize waits for good; it must say
 * which message it waits for (the test ends the job with gos-run --time). */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "unreceived");
  if (g_size < 2) {
    printf("unreceived: needs 2 ranks\n");
    return 1;
  }
  if (g_rank == 0) {
    int v = 42;
    MPI_Send(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
  }
  printf("unreceived: rank %d finalizes\n", g_rank);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
