// How the global OS uses the primitives' global memory and events (docs/specs/strobe.md).
// Every node (the coordinator is node 0, nodeagents 1..K) registers the same global memory,
// so an offset names the same bytes everywhere.
//
//   0x000000  vars, 8 bytes each (COMPARE-AND-WRITE targets, agents' memory):
//             kVarApplied       last strobe this agent applied (the heartbeat query)
//             kVarStaged        1 + sequence number of the last staging chunk stored
//             kVarStarted(s)    job id whose local ranks were all started, job slot s
//             kVarDone(s)       job id whose local ranks have all exited, job slot s
//             kVarDumped(s)     last checkpoint epoch whose dump is over here, job slot s
//             kVarStored(s)     last checkpoint epoch whose chunks and manifests are sent
//             kVarCkptOwner(i)  coordinator: node holding checkpoint inbox slot i (0 = free)
//             kVarCkptReady(i)  coordinator: batch number written into slot i (0 = none)
//             kVarCkptTaken(i)  agents: last batch number the coordinator took from slot i
//             kVarRestoreReady(i)    agents: restore batch number written into slot i (0 = none)
//             kVarRestoreTaken(n, i) coordinator: node n's answer for its restore slot i
//   0x010000  strobe payloads, two alternating slots (strobe S uses slot S % 2)
//   0x030000  exit table, in the coordinator's memory: one ExitRecord per (slot, node)
//   0x240000  blocked table, in the coordinator's memory: one BlockedRecord per node
//   0x400000  staging: two alternating chunk slots, each a 4 KiB header + up to 4 MiB data
//   0x1000000 BCS (docs/specs/bcs-exchange.md): descriptor inbox (one slot per position in a
//             job's node list), data inbox and data outbox of one slice
//   0x2200000 checkpoint inbox, in the coordinator's memory: kCkptInboxSlots slots a node
//             takes by COMPARE-AND-WRITE and fills with a batch of chunks (XFER-AND-SIGNAL)
//             (docs/specs/checkpoint.md, "Shipping"). In an agent's memory, where the inbox is
//             unused, the first kRestoreSlots of them take the batches of a restart's chunks
//             the coordinator XFERs to the node (RestoreSlot).
#ifndef GOS_OS_LAYOUT_H_
#define GOS_OS_LAYOUT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "gos/prim/prim.h"

namespace gos::os {

// How long the daemons' progress threads poll after a message (prim::NodeOptions::spin):
// less than the primitives' default, as they share the cores with ranks
// (docs/gang-scheduling.md).
inline constexpr std::chrono::microseconds kDaemonSpin{50};

// Jobs live in one of kMaxJobSlots slots while they hold nodes.
inline constexpr uint32_t kMaxJobSlots = 64;
// Nodes the exit table has room for (node ids 0 .. kMaxClusterNodes-1).
inline constexpr uint32_t kMaxClusterNodes = 1024;

inline constexpr uint64_t kVarApplied = 0x0;
inline constexpr uint64_t kVarStaged = 0x8;
inline constexpr uint64_t kVarStartedBase = 0x1000;
inline constexpr uint64_t kVarDoneBase = 0x2000;
constexpr uint64_t VarStarted(uint32_t slot) { return kVarStartedBase + 8 * uint64_t{slot}; }
constexpr uint64_t VarDone(uint32_t slot) { return kVarDoneBase + 8 * uint64_t{slot}; }
inline constexpr uint64_t kVarDumpedBase = 0x3000;
inline constexpr uint64_t kVarStoredBase = 0x4000;
constexpr uint64_t VarDumped(uint32_t slot) { return kVarDumpedBase + 8 * uint64_t{slot}; }
constexpr uint64_t VarStored(uint32_t slot) { return kVarStoredBase + 8 * uint64_t{slot}; }
// The value a node stores in VarDumped/VarStored for (job, epoch): unique per job, so a
// stale value another job left in the slot never satisfies the query.
constexpr int64_t EpochMark(uint64_t job, uint64_t epoch) {
  return static_cast<int64_t>((job << 24) | (epoch & 0xffffff));
}

// The checkpoint inbox: slot i is free while VarCkptOwner(i) is 0 in the coordinator's
// memory; a node takes it with COMPARE-AND-WRITE (== 0, write its id), XFERs a batch into it,
// then its number into VarCkptReady(i) with kEventCkptIn. The coordinator stores the chunks,
// frees the slot and XFERs the number into the node's VarCkptTaken(i) with kEventCkptTaken.
inline constexpr uint32_t kCkptInboxSlots = 8;
inline constexpr size_t kCkptSlotBytes = 2u << 20;
inline constexpr uint64_t kVarCkptOwnerBase = 0x5000;
inline constexpr uint64_t kVarCkptReadyBase = 0x5100;
inline constexpr uint64_t kVarCkptTakenBase = 0x5200;
constexpr uint64_t VarCkptOwner(uint32_t i) { return kVarCkptOwnerBase + 8 * uint64_t{i}; }
constexpr uint64_t VarCkptReady(uint32_t i) { return kVarCkptReadyBase + 8 * uint64_t{i}; }
constexpr uint64_t VarCkptTaken(uint32_t i) { return kVarCkptTakenBase + 8 * uint64_t{i}; }
static_assert(VarStored(kMaxJobSlots) <= kVarCkptOwnerBase);
static_assert(VarCkptOwner(kCkptInboxSlots) <= kVarCkptReadyBase);
static_assert(VarCkptReady(kCkptInboxSlots) <= kVarCkptTakenBase);

// A restart's chunks, coordinator -> node (docs/specs/checkpoint.md, "Shipping"): the
// coordinator alone fills the node's restore slots. It XFERs a batch into RestoreSlot(i), then
// its number into the node's VarRestoreReady(i) with kEventRestoreIn; the node writes the
// chunks, clears the var and XFERs the number (negated on refusal) into the coordinator's
// VarRestoreTaken(node, i) with kEventRestoreTaken.
inline constexpr uint32_t kRestoreSlots = 2;
inline constexpr uint64_t kVarRestoreReadyBase = 0x5300;
inline constexpr uint64_t kVarRestoreTakenBase = 0x6000;
constexpr uint64_t VarRestoreReady(uint32_t i) { return kVarRestoreReadyBase + 8 * uint64_t{i}; }
constexpr uint64_t VarRestoreTaken(uint32_t node, uint32_t i) {
  return kVarRestoreTakenBase + 8 * (uint64_t{node} * kRestoreSlots + i);
}
static_assert(VarCkptTaken(kCkptInboxSlots) <= kVarRestoreReadyBase);
static_assert(VarRestoreReady(kRestoreSlots) <= kVarRestoreTakenBase);
static_assert(VarRestoreTaken(kMaxClusterNodes, 0) <= 0x10000);

inline constexpr uint64_t kStrobeBase = 0x10000;
inline constexpr size_t kStrobeSlotBytes = 64u << 10;
constexpr uint64_t StrobeSlot(uint64_t strobe) {
  return kStrobeBase + (strobe % 2) * kStrobeSlotBytes;
}

// One agent's summary of a job's local ranks, XFERed into the coordinator's exit table.
struct ExitRecord {
  uint64_t job = 0;       // 0 = empty
  int32_t exit_code = 0;  // highest local exit code (128+signal for a signalled rank)
  int32_t rank = -1;      // rank that gave it
  int32_t signal = 0;     // signal that killed that rank, 0 if it exited
  uint32_t ranks = 0;     // local ranks
  // The strobe whose LAUNCH or RESTORE started this incarnation of the job: a restarted job
  // keeps its id (and may get its slot again), and a record its killed predecessor wrote
  // late must not end it.
  uint64_t launch = 0;
};
static_assert(sizeof(ExitRecord) == 32);
inline constexpr uint64_t kExitTableBase = 0x30000;
constexpr uint64_t ExitSlot(uint32_t slot, uint32_t node) {
  return kExitTableBase + (uint64_t{slot} * kMaxClusterNodes + node) * sizeof(ExitRecord);
}

inline constexpr uint64_t kStageBase = 0x400000;
inline constexpr size_t kStageHeaderBytes = 4096;
inline constexpr size_t kStageChunkBytes = 4u << 20;
inline constexpr size_t kStageSlotBytes = kStageHeaderBytes + kStageChunkBytes;
constexpr uint64_t StageSlot(uint64_t chunk_seq) {
  return kStageBase + (chunk_seq % 2) * kStageSlotBytes;
}

// An agent whose running ranks are all blocked in communication tells the coordinator so
// (XFER into this table, kEventBlocked): when every node of the running row is blocked and
// one of them has work for the next strobe, the coordinator strobes early.
struct BlockedRecord {
  uint64_t strobe = 0;   // the last strobe the agent applied when it wrote this
  uint32_t blocked = 0;  // 1 = every local rank of the running row is blocked (or gone)
  uint32_t work = 0;     // 1 = the next strobe has something to do here
};
static_assert(sizeof(BlockedRecord) == 16);
inline constexpr uint64_t kBlockedTableBase = 0x240000;
constexpr uint64_t BlockedSlot(uint32_t node) {
  return kBlockedTableBase + uint64_t{node} * sizeof(BlockedRecord);
}
static_assert(ExitSlot(kMaxJobSlots, 0) <= kBlockedTableBase);

// An agent whose dumps of a checkpoint epoch are done tells the coordinator (XFER of its
// VarDumped mark into this table, kEventDumped), which then strobes at once, so the dumps are
// confirmed and the job resumed without waiting out the quantum.
inline constexpr uint64_t kDumpedTableBase = BlockedSlot(kMaxClusterNodes);
constexpr uint64_t DumpedSlot(uint32_t node) {
  return kDumpedTableBase + uint64_t{node} * sizeof(int64_t);
}
static_assert(DumpedSlot(kMaxClusterNodes) <= kStageBase);

inline constexpr uint64_t kBcsBase = 0x1000000;
// Nodes a communicating job may span.
inline constexpr uint32_t kMaxBcsNodes = 64;
inline constexpr size_t kBcsDescSlotBytes = 32u << 10;
constexpr uint64_t BcsDescSlot(uint32_t position) {
  return kBcsBase + uint64_t{position} * kBcsDescSlotBytes;
}
inline constexpr size_t kBcsInboxBytes = 8u << 20;
inline constexpr size_t kBcsOutboxBytes = 8u << 20;
inline constexpr uint64_t kBcsInboxBase = BcsDescSlot(kMaxBcsNodes);
inline constexpr uint64_t kBcsOutboxBase = kBcsInboxBase + kBcsInboxBytes;

inline constexpr uint64_t kCkptInboxBase = kBcsOutboxBase + kBcsOutboxBytes;
constexpr uint64_t CkptSlot(uint32_t i) { return kCkptInboxBase + uint64_t{i} * kCkptSlotBytes; }

// Only the coordinator's copy of the checkpoint inbox is one: a node's takes restore batches.
constexpr uint64_t RestoreSlot(uint32_t i) { return CkptSlot(i); }
static_assert(kRestoreSlots <= kCkptInboxSlots);

inline constexpr size_t kGlobalMemoryBytes = CkptSlot(kCkptInboxSlots);
static_assert(BlockedSlot(kMaxClusterNodes) <= kStageBase);
static_assert(kStageBase + 2 * kStageSlotBytes <= kBcsBase);

// Events.
inline constexpr prim::EventId kEventStrobe = 1;         // agents: a strobe arrived
inline constexpr prim::EventId kEventStrobeSent = 2;     // coordinator: every agent has it
inline constexpr prim::EventId kEventStage = 3;          // agents: a staging chunk arrived
inline constexpr prim::EventId kEventStageSent = 4;      // coordinator: chunk delivered
inline constexpr prim::EventId kEventExit = 5;           // coordinator: an exit record arrived
inline constexpr prim::EventId kEventExitSent = 6;       // agent: its exit record is there
inline constexpr prim::EventId kEventBcsDesc = 7;        // agents: a descriptor block arrived
inline constexpr prim::EventId kEventBcsData = 8;        // agents: a data block arrived
inline constexpr prim::EventId kEventBcsSent = 9;        // agent: its BCS block was delivered
inline constexpr prim::EventId kEventBlocked = 10;       // coordinator: a blocked record arrived
inline constexpr prim::EventId kEventBlockedSent = 11;   // agent: its blocked record is there
inline constexpr prim::EventId kEventDumped = 12;        // coordinator: a node's dumps are done
inline constexpr prim::EventId kEventCkptIn = 13;        // coordinator: a chunk batch is ready
inline constexpr prim::EventId kEventCkptSent = 14;      // agent: its batch reached the inbox
inline constexpr prim::EventId kEventCkptTaken = 15;     // agent: the coordinator took a batch
inline constexpr prim::EventId kEventRestoreIn = 16;     // agent: a restore batch is ready
inline constexpr prim::EventId kEventRestoreTaken = 17;  // coordinator: a node took a batch
// Coordinator: a restore batch reached its node, one event per batch on its way at once (up to
// kRestoreSendLanes of them, to different nodes): events kEventRestoreSent .. + lanes - 1.
inline constexpr prim::EventId kEventRestoreSent = 24;
inline constexpr uint32_t kRestoreSendLanes = 8;

}  // namespace gos::os

#endif  // GOS_OS_LAYOUT_H_
