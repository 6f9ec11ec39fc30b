/* The program a PMPI tool counts (tests/e2e/mpi/pmpi_counter.c, mpi_test's
 * PmpiToolCountsEveryCallOfTheProgram): every rank makes the same MPI calls, each a known
 * number of times, and checks what they did. Several are calls an MPI library may build on
 * other MPI calls (gos does: MPI_Rsend on a send, MPI_Sendrecv_replace on MPI_Sendrecv,
 * MPI_Waitany on MPI_Testany, MPI_Exscan on an allgather, MPI_Reduce_scatter on an allreduce,
 * MPI_Cart_create on MPI_Comm_split, MPI_Type_create_subarray on hvector, struct, resized and
 * free, the window calls on a split, an allgather, a reduce-scatter and point-to-point), so
 * a tool that also sees those inner calls counts more than the program made.
 *
 * The calls per rank, with check.h's (MPI_Init, MPI_Comm_rank, MPI_Comm_size, one
 * MPI_Allreduce, MPI_Finalize): Allgather 1, Allreduce 2, Alltoall 1, Barrier 1, Bcast 1,
 * Cart_create 1, Comm_free 2, Comm_rank 1, Comm_size 1, Comm_split 1, Exscan 1, Finalize 1,
 * Init 1, Irecv 3, Isend 2, Put 1, Recv 1, Reduce 1, Reduce_scatter 1, Rsend 1, Send 1,
 * Sendrecv 1, Sendrecv_replace 1, Type_commit 1, Type_create_subarray 1, Type_free 1,
 * Type_size 1, Wait 2, Waitall 1, Waitany 2, Win_create 1, Win_fence 2, Win_free 1, Wtime 1:
 * 42 calls of 34 functions. At least 2 ranks. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "pmpi");
  const int rank = g_rank, size = g_size;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const double t0 = MPI_Wtime();
  CHECK(t0 >= 0, "MPI_Wtime %g", t0);

  /* Point-to-point around the ring, both ways. */
  int got = -1;
  MPI_Request req[2];
  MPI_Irecv(&got, 1, MPI_INT, left, 1, MPI_COMM_WORLD, &req[0]);
  MPI_Send(&rank, 1, MPI_INT, right, 1, MPI_COMM_WORLD);
  MPI_Wait(&req[0], MPI_STATUS_IGNORE);
  CHECK(got == left, "MPI_Send from the left: %d", got);
  MPI_Isend(&rank, 1, MPI_INT, left, 2, MPI_COMM_WORLD, &req[0]);
  MPI_Recv(&got, 1, MPI_INT, right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&req[0], MPI_STATUS_IGNORE);
  CHECK(got == right, "MPI_Isend from the right: %d", got);
  /* A ready send: its receive is posted before the barrier. */
  MPI_Irecv(&got, 1, MPI_INT, left, 3, MPI_COMM_WORLD, &req[0]);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Rsend(&rank, 1, MPI_INT, right, 3, MPI_COMM_WORLD);
  MPI_Waitall(1, req, MPI_STATUSES_IGNORE);
  CHECK(got == left, "MPI_Rsend from the left: %d", got);
  MPI_Sendrecv(&rank, 1, MPI_INT, right, 4, &got, 1, MPI_INT, left, 4, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  CHECK(got == left, "MPI_Sendrecv from the left: %d", got);
  got = rank;
  MPI_Sendrecv_replace(&got, 1, MPI_INT, left, 5, right, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(got == right, "MPI_Sendrecv_replace from the right: %d", got);
  MPI_Irecv(&got, 1, MPI_INT, left, 6, MPI_COMM_WORLD, &req[0]);
  MPI_Isend(&rank, 1, MPI_INT, right, 6, MPI_COMM_WORLD, &req[1]);
  for (int i = 0; i < 2; ++i) {
    int index = -1;
    MPI_Waitany(2, req, &index, MPI_STATUS_IGNORE);
    CHECK(index == 0 || index == 1, "MPI_Waitany index %d", index);
  }
  CHECK(got == left, "MPI_Isend / MPI_Waitany from the left: %d", got);

  /* Collectives. */
  int value = rank == 0 ? 42 : -1;
  MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
  CHECK(value == 42, "MPI_Bcast %d", value);
  int sum = -1;
  MPI_Reduce(&rank, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) CHECK(sum == size * (size - 1) / 2, "MPI_Reduce %d", sum);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sum == size * (size - 1) / 2, "MPI_Allreduce %d", sum);
  int* all = malloc(sizeof(int) * (size_t)size);
  int* mine = malloc(sizeof(int) * (size_t)size);
  MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < size; ++r) CHECK(all[r] == r, "MPI_Allgather [%d] %d", r, all[r]);
  for (int r = 0; r < size; ++r) mine[r] = rank * 100 + r;
  MPI_Alltoall(mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < size; ++r) CHECK(all[r] == r * 100 + rank, "MPI_Alltoall [%d] %d", r, all[r]);
  int before = -1;
  MPI_Exscan(&rank, &before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank > 0) CHECK(before == rank * (rank - 1) / 2, "MPI_Exscan %d", before);
  int* ones = malloc(sizeof(int) * (size_t)size);
  for (int r = 0; r < size; ++r) ones[r] = 1;
  MPI_Reduce_scatter(mine, &got, ones, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(got == 100 * size * (size - 1) / 2 + size * rank, "MPI_Reduce_scatter %d", got);
  free(ones);

  /* Communicators: a split, and a ring as a Cartesian communicator. */
  MPI_Comm half = MPI_COMM_NULL, ring = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  CHECK(half != MPI_COMM_NULL, "MPI_Comm_split gave MPI_COMM_NULL");
  MPI_Comm_free(&half);
  const int dims[1] = {size}, periods[1] = {1};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  CHECK(ring != MPI_COMM_NULL, "MPI_Cart_create gave MPI_COMM_NULL");
  MPI_Comm_free(&ring);

  /* A derived datatype. */
  const int sizes[2] = {4, 6}, subsizes[2] = {2, 3}, starts[2] = {1, 2};
  MPI_Datatype sub = MPI_DATATYPE_NULL;
  MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &sub);
  MPI_Type_commit(&sub);
  int bytes = -1;
  MPI_Type_size(sub, &bytes);
  CHECK(bytes == (int)sizeof(int) * 6, "MPI_Type_size of the subarray %d", bytes);
  MPI_Type_free(&sub);

  /* One-sided: each rank puts its rank into its right neighbour's window. */
  int cell = -1;
  MPI_Win win = MPI_WIN_NULL;
  MPI_Win_create(&cell, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_fence(0, win);
  MPI_Put(&rank, 1, MPI_INT, right, 0, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  CHECK(cell == left, "MPI_Put from the left: %d", cell);
  MPI_Win_free(&win);

  free(all);
  free(mine);
  return FinishTest();
}
