/* comm_create: communicators from groups. MPI_Comm_create where the ranks pass different,
 * disjoint groups (MPI 2.2: the odd ranks pass the odd group, the even ranks the even one)
 * gives each group its own communicator (before, gos merged them into one); the groups come
 * from MPI_Group_range_incl / _range_excl with negative and positive strides.
 * MPI_Comm_create_group called only by the group's members (the even ranks), twice with the
 * same group and tag and once with another tag: three working communicators that do not see
 * each other's messages. MPI_Comm_get_attr(MPI_LASTUSEDCODE). Plain portable MPI: the answers
 * are Open MPI's too. */
#include "check.h"

/* Checks that comm has `size` ranks with this one at `rank`, and that messages on it stay on
 * it: every rank sends its rank + salt to the next one around the ring. */
static void CheckComm(MPI_Comm comm, int size, int rank, int salt, const char* what) {
  int got_size = -1, got_rank = -1;
  CHECK_MPI(MPI_Comm_size(comm, &got_size));
  CHECK_MPI(MPI_Comm_rank(comm, &got_rank));
  CHECK(got_size == size && got_rank == rank, "%s: rank %d of %d, want %d of %d", what, got_rank,
        got_size, rank, size);
  if (got_size != size || got_rank != rank) return;
  int out = rank + salt, in = -1;
  CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, 3, &in, 1, MPI_INT,
                         (rank + size - 1) % size, 3, comm, MPI_STATUS_IGNORE));
  CHECK(in == (rank + size - 1) % size + salt, "%s: got %d", what, in);
  int sum = -1;
  CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm));
  CHECK(sum == size * (size - 1) / 2, "%s: allreduce %d", what, sum);
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "comm_create");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Group world, odd, even, high;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  const int n_odd = g_size / 2, n_even = (g_size + 1) / 2;

  /* Odd ranks from the highest down; even ranks upwards; the high half by exclusion. */
  int odd_range[1][3] = {{2 * n_odd - 1, 1, -2}};
  int even_range[1][3] = {{0, g_size - 1, 2}};
  int low_range[1][3] = {{0, g_size / 2 - 1, 1}};
  if (n_odd > 0) {
    CHECK_MPI(MPI_Group_range_incl(world, 1, odd_range, &odd));
  } else {
    odd = MPI_GROUP_EMPTY;
  }
  CHECK_MPI(MPI_Group_range_incl(world, 1, even_range, &even));
  if (g_size / 2 > 0) {
    CHECK_MPI(MPI_Group_range_excl(world, 1, low_range, &high));
  } else {
    CHECK_MPI(MPI_Group_range_excl(world, 0, low_range, &high));
  }
  int size = -1, rank = -1;
  CHECK_MPI(MPI_Group_size(even, &size));
  CHECK(size == n_even, "even group size %d", size);
  CHECK_MPI(MPI_Group_size(high, &size));
  CHECK(size == g_size - g_size / 2, "high group size %d", size);
  CHECK_MPI(MPI_Group_rank(odd, &rank));
  CHECK(rank == (g_rank % 2 == 1 ? (2 * n_odd - 1 - g_rank) / 2 : MPI_UNDEFINED),
        "rank in the odd group %d", rank);

  /* Disjoint groups in one call: two communicators. */
  const int is_odd = g_rank % 2;
  MPI_Comm mine = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, is_odd ? odd : even, &mine));
  CHECK(mine != MPI_COMM_NULL, "no communicator from the disjoint groups");
  if (mine != MPI_COMM_NULL) {
    CheckComm(mine, is_odd ? n_odd : n_even, is_odd ? (2 * n_odd - 1 - g_rank) / 2 : g_rank / 2,
              100, "odd/even");
    CHECK_MPI(MPI_Comm_free(&mine));
  }
  /* One group for all, as before: members in group order, the others MPI_COMM_NULL. */
  CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, high, &mine));
  CHECK((mine != MPI_COMM_NULL) == (g_rank >= g_size / 2), "high half: comm %d", mine);
  if (mine != MPI_COMM_NULL) {
    CheckComm(mine, g_size - g_size / 2, g_rank - g_size / 2, 200, "high half");
    CHECK_MPI(MPI_Comm_free(&mine));
  }

  /* MPI_Comm_create_group: only the even ranks call it. The odd ranks meanwhile exchange on
   * the world, which must not disturb it. */
  if (!is_odd) {
    MPI_Comm a, b, c;
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, even, 5, &a));
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, even, 5, &b));
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, even, 6, &c));
    /* Messages on a, b and c with one tag, received in the opposite order of sending: each
     * communicator keeps its own. */
    const int to = (g_rank / 2 + 1) % n_even, from = (g_rank / 2 + n_even - 1) % n_even;
    int out[3] = {10 + g_rank, 20 + g_rank, 30 + g_rank}, in[3] = {-1, -1, -1};
    MPI_Request r[6];
    CHECK_MPI(MPI_Irecv(&in[2], 1, MPI_INT, from, 0, c, &r[0]));
    CHECK_MPI(MPI_Irecv(&in[1], 1, MPI_INT, from, 0, b, &r[1]));
    CHECK_MPI(MPI_Irecv(&in[0], 1, MPI_INT, from, 0, a, &r[2]));
    CHECK_MPI(MPI_Isend(&out[0], 1, MPI_INT, to, 0, a, &r[3]));
    CHECK_MPI(MPI_Isend(&out[1], 1, MPI_INT, to, 0, b, &r[4]));
    CHECK_MPI(MPI_Isend(&out[2], 1, MPI_INT, to, 0, c, &r[5]));
    CHECK_MPI(MPI_Waitall(6, r, MPI_STATUSES_IGNORE));
    const int src = 2 * from;
    CHECK(in[0] == 10 + src && in[1] == 20 + src && in[2] == 30 + src,
          "create_group comms mixed messages: %d %d %d", in[0], in[1], in[2]);
    CheckComm(a, n_even, g_rank / 2, 300, "create_group a");
    CheckComm(c, n_even, g_rank / 2, 400, "create_group c");
    CHECK_MPI(MPI_Comm_free(&a));
    CHECK_MPI(MPI_Comm_free(&b));
    CHECK_MPI(MPI_Comm_free(&c));
  } else if (n_odd > 1) {
    MPI_Comm odds;
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, odd, 5, &odds));
    CheckComm(odds, n_odd, (2 * n_odd - 1 - g_rank) / 2, 500, "create_group odd");
    CHECK_MPI(MPI_Comm_free(&odds));
  }

  int* last = NULL;
  int flag = 0;
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
  CHECK(flag == 1 && last != NULL && *last >= MPI_ERR_LASTCODE, "MPI_LASTUSEDCODE: flag %d", flag);

  if (odd != MPI_GROUP_EMPTY) CHECK_MPI(MPI_Group_free(&odd));
  CHECK_MPI(MPI_Group_free(&even));
  if (high != MPI_GROUP_EMPTY) CHECK_MPI(MPI_Group_free(&high));
  CHECK_MPI(MPI_Group_free(&world));
  return FinishTest();
}
