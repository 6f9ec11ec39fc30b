/* groups: MPI_Comm_group, MPI_Group_incl/excl/union/intersection/difference/translate_ranks/
 * compare/free, MPI_Comm_create from a group (members in group order, the others get
 * MPI_COMM_NULL), MPI_Comm_compare (ident, congruent, similar, unequal),
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (the node communicators partition the world) and
 * MPI_Comm_get_attr(MPI_TAG_UB). Plain portable MPI: the answers are Open MPI's too. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "groups");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Group world, evens, odds, all, none, diff;
  int size = -1, rank = -1;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  CHECK_MPI(MPI_Group_size(world, &size));
  CHECK_MPI(MPI_Group_rank(world, &rank));
  CHECK(size == g_size && rank == g_rank, "world group %d/%d", rank, size);

  /* Even ranks, listed from the highest down: group order is the list's. */
  int ev[64], n_ev = 0;
  for (int r = g_size - 1; r >= 0; --r) {
    if (r % 2 == 0 && n_ev < 64) ev[n_ev++] = r;
  }
  CHECK_MPI(MPI_Group_incl(world, n_ev, ev, &evens));
  CHECK_MPI(MPI_Group_excl(world, n_ev, ev, &odds));
  CHECK_MPI(MPI_Group_size(evens, &size));
  CHECK(size == n_ev, "evens size %d", size);
  CHECK_MPI(MPI_Group_rank(evens, &rank));
  CHECK(rank == (g_rank % 2 == 0 ? n_ev - 1 - g_rank / 2 : MPI_UNDEFINED), "rank in evens %d",
        rank);
  CHECK_MPI(MPI_Group_size(odds, &size));
  CHECK(size == g_size - n_ev, "odds size %d", size);

  CHECK_MPI(MPI_Group_union(evens, odds, &all));
  CHECK_MPI(MPI_Group_intersection(evens, odds, &none));
  CHECK_MPI(MPI_Group_difference(world, odds, &diff));
  int cmp = -1;
  CHECK_MPI(MPI_Group_compare(all, world, &cmp));
  /* evens (descending), then odds: the world's order only up to 2 ranks. */
  CHECK(cmp == (g_size <= 2 ? MPI_IDENT : MPI_SIMILAR), "union vs world %d", cmp);
  CHECK_MPI(MPI_Group_size(none, &size));
  CHECK(size == 0, "intersection of evens and odds: %d", size);
  CHECK_MPI(MPI_Group_compare(diff, evens, &cmp));
  CHECK(cmp == (n_ev > 1 ? MPI_SIMILAR : MPI_IDENT), "world - odds vs evens %d", cmp);
  if (g_size > 1) {
    CHECK_MPI(MPI_Group_compare(evens, world, &cmp));
    CHECK(cmp == MPI_UNEQUAL, "evens vs world %d", cmp);
  }

  /* Translate world ranks to evens ranks. */
  int from[3] = {0, 1, MPI_PROC_NULL}, to[3] = {-9, -9, -9};
  if (g_size >= 2) {
    CHECK_MPI(MPI_Group_translate_ranks(world, 3, from, evens, to));
    CHECK(to[0] == n_ev - 1 && to[1] == MPI_UNDEFINED && to[2] == MPI_PROC_NULL,
          "translate %d %d %d", to[0], to[1], to[2]);
  }

  /* A communicator of the evens, in group order. */
  MPI_Comm ecomm;
  CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, evens, &ecomm));
  if (g_rank % 2 == 0) {
    CHECK(ecomm != MPI_COMM_NULL, "an even rank got MPI_COMM_NULL");
    if (ecomm != MPI_COMM_NULL) {
      int er = -1, es = -1, sum = 0;
      MPI_Comm_rank(ecomm, &er);
      MPI_Comm_size(ecomm, &es);
      CHECK(er == n_ev - 1 - g_rank / 2 && es == n_ev, "evens comm %d/%d", er, es);
      CHECK_MPI(MPI_Allreduce(&g_rank, &sum, 1, MPI_INT, MPI_SUM, ecomm));
      int want = 0;
      for (int i = 0; i < n_ev; ++i) want += ev[i];
      CHECK(sum == want, "sum over evens %d, expected %d", sum, want);
      /* Rank 0 of ecomm is the highest even world rank. */
      int root_world = g_rank;
      CHECK_MPI(MPI_Bcast(&root_world, 1, MPI_INT, 0, ecomm));
      CHECK(root_world == ev[0], "ecomm rank 0 is world %d, expected %d", root_world, ev[0]);
      if (es > 1) {
        CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, ecomm, &cmp));
        CHECK(cmp == MPI_UNEQUAL, "world vs evens comm %d", cmp);
      }
      MPI_Comm_free(&ecomm);
    }
  } else {
    CHECK(ecomm == MPI_COMM_NULL, "an odd rank got a communicator");
  }

  /* Communicator comparisons. */
  MPI_Comm dup, rev;
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &cmp));
  CHECK(cmp == MPI_IDENT, "world vs world %d", cmp);
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp));
  CHECK(cmp == MPI_CONGRUENT, "world vs its dup %d", cmp);
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, -g_rank, &rev));
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, rev, &cmp));
  CHECK(cmp == (g_size > 1 ? MPI_SIMILAR : MPI_CONGRUENT), "world vs reversed %d", cmp);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&rev);

  /* Node communicators: each rank is in one; their sizes add up to the world. */
  MPI_Comm node;
  CHECK_MPI(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node));
  int nr = -1, ns = -1, total = 0;
  MPI_Comm_rank(node, &nr);
  MPI_Comm_size(node, &ns);
  int mine = nr == 0 ? ns : 0;
  CHECK_MPI(MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(total == g_size, "node communicators add up to %d of %d", total, g_size);
  MPI_Comm_free(&node);

  /* The largest tag. */
  int* tag_ub = NULL;
  int flag = 0;
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
  CHECK(flag == 1 && tag_ub != NULL && *tag_ub >= 32767, "MPI_TAG_UB flag %d value %d", flag,
        tag_ub ? *tag_ub : -1);

  MPI_Group_free(&world);
  MPI_Group_free(&evens);
  MPI_Group_free(&odds);
  MPI_Group_free(&all);
  MPI_Group_free(&none);
  MPI_Group_free(&diff);
  CHECK(world == MPI_GROUP_NULL, "Group_free did not reset the handle");
  return FinishTest();
}
