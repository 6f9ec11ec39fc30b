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

#include "client.h"
#include "follow.h"
#include "gos/os/channel.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "mpir.h"

extern char** environ;

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-run [options] PROGRAM [ARGS...]

Runs PROGRAM as a parallel job of N ranks on the gos cluster. Each rank gets GOS_RANK,
GOS_SIZE, GOS_JOB and GOS_NODE, your environment and working directory, and runs as you.
With no GOS_COORDINATOR set and no local cluster running (gos-cluster up), gos-run starts a
private local cluster for the job (coordinator plus K nodeagents) and stops it afterwards;
job records stay in the state dir ($GOS_STATE_DIR, $XDG_STATE_HOME/gos or ~/.local/state/gos).
Defaults come from /etc/gos/gos.conf or $GOS_CONFIG (docs/config.md); options override it.

options:
  -n, -np, --ntasks N     ranks                                          (default 1)
  -N, --nodes K           nodes (also the local cluster's size)  (default min(N, 4))
      --ranks-per-node R  ranks on each node                   (default: balanced)
  -w, --nodelist NODES    run only on these node ids (as gos-ps shows them: 3, 1,3 or 2-4)
  -x, --exclude NODES     never on these node ids (same forms; both options repeatable)
      --timeslice DUR     strobe quantum of a local cluster, e.g. 2ms   (default 10ms)
      --mpl M             multiprogramming level of a local cluster       (default 2)
  -t, --time DUR          time limit, e.g. 30s, 5m; the job is killed after it
  -l, --label             prefix every output line with its rank ("3: ...")
  -o, --output PATTERN    ranks' stdout to files, not here: %t = rank, %j = job id (e.g.
                          out.%j.%t); without %t all ranks share one file
  -e, --error PATTERN     ranks' stderr likewise                   (default: with stdout)
      --timing            print the launch phases when the job ends
      --stage FILE        also copy FILE into every node's job dir (repeatable)
      --checkpoint[=DUR]  checkpoint the job every DUR (default 60s): coordinated CRIU
                          dumps at a quiescent strobe, stored incrementally; see gos-ckpt
      --keep N            checkpoint epochs to keep        (default: the coordinator's, 2)
      --restart-on-failure[=N]  when a node dies, restart the job from its last
                          checkpoint on the nodes left, up to N times (default 1); also
                          when the coordinator restarts, see --reattach
      --reattach DUR      when the coordinator goes away while the job has a checkpoint,
                          wait up to DUR for it to come back, then follow the job there
                          (restarted from its newest epoch if it has automatic restarts
                          left, else its end); 0: give up at once     (default 5m)
      --no-record         do not record the run's decisions (recording is on by default:
                          any run can be replayed exactly with gos-replay JOB)
      --debug             start every rank held in MPI_Init for a parallel debugger, which
                          finds them through MPIR (MPIR_proctable in gos-run) and releases
                          each by setting its MPIR_debug_gate to 1; gos-run prints where
                          they are (docs/debugging.md)
      --cpu-bind=MODE     cores: bind each node's ranks of the job to blocks of its CPUs
                          (several ranks share a CPU when there are more ranks than
                          CPUs; fewer ranks get several CPUs each); none: leave them
                          unbound                                   (default cores)
  -h, --help              this text

stdin goes to rank 0; stdout and stderr of every rank come back here. Ctrl-C once sends
SIGINT to every rank; twice within a second kills the job.
Exit code: the highest rank exit code, 128+signal for a rank killed by a signal, 255 when the
job failed because a node went down, 2 for a bad command line or program.
)";

using SteadyClock = std::chrono::steady_clock;

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

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-run"); rc >= 0) return rc;
  auto start = SteadyClock::now();
  uint32_t ntasks = 1, nodes = 0, rpn = 0;  // rpn 0: balanced
  std::string timeslice, mpl, checkpoint_flag, restart_flag, cpu_bind = "cores";
  std::string output_pattern, error_pattern;
  uint32_t keep = 0;  // 0: the coordinator's
  bool restart_on_failure = false;
  std::chrono::milliseconds time_limit{0};
  std::chrono::milliseconds reattach = ToolConfig().reattach;
  bool label = false, timing = false, no_record = false, checkpoint = false, debug = false;
  std::vector<std::string> stage, exclude_args, nodelist_args;
  os::Flags flags(argc, argv, kUsage, /*stop_at_positional=*/true);
  flags.Strings("-x|--exclude", &exclude_args);
  flags.Strings("-w|--nodelist", &nodelist_args);
  flags.U32("-n|-np|--ntasks", &ntasks, 1);  // -np: mpirun's spelling
  flags.U32("-N|--nodes", &nodes);
  flags.U32("--ranks-per-node", &rpn, 1);
  flags.String("--timeslice", &timeslice);
  flags.String("--mpl", &mpl);
  flags.Duration("-t|--time", &time_limit);
  flags.Bool("-l|--label", &label);
  flags.String("-o|--output", &output_pattern);
  flags.String("-e|--error", &error_pattern);
  flags.Bool("--timing", &timing);
  flags.Strings("--stage", &stage);
  flags.OptionalValue("--checkpoint", &checkpoint, &checkpoint_flag);
  flags.U32("--keep", &keep, 1);
  flags.OptionalValue("--restart-on-failure", &restart_on_failure, &restart_flag);
  flags.Bool("--no-record", &no_record);
  flags.Bool("--debug", &debug);
  flags.String("--cpu-bind", &cpu_bind);
  flags.Duration("--reattach", &reattach);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  if (cpu_bind != "cores" && cpu_bind != "none") {
    std::fprintf(stderr, "gos-run: --cpu-bind=%s is not cores or none\n", cpu_bind.c_str());
    return 2;
  }
  int64_t checkpoint_ms = 0;
  if (checkpoint) {
    std::chrono::microseconds us = ToolConfig().checkpoint.interval;
    if (!checkpoint_flag.empty() && !os::ParseDuration(checkpoint_flag, &us, 1'000'000)) us = {};
    if (us.count() < 1000) {
      std::fprintf(stderr, "gos-run: --checkpoint=%s is not a duration like 30s or 5m\n",
                   checkpoint_flag.c_str());
      return 2;
    }
    checkpoint_ms = us.count() / 1000;
  }
  uint32_t restarts = 0;
  if (restart_on_failure) {
    char* end = nullptr;
    unsigned long v = restart_flag.empty() ? 1 : std::strtoul(restart_flag.c_str(), &end, 10);
    if (!restart_flag.empty() && (*end != '\0' || v == 0 || v > 100)) {
      std::fprintf(stderr, "gos-run: --restart-on-failure=%s is not a count 1..100\n",
                   restart_flag.c_str());
      return 2;
    }
    restarts = static_cast<uint32_t>(v);
    if (!checkpoint) {
      std::fprintf(stderr, "gos-run: --restart-on-failure needs --checkpoint\n");
      return 2;
    }
  }
  const auto& rest = flags.positional();
  if (rest.empty()) {
    std::fprintf(stderr, "gos-run: no program given (see --help)\n");
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
  if (debug) req.env.emplace_back("GOS_DEBUG_HOLD=1");  // read by MPI_Init
  char cwd[4096];
  req.cwd = getcwd(cwd, sizeof cwd) ? cwd : "/";
  req.ntasks = ntasks;
  req.nodes = nodes;
  req.ranks_per_node = rpn;
  req.time_limit_ms = time_limit.count();
  req.checkpoint_ms = checkpoint_ms;
  req.keep = keep;
  req.restart_on_failure = restarts;
  req.record = !no_record;
  req.cpu_bind = cpu_bind == "cores";
  if (!ParseNodeListArgs("gos-run", "--exclude", exclude_args, &req.exclude) ||
      !ParseNodeListArgs("gos-run", "--nodelist", nodelist_args, &req.nodelist)) {
    return 2;
  }

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
    // Absolute, so that gos-replay can open it again from anywhere.
    char* abs = ::realpath(paths[i].c_str(), nullptr);
    req.paths.push_back(abs != nullptr ? abs : paths[i]);
    std::free(abs);
    fds.push_back(fd);
  }

  if (!InstallFollowSignals()) return 1;

  std::unique_ptr<LocalCluster> cluster;
  auto cluster_start = SteadyClock::now();
  LocalClusterOptions lo;
  lo.nodes = nodes ? nodes : std::min<uint32_t>(ntasks, 4);
  // A local cluster has nodes 1..K: make it big enough for the nodes asked for by id.
  if (!req.nodelist.empty()) lo.nodes = std::max(lo.nodes, req.nodelist.back());
  lo.timeslice = timeslice;
  lo.mpl = mpl;
  auto found = CoordinatorOrLocalCluster(lo, &cluster);
  if (!found.ok()) {
    std::fprintf(stderr, "gos-run: %s\n", found.status().message().c_str());
    return 1;
  }
  const std::string address = *found;
  if (!cluster && (!timeslice.empty() || !mpl.empty())) {
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
  Status s = SendSubmit(**ch, address, req, fds);
  for (int fd : fds) ::close(fd);
  if (!s.ok()) {
    std::fprintf(stderr, "gos-run: submit failed: %s\n", s.message().c_str());
    return 1;
  }

  FollowOptions fo;
  fo.label = label;
  fo.output = output_pattern;
  fo.error = error_pattern;
  if (!cluster) {  // an embedded cluster does not come back once its coordinator is gone
    fo.reconnect = [address] { return ConnectCoordinator(address); };
    fo.reattach_wait = reattach;
  }
  // MPIR: a debugger that started gos-run (MPIR_being_debugged) or --debug gets the table of
  // processes once every rank has started.
  fo.on_accepted = [&](uint64_t job) {
    if (!debug && !MpirBeingDebugged()) return;
    auto table = AcquireProcesses(address, job, ntasks, std::chrono::seconds(60));
    if (!table.ok()) {
      std::fprintf(stderr, "gos-run: MPIR: %s\n", table.status().message().c_str());
      return;
    }
    if (!debug || MpirBeingDebugged()) return;
    std::fprintf(stderr,
                 "gos-run: job %llu: every rank waits in MPI_Init for a debugger (MPIR, gos-run "
                 "pid %d); a rank goes on once its MPIR_debug_gate is 1:\n",
                 (unsigned long long)job, static_cast<int>(::getpid()));
    for (const auto& r : table->ranks) {
      std::fprintf(stderr,
                   "  rank %u  node %u (%s)  pid %d   gdb -p %d -ex 'set var MPIR_debug_gate=1'\n",
                   r.rank, r.node, r.host.c_str(), r.pid, r.pid);
    }
    std::fflush(stderr);
  };
  fo.on_exit = [&](const os::JobExit& e) {
    if (!timing) return;
    auto ms = [](int64_t us) { return us / 1000.0; };
    double boot = std::chrono::duration<double, std::milli>(cluster_ready - cluster_start).count();
    double total = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
    std::fprintf(stderr,
                 "gos-run: job %llu timing, ms since submit (yod-style phases):\n"
                 "  %-24s %9.3f\n  %-24s %9.3f\n  %-24s %9.3f\n  %-24s %9.3f\n"
                 "  %-24s %9.3f\n  %-24s %9.3f\n  %-24s %9.3f\n",
                 (unsigned long long)e.job, "local cluster start", boot, "allocate",
                 ms(e.placed_us), "transfer (staged)", ms(e.staged_us), "exec (launch strobe)",
                 ms(e.launched_us), "all started", ms(e.started_us), "all exited", ms(e.exited_us),
                 "gos-run total", total);
  };
  int exit_code = FollowJob(ch->get(), fo);
  ch->reset();
  if (cluster && !cluster->WaitExit(std::chrono::seconds(10))) {
    std::fprintf(stderr, "gos-run: the local cluster did not stop by itself; killed it\n");
  }
  return exit_code;
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
