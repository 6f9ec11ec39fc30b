/* structs: derived datatypes beyond vectors. An array of C structs sent with a struct type
 * (MPI_Get_address displacements, MPI_Type_create_resized to sizeof), also by MPI_Bcast; the
 * upper triangle of a matrix with MPI_Type_indexed; every other row with
 * MPI_Type_create_hvector; MPI_Type_create_indexed_block and _hindexed; absolute addresses
 * with MPI_BOTTOM; MPI_Type_get_extent, MPI_Type_size, MPI_Type_dup, MPI_Get_count. Untouched
 * bytes (padding, gaps) keep their values. Plain portable MPI: the answers are Open MPI's too. */
#include "check.h"

typedef struct {
  double x[3];
  int id;
  char tag; /* followed by padding */
} Particle;

#define N 6 /* matrix order */

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "structs");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int peer = Partner();

  /* The struct type, resized to the C struct's size. */
  Particle probe;
  MPI_Aint base, displs[3];
  MPI_Get_address(&probe, &base);
  MPI_Get_address(&probe.x, &displs[0]);
  MPI_Get_address(&probe.id, &displs[1]);
  MPI_Get_address(&probe.tag, &displs[2]);
  for (int i = 0; i < 3; ++i) displs[i] = MPI_Aint_diff(displs[i], base);
  const int lens[3] = {3, 1, 1};
  const MPI_Datatype types[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR};
  MPI_Datatype raw, ptype;
  CHECK_MPI(MPI_Type_create_struct(3, lens, displs, types, &raw));
  CHECK_MPI(MPI_Type_create_resized(raw, 0, (MPI_Aint)sizeof(Particle), &ptype));
  CHECK_MPI(MPI_Type_commit(&ptype));
  MPI_Aint lb = -1, extent = -1;
  int size = -1;
  /* Even unresized, the struct type is padded to the alignment of its largest member. */
  CHECK_MPI(MPI_Type_get_extent(raw, &lb, &extent));
  CHECK(lb == 0 && extent == (MPI_Aint)sizeof(Particle), "struct extent %ld, sizeof %zu",
        (long)extent, sizeof(Particle));
  CHECK_MPI(MPI_Type_get_extent(ptype, &lb, &extent));
  CHECK(lb == 0 && extent == (MPI_Aint)sizeof(Particle), "extent %ld, lb %ld", (long)extent,
        (long)lb);
  CHECK_MPI(MPI_Type_size(ptype, &size));
  CHECK(size == 3 * (int)sizeof(double) + (int)sizeof(int) + 1, "size %d", size);

  Particle out[5], in[5];
  memset(in, 0x5a, sizeof in);
  for (int i = 0; i < 5; ++i) {
    memset(&out[i], 0, sizeof out[i]);
    for (int k = 0; k < 3; ++k) out[i].x[k] = g_rank * 100 + i * 10 + k + 0.25;
    out[i].id = g_rank * 1000 + i;
    out[i].tag = (char)('a' + i + g_rank);
  }
  MPI_Status st;
  CHECK_MPI(MPI_Sendrecv(out, 5, ptype, peer, 1, in, 5, ptype, peer, 1, MPI_COMM_WORLD, &st));
  int got = -1;
  CHECK_MPI(MPI_Get_count(&st, ptype, &got));
  CHECK(got == 5, "Get_count %d", got);
  for (int i = 0; i < 5; ++i) {
    CHECK(in[i].x[2] == peer * 100 + i * 10 + 2 + 0.25 && in[i].id == peer * 1000 + i &&
              in[i].tag == (char)('a' + i + peer),
          "particle %d: %g %d %c", i, in[i].x[2], in[i].id, in[i].tag);
    /* The padding after tag is not data: it keeps 0x5a. */
    const unsigned char* pad = (const unsigned char*)&in[i].tag + 1;
    const unsigned char* end = (const unsigned char*)&in[i] + sizeof(Particle);
    for (; pad < end; ++pad) CHECK(*pad == 0x5a, "padding of particle %d written", i);
  }
  /* Broadcast of structs from the last rank. */
  Particle b[2];
  if (g_rank == g_size - 1) {
    memcpy(b, out, sizeof b);
  } else {
    memset(b, 0, sizeof b);
  }
  CHECK_MPI(MPI_Bcast(b, 2, ptype, g_size - 1, MPI_COMM_WORLD));
  CHECK(b[1].id == (g_size - 1) * 1000 + 1 && b[1].x[0] == (g_size - 1) * 100 + 10 + 0.25,
        "Bcast particle %d", b[1].id);

  /* Upper triangle (with the diagonal) of an N x N matrix: Type_indexed. */
  int tlens[N], tdispls[N];
  for (int r = 0; r < N; ++r) {
    tlens[r] = N - r;
    tdispls[r] = r * N + r;
  }
  MPI_Datatype upper;
  CHECK_MPI(MPI_Type_indexed(N, tlens, tdispls, MPI_DOUBLE, &upper));
  CHECK_MPI(MPI_Type_commit(&upper));
  double m[N * N], r[N * N];
  for (int i = 0; i < N * N; ++i) {
    m[i] = g_rank * 1000 + i;
    r[i] = -1;
  }
  CHECK_MPI(MPI_Sendrecv(m, 1, upper, peer, 2, r, 1, upper, peer, 2, MPI_COMM_WORLD, &st));
  for (int i = 0; i < N; ++i) {
    for (int j = 0; j < N; ++j) {
      const double want = j >= i ? peer * 1000 + i * N + j : -1;
      CHECK(r[i * N + j] == want, "upper (%d,%d) = %g, expected %g", i, j, r[i * N + j], want);
    }
  }
  CHECK_MPI(MPI_Type_size(upper, &size));
  CHECK(size == (int)sizeof(double) * N * (N + 1) / 2, "upper size %d", size);

  /* Every other row: hvector of N doubles, stride 2 rows in bytes. */
  MPI_Datatype row, rows;
  CHECK_MPI(MPI_Type_contiguous(N, MPI_DOUBLE, &row));
  CHECK_MPI(MPI_Type_create_hvector(N / 2, 1, (MPI_Aint)(2 * N * sizeof(double)), row, &rows));
  CHECK_MPI(MPI_Type_commit(&rows));
  for (int i = 0; i < N * N; ++i) r[i] = -2;
  CHECK_MPI(MPI_Sendrecv(m, 1, rows, peer, 3, r, 1, rows, peer, 3, MPI_COMM_WORLD, &st));
  for (int i = 0; i < N; ++i) {
    const double want = i % 2 == 0 ? peer * 1000 + i * N + 1 : -2;
    CHECK(r[i * N + 1] == want, "row %d: %g, expected %g", i, r[i * N + 1], want);
  }
  CHECK_MPI(MPI_Type_get_extent(rows, &lb, &extent));
  CHECK(lb == 0 && extent == (MPI_Aint)((N - 2) * N + N) * (MPI_Aint)sizeof(double),
        "hvector extent %ld", (long)extent);

  /* The diagonal, and a hindexed pair of (element 1, elements 4-5), as data of one message:
   * indexed_block then hindexed on the receiving side. */
  int diag[N];
  for (int i = 0; i < N; ++i) diag[i] = i * (N + 1);
  MPI_Datatype dtype, htype;
  CHECK_MPI(MPI_Type_create_indexed_block(N, 1, diag, MPI_DOUBLE, &dtype));
  CHECK_MPI(MPI_Type_commit(&dtype));
  const int hl[2] = {2, 4};
  const MPI_Aint hd[2] = {0, (MPI_Aint)(10 * sizeof(double))};
  CHECK_MPI(MPI_Type_create_hindexed(2, hl, hd, MPI_DOUBLE, &htype));
  CHECK_MPI(MPI_Type_commit(&htype));
  double h[16];
  for (int i = 0; i < 16; ++i) h[i] = -3;
  CHECK_MPI(MPI_Sendrecv(m, 1, dtype, peer, 4, h, 1, htype, peer, 4, MPI_COMM_WORLD, &st));
  /* Diagonal elements 0..5 land in h[0], h[1], h[10..13]. */
  const int where[N] = {0, 1, 10, 11, 12, 13};
  for (int i = 0; i < N; ++i) {
    CHECK(h[where[i]] == peer * 1000 + i * (N + 1), "diag %d at h[%d] = %g", i, where[i],
          h[where[i]]);
  }
  CHECK(h[2] == -3 && h[9] == -3 && h[14] == -3, "hindexed gaps written");

  /* Absolute addresses: MPI_BOTTOM with a struct of two separate variables. */
  int a_int = g_rank + 7;
  double a_dbl = g_rank + 0.5;
  MPI_Aint abs_d[2];
  MPI_Get_address(&a_int, &abs_d[0]);
  MPI_Get_address(&a_dbl, &abs_d[1]);
  const int one[2] = {1, 1};
  const MPI_Datatype it[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Datatype absolute, twin;
  CHECK_MPI(MPI_Type_create_struct(2, one, abs_d, it, &absolute));
  CHECK_MPI(MPI_Type_commit(&absolute));
  CHECK_MPI(MPI_Type_dup(absolute, &twin));
  CHECK_MPI(MPI_Sendrecv_replace(MPI_BOTTOM, 1, twin, peer, 5, peer, 5, MPI_COMM_WORLD, &st));
  CHECK(a_int == peer + 7 && a_dbl == peer + 0.5, "MPI_BOTTOM exchange: %d %g", a_int, a_dbl);

#ifdef GOS_MPI_H_
  /* gos keeps the MPI-1 names (removed in MPI-3, so not Open MPI 4's): the same type. */
  MPI_Aint d_old[3];
  MPI_Address(&probe.x, &d_old[0]);
  MPI_Address(&probe.id, &d_old[1]);
  MPI_Address(&probe.tag, &d_old[2]);
  for (int i = 0; i < 3; ++i) d_old[i] -= base;
  int lens_old[3] = {3, 1, 1};
  MPI_Datatype types_old[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, old_struct;
  CHECK_MPI(MPI_Type_struct(3, lens_old, d_old, types_old, &old_struct));
  CHECK_MPI(MPI_Type_get_extent(old_struct, &lb, &extent));
  CHECK(extent == (MPI_Aint)sizeof(Particle), "MPI_Type_struct extent %ld", (long)extent);
  MPI_Type_free(&old_struct);
#endif
  MPI_Type_free(&raw);
  MPI_Type_free(&ptype);
  MPI_Type_free(&upper);
  MPI_Type_free(&row);
  MPI_Type_free(&rows);
  MPI_Type_free(&dtype);
  MPI_Type_free(&htype);
  MPI_Type_free(&absolute);
  MPI_Type_free(&twin);
  return FinishTest();
}
