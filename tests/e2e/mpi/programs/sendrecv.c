/* sendrecv: MPI_Sendrecv shifting around the ring in both directions (different send and
 * receive sizes and tags), a pairwise exchange with every other rank in turn, and with
 * MPI_PROC_NULL on one side. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "sendrecv");
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  /* Shift right: send rank+1 ints to next, receive prev+1 ints from prev. */
  int out[64], in[64];
  for (int i = 0; i < 64; ++i) out[i] = g_rank * 1000 + i;
  for (int dir = 0; dir < 2; ++dir) {
    const int to = dir == 0 ? next : prev, from = dir == 0 ? prev : next;
    const int n_out = g_rank % 60 + 1;
    memset(in, 0xff, sizeof in);
    MPI_Status st;
    MPI_Sendrecv(out, n_out, MPI_INT, to, 10 + dir, in, 64, MPI_INT, from, 10 + dir, MPI_COMM_WORLD,
                 &st);
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(count == from % 60 + 1, "dir %d: count %d, expected %d", dir, count, from % 60 + 1);
    CHECK(st.MPI_SOURCE == from && st.MPI_TAG == 10 + dir, "dir %d: source %d tag %d", dir,
          st.MPI_SOURCE, st.MPI_TAG);
    int bad = 0;
    for (int i = 0; i < count && i < 64; ++i) bad += in[i] != from * 1000 + i;
    CHECK(bad == 0, "dir %d: %d ints wrong", dir, bad);
  }
  /* Pairwise with everyone: step s pairs rank with rank ^ s when both exist (s a power-of-two
   * free schedule: every pair meets exactly once over s = 1 .. pow2 - 1). */
  int pow2 = 1;
  while (pow2 < g_size) pow2 *= 2;
  for (int s = 1; s < pow2; ++s) {
    const int peer = g_rank ^ s;
    if (peer >= g_size) continue;
    double mine[3] = {g_rank, s, g_rank * 0.5}, theirs[3] = {-1, -1, -1};
    MPI_Sendrecv(mine, 3, MPI_DOUBLE, peer, s, theirs, 3, MPI_DOUBLE, peer, s, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    CHECK(theirs[0] == peer && theirs[1] == s && theirs[2] == peer * 0.5,
          "step %d with %d: got %g %g %g", s, peer, theirs[0], theirs[1], theirs[2]);
  }
  /* Open chain: first rank receives from MPI_PROC_NULL, last sends to it. */
  const int up = g_rank == 0 ? MPI_PROC_NULL : g_rank - 1;
  const int down = g_rank == g_size - 1 ? MPI_PROC_NULL : g_rank + 1;
  int v = -7;
  MPI_Status st;
  MPI_Sendrecv(&g_rank, 1, MPI_INT, down, 20, &v, 1, MPI_INT, up, 20, MPI_COMM_WORLD, &st);
  if (up == MPI_PROC_NULL) {
    CHECK(v == -7 && st.MPI_SOURCE == MPI_PROC_NULL, "from MPI_PROC_NULL: v %d source %d", v,
          st.MPI_SOURCE);
  } else {
    CHECK(v == up, "chain: got %d, expected %d", v, up);
  }
  return FinishTest();
}
