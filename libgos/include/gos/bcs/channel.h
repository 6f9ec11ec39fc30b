// The shared-memory channel between a rank and its nodeagent (docs/specs/bcs-channel.md).
//
// A rank holds no network state: every communication call only posts a Descriptor into its
// channel; the nodeagent (the rank's "NIC") drains descriptors at strobes, matches them
// deterministically with every other rank's, moves the data with process_vm_readv/writev and
// XFER-AND-SIGNAL, and posts a Completion back. The channel is one file per rank,
// /dev/shm/gos-<cluster>-j<job>-r<rank> (named by GOS_CHANNEL in the rank's environment),
// created by the nodeagent before the rank starts, mapped MAP_SHARED by both sides. It is a
// file rather than a socket or eventfd so that CRIU can dump and restore the rank with it.
//
// Layout (version 3):
//   [0, 4096)                          ChannelHeader
//   [kDescOffset, +kDescSlots * 64)    descriptor ring, rank -> agent (single producer/consumer)
//   [kComplOffset, +kComplSlots * 32)  completion ring, agent -> rank (single producer/consumer)
//   [kRecOffset, +kRecBytes)           record ring, rank -> agent: the rank's decision log
//                                      bytes (docs/specs/rank-decisions.md), mode record
//
// Doorbells are futex words in the header (shared futexes, not FUTEX_PRIVATE):
//   bell  - the rank increments it and FUTEX_WAKEs after posting descriptors or changing
//           `state`; the agent's bell thread waits on it (futex_waitv over its ranks).
//   wake  - the agent increments it and FUTEX_WAKEs after publishing completions, and after
//           freeing descriptor slots or record bytes only while `room_wait` is nonzero (the
//           rank waits for room; the ordering that loses no wake-up: spec 5, Doorbells); a
//           rank in a blocking call waits on it.
// Ring indices are free-running 64-bit counters; slot = index % slots. A producer writes the
// entry, then stores the head with release order; a consumer loads the head with acquire.
#ifndef GOS_BCS_CHANNEL_H_
#define GOS_BCS_CHANNEL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gos::bcs {

inline constexpr uint32_t kChannelMagic = 0x31736267;  // "gbs1" little-endian
inline constexpr uint32_t kChannelVersion = 3;
// The oldest version an agent still serves (a channel restored from a checkpoint): version 2
// lacks `room_wait`, and the agent then wakes the rank after every freeing of ring room.
inline constexpr uint32_t kChannelMinVersion = 2;
inline constexpr uint32_t kDescSlots = 1024;
inline constexpr uint32_t kComplSlots = 1024;
inline constexpr uint32_t kRecBytes = 65536;  // record ring, a power of two

inline constexpr int32_t kAnySource = -1;
inline constexpr int32_t kAnyTag = -1;

enum class Op : uint32_t {
  kSend = 1,     // peer = destination world rank; tag >= 0; [addr, addr+len) is read
  kRecv = 2,     // peer = source world rank or kAnySource; tag or kAnyTag; [addr, +len) written
  kProbe = 3,    // peer/tag as kRecv; answered with the first matching unmatched send
  kBarrier = 4,  // tag = collective sequence on `context`; group_size members
  kBcast = 5,    // peer = root world rank; tag = collective sequence; root reads, others write
  // req = the rank's posted receive to withdraw. If it is still unmatched at this strobe it
  // completes with kComplCancelled and moves nothing; otherwise nothing happens (it completes
  // as matched). A cancel has no completion of its own.
  kCancel = 6,
};

// Descriptor flags.
inline constexpr uint32_t kFlagSync = 1u << 0;         // kSend: synchronous (MPI_Ssend)
inline constexpr uint32_t kFlagNonBlocking = 1u << 1;  // kProbe: answer at once, found or not

struct Descriptor {
  uint64_t req = 0;         // rank-chosen request id, != 0, unique among the rank's open requests
  uint64_t context = 0;     // communicator context id; messages match only within one context
  uint64_t addr = 0;        // buffer in the rank's address space
  uint64_t len = 0;         // bytes
  uint32_t op = 0;          // Op
  int32_t peer = 0;         // see Op
  int32_t tag = 0;          // see Op
  uint32_t flags = 0;       // kFlag*
  uint32_t group_size = 0;  // kBarrier, kBcast: members of the communicator
  uint32_t reserved0 = 0;
  uint64_t reserved1 = 0;
};
static_assert(sizeof(Descriptor) == 64);

// Completion errors.
enum Error : int32_t {
  kOk = 0,
  kErrTruncate = 1,  // kRecv/kBcast: the message was longer than the buffer (len = buffer size)
  kErrRank = 2,      // a peer or root outside the job
  kErrArg = 3,       // malformed descriptor (unknown op, bad group size, ...)
};

// Completion flags.
inline constexpr uint32_t kComplFound = 1u << 0;      // kProbe: a message was found
inline constexpr uint32_t kComplCancelled = 1u << 1;  // kRecv: withdrawn by a kCancel

struct Completion {
  uint64_t req = 0;
  uint64_t len = 0;     // kRecv: bytes written; kProbe: length of the found message
  int32_t source = -1;  // kRecv/kProbe: world rank of the matched sender
  int32_t tag = -1;     // kRecv/kProbe: tag of the matched send
  int32_t error = kOk;  // Error
  uint32_t flags = 0;   // kCompl*
};
static_assert(sizeof(Completion) == 32);

// Rank states (ChannelHeader::state).
enum RankState : uint32_t {
  kStateNone = 0,       // the rank never called gos_init
  kStateRunning = 1,    // computing (or inside a non-blocking call)
  kStateBlocked = 2,    // inside a blocking call, waiting for a completion
  kStateFinalized = 3,  // called gos_finalize
  kStateAborted = 4,    // called gos_abort; abort_code says with what
  // Replay only (mode kModeReplay); `note` says what happened, and the rank then waits
  // (sleeping) to be frozen or killed instead of going on:
  kStateDiverged = 5,  // the program's call differs from the recorded one
  kStateLogEnd = 6,    // the program needs a decision the recording does not have (the
                       // recorded run stopped here: a failure, or the log was cut short)
};

// Record/replay mode of the rank's decisions (ChannelHeader::mode, written by the agent before
// the rank starts or while it is frozen; the rank reads it at every decision).
enum Mode : uint32_t {
  kModeOff = 0,     // neither: decisions are taken and forgotten
  kModeRecord = 1,  // every decision is appended to the record ring
  kModeReplay = 2,  // decisions are read from the replay file, <channel path>.replay
};

struct ChannelHeader {
  // Written by the agent at creation.
  uint32_t magic;
  uint32_t version;
  uint32_t rank;  // world rank
  uint32_t size;  // world size
  uint64_t job;
  uint64_t bytes;  // size of the whole file
  uint8_t pad0[32];
  // Written by the rank.
  alignas(64) std::atomic<uint64_t> desc_head;  // descriptors posted
  std::atomic<uint32_t> bell;
  std::atomic<uint32_t> state;  // RankState
  std::atomic<int32_t> abort_code;
  // Nonzero while the rank waits for room in the descriptor or record ring (a nesting count;
  // version 3, padding before). Stored and read sequentially consistent (spec 5, Doorbells).
  std::atomic<uint32_t> room_wait;
  std::atomic<uint64_t> compl_tail;  // completions consumed
  std::atomic<uint64_t> rec_head;    // bytes produced into the record ring
  std::atomic<uint64_t> blocked_ns;  // total time spent inside blocking calls (for timelines)
  std::atomic<uint64_t> events;      // decisions taken so far (recorded or replayed)
  // Written by the agent.
  alignas(64) std::atomic<uint64_t> desc_tail;  // descriptors consumed
  std::atomic<uint64_t> compl_head;             // completions published
  std::atomic<uint32_t> wake;
  uint32_t pad2;
  std::atomic<uint64_t> strobe;    // the strobe at which completions were last published
  std::atomic<uint64_t> rec_tail;  // record-ring bytes consumed
  std::atomic<uint32_t> mode;      // Mode
  // Written by the rank before it stores kStateDiverged or kStateLogEnd: NUL-terminated text.
  alignas(64) char note[256];
};
static_assert(sizeof(ChannelHeader) <= 4096);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

inline constexpr size_t kDescOffset = 4096;
inline constexpr size_t kComplOffset = kDescOffset + kDescSlots * sizeof(Descriptor);
inline constexpr size_t kRecOffset = kComplOffset + kComplSlots * sizeof(Completion);
inline constexpr size_t kChannelBytes = kRecOffset + kRecBytes;

inline Descriptor* DescRing(void* base) {
  return reinterpret_cast<Descriptor*>(static_cast<char*>(base) + kDescOffset);
}
inline Completion* ComplRing(void* base) {
  return reinterpret_cast<Completion*>(static_cast<char*>(base) + kComplOffset);
}

inline unsigned char* RecRing(void* base) { return static_cast<unsigned char*>(base) + kRecOffset; }

}  // namespace gos::bcs

#endif  // GOS_BCS_CHANNEL_H_
