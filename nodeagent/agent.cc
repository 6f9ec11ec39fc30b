// The nodeagent: an IO thread (epoll over the coordinator channel, rank pipes and a signalfd
// for SIGCHLD), a strobe thread (waits for strobe events and applies them) and a staging
// thread (stores staged chunks). Local job state is under mu_.
#include "nodeagent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "gos/bcs/channel.h"
#include "gos/eventfd.h"
#include "gos/log.h"
#include "gos/os/auth.h"
#include "gos/os/channel.h"
#include "gos/os/layout.h"
#include "gos/os/messages.h"
#include "gos/prim/prim.h"
#include "nodeagent/bcs_engine.h"
#include "nodeagent/freezer.h"
#include "nodeagent/launcher.h"

namespace gos::nodeagent {
namespace {

using os::Channel;
using os::Frame;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64u << 10;

struct Rank {
  uint32_t rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1, status_fd = -1, stdin_fd = -1;
  bool exited = false;
  int wait_status = 0;
};

struct LocalJob {
  uint64_t id = 0;
  uint32_t slot = 0, row = 0;
  std::string dir;
  std::unique_ptr<FreezerCgroup> cgroup;
  std::vector<Rank> ranks;
  bool frozen = false;
  bool reported = false;
  std::string stdin_pending;
  bool stdin_eof = false;
  bool bcs = false;  // the program communicates through the BCS engine
  bool rank_failed = false;
};

std::string SelfDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : p.parent_path().string();
}

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Channel files are named after the cluster (a hash of its key), the job and the rank, so
// that the same path can be recreated on any node of the cluster.
std::string ClusterTag(const std::vector<uint8_t>& key) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : key) h = (h ^ b) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(h >> 32));
  return buf;
}

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

class NodeAgentImpl final : public NodeAgent {
 public:
  explicit NodeAgentImpl(AgentOptions o) : o_(std::move(o)) {}
  ~NodeAgentImpl() override { Teardown(); }

  Status Init();
  Status Run() override;
  void Stop() override {
    stop_ = true;
    NotifyEventFd(wake_fd_);
  }

 private:
  Status Connect();
  void Disconnect();
  void Teardown();
  void StrobeLoop();
  void StageLoop();
  void ApplyStrobe(const os::Strobe& s);
  void Launch(const os::LaunchCommand& l, uint32_t current_row);
  void KillJob(LocalJob& j);
  void ForgetJob(uint64_t id);
  void OnChannel();
  void OnPipe(int fd);
  void Reap();
  void MaybeReport(LocalJob& j);
  void CheckRankFailure(LocalJob& j, const Rank& r);
  void FlushStdin(LocalJob& j);
  void Watch(int fd);
  void Unwatch(int fd);
  void SweepStaleCgroups();

  AgentOptions o_;
  std::vector<uint8_t> key_;
  std::string address_;
  std::string coordinator_dir_;  // when --coordinator names a data dir
  std::atomic<bool> stop_{false};
  std::atomic<bool> lost_{false};
  int epoll_fd_ = -1, wake_fd_ = -1, sig_fd_ = -1;
  std::shared_ptr<Channel> ch_;
  std::unique_ptr<prim::Node> node_;
  std::unique_ptr<BcsEngine> bcs_;
  uint32_t node_id_ = 0;
  std::thread strobe_thread_, stage_thread_;

  std::mutex mu_;
  std::map<uint64_t, LocalJob> jobs_;
  std::map<int, std::pair<uint64_t, uint32_t>> pipes_;            // fd -> (job, index of rank)
  std::map<uint64_t, std::pair<std::string, bool>> early_stdin_;  // job -> (bytes, EOF)
  uint64_t last_strobe_ = 0;
  uint64_t last_stage_seq_ = 0;
  uint32_t current_row_ = 0;
};

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
  if (o_.init_path.empty()) o_.init_path = SelfDir() + "/gos-rank-init";
  if (::access(o_.init_path.c_str(), X_OK) != 0) {
    return FailedPreconditionError("gos-rank-init not found at " + o_.init_path);
  }
  std::error_code ec;
  std::filesystem::create_directories(o_.state_dir + "/jobs", ec);
  if (ec) return InternalError("cannot create " + o_.state_dir + "/jobs: " + ec.message());
  ::chmod(o_.state_dir.c_str(), 0755);
  ::chmod((o_.state_dir + "/jobs").c_str(), 0755);
  if (o_.cores == 0) o_.cores = static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_ONLN));
  SweepStaleCgroups();

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
  no.global_memory_bytes = w.global_memory_bytes;
  no.fanout = w.fanout;
  no.join_timeout = o_.connect_timeout * 2;
  GOS_LOG(kInfo, "nodeagent") << o_.name << ": node " << w.node << ", joining the group at "
                              << w.bootstrap;
  ch_ = ch;
  Watch(ch_->fd());
  // The join returns once every node has joined; meanwhile the IO loop must not run, which
  // is fine: nothing is launched before the group forms.
  GOS_ASSIGN_OR_RETURN(node_, prim::Node::Join(no));
  BcsEngineOptions bo;
  bo.node = node_id_;
  bo.channel_prefix = "/dev/shm/gos-" + ClusterTag(key_);
  bcs_ = std::make_unique<BcsEngine>(node_.get(), bo);
  lost_ = false;
  strobe_thread_ = std::thread([this] { StrobeLoop(); });
  stage_thread_ = std::thread([this] { StageLoop(); });
  return OkStatus();
}

Status NodeAgentImpl::Run() {
  while (!stop_) {
    Status s = Connect();
    if (!s.ok()) {
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
  if (strobe_thread_.joinable()) strobe_thread_.join();
  if (stage_thread_.joinable()) stage_thread_.join();
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, j] : jobs_) ids.push_back(id);
  }
  for (uint64_t id : ids) ForgetJob(id);
  if (ch_) {
    Unwatch(ch_->fd());
    ch_.reset();
  }
  bcs_.reset();
  if (node_) {
    node_->Leave();
    node_.reset();
  }
  last_strobe_ = 0;
  last_stage_seq_ = 0;
}

void NodeAgentImpl::Teardown() {
  if (node_ || ch_ || strobe_thread_.joinable()) Disconnect();
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
    GOS_LOG(kWarn, "nodeagent") << o_.name << ": lost the coordinator: " << s.message();
    lost_ = true;
  }
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

void NodeAgentImpl::Reap() {
  std::lock_guard<std::mutex> lock(mu_);
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (auto& [id, j] : jobs_) {
      for (Rank& r : j.ranks) {
        if (r.pid != pid) continue;
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
  if (j.rank_failed || state == bcs::kStateNone || state == bcs::kStateFinalized) return;
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
  if (j.reported || !node_) return;
  for (const Rank& r : j.ranks) {
    if (!r.exited || r.out_fd >= 0 || r.err_fd >= 0) return;
  }
  j.reported = true;
  os::ExitRecord rec;
  rec.job = j.id;
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

void NodeAgentImpl::StrobeLoop() {
  while (!stop_ && !lost_) {
    auto got = node_->WaitEvent(os::kEventStrobe, std::chrono::milliseconds(200));
    if (!got.ok()) {
      GOS_LOG(kWarn, "nodeagent") << got.status().ToString();
      continue;
    }
    if (!node_->node_info(0).alive) {
      GOS_LOG(kWarn, "nodeagent") << o_.name << ": the coordinator is down: "
                                  << node_->node_info(0).down_reason;
      lost_ = true;
      NotifyEventFd(wake_fd_);
      return;
    }
    if (!*got) continue;
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
    ApplyStrobe(*best);
    if (bcs_) bcs_->OnStrobe(best->strobe, best->row);
    last_strobe_ = best->strobe;
    node_->Store(os::kVarApplied, static_cast<int64_t>(best->strobe));
  }
}

void NodeAgentImpl::ApplyStrobe(const os::Strobe& s) {
  std::lock_guard<std::mutex> lock(mu_);
  current_row_ = s.row;
  for (const auto& c : s.commands) {
    switch (c.type) {
      case os::CommandType::kLaunch:
        Launch(c.launch, s.row);
        break;
      case os::CommandType::kSignal: {
        auto jt = jobs_.find(c.job);
        if (jt == jobs_.end()) break;
        if (c.signal == SIGKILL) {
          KillJob(jt->second);
        } else {
          for (const Rank& r : jt->second.ranks) {
            if (!r.exited) ::kill(r.pid, c.signal);
          }
        }
        break;
      }
      case os::CommandType::kForget:
        mu_.unlock();
        ForgetJob(c.job);
        mu_.lock();
        break;
    }
  }
  // Gang scheduling: only the scheduled row's ranks run. Freeze first, then thaw.
  for (auto& [id, j] : jobs_) {
    if (j.row != s.row && !j.frozen && j.cgroup && !j.reported) {
      Status st = j.cgroup->Freeze(true);
      if (!st.ok()) GOS_LOG(kWarn, "nodeagent") << "freeze job " << id << ": " << st.ToString();
      j.frozen = true;
    }
  }
  for (auto& [id, j] : jobs_) {
    if (j.row == s.row && j.frozen && j.cgroup) {
      Status st = j.cgroup->Thaw();
      if (!st.ok()) GOS_LOG(kWarn, "nodeagent") << "thaw job " << id << ": " << st.ToString();
      j.frozen = false;
    }
  }
}

void NodeAgentImpl::Launch(const os::LaunchCommand& l, uint32_t current_row) {
  std::vector<uint32_t> mine;
  for (const auto& run : l.runs) {
    if (run.node != node_id_) continue;
    for (uint32_t k = 0; k < run.count; ++k) mine.push_back(run.first + k);
  }
  if (mine.empty() || jobs_.count(l.job)) return;
  LocalJob& j = jobs_[l.job];
  j.id = l.job;
  j.slot = l.slot;
  j.row = l.row;
  j.dir = o_.state_dir + "/jobs/" + std::to_string(l.job);
  ::mkdir(j.dir.c_str(), 0700);
  // The job dir and staged files belong to the job's user.
  ::chown(j.dir.c_str(), l.uid, l.gid);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(j.dir, ec)) {
    ::chown(e.path().c_str(), l.uid, l.gid);
  }
  auto cg = FreezerCgroup::Create(
      o_.cgroup_root, o_.name + "." + std::to_string(getpid()) + "/j" + std::to_string(l.job));
  std::string failure;
  if (!cg.ok()) {
    failure = cg.status().ToString();
  } else {
    j.cgroup = std::move(*cg);
    if (l.row != current_row) {
      j.cgroup->Freeze(false).IgnoreError();
      j.frozen = true;
    }
  }
  std::map<uint32_t, std::string> channels;
  if (failure.empty() && (l.flags & os::kLaunchBcs) && bcs_) {
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
    auto paths = bcs_->AddJob(bj);
    if (paths.ok()) {
      channels = std::move(*paths);
      j.bcs = true;
    } else {
      failure = paths.status().ToString();
    }
  }
  for (uint32_t rank : mine) {
    Rank r;
    r.rank = rank;
    if (failure.empty()) {
      RankSpec spec;
      spec.program = j.dir + "/" + l.program;
      spec.argv = l.argv;
      spec.env = l.env;
      spec.env.push_back("GOS_RANK=" + std::to_string(rank));
      spec.env.push_back("GOS_SIZE=" + std::to_string(l.ntasks));
      spec.env.push_back("GOS_JOB=" + std::to_string(l.job));
      spec.env.push_back("GOS_NODE=" + std::to_string(node_id_));
      if (auto ct = channels.find(rank); ct != channels.end()) {
        spec.env.push_back("GOS_CHANNEL=" + ct->second);
      }
      spec.cwd = l.cwd;
      spec.uid = l.uid;
      spec.gid = l.gid;
      spec.cgroup_procs = j.cgroup->procs_file();
      spec.init_path = o_.init_path;
      auto p = LaunchRank(spec);
      if (p.ok()) {
        r.pid = p->pid;
        if (j.bcs) bcs_->SetRankInit(l.job, rank, p->pid);
        r.out_fd = p->stdout_fd;
        r.err_fd = p->stderr_fd;
        r.status_fd = p->status_fd;
        r.stdin_fd = p->stdin_fd;
        if (rank != 0) {
          ::close(r.stdin_fd);  // stdin goes to rank 0 only
          r.stdin_fd = -1;
        } else {
          fcntl(r.stdin_fd, F_SETFL, fcntl(r.stdin_fd, F_GETFL) | O_NONBLOCK);
        }
      } else {
        failure = p.status().ToString();
      }
    }
    if (r.pid < 0) {
      // Could not start: report it as exit 127 with the reason on the rank's stderr.
      r.exited = true;
      r.wait_status = 127 << 8;
      os::OutputChunk out{l.job, rank, 2,
                          "gos-nodeagent " + o_.name + ": cannot start rank " +
                              std::to_string(rank) + ": " + failure + "\n"};
      if (ch_) ch_->Send(Frame::kAgentOutput, os::Encode(out)).IgnoreError();
    }
    j.ranks.push_back(r);
  }
  for (uint32_t i = 0; i < j.ranks.size(); ++i) {
    for (int fd : {j.ranks[i].out_fd, j.ranks[i].err_fd}) {
      if (fd < 0) continue;
      pipes_[fd] = {l.job, i};
      Watch(fd);
    }
  }
  if (auto early = early_stdin_.find(l.job); early != early_stdin_.end()) {
    j.stdin_pending = std::move(early->second.first);
    j.stdin_eof = early->second.second;
    early_stdin_.erase(early);
    FlushStdin(j);
  }
  node_->Store(os::VarStarted(l.slot), static_cast<int64_t>(l.job));
  MaybeReport(j);
}

void NodeAgentImpl::KillJob(LocalJob& j) {
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
  KillJob(j);
  if (j.bcs && bcs_) bcs_->RemoveJob(id);
  for (Rank& r : j.ranks) {
    for (int* fd : {&r.out_fd, &r.err_fd, &r.status_fd, &r.stdin_fd}) {
      if (*fd < 0) continue;
      pipes_.erase(*fd);
      Unwatch(*fd);
      ::close(*fd);
      *fd = -1;
    }
    if (!r.exited && r.pid > 0) ::waitpid(r.pid, nullptr, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(j.dir, ec);
  jobs_.erase(jt);
}

void NodeAgentImpl::StageLoop() {
  std::vector<uint8_t> unused;
  while (!stop_ && !lost_) {
    auto got = node_->WaitEvent(os::kEventStage, std::chrono::milliseconds(200));
    if (!got.ok() || !*got) continue;
    std::span<std::byte> mem = node_->global_memory();
    // Up to two chunks can be waiting; store them in sequence order.
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
      std::string dir = o_.state_dir + "/jobs/" + std::to_string(h.job);
      ::mkdir(dir.c_str(), 0700);
      std::string path = dir + "/" + h.file;
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0700);
      bool ok = fd >= 0 && h.len <= os::kStageChunkBytes;
      if (ok) {
        const std::byte* data = mem.data() + os::StageSlot(h.seq) + os::kStageHeaderBytes;
        ok = ::pwrite(fd, data, h.len, static_cast<off_t>(h.offset)) == static_cast<ssize_t>(h.len);
        if (ok && h.offset + h.len == h.file_size) ok = ::fchmod(fd, h.mode & 07777) == 0;
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

}  // namespace

StatusOr<std::unique_ptr<NodeAgent>> NodeAgent::Create(const AgentOptions& options) {
  auto a = std::make_unique<NodeAgentImpl>(options);
  GOS_RETURN_IF_ERROR(a->Init());
  return std::unique_ptr<NodeAgent>(std::move(a));
}

}  // namespace gos::nodeagent
