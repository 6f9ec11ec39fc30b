// The k-ary forwarding tree used by multicast (XFER-AND-SIGNAL) and by the global query
// (COMPARE-AND-WRITE). Pure functions: every node derives the same tree from (root, set,
// fanout) without talking to anyone.
//
// Order: root first, then the other members of the set ascending. Position i has children
// at positions i*k+1 .. i*k+k and parent at (i-1)/k; depth is O(log_k n).
#ifndef GOS_PRIM_TREE_H_
#define GOS_PRIM_TREE_H_

#include <vector>

#include "gos/prim/node_set.h"

namespace gos::prim {

struct TreePosition {
  bool member = false;  // false if `self` is neither the root nor in the set.
  NodeId parent = kNoNode;
  std::vector<NodeId> children;
};

// Members in tree order: root, then set \ {root} ascending.
std::vector<NodeId> TreeOrder(NodeId root, const NodeSet& set);
TreePosition TreeAt(NodeId root, const NodeSet& set, uint32_t fanout, NodeId self);

}  // namespace gos::prim

#endif  // GOS_PRIM_TREE_H_
