// Pure parts of communicator creation: MPI_Comm_split's grouping and the derivation of new
// context ids. Every member of the parent computes the same answers from the same inputs, so
// no further agreement is needed.
#ifndef GOS_LIBGOS_MPI_COMM_LOGIC_H_
#define GOS_LIBGOS_MPI_COMM_LOGIC_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace gos::mpi {

struct SplitEntry {
  int color = 0;
  int key = 0;
};

// MPI_Comm_split's grouping. `entries[r]` is parent rank r's (color, key). Returns the parent
// ranks of the new communicator of `my_rank`, ordered by (key, parent rank); empty when
// my_rank's color is `undefined` (MPI_UNDEFINED: no new communicator).
std::vector<int> SplitMembers(std::span<const SplitEntry> entries, int my_rank, int undefined);

// Salt of MPI_Comm_dup in DeriveContext (split colors are ints, so they never equal it).
inline constexpr uint64_t kDupSalt = uint64_t{1} << 40;

// Salt of MPI_Comm_create_group in DeriveContext, xored with the GroupKey: it differs from
// every split color (< 2^31) and from kDupSalt unless the 64-bit key happens to cancel it.
inline constexpr uint64_t kCreateGroupSalt = uint64_t{1} << 41;

// MPI_Comm_create_group's key: a 64-bit mix of the group's world ranks, in order, and the tag.
uint64_t GroupKey(std::span<const int> world_ranks, int tag);

// MPI_Group_range_incl/_excl: appends to *ranks the ranks of `n` triplets {first, last,
// stride} of a group of `size`. False when a triplet is invalid (stride 0, a rank outside the
// group, a range running away from last) or a rank appears twice.
bool ExpandRanges(int n, const int (*ranges)[3], int size, std::vector<int>* ranks);

// The context id of the `serial`-th communicator created from the communicator with context
// `parent` (serial counts dup and split calls on the parent, identically on every member), for
// split color `salt` (or kDupSalt for a dup). A 64-bit mix of the three, with the collective
// bit (bit 63) cleared and never one of the reserved ids 0, 1 (world), 2 (self).
uint64_t DeriveContext(uint64_t parent, uint64_t serial, uint64_t salt);

// MPI_Dims_create: fills the zero entries of dims (size ndims) so that the product of all
// entries is nnodes, as close to each other as possible, in non-increasing order; entries
// given (> 0) stay. False when it cannot be done (a negative entry, or nnodes not divisible
// by the product of the given ones).
bool DimsCreate(int nnodes, std::span<int> dims);

// Cartesian topology (row-major: the last dimension varies fastest).
struct Cart {
  std::vector<int> dims;
  std::vector<bool> periods;
  int Size() const;
};
// The rank at coords; coordinates out of range wrap in periodic dimensions. -1 when one is
// out of range in a non-periodic dimension.
int CartRank(const Cart& cart, std::span<const int> coords);
// The coordinates of rank (0 <= rank < Size()).
std::vector<int> CartCoords(const Cart& cart, int rank);
// MPI_Cart_shift for `rank` along `direction` by `disp`: {source, dest}, each -1 when it
// falls off a non-periodic dimension.
std::pair<int, int> CartShift(const Cart& cart, int rank, int direction, int disp);
// The neighbours of `rank` for the neighbourhood collectives, in MPI's order: for each
// dimension d, CartShift(cart, rank, d, 1)'s source then its destination (-1 for none).
std::vector<int> CartNeighbors(const Cart& cart, int rank);

// MPI_Cart_sub for `rank` of `cart`: the grid splits into one sub-grid per combination of
// the dropped dimensions' coordinates (`remain[d]` != 0 keeps dimension d). `color` numbers
// rank's sub-grid (row-major over the dropped coordinates), `key` is its rank in it
// (row-major over the kept ones), `sub` the sub-grid's topology (the kept dimensions, in
// order; none kept gives a 0-dimensional grid of one rank). remain.size() == dims.size().
struct CartSubResult {
  int color = 0;
  int key = 0;
  Cart sub;
};
CartSubResult CartSub(const Cart& cart, int rank, std::span<const int> remain);

}  // namespace gos::mpi

#endif  // GOS_LIBGOS_MPI_COMM_LOGIC_H_
