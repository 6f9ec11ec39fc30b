// Integration tests of the gos global OS (issue 3): a real coordinator, real nodeagents (PID
// namespaces, freezer cgroups, setuid ranks: root only) and the command-line tools, driven the
// way a user drives them. Each test has its own state dir, starts its daemons itself (through
// gos-run's embedded cluster, gos-cluster up, or by hand), waits on conditions with deadlines,
// and at the end checks that no process of its cluster and no freezer cgroup of its nodeagents
// (/sys/fs/cgroup/freezer/gos/<name>.<pid>) is left, then removes whatever is.
//
// Ranks are examples/hello and tests/e2e/os_test_rank (spin, sleep, ignore-int, netns).
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gos/os/channel.h"
#include "gos/os/messages.h"
#include "gos/storage/tables.h"
#include "nodeagent/cpu_bind.h"
#include "tests/support/cluster.h"
#include "tests/support/cluster_files.h"
#include "tests/support/netns.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace gos::os {
namespace {

using namespace std::chrono_literals;
using gos::testing::DescribeProcesses;
using gos::testing::DescribeWaitStatus;
using gos::testing::NetnsHosts;
using gos::testing::Subprocess;
using SteadyClock = std::chrono::steady_clock;

constexpr char kFreezerMount[] = "/sys/fs/cgroup/freezer";
constexpr char kFreezerGos[] = "/sys/fs/cgroup/freezer/gos";
constexpr uid_t kNobody = 65534;

// ---- Paths and files ----------------------------------------------------------------------

std::string GosBinDir() {
  const char* d = std::getenv("GOS_BIN_DIR");
  return d != nullptr && *d != '\0' ? d : gos::testing::TestBinDir() + "/../bin";
}
std::string Bin(const std::string& name) { return GosBinDir() + "/" + name; }
std::string Hello() { return GosBinDir() + "/../examples/hello"; }
std::string RankHelper() { return gos::testing::TestBinDir() + "/os_test_rank"; }

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok && ::chmod(path.c_str(), mode) == 0;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Sub-directory names of dir (no . and ..), sorted.
std::vector<std::string> SubDirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || !IsDir(dir + "/" + name)) continue;
    out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Polls pred every `step` until it holds or the timeout passes; returns its last value.
bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
               std::chrono::milliseconds step = 10ms) {
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
}

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// ---- Processes ----------------------------------------------------------------------------

std::string Cmdline(pid_t pid) {
  std::string raw = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  return raw;
}

std::string Exe(pid_t pid) {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return ec ? "" : p.string();
}

// Running: some thread of it is not a zombie (a killed multi-threaded process keeps its files
// open until its last thread has exited).
bool Alive(pid_t pid) {
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task_dir.c_str());
  if (d == nullptr) return false;
  bool alive = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string stat = ReadFile(task_dir + "/" + e->d_name + "/stat");
    size_t paren = stat.rfind(')');
    alive |= paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
  }
  ::closedir(d);
  return alive;
}

// Live processes (other than this one) whose command line or executable contains every one of
// `needles`, with their command lines.
std::map<pid_t, std::string> FindProcesses(const std::vector<std::string>& needles) {
  std::map<pid_t, std::string> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == getpid()) continue;
    std::string what = Cmdline(static_cast<pid_t>(pid)) + " exe=" + Exe(static_cast<pid_t>(pid));
    bool all = true;
    for (const auto& n : needles) all &= what.find(n) != std::string::npos;
    if (all && Alive(static_cast<pid_t>(pid))) out[static_cast<pid_t>(pid)] = what;
  }
  ::closedir(d);
  return out;
}

// A command with stdout and stderr captured apart: the Subprocess runs a shell that redirects
// stderr to its own file and execs the command (so pid() is the command's), or, with stdin
// text, pipes the text into it.
class Proc {
 public:
  Proc(const std::vector<std::string>& argv, const std::vector<std::string>& env,
       const std::string& err_path, const std::optional<std::string>& stdin_text)
      : err_path_(err_path), started_(SteadyClock::now()) {
    std::vector<std::string> sh = {"/bin/sh", "-c"};
    if (stdin_text) {
      sh.push_back("e=$1; i=$2; shift 2; printf '%s' \"$i\" | \"$@\" 2>\"$e\"");
      sh.insert(sh.end(), {"sh", err_path, *stdin_text});
    } else {
      sh.push_back("e=$1; shift; exec \"$@\" 2>\"$e\"");
      sh.insert(sh.end(), {"sh", err_path});
    }
    sh.insert(sh.end(), argv.begin(), argv.end());
    for (const auto& a : argv) command_ += (command_.empty() ? "" : " ") + a;
    auto p = Subprocess::Start(sh, env);
    if (p.ok()) {
      proc_.emplace(std::move(*p));
    } else {
      start_error_ = p.status().ToString();
    }
  }
  ~Proc() {
    proc_.reset();  // kills and reaps if still running
    ::unlink(err_path_.c_str());
  }
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  pid_t pid() const { return proc_ ? proc_->pid() : -1; }
  // True once exited (waits up to timeout).
  bool Wait(std::chrono::milliseconds timeout) {
    if (!proc_) return true;
    if (!status_) status_ = proc_->Wait(SteadyClock::now() + timeout);
    if (status_ && !ended_) ended_ = SteadyClock::now();
    return status_.has_value();
  }
  bool Running() { return !Wait(0ms); }
  // Exit code as a shell reports it (128+signal if killed), -1 if still running.
  int ExitCode() const {
    if (!status_) return -1;
    return WIFEXITED(*status_) ? WEXITSTATUS(*status_) : 128 + WTERMSIG(*status_);
  }
  double Seconds() const {
    return std::chrono::duration<double>(ended_.value_or(SteadyClock::now()) - started_).count();
  }
  void Signal(int sig) {
    if (proc_) proc_->Signal(sig);
  }
  std::string Out() const { return proc_ ? proc_->output() : ""; }
  std::string Err() const { return ReadFile(err_path_); }
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout) {
    return WaitUntil([&] { return Out().find(text) != std::string::npos || !Running(); },
                     timeout) &&
           Out().find(text) != std::string::npos;
  }
  bool WaitForErr(const std::string& text, std::chrono::milliseconds timeout) {
    return WaitUntil([&] { return Err().find(text) != std::string::npos || !Running(); },
                     timeout) &&
           Err().find(text) != std::string::npos;
  }
  std::string Describe() const {
    std::string s = "`" + command_ + "`: ";
    if (!start_error_.empty()) return s + "did not start: " + start_error_;
    s += status_ ? DescribeWaitStatus(*status_) : std::string("still running");
    char buf[32];
    std::snprintf(buf, sizeof buf, " after %.2f s", Seconds());
    return s + buf + "\n--- stdout:\n" + Out() + "--- stderr:\n" + Err() + "---\n";
  }

 private:
  std::optional<Subprocess> proc_;
  std::string err_path_;
  std::string command_;
  std::string start_error_;
  std::optional<int> status_;
  SteadyClock::time_point started_;
  std::optional<SteadyClock::time_point> ended_;
};

// Runs argv as another user (fork, setgroups, setgid, setuid, exec); returns the exit status and
// the merged output.
struct Outcome {
  int status = -1;
  std::string output;
};
Outcome RunAs(uid_t uid, gid_t gid, const std::vector<std::string>& argv,
              const std::vector<std::string>& env, std::chrono::milliseconds timeout) {
  Outcome o;
  char tmpl[] = "/tmp/gos-os-test-runas-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) {
    o.output = std::string("mkstemp: ") + std::strerror(errno);
    return o;
  }
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
      dprintf(2, "cannot become uid %u: %s\n", uid, std::strerror(errno));
      _exit(126);
    }
    execve(cargv[0], cargv.data(), cenv.data());
    dprintf(2, "exec %s: %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  ::close(fd);
  if (pid > 0) {
    auto deadline = SteadyClock::now() + timeout;
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) == 0) {
      if (SteadyClock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    o.status = st;
  }
  o.output = ReadFile(tmpl);
  ::unlink(tmpl);
  return o;
}

// ---- The coordinator's client protocol ------------------------------------------------------

// PS round trips (tests/support/cluster.h).
using gos::testing::DescribePs;
using gos::testing::NodesUp;
using gos::testing::Ps;

const PsJob* FindJob(const PsReply& r, uint64_t id) {
  for (const auto& j : r.jobs) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

// ---- Freezer cgroups ------------------------------------------------------------------------

std::vector<pid_t> CgroupPids(const std::string& cgroup) {
  std::vector<pid_t> pids;
  std::istringstream in(ReadFile(cgroup + "/cgroup.procs"));
  for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// Kills every process under cgroup (thawed first, so the kill lands) and removes the tree.
void RemoveCgroupTree(const std::string& cgroup) {
  for (const auto& sub : SubDirs(cgroup)) RemoveCgroupTree(cgroup + "/" + sub);
  WriteFile(cgroup + "/freezer.state", "THAWED", 0644);
  WaitUntil(
      [&] {
        auto pids = CgroupPids(cgroup);
        for (pid_t p : pids) ::kill(p, SIGKILL);
        return pids.empty();
      },
      5s);
  ::rmdir(cgroup.c_str());
}

// ---- The fixture ----------------------------------------------------------------------------

class OsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root: nodeagents make PID namespaces and freezer cgroups and run "
                      "ranks as the submitting user";
    }
    if (!Exists(std::string(kFreezerMount) + "/cgroup.procs")) {
      GTEST_SKIP() << "no cgroup v1 freezer hierarchy at " << kFreezerMount;
    }
    unsetenv("GOS_COORDINATOR");
    // Reachable by other users (the nobody test); the coordinator's socket is 0666.
    dir_.emplace("gos-os-test", 0755);
    state_ = dir_->path();
    ASSERT_EQ(::mkdir((state_ + "/.test").c_str(), 0700), 0);
  }

  void TearDown() override;

  // Environment of the tools: this test's state dir, info logs for the daemons.
  std::vector<std::string> Env(std::vector<std::string> extra = {}) const {
    extra.insert(extra.begin(), {"GOS_STATE_DIR=" + state_, "GOS_LOG_LEVEL=info"});
    return extra;
  }

  std::unique_ptr<Proc> Start(const std::vector<std::string>& argv,
                              const std::vector<std::string>& extra_env = {},
                              const std::optional<std::string>& stdin_text = std::nullopt) {
    std::string err = state_ + "/.test/stderr." + std::to_string(++commands_);
    return std::make_unique<Proc>(argv, Env(extra_env), err, stdin_text);
  }

  // Starts and waits for the exit (a failed expectation if it does not exit in time).
  std::unique_ptr<Proc> Run(const std::vector<std::string>& argv,
                            const std::vector<std::string>& extra_env = {},
                            std::chrono::milliseconds timeout = 60s,
                            const std::optional<std::string>& stdin_text = std::nullopt) {
    auto p = Start(argv, extra_env, stdin_text);
    EXPECT_TRUE(p->Wait(timeout)) << "did not finish in " << timeout.count()
                                  << " ms: " << p->Describe() << Logs();
    return p;
  }

  std::string socket() const { return state_ + "/coordinator.sock"; }

  // The daemons' logs (tails), for failure messages.
  std::string Logs() const { return gos::testing::DaemonLogs(state_, 6000); }

  // Waits until the coordinator at `sock` reports `n` nodes up and strobes.
  ::testing::AssertionResult WaitForNodes(const std::string& sock, uint32_t n,
                                          std::chrono::milliseconds timeout) {
    StatusOr<PsReply> last = UnavailableError("no reply yet");
    bool ok = WaitUntil(
        [&] {
          last = Ps(sock);
          return last.ok() && NodesUp(*last) >= n && last->strobe > 0;
        },
        timeout, 20ms);
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << n << " nodes not up after " << timeout.count() << " ms:\n"
           << DescribePs(last);
  }

  // Processes of this test's cluster: daemons name the state dir on their command line, ranks
  // and gos-rank-init run staged copies from it.
  std::map<pid_t, std::string> ClusterProcesses(const std::string& needle = "") const {
    std::vector<std::string> needles = {state_};
    if (!needle.empty()) needles.push_back(needle);
    return FindProcesses(needles);
  }

  // The one live nodeagent whose state dir is <state>/nodes/<name>, or -1.
  pid_t AgentPid(const std::string& name) const {
    auto procs = ClusterProcesses(state_ + "/nodes/" + name + " ");
    for (const auto& [pid, what] : procs) {
      if (what.find("gos-nodeagent") != std::string::npos) return pid;
    }
    return -1;
  }

  // Sends `sig` (SIGKILL, SIGSTOP) to the nodeagent `name` of a local cluster and waits until
  // the coordinator reports its node `node` down. Returns the agent's pid, or -1 (with a
  // failure recorded) if there was no such agent or the node stayed up.
  pid_t SignalAgentUntilDown(const std::string& name, uint32_t node, int sig) {
    const pid_t pid = AgentPid(name);
    if (pid <= 0) {
      ADD_FAILURE() << "no nodeagent " << name << ":\n" << DescribeProcesses(ClusterProcesses());
      return -1;
    }
    killed_agents_.insert(pid);  // it may not remove its cgroup dir
    if (::kill(pid, sig) != 0) {
      ADD_FAILURE() << "kill " << pid << ": " << std::strerror(errno);
      return -1;
    }
    StatusOr<PsReply> ps = UnavailableError("no reply");
    const bool down = WaitUntil(
        [&] {
          ps = Ps(socket());
          return ps.ok() && ps->nodes.size() >= node && !ps->nodes[node - 1].up;
        },
        10s);
    if (!down) {
      ADD_FAILURE() << "node " << node << " still up 10 s after signal " << sig << " to " << name
                    << ":\n"
                    << DescribePs(ps);
      return -1;
    }
    return pid;
  }

  // The freezer cgroup dir of the nodeagent with this pid, or "" if there is none.
  static std::string AgentCgroup(pid_t agent) {
    std::string suffix = "." + std::to_string(agent);
    for (const auto& d : SubDirs(kFreezerGos)) {
      if (d.size() > suffix.size() &&
          d.compare(d.size() - suffix.size(), suffix.size(), suffix) == 0) {
        return std::string(kFreezerGos) + "/" + d;
      }
    }
    return "";
  }

  std::optional<gos::testing::TempDir> dir_;  // removed after TearDown
  std::string state_;                         // dir_->path()
  int commands_ = 0;
  // Agents whose pid the node table may not hold (hand-started, or replaced).
  std::set<pid_t> agents_;
  // Agents killed with SIGKILL: they cannot remove their cgroup dir, so it may stay.
  std::set<pid_t> killed_agents_;
};

void OsTest::TearDown() {
  if (state_.empty()) return;
  // Whatever the test started has been destroyed (killed and reaped) by now; the daemons of
  // its cluster may still be on their way out, so give them a moment.
  std::map<pid_t, std::string> left;
  WaitUntil([&] { return (left = ClusterProcesses()).empty(); }, 10s, 20ms);
  EXPECT_TRUE(left.empty()) << "processes of this test's cluster still running 10 s after the "
                               "test:\n"
                            << DescribeProcesses(left);
  for (const auto& [pid, what] : left) ::kill(pid, SIGKILL);
  WaitUntil([&] { return ClusterProcesses().empty(); }, 5s);

  // Every nodeagent that joined is in the node table (with its pid).
  std::set<pid_t> agents = agents_;
  if (IsDir(state_ + "/db")) {
    // A daemon killed just now may hold the database's lock for a moment longer.
    StatusOr<std::unique_ptr<storage::Tables>> tables = UnavailableError("not opened");
    WaitUntil([&] { return (tables = storage::Tables::Open(state_ + "/db")).ok(); }, 10s);
    if (tables.ok()) {
      auto nodes = (*tables)->ListNodes();
      if (nodes.ok()) {
        for (const auto& n : *nodes) agents.insert(n.pid);
      }
    } else {
      ADD_FAILURE() << "cannot open the node table: " << tables.status().ToString();
    }
  }
  for (pid_t agent : agents) {
    std::string cg = AgentCgroup(agent);
    if (cg.empty()) continue;
    if (!killed_agents_.count(agent)) {
      std::string jobs;
      for (const auto& j : SubDirs(cg)) {
        jobs += " " + j + " (" + std::to_string(CgroupPids(cg + "/" + j).size()) + " processes)";
      }
      ADD_FAILURE() << "freezer cgroup of exited nodeagent pid " << agent << " left behind: " << cg
                    << (jobs.empty() ? " (no job cgroups)" : " with job cgroups" + jobs);
    }
    RemoveCgroupTree(cg);
  }
  if (HasFailure()) std::printf("daemon logs of %s:\n%s\n", state_.c_str(), Logs().c_str());
  gos::testing::RemoveClusterFiles(state_);
}

// Labelled output lines "R: hello from rank R of N on node K ..." -> rank -> node.
std::map<int, int> ParseHello(const std::string& out, int size, std::string* problems) {
  static const std::regex kLine(R"(^(\d+): hello from rank (\d+) of (\d+) on node (\d+) .*)");
  std::map<int, int> nodes;
  for (const auto& line : Lines(out)) {
    std::smatch m;
    if (!std::regex_match(line, m, kLine)) {
      *problems += "unexpected line: " + line + "\n";
      continue;
    }
    int label = std::stoi(m[1]), rank = std::stoi(m[2]);
    if (label != rank) *problems += "label " + m[1].str() + " on rank " + m[2].str() + "'s line\n";
    if (std::stoi(m[3]) != size) *problems += "wrong size: " + line + "\n";
    if (nodes.count(rank)) *problems += "rank " + m[2].str() + " printed twice\n";
    nodes[rank] = std::stoi(m[4]);
  }
  return nodes;
}

// ---- 0. Every tool's --help; what the tools load ------------------------------------------

// Every tool answers --help with its usage and --version with its version, exit code 0. The tools
// that only talk to the coordinator over its socket do not load libfabric: Debian's libfabric links
// the psm and psm2 libraries, whose constructors spend 100 ms each calibrating the CPU clock, so
// every gos-run, gos-ps, gos-restart, ... would start 0.2 s late. The daemons load it (and show
// that the check, the dynamic loader's own trace, sees it when it is there).
TEST(ToolsTest, EveryToolHasHelpAndVersionAndOnlyTheDaemonsLoadLibfabric) {
  const std::vector<std::string> clients = {"gos-run",     "gos-ps",     "gos-kill",
                                            "gos-cluster", "gos-ckpt",   "gos-restart",
                                            "gos-store",   "gos-replay", "gos-attach"};
  const std::vector<std::string> daemons = {"gos-coordinator", "gos-nodeagent"};
  for (const std::vector<std::string>* list : {&clients, &daemons}) {
    for (const std::string& name : *list) {
      auto r = gos::testing::Run({Bin(name), "--help"}, {"LD_DEBUG=libs"}, 30s);
      EXPECT_EQ(r.code, 0) << r.Describe();
      EXPECT_NE(r.output.find("usage: " + name), std::string::npos) << r.Describe();
      auto v = gos::testing::Run({Bin(name), "--version"}, {}, 30s);
      EXPECT_EQ(v.code, 0) << v.Describe();
      EXPECT_EQ(v.output.rfind(name + " (gos) ", 0), 0u) << v.Describe();
      const bool loads = r.output.find("libfabric.so") != std::string::npos;
      EXPECT_EQ(loads, list == &daemons)
          << name << (loads ? " loads" : " does not load") << " libfabric";
    }
  }
}

// ---- 1. gos-run -n 8 -l hello on the embedded cluster ---------------------------------------

TEST_F(OsTest, HelloEightRanksLabelledOnEmbeddedCluster) {
  auto run = Run({Bin("gos-run"), "-n", "8", "-l", Hello()});
  ASSERT_EQ(run->ExitCode(), 0) << run->Describe() << Logs();
  std::string problems;
  std::map<int, int> nodes = ParseHello(run->Out(), 8, &problems);
  EXPECT_EQ(problems, "") << run->Describe();
  EXPECT_EQ(Lines(run->Out()).size(), 8u) << run->Describe();
  ASSERT_EQ(nodes.size(), 8u) << run->Describe();
  // The embedded cluster has min(8, 4) = 4 nodes; block distribution: 2 ranks per node.
  for (const auto& [rank, node] : nodes) {
    EXPECT_EQ(node, rank / 2 + 1) << "rank " << rank << "\n" << run->Describe();
  }
  EXPECT_TRUE(Exists(state_ + "/log/coordinator.log"));
  std::printf("gos-run -n 8 -l hello: %.2f s\n", run->Seconds());
}

// mpirun's spelling of the rank count works too (run scripts of MPI programs use it).
TEST_F(OsTest, MpirunsNpSpellingOfTheRankCount) {
  auto run = Run({Bin("gos-run"), "-np", "3", "-l", Hello()});
  ASSERT_EQ(run->ExitCode(), 0) << run->Describe() << Logs();
  std::string problems;
  EXPECT_EQ(ParseHello(run->Out(), 3, &problems).size(), 3u) << run->Describe();
  EXPECT_EQ(problems, "") << run->Describe();
}

// ---- 2. A rank's exit code is the job's --------------------------------------------------------

TEST_F(OsTest, RankExitCodePropagatesAndNamesRankAndNode) {
  auto run = Run({Bin("gos-run"), "-n", "8", "-l", Hello()}, {"HELLO_EXIT_RANK=5", "HELLO_EXIT=3"});
  EXPECT_EQ(run->ExitCode(), 3) << run->Describe() << Logs();
  EXPECT_NE(run->Err().find("rank 5"), std::string::npos) << run->Describe();
  EXPECT_NE(run->Err().find("node 3"), std::string::npos) << run->Describe();  // ranks 4, 5
  // Every rank still ran and printed.
  std::string problems;
  EXPECT_EQ(ParseHello(run->Out(), 8, &problems).size(), 8u) << run->Describe();
}

// ---- 3. A bad program is refused before anything starts --------------------------------------

TEST_F(OsTest, MissingOrNonExecutableProgramIsRefusedBeforeLaunch) {
  const std::string fresh = state_ + "/fresh";  // the state dir gos-run is told to use
  const std::string script = state_ + "/not-executable.sh";
  ASSERT_TRUE(WriteFile(script, "#!/bin/sh\necho should not run\n", 0644));
  struct Case {
    std::string program, why;
  };
  for (const Case& c :
       {Case{state_ + "/no-such-program", "No such file or directory"},
        Case{script, "not executable"}, Case{"gos-os-test-no-such-command", "not found"}}) {
    SCOPED_TRACE(c.program);
    auto run = Run({Bin("gos-run"), "-n", "4", c.program}, {"GOS_STATE_DIR=" + fresh}, 20s);
    EXPECT_EQ(run->ExitCode(), 2) << run->Describe();
    EXPECT_NE(run->Err().find("cannot run"), std::string::npos) << run->Describe();
    EXPECT_NE(run->Err().find(c.program), std::string::npos) << run->Describe();
    EXPECT_NE(run->Err().find(c.why), std::string::npos) << run->Describe();
    EXPECT_EQ(run->Out(), "") << run->Describe();
    EXPECT_LT(run->Seconds(), 5.0) << run->Describe();
    // No coordinator was started.
    EXPECT_FALSE(Exists(fresh + "/log/coordinator.log"));
    EXPECT_FALSE(Exists(fresh + "/coordinator.sock"));
    EXPECT_TRUE(ClusterProcesses(fresh).empty()) << DescribeProcesses(ClusterProcesses(fresh));
  }
}

// A program bigger than a staging chunk reaches every node byte for byte, also as the first
// job of a fresh cluster, when two chunks are in flight at once: a node took a chunk whose
// header had landed but whose data was still arriving for a whole one, and kept zeros in the
// staged file (7 of 8 fresh 3-node clusters had some node run a corrupt 12 MiB program).
TEST_F(OsTest, BigProgramsArriveWholeOnEveryNode) {
  const std::string program = gos::testing::TestBinDir() + "/big_exe_rank";
  auto local = Run({program}, {}, 20s);
  ASSERT_EQ(local->ExitCode(), 0) << local->Describe();
  const std::string want = local->Out();
  ASSERT_NE(want.find("blob 90"), std::string::npos) << want;
  for (int i = 0; i < 3; ++i) {
    const std::string fresh = state_ + "/fresh" + std::to_string(i);
    auto run =
        Run({Bin("gos-run"), "-n", "3", "-N", "3", "-l", program}, {"GOS_STATE_DIR=" + fresh}, 60s);
    ASSERT_EQ(run->ExitCode(), 0) << run->Describe();
    std::vector<std::string> got = Lines(run->Out());
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got.size(), 3u) << run->Describe();
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(got[r] + "\n", std::to_string(r) + ": " + want) << "cluster " << i;
    }
  }
}

// Options that cannot work are refused with the reason, by gos-run itself or by the local
// coordinator it starts (whose reason gos-run and gos-cluster show, not just its log's path),
// and nothing is left running.
TEST_F(OsTest, UnworkableOptionsAreRefusedNamingTheReason) {
  const std::string fresh = state_ + "/fresh";
  struct Case {
    std::vector<std::string> argv;
    int code;
    std::string why;
  };
  for (const Case& c : {
           Case{{Bin("gos-run"), "-n", "2", "--ranks-per-node", "0", "/bin/true"},
                2,
                "--ranks-per-node must be at least 1"},
           Case{{Bin("gos-run"), "--checkpoint=1s", "--keep", "0", "/bin/true"},
                2,
                "--keep must be at least 1"},
           Case{{Bin("gos-ckpt"), "--timeout", "0", "1"}, 2, "--timeout must be longer than 0"},
           Case{{Bin("gos-store"), "gc", "--keep-logs", "0"}, 2, "--keep-logs must be at least 1"},
           Case{{Bin("gos-cluster"), "up", "-N", "0"}, 2, "-N must be at least 1"},
           Case{{Bin("gos-run"), "-n", "1", "--mpl", "0", "/bin/true"},
                1,
                "--mpl must be at least 1"},
           Case{{Bin("gos-run"), "-n", "1", "--timeslice", "0", "/bin/true"},
                1,
                "--timeslice 0us is too short"},
           Case{{Bin("gos-cluster"), "up", "-N", "1", "--timeslice", "50us"},
                1,
                "--timeslice 50us is too short: at least 100us"},
           Case{{Bin("gos-cluster"), "up", "-N", "1", "--timeslice", "5ms", "--failure-timeout",
                 "5ms"},
                1,
                "--failure-timeout must be longer than --timeslice"},
       }) {
    SCOPED_TRACE(c.argv[0] + " " + c.why);
    auto run = Run(c.argv, {"GOS_STATE_DIR=" + fresh}, 20s);
    EXPECT_EQ(run->ExitCode(), c.code) << run->Describe();
    EXPECT_NE(run->Err().find(c.why), std::string::npos) << run->Describe();
    EXPECT_EQ(run->Out(), "") << run->Describe();
    EXPECT_TRUE(ClusterProcesses(fresh).empty()) << DescribeProcesses(ClusterProcesses(fresh));
  }
}

// ---- 4. Gang scheduling: two jobs at MPL 2 on the same nodes ----------------------------------

TEST_F(OsTest, TwoJobsOnSameNodesAreGangScheduledOneThawedAtATime) {
  auto up =
      Run({Bin("gos-cluster"), "up", "-N", "2", "--timeslice", "20ms", "--mpl", "2"}, {}, 60s);
  ASSERT_EQ(up->ExitCode(), 0) << up->Describe() << Logs();
  ASSERT_TRUE(WaitForNodes(socket(), 2, 10s));
  std::vector<std::string> agent_dirs;  // cgroup dirs <name>.<pid> may appear only at launch
  std::vector<std::string> agent_prefixes;
  for (const char* name : {"n1", "n2"}) {
    pid_t pid = AgentPid(name);
    ASSERT_GT(pid, 0) << "no nodeagent " << name << ":\n" << DescribeProcesses(ClusterProcesses());
    agent_prefixes.push_back(std::string(kFreezerGos) + "/" + name + "." + std::to_string(pid));
  }

  // Each job needs 1 s of CPU per rank; sharing the nodes, each gets half of the time.
  const std::vector<std::string> job = {Bin("gos-run"), "-N",         "2",    "-n", "2",
                                        "-l",           RankHelper(), "spin", "1.0"};
  auto a = Start(job);
  auto b = Start(job);

  // Sample the freezer states of every job cgroup of both agents until both jobs end. A job
  // counts as thawed in a sample if its cgroup holds processes and reads THAWED in two passes
  // (forward, then backward): the agent freezes one row before it thaws the next, but a single
  // pass reads the cgroups at slightly different times and could see the hand-over half done.
  int samples = 0, overlapping = 0;
  std::vector<std::string> violations;
  std::set<std::string> seen, seen_thawed;
  auto deadline = SteadyClock::now() + 90s;
  while ((a->Running() || b->Running()) && SteadyClock::now() < deadline) {
    for (const auto& agent : agent_prefixes) {
      std::vector<std::string> jobs;
      for (const auto& j : SubDirs(agent)) {
        if (j[0] == 'j') jobs.push_back(j);
      }
      auto thawed = [&](const std::string& j) {
        std::string dir = agent + "/" + j;
        return Trim(ReadFile(dir + "/freezer.state")) == "THAWED" && !CgroupPids(dir).empty();
      };
      std::map<std::string, bool> first;
      for (const auto& j : jobs) first[j] = thawed(j);
      std::vector<std::string> both;
      int live = 0;
      for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
        if (thawed(*it) && first[*it]) both.push_back(*it);
        live += CgroupPids(agent + "/" + *it).empty() ? 0 : 1;
      }
      seen.insert(jobs.begin(), jobs.end());
      seen_thawed.insert(both.begin(), both.end());
      if (live >= 2) ++overlapping;
      if (both.size() > 1) {
        std::string v = agent + ":";
        for (const auto& j : both) v += " " + j;
        violations.push_back(v + " THAWED at once");
      }
    }
    ++samples;
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_TRUE(a->Wait(1s)) << a->Describe() << Logs();
  ASSERT_TRUE(b->Wait(1s)) << b->Describe() << Logs();
  EXPECT_EQ(a->ExitCode(), 0) << a->Describe() << Logs();
  EXPECT_EQ(b->ExitCode(), 0) << b->Describe() << Logs();
  for (Proc* p : {a.get(), b.get()}) {
    std::vector<std::string> lines = Lines(p->Out());
    std::sort(lines.begin(), lines.end());
    EXPECT_EQ(lines, (std::vector<std::string>{"0: ready", "0: spun 1.00 s", "1: ready",
                                               "1: spun 1.00 s"}))
        << p->Describe();
  }
  EXPECT_TRUE(violations.empty()) << violations.size() << " of " << samples
                                  << " samples had two jobs thawed on one node, e.g. "
                                  << violations.front();
  EXPECT_EQ(seen.size(), 2u) << "job cgroups seen:" << ::testing::PrintToString(seen);
  EXPECT_EQ(seen_thawed, seen) << "each job must have been seen running (THAWED) at least once";
  EXPECT_GT(overlapping, 0) << "the two jobs never had processes on a node at the same time";
  std::printf("%d samples, %d with both jobs on a node; jobs took %.2f s and %.2f s\n", samples,
              overlapping, a->Seconds(), b->Seconds());

  // Both placed in different rows of the same two nodes.
  auto ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  ASSERT_GE(ps->jobs.size(), 2u) << DescribePs(ps);
  std::set<int32_t> rows;
  for (const auto& j : ps->jobs) {
    EXPECT_EQ(j.state, "completed") << DescribePs(ps);
    EXPECT_EQ(j.nodes, (std::vector<uint32_t>{1, 2})) << DescribePs(ps);
    rows.insert(j.row);
  }
  EXPECT_EQ(rows.size(), 2u) << DescribePs(ps);

  auto down = Run({Bin("gos-cluster"), "down"}, {}, 30s);
  EXPECT_EQ(down->ExitCode(), 0) << down->Describe();
  EXPECT_TRUE(WaitUntil([&] { return ClusterProcesses().empty(); }, 15s))
      << "gos-cluster down left:\n"
      << DescribeProcesses(ClusterProcesses());
}

// ---- 5. A nodeagent killed during a job ---------------------------------------------------------

// Then the node joins again (gos-cluster rejoin) and jobs use it.
TEST_F(OsTest, KilledNodeagentFailsItsJobAndSparesOthers) {
  auto up = Run({Bin("gos-cluster"), "up", "-N", "3", "--failure-timeout", "1s"}, {}, 60s);
  ASSERT_EQ(up->ExitCode(), 0) << up->Describe() << Logs();
  ASSERT_TRUE(WaitForNodes(socket(), 3, 10s));

  // Job A on nodes 1-2 (lowest free nodes of row 0), job B on node 3 (the same row).
  auto a = Start({Bin("gos-run"), "-N", "2", "-n", "2", "-l", RankHelper(), "sleep", "20000"});
  ASSERT_TRUE(a->WaitForOutput("0: ready", 30s) && a->WaitForOutput("1: ready", 10s))
      << a->Describe() << Logs();
  auto b = Start({Bin("gos-run"), "-N", "1", "-n", "1", "-l", RankHelper(), "sleep", "4000"});
  ASSERT_TRUE(b->WaitForOutput("0: ready", 30s)) << b->Describe() << Logs();
  auto ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  ASSERT_EQ(ps->jobs.size(), 2u) << DescribePs(ps);
  const uint64_t job_a = ps->jobs[0].id;
  ASSERT_EQ(ps->jobs[0].nodes, (std::vector<uint32_t>{1, 2})) << DescribePs(ps);
  ASSERT_EQ(ps->jobs[1].nodes, (std::vector<uint32_t>{3})) << DescribePs(ps);

  pid_t n1 = AgentPid("n1"), n2 = AgentPid("n2");
  ASSERT_GT(n1, 0) << DescribeProcesses(ClusterProcesses());
  ASSERT_GT(n2, 0) << DescribeProcesses(ClusterProcesses());
  const std::string job_dir = "/jobs/" + std::to_string(job_a) + "/";
  ASSERT_GE(ClusterProcesses(job_dir).size(), 2u)  // its ranks (and their inits), 2 nodes
      << DescribeProcesses(ClusterProcesses(job_dir));
  const std::string a_on_n2 = AgentCgroup(n2) + "/j" + std::to_string(job_a);
  ASSERT_TRUE(IsDir(a_on_n2)) << a_on_n2;

  killed_agents_.insert(n1);
  auto killed = SteadyClock::now();
  ASSERT_EQ(::kill(n1, SIGKILL), 0);
  ASSERT_TRUE(a->Wait(10s)) << "job A still running 10 s after its node died\n"
                            << a->Describe() << Logs();
  double detected = SecondsSince(killed);
  EXPECT_EQ(a->ExitCode(), 255) << a->Describe();
  EXPECT_NE(a->Err().find("node 1"), std::string::npos) << a->Describe();
  EXPECT_LT(detected, 3.0) << "failure timeout is 1 s\n" << a->Describe();
  std::printf("job A failed %.2f s after kill -9 of node 1's agent\n", detected);

  // Its ranks are gone everywhere; its cgroup on node 2 too.
  EXPECT_TRUE(WaitUntil([&] { return !IsDir(a_on_n2); }, 5s)) << a_on_n2 << " still there";
  std::map<pid_t, std::string> left;
  EXPECT_TRUE(WaitUntil([&] { return (left = ClusterProcesses(job_dir)).empty(); }, 5s))
      << "processes of failed job " << job_a << " still running:\n"
      << DescribeProcesses(left);

  // Job B, on node 3, is not affected.
  ASSERT_TRUE(b->Wait(30s)) << b->Describe() << Logs();
  EXPECT_EQ(b->ExitCode(), 0) << b->Describe() << Logs();
  EXPECT_EQ(b->Out(), "0: ready\n0: slept 4000 ms\n") << b->Describe();

  ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  const PsJob* ja = FindJob(*ps, job_a);
  ASSERT_NE(ja, nullptr) << DescribePs(ps);
  EXPECT_EQ(ja->state, "failed") << DescribePs(ps);
  EXPECT_EQ(ja->exit_code, 255) << DescribePs(ps);
  EXPECT_NE(ja->message.find("node 1"), std::string::npos) << DescribePs(ps);
  ASSERT_EQ(ps->nodes.size(), 3u) << DescribePs(ps);
  EXPECT_FALSE(ps->nodes[0].up) << DescribePs(ps);
  EXPECT_TRUE(ps->nodes[1].up && ps->nodes[2].up) << DescribePs(ps);

  // The node comes back: a nodeagent may join only in place of a node that is down.
  auto dup = Run({Bin("gos-nodeagent"), "--coordinator", state_, "--name", "dup", "--state-dir",
                  state_ + "/nodes/dup", "--node", "2", "--exit-with-coordinator"},
                 {}, 30s);
  EXPECT_EQ(dup->ExitCode(), 1) << dup->Describe();
  EXPECT_NE(dup->Err().find("node 2 of the cluster of 3 nodes is up"), std::string::npos)
      << dup->Describe();
  auto up_already = Run({Bin("gos-cluster"), "rejoin", "3"}, {}, 30s);
  EXPECT_EQ(up_already->ExitCode(), 1) << up_already->Describe();
  EXPECT_NE(up_already->Err().find(") is up: nothing to rejoin"), std::string::npos)
      << up_already->Describe();
  auto no_such = Run({Bin("gos-cluster"), "rejoin", "9"}, {}, 30s);
  EXPECT_EQ(no_such->ExitCode(), 2) << no_such->Describe();
  EXPECT_NE(no_such->Err().find("no node 9"), std::string::npos) << no_such->Describe();

  auto rejoin = Run({Bin("gos-cluster"), "rejoin", "1"}, {}, 60s);
  ASSERT_EQ(rejoin->ExitCode(), 0) << rejoin->Describe() << Logs();
  EXPECT_NE(rejoin->Out().find("node 1 is up again"), std::string::npos) << rejoin->Describe();
  const pid_t n1_again = AgentPid("n1");
  ASSERT_GT(n1_again, 0) << DescribeProcesses(ClusterProcesses());
  EXPECT_NE(n1_again, n1);
  ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  EXPECT_TRUE(ps->nodes[0].up && ps->nodes[1].up && ps->nodes[2].up) << DescribePs(ps);
  // A job over every node, the one that joined again included, and one that communicates.
  auto all = Run({Bin("gos-run"), "-N", "3", "-n", "3", "-l", Hello()}, {}, 60s);
  ASSERT_EQ(all->ExitCode(), 0) << all->Describe() << Logs();
  std::string problems;
  std::map<int, int> placed = ParseHello(all->Out(), 3, &problems);
  EXPECT_EQ(problems, "") << all->Describe();
  EXPECT_EQ(placed, (std::map<int, int>{{0, 1}, {1, 2}, {2, 3}})) << all->Describe();
  auto ring =
      Run({Bin("gos-run"), "-N", "3", "-n", "3", GosBinDir() + "/../examples/ring"}, {}, 60s);
  EXPECT_EQ(ring->ExitCode(), 0) << ring->Describe() << Logs();

  // A node declared down while its agent lives on (stopped): rejoin refuses to start a second
  // agent on its state dir, naming the first; once that one is gone, it starts the node again.
  const pid_t n3 = SignalAgentUntilDown("n3", 3, SIGSTOP);
  ASSERT_GT(n3, 0);
  auto second = Run({Bin("gos-cluster"), "rejoin", "3"}, {}, 30s);
  EXPECT_EQ(second->ExitCode(), 1) << second->Describe();
  EXPECT_NE(
      second->Err().find("earlier nodeagent (pid " + std::to_string(n3) + ") is still running"),
      std::string::npos)
      << second->Describe();
  ASSERT_EQ(::kill(n3, SIGKILL), 0);
  EXPECT_TRUE(WaitUntil([&] { return AgentPid("n3") < 0; }, 10s));
  auto third = Run({Bin("gos-cluster"), "rejoin", "3"}, {}, 60s);
  EXPECT_EQ(third->ExitCode(), 0) << third->Describe() << Logs();

  auto down = Run({Bin("gos-cluster"), "down"}, {}, 30s);
  EXPECT_EQ(down->ExitCode(), 0) << down->Describe();
  EXPECT_TRUE(WaitUntil([&] { return ClusterProcesses().empty(); }, 15s))
      << "gos-cluster down left:\n"
      << DescribeProcesses(ClusterProcesses());
}

// Issue 31: a node busy starting hundreds of ranks is not taken for dead (they start a slice
// at a time between strobes, and a fork does not copy the agent's memory), while a stopped
// agent still is, within the failure timeout (the default, 2 s) and a strobe.
TEST_F(OsTest, BigLaunchesAreNotTakenForDeathButAStoppedAgentIs) {
  auto up = Run({Bin("gos-cluster"), "up", "-N", "4"}, {}, 60s);
  ASSERT_EQ(up->ExitCode(), 0) << up->Describe() << Logs();
  ASSERT_TRUE(WaitForNodes(socket(), 4, 10s));
  for (const char* n : {"1000", "2000"}) {
    auto run = Run({Bin("gos-run"), "-n", n, "/bin/true"}, {}, 120s);
    EXPECT_EQ(run->ExitCode(), 0) << run->Describe() << Logs();
    EXPECT_EQ(run->Err(), "") << run->Describe();
    EXPECT_LT(run->Seconds(), 60.0) << run->Describe();
    std::printf("gos-run -n %s /bin/true on 4 nodes: %.2f s\n", n, run->Seconds());
  }
  auto ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  for (const auto& node : ps->nodes) EXPECT_TRUE(node.up) << DescribePs(ps);

  auto job = Start({Bin("gos-run"), "-N", "4", "-n", "4", "-l", RankHelper(), "sleep", "30000"});
  for (const char* r : {"0: ready", "1: ready", "2: ready", "3: ready"}) {
    ASSERT_TRUE(job->WaitForOutput(r, 30s)) << job->Describe() << Logs();
  }
  const pid_t n2 = AgentPid("n2");
  ASSERT_GT(n2, 0) << DescribeProcesses(ClusterProcesses());
  killed_agents_.insert(n2);
  auto stopped = SteadyClock::now();
  ASSERT_EQ(::kill(n2, SIGSTOP), 0);
  ASSERT_TRUE(job->Wait(10s)) << "job still running 10 s after node 2's agent stopped\n"
                              << job->Describe() << Logs();
  const double detected = SecondsSince(stopped);
  EXPECT_EQ(job->ExitCode(), 255) << job->Describe();
  EXPECT_NE(job->Err().find("node 2"), std::string::npos) << job->Describe();
  // Whichever sees it first: the primitives' heartbeat or the strobe's confirmation.
  EXPECT_NE(job->Err().find("is down: "), std::string::npos) << job->Describe();
  EXPECT_FALSE(job->Err().find("(failure timeout 2000 ms)") == std::string::npos &&
               job->Err().find("within the failure timeout (2000 ms)") == std::string::npos)
      << job->Describe();
  // The failure timeout, one strobe, and the time the job's end takes to reach gos-run.
  EXPECT_LT(detected, 2.0 + 0.5) << job->Describe();
  std::printf("job failed %.2f s after SIGSTOP of node 2's agent\n", detected);
  ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  ASSERT_EQ(ps->nodes.size(), 4u) << DescribePs(ps);
  EXPECT_FALSE(ps->nodes[1].up) << DescribePs(ps);

  ASSERT_EQ(::kill(n2, SIGKILL), 0);
  ::kill(n2, SIGCONT);
  auto down = Run({Bin("gos-cluster"), "down"}, {}, 30s);
  EXPECT_EQ(down->ExitCode(), 0) << down->Describe();
  EXPECT_TRUE(WaitUntil([&] { return ClusterProcesses().empty(); }, 15s))
      << "gos-cluster down left:\n"
      << DescribeProcesses(ClusterProcesses());
}

// ---- 6. Coordinator killed and restarted -------------------------------------------------------

TEST_F(OsTest, CoordinatorRestartRecoversJobAndNodeTables) {
  auto start_coordinator = [&] {
    return Start(
        {Bin("gos-coordinator"), "--data-dir", state_, "--nodes", "2", "--failure-timeout", "1s"});
  };
  auto coordinator = start_coordinator();
  ASSERT_TRUE(WaitUntil([&] { return !Trim(ReadFile(state_ + "/coordinator.addr")).empty(); }, 20s))
      << coordinator->Describe();
  std::vector<std::unique_ptr<Proc>> agents;
  for (const char* name : {"n1", "n2"}) {
    agents.push_back(Start({Bin("gos-nodeagent"), "--coordinator", state_, "--name", name,
                            "--state-dir", state_ + "/nodes/" + name}));
    agents_.insert(agents.back()->pid());
  }
  ASSERT_TRUE(WaitForNodes(socket(), 2, 30s)) << coordinator->Describe();

  auto ok = Run({Bin("gos-run"), "-n", "2", Hello()});
  EXPECT_EQ(ok->ExitCode(), 0) << ok->Describe();
  auto bad = Run({Bin("gos-run"), "-n", "2", Hello()}, {"HELLO_EXIT_RANK=1", "HELLO_EXIT=3"});
  EXPECT_EQ(bad->ExitCode(), 3) << bad->Describe();
  auto running = Start({Bin("gos-run"), "-n", "2", "-l", RankHelper(), "sleep", "0"});
  ASSERT_TRUE(running->WaitForOutput("0: ready", 30s) && running->WaitForOutput("1: ready", 10s))
      << running->Describe() << coordinator->Describe();
  auto before = Ps(socket());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ(before->jobs.size(), 3u) << DescribePs(before);
  const uint64_t running_id = before->jobs[2].id;
  EXPECT_EQ(before->jobs[2].state, "running") << DescribePs(before);

  coordinator->Signal(SIGKILL);
  ASSERT_TRUE(coordinator->Wait(5s));
  // gos-run loses its coordinator; the agents kill the ranks they can no longer report.
  ASSERT_TRUE(running->Wait(10s)) << running->Describe();
  EXPECT_EQ(running->ExitCode(), 255) << running->Describe();
  EXPECT_NE(running->Err().find("lost the coordinator"), std::string::npos) << running->Describe();
  const std::string job_dir = "/jobs/" + std::to_string(running_id) + "/";
  std::map<pid_t, std::string> left;
  EXPECT_TRUE(WaitUntil([&] { return (left = ClusterProcesses(job_dir)).empty(); }, 10s))
      << "ranks of job " << running_id << " outlived the coordinator:\n"
      << DescribeProcesses(left);

  coordinator = start_coordinator();
  // The tables come back before the nodes do: gos-ps lists the jobs with their final states.
  StatusOr<PsReply> after = UnavailableError("no reply");
  ASSERT_TRUE(WaitUntil([&] { return (after = Ps(socket())).ok(); }, 20s))
      << after.status().ToString() << coordinator->Describe();
  ASSERT_EQ(after->jobs.size(), 3u) << DescribePs(after);
  EXPECT_EQ(after->jobs[0].state, "completed") << DescribePs(after);
  EXPECT_EQ(after->jobs[0].exit_code, 0) << DescribePs(after);
  EXPECT_EQ(after->jobs[1].state, "failed") << DescribePs(after);
  EXPECT_EQ(after->jobs[1].exit_code, 3) << DescribePs(after);
  EXPECT_EQ(after->jobs[2].id, running_id);
  EXPECT_EQ(after->jobs[2].state, "failed") << DescribePs(after);
  EXPECT_NE(after->jobs[2].message.find("restart"), std::string::npos) << DescribePs(after);
  EXPECT_EQ(after->nodes.size(), 2u) << DescribePs(after);

  auto ps = Run({Bin("gos-ps"), "--jobs"});
  EXPECT_EQ(ps->ExitCode(), 0) << ps->Describe();
  const std::vector<std::string> lines = Lines(ps->Out());
  ASSERT_EQ(lines.size(), 4u) << ps->Describe();  // header and 3 jobs
  for (int i = 0; i < 3; ++i) {
    std::istringstream row(lines[1 + i]);
    std::string id, user, state;
    row >> id >> user >> state;
    EXPECT_EQ(id, std::to_string(after->jobs[i].id)) << ps->Describe();
    EXPECT_EQ(user, "root") << ps->Describe();
    EXPECT_EQ(state, i == 0 ? "completed" : "failed") << ps->Describe();
  }

  // The agents rejoin by themselves, and the cluster runs jobs again.
  ASSERT_TRUE(WaitForNodes(socket(), 2, 30s))
      << coordinator->Describe() << agents[0]->Describe() << agents[1]->Describe();
  auto again = Run({Bin("gos-run"), "-n", "2", "-l", Hello()});
  EXPECT_EQ(again->ExitCode(), 0) << again->Describe() << coordinator->Describe();
  EXPECT_EQ(Lines(again->Out()).size(), 2u) << again->Describe();

  // An agent stopped past the failure timeout is declared down (the agents took their ids in
  // the order they came back: either may be n2's); once it runs again it finds itself dropped
  // and joins the running cluster again in its own place, by itself.
  agents[1]->Signal(SIGSTOP);
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto p = Ps(socket());
        return p.ok() && p->nodes.size() == 2 && (!p->nodes[0].up || !p->nodes[1].up);
      },
      10s))
      << DescribePs(Ps(socket()));
  agents[1]->Signal(SIGCONT);
  ASSERT_TRUE(WaitForNodes(socket(), 2, 30s)) << coordinator->Describe() << agents[1]->Describe();
  auto back = Run({Bin("gos-run"), "-n", "2", "-N", "2", "-l", Hello()});
  EXPECT_EQ(back->ExitCode(), 0) << back->Describe() << coordinator->Describe();
  EXPECT_EQ(Lines(back->Out()).size(), 2u) << back->Describe();

  coordinator->Signal(SIGTERM);
  EXPECT_TRUE(coordinator->Wait(15s)) << coordinator->Describe();
  for (auto& agent : agents) {
    agent->Signal(SIGTERM);
    EXPECT_TRUE(agent->Wait(15s)) << agent->Describe();
    EXPECT_EQ(agent->ExitCode(), 0) << agent->Describe();
  }
}

// ---- 7. Three hosts in network namespaces ------------------------------------------------------

TEST_F(OsTest, ThreeNetworkNamespaceHosts) {
  if (std::string why = NetnsHosts::Unsupported(); !why.empty()) GTEST_SKIP() << why;
  auto hosts = NetnsHosts::Create(3);
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  auto coordinator = Start({Bin("gos-coordinator"), "--data-dir", state_, "--nodes", "3",
                            "--listen", (*hosts)->bridge_ip() + ":0"});
  std::string address;
  ASSERT_TRUE(WaitUntil(
      [&] { return !(address = Trim(ReadFile(state_ + "/coordinator.addr"))).empty(); }, 20s))
      << coordinator->Describe();
  EXPECT_EQ(address.rfind((*hosts)->bridge_ip() + ":", 0), 0u) << address;
  std::vector<std::unique_ptr<Proc>> agents;
  for (int i = 0; i < 3; ++i) {
    std::string name = "h" + std::to_string(i);
    // Not NetnsHosts::Wrap: `ip netns exec` also remounts /sys, which hides the freezer
    // hierarchy from the agent; a real host has its cgroups mounted. nsenter --net only
    // changes the network namespace.
    agents.push_back(
        Start({"nsenter", "--net=/run/netns/" + (*hosts)->name(i), "--", Bin("gos-nodeagent"),
               "--coordinator", address, "--key-file", state_ + "/cluster.key", "--name", name,
               "--state-dir", state_ + "/nodes/" + name, "--node", std::to_string(i + 1),
               "--exit-with-coordinator"}));
    agents_.insert(agents.back()->pid());
  }
  ASSERT_TRUE(WaitForNodes(socket(), 3, 30s)) << coordinator->Describe() << agents[0]->Describe()
                                              << agents[1]->Describe() << agents[2]->Describe();

  const std::string client_env = "GOS_COORDINATOR=" + socket();
  auto run = Run({Bin("gos-run"), "-n", "3", "-l", Hello()}, {client_env});
  EXPECT_EQ(run->ExitCode(), 0) << run->Describe() << coordinator->Describe()
                                << agents[0]->Describe();
  std::string problems;
  std::map<int, int> nodes = ParseHello(run->Out(), 3, &problems);
  EXPECT_EQ(problems, "") << run->Describe();
  EXPECT_EQ(nodes, (std::map<int, int>{{0, 1}, {1, 2}, {2, 3}})) << run->Describe();

  // Each rank really ran inside its host's network namespace.
  auto where = Run({Bin("gos-run"), "-n", "3", "-l", RankHelper(), "netns"}, {client_env});
  EXPECT_EQ(where->ExitCode(), 0) << where->Describe();
  std::vector<std::string> expected;
  for (int i = 0; i < 3; ++i) {
    struct stat st {};
    ASSERT_EQ(::stat(("/run/netns/" + (*hosts)->name(i)).c_str(), &st), 0);
    expected.push_back(std::to_string(i) + ": netns " + std::to_string(st.st_ino));
  }
  std::vector<std::string> got = Lines(where->Out());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected) << where->Describe();

  coordinator->Signal(SIGTERM);
  EXPECT_TRUE(coordinator->Wait(15s)) << coordinator->Describe();
  for (auto& agent : agents) {
    EXPECT_TRUE(agent->Wait(15s)) << "did not exit with the coordinator: " << agent->Describe();
  }
}

// The same made by the tool: `gos-cluster up --netns` puts each nodeagent (and so its ranks)
// in a network namespace of its own on a bridge, and `down` removes them.
TEST_F(OsTest, ClusterUpNetnsPutsEachNodeInItsOwnNamespace) {
  if (std::string why = NetnsHosts::Unsupported(); !why.empty()) GTEST_SKIP() << why;
  // Whatever happens below, nothing the tool recorded stays behind.
  struct Cleanup {
    std::string record;
    ~Cleanup() {
      std::ifstream in(record);
      std::string kind, name;
      while (in >> kind >> name) {
        if (kind == "veth") gos::testing::RunCommand({"ip", "link", "del", name}).IgnoreError();
        if (kind == "netns") gos::testing::RunCommand({"ip", "netns", "del", name}).IgnoreError();
        if (kind == "bridge") gos::testing::RunCommand({"ip", "link", "del", name}).IgnoreError();
      }
    }
  } cleanup{state_ + "/netns"};
  auto up = Run({Bin("gos-cluster"), "up", "-N", "3", "--netns"}, {}, 60s);
  ASSERT_EQ(up->ExitCode(), 0) << up->Describe() << Logs();
  const std::vector<std::string> record = Lines(ReadFile(cleanup.record));
  ASSERT_EQ(record.size(), 7u) << ReadFile(cleanup.record);
  ASSERT_EQ(record[0].rfind("bridge gosbr", 0), 0u) << record[0];
  const std::string bridge = record[0].substr(7);
  std::vector<std::string> names, veths;
  for (size_t i = 1; i + 1 < record.size(); i += 2) {
    ASSERT_EQ(record[i].rfind("netns gos-c", 0), 0u) << record[i];
    ASSERT_EQ(record[i + 1].rfind("veth gosv", 0), 0u) << record[i + 1];
    names.push_back(record[i].substr(6));
    veths.push_back(record[i + 1].substr(5));
  }
  // The coordinator listens on the bridge, where the namespaces reach it.
  EXPECT_EQ(Trim(ReadFile(state_ + "/coordinator.addr")).rfind("198.19.", 0), 0u)
      << ReadFile(state_ + "/coordinator.addr");

  auto where = Run({Bin("gos-run"), "-n", "3", "-l", RankHelper(), "netns"}, {}, 60s);
  EXPECT_EQ(where->ExitCode(), 0) << where->Describe() << Logs();
  std::vector<std::string> expected;
  for (int i = 0; i < 3; ++i) {
    struct stat st {};
    ASSERT_EQ(::stat(("/run/netns/" + names[i]).c_str(), &st), 0) << names[i];
    expected.push_back(std::to_string(i) + ": netns " + std::to_string(st.st_ino));
  }
  std::vector<std::string> got = Lines(where->Out());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected) << where->Describe();

  // A node's agent killed, then started again by `gos-cluster rejoin`: back in its own
  // namespace, over tcp;ofi_rxm like a host that was repaired.
  ASSERT_GT(SignalAgentUntilDown("n2", 2, SIGKILL), 0);
  auto rejoin = Run({Bin("gos-cluster"), "rejoin", "2"}, {}, 60s);
  ASSERT_EQ(rejoin->ExitCode(), 0) << rejoin->Describe() << Logs();
  auto again = Run({Bin("gos-run"), "-n", "3", "-l", RankHelper(), "netns"}, {}, 60s);
  EXPECT_EQ(again->ExitCode(), 0) << again->Describe() << Logs();
  got = Lines(again->Out());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected) << again->Describe();

  auto down = Run({Bin("gos-cluster"), "down"}, {}, 30s);
  EXPECT_EQ(down->ExitCode(), 0) << down->Describe();
  for (const std::string& name : names) {
    EXPECT_NE(::access(("/run/netns/" + name).c_str(), F_OK), 0) << name << " left behind";
  }
  for (const std::string& link : veths) {
    EXPECT_NE(::access(("/sys/class/net/" + link).c_str(), F_OK), 0) << link << " left behind";
  }
  EXPECT_NE(::access(("/sys/class/net/" + bridge).c_str(), F_OK), 0) << bridge << " left behind";
  EXPECT_NE(::access(cleanup.record.c_str(), F_OK), 0) << "the record outlived the cluster";
  EXPECT_TRUE(WaitUntil([&] { return ClusterProcesses().empty(); }, 15s))
      << "gos-cluster down left:\n"
      << DescribeProcesses(ClusterProcesses());
}

// ---- 8. Only a job's owner or root may kill it -------------------------------------------------

TEST_F(OsTest, AnotherUsersKillIsRefused) {
  auto run = Start({Bin("gos-run"), "-n", "2", "-l", RankHelper(), "sleep", "0"});
  ASSERT_TRUE(run->WaitForOutput("0: ready", 30s) && run->WaitForOutput("1: ready", 10s))
      << run->Describe() << Logs();
  auto ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  ASSERT_EQ(ps->jobs.size(), 1u) << DescribePs(ps);
  const std::string job = std::to_string(ps->jobs[0].id);

  Outcome nobody = RunAs(kNobody, kNobody, {Bin("gos-kill"), job},
                         {"GOS_STATE_DIR=" + state_, "PATH=/usr/bin:/bin"}, 20s);
  if (WIFEXITED(nobody.status) && WEXITSTATUS(nobody.status) == 127) {
    GTEST_SKIP() << "user nobody cannot execute " << Bin("gos-kill") << ": " << nobody.output;
  }
  EXPECT_TRUE(WIFEXITED(nobody.status) && WEXITSTATUS(nobody.status) == 1)
      << DescribeWaitStatus(nobody.status) << ": " << nobody.output;
  EXPECT_NE(nobody.output.find("permission denied"), std::string::npos) << nobody.output;

  // The job keeps running.
  EXPECT_TRUE(run->Running()) << run->Describe();
  ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  EXPECT_EQ(ps->jobs[0].state, "running") << DescribePs(ps);

  auto root = Run({Bin("gos-kill"), job}, {}, 20s);
  EXPECT_EQ(root->ExitCode(), 0) << root->Describe();
  ASSERT_TRUE(run->Wait(20s)) << run->Describe() << Logs();
  EXPECT_EQ(run->ExitCode(), 137) << run->Describe();
  EXPECT_NE(run->Err().find("killed"), std::string::npos) << run->Describe();
}

// Clients over TCP (GOS_COORDINATOR=host:port, the nodeagents' port): with the cluster key
// they submit (the executable uploaded), see and control jobs as over the unix socket,
// acting for the user they are; with another cluster's key, or none (user nobody cannot read
// root's), they are refused.
TEST_F(OsTest, TcpClientsNeedTheClusterKey) {
  auto run = Start({Bin("gos-run"), "-n", "2", "-l", RankHelper(), "sleep", "0"});
  ASSERT_TRUE(run->WaitForOutput("0: ready", 30s) && run->WaitForOutput("1: ready", 10s))
      << run->Describe() << Logs();
  const std::string address = Trim(ReadFile(state_ + "/coordinator.addr"));
  ASSERT_NE(address.find(':'), std::string::npos) << address;
  const std::string tcp = "GOS_COORDINATOR=" + address;
  auto ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  ASSERT_EQ(ps->jobs.size(), 1u) << DescribePs(ps);
  const std::string job = std::to_string(ps->jobs[0].id);

  auto listed = Run({Bin("gos-ps")}, {tcp}, 30s);
  EXPECT_EQ(listed->ExitCode(), 0) << listed->Describe();
  EXPECT_NE(listed->Out().find("running"), std::string::npos) << listed->Describe();

  // A job submitted over TCP: the executable is uploaded, the output streams back.
  auto submit = Run({Bin("gos-run"), "-n", "2", "-l", Hello()}, {tcp}, 60s);
  EXPECT_EQ(submit->ExitCode(), 0) << submit->Describe() << Logs();
  std::string problems;
  EXPECT_EQ(ParseHello(submit->Out(), 2, &problems).size(), 2u) << problems << submit->Describe();
  EXPECT_EQ(problems, "") << submit->Describe();
  EXPECT_FALSE(IsDir(state_ + "/uploads") && !std::filesystem::is_empty(state_ + "/uploads"))
      << "uploads left behind";

  const std::string other = state_ + "/other.key";
  ASSERT_TRUE(std::ofstream(other) << std::string(64, 'a') << "\n");
  ASSERT_EQ(::chmod(other.c_str(), 0600), 0);
  auto wrong = Run({Bin("gos-ps")}, {tcp, "GOS_KEY_FILE=" + other}, 30s);
  EXPECT_EQ(wrong->ExitCode(), 1) << wrong->Describe();
  EXPECT_NE(wrong->Err().find("refused"), std::string::npos) << wrong->Describe();

  Outcome nobody = RunAs(kNobody, kNobody, {Bin("gos-kill"), job},
                         {"GOS_STATE_DIR=" + state_, tcp, "PATH=/usr/bin:/bin"}, 20s);
  if (WIFEXITED(nobody.status) && WEXITSTATUS(nobody.status) == 127) {
    GTEST_SKIP() << "user nobody cannot execute " << Bin("gos-kill") << ": " << nobody.output;
  }
  EXPECT_TRUE(WIFEXITED(nobody.status) && WEXITSTATUS(nobody.status) != 0)
      << DescribeWaitStatus(nobody.status) << ": " << nobody.output;
  EXPECT_NE(nobody.output.find("cluster key"), std::string::npos) << nobody.output;
  EXPECT_TRUE(run->Running()) << run->Describe();

  auto kill = Run({Bin("gos-kill"), job}, {tcp}, 30s);
  EXPECT_EQ(kill->ExitCode(), 0) << kill->Describe();
  ASSERT_TRUE(run->Wait(20s)) << run->Describe() << Logs();
  EXPECT_EQ(run->ExitCode(), 137) << run->Describe();
}

// ---- 9. The cluster key
// --------------------------------------------------------------------------

TEST_F(OsTest, NodeagentWithWrongOrOpenClusterKeyIsRefused) {
  auto coordinator = Start(
      {Bin("gos-coordinator"), "--data-dir", state_, "--nodes", "1", "--join-timeout", "60s"});
  ASSERT_TRUE(WaitUntil([&] { return !Trim(ReadFile(state_ + "/coordinator.addr")).empty(); }, 20s))
      << coordinator->Describe();
  auto agent = [&](const std::string& key) {
    auto p = Start({Bin("gos-nodeagent"), "--coordinator", state_, "--key-file", key, "--name",
                    "k1", "--state-dir", state_ + "/nodes/k1", "--exit-with-coordinator",
                    "--connect-timeout", "10s"});
    agents_.insert(p->pid());
    return p;
  };

  // A well-formed key that is not the cluster's.
  const std::string wrong = state_ + "/wrong.key";
  ASSERT_TRUE(WriteFile(wrong, std::string(64, 'a') + "\n", 0600));
  auto refused = agent(wrong);
  ASSERT_TRUE(refused->Wait(30s)) << refused->Describe() << coordinator->Describe();
  EXPECT_NE(refused->ExitCode(), 0) << refused->Describe();
  const std::string why = refused->Err();
  EXPECT_TRUE(why.find("cluster key") != std::string::npos ||
              why.find("refused") != std::string::npos)
      << refused->Describe();
  EXPECT_TRUE(WaitUntil([&] { return coordinator->Err().find("refus") != std::string::npos; }, 5s))
      << coordinator->Describe();
  auto ps = Ps(socket());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  EXPECT_EQ(NodesUp(*ps), 0u) << DescribePs(ps);

  // The right key, but readable by others: the agent will not use it.
  const std::string open = state_ + "/open.key";
  ASSERT_TRUE(WriteFile(open, ReadFile(state_ + "/cluster.key"), 0644));
  auto loose = agent(open);
  ASSERT_TRUE(loose->Wait(30s)) << loose->Describe();
  EXPECT_NE(loose->ExitCode(), 0) << loose->Describe();
  EXPECT_NE(loose->Err().find(open), std::string::npos) << loose->Describe();
  EXPECT_NE(loose->Err().find("600"), std::string::npos) << loose->Describe();

  // The same key with mode 0600 is accepted (the refusals were about the key).
  ASSERT_EQ(::chmod(open.c_str(), 0600), 0);
  auto good = agent(open);
  EXPECT_TRUE(WaitForNodes(socket(), 1, 30s)) << good->Describe() << coordinator->Describe();
  coordinator->Signal(SIGTERM);
  EXPECT_TRUE(coordinator->Wait(15s)) << coordinator->Describe();
  EXPECT_TRUE(good->Wait(15s)) << good->Describe();
}

// ---- 10. Ctrl-C
// ----------------------------------------------------------------------------------

TEST_F(OsTest, CtrlCInterruptsEveryRank) {
  auto run = Start({Bin("gos-run"), "-n", "2", "-l", RankHelper(), "sleep", "0"});
  ASSERT_TRUE(run->WaitForOutput("0: ready", 30s) && run->WaitForOutput("1: ready", 10s))
      << run->Describe() << Logs();
  run->Signal(SIGINT);
  ASSERT_TRUE(run->Wait(20s)) << run->Describe() << Logs();
  EXPECT_EQ(run->ExitCode(), 130) << run->Describe();  // 128 + SIGINT: the ranks died of it
  EXPECT_NE(run->Err().find("SIGINT"), std::string::npos) << run->Describe();
}

TEST_F(OsTest, CtrlCTwiceKillsJobThatIgnoresSigint) {
  auto run = Start({Bin("gos-run"), "-n", "2", "-l", RankHelper(), "ignore-int"});
  ASSERT_TRUE(run->WaitForOutput("0: ready", 30s) && run->WaitForOutput("1: ready", 10s))
      << run->Describe() << Logs();
  run->Signal(SIGINT);
  ASSERT_TRUE(run->WaitForErr("SIGINT", 5s)) << run->Describe();
  EXPECT_TRUE(run->Running()) << "the ranks ignore SIGINT\n" << run->Describe();
  run->Signal(SIGINT);
  ASSERT_TRUE(run->Wait(20s)) << run->Describe() << Logs();
  EXPECT_EQ(run->ExitCode(), 137) << run->Describe();
  EXPECT_NE(run->Err().find("killing job"), std::string::npos) << run->Describe();
}

// ---- 11. stdin goes to rank 0
// ----------------------------------------------------------------------

TEST_F(OsTest, StdinGoesToRankZero) {
  auto run = Run({Bin("gos-run"), "-n", "2", "-l", "cat"}, {}, 30s, std::string("hi\n"));
  EXPECT_EQ(run->ExitCode(), 0) << run->Describe() << Logs();
  EXPECT_EQ(run->Out(), "0: hi\n") << run->Describe() << Logs();
}

// ---- 11a. Output to files
// ------------------------------------------------------------------------

TEST_F(OsTest, OutputAndErrorGoToFilesByPattern) {
  const std::string dir = state_ + "/out";
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  const std::vector<std::string> prog = {"sh", "-c", "echo out $GOS_RANK; echo err $GOS_RANK >&2"};
  std::vector<std::string> argv = {Bin("gos-run"), "-n", "3", "-o", dir + "/r%t.%%"};
  argv.insert(argv.end(), prog.begin(), prog.end());
  auto per_rank = Run(argv);
  ASSERT_EQ(per_rank->ExitCode(), 0) << per_rank->Describe() << Logs();
  EXPECT_EQ(per_rank->Out(), "") << per_rank->Describe();
  for (int r = 0; r < 3; ++r) {
    const std::string want = "out " + std::to_string(r) + "\n", err = "err " + std::to_string(r);
    const std::string got = ReadFile(dir + "/r" + std::to_string(r) + ".%");
    EXPECT_NE(got.find(want), std::string::npos) << got;  // stdout and stderr, same file
    EXPECT_NE(got.find(err), std::string::npos) << got;
  }
  // One shared file per stream, labelled; %j is the job id.
  argv = {Bin("gos-run"), "-n", "2", "-l", "-o", dir + "/all.%j", "-e", dir + "/errors"};
  argv.insert(argv.end(), prog.begin(), prog.end());
  auto shared = Run(argv);
  ASSERT_EQ(shared->ExitCode(), 0) << shared->Describe();
  std::vector<std::string> out_lines;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("all.", 0) == 0) out_lines = Lines(ReadFile(e.path()));
  }
  std::sort(out_lines.begin(), out_lines.end());
  EXPECT_EQ(out_lines, (std::vector<std::string>{"0: out 0", "1: out 1"}));
  std::vector<std::string> err_lines = Lines(ReadFile(dir + "/errors"));
  std::sort(err_lines.begin(), err_lines.end());
  EXPECT_EQ(err_lines, (std::vector<std::string>{"0: err 0", "1: err 1"}));
  // A file that cannot be written: the output comes to the terminal, and gos-run says why.
  auto nowhere = Run({Bin("gos-run"), "-n", "1", "-o", dir + "/no/such/dir/x", "echo", "kept"});
  EXPECT_EQ(nowhere->ExitCode(), 0) << nowhere->Describe();
  EXPECT_EQ(nowhere->Out(), "kept\n") << nowhere->Describe();
  EXPECT_NE(nowhere->Err().find("cannot write to " + dir + "/no/such/dir/x"), std::string::npos)
      << nowhere->Describe();
}

// ---- 11b. CPU binding ---------------------------------------------------------------------------

TEST_F(OsTest, RanksAreBoundToBlocksOfTheirNodesCpusUnlessToldNot) {
  const std::vector<int> cpus = nodeagent::AllowedCpus();
  if (cpus.size() != 2) GTEST_SKIP() << "written for 2 CPUs; this process may use " << cpus.size();
  const std::string c0 = std::to_string(cpus[0]), c1 = std::to_string(cpus[1]);
  const std::vector<std::string> show = {"sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  // 4 ranks on one node of 2 CPUs: ranks 0-1 share the first CPU, ranks 2-3 the second.
  std::vector<std::string> argv = {Bin("gos-run"), "-n", "4", "-N", "1", "-l"};
  argv.insert(argv.end(), show.begin(), show.end());
  auto bound = Run(argv);
  ASSERT_EQ(bound->ExitCode(), 0) << bound->Describe() << Logs();
  std::vector<std::string> lines = Lines(bound->Out());
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "0: Cpus_allowed_list:\t" + c0, "1: Cpus_allowed_list:\t" + c0,
                       "2: Cpus_allowed_list:\t" + c1, "3: Cpus_allowed_list:\t" + c1}))
      << bound->Describe();
  // One rank per node gets all of its node's CPUs; --cpu-bind=none leaves every rank unbound.
  const std::string all = "Cpus_allowed_list:\t" + c0 + "-" + c1;
  for (const std::vector<std::string>& opts :
       {std::vector<std::string>{"-n", "2", "-N", "2"},
        std::vector<std::string>{"-n", "2", "-N", "1", "--cpu-bind=none"}}) {
    argv = {Bin("gos-run"), "-l"};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.insert(argv.end(), show.begin(), show.end());
    auto run = Run(argv);
    ASSERT_EQ(run->ExitCode(), 0) << run->Describe() << Logs();
    lines = Lines(run->Out());
    std::sort(lines.begin(), lines.end());
    EXPECT_EQ(lines, (std::vector<std::string>{"0: " + all, "1: " + all})) << run->Describe();
  }
  auto bad = Run({Bin("gos-run"), "--cpu-bind=sockets", "-n", "2", "true"});
  EXPECT_EQ(bad->ExitCode(), 2) << bad->Describe();
  EXPECT_NE(bad->Err().find("--cpu-bind=sockets is not cores or none"), std::string::npos)
      << bad->Describe();
}

// ---- 11c. Node lists --------------------------------------------------------------------------

TEST_F(OsTest, NodelistAndExcludeChooseTheNodes) {
  auto up = Run({Bin("gos-cluster"), "up", "-N", "3"}, {}, 60s);
  ASSERT_EQ(up->ExitCode(), 0) << up->Describe() << Logs();
  ASSERT_TRUE(WaitForNodes(socket(), 3, 10s));
  struct Case {
    std::vector<std::string> opts;
    std::set<int> nodes;  // where the ranks ran
  };
  for (const Case& c :
       {Case{{"-n", "2", "-x", "1"}, {2, 3}}, Case{{"-n", "2", "--nodelist", "3"}, {3}},
        Case{{"-n", "3", "-w", "1-3", "--exclude=2"}, {1, 3}},
        Case{{"-n", "2", "-x", "1", "-x", "3"}, {2}}}) {
    std::vector<std::string> argv = {Bin("gos-run"), "-l"};
    argv.insert(argv.end(), c.opts.begin(), c.opts.end());
    argv.push_back(Hello());
    auto run = Run(argv);
    ASSERT_EQ(run->ExitCode(), 0) << run->Describe() << Logs();
    std::string problems;
    std::set<int> used;
    for (const auto& [rank, node] : ParseHello(run->Out(), std::stoi(c.opts[1]), &problems)) {
      used.insert(node);
    }
    EXPECT_EQ(problems, "") << run->Describe();
    EXPECT_EQ(used, c.nodes) << run->Describe();
  }
  auto unknown = Run({Bin("gos-run"), "-n", "2", "-w", "7", Hello()});
  EXPECT_EQ(unknown->ExitCode(), 2) << unknown->Describe();
  EXPECT_NE(unknown->Err().find("node 7 is not in this cluster (its nodes: 1,2,3"),
            std::string::npos)
      << unknown->Describe();
  auto too_few = Run({Bin("gos-run"), "-n", "2", "-N", "2", "-x", "1-2", Hello()});
  EXPECT_EQ(too_few->ExitCode(), 2) << too_few->Describe();
  EXPECT_NE(too_few->Err().find("needs 2 nodes, the cluster has 1 up and not excluded"),
            std::string::npos)
      << too_few->Describe();
  auto bad = Run({Bin("gos-run"), "-n", "2", "-x", "one", Hello()});
  EXPECT_EQ(bad->ExitCode(), 2) << bad->Describe();
  EXPECT_NE(bad->Err().find("is not a node id"), std::string::npos) << bad->Describe();
  auto down = Run({Bin("gos-cluster"), "down"}, {}, 30s);
  EXPECT_EQ(down->ExitCode(), 0) << down->Describe();
}

// ---- 12. Time limit
// --------------------------------------------------------------------------------

TEST_F(OsTest, TimeLimitKillsJob) {
  auto run = Run({Bin("gos-run"), "--time", "1s", "-n", "2", RankHelper(), "spin", "0"}, {}, 30s);
  EXPECT_NE(run->ExitCode(), 0) << run->Describe();
  EXPECT_EQ(run->ExitCode(), 137) << run->Describe();
  EXPECT_NE(run->Err().find("time limit of 1 s reached"), std::string::npos) << run->Describe();
  EXPECT_GE(run->Seconds(), 1.0) << run->Describe();
  EXPECT_LT(run->Seconds(), 10.0) << run->Describe();
}

}  // namespace
}  // namespace gos::os
