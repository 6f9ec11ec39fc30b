// The staging thread: gets a placed job's files, images (restart) or replay log to its nodes,
// then orders its LAUNCH or RESTORE.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "coordinator_impl.h"
#include "gos/log.h"
#include "gos/os/layout.h"
#include "gos/os/program.h"

namespace gos::coordinator::internal {

void CoordinatorImpl::StagingLoop() {
  SetThreadName("coord-staging");
  while (!stop_) {
    uint64_t id;
    {
      std::unique_lock<std::mutex> lock(mu_);
      staging_cv_.wait(lock, [&] { return stop_ || !to_stage_.empty(); });
      if (stop_) return;
      id = to_stage_.front();
      to_stage_.pop_front();
    }
    bool bcs = false;
    bool restoring = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto jt = jobs_.find(id);
      restoring = jt != jobs_.end() && jt->second.restore_epoch != 0;
    }
    bool replaying = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto jt = jobs_.find(id);
      replaying = jt != jobs_.end() && jt->second.replay_of != 0;
    }
    Status s = restoring && replaying ? CheckReplayEpoch(id) : OkStatus();
    if (s.ok()) s = restoring ? ShipImages(id) : Stage(id, &bcs);
    // The images are in place: the restart will be tried, so the log goes on from its epoch.
    const uint64_t record_base = s.ok() && restoring && !replaying ? ContinueLog(id) : 0;
    if (s.ok() && replaying) {
      s = bcs || restoring
              ? ShipReplayLog(id)
              : FailedPreconditionError(
                    "the program does not use gos's communication library (it has no .gos_bcs "
                    "section), so it cannot replay a recorded gos run");
    }
    After after;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto jt = jobs_.find(id);
      if (jt == jobs_.end()) continue;
      Job& j = jt->second;
      for (int fd : j.fds) ::close(fd);
      j.fds.clear();
      if (j.kill_requested || !s.ok()) {
        if (!s.ok() && j.rec.message.empty()) {
          j.rec.message = restoring
                              ? "restart of job " + std::to_string(id) + " from epoch " +
                                    std::to_string(j.restore_epoch) + " refused: " + s.message()
                          : replaying ? "replay of job " + std::to_string(j.replay_of) +
                                            " failed to start: " + s.message()
                                      : "staging the executable failed: " + s.message();
          j.exit_code = kNodeFailureExit;
          CheckDownNodes(after);
        }
        if (jobs_.count(id)) {
          Job& jj = jobs_.at(id);
          if (jj.exit_code == 0) jj.exit_code = 128 + SIGKILL;
          Finalize(jj, jj.kill_requested && s.ok() ? JobState::kKilled : JobState::kFailed, after);
        }
      } else {
        j.staged = SteadyClock::now();
        j.phase = Phase::kLaunching;
        os::StrobeCommand cmd;
        cmd.type = restoring ? os::CommandType::kRestore : os::CommandType::kLaunch;
        cmd.job = id;
        cmd.epoch = j.restore_epoch;
        // A recorded restart: the steps its log holds before the epoch's mark.
        if (restoring) cmd.base = record_base;
        // A restored job communicates through gos if its ranks were dumped with channels: its
        // row then gets early strobes (RowBlocked) like the run it continues.
        if (restoring && j.restore) bcs = ImagesUseBcs(*j.restore);
        j.restore.reset();  // shipped: the chunk lists are no longer needed
        j.held = restoring;
        os::LaunchCommand& l = cmd.launch;
        l.job = id;
        l.slot = j.slot;
        l.row = static_cast<uint32_t>(j.rec.row);
        l.uid = j.rec.uid;
        l.gid = j.rec.gid;
        l.ntasks = j.rec.ntasks;
        j.bcs = bcs;
        if (bcs && !restoring) l.flags |= os::kLaunchBcs;  // a RESTORE finds it in the images
        // A restored job is a communicating one if its nodes find BCS state in its images.
        if ((bcs || restoring) && j.record) l.flags |= os::kLaunchRecord;
        if ((bcs || restoring) && j.replay_of != 0) l.flags |= os::kLaunchReplay;
        if (!j.rec.cpu_bind) l.flags |= os::kLaunchNoBind;
        for (uint32_t r = 0; r < j.rec.rank_nodes.size(); ++r) {
          if (l.runs.empty() || l.runs.back().node != j.rec.rank_nodes[r]) {
            l.runs.push_back({j.rec.rank_nodes[r], r, 0});
          }
          l.runs.back().count++;
        }
        if (!j.files.empty()) l.program = j.files[0].name;
        l.argv = j.rec.argv;
        l.env = j.env;
        l.cwd = j.rec.cwd;
        Command(std::move(cmd));
      }
    }
    for (auto& fn : after) fn();
  }
}

// Multicasts the job's files to its nodes in chunks through two staging slots, with
// COMPARE-AND-WRITE flow control: chunk k may overwrite slot k % 2 only once every node has
// stored chunk k - 2.
Status CoordinatorImpl::Stage(uint64_t id, bool* bcs) {
  std::vector<os::SubmitFile> files;
  std::vector<int> fds;
  NodeSet set;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(id);
    if (jt == jobs_.end()) return OkStatus();
    files = jt->second.files;
    fds = jt->second.fds;
    set = JobNodes(jt->second);
  }
  // Outside the lock: a look at the executable's section headers.
  *bcs = !fds.empty() && os::ProgramUsesBcs(fds[0]);
  auto deadline_for = [&] { return SteadyClock::now() + o_.failure_timeout * 5; };
  // Waits until every node of the set has stored chunks up to and including `seq`.
  auto wait_stored = [&](uint64_t seq) -> Status {
    auto deadline = deadline_for();
    auto backoff = std::chrono::microseconds(20);
    while (true) {
      GOS_ASSIGN_OR_RETURN(
          bool ok,
          node_->CompareAndWrite(set, os::kVarStaged, prim::CompareOp::kGe,
                                 static_cast<int64_t>(seq + 1), prim::Node::kNoWrite, 0, deadline));
      if (ok) return OkStatus();
      if (stop_) return CancelledError("coordinator stopping");
      if (SteadyClock::now() > deadline) {
        return DeadlineExceededError("nodes did not store staging chunk " + std::to_string(seq));
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::microseconds(1000));
    }
  };
  // Each chunk is one XFER-AND-SIGNAL of header + data into the slot, so a receiver that sees
  // the event sees the whole chunk. Two buffers alternate like the slots: once every node has
  // stored chunk k - 2, its buffer is no longer read and may take chunk k.
  std::vector<uint8_t> bufs[2];
  uint64_t last = 0;
  size_t in_flight = 0;
  Status st;
  for (size_t i = 0; i < files.size() && st.ok(); ++i) {
    const uint64_t size = files[i].size;
    uint64_t off = 0;
    do {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(size - off, os::kStageChunkBytes));
      const uint64_t seq = ++stage_seq_;
      if (in_flight >= 2) {  // chunk seq - 2 is this job's: wait until stored
        st = wait_stored(seq - 2);
        if (!st.ok()) break;
      }
      os::StageHeader h;
      h.seq = seq;
      h.job = id;
      h.file = files[i].name;
      h.mode = files[i].mode;
      h.file_size = size;
      h.offset = off;
      h.len = len;
      std::vector<uint8_t>& buf = bufs[seq % 2];
      buf.resize(os::kStageHeaderBytes + len);
      size_t got = 0;
      while (got < len) {
        ssize_t n = ::pread(fds[i], buf.data() + os::kStageHeaderBytes + got, len - got,
                            static_cast<off_t>(off + got));
        if (n <= 0) {
          st = n < 0 ? ErrnoError(errno, "read " + files[i].name)
                     : DataLossError(files[i].name + " shrank while being staged");
          break;
        }
        got += static_cast<size_t>(n);
      }
      if (!st.ok()) break;
      h.data_mac = os::Hmac(key_, {std::span<const uint8_t>(buf).subspan(os::kStageHeaderBytes)});
      std::vector<uint8_t> header = os::EncodeStageHeader(h, key_);
      std::memcpy(buf.data(), header.data(), header.size());
      st = node_->XferAndSignal(set, buf.data(), buf.size(), os::StageSlot(seq), os::kEventStage,
                                os::kEventStageSent);
      if (!st.ok()) break;
      ++in_flight;
      last = seq;
      off += len;
    } while (off < size);
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(id);
    if (jt == jobs_.end() || jt->second.kill_requested) break;
  }
  if (st.ok() && last != 0) st = wait_stored(last);
  // Collect the local completions (each carries the error of a failed destination).
  for (; in_flight > 0; --in_flight) {
    auto done = node_->WaitEvent(os::kEventStageSent, o_.failure_timeout * 5);
    if (st.ok() && !done.ok()) st = done.status();
    if (!done.ok() || !*done) break;
  }
  return st;
}

}  // namespace gos::coordinator::internal
