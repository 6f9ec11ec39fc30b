/* zero_self: zero-byte messages (count 0, also into a larger buffer, which stays untouched),
 * messages to oneself (Isend then Recv, Irecv then blocking Send, Sendrecv), and
 * MPI_PROC_NULL (sends vanish; receives complete at once with source MPI_PROC_NULL, tag
 * MPI_ANY_TAG, count 0). */
#include "check.h"

enum { kSelfLen = 1000 };

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "zero_self");
  const int partner = Partner();

  /* Zero bytes to the partner, twice: received with count 0 and with count 10. */
  int dummy = 0;
  MPI_Request zr[2];
  MPI_Isend(&dummy, 0, MPI_INT, partner, 4, MPI_COMM_WORLD, &zr[0]);
  MPI_Isend(&dummy, 0, MPI_BYTE, partner, 5, MPI_COMM_WORLD, &zr[1]);
  MPI_Status st;
  int count = -1;
  MPI_Recv(&dummy, 0, MPI_INT, partner, 4, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK(count == 0, "zero-byte message: count %d", count);
  CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == 4, "status source %d tag %d", st.MPI_SOURCE,
        st.MPI_TAG);
  unsigned char ten[10];
  memset(ten, 77, sizeof ten);
  MPI_Recv(ten, 10, MPI_BYTE, partner, 5, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_BYTE, &count);
  CHECK(count == 0, "zero-byte message into 10: count %d", count);
  for (int i = 0; i < 10; ++i) CHECK(ten[i] == 77, "ten[%d] changed to %d", i, ten[i]);
  MPI_Waitall(2, zr, MPI_STATUSES_IGNORE);

  /* Self: Isend then Recv. */
  int* out = malloc(sizeof(int) * kSelfLen);
  int* in = malloc(sizeof(int) * kSelfLen);
  for (int i = 0; i < kSelfLen; ++i) out[i] = (int)Pattern((uint32_t)g_rank, (size_t)i);
  MPI_Request r;
  MPI_Isend(out, kSelfLen, MPI_INT, g_rank, 6, MPI_COMM_WORLD, &r);
  memset(in, 0, sizeof(int) * kSelfLen);
  MPI_Recv(in, kSelfLen, MPI_INT, g_rank, 6, MPI_COMM_WORLD, &st);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  CHECK(memcmp(in, out, sizeof(int) * kSelfLen) == 0, "self Isend/Recv: data differ");
  CHECK(st.MPI_SOURCE == g_rank, "self: source %d", st.MPI_SOURCE);

  /* Self: Irecv first, then a blocking Send (it has a matching receive, so it completes). */
  memset(in, 0, sizeof(int) * kSelfLen);
  MPI_Irecv(in, kSelfLen, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &r);
  MPI_Send(out, kSelfLen, MPI_INT, g_rank, 7, MPI_COMM_WORLD);
  MPI_Wait(&r, &st);
  CHECK(memcmp(in, out, sizeof(int) * kSelfLen) == 0, "self Irecv/Send: data differ");
  CHECK(st.MPI_SOURCE == g_rank && st.MPI_TAG == 7, "self: source %d tag %d", st.MPI_SOURCE,
        st.MPI_TAG);

  /* Self: Sendrecv. */
  memset(in, 0, sizeof(int) * kSelfLen);
  MPI_Sendrecv(out, kSelfLen, MPI_INT, g_rank, 8, in, kSelfLen, MPI_INT, g_rank, 8, MPI_COMM_WORLD,
               &st);
  CHECK(memcmp(in, out, sizeof(int) * kSelfLen) == 0, "self Sendrecv: data differ");

  /* Zero bytes to oneself. */
  MPI_Isend(NULL, 0, MPI_INT, g_rank, 9, MPI_COMM_WORLD, &r);
  MPI_Recv(NULL, 0, MPI_INT, g_rank, 9, MPI_COMM_WORLD, &st);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK(count == 0 && st.MPI_TAG == 9, "zero bytes to self: count %d tag %d", count, st.MPI_TAG);

  /* MPI_PROC_NULL. */
  MPI_Send(out, kSelfLen, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
  in[0] = 12345;
  MPI_Recv(in, kSelfLen, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "receive from MPI_PROC_NULL: source %d", st.MPI_SOURCE);
  CHECK(st.MPI_TAG == MPI_ANY_TAG, "receive from MPI_PROC_NULL: tag %d", st.MPI_TAG);
  CHECK(count == 0, "receive from MPI_PROC_NULL: count %d", count);
  CHECK(in[0] == 12345, "receive from MPI_PROC_NULL wrote the buffer");
  MPI_Irecv(in, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r);
  int flag = 0;
  MPI_Test(&r, &flag, &st);
  CHECK(flag, "Irecv from MPI_PROC_NULL not complete at once");
  free(out);
  free(in);
  return FinishTest();
}
