/* many: 500 outstanding receives and 500 outstanding sends per rank around the ring, completed
 * by one Waitall. (1) Receives for tags 0..499 posted in order, sends in reverse tag order:
 * each receive gets its tag's message. (2) 500 MPI_ANY_TAG receives, sends in tag order:
 * receive i gets tag i (non-overtaking). Sizes vary from 1 to 64 ints. */
#include "check.h"

enum { kN = 500, kMaxLen = 64 };

static int Len(int i) { return i % kMaxLen + 1; }

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "many");
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  int* out = malloc(sizeof(int) * kN * kMaxLen);
  int* in = malloc(sizeof(int) * kN * kMaxLen);
  MPI_Request* reqs = malloc(sizeof(MPI_Request) * 2 * kN);
  MPI_Status* sts = malloc(sizeof(MPI_Status) * 2 * kN);
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < Len(i); ++j) out[i * kMaxLen + j] = g_rank * 1000000 + i * 100 + j;
  }

  for (int round = 0; round < 2; ++round) {
    memset(in, 0xff, sizeof(int) * kN * kMaxLen);
    for (int i = 0; i < kN; ++i) {
      MPI_Irecv(&in[i * kMaxLen], kMaxLen, MPI_INT, prev, round == 0 ? i : MPI_ANY_TAG,
                MPI_COMM_WORLD, &reqs[i]);
    }
    for (int k = 0; k < kN; ++k) {
      const int i = round == 0 ? kN - 1 - k : k;
      MPI_Isend(&out[i * kMaxLen], Len(i), MPI_INT, next, i, MPI_COMM_WORLD, &reqs[kN + k]);
    }
    MPI_Waitall(2 * kN, reqs, sts);
    for (int i = 0; i < kN; ++i) {
      int count = -1;
      MPI_Get_count(&sts[i], MPI_INT, &count);
      CHECK(sts[i].MPI_TAG == i, "round %d receive %d: tag %d", round, i, sts[i].MPI_TAG);
      CHECK(count == Len(i), "round %d receive %d: count %d", round, i, count);
      int bad = 0;
      for (int j = 0; j < Len(i); ++j) bad += in[i * kMaxLen + j] != prev * 1000000 + i * 100 + j;
      CHECK(bad == 0, "round %d receive %d: %d words wrong", round, i, bad);
      CHECK(reqs[i] == MPI_REQUEST_NULL, "request %d not freed by Waitall", i);
    }
  }
  free(out);
  free(in);
  free(reqs);
  free(sts);
  return FinishTest();
}
