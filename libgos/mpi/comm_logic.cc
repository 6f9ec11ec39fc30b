#include "comm_logic.h"

#include <algorithm>
#include <climits>
#include <functional>

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

namespace {

// The factorizations of m into `left` factors, each >= `low`, in non-decreasing order, are
// searched for the one whose largest minus smallest factor (`first` being the smallest so far)
// is least; `cur` holds the factors chosen so far. Of equal spreads the last found wins: the
// one with the largest smallest factor (MPICH's choice too, e.g. 5040 in 3-d is 21 x 16 x 15,
// not 20 x 18 x 14).
void BalancedSearch(int m, int left, int low, int first, std::vector<int>& cur,
                    std::vector<int>& best, int& best_spread) {
  if (left == 1) {
    if (m < low) return;
    const int spread = m - (cur.empty() ? m : first);
    if (spread <= best_spread) {
      best_spread = spread;
      best = cur;
      best.push_back(m);
    }
    return;
  }
  // f^left <= m: the later factors are at least f.
  for (int f = low;; ++f) {
    int64_t power = 1;
    for (int i = 0; i < left && power <= m; ++i) power *= f;
    if (power > m) break;
    if (m % f != 0) continue;
    const int smallest = cur.empty() ? f : first;
    // The largest factor is at least the (left-1)-th root of m / f, so at least f: once f
    // minus the smallest exceeds the best spread, no larger f can do as well.
    if (f - smallest > best_spread) break;
    cur.push_back(f);
    BalancedSearch(m / f, left - 1, f, smallest, cur, best, best_spread);
    cur.pop_back();
  }
}

}  // namespace

bool DimsCreate(int nnodes, std::span<int> dims) {
  if (nnodes < 1) return false;
  int fixed = 1, free = 0;
  for (int d : dims) {
    if (d < 0) return false;
    if (d == 0) {
      ++free;
    } else {
      fixed *= d;
    }
  }
  if (nnodes % fixed != 0) return false;
  const int rest = nnodes / fixed;
  if (free == 0) return rest == 1;
  // MPI: the free dimensions as close to each other as possible. Of all the ways to write
  // `rest` as a product of `free` factors, the one whose largest and smallest factors differ
  // least (a greedy split of the prime factors is not enough: 72 would be 12 x 6, not 9 x 8).
  std::vector<int> cur, got;
  int spread = INT_MAX;
  BalancedSearch(rest, free, 1, 0, cur, got, spread);
  std::sort(got.begin(), got.end(), std::greater<int>());
  size_t k = 0;
  for (int& d : dims) {
    if (d == 0) d = got[k++];
  }
  return true;
}

int Cart::Size() const {
  int n = 1;
  for (int d : dims) n *= d;
  return n;
}

int CartRank(const Cart& cart, std::span<const int> coords) {
  if (coords.size() != cart.dims.size()) return -1;
  int rank = 0;
  for (size_t i = 0; i < coords.size(); ++i) {
    const int d = cart.dims[i];
    int c = coords[i];
    if (c < 0 || c >= d) {
      if (!cart.periods[i]) return -1;
      c = ((c % d) + d) % d;
    }
    rank = rank * d + c;
  }
  return rank;
}

std::vector<int> CartCoords(const Cart& cart, int rank) {
  std::vector<int> coords(cart.dims.size());
  for (size_t i = cart.dims.size(); i-- > 0;) {
    coords[i] = rank % cart.dims[i];
    rank /= cart.dims[i];
  }
  return coords;
}

std::pair<int, int> CartShift(const Cart& cart, int rank, int direction, int disp) {
  std::vector<int> at = CartCoords(cart, rank);
  std::vector<int> to = at, from = at;
  to[static_cast<size_t>(direction)] += disp;
  from[static_cast<size_t>(direction)] -= disp;
  return {CartRank(cart, from), CartRank(cart, to)};
}

std::vector<int> CartNeighbors(const Cart& cart, int rank) {
  std::vector<int> out;
  for (size_t d = 0; d < cart.dims.size(); ++d) {
    auto [from, to] = CartShift(cart, rank, static_cast<int>(d), 1);
    out.push_back(from);
    out.push_back(to);
  }
  return out;
}

CartSubResult CartSub(const Cart& cart, int rank, std::span<const int> remain) {
  CartSubResult out;
  const std::vector<int> coords = CartCoords(cart, rank);
  for (size_t d = 0; d < cart.dims.size(); ++d) {
    if (remain[d] != 0) {
      out.key = out.key * cart.dims[d] + coords[d];
      out.sub.dims.push_back(cart.dims[d]);
      out.sub.periods.push_back(cart.periods[d]);
    } else {
      out.color = out.color * cart.dims[d] + coords[d];
    }
  }
  return out;
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

uint64_t GroupKey(std::span<const int> world_ranks, int tag) {
  uint64_t h = Mix64(0x67726f7570ULL ^ static_cast<uint64_t>(static_cast<uint32_t>(tag)));
  h = Mix64(h ^ world_ranks.size());
  for (int w : world_ranks) h = Mix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(w)));
  return h;
}

bool ExpandRanges(int n, const int (*ranges)[3], int size, std::vector<int>* ranks) {
  if (n < 0 || (n > 0 && ranges == nullptr)) return false;
  std::vector<bool> seen(static_cast<size_t>(size > 0 ? size : 0), false);
  for (int i = 0; i < n; ++i) {
    const int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    if (stride == 0 || first < 0 || first >= size || last < 0 || last >= size) return false;
    if ((stride > 0 && first > last) || (stride < 0 && first < last)) return false;
    for (long r = first; stride > 0 ? r <= last : r >= last; r += stride) {
      if (seen[static_cast<size_t>(r)]) return false;
      seen[static_cast<size_t>(r)] = true;
      ranks->push_back(static_cast<int>(r));
    }
  }
  return true;
}

}  // namespace gos::mpi
