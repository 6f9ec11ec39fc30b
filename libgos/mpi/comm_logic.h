// Pure parts of communicator creation: MPI_Comm_split's grouping and the derivation of new
// context ids. Every member of the parent computes the same answers from the same inputs, so
// no further agreement is needed.
#ifndef GOS_LIBGOS_MPI_COMM_LOGIC_H_
#define GOS_LIBGOS_MPI_COMM_LOGIC_H_

#include <cstdint>
#include <span>
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

// The context id of the `serial`-th communicator created from the communicator with context
// `parent` (serial counts dup and split calls on the parent, identically on every member), for
// split color `salt` (or kDupSalt for a dup). A 64-bit mix of the three, with the collective
// bit (bit 63) cleared and never one of the reserved ids 0, 1 (world), 2 (self).
uint64_t DeriveContext(uint64_t parent, uint64_t serial, uint64_t salt);

}  // namespace gos::mpi

#endif  // GOS_LIBGOS_MPI_COMM_LOGIC_H_
