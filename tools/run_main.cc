// gos-run: run a parallel job on the gos cluster (conventions of srun / flux run / mpirun).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gos/os/channel.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "tools/client.h"

extern char** environ;

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-run [options] PROGRAM [ARGS...]

Runs PROGRAM as a parallel job of N ranks on the gos cluster. Each rank gets GOS_RANK,
GOS_SIZE, GOS_JOB and GOS_NODE, your environment and working directory, and runs as you.
With no GOS_COORDINATOR set and no local cluster running (gos-cluster up), gos-run starts a
private local cluster for the job (coordinator plus K nodeagents) and stops it afterwards;
job records stay in the state dir ($GOS_STATE_DIR, $XDG_STATE_HOME/gos or ~/.local/state/gos).

options:
  -n, --ntasks N          ranks                                          (default 1)
  -N, --nodes K           nodes (also the local cluster's size)  (default min(N, 4))
      --ranks-per-node R  ranks on each node                   (default: balanced)
      --timeslice DUR     strobe quantum of a local cluster, e.g. 2ms   (default 10ms)
      --mpl M             multiprogramming level of a local cluster       (default 2)
  -t, --time DUR          time limit, e.g. 30s, 5m; the job is killed after it
  -l, --label             prefix every output line with its rank ("3: ...")
      --timing            print the launch phases when the job ends
      --stage FILE        also copy FILE into every node's job dir (repeatable)
      --checkpoint[=DUR]  periodic checkpoints           (not available yet: issue 5)
      --record            record for deterministic replay  (not available yet: issue 6)
  -h, --help              this text

stdin goes to rank 0; stdout and stderr of every rank come back here. Ctrl-C once sends
SIGINT to every rank; twice within a second kills the job.
Exit code: the highest rank exit code, 128+signal for a rank killed by a signal, 255 when the
job failed because a node went down, 2 for a bad command line or program.
)";

using SteadyClock = std::chrono::steady_clock;

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  char c = static_cast<char>(sig);
  ssize_t rc = ::write(g_signal_pipe[1], &c, 1);
  (void)rc;
}

// Finds PROGRAM the way execvp would; the result is an absolute or relative path to a file.
std::string ResolveProgram(const std::string& program, std::string* error) {
  auto check = [&](const std::string& path) -> bool {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      *error = path + ": " + std::strerror(errno);
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      *error = path + ": not a regular file";
      return false;
    }
    if (::access(path.c_str(), X_OK) != 0) {
      *error = path + ": not executable (" + std::string(std::strerror(errno)) + ")";
      return false;
    }
    return true;
  };
  if (program.find('/') != std::string::npos) return check(program) ? program : "";
  const char* path = getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (true) {
    size_t colon = p.find(':', start);
    std::string dir = p.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    std::string ignored;
    if (::access(candidate.c_str(), F_OK) == 0 && check(candidate)) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (error->empty()) *error = program + ": command not found in PATH";
  return "";
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Writes output, line-buffered per (rank, stream) when labelling.
class OutputWriter {
 public:
  explicit OutputWriter(bool label) : label_(label) {}
  void Write(const os::OutputChunk& c) {
    int fd = c.stream == 2 ? 2 : 1;
    if (!label_) {
      WriteAll(fd, c.bytes);
      return;
    }
    std::string& buf = partial_[{c.rank, c.stream}];
    buf += c.bytes;
    size_t start = 0;
    std::string out;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      out += std::to_string(c.rank) + ": " + buf.substr(start, nl - start + 1);
    }
    buf.erase(0, start);
    WriteAll(fd, out);
  }
  void Flush() {
    for (auto& [key, buf] : partial_) {
      if (!buf.empty())
        WriteAll(key.second == 2 ? 2 : 1, std::to_string(key.first) + ": " + buf + "\n");
    }
    partial_.clear();
  }

 private:
  static void WriteAll(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::write(fd, s.data() + off, s.size() - off);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        return;
      }
      off += static_cast<size_t>(n);
    }
  }
  bool label_;
  std::map<std::pair<uint32_t, uint8_t>, std::string> partial_;
};

int Main(int argc, char** argv) {
  auto start = SteadyClock::now();
  uint32_t ntasks = 1, nodes = 0, rpn = 0;
  std::string timeslice, mpl, checkpoint_flag;
  std::chrono::milliseconds time_limit{0};
  bool label = false, timing = false, record = false, checkpoint = false;
  std::vector<std::string> stage;
  os::Flags flags(argc, argv, kUsage, /*stop_at_positional=*/true);
  flags.U32("-n|--ntasks", &ntasks);
  flags.U32("-N|--nodes", &nodes);
  flags.U32("--ranks-per-node", &rpn);
  flags.String("--timeslice", &timeslice);
  flags.String("--mpl", &mpl);
  flags.Duration("-t|--time", &time_limit);
  flags.Bool("-l|--label", &label);
  flags.Bool("--timing", &timing);
  flags.Strings("--stage", &stage);
  flags.OptionalValue("--checkpoint", &checkpoint, &checkpoint_flag);
  flags.Bool("--record", &record);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  if (checkpoint || record) {
    std::fprintf(stderr, "gos-run: %s is not available yet: %s lands with a later issue\n",
                 checkpoint ? "--checkpoint" : "--record",
                 checkpoint ? "coordinated checkpointing" : "record/replay");
    return 2;
  }
  const auto& rest = flags.positional();
  if (rest.empty()) {
    std::fprintf(stderr, "gos-run: no program given (see --help)\n");
    return 2;
  }
  if (ntasks == 0) {
    std::fprintf(stderr, "gos-run: -n must be at least 1\n");
    return 2;
  }
  if (nodes > ntasks) {
    std::fprintf(stderr, "gos-run: -N %u is more nodes than the %u ranks can use\n", nodes, ntasks);
    return 2;
  }
  // Refuse a missing or non-executable program before anything launches.
  std::string error;
  std::string program = ResolveProgram(rest[0], &error);
  if (program.empty()) {
    std::fprintf(stderr, "gos-run: cannot run %s\n", error.c_str());
    return 2;
  }
  os::SubmitRequest req;
  req.argv = rest;
  for (char** e = environ; *e; ++e) req.env.emplace_back(*e);
  char cwd[4096];
  req.cwd = getcwd(cwd, sizeof cwd) ? cwd : "/";
  req.ntasks = ntasks;
  req.nodes = nodes;
  req.ranks_per_node = rpn;
  req.time_limit_ms = time_limit.count();
  std::vector<int> fds;
  std::vector<std::string> paths = {program};
  paths.insert(paths.end(), stage.begin(), stage.end());
  for (size_t i = 0; i < paths.size(); ++i) {
    int fd = ::open(paths[i].c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      std::fprintf(stderr, "gos-run: cannot stage %s: %s\n", paths[i].c_str(),
                   fd < 0 ? std::strerror(errno) : "not a regular file");
      return 2;
    }
    std::string name = Basename(paths[i]);
    for (const auto& f : req.files) {
      if (f.name == name) {
        std::fprintf(stderr, "gos-run: two staged files are named %s\n", name.c_str());
        return 2;
      }
    }
    req.files.push_back(
        {name, static_cast<uint32_t>(st.st_mode & 07777), static_cast<uint64_t>(st.st_size)});
    fds.push_back(fd);
  }

  // Signals arrive through a pipe so the loop below handles them.
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::string address = FindCoordinator();
  std::unique_ptr<LocalCluster> cluster;
  auto cluster_start = SteadyClock::now();
  if (address.empty()) {
    LocalClusterOptions lo;
    lo.nodes = nodes ? nodes : std::min<uint32_t>(ntasks, 4);
    lo.timeslice = timeslice;
    lo.mpl = mpl;
    auto c = LocalCluster::Start(lo);
    if (!c.ok()) {
      std::fprintf(stderr, "gos-run: cannot start a local cluster: %s\n",
                   c.status().message().c_str());
      return 1;
    }
    cluster = std::move(*c);
    address = cluster->socket();
  } else if (!timeslice.empty() || !mpl.empty()) {
    std::fprintf(stderr,
                 "gos-run: note: --timeslice/--mpl only apply to a local cluster that "
                 "gos-run starts; the running coordinator keeps its own\n");
  }
  auto cluster_ready = SteadyClock::now();
  auto ch = ConnectCoordinator(address);
  if (!ch.ok()) {
    std::fprintf(stderr, "gos-run: cannot reach the coordinator at %s: %s\n", address.c_str(),
                 ch.status().message().c_str());
    return 1;
  }
  Status s = (*ch)->Send(os::Frame::kSubmit, os::Encode(req), fds);
  for (int fd : fds) ::close(fd);
  if (!s.ok()) {
    std::fprintf(stderr, "gos-run: submit failed: %s\n", s.message().c_str());
    return 1;
  }

  OutputWriter out(label);
  uint64_t job = 0;
  bool stdin_open = true;
  SteadyClock::time_point last_int{};
  int exit_code = 1;
  bool done = false;
  while (!done) {
    pollfd p[3] = {{(*ch)->fd(), POLLIN, 0},
                   {g_signal_pipe[0], POLLIN, 0},
                   // stdin is read once the job is accepted (poll ignores fd -1).
                   {stdin_open && job ? 0 : -1, POLLIN, 0}};
    int n = ::poll(p, 3, -1);
    if (n < 0 && errno != EINTR) break;
    if (p[1].revents & POLLIN) {
      char sig;
      while (::read(g_signal_pipe[0], &sig, 1) == 1) {
        if (job == 0) {
          // Not accepted yet (the cluster may still be forming): just leave.
          std::fprintf(stderr, "gos-run: interrupted before the job was accepted\n");
          return 128 + sig;
        }
        int forward = sig;
        auto now = SteadyClock::now();
        if (sig == SIGINT) {
          if (now - last_int < std::chrono::seconds(1)) {
            forward = SIGKILL;
            std::fprintf(stderr, "gos-run: killing job %llu\n", (unsigned long long)job);
          } else {
            std::fprintf(stderr,
                         "gos-run: sending SIGINT to job %llu (Ctrl-C again within 1 s kills it)\n",
                         (unsigned long long)job);
          }
          last_int = now;
        }
        (*ch)
            ->Send(os::Frame::kSignalJob, os::Encode(os::SignalRequest{job, forward}))
            .IgnoreError();
      }
    }
    if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t r = ::read(0, buf, sizeof buf);
      if (r <= 0) {
        stdin_open = false;
        (*ch)->Send(os::Frame::kStdin, {}).IgnoreError();
      } else {
        (*ch)
            ->Send(os::Frame::kStdin,
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buf), r))
            .IgnoreError();
      }
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::vector<os::FrameIn> frames;
    Status rs = (*ch)->ReadAvailable(&frames);
    for (auto& f : frames) {
      switch (f.type) {
        case os::Frame::kAccepted:
          if (auto id = os::DecodeU64(f.payload); id.ok()) job = *id;
          break;
        case os::Frame::kOutput:
          if (auto o = os::DecodeOutput(f.payload); o.ok()) out.Write(*o);
          break;
        case os::Frame::kOk:
          break;
        case os::Frame::kError: {
          auto text = os::DecodeText(f.payload);
          std::fprintf(stderr, "gos-run: %s\n", text.ok() ? text->c_str() : "error");
          if (job == 0) {
            exit_code = 2;
            done = true;
          }
          break;
        }
        case os::Frame::kExit: {
          auto e = os::DecodeJobExit(f.payload);
          if (!e.ok()) break;
          out.Flush();
          exit_code = e->exit_code;
          if (exit_code != 0 || !e->message.empty()) {
            std::fprintf(stderr, "gos-run: job %llu: %s (exit code %d)\n",
                         (unsigned long long)e->job,
                         e->message.empty() ? "failed" : e->message.c_str(), exit_code);
          }
          if (timing) {
            auto ms = [](int64_t us) { return us / 1000.0; };
            double boot =
                std::chrono::duration<double, std::milli>(cluster_ready - cluster_start).count();
            double total =
                std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
            std::fprintf(stderr,
                         "gos-run: job %llu timing, ms since submit (yod-style phases):\n"
                         "  %-24s %9.3f\n  %-24s %9.3f\n  %-24s %9.3f\n  %-24s %9.3f\n"
                         "  %-24s %9.3f\n  %-24s %9.3f\n  %-24s %9.3f\n",
                         (unsigned long long)e->job, "local cluster start", boot, "allocate",
                         ms(e->placed_us), "transfer (staged)", ms(e->staged_us),
                         "exec (launch strobe)", ms(e->launched_us), "all started",
                         ms(e->started_us), "all exited", ms(e->exited_us), "gos-run total", total);
          }
          done = true;
          break;
        }
        default:
          break;
      }
    }
    if (!rs.ok() && !done) {
      out.Flush();
      std::fprintf(stderr, "gos-run: lost the coordinator (%s); job %llu's state is unknown\n",
                   rs.message().c_str(), (unsigned long long)job);
      exit_code = 255;
      break;
    }
  }
  ch->reset();
  if (cluster && !cluster->WaitExit(std::chrono::seconds(10))) {
    std::fprintf(stderr, "gos-run: the local cluster did not stop by itself; killed it\n");
  }
  return exit_code;
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
