/* More MPI calls that mini-apps use: MPI_Alloc_mem/MPI_Free_mem (also of 0 bytes),
 * MPI_Reduce_local with predefined and user ops (against serial loops; a non-commutative op
 * and a derived type), MPI_Op_commutative, MPI_Request_get_status before and after completion
 * (then MPI_Wait reports the same status; also a derived-type receive and a persistent one),
 * type names, MPI_Comm_test_inter, MPI_Errhandler_free, the large-count calls (MPI_Type_size_x,
 * MPI_Type_get_(true_)extent_x, MPI_Get_elements_x), and the neighbourhood collectives
 * (allgather, allgatherv, alltoall, alltoallv) on periodic and non-periodic 1-D and 2-D
 * Cartesian grids, every block checked against neighbours computed here from coordinates, and
 * MPI_PROC_NULL blocks left untouched. */
#include "check.h"

/* inout[i] = 3 * in[i] - inout[i]: not commutative, so the order of the operands shows. */
static void ThreeInMinusInout(void* in, void* inout, int* len, MPI_Datatype* type) {
  const int* a = in;
  int* b = inout;
  (void)type;
  for (int i = 0; i < *len; ++i) b[i] = 3 * a[i] - b[i];
}

/* On pairs of ints (a contiguous type of 2): (a0, a1) op (b0, b1) = (a0 + b0, a1 * b1). The
 * datatype it is called with is recorded. */
static MPI_Datatype g_seen_type = MPI_DATATYPE_NULL;
static int g_seen_len = -1;
static void PairOp(void* in, void* inout, int* len, MPI_Datatype* type) {
  const int* a = in;
  int* b = inout;
  g_seen_type = *type;
  g_seen_len = *len;
  for (int i = 0; i < *len; ++i) {
    b[2 * i] = a[2 * i] + b[2 * i];
    b[2 * i + 1] = a[2 * i + 1] * b[2 * i + 1];
  }
}

#define kMaxNbrs 4 /* two dimensions at most */
#define kSentinel (-1)

/* The neighbours of `rank` on a row-major grid, computed from its coordinates: for each
 * dimension the rank one below (source of a shift by +1) then one above (destination). */
static void Neighbours(int ndims, const int* dims, const int* periods, int rank, int* nbrs) {
  int coords[2], r = rank;
  for (int d = ndims - 1; d >= 0; --d) {
    coords[d] = r % dims[d];
    r /= dims[d];
  }
  for (int d = 0; d < ndims; ++d) {
    for (int s = 0; s < 2; ++s) {
      int c[2] = {coords[0], ndims > 1 ? coords[1] : 0};
      c[d] += s == 0 ? -1 : 1;
      if (c[d] < 0 || c[d] >= dims[d]) {
        if (!periods[d]) {
          nbrs[2 * d + s] = MPI_PROC_NULL;
          continue;
        }
        c[d] = (c[d] + dims[d]) % dims[d];
      }
      nbrs[2 * d + s] = ndims > 1 ? c[0] * dims[1] + c[1] : c[0];
    }
  }
}

/* The four neighbourhood collectives on one grid. Rank r's block for neighbour k holds
 * r * 1000 + k * 100 + j; the block received from neighbour k was sent by it towards this
 * rank, i.e. as its block k ^ 1. */
static void NeighbourGrid(MPI_Comm world, int ndims, const int* dims, const int* periods) {
  char what[32];
  snprintf(what, sizeof what, "%d-D (periodic %d%d)", ndims, periods[0], ndims > 1 && periods[1]);
  MPI_Comm cart;
  CHECK_MPI(MPI_Cart_create(world, ndims, dims, periods, 0, &cart));
  if (cart == MPI_COMM_NULL) {
    CHECK(0, "%s: no Cartesian communicator", what);
    return;
  }
  int rank = -1;
  CHECK_MPI(MPI_Comm_rank(cart, &rank));
  const int n = 2 * ndims;
  int nbrs[kMaxNbrs];
  Neighbours(ndims, dims, periods, rank, nbrs);
  for (int d = 0; d < ndims; ++d) {
    int src = -2, dst = -2;
    CHECK_MPI(MPI_Cart_shift(cart, d, 1, &src, &dst));
    CHECK(src == nbrs[2 * d] && dst == nbrs[2 * d + 1], "%s dim %d: shift %d %d, want %d %d", what,
          d, src, dst, nbrs[2 * d], nbrs[2 * d + 1]);
  }

  /* Allgather: 3 ints to every neighbour. */
  int send[kMaxNbrs * 8], recv[kMaxNbrs * 8];
  for (int j = 0; j < 3; ++j) send[j] = rank * 1000 + j;
  for (int i = 0; i < kMaxNbrs * 8; ++i) recv[i] = kSentinel;
  CHECK_MPI(MPI_Neighbor_allgather(send, 3, MPI_INT, recv, 3, MPI_INT, cart));
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < 3; ++j) {
      const int want = nbrs[k] == MPI_PROC_NULL ? kSentinel : nbrs[k] * 1000 + j;
      CHECK(recv[3 * k + j] == want, "%s allgather rank %d block %d[%d] = %d, want %d", what, rank,
            k, j, recv[3 * k + j], want);
    }
  }

  /* Allgatherv: 2 ints each, placed in reverse block order with a gap of one after each. */
  int displs[kMaxNbrs], counts[kMaxNbrs];
  for (int k = 0; k < n; ++k) {
    counts[k] = 2;
    displs[k] = 3 * (n - 1 - k);
  }
  for (int i = 0; i < kMaxNbrs * 8; ++i) recv[i] = kSentinel;
  CHECK_MPI(MPI_Neighbor_allgatherv(send, 2, MPI_INT, recv, counts, displs, MPI_INT, cart));
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < 3; ++j) {
      const int want = nbrs[k] == MPI_PROC_NULL || j == 2 ? kSentinel : nbrs[k] * 1000 + j;
      CHECK(recv[displs[k] + j] == want, "%s allgatherv rank %d block %d[%d] = %d, want %d", what,
            rank, k, j, recv[displs[k] + j], want);
    }
  }

  /* Alltoall: block k (2 ints) to neighbour k. */
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < 2; ++j) send[2 * k + j] = rank * 1000 + k * 100 + j;
  }
  for (int i = 0; i < kMaxNbrs * 8; ++i) recv[i] = kSentinel;
  CHECK_MPI(MPI_Neighbor_alltoall(send, 2, MPI_INT, recv, 2, MPI_INT, cart));
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < 2; ++j) {
      const int want = nbrs[k] == MPI_PROC_NULL ? kSentinel : nbrs[k] * 1000 + (k ^ 1) * 100 + j;
      CHECK(recv[2 * k + j] == want, "%s alltoall rank %d block %d[%d] = %d, want %d", what, rank,
            k, j, recv[2 * k + j], want);
    }
  }

  /* Alltoallv: block k has k + 1 ints, so the one from neighbour k has (k ^ 1) + 1; both
   * sides leave a gap of one element after each block. */
  int sdispls[kMaxNbrs], scounts[kMaxNbrs], rdispls[kMaxNbrs], rcounts[kMaxNbrs];
  for (int k = 0, so = 0, ro = 0; k < n; ++k) {
    scounts[k] = k + 1;
    sdispls[k] = so;
    so += scounts[k] + 1;
    rcounts[k] = (k ^ 1) + 1;
    rdispls[k] = ro;
    ro += rcounts[k] + 1;
  }
  for (int i = 0; i < kMaxNbrs * 8; ++i) send[i] = kSentinel - 1;
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < scounts[k]; ++j) send[sdispls[k] + j] = rank * 1000 + k * 100 + j;
  }
  for (int i = 0; i < kMaxNbrs * 8; ++i) recv[i] = kSentinel;
  CHECK_MPI(MPI_Neighbor_alltoallv(send, scounts, sdispls, MPI_INT, recv, rcounts, rdispls, MPI_INT,
                                   cart));
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j <= rcounts[k]; ++j) {
      const int want = nbrs[k] == MPI_PROC_NULL || j == rcounts[k]
                           ? kSentinel
                           : nbrs[k] * 1000 + (k ^ 1) * 100 + j;
      CHECK(recv[rdispls[k] + j] == want, "%s alltoallv rank %d block %d[%d] = %d, want %d", what,
            rank, k, j, recv[rdispls[k] + j], want);
    }
  }
  MPI_Comm_free(&cart);
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "more");
  MPI_Comm comm = MPI_COMM_WORLD;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int rank = g_rank, size = g_size;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;

  /* Alloc_mem / Free_mem. */
  {
    double* mem = NULL;
    CHECK_MPI(MPI_Alloc_mem(1000 * (MPI_Aint)sizeof(double), MPI_INFO_NULL, &mem));
    CHECK(mem != NULL, "MPI_Alloc_mem gave NULL");
    if (mem != NULL) {
      double sum = 0;
      for (int i = 0; i < 1000; ++i) mem[i] = i + rank;
      for (int i = 0; i < 1000; ++i) sum += mem[i];
      CHECK(sum == 999 * 500 + 1000.0 * rank, "sum %g", sum);
      CHECK_MPI(MPI_Free_mem(mem));
    }
    void* none = NULL;
    CHECK_MPI(MPI_Alloc_mem(0, MPI_INFO_NULL, &none));
    CHECK_MPI(MPI_Free_mem(none));
    MPI_Info info;
    char* bytes = NULL;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    CHECK_MPI(MPI_Alloc_mem(64, info, &bytes));
    CHECK(bytes != NULL, "MPI_Alloc_mem with info gave NULL");
    if (bytes != NULL) {
      memset(bytes, 0x5a, 64);
      CHECK(bytes[63] == 0x5a, "last byte %d", bytes[63]);
      CHECK_MPI(MPI_Free_mem(bytes));
    }
    MPI_Info_free(&info);
  }

  /* Reduce_local with predefined ops against serial loops. */
  {
    enum { kN = 37 };
    int a[kN], b[kN], want[kN];
    double x[kN], y[kN], wantd[kN];
    unsigned u[kN], v[kN], wantu[kN];
    for (int i = 0; i < kN; ++i) {
      a[i] = (int)(Pattern(rank, i) % 1000) - 500;
      b[i] = (int)(Pattern(rank + 7, i) % 1000) - 500;
      x[i] = 0.25 * (i % 11) - 1;
      y[i] = 1.5 + 0.125 * rank - 0.5 * (i % 5);
      u[i] = Pattern(rank, i);
      v[i] = Pattern(rank + 3, i);
    }
    for (int i = 0; i < kN; ++i) want[i] = a[i] + b[i];
    CHECK_MPI(MPI_Reduce_local(a, b, kN, MPI_INT, MPI_SUM));
    for (int i = 0; i < kN; ++i) CHECK(b[i] == want[i], "SUM [%d] %d, want %d", i, b[i], want[i]);
    for (int i = 0; i < kN; ++i) want[i] = a[i] > b[i] ? a[i] : b[i];
    CHECK_MPI(MPI_Reduce_local(a, b, kN, MPI_INT, MPI_MAX));
    for (int i = 0; i < kN; ++i) CHECK(b[i] == want[i], "MAX [%d] %d, want %d", i, b[i], want[i]);
    for (int i = 0; i < kN; ++i) wantd[i] = x[i] * y[i];
    CHECK_MPI(MPI_Reduce_local(x, y, kN, MPI_DOUBLE, MPI_PROD));
    for (int i = 0; i < kN; ++i) {
      CHECK(y[i] == wantd[i], "PROD [%d] %g, want %g", i, y[i], wantd[i]);
    }
    for (int i = 0; i < kN; ++i) wantu[i] = u[i] ^ v[i];
    CHECK_MPI(MPI_Reduce_local(u, v, kN, MPI_UNSIGNED, MPI_BXOR));
    for (int i = 0; i < kN; ++i) {
      CHECK(v[i] == wantu[i], "BXOR [%d] %u, want %u", i, v[i], wantu[i]);
    }
    /* MINLOC on (value, index) pairs: the smaller value, the smaller index on a tie. */
    struct {
      double value;
      int index;
    } p[3] = {{1.0, 5}, {2.0, 1}, {-3.0, 9}}, q[3] = {{1.0, 2}, {0.5, 4}, {-3.0, 10}};
    CHECK_MPI(MPI_Reduce_local(p, q, 3, MPI_DOUBLE_INT, MPI_MINLOC));
    CHECK(q[0].value == 1.0 && q[0].index == 2 && q[1].value == 0.5 && q[1].index == 4 &&
              q[2].value == -3.0 && q[2].index == 9,
          "MINLOC (%g,%d) (%g,%d) (%g,%d)", q[0].value, q[0].index, q[1].value, q[1].index,
          q[2].value, q[2].index);
    /* Zero elements: nothing changes. */
    const int before = b[0];
    CHECK_MPI(MPI_Reduce_local(a, b, 0, MPI_INT, MPI_SUM));
    CHECK(b[0] == before, "a count of 0 changed %d to %d", before, b[0]);
    /* An op that does not fit the type is an error. */
    CHECK(MPI_Reduce_local(x, y, kN, MPI_DOUBLE, MPI_BAND) != MPI_SUCCESS, "BAND on doubles");
  }

  /* Reduce_local with user ops: inoutbuf = inbuf op inoutbuf. */
  {
    MPI_Op three, pair;
    CHECK_MPI(MPI_Op_create(ThreeInMinusInout, 0, &three));
    int a[5], b[5], want[5];
    for (int i = 0; i < 5; ++i) {
      a[i] = rank * 10 + i;
      b[i] = 100 - i * i;
      want[i] = 3 * a[i] - b[i];
    }
    CHECK_MPI(MPI_Reduce_local(a, b, 5, MPI_INT, three));
    for (int i = 0; i < 5; ++i)
      CHECK(b[i] == want[i], "user op [%d] %d, want %d", i, b[i], want[i]);
    MPI_Datatype twoint;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &twoint));
    CHECK_MPI(MPI_Type_commit(&twoint));
    CHECK_MPI(MPI_Op_create(PairOp, 1, &pair));
    int c[6] = {1, 2, 3, 4, 5, 6}, d[6] = {10, 10, 20, -1, 30, rank};
    CHECK_MPI(MPI_Reduce_local(c, d, 3, twoint, pair));
    CHECK(d[0] == 11 && d[1] == 20 && d[2] == 23 && d[3] == -4 && d[4] == 35 && d[5] == 6 * rank,
          "pair op %d %d %d %d %d %d", d[0], d[1], d[2], d[3], d[4], d[5]);
    CHECK(g_seen_type == twoint && g_seen_len == 3, "the user op saw len %d", g_seen_len);

    int commute = -1;
    CHECK_MPI(MPI_Op_commutative(MPI_SUM, &commute));
    CHECK(commute == 1, "MPI_SUM commutative: %d", commute);
    CHECK_MPI(MPI_Op_commutative(MPI_MAXLOC, &commute));
    CHECK(commute == 1, "MPI_MAXLOC commutative: %d", commute);
    CHECK_MPI(MPI_Op_commutative(three, &commute));
    CHECK(commute == 0, "non-commutative user op: %d", commute);
    CHECK_MPI(MPI_Op_commutative(pair, &commute));
    CHECK(commute == 1, "commutative user op: %d", commute);
    MPI_Op_free(&three);
    MPI_Op_free(&pair);
    MPI_Type_free(&twoint);
  }

  /* Request_get_status: a receive posted before anything is sent is not complete; once it
   * is, the request stays, and MPI_Wait then reports the same status and frees it. */
  {
    int flag = -1, got = -1, count = -1;
    MPI_Status st, st2, st3;
    MPI_Request rq = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Request_get_status(rq, &flag, &st));
    CHECK(flag == 1, "MPI_REQUEST_NULL: flag %d", flag);

    int vec_in[6] = {-1, -1, -1, -1, -1, -1};
    MPI_Datatype every_other;
    CHECK_MPI(MPI_Type_vector(3, 1, 2, MPI_INT, &every_other));
    CHECK_MPI(MPI_Type_commit(&every_other));
    MPI_Request rv = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, left, 30, comm, &rq));
    CHECK_MPI(MPI_Irecv(vec_in, 1, every_other, left, 31, comm, &rv));
    flag = -1;
    CHECK_MPI(MPI_Request_get_status(rq, &flag, &st));
    CHECK(flag == 0, "nothing was sent yet, but flag is %d", flag);
    CHECK(rq != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
    MPI_Barrier(comm);
    const int mine = rank * 7 + 1, three[3] = {rank, rank + 10, rank + 20};
    CHECK_MPI(MPI_Send(&mine, 1, MPI_INT, right, 30, comm));
    CHECK_MPI(MPI_Send(three, 3, MPI_INT, right, 31, comm));
    const double give_up = MPI_Wtime() + 60;
    MPI_Request both[2] = {rq, rv};
    for (int i = 0; i < 2; ++i) {
      flag = 0;
      while (!flag && MPI_Wtime() < give_up) {
        CHECK_MPI(MPI_Request_get_status(both[i], &flag, &st));
      }
      CHECK(flag == 1, "request %d never completed", i);
      CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 30 + i, "request %d: source %d tag %d", i,
            st.MPI_SOURCE, st.MPI_TAG);
      CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
      CHECK(count == 1 + 2 * i, "request %d: count %d", i, count);
      /* Asking again answers the same. */
      flag = 0;
      CHECK_MPI(MPI_Request_get_status(both[i], &flag, &st2));
      CHECK(flag == 1 && st2.MPI_SOURCE == st.MPI_SOURCE && st2.MPI_TAG == st.MPI_TAG,
            "request %d asked again: flag %d source %d tag %d", i, flag, st2.MPI_SOURCE,
            st2.MPI_TAG);
    }
    CHECK(rq != MPI_REQUEST_NULL && rv != MPI_REQUEST_NULL, "a request was freed");
    CHECK_MPI(MPI_Wait(&rq, &st3));
    CHECK(rq == MPI_REQUEST_NULL, "MPI_Wait left the request");
    CHECK(st3.MPI_SOURCE == left && st3.MPI_TAG == 30, "MPI_Wait: source %d tag %d", st3.MPI_SOURCE,
          st3.MPI_TAG);
    CHECK_MPI(MPI_Get_count(&st3, MPI_INT, &count));
    CHECK(count == 1, "MPI_Wait: count %d", count);
    CHECK(got == left * 7 + 1, "received %d, want %d", got, left * 7 + 1);
    CHECK_MPI(MPI_Wait(&rv, &st3));
    CHECK(rv == MPI_REQUEST_NULL && st3.MPI_TAG == 31, "MPI_Wait of the vector: tag %d",
          st3.MPI_TAG);
    for (int i = 0; i < 6; ++i) {
      const int want = i % 2 ? -1 : left + 10 * (i / 2);
      CHECK(vec_in[i] == want, "vector [%d] = %d, want %d", i, vec_in[i], want);
    }
    MPI_Type_free(&every_other);

    /* A persistent receive: inactive it counts as complete; started, it completes once its
     * message is there, and stays allocated after MPI_Wait. */
    MPI_Request pr;
    got = -1;
    CHECK_MPI(MPI_Recv_init(&got, 1, MPI_INT, left, 32, comm, &pr));
    flag = 0;
    CHECK_MPI(MPI_Request_get_status(pr, &flag, &st));
    CHECK(flag == 1, "an inactive persistent request: flag %d", flag);
    CHECK_MPI(MPI_Start(&pr));
    CHECK_MPI(MPI_Send(&mine, 1, MPI_INT, right, 32, comm));
    flag = 0;
    while (!flag && MPI_Wtime() < give_up) CHECK_MPI(MPI_Request_get_status(pr, &flag, &st));
    CHECK(flag == 1 && st.MPI_SOURCE == left && st.MPI_TAG == 32,
          "persistent: flag %d source %d tag %d", flag, st.MPI_SOURCE, st.MPI_TAG);
    CHECK_MPI(MPI_Wait(&pr, &st3));
    CHECK(pr != MPI_REQUEST_NULL && st3.MPI_SOURCE == left && got == left * 7 + 1,
          "persistent: source %d, received %d", st3.MPI_SOURCE, got);
    CHECK_MPI(MPI_Request_free(&pr));
  }

  /* Names, intercommunicators, error handlers. */
  {
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    CHECK_MPI(MPI_Type_get_name(MPI_INT, name, &len));
    CHECK(strcmp(name, "MPI_INT") == 0 && len == 7, "MPI_INT is \"%s\" (%d)", name, len);
    CHECK_MPI(MPI_Type_get_name(MPI_DOUBLE, name, &len));
    CHECK(strcmp(name, "MPI_DOUBLE") == 0 && len == 10, "MPI_DOUBLE is \"%s\" (%d)", name, len);
    CHECK_MPI(MPI_Type_get_name(MPI_UNSIGNED_CHAR, name, &len));
    CHECK(strcmp(name, "MPI_UNSIGNED_CHAR") == 0, "MPI_UNSIGNED_CHAR is \"%s\"", name);
    MPI_Datatype halo;
    CHECK_MPI(MPI_Type_vector(4, 1, 8, MPI_DOUBLE, &halo));
    CHECK_MPI(MPI_Type_get_name(halo, name, &len));
    CHECK(name[0] == '\0' && len == 0, "an unnamed type is \"%s\" (%d)", name, len);
    CHECK_MPI(MPI_Type_set_name(halo, "halo column"));
    CHECK_MPI(MPI_Type_get_name(halo, name, &len));
    CHECK(strcmp(name, "halo column") == 0 && len == 11, "named type \"%s\" (%d)", name, len);
    MPI_Type_free(&halo);

    int inter = -1;
    CHECK_MPI(MPI_Comm_test_inter(comm, &inter));
    CHECK(inter == 0, "MPI_COMM_WORLD is an intercommunicator? %d", inter);
    MPI_Comm dup;
    CHECK_MPI(MPI_Comm_dup(comm, &dup));
    CHECK_MPI(MPI_Comm_test_inter(dup, &inter));
    CHECK(inter == 0, "a dup is an intercommunicator? %d", inter);

    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    CHECK_MPI(MPI_Comm_get_errhandler(dup, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "the dup's handler is not MPI_ERRORS_RETURN");
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "MPI_Errhandler_free left the handle");
    /* The communicator keeps its handler: an error still comes back. */
    CHECK_MPI(MPI_Comm_get_errhandler(dup, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "the dup lost its handler");
    CHECK_MPI(MPI_Errhandler_free(&eh));
    int cls = -1;
    MPI_Error_class(MPI_Send(&cls, 1, MPI_INT, size, 0, dup), &cls);
    CHECK(cls == MPI_ERR_RANK, "a send to rank %d: class %d", size, cls);
    MPI_Comm_free(&dup);
  }

  /* Large counts: the _x calls agree with the int ones, and go beyond them. */
  {
    MPI_Count sz = -1, lb = -1, extent = -1;
    CHECK_MPI(MPI_Type_size_x(MPI_DOUBLE, &sz));
    CHECK(sz == (MPI_Count)sizeof(double), "size_x of MPI_DOUBLE %lld", (long long)sz);
    MPI_Datatype vec, wide, big, huge;
    CHECK_MPI(MPI_Type_vector(3, 2, 4, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    CHECK_MPI(MPI_Type_size_x(vec, &sz));
    CHECK_MPI(MPI_Type_get_extent_x(vec, &lb, &extent));
    CHECK(sz == 6 * (MPI_Count)sizeof(int) && lb == 0 && extent == 10 * (MPI_Count)sizeof(int),
          "vector: size %lld lb %lld extent %lld", (long long)sz, (long long)lb, (long long)extent);
    CHECK_MPI(MPI_Type_get_true_extent_x(vec, &lb, &extent));
    CHECK(lb == 0 && extent == 10 * (MPI_Count)sizeof(int), "vector: true lb %lld extent %lld",
          (long long)lb, (long long)extent);
    CHECK_MPI(MPI_Type_create_resized(MPI_INT, -4, 16, &wide));
    CHECK_MPI(MPI_Type_get_extent_x(wide, &lb, &extent));
    CHECK(lb == -4 && extent == 16, "resized: lb %lld extent %lld", (long long)lb,
          (long long)extent);
    CHECK_MPI(MPI_Type_get_true_extent_x(wide, &lb, &extent));
    CHECK(lb == 0 && extent == (MPI_Count)sizeof(int), "resized: true lb %lld extent %lld",
          (long long)lb, (long long)extent);
    /* 2^20 ints, 2^12 times: 2^34 bytes (never allocated, only described). */
    CHECK_MPI(MPI_Type_contiguous(1 << 20, MPI_INT, &big));
    CHECK_MPI(MPI_Type_contiguous(1 << 12, big, &huge));
    const MPI_Count want = ((MPI_Count)1 << 32) * (MPI_Count)sizeof(int);
    CHECK_MPI(MPI_Type_size_x(huge, &sz));
    CHECK(sz == want, "huge size_x %lld, want %lld", (long long)sz, (long long)want);
    CHECK_MPI(MPI_Type_get_extent_x(huge, &lb, &extent));
    CHECK(lb == 0 && extent == want, "huge extent_x %lld", (long long)extent);
    int isz = 0;
    CHECK_MPI(MPI_Type_size(huge, &isz));
    CHECK(isz == MPI_UNDEFINED, "MPI_Type_size of 2^34 bytes: %d", isz);
    /* Get_elements_x: 5 ints into room for one vector (6 ints). */
    int five[5] = {1, 2, 3, 4, 5}, room[12];
    MPI_Status st;
    CHECK_MPI(MPI_Sendrecv(five, 5, MPI_INT, right, 40, room, 1, vec, left, 40, comm, &st));
    MPI_Count elements = -1;
    int ielements = -1;
    CHECK_MPI(MPI_Get_elements_x(&st, vec, &elements));
    CHECK_MPI(MPI_Get_elements(&st, vec, &ielements));
    CHECK(elements == 5 && ielements == 5, "elements_x %lld, elements %d", (long long)elements,
          ielements);
    CHECK_MPI(MPI_Get_elements_x(&st, MPI_INT, &elements));
    CHECK(elements == 5, "elements_x of MPI_INT %lld", (long long)elements);
    MPI_Type_free(&huge);
    MPI_Type_free(&big);
    MPI_Type_free(&wide);
    MPI_Type_free(&vec);
  }

  /* Neighbourhood collectives: 1-D periodic and not, 2-D periodic, not, and mixed. */
  {
    const int line[1] = {size}, periodic[1] = {1}, open_[1] = {0};
    NeighbourGrid(comm, 1, line, periodic);
    NeighbourGrid(comm, 1, line, open_);
    int dims[2] = {0, 0};
    CHECK_MPI(MPI_Dims_create(size, 2, dims));
    const int both[2] = {1, 1}, none[2] = {0, 0}, first[2] = {1, 0}, second[2] = {0, 1};
    NeighbourGrid(comm, 2, dims, both);
    NeighbourGrid(comm, 2, dims, none);
    NeighbourGrid(comm, 2, dims, first);
    NeighbourGrid(comm, 2, dims, second);
    /* A communicator without a Cartesian topology is an error, not a silent exchange. */
    int sendv = rank, recvv[2] = {kSentinel, kSentinel};
    const int rc = MPI_Neighbor_allgather(&sendv, 1, MPI_INT, recvv, 1, MPI_INT, comm);
    CHECK(rc != MPI_SUCCESS, "neighbour allgather on MPI_COMM_WORLD succeeded");
#ifdef GOS_MPI_H_
    /* MPI leaves the class open (Open MPI 4.1 answers MPI_ERR_INTERN); gos says why. */
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TOPOLOGY, "neighbour allgather on MPI_COMM_WORLD: class %d", cls);
#endif
    CHECK(recvv[0] == kSentinel && recvv[1] == kSentinel, "it wrote %d %d", recvv[0], recvv[1]);
  }

  return FinishTest();
}
