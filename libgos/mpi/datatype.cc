#include "libgos/mpi/datatype.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <cwchar>

#include "gos/gos.h"

namespace gos::mpi {
namespace {

// The value/index pairs of MINLOC and MAXLOC, laid out as C lays out MPI's pair structs.
template <typename T>
struct Pair {
  T value;
  int index;
};

constexpr std::array<size_t, GOS_TYPE_COUNT> kBasicSizes = [] {
  std::array<size_t, GOS_TYPE_COUNT> s{};
  s[GOS_CHAR] = sizeof(char);
  s[GOS_SIGNED_CHAR] = sizeof(signed char);
  s[GOS_UNSIGNED_CHAR] = sizeof(unsigned char);
  s[GOS_BYTE] = 1;
  s[GOS_SHORT] = sizeof(short);
  s[GOS_UNSIGNED_SHORT] = sizeof(unsigned short);
  s[GOS_INT] = sizeof(int);
  s[GOS_UNSIGNED] = sizeof(unsigned);
  s[GOS_LONG] = sizeof(long);
  s[GOS_UNSIGNED_LONG] = sizeof(unsigned long);
  s[GOS_LONG_LONG] = sizeof(long long);
  s[GOS_UNSIGNED_LONG_LONG] = sizeof(unsigned long long);
  s[GOS_INT8] = 1;
  s[GOS_UINT8] = 1;
  s[GOS_INT16] = 2;
  s[GOS_UINT16] = 2;
  s[GOS_INT32] = 4;
  s[GOS_UINT32] = 4;
  s[GOS_INT64] = 8;
  s[GOS_UINT64] = 8;
  s[GOS_FLOAT] = sizeof(float);
  s[GOS_DOUBLE] = sizeof(double);
  s[GOS_LONG_DOUBLE] = sizeof(long double);
  s[GOS_C_BOOL] = sizeof(bool);
  s[GOS_WCHAR] = sizeof(wchar_t);
  s[GOS_FLOAT_INT] = sizeof(Pair<float>);
  s[GOS_DOUBLE_INT] = sizeof(Pair<double>);
  s[GOS_LONG_INT] = sizeof(Pair<long>);
  s[GOS_2INT] = sizeof(Pair<int>);
  s[GOS_SHORT_INT] = sizeof(Pair<short>);
  s[GOS_LONG_DOUBLE_INT] = sizeof(Pair<long double>);
  return s;
}();

constexpr std::array<size_t, GOS_TYPE_COUNT> kBasicAligns = [] {
  std::array<size_t, GOS_TYPE_COUNT> a{};
  a[GOS_CHAR] = alignof(char);
  a[GOS_SIGNED_CHAR] = alignof(signed char);
  a[GOS_UNSIGNED_CHAR] = alignof(unsigned char);
  a[GOS_BYTE] = 1;
  a[GOS_SHORT] = alignof(short);
  a[GOS_UNSIGNED_SHORT] = alignof(unsigned short);
  a[GOS_INT] = alignof(int);
  a[GOS_UNSIGNED] = alignof(unsigned);
  a[GOS_LONG] = alignof(long);
  a[GOS_UNSIGNED_LONG] = alignof(unsigned long);
  a[GOS_LONG_LONG] = alignof(long long);
  a[GOS_UNSIGNED_LONG_LONG] = alignof(unsigned long long);
  a[GOS_INT8] = alignof(int8_t);
  a[GOS_UINT8] = alignof(uint8_t);
  a[GOS_INT16] = alignof(int16_t);
  a[GOS_UINT16] = alignof(uint16_t);
  a[GOS_INT32] = alignof(int32_t);
  a[GOS_UINT32] = alignof(uint32_t);
  a[GOS_INT64] = alignof(int64_t);
  a[GOS_UINT64] = alignof(uint64_t);
  a[GOS_FLOAT] = alignof(float);
  a[GOS_DOUBLE] = alignof(double);
  a[GOS_LONG_DOUBLE] = alignof(long double);
  a[GOS_C_BOOL] = alignof(bool);
  a[GOS_WCHAR] = alignof(wchar_t);
  a[GOS_FLOAT_INT] = alignof(Pair<float>);
  a[GOS_DOUBLE_INT] = alignof(Pair<double>);
  a[GOS_LONG_INT] = alignof(Pair<long>);
  a[GOS_2INT] = alignof(Pair<int>);
  a[GOS_SHORT_INT] = alignof(Pair<short>);
  a[GOS_LONG_DOUBLE_INT] = alignof(Pair<long double>);
  return a;
}();

// Moves the data of one element laid out at `base` to or from the stream at `*stream`,
// advancing the stream; stops once `*budget` bytes have moved.
template <bool kPack>
void Walk(char* base, const TypeNode& t, char** stream, size_t* budget) {
  if (*budget == 0) return;
  if (t.contiguous) {
    size_t n = std::min(t.size, *budget);
    if (kPack) {
      std::memcpy(*stream, base, n);
    } else {
      std::memcpy(base, *stream, n);
    }
    *stream += n;
    *budget -= n;
    return;
  }
  if (t.kind == TypeNode::Kind::kBlocks) {
    for (const TypeBlock& b : t.blocks) {
      const TypeNode& bt = *b.type;
      char* start = base + b.disp;
      if (bt.contiguous) {
        size_t n = std::min(static_cast<size_t>(b.blocklen) * bt.size, *budget);
        if (kPack) {
          std::memcpy(*stream, start, n);
        } else {
          std::memcpy(start, *stream, n);
        }
        *stream += n;
        *budget -= n;
      } else {
        for (int j = 0; j<b.blocklen&& * budget> 0; ++j) {
          Walk<kPack>(start + static_cast<ptrdiff_t>(j) * bt.extent(), bt, stream, budget);
        }
      }
      if (*budget == 0) return;
    }
    return;
  }
  // A vector.
  const TypeNode& old = *t.old;
  const ptrdiff_t old_extent = old.extent();
  for (int i = 0; i<t.count&& * budget> 0; ++i) {
    char* block = base + static_cast<ptrdiff_t>(i) * t.stride * old_extent;
    if (old.contiguous) {
      // A block of contiguous elements is one run of bytes.
      size_t n = std::min(static_cast<size_t>(t.blocklen) * old.size, *budget);
      if (kPack) {
        std::memcpy(*stream, block, n);
      } else {
        std::memcpy(block, *stream, n);
      }
      *stream += n;
      *budget -= n;
      continue;
    }
    for (int j = 0; j<t.blocklen&& * budget> 0; ++j) {
      Walk<kPack>(block + static_cast<ptrdiff_t>(j) * old_extent, old, stream, budget);
    }
  }
}

}  // namespace

size_t BasicTypeSize(int gos_type) {
  if (gos_type < 0 || gos_type >= GOS_TYPE_COUNT) return 0;
  return kBasicSizes[static_cast<size_t>(gos_type)];
}

const std::shared_ptr<const TypeNode>& BasicType(int gos_type) {
  static const auto* nodes = [] {
    auto* v = new std::array<std::shared_ptr<const TypeNode>, GOS_TYPE_COUNT + 1>();
    for (int t = 0; t < GOS_TYPE_COUNT; ++t) {
      auto n = std::make_shared<TypeNode>();
      n->kind = TypeNode::Kind::kBasic;
      n->basic = t;
      n->size = kBasicSizes[static_cast<size_t>(t)];
      n->align = kBasicAligns[static_cast<size_t>(t)];
      n->lb = 0;
      n->ub = static_cast<ptrdiff_t>(n->size);
      n->contiguous = true;
      (*v)[static_cast<size_t>(t)] = std::move(n);
    }
    return v;  // The last entry stays null: the answer for out-of-range types.
  }();
  if (gos_type < 0 || gos_type >= GOS_TYPE_COUNT) return (*nodes)[GOS_TYPE_COUNT];
  return (*nodes)[static_cast<size_t>(gos_type)];
}

std::shared_ptr<const TypeNode> MakeVector(int count, int blocklen, int stride,
                                           std::shared_ptr<const TypeNode> old) {
  if (count < 0 || blocklen < 0 || old == nullptr) return nullptr;
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeNode::Kind::kVector;
  t->count = count;
  t->blocklen = blocklen;
  t->stride = stride;
  t->size = static_cast<size_t>(count) * static_cast<size_t>(blocklen) * old->size;
  t->align = old->align;
  const ptrdiff_t old_extent = old->extent();
  if (count == 0 || blocklen == 0) {
    t->lb = 0;
    t->ub = 0;
  } else {
    // Block i covers [i*stride*ext + old.lb, i*stride*ext + (blocklen-1)*ext + old.ub); the
    // extremes are at the first and last block whichever way the stride points.
    const ptrdiff_t first = 0;
    const ptrdiff_t last = static_cast<ptrdiff_t>(count - 1) * stride * old_extent;
    const ptrdiff_t span = static_cast<ptrdiff_t>(blocklen - 1) * old_extent;
    t->lb = std::min(first, last) + old->lb;
    t->ub = std::max(first, last) + span + old->ub;
  }
  t->contiguous = old->contiguous && old->lb == 0 && static_cast<size_t>(old_extent) == old->size &&
                  (count <= 1 || stride == blocklen) && t->lb == 0 &&
                  static_cast<size_t>(t->extent()) == t->size;
  t->old = std::move(old);
  return t;
}

std::shared_ptr<const TypeNode> MakeContiguous(int count, std::shared_ptr<const TypeNode> old) {
  return MakeVector(count, 1, 1, std::move(old));
}

std::shared_ptr<const TypeNode> MakeBlocks(std::vector<TypeBlock> blocks, bool pad) {
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeNode::Kind::kBlocks;
  bool any = false, tiles = true;
  ptrdiff_t next = 0;  // where the next block must start for the data to be one run
  for (const TypeBlock& b : blocks) {
    if (b.blocklen < 0 || b.type == nullptr) return nullptr;
    if (b.blocklen == 0) continue;
    const TypeNode& bt = *b.type;
    t->size += static_cast<size_t>(b.blocklen) * bt.size;
    const ptrdiff_t lo = b.disp + bt.lb;
    const ptrdiff_t hi = b.disp + static_cast<ptrdiff_t>(b.blocklen - 1) * bt.extent() + bt.ub;
    t->lb = any ? std::min(t->lb, lo) : lo;
    t->ub = any ? std::max(t->ub, hi) : hi;
    any = true;
    t->align = std::max(t->align, bt.align);
    tiles = tiles && bt.contiguous && b.disp == next;
    next = b.disp + static_cast<ptrdiff_t>(static_cast<size_t>(b.blocklen) * bt.size);
  }
  std::erase_if(blocks, [](const TypeBlock& b) { return b.blocklen == 0; });
  if (pad && any) {
    const auto a = static_cast<ptrdiff_t>(t->align);
    t->ub = t->lb + (t->extent() + a - 1) / a * a;
  }
  t->contiguous = tiles && t->lb == 0 && static_cast<size_t>(t->extent()) == t->size;
  t->blocks = std::move(blocks);
  return t;
}

std::shared_ptr<const TypeNode> MakeResized(std::shared_ptr<const TypeNode> old, ptrdiff_t lb,
                                            ptrdiff_t extent) {
  if (old == nullptr) return nullptr;
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeNode::Kind::kBlocks;
  t->size = old->size;
  t->align = old->align;
  t->lb = lb;
  t->ub = lb + extent;
  t->contiguous =
      old->contiguous && old->lb == 0 && lb == 0 && static_cast<size_t>(extent) == old->size;
  t->blocks = {TypeBlock{0, 1, std::move(old)}};
  return t;
}

void Pack(const void* buf, size_t count, const TypeNode& t, void* out) {
  char* stream = static_cast<char*>(out);
  size_t budget = PackedSize(count, t);
  if (t.contiguous) {
    if (budget > 0) std::memcpy(stream, buf, budget);
    return;
  }
  // Walk never writes through `base` when packing; the cast only shares the code.
  char* base = const_cast<char*>(static_cast<const char*>(buf));
  for (size_t k = 0; k < count && budget > 0; ++k) {
    Walk<true>(base + static_cast<ptrdiff_t>(k) * t.extent(), t, &stream, &budget);
  }
}

void Unpack(const void* in, size_t bytes, size_t count, const TypeNode& t, void* buf) {
  char* stream = const_cast<char*>(static_cast<const char*>(in));
  size_t budget = std::min(bytes, PackedSize(count, t));
  if (t.contiguous) {
    if (budget > 0) std::memcpy(buf, stream, budget);
    return;
  }
  char* base = static_cast<char*>(buf);
  for (size_t k = 0; k < count && budget > 0; ++k) {
    Walk<false>(base + static_cast<ptrdiff_t>(k) * t.extent(), t, &stream, &budget);
  }
}

int CountOf(size_t bytes, const TypeNode& t, int undefined) {
  if (t.size == 0) return 0;
  if (bytes % t.size != 0) return undefined;
  return static_cast<int>(bytes / t.size);
}

// One table for gos and MPI: gos_reduce_local's (libgos/bcs/reduce.cc).
bool OpValid(int op, int type) {
  if (op < 0 || op >= GOS_OP_COUNT || type < 0 || type >= GOS_TYPE_COUNT) return false;
  return gos_op_valid(static_cast<gos_op_t>(op), static_cast<gos_type_t>(type)) != 0;
}

}  // namespace gos::mpi
