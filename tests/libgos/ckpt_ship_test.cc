// Checkpoint chunks shipped with the primitives (gos/os/ckpt_ship.h): real prim nodes of one
// group (node 0 runs the inbox, as the coordinator does) over the default provider, in one
// process. More nodes ship at once than the inbox has slots for, so nodes wait for slots.
#include "gos/os/ckpt_ship.h"

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "gos/prim/bootstrap.h"
#include "gtest/gtest.h"

namespace gos::os {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> Key(uint8_t seed) { return std::vector<uint8_t>(32, seed); }

class CkptShipTest : public ::testing::Test {
 protected:
  // Node 0 and `agents` more.
  void Form(uint32_t agents) {
    prim::BootstrapOptions bo;
    bo.group_size = agents + 1;
    auto server = prim::BootstrapServer::Start(bo);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    std::vector<std::future<StatusOr<std::unique_ptr<prim::Node>>>> joins;
    for (uint32_t i = 0; i <= agents; ++i) {
      joins.push_back(std::async(std::launch::async, [this, i] {
        prim::NodeOptions no;
        no.bootstrap = server_->address();
        no.requested_id = i;
        no.global_memory_bytes = kGlobalMemoryBytes;
        return prim::Node::Join(no);
      }));
    }
    for (auto& j : joins) {
      auto node = j.get();
      ASSERT_TRUE(node.ok()) << node.status().ToString();
      nodes_.push_back(std::move(*node));
    }
  }
  // Runs an inbox on node 0 until StopInbox.
  void StartInbox(
      CkptInbox::TakeFn take, CkptInbox::UpFn up = [](uint32_t) { return true; },
      std::chrono::milliseconds unfilled_limit = 2min) {
    inbox_ = std::make_unique<CkptInbox>(nodes_[0].get(), Key(1), std::move(take), std::move(up),
                                         unfilled_limit);
    inbox_thread_ = std::thread([this] {
      while (!stop_) inbox_->Poll(20ms);
    });
  }
  void StopInbox() {
    stop_ = true;
    if (inbox_thread_.joinable()) inbox_thread_.join();
  }
  void TearDown() override {
    StopInbox();
    for (auto& n : nodes_) n->Leave();
    if (server_) server_->Stop();
  }
  bool AllSlotsFree() const {
    for (uint32_t i = 0; i < kCkptInboxSlots; ++i) {
      if (nodes_[0]->Load(VarCkptOwner(i)) != 0) return false;
    }
    return true;
  }

  std::unique_ptr<prim::BootstrapServer> server_;
  std::vector<std::unique_ptr<prim::Node>> nodes_;
  std::unique_ptr<CkptInbox> inbox_;
  std::thread inbox_thread_;
  std::atomic<bool> stop_{false};
};

struct Received {
  std::mutex mu;
  std::map<std::pair<uint64_t, uint8_t>, std::vector<uint8_t>> chunks;  // (job, id) -> data
  int duplicates = 0;
};

// A chunk of node n: hash byte 0 = its index, data of a length and content it can be told by.
std::vector<uint8_t> Frame(uint32_t node, uint8_t index) {
  std::vector<uint8_t> f(40000 + 5000 * index + node);
  for (size_t k = 0; k < f.size(); ++k) f[k] = static_cast<uint8_t>(node * 31 + index + k);
  return f;
}

TEST_F(CkptShipTest, SixNodesShipAtOnceAndEveryChunkArrivesOnce) {
  constexpr uint32_t kAgents = 6;  // 2 batches in flight each: 12 wanted, 8 slots
  constexpr uint8_t kChunks = 120;
  Form(kAgents);
  Received got;
  StartInbox([&](const CkptBatch& b) {
    std::lock_guard<std::mutex> lock(got.mu);
    EXPECT_EQ(b.job, b.node) << "each node ships its own job";
    EXPECT_EQ(b.epoch, 5u);
    for (const auto& c : b.chunks) {
      auto key = std::make_pair(b.job, c.hash[0]);
      if (got.chunks.count(key)) ++got.duplicates;
      got.chunks[key].assign(c.data.begin(), c.data.end());
      EXPECT_EQ(c.raw_len, 1000u + c.hash[0]);
    }
    return std::string();
  });
  std::vector<std::unique_ptr<CkptOutbox>> boxes;
  for (uint32_t n = 1; n <= kAgents; ++n) {
    boxes.push_back(std::make_unique<CkptOutbox>(nodes_[n].get(), Key(1)));
  }
  std::vector<std::future<Status>> ships;
  for (uint32_t n = 1; n <= kAgents; ++n) {
    ships.push_back(std::async(std::launch::async, [&, n] {
      CkptShipment s(boxes[n - 1].get(), n, 5, [] { return false; });
      for (uint8_t i = 0; i < kChunks; ++i) {
        std::array<uint8_t, 32> hash{};
        hash[0] = i;
        GOS_RETURN_IF_ERROR(s.Add(hash, 1000u + i, Frame(n, i)));
        if (i == kChunks / 2) GOS_RETURN_IF_ERROR(s.Finish());  // a rank's end, then more
      }
      return s.Finish();
    }));
  }
  for (auto& s : ships) {
    Status st = s.get();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  std::lock_guard<std::mutex> lock(got.mu);
  EXPECT_EQ(got.duplicates, 0);
  ASSERT_EQ(got.chunks.size(), size_t{kAgents} * kChunks);
  for (uint32_t n = 1; n <= kAgents; ++n) {
    for (uint8_t i = 0; i < kChunks; ++i) {
      EXPECT_EQ(got.chunks[std::make_pair(uint64_t{n}, i)], Frame(n, i))
          << "node " << n << " chunk " << int{i};
    }
  }
  EXPECT_TRUE(AllSlotsFree());
}

TEST_F(CkptShipTest, RefusedOrForgedBatchesFailTheShipmentOnly) {
  Form(3);
  std::atomic<int> taken{0};
  StartInbox([&](const CkptBatch& b) {
    ++taken;
    return b.job == 2 ? std::string("the store is full") : std::string();
  });
  CkptOutbox good(nodes_[1].get(), Key(1)), refused(nodes_[2].get(), Key(1)),
      forged(nodes_[3].get(), Key(9));
  auto ship = [](CkptOutbox* box, uint64_t job) {
    CkptShipment s(box, job, 1, [] { return false; });
    for (uint8_t i = 0; i < 60; ++i) {
      std::array<uint8_t, 32> hash{};
      hash[0] = i;
      GOS_RETURN_IF_ERROR(s.Add(hash, 1, Frame(static_cast<uint32_t>(job), i)));
    }
    return s.Finish();
  };
  Status st1 = ship(&good, 1), st2 = ship(&refused, 2), st3 = ship(&forged, 3);
  EXPECT_TRUE(st1.ok()) << st1.ToString();
  EXPECT_EQ(st2.code(), StatusCode::kDataLoss) << st2.ToString();
  EXPECT_NE(st2.ToString().find("refused"), std::string::npos) << st2.ToString();
  // A batch sealed with another key never reaches the store.
  EXPECT_EQ(st3.code(), StatusCode::kDataLoss) << st3.ToString();
  int before = taken;
  EXPECT_TRUE(ship(&good, 1).ok()) << "the inbox still works";
  EXPECT_GT(taken, before);
  EXPECT_TRUE(AllSlotsFree());
}

TEST_F(CkptShipTest, SlotsTakenAndNeverFilledAreGivenBack) {
  Form(2);
  std::atomic<bool> node2_up{true};
  StartInbox([](const CkptBatch&) { return std::string(); },
             [&](uint32_t node) { return node != 2 || node2_up.load(); }, 300ms);
  // Nodes take slots as CkptOutbox does, and never fill them.
  auto take = [&](uint32_t node, uint32_t slot) {
    auto mine =
        nodes_[node]->CompareAndWrite(prim::NodeSet{0}, VarCkptOwner(slot), prim::CompareOp::kEq, 0,
                                      VarCkptOwner(slot), static_cast<int64_t>(node));
    ASSERT_TRUE(mine.ok() && *mine) << "slot " << slot;
  };
  take(1, 0);
  take(2, 1);
  take(2, 2);
  // Node 2 "dies": its slots come back at the next poll; node 1's only after the limit.
  node2_up = false;
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(nodes_[0]->Load(VarCkptOwner(1)), 0);
  EXPECT_EQ(nodes_[0]->Load(VarCkptOwner(2)), 0);
  EXPECT_EQ(nodes_[0]->Load(VarCkptOwner(0)), 1);
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(AllSlotsFree());
}

TEST_F(CkptShipTest, WaitingForRoomEndsWhenTheJobIsCancelled) {
  Form(1);
  // No inbox runs: the batches sent are never taken.
  CkptOutbox box(nodes_[1].get(), Key(1));
  std::atomic<bool> cancelled{false};
  auto ship = std::async(std::launch::async, [&] {
    CkptShipment s(&box, 1, 1, [&] { return cancelled.load(); });
    for (uint8_t i = 0; i < 200; ++i) {
      std::array<uint8_t, 32> hash{};
      hash[0] = i;
      GOS_RETURN_IF_ERROR(s.Add(hash, 1, Frame(1, i)));
    }
    return s.Finish();
  });
  EXPECT_EQ(ship.wait_for(500ms), std::future_status::timeout) << "two batches, then no room";
  cancelled = true;
  ASSERT_EQ(ship.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(ship.get().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace gos::os
