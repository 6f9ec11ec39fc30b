// gos-run -w / -x and gos-restart --exclude: node lists as gos-ps shows node ids.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/client.h"

namespace gos::tools {
namespace {

std::vector<uint32_t> Parse(const std::string& text) {
  std::vector<uint32_t> ids;
  std::string error;
  EXPECT_TRUE(ParseNodeList(text, &ids, &error)) << text << ": " << error;
  return ids;
}

TEST(NodeList, IdsListsAndRanges) {
  EXPECT_EQ(Parse("3"), (std::vector<uint32_t>{3}));
  EXPECT_EQ(Parse("1,3"), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(Parse("2-4,7"), (std::vector<uint32_t>{2, 3, 4, 7}));
  EXPECT_EQ(Parse("7,2-3,3"), (std::vector<uint32_t>{2, 3, 7}));  // sorted, once each
  EXPECT_EQ(Parse("5-5"), (std::vector<uint32_t>{5}));
}

TEST(NodeList, RepeatedOptionsAccumulate) {
  std::vector<uint32_t> ids;
  std::string error;
  ASSERT_TRUE(ParseNodeList("4", &ids, &error));
  ASSERT_TRUE(ParseNodeList("1-2", &ids, &error));
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 2, 4}));
}

TEST(NodeList, RefusesWhatIsNotANodeList) {
  for (const std::string bad :
       {"", "0", "a", "2-x", "4-2", "1,,2", "-3", "3-", "1 2", "n1", "1-100000", "99999999999"}) {
    std::vector<uint32_t> ids;
    std::string error;
    EXPECT_FALSE(ParseNodeList(bad, &ids, &error)) << '"' << bad << '"';
    EXPECT_NE(error.find("is not a node id"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace gos::tools
