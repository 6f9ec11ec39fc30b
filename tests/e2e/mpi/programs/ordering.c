/* ordering: MPI's non-overtaking rule. (1) Around the ring, 100 messages alternating 1 int and
 * 128 KiB (eager and rendezvous-sized) with mixed tags, received with MPI_ANY_TAG: they must
 * arrive in send order. (2) Every rank sends 20 messages to rank 0, which receives them all
 * with MPI_ANY_SOURCE: each sender's messages arrive in its order. */
#include "check.h"

enum { kMessages = 100, kBig = 32768, kFanIn = 20 };

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "ordering");
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;

  int* bufs[kMessages];
  MPI_Request reqs[kMessages];
  for (int i = 0; i < kMessages; ++i) {
    const int len = i % 2 == 0 ? 1 : kBig;
    bufs[i] = malloc(sizeof(int) * (size_t)len);
    for (int j = 0; j < len; ++j) {
      bufs[i][j] = (int)Pattern((uint32_t)(g_rank * 1000 + i), (size_t)j);
    }
    bufs[i][0] = i;
    MPI_Isend(bufs[i], len, MPI_INT, next, i % 3, MPI_COMM_WORLD, &reqs[i]);
  }
  int* in = malloc(sizeof(int) * kBig);
  for (int i = 0; i < kMessages; ++i) {
    MPI_Status st;
    MPI_Recv(in, kBig, MPI_INT, prev, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    const int len = i % 2 == 0 ? 1 : kBig;
    CHECK(in[0] == i, "message %d arrived as number %d", in[0], i);
    CHECK(count == len, "message %d: count %d, expected %d", i, count, len);
    CHECK(st.MPI_TAG == i % 3, "message %d: tag %d", i, st.MPI_TAG);
    CHECK(st.MPI_SOURCE == prev, "message %d: source %d", i, st.MPI_SOURCE);
    if (len > 1) {
      CHECK(in[len - 1] == (int)Pattern((uint32_t)(prev * 1000 + i), (size_t)(len - 1)),
            "message %d: last word wrong", i);
    }
  }
  MPI_Waitall(kMessages, reqs, MPI_STATUSES_IGNORE);
  for (int i = 0; i < kMessages; ++i) free(bufs[i]);
  free(in);

  /* Fan-in with MPI_ANY_SOURCE. */
  int out[kFanIn][2];
  MPI_Request fan[kFanIn];
  for (int i = 0; i < kFanIn; ++i) {
    out[i][0] = g_rank;
    out[i][1] = i;
    MPI_Isend(out[i], 2, MPI_INT, 0, 5, MPI_COMM_WORLD, &fan[i]);
  }
  if (g_rank == 0) {
    int* seen = calloc((size_t)g_size, sizeof(int));
    for (int k = 0; k < g_size * kFanIn; ++k) {
      int msg[2];
      MPI_Status st;
      MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
      CHECK(st.MPI_SOURCE == msg[0], "status source %d, payload says %d", st.MPI_SOURCE, msg[0]);
      if (msg[0] >= 0 && msg[0] < g_size) {
        CHECK(msg[1] == seen[msg[0]], "from rank %d: got number %d, expected %d", msg[0], msg[1],
              seen[msg[0]]);
        seen[msg[0]] = msg[1] + 1;
      }
    }
    free(seen);
  }
  MPI_Waitall(kFanIn, fan, MPI_STATUSES_IGNORE);
  return FinishTest();
}
