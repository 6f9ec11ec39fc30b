// Node: the progress thread (node_impl.h). Its loop, completions, posting to peers (with the
// backlog and doorbells), the watchdog, and the dispatch of incoming control messages.
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "gos/log.h"
#include "node_impl.h"

namespace gos::prim::internal {

namespace {

// The longest sleep on a doorbell (Fabric::bell_fd): bounds the delay of an unrung message.
constexpr int kBellSleepMs = 10;
// A post stuck this long in libfabric is stuck for good (NodeImpl::Watchdog): the process
// exits with this status.
constexpr auto kPostStuckLimit = std::chrono::seconds(10);
constexpr int kPostStuckExit = 75;
constexpr int kMaxLoggedRejects = 20;

}  // namespace

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

void NodeImpl::Reject(NodeId from, const std::string& why) {
  rejected_++;
  if (logged_rejects_++ < kMaxLoggedRejects) {
    GOS_LOG(kWarn, "prim") << "node " << self_ << ": rejected control message from "
                           << (from < size_ ? "node " + std::to_string(from) : "unknown sender")
                           << ": " << why;
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

}  // namespace gos::prim::internal
