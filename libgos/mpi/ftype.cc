// Fortran's datatypes (MPI_INTEGER, MPI_COMPLEX, MPI_2REAL, ...; mpi.h) and the reductions
// the library does itself on the ones gos.h has no type for, plus the Fortran status
// conversion (MPI_Status_c2f / MPI_Status_f2c). The Fortran bindings (fortran/) use them, and
// C programs may too.
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "datatype.h"
#include "gos/gos.h"
#include "internal.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::TypePtr;

// A Fortran type: the gos_type_t of the same representation (its twin), or -1 when it has
// none and its layout is `pair` values of the gos type `part` (the complex and pair types).
struct FortranType {
  MPI_Datatype handle;
  const char* name;
  int twin;
  int part;
};

constexpr FortranType kFortranTypes[] = {
    {MPI_CHARACTER, "MPI_CHARACTER", GOS_CHAR, -1},
    {MPI_LOGICAL, "MPI_LOGICAL", GOS_INT, -1},
    {MPI_INTEGER, "MPI_INTEGER", GOS_INT, -1},
    {MPI_REAL, "MPI_REAL", GOS_FLOAT, -1},
    {MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", GOS_DOUBLE, -1},
    {MPI_COMPLEX, "MPI_COMPLEX", -1, GOS_FLOAT},
    {MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX", -1, GOS_DOUBLE},
    {MPI_2INTEGER, "MPI_2INTEGER", GOS_2INT, -1},
    {MPI_2REAL, "MPI_2REAL", -1, GOS_FLOAT},
    {MPI_2DOUBLE_PRECISION, "MPI_2DOUBLE_PRECISION", -1, GOS_DOUBLE},
    {MPI_INTEGER1, "MPI_INTEGER1", GOS_INT8, -1},
    {MPI_INTEGER2, "MPI_INTEGER2", GOS_INT16, -1},
    {MPI_INTEGER4, "MPI_INTEGER4", GOS_INT32, -1},
    {MPI_INTEGER8, "MPI_INTEGER8", GOS_INT64, -1},
    {MPI_REAL4, "MPI_REAL4", GOS_FLOAT, -1},
    {MPI_REAL8, "MPI_REAL8", GOS_DOUBLE, -1},
    {MPI_COMPLEX8, "MPI_COMPLEX8", -1, GOS_FLOAT},
    {MPI_COMPLEX16, "MPI_COMPLEX16", -1, GOS_DOUBLE},
};
static_assert(std::size(kFortranTypes) == GOS_MPI_LAST_FORTRAN_TYPE - MPI_CHARACTER + 1);
static_assert(MPI_CHARACTER > MPI_LONG_DOUBLE_INT &&
              GOS_MPI_LAST_FORTRAN_TYPE < gos::mpi::internal::kFirstDerivedType);

const FortranType* Find(MPI_Datatype dt) {
  if (dt < MPI_CHARACTER || dt > GOS_MPI_LAST_FORTRAN_TYPE) return nullptr;
  return &kFortranTypes[dt - MPI_CHARACTER];
}

bool IsComplex(MPI_Datatype dt) {
  return dt == MPI_COMPLEX || dt == MPI_DOUBLE_COMPLEX || dt == MPI_COMPLEX8 || dt == MPI_COMPLEX16;
}

// inout[i] = in[i] op inout[i] on complex numbers of T (SUM and PROD).
template <typename T, bool kProd>
void ComplexOp(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::complex<T>*>(in);
  auto* b = static_cast<std::complex<T>*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = kProd ? a[i] * b[i] : a[i] + b[i];
}

// MINLOC / MAXLOC on (value, index) pairs of T: the better value, the lower index on a tie.
template <typename T, bool kMax>
void PairOp(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const T *x = a + 2 * i, *y = b + 2 * i;
    const bool better = kMax ? x[0] > y[0] : x[0] < y[0];
    if (better || (x[0] == y[0] && x[1] < y[1])) {
      b[2 * i] = x[0];
      b[2 * i + 1] = x[1];
    }
  }
}

}  // namespace

namespace gos::mpi::internal {

int GosTypeOf(MPI_Datatype dt) {
  if (dt >= MPI_CHAR && dt <= MPI_LONG_DOUBLE_INT) return dt - 1;
  const FortranType* f = Find(dt);
  return f != nullptr ? f->twin : -1;
}

bool IsFortranType(MPI_Datatype dt) { return Find(dt) != nullptr; }

const char* FortranTypeName(MPI_Datatype dt) {
  const FortranType* f = Find(dt);
  return f != nullptr ? f->name : nullptr;
}

TypePtr FortranTypeLayout(MPI_Datatype dt) {
  static const TypePtr kPairs[2] = {gos::mpi::MakeContiguous(2, gos::mpi::BasicType(GOS_FLOAT)),
                                    gos::mpi::MakeContiguous(2, gos::mpi::BasicType(GOS_DOUBLE))};
  const FortranType* f = Find(dt);
  if (f == nullptr) return nullptr;
  if (f->twin >= 0) return gos::mpi::BasicType(f->twin);
  return kPairs[f->part == GOS_DOUBLE ? 1 : 0];
}

bool FortranOpValid(MPI_Op op, MPI_Datatype dt) {
  if (dt == MPI_LOGICAL) return op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
  if (dt == MPI_CHARACTER) return false;  // MPI allows no reduction on characters
  return true;                            // the rest: as their twin (OpValid) or LibraryOp
}

MPI_User_function* LibraryOp(MPI_Op op, MPI_Datatype dt) {
  const FortranType* f = Find(dt);
  if (f == nullptr || f->twin >= 0) return nullptr;
  const bool dbl = f->part == GOS_DOUBLE;
  if (IsComplex(dt)) {
    if (op == MPI_SUM) return dbl ? ComplexOp<double, false> : ComplexOp<float, false>;
    if (op == MPI_PROD) return dbl ? ComplexOp<double, true> : ComplexOp<float, true>;
    return nullptr;
  }
  if (op == MPI_MAXLOC) return dbl ? PairOp<double, true> : PairOp<float, true>;
  if (op == MPI_MINLOC) return dbl ? PairOp<double, false> : PairOp<float, false>;
  return nullptr;
}

}  // namespace gos::mpi::internal

extern "C" {

GOS_MPI_WEAK_ALIAS(Status_c2f);
int PMPI_Status_c2f(const MPI_Status* c_status, MPI_Fint* f_status) {
  if (c_status == nullptr || f_status == nullptr) {
    return gos::mpi::FailCall(MPI_COMM_WORLD, "MPI_Status_c2f", MPI_ERR_ARG);
  }
  const uint64_t bytes = c_status->gos_bytes;
  f_status[MPI_F_SOURCE] = c_status->MPI_SOURCE;
  f_status[MPI_F_TAG] = c_status->MPI_TAG;
  f_status[MPI_F_ERROR] = c_status->MPI_ERROR;
  f_status[3] = static_cast<MPI_Fint>(static_cast<uint32_t>(bytes));
  f_status[4] = static_cast<MPI_Fint>(static_cast<uint32_t>(bytes >> 32));
  f_status[5] = c_status->gos_cancelled;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Status_f2c);
int PMPI_Status_f2c(const MPI_Fint* f_status, MPI_Status* c_status) {
  if (c_status == nullptr || f_status == nullptr) {
    return gos::mpi::FailCall(MPI_COMM_WORLD, "MPI_Status_f2c", MPI_ERR_ARG);
  }
  *c_status = MPI_Status{};
  c_status->MPI_SOURCE = f_status[MPI_F_SOURCE];
  c_status->MPI_TAG = f_status[MPI_F_TAG];
  c_status->MPI_ERROR = f_status[MPI_F_ERROR];
  c_status->gos_bytes = static_cast<size_t>(static_cast<uint32_t>(f_status[3])) |
                        static_cast<size_t>(static_cast<uint32_t>(f_status[4])) << 32;
  c_status->gos_cancelled = f_status[5];
  return MPI_SUCCESS;
}

}  // extern "C"
