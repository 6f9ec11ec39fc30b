// MPI_Info (MPI 4.1, chapter 10): key/value hints. gos acts on none of them; they are kept
// and returned.
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::Fail;
using gos::mpi::internal::FindInfo;
using gos::mpi::internal::InfoPairs;
using gos::mpi::internal::NewInfo;
using gos::mpi::internal::S;

// The pairs of `info` when it is a live info object and the call's other arguments are valid
// (`args_ok`); else nullptr, with *err the error applied (MPI_ERR_ARG).
InfoPairs* InfoArgs(const char* fn, MPI_Info info, bool args_ok, int* err) {
  InfoPairs* pairs = args_ok ? FindInfo(info) : nullptr;
  if (pairs == nullptr) *err = Fail(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
  return pairs;
}

// The value of key, or nullptr.
std::string* InfoValue(InfoPairs& pairs, const char* key) {
  for (auto& [k, v] : pairs) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace

namespace gos::mpi::internal {

InfoPairs* FindInfo(MPI_Info info) {
  auto& infos = S().infos;
  if (info < 1 || static_cast<size_t>(info) > infos.size()) return nullptr;
  auto& slot = infos[static_cast<size_t>(info - 1)];
  return slot ? &*slot : nullptr;
}

MPI_Info NewInfo(InfoPairs pairs) {
  S().infos.emplace_back(std::move(pairs));
  return static_cast<MPI_Info>(S().infos.size());
}

}  // namespace gos::mpi::internal

extern "C" {

GOS_MPI_WEAK_ALIAS(Info_create);
int PMPI_Info_create(MPI_Info* info) {
  if (info == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Info_create", MPI_ERR_ARG);
  *info = NewInfo({});
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_set);
int PMPI_Info_set(MPI_Info info, const char* key, const char* value) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs =
      InfoArgs("MPI_Info_set", info,
               key != nullptr && value != nullptr && *key != '\0' &&
                   std::strlen(key) < MPI_MAX_INFO_KEY && std::strlen(value) < MPI_MAX_INFO_VAL,
               &err);
  if (pairs == nullptr) return err;
  if (std::string* v = InfoValue(*pairs, key)) {
    *v = value;
  } else {
    pairs->emplace_back(key, value);
  }
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_delete);
int PMPI_Info_delete(MPI_Info info, const char* key) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_delete", info, key != nullptr, &err);
  if (pairs == nullptr) return err;
  if (std::erase_if(*pairs, [&](const auto& kv) { return kv.first == key; }) == 0) {
    return Fail(MPI_COMM_WORLD, "MPI_Info_delete", MPI_ERR_ARG);  // no such key
  }
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_get);
int PMPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs =
      InfoArgs("MPI_Info_get", info,
               key != nullptr && value != nullptr && flag != nullptr && valuelen >= 0, &err);
  if (pairs == nullptr) return err;
  const std::string* v = InfoValue(*pairs, key);
  *flag = v != nullptr;
  // At most valuelen characters, and the terminating NUL (value has valuelen + 1 bytes).
  if (v != nullptr) std::snprintf(value, static_cast<size_t>(valuelen) + 1, "%s", v->c_str());
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_get_valuelen);
int PMPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_get_valuelen", info,
                              key != nullptr && valuelen != nullptr && flag != nullptr, &err);
  if (pairs == nullptr) return err;
  const std::string* v = InfoValue(*pairs, key);
  *flag = v != nullptr;
  if (v != nullptr) *valuelen = static_cast<int>(v->size());
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_get_string);
int PMPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value, int* flag) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_get_string", info,
                              key != nullptr && buflen != nullptr && *buflen >= 0 &&
                                  flag != nullptr && (*buflen == 0 || value != nullptr),
                              &err);
  if (pairs == nullptr) return err;
  const std::string* v = InfoValue(*pairs, key);
  *flag = v != nullptr;
  if (v == nullptr) return MPI_SUCCESS;
  // At most *buflen bytes with the NUL; *buflen becomes what the whole value needs.
  if (*buflen > 0) std::snprintf(value, static_cast<size_t>(*buflen), "%s", v->c_str());
  *buflen = static_cast<int>(v->size()) + 1;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_get_nkeys);
int PMPI_Info_get_nkeys(MPI_Info info, int* nkeys) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_get_nkeys", info, nkeys != nullptr, &err);
  if (pairs == nullptr) return err;
  *nkeys = static_cast<int>(pairs->size());
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_get_nthkey);
int PMPI_Info_get_nthkey(MPI_Info info, int n, char* key) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_get_nthkey", info, key != nullptr && n >= 0, &err);
  if (pairs == nullptr) return err;
  if (static_cast<size_t>(n) >= pairs->size()) {
    return Fail(MPI_COMM_WORLD, "MPI_Info_get_nthkey", MPI_ERR_ARG);
  }
  std::snprintf(key, MPI_MAX_INFO_KEY, "%s", (*pairs)[static_cast<size_t>(n)].first.c_str());
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_dup);
int PMPI_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_dup", info, newinfo != nullptr, &err);
  if (pairs == nullptr) return err;
  *newinfo = NewInfo(*pairs);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Info_free);
int PMPI_Info_free(MPI_Info* info) {
  if (info == nullptr || FindInfo(*info) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Info_free", MPI_ERR_ARG);
  }
  S().infos[static_cast<size_t>(*info - 1)].reset();
  *info = MPI_INFO_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"
