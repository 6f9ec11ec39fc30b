// gos-replay: rerun a recorded job with the nodeagents imposing every recorded decision.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "client.h"
#include "follow.h"
#include "gos/bcs/channel.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "gos/replay/log.h"
#include "gos/replay/trace.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-replay [options] JOB

Reruns the recorded job JOB - the same program (read again from its path, so a rebuilt
program can be checked against the recording), arguments, environment, working directory and
rank count - on the live nodes, with the nodeagents imposing every decision the recorded run
took: which descriptors each strobe matched (so every MPI_ANY_SOURCE receive gets the same
sender), the outcome of every test/probe/waitany, every MPI_Wtime value. The output is the
recorded run's.

Every call is checked against the recording: at the first difference every rank is stopped
and gos-replay names the strobe, the rank and the call (expected versus what happened) and
exits with 3. A run that failed (MPI_Abort, a crash, a lost node) replays up to the failure
and stops there: a rank that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) is held at the
faulting instruction, before the signal acts, and gos-replay names its node, the signal, the
faulting address and the top frames. A job restarted from a checkpoint (gos-restart, --restart-on-failure) replays
as the run that produced its outcome: up to that checkpoint, then the restored run. A stopped job stays stopped (SIGSTOP) for inspection: gos-replay prints each
rank's node and pid and the gdb command to attach, and ends the session (killing the job) at
Enter, end of input or Ctrl-C.

options:
      --stop-at STROBE      stop every rank at this strobe boundary of the recorded run
      --gdb RANK            once stopped, attach gdb to RANK (ends the session when gdb exits)
      --export-trace FILE   write the recorded run as Chrome trace-event JSON (Perfetto) from
                            the log, and exit: nothing is rerun
      --replay              with --export-trace: replay as well, and if the replay diverges
                            write the trace again with the divergence marked
      --info                print what the recording holds and its size, and exit (nothing
                            is rerun)
      --from-epoch E        restore checkpoint E of the recorded run and replay from there
                            (not an epoch of a run that a restart replaced)
  -N, --nodes K             nodes of the local cluster gos-replay starts when none runs (4)
  -l, --label               prefix every output line with its rank ("3: ...")
  -o, --output PATTERN      ranks' stdout to files (%t = rank, %j = job id), as with gos-run
  -e, --error PATTERN       ranks' stderr likewise                 (default: with stdout)
  -h, --help                this text
Exit code: the replayed job's (the recorded run's) when it runs to its end; 0 after a stop at
--stop-at or at the recorded failure (MPI_Abort, the end of the recording); 3 on divergence;
4 after a stop at a crash; 2 when the replay is refused (no such job, not recorded, not the
owner, program missing) - the message says why; 1 on other errors.
Only the job's owner or root may replay it.
)";

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

using Streams = std::map<uint32_t, std::vector<std::string>>;

// The recorded job's log: stream -> segments.
StatusOr<Streams> FetchLog(os::Channel* ch, uint64_t job) {
  Status s = ch->Send(os::Frame::kReplayLog, os::EncodeU64(job));
  Streams streams;
  while (s.ok()) {
    auto f = ch->Receive(std::chrono::steady_clock::now() + std::chrono::minutes(5));
    if (!f.ok()) {
      s = f.status();
      break;
    }
    if (f->type == os::Frame::kReplayData) {
      auto m = os::DecodeReplaySegment(f->payload);
      if (m.ok()) streams[m->stream].push_back(std::move(m->bytes));
      continue;
    }
    if (f->type == os::Frame::kError) {
      auto text = os::DecodeText(f->payload);
      s = FailedPreconditionError(text.ok() ? *text : "error");
    }
    if (f->type == os::Frame::kOk || f->type == os::Frame::kError) break;
  }
  if (!s.ok()) return s;
  return streams;
}

// --info: what the log holds and what it costs.
int PrintInfo(os::Channel* ch, uint64_t job) {
  auto streams = FetchLog(ch, job);
  if (!streams.ok()) {
    std::fprintf(stderr, "gos-replay: cannot read the log of job %llu: %s\n",
                 (unsigned long long)job, streams.status().message().c_str());
    return 1;
  }
  auto log = replay::DecodeJobLog((*streams)[replay::kJobStream]);
  if (!log.ok()) {
    std::fprintf(stderr, "gos-replay: job %llu: %s\n", (unsigned long long)job,
                 log.status().ToString().c_str());
    return 1;
  }
  uint64_t descs = 0, sends = 0, early = 0;
  for (const auto& st : log->steps) {
    early += st.early ? 1 : 0;
    descs += st.descs.size();
    for (const auto& d : st.descs) sends += d.op == static_cast<uint32_t>(bcs::Op::kSend);
  }
  struct Sum {
    uint64_t segments = 0, raw = 0, stored = 0;
  } kinds[4];
  const char* names[4] = {"steps (matcher input)", "rank decisions", "timelines", "stdin"};
  for (const auto& [stream, segs] : *streams) {
    const int k = stream == replay::kJobStream     ? 0
                  : replay::IsRankStream(stream)   ? 1
                  : stream == replay::kStdinStream ? 3
                                                   : 2;
    for (const auto& seg : segs) {
      auto size = replay::SizeOfSegment(seg);
      kinds[k].segments++;
      if (size.ok()) {
        kinds[k].raw += size->raw;
        kinds[k].stored += size->stored;
      }
    }
  }
  std::printf("job %llu: %u ranks, %zu steps (strobes %llu..%llu), %zu checkpoint marks\n",
              (unsigned long long)job, log->world_size, log->steps.size(),
              log->steps.empty() ? 0ull : (unsigned long long)log->steps.front().strobe,
              log->steps.empty() ? 0ull : (unsigned long long)log->steps.back().strobe,
              log->checkpoints.size());
  for (const replay::RestartMark& r : log->restarts) {
    std::printf(
        "restarted from epoch %llu at strobe %llu: the log goes on from step %llu (the %llu "
        "steps the lost run took after that epoch are not in it)\n",
        (unsigned long long)r.epoch, (unsigned long long)r.strobe, (unsigned long long)r.steps,
        (unsigned long long)r.dropped_steps);
  }
  std::printf("descriptors %llu, of which sends (messages) %llu\n", (unsigned long long)descs,
              (unsigned long long)sends);
  std::printf("early strobes: %llu of the %zu steps\n", (unsigned long long)early,
              log->steps.size());
  uint64_t stored = 0;
  for (int k = 0; k < 4; ++k) {
    if (k < 3) stored += kinds[k].stored;  // the recorded input is the user's, not the log's
    std::printf("%-22s %6llu segments  %10llu bytes raw  %9llu bytes stored\n", names[k],
                (unsigned long long)kinds[k].segments, (unsigned long long)kinds[k].raw,
                (unsigned long long)kinds[k].stored);
  }
  if (sends > 0) {
    std::printf(
        "stored bytes per message: %.3f (decisions only: %.3f)\n",
        static_cast<double>(stored) / static_cast<double>(sends),
        static_cast<double>(kinds[0].stored + kinds[1].stored) / static_cast<double>(sends));
  }
  return 0;
}

// Reads the recorded job's log and writes its trace.
int ExportTrace(os::Channel* ch, uint64_t job, const std::string& file,
                const std::optional<replay::TraceDivergence>& divergence) {
  auto fetched = FetchLog(ch, job);
  if (!fetched.ok()) {
    std::fprintf(stderr, "gos-replay: cannot read the log of job %llu: %s\n",
                 (unsigned long long)job, fetched.status().message().c_str());
    return 1;
  }
  Streams& streams = *fetched;
  auto log = replay::DecodeJobLog(streams[replay::kJobStream]);
  if (!log.ok()) {
    std::fprintf(stderr, "gos-replay: job %llu: %s\n", (unsigned long long)job,
                 log.status().ToString().c_str());
    return 1;
  }
  replay::TraceInput in;
  in.job = job;
  in.log = &*log;
  in.rank_node.assign(log->world_size, 0);
  in.blocked_us.resize(log->world_size);
  for (uint32_t r = 0; r < log->world_size; ++r) {
    auto it = streams.find(replay::TimelineStream(r));
    if (it == streams.end()) continue;
    auto t = replay::DecodeTimelineSegments(it->second);
    if (t.ok()) in.blocked_us[r] = std::move(*t);
  }
  in.divergence = divergence;
  auto json = replay::ExportTrace(in);
  if (!json.ok()) {
    std::fprintf(stderr, "gos-replay: trace: %s\n", json.status().ToString().c_str());
    return 1;
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << *json;
  out.close();
  if (!out) {
    std::fprintf(stderr, "gos-replay: cannot write %s: %s\n", file.c_str(), std::strerror(errno));
    return 1;
  }
  std::fprintf(stderr, "gos-replay: wrote the trace of job %llu (%zu steps) to %s\n",
               (unsigned long long)job, log->steps.size(), file.c_str());
  return 0;
}

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-replay"); rc >= 0) return rc;
  uint64_t stop_at = 0;
  uint32_t from_epoch = 0, nodes = 4;
  int32_t gdb_rank = -1;
  std::string trace_file, gdb_arg, stop_arg;
  bool label = false, info = false, and_replay = false;
  os::Flags flags(argc, argv, kUsage);
  flags.Bool("--info", &info);
  flags.Bool("--replay", &and_replay);
  flags.String("--stop-at", &stop_arg);
  flags.String("--gdb", &gdb_arg);
  flags.String("--export-trace", &trace_file);
  flags.U32("--from-epoch", &from_epoch);
  flags.U32("-N|--nodes", &nodes, 1);
  flags.Bool("-l|--label", &label);
  std::string output_pattern, error_pattern;
  flags.String("-o|--output", &output_pattern);
  flags.String("-e|--error", &error_pattern);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  uint64_t job = 0;
  if (!ParseJobArg("gos-replay", flags.positional(), &job)) return 2;
  if (!stop_arg.empty()) {
    char* e = nullptr;
    stop_at = std::strtoull(stop_arg.c_str(), &e, 10);
    if (*e != '\0' || stop_at == 0) {
      std::fprintf(stderr, "gos-replay: --stop-at %s is not a strobe number\n", stop_arg.c_str());
      return 2;
    }
  }
  if (!gdb_arg.empty()) {
    char* e = nullptr;
    long r = std::strtol(gdb_arg.c_str(), &e, 10);
    if (*e != '\0' || r < 0) {
      std::fprintf(stderr, "gos-replay: --gdb %s is not a rank\n", gdb_arg.c_str());
      return 2;
    }
    gdb_rank = static_cast<int32_t>(r);
  }
  if (nodes == 0) nodes = 1;
  if (!InstallFollowSignals()) return 1;

  std::unique_ptr<LocalCluster> cluster;
  LocalClusterOptions lo;
  lo.nodes = nodes;
  auto found = CoordinatorOrLocalCluster(lo, &cluster);
  if (!found.ok()) {
    std::fprintf(stderr, "gos-replay: %s\n", found.status().message().c_str());
    return 1;
  }
  const std::string address = *found;
  // An embedded cluster exits by itself once the job it ran is over; one that ran nothing
  // (--info, a refused replay) would wait for a job forever, so it is stopped at once.
  bool submitted = false;
  auto finish = [&](int rc) {
    if (cluster && !submitted) {
      cluster->Kill();
    } else if (cluster && !cluster->WaitExit(std::chrono::seconds(10))) {
      std::fprintf(stderr, "gos-replay: the local cluster did not stop by itself; killed it\n");
    }
    return rc;
  };
  auto ch = ConnectCoordinator(address);
  if (!ch.ok()) {
    std::fprintf(stderr, "gos-replay: cannot reach the coordinator at %s: %s\n", address.c_str(),
                 ch.status().message().c_str());
    return finish(1);
  }
  if (info) {
    int rc = PrintInfo(ch->get(), job);
    ch->reset();
    return finish(rc);
  }
  if (!trace_file.empty()) {
    // The log has all the trace shows: the job is not rerun unless asked to (--replay).
    int rc = ExportTrace(ch->get(), job, trace_file, std::nullopt);
    if (rc != 0 || !and_replay) {
      ch->reset();
      return finish(rc);
    }
  }
  // How the job ran.
  Status s = (*ch)->Send(os::Frame::kReplayInfo, os::EncodeU64(job));
  auto reply = s.ok() ? (*ch)->Receive(std::chrono::steady_clock::now() + std::chrono::minutes(2))
                      : StatusOr<os::FrameIn>(s);
  if (!reply.ok()) {
    std::fprintf(stderr, "gos-replay: %s\n", reply.status().message().c_str());
    return finish(1);
  }
  if (reply->type == os::Frame::kError) {
    auto text = os::DecodeText(reply->payload);
    std::fprintf(stderr, "gos-replay: %s\n", text.ok() ? text->c_str() : "refused");
    ch->reset();
    return finish(2);
  }
  auto req = os::DecodeSubmit(reply->payload);
  if (reply->type != os::Frame::kReplayInfoReply || !req.ok()) {
    std::fprintf(stderr, "gos-replay: unexpected answer from the coordinator\n");
    return finish(1);
  }
  req->replay_of = job;
  req->stop_at = stop_at;
  req->record = false;
  req->from_epoch = from_epoch;
  std::vector<int> fds;
  for (const std::string& path : req->paths) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      std::fprintf(stderr, "gos-replay: job %llu ran %s, which cannot be opened now: %s\n",
                   (unsigned long long)job, path.c_str(),
                   fd < 0 ? std::strerror(errno) : "not a regular file");
      for (int f : fds) ::close(f);
      ch->reset();
      return finish(2);
    }
    req->files.push_back({Basename(path), static_cast<uint32_t>(st.st_mode & 07777),
                          static_cast<uint64_t>(st.st_size)});
    fds.push_back(fd);
  }
  s = SendSubmit(**ch, address, *req, fds);
  submitted = true;
  for (int fd : fds) ::close(fd);
  if (!s.ok()) {
    std::fprintf(stderr, "gos-replay: submit failed: %s\n", s.message().c_str());
    return finish(1);
  }

  FollowOptions fo;
  fo.tool = "gos-replay";
  fo.label = label;
  fo.output = output_pattern;
  fo.error = error_pattern;
  fo.forward_stdin = false;
  // Said once the coordinator took the replay (it refuses one of a job still running, say).
  fo.on_accepted = [&](uint64_t) {
    std::fprintf(stderr, "gos-replay: replaying job %llu (%u ranks)%s\n", (unsigned long long)job,
                 req->ntasks, stop_at ? (" up to strobe " + std::to_string(stop_at)).c_str() : "");
  };
  std::optional<os::ReplayStopped> stopped;
  fo.on_replay_stopped = [&](const os::ReplayStopped& m) {
    stopped = m;
    std::fprintf(stderr, "gos-replay: %s\n", m.text.c_str());
    std::fprintf(stderr, "gos-replay: every rank of the replay is stopped (SIGSTOP):\n");
    for (const auto& r : m.ranks) {
      if (r.pid > 0) {
        std::fprintf(stderr, "  rank %u  node %u (%s)  pid %d   gdb -p %d\n", r.rank, r.node,
                     r.host.c_str(), r.pid, r.pid);
      } else {
        std::fprintf(stderr, "  rank %u  node %u (%s)  exited\n", r.rank, r.node, r.host.c_str());
      }
    }
    if (m.kind == os::ReplayStopKind::kCrashed && m.rank >= 0) {
      std::fprintf(stderr,
                   "gos-replay: rank %d is held at the faulting instruction: gdb shows the crash "
                   "(bt, info registers); continue executes it again\n",
                   m.rank);
    }
    std::fflush(stderr);
    if (!trace_file.empty() && m.kind == os::ReplayStopKind::kDivergence) {
      replay::TraceDivergence d;
      d.strobe = m.strobe;
      d.rank = m.rank < 0 ? 0 : static_cast<uint32_t>(m.rank);
      d.what = m.text;
      ExportTrace(ch->get(), job, trace_file, d);
    }
    if (gdb_rank >= 0) {
      pid_t target = 0;
      for (const auto& r : m.ranks) {
        if (static_cast<int32_t>(r.rank) == gdb_rank) target = r.pid;
      }
      if (target <= 0) {
        std::fprintf(stderr, "gos-replay: --gdb %d: no such running rank\n", gdb_rank);
        return;
      }
      std::string pid = std::to_string(target);
      pid_t child = fork();
      if (child == 0) {
        execlp("gdb", "gdb", "-q", "-p", pid.c_str(), static_cast<char*>(nullptr));
        std::fprintf(stderr, "gos-replay: cannot run gdb: %s\n", std::strerror(errno));
        _exit(127);
      }
      int status = 0;
      if (child > 0) waitpid(child, &status, 0);
      return;
    }
    std::fprintf(stderr,
                 "gos-replay: press Enter (or Ctrl-C) to end the session and kill the job\n");
    WaitForUser();
  };
  int rc = FollowJob(ch->get(), fo);
  ch->reset();
  if (stopped) {
    rc = stopped->kind == os::ReplayStopKind::kDivergence ? 3
         : stopped->kind == os::ReplayStopKind::kCrashed  ? 4
                                                          : 0;
  }
  return finish(rc);
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
