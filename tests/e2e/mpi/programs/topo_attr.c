/* topo_attr: MPI_Cart_sub (rows, columns, a single point) with Cart_get/coords/shift and a
 * reduction on each sub-grid, MPI_Cart_map, the MPI-1 names MPI_Type_hvector/hindexed/
 * extent/lb/ub and MPI_Errhandler_set/get, attribute caching (keyvals with copy and delete
 * callbacks through dup and free, the MPI-1 Keyval/Attr names), and distributed graph
 * topologies (MPI_Dist_graph_create_adjacent, neighbours, neighbourhood collectives on a
 * ring multigraph and a star). Plain portable MPI: the answers are Open MPI's too. */
#include "check.h"

static int g_copies = 0, g_deletes = 0;

static int CopyPlusOne(MPI_Comm oldcomm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)oldcomm, (void)keyval;
  ++*(int*)extra;
  ++g_copies;
  *(void**)out = (char*)in + 1;
  *flag = 1;
  return MPI_SUCCESS;
}

static int CountDelete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm, (void)keyval, (void)value, (void)extra;
  ++g_deletes;
  return MPI_SUCCESS;
}

static void CartSub(void) {
  int d[2] = {0, 0};
  MPI_Dims_create(g_size, 2, d);
  const int periods[2] = {1, 0};
  MPI_Comm cart;
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, d, periods, 0, &cart));
  MPI_Errhandler_set(cart, MPI_ERRORS_RETURN);
  int co[2];
  CHECK_MPI(MPI_Cart_coords(cart, g_rank, 2, co));

  /* Rows: keep dimension 1 (non-periodic, d[1] ranks ordered by y). */
  const int keep_y[2] = {0, 1};
  MPI_Comm row;
  CHECK_MPI(MPI_Cart_sub(cart, keep_y, &row));
  int n = -1, r = -1, nd = -1, topo = -1;
  MPI_Comm_size(row, &n);
  MPI_Comm_rank(row, &r);
  CHECK(n == d[1] && r == co[1], "row size %d rank %d, expected %d %d", n, r, d[1], co[1]);
  CHECK_MPI(MPI_Cartdim_get(row, &nd));
  CHECK_MPI(MPI_Topo_test(row, &topo));
  CHECK(nd == 1 && topo == MPI_CART, "row ndims %d topo %d", nd, topo);
  int dims1 = -1, per1 = -1, co1 = -1;
  CHECK_MPI(MPI_Cart_get(row, 1, &dims1, &per1, &co1));
  CHECK(dims1 == d[1] && per1 == 0 && co1 == co[1], "row Cart_get %d %d %d", dims1, per1, co1);
  int src = 0, dst = 0;
  CHECK_MPI(MPI_Cart_shift(row, 0, 1, &src, &dst));
  CHECK(src == (co[1] == 0 ? MPI_PROC_NULL : co[1] - 1), "row shift source %d", src);
  CHECK(dst == (co[1] == d[1] - 1 ? MPI_PROC_NULL : co[1] + 1), "row shift dest %d", dst);
  int sum = 0;
  MPI_Allreduce(&g_rank, &sum, 1, MPI_INT, MPI_SUM, row);
  CHECK(sum == d[1] * co[0] * d[1] + d[1] * (d[1] - 1) / 2, "row sum %d", sum);

  /* Columns: keep dimension 0 (periodic). */
  const int keep_x[2] = {1, 0};
  MPI_Comm col;
  CHECK_MPI(MPI_Cart_sub(cart, keep_x, &col));
  MPI_Comm_size(col, &n);
  MPI_Comm_rank(col, &r);
  CHECK(n == d[0] && r == co[0], "column size %d rank %d", n, r);
  CHECK_MPI(MPI_Cart_shift(col, 0, 1, &src, &dst));
  CHECK(src == (co[0] - 1 + d[0]) % d[0] && dst == (co[0] + 1) % d[0], "column shift %d %d", src,
        dst);
  MPI_Allreduce(&g_rank, &sum, 1, MPI_INT, MPI_SUM, col);
  CHECK(sum == d[1] * d[0] * (d[0] - 1) / 2 + d[0] * co[1], "column sum %d", sum);
  int back[1] = {-1};
  CHECK_MPI(MPI_Cart_coords(col, d[0] - 1, 1, back));
  CHECK(back[0] == d[0] - 1, "column coords %d", back[0]);

  /* Nothing kept: the rank alone, 0-dimensional. */
  const int keep_none[2] = {0, 0};
  MPI_Comm point;
  CHECK_MPI(MPI_Cart_sub(cart, keep_none, &point));
  MPI_Comm_size(point, &n);
  CHECK_MPI(MPI_Cartdim_get(point, &nd));
  CHECK(n == 1 && nd == 0, "point size %d ndims %d", n, nd);

  /* Not Cartesian: MPI_ERR_TOPOLOGY through the handler Errhandler_set installed. */
  MPI_Comm plain;
  MPI_Comm_dup(MPI_COMM_WORLD, &plain);
  MPI_Errhandler_set(plain, MPI_ERRORS_RETURN);
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  CHECK_MPI(MPI_Errhandler_get(plain, &eh));
  CHECK(eh == MPI_ERRORS_RETURN, "Errhandler_get %d", (int)eh);
  MPI_Comm none = MPI_COMM_NULL;
  int rc = MPI_Cart_sub(plain, keep_y, &none);
  CHECK(rc == MPI_ERR_TOPOLOGY, "Cart_sub of a plain communicator returned %d", rc);

  /* Cart_map keeps ranks; beyond the grid MPI_UNDEFINED. */
  int newrank = -5;
  const int all[1] = {g_size}, one[1] = {1}, per0[1] = {0};
  CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 1, all, per0, &newrank));
  CHECK(newrank == g_rank, "Cart_map all %d", newrank);
  CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 1, one, per0, &newrank));
  CHECK(newrank == (g_rank == 0 ? 0 : MPI_UNDEFINED), "Cart_map one %d", newrank);

  MPI_Comm_free(&plain);
  MPI_Comm_free(&point);
  MPI_Comm_free(&col);
  MPI_Comm_free(&row);
  MPI_Comm_free(&cart);
}

static void OldTypes(void) {
  MPI_Datatype hv, hi;
  CHECK_MPI(MPI_Type_hvector(3, 2, 5 * (MPI_Aint)sizeof(int), MPI_INT, &hv));
  int bl[2] = {1, 2};
  MPI_Aint dis[2] = {8, 20};
  CHECK_MPI(MPI_Type_hindexed(2, bl, dis, MPI_INT, &hi));
  MPI_Aint ext = 0, lb = -1, ub = -1;
  CHECK_MPI(MPI_Type_extent(hv, &ext));
  CHECK_MPI(MPI_Type_lb(hv, &lb));
  CHECK_MPI(MPI_Type_ub(hv, &ub));
  CHECK(ext == 48 && lb == 0 && ub == 48, "hvector extent %ld lb %ld ub %ld", (long)ext, (long)lb,
        (long)ub);
  CHECK_MPI(MPI_Type_extent(hi, &ext));
  CHECK_MPI(MPI_Type_lb(hi, &lb));
  CHECK_MPI(MPI_Type_ub(hi, &ub));
  CHECK(ext == 20 && lb == 8 && ub == 28, "hindexed extent %ld lb %ld ub %ld", (long)ext, (long)lb,
        (long)ub);
  MPI_Datatype rs;
  MPI_Type_create_resized(MPI_INT, -4, 16, &rs);
  CHECK_MPI(MPI_Type_lb(rs, &lb));
  CHECK_MPI(MPI_Type_ub(rs, &ub));
  CHECK(lb == -4 && ub == 12, "resized lb %ld ub %ld", (long)lb, (long)ub);

  /* The hvector sent to the partner and received as 6 contiguous ints. */
  MPI_Type_commit(&hv);
  int m[15], got[6];
  for (int i = 0; i < 15; ++i) m[i] = 100 * g_rank + i;
  const int p = Partner();
  CHECK_MPI(MPI_Sendrecv(m, 1, hv, p, 3, got, 6, MPI_INT, p, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  const int want[6] = {0, 1, 5, 6, 10, 11};
  for (int i = 0; i < 6; ++i) {
    CHECK(got[i] == 100 * p + want[i], "hvector element %d: %d", i, got[i]);
  }
  MPI_Type_free(&rs);
  MPI_Type_free(&hi);
  MPI_Type_free(&hv);
}

static void Attributes(void) {
  int copied_here = 0;
  int kv = MPI_KEYVAL_INVALID, kv_dup = MPI_KEYVAL_INVALID, kv_old = MPI_KEYVAL_INVALID;
  CHECK_MPI(MPI_Comm_create_keyval(CopyPlusOne, CountDelete, &kv, &copied_here));
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kv_dup, NULL));
  CHECK_MPI(MPI_Keyval_create(MPI_NULL_COPY_FN, CountDelete, &kv_old, NULL));
  static char base[4];
  MPI_Comm a;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  CHECK_MPI(MPI_Comm_set_attr(a, kv, base));
  CHECK_MPI(MPI_Comm_set_attr(a, kv_dup, &g_rank));
  CHECK_MPI(MPI_Attr_put(a, kv_old, base + 2));
  void* v = NULL;
  int flag = 0;
  CHECK_MPI(MPI_Comm_get_attr(a, kv, &v, &flag));
  CHECK(flag == 1 && v == base, "get_attr flag %d", flag);
  CHECK_MPI(MPI_Attr_get(a, kv_old, &v, &flag));
  CHECK(flag == 1 && v == base + 2, "Attr_get flag %d", flag);
  /* Predefined keys still answer. */
  int* tag_ub = NULL;
  CHECK_MPI(MPI_Comm_get_attr(a, MPI_TAG_UB, &tag_ub, &flag));
  CHECK(flag == 1 && tag_ub != NULL && *tag_ub >= 32767, "MPI_TAG_UB");

  MPI_Comm b;
  CHECK_MPI(MPI_Comm_dup(a, &b));
  CHECK(copied_here == 1 && g_copies == 1, "copy callback ran %d times", copied_here);
  CHECK_MPI(MPI_Comm_get_attr(b, kv, &v, &flag));
  CHECK(flag == 1 && v == base + 1, "copied value flag %d", flag);
  CHECK_MPI(MPI_Comm_get_attr(b, kv_dup, &v, &flag));
  CHECK(flag == 1 && v == &g_rank, "MPI_COMM_DUP_FN flag %d", flag);
  CHECK_MPI(MPI_Comm_get_attr(b, kv_old, &v, &flag));
  CHECK(flag == 0, "MPI_NULL_COPY_FN copied (flag %d)", flag);

  CHECK_MPI(MPI_Comm_delete_attr(a, kv));
  CHECK(g_deletes == 1, "deletes after delete_attr: %d", g_deletes);
  CHECK_MPI(MPI_Comm_get_attr(a, kv, &v, &flag));
  CHECK(flag == 0, "deleted attribute still there");
  CHECK_MPI(MPI_Attr_delete(a, kv_old));
  CHECK(g_deletes == 2, "deletes after Attr_delete: %d", g_deletes);
  CHECK_MPI(MPI_Comm_free(&b)); /* kv's copy is deleted */
  CHECK(g_deletes == 3, "deletes after free: %d", g_deletes);
  CHECK_MPI(MPI_Comm_free(&a)); /* only kv_dup is left, with a null delete */
  CHECK(g_deletes == 3, "deletes after the second free: %d", g_deletes);
  CHECK_MPI(MPI_Comm_free_keyval(&kv));
  CHECK(kv == MPI_KEYVAL_INVALID, "free_keyval left %d", kv);
  CHECK_MPI(MPI_Comm_free_keyval(&kv_dup));
  CHECK_MPI(MPI_Keyval_free(&kv_old));
}

static void DistGraph(void) {
  const int n = g_size, r = g_rank;
  /* A ring multigraph: in from r-1 and r+2, out to r+1 and r-2 (several edges between two
   * ranks, or to itself, at small sizes: they pair up in the order listed). */
  const int sources[2] = {(r - 1 + n) % n, (r + 2) % n};
  const int dests[2] = {(r + 1) % n, ((r - 2) % n + n) % n};
  const int sw[2] = {1, 2}, dw[2] = {3, 4};
  MPI_Comm g;
  CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, sources, sw, 2, dests, dw,
                                           MPI_INFO_NULL, 0, &g));
  int topo = -1, indeg = -1, outdeg = -1, weighted = -1;
  CHECK_MPI(MPI_Topo_test(g, &topo));
  CHECK(topo == MPI_DIST_GRAPH, "Topo_test %d", topo);
  CHECK_MPI(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
  CHECK(indeg == 2 && outdeg == 2 && weighted == 1, "counts %d %d %d", indeg, outdeg, weighted);
  int s[2], sww[2], d[2], dww[2];
  CHECK_MPI(MPI_Dist_graph_neighbors(g, 2, s, sww, 2, d, dww));
  CHECK(s[0] == sources[0] && s[1] == sources[1] && d[0] == dests[0] && d[1] == dests[1],
        "neighbours %d %d / %d %d", s[0], s[1], d[0], d[1]);
  CHECK(sww[0] == 1 && sww[1] == 2 && dww[0] == 3 && dww[1] == 4, "weights");

  int out[2] = {10 * r, 10 * r + 1}, in[2] = {-1, -1};
  CHECK_MPI(MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, g));
  CHECK(in[0] == 10 * sources[0], "alltoall block 0: %d, expected %d", in[0], 10 * sources[0]);
  CHECK(in[1] == 10 * sources[1] + 1, "alltoall block 1: %d, expected %d", in[1],
        10 * sources[1] + 1);
  in[0] = in[1] = -1;
  CHECK_MPI(MPI_Neighbor_allgather(&r, 1, MPI_INT, in, 1, MPI_INT, g));
  CHECK(in[0] == sources[0] && in[1] == sources[1], "allgather %d %d", in[0], in[1]);
  /* alltoallv: 1 int to the first destination, 2 to the second. */
  int vout[3] = {r, 1000 + r, 2000 + r}, vin[3] = {-1, -1, -1};
  const int scount[2] = {1, 2}, sdis[2] = {0, 1}, rcount[2] = {1, 2}, rdis[2] = {0, 1};
  CHECK_MPI(MPI_Neighbor_alltoallv(vout, scount, sdis, MPI_INT, vin, rcount, rdis, MPI_INT, g));
  CHECK(vin[0] == sources[0] && vin[1] == 1000 + sources[1] && vin[2] == 2000 + sources[1],
        "alltoallv %d %d %d", vin[0], vin[1], vin[2]);
  MPI_Comm_free(&g);

  /* A star, unweighted: everyone else sends to rank 0, which sends nothing. */
  int nin = r == 0 ? n - 1 : 0, nout = r == 0 ? 0 : 1;
  int* from = malloc(sizeof(int) * (size_t)(n + 1));
  int* got = malloc(sizeof(int) * (size_t)(n + 1));
  for (int i = 0; i < n; ++i) from[i] = i + 1, got[i] = -1;
  const int zero = 0;
  MPI_Comm star;
  CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, nin, from, MPI_UNWEIGHTED, nout, &zero,
                                           MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &star));
  CHECK_MPI(MPI_Dist_graph_neighbors_count(star, &indeg, &outdeg, &weighted));
  CHECK(indeg == nin && outdeg == nout && weighted == 0, "star counts %d %d %d", indeg, outdeg,
        weighted);
  const int mine = 7 * r;
  CHECK_MPI(MPI_Neighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, star));
  for (int i = 0; i < nin; ++i) CHECK(got[i] == 7 * (i + 1), "star block %d: %d", i, got[i]);
  MPI_Comm_free(&star);
  free(from);
  free(got);
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "topo_attr");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CartSub();
  OldTypes();
  Attributes();
  DistGraph();
  return FinishTest();
}
