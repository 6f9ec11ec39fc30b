// Shipping checkpoint chunks to the coordinator's store with the primitives
// (docs/specs/checkpoint.md, "Shipping"; layout.h, "checkpoint inbox"): CkptOutbox and
// CkptShipment on the nodes, CkptInbox on the coordinator.
//
// Chunks go in batches of up to kCkptSlotBytes. For each batch the node takes a free slot of
// the coordinator's checkpoint inbox with COMPARE-AND-WRITE (VarCkptOwner(i) == 0, write its
// id), XFERs the batch into it and, once it is delivered, XFERs the batch's number into
// VarCkptReady(i) with kEventCkptIn. The coordinator stores the chunks, frees the slot and
// XFERs the number back into the node's VarCkptTaken(i) with kEventCkptTaken (negated if it
// refused the batch). A node has at most two batches in the inbox at a time, so eight slots
// serve four nodes shipping at full speed and many more in turn.
//
// One CkptOutbox per nodeagent; any number of CkptShipments (one per job epoch being
// shipped) use it from their own threads. It serialises them: the events it waits for are
// the node's own, and only one thread at a time may consume them.
#ifndef GOS_OS_CKPT_SHIP_H_
#define GOS_OS_CKPT_SHIP_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "gos/os/layout.h"
#include "gos/os/messages.h"
#include "gos/prim/prim.h"
#include "gos/status.h"

namespace gos::os {

class CkptOutbox {
 public:
  // key: the cluster key batches are sealed with. A wait gives up after `patience` without
  // progress (the coordinator is alive, or the primitives would have said so, but does not
  // take batches).
  CkptOutbox(prim::Node* node, std::vector<uint8_t> key,
             std::chrono::milliseconds patience = std::chrono::minutes(1));

  // Puts the batch (its job, epoch and chunks; node and number are set here) into the inbox
  // and returns its number; the coordinator may not have taken it yet. `cancelled` is polled
  // while waiting for room.
  StatusOr<uint64_t> Send(CkptBatch batch, const std::function<bool()>& cancelled);
  // Returns once the coordinator took every batch of `numbers` (and forgets them): an error
  // if it refused one, or gave no sign for `patience`.
  Status WaitTaken(const std::set<uint64_t>& numbers, const std::function<bool()>& cancelled);
  // Batches a shipment abandoned: nobody will wait for them.
  void Forget(const std::set<uint64_t>& numbers);

 private:
  // Waits up to `timeout` for the coordinator to take a batch in flight (mu_ held).
  Status CollectTaken(std::chrono::milliseconds timeout);
  // Nobody waits for these numbers any more: their answers are dropped (mu_ held).
  void DropLocked(const std::set<uint64_t>& numbers);
  Status WaitDelivered(std::chrono::steady_clock::time_point deadline,
                       const std::function<bool()>& cancelled);

  prim::Node* const node_;
  const std::vector<uint8_t> key_;
  const std::chrono::milliseconds patience_;
  std::mutex mu_;
  uint64_t next_number_ = 1;
  std::map<uint32_t, uint64_t> in_flight_;  // inbox slot -> batch number
  std::set<uint64_t> taken_, refused_;      // numbers the coordinator answered, not yet waited
  std::set<uint64_t> forgotten_;
  uint32_t sent_pending_ = 0;  // delivery signals (kEventCkptSent) not consumed yet
};

// One job epoch's chunks on their way: Add batches them, Finish sends the last batch and
// waits until the coordinator took every batch sent so far (Add may follow: the next rank's
// chunks). Abandoning it (destroying it unfinished) is fine: the coordinator drops batches of
// an epoch it no longer takes.
class CkptShipment {
 public:
  CkptShipment(CkptOutbox* box, uint64_t job, uint64_t epoch, std::function<bool()> cancelled);
  ~CkptShipment();
  CkptShipment(const CkptShipment&) = delete;
  CkptShipment& operator=(const CkptShipment&) = delete;

  Status Add(const std::array<uint8_t, 32>& hash, uint32_t raw_len, std::vector<uint8_t> frame);
  Status Finish();

 private:
  Status Flush();

  CkptOutbox* const box_;
  const std::function<bool()> cancelled_;
  CkptBatch batch_;                           // the next batch; its chunks view frames_
  std::vector<std::vector<uint8_t>> frames_;  // (moving a frame keeps its bytes in place)
  size_t frame_bytes_ = 0;
  std::set<uint64_t> sent_;  // not yet known to be taken
};

// The coordinator's side (node 0): takes the batches the nodes put into its inbox. Poll from
// one thread.
class CkptInbox {
 public:
  // Stores a batch (authenticated, from the node that holds its slot); returns "" or why it
  // refused it. The node is told either way, and its slot given back.
  using TakeFn = std::function<std::string(const CkptBatch& batch)>;
  // Whether a node is up: a slot taken by a node that is down, and never filled, is given
  // back at once; one held unfilled for `unfilled_limit` by a live node too.
  using UpFn = std::function<bool(uint32_t node)>;
  CkptInbox(prim::Node* node, std::vector<uint8_t> key, TakeFn take, UpFn up,
            std::chrono::milliseconds unfilled_limit = std::chrono::minutes(2));

  // Waits up to `timeout` for a batch, then takes every batch that is ready and gives back
  // the slots described above.
  void Poll(std::chrono::milliseconds timeout);

 private:
  void Take(uint32_t slot, uint32_t owner, int64_t number);

  prim::Node* const node_;
  const std::vector<uint8_t> key_;
  const TakeFn take_;
  const UpFn up_;
  const std::chrono::milliseconds unfilled_limit_;
  // When each slot was first seen taken but not filled.
  std::array<std::chrono::steady_clock::time_point, kCkptInboxSlots> held_{};
};

}  // namespace gos::os

#endif  // GOS_OS_CKPT_SHIP_H_
