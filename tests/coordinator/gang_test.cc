#include "coordinator/gang.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace gos::coordinator {
namespace {

GangMatrix Cluster(uint32_t nodes, uint32_t mpl) {
  GangMatrix m(mpl);
  for (NodeId n = 0; n < nodes; ++n) m.SetNode(n, true);
  return m;
}

JobRequest Job(JobId id, uint32_t ntasks, uint32_t nodes = 0, int64_t limit_ms = 0,
               uint32_t ranks_per_node = 0) {
  return JobRequest{.job = id,
                    .ntasks = ntasks,
                    .nodes = nodes,
                    .ranks_per_node = ranks_per_node,
                    .time_limit_ms = limit_ms};
}

using Nodes = std::vector<NodeId>;
using Jobs = std::vector<JobId>;

TEST(GangMatrixTest, TwoSmallJobsShareRowZero) {
  GangMatrix m = Cluster(4, 2);
  auto a = m.TryPlace(Job(17, 2, 2));
  auto b = m.TryPlace(Job(18, 2, 2));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->row, 0u);
  EXPECT_EQ(a->nodes, (Nodes{0, 1}));
  EXPECT_EQ(b->row, 0u);
  EXPECT_EQ(b->nodes, (Nodes{2, 3}));
  EXPECT_EQ(m.JobsInRow(0), (Jobs{17, 18}));
  EXPECT_TRUE(m.JobsInRow(1).empty());
  EXPECT_EQ(m.At(0, 1), 17u);
  EXPECT_EQ(m.At(0, 2), 18u);
  EXPECT_EQ(m.At(1, 2), 0u);
  EXPECT_EQ(m.ToString(), "row 0: 17 17 18 18\nrow 1: . . . .\n");
  EXPECT_EQ(m.NextRow(0), 0u);
}

TEST(GangMatrixTest, TwoFullJobsTimeShareAndAThirdWaits) {
  GangMatrix m = Cluster(4, 2);
  auto a = m.TryPlace(Job(1, 4, 4));
  auto b = m.TryPlace(Job(2, 4, 4));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->row, 0u);
  EXPECT_EQ(b->row, 1u);
  EXPECT_EQ(b->nodes, (Nodes{0, 1, 2, 3}));
  EXPECT_FALSE(m.TryPlace(Job(3, 4, 4)));
  EXPECT_FALSE(m.Has(3));
  EXPECT_EQ(m.JobsOnNode(2), (Jobs{1, 2}));
  EXPECT_EQ(m.ToString(), "row 0: 1 1 1 1\nrow 1: 2 2 2 2\n");

  // The same through the queue: the third job stays queued.
  GangMatrix m2 = Cluster(4, 2);
  JobQueue q;
  for (JobId id : {1, 2, 3}) q.Push(Job(id, 4, 4));
  auto started = q.Schedule(m2, 0, {});
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[0].job, 1u);
  EXPECT_EQ(started[1].job, 2u);
  EXPECT_EQ(started[1].row, 1u);
  EXPECT_EQ(q.Ids(), (Jobs{3}));
  EXPECT_EQ(m2.ToString(), m.ToString());
}

TEST(GangMatrixTest, AJobIsPlacedInOneRowOnly) {
  // Two free cells in row 0 and two in row 1 do not make room for a 4-node job.
  GangMatrix m = Cluster(4, 2);
  ASSERT_TRUE(m.Restore({.job = 1, .row = 0, .nodes = {0, 1}, .rank_nodes = {0, 1}}).ok());
  ASSERT_TRUE(m.Restore({.job = 2, .row = 1, .nodes = {2, 3}, .rank_nodes = {2, 3}}).ok());
  EXPECT_FALSE(m.TryPlace(Job(3, 4, 4)));
  auto c = m.TryPlace(Job(4, 2, 2));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->row, 0u);
  EXPECT_EQ(c->nodes, (Nodes{2, 3}));
}

TEST(GangMatrixTest, NextRowRotatesOverNonEmptyRows) {
  GangMatrix m = Cluster(2, 3);
  // All rows empty: 0, whatever the current row.
  for (uint32_t cur : {0u, 1u, 2u, 7u}) EXPECT_EQ(m.NextRow(cur), 0u) << cur;

  // Only row 1 holds a job: it runs again and again.
  ASSERT_TRUE(m.Restore({.job = 5, .row = 1, .nodes = {0}, .rank_nodes = {0}}).ok());
  for (uint32_t cur : {0u, 1u, 2u}) EXPECT_EQ(m.NextRow(cur), 1u) << cur;

  // Rows 0 and 2: the empty row 1 is skipped both ways round.
  m.Remove(5);
  ASSERT_TRUE(m.Restore({.job = 6, .row = 0, .nodes = {0}, .rank_nodes = {0}}).ok());
  ASSERT_TRUE(m.Restore({.job = 7, .row = 2, .nodes = {1}, .rank_nodes = {1}}).ok());
  EXPECT_EQ(m.NextRow(0), 2u);
  EXPECT_EQ(m.NextRow(2), 0u);
  EXPECT_EQ(m.NextRow(1), 2u);
  EXPECT_EQ(m.NextRow(9), 0u);  // Out of range: the search starts at row 0.

  // All three rows: plain round robin.
  ASSERT_TRUE(m.Restore({.job = 8, .row = 1, .nodes = {1}, .rank_nodes = {1}}).ok());
  uint32_t row = 0;
  std::vector<uint32_t> seen;
  for (int i = 0; i < 6; ++i) seen.push_back(row = m.NextRow(row));
  EXPECT_EQ(seen, (std::vector<uint32_t>{1, 2, 0, 1, 2, 0}));

  GangMatrix single = Cluster(2, 1);
  EXPECT_EQ(single.NextRow(0), 0u);
  ASSERT_TRUE(single.TryPlace(Job(1, 1)));
  EXPECT_EQ(single.NextRow(0), 0u);
}

TEST(GangMatrixTest, DownNodesGetNoNewJobs) {
  GangMatrix m = Cluster(4, 1);
  m.SetNode(1, false);
  EXPECT_EQ(m.UpNodes(), 3u);
  EXPECT_FALSE(m.IsUp(1));
  auto a = m.TryPlace(Job(1, 2, 2));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->nodes, (Nodes{0, 2}));
  EXPECT_EQ(m.ToString(), "row 0: 1 x 1 .\n");
  // Only node 3 is free and up: a 2-node job waits although node 1 is free.
  EXPECT_FALSE(m.TryPlace(Job(2, 2, 2)));
  // The whole cluster is judged on up nodes only.
  EXPECT_EQ(m.Check(Job(3, 4, 4)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(*m.NodesFor(Job(3, 8)), 3u);  // -N chosen: min(8 ranks, 3 up nodes).

  // A job on a node that goes down stays there; the node comes back and is used again.
  m.SetNode(2, false);
  EXPECT_EQ(m.JobsOnNode(2), (Jobs{1}));
  EXPECT_EQ(m.UpNodes(), 2u);
  m.SetNode(2, false);  // Idempotent.
  EXPECT_EQ(m.UpNodes(), 2u);
  m.SetNode(1, true);
  EXPECT_EQ(m.UpNodes(), 3u);
  auto b = m.TryPlace(Job(2, 2, 2));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->nodes, (Nodes{1, 3}));
  // Node 7 is new and down: a column, but no capacity.
  m.SetNode(7, false);
  EXPECT_EQ(m.Nodes(), (Nodes{0, 1, 2, 3, 7}));
  EXPECT_EQ(m.UpNodes(), 3u);
}

TEST(GangMatrixTest, CheckExplainsWhatIsWrong) {
  GangMatrix m = Cluster(4, 2);
  EXPECT_TRUE(m.Check(Job(1, 64)).ok());          // 64 ranks on the 4 nodes.
  EXPECT_TRUE(m.Check(Job(1, 8, 2, 0, 4)).ok());  // -N 2 --ranks-per-node 4.

  Status s = m.Check(Job(1, 9, 9));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "needs 9 nodes, the cluster has 4 up");

  s = m.Check(Job(1, 8, 2, 0, 3));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--ranks-per-node 3 with -N 2 cannot hold 8 ranks");

  s = m.Check(Job(1, 8, 3, 0, 4));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--ranks-per-node 4 with -N 3 leaves a node without ranks for 8 ranks");

  s = m.Check(Job(1, 10, 0, 0, 2));  // ceil(10 / 2) = 5 nodes.
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "needs 5 nodes, the cluster has 4 up");

  s = m.Check(Job(1, 2, 3));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("-N 3 is more nodes than the 2 ranks"), std::string::npos);

  EXPECT_EQ(m.Check(Job(1, 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Check(Job(0, 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Check(Job(1, 1, 0, -5)).code(), StatusCode::kInvalidArgument);

  GangMatrix empty(1);
  s = empty.Check(Job(1, 1));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "needs 1 node, the cluster has 0 up");

  // A request that fails Check is never placed.
  EXPECT_FALSE(m.TryPlace(Job(1, 8, 2, 0, 3)));
  EXPECT_EQ(m.size(), 0u);
}

TEST(GangMatrixTest, RankNodesAreBlockDistributed) {
  GangMatrix m = Cluster(8, 8);
  auto p = m.TryPlace(Job(1, 7, 3));  // 7 ranks on 3 nodes: 3 2 2.
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nodes, (Nodes{0, 1, 2}));
  EXPECT_EQ(p->rank_nodes, (Nodes{0, 0, 0, 1, 1, 2, 2}));

  p = m.TryPlace(Job(2, 5, 4));  // 2 1 1 1: no node is left without a rank.
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nodes, (Nodes{3, 4, 5, 6}));
  EXPECT_EQ(p->rank_nodes, (Nodes{3, 3, 4, 5, 6}));

  p = m.TryPlace(Job(3, 7, 0, 0, 3));  // --ranks-per-node 3: ceil(7 / 3) = 3 nodes, 3 3 1.
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nodes, (Nodes{0, 1, 2}));
  EXPECT_EQ(p->row, 1u);
  EXPECT_EQ(p->rank_nodes, (Nodes{0, 0, 0, 1, 1, 1, 2}));

  p = m.TryPlace(Job(4, 7, 4, 0, 2));  // -N 4 --ranks-per-node 2: 2 2 2 1.
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rank_nodes, (Nodes{3, 3, 4, 4, 5, 5, 6}));

  p = m.TryPlace(Job(5, 16));  // -N chosen: 8 nodes, 2 ranks each.
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nodes.size(), 8u);
  EXPECT_EQ(p->rank_nodes, (Nodes{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7}));

  p = m.TryPlace(Job(6, 3));  // -N chosen: 3 ranks on 3 nodes; rows 0-2 have < 3 free.
  ASSERT_TRUE(p);
  EXPECT_EQ(p->row, 3u);
  EXPECT_EQ(p->rank_nodes, (Nodes{0, 1, 2}));

  p = m.TryPlace(Job(7, 1));  // The last free cell of row 0.
  ASSERT_TRUE(p);
  EXPECT_EQ(p->row, 0u);
  EXPECT_EQ(p->rank_nodes, (Nodes{7}));
}

// A restart's ranks go back to the nodes that dumped them where the block distribution leaves
// room (those nodes may still hold the dumps); the others fill the places left.
TEST(GangMatrixTest, RankHomesArePreferred) {
  GangMatrix m(2);
  for (NodeId n = 1; n <= 4; ++n) m.SetNode(n, true);
  // Was n1: r0 r1, n2: r2, n3: r3; node 1 died.
  m.SetNode(1, false);
  JobRequest r = Job(7, 4);
  r.rank_home = {1, 1, 2, 3};
  auto p = m.TryPlace(r);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nodes, (Nodes{2, 3, 4}));
  // Block counts 2, 1, 1 over nodes 2, 3, 4: r2 and r3 stay home, r0 and r1 fill up.
  EXPECT_EQ(p->rank_nodes, (Nodes{2, 4, 2, 3}));

  // All up: a 2-rank job that ran on 3 and 4 goes back there, not to the lowest nodes.
  JobRequest q = Job(8, 2);
  q.nodes = 2;
  q.rank_home = {4, 3};
  auto pq = m.TryPlace(q);
  ASSERT_TRUE(pq);
  EXPECT_EQ(pq->row, 1u);  // row 0 is job 7's on nodes 2-4
  EXPECT_EQ(pq->nodes, (Nodes{3, 4}));
  EXPECT_EQ(pq->rank_nodes, (Nodes{4, 3}));

  // A home that is taken in every row, or excluded, is passed over.
  JobRequest s = Job(9, 2);
  s.nodes = 1;
  s.rank_home = {3, 3};
  auto ps = m.TryPlace(s);
  ASSERT_TRUE(ps);
  EXPECT_EQ(ps->nodes, (Nodes{2}));  // row 1: 3 and 4 taken by job 8
  EXPECT_EQ(ps->rank_nodes, (Nodes{2, 2}));

  // An excluded home (free in row 1) is passed over too.
  GangMatrix free_m(1);
  for (NodeId n = 1; n <= 4; ++n) free_m.SetNode(n, true);
  JobRequest x = Job(10, 2);
  x.nodes = 1;
  x.rank_home = {3, 3};
  x.exclude = {3};
  auto px = free_m.TryPlace(x);
  ASSERT_TRUE(px);
  EXPECT_EQ(px->nodes, (Nodes{1}));
  EXPECT_EQ(px->rank_nodes, (Nodes{1, 1}));
}

TEST(GangMatrixTest, RemoveFreesCells) {
  GangMatrix m = Cluster(4, 1);
  ASSERT_TRUE(m.TryPlace(Job(1, 4)));
  EXPECT_FALSE(m.TryPlace(Job(2, 2)));
  m.Remove(1);
  EXPECT_FALSE(m.Has(1));
  EXPECT_EQ(m.Find(1), nullptr);
  EXPECT_TRUE(m.JobsOnNode(0).empty());
  EXPECT_TRUE(m.JobsInRow(0).empty());
  EXPECT_EQ(m.At(0, 0), 0u);
  m.Remove(1);   // Unknown: ignored.
  m.Remove(42);  // Unknown: ignored.
  auto p = m.TryPlace(Job(2, 2));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nodes, (Nodes{0, 1}));
  EXPECT_EQ(*m.Find(2), *p);
  EXPECT_EQ(m.size(), 1u);
  // A job id already placed is not placed twice.
  EXPECT_FALSE(m.TryPlace(Job(2, 1)));
}

TEST(GangMatrixTest, RestoreReinsertsPlacementsAndRefusesTakenCells) {
  GangMatrix a = Cluster(4, 3);
  std::vector<Placement> ps;
  for (const auto& r : {Job(1, 3, 2), Job(2, 2, 2), Job(3, 4), Job(4, 1)}) {
    auto p = a.TryPlace(r);
    ASSERT_TRUE(p) << r.job;
    ps.push_back(*p);
  }
  // Recovery: the same placements in another order give the same matrix.
  GangMatrix b = Cluster(4, 3);
  for (auto it = ps.rbegin(); it != ps.rend(); ++it) ASSERT_TRUE(b.Restore(*it).ok());
  EXPECT_EQ(b.ToString(), a.ToString());
  EXPECT_EQ(*b.Find(1), ps[0]);
  EXPECT_EQ(b.JobsOnNode(0), a.JobsOnNode(0));

  // Taken: the same job, or a cell of another job. Nothing changes on error.
  const std::string before = b.ToString();
  EXPECT_EQ(b.Restore(ps[0]).code(), StatusCode::kAlreadyExists);
  Status s = b.Restore({.job = 9, .row = 1, .nodes = {1}, .rank_nodes = {1}});
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("held by job 3"), std::string::npos) << s.ToString();
  EXPECT_EQ(b.ToString(), before);
  EXPECT_FALSE(b.Has(9));

  // Malformed placements (e.g. from a damaged table).
  auto bad = [&](Placement p) { return b.Restore(p).code(); };
  EXPECT_EQ(bad({.job = 0, .row = 0, .nodes = {3}, .rank_nodes = {3}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({.job = 9, .row = 3, .nodes = {3}, .rank_nodes = {3}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({.job = 9, .row = 0, .nodes = {}, .rank_nodes = {}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({.job = 9, .row = 0, .nodes = {3, 3}, .rank_nodes = {3}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({.job = 9, .row = 0, .nodes = {3}, .rank_nodes = {3, 2}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({.job = 9, .row = 0, .nodes = {5, 6}, .rank_nodes = {5}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(b.ToString(), before);

  // Columns a recovered placement names but nobody registered yet are added as down.
  GangMatrix c(1);
  ASSERT_TRUE(c.Restore({.job = 5, .row = 0, .nodes = {2, 4}, .rank_nodes = {2, 4, 4}}).ok());
  EXPECT_EQ(c.Nodes(), (Nodes{2, 4}));
  EXPECT_EQ(c.UpNodes(), 0u);
  EXPECT_EQ(c.ToString(), "row 0: 5 5\n");
  c.SetNode(3, true);
  EXPECT_EQ(c.ToString(), "row 0: 5 . 5\n");
}

TEST(JobQueueTest, PushRemoveAndOrder) {
  JobQueue q;
  q.Push(Job(3, 1));
  q.Push(Job(1, 1));
  q.Push(Job(2, 1));
  q.Push(Job(1, 5));  // Already queued: ignored.
  EXPECT_EQ(q.Ids(), (Jobs{3, 1, 2}));
  EXPECT_EQ(q.Find(1)->ntasks, 1u);
  EXPECT_TRUE(q.Remove(1));
  EXPECT_FALSE(q.Remove(1));
  EXPECT_FALSE(q.Contains(1));
  EXPECT_EQ(q.Ids(), (Jobs{3, 2}));
  EXPECT_EQ(q.size(), 2u);
}

TEST(JobQueueTest, JobsThatCannotRunOnThisClusterDoNotBlockTheQueue) {
  GangMatrix m = Cluster(4, 1);
  JobQueue q;
  q.Push(Job(1, 8, 8));  // Needs 8 nodes; only 4 are up.
  q.Push(Job(2, 2, 2));
  EXPECT_EQ(q.Head(m)->job, 2u);
  auto started = q.Schedule(m, 0, {});
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job, 2u);
  EXPECT_EQ(q.Ids(), (Jobs{1}));
  EXPECT_EQ(q.Head(m), nullptr);
}

// A cluster of 4 nodes, MPL 1: job 1 runs on nodes 0-2 until t=100, node 3 is free, and the
// head (job 2) needs all 4 nodes: it is reserved all 4 at t=100.
struct BlockedHead {
  GangMatrix m = Cluster(4, 1);
  JobQueue q;
  std::map<JobId, int64_t> ends{{1, 100}};

  BlockedHead() {
    EXPECT_TRUE(m.TryPlace(Job(1, 3, 3, 100)));
    q.Push(Job(2, 4, 4));
  }
};

TEST(JobQueueTest, BackfillStartsASmallJobThatEndsBeforeTheHeadsReservation) {
  BlockedHead c;
  auto res = c.m.Reserve(*c.q.Head(c.m), 0, c.ends);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->start_ms, 100);
  EXPECT_EQ(res->nodes, (Nodes{0, 1, 2, 3}));

  c.q.Push(Job(3, 1, 1, 60));
  auto started = c.q.Schedule(c.m, 40, c.ends);  // Ends at 100: just in time.
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job, 3u);
  EXPECT_EQ(started[0].nodes, (Nodes{3}));
  EXPECT_EQ(c.q.Ids(), (Jobs{2}));
  c.ends[3] = 100;
  EXPECT_EQ(c.m.Reserve(*c.q.Head(c.m), 40, c.ends)->start_ms, 100);
}

TEST(JobQueueTest, BackfillDoesNotStartAJobThatWouldDelayTheHead) {
  BlockedHead c;
  c.q.Push(Job(3, 1, 1, 61));  // Would end at 101.
  c.q.Push(Job(4, 1, 1, 0));   // No time limit.
  EXPECT_TRUE(c.q.Schedule(c.m, 40, c.ends).empty());
  EXPECT_EQ(c.q.Ids(), (Jobs{2, 3, 4}));
  EXPECT_EQ(c.m.At(0, 3), 0u);

  // Job 1 ends: the head starts first, FCFS, and the others wait behind it.
  c.m.Remove(1);
  c.ends.erase(1);
  auto started = c.q.Schedule(c.m, 100, c.ends);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job, 2u);
  EXPECT_EQ(c.q.Ids(), (Jobs{3, 4}));
}

TEST(JobQueueTest, BackfillWithoutTimeLimitUsesNodesTheHeadWillNotGet) {
  // Job 1 holds nodes 0-2 until t=100; the head needs 2 nodes and is reserved {0, 1} at t=100,
  // so node 3 is free for a job of any length.
  GangMatrix m = Cluster(4, 1);
  ASSERT_TRUE(m.TryPlace(Job(1, 3, 3, 100)));
  JobQueue q;
  q.Push(Job(2, 2, 2));
  q.Push(Job(3, 2, 2));  // Does not fit now at all.
  q.Push(Job(4, 1, 1));  // No time limit, fits on node 3.
  std::map<JobId, int64_t> ends{{1, 100}};
  auto res = m.Reserve(*q.Head(m), 0, ends);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->nodes, (Nodes{0, 1}));
  auto started = q.Schedule(m, 0, ends);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job, 4u);
  EXPECT_EQ(started[0].nodes, (Nodes{3}));
  EXPECT_EQ(q.Ids(), (Jobs{2, 3}));
  // The head's reservation did not move.
  EXPECT_EQ(m.Reserve(*q.Head(m), 0, ends)->start_ms, 100);
}

TEST(JobQueueTest, BackfillAvoidsReservedCellsEvenWhenFirstFitWouldTakeThem) {
  // Job 1 holds nodes 2-3 until t=100, nodes 0-1 are free; the head needs 3 nodes and is
  // reserved {0, 1, 2} at t=100. First fit would put a 1-node job without a time limit on node
  // 0, which is reserved, and no free cell is left off the reservation: it waits. A 1-node job
  // that ends by t=100 may use node 0.
  GangMatrix m = Cluster(4, 1);
  ASSERT_TRUE(m.Restore({.job = 1, .row = 0, .nodes = {2, 3}, .rank_nodes = {2, 3}}).ok());
  JobQueue q;
  q.Push(Job(2, 3, 3));
  q.Push(Job(3, 1, 1));
  q.Push(Job(4, 1, 1, 30));
  auto started = q.Schedule(m, 0, {{1, 100}});
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job, 4u);
  EXPECT_EQ(started[0].nodes, (Nodes{0}));
  EXPECT_EQ(q.Ids(), (Jobs{2, 3}));
}

TEST(JobQueueTest, BackfillIntoAnotherRowDoesNotDelayTheHead) {
  // MPL 2. Row 0: job 1 on all 4 nodes until t=100. Row 1: job 2 on nodes 0-1 until t=500.
  // The head (4 nodes) is reserved row 0 at t=100, so row 1's free nodes 2-3 take a job of any
  // length.
  GangMatrix m = Cluster(4, 2);
  ASSERT_TRUE(m.TryPlace(Job(1, 4, 4, 100)));
  ASSERT_TRUE(m.TryPlace(Job(2, 2, 2, 500)));
  std::map<JobId, int64_t> ends{{1, 100}, {2, 500}};
  JobQueue q;
  q.Push(Job(3, 4, 4));
  q.Push(Job(4, 2, 2));
  auto res = m.Reserve(*q.Head(m), 0, ends);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->row, 0u);
  EXPECT_EQ(res->start_ms, 100);
  auto started = q.Schedule(m, 0, ends);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job, 4u);
  EXPECT_EQ(started[0].row, 1u);
  EXPECT_EQ(started[0].nodes, (Nodes{2, 3}));
  EXPECT_EQ(m.Reserve(*q.Head(m), 0, ends)->start_ms, 100);
}

TEST(JobQueueTest, UnknownReservedStartOnlyAllowsBackfillOffTheReservedCells) {
  // Job 1 (no time limit) holds nodes 0-1; the head needs 3 nodes: reserved {0, 1, 2}, start
  // unknown. A time limit does not help a job then: only node 3 can be backfilled.
  GangMatrix m = Cluster(4, 1);
  ASSERT_TRUE(m.TryPlace(Job(1, 2, 2)));
  JobQueue q;
  q.Push(Job(2, 3, 3));
  q.Push(Job(3, 1, 1, 10));
  q.Push(Job(4, 1, 1, 10));
  auto res = m.Reserve(*q.Head(m), 0, {});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->start_ms, kUnknownTime);
  EXPECT_EQ(res->nodes, (Nodes{0, 1, 2}));
  EXPECT_EQ(res->unknown_cells, 2u);
  auto started = q.Schedule(m, 0, {});
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job, 3u);
  EXPECT_EQ(started[0].nodes, (Nodes{3}));
  EXPECT_EQ(q.Ids(), (Jobs{2, 4}));
}

TEST(JobQueueTest, ReservationPrefersTheEarliestRowThenFewerUnknownCells) {
  GangMatrix m = Cluster(4, 3);
  ASSERT_TRUE(m.TryPlace(Job(1, 4, 4)));       // Row 0: unknown end.
  ASSERT_TRUE(m.TryPlace(Job(2, 4, 4, 300)));  // Row 1: until 300.
  ASSERT_TRUE(m.TryPlace(Job(3, 3, 3)));       // Row 2: nodes 0-2, unknown end.
  std::map<JobId, int64_t> ends{{2, 300}};
  auto res = m.Reserve(Job(9, 4, 4), 0, ends);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->row, 1u);
  EXPECT_EQ(res->start_ms, 300);
  m.Remove(2);
  ASSERT_TRUE(m.TryPlace(Job(2, 4, 4)));  // Row 1 now unknown too.
  res = m.Reserve(Job(9, 4, 4), 0, {});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->start_ms, kUnknownTime);
  EXPECT_EQ(res->row, 2u);  // 3 unknown cells instead of 4.
  EXPECT_EQ(res->unknown_cells, 3u);
  // Fits now: reserved now, on the cells TryPlace would take.
  res = m.Reserve(Job(9, 1, 1), 7, {});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->start_ms, 7);
  EXPECT_EQ(res->row, 2u);
  EXPECT_EQ(res->nodes, (Nodes{3}));
  EXPECT_FALSE(m.Reserve(Job(9, 9, 9), 0, {}));  // Fails Check.
}

// ---------------------------------------------------------------------------------------------
// Randomized properties.

uint32_t ExpectedNodes(const JobRequest& r, uint32_t up) {
  if (r.nodes > 0) return r.nodes;
  if (r.ranks_per_node > 0) return (r.ntasks + r.ranks_per_node - 1) / r.ranks_per_node;
  return std::max<uint32_t>(1, std::min(r.ntasks, up));
}

// Checks a fresh placement against its request, independently of the allocator's code.
void CheckPlacement(const JobRequest& r, const Placement& p, const GangMatrix& m) {
  ASSERT_EQ(p.job, r.job);
  ASSERT_EQ(p.nodes.size(), ExpectedNodes(r, m.UpNodes())) << r.job;
  ASSERT_TRUE(std::is_sorted(p.nodes.begin(), p.nodes.end()));
  ASSERT_EQ(std::set<NodeId>(p.nodes.begin(), p.nodes.end()).size(), p.nodes.size());
  for (NodeId n : p.nodes) ASSERT_TRUE(m.IsUp(n)) << "job " << r.job << " on down node " << n;
  ASSERT_EQ(p.rank_nodes.size(), r.ntasks);
  // Block order: consecutive ranks share a node, nodes in ascending order.
  ASSERT_TRUE(std::is_sorted(p.rank_nodes.begin(), p.rank_nodes.end())) << r.job;
  std::vector<uint32_t> per_node(p.nodes.size(), 0);
  for (NodeId n : p.rank_nodes) {
    auto it = std::find(p.nodes.begin(), p.nodes.end(), n);
    ASSERT_NE(it, p.nodes.end()) << "job " << r.job << " has a rank on foreign node " << n;
    ++per_node[static_cast<size_t>(it - p.nodes.begin())];
  }
  for (size_t i = 0; i < per_node.size(); ++i) {
    ASSERT_GE(per_node[i], 1u) << "job " << r.job << " node " << p.nodes[i] << " has no rank";
    if (r.ranks_per_node > 0) {
      if (i + 1 < per_node.size()) {
        ASSERT_EQ(per_node[i], r.ranks_per_node);
      }
      ASSERT_LE(per_node[i], r.ranks_per_node);
    } else {
      ASSERT_LE(per_node[0] - per_node[i], 1u);
      if (i > 0) {
        ASSERT_LE(per_node[i], per_node[i - 1]);
      }
    }
  }
}

JobRequest RandomJob(std::mt19937& rng, JobId id, uint32_t cluster_nodes) {
  auto uni = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  JobRequest r;
  r.job = id;
  r.ntasks = uni(1, 2 * cluster_nodes);
  switch (uni(0, 3)) {
    case 0:
      break;  // -N chosen.
    case 1:
      r.nodes = uni(1, std::min(r.ntasks, cluster_nodes + 1));  // May be too many.
      break;
    case 2:
      r.ranks_per_node = uni(1, 4);
      break;
    default:
      r.nodes = uni(1, std::min(r.ntasks, cluster_nodes));
      r.ranks_per_node = uni(1, 4);  // Often invalid with this -N.
      break;
  }
  r.time_limit_ms = uni(0, 2) == 0 ? 0 : uni(1, 400);
  return r;
}

class GangPropertyTest : public testing::TestWithParam<uint32_t> {};

TEST_P(GangPropertyTest, RandomSubmitsAndRemovesKeepTheInvariants) {
  std::mt19937 rng(GetParam());
  auto uni = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  const uint32_t cluster = uni(3, 12);
  GangMatrix m = Cluster(cluster, uni(1, 3));
  JobQueue q;
  std::map<JobId, JobRequest> requests;
  std::map<JobId, Placement> running;  // What the test has seen placed.
  std::map<JobId, int64_t> ends;
  std::vector<JobId> order;  // Submission order of the jobs still queued.
  JobId next_id = 1;
  int64_t now = 0;
  int backfills = 0;

  for (int step = 0; step < 600; ++step) {
    now += uni(0, 20);
    switch (uni(0, 9)) {
      case 0:
      case 1:
      case 2:
      case 3: {  // Submit.
        JobRequest r = RandomJob(rng, next_id++, cluster);
        requests[r.job] = r;
        q.Push(r);
        order.push_back(r.job);
        break;
      }
      case 4:
      case 5:
      case 6: {  // A running job ends.
        if (running.empty()) break;
        auto it = std::next(running.begin(), uni(0, static_cast<uint32_t>(running.size() - 1)));
        m.Remove(it->first);
        ends.erase(it->first);
        running.erase(it);
        break;
      }
      case 7: {  // A queued job is killed.
        if (order.empty()) break;
        size_t i = uni(0, static_cast<uint32_t>(order.size() - 1));
        ASSERT_TRUE(q.Remove(order[i]));
        order.erase(order.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      case 8: {  // A node goes down or comes back.
        m.SetNode(uni(0, cluster - 1), uni(0, 2) != 0);
        break;
      }
      default:
        break;
    }

    // Schedule, and keep what is needed to judge the backfill.
    const GangMatrix before = m;
    const std::map<JobId, int64_t> ends_before = ends;
    const std::vector<JobId> queued_before = q.Ids();
    ASSERT_EQ(queued_before, order);
    auto started = q.Schedule(m, now, ends);
    for (const Placement& p : started) {
      const JobRequest& r = requests.at(p.job);
      CheckPlacement(r, p, m);
      ASSERT_FALSE(running.contains(p.job));
      running[p.job] = p;
      if (r.time_limit_ms > 0) ends[p.job] = now + r.time_limit_ms;
    }

    // The queue keeps FCFS order minus what started.
    std::set<JobId> started_ids;
    for (const Placement& p : started) started_ids.insert(p.job);
    std::erase_if(order, [&](JobId j) { return started_ids.contains(j); });
    ASSERT_EQ(q.Ids(), order);

    // No cell is held twice, every running job holds exactly its cells, and At agrees.
    std::map<std::pair<uint32_t, NodeId>, JobId> cells;
    for (const auto& [job, p] : running) {
      ASSERT_EQ(*m.Find(job), p);
      for (NodeId n : p.nodes) {
        ASSERT_TRUE(cells.emplace(std::pair(p.row, n), job).second)
            << "cell (" << p.row << ", " << n << ") held twice\n"
            << m.ToString();
        ASSERT_EQ(m.At(p.row, n), job);
      }
    }
    ASSERT_EQ(m.size(), running.size());
    for (uint32_t row = 0; row < m.mpl(); ++row) {
      for (NodeId n : m.Nodes()) {
        auto it = cells.find({row, n});
        ASSERT_EQ(m.At(row, n), it == cells.end() ? JobId{0} : it->second);
      }
    }

    // The head, if any, really does not fit now; everything ahead of it is ineligible.
    const JobRequest* head = q.Head(m);
    if (head == nullptr) continue;
    GangMatrix probe = m;
    ASSERT_FALSE(probe.TryPlace(*head)) << "head " << head->job << " fits but did not start";
    const auto head_pos = std::find(queued_before.begin(), queued_before.end(), head->job);
    ASSERT_NE(head_pos, queued_before.end());
    for (auto it = queued_before.begin(); it != head_pos; ++it) {
      if (!started_ids.contains(*it)) {
        ASSERT_FALSE(m.Check(requests.at(*it)).ok());
      }
    }

    // The jobs that started behind the head are backfill: they must not delay its
    // reservation computed without them.
    GangMatrix fcfs = before;
    std::map<JobId, int64_t> fcfs_ends = ends_before;
    std::vector<Placement> backfilled;
    for (const Placement& p : started) {
      if (std::find(queued_before.begin(), head_pos, p.job) != head_pos) {
        ASSERT_TRUE(fcfs.Restore(p).ok());
        if (requests.at(p.job).time_limit_ms > 0) fcfs_ends[p.job] = ends.at(p.job);
      } else {
        backfilled.push_back(p);
      }
    }
    auto promised = fcfs.Reserve(*head, now, fcfs_ends);
    auto actual = m.Reserve(*head, now, ends);
    ASSERT_TRUE(promised && actual);
    ASSERT_LE(actual->start_ms, promised->start_ms) << "backfill delayed head " << head->job;
    for (const Placement& p : backfilled) {
      ++backfills;
      const JobRequest& r = requests.at(p.job);
      bool ends_in_time = promised->start_ms != kUnknownTime && r.time_limit_ms > 0 &&
                          now + r.time_limit_ms <= promised->start_ms;
      if (ends_in_time || p.row != promised->row) continue;
      for (NodeId n : p.nodes) {
        ASSERT_FALSE(std::binary_search(promised->nodes.begin(), promised->nodes.end(), n))
            << "job " << p.job << " took reserved node " << n << " of head " << head->job;
      }
    }
  }
  // The seeds are chosen so that the run exercises backfill at all.
  EXPECT_GT(backfills, 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, GangPropertyTest, testing::Range(1u, 21u));

// An event-driven simulation on a fixed cluster: jobs arrive, run for at most their time limit
// (jobs without a limit run for a while the scheduler does not know), and end. The EASY promise:
// once the head has a known reserved start, it starts no later than that, however much is
// backfilled meanwhile.
class EasyGuaranteeTest : public testing::TestWithParam<uint32_t> {};

TEST_P(EasyGuaranteeTest, TheHeadStartsByItsFirstKnownReservation) {
  std::mt19937 rng(GetParam());
  auto uni = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  const uint32_t cluster = uni(4, 10);
  GangMatrix m = Cluster(cluster, uni(1, 2));
  struct Sim {
    JobRequest req;
    int64_t arrival = 0;
    int64_t runtime = 0;
    int64_t start = -1;
  };
  std::vector<Sim> jobs;
  int64_t t = 0;
  for (JobId id = 1; id <= 150; ++id) {
    t += uni(0, 30);
    Sim s;
    do {
      s.req = RandomJob(rng, id, cluster);
    } while (!m.Check(s.req).ok());
    s.arrival = t;
    s.runtime =
        s.req.time_limit_ms > 0 ? uni(1, static_cast<uint32_t>(s.req.time_limit_ms)) : uni(1, 400);
    if (s.req.time_limit_ms > 0 && uni(0, 1) == 0) s.runtime = s.req.time_limit_ms;
    jobs.push_back(s);
  }

  JobQueue q;
  std::map<JobId, int64_t> ends;
  std::map<JobId, int64_t> promised;
  size_t arrived = 0;
  int64_t now = 0;
  int backfilled = 0;
  for (int iter = 0; iter < 100000; ++iter) {
    for (Sim& s : jobs) {
      if (s.start >= 0 && m.Has(s.req.job) && s.start + s.runtime <= now) {
        m.Remove(s.req.job);
        ends.erase(s.req.job);
      }
    }
    while (arrived < jobs.size() && jobs[arrived].arrival <= now) q.Push(jobs[arrived++].req);

    const JobRequest* head_before = q.Head(m);
    const JobId head_id = head_before ? head_before->job : 0;
    for (const Placement& p : q.Schedule(m, now, ends)) {
      Sim& s = jobs[p.job - 1];
      s.start = now;
      if (s.req.time_limit_ms > 0) ends[p.job] = now + s.req.time_limit_ms;
      auto it = promised.find(p.job);
      if (it != promised.end()) {
        ASSERT_LE(now, it->second) << "job " << p.job << " started after its reservation";
      }
      if (head_id != 0 && p.job != head_id && !m.Has(head_id)) ++backfilled;
    }
    if (const JobRequest* head = q.Head(m)) {
      auto res = m.Reserve(*head, now, ends);
      ASSERT_TRUE(res);
      ASSERT_GT(res->start_ms, now);
      auto it = promised.find(head->job);
      if (it != promised.end()) {
        ASSERT_LE(res->start_ms, it->second) << "reservation of job " << head->job << " slipped";
      } else if (res->start_ms != kUnknownTime) {
        promised[head->job] = res->start_ms;
      }
    }

    int64_t next = kUnknownTime;
    if (arrived < jobs.size()) next = jobs[arrived].arrival;
    for (const Sim& s : jobs) {
      if (s.start >= 0 && m.Has(s.req.job)) next = std::min(next, s.start + s.runtime);
    }
    if (next == kUnknownTime) {
      ASSERT_EQ(q.size(), 0u) << "queued jobs but nothing running or arriving";
      break;
    }
    now = next;
  }
  for (const Sim& s : jobs) EXPECT_GE(s.start, s.arrival) << "job " << s.req.job << " never ran";
  EXPECT_GT(backfilled, 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, EasyGuaranteeTest, testing::Range(1u, 11u));

}  // namespace
}  // namespace gos::coordinator
