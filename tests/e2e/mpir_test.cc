// MPIR process acquisition (docs/debugging.md, issue 29 item 3), end to end: gdb plays the
// parallel debugger. It starts `gos-run --debug` under its control on a real 2-node local
// cluster, stops at MPIR_Breakpoint, reads MPIR_proctable, attaches to every rank (each held
// in MPI_Init), releases each through its MPIR_debug_gate, and lets the job run to its end.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "tests/support/cluster.h"

namespace gos::testing {
namespace {

// The debugger: a gdb script (Python) run with `gdb -batch -x`.
constexpr const char* kDebugger = R"(set pagination off
set confirm off
handle SIGPIPE SIGCHLD nostop noprint pass
break MPIR_Breakpoint
run
python
import gdb, socket
state = int(gdb.parse_and_eval("MPIR_debug_state"))
n = int(gdb.parse_and_eval("MPIR_proctable_size"))
table = gdb.parse_and_eval("MPIR_proctable")
procs = []
for i in range(n):
    e = table[i]
    procs.append((e["host_name"].string(), e["executable_name"].string(), int(e["pid"])))
print("MPIR state %d size %d starter %d" % (state, n, int(gdb.parse_and_eval("MPIR_i_am_starter"))))
for i, (host, exe, pid) in enumerate(procs):
    print("MPIR proc %d host %s local %d exe %s pid %d" % (i, host, host == socket.gethostname(), exe, pid))
    gdb.execute("add-inferior")
    gdb.execute("inferior %d" % max(inf.num for inf in gdb.inferiors()))
    gdb.execute("attach %d" % pid)
    bt = gdb.execute("bt", to_string=True)
    gate = int(gdb.parse_and_eval("MPIR_debug_gate"))
    print("MPIR rank %d gate %d in MPI_Init %d" % (i, gate, "MPI_Init" in bt))
    gdb.execute("set var MPIR_debug_gate = 1")
    gdb.execute("detach")
gdb.execute("inferior 1")
end
continue
)";

class MpirTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    cluster_ = new LocalCluster("gos-mpir-test");
    RunResult up = cluster_->Up({"-N", "2", "--timeslice", "5ms"});
    ASSERT_EQ(up.code, 0) << up.Describe();
    // The first job staged on a fresh cluster sometimes gets part of its second 4 MiB chunk as
    // zeros (seen in 5 of 12 tries, without gos-run --debug too): the ranks run (their code is
    // in the first chunk), but gdb finds no symbol in the staged copy. A first job that needs
    // no debugger keeps these tests about MPIR.
    RunResult warm =
        Execute({Bin("gos-run"), "-n", "2", TestBinDir() + "/mpi/crash_at", "none", "1"},
                cluster_->Env(), 60s);
    ASSERT_EQ(warm.code, 0) << warm.Describe();
  }
  static void TearDownTestSuite() {
    if (cluster_ == nullptr) return;
    cluster_->Down();
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: nodeagents make PID namespaces and cgroups";
    if (::access("/usr/bin/gdb", X_OK) != 0) GTEST_SKIP() << "no gdb (scripts/setup installs it)";
    ASSERT_NE(cluster_, nullptr);
  }
  static LocalCluster* cluster_;
};
LocalCluster* MpirTest::cluster_ = nullptr;

TEST_F(MpirTest, AParallelDebuggerTakesEveryRankOfGosRunDebug) {
  const TempDir dir("gos-mpir-script");
  const std::string script = dir.path() + "/debugger.gdb";
  std::ofstream(script) << kDebugger;
  const std::string program = TestBinDir() + "/mpi/crash_at";
  RunResult r = Execute({"gdb", "-nx", "-batch", "-x", script, "--args", Bin("gos-run"), "-n", "4",
                         "-N", "2", "--debug", program, "none", "3"},
                        cluster_->Env(), 120s);
  const std::string out = r.output;
  ASSERT_NE(out.find("MPIR state 1 size 4 starter 1"), std::string::npos)
      << r.Describe() << cluster_->Logs(200);
  std::regex proc(R"(MPIR proc (\d) host \S+ local 1 exe (\S+) pid (\d+))");
  std::set<std::string> pids;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), proc); it != std::sregex_iterator();
       ++it) {
    EXPECT_NE((*it)[2].str().find("crash_at"), std::string::npos) << (*it)[0];
    pids.insert((*it)[3]);
  }
  EXPECT_EQ(pids.size(), 4u) << out;
  // Each rank was held in MPI_Init, its gate still 0, until the debugger released it.
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(out.find("MPIR rank " + std::to_string(rank) + " gate 0 in MPI_Init 1"),
              std::string::npos)
        << out;
  }
  // Released, the job ran to its end: every rank's line, gos-run exited 0 under gdb.
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(std::regex_search(out, std::regex("rank " + std::to_string(rank) + ": sum \\d+")))
        << out;
  }
  EXPECT_TRUE(
      std::regex_search(out, std::regex(R"(\[Inferior 1 \(process \d+\) exited normally\])")))
      << out;
}

// Without a debugger, `gos-run --debug` says where the held ranks are and how to release one.
TEST_F(MpirTest, DebugWithoutADebuggerPrintsTheRanks) {
  const std::string program = TestBinDir() + "/mpi/crash_at";
  std::vector<std::string> env = cluster_->Env();
  auto started =
      Subprocess::Start({Bin("gos-run"), "-n", "2", "--debug", program, "none", "2"}, env);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  Subprocess& run = *started;
  std::map<int, pid_t> held;
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::regex line(
            R"(rank (\d)  node \d+ \([^)]*\)  pid (\d+)   gdb -p \d+ -ex 'set var MPIR_debug_gate=1')");
        const std::string out = run.output();
        held.clear();
        for (auto it = std::sregex_iterator(out.begin(), out.end(), line);
             it != std::sregex_iterator(); ++it) {
          held[std::stoi((*it)[1])] = static_cast<pid_t>(std::stol((*it)[2]));
        }
        return held.size() == 2;
      },
      60s))
      << run.output();
  EXPECT_EQ(run.output().find(": sum"), std::string::npos) << "a held rank ran on";
  for (const auto& [rank, pid] : held) {
    RunResult g = Execute(
        {"gdb", "-nx", "-batch", "-p", std::to_string(pid), "-ex", "set var MPIR_debug_gate=1"}, {},
        60s);
    EXPECT_EQ(g.code, 0) << g.Describe();
  }
  auto st = run.Wait(std::chrono::steady_clock::now() + 60s);
  ASSERT_TRUE(st.has_value()) << run.output();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << run.output();
  EXPECT_NE(run.output().find("rank 1: sum"), std::string::npos) << run.output();
}

}  // namespace
}  // namespace gos::testing
