// Integration tests of the three primitives: N real OS processes (tests/libgos/prim_node)
// joined through an in-process bootstrap service, on loopback and across network-namespace
// "hosts" joined by veth pairs. Each scenario's checks live in prim_node_main.cc; here we
// start the group, wait with a deadline, and require every member to report PASS.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "gos/prim/bootstrap.h"
#include "tests/support/netns.h"
#include "tests/support/subprocess.h"

namespace gos::prim {
namespace {

using namespace std::chrono_literals;
using gos::testing::NetnsHosts;
using gos::testing::Subprocess;
using SteadyClock = std::chrono::steady_clock;

struct GroupSpec {
  int nodes = 4;
  std::string scenario;
  std::vector<std::string> args;
  std::string provider;         // Empty: the default (or GOS_FABRIC_PROVIDER).
  NetnsHosts* hosts = nullptr;  // Spread nodes round-robin over these hosts.
  std::chrono::milliseconds failure_timeout = 2s;
};

class Group {
 public:
  explicit Group(const GroupSpec& spec) : spec_(spec) {
    BootstrapOptions o;
    o.group_size = static_cast<uint32_t>(spec.nodes);
    o.failure_timeout = spec.failure_timeout;
    if (spec.hosts != nullptr) o.listen = spec.hosts->bridge_ip() + ":0";
    auto s = BootstrapServer::Start(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return;
    server_ = std::move(*s);
    for (int i = 0; i < spec.nodes; ++i) Add(i, {});
  }

  // Starts one more member process, asking for id `id`; it is node(procs so far).
  void Add(int id, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {gos::testing::TestBinDir() + "/prim_node",
                                     "--bootstrap",
                                     server_->address(),
                                     "--scenario",
                                     spec_.scenario,
                                     "--id",
                                     std::to_string(id)};
    if (!spec_.provider.empty()) argv.insert(argv.end(), {"--provider", spec_.provider});
    argv.insert(argv.end(), spec_.args.begin(), spec_.args.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (spec_.hosts != nullptr) argv = spec_.hosts->Wrap(id % spec_.hosts->size(), argv);
    auto p = Subprocess::Start(argv);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (p.ok()) procs_.push_back(std::move(*p));
  }

  Subprocess& node(int i) { return procs_[i]; }

  // Waits for node i to print `text`, up to the deadline.
  bool WaitForOutput(int i, const std::string& text, std::chrono::seconds timeout) {
    auto deadline = SteadyClock::now() + timeout;
    while (SteadyClock::now() < deadline) {
      if (procs_[i].OutputContains(text)) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // Every process except `skip` exits 0 within the timeout; prints outputs on failure.
  void ExpectAllPass(std::chrono::seconds timeout, int skip = -1) {
    auto deadline = SteadyClock::now() + timeout;
    for (int i = 0; i < static_cast<int>(procs_.size()); ++i) {
      if (i == skip) continue;
      auto st = procs_[i].Wait(deadline);
      ASSERT_TRUE(st.has_value()) << "node " << i << " still running after " << timeout.count()
                                  << " s:\n"
                                  << procs_[i].output();
      EXPECT_EQ(*st, 0) << "node " << i << " " << gos::testing::DescribeWaitStatus(*st) << ":\n"
                        << procs_[i].output();
    }
  }

 private:
  GroupSpec spec_;
  std::unique_ptr<BootstrapServer> server_;
  std::vector<Subprocess> procs_;
};

void RunScenario(const GroupSpec& spec, std::chrono::seconds timeout = 120s) {
  Group g(spec);
  g.ExpectAllPass(timeout);
}

// ---- Loopback: up to 16 processes on this machine.

TEST(PrimLoopbackTest, MulticastToSubsets16Nodes) {
  RunScenario({.nodes = 16, .scenario = "multicast_subset"});
}

TEST(PrimLoopbackTest, MulticastBinaryTreeFanout2) {
  RunScenario({.nodes = 9, .scenario = "multicast_subset", .args = {"--fanout", "2"}});
}

TEST(PrimLoopbackTest, EventSemanticsAndAllOrNone) {
  RunScenario({.nodes = 4, .scenario = "events", .args = {"--rounds", "10"}});
}

TEST(PrimLoopbackTest, CompareAndWriteAllOperators16Nodes) {
  RunScenario({.nodes = 16, .scenario = "caw"});
}

TEST(PrimLoopbackTest, ConcurrentCompareAndWriteIsConsistent16Nodes) {
  RunScenario({.nodes = 16, .scenario = "caw_concurrent", .args = {"--rounds", "10"}});
}

// A node that does not poll after its messages (Node::SetSpinning(false)) still takes part in
// every operation: each message wakes it, on the default provider and on shm's doorbells.
TEST(PrimLoopbackTest, WithoutSpinningEverythingCompletes) {
  RunScenario({.nodes = 8, .scenario = "caw", .args = {"--no-spin"}});
  RunScenario({.nodes = 8, .scenario = "multicast_subset", .args = {"--no-spin"}});
  RunScenario({.nodes = 8,
               .scenario = "caw_concurrent",
               .args = {"--no-spin", "--rounds", "5"},
               .provider = "shm"});
}

TEST(PrimLoopbackTest, MalformedControlMessagesAreRejected) {
  RunScenario({.nodes = 3, .scenario = "malformed"});
}

// Provider chosen at run time: by option, and by GOS_FABRIC_PROVIDER.
TEST(PrimLoopbackTest, ProviderByOption) {
  // What a process killed with SIGKILL leaves of its shm endpoint, and a live process's.
  pid_t dead = 4'000'000;
  while (::kill(dead, 0) == 0 || errno != ESRCH) ++dead;
  const std::string stale = "/dev/shm/" + std::to_string(dead) + ":0:0";
  const std::string live = "/dev/shm/" + std::to_string(::getpid()) + ":7:7";
  for (const char* p : {"tcp", "sockets", "shm"}) {
    SCOPED_TRACE(p);
    const bool shm = std::string(p) == "shm";
    if (shm) {
      for (const std::string& f : {stale, live}) ASSERT_TRUE(std::ofstream(f).good()) << f;
    }
    Group g({.nodes = 4, .scenario = "caw", .provider = p});
    g.ExpectAllPass(60s);
    if (shm) {
      // shm endpoints remove the regions of dead processes, and only those.
      EXPECT_NE(::access(stale.c_str(), F_OK), 0) << stale;
      EXPECT_EQ(::access(live.c_str(), F_OK), 0) << live;
    }
    EXPECT_TRUE(g.node(0).OutputContains(std::string("provider ") + p + "\n"))
        << g.node(0).output();
    // shm has no completion wait fd: peers ring each node's doorbell, which wakes it (no
    // bell, or none rung, and it would only poll). Node 0 drives the scenario (every
    // COMPARE-AND-WRITE, every barrier), so its progress thread may never go to sleep on its
    // bell at all (it polls for 50 us after each message, and one always follows: seen once in
    // a CI run); the other nodes wait for node 0 between its requests, and its rings wake them.
    for (int i = 0; i < 4; ++i) {
      std::smatch m;
      const std::string out = g.node(i).output();
      ASSERT_TRUE(std::regex_search(
          out, m, std::regex("node " + std::to_string(i) + ": doorbell wakeups (\\d+)")))
          << out;
      const std::string wakeups = m[1];
      if (std::string(p) == "shm") {
        if (i != 0) {
          EXPECT_GT(std::atoi(wakeups.c_str()), 0) << g.node(i).output();
        }
      } else {
        EXPECT_EQ(wakeups, "0") << g.node(i).output();
      }
    }
  }
  ::unlink(stale.c_str());
  ::unlink(live.c_str());
}

TEST(PrimLoopbackTest, ProviderByEnvironment) {
  setenv("GOS_FABRIC_PROVIDER", "sockets", 1);
  Group g({.nodes = 3, .scenario = "join_only"});
  g.ExpectAllPass(60s);
  unsetenv("GOS_FABRIC_PROVIDER");
  EXPECT_TRUE(g.node(1).OutputContains("provider sockets\n")) << g.node(1).output();
}

// A peer killed while multicasts and queries are in flight: every survivor fails within a
// bounded time with an error naming it, and later operations fail at once.
void KillMidOperation(GroupSpec spec, int victim, int sig) {
  spec.scenario = "kill_peer";
  spec.args = {"--victim", std::to_string(victim)};
  Group g(spec);
  for (int i = 0; i < spec.nodes; ++i) {
    ASSERT_TRUE(g.WaitForOutput(i, "READY", 60s)) << g.node(i).output();
  }
  std::this_thread::sleep_for(200ms);  // Let operations run.
  auto t0 = SteadyClock::now();
  g.node(victim).Signal(sig);
  g.ExpectAllPass(30s, victim);
  auto elapsed = SteadyClock::now() - t0;
  for (int i = 0; i < spec.nodes; ++i) {
    if (i == victim) continue;
    EXPECT_TRUE(g.node(i).OutputContains("PEER FAILURE DETECTED")) << g.node(i).output();
  }
  EXPECT_LT(elapsed, spec.failure_timeout + 5s);
  g.node(victim).Signal(SIGKILL);
}

TEST(PrimLoopbackTest, PeerKilledMidOperationFailsBoundedNamingIt) {
  KillMidOperation({.nodes = 8}, 1, SIGKILL);  // Node 1 is an inner node of the trees.
}

TEST(PrimLoopbackTest, StoppedPeerDetectedByHeartbeatTimeout) {
  // SIGSTOP: the process hangs with its sockets open; only the heartbeat deadline finds it.
  KillMidOperation({.nodes = 4, .failure_timeout = 1s}, 3, SIGSTOP);
}

// A member killed with SIGKILL, then a new process joining under its id: the survivors see
// it down, then back, and the whole group works again (tests/libgos/prim/node_main.cc
// Rejoin). Node 1 is an inner node of the 8-node trees, so others forward to and through it.
void KillAndRejoin(GroupSpec spec, int victim) {
  spec.scenario = "rejoin";
  spec.args = {"--victim", std::to_string(victim)};
  Group g(spec);
  for (int i = 0; i < spec.nodes; ++i) {
    ASSERT_TRUE(g.WaitForOutput(i, "READY", 60s)) << g.node(i).output();
  }
  g.node(victim).Signal(SIGKILL);
  ASSERT_TRUE(g.WaitForOutput(0, "VICTIM DOWN", 30s)) << g.node(0).output();
  g.Add(victim, {"--rejoiner"});
  g.ExpectAllPass(60s, victim);
  for (int i = 0; i <= spec.nodes; ++i) {
    if (i == victim) continue;
    EXPECT_TRUE(g.node(i).OutputContains("rejoin checks passed")) << g.node(i).output();
    // A bell (shm) that no longer answers is a dead node's, not a reason to poll from now on.
    EXPECT_FALSE(g.node(i).OutputContains("cannot ring the doorbell")) << g.node(i).output();
  }
}

TEST(PrimLoopbackTest, KilledNodeJoinsAgainAndTheGroupWorks) { KillAndRejoin({.nodes = 8}, 1); }

TEST(PrimLoopbackTest, KilledNodeJoinsAgainOnShm) {
  KillAndRejoin({.nodes = 4, .provider = "shm"}, 2);
}

// A post that stays stuck inside libfabric (on shm: a lock of a peer's queue held by a node
// that was stopped or killed holding it) ends the process with a message naming the peer,
// instead of a silent hang. Simulated: every post of node 1 stalls 12 s; the watchdog gives
// up after 10.
TEST(PrimLoopbackTest, PostStuckInTheFabricExitsNamingThePeer) {
  Group g({.nodes = 2, .scenario = "join_only", .args = {"--stall-post", "1:12000"}});
  ASSERT_TRUE(g.WaitForOutput(1, "joined", 30s)) << g.node(1).output();
  auto st = g.node(1).Wait(SteadyClock::now() + 30s);
  ASSERT_TRUE(st.has_value()) << "node 1 still running:\n" << g.node(1).output();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 75)
      << gos::testing::DescribeWaitStatus(*st) << "\n"
      << g.node(1).output();
  EXPECT_TRUE(g.node(1).OutputContains("s in libfabric")) << g.node(1).output();
  EXPECT_TRUE(g.node(1).OutputContains("posting to node 0")) << g.node(1).output();
  g.node(0).Signal(SIGKILL);
}

// ---- Several hosts: network namespaces joined by veth pairs to a bridge.

class PrimNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = NetnsHosts::Unsupported();
    if (!why.empty()) GTEST_SKIP() << "skipping multi-host test: " << why;
    auto h = NetnsHosts::Create(3);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    hosts_ = std::move(*h);
  }
  std::unique_ptr<NetnsHosts> hosts_;
};

TEST_F(PrimNetnsTest, MulticastAcrossThreeHosts) {
  RunScenario({.nodes = 6, .scenario = "multicast_subset", .hosts = hosts_.get()});
}

TEST_F(PrimNetnsTest, CompareAndWriteAcrossThreeHosts) {
  RunScenario({.nodes = 6, .scenario = "caw", .hosts = hosts_.get()});
  RunScenario(
      {.nodes = 6, .scenario = "caw_concurrent", .args = {"--rounds", "5"}, .hosts = hosts_.get()});
}

TEST_F(PrimNetnsTest, HostKilledMidOperation) {
  KillMidOperation({.nodes = 6, .hosts = hosts_.get()}, 2, SIGKILL);  // Node 2 is on host 2.
}

TEST_F(PrimNetnsTest, NodeOnAHostJoinsAgainAcrossHosts) {
  KillAndRejoin({.nodes = 6, .hosts = hosts_.get()}, 1);  // Node 1 is on host 1, inner node.
}

TEST_F(PrimNetnsTest, HostCutOffDetectedByHeartbeatTimeout) {
  GroupSpec spec{.nodes = 6,
                 .scenario = "kill_peer",
                 .args = {"--victim", "5"},
                 .hosts = hosts_.get(),
                 .failure_timeout = 1s};
  Group g(spec);
  for (int i = 0; i < spec.nodes; ++i) {
    ASSERT_TRUE(g.WaitForOutput(i, "READY", 60s)) << g.node(i).output();
  }
  // Node 5 lives on host 2, alone with node 2; cut host 2 off: both go silent.
  ASSERT_TRUE(hosts_->SetLinkUp(2, false).ok());
  auto deadline = SteadyClock::now() + 30s;
  for (int i : {0, 1, 3, 4}) {
    auto st = g.node(i).Wait(deadline);
    ASSERT_TRUE(st.has_value()) << "node " << i << " hangs:\n" << g.node(i).output();
    // The first failure seen names host 2's node 2 or node 5, both cut off.
    std::string out = g.node(i).output();
    EXPECT_TRUE(out.find("node 2 ") != std::string::npos ||
                out.find("node 5 ") != std::string::npos)
        << out;
  }
}

}  // namespace
}  // namespace gos::prim
