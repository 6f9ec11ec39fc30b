// Record and replay (docs/specs/replay.md): what gos-replay asks for, setting up a replay,
// its stops, shipping the recorded log, and the logs of restarted recorded jobs.
#include "gos/storage/replay.h"

#include <algorithm>

#include "coordinator_impl.h"
#include "gos/log.h"
#include "gos/replay/log.h"
#include "log_cut.h"

namespace gos::coordinator::internal {

void CoordinatorImpl::ReplayInfo(const std::shared_ptr<Client>& c, uint64_t id, bool with_log,
                                 After& after) {
  auto ch = c->ch;
  auto fail = [&](const std::string& msg) {
    after.push_back([ch, msg] { ch->Send(Frame::kError, os::EncodeText(msg)).IgnoreError(); });
  };
  auto rec = tables_->GetJob(id);
  if (!rec.ok()) return fail(rec.status().ToString());
  if (!rec->has_value()) return fail("no job " + std::to_string(id));
  const JobRecord& r = **rec;
  if (!OwnerOrRoot(c->creds, r.uid)) {
    return fail("job " + std::to_string(id) + " belongs to " + r.user +
                "; only its owner or root may replay it");
  }
  if (with_log) {
    auto* rs = tables_->replay();
    auto streams = rs->Streams(id);
    if (!streams.ok()) return fail(streams.status().ToString());
    std::vector<std::vector<uint8_t>> frames;
    for (uint32_t stream : *streams) {
      auto segs = rs->Read(id, stream);
      if (!segs.ok()) return fail(segs.status().ToString());
      for (std::string& seg : *segs) {
        frames.push_back(os::Encode(os::ReplaySegment{id, stream, std::move(seg)}));
      }
    }
    // How the run ended is the job record's; the log's readers (traces) get it as its end.
    if (r.state == JobState::kCompleted || r.state == JobState::kFailed ||
        r.state == JobState::kKilled) {
      replay::JobLogWriter w(r.ntasks);
      replay::End e;
      e.kind =
          r.state == JobState::kCompleted ? replay::EndKind::kCompleted : replay::EndKind::kFailed;
      e.exit_code = r.exit_code;
      e.rank = r.failed_rank;
      e.time_us = r.end_ms * 1000;
      e.message = r.message;
      w.AddEnd(e);
      frames.push_back(os::Encode(os::ReplaySegment{id, replay::kJobStream, w.Flush()}));
    }
    after.push_back([ch, frames = std::move(frames)] {
      for (const auto& fr : frames) ch->Send(Frame::kReplayData, fr).IgnoreError();
      ch->Send(Frame::kOk, os::EncodeText("log sent")).IgnoreError();
    });
    return;
  }
  if (r.paths.empty()) {
    return fail("job " + std::to_string(id) +
                " was submitted by an older gos that did not keep its program's path");
  }
  os::SubmitRequest req;
  req.argv = r.argv;
  req.env = r.env;
  req.cwd = r.cwd;
  req.ntasks = r.ntasks;
  req.nodes = r.nnodes;
  req.ranks_per_node = r.ranks_per_node;
  // A job restarted on fewer nodes (one of them died) ended on those: as for gos-restart, its
  // -N and ranks-per-node count are not kept, or the replay would wait for nodes that are gone.
  std::set<uint32_t> used(r.rank_nodes.begin(), r.rank_nodes.end());
  if (!used.empty() && used.size() < r.nnodes) {
    req.nodes = static_cast<uint32_t>(used.size());
    req.ranks_per_node = 0;
  }
  req.paths = r.paths;
  req.cpu_bind = r.cpu_bind;  // the replay runs its ranks as the recorded run did
  auto bytes = os::Encode(req);
  after.push_back([ch, bytes] { ch->Send(Frame::kReplayInfoReply, bytes).IgnoreError(); });
}

Status CoordinatorImpl::SetUpReplay(const os::PeerCreds& who, uint64_t of, Job& j) {
  const std::string name = "job " + std::to_string(of);
  if (jobs_.count(of)) return FailedPreconditionError(name + " is still running");
  GOS_ASSIGN_OR_RETURN(std::optional<JobRecord> rec, tables_->GetJob(of));
  if (!rec) return NotFoundError("no " + name);
  if (!OwnerOrRoot(who, rec->uid)) {
    return PermissionDeniedError(name + " belongs to " + rec->user +
                                 "; only its owner or root may replay it");
  }
  if (!rec->recorded) return FailedPreconditionError(name + " was not recorded (--no-record)");
  GOS_ASSIGN_OR_RETURN(std::vector<uint32_t> streams, tables_->replay()->Streams(of));
  if (std::find(streams.begin(), streams.end(), replay::kJobStream) == streams.end()) {
    return FailedPreconditionError(name +
                                   " has no replay log (it never communicated, or its log "
                                   "was removed: only the logs of the most recent jobs are "
                                   "kept, gos-coordinator --keep-logs)");
  }
  j.replay_of = of;
  j.rec.ntasks = rec->ntasks;
  j.replay_completed = rec->state == JobState::kCompleted;
  // A run that ended because one rank failed replays until that rank stops.
  j.replay_failed_rank = rec->state == JobState::kFailed ? rec->failed_rank : -1;
  return OkStatus();
}

void CoordinatorImpl::OnReplayStop(const std::shared_ptr<Agent>& a, os::ReplayStopped m,
                                   bool answer, After& after) {
  auto jt = jobs_.find(m.job);
  if (jt == jobs_.end() || jt->second.replay_of == 0) return;
  Job& j = jt->second;
  if (!answer) {
    // The first report stops the job; a rank's own stop (MPI_Abort, a crash) says more than
    // "the log ends here" and replaces it.
    const bool first = !j.stop;
    const bool own =
        m.kind == os::ReplayStopKind::kAborted || m.kind == os::ReplayStopKind::kCrashed;
    if (first || (j.stop->kind == os::ReplayStopKind::kLogEnd && own)) {
      auto ranks = j.stop ? j.stop->ranks : std::vector<os::ReplayRank>{};
      j.stop = std::move(m);
      j.stop->ranks = std::move(ranks);
    }
    if (first) {
      os::StrobeCommand cmd;
      cmd.type = os::CommandType::kStop;
      cmd.job = j.rec.id;
      Command(cmd);
    }
    return;
  }
  if (!j.stop) return;
  for (auto& r : m.ranks) j.stop->ranks.push_back(std::move(r));
  j.stopped_nodes.insert(a->node);
  if (j.stopped_nodes.size() < j.nodes.size() || !j.client) return;
  std::sort(j.stop->ranks.begin(), j.stop->ranks.end(),
            [](const os::ReplayRank& x, const os::ReplayRank& y) { return x.rank < y.rank; });
  auto ch = j.client->ch;
  auto bytes = os::Encode(*j.stop);
  after.push_back([ch, bytes] { ch->Send(Frame::kReplayStopped, bytes).IgnoreError(); });
}

void CoordinatorImpl::QueryRanks(const std::shared_ptr<Client>& c, uint64_t id, After& after) {
  auto ch = c->ch;
  auto fail = [&](const std::string& msg) {
    after.push_back([ch, msg] { ch->Send(Frame::kError, os::EncodeText(msg)).IgnoreError(); });
  };
  auto jt = jobs_.find(id);
  if (jt == jobs_.end()) return fail("job " + std::to_string(id) + " is not running");
  Job& j = jt->second;
  if (!OwnerOrRoot(c->creds, j.rec.uid)) {
    return fail("job " + std::to_string(id) + " belongs to " + j.rec.user +
                "; only its owner or root may see where its ranks are");
  }
  if (j.nodes.empty()) return fail("job " + std::to_string(id) + " is not placed yet");
  j.rank_queries.push_back(ch);
  if (j.rank_queries.size() > 1) return;  // the question is out already
  j.rank_answers.clear();
  std::vector<std::shared_ptr<Channel>> agents;
  for (uint32_t n : j.nodes) {
    auto at = node_agents_.find(n);
    if (at != node_agents_.end()) agents.push_back(at->second->ch);
  }
  auto bytes = os::EncodeU64(id);
  after.push_back([agents, bytes] {
    for (const auto& a : agents) a->Send(Frame::kRanksQuery, bytes).IgnoreError();
  });
}

void CoordinatorImpl::OnAgentRanks(const std::shared_ptr<Agent>& a, os::RankTable m, After& after) {
  auto jt = jobs_.find(m.job);
  if (jt == jobs_.end() || jt->second.rank_queries.empty()) return;
  Job& j = jt->second;
  // Only the node's own ranks count.
  std::erase_if(m.ranks, [&](const os::RankPlace& p) {
    return p.rank >= j.rec.rank_nodes.size() || j.rec.rank_nodes[p.rank] != a->node;
  });
  for (auto& p : m.ranks) p.node = a->node;
  j.rank_answers[a->node] = std::move(m.ranks);
  for (uint32_t n : j.nodes) {
    if (!j.rank_answers.count(n)) return;
  }
  os::RankTable t;
  t.job = m.job;
  for (auto& [node, ranks] : j.rank_answers) {
    for (auto& p : ranks) t.ranks.push_back(std::move(p));
  }
  std::sort(t.ranks.begin(), t.ranks.end(),
            [](const os::RankPlace& x, const os::RankPlace& y) { return x.rank < y.rank; });
  auto bytes = os::Encode(t);
  auto clients = std::move(j.rank_queries);
  j.rank_queries.clear();
  j.rank_answers.clear();
  after.push_back([clients, bytes] {
    for (const auto& ch : clients) ch->Send(Frame::kRanksReply, bytes).IgnoreError();
  });
}

Status CoordinatorImpl::ShipReplayLog(uint64_t id) {
  uint64_t of = 0;
  std::vector<uint32_t> rank_nodes, nodes;
  os::ReplayDataEnd end;
  std::map<uint32_t, std::shared_ptr<Channel>> chans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(id);
    if (jt == jobs_.end()) return CancelledError("job gone");
    Job& j = jt->second;
    of = j.replay_of;
    rank_nodes = j.rec.rank_nodes;
    nodes = j.nodes;
    j.restore_ready.clear();
    end.job = id;
    end.of = j.replay_of;
    end.from_epoch = j.restore_epoch;
    end.stop_at = j.stop_at;
    end.completed = j.replay_completed;
    end.failed_rank = j.replay_failed_rank;
    for (uint32_t n : j.nodes) {
      auto at = node_agents_.find(n);
      if (at == node_agents_.end()) return UnavailableError("node " + std::to_string(n) + " left");
      chans[n] = at->second->ch;
    }
  }
  auto* rs = tables_->replay();
  GOS_ASSIGN_OR_RETURN(std::vector<uint32_t> streams, rs->Streams(of));
  for (uint32_t stream : streams) {
    std::vector<uint32_t> to;
    if (stream == replay::kJobStream) {
      to = nodes;
    } else if (replay::IsRankStream(stream)) {
      const uint32_t rank = stream - replay::RankStream(0);
      if (rank >= rank_nodes.size()) continue;
      to = {rank_nodes[rank]};
    } else {
      continue;
    }
    GOS_ASSIGN_OR_RETURN(std::vector<std::string> segments, rs->Read(of, stream));
    for (std::string& seg : segments) {
      os::ReplaySegment m{id, stream, std::move(seg)};
      auto bytes = os::Encode(m);
      for (uint32_t n : to) GOS_RETURN_IF_ERROR(chans.at(n)->Send(Frame::kReplayData, bytes));
    }
  }
  for (auto& [n, ch] : chans) GOS_RETURN_IF_ERROR(ch->Send(Frame::kReplayDataEnd, os::Encode(end)));
  return WaitForAnswers(id, std::chrono::minutes(2),
                        "the nodes did not take the replay log in 2 minutes", [&](Job& j) {
                          for (const auto& [node, ready] : j.restore_ready) {
                            if (!ready.ok) {
                              return DataLossError("the replay log of job " + std::to_string(of) +
                                                   ": " + ready.message);
                            }
                          }
                          return j.restore_ready.size() == chans.size() ? OkStatus()
                                                                        : UnavailableError("");
                        });
}

uint64_t CoordinatorImpl::ContinueLog(uint64_t id) {
  storage::EpochManifest m;
  uint64_t strobe = 0;
  std::shared_ptr<Channel> client;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(id);
    if (jt == jobs_.end() || !jt->second.record || !jt->second.restore) return 0;
    m = *jt->second.restore;
    strobe = strobe_;
    if (jt->second.client) client = jt->second.client->ch;
  }
  const int64_t now_us = UnixMs() * 1000;
  auto* logs = tables_->replay();
  StatusOr<replay::RestartMark> mark = CutLogForRestart(store(), logs, m, strobe, now_us);
  std::string notice;
  if (mark.ok()) {
    notice = "job " + std::to_string(id) + ": its replay log goes on from epoch " +
             std::to_string(m.epoch) + " (step " + std::to_string(mark->steps) + ")" +
             (mark->dropped_steps > 0 ? "; the " + std::to_string(mark->dropped_steps) +
                                            " steps the lost run took after it are dropped"
                                      : "");
  } else {
    // A log that does not reach the epoch (never recorded, pruned, or recorded by a gos that
    // did not ship it at checkpoints) would replay a run that did not produce the job's
    // outcome: it goes, and the restored run is not recorded.
    logs->DeleteJob(id).IgnoreError();
    notice = "job " + std::to_string(id) +
             ": the restored run is not recorded: " + mark.status().message() +
             "; what was left of its replay log was removed";
    std::lock_guard<std::mutex> lock(mu_);
    if (auto jt = jobs_.find(id); jt != jobs_.end()) jt->second.record = false;
  }
  GOS_LOG(kInfo, "coordinator") << notice;
  // A job that does not communicate through gos (its ranks were dumped without a BCS channel)
  // never had a log: not worth a word to the user.
  const bool bcs = ImagesUseBcs(m);
  const bool quiet = !mark.ok() && mark.status().code() == StatusCode::kNotFound && !bcs;
  if (client && !quiet) client->Send(Frame::kNotice, os::EncodeText(notice)).IgnoreError();
  return mark.ok() ? mark->steps : 0;
}

Status CoordinatorImpl::CheckReplayEpoch(uint64_t id) {
  uint64_t of = 0, epoch = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(id);
    if (jt == jobs_.end()) return CancelledError("job gone");
    of = jt->second.replay_of;
    epoch = jt->second.restore_epoch;
  }
  const std::string name = "job " + std::to_string(of);
  GOS_ASSIGN_OR_RETURN(std::vector<std::string> segs,
                       tables_->replay()->Read(of, replay::kJobStream));
  StatusOr<replay::JobLog> log = replay::DecodeJobLog(segs);
  if (!log.ok()) return log.status().WithContext("the replay log of " + name);
  std::string marked;
  for (const replay::CheckpointMark& c : log->checkpoints) {
    if (c.epoch == epoch) return OkStatus();
    marked += (marked.empty() ? "" : ", ") + std::to_string(c.epoch);
  }
  // Epochs are numbered upwards across restarts: the run that took `epoch` was lost at the
  // last restart from an older epoch.
  const replay::RestartMark* lost = nullptr;
  for (const replay::RestartMark& r : log->restarts) {
    if (r.epoch < epoch) lost = &r;
  }
  const std::string can =
      " (epochs it can replay from: " + (marked.empty() ? "none" : marked) + ")";
  if (lost != nullptr) {
    return FailedPreconditionError(
        "epoch " + std::to_string(epoch) + " of " + name +
        " was taken by a run that a restart replaced: the job was restarted from epoch " +
        std::to_string(lost->epoch) + " at strobe " + std::to_string(lost->strobe) +
        ", and its log holds the run that produced its outcome, not that one" + can);
  }
  return FailedPreconditionError("the replay log of " + name + " has no mark of epoch " +
                                 std::to_string(epoch) + can);
}

}  // namespace gos::coordinator::internal
