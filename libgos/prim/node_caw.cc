// Node: COMPARE-AND-WRITE (node_impl.h). The caller's side, then the progress thread's: the
// sequencer's queue and the global query tree (query, then write, then the result).
#include "node_impl.h"
#include "tree.h"

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

namespace internal {

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

}  // namespace internal
}  // namespace gos::prim
