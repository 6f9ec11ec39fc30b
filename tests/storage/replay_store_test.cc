#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gos/storage/replay.h"
#include "gos/storage/tables.h"
#include "tests/support/chunk_test_util.h"

namespace gos::storage {
namespace {

using testing::TempDir;

std::span<const uint8_t> B(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::unique_ptr<Tables> OpenTables(const TempDir& dir) {
  StatusOr<std::unique_ptr<Tables>> t = Tables::Open(dir.Sub("db"));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<std::string> ReadOrDie(ReplayStore* s, uint64_t job, uint32_t stream) {
  StatusOr<std::vector<std::string>> r = s->Read(job, stream);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<std::string>();
}

TEST(ReplayStore, AppendsReadBackInOrderPerStream) {
  TempDir dir;
  std::unique_ptr<Tables> t = OpenTables(dir);
  ASSERT_NE(t, nullptr);
  ReplayStore* s = t->replay();
  // Interleaved jobs and streams, including the extremes of both key fields.
  const std::vector<std::pair<uint64_t, uint32_t>> ids = {
      {7, 0}, {7, 1}, {7, 0x40000000}, {8, 0}, {0, 0}, {~uint64_t{0}, ~0u}, {7, 0xffffffffu}};
  for (int i = 0; i < 300; ++i) {
    for (const auto& [job, stream] : ids) {
      const std::string seg = std::to_string(job) + "/" + std::to_string(stream) + "#" +
                              std::to_string(i) + std::string(static_cast<size_t>(i % 5), 'x');
      ASSERT_TRUE(s->Append(job, stream, B(seg)).ok());
    }
  }
  ASSERT_TRUE(s->Sync().ok());
  for (const auto& [job, stream] : ids) {
    std::vector<std::string> segs = ReadOrDie(s, job, stream);
    ASSERT_EQ(segs.size(), 300u);
    for (int i = 0; i < 300; ++i) {
      EXPECT_EQ(segs[i], std::to_string(job) + "/" + std::to_string(stream) + "#" +
                             std::to_string(i) + std::string(static_cast<size_t>(i % 5), 'x'));
    }
  }
  StatusOr<std::vector<uint32_t>> streams = s->Streams(7);
  ASSERT_TRUE(streams.ok());
  EXPECT_EQ(*streams, (std::vector<uint32_t>{0, 1, 0x40000000, 0xffffffffu}));
  streams = s->Streams(~uint64_t{0});
  ASSERT_TRUE(streams.ok());
  EXPECT_EQ(*streams, (std::vector<uint32_t>{~0u}));
  streams = s->Streams(9);
  ASSERT_TRUE(streams.ok());
  EXPECT_TRUE(streams->empty());
  EXPECT_TRUE(ReadOrDie(s, 9, 0).empty());
  EXPECT_TRUE(ReadOrDie(s, 7, 2).empty());
}

TEST(ReplayStore, StatsAndJobsCountStoredBytes) {
  TempDir dir;
  std::unique_ptr<Tables> t = OpenTables(dir);
  ASSERT_NE(t, nullptr);
  ReplayStore* s = t->replay();
  ASSERT_TRUE(s->Append(3, 0, B("aaaa")).ok());
  ASSERT_TRUE(s->Append(3, 0, B("bb")).ok());
  ASSERT_TRUE(s->Append(3, 2, B("ccccccc")).ok());
  ASSERT_TRUE(s->Append(5, 1, B("d")).ok());
  ASSERT_TRUE(s->Append(5, 1, B("")).ok());
  StatusOr<std::map<uint32_t, ReplayStreamStats>> st = s->Stats(3);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->size(), 2u);
  EXPECT_EQ((*st)[0].segments, 2u);
  EXPECT_EQ((*st)[0].bytes, 6u);
  EXPECT_EQ((*st)[2].segments, 1u);
  EXPECT_EQ((*st)[2].bytes, 7u);
  st = s->Stats(5);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ((*st)[1].segments, 2u);
  EXPECT_EQ((*st)[1].bytes, 1u);
  st = s->Stats(4);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->empty());
  StatusOr<std::map<uint64_t, uint64_t>> jobs = s->Jobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(*jobs, (std::map<uint64_t, uint64_t>{{3, 13}, {5, 1}}));
}

TEST(ReplayStore, DeleteJobRemovesOnlyThatJobAndRestartsItsNumbering) {
  TempDir dir;
  std::unique_ptr<Tables> t = OpenTables(dir);
  ASSERT_NE(t, nullptr);
  ReplayStore* s = t->replay();
  for (uint64_t job : {1, 2, 3}) {
    for (uint32_t stream : {0u, 1u}) ASSERT_TRUE(s->Append(job, stream, B("seg")).ok());
  }
  ASSERT_TRUE(s->DeleteJob(2).ok());
  ASSERT_TRUE(s->DeleteJob(99).ok());  // no log: nothing to do
  StatusOr<std::map<uint64_t, uint64_t>> jobs = s->Jobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(*jobs, (std::map<uint64_t, uint64_t>{{1, 6}, {3, 6}}));
  EXPECT_TRUE(ReadOrDie(s, 2, 0).empty());
  EXPECT_EQ(ReadOrDie(s, 1, 1).size(), 1u);
  EXPECT_EQ(ReadOrDie(s, 3, 0).size(), 1u);
  // A new log for the job starts over (Read would report a hole otherwise).
  ASSERT_TRUE(s->Append(2, 0, B("new")).ok());
  EXPECT_EQ(ReadOrDie(s, 2, 0), (std::vector<std::string>{"new"}));
}

TEST(ReplayStore, PruneKeepsTheNewestLogsAndThoseInUse) {
  TempDir dir;
  std::unique_ptr<Tables> t = OpenTables(dir);
  ASSERT_NE(t, nullptr);
  ReplayStore* s = t->replay();
  // Jobs 1..6 (job 3 has two streams and several segments), and the largest id.
  for (uint64_t job : {1, 2, 3, 4, 5, 6}) {
    ASSERT_TRUE(s->Append(job, 0, B("j" + std::to_string(job))).ok());
  }
  ASSERT_TRUE(s->Append(3, 0, B("more")).ok());
  ASSERT_TRUE(s->Append(3, 0x20000000, B("stdin")).ok());
  StatusOr<std::vector<uint64_t>> ids = s->JobIds();
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));

  // Keep 2 besides job 2 (in use): 6 and 5 stay, 4, 3 and 1 go.
  StatusOr<PrunedLogs> p = PruneLogs(s, 2, {2});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->jobs, (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(p->bytes, 2u + 2 + 4 + 5 + 2);  // "j1", "j3" "more" "stdin", "j4"
  ids = s->JobIds();
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<uint64_t>{2, 5, 6}));
  EXPECT_EQ(ReadOrDie(s, 6, 0), (std::vector<std::string>{"j6"}));

  // keep 0 keeps everything; keeping more than there are removes nothing.
  p = PruneLogs(s, 0, {});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->jobs.empty());
  p = PruneLogs(s, 5, {});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->jobs.empty());
  ASSERT_TRUE(s->Append(~uint64_t{0}, 0, B("last")).ok());
  ids = s->JobIds();
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<uint64_t>{2, 5, 6, ~uint64_t{0}}));
}

TEST(ReplayStore, ReopenContinuesAfterTheLastSegment) {
  TempDir dir;
  {
    std::unique_ptr<Tables> t = OpenTables(dir);
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->replay()->Append(4, 1, B("one")).ok());
    ASSERT_TRUE(t->replay()->Append(4, 1, B("two")).ok());
    ASSERT_TRUE(t->replay()->Append(4, 2, B("other")).ok());
    ASSERT_TRUE(t->replay()->Sync().ok());
  }
  std::unique_ptr<Tables> t = OpenTables(dir);
  ASSERT_NE(t, nullptr);
  ReplayStore* s = t->replay();
  EXPECT_EQ(ReadOrDie(s, 4, 1), (std::vector<std::string>{"one", "two"}));
  ASSERT_TRUE(s->Append(4, 1, B("three")).ok());
  EXPECT_EQ(ReadOrDie(s, 4, 1), (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(ReadOrDie(s, 4, 2), (std::vector<std::string>{"other"}));
  // The job table shares the database and is unaffected.
  StatusOr<std::vector<JobRecord>> list = t->ListJobs();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

// A restart cuts several streams at once: each keeps its head, loses its tail and gets the new
// tail; other streams and jobs are untouched, and appends go on after the new tail.
TEST(ReplayStore, CutReplacesStreamTailsAtOnce) {
  TempDir dir;
  std::unique_ptr<Tables> t = OpenTables(dir);
  ASSERT_NE(t, nullptr);
  ReplayStore* s = t->replay();
  for (const char* seg : {"a0", "a1", "a2", "a3"}) ASSERT_TRUE(s->Append(6, 0, B(seg)).ok());
  for (const char* seg : {"b0", "b1"}) ASSERT_TRUE(s->Append(6, 1, B(seg)).ok());
  for (const char* seg : {"c0", "c1"}) ASSERT_TRUE(s->Append(6, 2, B(seg)).ok());
  ASSERT_TRUE(s->Append(6, 0x20000000, B("stdin")).ok());
  ASSERT_TRUE(s->Append(7, 0, B("other job")).ok());
  // The last stream id: its end key must not spill into the next job.
  ASSERT_TRUE(s->Append(6, ~0u, B("z0")).ok());
  ASSERT_TRUE(s->Append(7, ~0u, B("z7")).ok());

  const std::vector<ReplayStreamCut> cuts = {
      {0, 1, {"A1 cut"}},  // inside: keeps a0, replaces a1.. with one segment
      {1, 2, {}},          // at its end: nothing changes
      {2, 0, {}},          // everything goes
      {3, 0, {"d0"}},      // a stream that had no segment gets one
      {~0u, 0, {}},
  };
  ASSERT_TRUE(s->Cut(6, cuts).ok());
  EXPECT_EQ(ReadOrDie(s, 6, 0), (std::vector<std::string>{"a0", "A1 cut"}));
  EXPECT_EQ(ReadOrDie(s, 6, 1), (std::vector<std::string>{"b0", "b1"}));
  EXPECT_TRUE(ReadOrDie(s, 6, 2).empty());
  EXPECT_EQ(ReadOrDie(s, 6, 3), (std::vector<std::string>{"d0"}));
  EXPECT_TRUE(ReadOrDie(s, 6, ~0u).empty());
  EXPECT_EQ(ReadOrDie(s, 6, 0x20000000), (std::vector<std::string>{"stdin"}));
  EXPECT_EQ(ReadOrDie(s, 7, 0), (std::vector<std::string>{"other job"}));
  EXPECT_EQ(ReadOrDie(s, 7, ~0u), (std::vector<std::string>{"z7"}));
  // The restored run's segments come after the cut.
  ASSERT_TRUE(s->Append(6, 0, B("a-new")).ok());
  ASSERT_TRUE(s->Append(6, 2, B("c-new")).ok());
  EXPECT_EQ(ReadOrDie(s, 6, 0), (std::vector<std::string>{"a0", "A1 cut", "a-new"}));
  EXPECT_EQ(ReadOrDie(s, 6, 2), (std::vector<std::string>{"c-new"}));

  // Past a stream's end would leave a hole: refused, and nothing of the batch is applied.
  const std::vector<ReplayStreamCut> bad = {{0, 0, {"x"}}, {1, 3, {}}};
  Status st = s->Cut(6, bad);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(ReadOrDie(s, 6, 0), (std::vector<std::string>{"a0", "A1 cut", "a-new"}));
}

// The cut is one synced write: after a reopen the log is the cut one.
TEST(ReplayStore, CutSurvivesAReopen) {
  TempDir dir;
  {
    std::unique_ptr<Tables> t = OpenTables(dir);
    ASSERT_NE(t, nullptr);
    for (const char* seg : {"s0", "s1", "s2"}) ASSERT_TRUE(t->replay()->Append(2, 0, B(seg)).ok());
    const std::vector<ReplayStreamCut> cuts = {{0, 1, {"S1"}}};
    ASSERT_TRUE(t->replay()->Cut(2, cuts).ok());
  }
  std::unique_ptr<Tables> t = OpenTables(dir);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(ReadOrDie(t->replay(), 2, 0), (std::vector<std::string>{"s0", "S1"}));
  ASSERT_TRUE(t->replay()->Append(2, 0, B("s2'")).ok());
  EXPECT_EQ(ReadOrDie(t->replay(), 2, 0), (std::vector<std::string>{"s0", "S1", "s2'"}));
}

}  // namespace
}  // namespace gos::storage
