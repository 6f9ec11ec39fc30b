// Record and replay of a rank's own decisions (docs/specs/rank-decisions.md): gos_rank against
// the scripted in-process nodeagent (tests/libgos/bcs/scripted_agent.h). The stream is decoded
// here by an independent implementation of the spec; replay files are written by hand or
// taken from a recorded run. Ranks that must sleep forever (divergence, end of the
// recording, abort in replay) run in a forked child that the test kills.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/gos.h"
#include "libgos/bcs/testing.h"
#include "tests/libgos/bcs/scripted_agent.h"

namespace gos::bcs {
namespace {

using namespace std::chrono_literals;
using test_agent::Done;
using test_agent::Eventually;
using test_agent::OpOf;
using test_agent::ScriptedAgent;

// Call kinds of the stream.
constexpr int kTest = 0;
constexpr int kTestany = 1;
constexpr int kWaitany = 2;
constexpr int kIprobe = 3;
constexpr int kWtime = 4;
constexpr int kStart = 7;

struct Ev {
  int call;
  uint64_t value;  // kWtime: the absolute nanoseconds
  friend bool operator==(const Ev&, const Ev&) = default;
};

std::ostream& operator<<(std::ostream& os, const Ev& e) {
  return os << "{" << e.call << ", " << e.value << "}";
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

struct Decoded {
  std::vector<Ev> events;
  size_t records = 0;  // event records (runs count once)
  size_t headers = 0;
  uint64_t base = 0;  // the first header's decision number
  bool ok = true;
};

// The spec's decoder, written from the spec.
Decoded Decode(const std::vector<unsigned char>& b) {
  Decoded d;
  size_t pos = 0;
  auto varint = [&](uint64_t* v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= b.size()) return false;
      const unsigned char c = b[pos++];
      x |= static_cast<uint64_t>(c & 0x7f) << shift;
      if ((c & 0x80) == 0) {
        *v = x;
        return true;
      }
    }
    return false;
  };
  int64_t prev = 0;
  while (pos < b.size()) {
    const unsigned char c = b[pos++];
    const int call = c & 7;
    uint64_t value = c >> 4;
    uint64_t count = 1;
    uint64_t x = 0;
    if (value == 15) {
      if (!varint(&x)) return d.ok = false, d;
      value = 15 + x;
    }
    if ((c & 8) != 0) {
      if (!varint(&x)) return d.ok = false, d;
      count = x + 2;
    }
    if (call == kStart) {
      uint64_t base = 0;
      uint64_t wbase = 0;
      if (value != 1 || count != 1 || !varint(&base) || !varint(&wbase)) return d.ok = false, d;
      if (d.headers++ == 0) d.base = base;
      prev = static_cast<int64_t>((wbase >> 1) ^ (~(wbase & 1) + 1));
      continue;
    }
    ++d.records;
    for (uint64_t i = 0; i < count; ++i) {
      if (call == kWtime) {
        prev += static_cast<int64_t>((value >> 1) ^ (~(value & 1) + 1));
        d.events.push_back({call, static_cast<uint64_t>(prev)});
      } else {
        d.events.push_back({call, value});
      }
    }
  }
  return d;
}

// Builds a stream by hand.
class Stream {
 public:
  explicit Stream(uint64_t base = 0, int64_t wbase = 0) { Header(base, wbase); }
  void Header(uint64_t base, int64_t wbase) {
    bytes_.push_back(0x17);
    Varint(base);
    Varint(ZigZag(wbase));
    prev_ = wbase;
  }
  Stream& Add(int call, uint64_t value, uint64_t count = 1) {
    if (call == kWtime) {
      const int64_t ns = static_cast<int64_t>(value);
      value = ZigZag(ns - prev_);
      prev_ = ns;  // count must be 1 for wtime here
    }
    bytes_.push_back(
        static_cast<unsigned char>(call | (count > 1 ? 8 : 0) | ((value < 15 ? value : 15) << 4)));
    if (value >= 15) Varint(value - 15);
    if (count > 1) Varint(count - 2);
    return *this;
  }
  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<unsigned char>(v | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<unsigned char>(v));
  }
  std::vector<unsigned char> bytes_;
  int64_t prev_ = 0;
};

// Everything the rank produced into the record ring (the test agent never consumes it).
std::vector<unsigned char> RingBytes(ScriptedAgent& agent) {
  const uint64_t head = agent.h()->rec_head.load();
  EXPECT_LE(head, kRecBytes);
  const unsigned char* ring = RecRing(agent.base());
  return std::vector<unsigned char>(ring, ring + head);
}

// A channel whose replay file holds `bytes`; removes the file with the channel.
class ReplayFile {
 public:
  ReplayFile(ScriptedAgent& agent, const std::vector<unsigned char>& bytes)
      : path_(agent.path() + ".replay") {
    FILE* f = fopen(path_.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    fclose(f);
  }
  ~ReplayFile() { unlink(path_.c_str()); }

 private:
  std::string path_;
};

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

// Holds every descriptor; the test completes them when it wants.
struct Holder {
  std::mutex mu;
  std::vector<Descriptor> held;
  void Attach(ScriptedAgent& agent) {
    agent.Start([this](ScriptedAgent&, const Descriptor& d) {
      std::lock_guard lock(mu);
      held.push_back(d);
    });
  }
  Descriptor At(size_t i) {
    EXPECT_TRUE(Eventually(
        [&] {
          std::lock_guard lock(mu);
          return held.size() > i;
        },
        false));
    std::lock_guard lock(mu);
    return held.at(i);
  }
};

// Queues a completion and waits until the agent has published it (without the library
// consuming it), so that the next test/iprobe finds it.
void Publish(ScriptedAgent& agent, const Completion& c) {
  const uint64_t before = agent.h()->compl_head.load();
  agent.Complete(c);
  ASSERT_TRUE(Eventually([&] { return agent.h()->compl_head.load() > before; }, false));
}

class BcsReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::Reset();
    unsetenv("GOS_EAGER_BYTES");
  }
  void TearDown() override { testing::Reset(); }
};

TEST_F(BcsReplayTest, RecordModeLogsEachTimingDecision) {
  Holder holder;  // outlives the agent thread that calls it
  ScriptedAgent agent(0, 2);
  agent.h()->mode = kModeRecord;
  holder.Attach(agent);
  ASSERT_EQ(gos_init(), GOS_OK);
  const gos_comm_t* w = gos_comm_world();
  int a = 0;
  int b = 0;
  int flag = -1;
  int index = -2;

  gos_request_t r = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 1, w, &r), GOS_OK);
  ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);  // test 0
  EXPECT_EQ(flag, 0);
  Publish(agent, Done(holder.At(0), kOk, sizeof a, 1, 1));
  ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);  // test 1
  EXPECT_EQ(flag, 1);

  gos_request_t e = GOS_REQUEST_NULL;  // eager send: complete from the start, no decision
  ASSERT_EQ(gos_isend(&a, sizeof a, 1, 5, w, 0, &e), GOS_OK);
  ASSERT_EQ(gos_test(&e, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 1);
  ASSERT_EQ(gos_test(&e, &flag, nullptr), GOS_OK);  // null request: no decision either
  EXPECT_EQ(testing::DecisionsDone(), 2u);

  gos_request_t reqs[2] = {GOS_REQUEST_NULL, GOS_REQUEST_NULL};
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 2, w, &reqs[1]), GOS_OK);
  ASSERT_EQ(gos_testany(2, reqs, &index, &flag, nullptr), GOS_OK);  // testany none
  EXPECT_EQ(flag, 0);
  Publish(agent, Done(holder.At(2), kOk, sizeof a, 1, 2));
  ASSERT_EQ(gos_testany(2, reqs, &index, &flag, nullptr), GOS_OK);  // testany index 1
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(index, 1);
  ASSERT_EQ(gos_isend(&a, sizeof a, 1, 5, w, 0, &reqs[0]), GOS_OK);
  ASSERT_EQ(gos_testany(2, reqs, &index, &flag, nullptr), GOS_OK);  // eager first: forced
  EXPECT_EQ(index, 0);
  EXPECT_EQ(testing::DecisionsDone(), 4u);

  ASSERT_EQ(gos_iprobe(1, 7, w, &flag, nullptr), GOS_OK);  // posts: no decision
  ASSERT_EQ(gos_iprobe(1, 7, w, &flag, nullptr), GOS_OK);  // iprobe pending
  EXPECT_EQ(flag, 0);
  const Descriptor probe = holder.At(4);
  ASSERT_EQ(OpOf(probe), Op::kProbe);
  Publish(agent, Done(probe, kOk, 4, 1, 7, kComplFound));
  gos_status_t st;
  ASSERT_EQ(gos_iprobe(1, 7, w, &flag, &st), GOS_OK);  // iprobe answered
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(st.len, 4u);

  const double t1 = gos_wtime();
  const double t2 = gos_wtime();

  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 3, w, &reqs[0]), GOS_OK);
  ASSERT_EQ(gos_irecv(&b, sizeof b, 1, 4, w, &reqs[1]), GOS_OK);
  agent.Complete(Done(holder.At(6), kOk, sizeof b, 1, 4));
  ASSERT_EQ(gos_waitany(2, reqs, &index, nullptr), GOS_OK);  // waitany 1
  EXPECT_EQ(index, 1);
  agent.Complete(Done(holder.At(5), kOk, sizeof a, 1, 3));
  ASSERT_EQ(gos_waitany(2, reqs, &index, nullptr), GOS_OK);  // one active: forced
  EXPECT_EQ(index, 0);
  EXPECT_EQ(testing::DecisionsDone(), 9u);
  EXPECT_EQ(agent.h()->events.load(), 9u);

  agent.Complete(Done(holder.At(1)));  // the eager sends, or finalize waits for them
  agent.Complete(Done(holder.At(3)));
  // Nothing is lost at finalize (this one is pending until then), and the bytes are the
  // spec's.
  const double t3 = gos_wtime();
  const uint64_t before = agent.h()->rec_head.load();
  ASSERT_EQ(gos_finalize(), GOS_OK);
  EXPECT_GT(agent.h()->rec_head.load(), before);
  const std::vector<unsigned char> bytes = RingBytes(agent);
  ASSERT_GE(bytes.size(), 7u);
  // Header (version 1, base 0, wtime base 0), test 0, test 1, testany none, testany 1 + 1.
  const std::vector<unsigned char> prefix = {0x17, 0x00, 0x00, 0x00, 0x10, 0x01, 0x21};
  EXPECT_EQ(std::vector<unsigned char>(bytes.begin(), bytes.begin() + 7), prefix);
  const Decoded d = Decode(bytes);
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.headers, 1u);
  const auto ns1 = static_cast<uint64_t>(t1 * 1e9 + 0.5);
  const auto ns2 = static_cast<uint64_t>(t2 * 1e9 + 0.5);
  ASSERT_EQ(d.events.size(), 10u);
  const std::vector<Ev> want = {{kTest, 0},    {kTest, 1},   {kTestany, 0},
                                {kTestany, 2}, {kIprobe, 0}, {kIprobe, 1}};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(d.events[i], want[i]) << i;
  EXPECT_EQ(d.events[6].call, kWtime);
  EXPECT_EQ(d.events[7].call, kWtime);
  // The recorded ns give back exactly the doubles the program saw.
  EXPECT_EQ(Seconds(d.events[6].value), t1);
  EXPECT_EQ(Seconds(d.events[7].value), t2);
  EXPECT_NEAR(static_cast<double>(d.events[6].value), static_cast<double>(ns1), 1e3);
  EXPECT_NEAR(static_cast<double>(d.events[7].value), static_cast<double>(ns2), 1e3);
  EXPECT_EQ(d.events[8], (Ev{kWaitany, 1}));
  EXPECT_EQ(d.events[9].call, kWtime);
  EXPECT_EQ(Seconds(d.events[9].value), t3);
}

TEST_F(BcsReplayTest, RepeatedOutcomesAreRunLengthEncoded) {
  Holder holder;  // outlives the agent thread that calls it
  ScriptedAgent agent(0, 2);
  agent.h()->mode = kModeRecord;
  holder.Attach(agent);
  ASSERT_EQ(gos_init(), GOS_OK);
  int a = 0;
  int flag = 0;
  gos_request_t r = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 1, gos_comm_world(), &r), GOS_OK);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
    ASSERT_EQ(flag, 0);
  }
  // The run is still in the library's memory: nothing has been written.
  EXPECT_EQ(agent.h()->rec_head.load(), 0u);
  EXPECT_EQ(agent.h()->events.load(), 10000u);
  // A new strobe ends a run (the agent has the previous quantum's decisions).
  agent.h()->strobe.store(1);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
  const std::vector<unsigned char> first = {0x17, 0, 0, 0x08, 0x8e, 0x4e};  // test 0 x 10000
  EXPECT_EQ(RingBytes(agent), first);
  Publish(agent, Done(holder.At(0), kOk, sizeof a, 1, 1));
  ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 1);
  ASSERT_EQ(gos_finalize(), GOS_OK);
  const std::vector<unsigned char> bytes = RingBytes(agent);
  EXPECT_LE(bytes.size(), 12u);
  const Decoded d = Decode(bytes);
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.records, 3u);
  ASSERT_EQ(d.events.size(), 10006u);
  for (size_t i = 0; i < 10005; ++i) ASSERT_EQ(d.events[i], (Ev{kTest, 0})) << i;
  EXPECT_EQ(d.events.back(), (Ev{kTest, 1}));
}

TEST_F(BcsReplayTest, BlockingWritesThePendingRunFirstAndCountsBlockedTime) {
  std::mutex mu;
  std::vector<Descriptor> barriers;
  ScriptedAgent agent(0, 2);
  agent.h()->mode = kModeRecord;
  // The barrier completes only once the decisions taken before it are in the ring: a rank
  // that blocked with its run unwritten would wait forever.
  agent.Start(
      [&](ScriptedAgent&, const Descriptor& d) {
        std::lock_guard lock(mu);
        if (OpOf(d) == Op::kBarrier) barriers.push_back(d);
      },
      [&](ScriptedAgent& a) {
        std::lock_guard lock(mu);
        if (barriers.empty() || a.h()->rec_head.load() == 0) return;
        std::this_thread::sleep_for(20ms);
        a.Complete(Done(barriers.front()));
        barriers.clear();
      });
  ASSERT_EQ(gos_init(), GOS_OK);
  for (int i = 0; i < 3; ++i) gos_wtime();
  // Each value differs from the previous one: two are written, the third is pending.
  EXPECT_EQ(Decode(RingBytes(agent)).events.size(), 2u);
  ASSERT_EQ(gos_barrier(gos_comm_world()), GOS_OK);
  const Decoded d = Decode(RingBytes(agent));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.events.size(), 3u);
  EXPECT_GE(agent.h()->blocked_ns.load(), 15'000'000u);
  ASSERT_EQ(gos_finalize(), GOS_OK);
}

TEST_F(BcsReplayTest, ReplayImposesEachRecordedOutcome) {
  Holder holder;  // outlives the agent thread that calls it
  ScriptedAgent agent(0, 2);
  agent.h()->mode = kModeReplay;
  constexpr uint64_t kT1 = 5'000'000'000;
  constexpr uint64_t kT2 = 4'500'000'123;  // a clock may go back after a restore
  Stream rec;
  rec.Add(kTest, 0)
      .Add(kTest, 1)
      .Add(kWtime, kT1)
      .Add(kWtime, kT2)
      .Add(kTestany, 0)
      .Add(kTestany, 2)
      .Add(kIprobe, 0)
      .Add(kIprobe, 1)
      .Add(kWaitany, 0);
  ReplayFile file(agent, rec.bytes());
  holder.Attach(agent);
  ASSERT_EQ(gos_init(), GOS_OK);
  const gos_comm_t* w = gos_comm_world();
  int a = 0;
  int b = 0;
  int flag = -1;
  int index = -2;

  // test recorded 0: flag 0 although the request is done, and it is not reaped.
  gos_request_t r = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 1, w, &r), GOS_OK);
  Publish(agent, Done(holder.At(0), kOk, sizeof a, 1, 1));
  ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_NE(r, GOS_REQUEST_NULL);
  ASSERT_EQ(gos_wait(&r, nullptr), GOS_OK);  // blocking: not a decision

  // test recorded 1: blocks until the completion is published from another thread.
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 2, w, &r), GOS_OK);
  std::atomic<bool> published{false};
  std::thread later([&] {
    const Descriptor d = holder.At(1);
    std::this_thread::sleep_for(50ms);
    published = true;
    agent.Complete(Done(d, kOk, sizeof a, 1, 2));
  });
  const uint64_t blocked_before = agent.h()->blocked_ns.load();
  ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
  EXPECT_TRUE(published);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(r, GOS_REQUEST_NULL);
  later.join();
  EXPECT_GE(agent.h()->blocked_ns.load() - blocked_before, 30'000'000u);

  // wtime: the recorded values, bit for bit.
  EXPECT_EQ(gos_wtime(), Seconds(kT1));
  EXPECT_EQ(gos_wtime(), Seconds(kT2));

  // progress_wait returns at once (nothing to wait for in replay).
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(gos_progress_wait(), GOS_OK);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);

  // testany recorded none although request 0 is done; then index 1 while 0 is still done.
  gos_request_t reqs[2] = {GOS_REQUEST_NULL, GOS_REQUEST_NULL};
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 3, w, &reqs[0]), GOS_OK);
  ASSERT_EQ(gos_irecv(&b, sizeof b, 1, 4, w, &reqs[1]), GOS_OK);
  Publish(agent, Done(holder.At(2), kOk, sizeof a, 1, 3));
  ASSERT_EQ(gos_testany(2, reqs, &index, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(index, GOS_UNDEFINED_INDEX);
  agent.Complete(Done(holder.At(3), kOk, sizeof b, 1, 4));
  ASSERT_EQ(gos_testany(2, reqs, &index, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(index, 1);
  EXPECT_NE(reqs[0], GOS_REQUEST_NULL);

  // iprobe: "pending" although the answer is there (and no new probe is posted); then
  // "answered".
  ASSERT_EQ(gos_iprobe(1, 7, w, &flag, nullptr), GOS_OK);  // posts
  const Descriptor probe = holder.At(4);
  Publish(agent, Done(probe, kOk, 8, 1, 7, kComplFound));
  const uint64_t posted = agent.h()->desc_head.load();
  ASSERT_EQ(gos_iprobe(1, 7, w, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(agent.h()->desc_head.load(), posted);
  gos_status_t st;
  ASSERT_EQ(gos_iprobe(1, 7, w, &flag, &st), GOS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(st.len, 8u);

  // waitany recorded 0 while request 1 is done first.
  ASSERT_EQ(gos_irecv(&b, sizeof b, 1, 5, w, &reqs[1]), GOS_OK);
  Publish(agent, Done(holder.At(5), kOk, sizeof b, 1, 5));
  ASSERT_EQ(gos_waitany(2, reqs, &index, nullptr), GOS_OK);
  EXPECT_EQ(index, 0);

  EXPECT_EQ(testing::DecisionsDone(), 9u);
  EXPECT_EQ(agent.h()->events.load(), 9u);
  EXPECT_EQ(agent.h()->rec_head.load(), 0u);  // replay records nothing
  EXPECT_EQ(agent.h()->state.load(), kStateRunning);
  ASSERT_EQ(gos_wait(&reqs[1], nullptr), GOS_OK);
  ASSERT_EQ(gos_finalize(), GOS_OK);
}

// The same program, recorded, then replayed against an agent with other timing: it sees the
// same outcomes.
TEST_F(BcsReplayTest, RecordedRunReplaysTheSame) {
  auto program = [](ScriptedAgent& agent, Holder& holder, bool complete_early) {
    std::vector<int> flags;
    std::vector<double> times;
    int a = 0;
    int flag = 0;
    gos_request_t r = GOS_REQUEST_NULL;
    EXPECT_EQ(gos_irecv(&a, sizeof a, 1, 1, gos_comm_world(), &r), GOS_OK);
    if (complete_early) Publish(agent, Done(holder.At(0), kOk, sizeof a, 1, 1));
    for (int i = 0; i < 3; ++i) {
      times.push_back(gos_wtime());
      EXPECT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
      flags.push_back(flag);
    }
    if (!complete_early) Publish(agent, Done(holder.At(0), kOk, sizeof a, 1, 1));
    while (r != GOS_REQUEST_NULL) {
      EXPECT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
      flags.push_back(flag);
      times.push_back(gos_wtime());
    }
    EXPECT_EQ(gos_finalize(), GOS_OK);
    return std::make_pair(flags, times);
  };
  std::vector<unsigned char> recording;
  std::pair<std::vector<int>, std::vector<double>> recorded;
  {
    Holder holder;  // outlives the agent thread that calls it
    ScriptedAgent agent(0, 2);
    agent.h()->mode = kModeRecord;
    holder.Attach(agent);
    ASSERT_EQ(gos_init(), GOS_OK);
    recorded = program(agent, holder, false);
    recording = RingBytes(agent);
  }
  EXPECT_EQ(recorded.first.front(), 0);
  testing::Reset();
  Holder holder;  // outlives the agent thread that calls it
  ScriptedAgent agent(0, 2);
  agent.h()->mode = kModeReplay;
  ReplayFile file(agent, recording);
  holder.Attach(agent);
  ASSERT_EQ(gos_init(), GOS_OK);
  const auto replayed = program(agent, holder, true);
  EXPECT_EQ(replayed.first, recorded.first);
  EXPECT_EQ(replayed.second, recorded.second);
}

// A rank checkpointed while recording and restored for replay: the library's memory says how
// many decisions it took; the replay goes on from the next one of the recording.
TEST_F(BcsReplayTest, RestoredForReplaySkipsTheDecisionsAlreadyTaken) {
  constexpr uint64_t kBase = 1'000'000'000;
  Stream rec;
  for (uint64_t i = 0; i < 6; ++i) rec.Add(kWtime, kBase + i * 1000);
  rec.Add(kTest, 0, 4).Add(kWtime, kBase + 9999);
  Holder holder;  // outlives the agent thread that calls it
  ScriptedAgent agent(0, 2);
  agent.h()->mode = kModeRecord;
  ReplayFile file(agent, rec.bytes());
  holder.Attach(agent);
  ASSERT_EQ(gos_init(), GOS_OK);
  int a = 0;
  int flag = 0;
  gos_request_t r = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 1, gos_comm_world(), &r), GOS_OK);
  // The "original" run up to the checkpoint: 4 wtimes (its values are its own).
  for (int i = 0; i < 4; ++i) gos_wtime();
  // ... then frozen, dumped, restored with mode replay. Its pending run is dropped.
  agent.h()->mode = kModeReplay;
  EXPECT_EQ(gos_wtime(), Seconds(kBase + 4000));
  EXPECT_EQ(gos_wtime(), Seconds(kBase + 5000));
  Publish(agent, Done(holder.At(0), kOk, sizeof a, 1, 1));
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
    EXPECT_EQ(flag, 0);  // recorded 0 x 4, although done
  }
  EXPECT_EQ(gos_wtime(), Seconds(kBase + 9999));
  EXPECT_EQ(testing::DecisionsDone(), 11u);
  ASSERT_EQ(gos_wait(&r, nullptr), GOS_OK);
  ASSERT_EQ(gos_finalize(), GOS_OK);
}

// Runs body in a forked child (a rank that will sleep forever), waits until the channel's
// state is `want`, checks the child is still alive (sleeping, not exited), kills it.
void RunSleepingRank(ScriptedAgent& agent, const std::function<void()>& body, RankState want) {
  fflush(nullptr);  // or the child's exit path would print the parent's buffered output again
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    body();
    _exit(99);  // the rank should never get here
  }
  const bool reached =
      Eventually([&] { return agent.h()->state.load() == static_cast<uint32_t>(want); }, false);
  std::this_thread::sleep_for(50ms);
  int status = 0;
  const pid_t done = waitpid(pid, &status, WNOHANG);
  EXPECT_TRUE(reached) << "state " << agent.h()->state.load();
  EXPECT_EQ(done, 0) << "the rank exited (status " << status << ") instead of sleeping";
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
}

TEST_F(BcsReplayTest, DivergenceStopsTheRankWithANote) {
  ScriptedAgent agent(2, 4);
  agent.h()->mode = kModeReplay;
  Stream rec;
  rec.Add(kWtime, 1000).Add(kWtime, 2000).Add(kTest, 0);
  ReplayFile file(agent, rec.bytes());
  RunSleepingRank(
      agent,
      [] {
        gos_init();
        for (int i = 0; i < 3; ++i) gos_wtime();
      },
      kStateDiverged);
  EXPECT_STREQ(agent.h()->note,
               "rank 2, decision 3: the recording has gos_test here, the program called "
               "gos_wtime");
  EXPECT_EQ(agent.h()->events.load(), 2u);
}

TEST_F(BcsReplayTest, RecordedIndexOutOfRangeIsADivergence) {
  ScriptedAgent agent(1, 2);
  agent.h()->mode = kModeReplay;
  Stream rec;
  rec.Add(kWaitany, 5);
  ReplayFile file(agent, rec.bytes());
  RunSleepingRank(
      agent,
      [] {
        gos_init();
        int a = 0;
        int index = 0;
        gos_request_t reqs[2];
        gos_irecv(&a, sizeof a, 0, 1, gos_comm_world(), &reqs[0]);
        gos_irecv(&a, sizeof a, 0, 2, gos_comm_world(), &reqs[1]);
        gos_waitany(2, reqs, &index, nullptr);
      },
      kStateDiverged);
  EXPECT_STREQ(agent.h()->note,
               "rank 1, decision 1: the recording has gos_waitany returning index 5 here, the "
               "program called it with 2 requests");
}

TEST_F(BcsReplayTest, EndOfTheRecordingStopsTheRank) {
  ScriptedAgent agent(3, 4);
  agent.h()->mode = kModeReplay;
  Stream rec;
  rec.Add(kWtime, 1000).Add(kWtime, 2000);
  ReplayFile file(agent, rec.bytes());
  RunSleepingRank(
      agent,
      [] {
        gos_init();
        for (int i = 0; i < 3; ++i) gos_wtime();
      },
      kStateLogEnd);
  EXPECT_STREQ(agent.h()->note,
               "rank 3 needs decision 3 (gos_wtime) but the recording ends after 2: the "
               "recorded run stopped here");
}

TEST_F(BcsReplayTest, MissingRecordingIsAnEnd) {
  ScriptedAgent agent(0, 1);
  agent.h()->mode = kModeReplay;
  RunSleepingRank(
      agent,
      [] {
        gos_init();
        gos_wtime();
      },
      kStateLogEnd);
  EXPECT_NE(std::string(agent.h()->note)
                .find("rank 0 needs decision 1 (gos_wtime) but the "
                      "recording is unusable: cannot open"),
            std::string::npos)
      << agent.h()->note;
}

TEST_F(BcsReplayTest, AbortInReplaySleepsForInspection) {
  ScriptedAgent agent(0, 2);
  agent.h()->mode = kModeReplay;
  RunSleepingRank(
      agent,
      [] {
        gos_init();
        gos_abort(3);
      },
      kStateAborted);
  EXPECT_EQ(agent.h()->abort_code.load(), 3);
}

TEST_F(BcsReplayTest, OffModeCountsButWritesNothing) {
  ScriptedAgent agent(0, 2);
  agent.Start([](ScriptedAgent&, const Descriptor&) {});
  ASSERT_EQ(gos_init(), GOS_OK);
  int a = 0;
  int flag = 0;
  gos_request_t r = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 1, gos_comm_world(), &r), GOS_OK);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(gos_test(&r, &flag, nullptr), GOS_OK);
  gos_wtime();
  EXPECT_EQ(testing::DecisionsDone(), 6u);
  EXPECT_EQ(agent.h()->events.load(), 6u);
  ASSERT_EQ(gos_request_free(&r), GOS_OK);
  ASSERT_EQ(gos_finalize(), GOS_OK);
  EXPECT_EQ(agent.h()->rec_head.load(), 0u);
}

}  // namespace
}  // namespace gos::bcs
