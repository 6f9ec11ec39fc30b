// Checkpoints on the nodeagent (docs/specs/checkpoint.md): starting ordered checkpoints at a
// quiescent strobe, dumping the ranks (CheckpointWorker), shipping their chunks to the store,
// and the dumps this node keeps for restarts.
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "agent_impl.h"
#include "criu.h"
#include "gos/files.h"
#include "gos/log.h"
#include "gos/os/layout.h"
#include "gos/storage/manifest.h"

namespace gos::nodeagent::internal {
namespace {

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

// An incremental dump's chain holds at most this many dumps (checkpoint.md, "Incremental
// dumps": when a chain is cut).
constexpr int kMaxChainDumps = 8;
// A rank that wrote half its memory since its last dump is dumped in full if that is this
// many pages (16 MiB) or more.
constexpr uint64_t kFullDumpMinPages = 4096;

// Bytes of CRIU's pages images in an images dir.
uint64_t PagesBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code fec;
    if (e.path().filename().string().rfind("pages-", 0) == 0 && e.is_regular_file(fec)) {
      total += e.file_size(fec);
    }
  }
  return total;
}

// The CRIU page files of the dumps an images dir is incremental to, by the names a restore
// finds them under ("parent/pagemap-1.img", "parent/parent/pages-1.img", ...): they go into
// the rank's part of the manifest with its own files.
std::vector<std::string> ParentPageFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::string prefix = "parent/";
  std::error_code ec;
  for (int depth = 0;
       depth < kMaxChainDumps && std::filesystem::is_directory(dir + "/" + prefix, ec);
       ++depth, prefix += "parent/") {
    std::vector<std::string> level;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/" + prefix, ec)) {
      const std::string name = e.path().filename().string();
      std::error_code fec;
      if ((name.rfind("pagemap-", 0) == 0 || name.rfind("pages-", 0) == 0) &&
          e.is_regular_file(fec)) {
        level.push_back(prefix + name);
      }
    }
    std::sort(level.begin(), level.end());
    out.insert(out.end(), level.begin(), level.end());
  }
  return out;
}

}  // namespace

bool NodeAgentImpl::Incremental() {
  std::call_once(incremental_once_, [this] {
    std::string why;
    if (const char* env = std::getenv("GOS_INCREMENTAL");
        env != nullptr && std::strcmp(env, "0") == 0) {
      why = "GOS_INCREMENTAL=0 in the nodeagent's environment";
    } else {
      incremental_ = CriuCanTrack("", &why);
    }
    GOS_LOG(kInfo, "nodeagent") << "node " << node_id_ << " (" << o_.name
                                << "): incremental dumps: "
                                << (incremental_ ? "on" : "off: " + why + "; every dump is full");
  });
  return incremental_;
}

std::string NodeAgentImpl::IncrementalParent(uint64_t job, uint64_t base, uint32_t rank,
                                             const std::shared_ptr<RankTracking>& t) const {
  if (base == 0 || !t || t->epoch != base || t->processes.empty()) return "";
  const std::string r = "/r" + std::to_string(rank);
  // The chain of the base's dump: each dump there, its own pages, and the full one's.
  std::string at = CkptDir(job, base) + r;
  int dumps = 0;
  uint64_t incremental_bytes = 0;
  std::error_code ec;
  while (true) {
    if (!std::filesystem::is_regular_file(at + "/inventory.img", ec)) return "";
    if (++dumps >= kMaxChainDumps) return "";
    const uint64_t pages = PagesBytes(at);
    if (!std::filesystem::is_symlink(at + "/parent", ec)) {
      if (incremental_bytes >= pages) return "";  // a restore would read over twice a full
      break;
    }
    incremental_bytes += pages;
    at += "/parent";
  }
  return "../../j" + std::to_string(job) + "-e" + std::to_string(base) + r;
}

std::set<uint64_t> NodeAgentImpl::ChainEpochs(uint64_t job, uint64_t epoch) const {
  std::set<uint64_t> out = {epoch};
  const std::string mine = "j" + std::to_string(job) + "-e";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(CkptDir(job, epoch), ec)) {
    std::string at = e.path().string();
    for (int depth = 0; depth < kMaxChainDumps; ++depth, at += "/parent") {
      // "../../j<J>-e<E>/r<rank>", as DumpRank's caller gave it to criu.
      std::error_code lec;
      const std::string target = std::filesystem::read_symlink(at + "/parent", lec).string();
      const size_t p = target.find(mine);
      if (lec || p == std::string::npos) break;
      out.insert(std::strtoull(target.c_str() + p + mine.size(), nullptr, 10));
    }
  }
  return out;
}

Status CopyFile(const std::string& from, const std::string& to, mode_t mode) {
  std::error_code ec;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return InternalError("copy " + from + " to " + to + ": " + ec.message());
  ::chmod(to.c_str(), mode);
  return OkStatus();
}

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
      node_->Store(os::VarDumped(j.slot), os::EpochMark(id, epoch));
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
        node_->Store(os::VarDumped(j.slot), os::EpochMark(id, epoch));
        continue;
      }
      bcs_->Hold(id, true);
    }
    std::map<uint32_t, std::string> exe_dirs;
    // The worker hands the ranks' tracking to their dumps, and back (null meanwhile).
    std::map<uint32_t, std::shared_ptr<RankTracking>> tracking;
    for (Rank& r : j.ranks) {
      if (!r.exe_dir.empty()) exe_dirs[r.rank] = r.exe_dir;
      tracking[r.rank] = std::move(r.tracking);
    }
    j.ckpt_cancel = std::make_shared<CkptCancel>();
    StartWorker([this, id, epoch, base = j.ckpt_base, slot = j.slot, level = j.ckpt_level,
                 cancel = j.ckpt_cancel, ranks = std::move(ranks), cgroup = j.cgroup->path(),
                 dir = j.restored_dir.empty() ? j.dir : j.restored_dir, program = j.program,
                 matcher = std::move(matcher), channels = std::move(channels),
                 exe_dirs = std::move(exe_dirs), tracking = std::move(tracking)]() mutable {
      CheckpointWorker(id, epoch, base, slot, level, std::move(ranks), std::move(cgroup),
                       std::move(dir), std::move(program), std::move(matcher), std::move(channels),
                       std::move(exe_dirs), std::move(tracking), std::move(cancel));
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
                                     std::map<uint32_t, std::shared_ptr<RankTracking>> tracking,
                                     std::shared_ptr<CkptCancel> cancel) {
  const auto t0 = SteadyClock::now();
  const int64_t mark = os::EpochMark(job, epoch);
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
  // Ranks whose dump is incremental to their dump of `base` (checkpoint.md, "Incremental
  // dumps"): their dirs take no recycled pages images, and the chains of their parents stay.
  const bool track = Incremental();
  std::map<uint32_t, std::string> parents;  // rank -> parent images dir, relative to its own
  std::set<uint64_t> chains;
  std::vector<std::pair<uint32_t, pid_t>> full;
  for (const auto& [rank, pid] : ranks) {
    std::string parent;
    if (fits && track) parent = IncrementalParent(job, base, rank, tracking[rank]);
    if (!parent.empty()) {
      // Half the rank's memory or more written since (and 16 MiB or more: below that either
      // dump is quick): the increment would be as big as the dump it saves, and a restore
      // would read its memory nearly twice. A full dump (over the page images of the chain's
      // full one, see RecycleDumps) starts a new chain.
      auto w = CountWrittenPages(pid);
      if (!w.ok() || (2 * w->written >= w->dumped && w->written >= kFullDumpMinPages)) {
        GOS_LOG(kInfo, "nodeagent")
            << "job " << job << " epoch " << epoch << " rank " << rank << ": full dump ("
            << (w.ok() ? std::to_string(w->written) + " of " + std::to_string(w->dumped) +
                             " pages written since epoch " + std::to_string(base)
                       : w.status().ToString())
            << ")";
        parent.clear();
      }
    }
    if (parent.empty()) {
      full.emplace_back(rank, pid);
    } else {
      parents[rank] = parent;
    }
  }
  if (!parents.empty()) chains = ChainEpochs(job, base);
  std::vector<RecycledFile> recycled;
  if (fits) {
    recycled = RecycleDumps(job, epoch, scratch, full, chains);
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
    // Root's alone: CRIU writes its images with its own modes (0644), this dir's mode and
    // its parents' (<scratch>/ckpt, <state>/ckpt-spill) keep them to root.
    st = CreateDirs(dir + "/job", kPrivateDir);
    if (!st.ok()) break;
    DumpRequest req;
    req.init_pid = pid;
    req.images_dir = dir;
    req.freezer_cgroup = cgroup;
    req.on_running = [&cancel](int pidfd) {
      std::lock_guard<std::mutex> cl(cancel->mu);
      cancel->criu_pidfd = pidfd;
      if (cancel->cancelled) KillPidfd(pidfd);
    };
    // The rank's tracking goes to criu and comes back armed by this dump; a dump that fails
    // drops it (its next dump is full).
    std::shared_ptr<RankTracking> held = std::move(tracking[rank]);
    req.track = track;
    req.held = held ? &held->processes : nullptr;
    if (auto p = parents.find(rank); p != parents.end()) req.parent = p->second;
    auto dumped = DumpRank(req);
    held.reset();
    if (!dumped.ok()) {
      st = dumped.status().WithContext("rank " + std::to_string(rank));
      break;
    }
    if (track && !dumped->tracking.empty()) {
      auto armed = std::make_shared<RankTracking>();
      armed->epoch = epoch;
      armed->processes = std::move(dumped->tracking);
      tracking[rank] = std::move(armed);
    }
    const std::string& rank_dir = exe_dirs.count(rank) ? exe_dirs[rank] : job_dir;
    std::string meta =
        "job_dir=" + rank_dir + "\nprogram=" + program + "\nrank=" + std::to_string(rank) + "\n";
    st = WriteFileWithMode(dir + "/gos-rank", meta, 0600);
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
      st = WriteFileWithMode(dir + "/gos-channel", channels[rank], 0600);
      if (st.ok()) st = WriteFileWithMode(dir + "/gos-matcher", matcher, 0600);
    }
    if (!st.ok()) break;
  }
  // The tracking armed by this epoch's dumps goes back to the ranks (a rank that is gone, or
  // was replaced meanwhile, drops it). An epoch that failed hands back none.
  if (st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto jt = jobs_.find(job); jt != jobs_.end()) {
      for (Rank& r : jt->second.ranks) {
        auto t = tracking.find(r.rank);
        const bool same =
            std::find(ranks.begin(), ranks.end(), std::make_pair(r.rank, r.pid)) != ranks.end();
        if (t != tracking.end() && same && !r.exited) r.tracking = std::move(t->second);
      }
    }
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
    std::vector<std::string> names = ListFiles(dir);
    for (std::string& name : ParentPageFiles(dir)) names.push_back(std::move(name));
    for (const std::string& name : names) {
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
  std::set<uint64_t> epochs = ChainEpochs(job, keep);
  epochs.merge(ChainEpochs(job, keep_too));
  DropDumps(job, epochs);
}

void NodeAgentImpl::DropDumps(uint64_t job, const std::set<uint64_t>& keep) {
  const std::string mine = "j" + std::to_string(job) + "-e";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(o_.scratch_dir + "/ckpt", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(mine, 0) == 0 &&
        !keep.count(std::strtoull(name.c_str() + mine.size(), nullptr, 10))) {
      std::error_code rec;
      std::filesystem::remove_all(e.path(), rec);
    }
  }
}

std::vector<NodeAgentImpl::RecycledFile> NodeAgentImpl::RecycleDumps(
    uint64_t job, uint64_t epoch, const std::string& scratch,
    const std::vector<std::pair<uint32_t, pid_t>>& ranks, const std::set<uint64_t>& keep) {
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
    // Only CRIU's pages images, and none that is linked elsewhere (a restore dir).
    auto recyclable = [&](const std::string& dir) {
      std::vector<std::pair<std::string, struct stat>> files;
      std::error_code dec;
      for (const auto& e : std::filesystem::directory_iterator(dir + r, dec)) {
        struct stat st {};
        if (e.path().filename().string().rfind("pages-", 0) == 0 &&
            ::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) {
          files.emplace_back(e.path().string(), st);
        }
      }
      return files;
    };
    // The kept dump holding the most of this rank's pages (the newest of equals): after a
    // chain of incremental dumps, its full one.
    std::vector<std::pair<std::string, struct stat>> best;
    uint64_t best_bytes = 0;
    for (const auto& [kept_epoch, dir] : kept) {
      (void)kept_epoch;
      auto files = recyclable(dir);
      uint64_t bytes = 0;
      for (const auto& f : files) bytes += static_cast<uint64_t>(f.second.st_size);
      if (!files.empty() && (best.empty() || bytes > best_bytes)) {
        best = std::move(files);
        best_bytes = bytes;
      }
    }
    for (const auto& [path, st] : best) {
      CreateDirs(scratch + r, kPrivateDir).IgnoreError();  // rename fails then
      const std::string to = scratch + r + "/" + std::filesystem::path(path).filename().string();
      if (::rename(path.c_str(), to.c_str()) == 0) out.push_back({to, st.st_mtim});
    }
  }
  std::set<uint64_t> kept_epochs = keep;
  kept_epochs.insert(epoch);
  DropDumps(job, kept_epochs);
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

}  // namespace gos::nodeagent::internal
