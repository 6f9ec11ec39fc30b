/* sendmodes: MPI_Ibsend (complete at once: the buffer is the program's again before anyone
 * received), MPI_Bsend_init and MPI_Rsend_init started twice, and MPI 4.0's MPI_Isendrecv
 * (its status is the receive's) and MPI_Isendrecv_replace (a derived type, the data swapped
 * in place) around a ring. Plain portable MPI: the answers are Open MPI's too (Open MPI 4.1 has
 * no MPI 4.0 calls: that part is left out there). */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "sendmodes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int n = g_size, me = g_rank;
  const int right = (me + 1) % n, left = (me - 1 + n) % n;
  MPI_Request r;
  MPI_Status st;
  int flag = 0;
  /* Buffered sends need an attached buffer (gos copies on its own, Open MPI uses it). */
  const int bsize = 8 * (MPI_BSEND_OVERHEAD + 64);
  char* bbuf = malloc((size_t)bsize);
  CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));

  /* MPI_Ibsend: complete before the receive is even posted (the right neighbour receives only
   * after a barrier); the buffer is overwritten at once. */
  int msg[4] = {me, me + 1, me + 2, me + 3};
  CHECK_MPI(MPI_Ibsend(msg, 4, MPI_INT, right, 11, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
  CHECK(flag == 1 && r == MPI_REQUEST_NULL, "MPI_Ibsend not complete at once (flag %d)", flag);
  for (int i = 0; i < 4; ++i) msg[i] = -1;
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  int got[4] = {0, 0, 0, 0};
  CHECK_MPI(MPI_Recv(got, 4, MPI_INT, left, 11, MPI_COMM_WORLD, &st));
  for (int i = 0; i < 4; ++i) CHECK(got[i] == left + i, "Ibsend element %d: %d", i, got[i]);

  /* Persistent buffered and ready sends, each started twice with new contents. */
  int bval = 0, rval = 0, in = -1;
  MPI_Request pb, pr;
  CHECK_MPI(MPI_Bsend_init(&bval, 1, MPI_INT, right, 12, MPI_COMM_WORLD, &pb));
  CHECK_MPI(MPI_Rsend_init(&rval, 1, MPI_INT, right, 13, MPI_COMM_WORLD, &pr));
  for (int round = 0; round < 2; ++round) {
    MPI_Request rb;
    MPI_Request rr;
    int inr = -1;
    /* The ready send's receive is posted first (its precondition), then everyone starts. */
    CHECK_MPI(MPI_Irecv(&inr, 1, MPI_INT, left, 13, MPI_COMM_WORLD, &rr));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    bval = 100 * round + me;
    rval = 1000 * round + me;
    CHECK_MPI(MPI_Start(&pb));
    CHECK_MPI(MPI_Test(&pb, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1, "a started MPI_Bsend_init is not complete at once (round %d)", round);
    bval = -7; /* the message was copied */
    CHECK_MPI(MPI_Start(&pr));
    CHECK_MPI(MPI_Irecv(&in, 1, MPI_INT, left, 12, MPI_COMM_WORLD, &rb));
    CHECK_MPI(MPI_Wait(&rb, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&pr, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    CHECK(in == 100 * round + left, "buffered round %d: %d", round, in);
    CHECK(inr == 1000 * round + left, "ready round %d: %d", round, inr);
  }
  CHECK_MPI(MPI_Request_free(&pb));
  CHECK_MPI(MPI_Request_free(&pr));

#if !defined(OPEN_MPI) || MPI_VERSION >= 4
  /* MPI_Isendrecv around the ring, receiving from MPI_ANY_SOURCE: the status names the left
   * neighbour, the tag and the count. */
  double out[3] = {me + 0.5, me + 1.5, me + 2.5}, back[3] = {0, 0, 0};
  CHECK_MPI(MPI_Isendrecv(out, 3, MPI_DOUBLE, right, 20 + me, back, 3, MPI_DOUBLE, MPI_ANY_SOURCE,
                          MPI_ANY_TAG, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Wait(&r, &st));
  int count = -1;
  MPI_Get_count(&st, MPI_DOUBLE, &count);
  CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 20 + left && count == 3,
        "status: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
  for (int i = 0; i < 3; ++i) CHECK(back[i] == left + i + 0.5, "Isendrecv %d: %g", i, back[i]);

  /* MPI_Isendrecv_replace of every other int (a vector type): sent rightwards, replaced by
   * the left neighbour's, the ints between untouched. */
  MPI_Datatype every_other;
  CHECK_MPI(MPI_Type_vector(3, 1, 2, MPI_INT, &every_other));
  CHECK_MPI(MPI_Type_commit(&every_other));
  int buf[5] = {me, -1, me * 10, -2, me * 100};
  CHECK_MPI(MPI_Isendrecv_replace(buf, 1, every_other, right, 30, left, 30, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Wait(&r, &st));
  CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 30, "replace status: %d %d", st.MPI_SOURCE,
        st.MPI_TAG);
  CHECK(
      buf[0] == left && buf[2] == left * 10 && buf[4] == left * 100 && buf[1] == -1 && buf[3] == -2,
      "replaced: %d %d %d %d %d", buf[0], buf[1], buf[2], buf[3], buf[4]);
  CHECK_MPI(MPI_Type_free(&every_other));
#endif
  void* detached = NULL;
  int dsize = 0;
  CHECK_MPI(MPI_Buffer_detach(&detached, &dsize));
  free(bbuf);
  return FinishTest();
}
