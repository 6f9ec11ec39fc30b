// Checkpoint and restart, end to end (issue 5): real coordinators and nodeagents, real CRIU
// dumps and restores, the real RocksDB store, and "hosts" that are network namespaces.
//
//   - KillHostThenRestartOnSurvivors: a 4-rank Jacobi over 3 hosts is checkpointed; one
//     host's nodeagent and ranks are killed with kill -9; gos-restart brings the job back on
//     the 2 survivors and it prints exactly the checksum of an uninterrupted run; so does a
//     gos-restart --from-store of its last epoch, whose 4 ranks all travel from the store to
//     the two hosts in restore batches (XFER-AND-SIGNAL).
//   - IncrementalCorruptionCoordinatorRestart: the second epoch of a rank that dirtied 5% of
//     its heap stores at most 1.3 x 5% new chunk bytes; a corrupted chunk makes the restart of
//     its epoch refuse with a message naming job, epoch, rank and chunk, after a coordinator
//     restart, and --epoch picks the older one, which restores; only the owner (or root) may
//     checkpoint or restart.
//   - ScratchDirMakesRoomThenSpills: with --scratch-dir on a small tmpfs, a node drops its kept
//     dumps to make room for a new one, and a dump that cannot fit goes to the state dir and
//     is not kept; a kept dump on the tmpfs restores the rank (copied across file systems).
//   - DamagedLocalCopyIsNotRestoredFrom: a node's own copy of a dump with one byte changed is
//     refused (its chunks no longer match the epoch), and the rank comes from the store intact.
//   - PauseDoesNotWaitOutTheQuantum: at a 1 s quantum a checkpoint of a small rank pauses it
//     for well under the quantum (the nodes' "dumped" wakes the coordinator's strobe).
//   - FailedRestoreFailsTheRestartNamingTheRank: a rank CRIU cannot restore fails the restart
//     with a message naming rank, node and cause, and the job is not reported resumed.
//   - RestoredRanksAreBoundToTheirCpusLikeLaunchedOnes: two ranks on one node are bound to
//     different CPUs when launched (gos-run --cpu-bind's default) and again when restored
//     (CRIU does not restore affinity: the nodeagent binds the restored tree).
//   - EmbeddedClusterJobIsListedAndRestartedWithoutACoordinator: a job that ran on gos-run's
//     embedded cluster is listed by gos-ckpt --list from the state dir, and gos-restart starts
//     a local cluster of the job's node count, restores it there and stops the cluster.
//   - AnotherUsersJobIsCheckpointedAndRestoredAsItsOwner: a job of user nobody on a root
//     cluster is checkpointed, killed, restarted by its owner, runs as nobody again (its
//     namespace inits as root, see nodeagent/launcher.h) and is checkpointed again.
//   - CheckpointSettingsOutliveACoordinatorRestart: a job run with --checkpoint=1s --keep 2
//     --restart-on-failure=2 (and gos-run --reattach 0: it gives up at once) is stopped by a
//     kill -9 of the coordinator; the restarted coordinator restarts it by itself, taking one
//     of its automatic restarts, gos-ckpt --list shows those settings, and a plain gos-restart
//     attaches to that restart, which takes an epoch every second again (at least a second
//     apart, with no gos-ckpt) and keeps 2 epochs, not the coordinator's 3; a gos-restart
//     --checkpoint=3s --keep 1 replaces them, and a gos-restart --no-checkpoint then turns the
//     epochs off but keeps --keep 1 (the job table is read from the database once the cluster
//     is gone).
//   - CoordinatorRestartRestartsTheJobAndGosRunFollowsIt: at a 1 s quantum (so that every
//     message needs an early strobe), kill -9 of the coordinator during a 2-rank Jacobi run
//     with --checkpoint=1s --restart-on-failure; gos-run waits, the coordinator and nodeagents
//     are started again, the coordinator restarts the job from its newest epoch, gos-run
//     attaches to it and exits 0 with exactly the checksum of an uninterrupted run (a restored
//     communicating job that lost its early strobes would take a second per iteration).
#include <dirent.h>
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
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gos/storage/checkpoints.h"
#include "gos/storage/chunks.h"
#include "gos/storage/tables.h"
#include "gtest/gtest.h"
#include "nodeagent/cpu_bind.h"
#include "nodeagent/criu.h"
#include "rocksdb/db.h"
#include "tests/support/cluster.h"
#include "tests/support/cluster_files.h"
#include "tests/support/netns.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace gos::checkpoint {
namespace {

using namespace gos::testing;
using SteadyClock = std::chrono::steady_clock;

TEST(CheckpointTest, KillHostThenRestartOnSurvivors) {
  if (std::string why = Unsupported(true); !why.empty()) GTEST_SKIP() << why;
  TestCluster c(3, /*netns=*/true);
  ASSERT_EQ(c.Start(), "");
  const std::vector<std::string> jacobi = {Example("jacobi"), "256", "3000", "100"};

  // The uninterrupted run, for its checksum.
  std::string why;
  const std::string checksum = UninterruptedJacobi(c, {"-n", "4", "-N", "3"}, jacobi, 300s, &why);
  ASSERT_NE(checksum, "") << why;

  // The same job with checkpoints; once one is committed, host 3 (rank 3) dies.
  auto run = Subprocess::Start(GosRun({"-n", "4", "-N", "3", "--checkpoint=1s"}, jacobi), c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();
  c.KillHost(2);
  auto status = run->Wait(SteadyClock::now() + 60s);
  ASSERT_TRUE(status.has_value()) << run->output();
  EXPECT_NE(WEXITSTATUS(*status), 0) << run->output();
  EXPECT_NE(run->output().find("node 3"), std::string::npos) << run->output();
  EXPECT_EQ(Find(run->output(), "(checksum=\\S+)"), "") << "the job finished before the kill";

  // Back on the two survivors, from the last epoch.
  Result restart = Execute({Bin("gos-restart"), job}, c.Env(), 300s);
  EXPECT_EQ(restart.code, 0) << restart.Describe() << c.Logs();
  EXPECT_NE(restart.output.find("on nodes 1,2"), std::string::npos) << restart.Describe();
  // Ranks 0-2 are back where they were dumped and restore from those nodes' own copies (each
  // node keeps the epoch it stored last and the last committed one: the one being stored when
  // host 3 died never committed); only rank 3's images come from the store.
  EXPECT_NE(restart.output.find("3 of 4 ranks from their nodes' own copies"), std::string::npos)
      << restart.Describe();
  EXPECT_EQ(JacobiResult(restart.output), checksum) << restart.Describe();

  // Again from the store alone: every rank's images are XFERed to the hosts in restore
  // batches, and the run ends exactly as well.
  Result stored = Execute({Bin("gos-restart"), "--from-store", job}, c.Env(), 300s);
  EXPECT_EQ(stored.code, 0) << stored.Describe() << c.Logs();
  EXPECT_NE(stored.output.find("on nodes 1,2"), std::string::npos) << stored.Describe();
  EXPECT_EQ(stored.output.find("own copies"), std::string::npos) << stored.Describe();
  EXPECT_NE(Find(stored.output, "of (4 ranks from the store, in \\d+ restore batches to 2 nodes)"),
            "")
      << stored.Describe();
  EXPECT_EQ(JacobiResult(stored.output), checksum) << stored.Describe();
}

// The inodes of the CRIU pages images in the nodes' kept dumps of rank 0 of job 1, epoch e.
std::set<ino_t> KeptPagesImages(const TestCluster& c, int epoch) {
  std::set<ino_t> out;
  std::error_code ec;
  for (const auto& node : std::filesystem::directory_iterator(c.state() + "/nodes", ec)) {
    const std::string dir = node.path().string() + "/ckpt/j1-e" + std::to_string(epoch) + "/r0";
    std::error_code dec;
    for (const auto& e : std::filesystem::directory_iterator(dir, dec)) {
      struct stat st {};
      if (e.path().filename().string().rfind("pages-", 0) == 0 &&
          ::stat(e.path().c_str(), &st) == 0) {
        out.insert(st.st_ino);
      }
    }
  }
  return out;
}

// Two epochs of a rank that rewrote 5% of its heap between them, the store and the node's copy
// checked, a chunk of the store damaged, a coordinator restart: with incremental dumps (the
// second epoch's dump holds what the rank wrote, the first stays as its parent) or, when the
// nodes take none (GOS_INCREMENTAL=0: the fallback), with full dumps written over the first's
// pages images.
void IncrementalCorruptionCoordinatorRestart(bool incremental_dumps) {
  auto c = std::make_unique<TestCluster>(2, /*netns=*/false);
  if (!incremental_dumps) c->agent_env = {"GOS_INCREMENTAL=0"};
  ASSERT_EQ(c->Start(), "");
  constexpr int kMib = 64;
  auto run = Subprocess::Start(
      {Bin("gos-run"), "-n", "1", Example("dirty"), std::to_string(kMib), "600", "5"}, c->Env());
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(WaitUntil([&] { return run->OutputContains("MiB ready"); }, 60s)) << run->output();
  const std::string job = "1";

  // Only the owner or root.
  Result other =
      Execute({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", Bin("gos-ckpt"), job},
              c->Env(), 30s);
  EXPECT_NE(other.code, 0) << other.Describe();
  EXPECT_NE(other.output.find("only its owner or root"), std::string::npos) << other.Describe();

  Result e1 = Execute({Bin("gos-ckpt"), job}, c->Env(), 120s);
  ASSERT_EQ(e1.code, 0) << e1.Describe() << c->Logs();
  EXPECT_NE(e1.output.find("epoch 1 committed"), std::string::npos) << e1.Describe();
  EXPECT_NE(e1.output.find("ms, full"), std::string::npos) << e1.Describe();
  // Rewrite 5% of the heap, then the second epoch.
  ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "USR1", job}, c->Env(), 30s).code, 0);
  ASSERT_TRUE(WaitUntil([&] { return run->OutputContains("pass 1 done"); }, 30s)) << run->output();
  const std::set<ino_t> first_images = KeptPagesImages(*c, 1);
  EXPECT_FALSE(first_images.empty()) << "no kept dump of epoch 1";
  Result e2 = Execute({Bin("gos-ckpt"), job}, c->Env(), 120s);
  ASSERT_EQ(e2.code, 0) << e2.Describe() << c->Logs();
  if (incremental_dumps) {
    // Epoch 2's dump holds what the rank wrote; epoch 1's stays, its parent. The restarts
    // below show that the chain restores exactly, from the node's copy and from the store.
    EXPECT_NE(e2.output.find("ms, incremental 1/1"), std::string::npos) << e2.Describe();
    EXPECT_EQ(KeptPagesImages(*c, 1), first_images);
    const std::set<ino_t> second_images = KeptPagesImages(*c, 2);
    EXPECT_FALSE(second_images.empty());
    for (ino_t ino : second_images) EXPECT_EQ(first_images.count(ino), 0u);
  } else {
    // Epoch 2 was written over epoch 1's pages images (the same files), which are gone from
    // epoch 1's dump; the local restart below shows that what was written over them is exact.
    EXPECT_NE(e2.output.find("ms, full"), std::string::npos) << e2.Describe();
    EXPECT_EQ(KeptPagesImages(*c, 2), first_images);
    EXPECT_TRUE(KeptPagesImages(*c, 1).empty());
  }

  Result list = Execute({Bin("gos-ckpt"), "--list", job}, c->Env(), 30s);
  ASSERT_EQ(list.code, 0) << list.Describe();
  EXPECT_EQ(ListedEpochs(*c, job).size(), 2u) << list.output;
  EXPECT_NE(list.output.find(incremental_dumps ? "incremental 1/1" : "full"), std::string::npos)
      << list.output;

  // The coordinator (and with it the job) dies; the store survives it.
  c->KillAll();
  std::string corrupt_hex;
  storage::ChunkRef corrupt;
  {
    auto tables = storage::Tables::Open(c->state() + "/db");
    ASSERT_TRUE(tables.ok()) << tables.status().ToString();
    storage::CheckpointStore* store = (*tables)->checkpoints();
    auto epochs = store->ListEpochs(1, true);
    ASSERT_TRUE(epochs.ok()) << epochs.status().ToString();
    ASSERT_EQ(epochs->size(), 2u);
    const storage::EpochManifest& second = (*epochs)[1];
    const double budget = 1.3 * 0.05 * kMib * (1 << 20);
    EXPECT_LE(static_cast<double>(second.new_bytes), budget)
        << "epoch 2 stored " << second.new_bytes << " new bytes for a 5% change";
    EXPECT_GT(second.new_bytes, 0u);
    EXPECT_LT(second.new_compressed, second.new_bytes);
    EXPECT_GE(second.logical_bytes, uint64_t{kMib} << 20);
    // Corrupt a chunk only epoch 2 has: one of its pages file's chunks missing from epoch 1.
    std::set<storage::ChunkHash> first_chunks;
    for (const auto& f : (*epochs)[0].ranks[0].files) {
      for (const auto& ch : f.chunks) first_chunks.insert(ch.hash);
    }
    storage::ChunkRef victim;
    std::string victim_file;
    for (const auto& f : second.ranks[0].files) {
      for (const auto& ch : f.chunks) {
        if (!first_chunks.count(ch.hash) && f.name.rfind("pages-", 0) == 0) {
          victim = ch;
          victim_file = f.name;
        }
      }
    }
    ASSERT_FALSE(victim_file.empty());
    corrupt_hex = storage::HashHex(victim.hash);
    corrupt = victim;
  }
  {
    // Damage the stored chunk the way a disk would: other bytes under its hash.
    std::vector<rocksdb::ColumnFamilyDescriptor> d;
    for (const char* f : {"default", "chunks", "chunk_refs", "epochs", "replay"}) {
      d.emplace_back(f, rocksdb::ColumnFamilyOptions());
    }
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), c->state() + "/db", d, &h, &raw).ok());
    std::vector<uint8_t> junk(corrupt.raw_len, 0x5a);
    std::vector<uint8_t> z = storage::CompressChunk(junk, 1);
    EXPECT_TRUE(raw->Put(rocksdb::WriteOptions(), h[1],
                         rocksdb::Slice(reinterpret_cast<const char*>(corrupt.hash.data()), 32),
                         rocksdb::Slice(reinterpret_cast<const char*>(z.data()), z.size()))
                    .ok());
    for (auto* x : h) raw->DestroyColumnFamilyHandle(x).PermitUncheckedError();
    raw->Close().PermitUncheckedError();
    delete raw;
  }
  // A new coordinator on the same data dir, new nodeagents.
  ASSERT_EQ(c->StartCoordinator(), "");
  for (int i = 0; i < 2; ++i) ASSERT_EQ(c->StartAgent(i), "");
  ASSERT_TRUE(WaitUntil([&] { return c->NodesUp() >= 2; }, 60s)) << c->Logs();
  EXPECT_EQ(ListedEpochs(*c, job).size(), 2u);

  Result verify = Execute({Bin("gos-store"), "verify"}, c->Env(), 120s);
  EXPECT_NE(verify.code, 0) << verify.Describe();
  EXPECT_NE(verify.output.find(corrupt_hex), std::string::npos) << verify.Describe();

  // The node's own copy of epoch 2 is intact (checked chunk by chunk against the epoch): a
  // plain restart restores the rank from it and never reads the damaged chunk...
  {
    auto local = Subprocess::Start({Bin("gos-restart"), job}, c->Env());
    ASSERT_TRUE(local.ok());
    ASSERT_TRUE(WaitUntil([&] { return local->OutputContains("resumed"); }, 60s))
        << local->output() << c->Logs();
    EXPECT_TRUE(local->OutputContains("1 of 1 ranks from their nodes' own copies of the dump"))
        << local->output();
    Result kill = Execute({Bin("gos-kill"), job}, c->Env(), 30s);
    ASSERT_EQ(kill.code, 0) << kill.Describe() << local->output() << c->Logs();
    ASSERT_TRUE(local->Wait(SteadyClock::now() + 60s).has_value()) << local->output();
  }
  // ...and from the store the damaged chunk is found: the restart refuses, naming it.
  Result bad = Execute({Bin("gos-restart"), "--from-store", job}, c->Env(), 120s);
  EXPECT_NE(bad.code, 0) << bad.Describe();
  const std::vector<std::string> parts = {"job 1", "epoch 2", "rank 0", corrupt_hex};
  for (const std::string& part : parts) {
    EXPECT_NE(bad.output.find(part), std::string::npos) << "missing '" << part << "' in\n"
                                                        << bad.Describe() << c->Logs();
  }
  Result nobody = Execute({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           Bin("gos-restart"), "--epoch", "1", job},
                          c->Env(), 30s);
  EXPECT_NE(nobody.code, 0) << nobody.Describe();
  EXPECT_NE(nobody.output.find("only its owner or root"), std::string::npos) << nobody.Describe();

  // The older epoch restores: the rank had done no pass yet; SIGTERM ends it with its checksum.
  auto good = Subprocess::Start({Bin("gos-restart"), "--epoch", "1", job}, c->Env());
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE(WaitUntil([&] { return good->OutputContains("resumed"); }, 60s))
      << good->output() << c->Logs();
  Result term = Execute({Bin("gos-kill"), "-s", "TERM", job}, c->Env(), 30s);
  ASSERT_EQ(term.code, 0) << term.Describe() << good->output() << c->Logs();
  auto status = good->Wait(SteadyClock::now() + 60s);
  ASSERT_TRUE(status.has_value()) << good->output();
  EXPECT_EQ(WEXITSTATUS(*status), 0) << good->output() << c->Logs();
  EXPECT_TRUE(good->OutputContains("dirty: passes=0 checksum=")) << good->output();
  Result ps = Execute({Bin("gos-ps")}, c->Env(), 30s);
  EXPECT_NE(ps.output.find("completed"), std::string::npos) << ps.Describe();
}

TEST(CheckpointTest, IncrementalCorruptionCoordinatorRestart) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  std::string why;
  if (!nodeagent::CriuCanTrack("", &why)) GTEST_SKIP() << why;
  IncrementalCorruptionCoordinatorRestart(true);
}

TEST(CheckpointTest, FullDumpsWhenIncrementalDumpsAreOff) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  IncrementalCorruptionCoordinatorRestart(false);
}

// Memory the nodeagent writes into a rank (BCS receives: process_vm_writev into its buffers)
// is tracked like the rank's own writes: a Jacobi run that exchanges halos between 4 ranks
// takes an incremental epoch every 200 ms, and restarts from its first, a middle and its newest
// epoch each end with the uninterrupted run's checksum.
TEST(CheckpointTest, IncrementalEpochsOfAnMpiJobRestoreExactly) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  std::string why;
  if (!nodeagent::CriuCanTrack("", &why)) GTEST_SKIP() << why;
  TestCluster c(2, /*netns=*/false);
  ASSERT_EQ(c.Start(), "");
  const std::vector<std::string> jacobi = {Example("jacobi"), "256", "1500", "100"};
  const std::string checksum = UninterruptedJacobi(c, {"-n", "4"}, jacobi, 300s, &why);
  ASSERT_NE(checksum, "") << why;

  Result run =
      Execute(GosRun({"-n", "4", "--checkpoint=200ms", "--keep", "50"}, jacobi), c.Env(), 300s);
  ASSERT_EQ(run.code, 0) << run.Describe() << c.Logs();
  EXPECT_EQ(JacobiResult(run.output), checksum) << run.Describe();
  const std::string job = Find(run.output, "checkpoint: job (\\d+) epoch \\d+ committed");
  std::vector<std::string> epochs, incremental;
  {
    const std::regex committed("epoch (\\d+) committed: [^\\n]*ms, (full|incremental 4/4)");
    for (std::sregex_iterator it(run.output.begin(), run.output.end(), committed), end; it != end;
         ++it) {
      epochs.push_back((*it)[1]);
      if ((*it)[2] != "full") incremental.push_back((*it)[1]);
    }
  }
  ASSERT_GE(incremental.size(), 2u) << "too few incremental epochs to restart from\n"
                                    << run.Describe();
  EXPECT_EQ(epochs.front(), "1");
  for (const std::string& epoch :
       {epochs.front(), incremental[incremental.size() / 2], incremental.back()}) {
    // From the first epoch the job runs long enough to take epochs again: after the restore
    // a full one, then incremental ones.
    const bool again = epoch == epochs.front();
    Result restart = Execute({Bin("gos-restart"), "--epoch", epoch,
                              again ? "--checkpoint=200ms" : "--no-checkpoint", job},
                             c.Env(), 300s);
    EXPECT_EQ(restart.code, 0) << "epoch " << epoch << ": " << restart.Describe() << c.Logs();
    EXPECT_EQ(JacobiResult(restart.output), checksum)
        << "restarted from epoch " << epoch << ": " << restart.Describe();
    if (again) {
      EXPECT_NE(restart.output.find("ms, incremental 4/4"), std::string::npos)
          << "no incremental epoch after the restart: " << restart.Describe();
    }
  }
}

// The names in a directory ("" entries for none).
std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

TEST(CheckpointTest, ScratchDirMakesRoomThenSpills) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  const TempDir tmp("gos-scratch-test");
  const std::string scratch = tmp.path();
  if (Execute({"mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", scratch}, {}, 30s).code != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs on " << scratch;
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { Execute({"umount", "-l", dir}, {}, 30s); }
  } unmount{scratch};
  TestCluster c(1, /*netns=*/false);
  c.agent_args = {"--scratch-dir", scratch};
  ASSERT_EQ(c.Start(), "");
  const std::string spill = c.state() + "/nodes/h0/ckpt-spill";
  // A dump takes about the rank's resident memory (the node asks for 1/8 more and 8 MiB).
  auto start = [&](const std::string& mib) {
    auto run =
        Subprocess::Start({Bin("gos-run"), "-n", "1", Example("dirty"), mib, "600", "1"}, c.Env());
    EXPECT_TRUE(run.ok());
    EXPECT_TRUE(WaitUntil([&] { return run->OutputContains("MiB ready"); }, 60s)) << run->output();
    return std::move(*run);
  };
  auto checkpoint = [&](const std::string& job) {
    Result r = Execute({Bin("gos-ckpt"), job}, c.Env(), 120s);
    EXPECT_EQ(r.code, 0) << r.Describe() << c.Logs();
    EXPECT_NE(r.output.find("committed"), std::string::npos) << r.Describe();
  };

  // Job 1 (16 MiB) fits and its dump is kept on the tmpfs.
  auto one = start("16");
  checkpoint("1");
  EXPECT_EQ(Names(scratch + "/ckpt"), std::set<std::string>{"j1-e1"});
  // Job 2 (24 MiB) fits only without job 1's kept dump.
  auto two = start("24");
  checkpoint("2");
  EXPECT_EQ(Names(scratch + "/ckpt"), std::set<std::string>{"j2-e1"});
  // Job 3 (48 MiB) cannot fit: it spills to the state dir, and that dump is not kept. (Job 1
  // makes room for it first: at MPL 2 a node runs two jobs.)
  ASSERT_EQ(Execute({Bin("gos-kill"), "1"}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(one.Wait(SteadyClock::now() + 60s).has_value()) << one.output();
  auto three = start("48");
  checkpoint("3");
  EXPECT_EQ(Names(scratch + "/ckpt"), std::set<std::string>{"j2-e1"});
  EXPECT_TRUE(Names(spill).empty()) << spill;
  // Job 2 restarts from the tmpfs copy, job 3 from the store.
  for (const std::string job : {"2", "3"}) {
    ASSERT_EQ(Execute({Bin("gos-kill"), job}, c.Env(), 30s).code, 0);
    Subprocess& run = job == "2" ? two : three;
    ASSERT_TRUE(run.Wait(SteadyClock::now() + 60s).has_value()) << run.output();
    auto restart = Subprocess::Start({Bin("gos-restart"), job}, c.Env());
    ASSERT_TRUE(restart.ok());
    ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 60s))
        << restart->output() << c.Logs();
    EXPECT_EQ(restart->OutputContains("1 of 1 ranks from their nodes' own copies"), job == "2")
        << restart->output();
    ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "TERM", job}, c.Env(), 30s).code, 0);
    auto status = restart->Wait(SteadyClock::now() + 60s);
    ASSERT_TRUE(status.has_value()) << restart->output();
    EXPECT_EQ(WEXITSTATUS(*status), 0) << restart->output();
  }
}

// gos-run of one rank of examples/dirty with an 8 MiB heap.
std::vector<std::string> SmallDirtyJob() {
  return {Bin("gos-run"), "-n", "1", Example("dirty"), "8", "600", "1"};
}

// Runs SmallDirtyJob() on c (job 1), checkpoints it once (epoch 1) and kills it.
void CheckpointOnceThenKill(TestCluster& c) {
  auto run = Subprocess::Start(SmallDirtyJob(), c.Env());
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(WaitUntil([&] { return run->OutputContains("MiB ready"); }, 60s)) << run->output();
  Result ckpt = Execute({Bin("gos-ckpt"), "1"}, c.Env(), 120s);
  ASSERT_EQ(ckpt.code, 0) << ckpt.Describe() << c.Logs();
  ASSERT_EQ(Execute({Bin("gos-kill"), "1"}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(run->Wait(SteadyClock::now() + 60s).has_value()) << run->output();
}

TEST(CheckpointTest, FailedRestoreFailsTheRestartNamingTheRank) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  TestCluster c(1, /*netns=*/false);
  ASSERT_EQ(c.Start(), "");
  ASSERT_NO_FATAL_FAILURE(CheckpointOnceThenKill(c));
  // Where the restore puts the executable back, a file of the same size but another mode: the
  // restore keeps it, and CRIU refuses it.
  const std::string dir = c.state() + "/nodes/h0/jobs/1";
  // The node removes the job dir when it forgets the killed job, a strobe or so after
  // gos-run returned: wait for that, or it could remove the file planted here.
  ASSERT_TRUE(WaitUntil([&] { return !std::filesystem::exists(dir); }, 10s)) << c.Logs();
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(Example("dirty"), dir + "/dirty",
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::chmod((dir + "/dirty").c_str(), 0600), 0);

  Result restart = Execute({Bin("gos-restart"), "1"}, c.Env(), 120s);
  EXPECT_EQ(restart.code, 127) << restart.Describe() << c.Logs();
  for (const std::string part :
       {"job 1: job failed: node 1 (h0): cannot restore rank 0 from epoch 1", "bad mode"}) {
    EXPECT_NE(restart.output.find(part), std::string::npos) << restart.Describe();
  }
  EXPECT_EQ(restart.output.find("resumed"), std::string::npos) << restart.Describe();
}

// The node checks its own copy of a dump against the epoch before restoring from it (through
// its hash cache, which names unchanged chunks without a SHA-256): a copy with one byte
// changed is not used, the rank comes from the store, and its memory is exactly the dumped one.
TEST(CheckpointTest, DamagedLocalCopyIsNotRestoredFrom) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  TestCluster c(1, /*netns=*/false);
  ASSERT_EQ(c.Start(), "");
  ASSERT_NO_FATAL_FAILURE(CheckpointOnceThenKill(c));

  // One byte in the middle of the largest pages image of the node's copy.
  const std::string dir = c.state() + "/nodes/h0/ckpt/j1-e1/r0";
  std::string largest;
  uintmax_t size = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("pages-", 0) == 0 && e.file_size() > size) {
      size = e.file_size();
      largest = e.path().string();
    }
  }
  ASSERT_GE(size, 4u << 20) << "no pages image of the 8 MiB heap in " << dir;
  {
    std::fstream f(largest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size / 2));
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x40);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.write(&b, 1);
    ASSERT_TRUE(f.good());
  }

  auto restart = Subprocess::Start({Bin("gos-restart"), "1"}, c.Env());
  ASSERT_TRUE(restart.ok());
  ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 60s))
      << restart->output() << c.Logs();
  EXPECT_FALSE(restart->OutputContains("own copies")) << restart->output();
  ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "TERM", "1"}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(restart->Wait(SteadyClock::now() + 60s).has_value()) << restart->output();
  const std::string restored = Find(restart->output(), "dirty: passes=0 checksum=([0-9a-f]+)");
  ASSERT_FALSE(restored.empty()) << restart->output();

  // The same program stopped at the same point, never dumped: the checksum to expect.
  auto fresh = Subprocess::Start(SmallDirtyJob(), c.Env());
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(WaitUntil([&] { return fresh->OutputContains("MiB ready"); }, 60s))
      << fresh->output();
  ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "TERM", "2"}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(fresh->Wait(SteadyClock::now() + 60s).has_value()) << fresh->output();
  const std::string expected = Find(fresh->output(), "dirty: passes=0 checksum=([0-9a-f]+)");
  ASSERT_FALSE(expected.empty()) << fresh->output();
  EXPECT_EQ(restored, expected) << restart->output();
}

// A node whose dumps are done wakes the coordinator's strobe: the job is resumed when the
// last dump ends, not at the end of the quantum (1 s here; a dump of 8 MiB takes ~50 ms).
TEST(CheckpointTest, PauseDoesNotWaitOutTheQuantum) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  TestCluster c(1, /*netns=*/false);
  c.timeslice = "1s";
  ASSERT_EQ(c.Start(), "");
  auto run = Subprocess::Start(SmallDirtyJob(), c.Env());
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(WaitUntil([&] { return run->OutputContains("MiB ready"); }, 60s)) << run->output();
  for (int i = 0; i < 3; ++i) {
    Result ckpt = Execute({Bin("gos-ckpt"), "1"}, c.Env(), 120s);
    ASSERT_EQ(ckpt.code, 0) << ckpt.Describe() << c.Logs();
    const std::string paused = Find(ckpt.output, "paused ([0-9]+) ms");
    ASSERT_FALSE(paused.empty()) << ckpt.Describe();
    EXPECT_LT(std::stoi(paused), 400) << ckpt.Describe();
  }
  ASSERT_EQ(Execute({Bin("gos-kill"), "1"}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(run->Wait(SteadyClock::now() + 60s).has_value()) << run->output();
}

// The Cpus_allowed_list of every rank of the cluster (the children of the gos-rank-inits),
// sorted, e.g. {"0", "1"}.
std::vector<std::string> RankCpuLists(TestCluster& c) {
  std::vector<std::string> lists;
  for (const auto& [pid, cmdline] : c.LeftOver()) {
    if (cmdline.find("gos-rank-init") == std::string::npos) continue;
    std::istringstream children(
        ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
    for (pid_t child; children >> child;) {
      std::istringstream status(ReadFile("/proc/" + std::to_string(child) + "/status"));
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("Cpus_allowed_list:", 0) == 0) lists.push_back(line.substr(19));
      }
    }
  }
  std::sort(lists.begin(), lists.end());
  return lists;
}

TEST(CheckpointTest, RestoredRanksAreBoundToTheirCpusLikeLaunchedOnes) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  const std::vector<int> cpus = nodeagent::AllowedCpus();
  if (cpus.size() != 2) GTEST_SKIP() << "written for 2 CPUs; this process may use " << cpus.size();
  const std::vector<std::string> want = {std::to_string(cpus[0]), std::to_string(cpus[1])};
  TestCluster c(1, /*netns=*/false);
  ASSERT_EQ(c.Start(), "");
  auto run = Subprocess::Start(
      {Bin("gos-run"), "-n", "2", "--checkpoint=1s", Example("dirty"), "16", "600", "5"}, c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();
  EXPECT_EQ(RankCpuLists(c), want) << "launched";
  ASSERT_EQ(Execute({Bin("gos-kill"), job}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(run->Wait(SteadyClock::now() + 60s).has_value()) << run->output();

  auto restart = Subprocess::Start({Bin("gos-restart"), job}, c.Env());
  ASSERT_TRUE(restart.ok()) << restart.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 60s))
      << restart->output() << c.Logs();
  EXPECT_EQ(RankCpuLists(c), want) << "restored";
  ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "TERM", job}, c.Env(), 30s).code, 0);
  auto status = restart->Wait(SteadyClock::now() + 60s);
  ASSERT_TRUE(status.has_value()) << restart->output();
  EXPECT_EQ(WEXITSTATUS(*status), 0) << restart->output() << c.Logs();
}

TEST(CheckpointTest, EmbeddedClusterJobIsListedAndRestartedWithoutACoordinator) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  const TempDir tmp("gos-ckpt-embedded");
  const std::string state = tmp.path();
  const std::vector<std::string> env = {"GOS_STATE_DIR=" + state};
  auto cleanup = [&] {
    for (const auto& [pid, what] : gos::testing::FindProcesses(state)) ::kill(pid, SIGKILL);
    gos::testing::RemoveClusterFiles(state);
  };
  auto run = Subprocess::Start(
      {Bin("gos-run"), "-n", "2", "-N", "2", "--checkpoint=1s", Example("dirty"), "16", "600", "5"},
      env);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = FirstCommittedJob(*run);
  ASSERT_EQ(job, "1") << run->output();
  ASSERT_EQ(Execute({Bin("gos-kill"), job}, env, 30s).code, 0);
  ASSERT_TRUE(run->Wait(SteadyClock::now() + 60s).has_value()) << run->output();
  ASSERT_TRUE(WaitUntil([&] { return gos::testing::FindProcesses(state).empty(); }, 15s))
      << "the embedded cluster did not stop";

  Result list = Execute({Bin("gos-ckpt"), "--list", job}, env, 30s);
  EXPECT_EQ(list.code, 0) << list.Describe();
  EXPECT_NE(list.output.find("EPOCH"), std::string::npos) << list.Describe();
  EXPECT_FALSE(Find(list.output, "\\n +(1) +\\d{4}-").empty()) << list.Describe();
  Result none = Execute({Bin("gos-ckpt"), "--list", "7"}, env, 30s);
  EXPECT_EQ(none.code, 1) << none.Describe();
  EXPECT_NE(none.output.find("no job 7"), std::string::npos) << none.Describe();

  auto restart = Subprocess::Start({Bin("gos-restart"), job}, env);
  ASSERT_TRUE(restart.ok()) << restart.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 60s))
      << restart->output();
  EXPECT_NE(restart->output().find("started a local cluster of 2 nodes"), std::string::npos)
      << restart->output();
  ASSERT_EQ(Execute({Bin("gos-kill"), "-s", "TERM", job}, env, 30s).code, 0);
  auto status = restart->Wait(SteadyClock::now() + 60s);
  ASSERT_TRUE(status.has_value()) << restart->output();
  EXPECT_EQ(WEXITSTATUS(*status), 0) << restart->output();
  EXPECT_EQ(FindAll(restart->output(), "(dirty: passes=0 checksum=)").size(), 2u)
      << restart->output();
  EXPECT_EQ(restart->output().find("did not stop"), std::string::npos) << restart->output();
  EXPECT_TRUE(WaitUntil([&] { return gos::testing::FindProcesses(state).empty(); }, 15s))
      << "the restart's local cluster did not stop";
  // A job that does not exist: refused before any cluster starts.
  Result missing = Execute({Bin("gos-restart"), "9"}, env, 30s);
  EXPECT_EQ(missing.code, 2) << missing.Describe();
  EXPECT_NE(missing.output.find("there is no job 9"), std::string::npos) << missing.Describe();
  cleanup();
}

// The real, effective, saved and file-system uids of a process ("" if it is gone).
std::string Uids(pid_t pid) {
  std::istringstream in(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Uid:", 0) == 0) return line.substr(4);
  }
  return "";
}

TEST(CheckpointTest, AnotherUsersJobIsCheckpointedAndRestoredAsItsOwner) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  // User nobody runs the tools and the program from the build tree.
  for (const std::string& file : {Bin("gos-run"), Example("dirty")}) {
    for (std::filesystem::path p = std::filesystem::path(file).parent_path(); p != p.root_path();
         p = p.parent_path()) {
      struct stat st;
      if (::stat(p.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) {
        GTEST_SKIP() << "user nobody cannot traverse " << p << " to reach " << file;
      }
    }
  }
  TestCluster c(2, /*netns=*/false);
  ASSERT_EQ(c.Start(), "");
  auto as_nobody = [](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env",
                               "--chdir=/"});
    return argv;
  };
  // Each rank is the child of its namespace's gos-rank-init: check both.
  auto expect_ranks_run_as_nobody = [&](const std::string& when) {
    int ranks = 0;
    for (const auto& [pid, cmdline] : c.LeftOver()) {
      if (cmdline.find("gos-rank-init") == std::string::npos) continue;
      EXPECT_EQ(Uids(pid), "\t0\t0\t0\t0") << when << ": init " << pid << " " << cmdline;
      std::istringstream children(
          ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
      for (pid_t child; children >> child; ++ranks) {
        EXPECT_EQ(Uids(child), "\t65534\t65534\t65534\t65534") << when << ": rank " << child;
      }
    }
    EXPECT_EQ(ranks, 2) << when;
  };

  auto run = Subprocess::Start(as_nobody({Bin("gos-run"), "-n", "2", "-N", "2", "--checkpoint=1s",
                                          Example("dirty"), "16", "600", "5"}),
                               c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();
  expect_ranks_run_as_nobody("launched");
  ASSERT_EQ(Execute(as_nobody({Bin("gos-kill"), job}), c.Env(), 30s).code, 0);
  ASSERT_TRUE(run->Wait(SteadyClock::now() + 60s).has_value()) << run->output();

  auto restart = Subprocess::Start(as_nobody({Bin("gos-restart"), job}), c.Env());
  ASSERT_TRUE(restart.ok()) << restart.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 60s))
      << restart->output() << c.Logs();
  expect_ranks_run_as_nobody("restored");
  // The restored job is the owner's to checkpoint again.
  Result again = Execute(as_nobody({Bin("gos-ckpt"), job}), c.Env(), 120s);
  EXPECT_EQ(again.code, 0) << again.Describe() << c.Logs();
  EXPECT_NE(again.output.find("committed"), std::string::npos) << again.Describe();
  ASSERT_EQ(Execute(as_nobody({Bin("gos-kill"), "-s", "TERM", job}), c.Env(), 30s).code, 0);
  auto status = restart->Wait(SteadyClock::now() + 60s);
  ASSERT_TRUE(status.has_value()) << restart->output();
  EXPECT_EQ(WEXITSTATUS(*status), 0) << restart->output() << c.Logs();
  EXPECT_EQ(FindAll(restart->output(), "(dirty: passes=0 checksum=)").size(), 2u)
      << restart->output();
}

// The epochs "checkpoint: job J epoch E committed" lines of `out` name, in order.
std::vector<int> CommittedEpochs(const std::string& out, const std::string& job) {
  std::vector<int> epochs;
  for (const std::string& e : FindAll(out, "checkpoint: job " + job + " epoch (\\d+) committed")) {
    epochs.push_back(std::stoi(e));
  }
  return epochs;
}

TEST(CheckpointTest, CheckpointSettingsOutliveACoordinatorRestart) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  TestCluster c(1, /*netns=*/false);
  c.keep = "3";  // the coordinator's default: the job's own --keep 2 must win
  ASSERT_EQ(c.Start(), "");
  auto run = Subprocess::Start(
      {Bin("gos-run"), "-n", "2", "--checkpoint=1s", "--keep", "2", "--restart-on-failure=2",
       "--reattach", "0", Example("dirty"), "16", "600", "5"},
      c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();

  // kill -9 of the coordinator: the nodeagents stop the job's ranks and exit, gos-run loses
  // the coordinator and (--reattach 0) gives up. A new coordinator on the same data dir
  // restarts the job by itself: it has automatic restarts left.
  c.KillCoordinator();
  auto lost = run->Wait(SteadyClock::now() + 30s);
  ASSERT_TRUE(lost.has_value()) << run->output();
  EXPECT_NE(WEXITSTATUS(*lost), 0) << run->output();
  const std::vector<int> before = CommittedEpochs(run->output(), job);
  ASSERT_FALSE(before.empty()) << run->output();
  // gos-run says where the job can come back from.
  EXPECT_TRUE(run->OutputContains("job " + job + "'s newest checkpoint is epoch " +
                                  std::to_string(before.back()) + ": `gos-restart " + job + "`"))
      << run->output();
  ASSERT_EQ(c.StartCoordinator(), "");
  ASSERT_EQ(c.StartAgent(0), "");
  ASSERT_TRUE(WaitUntil([&] { return c.NodesUp() >= 1; }, 60s)) << c.Logs();
  Result ps = Execute({Bin("gos-ps")}, c.Env(), 30s);
  EXPECT_TRUE(Find(ps.output, "\\n *" + job + " +\\S+ +(failed) ").empty()) << ps.Describe();
  Result list = Execute({Bin("gos-ckpt"), "--list", job}, c.Env(), 30s);
  EXPECT_EQ(list.code, 0) << list.Describe();
  EXPECT_NE(list.output.find("job " + job +
                             ": checkpoints every 1s, keeps 2 epochs, 1 of 2 automatic "
                             "restarts left"),
            std::string::npos)
      << list.Describe();

  // A plain gos-restart (no --checkpoint, no --keep, no gos-ckpt) follows that restart: it
  // gets what the job said before anyone followed it.
  auto restart = Subprocess::Start({Bin("gos-restart"), job}, c.Env());
  ASSERT_TRUE(restart.ok()) << restart.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 60s))
      << restart->output() << c.Logs();
  EXPECT_TRUE(restart->OutputContains("job " + job +
                                      ": the coordinator restarted while it was running; "
                                      "restarting from epoch " +
                                      std::to_string(before.back())))
      << restart->output();
  // Two epochs of its own, each ordered a second after the previous one committed.
  std::vector<SteadyClock::time_point> seen;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const size_t n = CommittedEpochs(restart->output(), job).size();
        while (seen.size() < n) seen.push_back(SteadyClock::now());
        return n >= 2;
      },
      40s))
      << restart->output() << c.Logs();
  const std::vector<int> after = CommittedEpochs(restart->output(), job);
  EXPECT_GT(after[0], before.back()) << restart->output();
  EXPECT_GE(seen[1] - seen[0], 900ms)
      << "epochs " << after[0] << " and " << after[1] << " committed too close together";
  // --keep 2 of the job, not the coordinator's 3: only the two newest epochs are left (one
  // more may have committed meanwhile).
  const std::vector<int> listed = ListedEpochs(c, job);
  ASSERT_EQ(listed.size(), 2u) << restart->output();
  EXPECT_GE(listed[0], after[after.size() - 2]) << restart->output();
  EXPECT_EQ(listed[1], listed[0] + 1) << restart->output();
  // gos-ps shows the interval and the newest epoch of the running job.
  Result running = Execute({Bin("gos-ps"), "--jobs"}, c.Env(), 30s);
  const std::string newest =
      Find(running.output, "\\n *" + job + " .* running .* 1s +([0-9]+) \\([0-9:]+ ago\\) ");
  ASSERT_FALSE(newest.empty()) << running.Describe();
  EXPECT_GE(std::stoi(newest), listed[1]) << running.Describe();
  ASSERT_EQ(Execute({Bin("gos-kill"), job}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(restart->Wait(SteadyClock::now() + 60s).has_value()) << restart->output();

  // gos-restart's own settings replace the stored ones, and are stored in their place.
  auto again =
      Subprocess::Start({Bin("gos-restart"), "--checkpoint=3s", "--keep", "1", job}, c.Env());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return again->OutputContains("resumed"); }, 60s))
      << again->output() << c.Logs();
  EXPECT_TRUE(again->OutputContains("job " + job +
                                    ": checkpoints every 3s, keeps 1 epoch, 1 of 2 automatic "
                                    "restarts left"))
      << again->output();
  ASSERT_EQ(Execute({Bin("gos-kill"), job}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(again->Wait(SteadyClock::now() + 60s).has_value()) << again->output();
  // --no-checkpoint turns the periodic epochs off; the --keep 1 stored above stays.
  auto off = Subprocess::Start({Bin("gos-restart"), "--no-checkpoint", job}, c.Env());
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return off->OutputContains("resumed"); }, 60s))
      << off->output() << c.Logs();
  EXPECT_TRUE(off->OutputContains("job " + job + ": no periodic checkpoints, keeps 1 epoch, 1 of " +
                                  "2 automatic restarts left"))
      << off->output();
  ASSERT_EQ(Execute({Bin("gos-kill"), job}, c.Env(), 30s).code, 0);
  ASSERT_TRUE(off->Wait(SteadyClock::now() + 60s).has_value()) << off->output();
  c.KillAll();
  auto tables = storage::Tables::Open(c.state() + "/db");
  ASSERT_TRUE(tables.ok()) << tables.status().ToString();
  auto rec = (*tables)->GetJob(std::stoull(job));
  ASSERT_TRUE(rec.ok() && rec->has_value()) << rec.status().ToString();
  EXPECT_EQ((*rec)->checkpoint_ms, 0);
  EXPECT_EQ((*rec)->keep, 1u);
  EXPECT_EQ((*rec)->restart_on_failure, 2u);
  EXPECT_EQ((*rec)->restarts_used, 1u);
}

TEST(CheckpointTest, CoordinatorRestartRestartsTheJobAndGosRunFollowsIt) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  TestCluster c(2, /*netns=*/false);
  c.timeslice = "1s";  // every message of the job needs an early strobe
  ASSERT_EQ(c.Start(), "");
  const std::vector<std::string> jacobi = {Example("jacobi"), "256", "3000", "100"};
  std::string why;
  const std::string checksum = UninterruptedJacobi(c, {"-n", "2", "-N", "2"}, jacobi, 120s, &why);
  ASSERT_NE(checksum, "") << why;

  auto run = Subprocess::Start(
      GosRun({"-n", "2", "-N", "2", "--checkpoint=1s", "--restart-on-failure"}, jacobi), c.Env());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string job = FirstCommittedJob(*run);
  ASSERT_NE(job, "") << run->output() << c.Logs();
  c.KillCoordinator();
  ASSERT_EQ(Find(run->output(), "(checksum=\\S+)"), "") << "the job finished before the kill";
  // gos-run waits for the coordinator to come back.
  ASSERT_TRUE(WaitUntil([&] { return run->OutputContains("waiting up to 300 s"); }, 30s))
      << run->output();
  ASSERT_EQ(c.StartCoordinator(), "");
  for (int i = 0; i < 2; ++i) ASSERT_EQ(c.StartAgent(i), "");

  auto status = run->Wait(SteadyClock::now() + 120s);
  ASSERT_TRUE(status.has_value()) << run->output() << c.Logs();
  const std::string out = run->output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << gos::testing::DescribeWaitStatus(*status) << "\n"
      << out << c.Logs();
  EXPECT_NE(out.find("the coordinator is back"), std::string::npos) << out;
  EXPECT_NE(Find(out, "job " + job +
                          ": the coordinator restarted while it was running; (restarting from "
                          "epoch \\d+) \\(0 automatic restarts left\\)"),
            "")
      << out;
  EXPECT_NE(Find(out, "job " + job + " (restored from epoch \\d+) on nodes 1,2"), "") << out;
  EXPECT_EQ(JacobiResult(out), checksum) << out;
  // gos-attach to the job now that it is over: its end at once; to no job: refused.
  Result over = Execute({Bin("gos-attach"), job}, c.Env(), 30s);
  EXPECT_EQ(over.code, 0) << over.Describe();
  EXPECT_NE(over.output.find("job " + job + ": completed before this attach"), std::string::npos)
      << over.Describe();
  Result none = Execute({Bin("gos-attach"), "99999"}, c.Env(), 30s);
  EXPECT_EQ(none.code, 2) << none.Describe();
  EXPECT_NE(none.output.find("no job 99999"), std::string::npos) << none.Describe();
}

}  // namespace
}  // namespace gos::checkpoint
