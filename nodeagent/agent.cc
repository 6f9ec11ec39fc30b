// The nodeagent: an IO thread (epoll over the coordinator channel, rank pipes and a signalfd
// for SIGCHLD), a strobe thread (waits for strobe events and applies them) and a staging
// thread (stores staged chunks). Local job state is under mu_.
//
// This file: creation, init, connecting and joining the group, the IO loop and the strobe
// loop. Jobs, checkpoints, restores and recording are in the files agent_impl.h names.
#include "agent.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "agent_impl.h"
#include "cpu_bind.h"
#include "gos/bcs/channel.h"
#include "gos/files.h"
#include "gos/log.h"
#include "gos/os/auth.h"
#include "gos/os/layout.h"
#include "gos/programs.h"
#include "gos/round_trace.h"

namespace gos::nodeagent::internal {
namespace {

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// How long the strobe thread starts ranks of a launch before it looks for a strobe again:
// a strobe is confirmed at most about this (and one fork) later than without the launch.
constexpr std::chrono::microseconds kLaunchSlice{2000};

std::string ReadFirstLine(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  char buf[512] = {};
  if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
  std::fclose(f);
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Status NodeAgentImpl::Init() {
  if (o_.coordinator.empty()) return InvalidArgumentError("--coordinator is required");
  struct stat st {};
  if (::stat(o_.coordinator.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    coordinator_dir_ = o_.coordinator;
    if (o_.key_file.empty()) o_.key_file = o_.coordinator + "/cluster.key";
  } else {
    address_ = o_.coordinator;
  }
  if (!coordinator_dir_.empty()) {
    // The coordinator writes its address after creating the key: wait for a fresh one.
    auto deadline = SteadyClock::now() + o_.connect_timeout;
    while (ReadFirstLine(coordinator_dir_ + "/coordinator.addr").empty()) {
      if (SteadyClock::now() > deadline) {
        return UnavailableError("no coordinator address appeared in " + coordinator_dir_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (o_.key_file.empty()) return InvalidArgumentError("--key-file is required");
  GOS_ASSIGN_OR_RETURN(key_, os::LoadClusterKey(o_.key_file));
  if (o_.name.empty()) o_.name = HostName();
  if (o_.state_dir.empty()) o_.state_dir = "/var/lib/gos/nodeagent/" + o_.name;
  if (o_.init_path.empty()) o_.init_path = GosProgram("gos-rank-init", ProgramDir::kLibexec);
  if (::access(o_.init_path.c_str(), X_OK) != 0) {
    return FailedPreconditionError("gos-rank-init not found at " + o_.init_path);
  }
  // A rank runs its staged executable from its job dir, jobs/<job> (its user's alone): the
  // way there is passable by anyone, listable by nobody but root (kPassDir); what the agent
  // keeps beside it (dumps, restore images) is root's (kPrivateDir). Whatever the umask and
  // the parents' modes; dirs an earlier agent made are tightened (README, "Who can read what").
  GOS_RETURN_IF_ERROR(MakeDir(o_.state_dir, kPassDir));
  GOS_RETURN_IF_ERROR(MakeDir(o_.state_dir + "/jobs", kPassDir));
  if (o_.cores == 0) o_.cores = static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_ONLN));
  cpus_ = AllowedCpus();
  if (o_.scratch_dir.empty()) o_.scratch_dir = o_.state_dir;
  SweepStaleCgroups();
  // An empty cgroup kept FROZEN while the agent runs. The kernel's freezer has a static key
  // that is on only while some cgroup is freezing; switching it (code patching on every CPU)
  // made each freeze of a job take ~140 us and each thaw ~130 us here, against ~60 and ~25
  // with the key left on. Without it gang scheduling still works, only slower.
  auto key = FreezerCgroup::Create(o_.cgroup_root,
                                   o_.name + "." + std::to_string(getpid()) + "/freezer-key");
  if (key.ok() && (*key)->Freeze(false).ok()) freezer_key_ = std::move(*key);
  // gos-rank-init's working dirs are root's; so is a scratch dir the agent makes (an existing
  // one, maybe a shared /dev/shm, keeps its mode: its ckpt and restore dirs are root's).
  GOS_RETURN_IF_ERROR(MakeDir(o_.init_root, kPrivateDir));
  GOS_RETURN_IF_ERROR(CreateDirs(o_.scratch_dir, kPrivateDir));
  for (const std::string& dir : {o_.scratch_dir + "/ckpt", o_.scratch_dir + "/restore",
                                 o_.state_dir + "/ckpt-spill", o_.state_dir + "/restore"}) {
    GOS_RETURN_IF_ERROR(MakeDir(dir, kPrivateDir));
  }

  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  sig_fd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  Watch(wake_fd_);
  Watch(sig_fd_);
  return OkStatus();
}

// Cgroups of nodeagents that died (kill -9, node crash) still hold their jobs' processes:
// kill them and remove the cgroups, so no rank outlives its agent.
void NodeAgentImpl::SweepStaleCgroups() {
  std::error_code ec;
  for (const auto& agent_dir : std::filesystem::directory_iterator(o_.cgroup_root, ec)) {
    std::string name = agent_dir.path().filename().string();
    size_t dot = name.rfind('.');
    if (!agent_dir.is_directory() || dot == std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::atoi(name.c_str() + dot + 1));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ec2;
    for (const auto& job_dir : std::filesystem::directory_iterator(agent_dir.path(), ec2)) {
      if (!job_dir.is_directory()) continue;
      auto cg =
          FreezerCgroup::Create(o_.cgroup_root, name + "/" + job_dir.path().filename().string());
      if (cg.ok()) (*cg)->Destroy().IgnoreError();
    }
    ::rmdir(agent_dir.path().c_str());
    GOS_LOG(kInfo, "nodeagent") << "removed the cgroups of dead nodeagent " << name;
  }
}

void NodeAgentImpl::Watch(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void NodeAgentImpl::Unwatch(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

Status NodeAgentImpl::Connect() {
  auto deadline = SteadyClock::now() + o_.connect_timeout;
  if (!coordinator_dir_.empty()) {
    // A restarted coordinator listens on a new port: read its address every time.
    std::string addr_file = coordinator_dir_ + "/coordinator.addr";
    while ((address_ = ReadFirstLine(addr_file)).empty()) {
      if (SteadyClock::now() > deadline || stop_) {
        return UnavailableError("no coordinator address in " + addr_file);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // With a data dir, a refused address may be a stale one: retry soon with a fresh read.
  auto connect_deadline =
      coordinator_dir_.empty() ? deadline : SteadyClock::now() + std::chrono::seconds(1);
  GOS_ASSIGN_OR_RETURN(int fd, os::ConnectAddress(address_, connect_deadline));
  auto ch = std::make_shared<Channel>(fd, key_, false);
  os::AgentHello hello;
  hello.name = o_.name;
  hello.host = HostName();
  hello.pid = getpid();
  hello.cores = o_.cores;
  hello.mem_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  hello.requested_node = node_id_ ? node_id_ : o_.requested_node;
  GOS_RETURN_IF_ERROR(ch->Send(Frame::kHello, os::Encode(hello)));
  auto reply = ch->Receive(deadline);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kUnavailable) {
      return PermissionDeniedError("the coordinator at " + address_ +
                                   " closed the connection: refused (wrong cluster key?)");
    }
    return reply.status().WithContext("coordinator " + address_);
  }
  if (reply->type == Frame::kReject) {
    auto why = os::DecodeText(reply->payload);
    return PermissionDeniedError("the coordinator refused this node: " +
                                 (why.ok() ? *why : std::string("?")));
  }
  if (reply->type != Frame::kWelcome) return InternalError("unexpected reply to HELLO");
  GOS_ASSIGN_OR_RETURN(os::AgentWelcome w, os::DecodeWelcome(reply->payload));
  node_id_ = w.node;
  prim::NodeOptions no;
  no.bootstrap = w.bootstrap;
  no.provider = w.provider;
  no.requested_id = w.node;
  no.spin = os::kDaemonSpin;
  no.global_memory_bytes = w.global_memory_bytes;
  no.fanout = w.fanout;
  no.join_timeout = o_.connect_timeout * 2;
  no.cancel = &stop_;
  GOS_LOG(kInfo, "nodeagent") << o_.name << ": node " << w.node << ", joining the group at "
                              << w.bootstrap;
  ch_ = ch;
  Watch(ch_->fd());
  // The join returns once every node has joined; meanwhile the IO loop must not run, which
  // is fine: nothing is launched before the group forms.
  GOS_ASSIGN_OR_RETURN(node_, prim::Node::Join(no));
  // A rank's fork need not copy the page tables of the global memory (tens of MiB, all
  // touched): copying them, and the child's exec tearing the copy down again, took most of
  // the strobe thread's time when hundreds of ranks started (docs/benchmarks.md, launch).
  if (std::span<std::byte> mem = node_->global_memory(); !mem.empty()) {
    if (::madvise(mem.data(), mem.size(), MADV_DONTFORK) != 0) {
      GOS_LOG(kWarn, "nodeagent") << "madvise(MADV_DONTFORK) of the global memory: "
                                  << std::strerror(errno);
    }
  }
  outbox_ = std::make_unique<os::BatchOutbox>(node_.get(), os::kCheckpointRoute, key_);
  // In place of a node that was down, the coordinator sends strobes here only from now on.
  ch_->Send(Frame::kAgentJoined, {}).IgnoreError();  // a broken channel is seen by Run
  BcsEngineOptions bo;
  bo.node = node_id_;
  bo.channel_prefix = "/dev/shm/gos-" + os::ClusterTag(key_);
  bo.on_replay_stop = [this](const ReplayStop& stop) {
    os::ReplayStopped m;
    m.job = stop.job;
    m.kind = stop.kind;
    m.strobe = stop.strobe;
    m.rank = stop.rank;
    m.text = stop.text;
    if (auto c = channel()) c->Send(Frame::kReplayStop, os::Encode(m)).IgnoreError();
  };
  bo.on_broken = [this](uint64_t job, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(job);
    if (jt == jobs_.end()) return;
    GOS_LOG(kWarn, "nodeagent") << "job " << job << ": " << why << "; killing its ranks here";
    // Said on each local rank's stderr, so gos-run shows it with the job's failure.
    for (const Rank& r : jt->second.ranks) {
      if (r.exited || !ch_) continue;
      os::OutputChunk out{job, r.rank, 2,
                          "gos-nodeagent " + o_.name + " (node " + std::to_string(node_id_) +
                              "): rank " + std::to_string(r.rank) +
                              " cannot communicate any more: " + why + "; killing it\n"};
      ch_->Send(Frame::kAgentOutput, os::Encode(out)).IgnoreError();
    }
    KillJob(jt->second);
  };
  bcs_ = std::make_unique<BcsEngine>(node_.get(), bo);
  crash_watch_ = std::make_unique<CrashWatch>([this](const Crash& c) { OnCrash(c); });
  lost_ = false;
  strobe_thread_ = std::thread([this] { StrobeLoop(); });
  stage_thread_ = std::thread([this] { StageLoop(); });
  restore_in_thread_ = std::thread([this] { RestoreInLoop(); });
  restore_thread_ = std::thread([this] { RestoreLoop(); });
  return OkStatus();
}

Status NodeAgentImpl::Run() {
  while (!stop_) {
    Status s = Connect();
    if (!s.ok()) {
      if (stop_) break;  // stopped (SIGTERM) while joining
      if (s.code() == StatusCode::kPermissionDenied || o_.exit_with_coordinator) return s;
      GOS_LOG(kWarn, "nodeagent") << o_.name << ": " << s.ToString() << "; retrying";
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    while (!stop_ && !lost_) {
      epoll_event evs[64];
      int n = epoll_wait(epoll_fd_, evs, 64, 200);
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        if (fd == wake_fd_) {
          uint64_t v;
          ssize_t rc = ::read(wake_fd_, &v, sizeof v);
          (void)rc;
          Reap();  // a restore worker registered ranks that may have exited already
        } else if (fd == sig_fd_) {
          signalfd_siginfo si;
          while (::read(sig_fd_, &si, sizeof si) == sizeof si) {
          }
          Reap();
        } else if (ch_ && fd == ch_->fd()) {
          OnChannel();
        } else {
          OnPipe(fd);
        }
      }
    }
    Disconnect();
    if (o_.exit_with_coordinator) break;
  }
  Teardown();
  return OkStatus();
}

// The coordinator went away: its jobs cannot go on (their clients and strobes are gone).
void NodeAgentImpl::Disconnect() {
  lost_ = true;
  // Threads waiting for an event return now rather than at their timeouts.
  if (node_) node_->CancelWaits();
  if (strobe_thread_.joinable()) strobe_thread_.join();
  if (stage_thread_.joinable()) stage_thread_.join();
  if (restore_in_thread_.joinable()) restore_in_thread_.join();
  {
    // A new coordinator numbers its attempts afresh.
    std::lock_guard<std::mutex> rl(restore_mu_);
    restoring_.clear();
  }
  restore_cv_.notify_all();
  if (restore_thread_.joinable()) restore_thread_.join();
  {
    std::list<Worker> workers;
    {
      std::lock_guard<std::mutex> wl(work_mu_);
      workers.swap(workers_);
    }
    for (Worker& w : workers) w.thread.join();
  }
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, j] : jobs_) ids.push_back(id);
  }
  for (uint64_t id : ids) ForgetJob(id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    launching_.clear();
  }
  if (ch_) {
    Unwatch(ch_->fd());
    ch_.reset();
  }
  crash_watch_.reset();  // its callback uses bcs_
  bcs_.reset();
  outbox_.reset();
  if (node_) {
    node_->Leave();
    node_.reset();
  }
  last_strobe_ = 0;
  last_stage_seq_ = 0;
}

void NodeAgentImpl::Teardown() {
  if (node_ || ch_ || strobe_thread_.joinable()) Disconnect();
  freezer_key_.reset();  // thawed and removed
  ::rmdir((o_.cgroup_root + "/" + o_.name + "." + std::to_string(getpid())).c_str());
  for (int* fd : {&epoll_fd_, &wake_fd_, &sig_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void NodeAgentImpl::OnChannel() {
  std::vector<os::FrameIn> frames;
  Status s = ch_->ReadAvailable(&frames);
  for (auto& f : frames) {
    if (f.type == Frame::kRestoreRankEnd) {
      auto m = os::DecodeRestoreRankEnd(f.payload);
      if (m.ok()) OnRestoreRankEnd(*m);
      continue;
    }
    if (f.type == Frame::kRestoreLocal) {
      OnRestoreLocal(f.payload);
      continue;
    }
    if (f.type == Frame::kReplayData) {
      auto m = os::DecodeReplaySegment(f.payload);
      if (m.ok()) replay_inbox_[m->job][m->stream].push_back(std::move(m->bytes));
      continue;
    }
    if (f.type == Frame::kReplayDataEnd) {
      auto m = os::DecodeReplayDataEnd(f.payload);
      if (m.ok()) OnReplayDataEnd(*m);
      continue;
    }
    if (f.type == Frame::kRanksQuery) {
      auto job = os::DecodeU64(f.payload);
      if (job.ok()) AnswerRanks(*job);
      continue;
    }
    if (f.type != Frame::kAgentStdin) continue;
    auto m = os::DecodeJobBytes(f.payload);
    if (!m.ok()) continue;
    std::lock_guard<std::mutex> lock(mu_);
    auto jt = jobs_.find(m->first);
    if (jt == jobs_.end()) {
      // Input can come before the launch strobe: keep it for the rank (empty = EOF).
      auto& early = early_stdin_[m->first];
      early.first += m->second;
      early.second |= m->second.empty();
      continue;
    }
    if (m->second.empty()) jt->second.stdin_eof = true;
    jt->second.stdin_pending += m->second;
    FlushStdin(jt->second);
  }
  if (!s.ok()) {
    // An embedded cluster's coordinator closing is how the cluster ends: not worth a warning.
    GOS_LOG_AT(o_.exit_with_coordinator ? LogLevel::kInfo : LogLevel::kWarn, "nodeagent")
        << o_.name << ": lost the coordinator: " << s.message();
    lost_ = true;
  }
}

void NodeAgentImpl::StrobeLoop() {
  SetThreadName("agent-strobe");
  // Its sleeps are short waits (for a cgroup to freeze): the default 50 us of timer slack
  // would double them.
  ::prctl(PR_SET_TIMERSLACK, 1000UL);
  // Ranks of a launch start a slice at a time: between strobes while no strobe has come, and
  // one slice at each strobe, before it is confirmed (docs/specs/strobe.md, "Paced launches").
  bool launching = false;
  while (!stop_ && !lost_) {
    auto got = node_->WaitEvent(os::kEventStrobe, launching ? std::chrono::milliseconds(0)
                                                            : std::chrono::milliseconds(200));
    if (!got.ok()) {
      if (got.status().code() != StatusCode::kCancelled) {
        GOS_LOG(kWarn, "nodeagent") << got.status().ToString();
      }
      continue;
    }
    if (!node_->node_info(0).alive) {
      GOS_LOG(kWarn, "nodeagent") << o_.name << ": the coordinator is down: "
                                  << node_->node_info(0).down_reason;
      lost_ = true;
      NotifyEventFd(wake_fd_);
      return;
    }
    if (!*got) {
      if (launching) launching = ContinueLaunches(kLaunchSlice);
      continue;
    }
    // The new strobe is in slot (last + 1) % 2; read both and take the newest.
    std::span<std::byte> mem = node_->global_memory();
    std::optional<os::Strobe> best;
    for (uint64_t s : {last_strobe_ + 1, last_strobe_ + 2}) {
      auto bytes = std::span<const uint8_t>(
          reinterpret_cast<const uint8_t*>(mem.data() + os::StrobeSlot(s)), os::kStrobeSlotBytes);
      auto strobe = os::DecodeStrobe(bytes, key_);
      if (strobe.ok() && strobe->strobe > last_strobe_ &&
          (!best || strobe->strobe > best->strobe)) {
        best = std::move(*strobe);
      }
    }
    if (!best) continue;
    round_trace::Note(round_trace::Hop::kAgentStrobe, best->strobe, 0, node_id_);
    {
      // No job round between the strobe's commands, the checkpoints' quiescence tests and
      // holds, and the strobe's own rounds (docs/specs/bcs-exchange.md, "Job rounds").
      std::unique_lock<std::mutex> rounds;
      if (bcs_) rounds = bcs_->PauseRounds();
      ApplyStrobe(*best);
      launching = ContinueLaunches(kLaunchSlice);
      round_trace::Note(round_trace::Hop::kAgentApplied, best->strobe, 0, node_id_);
      StartCheckpoints();
      if (bcs_) bcs_->OnStrobe(best->strobe, best->row, best->early);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, j] : jobs_) {
        if (j.record) ShipRecord(j, false);
      }
    }
    last_strobe_ = best->strobe;
    node_->Store(os::kVarApplied, static_cast<int64_t>(best->strobe));
    round_trace::Note(round_trace::Hop::kAgentConfirmed, best->strobe, 0, node_id_);
  }
}

// Strobe s brings no command, and this node runs only jobs that do not communicate through
// gos, none held, checkpointing, recorded or ended (under mu_): its progress thread need not
// poll after its messages (see CoordinatorImpl::OnlyComputeRunning).
bool NodeAgentImpl::OnlyComputeRunning(const os::Strobe& s) const {
  if (!s.commands.empty() || jobs_.empty()) return false;
  for (const auto& [id, j] : jobs_) {
    if (j.bcs || j.hold || j.ckpt_epoch != 0 || j.record || j.replay || j.reported || j.launching) {
      return false;
    }
  }
  return true;
}

void NodeAgentImpl::ApplyStrobe(const os::Strobe& s) {
  std::lock_guard<std::mutex> lock(mu_);
  current_row_ = s.row;
  for (const auto& c : s.commands) {
    if (c.origin != s.strobe && std::find(applied_strobes_.begin(), applied_strobes_.end(),
                                          c.origin) != applied_strobes_.end()) {
      continue;  // applied with its first strobe
    }
    switch (c.type) {
      case os::CommandType::kLaunch:
        Launch(c.launch, c.origin, s.row);
        break;
      case os::CommandType::kSignal: {
        auto jt = jobs_.find(c.job);
        if (jt == jobs_.end()) break;
        if (c.signal == SIGKILL) {
          KillJob(jt->second);
          MaybeReport(jt->second);  // no rank of it may have started yet
        } else {
          for (const Rank& r : jt->second.ranks) {
            if (!r.exited) ::kill(r.pid, c.signal);
          }
          if (auto& p = jt->second.launching) p->signals.push_back(c.signal);
        }
        break;
      }
      case os::CommandType::kForget:
        mu_.unlock();
        ForgetJob(c.job);
        mu_.lock();
        break;
      case os::CommandType::kCheckpoint: {
        auto jt = jobs_.find(c.job);
        if (jt == jobs_.end()) break;
        jt->second.ckpt_epoch = c.epoch;
        jt->second.ckpt_base = c.base;
        jt->second.ckpt_level = c.signal;
        break;
      }
      case os::CommandType::kResume: {
        auto jt = jobs_.find(c.job);
        if (jt == jobs_.end()) break;
        if (jt->second.dump_broke) {
          if (auto& cancel = jt->second.ckpt_cancel) {
            std::lock_guard<std::mutex> cl(cancel->mu);
            cancel->resumed = true;
            cancel->cv.notify_all();
          }
          break;  // never thawed again: see LocalJob::dump_broke
        }
        jt->second.hold = false;
        if (jt->second.bcs && bcs_) bcs_->Hold(c.job, false);
        if (auto& cancel = jt->second.ckpt_cancel) {
          std::lock_guard<std::mutex> cl(cancel->mu);
          cancel->resumed = true;
          cancel->cv.notify_all();
        }
        break;
      }
      case os::CommandType::kRestore:
        Restore(c);
        break;
      case os::CommandType::kStop: {
        auto jt = jobs_.find(c.job);
        if (jt == jobs_.end()) break;
        StopJob(jt->second);
        break;
      }
    }
  }
  // Gang scheduling: only the scheduled row's ranks run. Freeze first, then thaw. The next
  // row is thawed without waiting to read FROZEN: the old row is FREEZING by then (never
  // THAWED), and its tasks stop as each takes the freezer's wake-up, within microseconds.
  // Polling for FROZEN first (sleeping 50 us and more between reads) left both rows stopped
  // for ~65 us at every switch: +2.4 % against +1.3-1.9 % at a 2 ms quantum
  // (docs/benchmarks.md, gang scheduling).
  for (auto& [id, j] : jobs_) {
    if (j.row != s.row && !j.frozen && j.cgroup && !j.reported && !j.stopped) {
      Status st = j.cgroup->Freeze(false);
      if (!st.ok()) GOS_LOG(kWarn, "nodeagent") << "freeze job " << id << ": " << st.ToString();
      j.frozen = true;
    }
  }
  for (auto& [id, j] : jobs_) {
    if (j.row == s.row && j.frozen && j.cgroup && !j.hold) {
      Status st = j.cgroup->Thaw();
      if (!st.ok()) GOS_LOG(kWarn, "nodeagent") << "thaw job " << id << ": " << st.ToString();
      j.frozen = false;
    }
  }
  applied_strobes_.push_back(s.strobe);
  if (applied_strobes_.size() > 1024) applied_strobes_.pop_front();
  node_->SetSpinning(!OnlyComputeRunning(s));
}

}  // namespace gos::nodeagent::internal

namespace gos::nodeagent {

StatusOr<std::unique_ptr<NodeAgent>> NodeAgent::Create(const AgentOptions& options) {
  auto a = std::make_unique<internal::NodeAgentImpl>(options);
  GOS_RETURN_IF_ERROR(a->Init());
  return std::unique_ptr<NodeAgent>(std::move(a));
}

}  // namespace gos::nodeagent
