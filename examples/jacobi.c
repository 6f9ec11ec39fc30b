/* jacobi: 2D heat equation on an N x N grid (first argument, default 256) by Jacobi iteration,
 * at most MAX_ITER iterations (second argument, default 1000). The top edge is held at 1, the
 * other edges at 0. Rows are split into blocks over the ranks; each iteration exchanges the
 * halo rows with non-blocking point-to-point (Isend/Irecv/Waitall), and every CHECK iterations
 * (third argument, default 10) an Allreduce(MAX) of the largest change decides convergence
 * (below TOL = 1e-8).
 *
 * Every grid point is updated with the same arithmetic whatever the decomposition, the
 * residual is a maximum (exact), and the checksum is summed row by row in row order on rank 0
 * from row sums gathered there: iterations and checksum are bit-identical for any number of
 * ranks. Prints "jacobi: N=.. ranks=.. iterations=.. residual=.. checksum=%.10e time=.. s". */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double kTol = 1e-8;

/* Interior rows 1..n-2 in blocks: the first (rows % size) ranks get one more. */
static void Block(int n, int size, int r, int* first, int* count) {
  const int rows = n - 2, base = rows / size, extra = rows % size;
  *first = 1 + r * base + (r < extra ? r : extra);
  *count = base + (r < extra ? 1 : 0);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int n = argc > 1 ? atoi(argv[1]) : 256;
  const int max_iter = argc > 2 ? atoi(argv[2]) : 1000;
  int check = argc > 3 ? atoi(argv[3]) : 10;
  if (n < 3) n = 3;
  if (check < 1) check = 1;

  int first, count;
  Block(n, size, rank, &first, &count);
  /* Local rows 0 and count+1 are halos (or the fixed top/bottom edges). */
  const size_t cells = (size_t)(count + 2) * (size_t)n;
  double* u = calloc(cells, sizeof(double));
  double* v = calloc(cells, sizeof(double));
  if (u == NULL || v == NULL) {
    fprintf(stderr, "jacobi: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (first == 1) {
    for (int j = 0; j < n; ++j) u[j] = v[j] = 1.0;
  }
  int up = MPI_PROC_NULL, down = MPI_PROC_NULL;
  if (count > 0) {
    if (rank > 0) up = rank - 1;
    int nf, nc;
    if (rank + 1 < size) {
      Block(n, size, rank + 1, &nf, &nc);
      if (nc > 0) down = rank + 1;
    }
  }

  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  int iter = 0;
  double residual = INFINITY;
  while (iter < max_iter) {
    MPI_Request req[4];
    MPI_Irecv(&u[0], n, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(&u[(size_t)(count + 1) * n], n, MPI_DOUBLE, down, 0, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(&u[(size_t)1 * n], n, MPI_DOUBLE, up, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(&u[(size_t)count * n], n, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);

    double local = 0.0;
    for (int i = 1; i <= count; ++i) {
      const double* above = &u[(size_t)(i - 1) * n];
      const double* row = &u[(size_t)i * n];
      const double* below = &u[(size_t)(i + 1) * n];
      double* out = &v[(size_t)i * n];
      for (int j = 1; j < n - 1; ++j) {
        out[j] = 0.25 * (above[j] + below[j] + row[j - 1] + row[j + 1]);
        const double d = fabs(out[j] - row[j]);
        if (d > local) local = d;
      }
    }
    double* t = u;
    u = v;
    v = t;
    ++iter;
    if (iter % check == 0 || iter == max_iter) {
      MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (residual < kTol) break;
    }
  }
  const double elapsed = MPI_Wtime() - start;

  /* Row sums of the owned rows, gathered in row order on rank 0. */
  double* sums = malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
  for (int i = 1; i <= count; ++i) {
    double s = 0.0;
    for (int j = 0; j < n; ++j) s += u[(size_t)i * n + j];
    sums[i - 1] = s;
  }
  int* counts = NULL;
  int* displs = NULL;
  double* all = NULL;
  if (rank == 0) {
    counts = malloc((size_t)size * sizeof(int));
    displs = malloc((size_t)size * sizeof(int));
    all = malloc((size_t)n * sizeof(double));
    for (int r = 0; r < size; ++r) {
      int f;
      Block(n, size, r, &f, &counts[r]);
      displs[r] = f - 1;
    }
  }
  MPI_Gatherv(sums, count, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double checksum = (double)n; /* row 0: all ones; row n-1: all zeros */
    for (int i = 0; i < n - 2; ++i) checksum += all[i];
    printf("jacobi: N=%d ranks=%d iterations=%d residual=%.6e checksum=%.10e time=%.6f s\n", n,
           size, iter, residual, checksum, elapsed);
    free(counts);
    free(displs);
    free(all);
  }
  free(sums);
  free(u);
  free(v);
  MPI_Finalize();
  return 0;
}
