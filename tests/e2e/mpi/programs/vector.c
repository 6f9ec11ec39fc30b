/* vector: derived datatypes. A matrix column as MPI_Type_vector sent to the partner and
 * received contiguous (and the reverse: contiguous in, scattered into a column, the rest of
 * the matrix untouched); MPI_Type_contiguous; a vector of blocks; MPI_Get_count in derived and
 * basic units; a derived type in a collective (Bcast of a column); MPI_Type_free. */
#include "check.h"

enum { kRows = 8, kCols = 6 };

static double M(int owner, int i, int j) { return owner * 1000.0 + i * 10.0 + j; }

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "vector");
  const int partner = Partner();
  double mat[kRows][kCols], col[kRows];
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kCols; ++j) mat[i][j] = M(g_rank, i, j);
  }
  MPI_Datatype column;
  MPI_Type_vector(kRows, 1, kCols, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);

  /* Column 4 out as a vector, in as 8 doubles. */
  MPI_Request r;
  MPI_Status st;
  MPI_Isend(&mat[0][4], 1, column, partner, 1, MPI_COMM_WORLD, &r);
  MPI_Recv(col, kRows, MPI_DOUBLE, partner, 1, MPI_COMM_WORLD, &st);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  int count = -1;
  MPI_Get_count(&st, MPI_DOUBLE, &count);
  CHECK(count == kRows, "column as doubles: count %d", count);
  for (int i = 0; i < kRows; ++i) {
    CHECK(col[i] == M(partner, i, 4), "col[%d] = %g, expected %g", i, col[i], M(partner, i, 4));
  }

  /* 8 doubles out, into column 1 of a fresh matrix. */
  double dst[kRows][kCols];
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kCols; ++j) dst[i][j] = -1.0;
    col[i] = 500.0 + g_rank * 10 + i;
  }
  MPI_Isend(col, kRows, MPI_DOUBLE, partner, 2, MPI_COMM_WORLD, &r);
  MPI_Recv(&dst[0][1], 1, column, partner, 2, MPI_COMM_WORLD, &st);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Get_count(&st, column, &count);
  CHECK(count == 1, "received as one column: count %d", count);
  int bad = 0;
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kCols; ++j) {
      bad += dst[i][j] != (j == 1 ? 500.0 + partner * 10 + i : -1.0);
    }
  }
  CHECK(bad == 0, "scatter into a column: %d elements wrong", bad);

  /* Contiguous triples; a vector of 3 blocks of 2 ints with stride 5. */
  MPI_Datatype triple, blocks;
  MPI_Type_contiguous(3, MPI_INT, &triple);
  MPI_Type_commit(&triple);
  MPI_Type_vector(3, 2, 5, MPI_INT, &blocks);
  MPI_Type_commit(&blocks);
  int tri[12], tri_in[13], strided[15], packed[6];
  for (int i = 0; i < 12; ++i) tri[i] = g_rank * 100 + i;
  for (int i = 0; i < 15; ++i) strided[i] = g_rank * 100 + 50 + i;
  MPI_Request rs[2];
  MPI_Isend(tri, 4, triple, partner, 3, MPI_COMM_WORLD, &rs[0]);
  MPI_Isend(strided, 1, blocks, partner, 4, MPI_COMM_WORLD, &rs[1]);
  memset(tri_in, 0xff, sizeof tri_in);
  MPI_Recv(tri_in, 13, MPI_INT, partner, 3, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK(count == 12, "4 triples as ints: count %d", count);
  MPI_Get_count(&st, triple, &count);
  CHECK(count == 4, "4 triples as triples: count %d", count);
  bad = 0;
  for (int i = 0; i < 12; ++i) bad += tri_in[i] != partner * 100 + i;
  CHECK(bad == 0 && tri_in[12] == -1, "triples: %d wrong, guard %d", bad, tri_in[12]);
  MPI_Recv(packed, 6, MPI_INT, partner, 4, MPI_COMM_WORLD, &st);
  bad = 0;
  for (int b = 0; b < 3; ++b) {
    for (int k = 0; k < 2; ++k) bad += packed[b * 2 + k] != partner * 100 + 50 + b * 5 + k;
  }
  CHECK(bad == 0, "blocks of 2 with stride 5: %d wrong", bad);
  MPI_Waitall(2, rs, MPI_STATUSES_IGNORE);

  /* A column in a collective: rank 0's column 0 to everyone's column 5. */
  for (int i = 0; i < kRows; ++i) mat[i][5] = g_rank == 0 ? M(0, i, 0) : -2.0;
  MPI_Bcast(g_rank == 0 ? &mat[0][0] : &mat[0][5], 1, column, 0, MPI_COMM_WORLD);
  bad = 0;
  for (int i = 0; i < kRows; ++i) bad += mat[i][g_rank == 0 ? 0 : 5] != M(0, i, 0);
  CHECK(bad == 0, "Bcast of a column: %d wrong", bad);

  MPI_Type_free(&column);
  MPI_Type_free(&triple);
  MPI_Type_free(&blocks);
  CHECK(column == MPI_DATATYPE_NULL, "Type_free did not null the handle");
  return FinishTest();
}
