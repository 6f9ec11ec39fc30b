/* ssend: MPI_Ssend completes only once the matching receive has started. The receiver waits
 * 300 ms before receiving; the sender's Ssend must take at least 150 ms (a buffered send would
 * return at once). Then Ssend to a receive already posted, Ssend to oneself with the receive
 * posted first, and Ssend/Send interleaved stay in order. MPI_Issend: its request is not
 * complete (MPI_Test) while the receiver has not started the receive, and is after. */
#include <time.h>

#include "check.h"

static void SleepMs(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "ssend");
  const int partner = Partner();
  int v = -1, out = 77 + g_rank;
  MPI_Status st;
  if (partner != g_rank) {
    const int sender = g_rank < partner;
    if (sender) {
      const double t0 = MPI_Wtime();
      MPI_Ssend(&out, 1, MPI_INT, partner, 1, MPI_COMM_WORLD);
      const double took = MPI_Wtime() - t0;
      CHECK(took >= 0.15, "Ssend returned after %.3f s, the receive started after 0.3 s", took);
    } else {
      SleepMs(300);
      MPI_Recv(&v, 1, MPI_INT, partner, 1, MPI_COMM_WORLD, &st);
      CHECK(v == 77 + partner, "got %d", v);
    }
    /* Receive posted first (and known to be: the receiver says so). */
    if (sender) {
      int ready = 0;
      MPI_Recv(&ready, 1, MPI_INT, partner, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Ssend(&out, 1, MPI_INT, partner, 3, MPI_COMM_WORLD);
    } else {
      MPI_Request r;
      int ready = 1;
      v = -1;
      MPI_Irecv(&v, 1, MPI_INT, partner, 3, MPI_COMM_WORLD, &r);
      MPI_Send(&ready, 1, MPI_INT, partner, 2, MPI_COMM_WORLD);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      CHECK(v == 77 + partner, "after posted receive: got %d", v);
    }
  }
  /* To oneself, the receive posted first. */
  MPI_Request r;
  v = -1;
  MPI_Irecv(&v, 1, MPI_INT, g_rank, 4, MPI_COMM_WORLD, &r);
  MPI_Ssend(&out, 1, MPI_INT, g_rank, 4, MPI_COMM_WORLD);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  CHECK(v == out, "Ssend to self: got %d", v);

  /* Send, Ssend, Send to the partner with one tag: received in that order. */
  int seq[3] = {1, 2, 3}, got[3] = {0, 0, 0};
  MPI_Request rr[3];
  for (int i = 0; i < 3; ++i) MPI_Irecv(&got[i], 1, MPI_INT, partner, 5, MPI_COMM_WORLD, &rr[i]);
  MPI_Send(&seq[0], 1, MPI_INT, partner, 5, MPI_COMM_WORLD);
  MPI_Ssend(&seq[1], 1, MPI_INT, partner, 5, MPI_COMM_WORLD);
  MPI_Send(&seq[2], 1, MPI_INT, partner, 5, MPI_COMM_WORLD);
  MPI_Waitall(3, rr, MPI_STATUSES_IGNORE);
  CHECK(got[0] == 1 && got[1] == 2 && got[2] == 3, "order %d %d %d", got[0], got[1], got[2]);

  /* Issend: the sender tests for 200 ms while the receiver sleeps, then the receiver says it
   * is about to receive. */
  if (partner != g_rank) {
    const int sender = g_rank < partner;
    if (sender) {
      MPI_Request sr;
      int flag = 1;
      MPI_Issend(&out, 1, MPI_INT, partner, 6, MPI_COMM_WORLD, &sr);
      const double t0 = MPI_Wtime();
      while (MPI_Wtime() - t0 < 0.2) {
        MPI_Test(&sr, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "Issend completed before the receive started");
        if (flag) break;
        SleepMs(10);
      }
      if (!flag) MPI_Wait(&sr, MPI_STATUS_IGNORE);
    } else {
      SleepMs(400);
      v = -1;
      MPI_Recv(&v, 1, MPI_INT, partner, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(v == 77 + partner, "Issend: got %d", v);
    }
  }
  return FinishTest();
}
