// The strobe thread and scheduling: the global clock, heartbeat and termination queries,
// early strobes, placing queued jobs (Schedule) and following placed ones (CheckJobs).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "coordinator_impl.h"
#include "gos/log.h"
#include "gos/os/layout.h"
#include "gos/round_trace.h"

namespace gos::coordinator::internal {
namespace {

// A job whose exit is confirmed waits at most this long for the rest of its output.
constexpr auto kOutputGrace = std::chrono::seconds(2);

}  // namespace

// ---- Scheduling (under mu_) ----------------------------------------------------------

void CoordinatorImpl::Schedule(After& after) {
  if (!formed_) return;
  std::map<JobId, int64_t> ends;
  for (auto& [id, j] : jobs_) {
    if (j.phase != Phase::kQueued && j.rec.time_limit_ms > 0) {
      ends[id] = (j.rec.start_ms ? j.rec.start_ms : UnixMs()) + j.rec.time_limit_ms;
    }
  }
  for (const Placement& p : queue_.Schedule(matrix_, UnixMs(), ends)) {
    auto jt = jobs_.find(p.job);
    if (jt == jobs_.end()) {
      matrix_.Remove(p.job);
      continue;
    }
    Job& j = jt->second;
    if (free_slots_.empty()) {
      // More placed jobs than slots: put it back at the head of the line.
      matrix_.Remove(p.job);
      queue_.Push(j.req);
      continue;
    }
    j.slot = *free_slots_.begin();
    free_slots_.erase(free_slots_.begin());
    j.phase = Phase::kStaging;
    j.placed = SteadyClock::now();
    j.rec.state = JobState::kStaging;
    j.rec.row = static_cast<int32_t>(p.row);
    j.rec.rank_nodes = p.rank_nodes;
    j.nodes = p.nodes;
    PersistJob(j);
    to_stage_.push_back(p.job);
    staging_cv_.notify_one();
    ForwardStdin(j, after);
  }
}

void CoordinatorImpl::ForwardStdin(Job& j, After& after) {
  auto ag = node_agents_.find(j.rec.rank_nodes[0]);
  if (ag == node_agents_.end()) return;
  auto ch = ag->second->ch;
  for (const std::string& bytes : j.stdin_early) {
    auto frame = os::EncodeJobBytes(j.rec.id, bytes);
    after.push_back([ch, frame] { ch->Send(Frame::kAgentStdin, frame).IgnoreError(); });
  }
  j.stdin_early.clear();
}

// ---- Strobe thread -------------------------------------------------------------------

// A thread that strobes early whenever `event` fires and `wanted()` (called under mu_) agrees.
std::thread CoordinatorImpl::StrobeOnEvent(prim::EventId event, std::function<bool()> wanted) {
  return std::thread([this, event, wanted = std::move(wanted)] {
    SetThreadName(("coord-event" + std::to_string(event)).c_str());
    while (!stop_) {
      auto got = node_->WaitEvent(event, std::chrono::milliseconds(100));
      if (!got.ok() || !*got) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (wanted()) {
        round_trace::Note(round_trace::Hop::kCoordEarly, strobe_ + 1, 0, 0);
        strobe_now_ = true;
        strobe_cv_.notify_one();
      }
    }
  });
}

// Every node of every job in the running row reported, for the current strobe, that all its
// ranks are blocked in communication, and one of them has work for the next strobe (under mu_).
bool CoordinatorImpl::RowBlocked() {
  bool any = false, work = false;
  for (uint64_t id : matrix_.JobsInRow(row_)) {
    auto jt = jobs_.find(id);
    if (jt == jobs_.end() || !jt->second.bcs || jt->second.phase != Phase::kRunning) return false;
    for (uint32_t n : jt->second.nodes) {
      os::BlockedRecord rec;
      std::memcpy(&rec, node_->global_memory().data() + os::BlockedSlot(n), sizeof rec);
      if (rec.strobe != strobe_ || !rec.blocked) return false;
      work |= rec.work != 0;
      any = true;
    }
  }
  return any && work;
}

// Nothing is under way but jobs that do not communicate through gos, each of them started,
// none checkpointing, no command to send and none to confirm (under mu_). The rounds of such
// strobes bring no reply worth polling for: the progress thread sleeps at once after its
// messages instead (prim::Node::SetSpinning), which on a node whose cores the jobs fill
// saves a context switch per poll (gang scheduling, docs/benchmarks.md).
bool CoordinatorImpl::OnlyComputeRunning() const {
  if (jobs_.empty() || !commands_.empty() || !unconfirmed_.empty() || !to_stage_.empty()) {
    return false;
  }
  for (const auto& [id, j] : jobs_) {
    if (j.bcs || j.phase != Phase::kRunning || j.epoch || j.exit_confirmed) return false;
  }
  return true;
}

void CoordinatorImpl::StrobeLoop() {
  SetThreadName("coord-strobe");
  auto row_since = SteadyClock::now();
  auto last = SteadyClock::now();
  const auto slice = std::chrono::duration_cast<SteadyClock::duration>(o_.timeslice);
  bool early = false;
  while (!stop_) {
    auto now = SteadyClock::now();
    bool quantum_over = now - row_since >= slice;
    if (quantum_over) row_since = now;
    last = now;
    Strobe(++strobe_, quantum_over, early);
    std::unique_lock<std::mutex> lock(mu_);
    bool busy = !jobs_.empty() || !commands_.empty() || !unconfirmed_.empty();
    auto period = busy ? slice : std::chrono::duration_cast<SteadyClock::duration>(o_.idle_strobe);
    // The next strobe is due one period after this one started, or earlier when woken.
    strobe_cv_.wait_until(lock, std::max(last + period, SteadyClock::now()),
                          [&] { return stop_ || strobe_now_; });
    early = strobe_now_;
    strobe_now_ = false;
    if (!early && !stop_) round_trace::Note(round_trace::Hop::kCoordQuantum, strobe_ + 1, 0, 0);
  }
}

void CoordinatorImpl::Strobe(uint64_t s, bool quantum_over, bool early) {
  os::Strobe strobe;
  NodeSet live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    strobe.strobe = s;
    strobe.early = early;
    // The row changes when its quantum is over, or at once when it has no job left.
    if (quantum_over || matrix_.JobsInRow(row_).empty()) row_ = matrix_.NextRow(row_);
    strobe.row = row_;
    // Older commands first, in their order: a node applies each once (by its origin).
    strobe.commands.swap(unconfirmed_);
    for (auto& c : commands_) {
      c.origin = s;
      if (c.type == os::CommandType::kLaunch || c.type == os::CommandType::kRestore) {
        auto jt = jobs_.find(c.job);
        if (jt != jobs_.end()) {
          jt->second.launched = SteadyClock::now();
          jt->second.launch_strobe = s;
        }
      }
      strobe.commands.push_back(std::move(c));
    }
    commands_.clear();
    live = LiveAgents();
    node_->SetSpinning(!OnlyComputeRunning() || !strobe.commands.empty());
  }
  if (live.empty()) return;
  std::vector<uint8_t> payload = os::EncodeStrobe(strobe, key_);
  After after;
  round_trace::Note(round_trace::Hop::kCoordSend, s, 0, 0);
  Status st = node_->XferAndSignal(live, payload.data(), payload.size(), os::StrobeSlot(s),
                                   os::kEventStrobe, os::kEventStrobeSent);
  if (st.ok()) {
    auto got = node_->WaitEvent(os::kEventStrobeSent, o_.failure_timeout);
    if (!got.ok())
      st = got.status();
    else if (!*got)
      st = DeadlineExceededError("strobe not delivered");
  }
  if (st.ok()) round_trace::Note(round_trace::Hop::kCoordSent, s, 0, 0);
  // A strobe that did not reach every live node, or whose confirmation broke off (a node
  // died meanwhile), may have been missed by nodes that are still up: its commands go again.
  bool confirmed = false;
  if (!st.ok() && !stop_) {
    std::lock_guard<std::mutex> lock(mu_);
    CheckDownNodes(after);
  }
  // Confirmation and heartbeat: every live agent has applied strobe s.
  auto deadline = SteadyClock::now() + o_.failure_timeout;
  auto backoff = std::chrono::microseconds(20);
  while (st.ok() && !stop_) {
    auto ok = node_->CompareAndWrite(live, os::kVarApplied, prim::CompareOp::kGe,
                                     static_cast<int64_t>(s), prim::Node::kNoWrite, 0, deadline);
    if (ok.ok() && *ok) {
      round_trace::Note(round_trace::Hop::kCoordConfirmed, s, 0, 0);
      confirmed = true;
      break;
    }
    if (!ok.ok() && ok.status().code() != StatusCode::kDeadlineExceeded) {
      std::lock_guard<std::mutex> lock(mu_);
      CheckDownNodes(after);
      break;
    }
    if (SteadyClock::now() >= deadline) {
      // Find who is late, one by one, and declare them down.
      std::lock_guard<std::mutex> lock(mu_);
      for (uint32_t n : live.ToVector()) {
        auto one = node_->CompareAndWrite(NodeSet{n}, os::kVarApplied, prim::CompareOp::kGe,
                                          static_cast<int64_t>(s), prim::Node::kNoWrite, 0,
                                          SteadyClock::now() + std::chrono::milliseconds(200));
        if (!one.ok() || !*one) {
          NodeDown(n,
                   "did not confirm strobe " + std::to_string(s) + " within the failure timeout (" +
                       std::to_string(o_.failure_timeout.count()) + " ms)",
                   after);
        }
      }
      confirmed = true;  // by every node still up
      break;
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(500));
  }
  if (!confirmed) unconfirmed_ = std::move(strobe.commands);
  {
    std::lock_guard<std::mutex> lock(mu_);
    CheckJobs(after);
  }
  for (auto& fn : after) fn();
}

// Launch confirmation, termination and time limits of placed jobs (under mu_).
void CoordinatorImpl::CheckJobs(After& after) {
  std::vector<uint64_t> ids;
  for (auto& [id, j] : jobs_) ids.push_back(id);
  auto now = SteadyClock::now();
  for (uint64_t id : ids) {
    auto jt = jobs_.find(id);
    if (jt == jobs_.end()) continue;
    Job& j = jt->second;
    if (j.phase != Phase::kLaunching && j.phase != Phase::kRunning) continue;
    NodeSet set = JobNodes(j);
    if (j.phase == Phase::kLaunching && j.launched != SteadyClock::time_point{}) {
      auto ok = node_->CompareAndWrite(set, os::VarStarted(j.slot), prim::CompareOp::kEq,
                                       static_cast<int64_t>(id), prim::Node::kNoWrite, 0,
                                       now + o_.failure_timeout);
      if (ok.ok() && *ok) {
        j.phase = Phase::kRunning;
        j.started = SteadyClock::now();
        j.rec.state = JobState::kRunning;
        j.rec.start_ms = UnixMs();
        j.next_ckpt = j.started + std::chrono::milliseconds(j.rec.checkpoint_ms);
        PersistJob(j);
        if (j.held) {
          // Every rank is back on every node: let them all go at the same strobe.
          j.held = false;
          os::StrobeCommand cmd;
          cmd.type = os::CommandType::kResume;
          cmd.job = id;
          Command(cmd);
          std::string where;
          for (uint32_t n : j.nodes) where += (where.empty() ? "" : ",") + std::to_string(n);
          Notice(j,
                 "job " + std::to_string(id) + " restored from epoch " +
                     std::to_string(j.restore_epoch) + " on node" +
                     (j.nodes.size() > 1 ? "s " : " ") + where + " in " +
                     std::to_string(MicrosSince(j.placed, j.started) / 1000) + " ms; resumed",
                 after);
        }
      }
    }
    if (j.phase == Phase::kRunning && !j.exit_confirmed) {
      if (!j.epoch && j.rec.checkpoint_ms > 0 && now >= j.next_ckpt) OrderEpoch(j);
      if (j.epoch) StepEpoch(j, after);
    }
    // Exit records of every node of the job in our exit table?
    if (!j.exit_confirmed) {
      bool all = true;
      int32_t code = 0, rank = -1, node = -1;
      for (uint32_t n : j.nodes) {
        os::ExitRecord rec;
        std::memcpy(&rec, node_->global_memory().data() + os::ExitSlot(j.slot, n), sizeof rec);
        if (rec.job != id || rec.launch != j.launch_strobe) {
          all = false;
          break;
        }
        if (rec.exit_code > code || (rank < 0 && rec.rank >= 0 && rec.exit_code >= code)) {
          if (rec.exit_code > code || rank < 0) {
            code = rec.exit_code;
            rank = rec.rank;
            node = static_cast<int32_t>(n);
          }
        }
      }
      if (!all) continue;
      // Termination: one COMPARE-AND-WRITE over the job's nodes confirms they are all done.
      auto ok = node_->CompareAndWrite(set, os::VarDone(j.slot), prim::CompareOp::kEq,
                                       static_cast<int64_t>(id), prim::Node::kNoWrite, 0,
                                       now + o_.failure_timeout);
      if (!ok.ok() || !*ok) continue;
      j.exit_confirmed = true;
      j.exited = SteadyClock::now();
      if (!j.rank_failed) {  // else the first failure stays what the job reports
        j.exit_code = code;
        j.failed_rank = code != 0 ? rank : -1;
        j.failed_node = code != 0 ? node : -1;
      }
      if (j.phase == Phase::kLaunching) j.started = j.exited;
    }
    bool output_complete = true;
    for (uint32_t n : j.nodes) output_complete &= j.output_done.count(n) > 0;
    if (output_complete || now - j.exited > kOutputGrace) {
      JobState state = j.kill_requested   ? JobState::kKilled
                       : j.exit_code == 0 ? JobState::kCompleted
                                          : JobState::kFailed;
      if (j.exit_code != 0 && j.rec.message.empty() && !j.kill_requested) {
        j.rec.message =
            "rank " + std::to_string(j.failed_rank) + " on node " + std::to_string(j.failed_node) +
            (j.exit_code > 128 ? " was killed by signal " + std::to_string(j.exit_code - 128)
                               : " exited with code " + std::to_string(j.exit_code));
      }
      Finalize(j, state, after);
    }
  }
  // Time limits.
  int64_t now_ms = UnixMs();
  for (auto& [id, j] : jobs_) {
    if (j.phase == Phase::kRunning && j.rec.time_limit_ms > 0 && !j.kill_requested &&
        now_ms - j.rec.start_ms > j.rec.time_limit_ms) {
      j.kill_requested = true;
      // "30 s", "1.5 s", "0.25 s": no trailing zeros.
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", static_cast<double>(j.rec.time_limit_ms) / 1000.0);
      j.kill_message = std::string("time limit of ") + limit + " s reached";
      os::StrobeCommand cmd;
      cmd.type = os::CommandType::kSignal;
      cmd.job = id;
      cmd.signal = SIGKILL;
      Command(cmd);
    }
  }
}

}  // namespace gos::coordinator::internal
