// The CPU split of a node's ranks (pure logic) and the CPU list text.
#include "nodeagent/cpu_bind.h"

#include <gtest/gtest.h>

#include <vector>

namespace gos::nodeagent {
namespace {

using Cpus = std::vector<int>;

// Every rank's CPUs, in rank order.
std::vector<Cpus> Split(const Cpus& cpus, uint32_t count) {
  std::vector<Cpus> out;
  for (uint32_t i = 0; i < count; ++i) out.push_back(RankCpus(cpus, i, count));
  return out;
}

TEST(CpuBindTest, MoreRanksThanCpusShareThemInBlocks) {
  EXPECT_EQ(Split({0, 1}, 8), (std::vector<Cpus>{{0}, {0}, {0}, {0}, {1}, {1}, {1}, {1}}));
  EXPECT_EQ(Split({0, 1}, 3), (std::vector<Cpus>{{0}, {0}, {1}}));
  EXPECT_EQ(Split({2, 5, 7}, 3), (std::vector<Cpus>{{2}, {5}, {7}}));
}

TEST(CpuBindTest, LoadsDifferByAtMostOneRank) {
  const Cpus cpus = {0, 1, 2, 3, 4, 5, 6};
  for (uint32_t count = cpus.size(); count <= 40; ++count) {
    std::vector<int> load(cpus.size(), 0);
    for (const Cpus& c : Split(cpus, count)) {
      ASSERT_EQ(c.size(), 1u);
      load[c[0]]++;
    }
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    EXPECT_LE(*hi - *lo, 1) << count << " ranks";
    EXPECT_GE(*lo, 1) << count << " ranks";
  }
}

TEST(CpuBindTest, FewerRanksGetDisjointBlocksCoveringEveryCpu) {
  EXPECT_EQ(Split({0, 1, 2, 3}, 2), (std::vector<Cpus>{{0, 1}, {2, 3}}));
  EXPECT_EQ(Split({0, 1, 2, 3}, 3), (std::vector<Cpus>{{0}, {1}, {2, 3}}));
  EXPECT_EQ(Split({0, 1, 2, 3}, 1), (std::vector<Cpus>{{0, 1, 2, 3}}));
  EXPECT_EQ(Split({4, 6, 8, 10, 12}, 2), (std::vector<Cpus>{{4, 6}, {8, 10, 12}}));
}

TEST(CpuBindTest, OutsideTheSplitGetsEveryCpu) {
  EXPECT_EQ(RankCpus(Cpus{0, 1}, 0, 0), (Cpus{0, 1}));
  EXPECT_EQ(RankCpus(Cpus{0, 1}, 5, 2), (Cpus{0, 1}));
  EXPECT_EQ(RankCpus(Cpus{}, 0, 4), Cpus{});
}

TEST(CpuBindTest, ListText) {
  EXPECT_EQ(CpuListText(Cpus{}), "");
  EXPECT_EQ(CpuListText(Cpus{3}), "3");
  EXPECT_EQ(CpuListText(Cpus{0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(CpuListText(Cpus{0, 2, 4, 5}), "0,2,4-5");
}

TEST(CpuBindTest, AllowedCpusIsThisProcessesAffinity) {
  const Cpus cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  cpu_set_t set = CpuSetOf(cpus), mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  EXPECT_TRUE(CPU_EQUAL(&set, &mine));
}

}  // namespace
}  // namespace gos::nodeagent
