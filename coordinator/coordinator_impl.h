// Private to the coordinator library: the CoordinatorImpl class and the state it shares
// between its files, split by concern the way RocksDB splits db_impl into db_impl_*.cc:
//   coordinator.cc   core: Create, Init, Run, Shutdown, idle exit, group join, node liveness,
//                    job bookkeeping (Finalize, Persist*, Notice, LiveAgents, JobNodes)
//   clients.cc       client connections and frames: submit, signals, attach, uploads, gos-store
//   agent_frames.cc  nodeagent frames (OnAgentFrame)
//   strobe.cc        the strobe loop, early strobes, Schedule, CheckJobs
//   epochs.cc        checkpoint epochs: ordering, stepping, committing; store and inbox threads
//   restart.cc       restarts: Restart, RequeueForRestart, ShipImages
//   replay.cc        record and replay: replay info, replay logs, the logs of restarted jobs;
//                    where a job's ranks run, for debuggers (MPIR)
//   staging.cc       the staging thread (launch transfers)
// Not a public header: include it only from those files.
#ifndef GOS_COORDINATOR_COORDINATOR_IMPL_H_
#define GOS_COORDINATOR_COORDINATOR_IMPL_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "coordinator.h"
#include "gang.h"
#include "gos/eventfd.h"
#include "gos/os/channel.h"
#include "gos/os/ckpt_ship.h"
#include "gos/os/messages.h"
#include "gos/prim/bootstrap.h"
#include "gos/prim/prim.h"
#include "gos/status.h"
#include "gos/storage/checkpoints.h"
#include "gos/storage/tables.h"

namespace gos::coordinator::internal {

using os::Channel;
using os::Frame;
using prim::NodeSet;
using storage::JobRecord;
using storage::JobState;
using storage::NodeRecord;
using storage::NodeState;
using SteadyClock = std::chrono::steady_clock;

constexpr uint32_t kNoSlot = ~0u;
// Exit code of a job that failed because a node it used went down.
constexpr int32_t kNodeFailureExit = 255;

int64_t UnixMs();
// Microseconds from `from` to `to`; 0 if `to` never happened.
int64_t MicrosSince(SteadyClock::time_point from, SteadyClock::time_point to);
// The user's name, else the uid as a number.
std::string UserName(uid_t uid);
// " (gos-restart J brings it back from epoch E)": what a failed job's message ends with.
std::string RestartHint(uint64_t job, uint64_t epoch);
// The epoch's ranks were dumped with a BCS channel: the job communicates through gos.
bool ImagesUseBcs(const storage::EpochManifest& m);
// The client acting as `who` may act on a job of `uid`: it is the job's owner or root.
bool OwnerOrRoot(const os::PeerCreds& who, uint32_t uid);

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
  // kRanks clients waiting for every node's kAgentRanks, and the answers so far (by node).
  std::vector<std::shared_ptr<Channel>> rank_queries;
  std::map<uint32_t, std::vector<os::RankPlace>> rank_answers;
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
  // kRanks: asks the job's nodes where its ranks are (kRanksQuery); OnAgentRanks answers the
  // client once every node has.
  void QueryRanks(const std::shared_ptr<Client>& c, uint64_t id, After& after);
  void OnAgentRanks(const std::shared_ptr<Agent>& a, os::RankTable m, After& after);

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

}  // namespace gos::coordinator::internal

#endif  // GOS_COORDINATOR_COORDINATOR_IMPL_H_
