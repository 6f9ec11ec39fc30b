// Datatypes (MPI 4.1, chapter 5): the handle table of derived types, constructors, queries,
// MPI_Get_count / MPI_Get_elements, names, and MPI_Pack / MPI_Unpack. The layouts
// themselves are datatype.cc's.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "datatype.h"
#include "gos/gos.h"
#include "internal.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::TypeNode;
using gos::mpi::internal::Fail;
using gos::mpi::internal::FindType;
using gos::mpi::internal::GetName;
using gos::mpi::internal::kFirstDerivedType;
using gos::mpi::internal::S;
using gos::mpi::internal::SetName;
using gos::mpi::internal::State;
using gos::mpi::internal::TypePtr;

// The basic types' names (MPI_Type_get_name), index = gos_type_t (handle - 1); MPI_LONG_LONG
// is also MPI_LONG_LONG_INT, MPI_PACKED is MPI_BYTE.
constexpr const char* kBasicTypeNames[] = {"MPI_CHAR",
                                           "MPI_SIGNED_CHAR",
                                           "MPI_UNSIGNED_CHAR",
                                           "MPI_BYTE",
                                           "MPI_SHORT",
                                           "MPI_UNSIGNED_SHORT",
                                           "MPI_INT",
                                           "MPI_UNSIGNED",
                                           "MPI_LONG",
                                           "MPI_UNSIGNED_LONG",
                                           "MPI_LONG_LONG_INT",
                                           "MPI_UNSIGNED_LONG_LONG",
                                           "MPI_INT8_T",
                                           "MPI_UINT8_T",
                                           "MPI_INT16_T",
                                           "MPI_UINT16_T",
                                           "MPI_INT32_T",
                                           "MPI_UINT32_T",
                                           "MPI_INT64_T",
                                           "MPI_UINT64_T",
                                           "MPI_FLOAT",
                                           "MPI_DOUBLE",
                                           "MPI_LONG_DOUBLE",
                                           "MPI_C_BOOL",
                                           "MPI_WCHAR",
                                           "MPI_FLOAT_INT",
                                           "MPI_DOUBLE_INT",
                                           "MPI_LONG_INT",
                                           "MPI_2INT",
                                           "MPI_SHORT_INT",
                                           "MPI_LONG_DOUBLE_INT"};
static_assert(std::size(kBasicTypeNames) == GOS_TYPE_COUNT);

// A basic or Fortran type's name, or nullptr for a derived type.
const char* BasicTypeName(MPI_Datatype dt) {
  if (dt >= MPI_CHAR && dt <= MPI_LONG_DOUBLE_INT) return kBasicTypeNames[dt - 1];
  return gos::mpi::internal::FortranTypeName(dt);
}

// What an int result of a large-count query holds: the value, or MPI_UNDEFINED when it does
// not fit (MPI's rule for the calls without _x).
template <typename T>
T Narrow(MPI_Count v) {
  if constexpr (std::is_same_v<T, MPI_Count>) {
    return v;
  } else {
    return v > std::numeric_limits<T>::max() ? MPI_UNDEFINED : static_cast<T>(v);
  }
}

// MPI_Type_size(_x): the bytes of data in one element.
template <typename T>
int TypeSize(const char* fn, MPI_Datatype datatype, T* size) {
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (t == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_TYPE);
  if (size == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
  *size = Narrow<T>(static_cast<MPI_Count>(gos::mpi::PackedSize(1, *t)));
  return MPI_SUCCESS;
}

// MPI_Type_get_extent(_x), and with `true_bounds` MPI_Type_get_true_extent(_x): where one
// element's data really lies, whatever its (resized) bounds say.
template <typename T>
int TypeBounds(const char* fn, MPI_Datatype datatype, bool true_bounds, T* lb, T* extent) {
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (t == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_TYPE);
  if (lb == nullptr || extent == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
  auto [lo, hi] = true_bounds ? gos::mpi::TrueBounds(*t) : std::make_pair(t->lb, t->ub);
  *lb = static_cast<T>(lo);
  *extent = static_cast<T>(hi - lo);
  return MPI_SUCCESS;
}

// MPI_Get_elements(_x): the basic elements a receive got.
template <typename T>
int GetElements(const char* fn, const MPI_Status* status, MPI_Datatype datatype, T* count) {
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (status == nullptr || t == nullptr || count == nullptr) {
    return Fail(MPI_COMM_WORLD, fn, t == nullptr ? MPI_ERR_TYPE : MPI_ERR_ARG);
  }
  const long n = gos::mpi::ElementsOf(status->gos_bytes, *t, MPI_UNDEFINED);
  *count = n == MPI_UNDEFINED ? MPI_UNDEFINED : Narrow<T>(n);
  return MPI_SUCCESS;
}

int AddType(TypePtr t, MPI_Datatype* newtype) {
  State& s = S();
  std::erase_if(s.freed_in_use, [&](size_t i) {
    if (s.types[i].use_count() > 1) return false;
    s.types[i].reset();
    return true;
  });
  s.types.push_back(std::move(t));
  s.committed.push_back(false);
  s.freed.push_back(false);
  *newtype = kFirstDerivedType + static_cast<MPI_Datatype>(s.types.size() - 1);
  return MPI_SUCCESS;
}

// The blocks of MPI_Type_create_struct and the h/indexed constructors: displacements in
// bytes, or in extents of the old type when `scale` is that extent.
int AddBlocksType(const char* fn, int count, const int blocklengths[], const MPI_Aint* byte_displs,
                  const int* elem_displs, const MPI_Datatype* types, MPI_Datatype oldtype,
                  MPI_Datatype* newtype, int same_blocklen = -1) {
  if (count < 0) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
  if (newtype == nullptr || (count > 0 && blocklengths == nullptr && same_blocklen < 0)) {
    return Fail(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
  }
  std::vector<gos::mpi::TypeBlock> blocks;
  for (int i = 0; i < count; ++i) {
    TypePtr t = FindType(types != nullptr ? types[i] : oldtype, /*for_transfer=*/false);
    if (t == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_TYPE);
    const int len = same_blocklen >= 0 ? same_blocklen : blocklengths[i];
    if (len < 0) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
    const ptrdiff_t disp = byte_displs != nullptr ? byte_displs[i] : elem_displs[i] * t->extent();
    blocks.push_back({disp, len, std::move(t)});
  }
  // Only a struct gets MPI's alignment padding (epsilon), as C pads a struct.
  return AddType(gos::mpi::MakeBlocks(std::move(blocks), /*pad=*/types != nullptr), newtype);
}

// MPI_Pack's and MPI_Unpack's checks: `count` elements of `datatype` at *position of a packed
// buffer of `bufsize` bytes. On success *t is the type and *bytes their packed size.
int PackedSpan(const char* fn, MPI_Datatype datatype, int count, int bufsize, const int* position,
               MPI_Comm comm, TypePtr* t, size_t* bytes) {
  *t = FindType(datatype);
  if (*t == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  if (count < 0) return Fail(comm, fn, MPI_ERR_COUNT);
  if (position == nullptr || *position < 0 || *position > bufsize) {
    return Fail(comm, fn, MPI_ERR_ARG);
  }
  *bytes = gos::mpi::PackedSize(static_cast<size_t>(count), **t);
  if (*bytes > static_cast<size_t>(bufsize - *position)) return Fail(comm, fn, MPI_ERR_TRUNCATE);
  return MPI_SUCCESS;
}

}  // namespace

namespace gos::mpi::internal {

TypePtr FindType(MPI_Datatype dt, bool for_transfer) {
  if (dt >= MPI_CHAR && dt <= MPI_LONG_DOUBLE_INT) return gos::mpi::BasicType(dt - 1);
  if (IsFortranType(dt)) return FortranTypeLayout(dt);
  State& s = S();
  if (dt < kFirstDerivedType) return nullptr;
  size_t i = static_cast<size_t>(dt - kFirstDerivedType);
  if (i >= s.types.size() || s.types[i] == nullptr) return nullptr;
  if (for_transfer && (!s.committed[i] || s.freed[i])) return nullptr;
  return s.types[i];
}

void SetName(std::map<int, std::string>& names, int handle, const char* name) {
  names[handle] = std::string(name).substr(0, MPI_MAX_OBJECT_NAME - 1);
}

void GetName(const std::map<int, std::string>& names, int handle, const char* predefined, char* out,
             int* resultlen) {
  auto it = names.find(handle);
  const char* name = it != names.end() ? it->second.c_str() : predefined ? predefined : "";
  std::snprintf(out, MPI_MAX_OBJECT_NAME, "%s", name);
  *resultlen = static_cast<int>(std::strlen(out));
}

}  // namespace gos::mpi::internal

namespace gos::mpi {

std::shared_ptr<const TypeNode> TransferLayout(MPI_Datatype datatype) {
  return FindType(datatype, /*for_transfer=*/true);
}

}  // namespace gos::mpi

extern "C" {

GOS_MPI_WEAK_ALIAS(Type_contiguous);
int PMPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return PMPI_Type_vector(count, 1, 1, oldtype, newtype);
}

GOS_MPI_WEAK_ALIAS(Type_vector);
int PMPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                     MPI_Datatype* newtype) {
  static const char* const kFn = "MPI_Type_vector";
  TypePtr old = FindType(oldtype, /*for_transfer=*/false);
  if (old == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_TYPE);
  if (count < 0 || blocklength < 0) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_COUNT);
  if (newtype == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  return AddType(gos::mpi::MakeVector(count, blocklength, stride, std::move(old)), newtype);
}

GOS_MPI_WEAK_ALIAS(Type_create_hvector);
int PMPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  if (count < 0 || blocklength < 0) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_hvector", MPI_ERR_COUNT);
  }
  std::vector<MPI_Aint> displs(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) displs[static_cast<size_t>(i)] = i * stride;
  return AddBlocksType("MPI_Type_create_hvector", count, nullptr, displs.data(), nullptr, nullptr,
                       oldtype, newtype, blocklength);
}

GOS_MPI_WEAK_ALIAS(Type_indexed);
int PMPI_Type_indexed(int count, const int blocklengths[], const int displacements[],
                      MPI_Datatype oldtype, MPI_Datatype* newtype) {
  if (count > 0 && displacements == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_indexed", MPI_ERR_ARG);
  }
  return AddBlocksType("MPI_Type_indexed", count, blocklengths, nullptr, displacements, nullptr,
                       oldtype, newtype);
}

GOS_MPI_WEAK_ALIAS(Type_create_hindexed);
int PMPI_Type_create_hindexed(int count, const int blocklengths[], const MPI_Aint displacements[],
                              MPI_Datatype oldtype, MPI_Datatype* newtype) {
  if (count > 0 && displacements == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_hindexed", MPI_ERR_ARG);
  }
  return AddBlocksType("MPI_Type_create_hindexed", count, blocklengths, displacements, nullptr,
                       nullptr, oldtype, newtype);
}

GOS_MPI_WEAK_ALIAS(Type_create_indexed_block);
int PMPI_Type_create_indexed_block(int count, int blocklength, const int displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  if (blocklength < 0) return Fail(MPI_COMM_WORLD, "MPI_Type_create_indexed_block", MPI_ERR_COUNT);
  if (count > 0 && displacements == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_indexed_block", MPI_ERR_ARG);
  }
  return AddBlocksType("MPI_Type_create_indexed_block", count, nullptr, nullptr, displacements,
                       nullptr, oldtype, newtype, blocklength);
}

GOS_MPI_WEAK_ALIAS(Type_create_hindexed_block);
int PMPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint displacements[],
                                    MPI_Datatype oldtype, MPI_Datatype* newtype) {
  static const char* const kFn = "MPI_Type_create_hindexed_block";
  if (blocklength < 0) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_COUNT);
  if (count > 0 && displacements == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  return AddBlocksType(kFn, count, nullptr, displacements, nullptr, nullptr, oldtype, newtype,
                       blocklength);
}

GOS_MPI_WEAK_ALIAS(Type_create_struct);
int PMPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                            const MPI_Datatype types[], MPI_Datatype* newtype) {
  if (count > 0 && (displacements == nullptr || types == nullptr)) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_struct", MPI_ERR_ARG);
  }
  return AddBlocksType("MPI_Type_create_struct", count, blocklengths, displacements, nullptr, types,
                       MPI_DATATYPE_NULL, newtype);
}

GOS_MPI_WEAK_ALIAS(Type_create_subarray);
int PMPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                              const int array_of_starts[], int order, MPI_Datatype oldtype,
                              MPI_Datatype* newtype) {
  static const char* const kFn = "MPI_Type_create_subarray";
  if (ndims < 1 || array_of_sizes == nullptr || array_of_subsizes == nullptr ||
      array_of_starts == nullptr || newtype == nullptr ||
      (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)) {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  }
  for (int d = 0; d < ndims; ++d) {
    if (array_of_sizes[d] < 1 || array_of_subsizes[d] < 1 ||
        array_of_subsizes[d] > array_of_sizes[d] || array_of_starts[d] < 0 ||
        array_of_starts[d] > array_of_sizes[d] - array_of_subsizes[d]) {
      return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
    }
  }
  MPI_Aint lb = 0, extent = 0;
  if (int e = PMPI_Type_get_extent(oldtype, &lb, &extent)) return e;
  // From the fastest-varying dimension out: each level repeats the one inside it
  // subsizes[d] times, one row of the full array apart.
  MPI_Datatype t = oldtype;
  MPI_Aint stride = extent, offset = 0;
  for (int k = 0; k < ndims; ++k) {
    const int d = order == MPI_ORDER_C ? ndims - 1 - k : k;
    MPI_Datatype next;
    if (int e = PMPI_Type_create_hvector(array_of_subsizes[d], 1, stride, t, &next)) return e;
    if (t != oldtype) PMPI_Type_free(&t);
    t = next;
    offset += array_of_starts[d] * stride;
    stride *= array_of_sizes[d];
  }
  // Placed at its start inside the array, and as wide as the whole array.
  const int one = 1;
  MPI_Datatype placed;
  if (int e = PMPI_Type_create_struct(1, &one, &offset, &t, &placed)) return e;
  PMPI_Type_free(&t);
  const int e = PMPI_Type_create_resized(placed, lb, stride, newtype);
  PMPI_Type_free(&placed);
  return e;
}

GOS_MPI_WEAK_ALIAS(Get_address);
int PMPI_Get_address(const void* location, MPI_Aint* address) {
  *address = reinterpret_cast<MPI_Aint>(location);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Aint_add);
MPI_Aint PMPI_Aint_add(MPI_Aint base, MPI_Aint disp) { return base + disp; }

GOS_MPI_WEAK_ALIAS(Aint_diff);
MPI_Aint PMPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) { return addr1 - addr2; }

GOS_MPI_WEAK_ALIAS(Type_size);
int PMPI_Type_size(MPI_Datatype datatype, int* size) {
  return TypeSize("MPI_Type_size", datatype, size);
}

GOS_MPI_WEAK_ALIAS(Type_size_x);
int PMPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size) {
  return TypeSize("MPI_Type_size_x", datatype, size);
}

GOS_MPI_WEAK_ALIAS(Type_get_extent);
int PMPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  return TypeBounds("MPI_Type_get_extent", datatype, false, lb, extent);
}

GOS_MPI_WEAK_ALIAS(Type_get_extent_x);
int PMPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return TypeBounds("MPI_Type_get_extent_x", datatype, false, lb, extent);
}

GOS_MPI_WEAK_ALIAS(Type_create_resized);
int PMPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                             MPI_Datatype* newtype) {
  TypePtr old = FindType(oldtype, /*for_transfer=*/false);
  if (old == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_create_resized", MPI_ERR_TYPE);
  if (newtype == nullptr || extent < 0) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_resized", MPI_ERR_ARG);
  }
  return AddType(gos::mpi::MakeResized(std::move(old), lb, extent), newtype);
}

GOS_MPI_WEAK_ALIAS(Type_get_true_extent);
int PMPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent) {
  return TypeBounds("MPI_Type_get_true_extent", datatype, true, true_lb, true_extent);
}

GOS_MPI_WEAK_ALIAS(Type_get_true_extent_x);
int PMPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent) {
  return TypeBounds("MPI_Type_get_true_extent_x", datatype, true, true_lb, true_extent);
}

GOS_MPI_WEAK_ALIAS(Type_commit);
int PMPI_Type_commit(MPI_Datatype* datatype) {
  if (datatype == nullptr || FindType(*datatype, /*for_transfer=*/false) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_commit", MPI_ERR_TYPE);
  }
  // Committing a basic type is allowed and does nothing.
  if (*datatype >= kFirstDerivedType) {
    S().committed[static_cast<size_t>(*datatype - kFirstDerivedType)] = true;
  }
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Type_free);
int PMPI_Type_free(MPI_Datatype* datatype) {
  if (datatype == nullptr || *datatype < kFirstDerivedType ||
      FindType(*datatype, /*for_transfer=*/false) == nullptr ||
      S().freed[static_cast<size_t>(*datatype - kFirstDerivedType)]) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_free", MPI_ERR_TYPE);
  }
  // Pending operations and types built on this one keep their own references to the layout;
  // while they do, the handle still resolves (a pending reduction gives it to its user op).
  const size_t i = static_cast<size_t>(*datatype - kFirstDerivedType);
  if (S().types[i].use_count() > 1) {
    S().freed[i] = true;
    S().freed_in_use.push_back(i);
  } else {
    S().types[i].reset();
    S().committed[i] = false;
  }
  S().type_names.erase(*datatype);
  *datatype = MPI_DATATYPE_NULL;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Type_dup);
int PMPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  TypePtr old = FindType(oldtype, /*for_transfer=*/false);
  if (old == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_dup", MPI_ERR_TYPE);
  if (newtype == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_dup", MPI_ERR_ARG);
  // The same layout; a duplicate is committed when its original was (MPI 4.1, 5.1.10).
  if (int e = AddType(std::move(old), newtype)) return e;
  if (FindType(oldtype) != nullptr) {
    S().committed[static_cast<size_t>(*newtype - kFirstDerivedType)] = true;
  }
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Get_count);
int PMPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (status == nullptr || t == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Get_count", status == nullptr ? MPI_ERR_ARG : MPI_ERR_TYPE);
  }
  *count = gos::mpi::CountOf(status->gos_bytes, *t, MPI_UNDEFINED);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Get_elements);
int PMPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return GetElements("MPI_Get_elements", status, datatype, count);
}

GOS_MPI_WEAK_ALIAS(Get_elements_x);
int PMPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  return GetElements("MPI_Get_elements_x", status, datatype, count);
}

// What MPI_Get_count / MPI_Get_elements read back: count elements of datatype's size.
GOS_MPI_WEAK_ALIAS(Status_set_elements_x);
int PMPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count) {
  static const char* const kFn = "MPI_Status_set_elements";
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (status == nullptr || count < 0) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  if (t == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_TYPE);
  // count basic elements: whole items of the type, then the rest of one at the item's mean
  // element size (exact for a type of one basic type, as every use of this call has).
  const size_t item = gos::mpi::PackedSize(1, *t);
  const long per_item = gos::mpi::ElementsOf(item, *t, MPI_UNDEFINED);
  if (item == 0 || per_item <= 0) {
    status->gos_bytes = 0;
    return count == 0 ? MPI_SUCCESS : Fail(MPI_COMM_WORLD, kFn, MPI_ERR_TYPE);
  }
  const auto n = static_cast<size_t>(count);
  const auto e = static_cast<size_t>(per_item);
  status->gos_bytes = n / e * item + n % e * (item / e);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Status_set_elements);
int PMPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count) {
  return PMPI_Status_set_elements_x(status, datatype, count);
}

GOS_MPI_WEAK_ALIAS(Type_set_name);
int PMPI_Type_set_name(MPI_Datatype datatype, const char* type_name) {
  if (FindType(datatype, /*for_transfer=*/false) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_set_name", MPI_ERR_TYPE);
  }
  if (type_name == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_set_name", MPI_ERR_ARG);
  SetName(S().type_names, datatype, type_name);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Type_get_name);
int PMPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen) {
  if (FindType(datatype, /*for_transfer=*/false) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_get_name", MPI_ERR_TYPE);
  }
  if (type_name == nullptr || resultlen == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_get_name", MPI_ERR_ARG);
  }
  GetName(S().type_names, datatype, BasicTypeName(datatype), type_name, resultlen);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Pack);
int PMPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
              int* position, MPI_Comm comm) {
  TypePtr t;
  size_t bytes = 0;
  if (int e = PackedSpan("MPI_Pack", datatype, incount, outsize, position, comm, &t, &bytes)) {
    return e;
  }
  gos::mpi::Pack(inbuf, static_cast<size_t>(incount), *t, static_cast<char*>(outbuf) + *position);
  *position += static_cast<int>(bytes);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Unpack);
int PMPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                MPI_Datatype datatype, MPI_Comm comm) {
  TypePtr t;
  size_t bytes = 0;
  if (int e = PackedSpan("MPI_Unpack", datatype, outcount, insize, position, comm, &t, &bytes)) {
    return e;
  }
  gos::mpi::Unpack(static_cast<const char*>(inbuf) + *position, bytes,
                   static_cast<size_t>(outcount), *t, outbuf);
  *position += static_cast<int>(bytes);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Pack_size);
int PMPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  static const char* const kFn = "MPI_Pack_size";
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (t == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
  if (incount < 0) return Fail(comm, kFn, MPI_ERR_COUNT);
  if (size == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  *size = static_cast<int>(gos::mpi::PackedSize(static_cast<size_t>(incount), *t));
  return MPI_SUCCESS;
}

// The MPI-1 names of calls above (deprecated).
GOS_MPI_WEAK_ALIAS(Address);
int PMPI_Address(void* location, MPI_Aint* address) { return PMPI_Get_address(location, address); }

GOS_MPI_WEAK_ALIAS(Type_struct);
int PMPI_Type_struct(int count, int blocklengths[], MPI_Aint displacements[], MPI_Datatype types[],
                     MPI_Datatype* newtype) {
  return PMPI_Type_create_struct(count, blocklengths, displacements, types, newtype);
}

GOS_MPI_WEAK_ALIAS(Type_hvector);
int PMPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                      MPI_Datatype* newtype) {
  return PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

GOS_MPI_WEAK_ALIAS(Type_hindexed);
int PMPI_Type_hindexed(int count, int blocklengths[], MPI_Aint displacements[],
                       MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return PMPI_Type_create_hindexed(count, blocklengths, displacements, oldtype, newtype);
}

GOS_MPI_WEAK_ALIAS(Type_extent);
int PMPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent) {
  MPI_Aint lb = 0;
  return TypeBounds("MPI_Type_extent", datatype, false, &lb, extent);
}

GOS_MPI_WEAK_ALIAS(Type_lb);
int PMPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint extent = 0;
  return TypeBounds("MPI_Type_lb", datatype, false, displacement, &extent);
}

GOS_MPI_WEAK_ALIAS(Type_ub);
int PMPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint lb = 0, extent = 0;
  if (int e = TypeBounds("MPI_Type_ub", datatype, false, &lb, &extent)) return e;
  if (displacement == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_ub", MPI_ERR_ARG);
  *displacement = lb + extent;
  return MPI_SUCCESS;
}

}  // extern "C"
