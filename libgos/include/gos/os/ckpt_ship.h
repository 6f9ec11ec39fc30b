// Shipping checkpoint chunks with the primitives (docs/specs/checkpoint.md, "Shipping";
// layout.h), both ways: a node's new chunks into the coordinator's store (kCheckpointRoute),
// and a restart's stored chunks from the coordinator to a rank's new node (kRestoreRoute).
// BatchOutbox and BatchShipment on the sender, BatchInbox on the receiver.
//
// Chunks go in batches of up to kCkptSlotBytes. For each batch the sender takes a free slot
// of the receiver's memory (the coordinator's checkpoint inbox is shared by every node: a
// node takes a slot with COMPARE-AND-WRITE on VarCkptOwner(i); a node's restore slots have
// one sender, the coordinator, which keeps them apart itself), XFERs the batch into it and,
// once it is delivered, XFERs the batch's number into the receiver's "ready" variable of the
// slot with an event. The receiver takes the batch, frees the slot and XFERs the number back
// into the sender's "taken" variable of the slot with an event (negated if it refused the
// batch). A sender has at most two batches in one receiver at a time: one is taken while the
// next is filled.
//
// One BatchOutbox per sender and route; any number of BatchShipments (one per job epoch, or
// per rank being restored) use it from their own threads. The events it waits for are the
// node's own: one thread at a time consumes the answer events and hands the answers to all,
// and each batch on its way holds one of the route's delivery events until it is there (the
// coordinator's restore batches go to several nodes at once; a node's checkpoint batches take
// turns).
#ifndef GOS_OS_CKPT_SHIP_H_
#define GOS_OS_CKPT_SHIP_H_

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gos/os/layout.h"
#include "gos/os/messages.h"
#include "gos/prim/prim.h"
#include "gos/status.h"

namespace gos::os {

// One way batches go: where the receivers' slots and variables are, where the answers go,
// and the events.
struct ShipRoute {
  BatchKind kind;
  const char* what;  // "checkpoint" or "restore", for messages
  // Slots per receiver. Shared slots are taken with COMPARE-AND-WRITE on owner(i) in the
  // receiver's memory (== 0, write the sender's id); the slots of a route that is not shared
  // have one sender, the coordinator (node 0).
  uint32_t slots;
  bool shared;
  uint64_t (*slot)(uint32_t i);
  uint64_t (*owner)(uint32_t i);                     // shared routes only
  uint64_t (*ready)(uint32_t i);                     // receiver's memory: batch number in slot i
  uint64_t (*taken)(uint32_t receiver, uint32_t i);  // sender's memory: the receiver's answer
  prim::EventId ready_event;                         // receiver: a batch is ready
  prim::EventId taken_event;                         // sender: the receiver answered
  // Sender, local: a batch was delivered. As many batches can be on their way at once as
  // there are such events (sent_event, sent_event + 1, ...): each waits for its own.
  prim::EventId sent_event;
  uint32_t sent_lanes;
};
// Checkpoints: every node into the coordinator's checkpoint inbox.
extern const ShipRoute kCheckpointRoute;
// Restarts: the coordinator into each node's restore slots.
extern const ShipRoute kRestoreRoute;

// Polled while a shipment waits: OK to go on, else why it stops (the job was killed, the
// receiver went down, ...), returned as the shipment's error.
using ShipCheck = std::function<Status()>;

class BatchOutbox {
 public:
  // key: the cluster key batches are sealed with. A wait gives up after `patience` without
  // progress (the receiver is alive, or the primitives would have said so, but does not take
  // batches).
  BatchOutbox(prim::Node* node, const ShipRoute& route, std::vector<uint8_t> key,
              std::chrono::milliseconds patience = std::chrono::minutes(1));

  // Puts the batch (its kind must be the route's; its number, and for a checkpoint batch its
  // node, are set here) into receiver `to`'s slot and returns its number; the receiver may not
  // have taken it yet. `check` is polled while waiting for room.
  StatusOr<uint64_t> Send(uint32_t to, CkptBatch batch, const ShipCheck& check);
  // Returns once the receivers took every batch of `numbers` (and forgets them): an error if
  // one was refused, or if there was no sign for `patience`.
  Status WaitTaken(const std::set<uint64_t>& numbers, const ShipCheck& check);
  // An error if a batch of `numbers` was refused already (does not wait).
  Status Refused(const std::set<uint64_t>& numbers);
  // Batches a shipment abandoned: nobody will wait for them.
  void Forget(const std::set<uint64_t>& numbers);
  // Receiver `to` left the group: its memory, and with it every batch in flight to it, is
  // gone (it comes back with empty slots).
  void DropReceiver(uint32_t to);

 private:
  using Lane = std::pair<uint32_t, uint32_t>;  // receiver, slot

  // Waits up to `timeout` for answers (mu_ held in `lock`; released while waiting): one thread
  // consumes the answer events, the others wait for it to share what it found.
  Status AwaitAnswers(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout);
  // Records the answers that arrived for the batches in flight (mu_ held).
  void CollectLocked();
  // Polls `check` with mu_ released.
  static Status CheckUnlocked(std::unique_lock<std::mutex>& lock, const ShipCheck& check);
  // A free slot of receiver `to`, held for this sender (mu_ held, released while waiting).
  StatusOr<uint32_t> TakeSlot(std::unique_lock<std::mutex>& lock, uint32_t to,
                              const ShipCheck& check);
  size_t InFlightTo(uint32_t to) const;
  // Nobody waits for these numbers any more: their answers are dropped (mu_ held).
  void DropLocked(const std::set<uint64_t>& numbers);
  // XFERs a sealed batch and waits until it is delivered (on a lane of its own).
  Status Deliver(uint32_t to, uint32_t slot, std::vector<uint8_t> bytes, const ShipCheck& check);
  std::string Sender() const;
  static std::string Receiver(uint32_t to);

  prim::Node* const node_;
  const ShipRoute& route_;
  const std::vector<uint8_t> key_;
  const std::chrono::milliseconds patience_;

  std::mutex mu_;
  std::condition_variable answered_;  // the collecting thread looked at the answers
  bool collecting_ = false;           // a thread consumes answer events
  uint64_t next_number_ = 1;
  std::map<Lane, uint64_t> in_flight_;  // slot of a receiver -> batch number
  // Numbers answered, not yet waited for: taken, or why not (refused, receiver gone).
  std::set<uint64_t> taken_;
  std::map<uint64_t, Status> failed_;
  std::set<uint64_t> forgotten_;

  // A delivery event of the route, held by one Deliver at a time (busy: under mu_; the rest
  // by its holder).
  struct SendLane {
    bool busy = false;
    uint32_t pending = 0;  // delivery signals not consumed yet
    // Batches whose delivery a Send gave up waiting for: the primitives may still read them.
    std::vector<std::vector<uint8_t>> undelivered;
  };
  std::vector<SendLane> lanes_;
  std::condition_variable lane_free_;
};

// One job epoch's chunks (or one rank's, for a restart) on their way to one receiver: Add
// batches them, Finish sends the last batch and waits until the receiver took every batch sent
// so far (Add may follow: the next rank's chunks). Abandoning it (destroying it unfinished) is
// fine: the receiver drops batches nobody waits for.
class BatchShipment {
 public:
  // head: the batches' kind, job, epoch (and for a restart rank and attempt).
  BatchShipment(BatchOutbox* box, uint32_t to, const CkptBatch& head, ShipCheck check);
  ~BatchShipment();
  BatchShipment(const BatchShipment&) = delete;
  BatchShipment& operator=(const BatchShipment&) = delete;

  // chunk's data becomes a view of `frame` (zstd). Fails early if a batch sent was refused.
  Status Add(CkptBatchChunk chunk, std::vector<uint8_t> frame);
  Status Finish();
  // After an error: drops the chunks not sent yet and waits (as Finish) until the receiver
  // answered every batch sent, so that nothing of the shipment is still being taken.
  Status Abandon();
  // Batches sent so far.
  uint64_t batches() const { return batches_; }

 private:
  Status Flush();

  BatchOutbox* const box_;
  const uint32_t to_;
  const ShipCheck check_;
  CkptBatch batch_;                           // the next batch; its chunks view frames_
  std::vector<std::vector<uint8_t>> frames_;  // (moving a frame keeps its bytes in place)
  size_t batch_bytes_ = 0;                    // batch_ encoded
  size_t empty_bytes_ = 0;                    // a batch without chunks encoded
  std::set<uint64_t> sent_;                   // not yet known to be taken
  uint64_t batches_ = 0;
};

// The receiver's side: takes the batches its senders put into its slots. Poll from one thread.
class BatchInbox {
 public:
  // Takes a batch (authenticated, of the route's kind, from the sender that holds its slot,
  // for this node when it is a restore batch); returns "" or why it refused it. The sender is
  // told either way, and the slot given back.
  using TakeFn = std::function<std::string(const CkptBatch& batch)>;
  // Whether a node is up (shared routes): a slot taken by a node that is down, and never
  // filled, is given back at once; one held unfilled for `unfilled_limit` by a live node too.
  using UpFn = std::function<bool(uint32_t node)>;
  BatchInbox(prim::Node* node, const ShipRoute& route, std::vector<uint8_t> key, TakeFn take,
             UpFn up = nullptr, std::chrono::milliseconds unfilled_limit = std::chrono::minutes(2));

  // Waits up to `timeout` for a batch, then takes every batch that is ready (the oldest
  // first) and, on a shared route, gives back the slots described above.
  void Poll(std::chrono::milliseconds timeout);

 private:
  void Take(uint32_t slot, uint32_t sender, int64_t number);

  prim::Node* const node_;
  const ShipRoute& route_;
  const std::vector<uint8_t> key_;
  const TakeFn take_;
  const UpFn up_;
  const std::chrono::milliseconds unfilled_limit_;
  // When each slot was first seen taken but not filled.
  std::array<std::chrono::steady_clock::time_point, kCkptInboxSlots> held_{};
};

}  // namespace gos::os

#endif  // GOS_OS_CKPT_SHIP_H_
