/* cancel: MPI_Cancel of receives. A wildcard receive nothing will match is cancelled (and a
 * second one by index among several, as HPCC's RandomAccess does at its end): MPI_Wait returns,
 * MPI_Test_cancelled says so, the buffer is untouched. A receive whose message was matched
 * before the cancel (a round trip with the partner follows it) is not cancelled and gets the
 * data. MPI_Cancel of sends nobody receives: a large MPI_Isend and an MPI_Issend complete
 * cancelled (before, gos never cancelled a send and MPI_Wait hung), and a later message on
 * the same tag reaches the partner in their place. Plain portable MPI: the answers are Open
 * MPI's too. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "cancel");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int partner = Partner();
  MPI_Status st;
  int flag = -1;

  /* Nothing is ever sent with tag 99. */
  int buf[3] = {-1, -1, -1};
  MPI_Request r[3];
  for (int i = 0; i < 3; ++i) {
    CHECK_MPI(MPI_Irecv(&buf[i], 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &r[i]));
  }
  for (int i = 0; i < 3; ++i) {
    CHECK_MPI(MPI_Cancel(&r[i]));
    CHECK_MPI(MPI_Wait(&r[i], &st));
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1, "receive %d not cancelled", i);
    CHECK(r[i] == MPI_REQUEST_NULL, "request %d not freed", i);
    CHECK(buf[i] == -1, "buffer %d written: %d", i, buf[i]);
  }

  /* Matched before the cancel: the data arrives, the cancel fails. */
  if (partner != g_rank) {
    int v = -1, out = 500 + g_rank;
    MPI_Request rr;
    CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, partner, 7, MPI_COMM_WORLD, &rr));
    CHECK_MPI(MPI_Send(&out, 1, MPI_INT, partner, 7, MPI_COMM_WORLD));
    /* Both sends are done; make sure both receives were matched (by waiting on a second
     * round trip that the receives' order guarantees comes after). */
    int ping = 1, pong = 0;
    CHECK_MPI(MPI_Sendrecv(&ping, 1, MPI_INT, partner, 8, &pong, 1, MPI_INT, partner, 8,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Cancel(&rr));
    CHECK_MPI(MPI_Wait(&rr, &st));
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 0 && v == 500 + partner, "matched receive: cancelled %d, v %d", flag, v);
  }
  /* Sends nobody receives: one too large to be buffered, and a synchronous one. */
  if (partner != g_rank) {
    enum { kBig = 1 << 18 };
    int* big = malloc(kBig * sizeof(int));
    for (int i = 0; i < kBig; ++i) big[i] = i;
    int small = 42;
    MPI_Request sr[2];
    CHECK_MPI(MPI_Isend(big, kBig, MPI_INT, partner, 20, MPI_COMM_WORLD, &sr[0]));
    CHECK_MPI(MPI_Issend(&small, 1, MPI_INT, partner, 20, MPI_COMM_WORLD, &sr[1]));
    for (int i = 0; i < 2; ++i) {
      CHECK_MPI(MPI_Cancel(&sr[i]));
      CHECK_MPI(MPI_Wait(&sr[i], &st));
      CHECK_MPI(MPI_Test_cancelled(&st, &flag));
      CHECK(flag == 1, "send %d not cancelled", i);
    }
    /* Only after both cancels does the partner receive on tag 20: it gets this message. */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int v = 600 + g_rank, got = -1;
    CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, partner, 20, &got, 1, MPI_INT, partner, 20,
                           MPI_COMM_WORLD, &st));
    CHECK(got == 600 + partner, "after the cancelled sends got %d", got);
    free(big);
  } else {
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  }
  return FinishTest();
}
