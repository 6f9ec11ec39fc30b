/* topology: MPI_Dims_create, a 2-D Cartesian communicator (periodic in x only) with
 * Cart_get/coords/rank/shift and a halo exchange by MPI_Sendrecv_replace, MPI_Scan and
 * MPI_Exscan (SUM and MAX, in place too), MPI_Type_size, MPI_Topo_test, MPI_Get_version,
 * MPI_Query_thread and MPI_Pcontrol; MPI_Dims_create(72, 2) is 9 x 8 (the closest pair, where
 * gos once answered 12 x 6); a 0-dimensional MPI_Cart_create and MPI_Cart_map (valid since
 * MPI 2.1: rank 0 alone; gos once refused them). Plain portable MPI: the answers are Open MPI's
 * too. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "topology");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  /* Dims_create: balanced, non-increasing; given entries are kept. */
  int d2[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(g_size, 2, d2));
  CHECK(d2[0] * d2[1] == g_size && d2[0] >= d2[1], "dims %d x %d for %d", d2[0], d2[1], g_size);
  int d12[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(12, 2, d12));
  CHECK(d12[0] == 4 && d12[1] == 3, "12 -> %d x %d, expected 4 x 3", d12[0], d12[1]);
  int d3[3] = {0, 2, 0};
  CHECK_MPI(MPI_Dims_create(16, 3, d3));
  CHECK(d3[0] == 4 && d3[1] == 2 && d3[2] == 2, "16, {0,2,0} -> %d %d %d", d3[0], d3[1], d3[2]);

  /* The grid, periodic in dimension 0 only. */
  const int periods[2] = {1, 0};
  MPI_Comm cart;
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, d2, periods, 0, &cart));
  int topo = -1;
  CHECK_MPI(MPI_Topo_test(cart, &topo));
  CHECK(topo == MPI_CART, "Topo_test of the grid: %d", topo);
  CHECK_MPI(MPI_Topo_test(MPI_COMM_WORLD, &topo));
  CHECK(topo == MPI_UNDEFINED, "Topo_test of world: %d", topo);
  int ndims = 0, crank = -1;
  CHECK_MPI(MPI_Cartdim_get(cart, &ndims));
  CHECK(ndims == 2, "Cartdim_get %d", ndims);
  MPI_Comm_rank(cart, &crank);
  CHECK(crank == g_rank, "grid rank %d, world rank %d (no reordering)", crank, g_rank);
  int dims[2], per[2], coords[2];
  CHECK_MPI(MPI_Cart_get(cart, 2, dims, per, coords));
  CHECK(dims[0] == d2[0] && dims[1] == d2[1] && per[0] == 1 && per[1] == 0,
        "Cart_get dims %d %d periods %d %d", dims[0], dims[1], per[0], per[1]);
  /* Row-major: the last dimension varies fastest. */
  CHECK(coords[0] == g_rank / d2[1] && coords[1] == g_rank % d2[1], "coords %d %d", coords[0],
        coords[1]);
  int back = -1, c2[2];
  CHECK_MPI(MPI_Cart_rank(cart, coords, &back));
  CHECK(back == g_rank, "Cart_rank(coords) = %d", back);
  CHECK_MPI(MPI_Cart_coords(cart, g_size - 1, 2, c2));
  CHECK(c2[0] == d2[0] - 1 && c2[1] == d2[1] - 1, "coords of the last rank %d %d", c2[0], c2[1]);
  /* Periodic wrap in dimension 0. */
  int wrapped[2] = {coords[0] + d2[0], coords[1]};
  CHECK_MPI(MPI_Cart_rank(cart, wrapped, &back));
  CHECK(back == g_rank, "Cart_rank of wrapped coords = %d", back);

  /* Shifts: periodic in 0, MPI_PROC_NULL off the edges of 1. */
  int src0, dst0, src1, dst1;
  CHECK_MPI(MPI_Cart_shift(cart, 0, 1, &src0, &dst0));
  CHECK(src0 == ((coords[0] - 1 + d2[0]) % d2[0]) * d2[1] + coords[1], "shift 0 source %d", src0);
  CHECK(dst0 == ((coords[0] + 1) % d2[0]) * d2[1] + coords[1], "shift 0 dest %d", dst0);
  CHECK_MPI(MPI_Cart_shift(cart, 1, 1, &src1, &dst1));
  CHECK(src1 == (coords[1] == 0 ? MPI_PROC_NULL : g_rank - 1), "shift 1 source %d", src1);
  CHECK(dst1 == (coords[1] == d2[1] - 1 ? MPI_PROC_NULL : g_rank + 1), "shift 1 dest %d", dst1);

  /* Halo exchange along dimension 0 with Sendrecv_replace: everyone gets its source's data. */
  int halo[3] = {g_rank, g_rank * 10, -g_rank};
  MPI_Status st;
  CHECK_MPI(MPI_Sendrecv_replace(halo, 3, MPI_INT, dst0, 7, src0, 7, cart, &st));
  CHECK(halo[0] == src0 && halo[1] == src0 * 10 && halo[2] == -src0, "halo from %d: %d %d %d", src0,
        halo[0], halo[1], halo[2]);
  CHECK(st.MPI_SOURCE == src0 && st.MPI_TAG == 7, "status source %d tag %d", st.MPI_SOURCE,
        st.MPI_TAG);
  /* Along dimension 1 edges talk to MPI_PROC_NULL: the buffer is left alone there. */
  int edge = 1000 + g_rank;
  CHECK_MPI(MPI_Sendrecv_replace(&edge, 1, MPI_INT, dst1, 8, src1, 8, cart, MPI_STATUS_IGNORE));
  CHECK(edge == (src1 == MPI_PROC_NULL ? 1000 + g_rank : 1000 + src1), "edge halo %d", edge);

  /* A dup keeps the topology. */
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(cart, &dup));
  CHECK_MPI(MPI_Topo_test(dup, &topo));
  CHECK(topo == MPI_CART, "Topo_test of a dup: %d", topo);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&cart);

  /* A grid smaller than the world: the others get MPI_COMM_NULL. */
  if (g_size >= 2) {
    const int one[1] = {g_size - 1}, noper[1] = {0};
    MPI_Comm small;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, one, noper, 1, &small));
    CHECK((small == MPI_COMM_NULL) == (g_rank == g_size - 1), "rank %d small grid %s", g_rank,
          small == MPI_COMM_NULL ? "null" : "member");
    if (small != MPI_COMM_NULL) MPI_Comm_free(&small);
  }

  /* Scan and Exscan. */
  long v[2] = {g_rank + 1, 100 - g_rank}, out[2] = {-7, -7};
  CHECK_MPI(MPI_Scan(v, out, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  CHECK(out[0] == (long)(g_rank + 1) * (g_rank + 2) / 2, "Scan sum %ld", out[0]);
  CHECK(out[1] == 100L * (g_rank + 1) - (long)g_rank * (g_rank + 1) / 2, "Scan sum 2 %ld", out[1]);
  double x = (double)((g_rank * 7) % 5), mx = -1;
  CHECK_MPI(MPI_Scan(&x, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  double want = 0;
  for (int r = 0; r <= g_rank; ++r) want = (r * 7) % 5 > want ? (r * 7) % 5 : want;
  CHECK(mx == want, "Scan max %g, expected %g", mx, want);
  int inplace = g_rank + 1;
  CHECK_MPI(MPI_Scan(MPI_IN_PLACE, &inplace, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(inplace == (g_rank + 1) * (g_rank + 2) / 2, "Scan in place %d", inplace);
  int ex = -5;
  int mine = g_rank + 1;
  CHECK_MPI(MPI_Exscan(&mine, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (g_rank > 0) CHECK(ex == g_rank * (g_rank + 1) / 2, "Exscan %d", ex);

  /* Environment. */
  int size = 0;
  CHECK_MPI(MPI_Type_size(MPI_DOUBLE, &size));
  CHECK(size == (int)sizeof(double), "Type_size(double) %d", size);
  MPI_Datatype vec;
  CHECK_MPI(MPI_Type_vector(3, 2, 5, MPI_INT, &vec));
  CHECK_MPI(MPI_Type_size(vec, &size));
  CHECK(size == 6 * (int)sizeof(int), "Type_size(vector 3x2 int) %d", size);
  MPI_Type_free(&vec);
  int version = 0, subversion = -1, provided = -1;
  CHECK_MPI(MPI_Get_version(&version, &subversion));
  CHECK(version == MPI_VERSION && subversion == MPI_SUBVERSION, "version %d.%d", version,
        subversion);
  CHECK_MPI(MPI_Query_thread(&provided));
  CHECK(provided == MPI_THREAD_SINGLE, "Query_thread after MPI_Init: %d", provided);
  CHECK_MPI(MPI_Pcontrol(1));
  int d72[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(72, 2, d72));
  CHECK(d72[0] == 9 && d72[1] == 8, "72 -> %d x %d, expected 9 x 8", d72[0], d72[1]);

  /* A grid of no dimensions is one point: rank 0 gets it, the others MPI_COMM_NULL. */
  MPI_Comm point;
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &point));
  CHECK((point != MPI_COMM_NULL) == (g_rank == 0), "0-d cart: comm %d on rank %d", point, g_rank);
  if (point != MPI_COMM_NULL) {
    int size = -1, nd = -1, r = -1, topo = -1;
    CHECK_MPI(MPI_Comm_size(point, &size));
    CHECK_MPI(MPI_Cartdim_get(point, &nd));
    CHECK_MPI(MPI_Cart_rank(point, NULL, &r));
    CHECK_MPI(MPI_Topo_test(point, &topo));
    CHECK(size == 1 && nd == 0 && r == 0 && topo == MPI_CART, "0-d cart: size %d ndims %d rank %d",
          size, nd, r);
    CHECK_MPI(MPI_Comm_free(&point));
  }
  int mapped = -2;
  CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 0, NULL, NULL, &mapped));
  CHECK(mapped == (g_rank == 0 ? 0 : MPI_UNDEFINED), "0-d Cart_map gave %d", mapped);
  return FinishTest();
}
