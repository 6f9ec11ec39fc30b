/* ring: a token goes around the ring of ranks LAPS times (argument, default 10); every rank
 * adds its rank to it on each pass. Rank 0 prints the final value and checks it against
 * LAPS * size * (size - 1) / 2; exit 1 on mismatch. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long laps = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
  if (laps < 1) laps = 1;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const int tag = 7;

  long long token = 0;
  for (long lap = 0; lap < laps; ++lap) {
    if (size == 1) {
      /* A blocking send to oneself may deadlock (MPI does not promise buffering). */
      long long in = token;
      MPI_Sendrecv(&in, 1, MPI_LONG_LONG, 0, tag, &token, 1, MPI_LONG_LONG, 0, tag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    } else if (rank == 0) {
      MPI_Send(&token, 1, MPI_LONG_LONG, next, tag, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_LONG_LONG, prev, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&token, 1, MPI_LONG_LONG, prev, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token += rank;
      MPI_Send(&token, 1, MPI_LONG_LONG, next, tag, MPI_COMM_WORLD);
    }
  }

  int rc = 0;
  if (rank == 0) {
    const long long expected = (long long)laps * size * (size - 1) / 2;
    printf("ring: %d ranks, %ld laps, token %lld, expected %lld: %s\n", size, laps, token, expected,
           token == expected ? "ok" : "MISMATCH");
    rc = token == expected ? 0 : 1;
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
