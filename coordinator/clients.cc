// The coordinator's IO thread, client side: accepting connections (local clients on the unix
// socket, nodeagents and TCP clients on the agent port), client frames, submissions, signals,
// attaching to a job, uploads and gos-store requests (all under mu_).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "coordinator_impl.h"
#include "gos/coordinator/ps.h"
#include "gos/coordinator/store_ops.h"
#include "gos/fd.h"
#include "gos/files.h"
#include "gos/log.h"
#include "gos/os/layout.h"
#include "gos/replay/log.h"
#include "gos/storage/replay.h"

namespace gos::coordinator::internal {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace

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
    GOS_RETURN_IF_ERROR(MakeDir(dir, kPrivateDir));
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
    case Frame::kRanks: {
      auto job = os::DecodeU64(f.payload);
      if (!job.ok()) return reply_error(job.status().message());
      QueryRanks(c, *job, after);
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

}  // namespace gos::coordinator::internal
