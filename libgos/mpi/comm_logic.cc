#include "libgos/mpi/comm_logic.h"

#include <algorithm>

namespace gos::mpi {
namespace {

// splitmix64's finalizer: a bijection on 64 bits with good avalanche.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

std::vector<int> SplitMembers(std::span<const SplitEntry> entries, int my_rank, int undefined) {
  std::vector<int> members;
  if (my_rank < 0 || static_cast<size_t>(my_rank) >= entries.size()) return members;
  const int color = entries[static_cast<size_t>(my_rank)].color;
  if (color == undefined) return members;
  for (size_t r = 0; r < entries.size(); ++r) {
    if (entries[r].color == color) members.push_back(static_cast<int>(r));
  }
  // Ranks are pushed in ascending order, so a stable sort by key breaks ties by parent rank.
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return entries[static_cast<size_t>(a)].key < entries[static_cast<size_t>(b)].key;
  });
  return members;
}

uint64_t DeriveContext(uint64_t parent, uint64_t serial, uint64_t salt) {
  uint64_t h = Mix64(parent ^ 0x9e3779b97f4a7c15ULL);
  h = Mix64(h ^ serial);
  h = Mix64(h ^ salt);
  h &= ~(uint64_t{1} << 63);
  // Ids 0..2 are reserved; landing there is a 3-in-2^63 event, moved deterministically.
  if (h <= 2) h += 3;
  return h;
}

}  // namespace gos::mpi
