/* probe: MPI_Probe and MPI_Iprobe (with wildcards) report source, tag and size before the
 * receive; MPI_Get_count gives the size in the probed type, MPI_UNDEFINED when the bytes are
 * not a whole number of elements; probing does not consume the message; Iprobe says "no
 * message" when none can have been sent. */
#include "check.h"

enum { kSizes = 6 };
static const int kLen[kSizes] = {0, 1, 7, 1000, 65536, 3};

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "probe");
  const int partner = Partner();
  int flag = 1;
  MPI_Status st;
  /* Nothing is ever sent with tag 99. */
  MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, &st);
  CHECK(!flag, "Iprobe found a message with tag 99 that nobody sent");

  int* bufs[kSizes];
  MPI_Request reqs[kSizes];
  for (int i = 0; i < kSizes; ++i) {
    bufs[i] = malloc(sizeof(int) * (size_t)(kLen[i] + 1));
    for (int j = 0; j < kLen[i]; ++j) bufs[i][j] = g_rank * 7 + i * 1000 + j;
    MPI_Isend(bufs[i], kLen[i], MPI_INT, partner, 10 + i, MPI_COMM_WORLD, &reqs[i]);
  }
  for (int i = 0; i < kSizes; ++i) {
    int count = -1;
    if (i % 2 == 0) {
      MPI_Probe(partner, 10 + i, MPI_COMM_WORLD, &st);
    } else {
      do {
        MPI_Iprobe(MPI_ANY_SOURCE, 10 + i, MPI_COMM_WORLD, &flag, &st);
      } while (!flag);
    }
    CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == 10 + i, "probe %d: source %d tag %d", i,
          st.MPI_SOURCE, st.MPI_TAG);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(count == kLen[i], "probe %d: count %d, expected %d", i, count, kLen[i]);
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(count == kLen[i] * (int)sizeof(int), "probe %d: %d bytes", i, count);
    if (kLen[i] % 2 == 1) {
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      CHECK(count == MPI_UNDEFINED, "probe %d: %d ints as doubles gave %d, not MPI_UNDEFINED", i,
            kLen[i], count);
    }
    /* Probing twice sees the same message. */
    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    CHECK(st.MPI_TAG == 10 + i, "second probe %d: tag %d (messages from one sender in order)", i,
          st.MPI_TAG);
    MPI_Get_count(&st, MPI_INT, &count);
    int* in = malloc(sizeof(int) * (size_t)(count > 0 ? count : 1));
    MPI_Recv(in, count, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
    int bad = 0;
    for (int j = 0; j < count; ++j) bad += in[j] != partner * 7 + i * 1000 + j;
    CHECK(bad == 0, "message %d: %d ints wrong", i, bad);
    free(in);
  }
  MPI_Waitall(kSizes, reqs, MPI_STATUSES_IGNORE);
  for (int i = 0; i < kSizes; ++i) free(bufs[i]);
  /* Everything was received: Iprobe finds nothing now. */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
  CHECK(!flag, "Iprobe found a message after all were received (tag %d)", st.MPI_TAG);
  return FinishTest();
}
