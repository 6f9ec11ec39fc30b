// NodeSet: a set of node ids of one group, as a bitmap. The destination set of
// XFER-AND-SIGNAL and the node set of COMPARE-AND-WRITE.
//
// Value type; not thread-safe for concurrent mutation. Ids are < kMaxNodes.
#ifndef GOS_PRIM_NODE_SET_H_
#define GOS_PRIM_NODE_SET_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::prim {

using NodeId = uint32_t;
inline constexpr NodeId kNoNode = 0xffffffffu;
// Largest group the wire formats carry (a 512-byte bitmap).
inline constexpr uint32_t kMaxNodes = 4096;

class NodeSet {
 public:
  NodeSet() = default;
  NodeSet(std::initializer_list<NodeId> ids);
  static NodeSet All(uint32_t group_size);
  static NodeSet Range(NodeId first, NodeId last_exclusive);

  void Add(NodeId id);
  void Remove(NodeId id);
  bool Contains(NodeId id) const;
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  // Largest id + 1 (0 if empty).
  uint32_t Bound() const;
  // Ascending ids.
  std::vector<NodeId> ToVector() const;
  // "{0-3,7,9}".
  std::string ToString() const;

  // Bitmap encoding: ceil(Bound()/8) bytes, bit i of byte i/8 = node i.
  std::vector<uint8_t> Encode() const;
  // Fails on a bitmap longer than kMaxNodes/8 bytes.
  static StatusOr<NodeSet> Decode(std::span<const uint8_t> bytes);

  friend bool operator==(const NodeSet& a, const NodeSet& b);

 private:
  std::vector<uint64_t> words_;
  size_t count_ = 0;
};

}  // namespace gos::prim

#endif  // GOS_PRIM_NODE_SET_H_
