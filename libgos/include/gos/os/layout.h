// How the global OS uses the primitives' global memory and events (docs/specs/strobe.md).
// Every node (the coordinator is node 0, nodeagents 1..K) registers the same global memory,
// so an offset names the same bytes everywhere.
//
//   0x000000  vars, 8 bytes each (COMPARE-AND-WRITE targets, agents' memory):
//             kVarApplied       last strobe this agent applied (the heartbeat query)
//             kVarStaged        1 + sequence number of the last staging chunk stored
//             kVarStarted(s)    job id whose local ranks were all started, job slot s
//             kVarDone(s)       job id whose local ranks have all exited, job slot s
//   0x010000  strobe payloads, two alternating slots (strobe S uses slot S % 2)
//   0x030000  exit table, in the coordinator's memory: one ExitRecord per (slot, node)
//   0x400000  staging: two alternating chunk slots, each a 4 KiB header + up to 4 MiB data
#ifndef GOS_OS_LAYOUT_H_
#define GOS_OS_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "gos/prim/prim.h"

namespace gos::os {

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
  uint64_t reserved = 0;
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

inline constexpr size_t kGlobalMemoryBytes = kStageBase + 2 * kStageSlotBytes;
static_assert(ExitSlot(kMaxJobSlots, 0) <= kStageBase);

// Events.
inline constexpr prim::EventId kEventStrobe = 1;      // agents: a strobe arrived
inline constexpr prim::EventId kEventStrobeSent = 2;  // coordinator: every agent has it
inline constexpr prim::EventId kEventStage = 3;       // agents: a staging chunk arrived
inline constexpr prim::EventId kEventStageSent = 4;   // coordinator: chunk delivered
inline constexpr prim::EventId kEventExit = 5;        // coordinator: an exit record arrived
inline constexpr prim::EventId kEventExitSent = 6;    // agent: its exit record is there

}  // namespace gos::os

#endif  // GOS_OS_LAYOUT_H_
