/* alltoallw: MPI_Alltoallw and MPI_Ialltoallw, a datatype per peer on each side and
 * displacements in bytes. Rank r sends rank j Count(r, j) ints, r*1000 + j*10 + k for the k-th;
 * to even j from a strided vector (every other int), to odd j from contiguous ints; it
 * receives from even i into contiguous ints, from odd i into a strided vector. Then the same
 * in place (MPI_IN_PLACE: what recvbuf holds, laid out as the receive, is what is sent), and
 * nonblocking with a zero-count peer. Plain portable MPI: the answers are Open MPI's too. */
#include "check.h"

static int Count(int from, int to) { return (from + 2 * to) % 3 + 1; }

enum { kSlot = 8 }; /* ints of room per peer (a strided block of 3 needs 5) */

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "alltoallw");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int n = g_size, me = g_rank;
  MPI_Datatype strided; /* one int, extent 2 ints: count x strided = every other int */
  MPI_Datatype every_other;
  CHECK_MPI(MPI_Type_vector(1, 1, 2, MPI_INT, &every_other));
  CHECK_MPI(MPI_Type_create_resized(every_other, 0, 2 * (MPI_Aint)sizeof(int), &strided));
  CHECK_MPI(MPI_Type_commit(&strided));

  int* sendbuf = calloc((size_t)n * kSlot, sizeof(int));
  int* recvbuf = calloc((size_t)n * kSlot, sizeof(int));
  int* scounts = calloc((size_t)n, sizeof(int));
  int* rcounts = calloc((size_t)n, sizeof(int));
  int* sdispls = calloc((size_t)n, sizeof(int));
  int* rdispls = calloc((size_t)n, sizeof(int));
  MPI_Datatype* stypes = calloc((size_t)n, sizeof(MPI_Datatype));
  MPI_Datatype* rtypes = calloc((size_t)n, sizeof(MPI_Datatype));
  for (int j = 0; j < n; ++j) {
    scounts[j] = Count(me, j);
    sdispls[j] = j * kSlot * (int)sizeof(int);
    stypes[j] = j % 2 == 0 ? strided : MPI_INT;
    for (int k = 0; k < scounts[j]; ++k) {
      sendbuf[j * kSlot + (j % 2 == 0 ? 2 * k : k)] = me * 1000 + j * 10 + k;
    }
    rcounts[j] = Count(j, me);
    rdispls[j] = j * kSlot * (int)sizeof(int);
    rtypes[j] = j % 2 == 0 ? MPI_INT : strided;
  }

  /* Blocking. */
  for (int i = 0; i < n * kSlot; ++i) recvbuf[i] = -1;
  CHECK_MPI(MPI_Alltoallw(sendbuf, scounts, sdispls, stypes, recvbuf, rcounts, rdispls, rtypes,
                          MPI_COMM_WORLD));
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < rcounts[i]; ++k) {
      const int got = recvbuf[i * kSlot + (i % 2 == 0 ? k : 2 * k)];
      CHECK(got == i * 1000 + me * 10 + k, "from %d element %d: %d", i, k, got);
    }
    if (i % 2 == 1) { /* the gaps of a strided receive stay untouched */
      CHECK(recvbuf[i * kSlot + 1] == -1, "gap after the first int from %d: %d", i,
            recvbuf[i * kSlot + 1]);
    }
  }

  /* In place: every block both ways laid out as the receive, and the counts symmetric. */
  for (int j = 0; j < n; ++j) {
    rcounts[j] = (me + j) % 3 + 1;
    for (int i = 0; i < kSlot; ++i) recvbuf[j * kSlot + i] = -1;
    for (int k = 0; k < rcounts[j]; ++k) {
      recvbuf[j * kSlot + (j % 2 == 0 ? k : 2 * k)] = me * 1000 + j * 10 + k;
    }
  }
  CHECK_MPI(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, recvbuf, rcounts, rdispls, rtypes,
                          MPI_COMM_WORLD));
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < rcounts[i]; ++k) {
      const int got = recvbuf[i * kSlot + (i % 2 == 0 ? k : 2 * k)];
      CHECK(got == i * 1000 + me * 10 + k, "in place, from %d element %d: %d", i, k, got);
    }
  }

  /* Nonblocking, nothing to or from the last rank (count 0), overlapped with a barrier. */
  for (int j = 0; j < n; ++j) {
    scounts[j] = j == n - 1 || me == n - 1 ? 0 : Count(me, j);
    rcounts[j] = j == n - 1 || me == n - 1 ? 0 : Count(j, me);
  }
  for (int i = 0; i < n * kSlot; ++i) recvbuf[i] = -1;
  MPI_Request r;
  CHECK_MPI(MPI_Ialltoallw(sendbuf, scounts, sdispls, stypes, recvbuf, rcounts, rdispls, rtypes,
                           MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  CHECK(r == MPI_REQUEST_NULL, "the request was not freed");
  for (int i = 0; i < n; ++i) {
    if (rcounts[i] == 0) {
      CHECK(recvbuf[i * kSlot] == -1, "nothing expected from %d: %d", i, recvbuf[i * kSlot]);
    }
    for (int k = 0; k < rcounts[i]; ++k) {
      const int got = recvbuf[i * kSlot + (i % 2 == 0 ? k : 2 * k)];
      CHECK(got == i * 1000 + me * 10 + k, "nonblocking, from %d element %d: %d", i, k, got);
    }
  }

  CHECK_MPI(MPI_Type_free(&strided));
  CHECK_MPI(MPI_Type_free(&every_other));
  free(sendbuf);
  free(recvbuf);
  free(scounts);
  free(rcounts);
  free(sdispls);
  free(rdispls);
  free(stypes);
  free(rtypes);
  return FinishTest();
}
