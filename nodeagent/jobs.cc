// The nodeagent's jobs: launching their ranks, storing staged executables, streaming output
// and stdin, reaping, reporting a job's end, signals, kills and forgetting.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "agent_impl.h"
#include "cpu_bind.h"
#include "gos/bcs/channel.h"
#include "gos/files.h"
#include "gos/log.h"
#include "gos/os/auth.h"
#include "gos/os/layout.h"

namespace gos::nodeagent::internal {
namespace {

constexpr size_t kReadChunk = 64u << 10;

}  // namespace

void KillPidfd(int pidfd) {
  if (pidfd >= 0) ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
}

Rank StartedRank(uint32_t rank, const RankProcess& p) {
  Rank r;
  r.rank = rank;
  r.pid = p.pid;
  r.out_fd = p.stdout_fd;
  r.err_fd = p.stderr_fd;
  r.status_fd = p.status_fd;
  r.stdin_fd = p.stdin_fd;
  r.init_dir = p.init_dir;
  if (rank != 0) {
    ::close(r.stdin_fd);
    r.stdin_fd = -1;
  } else {
    fcntl(r.stdin_fd, F_SETFL, fcntl(r.stdin_fd, F_GETFL) | O_NONBLOCK);
  }
  return r;
}

BcsJob BcsJobOf(const os::LaunchCommand& l, const std::vector<uint32_t>& mine) {
  BcsJob bj;
  bj.job = l.job;
  bj.row = l.row;
  bj.uid = l.uid;
  bj.gid = l.gid;
  bj.rank_node.resize(l.ntasks);
  for (const auto& run : l.runs) {
    for (uint32_t k = 0; k < run.count && run.first + k < l.ntasks; ++k) {
      bj.rank_node[run.first + k] = run.node;
    }
  }
  bj.local = mine;
  bj.record = (l.flags & os::kLaunchRecord) != 0;
  return bj;
}

void NodeAgentImpl::FlushStdin(LocalJob& j) {
  for (Rank& r : j.ranks) {
    if (r.rank != 0 || r.stdin_fd < 0) continue;
    while (!j.stdin_pending.empty()) {
      ssize_t n = ::write(r.stdin_fd, j.stdin_pending.data(), j.stdin_pending.size());
      if (n <= 0) break;  // Full pipe: the rest waits for the next frame (bounded by the rank).
      j.stdin_pending.erase(0, static_cast<size_t>(n));
    }
    if (j.stdin_eof && j.stdin_pending.empty()) {
      ::close(r.stdin_fd);
      r.stdin_fd = -1;
    }
  }
}

void NodeAgentImpl::OnPipe(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  OnPipeLocked(fd);
}

void NodeAgentImpl::OnPipeLocked(int fd) {
  auto pt = pipes_.find(fd);
  if (pt == pipes_.end()) {
    Unwatch(fd);
    return;
  }
  auto [job, index] = pt->second;
  LocalJob& j = jobs_.at(job);
  Rank& r = j.ranks[index];
  char buf[kReadChunk];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      os::OutputChunk out;
      out.job = job;
      out.rank = r.rank;
      out.stream = fd == r.out_fd ? 1 : 2;
      out.bytes.assign(buf, static_cast<size_t>(n));
      if (ch_) ch_->Send(Frame::kAgentOutput, os::Encode(out)).IgnoreError();
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    // EOF or error: this stream is done.
    Unwatch(fd);
    pipes_.erase(fd);
    ::close(fd);
    (fd == r.out_fd ? r.out_fd : r.err_fd) = -1;
    MaybeReport(j);
    return;
  }
}

// Reaps the ranks' inits by pid, never with waitpid(-1): CRIU children of the checkpoint and
// restore workers are theirs to reap.
void NodeAgentImpl::Reap() {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(unreaped_, [](pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == pid; });
  {
    for (auto& [id, j] : jobs_) {
      for (Rank& r : j.ranks) {
        if (r.exited || r.pid <= 0) continue;
        int status = 0;
        if (::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
        r.exited = true;
        r.wait_status = RankWaitStatus(r.status_fd, status);
        ::close(r.status_fd);
        r.status_fd = -1;
        if (j.bcs) CheckRankFailure(j, r);
        if (r.stdin_fd >= 0) {
          ::close(r.stdin_fd);
          r.stdin_fd = -1;
        }
        MaybeReport(j);
      }
    }
  }
}

// A communicating rank that ends without MPI_Finalize (it crashed, exited early or called
// MPI_Abort) leaves its peers waiting forever: tell the coordinator, which fails the job and
// kills its other ranks, like mpirun does.
void NodeAgentImpl::CheckRankFailure(LocalJob& j, const Rank& r) {
  auto [state, abort_code] = bcs_ ? bcs_->RankState(j.id, r.rank) : std::pair<uint32_t, int32_t>{};
  if (bcs_) bcs_->RankExited(j.id, r.rank);
  // Ranks the coordinator killed did not fail on their own (and a restarted incarnation of
  // the job may already be on its way, under the same id).
  if (j.killed || j.rank_failed || state == bcs::kStateNone || state == bcs::kStateFinalized) {
    return;
  }
  j.rank_failed = true;
  int st = r.wait_status;
  os::JobExit e;
  e.job = j.id;
  e.failed_rank = static_cast<int32_t>(r.rank);
  e.failed_node = static_cast<int32_t>(node_id_);
  std::string who = "rank " + std::to_string(r.rank) + " on node " + std::to_string(node_id_) +
                    " (" + o_.name + ")";
  if (state == bcs::kStateAborted) {
    e.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : (abort_code & 0xff);
    e.message = who + " called MPI_Abort with error code " + std::to_string(abort_code);
  } else if (WIFSIGNALED(st)) {
    e.exit_code = 128 + WTERMSIG(st);
    e.message = who + " was killed by signal " + std::to_string(WTERMSIG(st)) + " (" +
                strsignal(WTERMSIG(st)) + ") before MPI_Finalize";
  } else {
    e.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 255;
    if (e.exit_code == 0) e.exit_code = 1;
    e.message = who + " exited with code " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : 255) +
                " before MPI_Finalize";
  }
  if (ch_) ch_->Send(Frame::kRankFailed, os::Encode(e)).IgnoreError();
}

// Once every local rank of j has exited and its output is drained: the rest of the output is
// flushed (OUTPUT_DONE), the exit record goes to the coordinator's exit table, and the done
// variable is set for the coordinator's termination query.
void NodeAgentImpl::MaybeReport(LocalJob& j) {
  if (j.reported || !node_ || j.launching) return;
  for (const Rank& r : j.ranks) {
    if (!r.exited || r.out_fd >= 0 || r.err_fd >= 0) return;
  }
  j.reported = true;
  os::ExitRecord rec;
  rec.job = j.id;
  rec.launch = j.launch;
  rec.ranks = static_cast<uint32_t>(j.ranks.size());
  for (const Rank& r : j.ranks) {
    int code = WIFEXITED(r.wait_status)     ? WEXITSTATUS(r.wait_status)
               : WIFSIGNALED(r.wait_status) ? 128 + WTERMSIG(r.wait_status)
                                            : 255;
    if (rec.rank < 0 || code > rec.exit_code) {
      rec.exit_code = code;
      rec.rank = static_cast<int32_t>(r.rank);
      rec.signal = WIFSIGNALED(r.wait_status) ? WTERMSIG(r.wait_status) : 0;
    }
  }
  ShipRecord(j, true);
  if (ch_) ch_->Send(Frame::kOutputDone, os::EncodeU64(j.id)).IgnoreError();
  Status s =
      node_->XferAndSignal(prim::NodeSet{0}, &rec, sizeof rec, os::ExitSlot(j.slot, node_id_),
                           os::kEventExit, os::kEventExitSent);
  if (s.ok()) {
    auto done = node_->WaitEvent(os::kEventExitSent, std::chrono::seconds(5));
    if (!done.ok()) s = done.status();
  }
  if (!s.ok()) {
    GOS_LOG(kWarn, "nodeagent") << "cannot report job " << j.id << ": " << s.ToString();
  }
  node_->Store(os::VarDone(j.slot), static_cast<int64_t>(j.id));
}

LocalJob* NodeAgentImpl::NewLocalJob(const os::LaunchCommand& l, uint64_t origin, bool frozen,
                                     std::vector<uint32_t>* mine, std::string* failure) {
  for (const auto& run : l.runs) {
    if (run.node != node_id_) continue;
    for (uint32_t k = 0; k < run.count; ++k) mine->push_back(run.first + k);
  }
  if (mine->empty() || jobs_.count(l.job)) return nullptr;
  LocalJob& j = jobs_[l.job];
  j.id = l.job;
  j.launch = origin;
  j.slot = l.slot;
  j.row = l.row;
  j.program = l.program;
  j.uid = l.uid;
  j.gid = l.gid;
  j.dir = o_.state_dir + "/jobs/" + std::to_string(l.job);
  // The slot's variables may still hold this job id from an earlier incarnation of the job (a
  // restart reuses the id, and maybe the slot): the coordinator must not take them as news.
  node_->Store(os::VarStarted(l.slot), 0);
  node_->Store(os::VarDone(l.slot), 0);
  auto cg = FreezerCgroup::Create(
      o_.cgroup_root, o_.name + "." + std::to_string(getpid()) + "/j" + std::to_string(l.job));
  if (!cg.ok()) {
    *failure = cg.status().ToString();
  } else {
    j.cgroup = std::move(*cg);
    if (frozen) {
      j.cgroup->Freeze(false).IgnoreError();
      j.frozen = true;
    }
  }
  return &j;
}

Rank NodeAgentImpl::NotStarted(const std::shared_ptr<Channel>& ch, uint64_t job, uint32_t rank,
                               const std::string& why) {
  Rank r;
  r.rank = rank;
  r.exited = true;
  r.wait_status = 127 << 8;
  os::OutputChunk out{job, rank, 2, "gos-nodeagent " + o_.name + ": " + why + "\n"};
  if (ch) ch->Send(Frame::kAgentOutput, os::Encode(out)).IgnoreError();
  return r;
}

void NodeAgentImpl::WatchOutputs(LocalJob& j) {
  for (uint32_t i = 0; i < j.ranks.size(); ++i) {
    for (int fd : {j.ranks[i].out_fd, j.ranks[i].err_fd}) {
      if (fd < 0 || pipes_.count(fd)) continue;
      pipes_[fd] = {j.id, i};
      Watch(fd);
    }
  }
}

void NodeAgentImpl::Launch(const os::LaunchCommand& l, uint64_t origin, uint32_t current_row) {
  std::vector<uint32_t> mine;
  std::string failure;
  LocalJob* jp = NewLocalJob(l, origin, l.row != current_row, &mine, &failure);
  if (jp == nullptr) return;
  LocalJob& j = *jp;
  // The job dir and staged files belong to the job's user, and are that user's alone.
  if (Status s = MakeDir(j.dir, kPrivateDir); !s.ok() && failure.empty()) failure = s.ToString();
  ::chown(j.dir.c_str(), l.uid, l.gid);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(j.dir, ec)) {
    ::chown(e.path().c_str(), l.uid, l.gid);
  }
  std::map<uint32_t, std::string> channels;
  if (failure.empty() && (l.flags & os::kLaunchBcs) && bcs_) {
    BcsJob bj = BcsJobOf(l, mine);
    if (l.flags & os::kLaunchReplay) {
      std::lock_guard<std::mutex> rl(replay_mu_);
      auto pt = replay_plans_.find(l.job);
      if (pt == replay_plans_.end()) {
        failure = "the log to replay did not arrive";
      } else {
        bj.replay = pt->second;
        replay_plans_.erase(pt);
      }
    }
    j.record = bj.record;
    j.replay = bj.replay != nullptr;
    j.record_shipped = std::chrono::steady_clock::now();
    auto paths = failure.empty()
                     ? bcs_->AddJob(bj)
                     : StatusOr<std::map<uint32_t, std::string>>(FailedPreconditionError(failure));
    if (paths.ok()) {
      channels = std::move(*paths);
      j.bcs = true;
    } else {
      failure = paths.status().ToString();
    }
  }
  // The ranks start a few at a time (ContinueLaunches), between strobes and at each, so that
  // no strobe waits behind hundreds of forks (docs/specs/strobe.md, "Paced launches").
  auto pending = std::make_unique<LocalJob::Launching>();
  pending->cmd = l;
  pending->mine = std::move(mine);
  pending->channels = std::move(channels);
  pending->failure = std::move(failure);
  pending->since = SteadyClock::now();
  j.launching = std::move(pending);
  launching_.push_back(l.job);
  // Input that came before the launch strobe waits here for rank 0 (OnChannel adds the rest).
  if (auto early = early_stdin_.find(l.job); early != early_stdin_.end()) {
    j.stdin_pending = std::move(early->second.first);
    j.stdin_eof = early->second.second;
    early_stdin_.erase(early);
  }
}

void NodeAgentImpl::StartNextRank(LocalJob& j) {
  LocalJob::Launching& p = *j.launching;
  const os::LaunchCommand& l = p.cmd;
  if (p.next < p.mine.size()) {
    const uint32_t i = static_cast<uint32_t>(p.next++);
    const uint32_t rank = p.mine[i];
    std::optional<Rank> started;
    if (p.failure.empty() && j.killed) p.failure = "the job was killed before it started";
    if (p.failure.empty()) {
      RankSpec spec;
      if (!(l.flags & os::kLaunchNoBind)) {
        spec.cpus = RankCpus(cpus_, i, static_cast<uint32_t>(p.mine.size()));
      }
      spec.program = j.dir + "/" + l.program;
      spec.argv = l.argv;
      spec.env = l.env;
      spec.env.push_back("GOS_RANK=" + std::to_string(rank));
      spec.env.push_back("GOS_SIZE=" + std::to_string(l.ntasks));
      spec.env.push_back("GOS_JOB=" + std::to_string(l.job));
      spec.env.push_back("GOS_NODE=" + std::to_string(node_id_));
      if (auto ct = p.channels.find(rank); ct != p.channels.end()) {
        spec.env.push_back("GOS_CHANNEL=" + ct->second);
      }
      spec.cwd = l.cwd;
      spec.uid = l.uid;
      spec.gid = l.gid;
      spec.cgroup_procs = j.cgroup->procs_file();
      spec.init_path = o_.init_path;
      spec.init_dir = InitDir(l.job, rank);
      auto rp = LaunchRank(spec);
      if (rp.ok()) {
        if (j.bcs) bcs_->SetRankInit(l.job, rank, rp->pid);
        if (j.replay && crash_watch_) crash_watch_->Watch(l.job, rank, rp->pid, l.uid, l.gid);
        // Signals the job got while this rank was still to start: init forwards them (they
        // stay pending until it can).
        for (int sig : p.signals) ::kill(rp->pid, sig);
        started = StartedRank(rank, *rp);
      } else {
        p.failure = rp.status().ToString();
      }
    }
    if (started) {
      j.ranks.push_back(std::move(*started));
    } else if (j.killed) {
      Rank r;  // never started: counts as killed, like its started peers
      r.rank = rank;
      r.exited = true;
      r.wait_status = SIGKILL;
      j.ranks.push_back(r);
    } else {
      // Could not start: report it as exit 127 with the reason on the rank's stderr.
      j.ranks.push_back(NotStarted(ch_, l.job, rank,
                                   "cannot start rank " + std::to_string(rank) + ": " + p.failure));
    }
    WatchOutputs(j);
    if (rank == 0) FlushStdin(j);
  }
  if (p.next < p.mine.size()) return;
  GOS_LOG(kDebug, "nodeagent")
      << "job " << j.id << ": started " << p.mine.size() << " ranks in "
      << std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - p.since).count()
      << " ms";
  const uint32_t slot = l.slot;
  j.launching.reset();
  std::erase(launching_, j.id);
  node_->Store(os::VarStarted(slot), static_cast<int64_t>(j.id));
  MaybeReport(j);
}

bool NodeAgentImpl::ContinueLaunches(std::chrono::microseconds slice) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto until = SteadyClock::now() + slice;
  do {
    if (launching_.empty()) return false;
    auto jt = jobs_.find(launching_.front());
    if (jt == jobs_.end() || !jt->second.launching) {
      launching_.pop_front();
      continue;
    }
    StartNextRank(jt->second);
  } while (SteadyClock::now() < until);
  return !launching_.empty();
}

void NodeAgentImpl::KillJob(LocalJob& j) {
  j.killed = true;
  if (j.replay && crash_watch_) crash_watch_->Forget(j.id);
  if (j.launching) {
    // The ranks still to start never will: they count as killed.
    for (size_t i = j.launching->next; i < j.launching->mine.size(); ++i) {
      Rank r;
      r.rank = j.launching->mine[i];
      r.exited = true;
      r.wait_status = SIGKILL;
      j.ranks.push_back(r);
    }
    const uint32_t slot = j.launching->cmd.slot;
    j.launching.reset();
    std::erase(launching_, j.id);
    if (node_) node_->Store(os::VarStarted(slot), static_cast<int64_t>(j.id));
  }
  if (j.ckpt_cancel) {
    // Waits for a report the worker is sending; it sends nothing after this. Its criu goes
    // too: a dump whose tree is killed can hang, holding the ranks traced (unreapable).
    std::lock_guard<std::mutex> cl(j.ckpt_cancel->mu);
    j.ckpt_cancel->cancelled = true;
    KillPidfd(j.ckpt_cancel->criu_pidfd);
    j.ckpt_cancel->cv.notify_all();
  }
  if (j.cgroup) {
    // Kills every process of the job on this node (thawing first so SIGKILL is delivered).
    for (const Rank& r : j.ranks) {
      if (!r.exited) ::kill(r.pid, SIGKILL);
    }
    Status s = j.cgroup->Destroy();
    if (!s.ok()) GOS_LOG(kWarn, "nodeagent") << "kill job " << j.id << ": " << s.ToString();
    j.frozen = false;
  }
}

std::string NodeAgentImpl::InitDir(uint64_t job, uint32_t rank) {
  // Named by cluster, job and rank only: a restored rank keeps its dumped path (CRIU restores
  // the working directory by name), whichever node and nodeagent it is restored by.
  const std::string dir = o_.init_root + "/" + os::ClusterTag(key_) + "/j" + std::to_string(job) +
                          "-r" + std::to_string(rank);
  // Root's alone, as its parents: gos-rank-init (root) works there, the rank does not.
  if (Status s = MakeDir(dir, kPrivateDir); !s.ok()) {
    GOS_LOG(kWarn, "nodeagent") << "cannot create " << dir << ": " << s.ToString();
    return "";
  }
  return dir;
}

// The directory, and its cluster's directory if that is empty now.
void NodeAgentImpl::RemoveInitDir(const std::string& dir) {
  if (dir.empty()) return;
  ::rmdir(dir.c_str());
  ::rmdir(std::filesystem::path(dir).parent_path().c_str());
}

void NodeAgentImpl::ForgetJob(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto jt = jobs_.find(id);
  if (jt == jobs_.end()) {
    std::error_code ec;
    std::filesystem::remove_all(o_.state_dir + "/jobs/" + std::to_string(id), ec);
    early_stdin_.erase(id);
    return;
  }
  LocalJob& j = jt->second;
  // A job that ended by itself, every rank with exit code 0, will not be restarted: its kept
  // dumps only hold memory (a failed or killed one's may serve a restart).
  const bool succeeded =
      j.reported && !j.killed && std::all_of(j.ranks.begin(), j.ranks.end(), [](const Rank& r) {
        return r.exited && WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 0;
      });
  if (succeeded && lost_) {
    DropDumps(id, 0, 0);  // tearing down: no strobe to keep up with, no worker joined later
  } else if (succeeded) {
    StartWorker([this, id] { DropDumps(id, 0, 0); });  // a GiB of files takes a while
  }
  KillJob(j);
  // A job that ended shipped its whole record when it reported (what the engine noted for it
  // since are strobes after its end); a killed one ships what it has now.
  if (!j.reported) ShipRecord(j, true);
  if (j.bcs && bcs_) bcs_->RemoveJob(id);
  for (Rank& r : j.ranks) {
    for (int* fd : {&r.out_fd, &r.err_fd, &r.status_fd, &r.stdin_fd}) {
      if (*fd < 0) continue;
      pipes_.erase(*fd);
      Unwatch(*fd);
      ::close(*fd);
      *fd = -1;
    }
    // Killed, but maybe not reapable yet (e.g. still traced): never waited for here, on the
    // strobe thread.
    if (!r.exited && r.pid > 0 && ::waitpid(r.pid, nullptr, WNOHANG) != r.pid) {
      unreaped_.push_back(r.pid);
    }
    RemoveInitDir(r.init_dir);
  }
  std::error_code ec;
  std::filesystem::remove_all(j.dir, ec);
  if (!j.restored_dir.empty()) std::filesystem::remove_all(j.restored_dir, ec);
  for (const Rank& r : j.ranks) {
    if (!r.exe_dir.empty()) std::filesystem::remove_all(r.exe_dir, ec);
  }
  jobs_.erase(jt);
  {
    std::lock_guard<std::mutex> wl(work_mu_);
    shipped_.erase(id);
  }
}

void NodeAgentImpl::StageLoop() {
  SetThreadName("agent-stage");
  std::vector<uint8_t> unused;
  while (!stop_ && !lost_) {
    // A signal says a chunk arrived, not which one (two can be in flight): look at both
    // slots at every signal, and now and then without one.
    auto got = node_->WaitEvent(os::kEventStage, std::chrono::milliseconds(200));
    if (!got.ok()) continue;
    std::span<std::byte> mem = node_->global_memory();
    // Up to two chunks can be waiting; store them in sequence order, each only once its data
    // is all there: the header lands first, and a chunk still arriving must not be taken for
    // a whole one (docs/specs/os-protocol.md, "Launch transfer").
    for (int round = 0; round < 2; ++round) {
      std::optional<os::StageHeader> next;
      for (uint64_t slot_seq : {uint64_t{0}, uint64_t{1}}) {
        auto bytes = std::span<const uint8_t>(
            reinterpret_cast<const uint8_t*>(mem.data() + os::StageSlot(slot_seq)),
            os::kStageHeaderBytes);
        auto h = os::DecodeStageHeader(bytes, key_);
        if (h.ok() && h->seq > last_stage_seq_ &&
            os::StageSlot(h->seq) == os::StageSlot(slot_seq) && (!next || h->seq < next->seq)) {
          next = std::move(*h);
        }
      }
      if (!next) break;
      const os::StageHeader& h = *next;
      if (h.len > os::kStageChunkBytes) break;
      const auto* arrived = reinterpret_cast<const uint8_t*>(mem.data() + os::StageSlot(h.seq) +
                                                             os::kStageHeaderBytes);
      if (!os::MacEqual(os::Hmac(key_, {std::span<const uint8_t>(arrived, h.len)}), h.data_mac)) {
        break;  // still arriving: its own signal comes
      }
      std::string dir = o_.state_dir + "/jobs/" + std::to_string(h.job);
      // Root's until the job launches and both become its user's (Launch): the owner's bits
      // of the file's mode only, nobody else's.
      bool ok = MakeDir(dir, kPrivateDir).ok();
      std::string path = dir + "/" + h.file;
      int fd = ok ? ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0700) : -1;
      ok = fd >= 0 && h.len <= os::kStageChunkBytes;
      if (ok) {
        const std::byte* data = mem.data() + os::StageSlot(h.seq) + os::kStageHeaderBytes;
        ok = ::pwrite(fd, data, h.len, static_cast<off_t>(h.offset)) == static_cast<ssize_t>(h.len);
        if (ok && h.offset + h.len == h.file_size) ok = ::fchmod(fd, h.mode & 0700) == 0;
      }
      if (fd >= 0) ::close(fd);
      if (!ok) {
        GOS_LOG(kError, "nodeagent")
            << o_.name << ": cannot store " << path << ": " << std::strerror(errno);
        // Not acknowledging makes the coordinator's flow-control query time out and fail
        // the job, naming this node.
        break;
      }
      last_stage_seq_ = h.seq;
      node_->Store(os::kVarStaged, static_cast<int64_t>(h.seq + 1));
    }
  }
}

}  // namespace gos::nodeagent::internal
