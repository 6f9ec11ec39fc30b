#include "bcs_engine.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "bcs_engine_impl.h"
#include "freezer.h"
#include "gos/bcs/channel.h"
#include "gos/files.h"
#include "gos/log.h"
#include "gos/os/layout.h"
#include "gos/round_trace.h"

namespace gos::nodeagent {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr uint32_t kDescBlockMagic = 0x44584247;  // "GBXD"
constexpr uint32_t kDataBlockMagic = 0x42584247;  // "GBXB"
constexpr uint16_t kExchangeVersion = 1;

// Header of a descriptor block and of a data block (docs/specs/bcs-exchange.md).
struct BlockHeader {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t reserved = 0;
  uint32_t node = 0;
  uint32_t count = 0;  // descriptor blocks: entries that follow
  uint64_t strobe = 0;
  uint64_t job = 0;
  uint64_t len = 0;  // data blocks: bytes including this header
  uint8_t pad[24] = {};
};
static_assert(sizeof(BlockHeader) == kBlockHeaderBytes);

struct WireEntry {
  uint32_t rank = 0;
  uint32_t reserved = 0;
  uint64_t seq = 0;
  bcs::Descriptor d;
};
static_assert(sizeof(WireEntry) == 80);
constexpr size_t kMaxEntries = (os::kBcsDescSlotBytes - sizeof(BlockHeader)) / sizeof(WireEntry);

// Local copies go through the nodeagent's bounce buffer (process_vm_readv from the sender,
// process_vm_writev to the receivers) a chunk at a time: a chunk small enough to stay in the
// cache between the two copies. From kSplitCopy bytes on, a second thread copies the second
// half of the message at the same time, with a bounce chunk of its own: the ranks wait, so
// the cores are free.
constexpr size_t kCopyChunk = 256u << 10;
constexpr size_t kSplitCopy = 512u << 10;
constexpr size_t kBounceBytes = 2 * kCopyChunk;
// How long the bell thread polls on an idle CPU for the row's last running rank to block
// before it sleeps (BellLoop; docs/benchmarks.md).
constexpr auto kBellSpin = std::chrono::microseconds(50);

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

void FutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace

namespace internal {

// A thread that runs one task at a time for the strobe thread: the second half of a split
// copy. Starting a thread per message cost 25-100 us on this VM (clone, its first wake-up,
// join), a sizeable part of a 2 MiB message; waking a waiting one costs a few.
class CopyThread {
 public:
  CopyThread() : thread_([this] { Loop(); }) {}
  ~CopyThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  CopyThread(const CopyThread&) = delete;
  CopyThread& operator=(const CopyThread&) = delete;

  // Runs task on the thread; Wait() returns once it is done. One task at a time.
  void Start(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      task_ = std::move(task);
    }
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !task_; });
  }

 private:
  void Loop() {
    SetThreadName("agent-copy");
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || task_; });
      if (stop_) return;
      lock.unlock();
      task_();  // only this thread runs or clears a set task_
      lock.lock();
      task_ = nullptr;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;
  bool stop_ = false;
  std::thread thread_;
};

void Bump(std::atomic<uint32_t>* word) {
  word->fetch_add(1, std::memory_order_release);
  FutexWake(word);
}

}  // namespace internal

namespace {

using internal::Bump;
using internal::CopyThread;

// Copies len bytes through bounce (kBounceBytes): read(off, dst, n) fills a chunk, write(off,
// src, n) empties it. From kSplitCopy bytes on, `helper` (if any) copies the second half
// meanwhile.
template <typename Read, typename Write>
void SplitCopy(uint64_t len, std::byte* bounce, CopyThread* helper, Read read, Write write) {
  auto copy = [&](uint64_t from, uint64_t to, std::byte* chunk) {
    for (uint64_t off = from; off < to; off += kCopyChunk) {
      const uint64_t n = std::min<uint64_t>(kCopyChunk, to - off);
      read(off, chunk, n);
      write(off, chunk, n);
    }
  };
  if (len < kSplitCopy || helper == nullptr) {
    copy(0, len, bounce);
    return;
  }
  const uint64_t half = (len / 2 + 4095) & ~uint64_t{4095};
  helper->Start([&] { copy(half, len, bounce + kCopyChunk); });
  copy(0, half, bounce);
  helper->Wait();
}

}  // namespace

BcsEngine::BcsEngine(prim::Node* node, BcsEngineOptions options)
    : node_(node), o_(std::move(options)), s_(std::make_unique<State>()) {
  s_->bell = std::thread([this] { BellLoop(); });
}

BcsEngine::~BcsEngine() {
  s_->stop = true;
  Ring();
  if (s_->bell.joinable()) s_->bell.join();
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    for (auto& [id, j] : s_->jobs) ids.push_back(id);
  }
  for (uint64_t id : ids) RemoveJob(id);
}

void BcsEngine::Ring() { Bump(&s_->ctl); }

namespace {

// A restored channel must be the one of this job and rank, of this layout, with ring indices
// a live rank could have left (so that draining it cannot run off the ring).
Status CheckRestoredChannel(const std::string& bytes, const BcsJob& spec, uint32_t rank) {
  const std::string what = "channel of job " + std::to_string(spec.job) + " rank " +
                           std::to_string(rank) + " to restore: ";
  if (bytes.size() != bcs::kChannelBytes) {
    return InvalidArgumentError(what + std::to_string(bytes.size()) + " bytes, want " +
                                std::to_string(bcs::kChannelBytes));
  }
  // The header's atomics are lock-free and hence plain memory: reading them from a suitably
  // aligned copy is reading the values.
  alignas(bcs::ChannelHeader) std::byte raw[sizeof(bcs::ChannelHeader)];
  std::memcpy(raw, bytes.data(), sizeof raw);
  const auto* h = reinterpret_cast<const bcs::ChannelHeader*>(raw);
  if (h->magic != bcs::kChannelMagic || h->bytes != bcs::kChannelBytes) {
    return InvalidArgumentError(what + "not a BCS channel");
  }
  if (h->version < bcs::kChannelMinVersion || h->version > bcs::kChannelVersion) {
    return InvalidArgumentError(what + "channel version " + std::to_string(h->version) +
                                ", this nodeagent serves versions " +
                                std::to_string(bcs::kChannelMinVersion) + " to " +
                                std::to_string(bcs::kChannelVersion));
  }
  const uint64_t channel_job = spec.channel_job != 0 ? spec.channel_job : spec.job;
  if (h->job != channel_job || h->rank != rank || h->size != spec.rank_node.size()) {
    return InvalidArgumentError(what + "it is the channel of job " + std::to_string(h->job) +
                                " rank " + std::to_string(h->rank) + " of " +
                                std::to_string(h->size));
  }
  const uint64_t dh = h->desc_head.load(), dt = h->desc_tail.load();
  const uint64_t ch = h->compl_head.load(), ct = h->compl_tail.load();
  if (dt > dh || dh - dt > bcs::kDescSlots || ct > ch || ch - ct > bcs::kComplSlots) {
    return InvalidArgumentError(what + "ring indices out of range");
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::map<uint32_t, std::string>> BcsEngine::AddJob(const BcsJob& spec,
                                                            const BcsRestore* restore) {
  auto j = std::make_shared<Job>(spec);
  j->nodes = spec.rank_node;
  std::sort(j->nodes.begin(), j->nodes.end());
  j->nodes.erase(std::unique(j->nodes.begin(), j->nodes.end()), j->nodes.end());
  if (j->nodes.size() > os::kMaxBcsNodes) {
    return InvalidArgumentError("a communicating job may span at most " +
                                std::to_string(os::kMaxBcsNodes) + " nodes");
  }
  j->position = static_cast<uint32_t>(std::lower_bound(j->nodes.begin(), j->nodes.end(), o_.node) -
                                      j->nodes.begin());
  if (restore != nullptr) {
    // Everything is checked before any file is touched: a bad checkpoint leaves nothing behind.
    const auto* mb = reinterpret_cast<const uint8_t*>(restore->matcher.data());
    StatusOr<Matcher> m = Matcher::Load({mb, restore->matcher.size()});
    if (!m.ok()) return m.status().WithContext("job " + std::to_string(spec.job));
    if (m->world_size() != spec.rank_node.size()) {
      return InvalidArgumentError("job " + std::to_string(spec.job) +
                                  ": the matcher to restore has " +
                                  std::to_string(m->world_size()) + " ranks, the job " +
                                  std::to_string(spec.rank_node.size()));
    }
    for (uint32_t rank : spec.local) {
      auto it = restore->channels.find(rank);
      if (it == restore->channels.end()) {
        return InvalidArgumentError("job " + std::to_string(spec.job) + ": no channel of rank " +
                                    std::to_string(rank) + " to restore");
      }
      GOS_RETURN_IF_ERROR(CheckRestoredChannel(it->second, spec, rank));
    }
    for (const auto& [rank, bytes] : restore->channels) {
      if (!std::binary_search(spec.local.begin(), spec.local.end(), rank)) {
        return InvalidArgumentError("job " + std::to_string(spec.job) + ": rank " +
                                    std::to_string(rank) + " to restore does not run here");
      }
    }
    j->matcher = std::move(*m);
    // No node may exchange for the job before every node has restored it.
    j->held = true;
  }

  if (spec.record) {
    j->steps = spec.first_step;
    if (j->position == 0) {
      j->writer =
          std::make_unique<replay::JobLogWriter>(static_cast<uint32_t>(spec.rank_node.size()));
    }
  }
  if (spec.replay) {
    const ReplayPlan& p = *spec.replay;
    const size_t n = spec.rank_node.size();
    if (p.log.world_size != n) {
      return InvalidArgumentError("job " + std::to_string(spec.job) + ": the recording has " +
                                  std::to_string(p.log.world_size) + " ranks, the job " +
                                  std::to_string(n));
    }
    if (p.start_step > p.log.steps.size()) {
      return InvalidArgumentError("job " + std::to_string(spec.job) + ": replay from step " +
                                  std::to_string(p.start_step) + " of a recording of " +
                                  std::to_string(p.log.steps.size()));
    }
    j->plan = spec.replay;
    j->keys.assign(n, {});
    j->taken.assign(n, 0);
    j->got.assign(n, {});
    for (uint64_t k = 0; k < p.log.steps.size(); ++k) {
      const replay::Step& st = p.log.steps[k];
      if (st.counts.size() != n) return DataLossError("replay log: a step of another world size");
      size_t i = 0;
      for (uint32_t r = 0; r < n; ++r) {
        for (uint32_t c = 0; c < st.counts[r]; ++c, ++i) {
          if (i >= st.descs.size()) return DataLossError("replay log: a step lacks descriptors");
          j->keys[r].push_back(st.descs[i]);
        }
        if (k < p.start_step) j->taken[r] += st.counts[r];
      }
    }
    j->steps = p.start_step;
  }

  std::map<uint32_t, std::string> paths;
  auto fail = [&](Status st) {
    for (auto& r : j->ranks) {
      ::unlink(r->path.c_str());
      ::unlink((r->path + ".replay").c_str());
    }
    return st;
  };
  for (uint32_t rank : spec.local) {
    auto r = std::make_unique<Rank>();
    r->rank = rank;
    r->path = o_.channel_prefix + "-j" +
              std::to_string(spec.channel_job != 0 ? spec.channel_job : spec.job) + "-r" +
              std::to_string(rank);
    ::unlink(r->path.c_str());
    int fd = ::open(r->path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail(ErrnoError(errno, "cannot create channel " + r->path));
    if (::ftruncate(fd, bcs::kChannelBytes) != 0 || ::fchown(fd, spec.uid, spec.gid) != 0 ||
        ::fchmod(fd, 0600) != 0) {
      Status st = ErrnoError(errno, "cannot set up channel " + r->path);
      ::close(fd);
      ::unlink(r->path.c_str());
      return fail(st);
    }
    void* base = ::mmap(nullptr, bcs::kChannelBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) {
      Status st = ErrnoError(errno, "cannot map channel " + r->path);
      ::unlink(r->path.c_str());
      return fail(st);
    }
    r->base = base;
    if (restore != nullptr) {
      // The rank's own view, exactly as dumped: undrained descriptors and unconsumed
      // completions are still in the rings and are served as if nothing had happened.
      std::memcpy(base, restore->channels.at(rank).data(), bcs::kChannelBytes);
      r->h = static_cast<bcs::ChannelHeader*>(base);
      r->consumed = r->h->desc_tail.load();
      r->wake_on_any_room = r->h->version < 3;
    } else {
      r->h = new (base) bcs::ChannelHeader{};
      r->h->magic = bcs::kChannelMagic;
      r->h->version = bcs::kChannelVersion;
      r->h->rank = rank;
      r->h->size = static_cast<uint32_t>(spec.rank_node.size());
      r->h->job = spec.job;
      r->h->bytes = bcs::kChannelBytes;
    }
    if (spec.replay) {
      // The rank reads its decisions from <channel>.replay; a restored rank's unshipped
      // record bytes belong to the recorded run, not to this one.
      auto dt = spec.replay->decisions.find(rank);
      const std::string empty;
      const std::string& bytes = dt != spec.replay->decisions.end() ? dt->second : empty;
      const std::string rpath = r->path + ".replay";
      ::unlink(rpath.c_str());
      // /dev/shm is everyone's: created anew, never through a file or link planted there.
      Status st = CreateNewFile(rpath, bytes, 0400, spec.uid, spec.gid);
      if (!st.ok()) {
        ::unlink(rpath.c_str());
        ::munmap(base, bcs::kChannelBytes);
        r->base = nullptr;
        ::unlink(r->path.c_str());
        return fail(st);
      }
      r->h->rec_tail.store(r->h->rec_head.load());
      r->h->mode.store(bcs::kModeReplay);
    } else {
      r->h->mode.store(spec.record ? bcs::kModeRecord : bcs::kModeOff);
      r->h->rec_tail.store(r->h->rec_head.load());
    }
    r->last_blocked_ns = r->h->blocked_ns.load();
    paths[rank] = r->path;
    j->by_rank[rank] = r.get();
    j->ranks.push_back(std::move(r));
  }
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->jobs[spec.job] = j;
  }
  Ring();
  return paths;
}

void BcsEngine::SetRankInit(uint64_t job, uint32_t rank, pid_t init_pid) {
  std::lock_guard<std::mutex> lock(s_->mu);
  auto jt = s_->jobs.find(job);
  if (jt == s_->jobs.end()) return;
  auto rt = jt->second->by_rank.find(rank);
  if (rt != jt->second->by_rank.end()) rt->second->init_pid = init_pid;
}

void BcsEngine::RankExited(uint64_t job, uint32_t rank) {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    auto jt = s_->jobs.find(job);
    if (jt == s_->jobs.end()) return;
    auto rt = jt->second->by_rank.find(rank);
    if (rt != jt->second->by_rank.end()) rt->second->exited = true;
  }
  Ring();
}

std::pair<uint32_t, int32_t> BcsEngine::RankState(uint64_t job, uint32_t rank) {
  std::lock_guard<std::mutex> lock(s_->mu);
  auto jt = s_->jobs.find(job);
  if (jt == s_->jobs.end()) return {0, 0};
  auto rt = jt->second->by_rank.find(rank);
  if (rt == jt->second->by_rank.end()) return {0, 0};
  return {rt->second->h->state.load(), rt->second->h->abort_code.load()};
}

void BcsEngine::RemoveJob(uint64_t job) {
  std::shared_ptr<Job> j;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    auto jt = s_->jobs.find(job);
    if (jt == s_->jobs.end()) return;
    j = jt->second;
    s_->jobs.erase(jt);
  }
  // The strobe or bell thread may still hold j; the mappings go with the last reference.
  for (auto& r : j->ranks) {
    ::unlink(r->path.c_str());
    if (j->plan) ::unlink((r->path + ".replay").c_str());
  }
  Ring();  // the bell thread lets go of j
}

// The rank is gos-rank-init's only child: /proc/<init>/task/<init>/children.
pid_t BcsEngine::RankPid(Rank& r) {
  if (r.pid > 0) return r.pid;
  pid_t init = r.init_pid.load();
  if (init <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(init) + "/task/" + std::to_string(init) + "/children");
  long pid = 0;
  if (in >> pid) r.pid = static_cast<pid_t>(pid);
  return r.pid;
}

void BcsEngine::Publish(Job& j) {
  for (auto& [rank, list] : j.pending) {
    if (list.empty()) continue;
    Rank* r = j.by_rank.at(rank);
    bcs::ChannelHeader* h = r->h;
    uint64_t head = h->compl_head.load(std::memory_order_relaxed);
    uint64_t tail = h->compl_tail.load(std::memory_order_acquire);
    size_t room =
        bcs::kComplSlots - static_cast<size_t>(std::min<uint64_t>(head - tail, bcs::kComplSlots));
    size_t n = std::min(room, list.size());
    bcs::Completion* ring = bcs::ComplRing(r->base);
    for (size_t i = 0; i < n; ++i) ring[(head + i) % bcs::kComplSlots] = list[i];
    list.erase(list.begin(), list.begin() + static_cast<ptrdiff_t>(n));
    if (n > 0) h->compl_head.store(head + n, std::memory_order_release);
  }
  // Noted before the wake-ups: a woken rank may run (and note) before this thread goes on.
  round_trace::Note(round_trace::Hop::kAgentPublished, s_->round_id, j.spec.job, o_.node);
  for (auto& r : j.ranks) {
    r->h->strobe.store(s_->round_id, std::memory_order_relaxed);
    Bump(&r->h->wake);
  }
}

// Completions of a slice's work become visible as soon as the slice's transfers are done
// (DESIGN.md: exchange, transfers, then visibility, then the confirmation), so a blocking call
// costs one round, not two. GOS_BCS_PUBLISH=strobe (in the nodeagent's environment) keeps them
// until the next strobe instead, as in the BCS papers, for comparison (docs/benchmarks.md);
// it also turns job rounds off.
static bool PublishAtSliceEnd() {
  static const bool at_end = [] {
    const char* v = getenv("GOS_BCS_PUBLISH");
    return v == nullptr || std::strcmp(v, "strobe") != 0;
  }();
  return at_end;
}

void BcsEngine::OnStrobe(uint64_t strobe, uint32_t row, bool early) {
  s_->strobe = strobe;
  s_->row = row;
  s_->early = early;
  s_->round_id = strobe;
  std::vector<std::shared_ptr<Job>> jobs;
  bool any_job = false;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    any_job = !s_->jobs.empty();
    // A held job is left exactly as it is: its channels are being dumped, or it waits for
    // its other nodes to restore it.
    for (auto& [id, j] : s_->jobs) {
      if (!j->held) jobs.push_back(j);
    }
  }
  for (auto& j : jobs) {
    if (j->spec.record) DrainDecisions(*j);
  }
  // Completions of the previous slice become visible now, for every job (running or not).
  for (auto& j : jobs) {
    bool any = false;
    for (auto& [rank, list] : j->pending) any |= !list.empty();
    if (any) Publish(*j);
  }
  for (auto& j : jobs) {
    if (j->spec.row != row || j->broken) continue;
    Round(strobe, *j);
  }
  // Reports of "all blocked" made during the slice carry the previous strobe, which the
  // coordinator ignores; from now on they count.
  s_->applied = strobe;
  // With no communicating job on the node the bell thread has nothing to look at again (a
  // job added later rings it): waking it would be a context switch per strobe for nothing.
  if (any_job) Ring();
}

std::unique_lock<std::mutex> BcsEngine::PauseRounds() {
  return std::unique_lock<std::mutex>(s_->round_mu);
}

void BcsEngine::Round(uint64_t strobe, Job& j) {
  Slice(strobe, j);
  if (j.broken && !j.broken_reported) {
    j.broken_reported = true;
    // A node that died fails the job at the coordinator, naming it. A live peer that failed
    // us leaves the job unable to communicate: without this it would hang.
    // Only for the job's current incarnation: one removed meanwhile (the job failed) may
    // have been replaced by its restart under the same id.
    bool current = false;
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      auto it = s_->jobs.find(j.spec.job);
      current = it != s_->jobs.end() && it->second.get() == &j;
    }
    if (PeersAlive(j) && current && o_.on_broken) {
      o_.on_broken(j.spec.job, j.error.empty()
                                   ? "the BCS exchange of strobe " + std::to_string(strobe) +
                                         " with the job's other nodes failed"
                                   : j.error);
    }
  }
  if (PublishAtSliceEnd()) Publish(j);
  bool any = !j.scheduler.idle();
  for (auto& [rank, list] : j.pending) any |= !list.empty();
  j.work = any;
}

bool BcsEngine::JobRound(Job& j) {
  std::unique_lock<std::mutex> lock(s_->round_mu, std::try_to_lock);
  // A strobe is being applied: it runs this job's round itself.
  if (!lock.owns_lock()) return false;
  if (j.held || j.broken || j.spec.row != s_->row.load() || j.stopped) return false;
  auto progress = [&j] {
    uint64_t n = 0;
    for (auto& r : j.ranks) n += r->consumed + r->h->compl_head.load(std::memory_order_relaxed);
    return n;
  };
  const uint64_t before = progress();
  const bool moving = !j.scheduler.idle();
  if (j.spec.record) DrainDecisions(j);
  const bool early = s_->early;
  s_->early = true;  // recorded as early: it came before the quantum was over
  s_->round_id = internal::kJobRound + ++j.job_rounds;
  // It belongs to the slice of the strobe applied last (spec 6).
  Round(s_->strobe.load(), j);
  s_->early = early;
  return moving || progress() != before;
}

std::shared_ptr<BcsEngine::Job> BcsEngine::FindJob(uint64_t job) {
  std::lock_guard<std::mutex> lock(s_->mu);
  auto jt = s_->jobs.find(job);
  return jt == s_->jobs.end() ? nullptr : jt->second;
}

bool BcsEngine::Quiescent(uint64_t job) {
  std::shared_ptr<Job> j = FindJob(job);
  return j != nullptr && j->scheduler.idle();
}

void BcsEngine::Flush(uint64_t job) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j != nullptr) Publish(*j);
}

StatusOr<std::string> BcsEngine::SaveMatcher(uint64_t job) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr) return NotFoundError("no communicating job " + std::to_string(job));
  // Queued transfers and unpublished completions are not part of the saved state: saving
  // with any of them would lose them.
  if (!j->scheduler.idle()) {
    return FailedPreconditionError("job " + std::to_string(job) + " has transfers in flight");
  }
  for (const auto& [rank, list] : j->pending) {
    if (!list.empty()) {
      return FailedPreconditionError("job " + std::to_string(job) + " rank " +
                                     std::to_string(rank) + " has " + std::to_string(list.size()) +
                                     " unpublished completions");
    }
  }
  return j->matcher.Save();
}

StatusOr<std::string> BcsEngine::SaveChannel(uint64_t job, uint32_t rank) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr) return NotFoundError("no communicating job " + std::to_string(job));
  auto rt = j->by_rank.find(rank);
  if (rt == j->by_rank.end()) {
    return NotFoundError("job " + std::to_string(job) + " has no rank " + std::to_string(rank) +
                         " here");
  }
  return std::string(static_cast<const char*>(rt->second->base), bcs::kChannelBytes);
}

void BcsEngine::Hold(uint64_t job, bool hold) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr) return;
  j->held = hold;
  Ring();  // the bell thread re-reads which job it watches
}

bool BcsEngine::PeersAlive(const Job& j) const {
  for (uint32_t n : j.nodes) {
    if (!node_->node_info(n).alive) return false;
  }
  return true;
}

StatusOr<bool> BcsEngine::WaitSent(const Job& j, SteadyClock::time_point deadline) {
  while (true) {
    auto sent = node_->TestEvent(os::kEventBcsSent, deadline);
    // An error while every node of this job is up is the late error of a transfer of a job
    // that broke off earlier (to a node that has died since): not this job's.
    if (sent.ok() || !PeersAlive(j) || SteadyClock::now() >= deadline) return sent;
  }
}

void BcsEngine::Slice(uint64_t strobe, Job& j) {
  j.last_strobe = strobe;
  round_trace::Note(round_trace::Hop::kAgentExchange, s_->round_id, j.spec.job, o_.node);
  std::vector<Posted> all;
  if (!Exchange(strobe, j, &all)) {
    j.broken = true;
    return;
  }
  round_trace::Note(round_trace::Hop::kAgentExchanged, s_->round_id, j.spec.job, o_.node);
  if (j.plan) {
    ReplaySteps(j, all);
  } else {
    if (j.spec.record) Record(strobe, j, all);
    StepResult step = j.matcher.Step(strobe, all);
    for (const RankCompletion& c : step.completions) {
      if (j.by_rank.count(c.rank)) j.pending[c.rank].push_back(c.c);
    }
    j.scheduler.Add(std::move(step.transfers));
  }
  round_trace::Note(round_trace::Hop::kAgentMatched, s_->round_id, j.spec.job, o_.node);
  if (!MoveData(strobe, j)) j.broken = true;
  round_trace::Note(round_trace::Hop::kAgentMoved, s_->round_id, j.spec.job, o_.node);
}

// Drains the local ranks' descriptors and trades blocks with the job's other nodes. On return
// `all` holds every descriptor the job's ranks posted since the last exchange.
bool BcsEngine::Exchange(uint64_t strobe, Job& j, std::vector<Posted>* all) {
  std::vector<std::byte> block(sizeof(BlockHeader));
  size_t entries = 0;
  for (auto& r : j.ranks) {
    bcs::ChannelHeader* h = r->h;
    uint64_t head = h->desc_head.load(std::memory_order_acquire);
    if (head - r->consumed > bcs::kDescSlots) head = r->consumed + bcs::kDescSlots;  // corrupt
    const bcs::Descriptor* ring = bcs::DescRing(r->base);
    if (j.plan) {
      // Never take more than the recorded run did, and check each one against it.
      const auto& keys = j.keys[r->rank];
      if (j.stopped) head = r->consumed;
      head = std::min<uint64_t>(head, keys.size());
      for (uint64_t q = r->consumed; q < head; ++q) {
        const replay::DescKey got = replay::KeyOf(ring[q % bcs::kDescSlots]);
        if (got == keys[q]) continue;
        head = q;
        ReplayStop stop;
        stop.kind = ReplayStop::Kind::kDivergence;
        stop.rank = static_cast<int32_t>(r->rank);
        // The recorded step that took descriptor q.
        uint64_t before = 0;
        for (const replay::Step& st : j.plan->log.steps) {
          before += st.counts[r->rank];
          if (before > q) {
            stop.strobe = st.strobe;
            break;
          }
        }
        stop.text = "divergence at strobe " + std::to_string(stop.strobe) + ", rank " +
                    std::to_string(r->rank) + ", its operation " + std::to_string(q + 1) +
                    ": the recorded run posted " + replay::Describe(keys[q]) +
                    "; this run posted " + replay::Describe(got);
        StopReplay(j, stop);
        break;
      }
    }
    while (r->consumed < head && entries < kMaxEntries) {
      WireEntry e;
      e.rank = r->rank;
      e.seq = r->consumed;
      std::memcpy(&e.d, &ring[r->consumed % bcs::kDescSlots], sizeof e.d);
      block.resize(block.size() + sizeof e);
      std::memcpy(block.data() + block.size() - sizeof e, &e, sizeof e);
      all->push_back(Posted{e.rank, e.seq, e.d});
      ++r->consumed;
      ++entries;
    }
    // Ring slots are free again: a rank waiting for room wakes up (only such a rank: a blocked
    // rank otherwise woke here once per round for nothing). seq_cst: spec 5, Doorbells.
    if (h->desc_tail.exchange(r->consumed, std::memory_order_seq_cst) != r->consumed) {
      r->RoomFreed();
    }
  }
  if (j.nodes.size() < 2) return true;

  BlockHeader bh;
  bh.magic = kDescBlockMagic;
  bh.version = kExchangeVersion;
  bh.node = o_.node;
  bh.count = static_cast<uint32_t>(entries);
  bh.strobe = strobe;
  bh.job = j.spec.job;
  std::memcpy(block.data(), &bh, sizeof bh);
  prim::NodeSet others;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> from;
  for (uint32_t p = 0; p < j.nodes.size(); ++p) {
    if (p == j.position) continue;
    others.Add(j.nodes[p]);
    offsets.push_back(os::BcsDescSlot(p));
    from.push_back(j.nodes[p]);
  }
  Status st = node_->XferAndSignal(others, block.data(), block.size(), os::BcsDescSlot(j.position),
                                   os::kEventBcsDesc, os::kEventBcsSent);
  if (st.ok()) {
    auto sent = WaitSent(j, SteadyClock::now() + o_.peer_timeout);
    if (!sent.ok()) st = sent.status();
    if (st.ok() && !*sent) st = DeadlineExceededError("descriptor block not delivered");
  }
  if (!st.ok()) {
    j.error =
        "the descriptor exchange of strobe " + std::to_string(strobe) + " failed: " + st.ToString();
    GOS_LOG(kWarn, "bcs") << "job " << j.spec.job << ": " << j.error;
    return false;
  }
  round_trace::Note(round_trace::Hop::kAgentDescSent, strobe, j.spec.job, o_.node);
  if (!WaitBlocks(strobe, j, os::kEventBcsDesc, offsets, kDescBlockMagic, from)) return false;
  const std::byte* mem = node_->global_memory().data();
  for (uint64_t off : offsets) {
    BlockHeader h;
    std::memcpy(&h, mem + off, sizeof h);
    size_t n = std::min<size_t>(h.count, kMaxEntries);
    for (size_t i = 0; i < n; ++i) {
      WireEntry e;
      std::memcpy(&e, mem + off + sizeof h + i * sizeof e, sizeof e);
      // A block may only speak for ranks of its own node.
      if (e.rank >= j.spec.rank_node.size() || j.spec.rank_node[e.rank] != h.node) continue;
      all->push_back(Posted{e.rank, e.seq, e.d});
    }
  }
  return true;
}

// Waits until every block at `offsets` (global memory) carries this strobe and job.
bool BcsEngine::WaitBlocks(uint64_t strobe, Job& j, uint32_t event,
                           const std::vector<uint64_t>& offsets, uint32_t magic,
                           const std::vector<uint32_t>& from) {
  const std::byte* mem = node_->global_memory().data();
  auto deadline = SteadyClock::now() + o_.peer_timeout;
  // A block's header can be visible before the rest of it (large blocks land as several RMA
  // writes): only its event says it is whole. So first take one event per expected block,
  // then check that the headers are this strobe's (an event left over from a job whose
  // exchange broke off would otherwise be taken for one of ours).
  size_t events = 0;
  while (true) {
    if (events >= offsets.size()) {
      bool all = true;
      for (size_t i = 0; i < offsets.size() && all; ++i) {
        BlockHeader h;
        std::memcpy(&h, mem + offsets[i], sizeof h);
        all = h.magic == magic && h.version == kExchangeVersion && h.strobe == strobe &&
              h.job == j.spec.job && h.node == from[i];
      }
      if (all) return true;
    }
    for (uint32_t n : from) {
      if (!node_->node_info(n).alive) {
        GOS_LOG(kWarn, "bcs") << "job " << j.spec.job << ": node " << n
                              << " is down: " << node_->node_info(n).down_reason;
        return false;
      }
    }
    if (SteadyClock::now() >= deadline) {
      std::string missing;
      for (size_t i = 0; i < offsets.size(); ++i) {
        BlockHeader h;
        std::memcpy(&h, mem + offsets[i], sizeof h);
        if (h.strobe == strobe && h.job == j.spec.job && h.node == from[i]) continue;
        missing += (missing.empty() ? "" : ", ") + std::to_string(from[i]);
      }
      j.error = "the BCS blocks of strobe " + std::to_string(strobe) + " from node(s) " +
                (missing.empty() ? std::string("?") : missing) + " did not arrive within " +
                std::to_string(o_.peer_timeout.count()) + " ms";
      GOS_LOG(kWarn, "bcs") << "job " << j.spec.job << ": " << j.error;
      return false;
    }
    auto got = node_->WaitEvent(event, std::chrono::milliseconds(50));
    if (!got.ok()) {
      j.error = "waiting for the BCS blocks of strobe " + std::to_string(strobe) + ": " +
                got.status().ToString();
      GOS_LOG(kWarn, "bcs") << "job " << j.spec.job << ": " << j.error;
      return false;
    }
    if (*got) ++events;
  }
}

std::vector<bool> BcsEngine::BatchLocalCopies(Job& j, const SlicePlan& plan) {
  const uint32_t self = o_.node;
  std::vector<const Move*> batch;
  std::vector<bool> done(plan.moves.size(), false);
  uint64_t total = 0;
  for (const Move& m : plan.moves) {
    if (m.src_node != self || m.dst_node != self || m.len == 0 || m.len >= kSplitCopy) continue;
    if (total + m.len > s_->bounce.size()) break;  // the rest go one by one
    batch.push_back(&m);
    total += m.len;
  }
  if (batch.size() < 2) return done;
  // Per process: its pieces, as (bounce offset, address in the process, length).
  std::map<pid_t, std::vector<iovec>> from_local, from_remote, to_local, to_remote;
  std::map<pid_t, uint32_t> rank_of;
  auto pid_of = [&](uint32_t rank) -> pid_t {
    auto it = j.by_rank.find(rank);
    pid_t pid = it == j.by_rank.end() ? 0 : RankPid(*it->second);
    if (pid > 0) rank_of[pid] = rank;
    return pid;
  };
  std::byte* bounce = s_->bounce.data();
  uint64_t off = 0;
  for (const Move* m : batch) {
    const Transfer* t = j.scheduler.Find(m->transfer);
    if (t == nullptr) continue;
    std::byte* here = bounce + off;
    off += m->len;
    if (pid_t src = pid_of(t->src_rank); src > 0) {
      from_local[src].push_back({here, m->len});
      from_remote[src].push_back({reinterpret_cast<void*>(t->src_addr + m->offset), m->len});
    }
    for (const Transfer::Dest& d : t->dests) {
      if (j.spec.rank_node[d.rank] != self) continue;
      if (pid_t dst = pid_of(d.rank); dst > 0) {
        to_local[dst].push_back({here, m->len});
        to_remote[dst].push_back({reinterpret_cast<void*>(d.addr + m->offset), m->len});
      }
    }
  }
  // At most IOV_MAX (1024) vectors a call.
  auto each = [&](std::map<pid_t, std::vector<iovec>>& local,
                  std::map<pid_t, std::vector<iovec>>& remote, bool read) {
    for (auto& [pid, l] : local) {
      std::vector<iovec>& r = remote[pid];
      for (size_t i = 0; i < l.size(); i += 1024) {
        const size_t n = std::min<size_t>(1024, l.size() - i);
        size_t want = 0;
        for (size_t k = i; k < i + n; ++k) want += l[k].iov_len;
        const ssize_t got = read ? ::process_vm_readv(pid, &l[i], n, &r[i], n, 0)
                                 : ::process_vm_writev(pid, &l[i], n, &r[i], n, 0);
        if (got != static_cast<ssize_t>(want)) {
          GOS_LOG(kWarn, "bcs") << "job " << j.spec.job << ": cannot "
                                << (read ? "read " : "write ") << want << " bytes "
                                << (read ? "from" : "to") << " rank " << rank_of[pid] << ": "
                                << std::strerror(errno);
        }
      }
    }
  };
  each(from_local, from_remote, true);
  each(to_local, to_remote, false);
  for (const Move* m : batch) done[static_cast<size_t>(m - plan.moves.data())] = true;
  return done;
}

bool BcsEngine::MoveData(uint64_t strobe, Job& j) {
  if (j.scheduler.idle()) return true;
  SlicePlan plan = j.scheduler.Plan();
  const uint32_t self = o_.node;
  std::byte* mem = node_->global_memory().data();
  std::byte* outbox = mem + os::kBcsOutboxBase;
  std::byte* inbox = mem + os::kBcsInboxBase;
  if (s_->bounce.empty()) s_->bounce.resize(kBounceBytes);

  auto read_from = [&](const Transfer& t, uint64_t offset, std::byte* dst, uint64_t len) {
    Rank* r = j.by_rank.count(t.src_rank) ? j.by_rank.at(t.src_rank) : nullptr;
    pid_t pid = r ? RankPid(*r) : 0;
    iovec local{dst, len};
    iovec remote{reinterpret_cast<void*>(t.src_addr + offset), len};
    ssize_t n = pid > 0 ? ::process_vm_readv(pid, &local, 1, &remote, 1, 0) : -1;
    if (n != static_cast<ssize_t>(len)) {
      GOS_LOG(kWarn, "bcs") << "job " << j.spec.job << ": cannot read " << len
                            << " bytes from rank " << t.src_rank << ": " << std::strerror(errno);
    }
  };
  auto write_to = [&](const Transfer& t, uint64_t offset, const std::byte* src, uint64_t len) {
    for (const Transfer::Dest& d : t.dests) {
      if (j.spec.rank_node[d.rank] != self) continue;
      Rank* r = j.by_rank.count(d.rank) ? j.by_rank.at(d.rank) : nullptr;
      pid_t pid = r ? RankPid(*r) : 0;
      iovec local{const_cast<std::byte*>(src), len};
      iovec remote{reinterpret_cast<void*>(d.addr + offset), len};
      ssize_t n = pid > 0 ? ::process_vm_writev(pid, &local, 1, &remote, 1, 0) : -1;
      if (n != static_cast<ssize_t>(len)) {
        GOS_LOG(kWarn, "bcs") << "job " << j.spec.job << ": cannot write " << len
                              << " bytes to rank " << d.rank << ": " << std::strerror(errno);
      }
    }
  };

  // 1. Local senders: copy to local receivers, or into the outbox for other nodes. Small
  // copies between this node's ranks go through the bounce buffer together, one
  // process_vm_readv per sender and one process_vm_writev per receiver for all of them (a
  // fine-grained code moves a few KiB between every pair of neighbours each round: one pair
  // of system calls per message took most of a one-node round's move).
  const std::vector<bool> batched = BatchLocalCopies(j, plan);
  for (const Move& m : plan.moves) {
    if (m.src_node != self || batched[static_cast<size_t>(&m - plan.moves.data())]) continue;
    const Transfer* t = j.scheduler.Find(m.transfer);
    if (t == nullptr) continue;
    if (m.dst_node == self) {
      // Resolve the pids first: the second copying thread and this one then only read them.
      if (j.by_rank.count(t->src_rank)) RankPid(*j.by_rank.at(t->src_rank));
      for (const Transfer::Dest& d : t->dests) {
        if (j.by_rank.count(d.rank)) RankPid(*j.by_rank.at(d.rank));
      }
      if (m.len >= kSplitCopy && !s_->copier) s_->copier = std::make_unique<CopyThread>();
      SplitCopy(
          m.len, s_->bounce.data(), s_->copier.get(),
          [&](uint64_t off, std::byte* dst, uint64_t n) { read_from(*t, m.offset + off, dst, n); },
          [&](uint64_t off, const std::byte* src, uint64_t n) {
            write_to(*t, m.offset + off, src, n);
          });
    } else {
      read_from(*t, m.offset, outbox + m.outbox_offset, m.len);
    }
  }
  // 2. One block per destination node.
  int sent = 0;
  Status st;
  std::vector<uint64_t> in_offsets;
  std::vector<uint32_t> in_from;
  for (const Block& b : plan.blocks) {
    if (b.dst_node == self) {
      in_offsets.push_back(os::kBcsInboxBase + b.inbox_offset);
      in_from.push_back(b.src_node);
    }
    if (b.src_node != self || !st.ok()) continue;
    BlockHeader h;
    h.magic = kDataBlockMagic;
    h.version = kExchangeVersion;
    h.node = self;
    h.strobe = strobe;
    h.job = j.spec.job;
    h.len = b.len;
    std::memcpy(outbox + b.outbox_offset, &h, sizeof h);
    st = node_->XferAndSignal(prim::NodeSet{b.dst_node}, outbox + b.outbox_offset, b.len,
                              os::kBcsInboxBase + b.inbox_offset, os::kEventBcsData,
                              os::kEventBcsSent);
    if (st.ok()) ++sent;
  }
  bool ok = st.ok();
  if (!ok) {
    j.error = "moving data at strobe " + std::to_string(strobe) + " failed: " + st.ToString();
    GOS_LOG(kWarn, "bcs") << "job " << j.spec.job << ": " << j.error;
  }
  // 3. Blocks for this node: into the local receivers.
  if (ok && !in_offsets.empty()) {
    ok = WaitBlocks(strobe, j, os::kEventBcsData, in_offsets, kDataBlockMagic, in_from);
    if (ok) {
      for (const Move& m : plan.moves) {
        if (m.dst_node != self || m.src_node == self) continue;
        const Transfer* t = j.scheduler.Find(m.transfer);
        if (t != nullptr) write_to(*t, m.offset, inbox + m.inbox_offset, m.len);
      }
    }
  }
  // 4. Our blocks must be delivered before the slice is over (the boundary is quiescent).
  auto deadline = SteadyClock::now() + o_.peer_timeout;
  for (int i = 0; i < sent && ok; ++i) {
    auto got = WaitSent(j, deadline);
    ok = got.ok() && *got;
    if (!ok && j.error.empty()) {
      j.error = "the data blocks of strobe " + std::to_string(strobe) +
                (got.ok() ? " were not delivered within " +
                                std::to_string(o_.peer_timeout.count()) + " ms"
                          : " were not delivered: " + got.status().ToString());
    }
  }
  if (!ok) return false;
  for (const RankCompletion& c : j.scheduler.Finish(plan)) {
    if (j.by_rank.count(c.rank)) j.pending[c.rank].push_back(c.c);
  }
  return true;
}

// Watches the doorbells of the running row's local ranks; reports "all blocked" to the
// coordinator so that it can strobe early.
void BcsEngine::BellLoop() {
  SetThreadName("agent-bell");
  os::BlockedRecord last{};
  // While fewer of the row's local ranks run than there are CPUs, a CPU is idle: polling on
  // it for the last rank to block saves that block the wake-up of this thread (most of it an
  // idle CPU coming back), for no CPU a rank could use. At most kBellSpin per wait.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  SteadyClock::time_point spin_until{};
  while (!s_->stop) {
    uint32_t ctl = s_->ctl.load(std::memory_order_acquire);
    std::shared_ptr<Job> j;
    std::vector<std::shared_ptr<Job>> replays;
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      for (auto& [id, job] : s_->jobs) {
        if (job->spec.row == s_->row.load() && !job->broken && !job->held) j = job;
        if (job->plan && !job->stopped) replays.push_back(job);
      }
    }
    // A replayed rank that stopped by itself (gos_abort, or its library diverged or ran out
    // of recorded decisions) sleeps in its channel's state: report it once.
    for (auto& rj : replays) {
      for (auto& r : rj->ranks) {
        const uint32_t state = r->h->state.load(std::memory_order_acquire);
        if (state < bcs::kStateAborted || r->stop_reported.exchange(true)) continue;
        ReplayStop stop;
        stop.rank = static_cast<int32_t>(r->rank);
        // The recorded strobe of the last step taken (written by the strobe thread).
        const uint64_t taken = rj->steps.load();
        const auto& steps = rj->plan->log.steps;
        stop.strobe = taken > 0 && taken <= steps.size() ? steps[taken - 1].strobe : 0;
        if (state == bcs::kStateAborted) {
          stop.kind = ReplayStop::Kind::kAborted;
          stop.text = "rank " + std::to_string(r->rank) + " called MPI_Abort with error code " +
                      std::to_string(r->h->abort_code.load()) + " after strobe " +
                      std::to_string(stop.strobe) + ", as in the recorded run";
        } else {
          // A library that ran out of recorded decisions is where the recorded run stopped.
          stop.kind = state == bcs::kStateDiverged ? ReplayStop::Kind::kDivergence
                                                   : ReplayStop::Kind::kLogEnd;
          char note[sizeof r->h->note + 1] = {};
          std::memcpy(note, r->h->note, sizeof r->h->note);
          stop.text = note;
        }
        StopReplay(*rj, stop);
      }
    }
    std::vector<futex_waitv> waiters;
    futex_waitv w{};
    w.val = ctl;
    w.uaddr = reinterpret_cast<uintptr_t>(&s_->ctl);
    w.flags = FUTEX_32;
    waiters.push_back(w);
    int running = 0;
    if (j) {
      bool blocked = !j->ranks.empty();
      bool work = j->work.load();
      for (auto& r : j->ranks) {
        bcs::ChannelHeader* h = r->h;
        uint32_t bell = h->bell.load(std::memory_order_acquire);
        uint32_t state = h->state.load(std::memory_order_acquire);
        if (waiters.size() < 128) {
          w.val = bell;
          w.uaddr = reinterpret_cast<uintptr_t>(&h->bell);
          waiters.push_back(w);
        }
        bool gone = r->exited.load() || state >= bcs::kStateFinalized;  // finalized, or stopped
        // A blocked rank with completions it has not consumed yet is about to wake up.
        bool waiting =
            state == bcs::kStateBlocked && h->compl_tail.load(std::memory_order_acquire) ==
                                               h->compl_head.load(std::memory_order_relaxed);
        if (!gone && !waiting) {
          blocked = false;
          ++running;
        }
        if (!gone && h->desc_head.load(std::memory_order_acquire) !=
                         h->desc_tail.load(std::memory_order_relaxed)) {
          work = true;
        }
      }
      // A job of this node alone needs no strobe for its round (spec 6, "Job rounds"): run
      // it now, and look again at once while rounds make progress. Otherwise (a strobe is
      // being applied, or nothing moved) fall back to the report.
      if (blocked && work && j->nodes.size() == 1 && PublishAtSliceEnd() && JobRound(*j)) {
        spin_until = {};
        continue;
      }
      os::BlockedRecord rec;
      rec.strobe = s_->applied.load();
      rec.blocked = blocked ? 1 : 0;
      rec.work = work ? 1 : 0;
      if (blocked &&
          (rec.strobe != last.strobe || rec.work != last.work || rec.blocked != last.blocked)) {
        // Noted before the send: the coordinator may act on it before XferAndSignal returns.
        round_trace::Note(round_trace::Hop::kAgentBlocked, rec.strobe + 1, j->spec.job, o_.node);
        Status st = node_->XferAndSignal(prim::NodeSet{0}, &rec, sizeof rec,
                                         os::BlockedSlot(o_.node), os::kEventBlocked);
        if (!st.ok()) GOS_LOG(kDebug, "bcs") << "blocked report: " << st.ToString();
        last = rec;
      }
    }
    if (running > 0 && running < ncpu) {
      const auto now = SteadyClock::now();
      if (spin_until == SteadyClock::time_point{}) spin_until = now + kBellSpin;
      if (now < spin_until) {
        std::this_thread::yield();
        continue;
      }
    }
    spin_until = {};
    timespec deadline{};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += 200 * 1000 * 1000;
    if (deadline.tv_nsec >= 1000000000) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1000000000;
    }
    syscall(SYS_futex_waitv, waiters.data(), static_cast<unsigned>(waiters.size()), 0u, &deadline,
            CLOCK_MONOTONIC);
  }
}

}  // namespace gos::nodeagent
