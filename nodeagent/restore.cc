// Restores on the nodeagent (docs/specs/checkpoint.md): the restore batches the coordinator
// ships, this node's own copies of dumps, and restoring the ranks with CRIU.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent_impl.h"
#include "cpu_bind.h"
#include "criu.h"
#include "gos/fd.h"
#include "gos/files.h"
#include "gos/log.h"
#include "gos/os/layout.h"
#include "gos/storage/manifest.h"

namespace gos::nodeagent::internal {
namespace {

// "key=value" lines of the gos-rank file a checkpoint leaves next to the CRIU images.
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

}  // namespace

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
      CreateDirs(to.parent_path().string(), kPrivateDir).IgnoreError();  // link says why
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
      // Root's (the files keep their dumped modes: the dir keeps them to root).
      CreateDirs(std::filesystem::path(path).parent_path().string(), kPrivateDir)
          .IgnoreError();  // open says why
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
      CreateDirs(std::filesystem::path(path).parent_path().string(), kPrivateDir).IgnoreError();
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
        // As Launch made it: its user's alone, on a way anyone may pass (maybe another
        // node's state dir, recreated here).
        st = CreateDirs(std::filesystem::path(job_dir).parent_path().string(), kPassDir);
        if (st.ok()) st = MakeDir(job_dir, kPrivateDir);
        ::chown(job_dir.c_str(), uid, gid);
        const std::string exe = job_dir + "/" + program;
        struct stat have {
        }, want{};
        if (st.ok() && ::stat((dir + "/job/" + program).c_str(), &want) == 0 &&
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
    if (j.replay && crash_watch_ && r.pid > 0) {
      crash_watch_->Watch(job, r.rank, r.pid, j.uid, j.gid);
    }
    j.ranks.push_back(r);
  }
  WatchOutputs(j);
  // Not when a rank could not be restored: the job is not resumed, the coordinator kills it.
  if (failed.job == 0) node_->Store(os::VarStarted(slot), static_cast<int64_t>(job));
  // A rank that died while this worker registered it was reaped by nobody yet: look now.
  NotifyEventFd(wake_fd_);
  MaybeReport(j);
}

}  // namespace gos::nodeagent::internal
