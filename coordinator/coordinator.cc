// The coordinator: an IO thread (epoll over clients and nodeagents), a strobe thread (the
// global clock, heartbeat and termination queries), a staging thread (launch transfers) and
// a join thread (forms the primitives' group). All state is under mu_; frames to clients and
// agents are sent after mu_ is released, so a slow peer never stalls the strobe.
#include "coordinator/coordinator.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "coordinator/gang.h"
#include "coordinator/log_cut.h"
#include "gos/coordinator/ps.h"
#include "gos/coordinator/store_ops.h"
#include "gos/eventfd.h"
#include "gos/fd.h"
#include "gos/log.h"
#include "gos/os/auth.h"
#include "gos/os/channel.h"
#include "gos/os/ckpt_ship.h"
#include "gos/os/layout.h"
#include "gos/os/messages.h"
#include "gos/os/program.h"
#include "gos/prim/bootstrap.h"
#include "gos/prim/prim.h"
#include "gos/replay/log.h"
#include "gos/storage/checkpoints.h"
#include "gos/storage/replay.h"
#include "gos/storage/tables.h"

namespace gos::coordinator {
namespace {

using os::Channel;
using os::Frame;
using prim::NodeSet;
using storage::JobRecord;
using storage::JobState;
using storage::NodeRecord;
using storage::NodeState;
using SteadyClock = std::chrono::steady_clock;

constexpr uint32_t kNoSlot = ~0u;
// A job whose exit is confirmed waits at most this long for the rest of its output.
constexpr auto kOutputGrace = std::chrono::seconds(2);
// Exit code of a job that failed because a node it used went down.
constexpr int32_t kNodeFailureExit = 255;

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

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

struct Client {
  std::shared_ptr<Channel> ch;
  os::PeerCreds creds;
  uint64_t job = 0;  // the job this client submitted and follows
  bool tcp = false;  // over the nodeagent port (kClientHello): files come as kUpload
  std::vector<std::string> uploads;  // by file index: where its kUpload pieces went
};

struct Agent {
  std::shared_ptr<Channel> ch;
  std::string peer;
  uint32_t node = 0;  // 0 until HELLO
};

enum class Phase { kQueued, kStaging, kLaunching, kRunning, kDone };

// gos-ckpt clients waiting for an epoch.
using Waiters = std::shared_ptr<std::vector<std::shared_ptr<Channel>>>;

// Queues `text` as a `frame` to each waiter, for after mu_ is released.
void Tell(const Waiters& waiters, Frame frame, const std::string& text,
          std::vector<std::function<void()>>& after) {
  for (const auto& w : *waiters) {
    after.push_back([w, frame, text] { w->Send(frame, os::EncodeText(text)).IgnoreError(); });
  }
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

std::string EpochAbortedText(uint64_t job, uint64_t epoch, const std::string& error) {
  return "checkpoint: job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
         " aborted: " + error;
}

// A checkpoint epoch being taken (docs/specs/checkpoint.md).
struct EpochInFlight {
  uint64_t epoch = 0;
  SteadyClock::time_point ordered;
  int64_t taken_ms = 0;
  bool dumped = false;  // every node's dump is over; the job was resumed
  int64_t pause_ms = 0;
  SteadyClock::time_point told;  // when gos-ckpt was last told how the storing goes
  std::map<uint32_t, storage::EpochRank> ranks;
  uint64_t new_bytes = 0, new_compressed = 0;
  std::string failure;  // a node could not take it
  // Its manifest is with the store thread, which commits it and ends the epoch.
  bool committing = false;
  // gos-ckpt clients; shared with the store thread's task, which answers them.
  Waiters waiters = std::make_shared<std::vector<std::shared_ptr<Channel>>>();
};

// An epoch's store work, for the store thread: its commit, the job's retention, then a Gc;
// or (gc_only) just the Gc, after an epoch was aborted.
struct StoreTask {
  bool gc_only = false;
  storage::EpochManifest manifest;
  uint32_t keep = 1;
  Waiters waiters;
};

struct Job {
  JobRecord rec;
  JobRequest req;
  std::vector<os::SubmitFile> files;
  std::vector<int> fds;  // the files, passed by the client; closed once staged
  std::vector<std::string> env;
  std::shared_ptr<Client> client;
  Phase phase = Phase::kQueued;
  uint32_t slot = kNoSlot;
  std::vector<uint32_t> nodes;  // distinct, ascending
  std::set<uint32_t> output_done;
  std::vector<std::string> stdin_early;  // stdin frames not yet forwarded to rank 0's node
  bool exit_confirmed = false;
  bool kill_requested = false;
  bool rank_failed = false;  // a communicating rank died: exit code and message are set
  bool bcs = false;          // the program uses gos's communication library
  std::string kill_message;
  int32_t exit_code = 0, failed_rank = -1, failed_node = -1;
  SteadyClock::time_point submit, placed, staged, launched, started, exited;
  uint64_t launch_strobe = 0;  // the strobe that first carried its LAUNCH or RESTORE
  // Checkpointing. Its settings (interval, --keep, automatic restarts) are in rec, stored with
  // the job, so that a restart after a coordinator restart goes on with them.
  SteadyClock::time_point next_ckpt;
  uint64_t next_epoch = 1;
  uint64_t last_committed = 0;  // epoch, by this incarnation of the job (0 = none)
  std::optional<EpochInFlight> epoch;
  // Restart: this placement restores restore_epoch instead of launching.
  uint64_t restore_epoch = 0;
  std::optional<storage::EpochManifest> restore;
  std::map<uint32_t, os::RestoreReady> restore_ready;
  std::map<uint32_t, os::RestoreReady> local_ready;  // answers to kRestoreLocal, by rank
  bool restore_from_store = false;  // gos-restart --from-store: no node's own copies
  bool held = false;  // restored, waiting for every node: a kResume is due once running
  // Record and replay (docs/specs/replay.md).
  bool record = false;            // the nodeagents record it
  uint64_t replay_of = 0;         // it replays this recorded job
  uint64_t stop_at = 0;           // --stop-at
  bool replay_completed = false;  // the recorded run completed
  int32_t replay_failed_rank = -1;
  std::optional<os::ReplayStopped> stop;  // why it stopped; ranks filled as nodes answer
  std::set<uint32_t> stopped_nodes;
  // Restarted by a new coordinator (the one it ran under went away): no client follows it
  // until one attaches (kAttach). Its output and notices wait for that client meanwhile, up to
  // kUnclaimedBytes; what comes beyond is counted and dropped.
  bool awaits_client = false;
  std::deque<std::pair<Frame, std::vector<uint8_t>>> unclaimed;
  size_t unclaimed_bytes = 0;
  uint64_t unclaimed_dropped = 0;
};

// Output (and notices) a job restarted by a new coordinator keeps for the client that will
// attach to it.
constexpr size_t kUnclaimedBytes = 1u << 20;

class CoordinatorImpl final : public Coordinator {
 public:
  explicit CoordinatorImpl(CoordinatorOptions o) : o_(std::move(o)) {}
  ~CoordinatorImpl() override { Shutdown(); }

  Status Init();
  Status Run() override;
  void Stop() override {
    stop_ = true;
    NotifyEventFd(wake_fd_);
  }

 private:
  using After = std::vector<std::function<void()>>;

  // IO thread.
  void Accept(int listen_fd, bool unix_socket);
  void OnReadable(int fd);
  void OnClientFrame(const std::shared_ptr<Client>& c, os::FrameIn& f, After& after);
  void OnAgentFrame(const std::shared_ptr<Agent>& a, os::FrameIn& f, After& after);
  void DropConnection(int fd, const std::string& why, After& after);
  void AcceptTcpClient(int fd, const std::shared_ptr<Agent>& a, os::FrameIn& f, After& after);
  Status OnUpload(const std::shared_ptr<Client>& c, const os::FrameIn& f);
  std::vector<int> OpenUploads(const std::shared_ptr<Client>& c, size_t n);
  void Submit(const std::shared_ptr<Client>& c, os::FrameIn& f, After& after);
  StatusOr<std::vector<NodeId>> ExcludedNodes(const std::vector<uint32_t>& exclude,
                                              const std::vector<uint32_t>& only);
  void SignalJob(uint64_t id, int sig, const os::PeerCreds& who, const std::shared_ptr<Channel>& ch,
                 bool reply, After& after);
  os::PsReply BuildPs();
  void CheckpointNow(const std::shared_ptr<Client>& c, uint64_t id, After& after);
  void ListEpochs(const std::shared_ptr<Client>& c, uint64_t id, After& after);
  void Restart(const std::shared_ptr<Client>& c, const os::RestartRequest& req, After& after);
  void Attach(const std::shared_ptr<Client>& c, uint64_t id, After& after);
  // The job a client asks to follow (restart, attach to), if it may: it follows no job yet,
  // and the job is its own (or it is root).
  StatusOr<JobRecord> JobToFollow(const Client& c, uint64_t id, const std::string& verb);
  // A job to restore from rec (its next incarnation: queued, same id, settings kept).
  static Job RestartedJob(const JobRecord& rec);
  // Keeps a frame for the client that will attach to a job no client follows (awaits_client).
  static void KeepUnclaimed(Job& j, Frame type, std::vector<uint8_t> bytes);
  void StoreOp(const std::shared_ptr<Client>& c, const std::string& op, After& after);
  // gos-replay: how to rerun job id (kReplayInfoReply), or its whole log (with_log).
  void ReplayInfo(const std::shared_ptr<Client>& c, uint64_t id, bool with_log, After& after);
  // Checks a gos-replay submission of recorded job `of` and sets j up to replay it.
  Status SetUpReplay(const os::PeerCreds& who, uint64_t of, Job& j);
  void OnReplayStop(const std::shared_ptr<Agent>& a, os::ReplayStopped m, bool answer,
                    After& after);

  // Join and strobe threads.
  void JoinGroup();
  void StrobeLoop();
  bool RowBlocked();
  bool OnlyComputeRunning() const;
  std::thread StrobeOnEvent(prim::EventId event, std::function<bool()> wanted);
  void Strobe(uint64_t s, bool quantum_over, bool early);
  void CheckJobs(After& after);
  // Checkpoints (under mu_).
  void OrderEpoch(Job& j);
  void StepEpoch(Job& j, After& after);
  // Store thread: commits epochs whose every rank is stored (StepEpoch queues them).
  void StoreLoop();
  // Inbox thread: takes the batches of checkpoint chunks nodes XFER into the checkpoint inbox
  // (docs/specs/checkpoint.md, "Shipping"), stores them and gives each slot back.
  void InboxLoop();
  std::string StoreBatch(const os::CkptBatch& b);
  void CommitStored(const StoreTask& t);
  // Removes the chunks no epoch references, if no epoch is in flight (store thread).
  void CollectChunks();
  void EndEpoch(Job& j, const std::string& error, After& after);
  void Notice(Job& j, const std::string& text, After& after);
  bool AnyEpochInFlight() const;
  // A job that lost a node, with restarts left and a committed epoch, goes back to the queue
  // to be restored instead of failing (gos-run --restart-on-failure).
  bool RequeueForRestart(Job& j, const std::string& why, After& after);
  // The job if something on `node` may still fail it: it runs there, is not failing already
  // (the first failure is the one it reports), killed or over. Else nullptr.
  Job* FailableOn(uint64_t id, uint32_t node);
  // j fails with this exit code, rank, node and message; its ranks everywhere are killed.
  void FailAndKill(Job& j, int32_t exit_code, int32_t rank, uint32_t node,
                   const std::string& message);
  // This placement of j restores epoch m (newest: j's newest stored epoch).
  void SetRestore(Job& j, storage::EpochManifest m, uint64_t newest);
  void ReleaseSlot(Job& j);
  void NodeDown(uint32_t node, const std::string& reason, After& after);
  void CheckDownNodes(After& after);

  // Staging thread.
  void StagingLoop();
  // Multicasts the job's files; *bcs = the executable uses BCS (gos/os/program.h).
  Status Stage(uint64_t id, bool* bcs);
  // Restart: sends every rank's image files to its new node and waits until each has them.
  Status ShipImages(uint64_t id);
  // Waits (on restore_cv_, taking mu_) until done(job) says the nodes' answers are complete
  // (OK) or wrong (that error); done returns UNAVAILABLE to keep waiting. CANCELLED when the
  // job goes or is killed, DEADLINE_EXCEEDED saying timeout_what after timeout.
  Status WaitForAnswers(uint64_t id, std::chrono::minutes timeout, const std::string& timeout_what,
                        const std::function<Status(Job&)>& done);
  // Replay: sends the recorded log to the job's nodes and waits until each has decoded it.
  Status ShipReplayLog(uint64_t id);
  // Restart of a recorded job: cuts its replay log back to the epoch it restarts from
  // (CutLogForRestart) so that the restored run's log goes on from there; returns the steps
  // before that epoch (the restored nodes count from there). A log that cannot go on is
  // removed and the restored run not recorded (the user is told why): a restart never fails
  // for its log.
  uint64_t ContinueLog(uint64_t id);
  // gos-replay --from-epoch E: refuses (before any image is shipped) an epoch the log has no
  // mark of, saying which restart lost the run that took it.
  Status CheckReplayEpoch(uint64_t id);
  storage::CheckpointStore* store() { return tables_->checkpoints(); }
  // The epochs of the job to keep: its --keep, else the coordinator's.
  uint32_t Keep(const JobRecord& r) const { return r.keep != 0 ? r.keep : o_.keep; }

  // Under mu_.
  void Command(os::StrobeCommand cmd) {
    commands_.push_back(std::move(cmd));
    strobe_now_ = true;
    strobe_cv_.notify_one();
  }
  void Schedule(After& after);
  void ForwardStdin(Job& j, After& after);
  void Finalize(Job& j, JobState state, After& after);
  void PersistJob(const Job& j);
  // Jobs whose replay logs must stay: every job here but `except` (recording, or about to be
  // restarted), and every job a replay here replays (under mu_).
  std::set<uint64_t> LogsInUse(uint64_t except) const;
  void PersistNode(const NodeRecord& n);
  NodeSet LiveAgents() const;
  NodeSet JobNodes(const Job& j) const;
  void MaybeExitWhenIdle();
  void Shutdown();

  CoordinatorOptions o_;
  std::vector<uint8_t> key_;
  std::unique_ptr<storage::Tables> tables_;
  std::unique_ptr<prim::BootstrapServer> bootstrap_;
  std::unique_ptr<prim::Node> node_;
  std::string agent_address_;
  int unix_fd_ = -1, tcp_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> formed_{false};
  Status fatal_;
  std::thread join_thread_, strobe_thread_, staging_thread_, store_thread_;

  std::mutex mu_;
  std::condition_variable staging_cv_;
  std::condition_variable restore_cv_;  // a RESTORE_READY arrived
  // Wakes the strobe thread before the quantum ends: a command is waiting or a job's ranks
  // exited (the early strobe is still an ordinary, numbered global event).
  std::condition_variable strobe_cv_;
  bool strobe_now_ = false;
  std::thread exit_thread_;
  std::thread dumped_thread_;
  std::thread blocked_thread_;
  std::thread inbox_thread_;  // takes checkpoint chunk batches from the inbox
  // A restart's chunks to the nodes (ShipImages); made once the cluster formed (under mu_).
  std::unique_ptr<os::BatchOutbox> restore_box_;
  // Numbers ShipImages's attempts (staging thread): a node drops what an earlier one left.
  uint64_t restore_attempt_ = 0;
  std::map<int, std::shared_ptr<Client>> clients_;
  std::map<int, std::shared_ptr<Agent>> agents_;
  std::map<uint32_t, NodeRecord> nodes_;
  std::map<uint32_t, std::shared_ptr<Agent>> node_agents_;
  std::map<uint64_t, Job> jobs_;  // jobs not yet final
  GangMatrix matrix_{2};
  JobQueue queue_;
  std::deque<uint64_t> to_stage_;
  std::condition_variable store_cv_;
  std::deque<StoreTask> store_tasks_;
  std::vector<os::StrobeCommand> commands_;
  // Commands of strobes not confirmed by every live node (delivery failed, or the
  // confirmation broke off): they go out again with the next strobe (strobe thread only).
  std::vector<os::StrobeCommand> unconfirmed_;
  std::set<uint32_t> free_slots_;
  uint32_t row_ = 0;
  uint64_t strobe_ = 0;
  uint64_t stage_seq_ = 0;
  // The incarnation (launch_strobe) of recently ended jobs, for the replay segments their
  // nodeagents may still ship: only the last incarnation's are the log's (under mu_).
  std::map<uint64_t, uint64_t> ended_launch_;
  bool ever_had_job_ = false;
  // Submissions and restarts that arrived before the cluster formed; handled once it has.
  std::vector<std::pair<std::shared_ptr<Client>, os::FrameIn>> deferred_;
};

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
  ::mkdir(o_.data_dir.c_str(), 0755);
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
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return ErrnoError(errno, "write " + tmp);
  std::fprintf(f, "%s\n", agent_address_.c_str());
  std::fclose(f);
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

// ---- IO thread ----------------------------------------------------------------------

void CoordinatorImpl::Accept(int listen_fd, bool unix_socket) {
  while (true) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (unix_socket) {
      auto c = std::make_shared<Client>();
      c->ch = std::make_shared<Channel>(fd, std::vector<uint8_t>{}, true);
      auto creds = c->ch->Creds();
      if (!creds.ok()) continue;  // Channel closes fd.
      c->creds = *creds;
      clients_[fd] = c;
    } else {
      auto a = std::make_shared<Agent>();
      a->ch = std::make_shared<Channel>(fd, key_, true);
      sockaddr_in sin{};
      socklen_t len = sizeof sin;
      getpeername(fd, reinterpret_cast<sockaddr*>(&sin), &len);
      char ip[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip);
      a->peer = ip;
      agents_[fd] = a;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void CoordinatorImpl::OnReadable(int fd) {
  After after;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<os::FrameIn> frames;
    if (auto it = clients_.find(fd); it != clients_.end()) {
      auto c = it->second;
      Status s = c->ch->ReadAvailable(&frames);
      for (auto& f : frames) OnClientFrame(c, f, after);
      if (!s.ok()) DropConnection(fd, s.message(), after);
    } else if (auto at = agents_.find(fd); at != agents_.end()) {
      auto a = at->second;
      Status s = a->ch->ReadAvailable(&frames);
      for (auto& f : frames) {
        if (auto ct = clients_.find(fd); ct != clients_.end()) {
          OnClientFrame(ct->second, f, after);  // a TCP client, after its hello
          continue;
        }
        if (!agents_.count(fd)) break;
        if (a->node == 0 && f.type == Frame::kClientHello) {
          AcceptTcpClient(fd, a, f, after);
          continue;
        }
        OnAgentFrame(a, f, after);
      }
      if (!s.ok()) {
        if (s.code() == StatusCode::kPermissionDenied) {
          GOS_LOG(kWarn, "coordinator")
              << "refusing a connection from " << a->peer << ": " << s.message();
        }
        DropConnection(fd, s.message(), after);
      }
    }
  }
  for (auto& fn : after) fn();
}

// A TCP client's piece of a file to submit: appended to <data dir>/uploads/c<fd>-<index>
// (only the client's own connection writes there; removed once submitted or dropped).
Status CoordinatorImpl::OnUpload(const std::shared_ptr<Client>& c, const os::FrameIn& f) {
  constexpr uint64_t kMaxUploadBytes = 4ull << 30;
  auto piece = os::DecodeJobBytes(f.payload);
  if (!piece.ok()) return piece.status();
  const size_t index = static_cast<size_t>(piece->first >> 48);
  const uint64_t offset = piece->first & ((1ull << 48) - 1);
  if (index >= 64 || offset + piece->second.size() > kMaxUploadBytes) {
    return InvalidArgumentError("upload beyond 64 files or 4 GiB");
  }
  if (c->uploads.size() <= index) c->uploads.resize(index + 1);
  std::string& path = c->uploads[index];
  if (path.empty()) {
    const std::string dir = o_.data_dir + "/uploads";
    ::mkdir(dir.c_str(), 0700);
    path = dir + "/c" + std::to_string(c->ch->fd()) + "-" + std::to_string(index);
  }
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (offset == 0 ? O_TRUNC : 0), 0600));
  if (fd.get() < 0) return ErrnoError(errno, "upload to " + path);
  const std::string& bytes = piece->second;
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::pwrite(fd.get(), bytes.data() + done, bytes.size() - done,
                         static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError(n < 0 ? errno : EIO, "upload to " + path);
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

// A TCP client's uploaded files 0..n-1, open for reading and already unlinked: they stand for
// the descriptors a local client passes. Fewer than n if some is missing.
std::vector<int> CoordinatorImpl::OpenUploads(const std::shared_ptr<Client>& c, size_t n) {
  std::vector<int> fds;
  for (size_t i = 0; i < n && i < c->uploads.size(); ++i) {
    int fd = c->uploads[i].empty() ? -1 : ::open(c->uploads[i].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    fds.push_back(fd);
  }
  for (const std::string& path : c->uploads) {
    if (!path.empty()) ::unlink(path.c_str());
  }
  c->uploads.clear();
  return fds;
}

// A connection on the nodeagent port whose first frame is a client's hello: it proved it holds
// the cluster key (the channel's MACs), so it acts for the user it names.
void CoordinatorImpl::AcceptTcpClient(int fd, const std::shared_ptr<Agent>& a, os::FrameIn& f,
                                      After& after) {
  auto text = os::DecodeText(f.payload);
  long long uid = -1, gid = -1, pid = 0;
  if (!text.ok() || std::sscanf(text->c_str(), "%lld %lld %lld", &uid, &gid, &pid) != 3 ||
      uid < 0 || gid < 0) {
    GOS_LOG(kWarn, "coordinator") << "malformed client hello from " << a->peer;
    return;
  }
  auto c = std::make_shared<Client>();
  c->ch = a->ch;
  c->creds.uid = static_cast<uid_t>(uid);
  c->creds.gid = static_cast<gid_t>(gid);
  c->creds.pid = static_cast<pid_t>(pid);
  c->tcp = true;
  agents_.erase(fd);
  clients_[fd] = c;
  GOS_LOG(kInfo, "coordinator") << "client from " << a->peer << " over TCP, uid " << uid << " (pid "
                                << pid << " there)";
  auto ch = c->ch;
  after.push_back([ch] { ch->Send(Frame::kOk, os::EncodeText("hello")).IgnoreError(); });
}

void CoordinatorImpl::DropConnection(int fd, const std::string& why, After& after) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  if (auto it = clients_.find(fd); it != clients_.end()) {
    auto c = it->second;
    clients_.erase(it);
    for (const std::string& path : c->uploads) {
      if (!path.empty()) ::unlink(path.c_str());
    }
    std::erase_if(deferred_, [&](const auto& d) { return d.first == c; });
    // Like srun: a job whose gos-run goes away is killed.
    auto jt = jobs_.find(c->job);
    if (jt != jobs_.end() && jt->second.client == c) {
      jt->second.client.reset();
      SignalJob(c->job, SIGKILL, os::PeerCreds{0, 0, 0}, nullptr, false, after);
      if (jobs_.count(c->job)) jobs_.at(c->job).kill_message = "gos-run went away";
    }
    return;
  }
  auto at = agents_.find(fd);
  if (at == agents_.end()) return;
  auto a = at->second;
  agents_.erase(at);
  // find, not []: the node may be down already (NodeDown dropped its agent), and an empty
  // entry left here would make its slot look taken to a nodeagent joining in its place.
  if (auto nt = node_agents_.find(a->node);
      a->node != 0 && nt != node_agents_.end() && nt->second == a) {
    node_agents_.erase(a->node);
    if (formed_) {
      NodeDown(a->node, "its nodeagent's connection to the coordinator closed (" + why + ")",
               after);
    } else {
      nodes_[a->node].state = NodeState::kDown;
      nodes_[a->node].down_reason = "left before the cluster formed";
      PersistNode(nodes_[a->node]);
    }
  }
}

void CoordinatorImpl::OnClientFrame(const std::shared_ptr<Client>& c, os::FrameIn& f,
                                    After& after) {
  auto reply_error = [&](const std::string& msg) {
    auto ch = c->ch;
    after.push_back([ch, msg] { ch->Send(Frame::kError, os::EncodeText(msg)).IgnoreError(); });
  };
  switch (f.type) {
    case Frame::kUpload: {
      if (!c->tcp) return reply_error("uploads are for clients over TCP; pass the file instead");
      Status st = OnUpload(c, f);
      if (!st.ok()) return reply_error(st.message());
      return;
    }
    case Frame::kSubmit:
      // A job was asked for, even if it is refused: an embedded cluster may exit once idle.
      ever_had_job_ = true;
      if (!formed_) {
        deferred_.emplace_back(c, std::move(f));
        return;
      }
      Submit(c, f, after);
      return;
    case Frame::kStdin: {
      auto jt = jobs_.find(c->job);
      if (jt == jobs_.end()) return;
      Job& j = jt->second;
      // Until the job is placed, its input waits here (an empty frame is EOF).
      j.stdin_early.emplace_back(f.payload.begin(), f.payload.end());
      if (j.record) {
        // Recorded with the job, so that a replay gets the same input.
        const std::string piece = replay::EncodeStdinPiece(j.stdin_early.back());
        Status st = tables_->replay()->Append(
            j.rec.id, replay::kStdinStream,
            {reinterpret_cast<const uint8_t*>(piece.data()), piece.size()});
        if (!st.ok()) {
          GOS_LOG(kWarn, "coordinator")
              << "job " << j.rec.id << ": recording stdin: " << st.ToString();
        }
      }
      if (!j.rec.rank_nodes.empty()) ForwardStdin(j, after);
      return;
    }
    case Frame::kSignalJob: {
      auto req = os::DecodeSignal(f.payload);
      if (!req.ok()) return reply_error(req.status().message());
      SignalJob(req->job, req->signal, c->creds, c->ch, true, after);
      return;
    }
    case Frame::kPs: {
      auto ch = c->ch;
      auto bytes = os::Encode(BuildPs());
      after.push_back([ch, bytes] { ch->Send(Frame::kPsReply, bytes).IgnoreError(); });
      return;
    }
    case Frame::kCheckpointNow:
    case Frame::kListEpochs: {
      auto job = os::DecodeU64(f.payload);
      if (!job.ok()) return reply_error(job.status().message());
      if (f.type == Frame::kCheckpointNow) {
        CheckpointNow(c, *job, after);
      } else {
        ListEpochs(c, *job, after);
      }
      return;
    }
    case Frame::kRestart: {
      auto req = os::DecodeRestart(f.payload);
      if (!req.ok()) return reply_error(req.status().message());
      ever_had_job_ = true;  // as for a submission
      if (!formed_) {        // answered once it has, like a submission
        deferred_.emplace_back(c, std::move(f));
        return;
      }
      Restart(c, *req, after);
      return;
    }
    case Frame::kAttach: {
      auto job = os::DecodeU64(f.payload);
      if (!job.ok()) return reply_error(job.status().message());
      Attach(c, *job, after);
      return;
    }
    case Frame::kReplayInfo:
    case Frame::kReplayLog: {
      auto job = os::DecodeU64(f.payload);
      if (!job.ok()) return reply_error(job.status().message());
      ReplayInfo(c, *job, f.type == Frame::kReplayLog, after);
      return;
    }
    case Frame::kStore: {
      auto op = os::DecodeText(f.payload);
      if (!op.ok()) return reply_error(op.status().message());
      StoreOp(c, *op, after);
      return;
    }
    case Frame::kShutdown:
      if (c->creds.uid != 0) return reply_error("only root may shut the cluster down");
      GOS_LOG(kInfo, "coordinator") << "shutdown requested by pid " << c->creds.pid;
      {
        auto ch = c->ch;
        after.push_back(
            [ch] { ch->Send(Frame::kOk, os::EncodeText("shutting down")).IgnoreError(); });
      }
      stop_ = true;
      return;
    default:
      return reply_error("unexpected frame type " + std::to_string(static_cast<int>(f.type)));
  }
}

void CoordinatorImpl::Submit(const std::shared_ptr<Client>& c, os::FrameIn& f, After& after) {
  auto ch = c->ch;
  auto fail = [&](const std::string& msg) {
    after.push_back([ch, msg] { ch->Send(Frame::kError, os::EncodeText(msg)).IgnoreError(); });
  };
  auto req = os::DecodeSubmit(f.payload);
  if (!req.ok()) return fail(req.status().message());
  std::vector<int> fds =
      c->tcp ? OpenUploads(c, req->files.size()) : c->ch->TakeFds(req->files.size());
  auto close_fds = [&] {
    for (int fd : fds) ::close(fd);
  };
  if (req->files.empty() || fds.size() != req->files.size()) {
    close_fds();
    return fail(c->tcp ? "the submit request must follow an upload of each of its files"
                       : "the submit request must pass the executable (and staged files) as "
                         "file descriptors over the local socket");
  }
  if (c->job != 0) {
    close_fds();
    return fail("this connection already submitted a job");
  }
  if (req->ntasks == 0) {
    close_fds();
    return fail("-n must be at least 1");
  }
  size_t launch_bytes = 0;
  for (const auto& s : req->argv) launch_bytes += s.size() + 2;
  for (const auto& s : req->env) launch_bytes += s.size() + 2;
  if (launch_bytes > os::kStrobeSlotBytes / 2) {
    close_fds();
    return fail("argv and environment take " + std::to_string(launch_bytes) + " bytes; at most " +
                std::to_string(os::kStrobeSlotBytes / 2) + " fit a launch");
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    struct stat st {};
    if (fstat(fds[i], &st) != 0 || !S_ISREG(st.st_mode)) {
      close_fds();
      return fail("staged file " + req->files[i].name + " is not a regular file");
    }
    req->files[i].size = static_cast<uint64_t>(st.st_size);
  }
  JobRequest jr;
  jr.ntasks = req->ntasks;
  jr.nodes = req->nodes;
  jr.ranks_per_node = req->ranks_per_node;
  jr.time_limit_ms = req->time_limit_ms;
  jr.job = ~0ull;  // Check ignores the id
  if (auto ex = ExcludedNodes(req->exclude, req->nodelist); ex.ok()) {
    jr.exclude = std::move(*ex);
  } else {
    close_fds();
    return fail(ex.status().message());
  }
  if (Status s = matrix_.Check(jr); !s.ok()) {
    close_fds();
    return fail(s.message());
  }
  auto id = tables_->NextJobId();
  if (!id.ok()) {
    close_fds();
    return fail(id.status().ToString());
  }
  jr.job = *id;
  Job j;
  j.req = jr;
  j.files = req->files;
  j.fds = fds;
  j.env = req->env;
  j.client = c;
  j.submit = SteadyClock::now();
  j.record = req->record && req->replay_of == 0;
  j.stop_at = req->stop_at;
  if (req->replay_of != 0) {
    if (Status st = SetUpReplay(c->creds, req->replay_of, j); !st.ok()) {
      close_fds();
      return fail(st.message());
    }
    if (req->ntasks != j.rec.ntasks) {
      close_fds();
      return fail("job " + std::to_string(req->replay_of) + " ran " + std::to_string(j.rec.ntasks) +
                  " ranks; a replay must run as many");
    }
    if (req->from_epoch != 0) {
      auto m = store()->GetEpoch(req->replay_of, req->from_epoch);
      if (!m.ok() || !m->has_value()) {
        close_fds();
        return fail("job " + std::to_string(req->replay_of) + " has no stored checkpoint epoch " +
                    std::to_string(req->from_epoch) +
                    (m.ok() ? " (see gos-ckpt --list)" : ": " + m.status().message()));
      }
      auto epochs = store()->ListEpochs(req->replay_of, false);
      SetRestore(j, std::move(**m), epochs.ok() && !epochs->empty() ? epochs->back().epoch : 0);
    } else {
      // Rank 0 reads what the recorded run read (from a checkpoint on, it gets nothing: how
      // much of it had been read by then is not known).
      auto segs = tables_->replay()->Read(req->replay_of, replay::kStdinStream);
      auto pieces = segs.ok() ? replay::DecodeStdinPieces(*segs)
                              : StatusOr<std::vector<std::string>>(segs.status());
      if (!pieces.ok()) {
        close_fds();
        return fail("job " + std::to_string(req->replay_of) +
                    ": its recorded input: " + pieces.status().message());
      }
      j.stdin_early = std::move(*pieces);
    }
  }
  JobRecord& r = j.rec;
  r.id = *id;
  r.uid = c->creds.uid;
  r.gid = c->creds.gid;
  r.user = UserName(c->creds.uid);
  r.argv = req->argv;
  r.cwd = req->cwd;
  r.ntasks = req->ntasks;
  r.nnodes = req->nodes;
  r.ranks_per_node = req->ranks_per_node;
  r.time_limit_ms = req->time_limit_ms;
  r.submit_ms = UnixMs();
  r.env = req->env;
  r.paths = req->paths;
  r.recorded = j.record;
  r.replay_of = req->replay_of;
  r.cpu_bind = req->cpu_bind;
  r.checkpoint_ms = std::max<int64_t>(req->checkpoint_ms, 0);
  r.keep = req->keep;  // 0: the coordinator's, whatever it is when an epoch commits
  r.restart_on_failure = req->restart_on_failure;
  c->job = *id;
  ever_had_job_ = true;
  jobs_[*id] = std::move(j);
  PersistJob(jobs_[*id]);
  queue_.Push(jr);
  GOS_LOG(kInfo, "coordinator") << "job " << *id << " submitted by " << jobs_[*id].rec.user << ": "
                                << req->ntasks << " ranks, " << Join(req->argv);
  auto bytes = os::EncodeU64(*id);
  after.push_back([ch, bytes] { ch->Send(Frame::kAccepted, bytes).IgnoreError(); });
  Schedule(after);
}

// gos-run -x / -w: the nodes a job must not use (JobRequest::exclude, ascending). Under mu_.
StatusOr<std::vector<NodeId>> CoordinatorImpl::ExcludedNodes(const std::vector<uint32_t>& exclude,
                                                             const std::vector<uint32_t>& only) {
  const std::vector<NodeId> known = matrix_.Nodes();
  auto describe = [&] {
    std::string all;
    for (NodeId n : known) all += (all.empty() ? "" : ",") + std::to_string(n);
    return all;
  };
  for (const auto* list : {&exclude, &only}) {
    for (uint32_t n : *list) {
      if (!std::binary_search(known.begin(), known.end(), n)) {
        return InvalidArgumentError("node " + std::to_string(n) +
                                    " is not in this cluster (its nodes: " + describe() +
                                    "; see gos-ps)");
      }
    }
  }
  std::set<NodeId> out(exclude.begin(), exclude.end());
  const std::set<NodeId> allowed(only.begin(), only.end());  // whatever order the client sent
  if (!allowed.empty()) {
    for (NodeId n : known) {
      if (!allowed.contains(n)) out.insert(n);
    }
  }
  return std::vector<NodeId>(out.begin(), out.end());
}

void CoordinatorImpl::SignalJob(uint64_t id, int sig, const os::PeerCreds& who,
                                const std::shared_ptr<Channel>& ch, bool reply, After& after) {
  auto respond = [&](Frame type, const std::string& text) {
    if (!reply || !ch) return;
    after.push_back([ch, type, text] { ch->Send(type, os::EncodeText(text)).IgnoreError(); });
  };
  auto jt = jobs_.find(id);
  if (jt == jobs_.end()) {
    auto rec = tables_->GetJob(id);
    if (rec.ok() && rec->has_value()) {
      return respond(Frame::kError, "job " + std::to_string(id) + " has already ended (" +
                                        storage::JobStateName((*rec)->state) + ")");
    }
    return respond(Frame::kError, "no job " + std::to_string(id));
  }
  Job& j = jt->second;
  if (who.uid != 0 && who.uid != j.rec.uid) {
    return respond(Frame::kError, "permission denied: job " + std::to_string(id) + " belongs to " +
                                      j.rec.user +
                                      ", and only its owner or "
                                      "root may signal or kill it");
  }
  if (sig == SIGKILL) {
    j.kill_requested = true;
    j.kill_message = "killed by " + UserName(who.uid);
  }
  if (j.phase == Phase::kQueued || j.phase == Phase::kStaging) {
    if (sig == SIGKILL || sig == SIGTERM || sig == SIGINT) {
      j.kill_requested = true;
      if (j.kill_message.empty()) j.kill_message = "killed by " + UserName(who.uid);
      if (j.phase == Phase::kQueued) {
        queue_.Remove(id);
        j.exit_code = 128 + sig;
        Finalize(j, JobState::kKilled, after);
      }
      // A staging job is finalized by the staging thread when it sees kill_requested.
    }
  } else {
    os::StrobeCommand cmd;
    cmd.type = os::CommandType::kSignal;
    cmd.job = id;
    cmd.signal = sig;
    Command(cmd);
  }
  respond(Frame::kOk, "signal " + std::to_string(sig) + " sent to job " + std::to_string(id));
}

void CoordinatorImpl::OnAgentFrame(const std::shared_ptr<Agent>& a, os::FrameIn& f, After& after) {
  if (a->node == 0 && f.type != Frame::kHello) return;
  switch (f.type) {
    case Frame::kHello: {
      auto hello = os::DecodeHello(f.payload);
      if (!hello.ok() || a->node != 0) return;
      // Node ids 1..nodes; a nodeagent may ask for one (--node). Once the cluster has formed,
      // only in place of a node that is down: it joins again under that id.
      auto free_slot = [&](uint32_t i) {
        if (node_agents_.count(i)) return false;
        if (!formed_) return true;
        auto nt = nodes_.find(i);
        return nt != nodes_.end() && nt->second.state == NodeState::kDown;
      };
      const uint32_t want = hello->requested_node;
      const std::string cluster = "the cluster of " + std::to_string(o_.nodes) + " nodes";
      uint32_t id = 0;
      std::string why;
      if (want >= 1 && want <= o_.nodes) {
        if (free_slot(want)) {
          id = want;
        } else if (formed_) {
          const NodeRecord& held = nodes_[want];
          why = "node " + std::to_string(want) + " of " + cluster +
                (held.state == NodeState::kUp ? " is up" : " is joining again already") +
                " (nodeagent pid " + std::to_string(held.pid) + " on " + held.host +
                "): a nodeagent can join only in place of a node that is down";
        }
      } else if (want != 0 && formed_) {
        why = "node " + std::to_string(want) + " is outside " + cluster;
      }
      for (uint32_t i = 1; id == 0 && why.empty() && i <= o_.nodes; ++i) {
        if (free_slot(i)) id = i;
      }
      auto ch = a->ch;
      if (id == 0) {
        if (why.empty()) {
          why = formed_ ? "all " + std::to_string(o_.nodes) + " nodes of " + cluster +
                              " are up: a nodeagent can join only in place of a node that is down"
                        : "all " + std::to_string(o_.nodes) + " node slots are taken";
        }
        after.push_back([ch, why] { ch->Send(Frame::kReject, os::EncodeText(why)).IgnoreError(); });
        return;
      }
      a->node = id;
      node_agents_[id] = a;
      NodeRecord& n = nodes_[id];
      n.id = id;
      n.host = hello->host.empty() ? a->peer : hello->host;
      n.pid = hello->pid;
      n.cores = hello->cores;
      n.mem_bytes = hello->mem_bytes;
      // A node joining a formed cluster again stays down until it is in the primitives'
      // group (kAgentJoined): strobes go to it only from then on.
      n.state = formed_ ? NodeState::kDown : NodeState::kUp;
      n.down_reason = formed_ ? "joining again" : "";
      n.last_seen_ms = UnixMs();
      PersistNode(n);
      GOS_LOG(kInfo, "coordinator")
          << "node " << id << " (" << hello->name << ", " << n.host << ", pid " << n.pid << ", "
          << n.cores << " cores) " << (formed_ ? "joins again" : "joined");
      os::AgentWelcome w;
      w.node = id;
      w.bootstrap = bootstrap_->address();
      w.provider = o_.provider;
      w.global_memory_bytes = os::kGlobalMemoryBytes;
      w.fanout = o_.fanout;
      auto bytes = os::Encode(w);
      after.push_back([ch, bytes] { ch->Send(Frame::kWelcome, bytes).IgnoreError(); });
      return;
    }
    case Frame::kAgentJoined: {
      auto nt = nodes_.find(a->node);
      if (!formed_ || nt == nodes_.end() || nt->second.state == NodeState::kUp) return;
      NodeRecord& n = nt->second;
      // Every member of the group, this coordinator included, can reach it by now: the
      // bootstrap service welcomes a node that joins again only once all acknowledged it.
      prim::NodeInfo info = node_->node_info(a->node);
      if (!info.alive || info.pid != n.pid) {
        GOS_LOG(kWarn, "coordinator")
            << "node " << a->node << " (" << n.host << ", pid " << n.pid
            << ") says it joined, but the group has "
            << (info.alive ? "pid " + std::to_string(info.pid) : "it down: " + info.down_reason)
            << "; dropping it";
        a->ch->Shutdown();
        return;
      }
      n.state = NodeState::kUp;
      n.down_reason.clear();
      n.last_seen_ms = UnixMs();
      PersistNode(n);
      matrix_.SetNode(a->node, true);
      GOS_LOG(kInfo, "coordinator")
          << "node " << a->node << " (" << n.host << ", pid " << n.pid << ") is up again";
      Schedule(after);
      return;
    }
    case Frame::kAgentOutput: {
      auto out = os::DecodeOutput(f.payload);
      if (!out.ok()) return;
      auto jt = jobs_.find(out->job);
      if (jt == jobs_.end()) return;
      if (!jt->second.client) {
        if (jt->second.awaits_client) KeepUnclaimed(jt->second, Frame::kOutput, f.payload);
        return;
      }
      auto ch = jt->second.client->ch;
      auto bytes = std::move(f.payload);
      after.push_back([ch, bytes] { ch->Send(Frame::kOutput, bytes).IgnoreError(); });
      return;
    }
    case Frame::kRankFailed: {
      auto e = os::DecodeJobExit(f.payload);
      if (!e.ok()) return;
      Job* j = FailableOn(e->job, a->node);
      if (j == nullptr) return;
      GOS_LOG(kInfo, "coordinator") << "job " << e->job << ": " << e->message;
      FailAndKill(*j, e->exit_code, e->failed_rank, a->node, "job failed: " + e->message);
      return;
    }
    case Frame::kBrokenDump: {
      // criu died in the middle of a dump here: the job's ranks on that node are frozen and
      // must not run again. Restart it from its newest epoch, as for a lost node, or fail it.
      auto jb = os::DecodeJobBytes(f.payload);
      if (!jb.ok()) return;
      Job* j = FailableOn(jb->first, a->node);
      if (j == nullptr) return;
      const std::string id = std::to_string(jb->first);
      const std::string why = jb->second + "; its ranks there cannot go on";
      GOS_LOG(kWarn, "coordinator") << "job " << id << ": " << why;
      if (RestartsLeft(j->rec) > 0) {
        Notice(*j, "job " + id + ": " + why, after);
        if (RequeueForRestart(*j, "a dump broke", after)) return;
      }
      std::string hint;
      if (auto epochs = store()->ListEpochs(j->rec.id, false); epochs.ok() && !epochs->empty()) {
        hint = RestartHint(j->rec.id, epochs->back().epoch);
      }
      FailAndKill(*j, kNodeFailureExit, -1, a->node, "job failed: " + why + hint);
      return;
    }
    case Frame::kCkptRank:
    case Frame::kCkptFailed: {
      auto jb = os::DecodeJobBytes(f.payload);
      if (!jb.ok()) return;
      const uint32_t node = a->node;
      const Frame type = f.type;
      // The node sends a rank's manifest once the inbox thread took every chunk of it.
      after.push_back([this, node, type, job = jb->first, bytes = std::move(jb->second)] {
        std::lock_guard<std::mutex> lock(mu_);
        auto jt = jobs_.find(job);
        if (jt == jobs_.end() || !jt->second.epoch) return;
        EpochInFlight& e = *jt->second.epoch;
        if (type == Frame::kCkptFailed) {
          if (e.failure.empty()) e.failure = bytes;
          return;
        }
        auto m = storage::DecodeManifest(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
        if (!m.ok() || m->epoch != e.epoch) return;
        for (auto& r : m->ranks) {
          r.node = node;
          e.ranks[r.rank] = std::move(r);
        }
      });
      return;
    }
    case Frame::kRestoreLocalReply:
    case Frame::kRestoreReady: {
      auto m = os::DecodeRestoreReady(f.payload);
      if (!m.ok()) return;
      auto jt = jobs_.find(m->job);
      if (jt == jobs_.end()) return;
      // A restore answers per rank, a replay's log per node (rank = node id); the answer to
      // RESTORE_LOCAL says whether the node had the rank's dump.
      auto& answers =
          f.type == Frame::kRestoreLocalReply ? jt->second.local_ready : jt->second.restore_ready;
      answers[m->rank] = *m;
      restore_cv_.notify_all();
      return;
    }
    case Frame::kReplaySegment: {
      auto m = os::DecodeReplaySegment(f.payload);
      if (!m.ok()) return;
      // Only the current incarnation's segments belong to the log: a run lost to a restart
      // (its survivors ship what they have when they forget it, maybe after the log was cut
      // back for the restored run) is not the job's history any more.
      uint64_t current = 0;
      if (auto jt = jobs_.find(m->job); jt != jobs_.end()) {
        current = jt->second.launch_strobe;
      } else if (auto et = ended_launch_.find(m->job); et != ended_launch_.end()) {
        current = et->second;
      } else {
        current = m->launch;  // ended before this coordinator started: nothing to compare
      }
      if (m->launch != current) {
        GOS_LOG(kInfo, "coordinator")
            << "job " << m->job << ": dropped a replay segment of stream " << m->stream
            << " from node " << a->node << ": it was recorded by the run launched at strobe "
            << m->launch << ", which a restart replaced";
        return;
      }
      auto* rs = tables_->replay();
      const auto* b = reinterpret_cast<const uint8_t*>(m->bytes.data());
      if (Status st = rs->Append(m->job, m->stream, {b, m->bytes.size()}); !st.ok()) {
        GOS_LOG(kWarn, "coordinator") << "job " << m->job << ": replay log: " << st.ToString();
      }
      return;
    }
    case Frame::kReplayStop:
    case Frame::kReplayStopped: {
      auto m = os::DecodeReplayStopped(f.payload);
      if (m.ok()) OnReplayStop(a, std::move(*m), f.type == Frame::kReplayStopped, after);
      return;
    }
    case Frame::kOutputDone: {
      auto job = os::DecodeU64(f.payload);
      if (!job.ok()) return;
      auto jt = jobs_.find(*job);
      if (jt != jobs_.end()) jt->second.output_done.insert(a->node);
      return;
    }
    default:
      return;
  }
}

os::PsReply CoordinatorImpl::BuildPs() {
  auto recs = tables_->ListJobs();
  std::vector<JobRecord> jobs = recs.ok() ? std::move(*recs) : std::vector<JobRecord>{};
  for (JobRecord& rec : jobs) {
    if (auto jt = jobs_.find(rec.id); jt != jobs_.end()) rec = jt->second.rec;  // live state
  }
  std::vector<NodeRecord> nodes;
  for (auto& [id, n] : nodes_) nodes.push_back(n);
  os::PsReply r = BuildPsReply(jobs, nodes, UnixMs(), /*live=*/true, store());
  r.running_row = static_cast<int32_t>(row_);
  r.strobe = strobe_;
  return r;
}

// ---- Scheduling and job state (under mu_) ---------------------------------------------

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

// ---- Join and strobe threads ------------------------------------------------------

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

// A thread that strobes early whenever `event` fires and `wanted()` (called under mu_) agrees.
std::thread CoordinatorImpl::StrobeOnEvent(prim::EventId event, std::function<bool()> wanted) {
  return std::thread([this, event, wanted = std::move(wanted)] {
    SetThreadName(("coord-event" + std::to_string(event)).c_str());
    while (!stop_) {
      auto got = node_->WaitEvent(event, std::chrono::milliseconds(100));
      if (!got.ok() || !*got) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (wanted()) {
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
  Status st = node_->XferAndSignal(live, payload.data(), payload.size(), os::StrobeSlot(s),
                                   os::kEventStrobe, os::kEventStrobeSent);
  if (st.ok()) {
    auto got = node_->WaitEvent(os::kEventStrobeSent, o_.failure_timeout);
    if (!got.ok())
      st = got.status();
    else if (!*got)
      st = DeadlineExceededError("strobe not delivered");
  }
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

// ---- Checkpoints and restarts (docs/specs/checkpoint.md) ----------------------------

namespace {

// The value a node stores in VarDumped/VarStored for (job, epoch): unique per job, so a
// stale value another job left in the slot never satisfies the query.
int64_t EpochMark(uint64_t job, uint64_t epoch) {
  return static_cast<int64_t>((job << 24) | (epoch & 0xffffff));
}

bool OwnerOrRoot(const os::PeerCreds& who, uint32_t uid) { return who.uid == 0 || who.uid == uid; }

}  // namespace

void CoordinatorImpl::Notice(Job& j, const std::string& text, After& after) {
  GOS_LOG(kInfo, "coordinator") << text;
  if (!j.client) {
    if (j.awaits_client) KeepUnclaimed(j, Frame::kNotice, os::EncodeText(text));
    return;
  }
  auto ch = j.client->ch;
  after.push_back([ch, text] { ch->Send(Frame::kNotice, os::EncodeText(text)).IgnoreError(); });
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
  const int64_t mark = EpochMark(id, e.epoch);
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
      std::string text =
          "checkpoint: job " + std::to_string(m.job) + " epoch " + std::to_string(m.epoch) +
          " committed: " + std::to_string(m.ntasks) + " ranks, " + Mib(m.logical_bytes) + ", " +
          Mib(m.new_bytes) + " new (" + Mib(m.new_compressed) + " compressed), paused " +
          std::to_string(m.pause_ms) + " ms, took " + std::to_string(m.total_ms) + " ms";
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
    auto epochs = store()->ListEpochs(id, false);
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

StatusOr<JobRecord> CoordinatorImpl::JobToFollow(const Client& c, uint64_t id,
                                                 const std::string& verb) {
  const std::string job_name = "job " + std::to_string(id);
  if (c.job != 0) return FailedPreconditionError("this connection already follows a job");
  GOS_ASSIGN_OR_RETURN(std::optional<JobRecord> rec, tables_->GetJob(id));
  if (!rec) return NotFoundError("no " + job_name);
  if (!OwnerOrRoot(c.creds, rec->uid)) {
    return PermissionDeniedError(job_name + " belongs to " + rec->user + "; only its owner or " +
                                 "root may " + verb + " it");
  }
  return std::move(*rec);
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

void CoordinatorImpl::KeepUnclaimed(Job& j, Frame type, std::vector<uint8_t> bytes) {
  if (j.unclaimed_bytes + bytes.size() > kUnclaimedBytes) {
    j.unclaimed_dropped += bytes.size();
    return;
  }
  j.unclaimed_bytes += bytes.size();
  j.unclaimed.emplace_back(type, std::move(bytes));
}

void CoordinatorImpl::Attach(const std::shared_ptr<Client>& c, uint64_t id, After& after) {
  auto ch = c->ch;
  auto send = [&](Frame type, std::vector<uint8_t> bytes) {
    after.push_back([ch, type, bytes = std::move(bytes)] { ch->Send(type, bytes).IgnoreError(); });
  };
  auto fail = [&](const std::string& msg) { send(Frame::kError, os::EncodeText(msg)); };
  const std::string job_name = "job " + std::to_string(id);
  auto rec = JobToFollow(*c, id, "attach to");
  if (!rec.ok()) return fail(rec.status().message());
  auto jt = jobs_.find(id);
  if (jt == jobs_.end()) {
    // Over (or failed when this coordinator started): the client gets its end at once.
    if (!storage::JobStateIsFinal(rec->state)) return fail(job_name + " is not running");
    os::JobExit e;
    e.job = id;
    e.exit_code = rec->exit_code;
    e.failed_rank = rec->failed_rank;
    e.failed_node = rec->failed_node;
    e.message = rec->message.empty()
                    ? std::string(storage::JobStateName(rec->state)) + " before this attach"
                    : rec->message;
    send(Frame::kAccepted, os::EncodeU64(id));
    send(Frame::kExit, os::Encode(e));
    return;
  }
  Job& j = jt->second;
  if (j.client) return fail(job_name + " is followed by another client already");
  j.client = c;
  c->job = id;
  send(Frame::kAccepted, os::EncodeU64(id));
  for (auto& [type, bytes] : j.unclaimed) send(type, std::move(bytes));
  if (j.unclaimed_dropped > 0) {
    send(Frame::kNotice,
         os::EncodeText(job_name + ": " + std::to_string(j.unclaimed_dropped) +
                        " bytes of its output came before this attach and "
                        "beyond what is kept for it (" +
                        std::to_string(kUnclaimedBytes >> 10) + " KiB); they are lost"));
  }
  j.unclaimed.clear();
  j.unclaimed_bytes = 0;
  j.unclaimed_dropped = 0;
  j.awaits_client = false;
  GOS_LOG(kInfo, "coordinator") << job_name << ": " << UserName(c->creds.uid) << " attached";
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

Job* CoordinatorImpl::FailableOn(uint64_t id, uint32_t node) {
  auto jt = jobs_.find(id);
  if (jt == jobs_.end()) return nullptr;
  Job& j = jt->second;
  if (j.rank_failed || j.kill_requested || j.phase == Phase::kDone ||
      std::find(j.nodes.begin(), j.nodes.end(), node) == j.nodes.end()) {
    return nullptr;
  }
  return &j;
}

void CoordinatorImpl::FailAndKill(Job& j, int32_t exit_code, int32_t rank, uint32_t node,
                                  const std::string& message) {
  j.rank_failed = true;
  j.exit_code = exit_code;
  j.failed_rank = rank;
  j.failed_node = static_cast<int32_t>(node);
  j.rec.message = message;
  os::StrobeCommand cmd;
  cmd.type = os::CommandType::kSignal;
  cmd.job = j.rec.id;
  cmd.signal = SIGKILL;
  Command(cmd);
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

void CoordinatorImpl::StoreOp(const std::shared_ptr<Client>& c, const std::string& op,
                              After& after) {
  auto ch = c->ch;
  auto reply = [&](Frame type, const std::string& text) {
    after.push_back([ch, type, text] { ch->Send(type, os::EncodeText(text)).IgnoreError(); });
  };
  if (c->creds.uid != 0) return reply(Frame::kError, "gos-store is for root");
  StoreRequest request;
  if (!ParseStoreRequest(op, &request)) {
    return reply(Frame::kError, "unknown store operation " + op);
  }
  if (request.op == "gc" && AnyEpochInFlight()) {
    return reply(Frame::kError, "a checkpoint is being taken; try gc again when it is stored");
  }
  // Outside mu_: verify reads every chunk.
  after.push_back([this, ch, request, in_use = LogsInUse(0)] {
    std::string text = RunStoreOp(
        store(), request,
        [&](const std::string& line) {
          ch->Send(Frame::kPhase, os::EncodeText(line)).IgnoreError();
        },
        tables_->replay(), in_use);
    bool ok = text.rfind("error:", 0) != 0;
    ch->Send(ok ? Frame::kOk : Frame::kError, os::EncodeText(text)).IgnoreError();
  });
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

// ---- Record and replay (docs/specs/replay.md) ----------------------------------------

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
    // The first report stops the job; a rank's own stop (MPI_Abort) says more than "the log
    // ends here" and replaces it.
    const bool first = !j.stop;
    if (first ||
        (j.stop->kind == os::ReplayStopKind::kLogEnd && m.kind == os::ReplayStopKind::kAborted)) {
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

// ---- Staging thread ------------------------------------------------------------------

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
      std::vector<uint8_t> header = os::EncodeStageHeader(h, key_);
      std::vector<uint8_t>& buf = bufs[seq % 2];
      buf.resize(os::kStageHeaderBytes + len);
      std::memcpy(buf.data(), header.data(), header.size());
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

}  // namespace

StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options) {
  auto c = std::make_unique<CoordinatorImpl>(options);
  GOS_RETURN_IF_ERROR(c->Init());
  return std::unique_ptr<Coordinator>(std::move(c));
}

}  // namespace gos::coordinator
