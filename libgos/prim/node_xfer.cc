// Node: XFER-AND-SIGNAL and its events (TEST-EVENT) (node_impl.h). The caller's side, then
// the progress thread's: the multicast tree's root, the receivers that forward, the acks.
#include <algorithm>
#include <cstring>

#include "node_impl.h"
#include "tree.h"

namespace gos::prim::internal {

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

void NodeImpl::Signal(EventId event, Status status) {
  if (event == kNoEvent) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_[event].push_back(std::move(status));
  }
  // After the unlock: a waiter woken under the lock would only block again on mu_.
  event_cv_[event].notify_all();
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

}  // namespace gos::prim::internal
