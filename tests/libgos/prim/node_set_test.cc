#include "gos/prim/node_set.h"

#include <gtest/gtest.h>

namespace gos::prim {
namespace {

TEST(NodeSetTest, AddRemoveContains) {
  NodeSet s{3, 1, 70};
  EXPECT_EQ(s.size(), 3u);
  EXPECT_TRUE(s.Contains(70));
  EXPECT_FALSE(s.Contains(2));
  s.Add(3);
  EXPECT_EQ(s.size(), 3u);
  s.Remove(1);
  EXPECT_EQ(s.ToVector(), (std::vector<NodeId>{3, 70}));
  EXPECT_EQ(s.Bound(), 71u);
  s.Add(kMaxNodes);  // Out of range: ignored.
  EXPECT_EQ(s.size(), 2u);
}

TEST(NodeSetTest, ToStringUsesRanges) {
  EXPECT_EQ(NodeSet::All(4).ToString(), "{0-3}");
  EXPECT_EQ((NodeSet{0, 1, 2, 5, 7, 8}).ToString(), "{0-2,5,7-8}");
  EXPECT_EQ(NodeSet().ToString(), "{}");
}

TEST(NodeSetTest, EncodeDecodeRoundTrip) {
  NodeSet s{0, 9, 63, 64, 4095};
  auto d = NodeSet::Decode(s.Encode());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, s);
  EXPECT_EQ(NodeSet().Encode().size(), 0u);
}

TEST(NodeSetTest, DecodeRejectsOversizedBitmap) {
  std::vector<uint8_t> big(kMaxNodes / 8 + 1, 0xff);
  EXPECT_EQ(NodeSet::Decode(big).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gos::prim
