// Attribute caching on communicators (MPI 4.1, 7.7): keyvals, the attributes stored under
// them, and the predefined attributes.
#include <algorithm>
#include <utility>
#include <vector>

#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::Comm;
using gos::mpi::internal::Fail;
using gos::mpi::internal::Keyval;
using gos::mpi::internal::kFirstKeyval;
using gos::mpi::internal::S;
using gos::mpi::internal::State;

// A user keyval, freed ones included (their stored attributes outlive them), or nullptr.
Keyval* FindKeyval(int keyval) {
  State& s = S();
  if (keyval < kFirstKeyval || static_cast<size_t>(keyval - kFirstKeyval) >= s.keyvals.size()) {
    return nullptr;
  }
  return &s.keyvals[static_cast<size_t>(keyval - kFirstKeyval)];
}

bool IsPredefinedKeyval(int keyval) { return keyval >= MPI_TAG_UB && keyval <= MPI_LASTUSEDCODE; }

std::vector<std::pair<int, void*>>::iterator FindAttr(Comm* c, int keyval) {
  return std::find_if(c->attrs.begin(), c->attrs.end(),
                      [keyval](const auto& a) { return a.first == keyval; });
}

// Deletes attribute `keyval` of comm (nothing when it is not set): its delete callback runs
// first, and an error from it leaves the attribute in place and is returned. The callback
// may call MPI, so the attribute is looked up again after it.
int DeleteAttr(MPI_Comm comm, Comm* c, int keyval) {
  auto it = FindAttr(c, keyval);
  if (it == c->attrs.end()) return MPI_SUCCESS;
  const Keyval* kv = FindKeyval(keyval);
  if (kv != nullptr && kv->del != nullptr) {
    if (int e = kv->del(comm, keyval, it->second, kv->extra)) return e;
  }
  it = FindAttr(c, keyval);
  if (it != c->attrs.end()) c->attrs.erase(it);
  return MPI_SUCCESS;
}

}  // namespace

namespace gos::mpi::internal {

int DeleteAllAttrs(MPI_Comm comm, Comm* c) {
  while (!c->attrs.empty()) {
    if (int e = DeleteAttr(comm, c, c->attrs.back().first)) return e;
  }
  return MPI_SUCCESS;
}

int CopyAttrs(MPI_Comm comm, const Comm& from, Comm* to) {
  const std::vector<std::pair<int, void*>> attrs = from.attrs;
  for (const auto& [keyval, value] : attrs) {
    const Keyval* kv = FindKeyval(keyval);
    if (kv == nullptr || kv->copy == nullptr) continue;
    void* out = nullptr;
    int flag = 0;
    if (int e = kv->copy(comm, keyval, kv->extra, value, &out, &flag)) return e;
    if (flag != 0) to->attrs.emplace_back(keyval, out);
  }
  return MPI_SUCCESS;
}

}  // namespace gos::mpi::internal

extern "C" {

int gos_mpi_comm_null_copy_fn(MPI_Comm /*oldcomm*/, int /*comm_keyval*/, void* /*extra_state*/,
                              void* /*attribute_val_in*/, void* /*attribute_val_out*/, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

int gos_mpi_comm_null_delete_fn(MPI_Comm /*comm*/, int /*comm_keyval*/, void* /*attribute_val*/,
                                void* /*extra_state*/) {
  return MPI_SUCCESS;
}

int gos_mpi_comm_dup_fn(MPI_Comm /*oldcomm*/, int /*comm_keyval*/, void* /*extra_state*/,
                        void* attribute_val_in, void* attribute_val_out, int* flag) {
  *static_cast<void**>(attribute_val_out) = attribute_val_in;
  *flag = 1;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_create_keyval);
int PMPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                            MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval,
                            void* extra_state) {
  if (comm_keyval == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Comm_create_keyval", MPI_ERR_ARG);
  State& s = S();
  s.keyvals.push_back({comm_copy_attr_fn, comm_delete_attr_fn, extra_state, false});
  *comm_keyval = kFirstKeyval + static_cast<int>(s.keyvals.size() - 1);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_free_keyval);
int PMPI_Comm_free_keyval(int* comm_keyval) {
  Keyval* kv = comm_keyval != nullptr ? FindKeyval(*comm_keyval) : nullptr;
  if (kv == nullptr || kv->freed) {
    return Fail(MPI_COMM_WORLD, "MPI_Comm_free_keyval", MPI_ERR_KEYVAL);
  }
  kv->freed = true;
  *comm_keyval = MPI_KEYVAL_INVALID;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_set_attr);
int PMPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val) {
  static const char* const kFn = "MPI_Comm_set_attr";
  GOS_MPI_COMM(c, comm, kFn);
  const Keyval* kv = FindKeyval(comm_keyval);
  if (kv == nullptr || kv->freed) return Fail(comm, kFn, MPI_ERR_KEYVAL);
  // A value already there is deleted first, as by MPI_Comm_delete_attr (its callback runs).
  if (int e = DeleteAttr(comm, c, comm_keyval)) return Fail(comm, kFn, e);
  c->attrs.emplace_back(comm_keyval, attribute_val);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_get_attr);
int PMPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag) {
  static const char* const kFn = "MPI_Comm_get_attr";
  static int tag_ub = 0x7fffffff, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_global = 0,
             universe = 0;
  GOS_MPI_COMM(c, comm, kFn);
  if (attribute_val == nullptr || flag == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  if (!IsPredefinedKeyval(comm_keyval)) {
    if (FindKeyval(comm_keyval) == nullptr) return Fail(comm, kFn, MPI_ERR_KEYVAL);
    auto it = FindAttr(c, comm_keyval);
    *flag = it != c->attrs.end() ? 1 : 0;
    if (*flag != 0) *static_cast<void**>(attribute_val) = it->second;
    return MPI_SUCCESS;
  }
  int* value = nullptr;
  switch (comm_keyval) {
    case MPI_TAG_UB:
      value = &tag_ub;
      break;
    case MPI_HOST:
      value = &host;
      break;
    case MPI_IO:
      value = &io;  // every rank can do I/O
      break;
    case MPI_WTIME_IS_GLOBAL:
      value = &wtime_global;  // each node's own clock
      break;
    case MPI_UNIVERSE_SIZE:
      universe = gos_world_size();
      value = &universe;
      break;
    case MPI_LASTUSEDCODE:
      value = &S().last_used_code;
      break;
    default:
      break;
  }
  *flag = value != nullptr ? 1 : 0;
  if (value != nullptr) *static_cast<int**>(attribute_val) = value;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_delete_attr);
int PMPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
  static const char* const kFn = "MPI_Comm_delete_attr";
  GOS_MPI_COMM(c, comm, kFn);
  if (FindKeyval(comm_keyval) == nullptr) return Fail(comm, kFn, MPI_ERR_KEYVAL);
  GOS_MPI_CHECK(comm, kFn, DeleteAttr(comm, c, comm_keyval));
  return MPI_SUCCESS;
}

// The MPI-1 names of calls above (deprecated).
GOS_MPI_WEAK_ALIAS(Keyval_create);
int PMPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval,
                       void* extra_state) {
  return PMPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}

GOS_MPI_WEAK_ALIAS(Keyval_free);
int PMPI_Keyval_free(int* keyval) { return PMPI_Comm_free_keyval(keyval); }

GOS_MPI_WEAK_ALIAS(Attr_put);
int PMPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val) {
  return PMPI_Comm_set_attr(comm, keyval, attribute_val);
}

GOS_MPI_WEAK_ALIAS(Attr_get);
int PMPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  return PMPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}

GOS_MPI_WEAK_ALIAS(Attr_delete);
int PMPI_Attr_delete(MPI_Comm comm, int keyval) { return PMPI_Comm_delete_attr(comm, keyval); }

}  // extern "C"
