// Record and replay end to end (issue 6; docs/specs/replay.md): real MPI programs recorded by
// gos-run on a 3-node local cluster and rerun by gos-replay.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/cluster.h"
#include "tests/support/cluster_files.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gos::testing::FindProcesses;
using gos::testing::GosBin;
using gos::testing::GosExample;
using gos::testing::ReadFile;
using gos::testing::RunResult;
using gos::testing::WaitUntil;

std::string Program(const std::string& name) { return gos::testing::TestBinDir() + "/mpi/" + name; }

// One local cluster (3 nodeagents) for the whole file, in its own state dir.
class ReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    cluster_ = new gos::testing::LocalCluster("gos-replay-test");
    RunResult up = cluster_->Up({"-N", "3", "--timeslice", "5ms"});
    ASSERT_EQ(up.code, 0) << up.Describe();
  }
  static void TearDownTestSuite() {
    if (cluster_ == nullptr) return;
    cluster_->Down();
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: nodeagents make PID namespaces and cgroups";
    ASSERT_NE(cluster_, nullptr);
  }
  static std::vector<std::string> Env() { return cluster_->Env(); }

  static RunResult Gos(const std::string& tool, std::vector<std::string> args,
                       std::chrono::seconds timeout = 120s) {
    args.insert(args.begin(), GosBin(tool));
    return gos::testing::Run(args, Env(), timeout);
  }
  // The id gos-run gave the job it ran (from gos-ps: the newest job).
  static uint64_t LastJob() {
    RunResult ps = Gos("gos-ps", {"--jobs"});
    uint64_t last = 0;
    std::istringstream in(ps.output);
    for (std::string line; std::getline(in, line);) {
      std::istringstream l(line);
      uint64_t id = 0;
      if (l >> id) last = std::max(last, id);
    }
    return last;
  }
  static std::string Logs() { return cluster_->Logs(3000); }

  static gos::testing::LocalCluster* cluster_;
};
gos::testing::LocalCluster* ReplayTest::cluster_ = nullptr;

// gos-replay with its stdin on a pipe we hold: a stopped session lasts until we close it.
class Session {
 public:
  Session(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    char tmpl[] = "/tmp/gos-replay-session-XXXXXX";
    int out = mkstemp(tmpl);
    out_ = tmpl;
    int p[2];
    if (out < 0 || pipe2(p, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(p[0], 0);
      dup2(out, 1);
      dup2(out, 2);
      for (const auto& e : env) putenv(strdup(e.c_str()));
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    ::close(p[0]);
    ::close(out);
    in_ = p[1];
  }
  ~Session() {
    EndInput();
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::unlink(out_.c_str());
  }
  std::string output() const { return ReadFile(out_); }
  void EndInput() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }
  std::optional<int> Wait(std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!status_ && std::chrono::steady_clock::now() < deadline) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = st;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1;
  std::string out_;
  std::optional<int> status_;
};

// "  rank 1  node 2 (n2)  pid 1234   gdb -p 1234" -> rank -> pid.
std::map<int, pid_t> StoppedRanks(const std::string& text) {
  std::map<int, pid_t> out;
  std::regex re(R"(rank (\d+)  node \d+ \([^)]*\)  pid (\d+)   gdb -p \d+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out[std::stoi((*it)[1])] = static_cast<pid_t>(std::stol((*it)[2]));
  }
  return out;
}

char ProcState(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

int ExitCode(const std::optional<int>& st) { return st && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1; }

TEST_F(ReplayTest, MasterWorkerIsNondeterministicAndReplaysExactly) {
  // Ten ordinary runs: the completion order depends on the workers' random work times.
  std::set<std::string> orders;
  std::map<uint64_t, std::string> outputs;
  for (int i = 0; i < 10; ++i) {
    RunResult r = Gos("gos-run", {"-n", "4", GosExample("master_worker"), "16", "20000"});
    ASSERT_EQ(r.code, 0) << r.Describe() << Logs();
    ASSERT_NE(r.output.find("sum 1256, expected 1256: ok"), std::string::npos) << r.output;
    orders.insert(r.output);
    outputs[LastJob()] = r.output;
  }
  EXPECT_GE(orders.size(), 2u) << "10 runs of master_worker all completed in the same order";

  // One recorded run, replayed 20 times: byte-identical to it every time.
  const auto& [job, recorded] = *outputs.rbegin();
  for (int i = 0; i < 20; ++i) {
    RunResult r = Gos("gos-replay", {std::to_string(job)});
    ASSERT_EQ(r.code, 0) << r.Describe() << Logs();
    std::string out = r.output.substr(r.output.find('\n') + 1);  // after "replaying job N"
    ASSERT_EQ(out, recorded) << "replay " << i << " of job " << job << " differs";
  }
}

TEST_F(ReplayTest, ChangedTagIsReportedAsDivergence) {
  const gos::testing::TempDir tmp("gos-replay-retag");
  const std::string dir = tmp.path();
  const std::string src = dir + "/retag.c", bin = dir + "/retag";
  std::ofstream(src) << R"(#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, token = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 0; i < 6; ++i) {
    int in = 0;
    MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, i == 4 ? TAG : 1, &in, 1, MPI_INT,
                 (rank + size - 1) % size, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    token = in + 1;
  }
  printf("rank %d token %d\n", rank, token);
  MPI_Finalize();
  return 0;
}
)";
  RunResult cc = gos::testing::Run({GosBin("gos-cc"), "-DTAG=7", "-o", bin, src}, {}, 120s);
  ASSERT_EQ(cc.code, 0) << cc.Describe();
  RunResult run = Gos("gos-run", {"-n", "3", bin});
  ASSERT_EQ(run.code, 0) << run.Describe() << Logs();
  const uint64_t job = LastJob();
  // The same program, rebuilt with one tag changed.
  cc = gos::testing::Run({GosBin("gos-cc"), "-DTAG=8", "-o", bin, src}, {}, 120s);
  ASSERT_EQ(cc.code, 0) << cc.Describe();
  Session s({GosBin("gos-replay"), std::to_string(job)}, Env());
  s.EndInput();
  auto st = s.Wait(120s);
  ASSERT_TRUE(st.has_value()) << s.output();
  EXPECT_EQ(ExitCode(st), 3) << s.output();
  std::smatch m;
  const std::string out = s.output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(divergence at strobe (\d+), rank (\d+),)")))
      << out;
  EXPECT_GT(std::stoull(m[1]), 0u);
  EXPECT_NE(out.find("tag 7"), std::string::npos) << out;
  EXPECT_NE(out.find("tag 8"), std::string::npos) << out;
  EXPECT_EQ(StoppedRanks(out).size(), 3u) << out;
}

TEST_F(ReplayTest, AbortReplaysToTheAbortAndStopsEveryRank) {
  RunResult run = Gos("gos-run", {"-n", "3", Program("abort")});
  ASSERT_EQ(run.code, 3) << run.Describe() << Logs();
  const uint64_t job = LastJob();
  char tmpl[] = "/tmp/gos-replay-abort-trace-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string trace = tmpl;
  Session s({GosBin("gos-replay"), "--replay", "--export-trace", trace, std::to_string(job)},
            Env());
  ASSERT_TRUE(WaitUntil([&] { return s.output().find("press Enter") != std::string::npos; }, 90s))
      << s.output() << Logs();
  const std::string out = s.output();
  EXPECT_NE(out.find("abort: rank 1 calls MPI_Abort(MPI_COMM_WORLD, 3)"), std::string::npos) << out;
  // The trace marks the recorded failure.
  const std::string check = R"(
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
marks = [e["name"] for e in ev if e.get("ph") == "i"]
assert any("MPI_Abort" in m for m in marks), marks
)";
  RunResult py = gos::testing::Run({"python3", "-c", check, trace}, {}, 60s);
  EXPECT_EQ(py.code, 0) << py.Describe();
  ::unlink(trace.c_str());
  EXPECT_NE(out.find("rank 1 called MPI_Abort with error code 3"), std::string::npos) << out;
  auto ranks = StoppedRanks(out);
  ASSERT_EQ(ranks.size(), 3u) << out;
  for (const auto& [rank, pid] : ranks) {
    EXPECT_EQ(ProcState(pid), 'T') << "rank " << rank << " pid " << pid << " is not stopped";
  }
  s.EndInput();  // ends the session: the job is killed
  auto st = s.Wait(60s);
  ASSERT_TRUE(st.has_value()) << s.output();
  EXPECT_EQ(ExitCode(st), 0) << s.output();
  for (const auto& [rank, pid] : ranks) {
    EXPECT_TRUE(WaitUntil([pid] { return ::kill(pid, 0) != 0; }, 10s)) << "rank " << rank;
  }
}

TEST_F(ReplayTest, StopAtStrobeAndTraceExport) {
  RunResult run = Gos("gos-run", {"-n", "3", GosExample("ring")});
  ASSERT_EQ(run.code, 0) << run.Describe() << Logs();
  const uint64_t job = LastJob();
  char tmpl[] = "/tmp/gos-replay-trace-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string trace = tmpl;
  // The trace is the log's: gos-replay submits no job for it (issue 29 item 4), nor for --info.
  RunResult full = Gos("gos-replay", {"--export-trace", trace, std::to_string(job)});
  ASSERT_EQ(full.code, 0) << full.Describe() << Logs();
  EXPECT_EQ(full.output.find("replaying job"), std::string::npos) << full.output;
  RunResult info = Gos("gos-replay", {"--info", std::to_string(job)});
  ASSERT_EQ(info.code, 0) << info.Describe();
  EXPECT_EQ(LastJob(), job) << "gos-replay --export-trace or --info submitted a job";
  // The trace is valid trace-event JSON with a lane per rank, slices and paired flows.
  const std::string check = R"(
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
lanes = {e["tid"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
assert len(lanes) == 3, lanes
xs = [e for e in ev if e.get("ph") == "X"]
assert xs and all(e["dur"] >= 0 for e in xs), "no slices"
s = {e["id"] for e in ev if e.get("ph") == "s"}
f = {e["id"] for e in ev if e.get("ph") == "f"}
assert s and s == f, (len(s), len(f))
strobes = sorted({e["args"]["strobe"] for e in xs if "strobe" in e.get("args", {})})
print(strobes[len(strobes) // 2])
)";
  RunResult py = gos::testing::Run({"python3", "-c", check, trace}, {}, 60s);
  ASSERT_EQ(py.code, 0) << py.Describe();
  const uint64_t mid = std::stoull(py.output);
  ASSERT_GT(mid, 0u);
  // Stop at a strobe in the middle of the run: every rank stops there.
  Session s({GosBin("gos-replay"), "--stop-at", std::to_string(mid), std::to_string(job)}, Env());
  ASSERT_TRUE(WaitUntil([&] { return s.output().find("press Enter") != std::string::npos; }, 90s))
      << s.output() << Logs();
  const std::string out = s.output();
  EXPECT_NE(out.find("stopped at strobe " + std::to_string(mid)), std::string::npos) << out;
  auto ranks = StoppedRanks(out);
  EXPECT_EQ(ranks.size(), 3u) << out;
  for (const auto& [rank, pid] : ranks) EXPECT_EQ(ProcState(pid), 'T') << "rank " << rank;
  s.EndInput();
  EXPECT_EQ(ExitCode(s.Wait(60s)), 0) << s.output();
  ::unlink(trace.c_str());
}

TEST_F(ReplayTest, ReplayFromAMidRunCheckpointGivesTheRemainingOutput) {
  // Line-buffered stdout (coreutils' stdbuf, through the environment gos-run forwards), so
  // that what the ranks printed before a checkpoint has left them by the time it is taken.
  const std::string stdbuf = "/usr/libexec/coreutils/libstdbuf.so";
  if (::access(stdbuf.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << stdbuf;
  std::vector<std::string> argv = {GosBin("gos-run"),           "-n",     "4",
                                   "--checkpoint=1s",           "--keep", "8",
                                   GosExample("master_worker"), "150",    "100000"};
  std::vector<std::string> env = Env();
  env.push_back("LD_PRELOAD=" + stdbuf);
  env.push_back("_STDBUF_O=L");
  RunResult run = gos::testing::Run(argv, env, 120s);
  ASSERT_EQ(run.code, 0) << run.Describe() << Logs();
  const uint64_t job = LastJob();
  // The recorded output (stdout only: the notices go to stderr, in the same capture).
  std::string recorded;
  {
    std::istringstream in(run.output);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("gos-run:", 0) != 0) recorded += line + "\n";
    }
  }
  RunResult list = Gos("gos-ckpt", {"--list", std::to_string(job)});
  ASSERT_EQ(list.code, 0) << list.Describe();
  std::vector<uint64_t> epochs;
  {
    std::istringstream in(list.output);
    for (std::string line; std::getline(in, line);) {
      std::istringstream l(line);
      uint64_t e = 0;
      if (l >> e) epochs.push_back(e);
    }
  }
  ASSERT_GE(epochs.size(), 1u) << list.output << run.output;
  const uint64_t epoch = epochs[epochs.size() / 2];
  RunResult r = Gos("gos-replay", {"--from-epoch", std::to_string(epoch), std::to_string(job)});
  ASSERT_EQ(r.code, 0) << r.Describe() << Logs();
  EXPECT_NE(r.output.find("restored from epoch " + std::to_string(epoch)), std::string::npos)
      << r.output;
  std::string rest;
  {
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("gos-replay:", 0) != 0) rest += line + "\n";
    }
  }
  ASSERT_FALSE(rest.empty()) << r.output;
  EXPECT_LT(rest.size(), recorded.size())
      << "the replay from epoch " << epoch << " printed the whole run:\n"
      << rest;
  ASSERT_GE(recorded.size(), rest.size());
  EXPECT_EQ(recorded.substr(recorded.size() - rest.size()), rest)
      << "recorded:\n"
      << recorded << "replayed from epoch " << epoch << ":\n"
      << rest;
  EXPECT_NE(rest.find("sum"), std::string::npos) << rest;
}

// The checksum of examples/stencil.f90's output ("" if none), or its serial one.
std::string StencilChecksum(const std::string& out, bool serial = false) {
  static const std::regex kParallel(R"((?:^|\n)checksum=\s*(\S+) maxdelta=)");
  static const std::regex kSerial(R"((?:^|\n)serial checksum=\s*(\S+))");
  std::smatch m;
  return std::regex_search(out, m, serial ? kSerial : kParallel) ? m[1].str() : "";
}

// A Fortran job checkpoints and replays like a C one: the stencil (examples/stencil.f90, use
// mpi) run with checkpoints gives its serial iteration's checksum; gos-replay reruns it to the
// same checksum without diverging, and so does a replay from one of its checkpoints.
TEST_F(ReplayTest, FortranStencilCheckpointsAndReplays) {
#ifndef GOS_TEST_FORTRAN
  GTEST_SKIP() << "built without gfortran: no Fortran bindings";
#endif
  RunResult run = Gos("gos-run",
                      {"-n", "4", "--checkpoint=200ms", "--keep", "8", GosExample("stencil"), "96",
                       "64", "3000", "500", "serial"},
                      180s);
  ASSERT_EQ(run.code, 0) << run.Describe() << Logs();
  const std::string checksum = StencilChecksum(run.output);
  ASSERT_NE(checksum, "") << run.Describe();
  EXPECT_EQ(StencilChecksum(run.output, true), checksum) << run.Describe();
  const std::string job = std::to_string(LastJob());
  RunResult list = Gos("gos-ckpt", {"--list", job});
  ASSERT_EQ(list.code, 0) << list.Describe();
  std::vector<uint64_t> epochs;
  std::istringstream in(list.output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    uint64_t e = 0;
    if (l >> e) epochs.push_back(e);
  }
  ASSERT_GE(epochs.size(), 1u) << list.output << run.output;

  RunResult replay = Gos("gos-replay", {job}, 180s);
  EXPECT_EQ(replay.code, 0) << replay.Describe() << Logs();
  EXPECT_EQ(StencilChecksum(replay.output), checksum) << replay.Describe();
  EXPECT_EQ(replay.output.find("diverge"), std::string::npos) << replay.Describe();

  const std::string epoch = std::to_string(epochs[epochs.size() / 2]);
  RunResult from = Gos("gos-replay", {"--from-epoch", epoch, job}, 180s);
  EXPECT_EQ(from.code, 0) << from.Describe() << Logs();
  EXPECT_NE(from.output.find("restored from epoch " + epoch), std::string::npos) << from.output;
  EXPECT_EQ(StencilChecksum(from.output), checksum) << from.Describe();
}

// gos-run's stdin goes into the recording: a replay's rank 0 reads the same input, whatever
// gos-replay's own stdin is.
TEST_F(ReplayTest, RecordedInputIsReplayed) {
  RunResult run = gos::testing::Run(
      {"/bin/sh", "-c",
       "printf '5\\n7\\n30\\n' | " + GosBin("gos-run") + " -n 3 " + Program("stdin_sum")},
      Env(), 120s);
  ASSERT_EQ(run.code, 0) << run.Describe();
  const std::string want = "stdin_sum: 3 lines, sum 42, scaled total 252";
  ASSERT_NE(run.output.find(want), std::string::npos) << run.Describe();
  const std::string job = std::to_string(LastJob());
  RunResult replay = Gos("gos-replay", {job});  // its stdin is /dev/null
  EXPECT_EQ(replay.code, 0) << replay.Describe();
  EXPECT_NE(replay.output.find(want), std::string::npos) << replay.Describe();
}

// Cancels are matcher inputs like any descriptor: a recorded run with cancelled receives
// replays without divergence and prints the same.
TEST_F(ReplayTest, CancelledReceivesReplay) {
  RunResult run = Gos("gos-run", {"-n", "3", Program("cancel")});
  ASSERT_EQ(run.code, 0) << run.Describe() << Logs();
  ASSERT_NE(run.output.find("OK cancel"), std::string::npos) << run.Describe();
  RunResult replay = Gos("gos-replay", {std::to_string(LastJob())});
  EXPECT_EQ(replay.code, 0) << replay.Describe() << Logs();
  EXPECT_NE(replay.output.find("OK cancel"), std::string::npos) << replay.Describe();
  EXPECT_EQ(replay.output.find("diverge"), std::string::npos) << replay.Describe();
}

// gos-store stats counts the replay logs with the checkpoints.
TEST_F(ReplayTest, StoreStatsCountReplayLogs) {
  RunResult run = Gos("gos-run", {"-n", "2", GosExample("ring")});
  ASSERT_EQ(run.code, 0) << run.Describe();
  RunResult stats = Gos("gos-store", {"stats"});
  ASSERT_EQ(stats.code, 0) << stats.Describe();
  const size_t at = stats.output.find("replay logs ");
  ASSERT_NE(at, std::string::npos) << stats.Describe();
  std::istringstream line(stats.output.substr(at + 12));
  uint64_t jobs = 0;
  line >> jobs;
  EXPECT_GE(jobs, 1u) << stats.Describe();
  EXPECT_NE(stats.output.find(" bytes stored (", at), std::string::npos) << stats.Describe();
}

// gos-store gc --keep-logs N: the logs of all but the N most recent jobs go; replaying a job
// whose log went is refused, and the newest ones still replay.
TEST_F(ReplayTest, StoreGcKeepsTheNewestLogs) {
  std::vector<uint64_t> jobs;
  for (int i = 0; i < 3; ++i) {
    RunResult run = Gos("gos-run", {"-n", "2", GosExample("ring")});
    ASSERT_EQ(run.code, 0) << run.Describe();
    jobs.push_back(LastJob());
  }
  RunResult bad = Gos("gos-store", {"stats", "--keep-logs", "2"});
  EXPECT_EQ(bad.code, 2) << bad.Describe();
  RunResult gc = Gos("gos-store", {"gc", "--keep-logs", "2"});
  ASSERT_EQ(gc.code, 0) << gc.Describe();
  EXPECT_NE(gc.output.find("removed the replay logs of "), std::string::npos) << gc.output;
  EXPECT_NE(gc.output.find("keeping the 2 most recent"), std::string::npos) << gc.output;
  RunResult stats = Gos("gos-store", {"stats"});
  ASSERT_EQ(stats.code, 0) << stats.Describe();
  EXPECT_NE(stats.output.find("replay logs            2 jobs"), std::string::npos) << stats.output;
  RunResult gone = Gos("gos-replay", {std::to_string(jobs[0])});
  EXPECT_NE(gone.code, 0) << gone.Describe();
  EXPECT_NE(gone.output.find("has no replay log"), std::string::npos) << gone.output;
  for (uint64_t job : {jobs[1], jobs[2]}) {
    RunResult info = Gos("gos-replay", {"--info", std::to_string(job)});
    EXPECT_EQ(info.code, 0) << info.Describe();
  }
  RunResult replay = Gos("gos-replay", {std::to_string(jobs[2])});
  EXPECT_EQ(replay.code, 0) << replay.Describe();
}

// A state dir of a test's own, not the shared cluster's: its tools, and on destruction no
// process, channel file or directory of it is left.
class PrivateState {
 public:
  explicit PrivateState(const std::string& prefix) : tmp_(prefix), dir_(tmp_.path()) {}
  ~PrivateState() {
    for (const auto& [pid, what] : FindProcesses(dir_)) ::kill(pid, SIGKILL);
    gos::testing::RemoveClusterFiles(dir_);
  }
  const std::string& dir() const { return dir_; }
  RunResult Gos(const std::string& tool, std::vector<std::string> args) const {
    args.insert(args.begin(), GosBin(tool));
    return gos::testing::Run(args, {"GOS_STATE_DIR=" + dir_}, 120s);
  }

 private:
  gos::testing::TempDir tmp_;
  std::string dir_;  // tmp_.path()
};

// gos-coordinator --keep-logs N (here through gos-cluster): each recorded job's end prunes the
// logs of all but the N most recent jobs. A cluster of its own, so that the shared one keeps
// its logs.
TEST_F(ReplayTest, CoordinatorKeepsTheNewestLogs) {
  const PrivateState own("gos-replay-keep");
  ASSERT_FALSE(own.dir().empty());
  auto gos = [&](const std::string& tool, std::vector<std::string> args) {
    return own.Gos(tool, std::move(args));
  };
  RunResult up = gos("gos-cluster", {"up", "-N", "2", "--timeslice", "5ms", "--keep-logs", "2"});
  ASSERT_EQ(up.code, 0) << up.Describe();
  for (int i = 0; i < 4; ++i) {
    RunResult run = gos("gos-run", {"-n", "2", GosExample("ring")});
    EXPECT_EQ(run.code, 0) << run.Describe();
  }
  RunResult stats = gos("gos-store", {"stats"});
  EXPECT_NE(stats.output.find("replay logs            2 jobs"), std::string::npos)
      << stats.Describe();
  RunResult gone = gos("gos-replay", {"1"});
  EXPECT_NE(gone.output.find("has no replay log"), std::string::npos) << gone.Describe();
  RunResult replay = gos("gos-replay", {"4"});
  EXPECT_EQ(replay.code, 0) << replay.Describe();
  RunResult down = gos("gos-cluster", {"down"});
  EXPECT_EQ(down.code, 0) << down.Describe();
  EXPECT_TRUE(WaitUntil([&] { return FindProcesses(own.dir()).empty(); }, 15s));
}

// On the embedded cluster (no cluster up), gos-replay --info and a refused replay run nothing:
// the private cluster they started is stopped at once, not waited for until a job that never
// comes (it used to take 10 s and end with "the local cluster did not stop by itself").
TEST_F(ReplayTest, InfoOnTheEmbeddedClusterStopsItAtOnce) {
  const PrivateState own("gos-replay-embedded");
  ASSERT_FALSE(own.dir().empty());
  auto gos = [&](const std::string& tool, std::vector<std::string> args) {
    return own.Gos(tool, std::move(args));
  };
  RunResult run = gos("gos-run", {"-n", "2", GosExample("ring")});
  EXPECT_EQ(run.code, 0) << run.Describe();
  RunResult info = gos("gos-replay", {"--info", "1"});
  EXPECT_EQ(info.code, 0) << info.Describe();
  EXPECT_NE(info.output.find("job 1: 2 ranks"), std::string::npos) << info.Describe();
  RunResult missing = gos("gos-replay", {"99"});
  EXPECT_NE(missing.code, 0) << missing.Describe();
  EXPECT_NE(missing.output.find("no job 99"), std::string::npos) << missing.Describe();
  for (const RunResult* r : {&info, &missing}) {
    EXPECT_LT(r->seconds, 5.0) << r->Describe();
    EXPECT_EQ(r->output.find("did not stop"), std::string::npos) << r->Describe();
  }
  EXPECT_TRUE(FindProcesses(own.dir()).empty());
}

TEST_F(ReplayTest, OnlyTheOwnerMayReplay) {
  RunResult run = Gos("gos-run", {"-n", "2", GosExample("ring")});
  ASSERT_EQ(run.code, 0) << run.Describe();
  const uint64_t job = LastJob();
  RunResult other = gos::testing::Run({"setpriv", "--reuid=nobody", "--regid=nogroup",
                                       "--clear-groups", GosBin("gos-replay"), std::to_string(job)},
                                      Env(), 60s);
  EXPECT_EQ(other.code, 2) << other.Describe();
  EXPECT_NE(other.output.find("only its owner or root may replay it"), std::string::npos)
      << other.output;
  RunResult unrecorded = Gos("gos-run", {"--no-record", "-n", "2", GosExample("ring")});
  ASSERT_EQ(unrecorded.code, 0) << unrecorded.Describe();
  RunResult refused = Gos("gos-replay", {std::to_string(LastJob())});
  EXPECT_EQ(refused.code, 2) << refused.Describe();
  EXPECT_NE(refused.output.find("was not recorded"), std::string::npos) << refused.output;
  // A refused replay is not announced as under way.
  EXPECT_EQ(refused.output.find("replaying job"), std::string::npos) << refused.output;
  EXPECT_EQ(other.output.find("replaying job"), std::string::npos) << other.output;
}

// ---- A crash (docs/specs/replay.md, "A crash"; issue 29) ---------------------------------------
//
// crash_at's rank 2 of 4 (on the second of 2 nodes) dies of the signal of the parameter in its
// 5th Allreduce. The replay holds it at the faulting instruction with every other rank stopped,
// names rank, node, signal, address and frames, and exits with 4; gdb attached to the held pid
// shows the crashing function at the line the source marks.

struct CrashKind {
  const char* kind;  // crash_at's argument
  int signo;
  const char* name;  // as the report names it
};

void PrintTo(const CrashKind& k, std::ostream* os) { *os << k.kind; }

class ReplayCrashTest : public ReplayTest, public ::testing::WithParamInterface<CrashKind> {};

// The line of crash_at.c marked "crash here: KIND".
int CrashLine(const std::string& kind) {
  std::istringstream in(ReadFile(GOS_CRASH_AT_SOURCE));
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find("crash here: " + kind + " ") != std::string::npos) return n;
  }
  return -1;
}

TEST_P(ReplayCrashTest, ReplayHoldsTheRankAtItsCrash) {
  const CrashKind& c = GetParam();
  const int line = CrashLine(c.kind);
  ASSERT_GT(line, 0) << "no 'crash here: " << c.kind << "' in " << GOS_CRASH_AT_SOURCE;
  const std::string fn = std::string("crash_") + c.kind;
  RunResult run = Gos("gos-run", {"-n", "4", "-N", "2", Program("crash_at"), c.kind, "5"});
  ASSERT_EQ(run.code, 128 + c.signo) << run.Describe() << Logs();
  const uint64_t job = LastJob();

  Session s({GosBin("gos-replay"), std::to_string(job)}, Env());
  ASSERT_TRUE(WaitUntil([&] { return s.output().find("press Enter") != std::string::npos; }, 60s))
      << s.output() << Logs();
  const std::string out = s.output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m,
      std::regex(
          R"(rank 2 on node (\d+) \([^)]*\) crashed: (SIG[A-Z]+) \([^)]*\)( at address 0x([0-9a-f]+))?, pc 0x([0-9a-f]+), after strobe \d+)")))
      << out;
  const std::string node = m[1], sig = m[2], addr = m[4], pc = m[5];
  EXPECT_EQ(sig, c.name) << out;
  if (c.signo == SIGSEGV) {
    EXPECT_EQ(addr, "0") << out;  // the NULL it wrote through
  }
  if (c.signo == SIGBUS) {
    EXPECT_NE(addr, "0") << out;  // the page beyond the file's end
  }
  // SIGFPE and SIGILL give the faulting instruction's address: the pc.
  if (c.signo == SIGFPE || c.signo == SIGILL) {
    EXPECT_EQ(addr, pc) << out;
  }
  if (c.signo == SIGABRT) {
    EXPECT_TRUE(addr.empty()) << out;
  }
  // The top frames, one of them the crashing function.
  EXPECT_TRUE(std::regex_search(out, std::regex("\n  #\\d+ .*" + fn + " ")))
      << "no frame of " << fn << " in the report:\n"
      << out;
  EXPECT_NE(out.find("rank 2 is held at the faulting instruction"), std::string::npos) << out;

  // Every rank exists and is stopped; rank 2 where the report says.
  auto ranks = StoppedRanks(out);
  ASSERT_EQ(ranks.size(), 4u) << out;
  EXPECT_NE(out.find("rank 2  node " + node + " ("), std::string::npos) << out;
  for (const auto& [rank, pid] : ranks) {
    EXPECT_TRUE(WaitUntil([pid] { return ProcState(pid) == 'T'; }, 5s))
        << "rank " << rank << " pid " << pid << " is not stopped: " << ProcState(pid);
  }
  // gdb, as a user attaches it: the crashing function at the marked line.
  const pid_t held = ranks.at(2);
  RunResult gdb =
      gos::testing::Run({"gdb", "-nx", "-batch", "-p", std::to_string(held), "-ex", "bt"}, {}, 60s);
  EXPECT_TRUE(std::regex_search(
      gdb.output,
      std::regex("#\\d+ .*" + fn + " .*at [^\n]*crash_at\\.c:" + std::to_string(line) + "\n")))
      << "gdb does not show " << fn << " at crash_at.c:" << line << ":\n"
      << gdb.output;
  // gdb's detach re-stops it (the kernel keeps the group stop): 't' or 'R' for a moment.
  EXPECT_TRUE(WaitUntil([held] { return ProcState(held) == 'T'; }, 5s))
      << "gdb's detach let the held rank go: " << ProcState(held);

  s.EndInput();  // ends the session: the job is killed
  auto st = s.Wait(60s);
  ASSERT_TRUE(st.has_value()) << s.output();
  EXPECT_EQ(ExitCode(st), 4) << s.output();
  for (const auto& [rank, pid] : ranks) {
    EXPECT_TRUE(WaitUntil([pid] { return ::kill(pid, 0) != 0; }, 10s)) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Signals, ReplayCrashTest,
    ::testing::Values(CrashKind{"segv", SIGSEGV, "SIGSEGV"}, CrashKind{"bus", SIGBUS, "SIGBUS"},
                      CrashKind{"fpe", SIGFPE, "SIGFPE"}, CrashKind{"ill", SIGILL, "SIGILL"},
                      CrashKind{"abrt", SIGABRT, "SIGABRT"}),
    [](const ::testing::TestParamInfo<CrashKind>& i) { return std::string(i.param.kind); });

// ---- Restarted jobs (docs/specs/replay.md, "Restarted jobs") ----------------------------------
//
// A cluster of their own (a coordinator and 3 nodeagents, TestCluster of tests/support/cluster.h),
// since nodeagents are killed with kill -9. The programs print to a pipe, so their stdout is
// fully buffered and, being under 4 KiB, printed only at exit (or MPI_Abort): a killed run
// prints nothing, and a restored run prints the whole output from its restored buffer. So the
// final run's output is the whole output of the job, which a replay must reproduce.

namespace ck = gos::testing;

// The ranks' lines of a tool's merged output (its own "gos-...:" notices and gos-replay's
// table of stopped ranks left out).
std::string RankLines(const std::string& out) {
  std::string lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("gos-", 0) != 0 && line.rfind("gos:", 0) != 0 && line.rfind("  rank ", 0) != 0)
      lines += line + "\n";
  }
  return lines;
}

// Waits for a gos-run/gos-restart that lost a node: it must end with a failure.
void ExpectLostNode(ck::Subprocess& run, const ck::TestCluster& c) {
  auto st = run.Wait(std::chrono::steady_clock::now() + 90s);
  ASSERT_TRUE(st.has_value()) << run.output() << c.Logs();
  EXPECT_FALSE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << run.output();
  EXPECT_EQ(RankLines(run.output()).find("sum"), std::string::npos)
      << "the job ended before its node was killed:\n"
      << run.output();
}

// master_worker, recorded: its completion order depends on the workers' random times, so a
// replay that followed the wrong log would diverge or print another order. Killed after its
// first checkpoint, restarted, killed again after two checkpoints of the restored run,
// restarted from the older of those two. The log is the first run's up to its epoch, then the
// second run's up to the older epoch, then the third run's: `gos-replay` reproduces the job's
// output exactly; `--from-epoch` works for an epoch of any of those runs, and refuses the
// second run's newer epoch, which the last restart replaced.
TEST(ReplayRestartTest, JobRestartedTwiceReplaysTheRunThatCompleted) {
  if (std::string why = ck::Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  ck::TestCluster c(3, /*netns=*/false);
  c.keep = "20";  // every epoch of every run stays, the lost run's too
  ASSERT_EQ(c.Start(), "");
  // 150 tasks of up to 300 ms on 3 workers: about 7.5 s, with under 4 KiB of output.
  auto run = ck::Subprocess::Start({GosBin("gos-run"), "-n", "4", "-N", "3", "--checkpoint=1s",
                                    GosExample("master_worker"), "150", "300000"},
                                   c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = ck::FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();
  c.KillHost(2);
  ExpectLostNode(*run, c);

  // The first restart, on hosts 1 and 2, checkpointing; after two epochs of its own, host 2
  // dies too.
  auto first = ck::Subprocess::Start({GosBin("gos-restart"), "--checkpoint=1s", job}, c.Env());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<std::string> epochs;
  ASSERT_TRUE(WaitUntil(
      [&] {
        epochs = ck::FindAll(first->output(), "checkpoint: job " + job + " epoch (\\d+) committed");
        return epochs.size() >= 2;
      },
      60s))
      << first->output() << c.Logs();
  EXPECT_NE(first->output().find("its replay log goes on from epoch"), std::string::npos)
      << first->output();
  c.KillHost(1);
  ExpectLostNode(*first, c);
  const std::string kept = epochs[0], lost = epochs[1];
  const std::string first_epoch =
      ck::Find(first->output(), "job " + job + " restored from epoch (\\d+) ");
  ASSERT_NE(first_epoch, "") << first->output();

  // The second restart, from the older epoch, on host 1 alone: it completes.
  ck::Result second =
      ck::Execute({GosBin("gos-restart"), "--checkpoint=1s", "--epoch", kept, job}, c.Env(), 180s);
  ASSERT_EQ(second.code, 0) << second.Describe() << c.Logs();
  const std::string output = RankLines(second.output);
  ASSERT_NE(output.find("master_worker: 150 tasks on 4 ranks, sum 1113925, expected 1113925: ok"),
            std::string::npos)
      << second.Describe();
  ASSERT_NE(output.find("task 0 done by rank"), std::string::npos) << output;

  // From the start: the whole history, exactly the output the job gave, no divergence.
  ck::Result info = ck::Execute({GosBin("gos-replay"), "--info", job}, c.Env(), 60s);
  ASSERT_EQ(info.code, 0) << info.Describe();
  EXPECT_EQ(ck::FindAll(info.output, "(restarted from epoch \\d+ at strobe \\d+)").size(), 2u)
      << info.output;
  EXPECT_NE(info.output.find("restarted from epoch " + kept + " at strobe"), std::string::npos)
      << info.output;
  ck::Result replay = ck::Execute({GosBin("gos-replay"), job}, c.Env(), 180s);
  EXPECT_EQ(replay.code, 0) << replay.Describe() << c.Logs();
  EXPECT_EQ(RankLines(replay.output), output) << replay.Describe();
  EXPECT_EQ(replay.output.find("diverge"), std::string::npos) << replay.Describe();

  // The lost run's newer epoch is refused, naming the restart that replaced it.
  ck::Result refused =
      ck::Execute({GosBin("gos-replay"), "--from-epoch", lost, job}, c.Env(), 120s);
  EXPECT_NE(refused.code, 0) << refused.Describe();
  EXPECT_NE(refused.output.find("epoch " + lost + " of job " + job +
                                " was taken by a run that a restart replaced: the job was "
                                "restarted from epoch " +
                                kept),
            std::string::npos)
      << refused.Describe();
  EXPECT_EQ(RankLines(refused.output), "") << refused.Describe();

  // From an epoch the log has: the first run's that the job was first restarted from, the
  // second run's that it was restarted from next, and the third run's last. Restored with its
  // stdout buffer, the run prints the whole output again.
  std::vector<std::string> froms = {first_epoch, kept};
  // The third run checkpointed too (it ran for seconds at one epoch a second): its epochs are
  // marked in the log with the steps counted from the job's start.
  const std::vector<std::string> third =
      ck::FindAll(second.output, "checkpoint: job " + job + " epoch (\\d+) committed");
  EXPECT_FALSE(third.empty()) << second.output;
  if (!third.empty()) froms.push_back(third.back());
  for (const std::string& from : froms) {
    ck::Result tail = ck::Execute({GosBin("gos-replay"), "--from-epoch", from, job}, c.Env(), 180s);
    EXPECT_EQ(tail.code, 0) << tail.Describe() << c.Logs();
    EXPECT_NE(tail.output.find("restored from epoch " + from), std::string::npos)
        << tail.Describe();
    EXPECT_EQ(RankLines(tail.output), output) << tail.Describe();
  }
}

// The number of steps `gos-replay --info` says job's log holds (-1 if it cannot say).
int64_t LoggedSteps(const ck::TestCluster& c, const std::string& job) {
  ck::Result info = ck::Execute({GosBin("gos-replay"), "--info", job}, c.Env(), 30s);
  const std::string n = ck::Find(info.output, "job " + job + ": \\d+ ranks, (\\d+) steps");
  return info.code == 0 && !n.empty() ? std::stoll(n) : -1;
}

// A run restored by gos-run --restart-on-failure calls MPI_Abort (the killed first run never
// got that far): the log ends with the restored run's abort, and `gos-replay` replays the
// whole history to that MPI_Abort and stops there, with the output the job gave. The node dies
// once the first run's nodes have shipped steps recorded after its checkpoint (they ship every
// 10 s): the restart must cut them.
TEST(ReplayRestartTest, RestoredRunAbortsAndTheReplayStopsAtTheAbort) {
  if (std::string why = ck::Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  const gos::testing::TempDir tmp("gos-replay-giveup");
  const std::string dir = tmp.path();
  const std::string src = dir + "/giveup.c", bin = dir + "/giveup";
  // master_worker's shape, but the master gives up (MPI_Abort) after 80 results, and a task
  // takes up to 1.5 s: about 20 s to the abort. The master polls for each result with
  // MPI_Test and prints how many polls it took: every poll is a decision the rank records
  // (docs/specs/rank-decisions.md), so a decision stream cut in the wrong place shows.
  std::ofstream(src) << R"(#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, next = 0, got = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  srand((unsigned)rank * 7919u + (unsigned)time(NULL));
  if (rank == 0) {
    for (int w = 1; w < size; ++w, ++next) MPI_Send(&next, 1, MPI_INT, w, 1, MPI_COMM_WORLD);
    for (;;) {
      int reply[2], flag = 0, polls = 0;
      MPI_Status st;
      MPI_Request req;
      MPI_Irecv(reply, 2, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &req);
      while (!flag) {
        MPI_Test(&req, &flag, &st);
        if (!flag) {
          ++polls;
          usleep(2000);
        }
      }
      printf("task %d done by rank %d after %d polls\n", reply[0], st.MPI_SOURCE, polls);
      if (++got == 80) {
        printf("giving up after %d tasks\n", got);
        MPI_Abort(MPI_COMM_WORLD, 7);
      }
      MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, 1, MPI_COMM_WORLD);
      ++next;
    }
  }
  for (;;) {
    int t;
    MPI_Recv(&t, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    usleep((useconds_t)(rand() % 1500000));
    int reply[2] = {t, t % 7};
    MPI_Send(reply, 2, MPI_INT, 0, 2, MPI_COMM_WORLD);
  }
}
)";
  RunResult cc = gos::testing::Run({GosBin("gos-cc"), "-o", bin, src}, {}, 120s);
  ASSERT_EQ(cc.code, 0) << cc.Describe();

  ck::TestCluster c(3, /*netns=*/false);
  ASSERT_EQ(c.Start(), "");
  auto run = ck::Subprocess::Start(
      {GosBin("gos-run"), "-n", "4", "-N", "3", "--checkpoint=60s", "--restart-on-failure", bin},
      c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = "1";
  // One checkpoint, taken at once (the periodic ones would come after the job's end), once the
  // job runs. A node killed in the middle of a dump could kill a rank that criu is tracing
  // first, which fails the job instead of restarting it: the node dies between checkpoints.
  ck::Result ckpt;
  ASSERT_TRUE(WaitUntil(
      [&] {
        ckpt = ck::Execute({GosBin("gos-ckpt"), job}, c.Env(), 60s);
        return ckpt.code == 0;
      },
      60s))
      << ckpt.Describe() << c.Logs();
  ASSERT_NE(ckpt.output.find("epoch 1 committed"), std::string::npos) << ckpt.Describe();
  const int64_t at_checkpoint = LoggedSteps(c, job);
  ASSERT_GT(at_checkpoint, 0);
  ASSERT_TRUE(WaitUntil([&] { return LoggedSteps(c, job) > at_checkpoint; }, 30s))
      << run->output() << c.Logs();
  c.KillHost(2);
  auto st = run->Wait(std::chrono::steady_clock::now() + 180s);
  ASSERT_TRUE(st.has_value()) << run->output() << c.Logs();
  const std::string out = run->output();
  ASSERT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 7)
      << gos::testing::DescribeWaitStatus(*st) << "\n"
      << out << c.Logs();
  ASSERT_NE(out.find("job " + job + ": restarting from epoch 1 "), std::string::npos) << out;
  // The steps the first run shipped after its checkpoint are cut.
  EXPECT_NE(ck::Find(out, "its replay log goes on from epoch 1 \\(step " +
                              std::to_string(at_checkpoint) + "\\); the (\\d+) steps"),
            "")
      << out;
  const std::string output = RankLines(out);
  ASSERT_NE(output.find("giving up after 80 tasks"), std::string::npos) << out;
  ASSERT_NE(output.find("task 0 done by rank"), std::string::npos) << out;

  Session s({GosBin("gos-replay"), job}, c.Env());
  ASSERT_TRUE(WaitUntil([&] { return s.output().find("press Enter") != std::string::npos; }, 180s))
      << s.output() << c.Logs();
  const std::string replayed = s.output();
  EXPECT_NE(replayed.find("rank 0 called MPI_Abort with error code 7"), std::string::npos)
      << replayed;
  EXPECT_EQ(replayed.find("diverge"), std::string::npos) << replayed;
  EXPECT_EQ(RankLines(replayed), output) << replayed;
  EXPECT_EQ(StoppedRanks(replayed).size(), 4u) << replayed;
  s.EndInput();
  EXPECT_EQ(ExitCode(s.Wait(60s)), 0) << s.output();
}

}  // namespace
