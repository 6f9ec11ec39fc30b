// Record and replay bookkeeping of the nodeagent (docs/specs/replay.md): shipping a recorded
// job's log, taking a log to replay, stopping a replayed job for inspection.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent_impl.h"
#include "gos/log.h"
#include "gos/replay/log.h"

namespace gos::nodeagent::internal {

void NodeAgentImpl::ShipRecord(LocalJob& j, bool final) {
  if (!j.record || !bcs_) return;
  auto now = std::chrono::steady_clock::now();
  // Bigger segments compress better; a node that dies loses at most this much of the log.
  if (!final && now - j.record_shipped < std::chrono::seconds(10) &&
      bcs_->RecordPending(j.id) < (1u << 20)) {
    return;
  }
  j.record_shipped = now;
  for (RecordSegment& seg : bcs_->TakeRecord(j.id)) {
    os::ReplaySegment m{j.id, seg.stream, std::move(seg.bytes), j.launch};
    if (ch_) ch_->Send(Frame::kReplaySegment, os::Encode(m)).IgnoreError();
  }
}

void NodeAgentImpl::OnReplayDataEnd(const os::ReplayDataEnd& m) {
  auto segments = std::move(replay_inbox_[m.job]);
  replay_inbox_.erase(m.job);
  os::RestoreReady ready;
  ready.job = m.job;
  ready.rank = node_id_;  // a replay log is confirmed per node
  auto plan = std::make_shared<ReplayPlan>();
  plan->stop_at = m.stop_at;
  plan->completed = m.completed;
  plan->failed_rank = m.failed_rank;
  auto log = replay::DecodeJobLog(segments[replay::kJobStream]);
  if (!log.ok()) {
    ready.ok = false;
    ready.message = "node " + std::to_string(node_id_) + ": " + log.status().ToString();
  } else {
    plan->log = std::move(*log);
    if (m.from_epoch != 0) {
      // The ranks come back from that checkpoint: the replay starts at the step it was at.
      plan->channel_job = m.of;
      bool found = false;
      for (const replay::CheckpointMark& mark : plan->log.checkpoints) {
        if (mark.epoch != m.from_epoch) continue;
        plan->start_step = mark.steps;
        found = true;
      }
      if (!found) {
        ready.ok = false;
        ready.message = "the recording of job " + std::to_string(m.of) +
                        " has no mark for checkpoint " + std::to_string(m.from_epoch);
      }
    }
    for (auto& [stream, segs] : segments) {
      if (!replay::IsRankStream(stream)) continue;
      auto bytes = replay::DecodeBytesSegments(segs);
      if (!bytes.ok()) {
        ready.ok = false;
        ready.message = "node " + std::to_string(node_id_) + ": rank " +
                        std::to_string(stream - replay::RankStream(0)) + ": " +
                        bytes.status().ToString();
        break;
      }
      plan->decisions[stream - replay::RankStream(0)] = std::move(*bytes);
    }
  }
  if (ready.ok) {
    std::lock_guard<std::mutex> lock(replay_mu_);
    replay_plans_[m.job] = std::move(plan);
  }
  if (ch_) ch_->Send(Frame::kRestoreReady, os::Encode(ready)).IgnoreError();
}

// Ranks are stopped with SIGSTOP rather than the freezer: a debugger can attach to a stopped
// process, not to a frozen one.
void NodeAgentImpl::StopJob(LocalJob& j) {
  j.stopped = true;
  j.hold = true;
  if (j.bcs && bcs_) bcs_->Hold(j.id, true);
  for (const Rank& r : j.ranks) {
    pid_t pid = r.exited ? 0 : (j.bcs && bcs_ ? bcs_->RankPidOf(j.id, r.rank) : r.pid);
    if (pid > 0) ::kill(pid, SIGSTOP);
  }
  if (j.frozen && j.cgroup) {
    Status st = j.cgroup->Thaw();  // the SIGSTOPs take effect
    if (!st.ok()) GOS_LOG(kWarn, "nodeagent") << "thaw job " << j.id << ": " << st.ToString();
    j.frozen = false;
  }
  os::ReplayStopped m;
  m.job = j.id;
  for (const Rank& r : j.ranks) {
    os::ReplayRank x;
    x.rank = r.rank;
    x.node = node_id_;
    x.host = o_.name;
    x.pid = r.exited ? 0 : (j.bcs && bcs_ ? bcs_->RankPidOf(j.id, r.rank) : r.pid);
    m.ranks.push_back(std::move(x));
  }
  if (!ch_) return;
  auto send = [ch = ch_, bytes = os::Encode(m)] {
    ch->Send(Frame::kReplayStopped, bytes).IgnoreError();
  };
  // A debugger can attach only once the crash watch has let go of the ranks: the answer waits
  // for that (the SIGSTOPs above stop them, and the watch detaches each at its stop).
  if (j.replay && crash_watch_) {
    crash_watch_->Release(j.id, std::move(send));
  } else {
    send();
  }
}

void NodeAgentImpl::AnswerRanks(uint64_t job) {
  os::RankTable t;
  t.job = job;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    std::snprintf(host, sizeof host, "%s", "localhost");
  std::shared_ptr<Channel> ch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ch = ch_;
    auto jt = jobs_.find(job);
    if (jt != jobs_.end()) {
      for (const Rank& r : jt->second.ranks) {
        os::RankPlace p;
        p.rank = r.rank;
        p.node = node_id_;
        p.host = host;
        if (!r.exited && r.pid > 0) {
          // The rank is its gos-rank-init's only child.
          std::ifstream in("/proc/" + std::to_string(r.pid) + "/task/" + std::to_string(r.pid) +
                           "/children");
          long pid = 0;
          if (in >> pid) p.pid = static_cast<int32_t>(pid);
        }
        if (p.pid > 0) {
          std::error_code ec;
          p.exe = std::filesystem::read_symlink("/proc/" + std::to_string(p.pid) + "/exe", ec);
        }
        t.ranks.push_back(std::move(p));
      }
    }
  }
  if (ch) ch->Send(Frame::kAgentRanks, os::Encode(t)).IgnoreError();
}

void NodeAgentImpl::OnCrash(const Crash& c) {
  const std::string frames = TopFrames(c.pid, c.uid, c.gid, 8, std::chrono::seconds(10));
  ReplayStop stop;
  stop.kind = ReplayStop::Kind::kCrashed;
  stop.job = c.job;
  stop.rank = static_cast<int32_t>(c.rank);
  stop.strobe = bcs_ ? bcs_->ReplayedStrobe(c.job) : 0;
  stop.text = "rank " + std::to_string(c.rank) + " on node " + std::to_string(node_id_) + " (" +
              o_.name + ") crashed: " + DescribeCrash(c) + ", after strobe " +
              std::to_string(stop.strobe) + "; held at the faulting instruction";
  std::stringstream lines(frames);
  for (std::string line; std::getline(lines, line);) stop.text += "\n  " + line;
  if (!bcs_ || !bcs_->StopReplayOf(c.job, stop)) {
    GOS_LOG(kInfo, "nodeagent") << "job " << c.job << " was stopping already: " << stop.text;
  }
}

}  // namespace gos::nodeagent::internal
