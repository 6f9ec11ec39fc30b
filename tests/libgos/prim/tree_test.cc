#include "libgos/prim/tree.h"

#include <gtest/gtest.h>

#include <map>

namespace gos::prim {
namespace {

TEST(TreeTest, BinaryTreeOverWholeGroup) {
  NodeSet all = NodeSet::All(7);
  TreePosition root = TreeAt(0, all, 2, 0);
  EXPECT_EQ(root.parent, kNoNode);
  EXPECT_EQ(root.children, (std::vector<NodeId>{1, 2}));
  EXPECT_EQ(TreeAt(0, all, 2, 2).children, (std::vector<NodeId>{5, 6}));
  EXPECT_EQ(TreeAt(0, all, 2, 6).parent, 2u);
  EXPECT_TRUE(TreeAt(0, all, 2, 6).children.empty());
}

TEST(TreeTest, RootOutsideSetComesFirst) {
  NodeSet odd{1, 3, 5, 7};
  EXPECT_EQ(TreeOrder(4, odd), (std::vector<NodeId>{4, 1, 3, 5, 7}));
  EXPECT_EQ(TreeAt(4, odd, 2, 4).children, (std::vector<NodeId>{1, 3}));
  EXPECT_EQ(TreeAt(4, odd, 2, 1).children, (std::vector<NodeId>{5, 7}));
  EXPECT_FALSE(TreeAt(4, odd, 2, 2).member);
}

// Every member but the root has exactly one parent, and is its parent's child: the tree
// reaches everyone exactly once, for every fan-out.
TEST(TreeTest, EveryMemberReachedOnce) {
  for (uint32_t n : {1u, 2u, 5u, 16u, 33u}) {
    for (uint32_t k : {1u, 2u, 4u, 8u, 64u}) {
      NodeSet s = NodeSet::All(n);
      std::map<NodeId, int> seen;
      for (NodeId id = 0; id < n; ++id) {
        for (NodeId c : TreeAt(0, s, k, id).children) {
          seen[c]++;
          EXPECT_EQ(TreeAt(0, s, k, c).parent, id);
        }
      }
      EXPECT_EQ(seen.size(), n - 1) << "n=" << n << " k=" << k;
      for (auto& [id, count] : seen) EXPECT_EQ(count, 1);
    }
  }
}

}  // namespace
}  // namespace gos::prim
