// Local reductions for gos.h: gos_type_size, gos_op_valid, gos_reduce_local.
//
// Type classes (as MPI's, with CHAR and WCHAR counted as integers, which MPICH also allows):
//   integer  CHAR, SIGNED_CHAR, UNSIGNED_CHAR, SHORT ... UNSIGNED_LONG_LONG, INT8 ... UINT64,
//            WCHAR
//   floating FLOAT, DOUBLE, LONG_DOUBLE
//   logical  C_BOOL
//   byte     BYTE
//   pair     FLOAT_INT ... LONG_DOUBLE_INT
// Ops: SUM PROD MIN MAX on integer and floating; LAND LOR LXOR on integer and logical;
// BAND BOR BXOR on integer and byte; MINLOC MAXLOC on pair.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gos/gos.h"

namespace {

enum class Class { kInteger, kFloating, kLogical, kByte, kPair, kInvalid };

template <typename V>
struct Pair {
  V v;
  int i;
};

Class ClassOf(gos_type_t type) {
  switch (type) {
    case GOS_CHAR:
    case GOS_SIGNED_CHAR:
    case GOS_UNSIGNED_CHAR:
    case GOS_SHORT:
    case GOS_UNSIGNED_SHORT:
    case GOS_INT:
    case GOS_UNSIGNED:
    case GOS_LONG:
    case GOS_UNSIGNED_LONG:
    case GOS_LONG_LONG:
    case GOS_UNSIGNED_LONG_LONG:
    case GOS_INT8:
    case GOS_UINT8:
    case GOS_INT16:
    case GOS_UINT16:
    case GOS_INT32:
    case GOS_UINT32:
    case GOS_INT64:
    case GOS_UINT64:
    case GOS_WCHAR:
      return Class::kInteger;
    case GOS_FLOAT:
    case GOS_DOUBLE:
    case GOS_LONG_DOUBLE:
      return Class::kFloating;
    case GOS_C_BOOL:
      return Class::kLogical;
    case GOS_BYTE:
      return Class::kByte;
    case GOS_FLOAT_INT:
    case GOS_DOUBLE_INT:
    case GOS_LONG_INT:
    case GOS_2INT:
    case GOS_SHORT_INT:
    case GOS_LONG_DOUBLE_INT:
      return Class::kPair;
    case GOS_TYPE_COUNT:
      break;
  }
  return Class::kInvalid;
}

bool Valid(gos_op_t op, Class c) {
  switch (op) {
    case GOS_SUM:
    case GOS_PROD:
    case GOS_MIN:
    case GOS_MAX:
      return c == Class::kInteger || c == Class::kFloating;
    case GOS_LAND:
    case GOS_LOR:
    case GOS_LXOR:
      return c == Class::kInteger || c == Class::kLogical;
    case GOS_BAND:
    case GOS_BOR:
    case GOS_BXOR:
      return c == Class::kInteger || c == Class::kByte;
    case GOS_MINLOC:
    case GOS_MAXLOC:
      return c == Class::kPair;
    case GOS_OP_COUNT:
      break;
  }
  return false;
}

// Integer sums and products wrap (two's complement) instead of overflowing, which is undefined
// behaviour for signed types in C++; computing in uint64_t and narrowing gives the wrapped value.
template <typename T>
void Integer(gos_op_t op, const T* in, T* io, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    const T a = in[k];
    const T b = io[k];
    T r = b;
    switch (op) {
      case GOS_SUM:
        r = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
        break;
      case GOS_PROD:
        r = static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
        break;
      case GOS_MIN:
        r = a < b ? a : b;
        break;
      case GOS_MAX:
        r = a > b ? a : b;
        break;
      case GOS_LAND:
        r = static_cast<T>((a != 0) && (b != 0));
        break;
      case GOS_LOR:
        r = static_cast<T>((a != 0) || (b != 0));
        break;
      case GOS_LXOR:
        r = static_cast<T>((a != 0) != (b != 0));
        break;
      case GOS_BAND:
        r = static_cast<T>(a & b);
        break;
      case GOS_BOR:
        r = static_cast<T>(a | b);
        break;
      case GOS_BXOR:
        r = static_cast<T>(a ^ b);
        break;
      default:
        break;
    }
    io[k] = r;
  }
}

template <typename T>
void Floating(gos_op_t op, const T* in, T* io, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    const T a = in[k];
    const T b = io[k];
    T r = b;
    switch (op) {
      case GOS_SUM:
        r = a + b;
        break;
      case GOS_PROD:
        r = a * b;
        break;
      case GOS_MIN:
        r = a < b ? a : b;
        break;
      case GOS_MAX:
        r = a > b ? a : b;
        break;
      default:
        break;
    }
    io[k] = r;
  }
}

void Logical(gos_op_t op, const bool* in, bool* io, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    switch (op) {
      case GOS_LAND:
        io[k] = in[k] && io[k];
        break;
      case GOS_LOR:
        io[k] = in[k] || io[k];
        break;
      case GOS_LXOR:
        io[k] = in[k] != io[k];
        break;
      default:
        break;
    }
  }
}

// MPI's rule: the better value wins; on equal values the smaller index is kept.
template <typename V>
void Loc(gos_op_t op, const Pair<V>* in, Pair<V>* io, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    const Pair<V>& a = in[k];
    Pair<V>& b = io[k];
    const bool better = op == GOS_MINLOC ? a.v < b.v : a.v > b.v;
    if (better) {
      b = a;
    } else if (a.v == b.v && a.i < b.i) {
      b.i = a.i;
    }
  }
}

template <typename T>
void Run(gos_op_t op, const void* in, void* io, size_t n) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(io);
  if constexpr (std::is_same_v<T, bool>) {
    Logical(op, a, b, n);
  } else if constexpr (std::is_floating_point_v<T>) {
    Floating(op, a, b, n);
  } else if constexpr (std::is_integral_v<T>) {
    Integer(op, a, b, n);
  } else {
    Loc(op, a, b, n);
  }
}

}  // namespace

extern "C" {

size_t gos_type_size(gos_type_t type) {
  switch (type) {
    case GOS_CHAR:
      return sizeof(char);
    case GOS_SIGNED_CHAR:
      return sizeof(signed char);
    case GOS_UNSIGNED_CHAR:
    case GOS_BYTE:
      return sizeof(unsigned char);
    case GOS_SHORT:
      return sizeof(short);
    case GOS_UNSIGNED_SHORT:
      return sizeof(unsigned short);
    case GOS_INT:
      return sizeof(int);
    case GOS_UNSIGNED:
      return sizeof(unsigned);
    case GOS_LONG:
      return sizeof(long);
    case GOS_UNSIGNED_LONG:
      return sizeof(unsigned long);
    case GOS_LONG_LONG:
      return sizeof(long long);
    case GOS_UNSIGNED_LONG_LONG:
      return sizeof(unsigned long long);
    case GOS_INT8:
    case GOS_UINT8:
      return 1;
    case GOS_INT16:
    case GOS_UINT16:
      return 2;
    case GOS_INT32:
    case GOS_UINT32:
      return 4;
    case GOS_INT64:
    case GOS_UINT64:
      return 8;
    case GOS_FLOAT:
      return sizeof(float);
    case GOS_DOUBLE:
      return sizeof(double);
    case GOS_LONG_DOUBLE:
      return sizeof(long double);
    case GOS_C_BOOL:
      return sizeof(bool);
    case GOS_WCHAR:
      return sizeof(wchar_t);
    case GOS_FLOAT_INT:
      return sizeof(Pair<float>);
    case GOS_DOUBLE_INT:
      return sizeof(Pair<double>);
    case GOS_LONG_INT:
      return sizeof(Pair<long>);
    case GOS_2INT:
      return sizeof(Pair<int>);
    case GOS_SHORT_INT:
      return sizeof(Pair<short>);
    case GOS_LONG_DOUBLE_INT:
      return sizeof(Pair<long double>);
    case GOS_TYPE_COUNT:
      break;
  }
  return 0;
}

int gos_op_valid(gos_op_t op, gos_type_t type) { return Valid(op, ClassOf(type)) ? 1 : 0; }

int gos_reduce_local(const void* in, void* inout, size_t count, gos_type_t type, gos_op_t op) {
  if (!Valid(op, ClassOf(type))) return GOS_ERR_ARG;
  if (count == 0) return GOS_OK;
  if (in == nullptr || inout == nullptr) return GOS_ERR_ARG;
  switch (type) {
    case GOS_CHAR:
      Run<char>(op, in, inout, count);
      break;
    case GOS_SIGNED_CHAR:
    case GOS_INT8:
      Run<signed char>(op, in, inout, count);
      break;
    case GOS_UNSIGNED_CHAR:
    case GOS_UINT8:
    case GOS_BYTE:
      Run<unsigned char>(op, in, inout, count);
      break;
    case GOS_SHORT:
      Run<short>(op, in, inout, count);
      break;
    case GOS_UNSIGNED_SHORT:
      Run<unsigned short>(op, in, inout, count);
      break;
    case GOS_INT:
      Run<int>(op, in, inout, count);
      break;
    case GOS_UNSIGNED:
      Run<unsigned>(op, in, inout, count);
      break;
    case GOS_LONG:
      Run<long>(op, in, inout, count);
      break;
    case GOS_UNSIGNED_LONG:
      Run<unsigned long>(op, in, inout, count);
      break;
    case GOS_LONG_LONG:
      Run<long long>(op, in, inout, count);
      break;
    case GOS_UNSIGNED_LONG_LONG:
      Run<unsigned long long>(op, in, inout, count);
      break;
    case GOS_INT16:
      Run<int16_t>(op, in, inout, count);
      break;
    case GOS_UINT16:
      Run<uint16_t>(op, in, inout, count);
      break;
    case GOS_INT32:
      Run<int32_t>(op, in, inout, count);
      break;
    case GOS_UINT32:
      Run<uint32_t>(op, in, inout, count);
      break;
    case GOS_INT64:
      Run<int64_t>(op, in, inout, count);
      break;
    case GOS_UINT64:
      Run<uint64_t>(op, in, inout, count);
      break;
    case GOS_FLOAT:
      Run<float>(op, in, inout, count);
      break;
    case GOS_DOUBLE:
      Run<double>(op, in, inout, count);
      break;
    case GOS_LONG_DOUBLE:
      Run<long double>(op, in, inout, count);
      break;
    case GOS_C_BOOL:
      Run<bool>(op, in, inout, count);
      break;
    case GOS_WCHAR:
      Run<wchar_t>(op, in, inout, count);
      break;
    case GOS_FLOAT_INT:
      Run<Pair<float>>(op, in, inout, count);
      break;
    case GOS_DOUBLE_INT:
      Run<Pair<double>>(op, in, inout, count);
      break;
    case GOS_LONG_INT:
      Run<Pair<long>>(op, in, inout, count);
      break;
    case GOS_2INT:
      Run<Pair<int>>(op, in, inout, count);
      break;
    case GOS_SHORT_INT:
      Run<Pair<short>>(op, in, inout, count);
      break;
    case GOS_LONG_DOUBLE_INT:
      Run<Pair<long double>>(op, in, inout, count);
      break;
    case GOS_TYPE_COUNT:
      return GOS_ERR_ARG;
  }
  return GOS_OK;
}

}  // extern "C"
