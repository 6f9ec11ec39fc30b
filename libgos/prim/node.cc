// Node: the three primitives over one libfabric RDM endpoint.
//
// One progress thread owns the endpoint and all protocol state (transfers in flight, query
// trees, the sequencer queue). User threads hand it work through a command queue and an
// eventfd, and wait on a condition variable; nobody spins. Protocol in docs/specs/prim-wire.md.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_set>

#include "gos/eventfd.h"
#include "gos/log.h"
#include "gos/prim/prim.h"
#include "libgos/prim/bootstrap_proto.h"
#include "libgos/prim/fabric.h"
#include "libgos/prim/messages.h"
#include "libgos/prim/tree.h"

namespace gos::prim {

const char* CompareOpName(CompareOp op) {
  switch (op) {
    case CompareOp::kEq:
      return "==";
    case CompareOp::kNe:
      return "!=";
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
    case CompareOp::kGt:
      return ">";
    case CompareOp::kGe:
      return ">=";
  }
  return "?";
}

bool Compare(CompareOp op, int64_t local, int64_t value) {
  switch (op) {
    case CompareOp::kEq:
      return local == value;
    case CompareOp::kNe:
      return local != value;
    case CompareOp::kLt:
      return local < value;
    case CompareOp::kLe:
      return local <= value;
    case CompareOp::kGt:
      return local > value;
    case CompareOp::kGe:
      return local >= value;
  }
  return false;
}

namespace {

constexpr int kRxBuffers = 64;
// The longest sleep on a doorbell (Fabric::bell_fd): bounds the delay of an unrung message.
constexpr int kBellSleepMs = 10;
// A post stuck this long in libfabric is stuck for good (NodeImpl::Watchdog): the process
// exits with this status.
constexpr auto kPostStuckLimit = std::chrono::seconds(10);
constexpr int kPostStuckExit = 75;
constexpr int kMaxLoggedRejects = 20;
// Groups up to this size open every connection when a node joins (NodeImpl::Init). A fresh
// local cluster's first job staged in 26-35 ms eagerly against 59-68 ms lazily at 4 nodes,
// 59 against 235 ms at 16; but at 32 the 1000 connections at once took 1.2 s against 0.4.
constexpr uint32_t kEagerConnectMaxNodes = 20;
constexpr auto kLeaveGrace = std::chrono::seconds(2);

uint64_t OpKey(NodeId origin, uint32_t seq) { return (uint64_t{origin} << 32) | seq; }

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

Status NodeImpl::Init() {
  using bootstrap::Frame;
  using bootstrap::FrameType;
  provider_ = ResolveProvider(options_.provider);
  if (options_.fanout == 0 || options_.fanout > kMaxFanout) {
    return InvalidArgumentError("fanout must be 1.." + std::to_string(kMaxFanout));
  }
  if (options_.inline_bytes > kMaxInlineBytes) {
    return InvalidArgumentError("inline_bytes must be at most " + std::to_string(kMaxInlineBytes));
  }
  if (options_.piece_bytes == 0) return InvalidArgumentError("piece_bytes must be positive");
  if (options_.global_memory_bytes < 4096) {
    return InvalidArgumentError("global memory must be at least 4096 bytes");
  }
  auto deadline = Clock::now() + options_.join_timeout;
  // Operations are keyed by (origin, sequence number) in every node they reach. A node that
  // joins again under the id of one that died must not reuse that one's numbers while its
  // operations may still be finishing elsewhere: start from a random point.
  {
    std::random_device rd;
    next_xfer_seq_ = rd();
    next_caw_seq_ = rd();
  }
  GOS_ASSIGN_OR_RETURN(bootstrap_fd_,
                       bootstrap::ConnectTcp(options_.bootstrap, deadline, options_.cancel));
  std::string source = options_.fabric_address;
  if (source.empty() && ProviderUsesIp(provider_)) source = bootstrap::LocalIp(bootstrap_fd_);
  GOS_ASSIGN_OR_RETURN(fabric_, Fabric::Open({provider_, source, options_.global_memory_bytes}));
  GOS_ASSIGN_OR_RETURN(std::vector<uint8_t> name, fabric_->LocalName());

  bootstrap::Join join;
  join.requested_id = options_.requested_id;
  join.provider = provider_;
  join.global_memory_bytes = options_.global_memory_bytes;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  join.self.host = host;
  join.self.pid = getpid();
  join.self.fabric_name = name;
  join.self.mr_key = fabric_->region_key();
  join.self.mr_base = fabric_->region_remote_base();
  GOS_RETURN_IF_ERROR(bootstrap::WriteAll(
      bootstrap_fd_, bootstrap::EncodeFrame(FrameType::kJoin, bootstrap::EncodeJoin(join))));

  // Wait for WELCOME (or REJECT).
  bootstrap::Welcome welcome;
  while (true) {
    Frame f;
    GOS_ASSIGN_OR_RETURN(bool got, bootstrap_in_.Next(&f));
    if (got) {
      if (f.type == FrameType::kReject) {
        GOS_ASSIGN_OR_RETURN(std::string why, bootstrap::DecodeText(f.payload));
        return FailedPreconditionError("bootstrap service " + options_.bootstrap +
                                       " refused to let this node join: " + why);
      }
      if (f.type == FrameType::kWelcome) {
        GOS_ASSIGN_OR_RETURN(welcome, bootstrap::DecodeWelcome(f.payload));
        break;
      }
      continue;  // DOWN before WELCOME cannot happen; ignore anything else.
    }
    auto left = deadline - Clock::now();
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
    if (ms <= 0) {
      return DeadlineExceededError("group at bootstrap service " + options_.bootstrap +
                                   " did not form within " +
                                   std::to_string(options_.join_timeout.count()) + " ms");
    }
    if (options_.cancel != nullptr && options_.cancel->load()) {
      return CancelledError("joining the group at bootstrap service " + options_.bootstrap +
                            ": cancelled");
    }
    pollfd p{bootstrap_fd_, POLLIN, 0};
    ::poll(&p, 1, std::min(ms, 100));
    uint8_t buf[65536];
    ssize_t n = ::recv(bootstrap_fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      return UnavailableError("bootstrap service " + options_.bootstrap +
                              " closed the connection before the group formed");
    }
    if (n > 0) bootstrap_in_.Append(buf, static_cast<size_t>(n));
  }
  self_ = welcome.id;
  size_ = static_cast<uint32_t>(welcome.peers.size());
  peers_.resize(size_);
  for (uint32_t i = 0; i < size_; ++i) {
    const bootstrap::PeerRecord& r = welcome.peers[i];
    Peer& p = peers_[i];
    p.key = r.mr_key;
    p.base = r.mr_base;
    p.host = r.host;
    p.pid = r.pid;
    if (r.fabric_name.empty()) {  // Joining a formed group again: this member is down.
      p.alive = false;
      p.down_reason = "down when node " + std::to_string(self_) + " joined";
      continue;
    }
    GOS_ASSIGN_OR_RETURN(p.addr, fabric_->InsertPeer(r.fabric_name));
  }
  events_.resize(kMaxEvents);

  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (wake_fd_ < 0 || epoll_fd_ < 0) return ErrnoError(errno, "eventfd/epoll");
  for (int fd : {wake_fd_, bootstrap_fd_, fabric_->cq_fd(), fabric_->bell_fd()}) {
    if (fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return ErrnoError(errno, "epoll_ctl");
  }
  for (int i = 0; i < kRxBuffers; ++i) {
    auto* ctx = new OpContext();
    ctx->kind = OpContext::Kind::kRecv;
    ctx->buf.resize(kMaxControlBytes);
    outstanding_.insert(ctx);
    ssize_t rc = fi_recv(fabric_->ep(), ctx->buf.data(), ctx->buf.size(), nullptr, FI_ADDR_UNSPEC,
                         &ctx->fi_ctx);
    if (rc != 0) return FabricError(rc, "fi_recv");
  }
  for (NodeId id = 0; id < size_; ++id) {
    if (id != self_ && peers_[id].alive) WatchPeerProcess(id);
  }
  // Every doorbell is bound before its node joins: ring each once, so that a node that cannot
  // reach its peers' bells (another network namespace) knows it from the start.
  for (NodeId id = 0; id < size_ && fabric_->bell_fd() >= 0; ++id) {
    if (id != self_ && peers_[id].alive) RingPeer(id, /*probe=*/true);
  }
  GOS_LOG(kInfo, "prim") << "node " << self_ << "/" << size_ << " joined via " << options_.bootstrap
                         << " on " << provider_ << " at " << fabric_->PrintableName(name);
  next_heartbeat_ = Clock::now() + options_.heartbeat_interval;
  spin_ = options_.spin;
  if (const char* e = std::getenv("GOS_PRIM_SPIN_US"))
    spin_ = std::chrono::microseconds(std::atoi(e));
  if (const char* e = std::getenv("GOS_PRIM_TEST_STALL_POST_MS")) {
    stall_post_for_test_ = std::chrono::milliseconds(std::atoi(e));
  }
  // Connection-based providers (tcp;ofi_rxm) set up a connection on a pair's first message,
  // and what RMA writes need on their first write, each taking tens of milliseconds (a fresh
  // 4-node cluster's first job staged in 45-90 ms instead of 2-4): do both now, while the
  // group forms, rather than in the middle of a job's first operation. An empty write and a
  // PING to every peer; not for large groups (kEagerConnectMaxNodes).
  if (fabric_->bell_fd() < 0 && size_ <= kEagerConnectMaxNodes) {
    Submit([this] {
      static const uint64_t kNothing = 0;
      ControlMsg ping;
      ping.type = MsgType::kPing;
      ping.origin = self_;
      for (NodeId id = 0; id < size_; ++id) {
        if (id != self_ && PeerAlive(id))
          WriteThenSend(id, &kNothing, 0, 0, nullptr, nullptr, ping);
      }
    });
  }
  progress_ = std::thread([this] { Run(); });
  watchdog_ = std::thread([this] { Watchdog(); });
  return OkStatus();
}

// ------------------------------------------------------------------ user-thread API

NodeInfo NodeImpl::node_info(NodeId id) const {
  NodeInfo info;
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= size_) return info;
  info.id = id;
  info.host = peers_[id].host;
  info.pid = peers_[id].pid;
  info.alive = peers_[id].alive;
  info.down_reason = peers_[id].down_reason;
  return info;
}

NodeStats NodeImpl::stats() const {
  NodeStats s;
  s.messages_sent = sent_.load();
  s.messages_received = received_.load();
  s.messages_rejected = rejected_.load();
  s.rma_bytes_written = rma_bytes_.load();
  s.xfers_forwarded = forwarded_.load();
  s.bell_wakeups = bell_wakeups_.load();
  return s;
}

std::string NodeImpl::Describe(NodeId id) const {
  if (id >= size_) return "node " + std::to_string(id);
  return "node " + std::to_string(id) + " (host " + peers_[id].host + ", pid " +
         std::to_string(peers_[id].pid) + ")";
}

Status NodeImpl::DownError(NodeId id, const std::string& context) const {
  return UnavailableError(context + ": " + Describe(id) + " is down: " + peers_[id].down_reason);
}

Status NodeImpl::CheckSetAlive(const NodeSet& set, const char* what) const {
  if (set.empty()) return InvalidArgumentError(std::string(what) + ": empty node set");
  if (set.Bound() > size_) {
    return InvalidArgumentError(std::string(what) + ": node set " + set.ToString() +
                                " is outside the group of " + std::to_string(size_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (NodeId id : set.ToVector()) {
    if (!peers_[id].alive) return DownError(id, what);
  }
  return OkStatus();
}

Status NodeImpl::CheckVar(uint64_t var, const char* what) const {
  if (var % 8 != 0 || var > fabric_->region_bytes() - 8) {
    return InvalidArgumentError(std::string(what) + " " + std::to_string(var) +
                                " is not an 8-byte aligned offset inside global memory of " +
                                std::to_string(fabric_->region_bytes()) + " bytes");
  }
  return OkStatus();
}

void NodeImpl::Submit(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    commands_.push_back(std::move(fn));
  }
  NotifyEventFd(wake_fd_);
}

Status NodeImpl::XferAndSignal(const NodeSet& dests, const void* src, size_t len, uint64_t offset,
                               EventId remote_event, EventId local_event) {
  if (left_) return FailedPreconditionError("XFER-AND-SIGNAL: node has left the group");
  if ((remote_event != kNoEvent && remote_event >= kMaxEvents) ||
      (local_event != kNoEvent && local_event >= kMaxEvents)) {
    return InvalidArgumentError("XFER-AND-SIGNAL: event ids must be below " +
                                std::to_string(kMaxEvents));
  }
  size_t gm = fabric_->region_bytes();
  if (offset > gm || len > gm - offset) {
    return InvalidArgumentError("XFER-AND-SIGNAL: [" + std::to_string(offset) + ", +" +
                                std::to_string(len) + ") is outside global memory of " +
                                std::to_string(gm) + " bytes");
  }
  if (len > 0 && src == nullptr) return InvalidArgumentError("XFER-AND-SIGNAL: null source");
  GOS_RETURN_IF_ERROR(CheckSetAlive(dests, "XFER-AND-SIGNAL"));
  // Without a local event the caller cannot know when src is free: copy it. Small blocks
  // are copied anyway (they travel inline).
  std::shared_ptr<const std::vector<uint8_t>> owned;
  const auto* bytes = static_cast<const uint8_t*>(src);
  if (local_event == kNoEvent || len <= options_.inline_bytes) {
    owned = std::make_shared<const std::vector<uint8_t>>(bytes, bytes + len);
    bytes = owned->data();
  }
  uint32_t seq = next_xfer_seq_++;
  Submit([this, dests, owned, bytes, len, offset, remote_event, local_event, seq] {
    StartXfer(dests, owned, bytes, len, offset, remote_event, local_event, seq);
  });
  return OkStatus();
}

StatusOr<bool> NodeImpl::TestEvent(EventId event, Deadline deadline) {
  if (event >= kMaxEvents) {
    return InvalidArgumentError("TEST-EVENT: event " + std::to_string(event) + " is not below " +
                                std::to_string(kMaxEvents));
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (waits_cancelled_) return CancelledError("TEST-EVENT: waits cancelled (stopping)");
    auto& q = events_[event];
    if (!q.empty()) {
      Status s = std::move(q.front());
      q.pop_front();
      if (!s.ok()) return s;
      return true;
    }
    if (deadline == Deadline::max()) {
      event_cv_[event].wait(lock);
    } else if (Clock::now() >= deadline) {
      return false;
    } else {
      event_cv_[event].wait_until(lock, deadline);
    }
  }
}

void NodeImpl::CancelWaits() {
  std::lock_guard<std::mutex> lock(mu_);
  waits_cancelled_ = true;
  for (size_t e = 0; e < kMaxEvents; ++e) event_cv_[e].notify_all();
}

StatusOr<bool> NodeImpl::CompareAndWrite(const NodeSet& nodes, uint64_t var, CompareOp op,
                                         int64_t value, uint64_t write_var, int64_t write_value,
                                         Deadline deadline) {
  if (left_) return FailedPreconditionError("COMPARE-AND-WRITE: node has left the group");
  if (static_cast<uint8_t>(op) > static_cast<uint8_t>(CompareOp::kGe)) {
    return InvalidArgumentError("COMPARE-AND-WRITE: unknown comparison");
  }
  GOS_RETURN_IF_ERROR(CheckVar(var, "COMPARE-AND-WRITE: variable"));
  if (write_var != kNoWrite) GOS_RETURN_IF_ERROR(CheckVar(write_var, "COMPARE-AND-WRITE: write"));
  GOS_RETURN_IF_ERROR(CheckSetAlive(nodes, "COMPARE-AND-WRITE"));
  if (deadline == Deadline::max()) deadline = Clock::now() + options_.op_timeout;

  ControlMsg req;
  req.type = MsgType::kCawRequest;
  req.src = self_;
  req.origin = self_;
  req.seq = next_caw_seq_++;
  req.set = nodes;
  req.tree_root = nodes.ToVector().front();  // The sequencer: lowest node of the set.
  req.fanout = static_cast<uint16_t>(options_.fanout);
  req.var = var;
  req.op = op;
  req.value = value;
  req.write_var = write_var;
  req.write_value = write_value;

  auto waiter = std::make_shared<CawWaiter>();
  waiter->sequencer = req.tree_root;
  {
    std::lock_guard<std::mutex> lock(mu_);
    caw_waiters_[req.seq] = waiter;
  }
  Submit([this, req] {
    if (req.tree_root == self_) {
      OnCawRequest(req);
    } else if (!PeerAlive(req.tree_root)) {
      CompleteWaiter(req.seq, false, DownError(req.tree_root, "COMPARE-AND-WRITE sequencer"));
    } else {
      SendControl(req.tree_root, req);
    }
  });
  std::unique_lock<std::mutex> lock(mu_);
  if (!caw_cv_.wait_until(lock, deadline, [&] { return waiter->done; })) {
    caw_waiters_.erase(req.seq);
    return DeadlineExceededError("COMPARE-AND-WRITE over " + nodes.ToString() + " (var " +
                                 std::to_string(var) + " " + CompareOpName(op) + " " +
                                 std::to_string(value) + ") did not complete in time; " +
                                 "sequencer is " + Describe(req.tree_root));
  }
  if (!waiter->status.ok()) return waiter->status;
  return waiter->result;
}

int64_t NodeImpl::Load(uint64_t var) const {
  auto* p = reinterpret_cast<int64_t*>(fabric_->region() + var);
  return std::atomic_ref<int64_t>(*p).load(std::memory_order_acquire);
}

void NodeImpl::Store(uint64_t var, int64_t value) {
  auto* p = reinterpret_cast<int64_t*>(fabric_->region() + var);
  std::atomic_ref<int64_t>(*p).store(value, std::memory_order_release);
}

Status NodeImpl::SendRawControlForTest(NodeId to, std::span<const uint8_t> bytes) {
  if (to >= size_) return InvalidArgumentError("no such node");
  std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  Submit([this, to, copy = std::move(copy)]() mutable {
    auto* ctx = new OpContext();
    ctx->kind = OpContext::Kind::kSend;
    ctx->peer = to;
    ctx->buf = std::move(copy);
    Post(ctx);
  });
  return OkStatus();
}

void NodeImpl::Leave() {
  if (left_) return;
  left_ = true;
  if (progress_.joinable()) {
    // Let queued work (acks, forwards) go out before saying goodbye.
    Submit([this] { stop_ = true; });
    progress_.join();
  }
  if (watchdog_.joinable()) {  // after the progress thread: a stuck post still ends the process
    {
      std::lock_guard<std::mutex> lock(watchdog_mu_);
      watchdog_stop_ = true;
    }
    watchdog_cv_.notify_all();
    watchdog_.join();
  }
  if (bootstrap_fd_ >= 0) {
    if (!bootstrap_lost_) {
      auto frame = bootstrap::EncodeFrame(bootstrap::FrameType::kLeave, {});
      bootstrap::WriteAll(bootstrap_fd_, frame).IgnoreError();
    }
    ::close(bootstrap_fd_);
    bootstrap_fd_ = -1;
  }
  fabric_.reset();  // Closes the endpoint: no completion can refer to a context after this.
  for (OpContext* ctx : outstanding_) delete ctx;
  outstanding_.clear();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  wake_fd_ = epoll_fd_ = -1;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [seq, w] : caw_waiters_) {
    w->done = true;
    w->status = CancelledError("COMPARE-AND-WRITE: node left the group");
  }
  caw_cv_.notify_all();
}

// ------------------------------------------------------------------ progress thread

void NodeImpl::Run() {
  SetThreadName("prim-progress");
  RunLoop([this] { return !stop_; });
  // Leaving: finish what this node takes part in — forwards its children wait for, acks
  // its parents wait for, queries it sequences — so nobody waits on a node that left.
  // Bounded: a peer that does not answer in time is not waited for.
  // Transmissions to a node that is down are not waited for: on shm one completes only once
  // its target has copied it, which a stopped or dead node never does.
  auto deadline = Clock::now() + std::chrono::seconds(5);
  RunLoop([this, deadline] {
    bool busy =
        !xfers_.empty() || !caws_.empty() || !caw_queue_.empty() || TransmittingToLiveNode();
    return busy && Clock::now() < deadline;
  });
}

bool NodeImpl::TransmittingToLiveNode() const {
  if (tx_pending_ == 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  for (const OpContext* ctx : backlog_) {
    if (peers_[ctx->peer].alive) return true;
  }
  for (const OpContext* ctx : outstanding_) {
    if (ctx->kind != OpContext::Kind::kRecv && peers_[ctx->peer].alive) return true;
  }
  return false;
}

void NodeImpl::RunLoop(const std::function<bool()>& keep_going) {
  while (keep_going()) {
    RunCommands();
    bool busy = PollCompletions();
    RetryBacklog();
    if (Clock::now() >= next_heartbeat_) SendHeartbeat();
    if (!deferred_failures_.empty()) RunDeferredFailures();
    if (!exited_peers_.empty()) {
      std::vector<NodeId> exited;
      exited.swap(exited_peers_);
      for (NodeId id : exited) {
        MarkDown(id, "its process (pid " + std::to_string(peers_[id].pid) + ") has exited", false);
      }
    }
    if (!keep_going()) break;
    if (busy || !backlog_.empty()) {
      if (busy) last_busy_ = Clock::now();
      // The bootstrap service's frames are read when the loop sleeps; a loop kept busy (a
      // backlog to a peer that died never drains: its posts fail with EAGAIN for good)
      // must still hear of that death, or it would retry forever.
      if (const auto now = Clock::now(); now >= next_bootstrap_read_ && !bootstrap_lost_) {
        next_bootstrap_read_ = now + std::chrono::milliseconds(1);
        ReadBootstrap();
      }
      if (!backlog_.empty()) sched_yield();
      continue;
    }
    // Just busy: the next message of a tree operation (a reply, the next piece) usually
    // follows within microseconds. Poll a little longer, yielding the core each round,
    // before paying for a sleep and a wakeup.
    if (spinning_.load(std::memory_order_relaxed) && Clock::now() - last_busy_ < spin_) {
      sched_yield();
      continue;
    }
    // Idle: sleep until a command, a completion, a bootstrap frame or the next heartbeat.
    // Providers without a wait fd are polled every 100 us.
    int timeout_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          next_heartbeat_ - Clock::now())
                                          .count()) +
                     1;
    if (!deferred_failures_.empty()) timeout_ms = std::min(timeout_ms, 50);
    // With a doorbell (shm), peers ring after posting here: sleep on it, except while a
    // transmission of ours waits for a peer's progress (its completion comes unrung), and
    // never longer than kBellSleepMs once a bell proved unreachable (then ours may be too).
    const bool poll = fabric_->bell_fd() >= 0 ? tx_pending_ > 0 : fabric_->cq_fd() < 0;
    if (poll) {
      timeout_ms = 0;
    } else if (fabric_->bell_fd() >= 0) {
      if (bell_unreachable_) timeout_ms = std::min(timeout_ms, kBellSleepMs);
    } else if (!fabric_->TryWait()) {
      continue;
    }
    epoll_event evs[4];
    int n = epoll_wait(epoll_fd_, evs, 4, std::max(timeout_ms, 0));
    if (poll && n == 0) usleep(100);
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.fd == fabric_->bell_fd()) {
        fabric_->DrainBell();  // the CQ is read next, after this
        bell_wakeups_++;
      } else if (evs[i].data.fd == wake_fd_) {
        uint64_t v;
        ssize_t rc = ::read(wake_fd_, &v, sizeof v);
        (void)rc;
      } else if (evs[i].data.fd == bootstrap_fd_) {
        ReadBootstrap();
      }
    }
  }
}

void NodeImpl::RunDeferredFailures() {
  auto now = Clock::now();
  std::vector<NodeId> due;
  std::erase_if(deferred_failures_, [&](const auto& d) {
    if (d.second > now) return false;
    due.push_back(d.first);
    return true;
  });
  for (NodeId id : due) FailPendingOn(id);
}

void NodeImpl::RunCommands() {
  std::vector<std::function<void()>> cmds;
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    cmds.swap(commands_);
  }
  for (auto& c : cmds) c();
}

bool NodeImpl::PollCompletions() {
  bool any = false;
  for (int round = 0; round < 16; ++round) {
    fi_cq_msg_entry entries[32];
    ssize_t n;
    {
      auto in_fabric = InFabric(kNoNode);
      n = fi_cq_read(fabric_->cq(), entries, 32);
    }
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      OnCompletionError();
      any = true;
      continue;
    }
    if (n < 0) {
      GOS_LOG(kError, "prim") << FabricError(n, "fi_cq_read").ToString();
      break;
    }
    any = true;
    for (ssize_t i = 0; i < n; ++i) {
      OnCompletion(static_cast<OpContext*>(entries[i].op_context), entries[i].len);
    }
  }
  return any;
}

void NodeImpl::OnCompletion(OpContext* ctx, size_t len) {
  if (ctx->kind == OpContext::Kind::kRecv) {
    received_++;
    OnControl(std::span<const uint8_t>(ctx->buf.data(), std::min(len, ctx->buf.size())));
    RepostRecv(ctx);
    return;
  }
  tx_pending_--;
  outstanding_.erase(ctx);
  delete ctx;
}

void NodeImpl::OnCompletionError() {
  fi_cq_err_entry err;
  Status s = fabric_->ReadCqError(&err);
  auto* ctx = static_cast<OpContext*>(err.op_context);
  if (ctx == nullptr) {
    GOS_LOG(kWarn, "prim") << "node " << self_ << ": completion error: " << s.ToString();
    return;
  }
  if (ctx->kind == OpContext::Kind::kRecv) {
    if (err.err == FI_ECANCELED) return;  // Shutting down.
    // A message longer than our buffers: the provider truncated it. Drop it, keep going.
    NodeId from = kNoNode;
    if (ctx->buf.size() >= 12) std::memcpy(&from, ctx->buf.data() + 8, 4);
    Reject(from, "control message of " + std::to_string(err.olen + err.len) +
                     " bytes exceeds the " + std::to_string(kMaxControlBytes) + "-byte limit (" +
                     s.message() + ")");
    RepostRecv(ctx);
    return;
  }
  NodeId peer = ctx->peer;
  const bool current = peer < size_ && ctx->incarnation == peers_[peer].incarnation;
  tx_pending_--;
  outstanding_.erase(ctx);
  delete ctx;
  if (current) MarkDown(peer, "fabric error talking to it: " + s.message(), false);
}

void NodeImpl::RepostRecv(OpContext* ctx) {
  if (stop_) return;
  ssize_t rc;
  do {
    rc = fi_recv(fabric_->ep(), ctx->buf.data(), ctx->buf.size(), nullptr, FI_ADDR_UNSPEC,
                 &ctx->fi_ctx);
    if (rc == -FI_EAGAIN) fi_cq_read(fabric_->cq(), nullptr, 0);
  } while (rc == -FI_EAGAIN);
  if (rc != 0) GOS_LOG(kError, "prim") << FabricError(rc, "fi_recv").ToString();
}

InFabricMark NodeImpl::InFabric(NodeId peer) {
  in_fabric_peer_.store(peer, std::memory_order_relaxed);
  in_fabric_since_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
  return InFabricMark{&in_fabric_since_};
}

bool NodeImpl::TryPost(OpContext* ctx, ssize_t* rc) {
  const Peer& p = peers_[ctx->peer];
  auto in_fabric = InFabric(ctx->peer);
  if (stall_post_for_test_.count() > 0) std::this_thread::sleep_for(stall_post_for_test_);
  if (ctx->kind == OpContext::Kind::kSend) {
    *rc = fi_send(fabric_->ep(), ctx->buf.data(), ctx->buf.size(), nullptr, p.addr, &ctx->fi_ctx);
  } else {
    *rc = fi_write(fabric_->ep(), ctx->src, ctx->len, ctx->desc, p.addr,
                   p.base + ctx->remote_offset, p.key, &ctx->fi_ctx);
  }
  return *rc != -FI_EAGAIN;
}

// A libfabric call never blocks, except in one known case: shm takes a spin lock in the
// receiver's shared region (to post to a peer, to read our own queue), and a node stopped or
// killed while holding one leaves it held for good. The progress thread then spins forever,
// and the node is lost to the group (no heartbeat, no progress). Rather than hang, the
// process exits, naming the cause.
void NodeImpl::Watchdog() {
  SetThreadName("prim-watchdog");
  std::unique_lock<std::mutex> lock(watchdog_mu_);
  while (!watchdog_cv_.wait_for(lock, std::chrono::milliseconds(500),
                                [this] { return watchdog_stop_; })) {
    const int64_t since = in_fabric_since_.load(std::memory_order_acquire);
    if (since == 0) continue;
    const auto stuck = Clock::now() - Clock::time_point(Clock::duration(since));
    if (stuck < kPostStuckLimit) continue;
    const NodeId to = in_fabric_peer_.load(std::memory_order_relaxed);
    GOS_LOG(kError, "prim") << "node " << self_ << ": stuck for "
                            << std::chrono::duration_cast<std::chrono::seconds>(stuck).count()
                            << " s in libfabric (" << provider_ << ") "
                            << (to == kNoNode ? "reading its completion queue"
                                              : "posting to " + Describe(to))
                            << (provider_ == "shm"
                                    ? ": a node stopped or killed while holding a lock of shm's "
                                      "shared queues blocks every sender to it"
                                    : "")
                            << "; exiting (status " << kPostStuckExit << ")";
    std::fflush(nullptr);
    ::_exit(kPostStuckExit);
  }
}

void NodeImpl::Post(OpContext* ctx) {
  ctx->incarnation = peers_[ctx->peer].incarnation;
  outstanding_.insert(ctx);
  if (!PeerAlive(ctx->peer) || PeerExited(ctx->peer)) {
    outstanding_.erase(ctx);
    delete ctx;
    return;
  }
  tx_pending_++;
  if (ctx->kind == OpContext::Kind::kSend) {
    sent_++;
  } else {
    rma_bytes_ += ctx->len;
  }
  ssize_t rc;
  // Keep order per the SAW/SAS rules: once anything waits, everything queues behind it.
  if (!backlog_.empty() || !TryPost(ctx, &rc)) {
    backlog_.push_back(ctx);
    RingForBacklog(ctx->peer);
    return;
  }
  Posted(ctx, rc);
}

// A post to `id` had to wait (FI_EAGAIN): what it waits for is that peer's progress (shm's
// first message to a peer is a connection request the peer must take in; a full queue must
// be drained), so wake it, at most once a millisecond while the wait lasts. Without this a
// sleeping peer noticed only at its next heartbeat, up to 200 ms later: the first job of a
// freshly formed local cluster staged in 200, 400 or 600 ms instead of a few.
void NodeImpl::RingForBacklog(NodeId id) {
  Peer& p = peers_[id];
  const auto now = Clock::now();
  if (now - p.rung_for_backlog < std::chrono::milliseconds(1)) return;
  p.rung_for_backlog = now;
  RingPeer(id);
}

void NodeImpl::Posted(OpContext* ctx, ssize_t rc) {
  if (rc == 0) {
    RingPeer(ctx->peer);
    return;
  }
  NodeId peer = ctx->peer;
  tx_pending_--;
  outstanding_.erase(ctx);
  delete ctx;
  MarkDown(peer, FabricError(rc, "posting to it failed").message(), false);
}

void NodeImpl::RetryBacklog() {
  while (!backlog_.empty()) {
    OpContext* ctx = backlog_.front();
    if (!PeerAlive(ctx->peer) || PeerExited(ctx->peer)) {
      backlog_.pop_front();
      tx_pending_--;
      outstanding_.erase(ctx);
      delete ctx;
      continue;
    }
    ssize_t rc;
    if (!TryPost(ctx, &rc)) {
      RingForBacklog(ctx->peer);
      return;
    }
    backlog_.pop_front();
    Posted(ctx, rc);
  }
}

bool NodeImpl::PeerExited(NodeId id) {
  Peer& p = peers_[id];
  if (p.pidfd < 0) return false;
  pollfd pfd{p.pidfd, POLLIN, 0};
  if (::poll(&pfd, 1, 0) <= 0) return false;
  if (std::find(exited_peers_.begin(), exited_peers_.end(), id) == exited_peers_.end()) {
    exited_peers_.push_back(id);
  }
  return true;
}

void NodeImpl::WatchPeerProcess(NodeId id) {
  Peer& p = peers_[id];
  if (p.pidfd >= 0) ::close(p.pidfd);
  p.pidfd = -1;
  // shm's peers are processes of this host and PID namespace (it copies with their pids).
  if (fabric_->bell_fd() < 0 || p.pid <= 0) return;
  p.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, p.pid, 0));
}

void NodeImpl::RingPeer(NodeId id, bool probe) {
  if (fabric_->bell_fd() < 0 || fabric_->Ring(peers_[id].addr) || bell_unreachable_) return;
  // A bell that answered once and no longer does belongs to a process that is gone: the
  // bootstrap service will say so. Only a failed probe means this node cannot ring bells.
  if (!probe) return;
  const int err = errno;
  bell_unreachable_ = true;
  GOS_LOG(kWarn, "prim") << "node " << self_ << ": cannot ring the doorbell of " << Describe(id)
                         << " (" << std::strerror(err) << "): it polls every " << kBellSleepMs
                         << " ms instead (shm needs its peers on this host and network namespace)";
}

void NodeImpl::SendControl(NodeId to, const ControlMsg& msg) {
  auto* ctx = new OpContext();
  ctx->kind = OpContext::Kind::kSend;
  ctx->peer = to;
  ControlMsg m = msg;
  m.src = self_;
  EncodeControl(m, &ctx->buf);
  Post(ctx);
}

void NodeImpl::WriteThenSend(NodeId to, const void* src, size_t len, uint64_t remote_offset,
                             void* desc, std::shared_ptr<const std::vector<uint8_t>> keepalive,
                             const ControlMsg& msg) {
  auto* w = new OpContext();
  w->kind = OpContext::Kind::kWrite;
  w->peer = to;
  w->src = src;
  w->len = len;
  w->remote_offset = remote_offset;
  w->desc = desc;
  w->keepalive = std::move(keepalive);
  Post(w);
  // FI_ORDER_SAW: the peer processes this message only after the write above has landed.
  SendControl(to, msg);
}

bool NodeImpl::PeerAlive(NodeId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id < size_ && peers_[id].alive;
}

void NodeImpl::ReadBootstrap() {
  using bootstrap::Down;
  using bootstrap::Frame;
  using bootstrap::FrameType;
  uint8_t buf[65536];
  ssize_t n = ::recv(bootstrap_fd_, buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    GOS_LOG(kWarn, "prim") << "node " << self_ << ": lost the bootstrap service "
                           << options_.bootstrap
                           << "; failures are now detected by fabric errors and deadlines only";
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, bootstrap_fd_, nullptr);
    bootstrap_lost_ = true;
    return;
  }
  bootstrap_in_.Append(buf, static_cast<size_t>(n));
  while (true) {
    Frame f;
    StatusOr<bool> got = bootstrap_in_.Next(&f);
    if (!got.ok()) {
      GOS_LOG(kError, "prim") << "node " << self_
                              << ": bad frame from bootstrap service: " << got.status().ToString();
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, bootstrap_fd_, nullptr);
      bootstrap_lost_ = true;
      return;
    }
    if (!*got) return;
    if (f.type == FrameType::kDown) {
      StatusOr<Down> d = bootstrap::DecodeDown(f.payload);
      if (d.ok() && d->node < size_ && d->node != self_) MarkDown(d->node, d->reason, d->left);
    } else if (f.type == FrameType::kUp) {
      StatusOr<bootstrap::PeerRecord> up = bootstrap::DecodeUp(f.payload);
      if (!up.ok() || up->id >= size_ || up->id == self_) continue;
      OnPeerUp(*up);
      // Acknowledged even if its address could not be added: it is then down again, here.
      Status s = bootstrap::WriteAll(
          bootstrap_fd_, bootstrap::EncodeFrame(FrameType::kUpAck, bootstrap::EncodeUpAck(up->id)));
      if (!s.ok()) GOS_LOG(kWarn, "prim") << "node " << self_ << ": " << s.ToString();
    }
  }
}

void NodeImpl::OnPeerUp(const bootstrap::PeerRecord& r) {
  const NodeId id = r.id;
  // Nothing of its earlier process is pending any more: what waited for it fails now (at
  // once, also if it left and its failures were deferred), and what still waits to be posted
  // to it was meant for that process. Operations it started itself finish or fail on their
  // own; the new process numbers its operations from another random start (Init), so they
  // cannot be mistaken for those.
  FailPendingOn(id);
  std::erase_if(backlog_, [&](OpContext* ctx) {
    if (ctx->peer != id) return false;
    tx_pending_--;
    outstanding_.erase(ctx);
    delete ctx;
    return true;
  });
  std::erase_if(deferred_failures_, [&](const auto& d) { return d.first == id; });
  StatusOr<fi_addr_t> addr = fabric_->InsertPeer(r.fabric_name);
  if (!addr.ok()) {
    GOS_LOG(kError, "prim") << "node " << self_ << ": node " << id << " joined again but "
                            << addr.status().ToString();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& p = peers_[id];
    p.addr = *addr;
    p.key = r.mr_key;
    p.base = r.mr_base;
    p.host = r.host;
    p.pid = r.pid;
    p.alive = true;
    p.left = false;
    p.down_reason.clear();
    p.rung_for_backlog = {};
    p.incarnation++;
  }
  WatchPeerProcess(id);
  GOS_LOG(kInfo, "prim") << "node " << self_ << ": " << Describe(id) << " joined again";
  RingPeer(id, /*probe=*/true);
}

void NodeImpl::SendHeartbeat() {
  next_heartbeat_ = Clock::now() + options_.heartbeat_interval;
  if (bootstrap_lost_) return;
  auto frame = bootstrap::EncodeFrame(bootstrap::FrameType::kHeartbeat, {});
  ssize_t rc = ::send(bootstrap_fd_, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)rc;  // A full socket buffer means the service is not reading: it will notice.
}

void NodeImpl::Reject(NodeId from, const std::string& why) {
  rejected_++;
  if (logged_rejects_++ < kMaxLoggedRejects) {
    GOS_LOG(kWarn, "prim") << "node " << self_ << ": rejected control message from "
                           << (from < size_ ? "node " + std::to_string(from) : "unknown sender")
                           << ": " << why;
  }
}

void NodeImpl::Signal(EventId event, Status status) {
  if (event == kNoEvent) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_[event].push_back(std::move(status));
  }
  // After the unlock: a waiter woken under the lock would only block again on mu_.
  event_cv_[event].notify_all();
}

void NodeImpl::MarkDown(NodeId id, const std::string& reason, bool left) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (id >= size_ || !peers_[id].alive || id == self_) return;
    peers_[id].alive = false;
    peers_[id].down_reason = left ? "it left the group" : reason;
  }
  GOS_LOG_AT(left ? LogLevel::kInfo : LogLevel::kWarn, "prim")
      << "node " << self_ << ": " << Describe(id) << " is down: " << peers_[id].down_reason;
  if (left) {
    // A node that left drained first: its last acks and replies may still be on the way
    // (the fabric and the bootstrap service are different paths). Fail what still waits
    // for it only after a grace period.
    peers_[id].left = true;
    deferred_failures_.emplace_back(id, Clock::now() + kLeaveGrace);
    return;
  }
  FailPendingOn(id);
}

void NodeImpl::FailPendingOn(NodeId id) {
  // Transfers: a dead child never acknowledges; a dead parent never sends the rest.
  std::vector<uint64_t> keys;
  for (auto& [key, x] : xfers_) keys.push_back(key);
  for (uint64_t key : keys) {
    auto it = xfers_.find(key);
    if (it == xfers_.end()) continue;
    XferState& x = it->second;
    if (!x.is_root && !x.data_complete && x.parent == id) {
      Signal(x.remote_event,
             DownError(id, "XFER-AND-SIGNAL into offset " + std::to_string(x.offset) + " cut off"));
      xfers_.erase(it);
      continue;
    }
    if (x.awaiting.erase(id) > 0) {
      RecordFailure(x, DownError(id, "XFER-AND-SIGNAL"), id);
      MaybeFinishXfer(key);
    }
  }
  // Query trees.
  keys.clear();
  for (auto& [key, c] : caws_) keys.push_back(key);
  for (uint64_t key : keys) {
    auto it = caws_.find(key);
    if (it == caws_.end()) continue;
    CawState& c = it->second;
    if (!c.is_sequencer && c.parent == id) {
      caws_.erase(it);  // Nobody left to answer.
      continue;
    }
    if (c.awaiting.erase(id) > 0) {
      RecordFailure(c, DownError(id, "COMPARE-AND-WRITE"), id);
      MaybeFinishCawPhase(key);
    }
  }
  std::erase_if(caw_queue_, [&](const ControlMsg& m) { return m.origin == id; });
  // Our own calls whose sequencer died.
  std::vector<uint32_t> orphaned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [seq, w] : caw_waiters_) {
      if (w->sequencer == id) orphaned.push_back(seq);
    }
  }
  for (uint32_t seq : orphaned) {
    CompleteWaiter(seq, false, DownError(id, "COMPARE-AND-WRITE sequencer"));
  }
}

// ------------------------------------------------------------------ control messages

bool NodeImpl::ValidTree(const ControlMsg& m, std::string* why) const {
  if (m.tree_root >= size_ || m.set.Bound() > size_ || m.set.empty()) {
    *why = "tree outside the group";
    return false;
  }
  return true;
}

void NodeImpl::OnControl(std::span<const uint8_t> bytes) {
  StatusOr<ControlMsg> decoded = DecodeControl(bytes);
  if (!decoded.ok()) {
    NodeId from = kNoNode;
    if (bytes.size() >= 12) std::memcpy(&from, bytes.data() + 8, 4);
    Reject(from, decoded.status().message());
    return;
  }
  ControlMsg& m = *decoded;
  if (m.src >= size_ || m.src == self_ || m.origin >= size_) {
    Reject(m.src, "source or origin node outside the group");
    return;
  }
  if (!PeerAlive(m.src) && !peers_[m.src].left) return;  // Late words from a failed node.
  switch (m.type) {
    case MsgType::kXferPiece:
      return OnXferPiece(m);
    case MsgType::kXferAck:
      return OnXferAck(m);
    case MsgType::kCawRequest:
      return OnCawRequest(m);
    case MsgType::kCawQuery:
    case MsgType::kCawWrite:
      return OnCawDown(m);
    case MsgType::kCawQueryReply:
    case MsgType::kCawWriteAck:
      return OnCawReply(m);
    case MsgType::kCawResult:
      if (m.origin != self_) return Reject(m.src, "CAW_RESULT for another node's call");
      return CompleteWaiter(m.seq, m.result, m.ReplyStatus());
    case MsgType::kPing:
      return;
  }
}

// ---- XFER-AND-SIGNAL

void NodeImpl::StartXfer(NodeSet dests, std::shared_ptr<const std::vector<uint8_t>> owned,
                         const uint8_t* src, uint64_t len, uint64_t offset, EventId remote_event,
                         EventId local_event, uint32_t seq) {
  if (dests.Contains(self_)) {
    std::byte* dst = fabric_->region() + offset;
    if (len > 0 && dst != reinterpret_cast<const std::byte*>(src)) std::memcpy(dst, src, len);
    Signal(remote_event, OkStatus());
  }
  TreePosition pos = TreeAt(self_, dests, options_.fanout, self_);
  if (pos.children.empty()) {
    Signal(local_event, OkStatus());
    return;
  }
  uint64_t key = OpKey(self_, seq);
  XferState& x = xfers_[key];
  x.is_root = true;
  x.offset = offset;
  x.total_len = len;
  x.received = len;
  x.data_complete = true;
  x.local_event = local_event;
  x.awaiting.insert(pos.children.begin(), pos.children.end());

  ControlMsg header;
  header.type = MsgType::kXferPiece;
  header.origin = self_;
  header.seq = seq;
  header.tree_root = self_;
  header.fanout = static_cast<uint16_t>(options_.fanout);
  header.set = std::move(dests);
  header.offset = offset;
  header.total_len = len;
  header.event = remote_event;
  for (NodeId child : pos.children) {
    if (!PeerAlive(child)) {
      x.awaiting.erase(child);
      RecordFailure(x, DownError(child, "XFER-AND-SIGNAL"), child);
    }
  }
  std::vector<NodeId> live(x.awaiting.begin(), x.awaiting.end());
  for (NodeId child : live) SendPieces(header, src, child, owned, false);
  MaybeFinishXfer(key);
}

void NodeImpl::SendPieces(const ControlMsg& header, const uint8_t* data, NodeId child,
                          std::shared_ptr<const std::vector<uint8_t>> keepalive, bool from_region) {
  ControlMsg m = header;
  if (header.total_len <= options_.inline_bytes) {
    m.piece_off = 0;
    m.piece_len = header.total_len;
    m.is_inline = true;
    m.inline_data = std::span<const uint8_t>(data, header.total_len);
    SendControl(child, m);
    return;
  }
  void* desc = from_region ? fabric_->region_desc() : nullptr;
  for (uint64_t off = 0; off < header.total_len; off += options_.piece_bytes) {
    m.piece_off = off;
    m.piece_len = std::min<uint64_t>(options_.piece_bytes, header.total_len - off);
    m.is_inline = false;
    WriteThenSend(child, data + off, m.piece_len, header.offset + off, desc, keepalive, m);
  }
}

void NodeImpl::OnXferPiece(const ControlMsg& m) {
  std::string why;
  if (!ValidTree(m, &why)) return Reject(m.src, "XFER_PIECE: " + why);
  size_t gm = fabric_->region_bytes();
  if (m.offset > gm || m.total_len > gm - m.offset) {
    return Reject(m.src, "XFER_PIECE outside global memory");
  }
  if (m.event != kNoEvent && m.event >= kMaxEvents) {
    return Reject(m.src, "XFER_PIECE with event " + std::to_string(m.event));
  }
  if (m.origin != m.tree_root) return Reject(m.src, "XFER_PIECE origin is not the tree root");
  TreePosition pos = TreeAt(m.tree_root, m.set, m.fanout, self_);
  if (!pos.member || pos.parent != m.src) {
    return Reject(m.src, "XFER_PIECE from a node that is not this node's parent in its tree");
  }
  uint64_t key = OpKey(m.origin, m.seq);
  auto [it, fresh] = xfers_.try_emplace(key);
  XferState& x = it->second;
  if (fresh) {
    x.parent = m.src;
    x.offset = m.offset;
    x.total_len = m.total_len;
    x.remote_event = m.event;
    x.awaiting.insert(pos.children.begin(), pos.children.end());
    for (NodeId child : pos.children) {
      if (!PeerAlive(child)) {
        x.awaiting.erase(child);
        RecordFailure(x, DownError(child, "XFER-AND-SIGNAL"), child);
      }
    }
  } else if (x.offset != m.offset || x.total_len != m.total_len || x.data_complete) {
    return Reject(m.src, "XFER_PIECE inconsistent with earlier pieces of its transfer");
  }
  const uint8_t* piece =
      reinterpret_cast<const uint8_t*>(fabric_->region()) + m.offset + m.piece_off;
  if (m.is_inline && m.piece_len > 0) {
    std::memcpy(fabric_->region() + m.offset + m.piece_off, m.inline_data.data(), m.piece_len);
  }
  // Forward first, so the pipeline keeps moving, then signal.
  ControlMsg fwd = m;
  fwd.is_inline = false;
  fwd.inline_data = {};
  for (NodeId child : x.awaiting) {
    forwarded_++;
    if (m.is_inline) {
      fwd.is_inline = true;
      fwd.inline_data = std::span<const uint8_t>(piece, m.piece_len);
      SendControl(child, fwd);
    } else {
      WriteThenSend(child, piece, m.piece_len, m.offset + m.piece_off, fabric_->region_desc(),
                    nullptr, fwd);
    }
  }
  x.received += m.piece_len;
  if (x.received >= x.total_len) {
    x.data_complete = true;
    Signal(x.remote_event, OkStatus());
  }
  MaybeFinishXfer(key);
}

void NodeImpl::OnXferAck(const ControlMsg& m) {
  uint64_t key = OpKey(m.origin, m.seq);
  auto it = xfers_.find(key);
  if (it == xfers_.end() || it->second.awaiting.erase(m.src) == 0) {
    return Reject(m.src, "XFER_ACK for no transfer awaiting it");
  }
  XferState& x = it->second;
  if (!m.ReplyStatus().ok()) RecordFailure(x, m.ReplyStatus(), m.failed);
  MaybeFinishXfer(key);
}

void NodeImpl::MaybeFinishXfer(uint64_t key) {
  auto it = xfers_.find(key);
  if (it == xfers_.end()) return;
  XferState& x = it->second;
  if (!x.data_complete || !x.awaiting.empty()) return;
  if (x.is_root) {
    Signal(x.local_event, x.status);
  } else if (PeerAlive(x.parent)) {
    ControlMsg ack;
    ack.type = MsgType::kXferAck;
    ack.origin = static_cast<NodeId>(key >> 32);
    ack.seq = static_cast<uint32_t>(key);
    ack.code = x.status.code();
    ack.reason = x.status.message();
    ack.failed = x.failed;
    SendControl(x.parent, ack);
  }
  xfers_.erase(it);
}

// ---- COMPARE-AND-WRITE

void NodeImpl::OnCawRequest(const ControlMsg& m) {
  std::string why;
  if (!ValidTree(m, &why)) return Reject(m.src, "CAW_REQUEST: " + why);
  if (m.tree_root != self_ || m.set.ToVector().front() != self_) {
    return Reject(m.src, "CAW_REQUEST sent to a node that is not the set's sequencer");
  }
  caw_queue_.push_back(m);
  if (!caw_active_) StartNextCaw();
}

void NodeImpl::StartNextCaw() {
  while (!caw_active_ && !caw_queue_.empty()) {
    ControlMsg req = std::move(caw_queue_.front());
    caw_queue_.pop_front();
    uint64_t key = OpKey(req.origin, req.seq);
    if (caws_.count(key)) continue;  // Duplicate request.
    caw_active_ = true;
    CawState& c = caws_[key];
    c.is_sequencer = true;
    c.request = req;
    c.result = Compare(req.op, Load(req.var), req.value);
    if (!c.result) {
      MaybeFinishCawPhase(key);  // False here: the answer is false, no need to ask anyone.
    } else {
      SendCawDown(key, MsgType::kCawQuery);
    }
  }
}

void NodeImpl::SendCawDown(uint64_t key, MsgType type) {
  CawState& c = caws_.at(key);
  TreePosition pos = TreeAt(c.request.tree_root, c.request.set, c.request.fanout, self_);
  ControlMsg down = c.request;
  down.type = type;
  for (NodeId child : pos.children) {
    if (!PeerAlive(child)) {
      RecordFailure(c, DownError(child, "COMPARE-AND-WRITE"), child);
      continue;
    }
    c.awaiting.insert(child);
    SendControl(child, down);
  }
  MaybeFinishCawPhase(key);
}

void NodeImpl::OnCawDown(const ControlMsg& m) {
  const bool write = m.type == MsgType::kCawWrite;
  const std::string name = MsgTypeName(m.type);
  std::string why;
  if (!ValidTree(m, &why)) return Reject(m.src, name + ": " + why);
  bool write_ok = m.write_var != kNoWrite && CheckVar(m.write_var, "var").ok();
  bool vars_ok =
      write ? write_ok : CheckVar(m.var, "var").ok() && (m.write_var == kNoWrite || write_ok);
  if (!vars_ok) return Reject(m.src, name + " variable outside global memory");
  TreePosition pos = TreeAt(m.tree_root, m.set, m.fanout, self_);
  if (!pos.member || pos.parent != m.src || !m.set.Contains(self_)) {
    return Reject(m.src, name + " from a node that is not this node's parent in its tree");
  }
  uint64_t key = OpKey(m.origin, m.seq);
  CawState& c = caws_[key];
  c = CawState{};
  c.parent = m.src;
  c.request = m;
  c.write_phase = write;
  if (write) {
    ApplyWrite(m);
  } else {
    c.result = Compare(m.op, Load(m.var), m.value);
  }
  if (c.result) {
    SendCawDown(key, m.type);
  } else {
    MaybeFinishCawPhase(key);  // False here: the subtree cannot make it true.
  }
}

void NodeImpl::OnCawReply(const ControlMsg& m) {
  uint64_t key = OpKey(m.origin, m.seq);
  auto it = caws_.find(key);
  bool want_write = m.type == MsgType::kCawWriteAck;
  if (it == caws_.end() || it->second.write_phase != want_write ||
      it->second.awaiting.erase(m.src) == 0) {
    return Reject(m.src, std::string(MsgTypeName(m.type)) + " for no query awaiting it");
  }
  CawState& c = it->second;
  c.result = c.result && m.result;
  if (!m.ReplyStatus().ok()) RecordFailure(c, m.ReplyStatus(), m.failed);
  MaybeFinishCawPhase(key);
}

void NodeImpl::MaybeFinishCawPhase(uint64_t key) {
  auto it = caws_.find(key);
  if (it == caws_.end() || !it->second.awaiting.empty()) return;
  CawState& c = it->second;
  if (!c.is_sequencer) {
    if (PeerAlive(c.parent)) {
      ControlMsg reply;
      reply.type = c.write_phase ? MsgType::kCawWriteAck : MsgType::kCawQueryReply;
      reply.origin = c.request.origin;
      reply.seq = c.request.seq;
      reply.result = c.result;
      reply.code = c.status.code();
      reply.reason = c.status.message();
      reply.failed = c.failed;
      SendControl(c.parent, reply);
    }
    caws_.erase(it);
    return;
  }
  // Sequencer: the query is answered; write if it held, then report.
  if (!c.write_phase && c.status.ok() && c.result && c.request.write_var != kNoWrite) {
    c.write_phase = true;
    ApplyWrite(c.request);
    SendCawDown(key, MsgType::kCawWrite);  // Re-enters here when the acks are in.
    return;
  }
  ControlMsg request = c.request;
  bool result = c.result && c.status.ok();
  Status status = c.status;
  NodeId failed = c.failed;
  caws_.erase(it);
  FinishCaw(request, result, status, failed);
}

void NodeImpl::FinishCaw(const ControlMsg& request, bool result, const Status& status,
                         NodeId failed) {
  if (request.origin == self_) {
    CompleteWaiter(request.seq, result, status);
  } else if (PeerAlive(request.origin)) {
    ControlMsg r;
    r.type = MsgType::kCawResult;
    r.origin = request.origin;
    r.seq = request.seq;
    r.result = result;
    r.code = status.code();
    r.reason = status.message();
    r.failed = failed;
    SendControl(request.origin, r);
  }
  caw_active_ = false;
  StartNextCaw();
}

void NodeImpl::CompleteWaiter(uint32_t seq, bool result, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = caw_waiters_.find(seq);
    if (it == caw_waiters_.end()) return;  // Caller gave up (deadline).
    it->second->done = true;
    it->second->result = result;
    it->second->status = status;
    caw_waiters_.erase(it);
  }
  caw_cv_.notify_all();  // after the unlock, as in Signal
}

void NodeImpl::ApplyWrite(const ControlMsg& m) { Store(m.write_var, m.write_value); }

}  // namespace

StatusOr<std::unique_ptr<Node>> Node::Join(const NodeOptions& options) {
  if (options.bootstrap.empty()) {
    return InvalidArgumentError(
        "NodeOptions.bootstrap (the bootstrap service host:port) is "
        "required");
  }
  auto node = std::make_unique<NodeImpl>(options);
  Status s = node->Init();
  if (!s.ok()) return s.WithContext("joining group at " + options.bootstrap);
  return std::unique_ptr<Node>(std::move(node));
}

}  // namespace gos::prim
