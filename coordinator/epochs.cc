// Checkpoint epochs (docs/specs/checkpoint.md): ordering, stepping and committing them (under
// mu_), the store thread that commits them, the inbox thread that takes their chunks, and
// gos-ckpt's requests.
#include <algorithm>

#include "coordinator_impl.h"
#include "gos/coordinator/store_ops.h"
#include "gos/log.h"
#include "gos/os/layout.h"

namespace gos::coordinator::internal {
namespace {

// Queues `text` as a `frame` to each waiter, for after mu_ is released.
void Tell(const Waiters& waiters, Frame frame, const std::string& text,
          std::vector<std::function<void()>>& after) {
  for (const auto& w : *waiters) {
    after.push_back([w, frame, text] { w->Send(frame, os::EncodeText(text)).IgnoreError(); });
  }
}

std::string EpochAbortedText(uint64_t job, uint64_t epoch, const std::string& error) {
  return "checkpoint: job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
         " aborted: " + error;
}

}  // namespace

void CoordinatorImpl::InboxLoop() {
  SetThreadName("coord-inbox");
  os::BatchInbox inbox(
      node_.get(), os::kCheckpointRoute, key_,
      [this](const os::CkptBatch& b) { return StoreBatch(b); },
      [this](uint32_t node) {
        std::lock_guard<std::mutex> lock(mu_);
        auto nt = nodes_.find(node);
        return nt != nodes_.end() && nt->second.state == NodeState::kUp;
      });
  while (!stop_) inbox.Poll(std::chrono::milliseconds(200));
}

std::string CoordinatorImpl::StoreBatch(const os::CkptBatch& b) {
  auto in_flight = [&]() -> EpochInFlight* {
    auto jt = jobs_.find(b.job);
    return jt != jobs_.end() && jt->second.epoch && jt->second.epoch->epoch == b.epoch
               ? &*jt->second.epoch
               : nullptr;
  };
  {
    // An epoch no longer in flight gets nothing: its node is told the batch was taken (its
    // epoch is over anyway).
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight() == nullptr) return "";
  }
  // Stored outside mu_: the store may take a while.
  std::string problem;
  uint64_t new_bytes = 0, new_compressed = 0;
  for (const os::CkptBatchChunk& c : b.chunks) {
    auto isnew = store()->PutChunk({c.hash, c.raw_len}, c.data);
    if (!isnew.ok()) {
      problem = "storing a chunk failed: " + isnew.status().ToString();
      break;
    }
    if (*isnew) {
      new_bytes += c.raw_len;
      new_compressed += c.data.size();
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (EpochInFlight* e = in_flight()) {
    e->new_bytes += new_bytes;
    e->new_compressed += new_compressed;
    if (!problem.empty() && e->failure.empty()) {
      e->failure = "node " + std::to_string(b.node) + ": " + problem;
    }
  }
  return problem;
}

bool CoordinatorImpl::AnyEpochInFlight() const {
  for (const auto& [id, j] : jobs_) {
    if (j.epoch) return true;
  }
  // A job that ended while its epoch waited for the store thread is gone from jobs_, but
  // that epoch's chunks are still unreferenced until its commit runs.
  return std::any_of(store_tasks_.begin(), store_tasks_.end(),
                     [](const StoreTask& t) { return !t.gc_only; });
}

void CoordinatorImpl::OrderEpoch(Job& j) {
  EpochInFlight e;
  e.epoch = j.next_epoch++;
  e.ordered = SteadyClock::now();
  e.taken_ms = UnixMs();
  j.epoch = std::move(e);
  os::StrobeCommand cmd;
  cmd.type = os::CommandType::kCheckpoint;
  cmd.job = j.rec.id;
  cmd.epoch = j.epoch->epoch;
  cmd.base = j.last_committed;
  cmd.signal = o_.ckpt_level;
  Command(cmd);
}

void CoordinatorImpl::StepEpoch(Job& j, After& after) {
  EpochInFlight& e = *j.epoch;
  const auto now = SteadyClock::now();
  // Storing and committing a big epoch takes a while (4 GiB: ~20 s here): gos-ckpt gets a
  // progress line a second from the dumps' end to the commit.
  if (e.dumped && now - e.told >= std::chrono::seconds(1) && !e.waiters->empty()) {
    e.told = now;
    Tell(e.waiters, Frame::kPhase,
         "epoch " + std::to_string(e.epoch) + ": storing, " + std::to_string(e.ranks.size()) +
             " of " + std::to_string(j.rec.ntasks) + " ranks stored, " + Mib(e.new_bytes) +
             " new so far (" + Mib(e.new_compressed) + " compressed)" +
             (e.committing ? ", committing" : ""),
         after);
  }
  if (e.committing) return;
  const uint64_t id = j.rec.id;
  const NodeSet set = JobNodes(j);
  const int64_t mark = os::EpochMark(id, e.epoch);
  if (!e.dumped) {
    auto ok = node_->CompareAndWrite(set, os::VarDumped(j.slot), prim::CompareOp::kEq, mark,
                                     prim::Node::kNoWrite, 0, now + o_.failure_timeout);
    if (!ok.ok() || !*ok) {
      if (now - e.ordered > std::chrono::minutes(10)) {
        EndEpoch(j, "the dump did not finish within 10 minutes", after);
      }
      return;
    }
    // Every rank is dumped to its node's scratch: the job runs again while chunks ship.
    e.dumped = true;
    e.pause_ms = MicrosSince(e.ordered, now) / 1000;
    os::StrobeCommand cmd;
    cmd.type = os::CommandType::kResume;
    cmd.job = id;
    Command(cmd);
    Tell(e.waiters, Frame::kPhase,
         "epoch " + std::to_string(e.epoch) + ": " + std::to_string(j.rec.ntasks) +
             " ranks dumped; job paused " + std::to_string(e.pause_ms) + " ms, storing chunks",
         after);
    e.told = now;
  }
  if (!e.failure.empty()) return EndEpoch(j, e.failure, after);
  if (e.ranks.size() < j.rec.ntasks) {
    if (now - e.ordered > std::chrono::minutes(30)) {
      EndEpoch(j, "the chunks were not stored within 30 minutes", after);
    }
    return;
  }
  auto ok = node_->CompareAndWrite(set, os::VarStored(j.slot), prim::CompareOp::kEq, mark,
                                   prim::Node::kNoWrite, 0, now + o_.failure_timeout);
  if (!ok.ok() || !*ok) return;
  storage::EpochManifest m;
  m.job = id;
  m.epoch = e.epoch;
  m.strobe = strobe_;
  m.ntasks = j.rec.ntasks;
  m.taken_ms = e.taken_ms;
  m.new_bytes = e.new_bytes;
  m.new_compressed = e.new_compressed;
  m.pause_ms = e.pause_ms;
  m.total_ms = MicrosSince(e.ordered, now) / 1000;
  for (auto& [rank, r] : e.ranks) {
    for (const auto& f : r.files) m.logical_bytes += f.size;
    m.ranks.push_back(std::move(r));
  }
  // The store work (a synced commit of every reference, retention, gc: tens of ms and more
  // for a big job) runs on the store thread, not on this strobe thread; the epoch stays in
  // flight until it is done.
  e.committing = true;
  StoreTask t;
  t.manifest = std::move(m);
  t.keep = std::max<uint32_t>(Keep(j.rec), 1);
  t.waiters = e.waiters;
  store_tasks_.push_back(std::move(t));
  store_cv_.notify_one();
}

void CoordinatorImpl::StoreLoop() {
  SetThreadName("coord-store");
  for (;;) {
    StoreTask t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      store_cv_.wait(lock, [&] { return stop_ || !store_tasks_.empty(); });
      if (store_tasks_.empty()) return;  // stopping, and every commit is done
      t = std::move(store_tasks_.front());
      store_tasks_.pop_front();
    }
    CommitStored(t);
  }
}

void CoordinatorImpl::CommitStored(const StoreTask& t) {
  if (t.gc_only) return CollectChunks();
  const storage::EpochManifest& m = t.manifest;
  Status st = store()->CommitEpoch(m);
  if (st.ok()) {
    if (Status r = store()->Retain(m.job, t.keep); !r.ok()) {
      GOS_LOG(kWarn, "coordinator") << "job " << m.job << ": retention: " << r.ToString();
    }
  }
  After after;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(m.job);
    Job* j = jt != jobs_.end() && jt->second.epoch && jt->second.epoch->epoch == m.epoch
                 ? &jt->second
                 : nullptr;
    if (!st.ok() && j != nullptr) {
      j->epoch->committing = false;
      EndEpoch(*j, "commit failed: " + st.ToString(), after);  // answers the waiters
    } else if (!st.ok()) {
      const std::string text = EpochAbortedText(m.job, m.epoch, "commit failed: " + st.ToString());
      GOS_LOG(kWarn, "coordinator") << text << " (after the job ended)";
      Tell(t.waiters, Frame::kError, text, after);
    } else {
      std::string text = "checkpoint: job " + std::to_string(m.job) + " epoch " +
                         std::to_string(m.epoch) + " committed: " + std::to_string(m.ntasks) +
                         " ranks, " + Mib(m.logical_bytes) + ", " + Mib(m.new_bytes) + " new (" +
                         Mib(m.new_compressed) + " compressed), paused " +
                         std::to_string(m.pause_ms) + " ms, took " + std::to_string(m.total_ms) +
                         " ms, " + DumpKind(m);
      Tell(t.waiters, Frame::kOk, text, after);
      if (j != nullptr) {
        Notice(*j, text, after);
        j->last_committed = m.epoch;
        j->epoch.reset();
        j->next_ckpt = SteadyClock::now() + std::chrono::milliseconds(j->rec.checkpoint_ms);
      } else {
        GOS_LOG(kInfo, "coordinator") << text << " (after the job ended)";
      }
    }
  }
  CollectChunks();
  for (auto& fn : after) fn();
}

void CoordinatorImpl::CollectChunks() {
  // Chunks of epochs still in flight are unreferenced too: collect only when none is, and
  // only what was unreferenced by then (GcBefore), outside mu_.
  std::optional<uint64_t> mark;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!AnyEpochInFlight()) mark = store()->GcMark();
  }
  if (!mark) return;
  auto gc = store()->GcBefore(*mark);
  if (!gc.ok()) GOS_LOG(kWarn, "coordinator") << "chunk gc: " << gc.status().ToString();
}

void CoordinatorImpl::EndEpoch(Job& j, const std::string& error, After& after) {
  EpochInFlight& e = *j.epoch;
  const std::string text = EpochAbortedText(j.rec.id, e.epoch, error);
  Tell(e.waiters, Frame::kError, text, after);
  if (!e.dumped && j.slot != kNoSlot) {
    // Do not leave the job held.
    os::StrobeCommand cmd;
    cmd.type = os::CommandType::kResume;
    cmd.job = j.rec.id;
    Command(cmd);
  }
  Notice(j, text, after);
  j.epoch.reset();
  j.next_ckpt = SteadyClock::now() + std::chrono::milliseconds(j.rec.checkpoint_ms);
  // Chunks uploaded for it are unreferenced: the store thread collects them.
  StoreTask t;
  t.gc_only = true;
  store_tasks_.push_back(std::move(t));
  store_cv_.notify_one();
}

void CoordinatorImpl::CheckpointNow(const std::shared_ptr<Client>& c, uint64_t id, After& after) {
  auto ch = c->ch;
  auto fail = [&](const std::string& msg) {
    after.push_back([ch, msg] { ch->Send(Frame::kError, os::EncodeText(msg)).IgnoreError(); });
  };
  auto jt = jobs_.find(id);
  if (jt == jobs_.end()) return fail("job " + std::to_string(id) + " is not running");
  Job& j = jt->second;
  if (!OwnerOrRoot(c->creds, j.rec.uid)) {
    return fail("job " + std::to_string(id) + " belongs to " + j.rec.user +
                "; only its owner or root may checkpoint it");
  }
  if (j.phase != Phase::kRunning || j.exit_confirmed) {
    return fail("job " + std::to_string(id) + " is not running (it is " +
                storage::JobStateName(j.rec.state) + ")");
  }
  if (!j.epoch) OrderEpoch(j);
  j.epoch->waiters->push_back(ch);
  std::string text =
      "epoch " + std::to_string(j.epoch->epoch) + " of job " + std::to_string(id) + " ordered";
  after.push_back([ch, text] { ch->Send(Frame::kPhase, os::EncodeText(text)).IgnoreError(); });
}

void CoordinatorImpl::ListEpochs(const std::shared_ptr<Client>& c, uint64_t id, After& after) {
  auto ch = c->ch;
  std::string reply;
  Frame type = Frame::kOk;
  auto rec = tables_->GetJob(id);
  if (!rec.ok() || !rec->has_value()) {
    type = Frame::kError;
    reply = "no job " + std::to_string(id);
  } else if (!OwnerOrRoot(c->creds, (*rec)->uid)) {
    type = Frame::kError;
    reply = "job " + std::to_string(id) + " belongs to " + (*rec)->user +
            "; only its owner or root may list its checkpoints";
  } else {
    auto epochs = store()->ListEpochs(id, /*with_files=*/true);  // DumpKind
    if (!epochs.ok()) {
      type = Frame::kError;
      reply = epochs.status().ToString();
    } else {
      // A change of the settings is stored at once: the stored record has them.
      reply = "job " + std::to_string(id) + ": " + RenderCheckpointSettings(**rec, o_.keep) + "\n" +
              RenderEpochList(id, *epochs);
    }
  }
  after.push_back([ch, type, reply] { ch->Send(type, os::EncodeText(reply)).IgnoreError(); });
}

}  // namespace gos::coordinator::internal
