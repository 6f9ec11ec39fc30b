/* persistent: MPI_Send_init / MPI_Recv_init / MPI_Ssend_init started 5 times each with
 * MPI_Start / MPI_Startall in a ring exchange, completed by MPI_Wait, MPI_Waitall and
 * MPI_Testany (an inactive persistent request counts as null; it stays allocated, not
 * MPI_REQUEST_NULL), then MPI_Request_free; MPI_Rsend to a posted receive; MPI_Bsend of a
 * 256 KiB message with an attached buffer, the send buffer overwritten at once after the call;
 * persistent requests whose derived datatype was freed right after MPI_Send_init /
 * MPI_Recv_init still start (the request keeps the type; before, MPI_Start failed with
 * MPI_ERR_TYPE). Plain portable MPI: the answers are Open MPI's too. */
#include "check.h"

#define BIG (256 * 1024 / 4)

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "persistent");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  int out = 0, in = -1;
  MPI_Request r[2];
  CHECK_MPI(MPI_Send_init(&out, 1, MPI_INT, right, 11, MPI_COMM_WORLD, &r[0]));
  CHECK_MPI(MPI_Recv_init(&in, 1, MPI_INT, left, 11, MPI_COMM_WORLD, &r[1]));
  for (int round = 0; round < 5; ++round) {
    out = g_rank * 100 + round;
    in = -1;
    if (round % 2 == 0) {
      CHECK_MPI(MPI_Startall(2, r));
    } else {
      CHECK_MPI(MPI_Start(&r[1]));
      CHECK_MPI(MPI_Start(&r[0]));
    }
    if (round < 3) {
      CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    } else {
      CHECK_MPI(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
      CHECK_MPI(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    }
    CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL,
          "round %d: a persistent request "
          "became MPI_REQUEST_NULL",
          round);
    CHECK(in == left * 100 + round, "round %d: got %d from %d", round, in, left);
  }
  /* Both inactive: Testany finds nothing to complete and says MPI_UNDEFINED. */
  int index = -2, flag = 0;
  CHECK_MPI(MPI_Testany(2, r, &index, &flag, MPI_STATUS_IGNORE));
  CHECK(flag == 1 && index == MPI_UNDEFINED, "Testany of inactive requests: flag %d index %d", flag,
        index);
  CHECK_MPI(MPI_Request_free(&r[0]));
  CHECK_MPI(MPI_Request_free(&r[1]));
  CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "Request_free left a handle");

  /* A synchronous persistent send, with its receive posted by the partner afterwards. */
  const int partner = Partner();
  if (partner != g_rank) {
    MPI_Request s;
    int v = -1, w = 7 + g_rank;
    if (g_rank < partner) {
      CHECK_MPI(MPI_Ssend_init(&w, 1, MPI_INT, partner, 12, MPI_COMM_WORLD, &s));
      CHECK_MPI(MPI_Start(&s));
      CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
      CHECK_MPI(MPI_Request_free(&s));
    } else {
      CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(v == 7 + partner, "Ssend_init: got %d", v);
    }

    /* Rsend: the receiver posts first and says so. */
    if (g_rank < partner) {
      int go = 0, x = 42;
      CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK_MPI(MPI_Rsend(&x, 1, MPI_INT, partner, 14, MPI_COMM_WORLD));
    } else {
      int go = 1, x = 0;
      MPI_Request rr;
      CHECK_MPI(MPI_Irecv(&x, 1, MPI_INT, partner, 14, MPI_COMM_WORLD, &rr));
      CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, 13, MPI_COMM_WORLD));
      CHECK_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
      CHECK(x == 42, "Rsend: got %d", x);
    }

    /* Bsend of 256 KiB: the buffer is reused right after the call. */
    static int big[BIG], got[BIG];
    const int size = BIG * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
    char* attach = malloc((size_t)size);
    CHECK_MPI(MPI_Buffer_attach(attach, size));
    if (g_rank < partner) {
      for (int i = 0; i < BIG; ++i) big[i] = i ^ g_rank;
      CHECK_MPI(MPI_Bsend(big, BIG, MPI_INT, partner, 15, MPI_COMM_WORLD));
      for (int i = 0; i < BIG; ++i) big[i] = -1;
    } else {
      CHECK_MPI(MPI_Recv(got, BIG, MPI_INT, partner, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      int bad = 0;
      for (int i = 0; i < BIG; ++i) bad += got[i] != (i ^ partner);
      CHECK(bad == 0, "Bsend: %d wrong words", bad);
    }
    void* back = NULL;
    int back_size = 0;
    CHECK_MPI(MPI_Buffer_detach(&back, &back_size));
    CHECK(back == attach && back_size == size, "Buffer_detach gave %p %d", back, back_size);
    free(attach);
  }
  /* The datatype is freed before the requests are ever started (MPI allows it: pending
   * operations keep it). A vector takes the packing path, a dup of MPI_INT the plain one. */
  if (partner != g_rank) {
    MPI_Datatype every_other, int_dup;
    CHECK_MPI(MPI_Type_vector(4, 1, 2, MPI_INT, &every_other));
    CHECK_MPI(MPI_Type_commit(&every_other));
    CHECK_MPI(MPI_Type_dup(MPI_INT, &int_dup));
    int sv[8], rv[8], si = 0, ri = -1;
    MPI_Request pr[4];
    CHECK_MPI(MPI_Send_init(sv, 1, every_other, partner, 16, MPI_COMM_WORLD, &pr[0]));
    CHECK_MPI(MPI_Recv_init(rv, 1, every_other, partner, 16, MPI_COMM_WORLD, &pr[1]));
    CHECK_MPI(MPI_Send_init(&si, 1, int_dup, partner, 17, MPI_COMM_WORLD, &pr[2]));
    CHECK_MPI(MPI_Recv_init(&ri, 1, int_dup, MPI_ANY_SOURCE, 17, MPI_COMM_WORLD, &pr[3]));
    CHECK_MPI(MPI_Type_free(&every_other));
    CHECK_MPI(MPI_Type_free(&int_dup));
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 8; ++i) {
        sv[i] = 1000 * g_rank + 10 * round + i;
        rv[i] = -1;
      }
      si = 100 * g_rank + round;
      ri = -1;
      CHECK_MPI(MPI_Startall(4, pr));
      CHECK_MPI(MPI_Waitall(4, pr, MPI_STATUSES_IGNORE));
      for (int i = 0; i < 8; ++i) {
        const int want = i % 2 == 0 ? 1000 * partner + 10 * round + i : -1;
        CHECK(rv[i] == want, "round %d: freed vector type: rv[%d] = %d, want %d", round, i, rv[i],
              want);
      }
      CHECK(ri == 100 * partner + round, "round %d: freed dup type: %d", round, ri);
    }
    for (int i = 0; i < 4; ++i) CHECK_MPI(MPI_Request_free(&pr[i]));
  }
  return FinishTest();
}
