// MPI integration tests (issue 4): real MPI programs, built against gos's MPI
// subset, run by gos-run on a real local cluster (coordinator and four
// nodeagents started once for the suite with `gos-cluster up -N 4`, in a temp
// state dir; root only, like os_test).
//
//   Semantics    every self-checking program of tests/e2e/mpi/programs (prints "OK
//   <name>") at 2
//                and 4 ranks, on one node and on two;
//   Examples     ring, pi, jacobi, master_worker at 1..16 ranks over 1..4
//   nodes, their output
//                checked (jacobi's checksum against a serial computation in
//                this test);
//   Failures     MPI_Abort and a rank dying of SIGSEGV / SIGKILL while the
//   others wait in
//                MPI_Recv: gos-run exits non-zero, names the rank and its node,
//                and no process of the job is left.
//
// $GOS_MPI_TEST_TIMESLICE sets the cluster's strobe quantum (default 5ms).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/support/cluster.h"
#include "tests/support/cluster_files.h"
#include "tests/support/netns.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace gos::mpi {
namespace {

using namespace std::chrono_literals;
using gos::testing::NetnsHosts;
using gos::testing::Subprocess;
using SteadyClock = std::chrono::steady_clock;

using gos::testing::FindProcesses;
using gos::testing::ReadFile;
using gos::testing::WaitUntil;
using Result = gos::testing::RunResult;

std::string Bin(const std::string& name) { return gos::testing::GosBin(name); }
std::string Program(const std::string& name) { return gos::testing::TestBinDir() + "/mpi/" + name; }
std::string Example(const std::string& name) { return gos::testing::GosExample(name); }

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string Describe(const std::map<pid_t, std::string>& procs) {
  return gos::testing::DescribeProcesses(procs);
}

Result Execute(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               std::chrono::seconds timeout) {
  return gos::testing::Run(argv, env, timeout);
}

// ---- The cluster, shared by every test
// -----------------------------------------------------

class Cluster {
 public:
  static Cluster& Get() {
    static Cluster c;
    return c;
  }
  // "" when usable, else why not (then every test is skipped or fails with it).
  const std::string& problem() const { return problem_; }
  bool skip() const { return skip_; }
  const std::string& state() const { return local_->state(); }
  std::vector<std::string> Env() const { return local_->Env(); }

  // gos-run -n N -N K PROGRAM ARGS... on the cluster.
  Result GosRun(int ranks, int nodes, const std::string& program,
                const std::vector<std::string>& args = {},
                std::chrono::seconds timeout = 180s) const {
    std::vector<std::string> argv = {Bin("gos-run"),        "-n",   std::to_string(ranks), "-N",
                                     std::to_string(nodes), program};
    argv.insert(argv.end(), args.begin(), args.end());
    return Execute(argv, Env(), timeout);
  }

  std::string Logs() const { return local_ ? local_->Logs(4000) : ""; }

  // gos-cluster down (which must leave no process behind), then the state dir goes.
  void Stop() {
    if (!local_) return;
    local_->Down();
    local_.reset();
  }

 private:
  Cluster() {
    if (geteuid() != 0) {
      skip_ = true;
      problem_ = "needs root: nodeagents make PID namespaces and freezer cgroups";
      return;
    }
    if (!Exists("/sys/fs/cgroup/freezer/cgroup.procs")) {
      skip_ = true;
      problem_ = "no cgroup v1 freezer hierarchy at /sys/fs/cgroup/freezer";
      return;
    }
    local_ = std::make_unique<gos::testing::LocalCluster>("gos-mpi-test");
    const char* q = std::getenv("GOS_MPI_TEST_TIMESLICE");
    const std::string quantum = q != nullptr && *q != '\0' ? q : "5ms";
    Result up = local_->Up({"-N", "4", "--timeslice", quantum});
    if (up.code != 0) {
      problem_ = "gos-cluster up failed: " + up.Describe() + Logs();
      return;
    }
  }

  std::unique_ptr<gos::testing::LocalCluster> local_;
  std::string problem_;
  bool skip_ = false;
};

class MpiEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { Cluster::Get().Stop(); }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Cluster& c = Cluster::Get();
    if (c.skip()) GTEST_SKIP() << c.problem();
    ASSERT_EQ(c.problem(), "");
  }
  const Cluster& cluster() const { return Cluster::Get(); }
};

// ---- Semantics programs
// ---------------------------------------------------------------------

struct Layout {
  int ranks, nodes;
};
void PrintTo(const Layout& l, std::ostream* os) {
  *os << l.ranks << " ranks on " << l.nodes << " nodes";
}

class SemanticsTest : public MpiTest,
                      public ::testing::WithParamInterface<std::tuple<std::string, Layout>> {};

TEST_P(SemanticsTest, PrintsOk) {
  const auto& [name, layout] = GetParam();
  Result r = cluster().GosRun(layout.ranks, layout.nodes, Program(name));
  EXPECT_EQ(r.code, 0) << r.Describe() << (r.code < 0 ? cluster().Logs() : "");
  EXPECT_NE(r.output.find("OK " + name + "\n"), std::string::npos) << r.Describe();
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.Describe();
}

// "<program>_<R>ranks_<N>nodes": the test name of one program at one layout.
std::string ProgramLayoutName(
    const ::testing::TestParamInfo<std::tuple<std::string, Layout>>& param_info) {
  const Layout& l = std::get<1>(param_info.param);
  return std::get<0>(param_info.param) + "_" + std::to_string(l.ranks) + "ranks_" +
         std::to_string(l.nodes) + "nodes";
}

INSTANTIATE_TEST_SUITE_P(
    Programs, SemanticsTest,
    ::testing::Combine(::testing::Values("ordering", "wildcard", "tags", "truncate", "zero_self",
                                         "big", "many", "collectives", "split", "probe",
                                         "waitfamily", "sendrecv", "vector", "ssend", "topology",
                                         "userop", "structs", "groups", "cancel", "persistent",
                                         "nbcoll", "extras", "more"),
                       ::testing::Values(Layout{2, 1}, Layout{4, 1}, Layout{2, 2}, Layout{4, 2})),
    ProgramLayoutName);

// Newer programs, at 1 rank and at 4 and 6 over one and two nodes.
INSTANTIATE_TEST_SUITE_P(
    MorePrograms, SemanticsTest,
    ::testing::Combine(::testing::Values("topo_attr", "comm_create", "apps", "rma", "alltoallw",
                                         "errhandler", "sendmodes"),
                       ::testing::Values(Layout{1, 1}, Layout{4, 1}, Layout{4, 2}, Layout{6, 2})),
    ProgramLayoutName);

// Large sends from one reused buffer, between ranks of one node (3 ranks: two receivers of one
// buffer) and across two nodes.
INSTANTIATE_TEST_SUITE_P(Reuse, SemanticsTest,
                         ::testing::Combine(::testing::Values("reuse"),
                                            ::testing::Values(Layout{2, 1}, Layout{3, 1},
                                                              Layout{3, 2})),
                         ProgramLayoutName);

// ---- Examples
// -------------------------------------------------------------------------------

// Ranks and nodes for the examples: 1..16 ranks over 1..4 nodes.
const std::vector<Layout> kExampleLayouts = {{1, 1}, {2, 2}, {4, 2}, {8, 4}, {16, 4}};

TEST_F(MpiTest, RingTokenMatchesFormula) {
  const int laps = 3;
  for (const Layout& l : kExampleLayouts) {
    SCOPED_TRACE(std::to_string(l.ranks) + " ranks on " + std::to_string(l.nodes) + " nodes");
    Result r = cluster().GosRun(l.ranks, l.nodes, Example("ring"), {std::to_string(laps)});
    EXPECT_EQ(r.code, 0) << r.Describe();
    const long long want = 1LL * laps * l.ranks * (l.ranks - 1) / 2;
    const std::string line = "ring: " + std::to_string(l.ranks) + " ranks, " +
                             std::to_string(laps) + " laps, token " + std::to_string(want) +
                             ", expected " + std::to_string(want) + ": ok\n";
    EXPECT_NE(r.output.find(line), std::string::npos) << "want " << line << r.Describe();
  }
}

TEST_F(MpiTest, PiIsAccurate) {
  for (const Layout& l : kExampleLayouts) {
    if (l.ranks > 8) continue;  // the 2-core budget: 16 ranks only for ring and jacobi
    SCOPED_TRACE(std::to_string(l.ranks) + " ranks on " + std::to_string(l.nodes) + " nodes");
    Result r = cluster().GosRun(l.ranks, l.nodes, Example("pi"), {"1000000"});
    EXPECT_EQ(r.code, 0) << r.Describe();
    std::smatch m;
    static const std::regex kLine(
        R"(pi: (\d+) ranks, 1000000 intervals: pi = ([0-9.]+), error = ([0-9.e+-]+), time)");
    ASSERT_TRUE(std::regex_search(r.output, m, kLine)) << r.Describe();
    EXPECT_EQ(std::stoi(m[1]), l.ranks) << r.Describe();
    EXPECT_LT(std::fabs(std::stod(m[2]) - M_PI), 1e-6) << r.Describe();
    EXPECT_LT(std::stod(m[3]), 1e-6) << r.Describe();
  }
}

// Issue 31: 256 ranks on 4 nodes (64 a node) start without a node taken for dead, and
// compute their answer (~1.5 s here).
TEST_F(MpiTest, PiOf256RanksOnFourNodes) {
  Result r = cluster().GosRun(256, 4, Example("pi"), {"1000000"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  std::smatch m;
  static const std::regex kLine(
      R"(pi: 256 ranks, 1000000 intervals: pi = ([0-9.]+), error = ([0-9.e+-]+), time)");
  ASSERT_TRUE(std::regex_search(r.output, m, kLine)) << r.Describe();
  EXPECT_LT(std::fabs(std::stod(m[1]) - M_PI), 1e-6) << r.Describe();
}

// The Jacobi iteration of examples/jacobi.c, serially, with the same
// arithmetic: the "iterations=.. residual=" and " checksum=.. " parts of its
// output line.
std::pair<std::string, std::string> SerialJacobi(int n, int max_iter, int check) {
  std::vector<double> u(static_cast<size_t>(n) * n, 0.0), v;
  for (int j = 0; j < n; ++j) u[j] = 1.0;
  v = u;
  int iter = 0;
  while (iter < max_iter) {
    double local = 0.0;
    for (int i = 1; i < n - 1; ++i) {
      for (int j = 1; j < n - 1; ++j) {
        const size_t c = static_cast<size_t>(i) * n + j;
        v[c] = 0.25 * (u[c - n] + u[c + n] + u[c - 1] + u[c + 1]);
        local = std::max(local, std::fabs(v[c] - u[c]));
      }
    }
    std::swap(u, v);
    ++iter;
    if ((iter % check == 0 || iter == max_iter) && local < 1e-8) break;
  }
  double checksum = n;
  for (int i = 1; i < n - 1; ++i) {
    double s = 0.0;
    for (int j = 0; j < n; ++j) s += u[static_cast<size_t>(i) * n + j];
    checksum += s;
  }
  char iterations[64], sum[64];
  std::snprintf(iterations, sizeof iterations, "iterations=%d residual=", iter);
  std::snprintf(sum, sizeof sum, " checksum=%.10e ", checksum);
  return {iterations, sum};
}

TEST_F(MpiTest, JacobiChecksumIsTheSameForAnyRankCount) {
  // 20 rows of 48: at 16 ranks some ranks own one row, others two.
  const int n = 48, iters = 150;
  const auto [want_iters, want_sum] = SerialJacobi(n, iters, 10);
  for (const Layout& l : kExampleLayouts) {
    SCOPED_TRACE(std::to_string(l.ranks) + " ranks on " + std::to_string(l.nodes) + " nodes");
    Result r = cluster().GosRun(l.ranks, l.nodes, Example("jacobi"),
                                {std::to_string(n), std::to_string(iters)});
    EXPECT_EQ(r.code, 0) << r.Describe();
    EXPECT_NE(r.output.find("ranks=" + std::to_string(l.ranks) + " " + want_iters),
              std::string::npos)
        << "want " << want_iters << "\n"
        << r.Describe();
    EXPECT_NE(r.output.find(want_sum), std::string::npos) << "want" << want_sum << "\n"
                                                          << r.Describe();
  }
}

TEST_F(MpiTest, MasterWorkerDoesEveryTaskOnce) {
  const int tasks = 24;
  long long want = 0;
  for (int t = 0; t < tasks; ++t) want += 1LL * t * t + 1;
  for (const Layout& l : kExampleLayouts) {
    if (l.ranks > 8) continue;
    SCOPED_TRACE(std::to_string(l.ranks) + " ranks on " + std::to_string(l.nodes) + " nodes");
    Result r = cluster().GosRun(l.ranks, l.nodes, Example("master_worker"),
                                {std::to_string(tasks), "5000"});
    EXPECT_EQ(r.code, 0) << r.Describe();
    EXPECT_NE(r.output.find("sum " + std::to_string(want) + ", expected " + std::to_string(want) +
                            ": ok"),
              std::string::npos)
        << r.Describe();
    static const std::regex kDone(R"(^task (\d+) done by rank (\d+)$)");
    std::map<int, int> done;
    for (const auto& line : Lines(r.output)) {
      std::smatch m;
      if (!std::regex_match(line, m, kDone)) continue;
      const int rank = std::stoi(m[2]);
      done[std::stoi(m[1])]++;
      EXPECT_TRUE(l.ranks == 1 ? rank == 0 : rank >= 1 && rank < l.ranks) << line;
    }
    EXPECT_EQ(done.size(), static_cast<size_t>(tasks)) << r.Describe();
    for (const auto& [task, times] : done) EXPECT_EQ(times, 1) << "task " << task;
  }
}

// ---- The profiling interface
// ------------------------------------------------------------------

// A PMPI tool (mpi/pmpi_counter.c) linked into mpi/programs/pmpi.c with gos-cc counts every MPI
// call of the program, and only those: the calls gos makes inside MPI_Rsend, MPI_Waitany,
// MPI_Exscan, MPI_Cart_create, MPI_Type_create_subarray, the window calls, ... go to PMPI_
// names, so the tool's counts of MPI_Send, MPI_Testany, MPI_Allgather, MPI_Comm_split,
// MPI_Type_free, MPI_Isend, ... are the program's own.
TEST_F(MpiTest, PmpiToolCountsEveryCallOfTheProgram) {
  // Per rank, every rank alike (pmpi.c's header comment lists them), in the tool's format; 0
  // for the calls gos builds the program's on.
  const std::string want_counts =
      " Allgather=1 Allreduce=2 Alltoall=1 Barrier=1 Bcast=1 Cart_create=1 Comm_free=2"
      " Comm_rank=1 Comm_set_errhandler=0 Comm_size=1 Comm_split=1 Exscan=1 Finalize=1"
      " Get_count=0 Init=1 Irecv=3 Isend=2 Probe=0 Put=1 Recv=1 Reduce=1 Reduce_scatter=1"
      " Reduce_scatter_block=0 Rsend=1 Send=1 Sendrecv=1 Sendrecv_replace=1 Testany=0"
      " Type_commit=1 Type_create_hvector=0 Type_create_resized=0 Type_create_struct=0"
      " Type_create_subarray=1 Type_free=1 Type_get_extent=0 Type_size=1 Wait=2 Waitall=1"
      " Waitany=2 Win_create=1 Win_fence=2 Win_free=1 Wtime=1 calls=42";
  static const std::regex kLine(R"(^pmpi_counter rank (\d+):((?: \w+=\d+)+)$)");
  static const std::regex kCount(R"( (\w+)=(\d+))");
  const auto parse = [](const std::string& counts) {
    std::map<std::string, long> out;
    for (std::sregex_iterator it(counts.begin(), counts.end(), kCount), end; it != end; ++it) {
      out[(*it)[1]] = std::stol((*it)[2]);
    }
    return out;
  };
  const std::map<std::string, long> want = parse(want_counts);
  for (const Layout& l : {Layout{2, 1}, Layout{3, 2}, Layout{4, 2}}) {
    SCOPED_TRACE(std::to_string(l.ranks) + " ranks on " + std::to_string(l.nodes) + " nodes");
    Result r = cluster().GosRun(l.ranks, l.nodes, Program("pmpi_counted"));
    EXPECT_EQ(r.code, 0) << r.Describe();
    EXPECT_NE(r.output.find("OK pmpi\n"), std::string::npos) << r.Describe();
    EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.Describe();
    std::set<int> ranks;
    for (const auto& line : Lines(r.output)) {
      std::smatch m;
      if (!std::regex_match(line, m, kLine)) continue;
      const int rank = std::stoi(m[1]);
      EXPECT_TRUE(ranks.insert(rank).second) << "two lines of rank " << rank;
      EXPECT_EQ(parse(m[2]), want) << "rank " << rank << ": " << line;
    }
    EXPECT_EQ(ranks.size(), static_cast<size_t>(l.ranks)) << r.Describe();
  }
}

// ---- Fortran
// ------------------------------------------------------------------------------

// The Fortran programs and the stencil are built when gfortran is (libgos/mpi/fortran).
#ifdef GOS_TEST_FORTRAN
constexpr bool kFortran = true;
#else
constexpr bool kFortran = false;
#endif
#define GOS_NEEDS_FORTRAN() \
  if (!kFortran) GTEST_SKIP() << "built without gfortran: no Fortran bindings"

// mpi/programs/fortran77.f (include 'mpif.h') and fortran90.f90 (use mpi) check their own
// answers: sentinels, status arrays, LOGICALs, strings, Fortran datatypes and reductions, a
// user op written in Fortran (their header comments list it all).
TEST_F(MpiTest, FortranProgramsPass) {
  GOS_NEEDS_FORTRAN();
  for (const std::string name : {"fortran77", "fortran90"}) {
    for (const Layout& l : {Layout{1, 1}, Layout{4, 1}, Layout{4, 2}}) {
      SCOPED_TRACE(name + " at " + std::to_string(l.ranks) + " ranks on " +
                   std::to_string(l.nodes) + " nodes");
      Result r = cluster().GosRun(l.ranks, l.nodes, Program(name));
      EXPECT_EQ(r.code, 0) << r.Describe() << (r.code < 0 ? cluster().Logs() : "");
      EXPECT_NE(r.output.find("OK " + name + "\n"), std::string::npos) << r.Describe();
      EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.Describe();
    }
  }
}

// A PMPI tool for Fortran (mpi/pmpif_counter.c: C functions named mpi_send_ ..., calling
// pmpi_send_ ...) linked into mpi/programs/pmpif.f90 with gos-fort counts every call of the
// program, and only those (MPI_PROBE and MPI_GET_COUNT, which the program does not make, 0).
TEST_F(MpiTest, PmpiToolCountsEveryCallOfTheFortranProgram) {
  GOS_NEEDS_FORTRAN();
  const std::string want =
      " Allreduce=2 Barrier=1 Bcast=1 Comm_rank=1 Comm_size=1 Finalize=1 Get_count=0 Init=1"
      " Irecv=2 Isend=2 Probe=0 Recv=1 Request_free=1 Send=1 Sendrecv=1 Type_commit=1"
      " Type_free=1 Type_vector=1 Wait=1 Waitall=1 Wtime=1 calls=22";
  static const std::regex kLine(R"(^pmpif_counter rank (\d+):((?: \w+=\d+)+)$)");
  for (const Layout& l : {Layout{1, 1}, Layout{4, 1}, Layout{4, 2}}) {
    SCOPED_TRACE(std::to_string(l.ranks) + " ranks on " + std::to_string(l.nodes) + " nodes");
    Result r = cluster().GosRun(l.ranks, l.nodes, Program("pmpif_counted"));
    EXPECT_EQ(r.code, 0) << r.Describe();
    EXPECT_NE(r.output.find("OK pmpif\n"), std::string::npos) << r.Describe();
    EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.Describe();
    std::set<int> ranks;
    for (const auto& line : Lines(r.output)) {
      std::smatch m;
      if (!std::regex_match(line, m, kLine)) continue;
      EXPECT_TRUE(ranks.insert(std::stoi(m[1])).second) << line;
      EXPECT_EQ(m[2].str(), want) << line;
    }
    EXPECT_EQ(ranks.size(), static_cast<size_t>(l.ranks)) << r.Describe();
  }
}

// The checksum line of examples/stencil.f90 ("" if none), or its serial one.
std::string StencilChecksum(const std::string& out, bool serial = false) {
  static const std::regex kParallel(R"((?:^|\n)checksum=\s*(\S+) maxdelta=)");
  static const std::regex kSerial(R"((?:^|\n)serial checksum=\s*(\S+))");
  std::smatch m;
  return std::regex_search(out, m, serial ? kSerial : kParallel) ? m[1].str() : "";
}

// examples/stencil.f90 (MPI_SENDRECV of a derived type, MPI_ALLREDUCE, MPI_GATHERV) gives the
// same grid checksum, to the last bit, at 1 rank and at 4 on one and two nodes, and it is the
// checksum of the serial iteration the program also runs on rank 0 (`serial`).
TEST_F(MpiTest, FortranStencilMatchesItsSerialComputation) {
  GOS_NEEDS_FORTRAN();
  const std::vector<std::string> args = {"96", "64", "300", "100", "serial"};
  Result one = cluster().GosRun(1, 1, Example("stencil"), args);
  ASSERT_EQ(one.code, 0) << one.Describe();
  const std::string serial = StencilChecksum(one.output, true);
  ASSERT_NE(serial, "") << one.Describe();
  EXPECT_EQ(StencilChecksum(one.output), serial) << one.Describe();
  for (const Layout& l : {Layout{4, 1}, Layout{4, 2}}) {
    SCOPED_TRACE(std::to_string(l.ranks) + " ranks on " + std::to_string(l.nodes) + " nodes");
    Result r = cluster().GosRun(l.ranks, l.nodes, Example("stencil"), args);
    EXPECT_EQ(r.code, 0) << r.Describe();
    EXPECT_NE(r.output.find("300 steps, 4 ranks"), std::string::npos) << r.Describe();
    EXPECT_EQ(StencilChecksum(r.output), serial) << r.Describe();
    EXPECT_EQ(StencilChecksum(r.output, true), serial) << r.Describe();
  }
}

// ---- Failures
// -------------------------------------------------------------------------------

// 4 ranks on 4 nodes: rank 1 is alone on node 2.
void ExpectJobFailedAtRank1Node2(const Cluster& c, const Result& r, const std::string& program) {
  EXPECT_NE(r.code, 0) << r.Describe();
  EXPECT_GT(r.code, 0) << "gos-run did not finish: " << r.Describe() << c.Logs();
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.Describe();
  EXPECT_NE(r.output.find("node 2"), std::string::npos) << r.Describe();
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.Describe();
  // No rank of the job survives (they run staged copies from the state dir).
  std::map<pid_t, std::string> left;
  EXPECT_TRUE(WaitUntil(
      [&] {
        left.clear();
        for (const auto& [pid, what] : FindProcesses(c.state())) {
          // "/crash", not "crash": a checkout's path may hold the bare name (wt-crashstop/).
          if (what.find("/" + program) != std::string::npos) left[pid] = what;
        }
        return left.empty();
      },
      10s))
      << "processes of the failed job still running:\n"
      << Describe(left);
}

TEST_F(MpiTest, AbortEndsJobAndNamesRankAndNode) {
  Result r = cluster().GosRun(4, 4, Program("abort"), {}, 60s);
  ExpectJobFailedAtRank1Node2(cluster(), r, "abort");
  EXPECT_NE(r.output.find("rank 1 calls MPI_Abort"), std::string::npos) << r.Describe();
  std::printf("MPI_Abort: gos-run exit %d after %.2f s\n", r.code, r.seconds);
}

TEST_F(MpiTest, SegfaultingRankEndsJobAndLeavesNoProcess) {
  Result r = cluster().GosRun(4, 4, Program("crash"), {"segv"}, 60s);
  ExpectJobFailedAtRank1Node2(cluster(), r, "crash");
  EXPECT_EQ(r.code, 128 + SIGSEGV) << r.Describe();
}

TEST_F(MpiTest, KilledRankEndsJobAndLeavesNoProcess) {
  Result r = cluster().GosRun(4, 4, Program("crash"), {"kill"}, 60s);
  ExpectJobFailedAtRank1Node2(cluster(), r, "crash");
  EXPECT_EQ(r.code, 128 + SIGKILL) << r.Describe();
}

// An eager message nobody receives keeps its sender in MPI_Finalize (gos keeps the message in
// the sender until it is received): the rank says so, naming the message, instead of hanging
// silently; the time limit then ends the job.
TEST_F(MpiTest, FinalizeNamesTheSentMessagesNobodyReceived) {
  Result r = Execute({Bin("gos-run"), "--time", "9s", "-n", "2", "-N", "1", Program("unreceived")},
                     cluster().Env(), 60s);
  EXPECT_NE(r.code, 0) << r.Describe();
  EXPECT_NE(r.output.find("rank 0: MPI_Finalize has waited 5 s for 1 sent message(s) that no "
                          "rank has received (to rank 1 tag 7)"),
            std::string::npos)
      << r.Describe();
  EXPECT_EQ(r.output.find("rank 1: MPI_Finalize has waited"), std::string::npos) << r.Describe();
}

// Nodes up and strobing, by one PS round trip on the coordinator's client socket (0 if it
// does not answer).
uint32_t NodesUp(const std::string& socket) {
  auto reply = gos::testing::Ps(socket, 5s);
  if (!reply.ok() || reply->strobe == 0) return 0;
  return gos::testing::NodesUp(*reply);
}

// ---- Two hosts in network namespaces ------------------------------------------------------

// A coordinator on the bridge and one nodeagent in each of two network namespaces: MPI
// traffic between the ranks of the two nodes crosses a real (virtual) network.
TEST_F(MpiTest, TwoNetworkNamespaceHosts) {
  if (std::string why = NetnsHosts::Unsupported(); !why.empty()) GTEST_SKIP() << why;
  // The coordinator's own quantum and epochs, as a cluster started by hand has them.
  gos::testing::TestCluster c(2, /*netns=*/true);
  c.timeslice = "";
  c.keep = "";
  ASSERT_EQ(c.Start(), "");
  const std::string state = c.state();
  {
    Subprocess& coordinator = c.coordinator();
    const std::string socket = state + "/coordinator.sock";
    ASSERT_TRUE(WaitUntil([&] { return NodesUp(socket) >= 2; }, 30s))
        << "2 nodes not up:\n"
        << coordinator.output() << c.agent(0).output() << c.agent(1).output();
    const std::vector<std::string> client = c.Env();
    Result ring =
        Execute({Bin("gos-run"), "-n", "4", "-N", "2", Example("ring"), "3"}, client, 120s);
    EXPECT_EQ(ring.code, 0) << ring.Describe() << coordinator.output();
    EXPECT_NE(ring.output.find("token 18, expected 18: ok"), std::string::npos) << ring.Describe();
    Result coll =
        Execute({Bin("gos-run"), "-n", "4", "-N", "2", Program("collectives")}, client, 180s);
    EXPECT_EQ(coll.code, 0) << coll.Describe();
    EXPECT_NE(coll.output.find("OK collectives\n"), std::string::npos) << coll.Describe();
    coordinator.Signal(SIGTERM);
    EXPECT_TRUE(coordinator.Wait(SteadyClock::now() + 15s).has_value()) << coordinator.output();
    for (int i = 0; i < 2; ++i) {
      Subprocess& agent = c.agent(i);
      EXPECT_TRUE(agent.Wait(SteadyClock::now() + 15s).has_value())
          << "nodeagent did not exit with the coordinator:\n"
          << agent.output();
    }
  }
  std::map<pid_t, std::string> left;
  EXPECT_TRUE(WaitUntil([&] { return (left = FindProcesses(state)).empty(); }, 10s))
      << Describe(left);
}

// The cluster still runs MPI jobs after the failures above (and after
// everything else).
// A nodeagent that stops answering for longer than the BCS peer timeout (1.5 s) but shorter
// than the failure timeout is not declared down; its peers' exchange breaks off. The job
// can never communicate again: it must fail, saying why, instead of hanging.
// The nodeagent of node `node` of the local cluster in `state`, or -1 if none runs.
pid_t NodeAgentPid(const std::string& state, uint32_t node) {
  for (const auto& [pid, what] : FindProcesses(state + "/nodes/n" + std::to_string(node) + " ")) {
    if (what.find("gos-nodeagent") != std::string::npos) return pid;
  }
  return -1;
}

TEST(MpiStall, StalledPeerFailsTheJobInsteadOfHanging) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: nodeagents make PID namespaces and cgroups";
  gos::testing::LocalCluster cluster("gos-mpi-stall");
  const std::string state = cluster.state();
  const std::vector<std::string> env = cluster.Env();
  Result up = cluster.Up({"-N", "2", "--failure-timeout", "10s"});
  ASSERT_EQ(up.code, 0) << up.Describe();
  // 256 x 256 converges only after minutes: the job is still running when it is stalled.
  auto job = Subprocess::Start(
      {Bin("gos-run"), "-n", "2", "-N", "2", Example("jacobi"), "256", "100000000", "10"}, env);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  // The nodeagent of node 2, once the job's ranks run.
  pid_t agent = -1;
  ASSERT_TRUE(WaitUntil(
      [&] {
        agent = NodeAgentPid(state, 2);
        return agent > 0 && !FindProcesses("jacobi").empty();
      },
      30s));
  // A stall breaks the exchange when a strobe reaches node 1 while node 2 is stopped. If node
  // 2 stops before it confirmed the current strobe, the coordinator waits for it and sends
  // none: then the stall passes unnoticed, and the next one is tried.
  std::optional<int> status;
  for (int attempt = 0; attempt < 8 && !status; ++attempt) {
    std::this_thread::sleep_for(1s);
    ::kill(agent, SIGSTOP);
    std::this_thread::sleep_for(3s);
    ::kill(agent, SIGCONT);
    status = job->Wait(SteadyClock::now() + 5s);
  }
  if (!status) status = job->Wait(SteadyClock::now() + 60s);
  const std::string out = job->output();
  EXPECT_TRUE(status.has_value()) << "gos-run still running 60 s after the stall:\n" << out;
  if (status) {
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGKILL)
        << gos::testing::DescribeWaitStatus(*status) << "\n"
        << out;
  }
  // Which of the exchange's steps broke depends on where the stall fell; the cause follows.
  EXPECT_NE(out.find("cannot communicate any more: "), std::string::npos) << out;
  cluster.Down();
}

// A nodeagent killed with its job's ranks cannot remove their channel files (/dev/shm) and
// init dirs; gos-run removes them when its embedded cluster is over.
TEST(MpiKilledAgent, EmbeddedClusterLeavesNoChannelFiles) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: nodeagents make PID namespaces and cgroups";
  const gos::testing::TempDir dir("gos-mpi-killed", 0755);
  const std::string state = dir.path();
  const std::vector<std::string> env = {"GOS_STATE_DIR=" + state};
  auto job = Subprocess::Start(
      {Bin("gos-run"), "-n", "4", "-N", "1", Example("jacobi"), "256", "100000000", "10"}, env);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  pid_t agent = -1;
  // This job's ranks: their executable is the copy staged under the state dir, their
  // command line the example's (gos-rank-init and gos-run name it too, and other tests may
  // run the example meanwhile).
  auto ranks = [&] {
    size_t n = 0;
    for (const auto& [pid, cmd] : FindProcesses(state + "/nodes/")) {
      n += cmd.rfind(Example("jacobi") + " ", 0) == 0 ? 1 : 0;
    }
    return n;
  };
  ASSERT_TRUE(WaitUntil(
      [&] {
        agent = NodeAgentPid(state, 1);
        return agent > 0 && ranks() >= 4;
      },
      30s));
  const std::string prefix = gos::testing::ChannelFilePrefix(state);
  auto channel_files = [&] {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
      if (e.path().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
    }
    return found;
  };
  ASSERT_TRUE(WaitUntil([&] { return channel_files().size() >= 4; }, 10s)) << prefix;
  ::kill(agent, SIGKILL);
  auto status = job->Wait(SteadyClock::now() + 60s);
  ASSERT_TRUE(status.has_value()) << job->output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 255)
      << gos::testing::DescribeWaitStatus(*status) << "\n"
      << job->output();
  EXPECT_EQ(channel_files(), std::vector<std::string>{});
  const std::string init_dir = "/run/gos/init/" + gos::testing::ClusterTag(state + "/cluster.key");
  EXPECT_FALSE(std::filesystem::exists(init_dir)) << init_dir;
  EXPECT_TRUE(FindProcesses(state).empty());
  gos::testing::RemoveClusterFiles(state);
}

TEST_F(MpiTest, ZzClusterStillRunsJobsAfterFailures) {
  Result r = cluster().GosRun(4, 2, Example("ring"), {"2"});
  EXPECT_EQ(r.code, 0) << r.Describe() << cluster().Logs();
  EXPECT_NE(r.output.find(": ok"), std::string::npos) << r.Describe();
}

}  // namespace
}  // namespace gos::mpi
