// The nodeagent's BCS engine: the "NIC" of the local ranks of communicating jobs
// (docs/specs/bcs-exchange.md).
//
// Per rank it owns a shared-memory channel (gos/bcs/channel.h). At every strobe the strobe
// thread calls OnStrobe, which
//   1. publishes the completions of the previous slice to the ranks' channels;
//   2. for the job of the running row: drains the descriptors its local ranks posted, sends
//      them to the job's other nodes (XFER-AND-SIGNAL) and waits for theirs (the partial
//      exchange), runs the deterministic Matcher over all of them, plans the slice with the
//      Scheduler and moves the data: process_vm_readv from local senders, XFER-AND-SIGNAL of
//      one block per (source, destination) node pair, process_vm_writev into local receivers.
// When OnStrobe returns, the job's network traffic of that slice is over (a quiescent
// boundary) and the agent confirms the strobe.
//
// A bell thread waits on the ranks' doorbells (futex_waitv); when every local rank of the
// running row is blocked in communication it runs a job round at once if the job lives on
// this node only (spec 6, "Job rounds": the same drain, match, move and publish, without a
// strobe), else tells the coordinator (XFER into its blocked table), which strobes early once
// every node of the row is blocked and one has work.
//
// Threading: OnStrobe runs on the strobe thread only, which holds PauseRounds() while it
// applies a strobe; the other methods are thread-safe.
#ifndef GOS_NODEAGENT_BCS_ENGINE_H_
#define GOS_NODEAGENT_BCS_ENGINE_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gos/bcs/matcher.h"
#include "gos/os/messages.h"
#include "gos/prim/prim.h"
#include "gos/replay/log.h"
#include "gos/status.h"

namespace gos::nodeagent {

// Why a replayed job stopped (docs/specs/replay.md).
struct ReplayStop {
  using Kind = os::ReplayStopKind;
  Kind kind = Kind::kLogEnd;
  uint64_t job = 0;
  uint64_t strobe = 0;  // recorded strobe of the last step taken (or of the divergent one)
  int32_t rank = -1;
  std::string text;
};

// What a replay imposes on one job on this node.
struct ReplayPlan {
  replay::JobLog log;
  uint64_t start_step = 0;   // steps the restored state already took (0 = from the start)
  uint64_t stop_at = 0;      // stop before the first step recorded after this strobe (0 = never)
  bool completed = false;    // the recorded run completed: extra descriptors are divergence
  int32_t failed_rank = -1;  // the recorded run failed with this rank: wait for its stop
  uint64_t channel_job = 0;  // restored from a checkpoint: the recorded job's id (channels)
  std::map<uint32_t, std::string> decisions;  // local rank -> its decision log (RankStream)
};

// A batch of the record of a job, for the coordinator's store.
struct RecordSegment {
  uint32_t stream = 0;
  std::string bytes;
};

struct BcsEngineOptions {
  // This node's id in the primitives group.
  uint32_t node = 0;
  // Channel files are <channel_prefix>-j<job>-r<rank>. Required.
  std::string channel_prefix;
  // How long a node waits for a peer's block within one slice before it gives up on the job's
  // communication. Default: 1.5 s (below the coordinator's default failure timeout, so that a
  // live node still confirms its strobe in time).
  std::chrono::milliseconds peer_timeout{1500};
  // Called (from the strobe or bell thread) when a replayed job must stop.
  std::function<void(const ReplayStop&)> on_replay_stop;
  // Called (from the strobe thread, once per job) when the job's communication broke while
  // every node of it is alive (a peer's blocks did not come in time, a transfer failed): the
  // job can never communicate again, so the caller should fail it, saying why.
  std::function<void(uint64_t job, const std::string& why)> on_broken;
};

// State to restore a job from a checkpoint (SaveMatcher / SaveChannel of the dumped job).
struct BcsRestore {
  std::string matcher;                       // SaveMatcher bytes (identical on every node)
  std::map<uint32_t, std::string> channels;  // local world rank -> SaveChannel bytes
};

struct BcsJob {
  uint64_t job = 0;
  uint32_t row = 0;
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> rank_node;  // node of each world rank
  std::vector<uint32_t> local;      // this node's world ranks, ascending
  uint64_t channel_job = 0;         // job id in the channel file names (0 = job)
  bool record = false;              // record the job's decisions (TakeRecord)
  // Recording a restored job: the steps its log already holds before the checkpoint it was
  // restored from, so that its checkpoint marks count steps from the start of the run.
  uint64_t first_step = 0;
  std::shared_ptr<const ReplayPlan> replay;  // impose a recorded run
};

class BcsEngine {
 public:
  BcsEngine(prim::Node* node, BcsEngineOptions options);
  ~BcsEngine();
  BcsEngine(const BcsEngine&) = delete;
  BcsEngine& operator=(const BcsEngine&) = delete;

  // Creates the job's state and a channel file per local rank (owned by uid/gid, mode 0600).
  // Returns the channel path of each local rank. With restore, the matcher is loaded from
  // restore->matcher and each channel file gets restore->channels[rank] as its contents
  // (same path as when it was dumped: the path depends on job and rank only); the job starts
  // held (Hold) so that no node exchanges for it before every node has restored it.
  StatusOr<std::map<uint32_t, std::string>> AddJob(const BcsJob& job,
                                                   const BcsRestore* restore = nullptr);
  // The rank's gos-rank-init pid (the rank is its only child).
  void SetRankInit(uint64_t job, uint32_t rank, pid_t init_pid);
  void RankExited(uint64_t job, uint32_t rank);
  // The bcs::RankState the rank left in its channel and its abort code; {0, 0} if unknown.
  std::pair<uint32_t, int32_t> RankState(uint64_t job, uint32_t rank);
  // Unmaps and removes the job's channels.
  void RemoveJob(uint64_t job);

  // Strobe thread: see the file comment. The caller holds PauseRounds() (the agent holds it
  // from the strobe's commands to here, so that checkpoint starts see no job round either).
  void OnStrobe(uint64_t strobe, uint32_t row, bool early = false);
  // No job round runs while the returned lock is held (spec 6, "Job rounds").
  [[nodiscard]] std::unique_lock<std::mutex> PauseRounds();

  // ---- Checkpoint support: strobe thread only, between OnStrobe calls. -----------------
  // True when no transfer of the job is queued (its Scheduler is idle). The scheduler is the
  // same on every node of the job, so at a given strobe every node gives the same answer.
  // False for an unknown job.
  bool Quiescent(uint64_t job);
  // Publishes the job's pending completions (those OnStrobe would publish first) now.
  void Flush(uint64_t job);
  // The job's matcher state (Matcher::Save). Call after Flush, when Quiescent.
  StatusOr<std::string> SaveMatcher(uint64_t job);
  // A copy of the rank's whole channel file. NOT_FOUND for an unknown job or rank.
  StatusOr<std::string> SaveChannel(uint64_t job, uint32_t rank);
  // A held job is skipped by OnStrobe (no publish, drain, exchange or data movement) and by
  // the bell thread's blocked reports, as if its row never ran. Thread-safe.
  void Hold(uint64_t job, bool hold);

  // ---- Record and replay (docs/specs/replay.md). ------------------------------------------
  // Everything recorded since the last call, as segments. Any thread.
  std::vector<RecordSegment> TakeRecord(uint64_t job);
  // Raw record bytes waiting for TakeRecord.
  size_t RecordPending(uint64_t job);
  // A checkpoint of the job is taken now (strobe thread, between OnStrobe calls).
  void MarkCheckpoint(uint64_t job, uint64_t epoch);
  // The pid (in this node's PID namespace) of a local rank, 0 if unknown.
  pid_t RankPidOf(uint64_t job, uint32_t rank);
  // A replayed job: the recorded strobe of the last step taken (0 before the first, or for
  // a job that is not replayed here). Any thread.
  uint64_t ReplayedStrobe(uint64_t job);
  // A replayed job must stop for what the engine cannot see (a rank held at its crash): calls
  // on_replay_stop with `stop` unless the job stopped already (then false). Any thread.
  bool StopReplayOf(uint64_t job, ReplayStop stop);

 private:
  struct Job;
  struct Rank;
  void BellLoop();
  void Ring();
  // Every node of the job is up (as the primitives know it).
  bool PeersAlive(const Job& j) const;
  // TEST-EVENT on kEventBcsSent until deadline, passing over errors that are not j's.
  StatusOr<bool> WaitSent(const Job& j, std::chrono::steady_clock::time_point deadline);
  // One round of j (Slice, then the broken report, the publish and j.work), under the
  // rounds lock.
  void Round(uint64_t strobe, Job& j);
  // Bell thread: a job round of j if no strobe is being applied; true if it drained,
  // published or moved something.
  bool JobRound(Job& j);
  void Slice(uint64_t strobe, Job& j);
  bool Exchange(uint64_t strobe, Job& j, std::vector<Posted>* all);
  void Record(uint64_t strobe, Job& j, std::vector<Posted>& all);
  void ReplaySteps(Job& j, std::vector<Posted>& all);
  void DrainDecisions(Job& j);
  void StopReplay(Job& j, ReplayStop stop);
  bool MoveData(uint64_t strobe, Job& j);
  // MoveData's small copies between this node's ranks, done together; returns which of
  // plan.moves it did.
  std::vector<bool> BatchLocalCopies(Job& j, const SlicePlan& plan);
  void Publish(Job& j);
  bool WaitBlocks(uint64_t strobe, Job& j, uint32_t event, const std::vector<uint64_t>& offsets,
                  uint32_t magic, const std::vector<uint32_t>& from);
  pid_t RankPid(Rank& r);
  // The job, or nullptr; takes s_->mu.
  std::shared_ptr<Job> FindJob(uint64_t job);

  prim::Node* node_;
  BcsEngineOptions o_;
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace gos::nodeagent

#endif  // GOS_NODEAGENT_BCS_ENGINE_H_
