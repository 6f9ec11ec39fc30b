/* wildcard: MPI_ANY_SOURCE and MPI_ANY_TAG, alone and together; the status names the real
 * source and tag. Every rank (rank 0 too) sends to rank 0. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "wildcard");
  /* Round A: one message per rank, tag 100 + rank, received with both wildcards. */
  int a = g_rank * 7;
  MPI_Request ra;
  MPI_Isend(&a, 1, MPI_INT, 0, 100 + g_rank, MPI_COMM_WORLD, &ra);
  int* seen = calloc((size_t)g_size, sizeof(int));
  if (g_rank == 0) {
    for (int k = 0; k < g_size; ++k) {
      int v = -1;
      MPI_Status st;
      MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      const int src = st.MPI_SOURCE;
      CHECK(src >= 0 && src < g_size, "source %d", src);
      if (src < 0 || src >= g_size) continue;
      CHECK(st.MPI_TAG == 100 + src, "from %d: tag %d", src, st.MPI_TAG);
      CHECK(v == src * 7, "from %d: payload %d", src, v);
      CHECK(seen[src] == 0, "rank %d's message received twice", src);
      seen[src]++;
    }
  }
  MPI_Wait(&ra, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);

  /* Round B: tag 1 then tag 2 from every rank. Tag 1 by named source with MPI_ANY_TAG (from
   * the highest rank down), then tag 2 by MPI_ANY_SOURCE with a named tag. */
  int b[2] = {g_rank, -g_rank};
  MPI_Request rb[2];
  MPI_Isend(&b[0], 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &rb[0]);
  MPI_Isend(&b[1], 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &rb[1]);
  if (g_rank == 0) {
    for (int src = g_size - 1; src >= 0; --src) {
      int v = -1;
      MPI_Status st;
      MPI_Recv(&v, 1, MPI_INT, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      CHECK(st.MPI_SOURCE == src, "asked for %d, status says %d", src, st.MPI_SOURCE);
      CHECK(st.MPI_TAG == 1, "from %d: tag %d (tag 1 was sent first)", src, st.MPI_TAG);
      CHECK(v == src, "from %d: payload %d", src, v);
    }
    memset(seen, 0, sizeof(int) * (size_t)g_size);
    for (int k = 0; k < g_size; ++k) {
      int v = 1;
      MPI_Status st;
      MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &st);
      const int src = st.MPI_SOURCE;
      CHECK(src >= 0 && src < g_size, "source %d", src);
      if (src < 0 || src >= g_size) continue;
      CHECK(st.MPI_TAG == 2, "tag %d", st.MPI_TAG);
      CHECK(v == -src, "from %d: payload %d", src, v);
      CHECK(seen[src]++ == 0, "rank %d's tag 2 received twice", src);
    }
  }
  MPI_Waitall(2, rb, MPI_STATUSES_IGNORE);
  free(seen);
  return FinishTest();
}
