#include "gos/replay/trace.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace gos::replay {
namespace {

DescKey Key(bcs::Op op, int32_t peer, int32_t tag = 5, uint64_t len = 32) {
  DescKey k;
  k.op = static_cast<uint32_t>(op);
  k.peer = peer;
  k.tag = tag;
  k.len = len;
  k.context = 9;
  return k;
}

// Parses the JSON with python3's json module and prints one line per event:
//   M <tid> <name> <args.name>   X <tid> <name> <ts> <dur>   s|f <id> <tid> <ts> <bp>
//   i <tid> <scope> <ts> <name, last>
constexpr char kSummarize[] = R"(
import json, sys
t = json.load(open(sys.argv[1], encoding='utf-8'))
assert t['displayTimeUnit'] == 'ms'
for e in t['traceEvents']:
    ph = e['ph']
    if ph == 'M':
        print('M', e['tid'], e['name'], json.dumps(e['args'].get('name', '')))
    elif ph == 'X':
        print('X', e['tid'], e['name'], e['ts'], e['dur'])
    elif ph in ('s', 'f'):
        print(ph, e['id'], e['tid'], e['ts'], e.get('bp', '-'))
    elif ph == 'i':
        print('i', e['tid'], e['s'], e['ts'], json.dumps(e['name']))
    else:
        sys.exit('unexpected phase ' + ph)
)";

struct X {
  uint32_t tid;
  std::string name;
  int64_t ts, dur;
};
struct Flow {
  uint32_t tid;
  int64_t ts;
  std::string bp;
};
struct Summary {
  std::map<uint32_t, std::string> lanes;
  std::string process;
  std::vector<X> xs;
  std::map<int64_t, Flow> starts, finishes;
  std::vector<std::string> instants;  // "<tid> <scope> <ts> <json name>"
};

Summary Summarize(const std::string& json) {
  const gos::testing::TempDir dir("gos-trace-test");
  const std::string trace = dir.Sub("trace.json"), script = dir.Sub("summarize.py"),
                    out = dir.Sub("out.txt");
  std::ofstream(trace) << json;
  std::ofstream(script) << kSummarize;
  const int rc = std::system(("python3 " + script + " " + trace + " > " + out).c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "python3 could not load:\n" << json;
  Summary s;
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string ph;
    l >> ph;
    if (ph == "M") {
      uint32_t tid;
      std::string name, arg;
      l >> tid >> name;
      std::getline(l, arg);
      arg = arg.substr(1);
      if (name == "process_name") s.process = arg;
      if (name == "thread_name") s.lanes[tid] = arg;
    } else if (ph == "X") {
      X x;
      l >> x.tid >> x.name >> x.ts >> x.dur;
      s.xs.push_back(x);
    } else if (ph == "s" || ph == "f") {
      int64_t id;
      Flow f;
      l >> id >> f.tid >> f.ts >> f.bp;
      auto& m = ph == "s" ? s.starts : s.finishes;
      EXPECT_FALSE(m.count(id)) << "flow id " << id << " used twice";
      m[id] = f;
    } else if (ph == "i") {
      std::string rest;
      std::getline(l, rest);
      s.instants.push_back(rest.substr(1));
    }
  }
  return s;
}

// 3 ranks: a ring of sends (0->1->2->0), rank 1 and 2 receive from named sources, rank 0
// with MPI_ANY_SOURCE; a checkpoint holds the job for two strobes; rank 1 then fails.
JobLog RingLog() {
  JobLog log;
  log.world_size = 3;
  const int64_t t = 1700000000000000;
  Step s0{10, t, {1, 2, 1}, {}};
  s0.descs = {Key(bcs::Op::kSend, 1), Key(bcs::Op::kSend, 2), Key(bcs::Op::kRecv, 0),
              Key(bcs::Op::kSend, 0)};
  Step s1{11, t + 1000, {1, 0, 1}, {}};
  s1.descs = {Key(bcs::Op::kRecv, bcs::kAnySource, bcs::kAnyTag), Key(bcs::Op::kRecv, 1)};
  Step s2{14, t + 4000, {0, 0, 0}, {}};  // held 2 strobes for the checkpoint
  Step s3{15, t + 5000, {0, 0, 0}, {}};
  log.steps = {s0, s1, s2, s3};
  log.checkpoints = {{1, 2, 12, t + 1500}};
  log.end = End{EndKind::kFailed, 134, 1, 4, t + 5600, "rank 1 said \"bye\"\n\xff"};
  return log;
}

TEST(ExportTrace, LanesSlicesFlowsAndInstants) {
  const JobLog log = RingLog();
  TraceInput in;
  in.job = 42;
  in.log = &log;
  in.rank_node = {7, 7, 8};
  in.blocked_us = {{0, 300, 0, 200}, {0, 5000, 900}, {}};  // rank 1's 5000 is clamped
  in.divergence = TraceDivergence{15, 2, "recv from rank 0 instead of send"};
  StatusOr<std::string> json = ExportTrace(in);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  Summary s = Summarize(*json);

  EXPECT_EQ(s.process, "\"job 42\"");
  ASSERT_EQ(s.lanes.size(), 3u);
  EXPECT_EQ(s.lanes[0], "\"rank 0 (node 7)\"");
  EXPECT_EQ(s.lanes[2], "\"rank 2 (node 8)\"");

  // Per lane, slices tile [0, end) without gaps or overlaps.
  std::map<uint32_t, std::vector<X>> lane;
  for (const X& x : s.xs) lane[x.tid].push_back(x);
  ASSERT_EQ(lane.size(), 3u);
  for (auto& [tid, xs] : lane) {
    int64_t at = 0;
    for (const X& x : xs) {
      EXPECT_EQ(x.ts, at) << "lane " << tid << " " << x.name;
      EXPECT_GT(x.dur, 0);
      at = x.ts + x.dur;
    }
    EXPECT_EQ(at, 5600) << "lane " << tid;
  }
  auto find = [&](uint32_t tid, const std::string& name, int64_t ts) -> const X* {
    for (const X& x : lane[tid])
      if (x.name == name && x.ts == ts) return &x;
    return nullptr;
  };
  // Rank 0, step 0 -> 1: 1000 us, blocked 300 at the end.
  ASSERT_NE(find(0, "compute", 0), nullptr);
  EXPECT_EQ(find(0, "compute", 0)->dur, 700);
  ASSERT_NE(find(0, "blocked", 700), nullptr);
  EXPECT_EQ(find(0, "blocked", 700)->dur, 300);
  // Rank 1 blocked longer than the interval: the whole interval is blocked.
  ASSERT_NE(find(1, "blocked", 0), nullptr);
  EXPECT_EQ(find(1, "blocked", 0)->dur, 1000);
  // Step 1 -> 2 spans 3 strobes (2 held): 1000 us ran, 2000 us frozen; rank 1 blocked 900.
  ASSERT_NE(find(1, "compute", 1000), nullptr);
  EXPECT_EQ(find(1, "compute", 1000)->dur, 100);
  ASSERT_NE(find(1, "blocked", 1100), nullptr);
  ASSERT_NE(find(1, "frozen", 2000), nullptr);
  EXPECT_EQ(find(1, "frozen", 2000)->dur, 2000);
  ASSERT_NE(find(2, "frozen", 2000), nullptr);
  // Rank 0 with blocked 200 at step 3: compute 800, blocked 200; rank 2 without a timeline.
  ASSERT_NE(find(0, "blocked", 4800), nullptr);
  ASSERT_NE(find(2, "compute", 4000), nullptr);
  EXPECT_EQ(find(2, "compute", 4000)->dur, 1000);

  // Three messages: 0->1 matched at step 0; 2->0 (wildcard) and 1->2 at step 1.
  ASSERT_EQ(s.starts.size(), 3u);
  ASSERT_EQ(s.finishes.size(), 3u);
  std::multiset<std::string> flows;
  for (const auto& [id, st] : s.starts) {
    ASSERT_TRUE(s.finishes.count(id)) << "flow " << id << " has no finish";
    const Flow& f = s.finishes[id];
    EXPECT_EQ(f.bp, "e");
    flows.insert(std::to_string(st.tid) + "@" + std::to_string(st.ts) + "->" +
                 std::to_string(f.tid) + "@" + std::to_string(f.ts));
  }
  EXPECT_EQ(flows, (std::multiset<std::string>{"0@0->1@0", "2@0->0@1000", "1@0->2@1000"}));

  ASSERT_EQ(s.instants.size(), 3u);
  EXPECT_EQ(s.instants[0], "0 g 1500 \"checkpoint 1\"");
  EXPECT_EQ(s.instants[1], "1 g 5600 \"failure: rank 1 said \\\"bye\\\"\\n\\ufffd\"");
  EXPECT_EQ(s.instants[2], "2 g 5000 \"divergence: recv from rank 0 instead of send\"");
}

TEST(ExportTrace, RefusesAnInconsistentLog) {
  JobLog log = RingLog();
  log.steps[1].counts = {1, 1, 1};
  TraceInput in;
  in.log = &log;
  StatusOr<std::string> json = ExportTrace(in);
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), StatusCode::kInvalidArgument);
  in.log = nullptr;
  EXPECT_FALSE(ExportTrace(in).ok());
}

// A restarted job: the restored run's first step gets an instant naming the checkpoint.
TEST(ExportTrace, RestartsAreInstantsWhereTheRestoredRunStarts) {
  JobLog log = RingLog();
  log.end.reset();
  // Restarted from checkpoint 1 (2 steps before it): steps 2 and 3 are the restored run's.
  log.restarts = {{1, 2, 900, 5, 1700000000003000}};
  TraceInput in;
  in.job = 42;
  in.log = &log;
  StatusOr<std::string> json = ExportTrace(in);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  Summary s = Summarize(*json);
  ASSERT_EQ(s.instants.size(), 2u);
  EXPECT_EQ(s.instants[0], "0 g 1500 \"checkpoint 1\"");
  EXPECT_EQ(s.instants[1], "0 g 4000 \"restarted from checkpoint 1\"");
}

TEST(ExportTrace, EmptyLogIsAValidTrace) {
  JobLog log;
  log.world_size = 2;
  TraceInput in;
  in.job = 1;
  in.log = &log;
  StatusOr<std::string> json = ExportTrace(in);
  ASSERT_TRUE(json.ok());
  Summary s = Summarize(*json);
  EXPECT_EQ(s.lanes.size(), 2u);
  EXPECT_EQ(s.lanes[1], "\"rank 1\"");
  EXPECT_TRUE(s.xs.empty());
}

}  // namespace
}  // namespace gos::replay
