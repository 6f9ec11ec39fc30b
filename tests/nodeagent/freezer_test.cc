// FreezerCgroup on the real cgroup v1 freezer: create/destroy, membership, freezing a running
// rank and thawing it, and Destroy() killing a frozen process tree. Needs root.
#include "nodeagent/freezer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/nodeagent/rank_harness.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace gos::nodeagent {
namespace {

using namespace std::chrono_literals;
using ::gos::testing::DescribeWaitStatus;
using testing::HelperPath;
using testing::InitPath;
using testing::PollUntil;
using testing::Rank;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The value the counter helper last wrote, or -1.
long ReadCounter(const std::string& file) {
  std::ifstream in(file);
  long v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// "NSpid:\t4711\t2" -> {4711, 2}.
std::vector<pid_t> NsPids(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  std::vector<pid_t> out;
  while (std::getline(in, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    long v;
    while (fields >> v) out.push_back(static_cast<pid_t>(v));
  }
  return out;
}

pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("PPid:", 0) == 0) return static_cast<pid_t>(std::stol(line.substr(5)));
  }
  return -1;
}

class FreezerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::SkipReason();
    if (!why.empty()) GTEST_SKIP() << why;
    root_ = testing::TestCgroupRoot();
    tmp_.emplace("gos-freezer-test");
    dir_ = tmp_->path();
  }
  void TearDown() override {
    for (pid_t pid : children_) testing::KillAndReap(pid);
    if (!root_.empty()) {
      // Test cgroups are made below root_/<test name>/...; remove what is left bottom-up.
      std::vector<std::string> dirs;
      std::error_code ec;
      for (auto it = std::filesystem::recursive_directory_iterator(root_, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_directory()) dirs.push_back(it->path());
      }
      for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) ::rmdir(d->c_str());
      ::rmdir(root_.c_str());
    }
    tmp_.reset();
  }

  std::string Name() const {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  std::unique_ptr<FreezerCgroup> Make(const std::string& name) {
    auto cg = FreezerCgroup::Create(root_, name);
    EXPECT_TRUE(cg.ok()) << cg.status().ToString();
    return cg.ok() ? std::move(*cg) : nullptr;
  }

  // A plain child (outside any PID namespace), killed and reaped by TearDown if still alive.
  pid_t SpawnSleep() {
    pid_t pid;
    char arg0[] = "sleep", arg1[] = "1000";
    char* argv[] = {arg0, arg1, nullptr};
    if (::posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, argv, environ) != 0) return -1;
    children_.push_back(pid);
    return pid;
  }

  // Waits for a plain child; its status, or -1.
  int Reap(pid_t pid) {
    int st = -1;
    if (::waitpid(pid, &st, 0) != pid) return -1;
    std::erase(children_, pid);
    return st;
  }

  RankSpec Spec(const std::string& program, std::vector<std::string> argv) {
    RankSpec s;
    s.program = program;
    s.argv = std::move(argv);
    s.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
    s.cwd = dir_;
    s.init_path = InitPath();
    return s;
  }

  std::string root_;
  std::optional<::gos::testing::TempDir> tmp_;
  std::string dir_;  // tmp_->path()
  std::vector<pid_t> children_;
};

TEST_F(FreezerTest, CreateMakesTheCgroupAndDestroyRemovesIt) {
  auto cg = Make(Name() + "/n3/j17");
  ASSERT_NE(cg, nullptr);
  EXPECT_EQ(cg->path(), root_ + "/" + Name() + "/n3/j17");
  EXPECT_EQ(cg->procs_file(), cg->path() + "/cgroup.procs");
  EXPECT_TRUE(Exists(cg->path() + "/freezer.state"));
  auto state = cg->State();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(*state, "THAWED");
  EXPECT_TRUE(cg->Pids().empty());

  // Creating it again adopts the existing directory.
  auto again = Make(Name() + "/n3/j17");
  ASSERT_NE(again, nullptr);

  ASSERT_TRUE(cg->Destroy().ok());
  EXPECT_FALSE(Exists(cg->path()));
  EXPECT_TRUE(Exists(root_ + "/" + Name() + "/n3"));  // parents stay for other jobs
  EXPECT_TRUE(cg->Destroy().ok());                    // idempotent
  EXPECT_TRUE(again->Destroy().ok());                 // vanished under it: still fine
}

TEST_F(FreezerTest, CreateFailsOutsideTheFreezerHierarchy) {
  auto cg = FreezerCgroup::Create(dir_, "j1");
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(cg.status().message().find("freezer"), std::string::npos) << cg.status().ToString();
  EXPECT_FALSE(Exists(dir_ + "/j1"));  // nothing created on a plain file system

  // A cgroup v1 hierarchy without the freezer controller.
  if (Exists("/sys/fs/cgroup/pids/cgroup.procs")) {
    auto pids =
        FreezerCgroup::Create("/sys/fs/cgroup/pids", "gos-test-" + std::to_string(::getpid()));
    ASSERT_FALSE(pids.ok());
    EXPECT_EQ(pids.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_FALSE(Exists("/sys/fs/cgroup/pids/gos-test-" + std::to_string(::getpid())));
  }
}

TEST_F(FreezerTest, CreateRejectsBadNames) {
  EXPECT_EQ(FreezerCgroup::Create(root_, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FreezerCgroup::Create(root_, "../escape").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FreezerCgroup::Create(root_, "/abs").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FreezerCgroup::Create("relative", "x").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(FreezerTest, AddProcessPidsAndDestroyKills) {
  auto cg = Make(Name());
  ASSERT_NE(cg, nullptr);
  pid_t a = SpawnSleep(), b = SpawnSleep();
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  ASSERT_TRUE(cg->AddProcess(a).ok());
  ASSERT_TRUE(cg->AddProcess(b).ok());
  EXPECT_EQ(cg->Pids(), (std::vector<pid_t>{std::min(a, b), std::max(a, b)}));
  EXPECT_FALSE(cg->AddProcess(-5).ok());

  ASSERT_TRUE(cg->Destroy().ok());
  EXPECT_FALSE(Exists(cg->path()));
  for (pid_t pid : {a, b}) {
    int st = Reap(pid);
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << DescribeWaitStatus(st);
  }
}

TEST_F(FreezerTest, DestructorDestroys) {
  std::string path;
  pid_t pid = SpawnSleep();
  ASSERT_GT(pid, 0);
  {
    auto cg = Make(Name());
    ASSERT_NE(cg, nullptr);
    path = cg->path();
    ASSERT_TRUE(cg->AddProcess(pid).ok());
    ASSERT_TRUE(cg->Freeze().ok());
  }
  ASSERT_FALSE(Exists(path));
  int st = Reap(pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << DescribeWaitStatus(st);
}

TEST_F(FreezerTest, LaunchedRankCgroupHoldsInitAndRank) {
  auto cg = Make(Name());
  ASSERT_NE(cg, nullptr);
  RankSpec spec = Spec("/bin/sleep", {"sleep", "1000"});
  spec.cgroup_procs = cg->procs_file();
  auto launched = Rank::Launch(spec);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  Rank& r = **launched;
  // LaunchRank returns only once init is in the cgroup.
  std::vector<pid_t> pids = cg->Pids();
  EXPECT_NE(std::find(pids.begin(), pids.end(), r.pid()), pids.end());
  // The rank follows as soon as init has forked it.
  ASSERT_TRUE(PollUntil([&] { return cg->Pids().size() == 2; }, 5s)) << cg->Pids().size();
  pids = cg->Pids();
  pid_t rank = pids[0] == r.pid() ? pids[1] : pids[0];
  EXPECT_EQ(ParentOf(rank), r.pid());
  EXPECT_EQ(NsPids(r.pid()).back(), 1);
  EXPECT_EQ(NsPids(rank).back(), 2);

  ASSERT_TRUE(cg->Destroy().ok());
  auto init = r.Wait();
  ASSERT_TRUE(init.has_value());
  EXPECT_TRUE(WIFSIGNALED(*init) && WTERMSIG(*init) == SIGKILL) << DescribeWaitStatus(*init);
  EXPECT_FALSE(Exists(cg->path()));
}

TEST_F(FreezerTest, FrozenRankStopsAndResumesAfterThaw) {
  auto cg = Make(Name());
  ASSERT_NE(cg, nullptr);
  const std::string counter = dir_ + "/counter";
  RankSpec spec = Spec(HelperPath(), {"launcher_test_helper", "count", counter});
  spec.cgroup_procs = cg->procs_file();
  auto launched = Rank::Launch(spec);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  Rank& r = **launched;
  ASSERT_TRUE(PollUntil([&] { return ReadCounter(counter) >= 5; }, 5s)) << "rank not counting";

  ASSERT_TRUE(cg->Freeze().ok());
  EXPECT_EQ(cg->State().value(), "FROZEN");
  const long frozen_at = ReadCounter(counter);
  ASSERT_GE(frozen_at, 5);
  // Running, the rank advances every ~1 ms; frozen, it must not move at all. This negative
  // needs an observation window: 200 ms, i.e. ~200 missed increments.
  EXPECT_FALSE(PollUntil([&] { return ReadCounter(counter) != frozen_at; }, 200ms))
      << "counter advanced while FROZEN: " << frozen_at << " -> " << ReadCounter(counter);

  ASSERT_TRUE(cg->Thaw().ok());
  EXPECT_EQ(cg->State().value(), "THAWED");
  EXPECT_TRUE(PollUntil([&] { return ReadCounter(counter) > frozen_at + 5; }, 5s))
      << "counter did not resume after Thaw: still " << ReadCounter(counter);

  // Freezing without waiting returns at once; the state settles to FROZEN.
  ASSERT_TRUE(cg->Freeze(/*wait=*/false).ok());
  EXPECT_TRUE(PollUntil([&] { return cg->State().value() == "FROZEN"; }, 2s));
  ASSERT_TRUE(cg->Thaw().ok());
  ASSERT_TRUE(cg->Destroy().ok());
  ASSERT_TRUE(r.Wait().has_value());
}

TEST_F(FreezerTest, DestroyKillsAFrozenProcessTree) {
  auto cg = Make(Name());
  ASSERT_NE(cg, nullptr);
  RankSpec spec = Spec("/bin/sh", {"sh", "-c", "sleep 1000 & sleep 1000 & echo up; wait"});
  spec.cgroup_procs = cg->procs_file();
  auto launched = Rank::Launch(spec);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  Rank& r = **launched;
  ASSERT_TRUE(r.ReadUntilStdout("up\n"));
  // init, sh and two sleeps.
  ASSERT_TRUE(PollUntil([&] { return cg->Pids().size() == 4; }, 5s)) << cg->Pids().size();
  ASSERT_TRUE(cg->Freeze().ok());

  Status s = cg->Destroy();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(Exists(cg->path()));
  auto init = r.Wait();
  ASSERT_TRUE(init.has_value());
  EXPECT_TRUE(WIFSIGNALED(*init) && WTERMSIG(*init) == SIGKILL) << DescribeWaitStatus(*init);
  EXPECT_TRUE(r.ReadToEof(5s)) << "a process of the tree still holds stdout";
}

}  // namespace
}  // namespace gos::nodeagent
