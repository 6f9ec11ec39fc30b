#include "gos/os/ckpt_ship.h"

#include <algorithm>
#include <thread>

#include "gos/log.h"

namespace gos::os {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Batches a node may have in the inbox at once: one being stored while the next is filled.
constexpr size_t kMaxInFlight = 2;

}  // namespace

CkptOutbox::CkptOutbox(prim::Node* node, std::vector<uint8_t> key,
                       std::chrono::milliseconds patience)
    : node_(node), key_(std::move(key)), patience_(patience) {}

Status CkptOutbox::CollectTaken(std::chrono::milliseconds timeout) {
  auto got = node_->WaitEvent(kEventCkptTaken, timeout);
  if (!got.ok()) return got.status();
  // One signal per answer, but answers may come in any order: look at every slot in flight.
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    const int64_t answer = node_->Load(VarCkptTaken(it->first));
    const uint64_t number = it->second;
    if (answer != static_cast<int64_t>(number) && answer != -static_cast<int64_t>(number)) {
      ++it;
      continue;
    }
    if (!forgotten_.erase(number)) (answer > 0 ? taken_ : refused_).insert(number);
    it = in_flight_.erase(it);
  }
  return OkStatus();
}

Status CkptOutbox::WaitDelivered(SteadyClock::time_point deadline,
                                 const std::function<bool()>& cancelled) {
  // Signals of deliveries an earlier call gave up on come first; the last one is this batch's.
  Status last = OkStatus();
  while (sent_pending_ > 0) {
    auto got = node_->TestEvent(
        kEventCkptSent, std::min(deadline, SteadyClock::now() + std::chrono::milliseconds(100)));
    if (!got.ok() || *got) {
      --sent_pending_;
      last = got.ok() ? OkStatus() : got.status();
      continue;
    }
    if (cancelled()) return CancelledError("the job was killed");
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceededError("a checkpoint batch was not delivered to the coordinator in " +
                                   std::to_string(patience_.count()) + " ms");
    }
  }
  return last;
}

StatusOr<uint64_t> CkptOutbox::Send(CkptBatch b, const std::function<bool()>& cancelled) {
  std::lock_guard<std::mutex> lock(mu_);
  b.node = node_->id();
  // Room: at most kMaxInFlight batches of this node in the inbox, and a free slot.
  auto since = SteadyClock::now();
  auto waited_too_long = [&] { return SteadyClock::now() - since > patience_; };
  while (in_flight_.size() >= kMaxInFlight) {
    if (cancelled()) return CancelledError("the job was killed");
    if (waited_too_long()) {
      return DeadlineExceededError("the coordinator took no checkpoint batch of node " +
                                   std::to_string(node_->id()) + " in " +
                                   std::to_string(patience_.count()) + " ms");
    }
    const size_t before = in_flight_.size();
    GOS_RETURN_IF_ERROR(CollectTaken(std::chrono::milliseconds(100)));
    if (in_flight_.size() < before) since = SteadyClock::now();
  }
  uint32_t slot = kCkptInboxSlots;
  for (int round = 0; slot == kCkptInboxSlots; ++round) {
    // Start at a different slot per node, so that nodes shipping at once rarely collide.
    for (uint32_t k = 0; k < kCkptInboxSlots; ++k) {
      const uint32_t i = (node_->id() * kMaxInFlight + k) % kCkptInboxSlots;
      if (in_flight_.count(i)) continue;
      GOS_ASSIGN_OR_RETURN(
          bool mine, node_->CompareAndWrite(prim::NodeSet{0}, VarCkptOwner(i), prim::CompareOp::kEq,
                                            0, VarCkptOwner(i), static_cast<int64_t>(node_->id())));
      if (mine) {
        slot = i;
        break;
      }
    }
    if (slot != kCkptInboxSlots) break;
    if (cancelled()) return CancelledError("the job was killed");
    if (waited_too_long()) {
      return DeadlineExceededError("no slot of the coordinator's checkpoint inbox came free in " +
                                   std::to_string(patience_.count()) + " ms");
    }
    // Every slot is someone's: try again shortly (sooner if one of ours comes back).
    if (!in_flight_.empty()) {
      GOS_RETURN_IF_ERROR(CollectTaken(std::chrono::milliseconds(2)));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 + round, 10)));
    }
  }
  b.number = next_number_++;
  std::vector<uint8_t> bytes = EncodeCkptBatch(b, key_);
  Status st;
  if (bytes.size() > kCkptSlotBytes) {
    st = InternalError("a checkpoint batch of " + std::to_string(bytes.size()) +
                       " bytes does not fit an inbox slot");
  } else {
    st = node_->XferAndSignal(prim::NodeSet{0}, bytes.data(), bytes.size(), CkptSlot(slot),
                              prim::kNoEvent, kEventCkptSent);
    if (st.ok()) {
      ++sent_pending_;
      st = WaitDelivered(SteadyClock::now() + patience_, cancelled);
    }
  }
  if (st.ok()) {
    // The batch is all there: now the coordinator may read it.
    const int64_t number = static_cast<int64_t>(b.number);
    st = node_->XferAndSignal(prim::NodeSet{0}, &number, sizeof number, VarCkptReady(slot),
                              kEventCkptIn);
  }
  if (!st.ok()) {
    // The slot stays ours until the coordinator sees this node gone or gives it back; the
    // store refuses what it cannot authenticate, so a half-written batch is harmless.
    return st.WithContext("shipping checkpoint chunks of job " + std::to_string(b.job) + " epoch " +
                          std::to_string(b.epoch));
  }
  in_flight_[slot] = b.number;
  return b.number;
}

Status CkptOutbox::WaitTaken(const std::set<uint64_t>& numbers,
                             const std::function<bool()>& cancelled) {
  std::lock_guard<std::mutex> lock(mu_);
  auto since = SteadyClock::now();
  Status st;
  for (;;) {
    bool all = true;
    for (uint64_t n : numbers) {
      if (refused_.count(n) && st.ok()) {
        st = DataLossError("the coordinator refused checkpoint batch " + std::to_string(n) +
                           " of node " + std::to_string(node_->id()) + " (see its log)");
      }
      all = all && (taken_.count(n) || refused_.count(n));
    }
    if (all) break;
    if (cancelled()) {
      st = CancelledError("the job was killed");
      break;
    }
    if (SteadyClock::now() - since > patience_) {
      st = DeadlineExceededError("the coordinator took no checkpoint batch of node " +
                                 std::to_string(node_->id()) + " in " +
                                 std::to_string(patience_.count()) + " ms");
      break;
    }
    const size_t before = in_flight_.size();
    Status c = CollectTaken(std::chrono::milliseconds(100));
    if (!c.ok()) {
      st = c;
      break;
    }
    if (in_flight_.size() < before) since = SteadyClock::now();
  }
  DropLocked(numbers);
  return st;
}

void CkptOutbox::Forget(const std::set<uint64_t>& numbers) {
  std::lock_guard<std::mutex> lock(mu_);
  DropLocked(numbers);
}

void CkptOutbox::DropLocked(const std::set<uint64_t>& numbers) {
  for (uint64_t n : numbers) {
    if (taken_.erase(n) + refused_.erase(n) > 0) continue;
    // Not answered yet: CollectTaken drops the answer when it comes.
    for (const auto& [slot, number] : in_flight_) {
      if (number == n) forgotten_.insert(n);
    }
  }
}

CkptShipment::CkptShipment(CkptOutbox* box, uint64_t job, uint64_t epoch,
                           std::function<bool()> cancelled)
    : box_(box), cancelled_(std::move(cancelled)) {
  batch_.job = job;
  batch_.epoch = epoch;
}

CkptShipment::~CkptShipment() {
  if (!sent_.empty()) box_->Forget(sent_);
}

Status CkptShipment::Add(const std::array<uint8_t, 32>& hash, uint32_t raw_len,
                         std::vector<uint8_t> frame) {
  if (!frames_.empty() &&
      CkptBatchBytes(frames_.size() + 1, frame_bytes_ + frame.size()) > kCkptSlotBytes) {
    GOS_RETURN_IF_ERROR(Flush());
  }
  frame_bytes_ += frame.size();
  frames_.push_back(std::move(frame));
  batch_.chunks.push_back({hash, raw_len, frames_.back()});
  return OkStatus();
}

Status CkptShipment::Flush() {
  if (frames_.empty()) return OkStatus();
  GOS_ASSIGN_OR_RETURN(uint64_t number, box_->Send(batch_, cancelled_));
  sent_.insert(number);
  batch_.chunks.clear();
  frames_.clear();
  frame_bytes_ = 0;
  return OkStatus();
}

Status CkptShipment::Finish() {
  GOS_RETURN_IF_ERROR(Flush());
  Status st = box_->WaitTaken(sent_, cancelled_);
  sent_.clear();
  return st;
}

CkptInbox::CkptInbox(prim::Node* node, std::vector<uint8_t> key, TakeFn take, UpFn up,
                     std::chrono::milliseconds unfilled_limit)
    : node_(node),
      key_(std::move(key)),
      take_(std::move(take)),
      up_(std::move(up)),
      unfilled_limit_(unfilled_limit) {}

void CkptInbox::Poll(std::chrono::milliseconds timeout) {
  (void)node_->WaitEvent(kEventCkptIn, timeout);
  const auto now = SteadyClock::now();
  for (uint32_t i = 0; i < kCkptInboxSlots; ++i) {
    const int64_t owner = node_->Load(VarCkptOwner(i));
    // The owner XFERs the number only once the batch is all here.
    const int64_t number = owner == 0 ? 0 : node_->Load(VarCkptReady(i));
    if (owner == 0 || number != 0) {
      held_[i] = {};
      if (number != 0) Take(i, static_cast<uint32_t>(owner), number);
      continue;
    }
    // Taken and not filled (yet): its node may have died, or given up, on the way.
    if (held_[i] == SteadyClock::time_point{}) held_[i] = now;
    const bool up = up_(static_cast<uint32_t>(owner));
    if (!up || now - held_[i] > unfilled_limit_) {
      GOS_LOG(kWarn, "coordinator") << "checkpoint inbox slot " << i << " given back: node "
                                    << owner << (up ? " did not fill it in time" : " is down");
      node_->Store(VarCkptOwner(i), 0);
      held_[i] = {};
    }
  }
}

void CkptInbox::Take(uint32_t slot, uint32_t owner, int64_t number) {
  const std::span<const uint8_t> bytes(
      reinterpret_cast<const uint8_t*>(node_->global_memory().data()) + CkptSlot(slot),
      kCkptSlotBytes);
  auto b = DecodeCkptBatch(bytes, key_);
  std::string problem;
  if (!b.ok()) {
    problem = b.status().ToString();
  } else if (b->node != owner || static_cast<int64_t>(b->number) != number) {
    problem = "batch " + std::to_string(b->number) + " of node " + std::to_string(b->node) +
              " in a slot node " + std::to_string(owner) + " filled as batch " +
              std::to_string(number);
  } else {
    problem = take_(*b);
  }
  if (!problem.empty()) {
    GOS_LOG(kWarn, "coordinator") << "checkpoint inbox slot " << slot << ", node " << owner
                                  << ": batch " << number << " refused: " << problem;
  }
  // Free the slot, then answer (negative: refused): the node may take the slot again at once.
  node_->Store(VarCkptReady(slot), 0);
  node_->Store(VarCkptOwner(slot), 0);
  const int64_t answer = problem.empty() ? number : -number;
  node_
      ->XferAndSignal(prim::NodeSet{owner}, &answer, sizeof answer, VarCkptTaken(slot),
                      kEventCkptTaken)
      .IgnoreError();  // a node that is gone is the strobe's business
}

}  // namespace gos::os
