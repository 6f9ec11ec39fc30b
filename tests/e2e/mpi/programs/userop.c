/* userop: MPI_Op_create reductions. A non-commutative op (2x2 matrix product, on a contiguous
 * type of 4 doubles) with MPI_Allreduce, MPI_Reduce to a non-zero root, MPI_Scan and
 * MPI_Exscan: the results must be the products in rank order. A commutative op on a strided
 * vector type (max of absolute values) leaves the gaps of the receive buffer alone. Then
 * MPI_Op_free. Plain portable MPI: the answers are Open MPI's too. */
#include <math.h>

#include "check.h"

/* inout = in x inout, for *len 2x2 matrices (row-major). */
static void MatMul(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const double* a = (const double*)in;
  double* b = (double*)inout;
  for (int k = 0; k < *len; ++k, a += 4, b += 4) {
    double r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                   a[2] * b[1] + a[3] * b[3]};
    memcpy(b, r, sizeof r);
  }
}

/* inout = max(|in|, |inout|), on vectors of 2 blocks of 1 int, stride 2 (ints 0 and 2). */
static void MaxAbs(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = (const int*)in;
  int* b = (int*)inout;
  for (int k = 0; k < *len; ++k) {
    for (int j = 0; j < 3; j += 2) {
      int x = abs(a[4 * k + j]), y = abs(b[4 * k + j]);
      b[4 * k + j] = x > y ? x : y;
    }
  }
}

/* Rank r's matrices: element 0 = [[1, r+1], [0, 1]] (these commute), element 1 = [[1, r], [r, 1]]
 * + a rotation-ish term that does not commute. */
static void Mine(int r, double m[8]) {
  double e0[4] = {1, r + 1, 0, 1}, e1[4] = {r + 1, 1, 0.5 * r, 2};
  memcpy(m, e0, sizeof e0);
  memcpy(m + 4, e1, sizeof e1);
}

/* m0 x m1 x ... x mk (k < 0: nothing). */
static void Product(int k, double out[8]) {
  double acc[8] = {1, 0, 0, 1, 1, 0, 0, 1};
  for (int r = 0; r <= k; ++r) {
    double m[8];
    Mine(r, m);
    int two = 2;
    /* acc = acc x m: MatMul computes inout = in x inout, so multiply m by acc from the left. */
    MatMul(acc, m, &two, NULL);
    memcpy(acc, m, sizeof acc);
  }
  memcpy(out, acc, sizeof acc);
}

static int Near(const double* a, const double* b, int n) {
  for (int i = 0; i < n; ++i) {
    if (fabs(a[i] - b[i]) > 1e-9 * (1 + fabs(b[i]))) return 0;
  }
  return 1;
}

/* inout += in, elementwise, for a type of 4 doubles; asks MPI for the type's size, as ops that
 * serve several types do. */
static int g_bad_type = 0;
static void SumSized(void* in, void* inout, int* len, MPI_Datatype* type) {
  int size = 0;
  if (MPI_Type_size(*type, &size) != MPI_SUCCESS || size != 4 * (int)sizeof(double)) ++g_bad_type;
  const double* a = (const double*)in;
  double* b = (double*)inout;
  for (int k = 0; k < *len * 4; ++k) b[k] += a[k];
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "userop");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Datatype mat;
  CHECK_MPI(MPI_Type_contiguous(4, MPI_DOUBLE, &mat));
  CHECK_MPI(MPI_Type_commit(&mat));
  MPI_Op mul;
  CHECK_MPI(MPI_Op_create(MatMul, 0, &mul));

  double m[8], out[8], want[8];
  Mine(g_rank, m);
  CHECK_MPI(MPI_Allreduce(m, out, 2, mat, mul, MPI_COMM_WORLD));
  Product(g_size - 1, want);
  CHECK(Near(out, want, 8), "Allreduce: %g %g %g %g | %g %g %g %g, expected %g %g %g %g | ...",
        out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], want[0], want[1], want[2],
        want[3]);

  const int root = g_size - 1;
  double red[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  CHECK_MPI(MPI_Reduce(m, red, 2, mat, mul, root, MPI_COMM_WORLD));
  if (g_rank == root) CHECK(Near(red, want, 8), "Reduce at the root: %g %g", red[0], red[4]);
  if (g_rank != root) CHECK(red[0] == -1, "Reduce wrote on a non-root: %g", red[0]);

  CHECK_MPI(MPI_Scan(m, out, 2, mat, mul, MPI_COMM_WORLD));
  Product(g_rank, want);
  CHECK(Near(out, want, 8), "Scan: %g %g, expected %g %g", out[0], out[4], want[0], want[4]);
  double ex[8] = {-3, -3, -3, -3, -3, -3, -3, -3};
  CHECK_MPI(MPI_Exscan(m, ex, 2, mat, mul, MPI_COMM_WORLD));
  if (g_rank > 0) {
    Product(g_rank - 1, want);
    CHECK(Near(ex, want, 8), "Exscan: %g %g, expected %g %g", ex[0], ex[4], want[0], want[4]);
  }
  /* In place. */
  memcpy(out, m, sizeof m);
  CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, out, 2, mat, mul, MPI_COMM_WORLD));
  Product(g_size - 1, want);
  CHECK(Near(out, want, 8), "Allreduce in place: %g %g", out[0], out[4]);

  /* A commutative op on a strided type: only ints 0 and 2 of each 4 are data. */
  MPI_Datatype strided;
  CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &strided));
  CHECK_MPI(MPI_Type_commit(&strided));
  MPI_Op maxabs;
  CHECK_MPI(MPI_Op_create(MaxAbs, 1, &maxabs));
  /* The vector's extent is 3 ints: element k starts at int 3k; use count 1 to keep it simple. */
  int v[4] = {(g_rank % 2 ? -1 : 1) * (g_rank + 1), 77, -(g_rank * 3), 88};
  int r[4] = {0, 12345, 0, 54321};
  CHECK_MPI(MPI_Allreduce(v, r, 1, strided, maxabs, MPI_COMM_WORLD));
  CHECK(r[0] == g_size && r[2] == 3 * (g_size - 1), "MaxAbs: %d %d", r[0], r[2]);
  CHECK(r[1] == 12345 && r[3] == 54321, "the gaps were written: %d %d", r[1], r[3]);

  /* The type freed while a nonblocking reduction with a user op is pending: MPI keeps it for
   * that operation, whose op is still given a handle it can ask about. */
  MPI_Datatype quad;
  CHECK_MPI(MPI_Type_contiguous(4, MPI_DOUBLE, &quad));
  CHECK_MPI(MPI_Type_commit(&quad));
  MPI_Op sumsized;
  CHECK_MPI(MPI_Op_create(SumSized, 1, &sumsized));
  double q[8], qs[8];
  for (int k = 0; k < 8; ++k) q[k] = g_rank + k;
  MPI_Request qr;
  CHECK_MPI(MPI_Iallreduce(q, qs, 2, quad, sumsized, MPI_COMM_WORLD, &qr));
  CHECK_MPI(MPI_Type_free(&quad));
  CHECK(quad == MPI_DATATYPE_NULL, "Type_free did not reset the handle");
  CHECK_MPI(MPI_Wait(&qr, MPI_STATUS_IGNORE));
  for (int k = 0; k < 8; ++k) {
    const double want = (double)g_size * (g_size - 1) / 2 + (double)g_size * k;
    CHECK(qs[k] == want, "Iallreduce with the type freed: [%d] %g, expected %g", k, qs[k], want);
  }
  CHECK(g_bad_type == 0, "the user op could not ask the freed type's size %d times", g_bad_type);
  CHECK_MPI(MPI_Op_free(&sumsized));

  CHECK_MPI(MPI_Op_free(&mul));
  CHECK(mul == MPI_OP_NULL, "Op_free did not reset the handle");
  CHECK_MPI(MPI_Op_free(&maxabs));
  MPI_Type_free(&mat);
  MPI_Type_free(&strided);
  return FinishTest();
}
