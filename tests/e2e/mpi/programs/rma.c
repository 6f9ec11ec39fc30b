/* One-sided communication with fence synchronization (MPI_Win_create, MPI_Put, MPI_Get,
 * MPI_Accumulate, MPI_Win_fence, MPI_Win_free; libsc, p4est's toolkit, counts its senders
 * with MPI_Accumulate between fences): puts and gets to every rank and to itself, a
 * derived target type (a matrix column) and origin type, a put and a get beyond the eager limit,
 * accumulates from every rank on one location, MPI_REPLACE from one origin applied in call
 * order, epochs kept apart (a store between fences is seen by the next epoch's accumulate),
 * MPI_PROC_NULL targets, windows of 0 bytes, and a put outside the target's window refused. */
#include "check.h"

enum { kBlock = 4, kBig = 40000 };

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "rma");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = g_rank, size = g_size;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;

  /* Every rank puts a block into every rank's window (its own too), at block `rank`. */
  int* mem = malloc(sizeof(int) * kBlock * (size_t)size);
  for (int i = 0; i < kBlock * size; ++i) mem[i] = -1;
  MPI_Win win = MPI_WIN_NULL;
  CHECK_MPI(MPI_Win_create(mem, (MPI_Aint)(sizeof(int) * kBlock * (size_t)size), sizeof(int),
                           MPI_INFO_NULL, MPI_COMM_WORLD, &win));
  CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  CHECK_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
  int out[kBlock];
  for (int i = 0; i < kBlock; ++i) out[i] = rank * 100 + i;
  for (int t = 0; t < size; ++t) {
    CHECK_MPI(MPI_Put(out, kBlock, MPI_INT, t, rank * kBlock, kBlock, MPI_INT, win));
  }
  CHECK_MPI(MPI_Put(out, kBlock, MPI_INT, MPI_PROC_NULL, 0, kBlock, MPI_INT, win));
  /* The origin buffer may change once the epoch is over: the put took it at the fence at the
   * latest, never later. */
  CHECK_MPI(MPI_Win_fence(0, win));
  for (int i = 0; i < kBlock; ++i) out[i] = -7;
  for (int s = 0; s < size; ++s) {
    for (int i = 0; i < kBlock; ++i) {
      CHECK(mem[s * kBlock + i] == s * 100 + i, "put from %d, element %d: %d", s, i,
            mem[s * kBlock + i]);
    }
  }
  /* Gets: the right neighbour's block `left`, and our own block `rank` from ourselves. */
  int from_right[kBlock], from_self[kBlock];
  for (int i = 0; i < kBlock; ++i) from_right[i] = from_self[i] = -2;
  CHECK_MPI(MPI_Get(from_right, kBlock, MPI_INT, right, left * kBlock, kBlock, MPI_INT, win));
  CHECK_MPI(MPI_Get(from_self, kBlock, MPI_INT, rank, rank * kBlock, kBlock, MPI_INT, win));
  CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
  for (int i = 0; i < kBlock; ++i) {
    CHECK(from_right[i] == left * 100 + i, "get from %d, element %d: %d", right, i, from_right[i]);
    CHECK(from_self[i] == rank * 100 + i, "get from itself, element %d: %d", i, from_self[i]);
  }

#ifdef GOS_MPI_H_
  /* Outside the target's window: refused at the call (MPI leaves the detection open). */
  {
    const int rc = MPI_Put(out, 1, MPI_INT, right, kBlock * size, 1, MPI_INT, win);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "put past the window: class %d", cls);
    const int rc2 = MPI_Put(out, 2, MPI_INT, right, kBlock * size - 1, 2, MPI_INT, win);
    MPI_Error_class(rc2, &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "put across the window's end: class %d", cls);
  }
#endif
  CHECK_MPI(MPI_Win_free(&win));
  CHECK(win == MPI_WIN_NULL, "MPI_Win_free left a window");

  /* libsc's census: each rank adds 1 to the counter of each rank it sends to (here itself,
   * its right neighbour, and rank 0); rank 0 also gets three adds of (r + 1) from every r. */
  {
    int counter[2] = {0, 0};
    MPI_Win cwin;
    CHECK_MPI(
        MPI_Win_create(counter, sizeof counter, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &cwin));
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, cwin));
    const int one = 1, mine = rank + 1;
    CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT, rank, 0, 1, MPI_INT, MPI_SUM, cwin));
    if (right != rank) {
      CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, cwin));
    }
    if (rank != 0 && right != 0) {
      CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, cwin));
    }
    for (int k = 0; k < 3; ++k) {
      CHECK_MPI(MPI_Accumulate(&mine, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, cwin));
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOSUCCEED, cwin));
    int want = 1 + (size > 1 ? 1 : 0);
    if (rank == 0) want = size;
    CHECK(counter[0] == want, "census: %d senders, want %d", counter[0], want);
    if (rank == 0) {
      CHECK(counter[1] == 3 * size * (size + 1) / 2, "sum of adds: %d", counter[1]);
    }

    /* Epochs apart: a store after a fence comes before the next epoch's accumulate. */
    counter[0] = 1000;
    CHECK_MPI(MPI_Win_fence(0, cwin));
    const int five = 5;
    CHECK_MPI(MPI_Accumulate(&five, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, cwin));
    CHECK_MPI(MPI_Win_fence(0, cwin));
    CHECK(counter[0] == 1005, "store then accumulate: %d", counter[0]);
    /* The load above and the neighbour's next accumulates must not share an epoch. */
    CHECK_MPI(MPI_Win_fence(0, cwin));

    /* MPI_REPLACE from one origin on one location lands in call order; MPI_MAX on another. */
    const int first = 1, second = 2;
    CHECK_MPI(MPI_Accumulate(&first, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_REPLACE, cwin));
    CHECK_MPI(MPI_Accumulate(&second, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_REPLACE, cwin));
    CHECK_MPI(MPI_Accumulate(&mine, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_MAX, cwin));
    CHECK_MPI(MPI_Win_fence(0, cwin));
    CHECK(counter[0] == 2, "replace, replace: %d", counter[0]);
    if (rank == 0) {
      const int was = 3 * size * (size + 1) / 2;
      CHECK(counter[1] == (was > size ? was : size), "max: %d", counter[1]);
    }
    CHECK_MPI(MPI_Win_free(&cwin));
  }

  /* Derived types: a contiguous block put into the right neighbour's matrix column 1, then the
   * left neighbour's column 1 got into our column 2 (displacement unit 1: bytes). */
  {
    enum { kRows = 5, kCols = 3 };
    double matrix[kRows * kCols], back[kRows * kCols];
    for (int i = 0; i < kRows * kCols; ++i) matrix[i] = back[i] = -1.0;
    MPI_Datatype column;
    CHECK_MPI(MPI_Type_vector(kRows, 1, kCols, MPI_DOUBLE, &column));
    CHECK_MPI(MPI_Type_commit(&column));
    MPI_Win mwin;
    CHECK_MPI(MPI_Win_create(matrix, sizeof matrix, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mwin));
    CHECK_MPI(MPI_Win_fence(0, mwin));
    double values[kRows];
    for (int i = 0; i < kRows; ++i) values[i] = rank + 0.5 * i;
    CHECK_MPI(MPI_Put(values, kRows, MPI_DOUBLE, right, sizeof(double), 1, column, mwin));
    CHECK_MPI(MPI_Win_fence(0, mwin));
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < kCols; ++j) {
        const double want = j == 1 ? left + 0.5 * i : -1.0;
        CHECK(matrix[i * kCols + j] == want, "matrix[%d][%d] = %g, want %g", i, j,
              matrix[i * kCols + j], want);
      }
    }
    /* The type may be freed while the get is pending (MPI keeps it until done). */
    CHECK_MPI(MPI_Get(back + 2, 1, column, left, sizeof(double), 1, column, mwin));
    CHECK_MPI(MPI_Type_free(&column));
    CHECK_MPI(MPI_Win_fence(0, mwin));
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < kCols; ++j) {
        const double want = j == 2 ? (left + size - 1) % size + 0.5 * i : -1.0;
        CHECK(back[i * kCols + j] == want, "back[%d][%d] = %g, want %g", i, j, back[i * kCols + j],
              want);
      }
    }
    CHECK_MPI(MPI_Win_free(&mwin));
  }

  /* Beyond the eager limit: kBig doubles to the right neighbour; rank 0 exposes nothing. */
  {
    double* big = malloc(sizeof(double) * kBig);
    double* src = malloc(sizeof(double) * kBig);
    for (int i = 0; i < kBig; ++i) {
      big[i] = -1.0;
      src[i] = rank * 1e6 + i;
    }
    const int exposes = rank != 0 || size == 1;
    MPI_Win bwin;
    CHECK_MPI(MPI_Win_create(exposes ? big : NULL, exposes ? (MPI_Aint)(sizeof(double) * kBig) : 0,
                             sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &bwin));
    CHECK_MPI(MPI_Win_fence(0, bwin));
    const int to = right == 0 && size > 1 ? MPI_PROC_NULL : right;
    CHECK_MPI(MPI_Put(src, kBig, MPI_DOUBLE, to, 0, kBig, MPI_DOUBLE, bwin));
    CHECK_MPI(MPI_Win_fence(0, bwin));
    if (exposes) {
      int bad = 0;
      for (int i = 0; i < kBig; ++i) bad += big[i] != left * 1e6 + i;
      CHECK(bad == 0, "%d of %d doubles of the big put wrong (first %g)", bad, kBig, big[0]);
    }
    /* And back, just as big: what we put there. */
    double* again = malloc(sizeof(double) * kBig);
    for (int i = 0; i < kBig; ++i) again[i] = -3.0;
    CHECK_MPI(MPI_Get(again, kBig, MPI_DOUBLE, to, 0, kBig, MPI_DOUBLE, bwin));
    CHECK_MPI(MPI_Win_fence(0, bwin));
    if (to != MPI_PROC_NULL) {
      int bad = 0;
      for (int i = 0; i < kBig; ++i) bad += again[i] != src[i];
      CHECK(bad == 0, "%d of %d doubles of the big get wrong (first %g)", bad, kBig, again[0]);
    }
    free(again);
    CHECK_MPI(MPI_Win_free(&bwin));
    free(big);
    free(src);
  }

  free(mem);
  return FinishTest();
}
