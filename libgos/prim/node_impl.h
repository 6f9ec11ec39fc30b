// NodeImpl, the Node of gos/prim/prim.h, and the state it keeps. Private to gos_prim; its
// definitions are split by concern:
//   node.cc           joining (Init), the user-thread accessors, leaving, and the group:
//                     bootstrap frames, peers going down and coming back (failure detection)
//   node_progress.cc  the progress thread: its loop, completions, posting, the watchdog, and
//                     the dispatch of control messages
//   node_xfer.cc      XFER-AND-SIGNAL and events (TEST-EVENT)
//   node_caw.cc       COMPARE-AND-WRITE: the sequencer and the global query tree
#ifndef GOS_PRIM_NODE_IMPL_H_
#define GOS_PRIM_NODE_IMPL_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bootstrap_proto.h"
#include "fabric.h"
#include "gos/prim/prim.h"
#include "messages.h"

namespace gos::prim::internal {

inline uint64_t OpKey(NodeId origin, uint32_t seq) { return (uint64_t{origin} << 32) | seq; }

// Clears the progress thread's "inside libfabric since" mark (NodeImpl::InFabric) when it
// goes out of scope.
struct InFabricMark {
  std::atomic<int64_t>* since;
  ~InFabricMark() { since->store(0, std::memory_order_release); }
};

struct OpContext {
  fi_context2 fi_ctx;  // First: providers in FI_CONTEXT mode own this space.
  enum class Kind : uint8_t { kRecv, kSend, kWrite } kind = Kind::kSend;
  NodeId peer = kNoNode;
  std::vector<uint8_t> buf;  // Encoded message, or the receive buffer.
  // Writes: what to write where (kept for a retry after -FI_EAGAIN).
  const void* src = nullptr;
  size_t len = 0;
  uint64_t remote_offset = 0;
  void* desc = nullptr;
  // Keeps a copied XFER source alive until the write completes.
  std::shared_ptr<const std::vector<uint8_t>> keepalive;
  uint32_t incarnation = 0;  // Of the peer it was posted to (Peer::incarnation).
};

struct Peer {
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  uint64_t key = 0;
  uint64_t base = 0;
  std::string host;
  int32_t pid = 0;
  bool alive = true;
  bool left = false;  // Left cleanly (drained) rather than failed.
  std::string down_reason;
  // Last ring for a post to it that could not be made yet (RingForBacklog).
  std::chrono::steady_clock::time_point rung_for_backlog;
  // Times it joined again after being down (OnPeerUp): an error completion of something
  // posted to an earlier process under its id says nothing about this one.
  uint32_t incarnation = 0;
  // shm only: a pidfd of its process (-1: none), polled before each post to it (PeerExited).
  int pidfd = -1;
};

// A transfer this node takes part in: as its root, or as a receiver that forwards.
struct XferState {
  bool is_root = false;
  NodeId parent = kNoNode;
  uint64_t offset = 0;
  uint64_t total_len = 0;
  uint64_t received = 0;
  bool data_complete = false;
  EventId remote_event = kNoEvent;
  EventId local_event = kNoEvent;
  std::set<NodeId> awaiting;  // Children that have not acknowledged.
  Status status;              // First failure seen in the subtree.
  NodeId failed = kNoNode;
};

// A COMPARE-AND-WRITE as seen by one node of its tree.
struct CawState {
  bool is_sequencer = false;
  bool write_phase = false;
  NodeId parent = kNoNode;
  ControlMsg request;  // Query fields (set, var, op, value, write_var, write_value, fanout).
  std::set<NodeId> awaiting;
  bool result = true;
  Status status;
  NodeId failed = kNoNode;
};

// Keeps the first failure an operation sees (the one its caller is told about).
template <typename State>
void RecordFailure(State& state, Status status, NodeId node) {
  if (state.status.ok()) {
    state.status = std::move(status);
    state.failed = node;
  }
}

struct CawWaiter {
  NodeId sequencer = kNoNode;
  bool done = false;
  bool result = false;
  Status status;
};

class NodeImpl final : public Node {
 public:
  explicit NodeImpl(const NodeOptions& options) : options_(options) {}
  ~NodeImpl() override {
    Leave();
    for (Peer& p : peers_) {
      if (p.pidfd >= 0) ::close(p.pidfd);
    }
  }

  Status Init();

  NodeId id() const override { return self_; }
  uint32_t group_size() const override { return size_; }
  std::string provider() const override { return provider_; }
  std::span<std::byte> global_memory() override {
    return {fabric_->region(), fabric_->region_bytes()};
  }
  NodeInfo node_info(NodeId id) const override;
  NodeStats stats() const override;

  Status XferAndSignal(const NodeSet& dests, const void* src, size_t len, uint64_t offset,
                       EventId remote_event, EventId local_event) override;
  StatusOr<bool> TestEvent(EventId event, Deadline deadline) override;
  StatusOr<bool> CompareAndWrite(const NodeSet& nodes, uint64_t var, CompareOp op, int64_t value,
                                 uint64_t write_var, int64_t write_value,
                                 Deadline deadline) override;
  int64_t Load(uint64_t var) const override;
  void Store(uint64_t var, int64_t value) override;
  void SetSpinning(bool on) override { spinning_.store(on, std::memory_order_relaxed); }
  void CancelWaits() override;
  void Leave() override;
  Status SendRawControlForTest(NodeId to, std::span<const uint8_t> bytes) override;

 private:
  // ---- Called from user threads.
  void Submit(std::function<void()> fn);
  Status CheckSetAlive(const NodeSet& set, const char* what) const;
  Status CheckVar(uint64_t var, const char* what) const;
  std::string Describe(NodeId id) const;  // "node 3 (host h1, pid 42)".

  // ---- Progress thread.
  void Run();
  void RunLoop(const std::function<bool()>& keep_going);
  bool TransmittingToLiveNode() const;  // a send or write to a node that is up is pending
  void Watchdog();
  // Marks the progress thread as inside libfabric (posting to `peer`, or reading its
  // completion queue: kNoNode) until the returned guard ends, for the watchdog.
  [[nodiscard]] InFabricMark InFabric(NodeId peer);
  void RunCommands();
  void RunDeferredFailures();
  bool PollCompletions();
  void OnCompletion(OpContext* ctx, size_t len);
  void OnCompletionError();
  void RepostRecv(OpContext* ctx);
  void Post(OpContext* ctx);
  bool TryPost(OpContext* ctx, ssize_t* rc);
  // After posting to it (doorbell providers). `probe`: a ring that fails means this node
  // cannot reach the peers' bells (another network namespace), not that the peer died.
  void RingPeer(NodeId id, bool probe = false);
  // shm: the peer's process has exited (its pidfd says so). A node killed while it held the
  // spin lock of its shared queue leaves every later post to it spinning in libfabric for
  // good; not posting to a process that is gone avoids that (but not for a post already
  // waiting for the lock when it died). The peer is marked down at the loop's next turn
  // (exited_peers_), not here: Post runs inside loops over the very state MarkDown changes.
  bool PeerExited(NodeId id);
  void WatchPeerProcess(NodeId id);  // opens peers_[id].pidfd (shm)
  void RingForBacklog(NodeId id);
  void RetryBacklog();
  // After TryPost posted ctx with result rc: rings the peer, or fails the peer and drops ctx.
  void Posted(OpContext* ctx, ssize_t rc);
  void SendControl(NodeId to, const ControlMsg& msg);
  void WriteThenSend(NodeId to, const void* src, size_t len, uint64_t remote_offset, void* desc,
                     std::shared_ptr<const std::vector<uint8_t>> keepalive, const ControlMsg& msg);
  void ReadBootstrap();
  // A node that was down joined again (bootstrap UP): reach it at its new address.
  void OnPeerUp(const bootstrap::PeerRecord& r);
  void SendHeartbeat();
  void Reject(NodeId from, const std::string& why);
  void Signal(EventId event, Status status);
  void MarkDown(NodeId id, const std::string& reason, bool left);
  // Fails every pending operation that waits for node id.
  void FailPendingOn(NodeId id);
  Status DownError(NodeId id, const std::string& context) const;
  bool PeerAlive(NodeId id) const;

  void OnControl(std::span<const uint8_t> bytes);
  bool ValidTree(const ControlMsg& m, std::string* why) const;

  void StartXfer(NodeSet dests, std::shared_ptr<const std::vector<uint8_t>> owned,
                 const uint8_t* src, uint64_t len, uint64_t offset, EventId remote_event,
                 EventId local_event, uint32_t seq);
  void SendPieces(const ControlMsg& header, const uint8_t* data, NodeId child,
                  std::shared_ptr<const std::vector<uint8_t>> keepalive, bool from_region);
  void OnXferPiece(const ControlMsg& m);
  void OnXferAck(const ControlMsg& m);
  void MaybeFinishXfer(uint64_t key);

  void OnCawRequest(const ControlMsg& m);
  void StartNextCaw();
  // CAW_QUERY or CAW_WRITE from this node's parent.
  void OnCawDown(const ControlMsg& m);
  void OnCawReply(const ControlMsg& m);
  void SendCawDown(uint64_t key, MsgType type);
  void MaybeFinishCawPhase(uint64_t key);
  void FinishCaw(const ControlMsg& request, bool result, const Status& status, NodeId failed);
  void CompleteWaiter(uint32_t seq, bool result, const Status& status);
  void ApplyWrite(const ControlMsg& m);

  NodeOptions options_;
  std::string provider_;
  std::unique_ptr<Fabric> fabric_;
  NodeId self_ = kNoNode;
  uint32_t size_ = 0;
  int bootstrap_fd_ = -1;
  int wake_fd_ = -1;
  int epoll_fd_ = -1;
  std::thread progress_;
  // Since when the progress thread is inside libfabric (steady clock ticks; 0: it is not),
  // and for which peer (kNoNode: reading its completion queue), for the watchdog thread.
  std::atomic<int64_t> in_fabric_since_{0};
  std::atomic<NodeId> in_fabric_peer_{kNoNode};
  std::chrono::milliseconds stall_post_for_test_{0};  // $GOS_PRIM_TEST_STALL_POST_MS
  std::thread watchdog_;
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> left_{false};

  // Guards peers_ liveness, events_, caw_waiters_.
  mutable std::mutex mu_;
  // One condition variable per event, and one for COMPARE-AND-WRITE callers: a signal wakes
  // only the threads waiting for it (a daemon has several threads waiting on different
  // events, and on 2 cores waking them all for every signal costs each hop tens of us).
  std::unique_ptr<std::condition_variable[]> event_cv_ =
      std::make_unique<std::condition_variable[]>(kMaxEvents);
  std::condition_variable caw_cv_;
  bool waits_cancelled_ = false;  // CancelWaits (under mu_)
  std::vector<Peer> peers_;
  std::vector<std::deque<Status>> events_;
  std::map<uint32_t, std::shared_ptr<CawWaiter>> caw_waiters_;

  std::mutex cmd_mu_;
  std::vector<std::function<void()>> commands_;

  std::atomic<uint32_t> next_xfer_seq_{1};
  std::atomic<uint32_t> next_caw_seq_{1};

  // Progress-thread state.
  std::deque<OpContext*> backlog_;
  std::unordered_set<OpContext*> outstanding_;
  int64_t tx_pending_ = 0;  // Sends and writes posted or backlogged, not yet completed.
  std::map<uint64_t, XferState> xfers_;
  std::map<uint64_t, CawState> caws_;
  std::deque<ControlMsg> caw_queue_;
  bool caw_active_ = false;
  bootstrap::FrameBuffer bootstrap_in_;
  bool bootstrap_lost_ = false;
  Clock::time_point next_heartbeat_;
  Clock::time_point next_bootstrap_read_;  // while the loop does not sleep (RunLoop)
  int logged_rejects_ = 0;
  Clock::time_point last_busy_;
  std::chrono::microseconds spin_{0};
  std::atomic<bool> spinning_{true};  // SetSpinning
  bool bell_unreachable_ = false;     // a peer's doorbell could not be rung (RingPeer)
  std::vector<std::pair<NodeId, Clock::time_point>> deferred_failures_;
  std::vector<NodeId> exited_peers_;  // PeerExited: to be marked down by RunLoop

  std::atomic<uint64_t> sent_{0}, received_{0}, rejected_{0}, rma_bytes_{0}, forwarded_{0},
      bell_wakeups_{0};
};

}  // namespace gos::prim::internal

#endif  // GOS_PRIM_NODE_IMPL_H_
