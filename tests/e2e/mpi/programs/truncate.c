/* truncate: with MPI_ERRORS_RETURN, a message longer than the receive buffer makes the
 * receive return MPI_ERR_TRUNCATE (blocking and non-blocking), nothing past the buffer is
 * written, MPI_Error_string describes the error, and communication goes on afterwards. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "truncate");
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  const int partner = Partner();
  int out[10];
  for (int i = 0; i < 10; ++i) out[i] = g_rank * 100 + i;
  MPI_Request reqs[3];
  CHECK_MPI(MPI_Isend(out, 10, MPI_INT, partner, 1, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Isend(out, 10, MPI_INT, partner, 2, MPI_COMM_WORLD, &reqs[1]));
  CHECK_MPI(MPI_Isend(out, 10, MPI_INT, partner, 3, MPI_COMM_WORLD, &reqs[2]));

  int in[10];
  for (int i = 0; i < 10; ++i) in[i] = -1;
  MPI_Status st;
  int rc = MPI_Recv(in, 5, MPI_INT, partner, 1, MPI_COMM_WORLD, &st);
  CHECK(rc == MPI_ERR_TRUNCATE, "blocking receive of 10 ints into 5: rc %d, expected %d", rc,
        MPI_ERR_TRUNCATE);
  for (int i = 5; i < 10; ++i) CHECK(in[i] == -1, "in[%d] = %d written past the buffer", i, in[i]);
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  CHECK_MPI(MPI_Error_string(MPI_ERR_TRUNCATE, text, &len));
  CHECK(len > 0 && (int)strlen(text) == len, "MPI_Error_string: len %d, text '%s'", len, text);

  for (int i = 0; i < 10; ++i) in[i] = -1;
  MPI_Request r;
  CHECK_MPI(MPI_Irecv(in, 4, MPI_INT, partner, 2, MPI_COMM_WORLD, &r));
  rc = MPI_Wait(&r, &st);
  CHECK(rc == MPI_ERR_TRUNCATE, "Irecv+Wait of 10 ints into 4: rc %d, expected %d", rc,
        MPI_ERR_TRUNCATE);
  for (int i = 4; i < 10; ++i) CHECK(in[i] == -1, "in[%d] = %d written past the buffer", i, in[i]);

  /* A fitting message after the truncations is received whole. */
  for (int i = 0; i < 10; ++i) in[i] = -1;
  rc = MPI_Recv(in, 10, MPI_INT, partner, 3, MPI_COMM_WORLD, &st);
  CHECK(rc == MPI_SUCCESS, "receive after truncation: rc %d", rc);
  for (int i = 0; i < 10; ++i) CHECK(in[i] == partner * 100 + i, "in[%d] = %d", i, in[i]);
  rc = MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
  CHECK(rc == MPI_SUCCESS, "sends: rc %d", rc);
  return FinishTest();
}
