// Groups (MPI 4.1, 7.3): accessors, constructors (MPI_Comm_group, the set operations,
// inclusion and exclusion) and MPI_Group_free.
#include <algorithm>
#include <utility>
#include <vector>

#include "comm_logic.h"
#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::Fail;
using gos::mpi::internal::FindGroup;
using gos::mpi::internal::GroupRankOf;
using gos::mpi::internal::S;
using gos::mpi::internal::State;

MPI_Group AddGroup(std::vector<int> world_ranks) {
  State& s = S();
  s.groups.emplace_back(std::move(world_ranks));
  return static_cast<MPI_Group>(s.groups.size() - 1);
}

// Union (a, then b's not in a), intersection (a's in b) or difference (a's not in b), in
// the order of the first group, as MPI defines them.
enum class SetOp { kUnion, kIntersection, kDifference };

int GroupSetOp(const char* fn, MPI_Group g1, MPI_Group g2, MPI_Group* out, SetOp which) {
  const std::vector<int>* a = FindGroup(g1);
  const std::vector<int>* b = FindGroup(g2);
  if (a == nullptr || b == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_GROUP);
  std::vector<int> r;
  auto in = [](const std::vector<int>& g, int w) { return GroupRankOf(g, w) >= 0; };
  for (int w : *a) {
    if (which == SetOp::kUnion || (which == SetOp::kIntersection) == in(*b, w)) r.push_back(w);
  }
  if (which == SetOp::kUnion) {
    for (int w : *b) {
      if (!in(*a, w)) r.push_back(w);
    }
  }
  *out = r.empty() ? MPI_GROUP_EMPTY : AddGroup(std::move(r));
  return MPI_SUCCESS;
}

// MPI_Group_range_incl / _excl: the ranges' ranks, then MPI_Group_incl / _excl of them.
int GroupRanges(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup, bool include) {
  const char* const fn = include ? "MPI_Group_range_incl" : "MPI_Group_range_excl";
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_GROUP);
  std::vector<int> ranks;
  if (!gos::mpi::ExpandRanges(n, ranges, static_cast<int>(g->size()), &ranks)) {
    return Fail(MPI_COMM_WORLD, fn, MPI_ERR_RANK);
  }
  const int count = static_cast<int>(ranks.size());
  return include ? PMPI_Group_incl(group, count, ranks.data(), newgroup)
                 : PMPI_Group_excl(group, count, ranks.data(), newgroup);
}

}  // namespace

namespace gos::mpi::internal {

const std::vector<int>* FindGroup(MPI_Group g) {
  State& s = S();
  if (g <= 0 || static_cast<size_t>(g) >= s.groups.size() || !s.groups[static_cast<size_t>(g)]) {
    return nullptr;
  }
  return &*s.groups[static_cast<size_t>(g)];
}

int GroupRankOf(const std::vector<int>& g, int w) {
  auto it = std::find(g.begin(), g.end(), w);
  return it == g.end() ? -1 : static_cast<int>(it - g.begin());
}

}  // namespace gos::mpi::internal

extern "C" {

GOS_MPI_WEAK_ALIAS(Group_size);
int PMPI_Group_size(MPI_Group group, int* size) {
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_size", MPI_ERR_GROUP);
  *size = static_cast<int>(g->size());
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Group_rank);
int PMPI_Group_rank(MPI_Group group, int* rank) {
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_rank", MPI_ERR_GROUP);
  const int at = GroupRankOf(*g, gos_world_rank());
  *rank = at < 0 ? MPI_UNDEFINED : at;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Group_translate_ranks);
int PMPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                               int ranks2[]) {
  const std::vector<int>* a = FindGroup(group1);
  const std::vector<int>* b = FindGroup(group2);
  if (a == nullptr || b == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Group_translate_ranks", MPI_ERR_GROUP);
  }
  for (int i = 0; i < n; ++i) {
    if (ranks1[i] == MPI_PROC_NULL) {
      ranks2[i] = MPI_PROC_NULL;
      continue;
    }
    if (ranks1[i] < 0 || ranks1[i] >= static_cast<int>(a->size())) {
      return Fail(MPI_COMM_WORLD, "MPI_Group_translate_ranks", MPI_ERR_RANK);
    }
    const int at = GroupRankOf(*b, (*a)[static_cast<size_t>(ranks1[i])]);
    ranks2[i] = at < 0 ? MPI_UNDEFINED : at;
  }
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Group_compare);
int PMPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result) {
  const std::vector<int>* a = FindGroup(group1);
  const std::vector<int>* b = FindGroup(group2);
  if (a == nullptr || b == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_compare", MPI_ERR_GROUP);
  if (*a == *b) {
    *result = MPI_IDENT;
    return MPI_SUCCESS;
  }
  std::vector<int> sa = *a, sb = *b;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  *result = sa == sb ? MPI_SIMILAR : MPI_UNEQUAL;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_group);
int PMPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_group");
  std::vector<int> w(static_cast<size_t>(c->g.size));
  for (int i = 0; i < c->g.size; ++i) w[static_cast<size_t>(i)] = c->WorldRank(i);
  *group = AddGroup(std::move(w));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Group_union);
int PMPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return GroupSetOp("MPI_Group_union", group1, group2, newgroup, SetOp::kUnion);
}

GOS_MPI_WEAK_ALIAS(Group_intersection);
int PMPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return GroupSetOp("MPI_Group_intersection", group1, group2, newgroup, SetOp::kIntersection);
}

GOS_MPI_WEAK_ALIAS(Group_difference);
int PMPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return GroupSetOp("MPI_Group_difference", group1, group2, newgroup, SetOp::kDifference);
}

GOS_MPI_WEAK_ALIAS(Group_incl);
int PMPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_incl", MPI_ERR_GROUP);
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= static_cast<int>(g->size()) ||
        std::find(ranks, ranks + i, ranks[i]) != ranks + i) {
      return Fail(MPI_COMM_WORLD, "MPI_Group_incl", MPI_ERR_RANK);
    }
    out.push_back((*g)[static_cast<size_t>(ranks[i])]);
  }
  *newgroup = out.empty() ? MPI_GROUP_EMPTY : AddGroup(std::move(out));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Group_excl);
int PMPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_excl", MPI_ERR_GROUP);
  std::vector<bool> drop(g->size(), false);
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= static_cast<int>(g->size())) {
      return Fail(MPI_COMM_WORLD, "MPI_Group_excl", MPI_ERR_RANK);
    }
    drop[static_cast<size_t>(ranks[i])] = true;
  }
  std::vector<int> out;
  for (size_t i = 0; i < g->size(); ++i) {
    if (!drop[i]) out.push_back((*g)[i]);
  }
  *newgroup = out.empty() ? MPI_GROUP_EMPTY : AddGroup(std::move(out));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Group_range_incl);
int PMPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  return GroupRanges(group, n, ranges, newgroup, true);
}

GOS_MPI_WEAK_ALIAS(Group_range_excl);
int PMPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  return GroupRanges(group, n, ranges, newgroup, false);
}

GOS_MPI_WEAK_ALIAS(Group_free);
int PMPI_Group_free(MPI_Group* group) {
  if (group == nullptr || FindGroup(*group) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Group_free", MPI_ERR_GROUP);
  }
  if (*group != MPI_GROUP_EMPTY) S().groups[static_cast<size_t>(*group)].reset();
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"
