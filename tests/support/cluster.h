// Test support: the cluster harness of the end-to-end tests (tests/e2e). Two ways to have a
// real cluster in a temp state dir, and the gos tools run against it:
//
//   TestCluster   a coordinator and K nodeagents started by hand (each nodeagent in its own
//                 network namespace, or all in the root one), so that a test can kill and
//                 restart any of them; destruction kills what is left and cleans up.
//   LocalCluster  `gos-cluster up` / `gos-cluster down`, as a user runs a local cluster.
//
// Plus the coordinator's PS query, the daemons' logs, and what the checkpoint and replay tests
// read from the tools' output.
#ifndef GOS_TESTS_SUPPORT_CLUSTER_H_
#define GOS_TESTS_SUPPORT_CLUSTER_H_

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gos/os/messages.h"
#include "gos/status.h"
#include "tests/support/cluster_files.h"
#include "tests/support/netns.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace gos::testing {

using namespace std::chrono_literals;
using Result = RunResult;

inline std::string Bin(const std::string& name) { return GosBin(name); }
inline std::string Example(const std::string& name) { return GosExample(name); }

inline Result Execute(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      std::chrono::seconds timeout = 120s) {
  return Run(argv, env, timeout);
}

// ---- The coordinator and its daemons' logs

// One PS round trip on the coordinator's client socket (the reply carries job messages, which
// the gos-ps table does not show); `timeout` for the reply.
StatusOr<os::PsReply> Ps(const std::string& socket, std::chrono::seconds timeout = 10s);
// Nodes up in a PS reply.
uint32_t NodesUp(const os::PsReply& r);
// A PS reply's jobs and nodes, one per line, for a failure message.
std::string DescribePs(const StatusOr<os::PsReply>& r);

// The tails (last `tail` bytes) of the daemon logs under <state>/log, sorted by file name, each
// under a "=== <path>:" line.
std::string DaemonLogs(const std::string& state, size_t tail);

// The first match of `re`'s group 1 in text, or "".
inline std::string Find(const std::string& text, const std::string& re) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(re)) && m.size() > 1) return m[1];
  return "";
}

// Every match of `re`'s group 1 in text, in order.
inline std::vector<std::string> FindAll(const std::string& text, const std::string& re) {
  std::vector<std::string> out;
  const std::regex r(re);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// Pids of the live `criu dump` processes whose parent is `parent` (a nodeagent runs criu as
// its own child while it dumps a rank).
inline std::vector<pid_t> CriuDumpChildren(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    std::string status = ReadFile(dir + "/status");
    size_t at = status.find("\nPPid:");
    if (at == std::string::npos || std::atol(status.c_str() + at + 6) != parent) continue;
    if (status.find("\nState:\tZ") != std::string::npos) continue;
    std::string cmd = ReadFile(dir + "/cmdline");
    std::vector<std::string> argv;
    for (size_t p = 0; p < cmd.size();) {
      size_t z = cmd.find('\0', p);
      if (z == std::string::npos) z = cmd.size();
      argv.push_back(cmd.substr(p, z - p));
      p = z + 1;
    }
    if (argv.size() >= 2 && argv[0].find("criu") != std::string::npos && argv[1] == "dump") {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(d);
  return out;
}

// A coordinator and K nodeagents, each nodeagent in its own network namespace when netns.
// Destruction kills whatever of the cluster is left (every process naming its state dir) and
// removes the state dir.
class TestCluster {
 public:
  TestCluster(int nodes, bool netns) : nodes_(nodes), netns_(netns) {}
  TestCluster(const TestCluster&) = delete;
  ~TestCluster() {
    agents_.clear();
    coordinator_.reset();
    WaitUntil(
        [&] {
          for (const auto& [pid, unused] : LeftOver()) ::kill(pid, SIGKILL);
          return LeftOver().empty();
        },
        10s);
    // The agents' freezer cgroups: they were killed with SIGKILL, so nothing removed them.
    for (const std::string& dir : agent_cgroups_) RemoveCgroups(dir);
    // BCS channel files and init working directories of ranks whose nodeagent was killed.
    if (!state_.empty()) RemoveClusterFiles(state_);
    dir_.reset();
  }

  // More arguments for every nodeagent (set before Start).
  std::vector<std::string> agent_args;
  // Extra "K=V" environment entries of the nodeagents.
  std::vector<std::string> agent_env;
  // The coordinator's strobe quantum (set before Start; "": the coordinator's default).
  std::string timeslice = "5ms";
  // Epochs the coordinator keeps per job (set before Start; "": the coordinator's default).
  std::string keep = "3";

  // "" when ready, else what went wrong.
  std::string Start() {
    if (netns_) {
      auto hosts = NetnsHosts::Create(nodes_);
      if (!hosts.ok()) return hosts.status().ToString();
      hosts_ = std::move(*hosts);
    }
    dir_.emplace("gos-ckfail-test", 0755);
    state_ = dir_->path();
    if (std::string e = StartCoordinator(); !e.empty()) return e;
    for (int i = 0; i < nodes_; ++i) {
      if (std::string e = StartAgent(i); !e.empty()) return e;
    }
    if (!WaitUntil([&] { return NodesUp() >= nodes_; }, 60s)) return "nodes not up\n" + Logs();
    return "";
  }

  std::string StartCoordinator() {
    std::vector<std::string> argv = {Bin("gos-coordinator"), "--data-dir", state_, "--nodes",
                                     std::to_string(nodes_)};
    if (!timeslice.empty()) argv.insert(argv.end(), {"--timeslice", timeslice});
    if (!keep.empty()) argv.insert(argv.end(), {"--keep", keep});
    if (netns_) {
      argv.push_back("--listen");
      argv.push_back(hosts_->bridge_ip() + ":0");
    }
    ::unlink((state_ + "/coordinator.addr").c_str());
    auto c = Subprocess::Start(argv, Env());
    if (!c.ok()) return c.status().ToString();
    coordinator_ = std::make_unique<Subprocess>(std::move(*c));
    if (!WaitUntil([&] { return !Address().empty(); }, 20s)) return coordinator_->output();
    return "";
  }

  std::string StartAgent(int i) {
    const std::string name = "h" + std::to_string(i);
    std::vector<std::string> argv = {Bin("gos-nodeagent"),
                                     "--coordinator",
                                     Address(),
                                     "--key-file",
                                     state_ + "/cluster.key",
                                     "--name",
                                     name,
                                     "--state-dir",
                                     state_ + "/nodes/" + name,
                                     "--node",
                                     std::to_string(i + 1),
                                     "--exit-with-coordinator"};
    argv.insert(argv.end(), agent_args.begin(), agent_args.end());
    if (netns_) {
      // nsenter --net, not `ip netns exec` (which remounts /sys and hides the freezer).
      argv.insert(argv.begin(), {"nsenter", "--net=/run/netns/" + hosts_->name(i), "--"});
    }
    std::vector<std::string> env = Env();
    env.insert(env.end(), agent_env.begin(), agent_env.end());
    auto a = Subprocess::Start(argv, env);
    if (!a.ok()) return a.status().ToString();
    agents_[i] = std::make_unique<Subprocess>(std::move(*a));
    agent_cgroups_.push_back(AgentCgroup(i));
    return "";
  }

  // kill -9 of host i's nodeagent, of every process of its jobs and of a `criu dump` it was
  // running (criu is the agent's child but outside the job's cgroup).
  void KillHost(int i) {
    pid_t agent = AgentPid(i);
    std::vector<pid_t> criu = CriuDumpChildren(agent);
    const std::string dir = AgentCgroup(i);
    // criu first, and gone before the agent: a dump must not go on after its host died.
    for (pid_t pid : criu) ::kill(pid, SIGKILL);
    WaitUntil([&] { return CriuDumpChildren(agent).empty(); }, std::chrono::seconds(10));
    ::kill(agent, SIGKILL);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (!e.is_directory()) continue;
      std::istringstream procs(ReadFile(e.path().string() + "/cgroup.procs"));
      for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
      // A task of a FROZEN cgroup (a checkpoint was dumping it) dies only once thawed.
      std::ofstream(e.path().string() + "/freezer.state") << "THAWED";
    }
  }

  // kill -9 of the coordinator alone. Its nodeagents (--exit-with-coordinator) lose it, stop
  // their jobs' ranks and exit by themselves (those still there after 30 s are killed).
  void KillCoordinator() {
    coordinator_.reset();  // SIGKILL, reaped
    for (auto& [i, a] : agents_) a->Wait(std::chrono::steady_clock::now() + 30s);
    agents_.clear();
    WaitUntil([&] { return LeftOver().empty(); }, 10s);
  }

  // The coordinator and every nodeagent, all at once, as a crash would.
  void KillAll() {
    for (auto& [i, a] : agents_) a->Signal(SIGKILL);
    if (coordinator_) coordinator_->Signal(SIGKILL);
    agents_.clear();
    coordinator_.reset();
    WaitUntil([&] { return LeftOver().empty(); }, 10s);
  }

  // "/dev/shm/gos-<cluster tag>-j": the start of the BCS channel files' paths
  // (<prefix><job>-r<rank>) of this cluster's jobs.
  std::string ChannelPrefix() const { return ChannelFilePrefix(state_); }

  // The coordinator's and host i's nodeagent's processes (while they run).
  Subprocess& coordinator() { return *coordinator_; }
  Subprocess& agent(int i) { return *agents_.at(i); }

  // The nodeagent's pid (the Subprocess may be nsenter, which execs it).
  pid_t AgentPid(int i) const { return agents_.at(i)->pid(); }

  std::vector<std::string> Env() const {
    std::vector<std::string> env = {"GOS_STATE_DIR=" + state_};
    if (!state_.empty()) env.push_back("GOS_COORDINATOR=" + state_ + "/coordinator.sock");
    return env;
  }
  const std::string& state() const { return state_; }

  std::string Address() const {
    std::string a = ReadFile(state_ + "/coordinator.addr");
    while (!a.empty() && (a.back() == '\n' || a.back() == ' ')) a.pop_back();
    return a;
  }

  int NodesUp() const {
    Result r = Execute({Bin("gos-ps")}, Env(), 10s);
    int up = 0;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);) {
      if (line.find(" up ") != std::string::npos || line.find(" up") == line.size() - 3) ++up;
    }
    return up;
  }

  std::string Logs() const {
    std::string s = coordinator_ ? "=== coordinator:\n" + Tail(coordinator_->output()) : "";
    for (const auto& [i, a] : agents_)
      s += "=== agent " + std::to_string(i) + ":\n" + Tail(a->output());
    return s;
  }

  std::map<pid_t, std::string> LeftOver() const {
    return state_.empty() ? std::map<pid_t, std::string>{} : FindProcesses(state_);
  }

 private:
  // Where host i's nodeagent keeps its jobs' freezer cgroups.
  std::string AgentCgroup(int i) const {
    return "/sys/fs/cgroup/freezer/gos/h" + std::to_string(i) + "." + std::to_string(AgentPid(i));
  }

  // Kills every task under an agent's cgroup dir (thawing it) and removes the dirs.
  static void RemoveCgroups(const std::string& dir) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (!e.is_directory()) continue;
      const std::string job = e.path().string();
      WaitUntil(
          [&] {
            std::istringstream procs(ReadFile(job + "/cgroup.procs"));
            for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
            std::ofstream(job + "/freezer.state") << "THAWED";
            return ::rmdir(job.c_str()) == 0 || errno == ENOENT;
          },
          5s);
    }
    ::rmdir(dir.c_str());
  }

  static std::string Tail(const std::string& s) {
    return s.size() > 6000 ? "...\n" + s.substr(s.size() - 6000) : s;
  }

  int nodes_;
  bool netns_;
  std::unique_ptr<NetnsHosts> hosts_;
  std::optional<TempDir> dir_;
  std::string state_;  // dir_->path() once started
  std::unique_ptr<Subprocess> coordinator_;
  std::map<int, std::unique_ptr<Subprocess>> agents_;
  std::vector<std::string> agent_cgroups_;
};

// Why these tests cannot run here, or "".
inline std::string Unsupported(bool netns) {
  if (geteuid() != 0) return "needs root (CRIU, PID namespaces, freezer cgroups)";
  if (::access("/sys/fs/cgroup/freezer/cgroup.procs", F_OK) != 0) return "no cgroup v1 freezer";
  if (netns) return NetnsHosts::Unsupported();
  return "";
}

// The job id of the first "checkpoint: job J epoch E committed" in a gos-run's output (waits
// up to 120 s), or "".
// gos-run's argv: gos-run, then `options`, then `program` (its path and arguments).
inline std::vector<std::string> GosRun(std::vector<std::string> options,
                                       const std::vector<std::string>& program) {
  options.insert(options.begin(), Bin("gos-run"));
  options.insert(options.end(), program.begin(), program.end());
  return options;
}

// What examples/jacobi prints at its end ("iterations=N residual=R checksum=C"), or "".
inline std::string JacobiResult(const std::string& output) {
  return Find(output, "(iterations=\\d+ residual=\\S+ checksum=\\S+)");
}

// Runs examples/jacobi (`program`) with gos-run `options` on c to its end, uninterrupted: what
// it printed at its end (JacobiResult), or "" with *why saying what went wrong.
inline std::string UninterruptedJacobi(const TestCluster& c, std::vector<std::string> options,
                                       const std::vector<std::string>& program,
                                       std::chrono::seconds timeout, std::string* why) {
  Result plain = Execute(GosRun(std::move(options), program), c.Env(), timeout);
  const std::string result = plain.code == 0 ? JacobiResult(plain.output) : "";
  if (result.empty()) *why = plain.Describe() + c.Logs();
  return result;
}

inline std::string FirstCommittedJob(const Subprocess& run) {
  std::string job;
  WaitUntil(
      [&] {
        job = Find(run.output(), "checkpoint: job (\\d+) epoch \\d+ committed");
        return !job.empty();
      },
      120s);
  return job;
}

// The committed epochs `gos-ckpt --list JOB` shows, in order.
inline std::vector<int> ListedEpochs(const TestCluster& c, const std::string& job) {
  Result r = Execute({Bin("gos-ckpt"), "--list", job}, c.Env(), 20s);
  std::vector<int> out;
  if (r.code != 0) return out;
  std::istringstream in(r.output);
  const std::regex row("^\\s+(\\d+)\\s+\\d{4}-");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out.push_back(std::stoi(m[1]));
  }
  return out;
}

// A local cluster run the way a user runs one: `gos-cluster up` in a state dir of its own
// (readable by the ranks' users), `gos-cluster down` at the end. Destruction kills whatever of
// it is left and removes its files and state dir.
class LocalCluster {
 public:
  // Makes the state dir ($TMPDIR/<prefix>-XXXXXX); the tools of this process no longer go to
  // a coordinator named by $GOS_COORDINATOR.
  explicit LocalCluster(const std::string& prefix);
  LocalCluster(const LocalCluster&) = delete;
  ~LocalCluster();

  // gos-cluster up ARGS...; the cluster is up if it exited 0.
  Result Up(const std::vector<std::string>& args);
  // gos-cluster down, which must succeed and leave no process of the cluster behind (expected
  // with EXPECT_*); what is left is killed, and the cluster's files removed. Once only.
  void Down();

  const std::string& state() const { return state_; }
  std::vector<std::string> Env() const { return {"GOS_STATE_DIR=" + state_}; }
  // The tails of the daemons' logs (DaemonLogs).
  std::string Logs(size_t tail) const { return DaemonLogs(state_, tail); }

 private:
  TempDir dir_;
  std::string state_;
  bool up_ = false;
};

}  // namespace gos::testing

#endif  // GOS_TESTS_SUPPORT_CLUSTER_H_
