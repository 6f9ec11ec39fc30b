#include "gos/round_trace.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.h"

namespace gos::round_trace {
namespace {

std::vector<std::string> TraceFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RoundTraceTest, OffUnlessStarted) {
  EXPECT_FALSE(On());
  Note(Hop::kRankPost, 1, 2, 3, 4);  // does nothing, and must not crash
  ::unsetenv("GOS_ROUND_TRACE");
  Start({Role::kRank, 0, 0, 1});
  EXPECT_FALSE(On());
}

TEST(RoundTraceTest, ConcurrentAppendsAllLand) {
  testing::TempDir dir("gos-round-trace-test");
  auto r = Recorder::Open(dir.path(), {Role::kNodeAgent, 3, -1, 0});
  ASSERT_NE(r, nullptr);
  constexpr int kThreads = 4, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) r->Append(Hop::kAgentMoved, i, 7, 3, t);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<Record> recs = r->Records();
  ASSERT_EQ(recs.size(), size_t{kThreads} * kEach);
  EXPECT_EQ(r->dropped(), 0u);
  // Each thread's records are whole and in its own order.
  std::vector<uint64_t> next(kThreads, 0), last_t(kThreads, 0);
  for (const Record& x : recs) {
    ASSERT_GE(x.rank, 0);
    ASSERT_LT(x.rank, kThreads);
    EXPECT_EQ(x.hop, static_cast<uint16_t>(Hop::kAgentMoved));
    EXPECT_EQ(x.job, 7u);
    EXPECT_EQ(x.node, 3u);
    EXPECT_EQ(x.round, next[x.rank]++);
    EXPECT_GE(x.t_ns, last_t[x.rank]);
    last_t[x.rank] = x.t_ns;
  }
}

TEST(RoundTraceTest, FullBufferDropsAndCountsThenFileRoundTrips) {
  testing::TempDir dir("gos-round-trace-test");
  auto r = Recorder::Open(dir.path(), {Role::kRank, 2, 5, 42}, 10);
  ASSERT_NE(r, nullptr);
  const uint64_t before = NowNs();
  for (int i = 0; i < 15; ++i) r->Append(Hop::kRankBlock, 100 + i, 42, 2, 5);
  EXPECT_EQ(r->dropped(), 5u);
  ASSERT_TRUE(r->Flush());
  std::vector<std::string> files = TraceFiles(dir.path());
  ASSERT_EQ(files.size(), 1u);  // no .tmp left
  EXPECT_EQ(files[0], r->path());
  EXPECT_NE(files[0].find("/rank-j42r5-"), std::string::npos) << files[0];
  EXPECT_NE(files[0].find(".gosrt"), std::string::npos);
  File f;
  ASSERT_TRUE(ReadFile(files[0], &f));
  EXPECT_EQ(f.header.magic, kMagic);
  EXPECT_EQ(f.header.version, kVersion);
  EXPECT_EQ(f.header.record_bytes, sizeof(Record));
  EXPECT_EQ(f.header.role, static_cast<uint32_t>(Role::kRank));
  EXPECT_EQ(f.header.node, 2u);
  EXPECT_EQ(f.header.rank, 5);
  EXPECT_EQ(f.header.job, 42u);
  EXPECT_EQ(f.header.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(f.header.count, 10u);
  EXPECT_EQ(f.header.dropped, 5u);
  EXPECT_EQ(f.header.clock, 1u);
  EXPECT_LE(f.header.t0_ns, before);
  ASSERT_EQ(f.records.size(), 10u);
  for (size_t i = 0; i < f.records.size(); ++i) {
    EXPECT_EQ(f.records[i].round, 100 + i);
    EXPECT_EQ(f.records[i].hop, static_cast<uint16_t>(Hop::kRankBlock));
    EXPECT_GE(f.records[i].t_ns, before);
  }
}

TEST(RoundTraceTest, NotATraceFile) {
  testing::TempDir dir("gos-round-trace-test");
  const std::string path = dir.path() + "/junk.gosrt";
  FILE* f = fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  fputs("this is not a round trace, but it is longer than a header of sixty-four bytes", f);
  fclose(f);
  File got;
  EXPECT_FALSE(ReadFile(path, &got));
  EXPECT_FALSE(ReadFile(dir.path() + "/missing.gosrt", &got));
}

// Start reads $GOS_ROUND_TRACE and writes at exit; a child forked from a traced process that
// exits writes nothing of its parent's. Run in a child, so that this process stays untraced.
TEST(RoundTraceTest, StartWritesAtExitOnceAndNotFromForkedChildren) {
  testing::TempDir dir("gos-round-trace-test");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("GOS_ROUND_TRACE", dir.path().c_str(), 1);
    Start({Role::kCoordinator, 0, -1, 0});
    if (!On()) _exit(10);
    Note(Hop::kCoordSend, 9, 0, 0);
    pid_t grandchild = fork();
    if (grandchild == 0) {
      Note(Hop::kCoordSent, 9, 0, 0);
      exit(0);  // runs the inherited atexit handler: must not write
    }
    int st = 0;
    waitpid(grandchild, &st, 0);
    Note(Hop::kCoordConfirmed, 9, 0, 0);
    exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  std::vector<std::string> files = TraceFiles(dir.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].find("/coordinator-c-" + std::to_string(pid) + "-"), std::string::npos)
      << files[0];
  File f;
  ASSERT_TRUE(ReadFile(files[0], &f));
  ASSERT_EQ(f.records.size(), 2u);
  EXPECT_EQ(f.records[0].hop, static_cast<uint16_t>(Hop::kCoordSend));
  EXPECT_EQ(f.records[1].hop, static_cast<uint16_t>(Hop::kCoordConfirmed));
  EXPECT_EQ(f.records[0].rank, -1);
  EXPECT_LE(f.records[0].t_ns, f.records[1].t_ns);
}

}  // namespace
}  // namespace gos::round_trace
