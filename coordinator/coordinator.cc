// The coordinator: an IO thread (epoll over clients and nodeagents), a strobe thread (the
// global clock, heartbeat and termination queries), a staging thread (launch transfers) and
// a join thread (forms the primitives' group). All state is under mu_; frames to clients and
// agents are sent after mu_ is released, so a slow peer never stalls the strobe.
//
// The pieces of CoordinatorImpl live in one file per concern (coordinator_impl.h lists them);
// this file is its core.
#include "coordinator.h"

#include <pwd.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "coordinator_impl.h"
#include "gos/coordinator/store_ops.h"
#include "gos/files.h"
#include "gos/log.h"
#include "gos/os/auth.h"
#include "gos/os/layout.h"
#include "gos/storage/replay.h"

namespace gos::coordinator::internal {

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t MicrosSince(SteadyClock::time_point from, SteadyClock::time_point to) {
  if (to == SteadyClock::time_point{}) return 0;
  return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
}

std::string UserName(uid_t uid) {
  passwd pw{}, *res = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return pw.pw_name;
  return std::to_string(uid);
}

// " (gos-restart J brings it back from epoch E)": what a failed job's message ends with.
std::string RestartHint(uint64_t job, uint64_t epoch) {
  return " (gos-restart " + std::to_string(job) + " brings it back from epoch " +
         std::to_string(epoch) + ")";
}

// The epoch's ranks were dumped with a BCS channel: the job communicates through gos.
bool ImagesUseBcs(const storage::EpochManifest& m) {
  return std::any_of(m.ranks.begin(), m.ranks.end(), [](const storage::EpochRank& r) {
    return std::any_of(r.files.begin(), r.files.end(),
                       [](const storage::FileEntry& f) { return f.name == "gos-channel"; });
  });
}

bool OwnerOrRoot(const os::PeerCreds& who, uint32_t uid) { return who.uid == 0 || who.uid == uid; }

Status CoordinatorImpl::Init() {
  if (o_.data_dir.empty()) return InvalidArgumentError("--data-dir is required");
  if (o_.nodes == 0 || o_.nodes >= os::kMaxClusterNodes) {
    return InvalidArgumentError("--nodes must be 1.." + std::to_string(os::kMaxClusterNodes - 1));
  }
  // A strobe takes ~0.1-0.4 ms of daemon CPU here (docs/benchmarks.md): a shorter quantum
  // would be all strobes and no job.
  if (o_.timeslice < std::chrono::microseconds(100)) {
    return InvalidArgumentError("--timeslice " + std::to_string(o_.timeslice.count()) +
                                "us is too short: at least 100us");
  }
  if (o_.mpl == 0) return InvalidArgumentError("--mpl must be at least 1");
  if (o_.fanout == 0) return InvalidArgumentError("--fanout must be at least 1");
  if (o_.failure_timeout <= o_.timeslice) {
    return InvalidArgumentError("--failure-timeout must be longer than --timeslice");
  }
  // Anyone reaches the client socket in it (the socket tells who connects), nobody but root
  // lists it or reads what it holds: the store, the uploads, the key, the logs (README, "Who
  // can read what"). An existing data dir is tightened.
  GOS_RETURN_IF_ERROR(MakeDir(o_.data_dir, kPassDir));
  if (o_.socket.empty()) o_.socket = o_.data_dir + "/coordinator.sock";
  GOS_ASSIGN_OR_RETURN(key_, os::LoadOrCreateClusterKey(o_.data_dir + "/cluster.key"));
  GOS_ASSIGN_OR_RETURN(tables_, storage::Tables::Open(o_.data_dir + "/db"));
  matrix_ = GangMatrix(o_.mpl);
  for (uint32_t s = 0; s < os::kMaxJobSlots; ++s) free_slots_.insert(s);
  // Above the attempts of a coordinator that ran before on this data dir.
  restore_attempt_ = static_cast<uint64_t>(UnixMs());

  // Recover the tables. Jobs that were not final when the previous coordinator stopped cannot
  // be continued (their clients and strobes are gone: the nodeagents stopped their ranks);
  // nodes are down until they rejoin. A job with automatic restarts left and a committed
  // epoch is restarted from it, as when one of its nodes is lost, once the cluster has formed
  // (a client may attach to it meanwhile: kAttach), unless this coordinator stops when idle. Any
  // other job fails; one with a checkpoint comes back with gos-restart. Both go on with the
  // checkpoint settings stored in their records.
  GOS_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, tables_->ListJobs());
  GOS_ASSIGN_OR_RETURN(std::vector<NodeRecord> nodes, tables_->ListNodes());
  std::vector<JobRecord> changed_jobs;
  After notices;  // none can be sent yet: the restarted jobs keep theirs for their clients
  for (JobRecord& j : jobs) {
    if (storage::JobStateIsFinal(j.state)) continue;
    const std::string was = storage::JobStateName(j.state);
    auto epochs = store()->ListEpochs(j.id, false);
    const bool has_epoch = epochs.ok() && !epochs->empty();
    // Not on a cluster started for one client (gos-run's or gos-restart's embedded one, which
    // stops once idle): nobody would follow such a restart, and the cluster would stop under it.
    if (has_epoch && RestartsLeft(j) > 0 && !o_.exit_when_idle) {
      auto m = store()->GetEpoch(j.id, epochs->back().epoch);
      if (m.ok() && m->has_value()) {
        Job r = RestartedJob(j);
        ++r.rec.restarts_used;
        r.awaits_client = true;
        SetRestore(r, std::move(**m), epochs->back().epoch);
        const uint64_t id = j.id;
        jobs_[id] = std::move(r);
        Job& restarted = jobs_[id];
        queue_.Push(restarted.req);
        changed_jobs.push_back(restarted.rec);
        ever_had_job_ = true;
        Notice(restarted,
               "job " + std::to_string(id) + ": the coordinator restarted while it was " + was +
                   "; restarting from epoch " + std::to_string(restarted.restore_epoch) + " (" +
                   std::to_string(RestartsLeft(restarted.rec)) + " automatic restarts left)",
               notices);
        continue;
      }
    }
    j.message = "the coordinator restarted while the job was " + was + "; its ranks were stopped";
    if (has_epoch) {
      j.message += RestartHint(j.id, epochs->back().epoch);
    }
    j.state = JobState::kFailed;
    j.exit_code = kNodeFailureExit;
    j.end_ms = UnixMs();
    changed_jobs.push_back(j);
  }
  for (NodeRecord& n : nodes) {
    if (n.state == NodeState::kUp) {
      n.state = NodeState::kDown;
      n.down_reason = "not rejoined since the coordinator restarted";
    }
    nodes_[n.id] = n;
  }
  std::vector<NodeRecord> node_list;
  for (auto& [id, n] : nodes_) node_list.push_back(n);
  GOS_RETURN_IF_ERROR(tables_->PutAll(changed_jobs, node_list));
  if (!jobs.empty() || !nodes.empty()) {
    GOS_LOG(kInfo, "coordinator") << "recovered " << jobs.size() << " jobs ("
                                  << changed_jobs.size() - jobs_.size() << " marked failed, "
                                  << jobs_.size() << " restarting) and " << nodes.size()
                                  << " nodes from " << o_.data_dir;
  }

  std::string host = o_.listen.substr(0, o_.listen.rfind(':'));
  prim::BootstrapOptions bo;
  bo.listen = host + ":0";
  bo.group_size = o_.nodes + 1;
  bo.failure_timeout = o_.failure_timeout;
  GOS_ASSIGN_OR_RETURN(bootstrap_, prim::BootstrapServer::Start(bo));

  GOS_ASSIGN_OR_RETURN(tcp_fd_, os::ListenTcp(o_.listen, &agent_address_));
  GOS_ASSIGN_OR_RETURN(unix_fd_, os::ListenUnix(o_.socket, 0666));
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  for (int fd : {tcp_fd_, unix_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  // Where local tools and embedded agents find us.
  std::string addr_file = o_.data_dir + "/coordinator.addr";
  std::string tmp = addr_file + ".tmp";
  GOS_RETURN_IF_ERROR(WriteFileWithMode(tmp, agent_address_ + "\n", kPrivateFile));
  if (::rename(tmp.c_str(), addr_file.c_str()) != 0) return ErrnoError(errno, "rename");
  GOS_LOG(kInfo, "coordinator") << "serving clients on " << o_.socket << ", nodeagents on "
                                << agent_address_ << ", waiting for " << o_.nodes << " nodes";
  return OkStatus();
}

Status CoordinatorImpl::Run() {
  join_thread_ = std::thread([this] { JoinGroup(); });
  while (!stop_) {
    epoll_event evs[64];
    int n = epoll_wait(epoll_fd_, evs, 64, 200);
    if (n < 0 && errno != EINTR) return ErrnoError(errno, "epoll_wait");
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t v;
        ssize_t rc = ::read(wake_fd_, &v, sizeof v);
        (void)rc;
      } else if (fd == tcp_fd_ || fd == unix_fd_) {
        Accept(fd, fd == unix_fd_);
      } else {
        OnReadable(fd);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      MaybeExitWhenIdle();
    }
  }
  Shutdown();
  return fatal_;
}

void CoordinatorImpl::Shutdown() {
  stop_ = true;
  // No new connections from here on: an agent that lost us retries on a refused connect,
  // whereas one accepted into the backlog and then reset would look refused for its key.
  for (int* fd : {&unix_fd_, &tcp_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  if (!o_.socket.empty()) ::unlink(o_.socket.c_str());
  staging_cv_.notify_all();
  store_cv_.notify_all();
  strobe_cv_.notify_all();
  // Stopped before the group formed (an embedded cluster that ran nothing): closing the
  // bootstrap service ends every pending join, this coordinator's own one included, at once
  // instead of at the join timeout.
  if (!formed_ && bootstrap_) bootstrap_->Stop();
  if (join_thread_.joinable()) join_thread_.join();
  // Threads waiting for an event return now rather than at their timeouts.
  if (node_) node_->CancelWaits();
  if (exit_thread_.joinable()) exit_thread_.join();
  if (dumped_thread_.joinable()) dumped_thread_.join();
  if (blocked_thread_.joinable()) blocked_thread_.join();
  if (inbox_thread_.joinable()) inbox_thread_.join();
  if (strobe_thread_.joinable()) strobe_thread_.join();
  if (staging_thread_.joinable()) staging_thread_.join();
  if (store_thread_.joinable()) store_thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, j] : jobs_) {
      for (int fd : j.fds) ::close(fd);
      j.fds.clear();
    }
    for (auto& [fd, a] : agents_) a->ch->Shutdown();
    for (auto& [fd, c] : clients_) c->ch->Shutdown();
    agents_.clear();
    clients_.clear();
    node_agents_.clear();
  }
  if (node_) {
    node_->Leave();
    node_.reset();
  }
  if (bootstrap_) bootstrap_->Stop();
  for (int* fd : {&epoll_fd_, &wake_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void CoordinatorImpl::MaybeExitWhenIdle() {
  if (o_.exit_when_idle && ever_had_job_ && jobs_.empty() && clients_.empty() &&
      deferred_.empty()) {
    GOS_LOG(kInfo, "coordinator") << "idle: exiting (embedded cluster)";
    stop_ = true;
  }
}

// ---- Job state (under mu_) -----------------------------------------------------------

void CoordinatorImpl::Finalize(Job& j, JobState state, After& after) {
  if (j.epoch && !j.epoch->committing) EndEpoch(j, "the job ended before it was stored", after);
  j.phase = Phase::kDone;
  j.exited = SteadyClock::now();
  j.rec.state = state;
  j.rec.exit_code = j.exit_code;
  j.rec.failed_rank = j.failed_rank;
  j.rec.failed_node = j.failed_node;
  if (j.rec.message.empty()) j.rec.message = j.kill_message;
  j.rec.end_ms = UnixMs();
  for (int fd : j.fds) ::close(fd);
  j.fds.clear();
  PersistJob(j);
  if (j.record) {
    // Outside mu_ (an fsync and a scan of the log index), before the client hears of the end.
    after.push_back([this, in_use = LogsInUse(j.rec.id)] {
      tables_->replay()->Sync().IgnoreError();
      if (o_.keep_logs > 0) {
        auto pruned = storage::PruneLogs(tables_->replay(), o_.keep_logs, in_use);
        if (!pruned.ok()) {
          GOS_LOG(kWarn, "coordinator") << "pruning replay logs: " << pruned.status().ToString();
        } else if (!pruned->jobs.empty()) {
          GOS_LOG(kInfo, "coordinator")
              << "removed the replay logs of " << pruned->jobs.size() << " old job(s), "
              << pruned->bytes << " bytes (--keep-logs " << o_.keep_logs << ")";
        }
      }
    });
  }
  GOS_LOG(kInfo, "coordinator") << "job " << j.rec.id << " " << storage::JobStateName(state)
                                << " with exit code " << j.exit_code
                                << (j.rec.message.empty() ? "" : ": " + j.rec.message);
  if (matrix_.Has(j.rec.id)) matrix_.Remove(j.rec.id);
  ReleaseSlot(j);
  if (j.client) {
    os::JobExit e;
    e.job = j.rec.id;
    e.exit_code = j.exit_code;
    e.failed_rank = j.failed_rank;
    e.failed_node = j.failed_node;
    e.message = j.rec.message;
    e.placed_us = MicrosSince(j.submit, j.placed);
    e.staged_us = MicrosSince(j.submit, j.staged);
    e.launched_us = MicrosSince(j.submit, j.launched);
    e.started_us = MicrosSince(j.submit, j.started);
    e.exited_us = MicrosSince(j.submit, j.exited);
    auto ch = j.client->ch;
    auto bytes = os::Encode(e);
    after.push_back([ch, bytes] { ch->Send(Frame::kExit, bytes).IgnoreError(); });
  }
  uint64_t id = j.rec.id;
  // Also for a job not recorded (any more): a run of it that a restart replaced may have been.
  ended_launch_[id] = j.launch_strobe;
  // Bounded: segments come within seconds of the end (a node that dies ships nothing).
  if (ended_launch_.size() > 4096) ended_launch_.erase(ended_launch_.begin());
  jobs_.erase(id);
  Schedule(after);
}

std::set<uint64_t> CoordinatorImpl::LogsInUse(uint64_t except) const {
  std::set<uint64_t> in_use;
  for (const auto& [id, j] : jobs_) {
    if (id != except) in_use.insert(id);
    if (j.replay_of != 0) in_use.insert(j.replay_of);
  }
  return in_use;
}

void CoordinatorImpl::ReleaseSlot(Job& j) {
  if (j.slot == kNoSlot) return;
  // The slot's vars and exit records are cleared by the agents (FORGET) and by the next
  // job's launch; the slot is reused only after this strobe's FORGET went out.
  os::StrobeCommand cmd;
  cmd.type = os::CommandType::kForget;
  cmd.job = j.rec.id;
  Command(cmd);
  for (uint32_t n : j.nodes) {
    auto* rec =
        reinterpret_cast<os::ExitRecord*>(node_->global_memory().data() + os::ExitSlot(j.slot, n));
    std::memset(static_cast<void*>(rec), 0, sizeof *rec);
  }
  free_slots_.insert(j.slot);
  j.slot = kNoSlot;
}

void CoordinatorImpl::PersistJob(const Job& j) {
  Status s = tables_->PutJob(j.rec);
  if (!s.ok())
    GOS_LOG(kError, "coordinator") << "cannot store job " << j.rec.id << ": " << s.ToString();
}

void CoordinatorImpl::PersistNode(const NodeRecord& n) {
  Status s = tables_->PutNode(n);
  if (!s.ok())
    GOS_LOG(kError, "coordinator") << "cannot store node " << n.id << ": " << s.ToString();
}

NodeSet CoordinatorImpl::LiveAgents() const {
  NodeSet set;
  for (auto& [id, n] : nodes_) {
    if (n.state == NodeState::kUp && node_agents_.count(id)) set.Add(id);
  }
  return set;
}

NodeSet CoordinatorImpl::JobNodes(const Job& j) const {
  NodeSet set;
  for (uint32_t n : j.nodes) set.Add(n);
  return set;
}

void CoordinatorImpl::NodeDown(uint32_t node, const std::string& reason, After& after) {
  auto nt = nodes_.find(node);
  if (nt == nodes_.end() || nt->second.state == NodeState::kDown) return;
  NodeRecord& n = nt->second;
  n.state = NodeState::kDown;
  n.down_reason = reason;
  n.last_seen_ms = UnixMs();
  PersistNode(n);
  matrix_.SetNode(node, false);
  std::string who = "node " + std::to_string(node) + " (" + n.host + ")";
  GOS_LOG(kWarn, "coordinator") << who << " is down: " << reason;
  if (auto at = node_agents_.find(node); at != node_agents_.end()) {
    at->second->ch->Shutdown();
    node_agents_.erase(at);
  }
  // Its memory is gone: restore batches on their way to it will never be answered.
  if (restore_box_) restore_box_->DropReceiver(node);
  std::vector<uint64_t> hit;
  for (auto& [id, j] : jobs_) {
    if (std::find(j.nodes.begin(), j.nodes.end(), node) != j.nodes.end()) hit.push_back(id);
  }
  for (uint64_t id : hit) {
    Job& j = jobs_.at(id);
    if (j.phase != Phase::kStaging && RestartsLeft(j.rec) > 0) {
      Notice(j, "job " + std::to_string(id) + ": " + who + " is down: " + reason, after);
      if (RequeueForRestart(j, "a node of the job went down", after)) continue;
    }
    j.rec.message = "job failed: " + who + " is down: " + reason;
    j.exit_code = kNodeFailureExit;
    j.failed_node = static_cast<int32_t>(node);
    j.failed_rank = -1;
    if (j.phase != Phase::kQueued) {
      os::StrobeCommand cmd;
      cmd.type = os::CommandType::kSignal;
      cmd.job = id;
      cmd.signal = SIGKILL;
      Command(cmd);
    }
    if (j.phase == Phase::kStaging) {
      j.kill_requested = true;  // the staging thread finalizes it
      continue;
    }
    Finalize(j, JobState::kFailed, after);
  }
}

void CoordinatorImpl::CheckDownNodes(After& after) {
  for (auto& [id, n] : std::map<uint32_t, NodeRecord>(nodes_)) {
    if (n.state != NodeState::kUp) continue;
    prim::NodeInfo info = node_->node_info(id);
    if (!info.alive) NodeDown(id, info.down_reason, after);
  }
}

void CoordinatorImpl::Notice(Job& j, const std::string& text, After& after) {
  GOS_LOG(kInfo, "coordinator") << text;
  if (!j.client) {
    if (j.awaits_client) KeepUnclaimed(j, Frame::kNotice, os::EncodeText(text));
    return;
  }
  auto ch = j.client->ch;
  after.push_back([ch, text] { ch->Send(Frame::kNotice, os::EncodeText(text)).IgnoreError(); });
}

// ---- Join thread -------------------------------------------------------------------

void CoordinatorImpl::JoinGroup() {
  SetThreadName("coord-join");
  prim::NodeOptions no;
  no.bootstrap = bootstrap_->address();
  no.provider = o_.provider;
  no.requested_id = 0;
  no.spin = os::kDaemonSpin;
  no.global_memory_bytes = os::kGlobalMemoryBytes;
  no.fanout = o_.fanout;
  no.join_timeout = o_.join_timeout;
  no.cancel = &stop_;
  auto node = prim::Node::Join(no);
  if (!node.ok()) {
    if (!stop_) {
      fatal_ = node.status().WithContext("forming the cluster of " + std::to_string(o_.nodes) +
                                         " nodes");
      GOS_LOG(kError, "coordinator") << fatal_.ToString();
    }
    Stop();
    return;
  }
  node_ = std::move(*node);
  {
    std::lock_guard<std::mutex> lock(mu_);
    restore_box_ = std::make_unique<os::BatchOutbox>(node_.get(), os::kRestoreRoute, key_);
    for (auto& [id, n] : nodes_) matrix_.SetNode(id, n.state == NodeState::kUp);
    formed_ = true;
    After after;
    for (auto& [client, frame] : deferred_) {
      if (clients_.count(client->ch->fd())) OnClientFrame(client, frame, after);
    }
    deferred_.clear();
    Schedule(after);
    for (auto& fn : after) fn();
  }
  GOS_LOG(kInfo, "coordinator") << "cluster formed: " << o_.nodes << " nodes, provider "
                                << node_->provider();
  staging_thread_ = std::thread([this] { StagingLoop(); });
  store_thread_ = std::thread([this] { StoreLoop(); });
  strobe_thread_ = std::thread([this] { StrobeLoop(); });
  // Exit records arrive with an event: strobe early so termination is noticed at once.
  exit_thread_ = StrobeOnEvent(os::kEventExit, [] { return true; });
  // A node's checkpoint dumps are done: strobe early to confirm them all and resume the job.
  dumped_thread_ = StrobeOnEvent(os::kEventDumped, [this] { return AnyEpochInFlight(); });
  // Blocked records: strobe early when the whole running row waits in communication.
  blocked_thread_ = StrobeOnEvent(os::kEventBlocked, [this] { return RowBlocked(); });
  inbox_thread_ = std::thread([this] { InboxLoop(); });
}

}  // namespace gos::coordinator::internal

namespace gos::coordinator {

StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options) {
  auto c = std::make_unique<internal::CoordinatorImpl>(options);
  GOS_RETURN_IF_ERROR(c->Init());
  return std::unique_ptr<Coordinator>(std::move(c));
}

}  // namespace gos::coordinator
