/* Compiled and linked (not run) by the mpi_gos_cc_* tests: a small program using a spread of
 * the subset, so a missing declaration or definition fails the test. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  double in = rank;
  double sum = 0;
  MPI_Allreduce(&in, &sum, 1, MPI_DOUBLE, MPI_SUM, half);

  MPI_Datatype col;
  MPI_Type_vector(4, 1, 4, MPI_INT, &col);
  MPI_Type_commit(&col);
  int m[16] = {0};
  MPI_Request reqs[2];
  MPI_Status st[2];
  MPI_Irecv(m, 1, col, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(m + 1, 1, col, (rank + 1) % size, 7, MPI_COMM_WORLD, &reqs[1]);
  MPI_Waitall(2, reqs, st);
  int count = 0;
  MPI_Get_count(&st[0], col, &count);
  MPI_Type_free(&col);

  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  printf("%d/%d on %s: %g %d %.3f\n", rank, size, name, sum, count, MPI_Wtime());
  /* Sub-grids, attribute caching, MPI-1 names, distributed graphs. */
  int dims[2] = {0, 0};
  const int periods[2] = {0, 0}, keep[2] = {1, 0};
  MPI_Dims_create(size, 2, dims);
  MPI_Comm cart, rows, graph;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  MPI_Cart_sub(cart, keep, &rows);
  int keyval = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &keyval, NULL);
  MPI_Comm_set_attr(rows, keyval, &rank);
  MPI_Attr_put(rows, keyval, &size);
  MPI_Comm_delete_attr(rows, keyval);
  MPI_Comm_free_keyval(&keyval);
  MPI_Aint extent = 0;
  MPI_Type_extent(MPI_DOUBLE, &extent);
  MPI_Errhandler_set(rows, MPI_ERRORS_RETURN);
  const int ring[1] = {(rank + 1) % size};
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, ring, MPI_UNWEIGHTED, 1, ring, MPI_UNWEIGHTED,
                                 MPI_INFO_NULL, 0, &graph);
  int got = -1;
  MPI_Neighbor_allgather(&rank, 1, MPI_INT, &got, 1, MPI_INT, graph);
  /* One-sided communication with fences; a handle through its Fortran form. */
  int cell = 0;
  MPI_Win win = MPI_WIN_NULL;
  MPI_Win_create(&cell, sizeof cell, sizeof cell, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
  MPI_Accumulate(&rank, 1, MPI_INT, ring[0], 0, 1, MPI_INT, MPI_SUM, win);
  MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOSUCCEED, win);
  MPI_Win_free(&win);
  const MPI_Fint fortran_comm = MPI_Comm_c2f(graph);
  MPI_Comm_free(&graph);
  MPI_Comm_free(&rows);
  MPI_Comm_free(&cart);
  MPI_Comm_free(&half);
  printf("%d %d\n", cell, MPI_Comm_f2c(fortran_comm) == MPI_COMM_NULL);
  MPI_Finalize();
  return 0;
}
