// Communicators (MPI 4.1, 7.4, 7.6, 7.8): accessors, constructors (dup, split, create),
// MPI_Comm_free, info hints and names.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "comm_logic.h"
#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::AddComm;
using gos::mpi::internal::Comm;
using gos::mpi::internal::Compound;
using gos::mpi::internal::CopyAttrs;
using gos::mpi::internal::DeleteAllAttrs;
using gos::mpi::internal::ExchangeImpl;
using gos::mpi::internal::Fail;
using gos::mpi::internal::FindComm;
using gos::mpi::internal::FindGroup;
using gos::mpi::internal::FindInfo;
using gos::mpi::internal::GetName;
using gos::mpi::internal::GroupRankOf;
using gos::mpi::internal::MakeChild;
using gos::mpi::internal::NewInfo;
using gos::mpi::internal::S;
using gos::mpi::internal::SetName;

// Makes the communicator of parent members `members` (parent ranks, in new-rank order) with
// context `ctx`.
MPI_Comm MakeChildWithContext(const Comm& parent, const std::vector<int>& members, uint64_t ctx) {
  auto c = std::make_unique<Comm>();
  c->errhandler = parent.errhandler;
  c->g.ctx = ctx;
  c->g.size = static_cast<int>(members.size());
  c->world_to_comm.assign(static_cast<size_t>(gos_world_size()), -1);
  for (size_t i = 0; i < members.size(); ++i) {
    const int w = parent.WorldRank(members[i]);
    c->world.push_back(w);
    c->world_to_comm[static_cast<size_t>(w)] = static_cast<int>(i);
    if (members[i] == parent.g.rank) c->g.rank = static_cast<int>(i);
  }
  c->g.world = c->world.data();
  c->g.world_to_comm = c->world_to_comm.data();
  return AddComm(std::move(c));
}

}  // namespace

namespace gos::mpi::internal {

Comm* FindComm(MPI_Comm c) {
  State& s = S();
  if (c <= 0 || static_cast<size_t>(c) >= s.comms.size()) return nullptr;
  return s.comms[static_cast<size_t>(c)].get();
}

MPI_Comm AddComm(std::unique_ptr<Comm> c) {
  State& s = S();
  s.comms.push_back(std::move(c));
  return static_cast<MPI_Comm>(s.comms.size() - 1);
}

MPI_Comm MakeChild(const Comm& parent, const std::vector<int>& members, uint64_t salt) {
  return MakeChildWithContext(parent, members,
                              gos::mpi::DeriveContext(parent.g.ctx, parent.children, salt));
}

}  // namespace gos::mpi::internal

extern "C" {

GOS_MPI_WEAK_ALIAS(Comm_size);
int PMPI_Comm_size(MPI_Comm comm, int* size) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_size");
  *size = c->g.size;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_rank);
int PMPI_Comm_rank(MPI_Comm comm, int* rank) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_rank");
  *rank = c->g.rank;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_compare);
int PMPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  static const char* const kFn = "MPI_Comm_compare";
  Comm* a = FindComm(comm1);
  Comm* b = FindComm(comm2);
  if (a == nullptr || b == nullptr) return Fail(comm1, kFn, MPI_ERR_COMM);
  if (result == nullptr) return Fail(comm1, kFn, MPI_ERR_ARG);
  std::vector<int> wa(static_cast<size_t>(a->g.size)), wb(static_cast<size_t>(b->g.size));
  for (int i = 0; i < a->g.size; ++i) wa[static_cast<size_t>(i)] = a->WorldRank(i);
  for (int i = 0; i < b->g.size; ++i) wb[static_cast<size_t>(i)] = b->WorldRank(i);
  if (comm1 == comm2) {
    *result = MPI_IDENT;
  } else if (wa == wb) {
    *result = MPI_CONGRUENT;
  } else {
    std::sort(wa.begin(), wa.end());
    std::sort(wb.begin(), wb.end());
    *result = wa == wb ? MPI_SIMILAR : MPI_UNEQUAL;
  }
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_dup);
int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_dup");
  // Every member calls dup in the same order, so `children` agrees everywhere and the new
  // context needs no communication.
  std::vector<int> members(static_cast<size_t>(c->g.size));
  for (int i = 0; i < c->g.size; ++i) members[static_cast<size_t>(i)] = i;
  const MPI_Comm dup = MakeChild(*c, members, gos::mpi::kDupSalt);
  Comm* n = FindComm(dup);
  if (n == nullptr) return Fail(comm, "MPI_Comm_dup", MPI_ERR_INTERN);
  n->cart = c->cart;
  n->graph = c->graph;
  ++c->children;
  if (int e = CopyAttrs(comm, *c, n)) {
    // A copy callback failed: the attributes copied so far are deleted with the new one.
    (void)DeleteAllAttrs(dup, n);
    S().comms[static_cast<size_t>(dup)].reset();
    *newcomm = MPI_COMM_NULL;
    return Fail(comm, "MPI_Comm_dup", e);
  }
  *newcomm = dup;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_dup_with_info);
int PMPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  if (int e = PMPI_Comm_set_info(comm, info)) return e;
  return PMPI_Comm_dup(comm, newcomm);
}

// MPI_Comm_dup needs no communication here (see there): the request is complete at once.
GOS_MPI_WEAK_ALIAS(Comm_idup);
int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
  if (request == nullptr) return Fail(comm, "MPI_Comm_idup", MPI_ERR_ARG);
  if (int e = PMPI_Comm_dup(comm, newcomm)) return e;
  *request = Compound(comm, {}, nullptr);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_create);
int PMPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  static const char* const kFn = "MPI_Comm_create";
  GOS_MPI_COMM(c, comm, kFn);
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(comm, kFn, MPI_ERR_GROUP);
  for (int w : *g) {
    if (w < 0 || w >= gos_world_size() ||
        (c->g.world_to_comm != nullptr && c->g.world_to_comm[w] < 0)) {
      return Fail(comm, kFn, MPI_ERR_GROUP);  // not a subset of comm
    }
  }
  // Members in group order; the others get MPI_COMM_NULL (a split every member makes). Since
  // MPI 2.2 the ranks may pass different, disjoint groups and each group becomes its own
  // communicator: the color is the group's lowest world rank, which disjoint groups never
  // share.
  const int at = GroupRankOf(*g, c->WorldRank(c->g.rank));
  const int color = at < 0 ? MPI_UNDEFINED : *std::min_element(g->begin(), g->end());
  return PMPI_Comm_split(comm, color, at, newcomm);
}

GOS_MPI_WEAK_ALIAS(Comm_create_group);
int PMPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  static const char* const kFn = "MPI_Comm_create_group";
  GOS_MPI_COMM(c, comm, kFn);
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(comm, kFn, MPI_ERR_GROUP);
  if (tag < 0) return Fail(comm, kFn, MPI_ERR_TAG);
  if (newcomm == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  std::vector<int> members;
  for (int w : *g) {
    const int r = w < 0 || w >= gos_world_size()  ? -1
                  : c->g.world_to_comm != nullptr ? c->g.world_to_comm[w]
                                                  : w;
    if (r < 0 || r >= c->g.size) return Fail(comm, kFn, MPI_ERR_GROUP);  // not a subset of comm
    members.push_back(r);
  }
  if (std::find(members.begin(), members.end(), c->g.rank) == members.end()) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  // Only the members call, so the context comes from what they all share and nobody else
  // does: the group (in order), the tag, and how many times they made one of this key.
  const uint64_t key = gos::mpi::GroupKey(*g, tag);
  const uint64_t serial = c->group_creates[key]++;
  *newcomm = MakeChildWithContext(
      *c, members, gos::mpi::DeriveContext(c->g.ctx, serial, gos::mpi::kCreateGroupSalt ^ key));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_split);
int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  static const char* const kFn = "MPI_Comm_split";
  GOS_MPI_COMM(c, comm, kFn);
  if (color < 0 && color != MPI_UNDEFINED) return Fail(comm, kFn, MPI_ERR_ARG);
  const int n = c->g.size;
  std::vector<int> mine = {color, key};
  std::vector<int> all(2 * static_cast<size_t>(n));
  std::vector<int> counts(static_cast<size_t>(n), 2);
  std::vector<int> displs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) displs[static_cast<size_t>(i)] = 2 * i;
  all[2 * static_cast<size_t>(c->g.rank)] = color;
  all[2 * static_cast<size_t>(c->g.rank) + 1] = key;
  if (int e = ExchangeImpl(kFn, mine.data(), counts.data(), std::vector<int>(n, 0).data(), MPI_INT,
                           all.data(), counts.data(), displs.data(), MPI_INT, c, comm,
                           /*self_copy=*/false)) {
    return e;
  }
  std::vector<gos::mpi::SplitEntry> entries(static_cast<size_t>(n));
  for (size_t i = 0; i < entries.size(); ++i) entries[i] = {all[2 * i], all[2 * i + 1]};
  std::vector<int> members = gos::mpi::SplitMembers(entries, c->g.rank, MPI_UNDEFINED);
  *newcomm = members.empty() ? MPI_COMM_NULL : MakeChild(*c, members, static_cast<uint64_t>(color));
  ++c->children;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_split_type);
int PMPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info /*info*/,
                         MPI_Comm* newcomm) {
  if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED) {
    return Fail(comm, "MPI_Comm_split_type", MPI_ERR_ARG);
  }
  // The node the rank was launched on (a restored rank keeps its communicators).
  const char* node = std::getenv("GOS_NODE");
  const int color = split_type == MPI_UNDEFINED ? MPI_UNDEFINED : node ? std::atoi(node) : 0;
  return PMPI_Comm_split(comm, color, key, newcomm);
}

GOS_MPI_WEAK_ALIAS(Comm_free);
int PMPI_Comm_free(MPI_Comm* comm) {
  Comm* c = comm != nullptr ? FindComm(*comm) : nullptr;
  if (c == nullptr || *comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF) {
    return Fail(comm != nullptr ? *comm : MPI_COMM_WORLD, "MPI_Comm_free", MPI_ERR_COMM);
  }
  // The attributes' delete callbacks run first; one's error leaves the communicator as it is.
  GOS_MPI_CHECK(*comm, "MPI_Comm_free", DeleteAllAttrs(*comm, c));
  S().comms[static_cast<size_t>(*comm)].reset();
  S().comm_names.erase(*comm);
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

// Hints on communicators: accepted and ignored; MPI_Comm_get_info returns an empty set.
GOS_MPI_WEAK_ALIAS(Comm_set_info);
int PMPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_set_info");
  (void)c;
  if (info != MPI_INFO_NULL && FindInfo(info) == nullptr) {
    return Fail(comm, "MPI_Comm_set_info", MPI_ERR_ARG);
  }
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_get_info);
int PMPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_get_info");
  (void)c;
  if (info_used == nullptr) return Fail(comm, "MPI_Comm_get_info", MPI_ERR_ARG);
  *info_used = NewInfo({});
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_test_inter);
int PMPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_test_inter");
  (void)c;
  if (flag == nullptr) return Fail(comm, "MPI_Comm_test_inter", MPI_ERR_ARG);
  *flag = 0;  // every communicator is an intracommunicator
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_set_name);
int PMPI_Comm_set_name(MPI_Comm comm, const char* comm_name) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_set_name");
  (void)c;
  if (comm_name == nullptr) return Fail(comm, "MPI_Comm_set_name", MPI_ERR_ARG);
  SetName(S().comm_names, comm, comm_name);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_get_name);
int PMPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_get_name");
  (void)c;
  if (comm_name == nullptr || resultlen == nullptr) {
    return Fail(comm, "MPI_Comm_get_name", MPI_ERR_ARG);
  }
  // Unnamed communicators have the empty name; the predefined ones their own (MPI 4.1, 7.8).
  const char* predefined = comm == MPI_COMM_WORLD  ? "MPI_COMM_WORLD"
                           : comm == MPI_COMM_SELF ? "MPI_COMM_SELF"
                                                   : nullptr;
  GetName(S().comm_names, comm, predefined, comm_name, resultlen);
  return MPI_SUCCESS;
}

}  // extern "C"
