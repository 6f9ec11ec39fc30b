// Datatypes of the MPI subset: the layout of basic and derived types, packing to and from a
// contiguous byte stream, element counts, and which reduction op applies to which type.
// Pure logic (no gos.h calls), so it is unit-tested on its own.
#ifndef GOS_LIBGOS_MPI_DATATYPE_H_
#define GOS_LIBGOS_MPI_DATATYPE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace gos::mpi {

// The layout of one element of a datatype. Basic types wrap a gos_type_t; derived types are
// immutable trees that share their children, so freeing a type handle never invalidates a
// type built from it (as MPI requires).
struct TypeNode;

// A run of `blocklen` elements of `type` starting `disp` bytes from the element's origin.
struct TypeBlock {
  ptrdiff_t disp = 0;
  int blocklen = 0;
  std::shared_ptr<const TypeNode> type;
};

struct TypeNode {
  enum class Kind { kBasic, kVector, kBlocks };
  Kind kind = Kind::kBasic;
  int basic = -1;  // kBasic: the gos_type_t
  // kVector (MPI_Type_vector; MPI_Type_contiguous(n) is vector(n, 1, 1)): `count` blocks of
  // `blocklen` elements of `old`, block i starting at i * stride * extent(old) bytes.
  int count = 0;
  int blocklen = 0;
  int stride = 0;
  std::shared_ptr<const TypeNode> old;
  // kBlocks (MPI_Type_create_struct, _hvector, _hindexed, _indexed, _indexed_block,
  // _resized): the blocks in the order their data is packed.
  std::vector<TypeBlock> blocks;

  size_t size = 0;   // bytes of data in one element (the packed size)
  size_t align = 1;  // the largest alignment of the basic types in it (MPI's struct padding)
  ptrdiff_t lb = 0;  // lowest byte offset of the element's data
  ptrdiff_t ub = 0;  // one past the highest; consecutive elements are ub - lb apart
  // True when one element's data is exactly [0, size) with no gaps (so `count` elements are
  // [0, count * size)): such buffers are sent as they are, without packing.
  bool contiguous = true;

  ptrdiff_t extent() const { return ub - lb; }
};

// Bytes of one value of a gos_type_t (0 for an out-of-range type).
size_t BasicTypeSize(int gos_type);

// The node of a basic gos_type_t; nullptr when out of range. The nodes live for the program.
const std::shared_ptr<const TypeNode>& BasicType(int gos_type);

// MPI_Type_vector / MPI_Type_contiguous. Return nullptr on a negative count or blocklen.
std::shared_ptr<const TypeNode> MakeVector(int count, int blocklen, int stride,
                                           std::shared_ptr<const TypeNode> old);
std::shared_ptr<const TypeNode> MakeContiguous(int count, std::shared_ptr<const TypeNode> old);
// A type of blocks at byte displacements (struct, hvector, hindexed; indexed after scaling
// by the old type's extent). Its bounds are the blocks'; with `pad` (MPI_Type_create_struct)
// the extent is rounded up to a multiple of the largest alignment of its basic types, as a C
// compiler pads a struct (MPI's epsilon). nullptr on a negative blocklen or a null type.
std::shared_ptr<const TypeNode> MakeBlocks(std::vector<TypeBlock> blocks, bool pad = false);
// MPI_Type_create_resized: old's data with bounds [lb, lb + extent). nullptr if old is null.
std::shared_ptr<const TypeNode> MakeResized(std::shared_ptr<const TypeNode> old, ptrdiff_t lb,
                                            ptrdiff_t extent);

// Packed bytes of `count` elements.
inline size_t PackedSize(size_t count, const TypeNode& t) { return count * t.size; }

// Copies `count` elements laid out from `buf` into the contiguous stream `out`
// (PackedSize(count, t) bytes).
void Pack(const void* buf, size_t count, const TypeNode& t, void* out);

// Copies the first `bytes` bytes of the stream `in` into `count` elements laid out from `buf`.
// `bytes` may be less than PackedSize (a short message): only that much is written.
void Unpack(const void* in, size_t bytes, size_t count, const TypeNode& t, void* buf);

// A run of `n` consecutive values of the basic gos_type_t `basic` at byte `disp` of a buffer.
struct FlatRun {
  ptrdiff_t disp = 0;
  int basic = -1;
  size_t n = 0;

  bool operator==(const FlatRun&) const = default;
};

// The data of `count` elements of t laid out from byte 0, as runs of basic values in packed
// order (adjacent runs of one basic type merged): what a one-sided operation's target layout
// becomes on the wire, where the target may not know the origin's derived type handles.
std::vector<FlatRun> Flatten(size_t count, const TypeNode& t);

// MPI_Get_count: elements in `bytes`, or `undefined` when `bytes` is not a whole number of
// elements (a zero-size type counts 0).
int CountOf(size_t bytes, const TypeNode& t, int undefined);
// MPI_Get_elements: the basic elements in the first `bytes` bytes of a stream of elements of
// t (whole ones, then those of a partial one in packed order), or `undefined` when the bytes
// end inside a basic element.
long ElementsOf(size_t bytes, const TypeNode& t, long undefined);

// MPI_Type_get_true_extent: the bytes one element's data really spans, [lb, ub), ignoring
// resized bounds ({0, 0} for a type with no data).
std::pair<ptrdiff_t, ptrdiff_t> TrueBounds(const TypeNode& t);

// True when the reduction gos_op_t `op` applies to gos_type_t `type` under MPI's rules:
// SUM, PROD, MIN, MAX on integers and floating point; LAND, LOR, LXOR on integers and C_BOOL;
// BAND, BOR, BXOR on integers and BYTE; MINLOC, MAXLOC on the value/index pair types.
bool OpValid(int op, int type);

}  // namespace gos::mpi

#endif  // GOS_LIBGOS_MPI_DATATYPE_H_
