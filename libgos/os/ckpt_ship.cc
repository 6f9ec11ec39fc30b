#include "gos/os/ckpt_ship.h"

#include <algorithm>
#include <thread>
#include <tuple>

#include "gos/log.h"

namespace gos::os {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Batches a sender may have in one receiver at once: one being taken while the next is filled.
constexpr size_t kMaxInFlight = 2;
static_assert(kRestoreSlots >= kMaxInFlight);

// The checkpoint inbox has one receiver, the coordinator: a node's answers need no receiver.
uint64_t CkptTakenOf(uint32_t /*receiver*/, uint32_t i) { return VarCkptTaken(i); }

std::string Ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

// A node's shipments of checkpoint batches take turns (one delivery event); the coordinator
// ships restore batches to every node at once.
const ShipRoute kCheckpointRoute = {.kind = BatchKind::kCheckpoint,
                                    .what = "checkpoint",
                                    .slots = kCkptInboxSlots,
                                    .shared = true,
                                    .slot = &CkptSlot,
                                    .owner = &VarCkptOwner,
                                    .ready = &VarCkptReady,
                                    .taken = &CkptTakenOf,
                                    .ready_event = kEventCkptIn,
                                    .taken_event = kEventCkptTaken,
                                    .sent_event = kEventCkptSent,
                                    .sent_lanes = 1};
const ShipRoute kRestoreRoute = {.kind = BatchKind::kRestore,
                                 .what = "restore",
                                 .slots = kRestoreSlots,
                                 .shared = false,
                                 .slot = &RestoreSlot,
                                 .owner = nullptr,
                                 .ready = &VarRestoreReady,
                                 .taken = &VarRestoreTaken,
                                 .ready_event = kEventRestoreIn,
                                 .taken_event = kEventRestoreTaken,
                                 .sent_event = kEventRestoreSent,
                                 .sent_lanes = kRestoreSendLanes};

BatchOutbox::BatchOutbox(prim::Node* node, const ShipRoute& route, std::vector<uint8_t> key,
                         std::chrono::milliseconds patience)
    : node_(node),
      route_(route),
      key_(std::move(key)),
      patience_(patience),
      lanes_(std::max<uint32_t>(route.sent_lanes, 1)) {}

std::string BatchOutbox::Sender() const { return Receiver(node_->id()); }

std::string BatchOutbox::Receiver(uint32_t to) {
  return to == 0 ? "the coordinator" : "node " + std::to_string(to);
}

size_t BatchOutbox::InFlightTo(uint32_t to) const {
  size_t n = 0;
  for (const auto& [lane, number] : in_flight_) n += lane.first == to;
  return n;
}

void BatchOutbox::CollectLocked() {
  // One signal per answer, but answers may come in any order: look at every slot in flight.
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    const auto [to, slot] = it->first;
    const int64_t answer = node_->Load(route_.taken(to, slot));
    const uint64_t number = it->second;
    if (answer != static_cast<int64_t>(number) && answer != -static_cast<int64_t>(number)) {
      ++it;
      continue;
    }
    if (forgotten_.erase(number) == 0) {
      if (answer > 0) {
        taken_.insert(number);
      } else {
        failed_[number] =
            DataLossError(Receiver(to) + " refused " + route_.what + " batch " +
                          std::to_string(number) + " of " + Sender() + " (see its log)");
      }
    }
    it = in_flight_.erase(it);
  }
}

Status BatchOutbox::AwaitAnswers(std::unique_lock<std::mutex>& lock,
                                 std::chrono::milliseconds timeout) {
  if (collecting_) {
    answered_.wait_for(lock, timeout);
    return OkStatus();
  }
  collecting_ = true;
  lock.unlock();
  auto got = node_->WaitEvent(route_.taken_event, timeout);
  lock.lock();
  collecting_ = false;
  CollectLocked();
  answered_.notify_all();
  return got.ok() ? OkStatus() : got.status();
}

Status BatchOutbox::CheckUnlocked(std::unique_lock<std::mutex>& lock, const ShipCheck& check) {
  lock.unlock();
  Status st = check ? check() : OkStatus();
  lock.lock();
  return st;
}

StatusOr<uint32_t> BatchOutbox::TakeSlot(std::unique_lock<std::mutex>& lock, uint32_t to,
                                         const ShipCheck& check) {
  if (!route_.shared) {
    // This sender alone fills the receiver's slots: one not in flight is free.
    for (uint32_t i = 0; i < route_.slots; ++i) {
      if (!in_flight_.count({to, i})) return i;
    }
    return InternalError("no free " + std::string(route_.what) + " slot of " + Receiver(to));
  }
  const auto since = SteadyClock::now();
  for (int round = 0;; ++round) {
    // Start at a different slot per node, so that nodes shipping at once rarely collide.
    for (uint32_t k = 0; k < route_.slots; ++k) {
      const uint32_t i = static_cast<uint32_t>((node_->id() * kMaxInFlight + k) % route_.slots);
      // Ours until its answer is collected, even if the receiver has freed it already.
      if (in_flight_.count({to, i})) continue;
      // The receiver is the sequencer of its variables: of two senders, one gets the slot.
      lock.unlock();
      auto mine = node_->CompareAndWrite(prim::NodeSet{to}, route_.owner(i), prim::CompareOp::kEq,
                                         0, route_.owner(i), static_cast<int64_t>(node_->id()));
      lock.lock();
      if (!mine.ok()) return mine.status();
      if (*mine) return i;
    }
    GOS_RETURN_IF_ERROR(CheckUnlocked(lock, check));
    if (SteadyClock::now() - since > patience_) {
      return DeadlineExceededError("no slot of " + Receiver(to) + "'s " + route_.what +
                                   " inbox came free in " + Ms(patience_));
    }
    // Every slot is someone's: try again shortly (sooner if one of ours comes back).
    if (!in_flight_.empty()) {
      GOS_RETURN_IF_ERROR(AwaitAnswers(lock, std::chrono::milliseconds(2)));
    } else {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 + round, 10)));
      lock.lock();
    }
  }
}

Status BatchOutbox::Deliver(uint32_t to, uint32_t slot, std::vector<uint8_t> bytes,
                            const ShipCheck& check) {
  const auto deadline = SteadyClock::now() + patience_;
  size_t index = lanes_.size();
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      for (size_t i = 0; i < lanes_.size() && index == lanes_.size(); ++i) {
        if (!lanes_[i].busy) index = i;
      }
      if (index != lanes_.size()) break;
      GOS_RETURN_IF_ERROR(CheckUnlocked(lock, check));
      if (SteadyClock::now() >= deadline) {
        return DeadlineExceededError("no " + std::string(route_.what) + " batch of " + Sender() +
                                     " was delivered in " + Ms(patience_));
      }
      lane_free_.wait_for(lock, std::chrono::milliseconds(100));
    }
    lanes_[index].busy = true;
  }
  SendLane& lane = lanes_[index];
  const prim::EventId event = route_.sent_event + static_cast<prim::EventId>(index);
  Status st = node_->XferAndSignal(prim::NodeSet{to}, bytes.data(), bytes.size(), route_.slot(slot),
                                   prim::kNoEvent, event);
  if (st.ok()) ++lane.pending;
  // Signals of deliveries an earlier call gave up on come first; once none is pending, every
  // batch sent on this lane is there, this one too.
  while (st.ok() && lane.pending > 0) {
    auto got = node_->TestEvent(
        event, std::min(deadline, SteadyClock::now() + std::chrono::milliseconds(100)));
    if (!got.ok() || *got) {
      --lane.pending;
      // A failed delivery that is not this batch's (one is still pending) is no concern here.
      st = got.ok() || lane.pending > 0 ? OkStatus() : got.status();
      continue;
    }
    st = check ? check() : OkStatus();
    if (st.ok() && SteadyClock::now() >= deadline) {
      st = DeadlineExceededError("a " + std::string(route_.what) + " batch was not delivered to " +
                                 Receiver(to) + " in " + Ms(patience_));
    }
    if (!st.ok()) lane.undelivered.push_back(std::move(bytes));  // the primitives may read it
  }
  if (lane.pending == 0) lane.undelivered.clear();
  std::lock_guard<std::mutex> lock(mu_);
  lane.busy = false;
  lane_free_.notify_one();
  return st;
}

StatusOr<uint64_t> BatchOutbox::Send(uint32_t to, CkptBatch b, const ShipCheck& check) {
  if (b.kind != route_.kind) {
    return InvalidArgumentError(std::string("not a ") + route_.what + " batch");
  }
  // The nodeagent's end: the sender of a checkpoint batch, the receiver of a restore batch.
  b.node = b.kind == BatchKind::kCheckpoint ? node_->id() : to;
  std::unique_lock<std::mutex> lock(mu_);
  // Room: at most kMaxInFlight batches in the receiver, and a free slot.
  auto since = SteadyClock::now();
  while (InFlightTo(to) >= kMaxInFlight) {
    GOS_RETURN_IF_ERROR(CheckUnlocked(lock, check));
    if (SteadyClock::now() - since > patience_) {
      return DeadlineExceededError(Receiver(to) + " took no " + route_.what + " batch of " +
                                   Sender() + " in " + Ms(patience_));
    }
    const size_t before = InFlightTo(to);
    GOS_RETURN_IF_ERROR(AwaitAnswers(lock, std::chrono::milliseconds(100)));
    if (InFlightTo(to) < before) since = SteadyClock::now();
  }
  GOS_ASSIGN_OR_RETURN(const uint32_t slot, TakeSlot(lock, to, check));
  b.number = next_number_++;
  in_flight_[{to, slot}] = b.number;
  lock.unlock();

  std::vector<uint8_t> bytes = EncodeCkptBatch(b, key_);
  Status st;
  if (bytes.size() > kCkptSlotBytes) {
    st = InternalError("a " + std::string(route_.what) + " batch of " +
                       std::to_string(bytes.size()) + " bytes does not fit a slot");
  } else {
    st = Deliver(to, slot, std::move(bytes), check);
  }
  if (st.ok()) {
    // The batch is all there: now the receiver may read it.
    const int64_t number = static_cast<int64_t>(b.number);
    st = node_->XferAndSignal(prim::NodeSet{to}, &number, sizeof number, route_.ready(slot),
                              route_.ready_event);
  }
  if (!st.ok()) {
    // A shared slot stays ours until the receiver sees this node gone or gives it back; the
    // receiver refuses what it cannot authenticate, so a half-written batch is harmless.
    lock.lock();
    in_flight_.erase({to, slot});
    std::string what = "shipping " + std::string(route_.what) + " chunks of job " +
                       std::to_string(b.job) + " epoch " + std::to_string(b.epoch);
    if (b.kind == BatchKind::kRestore) what += " rank " + std::to_string(b.rank);
    return st.WithContext(what + " to " + Receiver(to));
  }
  return b.number;
}

Status BatchOutbox::WaitTaken(const std::set<uint64_t>& numbers, const ShipCheck& check) {
  std::unique_lock<std::mutex> lock(mu_);
  auto since = SteadyClock::now();
  Status st;
  for (;;) {
    bool all = true;
    std::string waiting_for;
    for (uint64_t n : numbers) {
      if (auto f = failed_.find(n); f != failed_.end()) {
        if (st.ok()) st = f->second;
      } else if (!taken_.count(n)) {
        all = false;
        for (const auto& [lane, number] : in_flight_) {
          if (number == n) waiting_for = Receiver(lane.first);
        }
      }
    }
    if (all) break;
    if (Status c = CheckUnlocked(lock, check); !c.ok()) {
      st = c;
      break;
    }
    if (SteadyClock::now() - since > patience_) {
      st =
          DeadlineExceededError((waiting_for.empty() ? "the receiver" : waiting_for) + " took no " +
                                route_.what + " batch of " + Sender() + " in " + Ms(patience_));
      break;
    }
    const size_t before = in_flight_.size();
    if (Status c = AwaitAnswers(lock, std::chrono::milliseconds(100)); !c.ok()) {
      st = c;
      break;
    }
    if (in_flight_.size() < before) since = SteadyClock::now();
  }
  DropLocked(numbers);
  return st;
}

Status BatchOutbox::Refused(const std::set<uint64_t>& numbers) {
  std::lock_guard<std::mutex> lock(mu_);
  CollectLocked();
  for (uint64_t n : numbers) {
    if (auto f = failed_.find(n); f != failed_.end()) return f->second;
  }
  return OkStatus();
}

void BatchOutbox::Forget(const std::set<uint64_t>& numbers) {
  std::lock_guard<std::mutex> lock(mu_);
  DropLocked(numbers);
}

void BatchOutbox::DropLocked(const std::set<uint64_t>& numbers) {
  for (uint64_t n : numbers) {
    if (taken_.erase(n) + failed_.erase(n) > 0) continue;
    // Not answered yet: CollectLocked drops the answer when it comes.
    for (const auto& [lane, number] : in_flight_) {
      if (number == n) forgotten_.insert(n);
    }
  }
}

void BatchOutbox::DropReceiver(uint32_t to) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->first.first != to) {
      ++it;
      continue;
    }
    const uint64_t number = it->second;
    if (forgotten_.erase(number) == 0) {
      failed_[number] = UnavailableError(Receiver(to) + " left before it took " + route_.what +
                                         " batch " + std::to_string(number));
    }
    it = in_flight_.erase(it);
  }
  answered_.notify_all();
}

BatchShipment::BatchShipment(BatchOutbox* box, uint32_t to, const CkptBatch& head, ShipCheck check)
    : box_(box), to_(to), check_(std::move(check)), batch_(head) {
  batch_.chunks.clear();
  empty_bytes_ = CkptBatchBytes(batch_);
  batch_bytes_ = empty_bytes_;
}

BatchShipment::~BatchShipment() {
  if (!sent_.empty()) box_->Forget(sent_);
}

Status BatchShipment::Add(CkptBatchChunk chunk, std::vector<uint8_t> frame) {
  chunk.data = {};
  const size_t add = CkptBatchChunkBytes(batch_.kind, chunk) + frame.size();
  if (!frames_.empty() && batch_bytes_ + add > kCkptSlotBytes) GOS_RETURN_IF_ERROR(Flush());
  frames_.push_back(std::move(frame));
  chunk.data = frames_.back();
  batch_.chunks.push_back(std::move(chunk));
  batch_bytes_ += add;
  return OkStatus();
}

Status BatchShipment::Flush() {
  if (frames_.empty()) return OkStatus();
  GOS_ASSIGN_OR_RETURN(uint64_t number, box_->Send(to_, batch_, check_));
  sent_.insert(number);
  ++batches_;
  batch_.chunks.clear();
  frames_.clear();
  batch_bytes_ = empty_bytes_;
  // No use filling more batches the receiver will refuse.
  return box_->Refused(sent_);
}

Status BatchShipment::Finish() {
  GOS_RETURN_IF_ERROR(Flush());
  Status st = box_->WaitTaken(sent_, check_);
  sent_.clear();
  return st;
}

Status BatchShipment::Abandon() {
  batch_.chunks.clear();
  frames_.clear();
  batch_bytes_ = empty_bytes_;
  Status st = box_->WaitTaken(sent_, check_);
  sent_.clear();
  return st;
}

BatchInbox::BatchInbox(prim::Node* node, const ShipRoute& route, std::vector<uint8_t> key,
                       TakeFn take, UpFn up, std::chrono::milliseconds unfilled_limit)
    : node_(node),
      route_(route),
      key_(std::move(key)),
      take_(std::move(take)),
      up_(std::move(up)),
      unfilled_limit_(unfilled_limit) {}

void BatchInbox::Poll(std::chrono::milliseconds timeout) {
  (void)node_->WaitEvent(route_.ready_event, timeout);
  const auto now = SteadyClock::now();
  std::vector<std::tuple<int64_t, uint32_t, uint32_t>> ready;  // number, slot, sender
  for (uint32_t i = 0; i < route_.slots; ++i) {
    if (!route_.shared) {
      // The sender XFERs the number only once the batch is all here.
      if (const int64_t number = node_->Load(route_.ready(i)); number != 0) {
        ready.emplace_back(number, i, 0);
      }
      continue;
    }
    const int64_t owner = node_->Load(route_.owner(i));
    const int64_t number = owner == 0 ? 0 : node_->Load(route_.ready(i));
    if (owner == 0 || number != 0) {
      held_[i] = {};
      if (number != 0) ready.emplace_back(number, i, static_cast<uint32_t>(owner));
      continue;
    }
    // Taken and not filled (yet): its node may have died, or given up, on the way.
    if (held_[i] == SteadyClock::time_point{}) held_[i] = now;
    const bool up = !up_ || up_(static_cast<uint32_t>(owner));
    if (!up || now - held_[i] > unfilled_limit_) {
      GOS_LOG(kWarn, "coordinator") << route_.what << " inbox slot " << i << " given back: node "
                                    << owner << (up ? " did not fill it in time" : " is down");
      node_->Store(route_.owner(i), 0);
      held_[i] = {};
    }
  }
  // The oldest first: a sender's batches go in order.
  std::sort(ready.begin(), ready.end());
  for (const auto& [number, slot, sender] : ready) Take(slot, sender, number);
}

void BatchInbox::Take(uint32_t slot, uint32_t sender, int64_t number) {
  const std::span<const uint8_t> bytes(
      reinterpret_cast<const uint8_t*>(node_->global_memory().data()) + route_.slot(slot),
      kCkptSlotBytes);
  auto b = DecodeCkptBatch(route_.kind, bytes, key_);
  // The batch names the nodeagent's end: its sender, or this node for a restore batch.
  const uint32_t agent = route_.kind == BatchKind::kCheckpoint ? sender : node_->id();
  std::string problem;
  if (!b.ok()) {
    problem = b.status().ToString();
  } else if (b->node != agent || static_cast<int64_t>(b->number) != number) {
    problem = "batch " + std::to_string(b->number) + " for node " + std::to_string(b->node) +
              " in a slot node " + std::to_string(sender) + " filled as batch " +
              std::to_string(number);
  } else {
    problem = take_(*b);
  }
  if (!problem.empty()) {
    GOS_LOG(kWarn, node_->id() == 0 ? "coordinator" : "nodeagent")
        << route_.what << " slot " << slot << " from node " << sender << ": batch " << number
        << " refused: " << problem;
  }
  // Free the slot, then answer (negative: refused): the sender may fill the slot again at once.
  node_->Store(route_.ready(slot), 0);
  if (route_.shared) node_->Store(route_.owner(slot), 0);
  const int64_t answer = problem.empty() ? number : -number;
  node_
      ->XferAndSignal(prim::NodeSet{sender}, &answer, sizeof answer,
                      route_.taken(node_->id(), slot), route_.taken_event)
      .IgnoreError();  // a sender that is gone is the strobe's business
}

}  // namespace gos::os
