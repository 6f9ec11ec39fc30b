// Checkpoint chunks shipped with the primitives (gos/os/ckpt_ship.h), both ways: real prim
// nodes of one group over the default provider, in one process.
//   - Checkpoints: node 0 runs the inbox, as the coordinator does; more nodes ship at once than
//     the inbox has slots for, so nodes wait for slots; two shipments of one node share its
//     outbox.
//   - Restarts: node 0 ships ranks to several nodes at once, each running its restore inbox as
//     a nodeagent does; refusals, forged or damaged batches, a receiver that leaves and a
//     cancelled shipment end a shipment with an error, never a hang.
#include "gos/os/ckpt_ship.h"

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>

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
      BatchInbox::TakeFn take, BatchInbox::UpFn up = [](uint32_t) { return true; },
      std::chrono::milliseconds unfilled_limit = 2min) {
    StartInboxOn(0, kCheckpointRoute, std::move(take), std::move(up), unfilled_limit);
  }
  // Runs an inbox of `route` on node n until StopInbox.
  void StartInboxOn(uint32_t n, const ShipRoute& route, BatchInbox::TakeFn take,
                    BatchInbox::UpFn up = nullptr,
                    std::chrono::milliseconds unfilled_limit = 2min) {
    auto inbox = std::make_shared<BatchInbox>(nodes_[n].get(), route, Key(1), std::move(take),
                                              std::move(up), unfilled_limit);
    inbox_threads_.emplace_back([this, inbox] {
      while (!stop_) inbox->Poll(20ms);
    });
  }
  void StopInbox() {
    stop_ = true;
    for (auto& t : inbox_threads_) t.join();
    inbox_threads_.clear();
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
  std::vector<std::thread> inbox_threads_;
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

Status GoOn() { return OkStatus(); }

// Every shipment running in `ships` ends well.
void ExpectAllShipped(std::vector<std::future<Status>>& ships) {
  for (auto& s : ships) {
    Status st = s.get();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
}

CkptBatch Head(uint64_t job, uint64_t epoch) {
  CkptBatch b;
  b.job = job;
  b.epoch = epoch;
  return b;
}

// Chunk `index` (hash byte 0) of raw length `raw_len`.
CkptBatchChunk Chunk(uint8_t index, uint32_t raw_len) {
  CkptBatchChunk c;
  c.hash[0] = index;
  c.raw_len = raw_len;
  return c;
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
  std::vector<std::unique_ptr<BatchOutbox>> boxes;
  for (uint32_t n = 1; n <= kAgents; ++n) {
    boxes.push_back(std::make_unique<BatchOutbox>(nodes_[n].get(), kCheckpointRoute, Key(1)));
  }
  std::vector<std::future<Status>> ships;
  for (uint32_t n = 1; n <= kAgents; ++n) {
    ships.push_back(std::async(std::launch::async, [&, n] {
      BatchShipment s(boxes[n - 1].get(), 0, Head(n, 5), GoOn);
      for (uint8_t i = 0; i < kChunks; ++i) {
        GOS_RETURN_IF_ERROR(s.Add(Chunk(i, 1000u + i), Frame(n, i)));
        if (i == kChunks / 2) GOS_RETURN_IF_ERROR(s.Finish());  // a rank's end, then more
      }
      return s.Finish();
    }));
  }
  ExpectAllShipped(ships);
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

// Two jobs' epochs shipped from one node at once share its outbox: its one delivery event
// and its answers.
TEST_F(CkptShipTest, TwoShipmentsOfOneNodeShareItsOutbox) {
  Form(1);
  Received got;
  StartInbox([&](const CkptBatch& b) {
    std::lock_guard<std::mutex> lock(got.mu);
    for (const auto& c : b.chunks) {
      auto key = std::make_pair(b.job, c.hash[0]);
      if (got.chunks.count(key)) ++got.duplicates;
      got.chunks[key].assign(c.data.begin(), c.data.end());
    }
    return std::string();
  });
  BatchOutbox box(nodes_[1].get(), kCheckpointRoute, Key(1));
  std::vector<std::future<Status>> ships;
  for (uint64_t job : {uint64_t{1}, uint64_t{2}}) {
    ships.push_back(std::async(std::launch::async, [&, job] {
      BatchShipment s(&box, 0, Head(job, 1), GoOn);
      for (uint8_t i = 0; i < 100; ++i) {
        GOS_RETURN_IF_ERROR(s.Add(Chunk(i, 1), Frame(static_cast<uint32_t>(job), i)));
      }
      return s.Finish();
    }));
  }
  ExpectAllShipped(ships);
  std::lock_guard<std::mutex> lock(got.mu);
  EXPECT_EQ(got.duplicates, 0);
  ASSERT_EQ(got.chunks.size(), 200u);
  EXPECT_EQ((got.chunks[std::make_pair(uint64_t{2}, uint8_t{99})]), Frame(2, 99));
  EXPECT_TRUE(AllSlotsFree());
}

TEST_F(CkptShipTest, RefusedOrForgedBatchesFailTheShipmentOnly) {
  Form(3);
  std::atomic<int> taken{0};
  StartInbox([&](const CkptBatch& b) {
    ++taken;
    return b.job == 2 ? std::string("the store is full") : std::string();
  });
  BatchOutbox good(nodes_[1].get(), kCheckpointRoute, Key(1)),
      refused(nodes_[2].get(), kCheckpointRoute, Key(1)),
      forged(nodes_[3].get(), kCheckpointRoute, Key(9));
  auto ship = [](BatchOutbox* box, uint64_t job) {
    BatchShipment s(box, 0, Head(job, 1), GoOn);
    for (uint8_t i = 0; i < 60; ++i) {
      GOS_RETURN_IF_ERROR(s.Add(Chunk(i, 1), Frame(static_cast<uint32_t>(job), i)));
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
  // Nodes take slots as BatchOutbox does, and never fill them.
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
  BatchOutbox box(nodes_[1].get(), kCheckpointRoute, Key(1));
  std::atomic<bool> cancelled{false};
  auto ship = std::async(std::launch::async, [&] {
    BatchShipment s(&box, 0, Head(1, 1),
                    [&] { return cancelled ? CancelledError("the job was killed") : OkStatus(); });
    for (uint8_t i = 0; i < 200; ++i) {
      GOS_RETURN_IF_ERROR(s.Add(Chunk(i, 1), Frame(1, i)));
    }
    return s.Finish();
  });
  EXPECT_EQ(ship.wait_for(500ms), std::future_status::timeout) << "two batches, then no room";
  cancelled = true;
  ASSERT_EQ(ship.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(ship.get().code(), StatusCode::kCancelled);
}

// ---- Restarts: the coordinator (node 0) to the nodes --------------------------------------

CkptBatch RestoreHead(uint64_t job, uint32_t rank, uint64_t attempt) {
  CkptBatch b;
  b.kind = BatchKind::kRestore;
  b.job = job;
  b.epoch = 3;
  b.rank = rank;
  b.attempt = attempt;
  return b;
}

CkptBatchChunk RestoreChunk(uint8_t index, const std::string& file, uint64_t offset) {
  CkptBatchChunk c = Chunk(index, 1000u + index);
  c.file = file;
  c.offset = offset;
  return c;
}

struct Restored {
  std::mutex mu;
  // (node, rank, file, offset) -> frame
  std::map<std::tuple<uint32_t, uint32_t, std::string, uint64_t>, std::vector<uint8_t>> chunks;
  int duplicates = 0;
  int out_of_order = 0;
  std::map<std::pair<uint32_t, std::string>, uint64_t> next;  // (rank, file) -> next offset
};

TEST_F(CkptShipTest, RestartShipsRanksToFourNodesAtOnce) {
  constexpr uint32_t kAgents = 4;
  constexpr uint32_t kRanksPerNode = 2;
  constexpr uint8_t kChunks = 80;  // ~4.5 MiB a rank: several batches each
  Form(kAgents);
  Restored got;
  for (uint32_t n = 1; n <= kAgents; ++n) {
    StartInboxOn(n, kRestoreRoute, [&, n](const CkptBatch& b) {
      std::lock_guard<std::mutex> lock(got.mu);
      EXPECT_EQ(b.kind, BatchKind::kRestore);
      EXPECT_EQ(b.node, n) << "a batch names the node it is for";
      EXPECT_EQ(b.job, 7u);
      EXPECT_EQ(b.attempt, 5u);
      for (const auto& c : b.chunks) {
        auto key = std::make_tuple(n, b.rank, c.file, c.offset);
        if (got.chunks.count(key)) ++got.duplicates;
        got.chunks[key].assign(c.data.begin(), c.data.end());
        uint64_t& next = got.next[{b.rank, c.file}];
        if (c.offset != next) ++got.out_of_order;
        next = c.offset + c.raw_len;
      }
      return std::string();
    });
  }
  BatchOutbox box(nodes_[0].get(), kRestoreRoute, Key(1));
  std::vector<std::future<Status>> ships;
  for (uint32_t n = 1; n <= kAgents; ++n) {
    ships.push_back(std::async(std::launch::async, [&, n] {
      for (uint32_t k = 0; k < kRanksPerNode; ++k) {
        const uint32_t rank = n * 10 + k;
        BatchShipment s(&box, n, RestoreHead(7, rank, 5), GoOn);
        uint64_t off[2] = {0, 0};
        for (uint8_t i = 0; i < kChunks; ++i) {
          const int f = i < kChunks / 2 ? 0 : 1;
          const std::string file = f == 0 ? "pages-1.img" : "sub/core-1.img";
          GOS_RETURN_IF_ERROR(s.Add(RestoreChunk(i, file, off[f]), Frame(rank, i)));
          off[f] += 1000u + i;
        }
        GOS_RETURN_IF_ERROR(s.Finish());
      }
      return OkStatus();
    }));
  }
  ExpectAllShipped(ships);
  StopInbox();
  std::lock_guard<std::mutex> lock(got.mu);
  EXPECT_EQ(got.duplicates, 0);
  EXPECT_EQ(got.out_of_order, 0) << "a rank's batches are taken in order";
  ASSERT_EQ(got.chunks.size(), size_t{kAgents} * kRanksPerNode * kChunks);
  for (uint32_t n = 1; n <= kAgents; ++n) {
    for (uint32_t i = 0; i < kRestoreSlots; ++i) {
      EXPECT_EQ(nodes_[n]->Load(VarRestoreReady(i)), 0) << "node " << n << " slot " << i;
    }
    const uint32_t rank = n * 10 + 1;
    EXPECT_EQ((got.chunks[std::make_tuple(n, rank, std::string("pages-1.img"), uint64_t{1000})]),
              Frame(rank, 1));
  }
}

TEST_F(CkptShipTest, RestoreRefusalsForgeriesAndDamageEndTheShipmentOnly) {
  Form(1);
  std::atomic<int> taken{0};
  StartInboxOn(1, kRestoreRoute, [&](const CkptBatch& b) {
    ++taken;
    return b.rank == 7 ? "job 7 epoch 3 rank 7: file pages-1.img: chunk 00ff: content does not "
                         "match its hash"
                       : std::string();
  });
  auto ship = [](BatchOutbox* box, uint32_t rank, uint8_t chunks) {
    BatchShipment s(box, 1, RestoreHead(7, rank, 1), GoOn);
    Status st;
    for (uint8_t i = 0; i < chunks && st.ok(); ++i) {
      st = s.Add(RestoreChunk(i, "pages-1.img", 4096u * i), Frame(rank, i));
    }
    if (st.ok()) return s.Finish();
    s.Abandon().IgnoreError();  // every batch sent is answered before this returns
    return st;
  };
  BatchOutbox box(nodes_[0].get(), kRestoreRoute, Key(1));
  Status refused = ship(&box, 7, 200);
  EXPECT_EQ(refused.code(), StatusCode::kDataLoss) << refused.ToString();
  EXPECT_NE(refused.ToString().find("node 1 refused restore batch"), std::string::npos)
      << refused.ToString();
  EXPECT_LT(taken.load(), 10) << "a refusal stops the shipment early";
  Status fine = ship(&box, 8, 60);
  EXPECT_TRUE(fine.ok()) << fine.ToString();

  // Sealed with another key: refused before the node looks at it.
  const int before = taken;
  BatchOutbox forged(nodes_[0].get(), kRestoreRoute, Key(9));
  EXPECT_EQ(ship(&forged, 8, 10).code(), StatusCode::kDataLoss);
  EXPECT_EQ(taken.load(), before);

  // Damaged in the slot: a short batch, then one for another node, written by hand as the
  // outbox would (number 1000 and 1001 in slot 0).
  auto put = [&](const std::vector<uint8_t>& bytes, int64_t number) {
    ASSERT_TRUE(nodes_[0]
                    ->XferAndSignal(prim::NodeSet{1}, bytes.data(), bytes.size(), RestoreSlot(0),
                                    prim::kNoEvent, kEventRestoreSent)
                    .ok());
    ASSERT_TRUE(*nodes_[0]->WaitEvent(kEventRestoreSent, 5s));
    ASSERT_TRUE(nodes_[0]
                    ->XferAndSignal(prim::NodeSet{1}, &number, sizeof number, VarRestoreReady(0),
                                    kEventRestoreIn)
                    .ok());
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (nodes_[0]->Load(VarRestoreTaken(1, 0)) != -number &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(nodes_[0]->Load(VarRestoreTaken(1, 0)), -number) << "refused";
  };
  const std::vector<uint8_t> frame = Frame(1, 1);
  CkptBatch b = RestoreHead(7, 8, 1);
  b.node = 1;
  b.number = 1000;
  b.chunks.push_back(RestoreChunk(1, "pages-1.img", 0));
  b.chunks.back().data = frame;
  std::vector<uint8_t> bytes = EncodeCkptBatch(b, Key(1));
  std::vector<uint8_t> shorter(bytes.begin(), bytes.end() - 40);
  std::vector<uint8_t> zeros(kCkptSlotBytes, 0);  // the rest of the slot: no old bytes
  ASSERT_TRUE(nodes_[0]
                  ->XferAndSignal(prim::NodeSet{1}, zeros.data(), zeros.size(), RestoreSlot(0),
                                  prim::kNoEvent, kEventRestoreSent)
                  .ok());
  ASSERT_TRUE(*nodes_[0]->WaitEvent(kEventRestoreSent, 5s));
  put(shorter, 1000);
  b.node = 2;
  b.number = 1001;
  put(EncodeCkptBatch(b, Key(1)), 1001);
  EXPECT_EQ(taken.load(), before) << "nothing damaged reaches the node's writer";
}

TEST_F(CkptShipTest, RestoreToAReceiverThatLeavesIsStuckOrIsCancelledEnds) {
  Form(3);
  // No restore inbox runs: the batches are never taken.
  BatchOutbox box(nodes_[0].get(), kRestoreRoute, Key(1));
  auto ship = [](BatchOutbox* b, uint32_t to, ShipCheck check) {
    return std::async(std::launch::async, [b, to, check] {
      BatchShipment s(b, to, RestoreHead(7, to, 1), check);
      for (uint8_t i = 0; i < 200; ++i) {
        GOS_RETURN_IF_ERROR(s.Add(RestoreChunk(i, "pages-1.img", 4096u * i), Frame(to, i)));
      }
      return s.Finish();
    });
  };
  // The receiver leaves (the coordinator sees it down): the shipment ends at once.
  auto left = ship(&box, 1, GoOn);
  EXPECT_EQ(left.wait_for(500ms), std::future_status::timeout) << "two batches, then no room";
  box.DropReceiver(1);
  ASSERT_EQ(left.wait_for(2s), std::future_status::ready);
  Status st = left.get();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.ToString().find("node 1 left"), std::string::npos) << st.ToString();

  // The restart is killed.
  std::atomic<bool> killed{false};
  auto cancelled = ship(&box, 2, [&] { return killed ? CancelledError("killed") : OkStatus(); });
  EXPECT_EQ(cancelled.wait_for(500ms), std::future_status::timeout);
  killed = true;
  ASSERT_EQ(cancelled.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(cancelled.get().code(), StatusCode::kCancelled);

  // A receiver that is up but takes nothing: the patience runs out, naming it.
  BatchOutbox impatient(nodes_[0].get(), kRestoreRoute, Key(1), 300ms);
  Status stuck = ship(&impatient, 3, GoOn).get();
  EXPECT_EQ(stuck.code(), StatusCode::kDeadlineExceeded) << stuck.ToString();
  EXPECT_NE(stuck.ToString().find("node 3 took no restore batch"), std::string::npos)
      << stuck.ToString();
}

}  // namespace
}  // namespace gos::os
