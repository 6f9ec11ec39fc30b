/* nbcoll: nonblocking collectives. MPI_Ibarrier really is nonblocking: rank 0 waits for it
 * while rank 1, having entered it, sits in a receive that rank 0 satisfies only after its
 * wait returns. MPI_Ibcast, MPI_Iallreduce (predefined and user op, in place), MPI_Ireduce,
 * MPI_Iallgather and MPI_Ialltoall overlap one another and complete through MPI_Test,
 * MPI_Waitall and MPI_Waitany. Plain portable MPI: the answers are Open MPI's too. */
#include "check.h"

static void Max3(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = (const int*)in;
  int* b = (int*)inout;
  for (int i = 0; i < *len; ++i) b[i] = a[i] > b[i] ? a[i] : b[i];
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "nbcoll");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Request r;

  /* Ibarrier entered by everyone, then rank 1 blocks in a receive from rank 0. */
  CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r));
  if (g_size >= 2 && g_rank == 1) {
    int v = -1;
    CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(v == 33, "got %d", v);
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  } else {
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    if (g_size >= 2 && g_rank == 0) {
      int v = 33;
      CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 1, 3, MPI_COMM_WORLD));
    }
  }
  CHECK(r == MPI_REQUEST_NULL, "Ibarrier request not freed");

  /* Several at once, completed in some order. */
  const int root = g_size - 1;
  double b[4] = {0, 0, 0, 0};
  if (g_rank == root) {
    for (int i = 0; i < 4; ++i) b[i] = 1.5 * i + root;
  }
  long sum_in = g_rank + 1, sum_out = -1;
  int mx[3] = {g_rank, -g_rank, g_rank % 2}, red[3] = {-9, -9, -9};
  int *gat = malloc(sizeof(int) * 2 * (size_t)g_size),
      *a2a_in = malloc(sizeof(int) * (size_t)g_size),
      *a2a_out = malloc(sizeof(int) * (size_t)g_size);
  int mine[2] = {g_rank * 10, g_rank * 10 + 1};
  for (int i = 0; i < g_size; ++i) a2a_in[i] = g_rank * 1000 + i;
  MPI_Op max3;
  CHECK_MPI(MPI_Op_create(Max3, 1, &max3));
  MPI_Request reqs[5];
  CHECK_MPI(MPI_Ibcast(b, 4, MPI_DOUBLE, root, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Iallreduce(&sum_in, &sum_out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &reqs[1]));
  CHECK_MPI(MPI_Ireduce(mx, red, 3, MPI_INT, max3, 0, MPI_COMM_WORLD, &reqs[2]));
  CHECK_MPI(MPI_Iallgather(mine, 2, MPI_INT, gat, 2, MPI_INT, MPI_COMM_WORLD, &reqs[3]));
  CHECK_MPI(MPI_Ialltoall(a2a_in, 1, MPI_INT, a2a_out, 1, MPI_INT, MPI_COMM_WORLD, &reqs[4]));
  /* Test the broadcast now and then while they run. */
  int flag = 0;
  for (int i = 0; i < 200 && !flag; ++i) CHECK_MPI(MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE));
  if (!flag) CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
  int index = -1;
  CHECK_MPI(MPI_Waitany(4, &reqs[1], &index, MPI_STATUS_IGNORE));
  CHECK(index >= 0 && index < 4, "Waitany index %d", index);
  CHECK_MPI(MPI_Waitall(4, &reqs[1], MPI_STATUSES_IGNORE));
  for (int i = 0; i < 4; ++i) CHECK(b[i] == 1.5 * i + root, "Ibcast b[%d] = %g", i, b[i]);
  CHECK(sum_out == (long)g_size * (g_size + 1) / 2, "Iallreduce %ld", sum_out);
  if (g_rank == 0) {
    CHECK(red[0] == g_size - 1 && red[1] == 0 && red[2] == (g_size > 1 ? 1 : 0), "Ireduce %d %d %d",
          red[0], red[1], red[2]);
  } else {
    CHECK(red[0] == -9, "Ireduce wrote on a non-root");
  }
  for (int i = 0; i < g_size; ++i) {
    CHECK(gat[2 * i] == i * 10 && gat[2 * i + 1] == i * 10 + 1, "Iallgather block %d", i);
    CHECK(a2a_out[i] == i * 1000 + g_rank, "Ialltoall from %d: %d", i, a2a_out[i]);
  }

  /* In place. */
  int v = g_rank + 1;
  CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_PROD, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  int fact = 1;
  for (int i = 1; i <= g_size; ++i) fact *= i;
  CHECK(v == fact, "Iallreduce in place %d, expected %d", v, fact);

  MPI_Op_free(&max3);
  free(gat);
  free(a2a_in);
  free(a2a_out);
  return FinishTest();
}
