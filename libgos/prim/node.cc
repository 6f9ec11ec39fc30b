// Node: the three primitives over one libfabric RDM endpoint.
//
// One progress thread owns the endpoint and all protocol state (transfers in flight, query
// trees, the sequencer queue). User threads hand it work through a command queue and an
// eventfd, and wait on a condition variable; nobody spins. Protocol in docs/specs/prim-wire.md.
//
// NodeImpl (node_impl.h) is split by concern; this file holds joining, the user-thread
// accessors, leaving, and the group (bootstrap frames, peers going down and coming back).
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "gos/eventfd.h"
#include "gos/log.h"
#include "node_impl.h"

namespace gos::prim {
namespace internal {

namespace {

constexpr int kRxBuffers = 64;
// Groups up to this size open every connection when a node joins (NodeImpl::Init). A fresh
// local cluster's first job staged in 26-35 ms eagerly against 59-68 ms lazily at 4 nodes,
// 59 against 235 ms at 16; but at 32 the 1000 connections at once took 1.2 s against 0.4.
constexpr uint32_t kEagerConnectMaxNodes = 20;
constexpr auto kLeaveGrace = std::chrono::seconds(2);

}  // namespace

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

// ------------------------------------------------------------------ group membership

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

}  // namespace internal

StatusOr<std::unique_ptr<Node>> Node::Join(const NodeOptions& options) {
  if (options.bootstrap.empty()) {
    return InvalidArgumentError(
        "NodeOptions.bootstrap (the bootstrap service host:port) is "
        "required");
  }
  auto node = std::make_unique<internal::NodeImpl>(options);
  Status s = node->Init();
  if (!s.ok()) return s.WithContext("joining group at " + options.bootstrap);
  return std::unique_ptr<Node>(std::move(node));
}

}  // namespace gos::prim
