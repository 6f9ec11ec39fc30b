// The round trace end to end (docs/specs/round-trace.md, issue 26): a local cluster of two
// nodes started with GOS_ROUND_TRACE set, so that the coordinator, both nodeagents and the
// ranks of a small Jacobi run (examples/jacobi) each write their file; then every hop of the
// spec must appear for a round, on every process that takes part, in causal order.
#include "gos/round_trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/support/cluster.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace gos::round_trace {
namespace {

using namespace std::chrono_literals;

struct Event {
  uint64_t t;
  Hop hop;
  uint32_t node;
  int32_t rank;
};

const char* Name(Hop h) {
  static const char* kNames[] = {"?",
                                 "rank_post",
                                 "rank_block",
                                 "agent_blocked",
                                 "coord_early",
                                 "coord_quantum",
                                 "coord_send",
                                 "coord_sent",
                                 "agent_strobe",
                                 "agent_applied",
                                 "agent_exchange",
                                 "agent_desc_sent",
                                 "agent_exchanged",
                                 "agent_matched",
                                 "agent_moved",
                                 "agent_published",
                                 "agent_confirmed",
                                 "coord_confirmed",
                                 "rank_wake",
                                 "rank_visible",
                                 "rank_resume"};
  const auto i = static_cast<size_t>(h);
  return i < std::size(kNames) ? kNames[i] : "?";
}

class RoundTraceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: nodeagents make PID namespaces and cgroups";
    struct stat st {};
    if (::stat("/sys/fs/cgroup/freezer/cgroup.procs", &st) != 0) {
      GTEST_SKIP() << "no cgroup v1 freezer hierarchy";
    }
  }
};

TEST_F(RoundTraceE2eTest, EveryHopOfARoundInCausalOrder) {
  gos::testing::TempDir trace("gos-round-trace-e2e", 0755);
  // Inherited by gos-cluster (hence the daemons) and gos-run (hence the ranks).
  ::setenv("GOS_ROUND_TRACE", trace.path().c_str(), 1);
  std::optional<gos::testing::LocalCluster> cluster;
  cluster.emplace("gos-round-trace-e2e");
  auto up = cluster->Up({"-N", "2", "--timeslice", "5ms"});
  ASSERT_EQ(up.code, 0) << up.Describe();
  auto run = gos::testing::Run({gos::testing::GosBin("gos-run"), "-n", "4", "-N", "2",
                                gos::testing::GosExample("jacobi"), "64", "200"},
                               cluster->Env(), 120s);
  EXPECT_EQ(run.code, 0) << run.Describe();
  cluster->Down();  // the daemons write their files as they exit
  cluster.reset();
  ::unsetenv("GOS_ROUND_TRACE");
  ASSERT_EQ(run.code, 0);

  // Every file, by role.
  std::vector<File> files;
  int roles[4] = {};
  uint64_t job = 0;
  for (const auto& e : std::filesystem::directory_iterator(trace.path())) {
    File f;
    ASSERT_TRUE(ReadFile(e.path().string(), &f)) << e.path();
    EXPECT_EQ(f.header.dropped, 0u) << e.path();
    ASSERT_LT(f.header.role, 4u);
    ++roles[f.header.role];
    if (f.header.role == static_cast<uint32_t>(Role::kRank)) job = f.header.job;
    files.push_back(std::move(f));
  }
  ASSERT_EQ(roles[static_cast<int>(Role::kRank)], 4);
  ASSERT_EQ(roles[static_cast<int>(Role::kNodeAgent)], 2);
  ASSERT_EQ(roles[static_cast<int>(Role::kCoordinator)], 1);
  ASSERT_NE(job, 0u);

  // round -> events of the job (and of no job: strobes).
  std::map<uint64_t, std::vector<Event>> rounds;
  std::set<uint32_t> nodes;
  std::set<int32_t> ranks;
  for (const File& f : files) {
    for (const Record& r : f.records) {
      if (r.job != 0 && r.job != job) continue;
      rounds[r.round].push_back({r.t_ns, static_cast<Hop>(r.hop), r.node, r.rank});
      if (r.rank >= 0) ranks.insert(r.rank);
      if (r.hop == static_cast<uint16_t>(Hop::kAgentExchange)) nodes.insert(r.node);
    }
  }
  ASSERT_EQ(ranks.size(), 4u);
  ASSERT_EQ(nodes.size(), 2u);

  // A round is whole when every rank posted, blocked, saw its completions and resumed,
  // every node reported "all blocked", took the strobe and did every step, and the
  // coordinator decided early, sent, saw the strobe delivered and confirmed. Its order:
  // per rank and node, each hop no earlier than the one it waits for.
  const std::vector<Hop> node_after = {
      Hop::kAgentStrobe,   Hop::kAgentApplied,   Hop::kAgentExchange,
      Hop::kAgentDescSent, Hop::kAgentExchanged, Hop::kAgentMatched,
      Hop::kAgentMoved,    Hop::kAgentPublished, Hop::kAgentConfirmed};
  int whole = 0, woke = 0;
  std::string last_problem;
  for (const auto& [round, events] : rounds) {
    auto find = [&](Hop h, uint32_t node, int32_t rank, bool latest, uint64_t lo, uint64_t hi) {
      std::optional<uint64_t> got;
      for (const Event& e : events) {
        if (e.hop != h || e.t < lo || e.t > hi) continue;
        if (node != kUnknownNode && e.node != node) continue;
        if (rank >= 0 && e.rank != rank) continue;
        if (!got || (latest ? e.t > *got : e.t < *got)) got = e.t;
      }
      return got;
    };
    const uint64_t kEnd = ~uint64_t{0};
    auto send = find(Hop::kCoordSend, kUnknownNode, -1, false, 0, kEnd);
    auto decide = find(Hop::kCoordEarly, kUnknownNode, -1, true, 0, send.value_or(0));
    if (!send || !decide) continue;
    std::string problem;
    auto need = [&](std::optional<uint64_t> t, uint64_t after, const std::string& what) {
      if (!problem.empty()) return uint64_t{0};
      if (!t) {
        problem = "round " + std::to_string(round) + ": no " + what;
      } else if (*t < after) {
        problem = "round " + std::to_string(round) + ": " + what + " " +
                  std::to_string(after - *t) + " ns before the hop it waits for";
      }
      return t.value_or(0);
    };
    // Before the strobe, each hop is the latest one before the hop that waited for it: a
    // node may report again (its "work" changed) after the coordinator decided.
    for (uint32_t n : nodes) {
      const uint64_t rep =
          need(find(Hop::kAgentBlocked, n, -1, true, 0, *decide), 0,
               "agent_blocked of node " + std::to_string(n) + " before the decision");
      for (int32_t r : ranks) {
        // Ranks of node n: those whose records say so.
        if (!find(Hop::kRankPost, n, r, true, 0, *send)) continue;
        const uint64_t block =
            need(find(Hop::kRankBlock, n, r, true, 0, rep), 0,
                 "rank_block of rank " + std::to_string(r) + " before its report");
        need(find(Hop::kRankPost, n, r, true, 0, block), 0,
             "rank_post of rank " + std::to_string(r) + " before its block");
      }
    }
    need(send, *decide, "coord_send");
    need(find(Hop::kCoordSent, kUnknownNode, -1, false, *send, kEnd), *send, "coord_sent");
    int posting_ranks = 0, wakes = 0;
    for (uint32_t n : nodes) {
      uint64_t t = *send;
      for (Hop h : node_after) {
        t = need(find(h, n, -1, false, *send, kEnd), t,
                 std::string(Name(h)) + " of node " + std::to_string(n));
      }
      const uint64_t published =
          need(find(Hop::kAgentPublished, n, -1, false, *send, kEnd), *send, "agent_published");
      for (int32_t r : ranks) {
        if (!find(Hop::kRankPost, n, r, true, 0, *send)) continue;
        ++posting_ranks;
        // The first completions consumed after the publish, then the return to the program.
        // The rank slept in between (rank_wake) unless it found them before it slept.
        const uint64_t seen = need(find(Hop::kRankVisible, n, r, false, published, kEnd), published,
                                   "rank_visible of rank " + std::to_string(r));
        if (auto wake = find(Hop::kRankWake, n, r, false, published, seen)) {
          need(wake, published, "rank_wake of rank " + std::to_string(r));
          ++wakes;
        }
        need(find(Hop::kRankResume, n, r, false, seen, kEnd), seen,
             "rank_resume of rank " + std::to_string(r));
      }
    }
    need(find(Hop::kCoordConfirmed, kUnknownNode, -1, false, *send, kEnd), *send,
         "coord_confirmed");
    if (problem.empty() && posting_ranks != 4) {
      problem =
          "round " + std::to_string(round) + ": " + std::to_string(posting_ranks) + " ranks posted";
    }
    if (problem.empty()) {
      ++whole;
      woke += wakes > 0;
    } else {
      last_problem = problem;
    }
  }
  // 200 iterations, each one round: most rounds are early and whole (not all: the first,
  // the last, a round where a rank found its completions before it blocked, a quantum strobe).
  EXPECT_GE(whole, 100) << "rounds with every hop in order: " << whole << " of " << rounds.size()
                        << "; e.g. " << last_problem;
  EXPECT_GT(woke, 0) << "no whole round had a rank sleep and wake";
}

// A job on one node takes its rounds without strobes (docs/specs/bcs-exchange.md, "Job
// rounds"): with a 50 ms quantum, 200 iterations of Jacobi would need 200 early strobes;
// instead the nodeagent's bell thread runs a job round (id 2^63 + n) as soon as the ranks are
// all blocked, each in causal order from the last rank's block to every rank's resume.
TEST_F(RoundTraceE2eTest, AOneNodeJobTakesJobRoundsWithoutStrobes) {
  gos::testing::TempDir trace("gos-round-trace-e2e", 0755);
  ::setenv("GOS_ROUND_TRACE", trace.path().c_str(), 1);
  std::optional<gos::testing::LocalCluster> cluster;
  cluster.emplace("gos-round-trace-e2e");
  auto up = cluster->Up({"-N", "1", "--timeslice", "50ms"});
  ASSERT_EQ(up.code, 0) << up.Describe();
  auto run = gos::testing::Run({gos::testing::GosBin("gos-run"), "-n", "4", "-N", "1",
                                gos::testing::GosExample("jacobi"), "64", "200"},
                               cluster->Env(), 120s);
  EXPECT_EQ(run.code, 0) << run.Describe();
  cluster->Down();
  cluster.reset();
  ::unsetenv("GOS_ROUND_TRACE");
  ASSERT_EQ(run.code, 0);
  EXPECT_NE(run.output.find("iterations=200"), std::string::npos) << run.Describe();

  uint64_t job = 0;
  std::vector<File> files;
  for (const auto& e : std::filesystem::directory_iterator(trace.path())) {
    File f;
    ASSERT_TRUE(ReadFile(e.path().string(), &f)) << e.path();
    EXPECT_EQ(f.header.version, kVersion);
    if (f.header.role == static_cast<uint32_t>(Role::kRank)) job = f.header.job;
    files.push_back(std::move(f));
  }
  ASSERT_NE(job, 0u);
  const uint64_t kJobRound = uint64_t{1} << 63;
  std::map<uint64_t, std::vector<Event>> rounds;
  uint64_t first = ~uint64_t{0}, last = 0;
  std::set<uint64_t> strobes_sent;
  for (const File& f : files) {
    for (const Record& r : f.records) {
      if (r.job == job && r.rank >= 0) {
        first = std::min(first, r.t_ns);
        last = std::max(last, r.t_ns);
      }
      if (r.job != 0 && r.job != job) continue;
      if (r.hop == static_cast<uint16_t>(Hop::kCoordSend)) strobes_sent.insert(r.t_ns);
      if (r.round >= kJobRound) {
        rounds[r.round].push_back({r.t_ns, static_cast<Hop>(r.hop), r.node, r.rank});
      }
    }
  }
  int whole = 0;
  std::string last_problem;
  for (const auto& [round, events] : rounds) {
    auto at = [&](Hop h, int32_t rank, bool latest) {
      std::optional<uint64_t> got;
      for (const Event& e : events) {
        if (e.hop != h || (rank >= 0 && e.rank != rank)) continue;
        if (!got || (latest ? e.t > *got : e.t < *got)) got = e.t;
      }
      return got;
    };
    std::string problem;
    uint64_t t = 0;
    for (Hop h : {Hop::kAgentExchange, Hop::kAgentExchanged, Hop::kAgentMatched, Hop::kAgentMoved,
                  Hop::kAgentPublished}) {
      auto got = at(h, -1, false);
      if (!got || *got < t) {
        problem = "job round " + std::to_string(round - kJobRound) + ": " + Name(h) +
                  (got ? " out of order" : " missing");
        break;
      }
      t = *got;
    }
    const uint64_t exchange = at(Hop::kAgentExchange, -1, false).value_or(0);
    int ranks = 0;
    for (int32_t r = 0; r < 4 && problem.empty(); ++r) {
      auto block = at(Hop::kRankBlock, r, true);
      auto visible = at(Hop::kRankVisible, r, false);
      auto resume = at(Hop::kRankResume, r, false);
      if (!block || !visible || !resume) continue;  // this rank sat the round out
      if (*block > exchange || *visible < t || *resume < *visible) {
        problem = "job round " + std::to_string(round - kJobRound) + ": rank " + std::to_string(r) +
                  " out of order";
      }
      ++ranks;
    }
    if (problem.empty() && ranks == 4) {
      ++whole;
    } else if (!problem.empty()) {
      last_problem = problem;
    }
  }
  // 200 iterations: nearly every one a job round with all four ranks, while the coordinator
  // sent about one strobe per 50 ms quantum.
  EXPECT_GE(whole, 150) << "whole job rounds: " << whole << " of " << rounds.size() << "; e.g. "
                        << last_problem;
  const auto during = std::count_if(strobes_sent.begin(), strobes_sent.end(),
                                    [&](uint64_t t) { return t >= first && t <= last; });
  EXPECT_LE(during, 1 + static_cast<long>((last - first) / 40'000'000))
      << "strobes sent while the ranks ran: " << during << " in " << (last - first) / 1000 << " us";
}

}  // namespace
}  // namespace gos::round_trace
