/* tags: a receive for a given tag takes the message with that tag, overtaking earlier messages
 * with other tags; the largest tag every MPI allows (32767) works; messages with the same tag
 * keep their order around a receive for another tag. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "tags");
  const int partner = Partner();
  static const int kTags[] = {1, 2, 3, 4, 5, 32767};
  enum { kN = sizeof kTags / sizeof kTags[0] };
  int out[kN];
  MPI_Request reqs[kN];
  for (int i = 0; i < kN; ++i) {
    out[i] = g_rank * 100000 + kTags[i];
    MPI_Isend(&out[i], 1, MPI_INT, partner, kTags[i], MPI_COMM_WORLD, &reqs[i]);
  }
  for (int i = kN - 1; i >= 0; --i) {
    int v = -1;
    MPI_Status st;
    MPI_Recv(&v, 1, MPI_INT, partner, kTags[i], MPI_COMM_WORLD, &st);
    CHECK(v == partner * 100000 + kTags[i], "tag %d: payload %d", kTags[i], v);
    CHECK(st.MPI_TAG == kTags[i], "asked for tag %d, status says %d", kTags[i], st.MPI_TAG);
  }
  MPI_Waitall(kN, reqs, MPI_STATUSES_IGNORE);

  int x[2] = {11, 22}, y = 33;
  MPI_Request r3[3];
  MPI_Isend(&x[0], 1, MPI_INT, partner, 9, MPI_COMM_WORLD, &r3[0]);
  MPI_Isend(&y, 1, MPI_INT, partner, 8, MPI_COMM_WORLD, &r3[1]);
  MPI_Isend(&x[1], 1, MPI_INT, partner, 9, MPI_COMM_WORLD, &r3[2]);
  int got8 = 0, got9a = 0, got9b = 0;
  MPI_Recv(&got8, 1, MPI_INT, partner, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Recv(&got9a, 1, MPI_INT, partner, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Recv(&got9b, 1, MPI_INT, partner, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(got8 == 33 && got9a == 11 && got9b == 22, "got %d %d %d, expected 33 11 22", got8, got9a,
        got9b);
  MPI_Waitall(3, r3, MPI_STATUSES_IGNORE);
  return FinishTest();
}
