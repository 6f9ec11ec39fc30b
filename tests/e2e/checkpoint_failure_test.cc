// Checkpoint and restart under failure (issue 5), end to end with real coordinators and
// nodeagents, real CRIU dumps and restores and the real RocksDB store:
//
//   - NodeagentKilledMidCheckpointNeverCommits (and ...WhileStoringChunks...): a 2-rank job
//     over 2 nodes (256 MiB heap per rank) has epoch 1 committed; while epoch 2 is being dumped
//     (or, after the dumps, while its chunks are being stored), one nodeagent (with its ranks and
//     its criu) is killed with kill -9. Epoch 2 reports failure and never shows in
//     `gos-ckpt --list`; the job fails; `gos-restart` brings it back on the survivor from epoch
//     1 with exactly epoch 1's state (checked by the heap checksum); `gos-store verify` passes.
//   - HostOrRestartKilledWhileImagesShip: a 2-rank job (512 MiB heap per rank) over 2 nodes
//     has epoch 1 committed and is killed. While `gos-restart --from-store` ships the images
//     (restore batches XFERed into the nodes' memory), node 2's host is killed: the restart
//     fails at once, naming the node, with nothing left hanging; with node 2 back, a restart
//     killed (gos-kill) while its images ship stops; then a restart restores the job, which
//     ends with epoch 1's heap checksum.
//   - RestartOnFailure: `gos-run --checkpoint=1s --restart-on-failure` of a 4-rank Jacobi over
//     3 network-namespace hosts; once an epoch is committed one host is killed; gos-run itself
//     restarts the job on the survivors and exits 0 with the checksum of an uninterrupted run;
//     the restart it used is stored with the job (gos-ckpt --list: 0 of 1 left).
//   - CriuKilledMidDumpRestartsOrFailsTheJob: while a 2-rank Jacobi over 2 nodes with
//     --checkpoint=1s is being dumped, one node's criu is killed (as the OOM killer would): the
//     ranks it was dumping may carry criu's parasite and are never thawed. With
//     --restart-on-failure the job is restarted from its newest epoch and gos-run exits 0 with
//     the uninterrupted run's checksum; without, the job fails (exit code 255) naming the node,
//     the epoch, criu's death and the epoch gos-restart brings it back from.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/cluster.h"

namespace gos::checkpoint {
namespace {

using namespace std::chrono_literals;
using testing::Bin;
using testing::CriuDumpChildren;
using testing::Example;
using testing::Execute;
using testing::Find;
using testing::FindAll;
using testing::FirstCommittedJob;
using testing::GosRun;
using testing::JacobiResult;
using testing::ListedEpochs;
using testing::Result;
using testing::Subprocess;
using testing::TestCluster;
using testing::UninterruptedJacobi;
using testing::Unsupported;
using testing::WaitUntil;
using SteadyClock = std::chrono::steady_clock;

// Occurrences of text in s.
int Count(const std::string& s, const std::string& text) {
  int n = 0;
  for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
  return n;
}

// gos-ckpt's elapsed-time stamp ("gos-ckpt: [  1.00s] ...") of its first line containing
// text, in seconds; -1 if there is none.
double StampOf(const std::string& out, const std::string& text) {
  const size_t at = out.find(text);
  if (at == std::string::npos) return -1;
  const size_t line = out.rfind('\n', at);
  const size_t open = out.find('[', line == std::string::npos ? 0 : line);
  return open == std::string::npos || open > at ? -1 : std::strtod(out.c_str() + open + 1, nullptr);
}

// A checkpoint whose chunks took more than a second and a half to store told gos-ckpt how
// the storing went at least once on the way ("epoch 1: storing, 1 of 2 ranks stored, ...").
void ExpectStoringProgress(const std::string& out) {
  const double dumped = StampOf(out, "ranks dumped"), done = StampOf(out, "committed");
  ASSERT_GE(dumped, 0) << out;
  ASSERT_GE(done, dumped) << out;
  if (done - dumped >= 1.5) {
    EXPECT_NE(out.find(": storing, "), std::string::npos) << out;
    EXPECT_NE(out.find(" new so far ("), std::string::npos) << out;
  }
}

// What examples/dirty prints at the end of an uninterrupted run with these arguments and
// `passes` rewrites: it is run here directly, outside gos.
std::string DirtyChecksum(const std::vector<std::string>& args, int passes) {
  std::vector<std::string> argv = {Example("dirty")};
  argv.insert(argv.end(), args.begin(), args.end());
  auto run = Subprocess::Start(argv);
  if (!run.ok()) return run.status().ToString();
  if (!WaitUntil([&] { return run->OutputContains("MiB ready"); }, 30s)) return run->output();
  for (int p = 1; p <= passes; ++p) {
    run->Signal(SIGUSR1);
    const std::string done = "pass " + std::to_string(p) + " done";
    if (!WaitUntil([&] { return run->OutputContains(done); }, 30s)) return run->output();
  }
  run->Signal(SIGTERM);
  auto status = run->Wait(SteadyClock::now() + 30s);
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) return run->output();
  return Find(run->output(), "(passes=\\d+ checksum=[0-9a-f]+)");
}

// Where in epoch 2 the nodeagent dies.
enum class KillPoint {
  kDump,  // while it runs `criu dump` of its rank (the job is paused)
  kShip,  // after every rank is dumped and the job resumed, while chunks are being stored
};

// A 2-node cluster running a 2-rank examples/dirty job (job 1, `args`) whose ranks did pass 1,
// with epoch 1 committed: the state a restart must bring back, whose heap checksum is
// `expected` (of an uninterrupted run with one pass).
struct DirtyAtEpoch1 {
  explicit DirtyAtEpoch1(std::vector<std::string> args) : dirty_args(std::move(args)) {}

  void Start() {
    expected = DirtyChecksum(dirty_args, 1);
    ASSERT_EQ(expected.rfind("passes=1 checksum=", 0), 0u) << expected;
    ASSERT_EQ(c.Start(), "");
    std::vector<std::string> argv = {Bin("gos-run"), "-n", "2", "-N", "2", Example("dirty")};
    argv.insert(argv.end(), dirty_args.begin(), dirty_args.end());
    auto started = Subprocess::Start(argv, c.Env());
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    run = std::make_unique<Subprocess>(std::move(*started));
    ASSERT_TRUE(WaitUntil([&] { return Count(run->output(), "MiB ready") == 2; }, 60s))
        << run->output() << c.Logs();
    ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "USR1", "1"}, c.Env(), 30s).code, 0);
    ASSERT_TRUE(WaitUntil([&] { return Count(run->output(), "pass 1 done") == 2; }, 30s))
        << run->output();
    e1 = Execute({Bin("gos-ckpt"), "1"}, c.Env(), 120s);
    ASSERT_EQ(e1.code, 0) << e1.Describe() << c.Logs();
    ASSERT_NE(e1.output.find("epoch 1 committed"), std::string::npos) << e1.Describe();
  }

  // SIGTERM ends the restarted job, a `gos-restart` that reported it resumed: it exits 0, and
  // both ranks print the checksum of epoch 1's heap.
  void ExpectRestoredHeaps(Subprocess& restart) {
    ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "TERM", "1"}, c.Env(), 30s).code, 0);
    auto status = restart.Wait(SteadyClock::now() + 60s);
    ASSERT_TRUE(status.has_value()) << restart.output();
    EXPECT_EQ(WEXITSTATUS(*status), 0) << restart.output() << c.Logs();
    EXPECT_EQ(FindAll(restart.output(), "(passes=\\d+ checksum=[0-9a-f]+)"),
              std::vector<std::string>(2, expected))
        << restart.output();
  }

  const std::vector<std::string> dirty_args;
  std::string expected;
  TestCluster c{2, /*netns=*/false};
  std::unique_ptr<Subprocess> run;  // the job's gos-run
  Result e1;                        // gos-ckpt's, for epoch 1
};

// The body of the NodeagentKilled* tests (see the top of the file).
void NodeagentKilledMidCheckpoint(KillPoint point) {
  // 256 MiB per rank, each pass rewriting half of it, so that epoch 2 is long enough to be
  // hit: each rank's dump takes ~150 ms, and then 2 x 128 MiB of new chunks take about a
  // second to hash, compress and store.
  DirtyAtEpoch1 d({"256", "600", "50"});
  ASSERT_NO_FATAL_FAILURE(d.Start());
  TestCluster& c = d.c;
  Subprocess* run = d.run.get();
  const std::string job = "1";
  ExpectStoringProgress(d.e1.output);

  // Pass 2, so that epoch 2 (had it committed) would restore a different heap.
  ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "USR1", job}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(WaitUntil([&] { return Count(run->output(), "pass 2 done") == 2; }, 30s))
      << run->output();

  // Epoch 2; a nodeagent dies in the middle of it, with its ranks (and its criu).
  auto e2 = Subprocess::Start({Bin("gos-ckpt"), job}, c.Env());
  ASSERT_TRUE(e2.ok()) << e2.status().ToString();
  int victim = -1;
  if (point == KillPoint::kDump) {
    // The first nodeagent seen running `criu dump`.
    ASSERT_TRUE(WaitUntil(
        [&] {
          for (int i = 0; i < 2 && victim < 0; ++i) {
            if (!CriuDumpChildren(c.AgentPid(i)).empty()) victim = i;
          }
          return victim >= 0;
        },
        60s))
        << e2->output() << c.Logs();
  } else {
    // gos-ckpt's progress line once both dumps are done.
    ASSERT_TRUE(WaitUntil([&] { return e2->OutputContains("storing chunks"); }, 60s))
        << e2->output() << c.Logs();
    victim = 1;
  }
  c.KillHost(victim);
  const int survivor = 1 - victim;

  auto e2_status = e2->Wait(SteadyClock::now() + 60s);
  ASSERT_TRUE(e2_status.has_value()) << e2->output();
  EXPECT_NE(WEXITSTATUS(*e2_status), 0) << e2->output();
  EXPECT_NE(e2->output().find("epoch 2 aborted"), std::string::npos) << e2->output();
  EXPECT_EQ(e2->output().find("committed"), std::string::npos) << e2->output();

  // The job lost a node, so it fails.
  auto run_status = run->Wait(SteadyClock::now() + 60s);
  ASSERT_TRUE(run_status.has_value()) << run->output() << c.Logs();
  EXPECT_NE(WEXITSTATUS(*run_status), 0) << run->output();
  EXPECT_NE(run->output().find("node " + std::to_string(victim + 1)), std::string::npos)
      << run->output();
  EXPECT_EQ(Find(run->output(), "(checksum=\\S+)"), "") << "the job ended before the kill";

  // Epoch 2 never committed, now or later.
  EXPECT_EQ(ListedEpochs(c, job), std::vector<int>{1});

  // Back on the survivor, from epoch 1: both ranks have done exactly one pass.
  auto restart = Subprocess::Start({Bin("gos-restart"), job}, c.Env());
  ASSERT_TRUE(restart.ok()) << restart.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 60s))
      << restart->output() << c.Logs();
  EXPECT_NE(
      restart->output().find("restored from epoch 1 on node " + std::to_string(survivor + 1) + " "),
      std::string::npos)
      << restart->output();
  d.ExpectRestoredHeaps(*restart);
  EXPECT_EQ(ListedEpochs(c, job), std::vector<int>{1});

  Result verify = Execute({Bin("gos-store"), "verify"}, c.Env(), 120s);
  EXPECT_EQ(verify.code, 0) << verify.Describe();
}

TEST(CheckpointFailureTest, NodeagentKilledMidCheckpointNeverCommits) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  NodeagentKilledMidCheckpoint(KillPoint::kDump);
}

TEST(CheckpointFailureTest, NodeagentKilledWhileStoringChunksNeverCommits) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  NodeagentKilledMidCheckpoint(KillPoint::kShip);
}

// Bytes of the image files shipped so far into rank `rank`'s restore dir on host h.
uint64_t RestoredBytes(const TestCluster& c, int h, const std::string& job, int rank) {
  uint64_t n = 0;
  std::error_code ec;
  const std::string root = c.state() + "/nodes/h" + std::to_string(h) + "/restore";
  for (const auto& e : std::filesystem::recursive_directory_iterator(root, ec)) {
    const std::string p = e.path().string();
    if (p.find("/j" + job + "-e") != std::string::npos &&
        p.find("/r" + std::to_string(rank) + "/") != std::string::npos && e.is_regular_file(ec)) {
      n += e.file_size(ec);
    }
  }
  return n;
}

TEST(CheckpointFailureTest, HostOrRestartKilledWhileImagesShip) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  DirtyAtEpoch1 d({"512", "600", "50"});
  ASSERT_NO_FATAL_FAILURE(d.Start());
  TestCluster& c = d.c;
  const std::string job = "1";
  ASSERT_EQ(Execute({Bin("gos-kill"), job}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(d.run->Wait(SteadyClock::now() + 60s).has_value()) << d.run->output();

  // Rank 1's images are on their way to node 2 (host h1) when the host dies.
  auto shipping = [&](int host, int rank) {
    return WaitUntil([&] { return RestoredBytes(c, host, job, rank) > (8u << 20); }, 60s);
  };
  {
    auto restart = Subprocess::Start({Bin("gos-restart"), "--from-store", job}, c.Env());
    ASSERT_TRUE(restart.ok()) << restart.status().ToString();
    ASSERT_TRUE(shipping(1, 1)) << restart->output() << c.Logs();
    const auto killed = SteadyClock::now();
    c.KillHost(1);
    auto status = restart->Wait(killed + 60s);
    ASSERT_TRUE(status.has_value()) << restart->output() << c.Logs();
    EXPECT_LT(SteadyClock::now() - killed, 30s) << "the failure is seen at once";
    EXPECT_NE(WEXITSTATUS(*status), 0) << restart->output();
    EXPECT_NE(restart->output().find("node 2"), std::string::npos) << restart->output();
    EXPECT_NE(restart->output().find("is down"), std::string::npos) << restart->output();
    EXPECT_EQ(restart->output().find("resumed"), std::string::npos) << restart->output();
  }
  // Node 2 comes back; a restart killed while its images ship stops shipping them.
  ASSERT_EQ(c.StartAgent(1), "");
  ASSERT_TRUE(WaitUntil([&] { return c.NodesUp() >= 2; }, 60s)) << c.Logs();
  {
    // What the first attempt wrote goes, so that the bytes seen are this attempt's.
    for (int h = 0; h < 2; ++h) {
      std::error_code ec;
      std::filesystem::remove_all(c.state() + "/nodes/h" + std::to_string(h) + "/restore", ec);
    }
    auto restart = Subprocess::Start({Bin("gos-restart"), "--from-store", job}, c.Env());
    ASSERT_TRUE(restart.ok()) << restart.status().ToString();
    ASSERT_TRUE(shipping(0, 0)) << restart->output() << c.Logs();
    const auto killed = SteadyClock::now();
    ASSERT_EQ(Execute({Bin("gos-kill"), job}, c.Env(), 30s).code, 0);
    auto status = restart->Wait(killed + 60s);
    ASSERT_TRUE(status.has_value()) << restart->output() << c.Logs();
    EXPECT_LT(SteadyClock::now() - killed, 30s);
    EXPECT_NE(WEXITSTATUS(*status), 0) << restart->output();
    EXPECT_EQ(restart->output().find("resumed"), std::string::npos) << restart->output();
    // Nothing more arrives once the shipment stopped.
    std::this_thread::sleep_for(500ms);
    const uint64_t after = RestoredBytes(c, 0, job, 0) + RestoredBytes(c, 1, job, 1);
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(RestoredBytes(c, 0, job, 0) + RestoredBytes(c, 1, job, 1), after);
  }
  // What the failed attempts left behind does not get in the way: both ranks come back with
  // exactly epoch 1's heap.
  auto restart = Subprocess::Start({Bin("gos-restart"), "--from-store", job}, c.Env());
  ASSERT_TRUE(restart.ok()) << restart.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 120s))
      << restart->output() << c.Logs();
  EXPECT_NE(restart->output().find("2 ranks from the store, in "), std::string::npos)
      << restart->output();
  d.ExpectRestoredHeaps(*restart);
}

TEST(CheckpointFailureTest, RestartOnFailure) {
  if (std::string why = Unsupported(true); !why.empty()) GTEST_SKIP() << why;
  TestCluster c(3, /*netns=*/true);
  ASSERT_EQ(c.Start(), "");
  // About 8 s uninterrupted, twice that with a checkpoint every second.
  const std::vector<std::string> jacobi = {Example("jacobi"), "256", "1500", "100"};

  // The uninterrupted run, for its checksum.
  std::string why;
  const std::string checksum = UninterruptedJacobi(c, {"-n", "4", "-N", "3"}, jacobi, 300s, &why);
  ASSERT_NE(checksum, "") << why;

  // With checkpoints and automatic restarts; once an epoch is committed, host 3 dies.
  auto run = Subprocess::Start(
      GosRun({"-n", "4", "-N", "3", "--checkpoint=1s", "--restart-on-failure"}, jacobi), c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();
  // Rank 3 is host 3's: its channel file is what the restored rank maps again.
  EXPECT_EQ(::access((c.ChannelPrefix() + job + "-r3").c_str(), F_OK), 0) << c.ChannelPrefix();
  c.KillHost(2);
  const std::string at_kill = run->output();
  ASSERT_EQ(Find(at_kill, "(checksum=\\S+)"), "") << "the job finished before the kill";

  auto status = run->Wait(SteadyClock::now() + 120s);
  ASSERT_TRUE(status.has_value()) << run->output() << c.Logs();
  const std::string out = run->output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << gos::testing::DescribeWaitStatus(*status) << "\n"
      << out << c.Logs();
  EXPECT_NE(out.find("job " + job + ": node 3"), std::string::npos) << out;
  EXPECT_NE(Find(out, "job " + job + ": (restarting from epoch \\d+)"), "") << out;
  EXPECT_NE(Find(out, "job " + job + " (restored from epoch \\d+ on nodes 1,2) "), "") << out;
  EXPECT_EQ(JacobiResult(out), checksum) << out;
  Result verify = Execute({Bin("gos-store"), "verify"}, c.Env(), 120s);
  EXPECT_EQ(verify.code, 0) << verify.Describe();
  // The job table counts the automatic restart: a gos-restart of the job has none left.
  Result list = Execute({Bin("gos-ckpt"), "--list", job}, c.Env(), 30s);
  EXPECT_NE(list.output.find("job " + job + ": checkpoints every 1s, keeps 3 epochs (the " +
                             "coordinator's --keep), 0 of 1 automatic restart left"),
            std::string::npos)
      << list.Describe();
}

// Kills node `node`'s criu while it dumps a rank of the job gos-run `run` runs, until the job
// says so (a criu caught as it was ending by itself does not count). True when it did.
bool KillCriuMidDump(TestCluster& c, int node, Subprocess& run) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    // A dump of these ranks takes tens of ms: look often (a look reads /proc, ~1 ms).
    std::vector<pid_t> criu;
    const auto deadline = SteadyClock::now() + 30s;
    while ((criu = CriuDumpChildren(c.AgentPid(node))).empty()) {
      if (SteadyClock::now() >= deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
    for (pid_t pid : criu) ::kill(pid, SIGKILL);
    if (WaitUntil([&] { return run.OutputContains("in the middle of the dump"); }, 5s)) return true;
  }
  return false;
}

TEST(CheckpointFailureTest, CriuKilledMidDumpRestartsOrFailsTheJob) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  TestCluster c(2, /*netns=*/false);
  ASSERT_EQ(c.Start(), "");
  const std::vector<std::string> jacobi = {Example("jacobi"), "256", "4000", "100"};
  std::string why;
  const std::string checksum = UninterruptedJacobi(c, {"-n", "2", "-N", "2"}, jacobi, 300s, &why);
  ASSERT_NE(checksum, "") << why;

  // With an automatic restart left: restarted from its newest epoch, finishes as if nothing.
  auto run = Subprocess::Start(
      GosRun({"-n", "2", "-N", "2", "--checkpoint=1s", "--restart-on-failure"}, jacobi), c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  std::string job = FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();
  ASSERT_TRUE(KillCriuMidDump(c, 1, *run)) << run->output() << c.Logs();
  auto status = run->Wait(SteadyClock::now() + 120s);
  ASSERT_TRUE(status.has_value()) << run->output() << c.Logs();
  std::string out = run->output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << gos::testing::DescribeWaitStatus(*status) << "\n"
      << out << c.Logs();
  EXPECT_NE(
      Find(out, "job " + job +
                    ": node 2 \\(h1\\): checkpoint epoch \\d+: rank 1: criu dump of rank init pid "
                    "\\d+: (criu was killed by signal 9) in the middle of the dump"),
      "")
      << out;
  EXPECT_NE(Find(out, "job " + job + ": (restarting from epoch \\d+)"), "") << out;
  EXPECT_EQ(JacobiResult(out), checksum) << out;

  // Without: the job fails, saying why and where it can come back from.
  run = Subprocess::Start(GosRun({"-n", "2", "-N", "2", "--checkpoint=1s"}, jacobi), c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  job = FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();
  ASSERT_TRUE(KillCriuMidDump(c, 1, *run)) << run->output() << c.Logs();
  status = run->Wait(SteadyClock::now() + 120s);
  ASSERT_TRUE(status.has_value()) << run->output() << c.Logs();
  out = run->output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 255)
      << gos::testing::DescribeWaitStatus(*status) << "\n"
      << out << c.Logs();
  EXPECT_NE(Find(out, "job " + job +
                          ": job failed: node 2 \\(h1\\): checkpoint epoch \\d+: .*(criu was "
                          "killed by signal 9) in the middle of the dump.*gos-restart " +
                          job + " brings it back from epoch \\d+"),
            "")
      << out;
  EXPECT_EQ(Find(out, "(checksum=\\S+)"), "") << out;
}

}  // namespace
}  // namespace gos::checkpoint
