// MPI_Init / MPI_Finalize and nothing else, padded like noop.c to BENCH_PAD_BYTES. Used by
// bench/gos-launch-bench as the mpirun payload.
#include <mpi.h>

#ifndef BENCH_PAD_BYTES
#define BENCH_PAD_BYTES (4u << 20)
#endif

volatile unsigned char bench_pad[BENCH_PAD_BYTES] = {1};

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Finalize();
  return bench_pad[0] == 1 ? 0 : 1;
}
