// Private to the nodeagent: the implementation class of NodeAgent and the local job state it
// keeps, shared by the files that implement it (RocksDB's db_impl_*.cc way):
//   agent.cc       creation, init, connecting and the group, the IO and strobe loops
//   jobs.cc        launching, staging executables, output, job end, signals
//   checkpoint.cc  ordered checkpoints: dumping (CheckpointWorker) and shipping chunks
//   restore.cc     restore batches, local copies of dumps and CRIU restores
//   recording.cc   record and replay bookkeeping (docs/specs/replay.md)
#ifndef GOS_NODEAGENT_AGENT_IMPL_H_
#define GOS_NODEAGENT_AGENT_IMPL_H_

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "agent.h"
#include "bcs_engine.h"
#include "crash_watch.h"
#include "criu.h"
#include "freezer.h"
#include "gos/eventfd.h"
#include "gos/log.h"
#include "gos/os/channel.h"
#include "gos/os/ckpt_ship.h"
#include "gos/os/messages.h"
#include "gos/prim/prim.h"
#include "gos/storage/chunks.h"
#include "launcher.h"

namespace gos::nodeagent::internal {

using os::Channel;
using os::Frame;
using SteadyClock = std::chrono::steady_clock;

// SIGKILL to the process of a pidfd (none: -1); unlike a pid, it cannot hit a reused pid.
void KillPidfd(int pidfd);

// The userfaultfds a rank's dump of `epoch` handed on: its next dump may be incremental to
// that one.
struct RankTracking {
  uint64_t epoch = 0;
  std::vector<TrackedProcess> processes;
};

struct Rank {
  uint32_t rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1, status_fd = -1, stdin_fd = -1;
  bool exited = false;
  int wait_status = 0;
  std::string init_dir;  // gos-rank-init's working directory, removed with the rank
  // A restored rank: the directory its executable is mapped from (where it was when the rank
  // was dumped, recreated by the restore). Ranks restored together on one node may come from
  // different nodes, hence different directories. Empty: the job's own dir.
  std::string exe_dir;
  // What keeps the written-page tracking of the rank's processes alive since its last dump
  // (docs/specs/checkpoint.md, "Incremental dumps"); null: none (its next dump is full).
  std::shared_ptr<RankTracking> tracking;
};

// A checkpoint worker's job was killed or forgotten: it stops storing the epoch, and says
// nothing more about it (a restarted incarnation of the job may reuse the epoch's number).
struct CkptCancel {
  std::mutex mu;  // held while the worker reports; taken to cancel
  std::atomic<bool> cancelled{false};
  int criu_pidfd = -1;         // the running `criu dump`, under mu: cancelling kills it
  bool resumed = false;        // the coordinator's RESUME was applied (under mu)
  std::condition_variable cv;  // cancelled or resumed
};

struct LocalJob {
  uint64_t id = 0;
  uint32_t slot = 0, row = 0;
  uint64_t launch = 0;  // the strobe whose LAUNCH or RESTORE made this incarnation
  bool killed = false;  // the coordinator killed it (SIGKILL, FORGET)
  std::string dir;
  std::unique_ptr<FreezerCgroup> cgroup;
  std::vector<Rank> ranks;
  bool frozen = false;
  bool reported = false;
  std::string stdin_pending;
  bool stdin_eof = false;
  bool bcs = false;  // the program communicates through the BCS engine
  bool rank_failed = false;
  std::string program;  // the staged executable's name in dir
  uint32_t uid = 0, gid = 0;
  // Frozen whatever row runs, until the coordinator's RESUME: during a checkpoint's dump, and
  // after a restore until every node has restored its ranks.
  bool hold = false;
  // A dump of it broke (criu died in the middle): its ranks may carry criu's parasite code.
  // It stays frozen (RESUME does not release it) until the coordinator kills or forgets it.
  bool dump_broke = false;
  // Checkpoint ordered (kCheckpoint) and not started yet: it starts at the first strobe at
  // which the job has no BCS transfer in flight.
  uint64_t ckpt_epoch = 0, ckpt_base = 0;
  int ckpt_level = 1;
  std::shared_ptr<CkptCancel> ckpt_cancel;  // of the checkpoint worker running, if any
  std::string restored_dir;                 // a job dir recreated at its dumped path by a restore
  // Record and replay (docs/specs/replay.md).
  bool record = false;
  bool replay = false;
  bool stopped = false;  // kStop: frozen for inspection until killed
  std::chrono::steady_clock::time_point record_shipped;
  // A LAUNCH whose ranks are still being started, a few at a time between and at strobes
  // (ContinueLaunches; docs/specs/strobe.md, "Paced launches"). Null once every local rank
  // started (or failed to): then started[slot] is set, and the job may report its end.
  struct Launching {
    os::LaunchCommand cmd;
    std::vector<uint32_t> mine;                // this node's ranks of the job, in order
    size_t next = 0;                           // mine[next] is the next to start
    std::map<uint32_t, std::string> channels;  // BCS channel paths by rank
    std::string failure;                       // set: the rest cannot start, why
    std::vector<int> signals;                  // SIGNALs applied meanwhile, for the rest
    SteadyClock::time_point since;
  };
  std::unique_ptr<Launching> launching;
};

// A rank that runs: the caller's ends of its pipes. Only rank 0 reads stdin.
Rank StartedRank(uint32_t rank, const RankProcess& p);

// The BCS engine's view of a launched or restored job.
BcsJob BcsJobOf(const os::LaunchCommand& l, const std::vector<uint32_t>& mine);

// Copies a file (replacing `to`) and gives the copy `mode`.
Status CopyFile(const std::string& from, const std::string& to, mode_t mode);

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
  bool OnlyComputeRunning(const os::Strobe& s) const;
  // origin: the strobe that first carried the LAUNCH (the incarnation's mark).
  void Launch(const os::LaunchCommand& l, uint64_t origin, uint32_t current_row);
  // Starts ranks of launches under way until `slice` has passed (at least one rank); true if
  // some are left (takes mu_).
  bool ContinueLaunches(std::chrono::microseconds slice);
  // Starts j's next rank to start; once none is left, sets started[slot] (under mu_).
  void StartNextRank(LocalJob& j);
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
  // A fresh, empty working directory for a rank's gos-rank-init (see launcher.h); "" if it
  // cannot be made (the rank then starts in "/", and its dumps may collide with others').
  std::string InitDir(uint64_t job, uint32_t rank);
  static void RemoveInitDir(const std::string& dir);
  void OnPipeLocked(int fd);
  // Checkpoint and restore (docs/specs/checkpoint.md).
  void StartCheckpoints();
  void CheckpointWorker(uint64_t job, uint64_t epoch, uint64_t base, uint32_t slot, int level,
                        std::vector<std::pair<uint32_t, pid_t>> ranks, std::string cgroup,
                        std::string job_dir, std::string program, std::string matcher,
                        std::map<uint32_t, std::string> channels,
                        std::map<uint32_t, std::string> exe_dirs,
                        std::map<uint32_t, std::shared_ptr<RankTracking>> tracking,
                        std::shared_ptr<CkptCancel> cancel);
  // Incremental dumps (docs/specs/checkpoint.md): whether this node takes them (gos's CRIU
  // can track and GOS_INCREMENTAL is not 0; checked at the first checkpoint, and logged), and
  // the parent a rank's dump of the job's epoch after `base` is incremental to ("" for a full
  // dump).
  bool Incremental();
  std::once_flag incremental_once_;
  bool incremental_ = false;
  std::string IncrementalParent(uint64_t job, uint64_t base, uint32_t rank,
                                const std::shared_ptr<RankTracking>& t) const;
  // The epochs of the job whose dumps the node's dump of `epoch` is incremental to, `epoch`
  // included (from the images dirs' `parent` links).
  std::set<uint64_t> ChainEpochs(uint64_t job, uint64_t epoch) const;
  void Restore(const os::StrobeCommand& c);
  // Record and replay (docs/specs/replay.md).
  // Sends the job's recorded segments to the coordinator: when enough has piled up or a
  // second has passed, or everything when final (under mu_).
  void ShipRecord(LocalJob& j, bool final);
  // Every segment of a log to replay arrived: decode it into the plan the launch will use.
  void OnReplayDataEnd(const os::ReplayDataEnd& m);
  // kStop: freeze and hold the job; tell the coordinator where its ranks are (under mu_).
  void StopJob(LocalJob& j);
  // A replayed rank is held at its crash (crash watch thread): its top frames, and the stop
  // report to the coordinator.
  void OnCrash(const Crash& c);
  // kRanksQuery: where this node's ranks of the job are (kAgentRanks; takes mu_).
  void AnswerRanks(uint64_t job);
  // The job of a LAUNCH or RESTORE with this node's ranks in *mine, in its new freezer
  // cgroup (frozen when `frozen`), marked with `origin` (the strobe that first carried the
  // command: the incarnation its exit record names); nullptr if it has no rank here or is
  // known already. *failure says why the cgroup could not be made.
  LocalJob* NewLocalJob(const os::LaunchCommand& l, uint64_t origin, bool frozen,
                        std::vector<uint32_t>* mine, std::string* failure);
  // A rank that could not start or be restored: exit 127, `why` on its stderr.
  Rank NotStarted(const std::shared_ptr<Channel>& ch, uint64_t job, uint32_t rank,
                  const std::string& why);
  // Streams the output of every rank of j that is not watched yet (under mu_).
  void WatchOutputs(LocalJob& j);
  void RestoreWorker(uint64_t job, uint64_t epoch, uint32_t slot, std::vector<uint32_t> ranks,
                     std::string procs, uint32_t uid, uint32_t gid, bool bind);
  // Restore inbox thread: takes the restore batches the coordinator XFERs into this node's
  // memory (docs/specs/checkpoint.md, "Shipping").
  void RestoreInLoop();
  // Writes a restore batch's chunks into the rank's restore dir, each checked against its hash
  // first; "" or the first problem (naming job, epoch, rank, file and chunk), which refuses it
  // and every later batch of the rank's attempt.
  std::string TakeRestoreBatch(const os::CkptBatch& b);
  void OnRestoreRankEnd(const os::RestoreRankEnd& m);
  // kRestoreLocal: links the rank's files from this node's copy of its dump into the restore
  // dir if every file is there and cuts into exactly the manifest's chunks.
  void OnRestoreLocal(std::span<const uint8_t> payload);
  // Where this node keeps its copy of a rank's last stored dump.
  std::string CkptDir(uint64_t job, uint64_t epoch) const {
    return o_.scratch_dir + "/ckpt/j" + std::to_string(job) + "-e" + std::to_string(epoch);
  }
  // Where a dump goes that does not fit into the scratch dir; not kept.
  std::string SpillDir(uint64_t job, uint64_t epoch) const {
    return o_.state_dir + "/ckpt-spill/j" + std::to_string(job) + "-e" + std::to_string(epoch);
  }
  // Makes room for `need` bytes of dumps of `job` in the scratch dir: drops other jobs' kept
  // dumps, then this job's. False, dropping nothing, if even that would not be enough.
  bool MakeScratchRoom(uint64_t job, uint64_t need);
  // Runs work on a thread of its own (see workers_).
  void StartWorker(std::function<void()> work);
  // Keeps the dump of (job, epoch) just stored and that of its last committed epoch `base`
  // (until this one commits); removes the job's other dumps, and the dumps of all but the
  // kKeptDumpJobs most recently stored jobs.
  void KeepDump(uint64_t job, uint64_t epoch, uint64_t base);
  // Removes the job's kept dumps but those of epochs `keep` and `keep_too` and the dumps they
  // are incremental to.
  void DropDumps(uint64_t job, uint64_t keep, uint64_t keep_too);
  void DropDumps(uint64_t job, const std::set<uint64_t>& keep);
  // A CRIU pages image of an earlier dump, moved where the next dump will write over it.
  struct RecycledFile {
    std::string path;
    struct timespec mtime;
  };
  // Moves the CRIU pages images of the job's kept dumps into the rank dirs of its dump of
  // `epoch` at `scratch` (gos's CRIU writes over them instead of filling fresh memory, see
  // scripts/criu-patches/0003), then removes the job's other dumps but those in `keep` (the
  // parents of the ranks dumped incrementally, which are not among `ranks`).
  std::vector<RecycledFile> RecycleDumps(uint64_t job, uint64_t epoch, const std::string& scratch,
                                         const std::vector<std::pair<uint32_t, pid_t>>& ranks,
                                         const std::set<uint64_t>& keep);
  // Where a restart of (job, epoch) gathers a rank's images: those shipped from the store in
  // the state dir; hard links to this node's own copy of the rank's dump next to that copy, in
  // the scratch dir (on another file system than the state dir, each file had to be copied:
  // seconds per GiB). The same dir when the scratch dir is the state dir (the default).
  std::string RestoreJobDir(const std::string& root, uint64_t job, uint64_t epoch) const {
    return root + "/restore/j" + std::to_string(job) + "-e" + std::to_string(epoch);
  }
  std::string RestoreDir(uint64_t job, uint64_t epoch, uint32_t rank) const {
    return RestoreJobDir(o_.state_dir, job, epoch) + "/r" + std::to_string(rank);
  }
  std::string LocalRestoreDir(uint64_t job, uint64_t epoch, uint32_t rank) const {
    return RestoreJobDir(o_.scratch_dir, job, epoch) + "/r" + std::to_string(rank);
  }
  // The rank's images, wherever they were gathered.
  std::string ImagesDir(uint64_t job, uint64_t epoch, uint32_t rank) const {
    std::error_code ec;
    const std::string local = LocalRestoreDir(job, epoch, rank);
    return std::filesystem::is_directory(local, ec) ? local : RestoreDir(job, epoch, rank);
  }
  std::shared_ptr<Channel> channel() {
    std::lock_guard<std::mutex> lock(mu_);
    return ch_;
  }

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
  // Traces the ranks of replays (docs/specs/replay.md, "A crash"); made and gone with bcs_,
  // which its callback uses.
  std::unique_ptr<CrashWatch> crash_watch_;
  std::unique_ptr<os::BatchOutbox> outbox_;  // checkpoint chunks to the coordinator's store
  uint32_t node_id_ = 0;
  std::vector<int> cpus_;  // the CPUs this node's ranks are bound to (AllowedCpus at start)
  std::thread strobe_thread_, stage_thread_, restore_in_thread_;

  std::mutex mu_;
  std::map<uint64_t, LocalJob> jobs_;
  std::map<int, std::pair<uint64_t, uint32_t>> pipes_;            // fd -> (job, index of rank)
  std::map<uint64_t, std::pair<std::string, bool>> early_stdin_;  // job -> (bytes, EOF)
  // Killed ranks of forgotten jobs that were not reapable yet: Reap waits for them.
  std::vector<pid_t> unreaped_;
  uint64_t last_strobe_ = 0;
  // Strobes applied lately, to apply each command once: the coordinator sends a command again
  // until a strobe carrying it is confirmed everywhere (under mu_).
  std::deque<uint64_t> applied_strobes_;
  std::unique_ptr<FreezerCgroup> freezer_key_;  // see Init
  uint64_t last_stage_seq_ = 0;
  uint32_t current_row_ = 0;
  // Jobs with ranks still to start (LocalJob::launching), in the order of their LAUNCHes
  // (under mu_).
  std::deque<uint64_t> launching_;

  // Checkpoint workers and other background work (StartWorker); those that finished are
  // joined when the next one starts, the rest at teardown.
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex work_mu_;
  std::list<Worker> workers_;
  // Restores run on one long-lived thread: a restored rank's init has that thread as its
  // parent, and its PR_SET_PDEATHSIG fires when the parent *thread* exits (under work_mu_).
  std::thread restore_thread_;
  std::condition_variable restore_cv_;
  std::deque<std::function<void()>> restores_;
  void RestoreLoop() {
    SetThreadName("agent-restore");
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> wl(work_mu_);
        restore_cv_.wait_for(wl, std::chrono::milliseconds(200),
                             [&] { return lost_ || stop_ || !restores_.empty(); });
        if (lost_ || stop_) {
          restores_.clear();
          return;
        }
        if (restores_.empty()) continue;
        task = std::move(restores_.front());
        restores_.pop_front();
      }
      task();
    }
  }
  // Chunks this node shipped, per job and epoch: those of the job's newest committed epoch
  // are in the store and are not sent again (under work_mu_).
  std::map<uint64_t, std::map<uint64_t, std::set<storage::ChunkHash>>> shipped_;
  // Per job, the SHA-256 of the chunks of its last dumps by their XXH3-128 (one cache per
  // job: see ChunkHashCache), for its next dump and for checking its kept dump at a restart.
  // They outlive the job's kill (a restart follows); the least recently used go beyond
  // kHashCacheJobs (under work_mu_).
  static constexpr size_t kHashCacheJobs = 8;
  std::map<uint64_t, std::pair<uint64_t, std::shared_ptr<storage::ChunkHashCache>>> hash_caches_;
  uint64_t hash_cache_uses_ = 0;
  // The job's cache, made if `make` and there is none (else null).
  std::shared_ptr<storage::ChunkHashCache> HashCacheOf(uint64_t job, bool make) {
    std::lock_guard<std::mutex> wl(work_mu_);
    auto it = hash_caches_.find(job);
    if (it == hash_caches_.end()) {
      if (!make) return nullptr;
      if (hash_caches_.size() >= kHashCacheJobs) {
        auto oldest = std::min_element(
            hash_caches_.begin(), hash_caches_.end(),
            [](const auto& a, const auto& b) { return a.second.first < b.second.first; });
        hash_caches_.erase(oldest);
      }
      it = hash_caches_.emplace(job, std::make_pair(0, std::make_shared<storage::ChunkHashCache>()))
               .first;
    }
    it->second.first = ++hash_cache_uses_;
    return it->second.second;
  }
  // Ranks whose images arrive in restore batches, by (job, epoch, rank): the coordinator's
  // attempt they belong to and its first problem, until the rank's end (under restore_mu_).
  struct RankRestore {
    uint64_t attempt = 0;
    std::string error;
  };
  std::mutex restore_mu_;
  std::map<std::tuple<uint64_t, uint64_t, uint32_t>, RankRestore> restoring_;
  // Logs to replay: arriving (IO thread), then decoded until their launch (under replay_mu_).
  std::map<uint64_t, std::map<uint32_t, std::vector<std::string>>> replay_inbox_;
  std::mutex replay_mu_;
  std::map<uint64_t, std::shared_ptr<const ReplayPlan>> replay_plans_;
};

}  // namespace gos::nodeagent::internal

#endif  // GOS_NODEAGENT_AGENT_IMPL_H_
