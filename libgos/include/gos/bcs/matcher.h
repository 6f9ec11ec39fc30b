// Deterministic BCS matching and transfer scheduling for one job (docs/bcs-matching.md).
//
// Every nodeagent of a job runs the same Matcher and Scheduler over the same input — all the
// descriptors the job's ranks posted, exchanged at each strobe — so every node reaches the
// same matches and the same per-slice transfer plan without further messages. Both are pure:
// no I/O, no clock, no threads; their output is a function of their input sequence only.
//
// Matching rules (MPI's, with a fixed order for what MPI leaves open):
//   - Descriptors of one strobe are taken in (rank, seq) order.
//   - A send joins its destination's queue of unmatched sends. The queue's order is the
//     "arrival order": strobe of exchange, then source rank, then the source's seq. This is
//     the rule that resolves MPI_ANY_SOURCE / MPI_ANY_TAG.
//   - After a strobe's descriptors are added, each rank (ascending) takes its posted receives
//     in posting order; each takes the first send in its queue that matches (same context;
//     source equal or kAnySource; tag equal or kAnyTag). This keeps MPI's non-overtaking rule.
//   - Probes are answered after matching, with the first matching unmatched send; a
//     non-blocking probe that finds nothing is answered "not found" at once; a blocking one
//     waits for a later strobe.
//   - Barriers complete for every member at the strobe where all group_size members' k-th
//     barrier descriptor on the context has been seen; broadcasts likewise become one
//     transfer from the root to every other member once all members have posted. A member
//     whose buffer is shorter than the root's message completes with kErrTruncate at once and
//     gets no data.
//   - A cancel withdraws its rank's posted receive with the same req if that is still
//     unmatched when the cancel is added (before the strobe's matching): the receive completes
//     with kComplCancelled. A cancel of anything else does nothing and completes nothing.
//   - Errors complete a descriptor at once: a peer or root outside the job -> kErrRank; an
//     unknown op, a negative send tag, a bad group_size, members disagreeing on group_size or
//     root, or a rank posting one collective instance twice -> kErrArg.
//   - A match or broadcast with no bytes to move completes at once (StepResult::completions);
//     otherwise its completions ride on the Transfer and come from Scheduler::Finish.
#ifndef GOS_BCS_MATCHER_H_
#define GOS_BCS_MATCHER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/status.h"

namespace gos::nodeagent {

// A descriptor as exchanged: who posted it and its place in that rank's stream.
struct Posted {
  uint32_t rank = 0;  // world rank that posted it
  uint64_t seq = 0;   // 0, 1, 2, ... per rank, in posting order
  bcs::Descriptor d;
};

struct RankCompletion {
  uint32_t rank = 0;  // world rank the completion is for
  bcs::Completion c;
};

// Data to move: [src_addr, +len) of src_rank to [dest.addr, +len) of every dest.
struct Transfer {
  uint64_t id = 0;  // 1, 2, ... in creation order (per job)
  uint32_t src_rank = 0;
  uint64_t src_addr = 0;
  uint64_t len = 0;
  struct Dest {
    uint32_t rank = 0;
    uint64_t addr = 0;
  };
  std::vector<Dest> dests;
  // Delivered (to the ranks' channels) once every byte has reached every dest.
  std::vector<RankCompletion> on_done;
};

// One receive <-> send pairing, for the replay log.
struct MatchRecord {
  uint32_t recv_rank = 0;
  uint64_t recv_seq = 0;
  uint32_t send_rank = 0;
  uint64_t send_seq = 0;
};

struct StepResult {
  std::vector<Transfer> transfers;          // new transfers, in id order
  std::vector<RankCompletion> completions;  // complete now (no data to move)
  std::vector<MatchRecord> matches;         // in decision order
};

class Matcher {
 public:
  // world_size: ranks of the job; descriptors naming other ranks complete with kErrRank.
  explicit Matcher(uint32_t world_size);

  // Adds the descriptors exchanged at `strobe` (any order; sorted here by (rank, seq)) and
  // matches. strobe must increase from call to call. Descriptors of ranks >= world_size are
  // dropped (there is no channel to answer on).
  StepResult Step(uint64_t strobe, std::span<const Posted> posted);

  // Unmatched sends and receives, probes and collectives still waiting (for tests and ps).
  size_t pending() const;
  // Ranks of the job (the constructor argument; the restored one after Load).
  uint32_t world_size() const { return world_size_; }

  // Checkpoint: the whole state (world size, next transfer id, every queue in order) in a
  // versioned binary encoding. Load restores it exactly, except that every stored arrival
  // strobe becomes 0 — the order of the queues is kept, and any later strobe (the strobe
  // counter may restart after a coordinator restart) sorts after them. Load fails with
  // DATA_LOSS on malformed input (bounds-checked; never asserts).
  std::string Save() const;
  static StatusOr<Matcher> Load(std::span<const uint8_t> bytes);

 private:
  struct SendEntry {
    Posted p;
    uint64_t strobe = 0;  // strobe of exchange (first key of the arrival order)
  };
  using CollectiveKey = std::pair<uint64_t, int32_t>;  // (context, collective sequence = tag)

  // Validates a kBarrier/kBcast descriptor and files it under its key, or answers it with an
  // error completion.
  void AddCollective(std::map<CollectiveKey, std::vector<Posted>>& table, const Posted& p,
                     StepResult& out);
  // Pairs rank r's posted receives with its queue of unmatched sends (rules above).
  void MatchRank(uint32_t r, StepResult& out);
  void Pair(const Posted& recv, const Posted& send, StepResult& out);
  void AnswerProbes(uint32_t r, StepResult& out);
  void CompleteBarriers(StepResult& out);
  void CompleteBcasts(StepResult& out);

  uint32_t world_size_;
  uint64_t next_transfer_ = 1;
  std::vector<std::deque<SendEntry>> sends_;  // per destination rank, arrival order
  std::vector<std::deque<Posted>> recvs_;     // per rank, posting order
  std::vector<std::deque<Posted>> probes_;    // per rank, posting order (blocking ones wait)
  // Members seen so far, in arrival order; erased once complete.
  std::map<CollectiveKey, std::vector<Posted>> barriers_;
  std::map<CollectiveKey, std::vector<Posted>> bcasts_;
};

// Per-slice byte budgets.
struct SchedulerOptions {
  // Bytes a node may receive from other nodes in one slice (its BCS inbox). Default: 8 MiB.
  uint64_t inbox_bytes = 8u << 20;
  // Bytes a node may send to other nodes in one slice (its BCS outbox). Default: 8 MiB.
  uint64_t outbox_bytes = 8u << 20;
  // Bytes a node may copy between its own ranks in one slice. Default: 64 MiB.
  uint64_t local_bytes = 64u << 20;
};

// Each (source node, destination node) pair's data of a slice travels as one block: a
// kBlockHeaderBytes header, then the pieces of its moves back to back. The block sits at the
// same layout in the source's outbox and the destination's inbox.
inline constexpr uint64_t kBlockHeaderBytes = 64;

struct Move {
  uint64_t transfer = 0;  // Transfer::id
  uint64_t offset = 0;    // first byte of the transfer moved here
  uint64_t len = 0;
  uint32_t src_node = 0;
  uint32_t dst_node = 0;
  // When src_node != dst_node: where the piece sits in the source's outbox and in the
  // destination's inbox (offsets from the start of each area).
  uint64_t outbox_offset = 0;
  uint64_t inbox_offset = 0;
};

struct Block {
  uint32_t src_node = 0;
  uint32_t dst_node = 0;
  uint64_t outbox_offset = 0;  // of the header
  uint64_t inbox_offset = 0;   // of the header
  uint64_t len = 0;            // header + data
};

struct SlicePlan {
  std::vector<Move> moves;    // in plan order
  std::vector<Block> blocks;  // one per (src, dst) pair with data, src_node != dst_node
};

// Plan rules: transfers in id order; each takes, per dest node (ascending), what the budgets
// leave: a copy between ranks of one node uses local_bytes; a remote piece uses the dest's
// inbox and the source's outbox, the first piece of each (src, dst) pair in a slice also paying
// kBlockHeaderBytes in both. Once a pair cannot take a transfer's remaining bytes, later
// transfers of that pair get nothing this slice (per-pair FIFO). Budgets must exceed
// kBlockHeaderBytes or no remote data ever moves.
class Scheduler {
 public:
  // rank_node[r] = node of world rank r; it must cover every rank a transfer names.
  Scheduler(std::vector<uint32_t> rank_node, SchedulerOptions options = {});

  // Queues transfers (in id order). Zero-length transfers complete at the next Finish.
  void Add(std::vector<Transfer> transfers);
  // The moves of the next slice: transfers in id order, each dest node's pieces taking what
  // the budgets leave. Deterministic. Call Finish(plan) once the moves are done.
  SlicePlan Plan();
  // Records the plan's moves as done; returns the completions of every transfer now complete
  // (for all ranks; the caller delivers its own).
  std::vector<RankCompletion> Finish(const SlicePlan& plan);
  // A transfer by id, while it is queued (moves name it).
  const Transfer* Find(uint64_t id) const;
  bool idle() const;

 private:
  struct Queued {
    Transfer t;
    std::map<uint32_t, uint64_t> sent;  // dest node -> bytes already moved there
  };
  uint32_t NodeOf(uint32_t rank) const;
  // The queued transfer with this id, or nullptr (queue_ is in id order).
  Queued* FindQueued(uint64_t id);
  const Queued* FindQueued(uint64_t id) const;
  bool Complete(const Queued& q) const;

  std::vector<uint32_t> rank_node_;
  SchedulerOptions options_;
  std::deque<Queued> queue_;
};

}  // namespace gos::nodeagent

#endif  // GOS_BCS_MATCHER_H_
