/* MPI calls beyond the list that real programs use: MPI_Reduce_scatter (also in
 * place) and MPI_Reduce_scatter_block against a serial reference, MPI_Testsome over a ring
 * exchange, MPI_Get_elements, MPI_Pack/MPI_Unpack/MPI_Pack_size with a vector type and a
 * message of MPI_PACKED, MPI_Type_create_subarray in C and Fortran order,
 * MPI_Type_get_true_extent, communicator names, MPI_Error_class, MPI_Get_library_version and
 * MPI_Is_thread_main; MPI_Igather(v) (also in
 * place), MPI_Iscatter(v), MPI_Iallgatherv, MPI_Ialltoallv, MPI_Iscan, MPI_Iexscan and
 * MPI_Ireduce_scatter(_block); MPI_Info objects, MPI_Comm_dup_with_info and MPI_Comm_idup;
 * the MPI_AINT, MPI_OFFSET and MPI_COUNT types in an MPI_Allreduce (missing from mpi.h
 * before: MPICH's coll/allred would not compile). */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "extras");
  MPI_Comm comm = MPI_COMM_WORLD;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int rank = g_rank, size = g_size;
  int one_up_global = rank + 1;

  /* Reduce_scatter: rank r contributes r * 100 + i at element i; rank k keeps k + 1 elements. */
  int counts[64], total = 0, off = 0;
  for (int i = 0; i < size; ++i) {
    counts[i] = i + 1;
    if (i < rank) off += counts[i];
    total += counts[i];
  }
  int* in = malloc(sizeof(int) * (size_t)total);
  int* out = malloc(sizeof(int) * (size_t)counts[rank]);
  for (int i = 0; i < total; ++i) in[i] = rank * 100 + i;
  CHECK_MPI(MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm));
  for (int j = 0; j < counts[rank]; ++j) {
    const int want = 100 * size * (size - 1) / 2 + size * (off + j);
    CHECK(out[j] == want, "element %d: %d, want %d", j, out[j], want);
  }
  /* In place: the whole vector in, this rank's block out at the start. */
  CHECK_MPI(MPI_Reduce_scatter(MPI_IN_PLACE, in, counts, MPI_INT, MPI_MAX, comm));
  for (int j = 0; j < counts[rank]; ++j) {
    const int want = (size - 1) * 100 + off + j;
    CHECK(in[j] == want, "in place, element %d: %d, want %d", j, in[j], want);
  }
  free(in);
  free(out);

  /* Reduce_scatter_block: 3 doubles per rank. */
  double* blk = malloc(sizeof(double) * 3 * (size_t)size);
  double mine[3];
  for (int i = 0; i < 3 * size; ++i) blk[i] = rank + 0.5 * i;
  CHECK_MPI(MPI_Reduce_scatter_block(blk, mine, 3, MPI_DOUBLE, MPI_SUM, comm));
  for (int k = 0; k < 3; ++k) {
    const double want = size * (size - 1) / 2.0 + size * 0.5 * (rank * 3 + k);
    CHECK(mine[k] == want, "block element %d: %g, want %g", k, mine[k], want);
  }
  free(blk);

  /* Testsome over a ring exchange: both requests complete once, then only nulls are left. */
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int got = -1, sent = rank;
  MPI_Request reqs[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, left, 7, comm, &reqs[0]));
  CHECK_MPI(MPI_Isend(&sent, 1, MPI_INT, right, 7, comm, &reqs[2]));
  int completed[3] = {0, 0, 0}, outcount = 0;
  const double give_up = MPI_Wtime() + 60; /* completions arrive at strobes: poll, boundedly */
  for (;;) {
    int indices[3];
    MPI_Status statuses[3];
    CHECK_MPI(MPI_Testsome(3, reqs, &outcount, indices, statuses));
    if (outcount == MPI_UNDEFINED || MPI_Wtime() > give_up) break;
    for (int k = 0; k < outcount; ++k) {
      completed[indices[k]]++;
      if (indices[k] == 0) {
        CHECK(statuses[k].MPI_SOURCE == left, "source %d, want %d", statuses[k].MPI_SOURCE, left);
      }
    }
  }
  CHECK(outcount == MPI_UNDEFINED, "Testsome never reported only null requests");
  CHECK(completed[0] == 1 && completed[1] == 0 && completed[2] == 1,
        "completions %d %d %d, want 1 0 1", completed[0], completed[1], completed[2]);
  CHECK(got == left, "received %d, want %d", got, left);

  /* Pack and unpack: a vector of 3 blocks of 2 ints (stride 4), then a double. */
  MPI_Datatype vec;
  CHECK_MPI(MPI_Type_vector(3, 2, 4, MPI_INT, &vec));
  CHECK_MPI(MPI_Type_commit(&vec));
  int psize = 0, dsize = 0;
  CHECK_MPI(MPI_Pack_size(1, vec, comm, &psize));
  CHECK_MPI(MPI_Pack_size(1, MPI_DOUBLE, comm, &dsize));
  CHECK(psize >= 6 * (int)sizeof(int) && dsize >= (int)sizeof(double), "pack sizes %d %d", psize,
        dsize);
  int src[12], dst[12];
  for (int i = 0; i < 12; ++i) {
    src[i] = rank * 1000 + i;
    dst[i] = -1;
  }
  char packed[256];
  int pos = 0;
  const double d = 2.5 + rank;
  CHECK_MPI(MPI_Pack(src, 1, vec, packed, (int)sizeof packed, &pos, comm));
  CHECK_MPI(MPI_Pack(&d, 1, MPI_DOUBLE, packed, (int)sizeof packed, &pos, comm));
  CHECK(pos > 0 && pos <= psize + dsize, "packed %d bytes, at most %d", pos, psize + dsize);
  /* The packed bytes travel to the right neighbour as MPI_PACKED and are unpacked there. */
  char arrived[256];
  MPI_Status st;
  CHECK_MPI(MPI_Sendrecv(packed, pos, MPI_PACKED, right, 8, arrived, (int)sizeof arrived,
                         MPI_PACKED, left, 8, comm, &st));
  int n = 0;
  CHECK_MPI(MPI_Get_count(&st, MPI_PACKED, &n));
  CHECK(n == pos, "received %d packed bytes, sent %d", n, pos);
  int upos = 0;
  double d2 = 0;
  CHECK_MPI(MPI_Unpack(arrived, n, &upos, dst, 1, vec, comm));
  CHECK_MPI(MPI_Unpack(arrived, n, &upos, &d2, 1, MPI_DOUBLE, comm));
  CHECK(upos == n, "unpacked %d of %d bytes", upos, n);
  for (int i = 0; i < 12; ++i) {
    const int want = (i % 4) < 2 ? left * 1000 + i : -1;
    CHECK(dst[i] == want, "dst[%d] = %d, want %d", i, dst[i], want);
  }
  CHECK(d2 == 2.5 + left, "double %g, want %g", d2, 2.5 + left);
  /* 5 ints into room for one vector (6 ints): no whole element, 5 basic ones. */
  {
    int five[5] = {1, 2, 3, 4, 5}, room[12];
    CHECK_MPI(MPI_Sendrecv(five, 5, MPI_INT, right, 11, room, 1, vec, left, 11, comm, &st));
    int whole = 0, elements = 0;
    CHECK_MPI(MPI_Get_count(&st, vec, &whole));
    CHECK_MPI(MPI_Get_elements(&st, vec, &elements));
    CHECK(whole == MPI_UNDEFINED && elements == 5, "count %d, elements %d", whole, elements);
  }
  /* Unpacking beyond the end is an error, not a read past it. */
  upos = n;
  CHECK(MPI_Unpack(arrived, n, &upos, dst, 1, vec, comm) != MPI_SUCCESS, "unpack past the end");
  MPI_Type_free(&vec);

  /* A 2 x 3 block at (1, 1) of a 4 x 5 array of ints, C order, to the right neighbour. */
  {
    const int sizes[2] = {4, 5}, subsizes[2] = {2, 3}, starts[2] = {1, 1};
    MPI_Datatype sub;
    CHECK_MPI(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &sub));
    CHECK_MPI(MPI_Type_commit(&sub));
    MPI_Aint lb = -1, extent = 0;
    int bytes = 0;
    CHECK_MPI(MPI_Type_get_extent(sub, &lb, &extent));
    CHECK_MPI(MPI_Type_size(sub, &bytes));
    CHECK(lb == 0 && extent == 20 * (MPI_Aint)sizeof(int) && bytes == 6 * (int)sizeof(int),
          "subarray lb %ld extent %ld size %d", (long)lb, (long)extent, bytes);
    int grid[20], block[6];
    for (int i = 0; i < 20; ++i) grid[i] = rank * 100 + i;
    CHECK_MPI(MPI_Sendrecv(grid, 1, sub, right, 9, block, 6, MPI_INT, left, 9, comm, &st));
    const int want[6] = {6, 7, 8, 11, 12, 13};
    for (int i = 0; i < 6; ++i) {
      CHECK(block[i] == left * 100 + want[i], "block[%d] = %d, want %d", i, block[i],
            left * 100 + want[i]);
    }
    /* Fortran order: the first index varies fastest, so the same call picks other cells. */
    MPI_Datatype fsub;
    CHECK_MPI(
        MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_INT, &fsub));
    CHECK_MPI(MPI_Type_commit(&fsub));
    CHECK_MPI(MPI_Sendrecv(grid, 1, fsub, right, 10, block, 6, MPI_INT, left, 10, comm, &st));
    const int fwant[6] = {5, 6, 9, 10, 13, 14};
    for (int i = 0; i < 6; ++i) {
      CHECK(block[i] == left * 100 + fwant[i], "Fortran block[%d] = %d, want %d", i, block[i],
            left * 100 + fwant[i]);
    }
    /* The true extent is the data's, not the resized bounds' nor the array's. */
    MPI_Aint tlb = -1, textent = -1;
    CHECK_MPI(MPI_Type_get_true_extent(sub, &tlb, &textent));
    CHECK(tlb == 6 * (MPI_Aint)sizeof(int) && textent == 8 * (MPI_Aint)sizeof(int),
          "subarray true lb %ld extent %ld", (long)tlb, (long)textent);
    MPI_Datatype wide, two;
    CHECK_MPI(MPI_Type_create_resized(MPI_INT, -4, 16, &wide));
    CHECK_MPI(MPI_Type_contiguous(2, wide, &two));
    CHECK_MPI(MPI_Type_get_true_extent(two, &tlb, &textent));
    CHECK(tlb == 0 && textent == 16 + (MPI_Aint)sizeof(int), "true lb %ld extent %ld", (long)tlb,
          (long)textent);
    MPI_Type_free(&two);
    MPI_Type_free(&wide);
    MPI_Type_free(&sub);
    MPI_Type_free(&fsub);
  }

  /* Nonblocking rooted and v-collectives: rank r's block i is r * 100 + i. */
  {
    const int root = size - 1;
    int vcounts[64], vdispls[64], vtotal = 0;
    for (int i = 0; i < size; ++i) {
      vcounts[i] = i + 1;
      vdispls[i] = vtotal;
      vtotal += vcounts[i];
    }
    int* all = malloc(sizeof(int) * (size_t)(vtotal + 2 * size));
    int mine2[2] = {rank * 100, rank * 100 + 1}, own[64];
    for (int k = 0; k <= rank; ++k) own[k] = rank * 100 + k;
    MPI_Request r;

    /* Igather of 2 ints to the root. */
    for (int i = 0; i < 2 * size; ++i) all[i] = -1;
    CHECK_MPI(MPI_Igather(mine2, 2, MPI_INT, all, 2, MPI_INT, root, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; rank == root && i < 2 * size; ++i) {
      CHECK(all[i] == (i / 2) * 100 + i % 2, "Igather all[%d] = %d", i, all[i]);
    }
    /* In place at the root: its own block is already there. What is insignificant (the root's
     * send count and type, the others' receive type) may be anything: MPI_DATATYPE_NULL. */
    for (int i = 0; i < 2 * size; ++i)
      all[i] = rank == root && i / 2 == root ? root * 100 + i % 2 : -1;
    CHECK_MPI(MPI_Igather(rank == root ? MPI_IN_PLACE : mine2, rank == root ? -1 : 2,
                          rank == root ? MPI_DATATYPE_NULL : MPI_INT, all, 2,
                          rank == root ? MPI_INT : MPI_DATATYPE_NULL, root, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; rank == root && i < 2 * size; ++i) {
      CHECK(all[i] == (i / 2) * 100 + i % 2, "in-place Igather all[%d] = %d", i, all[i]);
    }

    /* Igatherv: rank i sends i + 1 ints. */
    for (int i = 0; i < vtotal; ++i) all[i] = -1;
    CHECK_MPI(MPI_Igatherv(own, rank + 1, MPI_INT, all, vcounts, vdispls, MPI_INT, root, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; rank == root && i < size; ++i) {
      for (int k = 0; k <= i; ++k) {
        CHECK(all[vdispls[i] + k] == i * 100 + k, "Igatherv block %d[%d] = %d", i, k,
              all[vdispls[i] + k]);
      }
    }

    /* Iscatter and Iscatterv from rank 0: rank i gets its blocks. */
    for (int i = 0; i < 2 * size; ++i) all[i] = (i / 2) * 100 + i % 2;
    int two[2] = {-1, -1};
    CHECK_MPI(MPI_Iscatter(all, 2, rank == 0 ? MPI_INT : MPI_DATATYPE_NULL, two, 2, MPI_INT, 0,
                           comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(two[0] == rank * 100 && two[1] == rank * 100 + 1, "Iscatter got %d %d", two[0], two[1]);
    for (int i = 0; i < size; ++i) {
      for (int k = 0; k <= i; ++k) all[vdispls[i] + k] = i * 100 + k;
    }
    int got_v[64];
    CHECK_MPI(MPI_Iscatterv(all, vcounts, vdispls, MPI_INT, got_v, rank + 1, MPI_INT, 0, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int k = 0; k <= rank; ++k) {
      CHECK(got_v[k] == rank * 100 + k, "Iscatterv got[%d] = %d", k, got_v[k]);
    }

    /* Iallgatherv: everyone gets everyone's i + 1 ints. */
    for (int i = 0; i < vtotal; ++i) all[i] = -1;
    CHECK_MPI(MPI_Iallgatherv(own, rank + 1, MPI_INT, all, vcounts, vdispls, MPI_INT, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < size; ++i) {
      for (int k = 0; k <= i; ++k) {
        CHECK(all[vdispls[i] + k] == i * 100 + k, "Iallgatherv block %d[%d] = %d", i, k,
              all[vdispls[i] + k]);
      }
    }
    /* The same in place (own block already in recvbuf, the send arguments insignificant), and
     * MPI_Iallgather in place: 2 ints each. */
    for (int i = 0; i < vtotal; ++i) all[i] = -1;
    for (int k = 0; k <= rank; ++k) all[vdispls[rank] + k] = rank * 100 + k;
    CHECK_MPI(MPI_Iallgatherv(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, vcounts, vdispls, MPI_INT,
                              comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < size; ++i) {
      for (int k = 0; k <= i; ++k) {
        CHECK(all[vdispls[i] + k] == i * 100 + k, "in-place Iallgatherv block %d[%d] = %d", i, k,
              all[vdispls[i] + k]);
      }
    }
    for (int i = 0; i < 2 * size; ++i) all[i] = i / 2 == rank ? rank * 100 + i % 2 : -1;
    CHECK_MPI(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < 2 * size; ++i) {
      CHECK(all[i] == (i / 2) * 100 + i % 2, "in-place Iallgather all[%d] = %d", i, all[i]);
    }

    /* Ialltoallv: rank r sends i + 1 ints (r * 100 + i) to rank i and gets rank + 1 from each. */
    int* sendv = malloc(sizeof(int) * (size_t)vtotal);
    int* recvv = malloc(sizeof(int) * (size_t)(size * (rank + 1)));
    int rcnt[64], rdsp[64];
    for (int i = 0; i < size; ++i) {
      for (int k = 0; k <= i; ++k) sendv[vdispls[i] + k] = rank * 100 + i;
      rcnt[i] = rank + 1;
      rdsp[i] = i * (rank + 1);
    }
    CHECK_MPI(
        MPI_Ialltoallv(sendv, vcounts, vdispls, MPI_INT, recvv, rcnt, rdsp, MPI_INT, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < size; ++i) {
      for (int k = 0; k <= rank; ++k) {
        CHECK(recvv[rdsp[i] + k] == i * 100 + rank, "Ialltoallv from %d[%d] = %d", i, k,
              recvv[rdsp[i] + k]);
      }
    }
    /* MPI_Ialltoall and MPI_Ialltoallv in place: what recvbuf holds (block i for rank i, laid
     * out as the receive) is sent, and replaced by what comes back. Symmetric counts for the
     * v form: rank + i + 1 ints between ranks rank and i. */
    int* inplace = malloc(sizeof(int) * (size_t)(2 * size * (size + 1)));
    for (int i = 0; i < size; ++i) {
      inplace[2 * i] = rank * 100 + i;
      inplace[2 * i + 1] = rank * 100 + i + 50;
    }
    CHECK_MPI(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, inplace, 2, MPI_INT, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < size; ++i) {
      CHECK(inplace[2 * i] == i * 100 + rank && inplace[2 * i + 1] == i * 100 + rank + 50,
            "in-place Ialltoall from %d: %d %d", i, inplace[2 * i], inplace[2 * i + 1]);
    }
    int total = 0;
    for (int i = 0; i < size; ++i) {
      rcnt[i] = rank + i + 1;
      rdsp[i] = total;
      for (int k = 0; k < rcnt[i]; ++k) inplace[total + k] = rank * 1000 + i * 10 + k;
      total += rcnt[i];
    }
    CHECK_MPI(MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, inplace, rcnt, rdsp,
                             MPI_INT, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < size; ++i) {
      for (int k = 0; k < rcnt[i]; ++k) {
        CHECK(inplace[rdsp[i] + k] == i * 1000 + rank * 10 + k, "in-place Ialltoallv %d[%d] = %d",
              i, k, inplace[rdsp[i] + k]);
      }
    }
    free(inplace);
    free(sendv);
    free(recvv);
    free(all);

    /* Iscan and Iexscan of rank + 1; Ireduce_scatter(_block) as the blocking ones above. */
    int one_up = rank + 1, scan = -1, exscan = -7;
    MPI_Request rs[2];
    CHECK_MPI(MPI_Iscan(&one_up, &scan, 1, MPI_INT, MPI_SUM, comm, &rs[0]));
    CHECK_MPI(MPI_Iexscan(&one_up, &exscan, 1, MPI_INT, MPI_SUM, comm, &rs[1]));
    CHECK_MPI(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
    CHECK(scan == (rank + 1) * (rank + 2) / 2, "Iscan %d", scan);
    CHECK(rank == 0 || exscan == rank * (rank + 1) / 2, "Iexscan %d", exscan);
    int* vin = malloc(sizeof(int) * (size_t)vtotal);
    int* vout = malloc(sizeof(int) * (size_t)vcounts[rank]);
    for (int i = 0; i < vtotal; ++i) vin[i] = rank * 100 + i;
    CHECK_MPI(MPI_Ireduce_scatter(vin, vout, vcounts, MPI_INT, MPI_SUM, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int j = 0; j < vcounts[rank]; ++j) {
      const int want = 100 * size * (size - 1) / 2 + size * (vdispls[rank] + j);
      CHECK(vout[j] == want, "Ireduce_scatter element %d: %d, want %d", j, vout[j], want);
    }
    int bin[128], bout[2];
    for (int i = 0; i < 2 * size; ++i) bin[i] = rank + i;
    CHECK_MPI(MPI_Ireduce_scatter_block(bin, bout, 2, MPI_INT, MPI_MAX, comm, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(bout[0] == size - 1 + 2 * rank && bout[1] == size + 2 * rank,
          "Ireduce_scatter_block %d %d", bout[0], bout[1]);
    free(vin);
    free(vout);
  }

  /* Names. */
  char name[MPI_MAX_OBJECT_NAME];
  int len = 0;
  CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
  CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == (int)strlen(name), "world is \"%s\"", name);
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(comm, &dup));
  CHECK_MPI(MPI_Comm_set_name(dup, "halo exchange"));
  CHECK_MPI(MPI_Comm_get_name(dup, name, &len));
  CHECK(strcmp(name, "halo exchange") == 0, "dup is \"%s\"", name);
  MPI_Comm_free(&dup);

  /* Info objects, and communicators made with them or nonblockingly. */
  {
    MPI_Info info, copy;
    char value[MPI_MAX_INFO_VAL + 1], key[MPI_MAX_INFO_KEY + 1];
    int flag = 0, vlen = 0, nkeys = 0;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "gos_hint", "first"));
    CHECK_MPI(MPI_Info_set(info, "other", "x"));
    CHECK_MPI(MPI_Info_set(info, "gos_hint", "second"));
    CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 2, "%d keys", nkeys);
    CHECK_MPI(MPI_Info_get_valuelen(info, "gos_hint", &vlen, &flag));
    CHECK(flag && vlen == 6, "valuelen %d flag %d", vlen, flag);
    CHECK_MPI(MPI_Info_get(info, "gos_hint", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && strcmp(value, "second") == 0, "value \"%s\"", value);
    CHECK_MPI(MPI_Info_get(info, "gos_hint", 3, value, &flag));
    CHECK(flag && strcmp(value, "sec") == 0, "truncated value \"%s\"", value);
    CHECK_MPI(MPI_Info_get(info, "missing", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(!flag, "a missing key was found");
#if !defined(OPEN_MPI) || MPI_VERSION >= 4
    /* MPI 4.0's MPI_Info_get_string: the length asked with 0, then a short buffer. */
    int buflen = 0;
    CHECK_MPI(MPI_Info_get_string(info, "gos_hint", &buflen, value, &flag));
    CHECK(flag && buflen == 7, "needed %d flag %d", buflen, flag);
    buflen = 4;
    CHECK_MPI(MPI_Info_get_string(info, "gos_hint", &buflen, value, &flag));
    CHECK(flag && buflen == 7 && strcmp(value, "sec") == 0, "\"%s\", %d", value, buflen);
#endif
    CHECK_MPI(MPI_Info_dup(info, &copy));
    CHECK_MPI(MPI_Info_delete(info, "gos_hint"));
    CHECK_MPI(MPI_Info_get_nthkey(info, 0, key));
    CHECK(strcmp(key, "other") == 0, "key 0 \"%s\"", key);
    CHECK_MPI(MPI_Info_get(copy, "gos_hint", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && strcmp(value, "second") == 0, "the copy lost \"%s\"", value);
    MPI_Comm with_info, idup;
    MPI_Request r;
    CHECK_MPI(MPI_Comm_dup_with_info(comm, copy, &with_info));
    CHECK_MPI(MPI_Comm_idup(comm, &idup, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    int sum = 0;
    CHECK_MPI(MPI_Allreduce(&one_up_global, &sum, 1, MPI_INT, MPI_SUM, idup));
    CHECK(sum == size * (size + 1) / 2, "allreduce on the idup'ed communicator: %d", sum);
    CHECK_MPI(MPI_Allreduce(&one_up_global, &sum, 1, MPI_INT, MPI_SUM, with_info));
    CHECK(sum == size * (size + 1) / 2, "allreduce on the dup_with_info one: %d", sum);
    MPI_Comm_free(&with_info);
    MPI_Comm_free(&idup);
    MPI_Info_free(&info);
    MPI_Info_free(&copy);
    CHECK(info == MPI_INFO_NULL, "MPI_Info_free leaves MPI_INFO_NULL");
  }

  /* The environment. */
  int cls = -1;
  CHECK_MPI(MPI_Error_class(MPI_ERR_TRUNCATE, &cls));
  CHECK(cls == MPI_ERR_TRUNCATE, "class %d", cls);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  CHECK_MPI(MPI_Get_library_version(version, &len));
  /* (Open MPI counts the terminating NUL in len; the standard's printable characters do not.) */
  CHECK(len > 0 && version[0] != '\0' && len >= (int)strlen(version), "library version \"%s\" (%d)",
        version, len);
  int main_thread = 0;
  CHECK_MPI(MPI_Is_thread_main(&main_thread));
  CHECK(main_thread, "MPI_Is_thread_main on the thread that called MPI_Init");

  {
    MPI_Aint a = (MPI_Aint)1 << 40 | g_rank, asum = 0;
    MPI_Offset o = -(MPI_Offset)g_rank, omin = 1;
    MPI_Count c = 3, cmax = 0;
    int sa = 0, so = 0, sc = 0;
    CHECK_MPI(MPI_Type_size(MPI_AINT, &sa));
    CHECK_MPI(MPI_Type_size(MPI_OFFSET, &so));
    CHECK_MPI(MPI_Type_size(MPI_COUNT, &sc));
    CHECK(sa == sizeof(MPI_Aint) && so == sizeof(MPI_Offset) && sc == sizeof(MPI_Count),
          "sizes %d %d %d", sa, so, sc);
    CHECK_MPI(MPI_Allreduce(&a, &asum, 1, MPI_AINT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(&o, &omin, 1, MPI_OFFSET, MPI_MIN, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(&c, &cmax, 1, MPI_COUNT, MPI_MAX, MPI_COMM_WORLD));
    CHECK(asum == ((MPI_Aint)g_size << 40) + (MPI_Aint)g_size * (g_size - 1) / 2,
          "MPI_AINT sum %ld", (long)asum);
    CHECK(omin == -(MPI_Offset)(g_size - 1) && cmax == 3, "MPI_OFFSET min %lld, MPI_COUNT max %lld",
          (long long)omin, (long long)cmax);
  }
  /* MPI_Status_set_elements/_cancelled: what MPI_Get_count, MPI_Get_elements and
   * MPI_Test_cancelled then read back. */
  {
    MPI_Status s;
    MPI_Datatype two;
    int c = -1, e = -1, f = 0;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &two));
    CHECK_MPI(MPI_Type_commit(&two));
    CHECK_MPI(MPI_Status_set_elements(&s, two, 6));
    CHECK_MPI(MPI_Get_count(&s, two, &c));
    CHECK_MPI(MPI_Get_elements(&s, two, &e));
    CHECK(c == 3 && e == 6, "count %d elements %d", c, e);
    CHECK_MPI(MPI_Status_set_elements(&s, MPI_DOUBLE, 5));
    CHECK_MPI(MPI_Get_count(&s, MPI_DOUBLE, &c));
    CHECK(c == 5, "count %d", c);
    CHECK_MPI(MPI_Status_set_cancelled(&s, 1));
    CHECK_MPI(MPI_Test_cancelled(&s, &f));
    CHECK(f == 1, "cancelled %d", f);
    CHECK_MPI(MPI_Type_free(&two));
  }
  return FinishTest();
}
