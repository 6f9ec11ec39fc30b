// Restarts (docs/specs/checkpoint.md): gos-restart, a job requeued to restart from its newest
// epoch, and shipping a restored job's images to its new nodes (staging thread).
#include <algorithm>
#include <climits>

#include "coordinator_impl.h"
#include "gos/coordinator/store_ops.h"
#include "gos/log.h"
#include "gos/os/layout.h"

namespace gos::coordinator::internal {

void CoordinatorImpl::Restart(const std::shared_ptr<Client>& c, const os::RestartRequest& req,
                              After& after) {
  auto ch = c->ch;
  auto fail = [&](const std::string& msg) {
    after.push_back([ch, msg] { ch->Send(Frame::kError, os::EncodeText(msg)).IgnoreError(); });
  };
  const uint64_t id = req.job;
  const std::string job_name = "job " + std::to_string(id);
  auto rec = JobToFollow(*c, id, "restart");
  if (!rec.ok()) return fail(rec.status().message());
  if (auto jt = jobs_.find(id); jt != jobs_.end() && jt->second.awaits_client) {
    // Restarted already, by this coordinator when it started: follow that restart.
    const bool options = req.epoch != 0 || !req.exclude.empty() || req.from_store ||
                         req.checkpoint_ms != 0 || req.keep != 0;
    Attach(c, id, after);
    if (options) {
      Notice(jt->second,
             job_name + " was being restarted from epoch " +
                 std::to_string(jt->second.restore_epoch) +
                 " already (its automatic restart after the coordinator restarted); "
                 "gos-restart's options do not apply to it (gos-kill " +
                 std::to_string(id) + " and gos-restart again to use them)",
             after);
    }
    return;
  }
  if (jobs_.count(id)) {
    return fail(job_name + " is still " + storage::JobStateName(jobs_.at(id).rec.state) +
                "; kill it first (gos-kill " + std::to_string(id) + ")");
  }
  auto epochs = store()->ListEpochs(id, false);
  if (!epochs.ok()) return fail(epochs.status().ToString());
  if (epochs->empty()) return fail(job_name + " has no checkpoint to restart from");
  uint64_t epoch = req.epoch != 0 ? req.epoch : epochs->back().epoch;
  auto m = store()->GetEpoch(id, epoch);
  if (!m.ok()) return fail(m.status().ToString());
  if (!m->has_value()) {
    std::string have;
    for (const auto& e : *epochs) have += (have.empty() ? "" : ", ") + std::to_string(e.epoch);
    return fail(job_name + " has no epoch " + std::to_string(epoch) + " (it has " + have + ")");
  }
  Job j = RestartedJob(*rec);
  j.req.exclude = req.exclude;
  std::sort(j.req.exclude.begin(), j.req.exclude.end());
  if (Status s = matrix_.Check(j.req); !s.ok()) return fail(job_name + ": " + s.message());
  j.client = c;
  // The job goes on with its stored checkpoint settings (and the automatic restarts it has
  // left); what the request sets replaces them, and is stored with the job.
  if (req.checkpoint_ms > 0) {
    j.rec.checkpoint_ms = req.checkpoint_ms;
  } else if (req.checkpoint_ms == os::RestartRequest::kNoCheckpoint) {
    j.rec.checkpoint_ms = 0;
  }
  if (req.keep != 0) j.rec.keep = req.keep;
  j.restore_from_store = req.from_store;
  SetRestore(j, std::move(**m), epochs->back().epoch);
  c->job = id;
  ever_had_job_ = true;
  jobs_[id] = std::move(j);
  PersistJob(jobs_[id]);
  queue_.Push(jobs_[id].req);
  GOS_LOG(kInfo, "coordinator") << job_name << " restarting from epoch " << epoch << " for "
                                << UserName(c->creds.uid);
  auto bytes = os::EncodeU64(id);
  after.push_back([ch, bytes] { ch->Send(Frame::kAccepted, bytes).IgnoreError(); });
  Notice(jobs_[id], job_name + ": " + RenderCheckpointSettings(jobs_[id].rec, o_.keep), after);
  Schedule(after);
}

Job CoordinatorImpl::RestartedJob(const JobRecord& rec) {
  Job j;
  j.rec = rec;
  j.rec.state = JobState::kQueued;
  j.rec.message.clear();
  j.rec.exit_code = -1;
  j.rec.failed_rank = -1;
  j.rec.failed_node = -1;
  j.rec.end_ms = 0;
  j.rec.row = -1;
  j.rec.rank_nodes.clear();
  j.req.job = rec.id;
  j.req.ntasks = rec.ntasks;
  j.submit = SteadyClock::now();
  // A recorded job goes on recording (its log is cut back to the epoch when it is restored).
  j.record = rec.recorded && rec.replay_of == 0;
  return j;
}

void CoordinatorImpl::SetRestore(Job& j, storage::EpochManifest m, uint64_t newest) {
  // Each rank is best placed where it was dumped: that node may still hold the dump.
  j.req.rank_home.assign(j.rec.ntasks, 0);
  for (const auto& r : m.ranks) {
    if (r.rank < j.req.rank_home.size()) j.req.rank_home[r.rank] = r.node;
  }
  j.restore_epoch = m.epoch;
  j.restore = std::move(m);
  j.restore_ready.clear();
  // New epochs get new numbers; none of this incarnation's nodes shipped a chunk yet.
  j.next_epoch = std::max(j.next_epoch, newest + 1);
  j.last_committed = 0;
}

bool CoordinatorImpl::RequeueForRestart(Job& j, const std::string& why, After& after) {
  auto epochs = store()->ListEpochs(j.rec.id, false);
  if (!epochs.ok() || epochs->empty()) return false;
  auto m = store()->GetEpoch(j.rec.id, epochs->back().epoch);
  if (!m.ok() || !m->has_value()) return false;
  const uint64_t id = j.rec.id;
  if (j.epoch && !j.epoch->committing) EndEpoch(j, why, after);
  // The new incarnation keeps the id and will likely get this slot again, whose VarStarted
  // still holds the id on the surviving nodes. A node zeroes it only when it processes the
  // RESTORE command, and a survivor can be that late (its strobe thread may sit up to the
  // BCS peer timeout in the old incarnation's exchange with the dead node): CheckJobs would
  // take the stale value for "restored" and send RESUME before the ranks are back, and a
  // node that got RESUME before RESTORE keeps the job held forever. So zero the slot's
  // variables on the survivors now, before the old incarnation is forgotten.
  if (j.slot != kNoSlot) {
    NodeSet survivors;
    for (uint32_t n : j.nodes) {
      auto nt = nodes_.find(n);
      if (nt != nodes_.end() && nt->second.state == NodeState::kUp) survivors.Add(n);
    }
    for (uint64_t var : {os::VarStarted(j.slot), os::VarDone(j.slot)}) {
      if (survivors.empty()) break;
      // ">= INT64_MIN" always holds: an unconditional write on every survivor.
      auto ok = node_->CompareAndWrite(survivors, var, prim::CompareOp::kGe, INT64_MIN, var, 0,
                                       SteadyClock::now() + o_.failure_timeout);
      if (!ok.ok() || !*ok) {
        GOS_LOG(kWarn, "coordinator")
            << "job " << id << ": cannot clear slot " << j.slot << " for the restart: "
            << (ok.ok() ? std::string("comparison failed") : ok.status().ToString());
      }
    }
  }
  // Kill and forget what is left of the job, free its slot and cells, and queue it again.
  ReleaseSlot(j);
  if (matrix_.Has(id)) matrix_.Remove(id);
  ++j.rec.restarts_used;
  j.phase = Phase::kQueued;
  // No incarnation runs until the RESTORE goes out: what the lost run still ships is dropped.
  j.launch_strobe = 0;
  j.rec.state = JobState::kQueued;
  j.rec.row = -1;
  j.rec.rank_nodes.clear();
  j.nodes.clear();
  j.output_done.clear();
  j.exit_confirmed = false;
  j.rank_failed = false;
  j.exit_code = 0;
  SetRestore(j, std::move(**m), epochs->back().epoch);
  j.req.exclude.clear();
  // Like gos-restart, -N (and a ranks-per-node count) is not kept: a job that spanned the
  // lost node could never be placed again on the nodes left, and would stay queued forever.
  j.req.nodes = 0;
  j.req.ranks_per_node = 0;
  PersistJob(j);
  queue_.Push(j.req);
  Notice(j,
         "job " + std::to_string(id) + ": restarting from epoch " +
             std::to_string(j.restore_epoch) + " (" + std::to_string(RestartsLeft(j.rec)) +
             " automatic restarts left)",
         after);
  Schedule(after);
  return true;
}

Status CoordinatorImpl::ShipImages(uint64_t id) {
  storage::EpochManifest m;
  std::vector<uint32_t> rank_nodes;
  std::map<uint32_t, std::shared_ptr<Channel>> chans;
  std::shared_ptr<Channel> client;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(id);
    if (jt == jobs_.end() || !jt->second.restore) return CancelledError("job gone");
    Job& j = jt->second;
    m = *j.restore;
    rank_nodes = j.rec.rank_nodes;
    j.restore_ready.clear();
    for (uint32_t n : j.nodes) {
      auto at = node_agents_.find(n);
      if (at == node_agents_.end()) return UnavailableError("node " + std::to_string(n) + " left");
      chans[n] = at->second->ch;
    }
    if (j.client) client = j.client->ch;
  }
  const std::string what = "job " + std::to_string(id) + " epoch " + std::to_string(m.epoch);
  if (m.ranks.size() != rank_nodes.size()) {
    return DataLossError(what + ": the manifest has " + std::to_string(m.ranks.size()) +
                         " ranks, the job " + std::to_string(rank_nodes.size()));
  }
  // First ask each rank's node whether it still has its own copy of the rank's dump (it
  // does when the rank was dumped there and nothing newer replaced it): such a rank needs
  // nothing from the store. The node checks its copy chunk by chunk against the manifest.
  bool from_store;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(id);
    if (jt == jobs_.end()) return CancelledError("job gone");
    jt->second.local_ready.clear();
    from_store = jt->second.restore_from_store;
  }
  for (const auto& r : m.ranks) {
    if (from_store) break;
    storage::EpochManifest one;
    one.job = id;
    one.epoch = m.epoch;
    one.strobe = m.strobe;
    one.ntasks = m.ntasks;
    one.ranks = {r};
    GOS_RETURN_IF_ERROR(
        chans.at(rank_nodes.at(r.rank))->Send(Frame::kRestoreLocal, storage::EncodeManifest(one)));
  }
  std::set<uint32_t> local;
  GOS_RETURN_IF_ERROR(WaitForAnswers(
      id, std::chrono::minutes(5),
      what + ": the nodes did not answer whether they hold their ranks' dumps within 5 minutes",
      [&](Job& j) {
        if (!from_store && j.local_ready.size() < m.ranks.size()) return UnavailableError("");
        for (const auto& [rank, ready] : j.local_ready) {
          if (!ready.ok) continue;
          local.insert(rank);
          j.restore_ready[rank] = ready;  // its images are in place
        }
        return OkStatus();
      }));
  if (client && !local.empty()) {
    client
        ->Send(Frame::kNotice,
               os::EncodeText("restoring " + what + ": " + std::to_string(local.size()) + " of " +
                              std::to_string(m.ranks.size()) +
                              " ranks from their nodes' own copies of the dump"))
        .IgnoreError();
  }
  uint64_t total = 0;
  for (const auto& r : m.ranks) {
    if (local.count(r.rank)) continue;
    for (const auto& f : r.files) total += f.size;
  }
  // One sender per node, so that the nodes decompress, check and write their ranks' chunks
  // at the same time; each node gets its ranks one after the other, in restore batches
  // XFERed into its memory (docs/specs/checkpoint.md, "Shipping").
  std::map<uint32_t, std::vector<const storage::EpochRank*>> by_node;
  for (const auto& r : m.ranks) {
    if (!local.count(r.rank)) by_node[rank_nodes.at(r.rank)].push_back(&r);
  }
  const uint64_t attempt = ++restore_attempt_;
  const auto shipping_since = SteadyClock::now();
  std::atomic<uint64_t> sent{0}, batches{0};
  std::atomic<bool> failed{false};
  std::mutex progress_mu;
  auto last_progress = SteadyClock::now();
  // Ranks whose node refused a batch: (node, the refusal), by rank.
  std::map<uint32_t, std::pair<uint32_t, Status>> refusals;
  auto ship_node = [&](uint32_t node, const std::vector<const storage::EpochRank*>& ranks) {
    auto ch = chans.at(node);
    // Polled while the shipment waits for the node.
    const os::ShipCheck check = [&, node]() -> Status {
      if (failed) return CancelledError("the restart failed on another node");
      std::lock_guard<std::mutex> lock(mu_);
      auto jt = jobs_.find(id);
      if (stop_ || jt == jobs_.end()) return CancelledError("job gone");
      if (jt->second.kill_requested) return CancelledError("killed");
      auto nt = nodes_.find(node);
      if (nt == nodes_.end() || nt->second.state != NodeState::kUp) {
        return UnavailableError(
            "node " + std::to_string(node) + " is down" +
            (nt == nodes_.end() ? std::string() : ": " + nt->second.down_reason));
      }
      return OkStatus();
    };
    for (const storage::EpochRank* r : ranks) {
      if (failed) return OkStatus();
      const std::string of_rank = what + " rank " + std::to_string(r->rank);
      os::CkptBatch head;
      head.kind = os::BatchKind::kRestore;
      head.job = id;
      head.epoch = m.epoch;
      head.rank = r->rank;
      head.attempt = attempt;
      os::BatchShipment shipment(restore_box_.get(), node, head, check);
      os::RestoreRankEnd end;
      end.job = id;
      end.epoch = m.epoch;
      end.rank = r->rank;
      end.attempt = attempt;
      bool refused = false;  // DATA_LOSS from the shipment: the node refused a batch
      auto ship_rank = [&]() -> Status {
        for (const auto& f : r->files) {
          end.files.push_back(f.name);
          uint64_t off = 0;
          for (const auto& c : f.chunks) {
            if (failed) return CancelledError("the restart failed on another node");
            auto data = store()->GetCompressed(c.hash);
            if (!data.ok()) {
              return DataLossError(of_rank + ": file " + f.name + ": chunk " +
                                   storage::HashHex(c.hash) + ": " + data.status().message());
            }
            os::CkptBatchChunk chunk;
            chunk.hash = c.hash;
            chunk.raw_len = c.raw_len;
            chunk.file = f.name;
            chunk.mode = f.mode;
            chunk.offset = off;
            Status added = shipment.Add(std::move(chunk), std::move(*data));
            if (!added.ok()) {
              refused = added.code() == StatusCode::kDataLoss;
              return added;
            }
            off += c.raw_len;
            const uint64_t now_sent = sent += c.raw_len;
            if (client) {
              std::lock_guard<std::mutex> lock(progress_mu);
              if (SteadyClock::now() - last_progress > std::chrono::seconds(1)) {
                last_progress = SteadyClock::now();
                client
                    ->Send(Frame::kNotice,
                           os::EncodeText("restoring " + what + ": " + Mib(now_sent) + " of " +
                                          Mib(total) + " sent"))
                    .IgnoreError();
              }
            }
          }
        }
        Status done = shipment.Finish();
        refused = done.code() == StatusCode::kDataLoss;
        return done;
      };
      Status st = ship_rank();
      // Nothing of the rank is still being written when its end arrives, even after an error.
      if (!st.ok()) shipment.Abandon().IgnoreError();
      batches += shipment.batches();
      // The end follows the rank's batches in any case: the node says what it found wrong in
      // them (or that all is there), and forgets the attempt.
      Status told = ch->Send(Frame::kRestoreRankEnd, os::Encode(end));
      if (refused) {
        std::lock_guard<std::mutex> lock(progress_mu);
        refusals[r->rank] = {node, st.WithContext(of_rank)};
        failed = true;
        return OkStatus();  // the node's answer to the end says why
      }
      if (!st.ok()) return failed ? OkStatus() : st.WithContext(of_rank);
      GOS_RETURN_IF_ERROR(told);
    }
    return OkStatus();
  };
  std::vector<Status> results(by_node.size());
  {
    std::vector<std::thread> senders;
    size_t i = 0;
    for (const auto& [node, ranks] : by_node) {
      senders.emplace_back([&, node = node, ranks = &ranks, i] {
        SetThreadName("coord-restore");
        results[i] = ship_node(node, *ranks);
        if (!results[i].ok()) failed = true;
      });
      ++i;
    }
    for (auto& t : senders) t.join();
  }
  for (const Status& st : results) GOS_RETURN_IF_ERROR(st);
  if (client && !by_node.empty() && refusals.empty()) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - shipping_since);
    size_t ranks = 0;
    for (const auto& [node, of_node] : by_node) ranks += of_node.size();
    client
        ->Send(Frame::kNotice,
               os::EncodeText("restoring " + what + ": " + Mib(total) + " of " +
                              std::to_string(ranks) + " ranks from the store, in " +
                              std::to_string(batches.load()) + " restore batches to " +
                              std::to_string(by_node.size()) + " nodes in " +
                              std::to_string(ms.count()) + " ms"))
        .IgnoreError();
  }
  if (!refusals.empty()) {
    // The node said why in its answer to the rank's end (the first problem, naming job, epoch,
    // rank, file and chunk); a batch it could not even read is refused without a word.
    const auto& first = refusals.begin()->second;
    return WaitForAnswers(id, std::chrono::minutes(1), first.second.ToString(), [&](Job& j) {
      for (const auto& [rank, refusal] : refusals) {
        auto it = j.restore_ready.find(rank);
        if (it == j.restore_ready.end()) return UnavailableError("");
        if (!it->second.ok) {
          return DataLossError("rank " + std::to_string(rank) + " on node " +
                               std::to_string(refusal.first) + ": " + it->second.message);
        }
      }
      return first.second;
    });
  }
  // Each node checks every chunk against its hash and rebuilds the image dirs.
  return WaitForAnswers(
      id, std::chrono::minutes(5), what + ": the nodes did not confirm the images in 5 minutes",
      [&](Job& j) {
        for (const auto& [rank, ready] : j.restore_ready) {
          if (!ready.ok) {
            return DataLossError("rank " + std::to_string(rank) + " on node " +
                                 std::to_string(rank_nodes.at(rank)) + ": " + ready.message);
          }
        }
        return j.restore_ready.size() == m.ranks.size() ? OkStatus() : UnavailableError("");
      });
}

Status CoordinatorImpl::WaitForAnswers(uint64_t id, std::chrono::minutes timeout,
                                       const std::string& timeout_what,
                                       const std::function<Status(Job&)>& done) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    auto jt = jobs_.find(id);
    if (jt == jobs_.end() || stop_) return CancelledError("job gone");
    if (jt->second.kill_requested) return CancelledError("killed");
    Status st = done(jt->second);
    if (st.code() != StatusCode::kUnavailable) return st;
    if (restore_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      return DeadlineExceededError(timeout_what);
    }
  }
}

}  // namespace gos::coordinator::internal
