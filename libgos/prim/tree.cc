#include "tree.h"

#include <algorithm>

namespace gos::prim {

std::vector<NodeId> TreeOrder(NodeId root, const NodeSet& set) {
  std::vector<NodeId> order;
  order.reserve(set.size() + 1);
  order.push_back(root);
  for (NodeId id : set.ToVector()) {
    if (id != root) order.push_back(id);
  }
  return order;
}

TreePosition TreeAt(NodeId root, const NodeSet& set, uint32_t fanout, NodeId self) {
  TreePosition pos;
  if (fanout == 0) fanout = 1;
  std::vector<NodeId> order = TreeOrder(root, set);
  auto it = std::find(order.begin(), order.end(), self);
  if (it == order.end()) return pos;
  pos.member = true;
  size_t i = static_cast<size_t>(it - order.begin());
  if (i > 0) pos.parent = order[(i - 1) / fanout];
  for (size_t c = i * fanout + 1; c <= i * fanout + fanout && c < order.size(); ++c) {
    pos.children.push_back(order[c]);
  }
  return pos;
}

}  // namespace gos::prim
