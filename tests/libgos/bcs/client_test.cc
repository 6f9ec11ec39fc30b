// gos_rank (gos.h over the channel) against a scripted in-process nodeagent
// (tests/libgos/bcs/scripted_agent.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
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
using test_agent::Seen;

class BcsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::Reset();
    unsetenv("GOS_EAGER_BYTES");
  }
  void TearDown() override { testing::Reset(); }
};

TEST_F(BcsClientTest, InitWithoutChannelExplains) {
  unsetenv("GOS_CHANNEL");
  setenv("GOS_RANK", "3", 1);
  setenv("GOS_SIZE", "4", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(gos_init(), GOS_ERR_CHANNEL);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("gos: rank 3: no GOS_CHANNEL in the environment: run this program with "
                     "gos-run"),
            std::string::npos)
      << err;
  EXPECT_EQ(gos_initialized(), 0);
  gos_request_t req = GOS_REQUEST_NULL;
  EXPECT_EQ(gos_isend("x", 1, 0, 0, gos_comm_world(), 0, &req), GOS_ERR_NOT_INIT);
}

TEST_F(BcsClientTest, InitRejectsForeignOrMismatchedChannels) {
  ScriptedAgent agent(0, 2);
  agent.h()->magic = 0xdeadbeef;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(gos_init(), GOS_ERR_CHANNEL);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not a gos channel"), std::string::npos) << err;

  agent.h()->magic = kChannelMagic;
  agent.h()->version = kChannelVersion + 1;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(gos_init(), GOS_ERR_CHANNEL);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("version"), std::string::npos) << err;

  agent.h()->version = kChannelVersion;
  setenv("GOS_RANK", "1", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(gos_init(), GOS_ERR_CHANNEL);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("belongs to rank 0 of 2"), std::string::npos) << err;
  EXPECT_EQ(agent.h()->state.load(), kStateNone);

  setenv("GOS_CHANNEL", "/dev/shm/gos-test-does-not-exist", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(gos_init(), GOS_ERR_CHANNEL);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot open channel"), std::string::npos) << err;
}

// The bell rings when a rank blocks, finishes or stops; running (init, waking up) and posting
// do not ring it (docs/specs/bcs-channel.md, "Doorbells").
TEST_F(BcsClientTest, InitAndFinalizeSetStateAndOnlyFinalizeRingsTheBell) {
  ScriptedAgent agent(2, 5);
  EXPECT_EQ(gos_world_rank(), -1);
  ASSERT_EQ(gos_init(), GOS_OK);
  EXPECT_EQ(agent.h()->state.load(), kStateRunning);
  EXPECT_EQ(agent.h()->bell.load(), 0u);
  EXPECT_EQ(gos_initialized(), 1);
  EXPECT_EQ(gos_world_rank(), 2);
  EXPECT_EQ(gos_world_size(), 5);
  EXPECT_EQ(gos_comm_world()->size, 5);
  EXPECT_EQ(gos_comm_world()->rank, 2);
  EXPECT_EQ(gos_comm_world()->ctx, GOS_CTX_WORLD);
  EXPECT_EQ(gos_comm_self()->size, 1);
  EXPECT_EQ(gos_comm_self()->world[0], 2);
  EXPECT_EQ(gos_eager_bytes(), 65536u);
  const uint32_t bell = agent.h()->bell.load();
  ASSERT_EQ(gos_finalize(), GOS_OK);
  EXPECT_EQ(agent.h()->state.load(), kStateFinalized);
  EXPECT_GT(agent.h()->bell.load(), bell);
  EXPECT_EQ(gos_finalized(), 1);
  EXPECT_EQ(gos_barrier(gos_comm_world()), GOS_ERR_NOT_INIT);
  EXPECT_EQ(gos_finalize(), GOS_ERR_NOT_INIT);
}

TEST_F(BcsClientTest, ArgumentErrors) {
  ScriptedAgent agent(0, 2);
  agent.Start([](ScriptedAgent& a, const Descriptor& d) { a.Complete(Done(d)); });
  ASSERT_EQ(gos_init(), GOS_OK);
  const gos_comm_t* w = gos_comm_world();
  gos_request_t req = GOS_REQUEST_NULL;
  char buf[4] = {};
  EXPECT_EQ(gos_isend(buf, 4, 0, -1, w, 0, &req), GOS_ERR_TAG);
  EXPECT_EQ(gos_isend(buf, 4, 2, 0, w, 0, &req), GOS_ERR_RANK);
  EXPECT_EQ(gos_isend(nullptr, 4, 1, 0, w, 0, &req), GOS_ERR_ARG);
  EXPECT_EQ(gos_isend(buf, 4, 1, 0, nullptr, 0, &req), GOS_ERR_ARG);
  EXPECT_EQ(gos_irecv(buf, 4, -2, 0, w, &req), GOS_ERR_RANK);
  EXPECT_EQ(gos_irecv(buf, 4, 0, -5, w, &req), GOS_ERR_TAG);
  EXPECT_EQ(gos_bcast(buf, 4, 7, w), GOS_ERR_RANK);
  EXPECT_EQ(gos_reduce(buf, buf, 1, GOS_DOUBLE, GOS_BAND, 0, w), GOS_ERR_ARG);
  EXPECT_EQ(agent.seen_count(), 0u);  // nothing was posted
  gos_status_t st;
  req = GOS_REQUEST_NULL;
  EXPECT_EQ(gos_wait(&req, &st), GOS_OK);
  EXPECT_EQ(st.source, -1);
  EXPECT_EQ(st.tag, -1);
  EXPECT_EQ(st.len, 0u);
  req = 12345;
  EXPECT_EQ(gos_wait(&req, &st), GOS_ERR_REQUEST);
  EXPECT_EQ(gos_request_free(&req), GOS_ERR_REQUEST);
}

TEST_F(BcsClientTest, EagerSendCompletesAtOnceAndFreesItsCopyOnCompletion) {
  setenv("GOS_EAGER_BYTES", "32", 1);
  ScriptedAgent agent(0, 2);
  std::mutex mu;
  std::vector<Descriptor> held;
  agent.Start([&](ScriptedAgent&, const Descriptor& d) {
    std::lock_guard lock(mu);
    held.push_back(d);
  });
  ASSERT_EQ(gos_init(), GOS_OK);
  EXPECT_EQ(gos_eager_bytes(), 32u);
  const gos_comm_t* w = gos_comm_world();

  char small[32];
  memset(small, 'a', sizeof small);
  gos_request_t req = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_isend(small, sizeof small, 1, 4, w, 0, &req), GOS_OK);
  memset(small, 'z', sizeof small);  // the copy was taken at the call
  int flag = 0;
  ASSERT_EQ(gos_test(&req, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(req, GOS_REQUEST_NULL);
  EXPECT_EQ(testing::EagerCopies(), 1u);

  char large[33];
  memset(large, 'b', sizeof large);
  gos_request_t big = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_isend(large, sizeof large, 1, 5, w, 0, &big), GOS_OK);
  char tiny[8] = {};
  gos_request_t sync = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_isend(tiny, sizeof tiny, 1, 6, w, GOS_SEND_SYNC, &sync), GOS_OK);

  ASSERT_TRUE(Eventually([&] { return agent.seen_count() == 3; }));
  const std::vector<Seen> seen = agent.seen();
  EXPECT_EQ(OpOf(seen[0].d), Op::kSend);
  EXPECT_NE(seen[0].d.addr, reinterpret_cast<uint64_t>(small));
  EXPECT_EQ(seen[0].payload, std::vector<unsigned char>(32, 'a'));
  EXPECT_EQ(seen[0].d.peer, 1);
  EXPECT_EQ(seen[0].d.tag, 4);
  EXPECT_EQ(seen[0].d.context, GOS_CTX_WORLD);
  EXPECT_EQ(seen[0].d.flags, 0u);
  EXPECT_EQ(seen[1].d.addr, reinterpret_cast<uint64_t>(large));  // above the eager limit
  EXPECT_EQ(seen[2].d.addr, reinterpret_cast<uint64_t>(tiny));   // synchronous: never copied
  EXPECT_EQ(seen[2].d.flags, kFlagSync);

  ASSERT_EQ(gos_test(&big, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 0);
  ASSERT_EQ(gos_test(&sync, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 0);

  {
    std::lock_guard lock(mu);
    for (const Descriptor& d : held) agent.Complete(Done(d));
  }
  ASSERT_TRUE(Eventually([] { return testing::EagerCopies() == 0; }));
  EXPECT_EQ(gos_wait(&big, nullptr), GOS_OK);
  EXPECT_EQ(gos_wait(&sync, nullptr), GOS_OK);
  EXPECT_EQ(testing::OpenRequests(), 0u);
}

TEST_F(BcsClientTest, DescriptorRingWrapsAroundAndBlocksWhenFull) {
  ScriptedAgent agent(0, 2);
  std::atomic<bool> saw_full_and_blocked{false};
  agent.set_paused(true);
  agent.Start([](ScriptedAgent& a, const Descriptor& d) { a.Complete(Done(d)); },
              [&](ScriptedAgent& a) {
                ChannelHeader* h = a.h();
                if (a.paused() && h->desc_head.load() - h->desc_tail.load() == kDescSlots &&
                    h->state.load() == kStateBlocked) {
                  saw_full_and_blocked = true;
                  a.set_paused(false);
                }
              });
  ASSERT_EQ(gos_init(), GOS_OK);
  constexpr uint32_t kSends = 3000;  // ~3 laps of both rings
  for (uint32_t i = 0; i < kSends; ++i) {
    gos_request_t req = GOS_REQUEST_NULL;
    ASSERT_EQ(gos_isend(&i, sizeof i, 1, 0, gos_comm_world(), 0, &req), GOS_OK);
    ASSERT_EQ(gos_wait(&req, nullptr), GOS_OK);
  }
  EXPECT_TRUE(saw_full_and_blocked);
  ASSERT_EQ(gos_finalize(), GOS_OK);  // waits for every eager completion
  EXPECT_EQ(testing::EagerCopies(), 0u);
  const std::vector<Seen> seen = agent.seen();
  ASSERT_EQ(seen.size(), kSends);
  uint64_t last_req = 0;
  for (uint32_t i = 0; i < kSends; ++i) {
    uint32_t v = 0;
    ASSERT_EQ(seen[i].payload.size(), sizeof v);
    memcpy(&v, seen[i].payload.data(), sizeof v);
    EXPECT_EQ(v, i);
    EXPECT_GT(seen[i].d.req, last_req);
    last_req = seen[i].d.req;
  }
  EXPECT_EQ(agent.h()->desc_head.load(), kSends);
  EXPECT_EQ(agent.h()->compl_tail.load(), kSends);
}

// Spec 5, version 3: the agent wakes a rank for freed descriptor slots only while the rank
// says it waits for room (room_wait). A wake-up lost in the race between the rank's last room
// check and its sleep would cost the blocking wait's 1 s timeout: the agent here drains a few
// slots at a time, so the rank waits for room thousands of times, each of which must end
// well before that timeout. No completion is published meanwhile (it would wake the rank too).
TEST_F(BcsClientTest, WaitForDescriptorRoomIsWokenOnlyThenAndNeverSleepsOutTheTimeout) {
  ScriptedAgent agent(0, 2);
  agent.set_drain_limit(3);
  ASSERT_EQ(gos_init(), GOS_OK);
  agent.Start([](ScriptedAgent&, const Descriptor&) {});
  constexpr uint32_t kSends = kDescSlots + 3 * 1500;
  std::vector<gos_request_t> reqs(kSends, GOS_REQUEST_NULL);
  auto slowest = std::chrono::steady_clock::duration::zero();
  for (uint32_t i = 0; i < kSends; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(gos_isend(&i, sizeof i, 1, 0, gos_comm_world(), 0, &reqs[i]), GOS_OK);
    slowest = std::max(slowest, std::chrono::steady_clock::now() - t0);
  }
  EXPECT_LT(slowest, 500ms) << "a wait for descriptor room slept out its timeout";
  EXPECT_EQ(agent.h()->room_wait.load(), 0u);
  ASSERT_TRUE(Eventually([&] { return agent.seen_count() == kSends; }, false));
  // Most drains found the rank waiting for room; those that did not woke nobody.
  EXPECT_GT(agent.room_wakes(), 1000u);
  EXPECT_GE(agent.room_frees(), agent.room_wakes());
  for (const Seen& x : agent.seen()) agent.Complete(Done(x.d));
  for (auto& r : reqs) ASSERT_EQ(gos_wait(&r, nullptr), GOS_OK);
  ASSERT_EQ(gos_finalize(), GOS_OK);
}

TEST_F(BcsClientTest, BlockingWaitSleepsOnWakeAsBlockedAndSelfSendRecv) {
  ScriptedAgent agent(0, 1);
  std::mutex mu;
  std::vector<Descriptor> pending;
  std::atomic<bool> saw_blocked{false};
  agent.Start(
      [&](ScriptedAgent&, const Descriptor& d) {
        std::lock_guard lock(mu);
        pending.push_back(d);
      },
      [&](ScriptedAgent& a) {
        // Match only once the rank is asleep in gos_wait, so the wake-up path is exercised.
        std::lock_guard lock(mu);
        if (pending.size() != 2 || a.h()->state.load() != kStateBlocked) return;
        saw_blocked = true;
        const Descriptor& send = pending[0];
        const Descriptor& recv = pending[1];
        const uint64_t n = std::min(send.len, recv.len);
        memcpy(reinterpret_cast<void*>(recv.addr), reinterpret_cast<const void*>(send.addr), n);
        a.Complete(Done(send));
        a.Complete(Done(recv, kOk, n, 0, send.tag));
        pending.clear();
      });
  ASSERT_EQ(gos_init(), GOS_OK);
  const char msg[] = "hello";
  gos_request_t s = GOS_REQUEST_NULL;
  gos_request_t r = GOS_REQUEST_NULL;
  char buf[16] = {};
  ASSERT_EQ(gos_isend(msg, sizeof msg, 0, 5, gos_comm_self(), 0, &s), GOS_OK);
  ASSERT_EQ(gos_irecv(buf, sizeof buf, GOS_ANY_SOURCE, GOS_ANY_TAG, gos_comm_self(), &r), GOS_OK);
  gos_status_t st;
  ASSERT_EQ(gos_wait(&r, &st), GOS_OK);
  EXPECT_TRUE(saw_blocked);
  EXPECT_EQ(agent.h()->state.load(), kStateRunning);
  EXPECT_STREQ(buf, "hello");
  EXPECT_EQ(st.source, 0);
  EXPECT_EQ(st.tag, 5);
  EXPECT_EQ(st.len, sizeof msg);
  EXPECT_EQ(st.error, GOS_OK);
  EXPECT_EQ(gos_wait(&s, nullptr), GOS_OK);
  const std::vector<Seen> seen = agent.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].d.peer, kAnySource);
  EXPECT_EQ(seen[1].d.tag, kAnyTag);
  EXPECT_EQ(seen[1].d.context, GOS_CTX_SELF);
}

TEST_F(BcsClientTest, TruncatedReceiveReportsIt) {
  ScriptedAgent agent(0, 2);
  agent.Start([](ScriptedAgent& a, const Descriptor& d) {
    a.Complete(Done(d, kErrTruncate, d.len, 1, 3));
  });
  ASSERT_EQ(gos_init(), GOS_OK);
  char buf[4];
  gos_request_t r = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_irecv(buf, sizeof buf, 1, 3, gos_comm_world(), &r), GOS_OK);
  gos_status_t st;
  EXPECT_EQ(gos_wait(&r, &st), GOS_ERR_TRUNCATE);
  EXPECT_EQ(st.error, GOS_ERR_TRUNCATE);
  EXPECT_EQ(st.len, sizeof buf);
  EXPECT_EQ(st.source, 1);
  EXPECT_EQ(r, GOS_REQUEST_NULL);
}

TEST_F(BcsClientTest, WaitanyTestanyAndRequestFree) {
  ScriptedAgent agent(0, 2);
  std::mutex mu;
  std::vector<Descriptor> held;
  agent.Start([&](ScriptedAgent&, const Descriptor& d) {
    std::lock_guard lock(mu);
    held.push_back(d);
  });
  ASSERT_EQ(gos_init(), GOS_OK);
  int a = 0;
  int b = 0;
  gos_request_t reqs[3] = {GOS_REQUEST_NULL, GOS_REQUEST_NULL, GOS_REQUEST_NULL};
  ASSERT_EQ(gos_irecv(&a, sizeof a, 1, 1, gos_comm_world(), &reqs[0]), GOS_OK);
  ASSERT_EQ(gos_irecv(&b, sizeof b, 1, 2, gos_comm_world(), &reqs[2]), GOS_OK);
  int index = 0;
  int flag = 1;
  ASSERT_EQ(gos_testany(3, reqs, &index, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 0);
  ASSERT_TRUE(Eventually([&] { return agent.seen_count() == 2; }));
  {
    std::lock_guard lock(mu);
    agent.Complete(Done(held[1], kOk, sizeof b, 1, 2));
  }
  gos_status_t st;
  ASSERT_EQ(gos_waitany(3, reqs, &index, &st), GOS_OK);
  EXPECT_EQ(index, 2);
  EXPECT_EQ(st.tag, 2);
  EXPECT_EQ(reqs[2], GOS_REQUEST_NULL);
  ASSERT_EQ(gos_request_free(&reqs[0]), GOS_OK);
  EXPECT_EQ(reqs[0], GOS_REQUEST_NULL);
  EXPECT_EQ(testing::OpenRequests(), 1u);  // freed, but the agent still owes its completion
  ASSERT_EQ(gos_testany(3, reqs, &index, &flag, nullptr), GOS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(index, GOS_UNDEFINED_INDEX);
  {
    std::lock_guard lock(mu);
    agent.Complete(Done(held[0], kOk, sizeof a, 1, 1));
  }
  ASSERT_TRUE(Eventually([] { return testing::OpenRequests() == 0; }));
}

TEST_F(BcsClientTest, IprobeProtocol) {
  ScriptedAgent agent(0, 4);
  std::mutex mu;
  std::vector<Descriptor> probes;
  agent.Start([&](ScriptedAgent&, const Descriptor& d) {
    std::lock_guard lock(mu);
    probes.push_back(d);
  });
  ASSERT_EQ(gos_init(), GOS_OK);
  const int world[2] = {0, 3};
  const gos_comm_t comm{9, 2, 0, world, nullptr};
  int flag = 1;
  gos_status_t st;
  ASSERT_EQ(gos_iprobe(1, 7, &comm, &flag, &st), GOS_OK);
  EXPECT_EQ(flag, 0);
  ASSERT_TRUE(Eventually([&] { return agent.seen_count() == 1; }));
  // Asking again while the first probe is unanswered posts nothing new.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(gos_iprobe(1, 7, &comm, &flag, &st), GOS_OK);
    EXPECT_EQ(flag, 0);
  }
  EXPECT_EQ(agent.h()->desc_head.load(), 1u);
  Descriptor p;
  {
    std::lock_guard lock(mu);
    p = probes[0];
  }
  EXPECT_EQ(OpOf(p), Op::kProbe);
  EXPECT_EQ(p.flags, kFlagNonBlocking);
  EXPECT_EQ(p.peer, 3);  // world rank of comm rank 1
  EXPECT_EQ(p.tag, 7);
  EXPECT_EQ(p.context, 9u);
  agent.Complete(Done(p, kOk, 12, 3, 7, kComplFound));
  ASSERT_TRUE(Eventually([&] {
    EXPECT_EQ(gos_iprobe(1, 7, &comm, &flag, &st), GOS_OK);
    return flag == 1;
  }));
  EXPECT_EQ(st.source, 1);
  EXPECT_EQ(st.tag, 7);
  EXPECT_EQ(st.len, 12u);
  EXPECT_EQ(agent.h()->desc_head.load(), 1u);

  // The answer was consumed: the next call asks afresh. "Not found" re-asks at once.
  ASSERT_EQ(gos_iprobe(1, 7, &comm, &flag, &st), GOS_OK);
  EXPECT_EQ(flag, 0);
  ASSERT_TRUE(Eventually([&] { return agent.seen_count() == 2; }));
  {
    std::lock_guard lock(mu);
    p = probes[1];
  }
  agent.Complete(Done(p));
  ASSERT_TRUE(Eventually([&] {
    EXPECT_EQ(gos_iprobe(1, 7, &comm, &flag, &st), GOS_OK);
    EXPECT_EQ(flag, 0);
    return agent.seen_count() == 3;
  }));

  // Blocking probe: one descriptor without kFlagNonBlocking, answered later.
  std::thread answer([&] {
    Eventually([&] { return agent.seen_count() == 4; }, false);
    std::lock_guard lock(mu);
    agent.Complete(Done(probes[3], kOk, 5, 0, 2, kComplFound));
  });
  ASSERT_EQ(gos_probe(GOS_ANY_SOURCE, GOS_ANY_TAG, &comm, &st), GOS_OK);
  answer.join();
  EXPECT_EQ(st.source, 0);
  EXPECT_EQ(st.tag, 2);
  EXPECT_EQ(st.len, 5u);
  std::lock_guard lock(mu);
  EXPECT_EQ(probes[3].flags, 0u);
  EXPECT_EQ(probes[3].peer, kAnySource);
  EXPECT_EQ(probes[3].tag, kAnyTag);
}

TEST_F(BcsClientTest, BarrierAndBcastDescriptorsCarrySeqGroupAndRoot) {
  ScriptedAgent agent(1, 4);
  agent.Start([](ScriptedAgent& a, const Descriptor& d) { a.Complete(Done(d)); });
  ASSERT_EQ(gos_init(), GOS_OK);
  const gos_comm_t* w = gos_comm_world();
  const int world[2] = {1, 2};
  const gos_comm_t pair{5, 2, 0, world, nullptr};
  char buf[10] = {};
  ASSERT_EQ(gos_barrier(w), GOS_OK);
  ASSERT_EQ(gos_barrier(w), GOS_OK);
  ASSERT_EQ(gos_barrier(&pair), GOS_OK);
  ASSERT_EQ(gos_bcast(buf, sizeof buf, 1, &pair), GOS_OK);
  ASSERT_EQ(gos_bcast(buf, sizeof buf, 3, w), GOS_OK);
  ASSERT_EQ(gos_barrier(gos_comm_self()), GOS_OK);  // one member: nothing to post
  const std::vector<Seen> seen = agent.seen();
  ASSERT_EQ(seen.size(), 5u);
  struct Want {
    Op op;
    uint64_t ctx;
    int32_t tag;
    uint32_t group;
    int32_t peer;
  };
  const Want want[] = {{Op::kBarrier, GOS_CTX_WORLD, 0, 4, 0},
                       {Op::kBarrier, GOS_CTX_WORLD, 1, 4, 0},
                       {Op::kBarrier, 5, 0, 2, 0},
                       {Op::kBcast, 5, 1, 2, 2},
                       {Op::kBcast, GOS_CTX_WORLD, 2, 4, 3}};
  for (size_t i = 0; i < seen.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(OpOf(seen[i].d), want[i].op);
    EXPECT_EQ(seen[i].d.context, want[i].ctx);
    EXPECT_EQ(seen[i].d.tag, want[i].tag);
    EXPECT_EQ(seen[i].d.group_size, want[i].group);
    if (want[i].op == Op::kBcast) {
      EXPECT_EQ(seen[i].d.peer, want[i].peer);
      EXPECT_EQ(seen[i].d.addr, reinterpret_cast<uint64_t>(buf));
      EXPECT_EQ(seen[i].d.len, sizeof buf);
    }
  }
}

// Contributions of world ranks 0..2 for the reduction tests. Element 0 is chosen so that
// the sum depends on the order: (1 + 1e16) - 1e16 = 0 but (-1e16 + 1e16) + 1 = 1.
const double kContrib[3][2] = {{1.0, 2.0}, {1e16, 3.0}, {-1e16, 4.0}};

TEST_F(BcsClientTest, ReduceAtRootCombinesInRankOrder) {
  ScriptedAgent agent(0, 3);
  agent.Start([](ScriptedAgent& a, const Descriptor& d) {
    // The other ranks' contributions arrive as messages on the collective context.
    if (OpOf(d) != Op::kRecv) return a.Complete(Done(d));
    memcpy(reinterpret_cast<void*>(d.addr), kContrib[d.peer], d.len);
    a.Complete(Done(d, kOk, d.len, d.peer, d.tag));
  });
  ASSERT_EQ(gos_init(), GOS_OK);
  double want[2];
  for (int e = 0; e < 2; ++e) want[e] = (kContrib[0][e] + kContrib[1][e]) + kContrib[2][e];
  ASSERT_NE(want[0], (kContrib[2][0] + kContrib[1][0]) + kContrib[0][0]);  // order matters

  double out[2] = {};
  ASSERT_EQ(gos_reduce(kContrib[0], out, 2, GOS_DOUBLE, GOS_SUM, 0, gos_comm_world()), GOS_OK);
  EXPECT_EQ(out[0], want[0]);
  EXPECT_EQ(out[1], want[1]);
  double inplace[2] = {kContrib[0][0], kContrib[0][1]};
  ASSERT_EQ(gos_reduce(inplace, inplace, 2, GOS_DOUBLE, GOS_SUM, 0, gos_comm_world()), GOS_OK);
  EXPECT_EQ(inplace[0], want[0]);
  EXPECT_EQ(inplace[1], want[1]);
  ASSERT_EQ(gos_reduce(nullptr, nullptr, 0, GOS_DOUBLE, GOS_SUM, 0, gos_comm_world()), GOS_OK);

  const std::vector<Seen> seen = agent.seen();
  ASSERT_EQ(seen.size(), 4u);  // two receives per reduce with data; none for count 0
  for (size_t i = 0; i < seen.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(seen[i].d.context, GOS_CTX_WORLD | GOS_CTX_COLLECTIVE_BIT);
    EXPECT_EQ(seen[i].d.tag, static_cast<int32_t>(i / 2));  // the collective sequence
    EXPECT_EQ(seen[i].d.peer, static_cast<int32_t>(i % 2 + 1));
    EXPECT_EQ(seen[i].d.len, sizeof out);
  }
  ASSERT_EQ(gos_barrier(gos_comm_world()), GOS_OK);
  EXPECT_EQ(agent.seen().back().d.tag, 3);  // after the count-0 reduce's sequence 2
}

// A small allreduce takes one exchange: rank 1 of 3 receives ranks 0's and 2's contributions
// and sends its own to both, all on the collective context with the same sequence, then
// combines the three in rank order itself (the order every rank uses).
TEST_F(BcsClientTest, SmallAllreduceExchangesAllContributionsAndCombinesInRankOrder) {
  ScriptedAgent agent(1, 3);
  agent.Start([](ScriptedAgent& a, const Descriptor& d) {
    if (OpOf(d) != Op::kRecv) return a.Complete(Done(d));
    memcpy(reinterpret_cast<void*>(d.addr), kContrib[d.peer], d.len);
    a.Complete(Done(d, kOk, d.len, d.peer, d.tag));
  });
  ASSERT_EQ(gos_init(), GOS_OK);
  double want[2];
  for (int e = 0; e < 2; ++e) want[e] = (kContrib[0][e] + kContrib[1][e]) + kContrib[2][e];
  double buf[2] = {kContrib[1][0], kContrib[1][1]};
  ASSERT_EQ(gos_allreduce(buf, buf, 2, GOS_DOUBLE, GOS_SUM, gos_comm_world()), GOS_OK);
  EXPECT_EQ(buf[0], want[0]);
  EXPECT_EQ(buf[1], want[1]);
  const std::vector<Seen> seen = agent.seen();
  ASSERT_EQ(seen.size(), 4u);
  const Op ops[] = {Op::kRecv, Op::kRecv, Op::kSend, Op::kSend};
  const int32_t peers[] = {0, 2, 0, 2};
  for (size_t i = 0; i < seen.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(OpOf(seen[i].d), ops[i]);
    EXPECT_EQ(seen[i].d.peer, peers[i]);
    EXPECT_EQ(seen[i].d.tag, 0);
    EXPECT_EQ(seen[i].d.context, GOS_CTX_WORLD | GOS_CTX_COLLECTIVE_BIT);
    if (ops[i] == Op::kSend) {
      ASSERT_EQ(seen[i].payload.size(), sizeof buf);
      EXPECT_EQ(memcmp(seen[i].payload.data(), kContrib[1], sizeof buf), 0);
    }
  }
}

// Above 16 KiB of contributions in all (or on more than 4 ranks), a non-root sends its
// contribution to rank 0 and receives the result by broadcast.
TEST_F(BcsClientTest, LargeAllreduceAtNonRootSendsThenReceivesTheBroadcast) {
  constexpr size_t kCount = 1024;  // 8 KiB per rank, 24 KiB in all
  std::vector<double> result(kCount, 42.0);
  ScriptedAgent agent(1, 3);
  agent.Start([&](ScriptedAgent& a, const Descriptor& d) {
    if (OpOf(d) == Op::kBcast) memcpy(reinterpret_cast<void*>(d.addr), result.data(), d.len);
    a.Complete(Done(d));
  });
  ASSERT_EQ(gos_init(), GOS_OK);
  std::vector<double> buf(kCount, 1.5);
  ASSERT_EQ(gos_allreduce(buf.data(), buf.data(), kCount, GOS_DOUBLE, GOS_SUM, gos_comm_world()),
            GOS_OK);
  EXPECT_EQ(buf, result);
  const std::vector<Seen> seen = agent.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(OpOf(seen[0].d), Op::kSend);
  EXPECT_EQ(seen[0].d.peer, 0);
  EXPECT_EQ(seen[0].d.tag, 0);
  EXPECT_EQ(seen[0].d.context, GOS_CTX_WORLD | GOS_CTX_COLLECTIVE_BIT);
  EXPECT_EQ(seen[0].d.len, kCount * sizeof(double));
  EXPECT_EQ(OpOf(seen[1].d), Op::kBcast);
  EXPECT_EQ(seen[1].d.peer, 0);
  EXPECT_EQ(seen[1].d.tag, 1);
  EXPECT_EQ(seen[1].d.group_size, 3u);
  EXPECT_EQ(seen[1].d.context, GOS_CTX_WORLD);
}

TEST_F(BcsClientTest, FinalizeWaitsForEagerCompletions) {
  ScriptedAgent agent(0, 2);
  std::mutex mu;
  std::vector<Descriptor> held;
  std::atomic<bool> released_while_blocked{false};
  agent.Start(
      [&](ScriptedAgent&, const Descriptor& d) {
        std::lock_guard lock(mu);
        held.push_back(d);
      },
      [&](ScriptedAgent& a) {
        std::lock_guard lock(mu);
        if (held.empty() || a.h()->state.load() != kStateBlocked) return;
        released_while_blocked = true;
        for (const Descriptor& d : held) a.Complete(Done(d));
        held.clear();
      });
  ASSERT_EQ(gos_init(), GOS_OK);
  int v = 42;
  gos_request_t r = GOS_REQUEST_NULL;
  ASSERT_EQ(gos_isend(&v, sizeof v, 1, 0, gos_comm_world(), 0, &r), GOS_OK);
  ASSERT_EQ(gos_wait(&r, nullptr), GOS_OK);  // eager: at once
  EXPECT_EQ(testing::EagerCopies(), 1u);
  ASSERT_EQ(gos_finalize(), GOS_OK);
  EXPECT_TRUE(released_while_blocked);
  EXPECT_EQ(testing::EagerCopies(), 0u);
  EXPECT_EQ(agent.h()->state.load(), kStateFinalized);
}

TEST_F(BcsClientTest, AbortTellsTheAgentAndExits) {
  ScriptedAgent agent(0, 2);
  EXPECT_EXIT(
      {
        gos_init();
        gos_abort(0x107);
      },
      ::testing::ExitedWithCode(7), "");
  EXPECT_EQ(agent.h()->state.load(), kStateAborted);
  EXPECT_EQ(agent.h()->abort_code.load(), 0x107);
  EXPECT_EXIT(
      {
        gos_init();
        gos_abort(256);  // code & 0xff == 0 would read as success
      },
      ::testing::ExitedWithCode(1), "");
  EXPECT_EQ(agent.h()->abort_code.load(), 256);
}

// ---- gos_reduce_local against a direct reference ----

enum class Cls { kInt, kFloat, kBool, kByte, kPair };

bool WantValid(gos_op_t op, Cls c) {
  switch (op) {
    case GOS_SUM:
    case GOS_PROD:
    case GOS_MIN:
    case GOS_MAX:
      return c == Cls::kInt || c == Cls::kFloat;
    case GOS_LAND:
    case GOS_LOR:
    case GOS_LXOR:
      return c == Cls::kInt || c == Cls::kBool;
    case GOS_BAND:
    case GOS_BOR:
    case GOS_BXOR:
      return c == Cls::kInt || c == Cls::kByte;
    default:
      return c == Cls::kPair;
  }
}

template <typename T>
T RefScalar(gos_op_t op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case GOS_SUM:
        return a + b;
      case GOS_PROD:
        return a * b;
      case GOS_MIN:
        return std::min(a, b);
      default:
        return std::max(a, b);
    }
  } else {
    switch (op) {
      case GOS_SUM:
        return static_cast<T>(a + b);
      case GOS_PROD:
        return static_cast<T>(a * b);
      case GOS_MIN:
        return std::min(a, b);
      case GOS_MAX:
        return std::max(a, b);
      case GOS_LAND:
        return static_cast<T>(a && b);
      case GOS_LOR:
        return static_cast<T>(a || b);
      case GOS_LXOR:
        return static_cast<T>(!a != !b);
      case GOS_BAND:
        return static_cast<T>(a & b);
      case GOS_BOR:
        return static_cast<T>(a | b);
      default:
        return static_cast<T>(a ^ b);
    }
  }
}

template <typename T>
void CheckScalar(gos_type_t type, Cls cls) {
  SCOPED_TRACE(::testing::Message() << "type " << type);
  EXPECT_EQ(gos_type_size(type), sizeof(T));
  const T in[6] = {T(3), T(0), T(5), T(7), T(2), T(12)};
  const T io0[6] = {T(5), T(0), T(5), T(1), T(6), T(10)};
  for (int o = 0; o < GOS_OP_COUNT; ++o) {
    const auto op = static_cast<gos_op_t>(o);
    SCOPED_TRACE(::testing::Message() << "op " << o);
    const bool valid = WantValid(op, cls);
    EXPECT_EQ(gos_op_valid(op, type), valid ? 1 : 0);
    T io[6];
    memcpy(io, io0, sizeof io);
    if (!valid) {
      EXPECT_EQ(gos_reduce_local(in, io, 6, type, op), GOS_ERR_ARG);
      continue;
    }
    ASSERT_EQ(gos_reduce_local(in, io, 6, type, op), GOS_OK);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(io[k], RefScalar<T>(op, in[k], io0[k])) << k;
  }
}

template <typename V>
struct PairOf {
  V v;
  int i;
};

template <typename V>
void CheckPair(gos_type_t type) {
  SCOPED_TRACE(::testing::Message() << "pair type " << type);
  using P = PairOf<V>;
  EXPECT_EQ(gos_type_size(type), sizeof(P));
  const P in[4] = {{V(1), 5}, {V(2), 1}, {V(3), 3}, {V(3), 9}};
  const P io0[4] = {{V(2), 0}, {V(2), 4}, {V(1), 1}, {V(3), 2}};
  // Ties keep the smaller index, whichever side it came from.
  const P want_min[4] = {{V(1), 5}, {V(2), 1}, {V(1), 1}, {V(3), 2}};
  const P want_max[4] = {{V(2), 0}, {V(2), 1}, {V(3), 3}, {V(3), 2}};
  for (auto [op, want] : {std::pair{GOS_MINLOC, want_min}, std::pair{GOS_MAXLOC, want_max}}) {
    EXPECT_EQ(gos_op_valid(op, type), 1);
    P io[4];
    memcpy(io, io0, sizeof io);
    ASSERT_EQ(gos_reduce_local(in, io, 4, type, op), GOS_OK);
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(io[k].v, want[k].v) << op << " " << k;
      EXPECT_EQ(io[k].i, want[k].i) << op << " " << k;
    }
  }
  for (int o = 0; o < GOS_MINLOC; ++o) {
    EXPECT_EQ(gos_op_valid(static_cast<gos_op_t>(o), type), 0) << o;
  }
}

TEST(ReduceLocalTest, EveryTypeAndOpAgainstReference) {
  CheckScalar<char>(GOS_CHAR, Cls::kInt);
  CheckScalar<signed char>(GOS_SIGNED_CHAR, Cls::kInt);
  CheckScalar<unsigned char>(GOS_UNSIGNED_CHAR, Cls::kInt);
  CheckScalar<unsigned char>(GOS_BYTE, Cls::kByte);
  CheckScalar<short>(GOS_SHORT, Cls::kInt);
  CheckScalar<unsigned short>(GOS_UNSIGNED_SHORT, Cls::kInt);
  CheckScalar<int>(GOS_INT, Cls::kInt);
  CheckScalar<unsigned>(GOS_UNSIGNED, Cls::kInt);
  CheckScalar<long>(GOS_LONG, Cls::kInt);
  CheckScalar<unsigned long>(GOS_UNSIGNED_LONG, Cls::kInt);
  CheckScalar<long long>(GOS_LONG_LONG, Cls::kInt);
  CheckScalar<unsigned long long>(GOS_UNSIGNED_LONG_LONG, Cls::kInt);
  CheckScalar<int8_t>(GOS_INT8, Cls::kInt);
  CheckScalar<uint8_t>(GOS_UINT8, Cls::kInt);
  CheckScalar<int16_t>(GOS_INT16, Cls::kInt);
  CheckScalar<uint16_t>(GOS_UINT16, Cls::kInt);
  CheckScalar<int32_t>(GOS_INT32, Cls::kInt);
  CheckScalar<uint32_t>(GOS_UINT32, Cls::kInt);
  CheckScalar<int64_t>(GOS_INT64, Cls::kInt);
  CheckScalar<uint64_t>(GOS_UINT64, Cls::kInt);
  CheckScalar<float>(GOS_FLOAT, Cls::kFloat);
  CheckScalar<double>(GOS_DOUBLE, Cls::kFloat);
  CheckScalar<long double>(GOS_LONG_DOUBLE, Cls::kFloat);
  CheckScalar<bool>(GOS_C_BOOL, Cls::kBool);
  CheckScalar<wchar_t>(GOS_WCHAR, Cls::kInt);
  CheckPair<float>(GOS_FLOAT_INT);
  CheckPair<double>(GOS_DOUBLE_INT);
  CheckPair<long>(GOS_LONG_INT);
  CheckPair<int>(GOS_2INT);
  CheckPair<short>(GOS_SHORT_INT);
  CheckPair<long double>(GOS_LONG_DOUBLE_INT);
}

TEST(ReduceLocalTest, EdgeCases) {
  int32_t a = INT32_MAX;
  int32_t b = 1;
  ASSERT_EQ(gos_reduce_local(&a, &b, 1, GOS_INT32, GOS_SUM), GOS_OK);
  EXPECT_EQ(b, INT32_MIN);  // wraps, as C on two's complement hardware
  bool t[4] = {true, true, false, false};
  bool u[4] = {true, false, true, false};
  ASSERT_EQ(gos_reduce_local(t, u, 4, GOS_C_BOOL, GOS_LXOR), GOS_OK);
  EXPECT_EQ(u[0], false);
  EXPECT_EQ(u[1], true);
  EXPECT_EQ(u[2], true);
  EXPECT_EQ(u[3], false);
  EXPECT_EQ(gos_reduce_local(nullptr, nullptr, 0, GOS_INT, GOS_SUM), GOS_OK);
  EXPECT_EQ(gos_reduce_local(nullptr, &a, 1, GOS_INT, GOS_SUM), GOS_ERR_ARG);
  EXPECT_EQ(gos_reduce_local(&a, &b, 1, GOS_TYPE_COUNT, GOS_SUM), GOS_ERR_ARG);
  EXPECT_EQ(gos_reduce_local(&a, &b, 1, GOS_INT, GOS_OP_COUNT), GOS_ERR_ARG);
  EXPECT_EQ(gos_type_size(GOS_TYPE_COUNT), 0u);
}

TEST(TimeTest, WtimeIsMonotonicWithPositiveTick) {
  const double a = gos_wtime();
  std::this_thread::sleep_for(2ms);
  const double b = gos_wtime();
  EXPECT_GE(b - a, 0.002);
  EXPECT_GT(gos_wtick(), 0.0);
  EXPECT_LT(gos_wtick(), 0.01);
  EXPECT_STRNE(gos_error_string(GOS_ERR_TRUNCATE), gos_error_string(GOS_ERR_RANK));
}

}  // namespace
}  // namespace gos::bcs
