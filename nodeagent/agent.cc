// The nodeagent: an IO thread (epoll over the coordinator channel, rank pipes and a signalfd
// for SIGCHLD), a strobe thread (waits for strobe events and applies them) and a staging
// thread (stores staged chunks). Local job state is under mu_.
#include "nodeagent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "gos/bcs/channel.h"
#include "gos/eventfd.h"
#include "gos/fd.h"
#include "gos/log.h"
#include "gos/os/auth.h"
#include "gos/os/channel.h"
#include "gos/os/ckpt_ship.h"
#include "gos/os/layout.h"
#include "gos/os/messages.h"
#include "gos/prim/prim.h"
#include "gos/storage/chunks.h"
#include "gos/storage/manifest.h"
#include "nodeagent/bcs_engine.h"
#include "nodeagent/cpu_bind.h"
#include "nodeagent/criu.h"
#include "nodeagent/freezer.h"
#include "nodeagent/launcher.h"

namespace gos::nodeagent {
namespace {

using os::Channel;
using os::Frame;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64u << 10;

// SIGKILL to the process of a pidfd (none: -1); unlike a pid, it cannot hit a reused pid.
void KillPidfd(int pidfd) {
  if (pidfd >= 0) ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
}

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
};

// A rank that runs: the caller's ends of its pipes. Only rank 0 reads stdin.
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

// The BCS engine's view of a launched or restored job.
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
  bool OnlyComputeRunning(const os::Strobe& s) const;
  // origin: the strobe that first carried the LAUNCH (the incarnation's mark).
  void Launch(const os::LaunchCommand& l, uint64_t origin, uint32_t current_row);
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
                        std::shared_ptr<CkptCancel> cancel);
  void Restore(const os::StrobeCommand& c);
  // Record and replay (docs/specs/replay.md).
  // Sends the job's recorded segments to the coordinator: when enough has piled up or a
  // second has passed, or everything when final (under mu_).
  void ShipRecord(LocalJob& j, bool final);
  // Every segment of a log to replay arrived: decode it into the plan the launch will use.
  void OnReplayDataEnd(const os::ReplayDataEnd& m);
  // kStop: freeze and hold the job; tell the coordinator where its ranks are (under mu_).
  void StopJob(LocalJob& j);
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
  // Removes the job's kept dumps but those of epochs `keep` and `keep_too`.
  void DropDumps(uint64_t job, uint64_t keep, uint64_t keep_too);
  // A CRIU pages image of an earlier dump, moved where the next dump will write over it.
  struct RecycledFile {
    std::string path;
    struct timespec mtime;
  };
  // Moves the CRIU pages images of the job's kept dumps into the rank dirs of its dump of
  // `epoch` at `scratch` (gos's CRIU writes over them instead of filling fresh memory, see
  // scripts/criu-patches/0003), then removes the job's other dumps.
  std::vector<RecycledFile> RecycleDumps(uint64_t job, uint64_t epoch, const std::string& scratch,
                                         const std::vector<std::pair<uint32_t, pid_t>>& ranks);
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
  {
    std::error_code ec2;
    std::filesystem::create_directories(o_.init_root, ec2);
    std::filesystem::create_directories(o_.scratch_dir, ec2);
    if (ec2) return InternalError("cannot create " + o_.scratch_dir + ": " + ec2.message());
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
  if (ch_) {
    Unwatch(ch_->fd());
    ch_.reset();
  }
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
  if (j.reported || !node_) return;
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

void NodeAgentImpl::StrobeLoop() {
  SetThreadName("agent-strobe");
  // Its sleeps are short waits (for a cgroup to freeze): the default 50 us of timer slack
  // would double them.
  ::prctl(PR_SET_TIMERSLACK, 1000UL);
  while (!stop_ && !lost_) {
    auto got = node_->WaitEvent(os::kEventStrobe, std::chrono::milliseconds(200));
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
    StartCheckpoints();
    if (bcs_) bcs_->OnStrobe(best->strobe, best->row, best->early);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, j] : jobs_) {
        if (j.record) ShipRecord(j, false);
      }
    }
    last_strobe_ = best->strobe;
    node_->Store(os::kVarApplied, static_cast<int64_t>(best->strobe));
  }
}

// Strobe s brings no command, and this node runs only jobs that do not communicate through
// gos, none held, checkpointing, recorded or ended (under mu_): its progress thread need not
// poll after its messages (see CoordinatorImpl::OnlyComputeRunning).
bool NodeAgentImpl::OnlyComputeRunning(const os::Strobe& s) const {
  if (!s.commands.empty() || jobs_.empty()) return false;
  for (const auto& [id, j] : jobs_) {
    if (j.bcs || j.hold || j.ckpt_epoch != 0 || j.record || j.replay || j.reported) return false;
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
  ::mkdir(j.dir.c_str(), 0700);
  // The job dir and staged files belong to the job's user.
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
  for (uint32_t i = 0; i < mine.size(); ++i) {
    const uint32_t rank = mine[i];
    if (failure.empty()) {
      RankSpec spec;
      if (!(l.flags & os::kLaunchNoBind)) {
        spec.cpus = RankCpus(cpus_, i, static_cast<uint32_t>(mine.size()));
      }
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
      spec.init_dir = InitDir(l.job, rank);
      auto p = LaunchRank(spec);
      if (p.ok()) {
        if (j.bcs) bcs_->SetRankInit(l.job, rank, p->pid);
        j.ranks.push_back(StartedRank(rank, *p));
        continue;
      }
      failure = p.status().ToString();
    }
    // Could not start: report it as exit 127 with the reason on the rank's stderr.
    j.ranks.push_back(
        NotStarted(ch_, l.job, rank, "cannot start rank " + std::to_string(rank) + ": " + failure));
  }
  WatchOutputs(j);
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
  j.killed = true;
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
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    GOS_LOG(kWarn, "nodeagent") << "cannot create " << dir << ": " << ec.message();
    return "";
  }
  ::chmod(dir.c_str(), 0700);
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

// ---- Record and replay (docs/specs/replay.md) ----------------------------------------

void NodeAgentImpl::ShipRecord(LocalJob& j, bool final) {
  if (!j.record || !bcs_) return;
  auto now = std::chrono::steady_clock::now();
  // Bigger segments compress better; a node that dies loses at most this much of the log.
  if (!final && now - j.record_shipped < std::chrono::seconds(10) &&
      bcs_->RecordPending(j.id) < (1u << 20)) {
    return;
  }
  j.record_shipped = now;
  for (RecordSegment& seg : bcs_->TakeRecord(j.id)) {
    os::ReplaySegment m{j.id, seg.stream, std::move(seg.bytes), j.launch};
    if (ch_) ch_->Send(Frame::kReplaySegment, os::Encode(m)).IgnoreError();
  }
}

void NodeAgentImpl::OnReplayDataEnd(const os::ReplayDataEnd& m) {
  auto segments = std::move(replay_inbox_[m.job]);
  replay_inbox_.erase(m.job);
  os::RestoreReady ready;
  ready.job = m.job;
  ready.rank = node_id_;  // a replay log is confirmed per node
  auto plan = std::make_shared<ReplayPlan>();
  plan->stop_at = m.stop_at;
  plan->completed = m.completed;
  plan->failed_rank = m.failed_rank;
  auto log = replay::DecodeJobLog(segments[replay::kJobStream]);
  if (!log.ok()) {
    ready.ok = false;
    ready.message = "node " + std::to_string(node_id_) + ": " + log.status().ToString();
  } else {
    plan->log = std::move(*log);
    if (m.from_epoch != 0) {
      // The ranks come back from that checkpoint: the replay starts at the step it was at.
      plan->channel_job = m.of;
      bool found = false;
      for (const replay::CheckpointMark& mark : plan->log.checkpoints) {
        if (mark.epoch != m.from_epoch) continue;
        plan->start_step = mark.steps;
        found = true;
      }
      if (!found) {
        ready.ok = false;
        ready.message = "the recording of job " + std::to_string(m.of) +
                        " has no mark for checkpoint " + std::to_string(m.from_epoch);
      }
    }
    for (auto& [stream, segs] : segments) {
      if (!replay::IsRankStream(stream)) continue;
      auto bytes = replay::DecodeBytesSegments(segs);
      if (!bytes.ok()) {
        ready.ok = false;
        ready.message = "node " + std::to_string(node_id_) + ": rank " +
                        std::to_string(stream - replay::RankStream(0)) + ": " +
                        bytes.status().ToString();
        break;
      }
      plan->decisions[stream - replay::RankStream(0)] = std::move(*bytes);
    }
  }
  if (ready.ok) {
    std::lock_guard<std::mutex> lock(replay_mu_);
    replay_plans_[m.job] = std::move(plan);
  }
  if (ch_) ch_->Send(Frame::kRestoreReady, os::Encode(ready)).IgnoreError();
}

// Ranks are stopped with SIGSTOP rather than the freezer: a debugger can attach to a stopped
// process, not to a frozen one.
void NodeAgentImpl::StopJob(LocalJob& j) {
  j.stopped = true;
  j.hold = true;
  if (j.bcs && bcs_) bcs_->Hold(j.id, true);
  for (const Rank& r : j.ranks) {
    pid_t pid = r.exited ? 0 : (j.bcs && bcs_ ? bcs_->RankPidOf(j.id, r.rank) : r.pid);
    if (pid > 0) ::kill(pid, SIGSTOP);
  }
  if (j.frozen && j.cgroup) {
    Status st = j.cgroup->Thaw();  // the SIGSTOPs take effect
    if (!st.ok()) GOS_LOG(kWarn, "nodeagent") << "thaw job " << j.id << ": " << st.ToString();
    j.frozen = false;
  }
  os::ReplayStopped m;
  m.job = j.id;
  for (const Rank& r : j.ranks) {
    os::ReplayRank x;
    x.rank = r.rank;
    x.node = node_id_;
    x.host = o_.name;
    x.pid = r.exited ? 0 : (j.bcs && bcs_ ? bcs_->RankPidOf(j.id, r.rank) : r.pid);
    m.ranks.push_back(std::move(x));
  }
  if (ch_) ch_->Send(Frame::kReplayStopped, os::Encode(m)).IgnoreError();
}

// ---- Checkpoint and restore (docs/specs/checkpoint.md) ------------------------------

namespace {

int64_t EpochMark(uint64_t job, uint64_t epoch) {
  return static_cast<int64_t>((job << 24) | (epoch & 0xffffff));
}

// "key=value" lines of the gos-rank file a checkpoint leaves next to the CRIU images.
// Resident (and swapped) memory of the processes in a cgroup directory.
uint64_t JobMemoryBytes(const std::string& cgroup) {
  uint64_t total = 0;
  auto text = [](const std::string& path) {
    auto t = ReadWholeFile(path);
    return t.ok() ? *t : std::string();
  };
  std::istringstream procs(text(cgroup + "/cgroup.procs"));
  for (pid_t pid; procs >> pid;) {
    std::istringstream status(text("/proc/" + std::to_string(pid) + "/status"));
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmRSS:", 0) == 0 || line.rfind("VmSwap:", 0) == 0) {
        total += std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10) << 10;
      }
    }
  }
  return total;
}

std::map<std::string, std::string> ParseMeta(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (size_t eq = line.find('='); eq != std::string::npos) {
      out[line.substr(0, eq)] = line.substr(eq + 1);
    }
    start = end + 1;
  }
  return out;
}

// Regular files under dir, as paths relative to it, sorted.
std::vector<std::string> ListFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) {
      out.push_back(std::filesystem::relative(it->path(), dir, ec).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status CopyFile(const std::string& from, const std::string& to, mode_t mode) {
  std::error_code ec;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return InternalError("copy " + from + " to " + to + ": " + ec.message());
  ::chmod(to.c_str(), mode);
  return OkStatus();
}

}  // namespace

// Strobe thread, before the BCS engine runs this strobe: starts every ordered checkpoint whose
// job is quiescent now. Its ranks are frozen and held, their output drained, and the BCS
// state saved; a worker dumps and ships while the strobe thread goes on.
void NodeAgentImpl::StartCheckpoints() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, j] : jobs_) {
    if (j.ckpt_epoch == 0) continue;
    const uint64_t epoch = j.ckpt_epoch;
    std::string failure;
    std::vector<std::pair<uint32_t, pid_t>> ranks;
    for (const Rank& r : j.ranks) {
      if (r.exited) {
        failure = "rank " + std::to_string(r.rank) + " on node " + std::to_string(node_id_) +
                  " has already exited";
      }
      ranks.emplace_back(r.rank, r.pid);
    }
    if (!j.cgroup) failure = "the job has no cgroup on node " + std::to_string(node_id_);
    if (failure.empty() && j.bcs && bcs_ && !bcs_->Quiescent(id)) continue;  // next strobe
    j.ckpt_epoch = 0;
    if (!failure.empty()) {
      if (ch_) ch_->Send(Frame::kCkptFailed, os::EncodeJobBytes(id, failure)).IgnoreError();
      node_->Store(os::VarDumped(j.slot), EpochMark(id, epoch));
      continue;
    }
    Status st = j.cgroup->Freeze(true);
    if (!st.ok()) GOS_LOG(kWarn, "nodeagent") << "freeze job " << id << ": " << st.ToString();
    j.frozen = true;
    j.hold = true;
    if (j.record && bcs_) {
      bcs_->MarkCheckpoint(id, epoch);
      // Everything recorded up to the mark goes to the coordinator now, ahead of the epoch's
      // rank manifests on this channel: once the epoch commits, the log holds the run up to
      // it on every node, so a restart from it can cut the log there and go on
      // (docs/specs/replay.md, "Restarted jobs"). The ranks are frozen: their record rings
      // hold all they wrote before the dump.
      ShipRecord(j, true);
    }
    // Output written before the freeze reaches the user now, not after a restore.
    for (const Rank& r : j.ranks) {
      for (int fd : {r.out_fd, r.err_fd}) {
        if (fd >= 0) OnPipeLocked(fd);
      }
    }
    std::string matcher;
    std::map<uint32_t, std::string> channels;
    if (j.bcs && bcs_) {
      bcs_->Flush(id);
      auto m = bcs_->SaveMatcher(id);
      if (m.ok()) matcher = std::move(*m);
      for (const Rank& r : j.ranks) {
        auto c = bcs_->SaveChannel(id, r.rank);
        if (c.ok()) {
          channels[r.rank] = std::move(*c);
        } else if (m.ok()) {
          m = c.status();
        }
      }
      if (!m.ok()) {
        // E.g. a rank's completion ring is full: this epoch cannot be taken consistently.
        j.hold = false;  // thawed again with its row
        std::string why =
            "node " + std::to_string(node_id_) + ": saving the BCS state: " + m.status().ToString();
        if (ch_) ch_->Send(Frame::kCkptFailed, os::EncodeJobBytes(id, why)).IgnoreError();
        node_->Store(os::VarDumped(j.slot), EpochMark(id, epoch));
        continue;
      }
      bcs_->Hold(id, true);
    }
    std::map<uint32_t, std::string> exe_dirs;
    for (const Rank& r : j.ranks) {
      if (!r.exe_dir.empty()) exe_dirs[r.rank] = r.exe_dir;
    }
    j.ckpt_cancel = std::make_shared<CkptCancel>();
    StartWorker([this, id, epoch, base = j.ckpt_base, slot = j.slot, level = j.ckpt_level,
                 cancel = j.ckpt_cancel, ranks = std::move(ranks), cgroup = j.cgroup->path(),
                 dir = j.restored_dir.empty() ? j.dir : j.restored_dir, program = j.program,
                 matcher = std::move(matcher), channels = std::move(channels),
                 exe_dirs = std::move(exe_dirs)]() mutable {
      CheckpointWorker(id, epoch, base, slot, level, std::move(ranks), std::move(cgroup),
                       std::move(dir), std::move(program), std::move(matcher), std::move(channels),
                       std::move(exe_dirs), std::move(cancel));
    });
  }
}

void NodeAgentImpl::StartWorker(std::function<void()> work) {
  std::lock_guard<std::mutex> wl(work_mu_);
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (!*it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    it = workers_.erase(it);
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  workers_.push_back({std::thread([work = std::move(work), done] {
                        SetThreadName("agent-worker");
                        work();
                        *done = true;
                      }),
                      done});
}

void NodeAgentImpl::CheckpointWorker(uint64_t job, uint64_t epoch, uint64_t base, uint32_t slot,
                                     int level, std::vector<std::pair<uint32_t, pid_t>> ranks,
                                     std::string cgroup, std::string job_dir, std::string program,
                                     std::string matcher, std::map<uint32_t, std::string> channels,
                                     std::map<uint32_t, std::string> exe_dirs,
                                     std::shared_ptr<CkptCancel> cancel) {
  const auto t0 = SteadyClock::now();
  const int64_t mark = EpochMark(job, epoch);
  // The dumps hold about the ranks' resident memory.
  const uint64_t memory = JobMemoryBytes(cgroup);
  const bool fits = MakeScratchRoom(job, memory + memory / 8 + (8u << 20));
  const std::string scratch = fits ? CkptDir(job, epoch) : SpillDir(job, epoch);
  if (!fits) {
    GOS_LOG(kInfo, "nodeagent") << "job " << job << " epoch " << epoch << ": no room in "
                                << o_.scratch_dir << "; dumping to " << scratch;
  }
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  // The job's kept dumps (its last committed one included: a restart that finds no local
  // copy takes the epoch from the store) give their pages images to this dump, which writes
  // over them: on this VM filling memory the guest has not used lately costs ~2.5 s/GiB,
  // writing over cached file pages ~0.3 s/GiB.
  std::vector<RecycledFile> recycled;
  if (fits) {
    recycled = RecycleDumps(job, epoch, scratch, ranks);
  } else {
    DropDumps(job, base, base);
  }
  // Runs what tells the coordinator about the epoch, unless the job was killed or forgotten:
  // then the epoch is dropped here and false returned. (KillJob holds mu_ when it cancels:
  // `tell` must not take it.)
  auto report = [&](const std::function<void()>& tell) {
    std::lock_guard<std::mutex> cl(cancel->mu);
    if (cancel->cancelled) {
      std::filesystem::remove_all(scratch, ec);
      return false;
    }
    tell();
    return true;
  };
  auto fail = [&](const std::string& why) {
    auto ch = channel();
    report([&] {
      std::string msg = "node " + std::to_string(node_id_) + " (" + o_.name + "): " + why;
      GOS_LOG(kWarn, "nodeagent") << "job " << job << " epoch " << epoch << ": " << msg;
      if (ch) ch->Send(Frame::kCkptFailed, os::EncodeJobBytes(job, msg)).IgnoreError();
    });
    std::filesystem::remove_all(scratch, ec);
  };
  // 1. Dump every local rank (the job is frozen and held).
  Status st;
  for (const auto& [rank, pid] : ranks) {
    if (cancel->cancelled) {
      st = CancelledError("the job was killed");
      break;
    }
    const std::string dir = scratch + "/r" + std::to_string(rank);
    std::filesystem::create_directories(dir + "/job", ec);
    if (ec) {
      st = InternalError("create " + dir + ": " + ec.message());
      break;
    }
    DumpRequest req;
    req.init_pid = pid;
    req.images_dir = dir;
    req.freezer_cgroup = cgroup;
    req.on_running = [&cancel](int pidfd) {
      std::lock_guard<std::mutex> cl(cancel->mu);
      cancel->criu_pidfd = pidfd;
      if (cancel->cancelled) KillPidfd(pidfd);
    };
    auto dumped = DumpRank(req);
    if (!dumped.ok()) {
      st = dumped.status().WithContext("rank " + std::to_string(rank));
      break;
    }
    const std::string& rank_dir = exe_dirs.count(rank) ? exe_dirs[rank] : job_dir;
    std::string meta =
        "job_dir=" + rank_dir + "\nprogram=" + program + "\nrank=" + std::to_string(rank) + "\n";
    st = WriteWholeFile(dir + "/gos-rank", meta, 0600);
    if (st.ok() && !program.empty()) {
      // The executable is not in CRIU's images: it goes with them (deduplicated by content).
      if (::link((rank_dir + "/" + program).c_str(), (dir + "/job/" + program).c_str()) != 0) {
        // Another file system (the scratch dir on a tmpfs): a copy, with the mode CRIU checks.
        struct stat exe {};
        const mode_t mode =
            ::stat((rank_dir + "/" + program).c_str(), &exe) == 0 ? exe.st_mode & 07777 : 0700;
        st = CopyFile(rank_dir + "/" + program, dir + "/job/" + program, mode);
      }
    }
    if (st.ok() && channels.count(rank)) {
      st = WriteWholeFile(dir + "/gos-channel", channels[rank], 0600);
      if (st.ok()) st = WriteWholeFile(dir + "/gos-matcher", matcher, 0600);
    }
    if (!st.ok()) break;
  }
  // Recycled pages images that this dump did not write over are not part of it.
  for (const RecycledFile& f : recycled) {
    struct stat now {};
    if (::stat(f.path.c_str(), &now) == 0 && now.st_mtim.tv_sec == f.mtime.tv_sec &&
        now.st_mtim.tv_nsec == f.mtime.tv_nsec) {
      ::unlink(f.path.c_str());
    }
  }
  // 2. The job may run again once every node is here (the coordinator's RESUME).
  const int64_t pause_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t0).count();
  if (!st.ok()) {
    if (st.code() == StatusCode::kAborted) {
      // criu died in the middle: the job's ranks here must not run again. The coordinator
      // restarts the job from its newest epoch or fails it (BROKEN_DUMP); it stays frozen
      // meanwhile.
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto jt = jobs_.find(job); jt != jobs_.end()) jt->second.dump_broke = true;
      }
      auto ch = channel();
      report([&] {
        const std::string msg = "node " + std::to_string(node_id_) + " (" + o_.name +
                                "): checkpoint epoch " + std::to_string(epoch) + ": " +
                                st.message();
        if (ch) ch->Send(Frame::kBrokenDump, os::EncodeJobBytes(job, msg)).IgnoreError();
      });
    }
    fail(st.ToString());
    report([&] { node_->Store(os::VarDumped(slot), mark); });
    return;
  }
  if (!report([&] {
        node_->Store(os::VarDumped(slot), mark);
        // Wakes the coordinator's strobe (best effort: its quantum strobe confirms anyway).
        node_
            ->XferAndSignal(prim::NodeSet{0}, &mark, sizeof mark, os::DumpedSlot(node_id_),
                            os::kEventDumped)
            .IgnoreError();
      })) {
    return;
  }
  // 3. Cut, hash, compress and ship what the store does not hold yet, while the job runs —
  // not before: until every node has dumped and the job is resumed, that work would take the
  // cores from the dumps still running here and on the other nodes of this machine, and from
  // the strobes that resume the job (a 4 x 64 MiB full epoch paused 175-245 ms, 50 ms of it
  // after the last dump). A job that is not resumed within a minute ships anyway.
  {
    std::unique_lock<std::mutex> cl(cancel->mu);
    const auto until = SteadyClock::now() + std::chrono::minutes(1);
    while (!cancel->resumed && !cancel->cancelled && !stop_ && !lost_ &&
           SteadyClock::now() < until) {
      cancel->cv.wait_for(cl, std::chrono::milliseconds(100));
    }
  }
  // Chunks of the job's previous dump are named from the hash cache, without a SHA-256.
  std::shared_ptr<storage::ChunkHashCache> hashes = HashCacheOf(job, true);
  hashes->NextGeneration();
  std::set<storage::ChunkHash> known, referenced;
  {
    std::lock_guard<std::mutex> wl(work_mu_);
    auto& per_job = shipped_[job];
    if (auto it = per_job.find(base); base != 0 && it != per_job.end()) known = it->second;
  }
  os::CkptBatch head;
  head.job = job;
  head.epoch = epoch;
  os::BatchShipment shipment(outbox_.get(), 0, head, [&] {
    return cancel->cancelled || lost_ || stop_ ? CancelledError("the job was killed") : OkStatus();
  });
  for (const auto& [rank, pid] : ranks) {
    (void)pid;
    if (lost_ || stop_) return;
    const std::string dir = scratch + "/r" + std::to_string(rank);
    storage::EpochManifest part;
    part.job = job;
    part.epoch = epoch;
    part.pause_ms = pause_ms;
    storage::EpochRank er;
    er.rank = rank;
    er.node = node_id_;
    for (const std::string& name : ListFiles(dir)) {
      if (name == "dump.log" || name == "criu.out") continue;  // criu's logs of this dump
      storage::FileEntry fe;
      st = storage::ChunkFile(
          dir, name,
          [&](const storage::ChunkRef& ref, std::span<const uint8_t> raw) -> Status {
            if (cancel->cancelled) return CancelledError("the job was killed");
            referenced.insert(ref.hash);
            if (known.count(ref.hash)) return OkStatus();
            os::CkptBatchChunk chunk;
            chunk.hash = ref.hash;
            chunk.raw_len = ref.raw_len;
            GOS_RETURN_IF_ERROR(shipment.Add(std::move(chunk), storage::CompressChunk(raw, level)));
            known.insert(ref.hash);
            return OkStatus();
          },
          &fe, hashes.get());
      if (!st.ok()) break;
      er.files.push_back(std::move(fe));
    }
    // The manifest names the rank's chunks: the store holds them all before it gets it.
    if (st.ok()) st = shipment.Finish();
    if (!st.ok()) return fail(st.ToString());
    part.ranks.push_back(std::move(er));
    std::vector<uint8_t> bytes = storage::EncodeManifest(part);
    auto ch = channel();
    if (!ch) return;
    bool told = report([&] {
      ch->Send(Frame::kCkptRank, os::EncodeJobBytes(job, std::string(bytes.begin(), bytes.end())))
          .IgnoreError();
    });
    if (!told) return;
  }
  {
    std::lock_guard<std::mutex> wl(work_mu_);
    auto& per_job = shipped_[job];
    per_job[epoch] = std::move(referenced);
    // Keep the base (it may still be the newest committed one) and this epoch.
    for (auto it = per_job.begin(); it != per_job.end();) {
      it = it->first != base && it->first != epoch ? per_job.erase(it) : std::next(it);
    }
  }
  if (!report([&] { node_->Store(os::VarStored(slot), mark); })) return;
  // The dump stays here: a restart that places its ranks on this node again restores them
  // from it instead of receiving every chunk from the store.
  if (const char* k = getenv("GOS_KEEP_DUMPS");
      !fits || (k != nullptr && std::strcmp(k, "0") == 0)) {
    std::filesystem::remove_all(scratch, ec);
  } else {
    KeepDump(job, epoch, base);
  }
  GOS_LOG(kInfo, "nodeagent") << "job " << job << " epoch " << epoch << ": " << ranks.size()
                              << " ranks dumped in " << pause_ms << " ms and shipped";
}

bool NodeAgentImpl::MakeScratchRoom(uint64_t job, uint64_t need) {
  // Free bytes there; if that cannot be told, plenty (the dump then says what is wrong).
  auto available = [&] {
    struct statvfs vfs {};
    if (::statvfs(o_.scratch_dir.c_str(), &vfs) != 0) return UINT64_MAX / 2;
    return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  };
  if (available() >= need) return true;
  const std::string root = o_.scratch_dir + "/ckpt";
  const std::string mine = "j" + std::to_string(job) + "-e";
  // Nothing is dropped for a dump that would not fit even then.
  if (available() + DirBytes(root) < need) return false;
  std::error_code ec;
  for (bool own : {false, true}) {
    for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
      if ((e.path().filename().string().rfind(mine, 0) == 0) == own) {
        std::error_code rec;
        std::filesystem::remove_all(e.path(), rec);
      }
    }
    if (available() >= need) return true;
  }
  return false;
}

void NodeAgentImpl::DropDumps(uint64_t job, uint64_t keep, uint64_t keep_too) {
  const std::string mine = "j" + std::to_string(job) + "-e";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(o_.scratch_dir + "/ckpt", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(mine, 0) == 0 && name != mine + std::to_string(keep) &&
        name != mine + std::to_string(keep_too)) {
      std::error_code rec;
      std::filesystem::remove_all(e.path(), rec);
    }
  }
}

std::vector<NodeAgentImpl::RecycledFile> NodeAgentImpl::RecycleDumps(
    uint64_t job, uint64_t epoch, const std::string& scratch,
    const std::vector<std::pair<uint32_t, pid_t>>& ranks) {
  const std::string mine = "j" + std::to_string(job) + "-e";
  std::vector<std::pair<uint64_t, std::string>> kept;  // (epoch, dir), newest first
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(o_.scratch_dir + "/ckpt", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(mine, 0) != 0 || name == mine + std::to_string(epoch)) continue;
    kept.emplace_back(std::strtoull(name.c_str() + mine.size(), nullptr, 10), e.path().string());
  }
  std::sort(kept.rbegin(), kept.rend());
  std::vector<RecycledFile> out;
  for (const auto& [rank, pid] : ranks) {
    (void)pid;
    const std::string r = "/r" + std::to_string(rank);
    for (const auto& [kept_epoch, dir] : kept) {
      (void)kept_epoch;
      size_t before = out.size();
      for (const auto& e : std::filesystem::directory_iterator(dir + r, ec)) {
        const std::string name = e.path().filename().string();
        struct stat st {};
        // Only CRIU's pages images, and none that is linked elsewhere (a restore dir).
        if (name.rfind("pages-", 0) != 0 || ::lstat(e.path().c_str(), &st) != 0 ||
            !S_ISREG(st.st_mode) || st.st_nlink != 1) {
          continue;
        }
        std::filesystem::create_directories(scratch + r, ec);
        const std::string to = scratch + r + "/" + name;
        if (::rename(e.path().c_str(), to.c_str()) == 0) out.push_back({to, st.st_mtim});
      }
      if (out.size() > before) break;  // this rank's newest kept dump
    }
  }
  DropDumps(job, epoch, epoch);
  return out;
}

void NodeAgentImpl::KeepDump(uint64_t job, uint64_t epoch, uint64_t base) {
  constexpr size_t kKeptDumpJobs = 4;
  const std::string root = o_.scratch_dir + "/ckpt";
  const std::string mine = "j" + std::to_string(job) + "-e";
  std::error_code ec;
  // Newest dump first, per other job: job prefix -> (mtime, its dump dirs).
  std::map<std::string, std::pair<std::filesystem::file_time_type, std::vector<std::string>>>
      others;
  // This job keeps `epoch` and its last committed epoch `base` (a restart wants that one if
  // `epoch` never commits); anything else is aborted or superseded.
  DropDumps(job, epoch, base);
  for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(mine, 0) == 0) continue;
    auto& [newest, dirs] = others[name.substr(0, name.find("-e"))];
    newest = std::max(newest, std::filesystem::last_write_time(e.path(), ec));
    dirs.push_back(name);
  }
  std::vector<std::pair<std::filesystem::file_time_type, const std::vector<std::string>*>> jobs;
  for (const auto& [prefix, kept] : others) jobs.emplace_back(kept.first, &kept.second);
  std::sort(jobs.rbegin(), jobs.rend());
  for (size_t i = kKeptDumpJobs - 1; i < jobs.size(); ++i) {
    for (const std::string& name : *jobs[i].second)
      std::filesystem::remove_all(root + "/" + name, ec);
  }
}

void NodeAgentImpl::OnRestoreLocal(std::span<const uint8_t> payload) {
  auto m = storage::DecodeManifest(payload);
  if (!m.ok() || m->ranks.size() != 1) {
    GOS_LOG(kWarn, "nodeagent") << "bad local restore request: "
                                << (m.ok() ? "not one rank" : m.status().ToString());
    return;
  }
  const storage::EpochRank& er = m->ranks[0];
  os::RestoreReady reply;
  reply.job = m->job;
  reply.rank = er.rank;
  const std::string src = CkptDir(m->job, m->epoch) + "/r" + std::to_string(er.rank);
  const std::string dst = LocalRestoreDir(m->job, m->epoch, er.rank);
  std::error_code ec;
  // What an earlier attempt got from the store goes: this one uses the node's copy.
  if (dst != RestoreDir(m->job, m->epoch, er.rank)) {
    std::filesystem::remove_all(RestoreDir(m->job, m->epoch, er.rank), ec);
  }
  auto refuse = [&](const std::string& why) {
    reply.ok = false;
    reply.message = why;
    std::filesystem::remove_all(dst, ec);
  };
  if (!std::filesystem::is_directory(src, ec)) {
    refuse("no copy of this dump on node " + std::to_string(node_id_));
  } else {
    std::filesystem::remove_all(dst, ec);
    // This node named the copy's chunks when it shipped them: its hash cache checks them
    // without a SHA-256 each (a changed chunk misses the cache and is hashed in full).
    std::shared_ptr<storage::ChunkHashCache> hashes = HashCacheOf(m->job, false);
    for (const storage::FileEntry& want : er.files) {
      storage::FileEntry got;
      // Mapped: no dump of this job writes these files while it is being restarted.
      Status st = storage::ChunkFile(
          src, want.name,
          [](const storage::ChunkRef&, std::span<const uint8_t>) { return OkStatus(); }, &got,
          hashes.get(), storage::ChunkRead::kMap);
      if (!st.ok()) {
        refuse(st.ToString());
        break;
      }
      if (got.size != want.size || got.chunks != want.chunks) {
        refuse("the local copy of " + want.name + " differs from the epoch's");
        break;
      }
      const std::filesystem::path to = std::filesystem::path(dst) / want.name;
      std::filesystem::create_directories(to.parent_path(), ec);
      if (::link((src + "/" + want.name).c_str(), to.c_str()) != 0) {
        // The scratch dir is on another file system than the state dir: a copy.
        Status copied = errno == EXDEV ? CopyFile(src + "/" + want.name, to.string(), want.mode)
                                       : ErrnoError(errno, "link " + want.name);
        if (!copied.ok()) {
          refuse(copied.ToString());
          break;
        }
      }
    }
  }
  if (reply.ok) {
    GOS_LOG(kInfo, "nodeagent") << "job " << m->job << " epoch " << m->epoch << " rank " << er.rank
                                << ": restoring from this node's copy of the dump";
  } else {
    GOS_LOG(kInfo, "nodeagent") << "job " << m->job << " epoch " << m->epoch << " rank " << er.rank
                                << ": no usable local copy (" << reply.message
                                << "): the coordinator ships it";
  }
  if (ch_) ch_->Send(Frame::kRestoreLocalReply, os::Encode(reply)).IgnoreError();
}

void NodeAgentImpl::RestoreInLoop() {
  os::BatchInbox inbox(node_.get(), os::kRestoreRoute, key_,
                       [this](const os::CkptBatch& b) { return TakeRestoreBatch(b); });
  while (!stop_ && !lost_) inbox.Poll(std::chrono::milliseconds(200));
}

std::string NodeAgentImpl::TakeRestoreBatch(const os::CkptBatch& b) {
  const std::string what = "job " + std::to_string(b.job) + " epoch " + std::to_string(b.epoch) +
                           " rank " + std::to_string(b.rank);
  const std::string dir = RestoreDir(b.job, b.epoch, b.rank);
  const auto key = std::make_tuple(b.job, b.epoch, b.rank);
  {
    std::lock_guard<std::mutex> rl(restore_mu_);
    RankRestore& r = restoring_[key];
    if (b.attempt < r.attempt) return what + ": a batch of an earlier attempt";
    if (b.attempt > r.attempt) {
      // A new attempt: nothing an earlier one wrote or found counts.
      r = {b.attempt, ""};
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      // Nor what an earlier attempt linked from this node's copy of the dump.
      std::filesystem::remove_all(LocalRestoreDir(b.job, b.epoch, b.rank), ec);
    }
    if (!r.error.empty()) return r.error;
  }
  std::string error;
  Fd fd;
  std::string open_path;  // the file fd is open on: a file's chunks come in order
  for (const os::CkptBatchChunk& c : b.chunks) {
    const std::string where = what + ": file " + c.file + ": ";
    auto raw = storage::DecompressChunk(c.data, storage::ChunkRef{c.hash, c.raw_len});
    if (!raw.ok()) {
      error = where + raw.status().message();
      break;
    }
    const std::string path = dir + "/" + c.file;
    if (open_path != path) {
      open_path.clear();
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
      fd.Reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, c.mode & 07777));
      if (fd.get() < 0) {
        error = where + "create: " + std::strerror(errno);
        break;
      }
      open_path = path;
    }
    // Until all is written or an error (a short write is no error: ENOSPC shows on the next).
    for (size_t done = 0; done < raw->size() && error.empty();) {
      ssize_t n = ::pwrite(fd.get(), raw->data() + done, raw->size() - done,
                           static_cast<off_t>(c.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) error = where + "write: " + std::strerror(n < 0 ? errno : EIO);
      if (n > 0) done += static_cast<size_t>(n);
    }
    if (!error.empty()) break;
  }
  if (!error.empty()) {
    std::lock_guard<std::mutex> rl(restore_mu_);
    RankRestore& r = restoring_[key];
    if (r.attempt == b.attempt && r.error.empty()) r.error = error;
  }
  return error;
}

// IO thread: every batch of the rank was answered. Reports the first problem its batches had,
// or creates its empty files (they have no chunks) and reports it ready.
void NodeAgentImpl::OnRestoreRankEnd(const os::RestoreRankEnd& m) {
  os::RestoreReady ready;
  ready.job = m.job;
  ready.rank = m.rank;
  const std::string dir = RestoreDir(m.job, m.epoch, m.rank);
  {
    std::lock_guard<std::mutex> rl(restore_mu_);
    auto it = restoring_.find(std::make_tuple(m.job, m.epoch, m.rank));
    if (it != restoring_.end() && it->second.attempt <= m.attempt) {
      if (it->second.attempt == m.attempt && !it->second.error.empty()) {
        ready.ok = false;
        ready.message = it->second.error;
      }
      restoring_.erase(it);
    }
  }
  if (ready.ok) {
    for (const std::string& f : m.files) {
      const std::string path = dir + "/" + f;
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0) ::close(fd);
    }
  }
  if (ch_) ch_->Send(Frame::kRestoreReady, os::Encode(ready)).IgnoreError();
}

// Strobe thread, under mu_: a RESTORE command. The job's cgroup and BCS state are made here;
// a worker restores the ranks (CRIU) and then reports them started. The job stays held.
void NodeAgentImpl::Restore(const os::StrobeCommand& c) {
  const os::LaunchCommand& l = c.launch;
  std::vector<uint32_t> mine;
  std::string failure;
  LocalJob* jp = NewLocalJob(l, c.origin, /*frozen=*/true, &mine, &failure);
  if (jp == nullptr) return;
  LocalJob& j = *jp;
  j.hold = true;
  // BCS state: the matcher (the same in every rank's images) and each rank's channel.
  const std::string first = ImagesDir(l.job, c.epoch, mine[0]);
  if (failure.empty() && ::access((first + "/gos-channel").c_str(), F_OK) == 0 && bcs_) {
    BcsRestore restore;
    auto m = ReadWholeFile(first + "/gos-matcher");
    if (m.ok()) restore.matcher = std::move(*m);
    for (uint32_t rank : mine) {
      auto ch = ReadWholeFile(ImagesDir(l.job, c.epoch, rank) + "/gos-channel");
      if (ch.ok()) restore.channels[rank] = std::move(*ch);
    }
    BcsJob bj = BcsJobOf(l, mine);
    // A recorded job restarted goes on recording: its log was cut back to this epoch's mark,
    // `base` steps into the run (RESTORE's base, docs/specs/os-protocol.md).
    if (bj.record) bj.first_step = c.base;
    if (l.flags & os::kLaunchReplay) {
      std::lock_guard<std::mutex> rl(replay_mu_);
      auto pt = replay_plans_.find(l.job);
      if (pt != replay_plans_.end()) {
        bj.replay = pt->second;
        bj.channel_job = pt->second->channel_job;
        replay_plans_.erase(pt);
      }
      j.replay = true;
    }
    auto paths = bj.replay || !(l.flags & os::kLaunchReplay)
                     ? bcs_->AddJob(bj, &restore)
                     : StatusOr<std::map<uint32_t, std::string>>(
                           FailedPreconditionError("the log to replay did not arrive"));
    if (paths.ok()) {
      j.bcs = true;
      j.record = bj.record;
      j.record_shipped = std::chrono::steady_clock::now();
    } else {
      failure = "restoring the BCS state: " + paths.status().ToString();
    }
  }
  if (!failure.empty()) {
    for (uint32_t rank : mine) {
      j.ranks.push_back(NotStarted(ch_, l.job, rank,
                                   "cannot restore rank " + std::to_string(rank) + ": " + failure));
    }
    node_->Store(os::VarStarted(l.slot), static_cast<int64_t>(l.job));
    MaybeReport(j);
    return;
  }
  std::lock_guard<std::mutex> wl(work_mu_);
  restores_.push_back([this, job = l.job, epoch = c.epoch, slot = l.slot, mine,
                       procs = j.cgroup->procs_file(), uid = l.uid, gid = l.gid,
                       bind = !(l.flags & os::kLaunchNoBind)] {
    RestoreWorker(job, epoch, slot, mine, procs, uid, gid, bind);
  });
  restore_cv_.notify_all();
}

void NodeAgentImpl::RestoreWorker(uint64_t job, uint64_t epoch, uint32_t slot,
                                  std::vector<uint32_t> ranks, std::string procs, uint32_t uid,
                                  uint32_t gid, bool bind) {
  std::vector<Rank> restored;
  std::string restored_dir, restored_program;
  os::JobExit failed;  // the first rank that could not be restored (job 0: none)
  for (uint32_t i = 0; i < ranks.size(); ++i) {
    const uint32_t rank = ranks[i];
    const std::string dir = ImagesDir(job, epoch, rank);
    Status st;
    std::string rank_dir;  // where this rank's executable goes
    // The executable must be where the dumped process had it.
    auto meta_text = ReadWholeFile(dir + "/gos-rank");
    if (!meta_text.ok()) {
      st = meta_text.status();
    } else {
      auto meta = ParseMeta(*meta_text);
      const std::string job_dir = meta["job_dir"], program = meta["program"];
      if (!job_dir.empty() && !program.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(job_dir, ec);
        ::chown(job_dir.c_str(), uid, gid);
        const std::string exe = job_dir + "/" + program;
        struct stat have {
        }, want{};
        if (::stat((dir + "/job/" + program).c_str(), &want) == 0 &&
            (::stat(exe.c_str(), &have) != 0 || have.st_size != want.st_size)) {
          // Same mode as when dumped: CRIU checks the executable's mode.
          st = CopyFile(dir + "/job/" + program, exe, want.st_mode & 07777);
          ::chown(exe.c_str(), uid, gid);
        }
        restored_dir = job_dir;
        rank_dir = job_dir;
        restored_program = program;
      }
    }
    if (st.ok()) {
      RestoreRequest req;
      req.images_dir = dir;
      req.cgroup_procs = procs;
      auto p = RestoreRank(req);
      if (p.ok()) {
        // CRIU leaves the restored tree with its own affinity: bind it as a launch would on
        // this node (it stays frozen until the job resumes).
        if (bind) {
          Status b =
              BindProcessTree(p->pid, RankCpus(cpus_, i, static_cast<uint32_t>(ranks.size())));
          if (!b.ok()) {
            GOS_LOG(kWarn, "nodeagent") << o_.name << ": job " << job << " rank " << rank
                                        << " runs unbound: " << b.ToString();
          }
        }
        restored.push_back(StartedRank(rank, *p));
        restored.back().exe_dir = rank_dir;
        continue;
      }
      st = p.status();
    }
    const std::string why = "cannot restore rank " + std::to_string(rank) + " from epoch " +
                            std::to_string(epoch) + ": " + st.ToString();
    restored.push_back(NotStarted(channel(), job, rank, why));
    if (failed.job == 0) {
      failed.job = job;
      failed.failed_rank = static_cast<int32_t>(rank);
      failed.failed_node = static_cast<int32_t>(node_id_);
      failed.exit_code = 127;
      failed.message = "node " + std::to_string(node_id_) + " (" + o_.name + "): " + why;
    }
  }
  // The job fails at once: the coordinator kills it, naming the rank.
  if (auto ch = channel(); ch && failed.job != 0) {
    ch->Send(Frame::kRankFailed, os::Encode(failed)).IgnoreError();
  }
  // The restore dirs go once the ranks are registered and reported started (declared before
  // the lock: removed after mu_ is released): removing a GiB of image files can take longer
  // than the rest of this function, and the job resumes only when every node is done.
  struct RemoveWhenDone {
    std::vector<std::string> dirs;
    ~RemoveWhenDone() {
      std::error_code ec;
      for (const std::string& d : dirs) std::filesystem::remove_all(d, ec);
    }
  } restore_dirs{
      {RestoreJobDir(o_.state_dir, job, epoch), RestoreJobDir(o_.scratch_dir, job, epoch)}};
  std::lock_guard<std::mutex> lock(mu_);
  auto jt = jobs_.find(job);
  if (jt == jobs_.end()) {
    // Forgotten meanwhile (killed): the restored ranks go too.
    for (Rank& r : restored) {
      if (r.pid > 0) {
        ::kill(r.pid, SIGKILL);
        if (::waitpid(r.pid, nullptr, WNOHANG) != r.pid) unreaped_.push_back(r.pid);
      }
      for (int fd : {r.out_fd, r.err_fd, r.status_fd, r.stdin_fd}) {
        if (fd >= 0) ::close(fd);
      }
      RemoveInitDir(r.init_dir);
    }
    return;
  }
  LocalJob& j = jt->second;
  // Later checkpoints of the job record where its executable really is.
  j.restored_dir = restored_dir;
  j.program = restored_program;
  for (Rank& r : restored) {
    if (j.bcs && bcs_ && r.pid > 0) bcs_->SetRankInit(job, r.rank, r.pid);
    j.ranks.push_back(r);
  }
  WatchOutputs(j);
  // Not when a rank could not be restored: the job is not resumed, the coordinator kills it.
  if (failed.job == 0) node_->Store(os::VarStarted(slot), static_cast<int64_t>(job));
  // A rank that died while this worker registered it was reaped by nobody yet: look now.
  NotifyEventFd(wake_fd_);
  MaybeReport(j);
}

void NodeAgentImpl::StageLoop() {
  SetThreadName("agent-stage");
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
