#include "datatype.h"

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

// Size and alignment of each basic type, as C lays it out.
struct BasicLayout {
  size_t size = 0;
  size_t align = 1;
};
template <typename T>
constexpr BasicLayout LayoutOf() {
  return {sizeof(T), alignof(T)};
}

constexpr std::array<BasicLayout, GOS_TYPE_COUNT> kBasic = [] {
  std::array<BasicLayout, GOS_TYPE_COUNT> s{};
  s[GOS_CHAR] = LayoutOf<char>();
  s[GOS_SIGNED_CHAR] = LayoutOf<signed char>();
  s[GOS_UNSIGNED_CHAR] = LayoutOf<unsigned char>();
  s[GOS_BYTE] = LayoutOf<uint8_t>();
  s[GOS_SHORT] = LayoutOf<short>();
  s[GOS_UNSIGNED_SHORT] = LayoutOf<unsigned short>();
  s[GOS_INT] = LayoutOf<int>();
  s[GOS_UNSIGNED] = LayoutOf<unsigned>();
  s[GOS_LONG] = LayoutOf<long>();
  s[GOS_UNSIGNED_LONG] = LayoutOf<unsigned long>();
  s[GOS_LONG_LONG] = LayoutOf<long long>();
  s[GOS_UNSIGNED_LONG_LONG] = LayoutOf<unsigned long long>();
  s[GOS_INT8] = LayoutOf<int8_t>();
  s[GOS_UINT8] = LayoutOf<uint8_t>();
  s[GOS_INT16] = LayoutOf<int16_t>();
  s[GOS_UINT16] = LayoutOf<uint16_t>();
  s[GOS_INT32] = LayoutOf<int32_t>();
  s[GOS_UINT32] = LayoutOf<uint32_t>();
  s[GOS_INT64] = LayoutOf<int64_t>();
  s[GOS_UINT64] = LayoutOf<uint64_t>();
  s[GOS_FLOAT] = LayoutOf<float>();
  s[GOS_DOUBLE] = LayoutOf<double>();
  s[GOS_LONG_DOUBLE] = LayoutOf<long double>();
  s[GOS_C_BOOL] = LayoutOf<bool>();
  s[GOS_WCHAR] = LayoutOf<wchar_t>();
  s[GOS_FLOAT_INT] = LayoutOf<Pair<float>>();
  s[GOS_DOUBLE_INT] = LayoutOf<Pair<double>>();
  s[GOS_LONG_INT] = LayoutOf<Pair<long>>();
  s[GOS_2INT] = LayoutOf<Pair<int>>();
  s[GOS_SHORT_INT] = LayoutOf<Pair<short>>();
  s[GOS_LONG_DOUBLE_INT] = LayoutOf<Pair<long double>>();
  return s;
}();

template <bool kPack>
void Walk(char* base, const TypeNode& t, char** stream, size_t* budget);

// Moves up to n bytes between `at` and the stream.
template <bool kPack>
void Move(char* at, size_t n, char** stream, size_t* budget) {
  n = std::min(n, *budget);
  if (kPack) {
    std::memcpy(*stream, at, n);
  } else {
    std::memcpy(at, *stream, n);
  }
  *stream += n;
  *budget -= n;
}

// A block of `blocklen` elements of `bt` from `start`: one run of bytes when bt is contiguous.
template <bool kPack>
void WalkBlock(char* start, int blocklen, const TypeNode& bt, char** stream, size_t* budget) {
  if (bt.contiguous) {
    Move<kPack>(start, static_cast<size_t>(blocklen) * bt.size, stream, budget);
    return;
  }
  for (int j = 0; j<blocklen&& * budget> 0; ++j) {
    Walk<kPack>(start + static_cast<ptrdiff_t>(j) * bt.extent(), bt, stream, budget);
  }
}

// Moves the data of one element laid out at `base` to or from the stream at `*stream`,
// advancing the stream; stops once `*budget` bytes have moved.
template <bool kPack>
void Walk(char* base, const TypeNode& t, char** stream, size_t* budget) {
  if (*budget == 0) return;
  if (t.contiguous) {
    Move<kPack>(base, t.size, stream, budget);
    return;
  }
  if (t.kind == TypeNode::Kind::kBlocks) {
    for (const TypeBlock& b : t.blocks) {
      if (*budget == 0) return;
      WalkBlock<kPack>(base + b.disp, b.blocklen, *b.type, stream, budget);
    }
    return;
  }
  // A vector: block i at i * stride extents of the old type.
  const ptrdiff_t old_extent = t.old->extent();
  for (int i = 0; i<t.count&& * budget> 0; ++i) {
    WalkBlock<kPack>(base + static_cast<ptrdiff_t>(i) * t.stride * old_extent, t.blocklen, *t.old,
                     stream, budget);
  }
}

}  // namespace

size_t BasicTypeSize(int gos_type) {
  if (gos_type < 0 || gos_type >= GOS_TYPE_COUNT) return 0;
  return kBasic[static_cast<size_t>(gos_type)].size;
}

const std::shared_ptr<const TypeNode>& BasicType(int gos_type) {
  static const auto* nodes = [] {
    auto* v = new std::array<std::shared_ptr<const TypeNode>, GOS_TYPE_COUNT + 1>();
    for (int t = 0; t < GOS_TYPE_COUNT; ++t) {
      auto n = std::make_shared<TypeNode>();
      n->kind = TypeNode::Kind::kBasic;
      n->basic = t;
      n->size = kBasic[static_cast<size_t>(t)].size;
      n->align = kBasic[static_cast<size_t>(t)].align;
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

namespace {

void AddRun(ptrdiff_t disp, int basic, size_t n, std::vector<FlatRun>* runs) {
  if (n == 0) return;
  if (!runs->empty()) {
    FlatRun& last = runs->back();
    if (last.basic == basic &&
        last.disp + static_cast<ptrdiff_t>(last.n * BasicTypeSize(basic)) == disp) {
      last.n += n;
      return;
    }
  }
  runs->push_back({disp, basic, n});
}

void FlattenOne(ptrdiff_t base, const TypeNode& t, std::vector<FlatRun>* runs);

void FlattenBlock(ptrdiff_t start, int blocklen, const TypeNode& bt, std::vector<FlatRun>* runs) {
  if (bt.kind == TypeNode::Kind::kBasic) {
    AddRun(start, bt.basic, static_cast<size_t>(blocklen), runs);
    return;
  }
  for (int j = 0; j < blocklen; ++j) FlattenOne(start + j * bt.extent(), bt, runs);
}

void FlattenOne(ptrdiff_t base, const TypeNode& t, std::vector<FlatRun>* runs) {
  switch (t.kind) {
    case TypeNode::Kind::kBasic:
      AddRun(base, t.basic, 1, runs);
      return;
    case TypeNode::Kind::kBlocks:
      for (const TypeBlock& b : t.blocks) FlattenBlock(base + b.disp, b.blocklen, *b.type, runs);
      return;
    case TypeNode::Kind::kVector:
      for (int i = 0; i < t.count; ++i) {
        FlattenBlock(base + static_cast<ptrdiff_t>(i) * t.stride * t.old->extent(), t.blocklen,
                     *t.old, runs);
      }
      return;
  }
}

}  // namespace

std::vector<FlatRun> Flatten(size_t count, const TypeNode& t) {
  std::vector<FlatRun> runs;
  for (size_t k = 0; k < count; ++k) {
    FlattenOne(static_cast<ptrdiff_t>(k) * t.extent(), t, &runs);
  }
  return runs;
}

int CountOf(size_t bytes, const TypeNode& t, int undefined) {
  if (t.size == 0) return 0;
  if (bytes % t.size != 0) return undefined;
  return static_cast<int>(bytes / t.size);
}

namespace {

// Basic elements in one element of t.
long BasicsIn(const TypeNode& t) {
  switch (t.kind) {
    case TypeNode::Kind::kBasic:
      return 1;
    case TypeNode::Kind::kVector:
      return static_cast<long>(t.count) * t.blocklen * BasicsIn(*t.old);
    case TypeNode::Kind::kBlocks: {
      long n = 0;
      for (const TypeBlock& b : t.blocks) n += b.blocklen * BasicsIn(*b.type);
      return n;
    }
  }
  return 0;
}

// Walks one element of t in packed order, taking whole basic elements out of *left bytes;
// stops (false) at the first basic element that does not fit.
bool TakeBasics(const TypeNode& t, size_t* left, long* n) {
  auto take_many = [&](const TypeNode& inner, long count) {
    // Whole copies of inner first, then the rest one by one.
    const long whole = inner.size == 0 ? count : std::min<long>(count, *left / inner.size);
    *left -= static_cast<size_t>(whole) * inner.size;
    *n += whole * BasicsIn(inner);
    return whole == count || TakeBasics(inner, left, n);
  };
  switch (t.kind) {
    case TypeNode::Kind::kBasic:
      if (*left < t.size) return false;
      *left -= t.size;
      ++*n;
      return true;
    case TypeNode::Kind::kVector:
      return take_many(*t.old, static_cast<long>(t.count) * t.blocklen);
    case TypeNode::Kind::kBlocks:
      for (const TypeBlock& b : t.blocks) {
        if (!take_many(*b.type, b.blocklen)) return false;
      }
      return true;
  }
  return false;
}

}  // namespace

std::pair<ptrdiff_t, ptrdiff_t> TrueBounds(const TypeNode& t) {
  // `count` copies of `inner`, the k-th at first + k * step elements of extent `ext`, for
  // copies at element positions [pmin, pmax].
  bool any = false;
  ptrdiff_t lo = 0, hi = 0;
  auto add = [&](ptrdiff_t base, ptrdiff_t pmin, ptrdiff_t pmax, const TypeNode& inner) {
    auto [ilo, ihi] = TrueBounds(inner);
    if (ilo == ihi) return;  // no data
    const ptrdiff_t ext = inner.extent();
    const ptrdiff_t a = base + std::min(pmin * ext, pmax * ext) + ilo;
    const ptrdiff_t b = base + std::max(pmin * ext, pmax * ext) + ihi;
    lo = any ? std::min(lo, a) : a;
    hi = any ? std::max(hi, b) : b;
    any = true;
  };
  switch (t.kind) {
    case TypeNode::Kind::kBasic:
      return {0, static_cast<ptrdiff_t>(t.size)};
    case TypeNode::Kind::kVector:
      if (t.count > 0 && t.blocklen > 0) {
        const ptrdiff_t last = static_cast<ptrdiff_t>(t.count - 1) * t.stride;
        add(0, std::min<ptrdiff_t>(0, last), std::max<ptrdiff_t>(0, last) + t.blocklen - 1, *t.old);
      }
      break;
    case TypeNode::Kind::kBlocks:
      for (const TypeBlock& b : t.blocks) {
        if (b.blocklen > 0) add(b.disp, 0, b.blocklen - 1, *b.type);
      }
      break;
  }
  return any ? std::make_pair(lo, hi) : std::make_pair<ptrdiff_t, ptrdiff_t>(0, 0);
}

long ElementsOf(size_t bytes, const TypeNode& t, long undefined) {
  if (t.size == 0) return 0;
  long n = static_cast<long>(bytes / t.size) * BasicsIn(t);
  size_t left = bytes % t.size;
  if (left == 0) return n;
  TakeBasics(t, &left, &n);
  return left == 0 ? n : undefined;
}

// One table for gos and MPI: gos_reduce_local's (libgos/bcs/reduce.cc).
bool OpValid(int op, int type) {
  if (op < 0 || op >= GOS_OP_COUNT || type < 0 || type >= GOS_TYPE_COUNT) return false;
  return gos_op_valid(static_cast<gos_op_t>(op), static_cast<gos_type_t>(type)) != 0;
}

}  // namespace gos::mpi
