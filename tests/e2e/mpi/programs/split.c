/* split: MPI_Comm_split by color rank % 3 with key -rank (reversed order), one rank with
 * MPI_UNDEFINED (gets MPI_COMM_NULL); new ranks and sizes; collectives and point-to-point on the
 * split communicators; MPI_Comm_dup keeps messages apart from its parent; Comm_free. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "split");
  /* The last rank opts out when there are at least 4. */
  const int out_rank = g_size >= 4 ? g_size - 1 : -1;
  const int color = g_rank == out_rank ? MPI_UNDEFINED : g_rank % 3;
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, color, -g_rank, &sub);
  if (color == MPI_UNDEFINED) {
    CHECK(sub == MPI_COMM_NULL, "MPI_UNDEFINED color did not give MPI_COMM_NULL");
  } else {
    /* Members: world ranks with my color, except out_rank, ordered by descending world rank. */
    int members[64], m = 0;
    for (int r = g_size - 1; r >= 0; --r) {
      if (r % 3 == color && r != out_rank && m < 64) members[m++] = r;
    }
    int srank = -1, ssize = -1, expected_rank = -1;
    MPI_Comm_rank(sub, &srank);
    MPI_Comm_size(sub, &ssize);
    for (int i = 0; i < m; ++i) {
      if (members[i] == g_rank) expected_rank = i;
    }
    CHECK(ssize == m, "color %d: size %d, expected %d", color, ssize, m);
    CHECK(srank == expected_rank, "color %d: rank %d, expected %d", color, srank, expected_rank);

    /* Allreduce of world ranks; Bcast from sub rank 0 (the highest world rank). */
    int sum = -1, want = 0;
    for (int i = 0; i < m; ++i) want += members[i];
    MPI_Allreduce(&g_rank, &sum, 1, MPI_INT, MPI_SUM, sub);
    CHECK(sum == want, "color %d: Allreduce %d, expected %d", color, sum, want);
    int top = g_rank;
    MPI_Bcast(&top, 1, MPI_INT, 0, sub);
    CHECK(top == members[0], "color %d: Bcast %d, expected %d", color, top, members[0]);
    int* all = malloc(sizeof(int) * (size_t)ssize);
    MPI_Allgather(&g_rank, 1, MPI_INT, all, 1, MPI_INT, sub);
    for (int i = 0; i < ssize && i < m; ++i) {
      CHECK(all[i] == members[i], "color %d: Allgather [%d] = %d", color, i, all[i]);
    }
    free(all);
    MPI_Barrier(sub);

    /* Ring in the sub communicator; sources in the status are sub ranks. */
    const int next = (srank + 1) % ssize, prev = (srank + ssize - 1) % ssize;
    int v = -1;
    MPI_Status st;
    MPI_Sendrecv(&g_rank, 1, MPI_INT, next, 3, &v, 1, MPI_INT, MPI_ANY_SOURCE, 3, sub, &st);
    CHECK(v == members[prev], "color %d: ring got %d, expected %d", color, v, members[prev]);
    CHECK(st.MPI_SOURCE == prev, "color %d: status source %d, expected sub rank %d", color,
          st.MPI_SOURCE, prev);
    MPI_Comm_free(&sub);
    CHECK(sub == MPI_COMM_NULL, "Comm_free did not null the handle");
  }

  /* Dup: the same (source, tag) on two communicators. Sent on world first, the dup's message
   * must still be what a receive on the dup gets. */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int dr = -1, ds = -1;
  MPI_Comm_rank(dup, &dr);
  MPI_Comm_size(dup, &ds);
  CHECK(dr == g_rank && ds == g_size, "dup: rank %d size %d", dr, ds);
  const int partner = Partner();
  int on_world = 1000 + g_rank, on_dup = 2000 + g_rank;
  MPI_Request reqs[2];
  MPI_Isend(&on_world, 1, MPI_INT, partner, 5, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(&on_dup, 1, MPI_INT, partner, 5, dup, &reqs[1]);
  int got_dup = -1, got_world = -1;
  MPI_Recv(&got_dup, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, MPI_STATUS_IGNORE);
  MPI_Recv(&got_world, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(got_dup == 2000 + partner, "dup received %d, expected %d", got_dup, 2000 + partner);
  CHECK(got_world == 1000 + partner, "world received %d, expected %d", got_world, 1000 + partner);
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
  int dsum = 0;
  MPI_Allreduce(&g_rank, &dsum, 1, MPI_INT, MPI_SUM, dup);
  CHECK(dsum == g_size * (g_size - 1) / 2, "dup Allreduce %d", dsum);
  MPI_Comm_free(&dup);
  return FinishTest();
}
