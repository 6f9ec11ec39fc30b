// The three primitives of the gos global OS (seed 000 §3.1; DESIGN.md), over libfabric:
//
//   XFER-AND-SIGNAL  Node::XferAndSignal — PUT a block into the global memory of a node set,
//                    multicast as a k-ary forwarding tree; signal a remote and/or local event.
//   TEST-EVENT       Node::TestEvent — poll an event, or block until it fires or a deadline.
//   COMPARE-AND-WRITE Node::CompareAndWrite — compare a global variable on a node set with a
//                    value; true iff it holds on every node; then optionally write a (possibly
//                    different) global variable on every node. Sequentially consistent.
//
// A Node is one member of a group formed through a bootstrap service (bootstrap.h). Every
// node registers "global memory" of the same size; an offset names the same bytes on every
// node. Global variables are 8-byte aligned int64 values in global memory.
//
// Threading: a Node runs one progress thread that owns the fabric endpoint and all protocol
// state; its public methods are thread-safe and may be called from any thread. Waiting
// (TestEvent, CompareAndWrite) sleeps on a condition variable, never spins.
//
// Failures: a node that dies is reported by the bootstrap service (socket closed, or silent
// past failure_timeout) or by a fabric error; every pending and later operation that
// involves it fails with kUnavailable naming it ("node 3 (host h1 pid 42) is down: ...").
// Every blocking call also has a deadline, so nothing hangs.
#ifndef GOS_PRIM_PRIM_H_
#define GOS_PRIM_PRIM_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "gos/prim/node_set.h"
#include "gos/status.h"

namespace gos::prim {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

using EventId = uint32_t;
inline constexpr EventId kNoEvent = 0xffffffffu;
// Events are numbered 0 .. kMaxEvents-1 on every node.
inline constexpr EventId kMaxEvents = 1024;

enum class CompareOp : uint8_t { kEq = 0, kNe = 1, kLt = 2, kLe = 3, kGt = 4, kGe = 5 };
// "==", "!=", ...
const char* CompareOpName(CompareOp op);
// local <op> value, e.g. Compare(kLt, 3, 5) == true.
bool Compare(CompareOp op, int64_t local, int64_t value);

// The provider a node uses: `requested` if set, else $GOS_FABRIC_PROVIDER, else
// "tcp;ofi_rxm".
std::string ResolveProvider(const std::string& requested);

// libfabric's shm provider keeps each endpoint's region in /dev/shm/PID:N:N (16 MiB, sparse)
// and removes it when the endpoint closes; a process killed with SIGKILL leaves it. Removes
// the regions in `dir` (/dev/shm) of processes that no longer exist. A node opening an shm
// endpoint and `gos-cluster down` call it.
void SweepDeadShmRegions(const std::string& dir);

struct NodeOptions {
  // Bootstrap service to join, "host:port". Required.
  std::string bootstrap;
  // libfabric provider: "tcp;ofi_rxm" (across hosts), "tcp", "shm" or "sockets" (one host).
  // Default: $GOS_FABRIC_PROVIDER, else "tcp;ofi_rxm".
  std::string provider;
  // Address the fabric endpoint binds to (tcp-based providers). Default: the local address
  // of the connection to the bootstrap service, i.e. the interface that reaches the group.
  std::string fabric_address;
  // Node id to ask for; kNoNode lets the bootstrap service pick the lowest free id.
  NodeId requested_id = kNoNode;
  // Bytes of global memory; must be equal on every node. Default: 32 MiB.
  size_t global_memory_bytes = 32u << 20;
  // Fan-out of the multicast and query trees. Default: 4.
  uint32_t fanout = 4;
  // XFER payloads up to this size travel inside the control message. Default: 8 KiB.
  size_t inline_bytes = 8u << 10;
  // Larger payloads move as RMA writes of at most this size, pipelined through the tree.
  // Default: 1 MiB.
  size_t piece_bytes = 1u << 20;
  // After handling a message, the progress thread keeps polling (yielding the core each
  // round) this long before it sleeps: replies in a tree come back within microseconds.
  // $GOS_PRIM_SPIN_US overrides. Default: 200 us (16 nodes on 2 cores: 8-byte multicast p50
  // ~200 us against ~270 us with 50; docs/benchmarks.md). gos's daemons, which share the
  // cores with ranks, use 50 us.
  std::chrono::microseconds spin{200};
  // Heartbeat period to the bootstrap service. Default: 200 ms.
  std::chrono::milliseconds heartbeat_interval{200};
  // Deadline of a CompareAndWrite without an explicit one. Default: 10 s.
  std::chrono::milliseconds op_timeout{10000};
  // How long Join waits for the group to be complete. Default: 30 s.
  std::chrono::milliseconds join_timeout{30000};
  // Join gives up (CANCELLED) within ~100 ms of *cancel turning true, e.g. the caller's stop
  // flag set by SIGTERM. Default: none.
  const std::atomic<bool>* cancel = nullptr;
};

struct NodeInfo {
  NodeId id = kNoNode;
  std::string host;
  int32_t pid = 0;
  bool alive = true;
  std::string down_reason;  // Why it is down, if it is.
};

struct NodeStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t messages_rejected = 0;  // Malformed, oversized or out-of-range control messages.
  uint64_t rma_bytes_written = 0;
  uint64_t xfers_forwarded = 0;
  uint64_t bell_wakeups = 0;  // Sleeps ended by a peer ringing the doorbell (shm).
};

class Node {
 public:
  // Joins the group served by options.bootstrap; returns once every member has joined and
  // the fabric address table is known. Errors name the bootstrap address and the cause.
  static StatusOr<std::unique_ptr<Node>> Join(const NodeOptions& options);

  virtual ~Node() = default;

  virtual NodeId id() const = 0;
  virtual uint32_t group_size() const = 0;
  // Provider actually in use, e.g. "tcp;ofi_rxm".
  virtual std::string provider() const = 0;
  // This node's global memory. Writes by XFER-AND-SIGNAL land here.
  virtual std::span<std::byte> global_memory() = 0;
  virtual NodeInfo node_info(NodeId id) const = 0;
  virtual NodeStats stats() const = 0;

  // XFER-AND-SIGNAL: PUT len bytes from src into [offset, offset+len) of the global memory
  // of every node in dests (which may include this node). Non-blocking. On each
  // destination, remote_event fires once the whole block is there: a receiver that sees the
  // event never sees partial data. local_event fires on this node once every destination
  // has the data (acknowledged through the tree), or with an error naming the node that
  // failed. src must stay valid until local_event fires (when len > inline_bytes); without
  // a local event, src is copied first.
  virtual Status XferAndSignal(const NodeSet& dests, const void* src, size_t len, uint64_t offset,
                               EventId remote_event = kNoEvent, EventId local_event = kNoEvent) = 0;

  // TEST-EVENT: consumes one signal of event. Returns true if there was one (or one came
  // before the deadline), false if not; a signal that carries an error (a failed transfer)
  // is returned as that error. Poll with TestEvent(e) (deadline = now).
  virtual StatusOr<bool> TestEvent(EventId event, Deadline deadline = Deadline::min()) = 0;
  StatusOr<bool> WaitEvent(EventId event, std::chrono::nanoseconds timeout) {
    return TestEvent(event, Clock::now() + timeout);
  }

  // COMPARE-AND-WRITE: true iff `var <op> value` holds on every node of nodes (var is a
  // global variable offset). If true and write_var != kNoWrite, sets write_var = write_value
  // on every node of nodes before returning. Blocking. Concurrent calls over the same node
  // set are serialised by the set's lowest node (the sequencer), so every node applies their
  // writes in one order. Fails (never hangs) if a node of the set is or goes down.
  static constexpr uint64_t kNoWrite = ~uint64_t{0};
  virtual StatusOr<bool> CompareAndWrite(const NodeSet& nodes, uint64_t var, CompareOp op,
                                         int64_t value, uint64_t write_var = kNoWrite,
                                         int64_t write_value = 0,
                                         Deadline deadline = Deadline::max()) = 0;

  // Whether the progress thread keeps polling for NodeOptions::spin after each message
  // (on, the default) or sleeps at once. A node whose peers will not answer soon (nothing
  // but compute is going on) turns it off: each round of that polling yields the core, and
  // on a machine whose cores are all busy every yield is a context switch.
  virtual void SetSpinning(bool on) = 0;

  // Every TEST-EVENT under way or to come returns CANCELLED at once: the caller's threads
  // that wait for events see it and stop, instead of sleeping out their timeouts (call it
  // when shutting down, before joining them and before Leave).
  virtual void CancelWaits() = 0;

  // Atomic access to a local global variable.
  virtual int64_t Load(uint64_t var) const = 0;
  virtual void Store(uint64_t var, int64_t value) = 0;

  // Leaves the group cleanly (peers see "left", not "failed"). Also done by the destructor.
  virtual void Leave() = 0;

  // Testing only: sends raw bytes as a control message to a peer, bypassing the encoder, so
  // tests can prove that malformed and oversized messages are rejected.
  virtual Status SendRawControlForTest(NodeId to, std::span<const uint8_t> bytes) = 0;
};

}  // namespace gos::prim

#endif  // GOS_PRIM_PRIM_H_
