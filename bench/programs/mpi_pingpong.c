/* mpi_pingpong: ping-pong between ranks 0 and 1 (other ranks only wait), message sizes 8 B to
 * MAX_BYTES (second argument, default 64 MiB) by factors of 4 (and MAX_BYTES itself). For each
 * size a timed warm-up round trip sets the repetitions: enough for about TARGET seconds
 * (third argument, default 0.5), at least 2 and at most ITERS (first argument, default 1000).
 * Rank 0 prints "# size usec_half_rtt MBps", then one line per size: bytes, half the round
 * trip in microseconds, and bytes / half round trip in MB/s (10^6 B/s). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long max_iters = argc > 1 ? atol(argv[1]) : 1000;
  const long max_bytes = argc > 2 ? atol(argv[2]) : 64L << 20;
  const double target = argc > 3 ? atof(argv[3]) : 0.5;
  if (size < 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  char* buf = malloc((size_t)max_bytes);
  if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(buf, 1, (size_t)max_bytes);
  if (rank == 0) printf("# size usec_half_rtt MBps\n");
  for (long bytes = 8; bytes <= max_bytes;
       bytes = bytes * 4 > max_bytes && bytes < max_bytes ? max_bytes : bytes * 4) {
    const int n = (int)bytes;
    long iters = 1;
    for (int phase = 0; phase < 2; ++phase) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (rank <= 1) {
        for (long i = 0; i < iters; ++i) {
          if (rank == 0) {
            MPI_Send(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          } else {
            MPI_Recv(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
          }
        }
      }
      double t = MPI_Wtime() - t0;
      if (phase == 0) {
        /* Rank 0 sizes the measured round from the warm-up. */
        long next = t > 0 ? (long)(target / t) : max_iters;
        if (next > max_iters) next = max_iters;
        if (next < 2) next = 2;
        MPI_Bcast(&next, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        iters = next;
      } else if (rank == 0) {
        const double half_us = t / (double)iters / 2.0 * 1e6;
        printf("%ld %.3f %.1f\n", bytes, half_us, (double)bytes / half_us);
        fflush(stdout);
      }
    }
    if (bytes == max_bytes) break;
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
