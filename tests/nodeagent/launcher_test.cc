// LaunchRank and gos-rank-init with real processes: output capture, environment, cwd, exit
// codes and signals, signal forwarding through the namespace init, PID namespace, user
// switch (the rank's; init stays the caller's), no leaked fds, no processes left behind,
// and exec failures. Needs root.
#include "nodeagent/launcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "nodeagent/cpu_bind.h"
#include "nodeagent/freezer.h"
#include "tests/nodeagent/rank_harness.h"
#include "tests/support/temp_dir.h"

namespace gos::nodeagent {
namespace {

using namespace std::chrono_literals;
using ::gos::testing::DescribeWaitStatus;
using testing::HelperPath;
using testing::InitPath;
using testing::PollUntil;
using testing::Rank;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::SkipReason();
    if (!why.empty()) GTEST_SKIP() << why;
    tmp_.emplace("gos-launcher-test");
    dir_ = tmp_->path();
  }
  void TearDown() override {
    cgroup_.reset();
    if (!cgroup_root_.empty()) ::rmdir(cgroup_root_.c_str());
    tmp_.reset();
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
  RankSpec Shell(const std::string& script) { return Spec("/bin/sh", {"sh", "-c", script}); }

  // Launches spec, collects all output, reaps init.
  std::unique_ptr<Rank> Run(const RankSpec& spec) {
    auto r = Rank::Launch(spec);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return nullptr;
    EXPECT_TRUE((*r)->ReadToEof()) << "output did not reach EOF; stdout: " << (*r)->out();
    EXPECT_TRUE((*r)->Wait().has_value()) << "gos-rank-init did not exit";
    return std::move(*r);
  }

  FreezerCgroup* MakeCgroup() {
    cgroup_root_ = testing::TestCgroupRoot();
    auto cg = FreezerCgroup::Create(
        cgroup_root_, ::testing::UnitTest::GetInstance()->current_test_info()->name());
    EXPECT_TRUE(cg.ok()) << cg.status().ToString();
    if (!cg.ok()) return nullptr;
    cgroup_ = std::move(*cg);
    return cgroup_.get();
  }

  std::optional<::gos::testing::TempDir> tmp_;
  std::string dir_;  // tmp_->path()
  std::string cgroup_root_;
  std::unique_ptr<FreezerCgroup> cgroup_;
};

TEST_F(LauncherTest, CapturesStdoutAndStderr) {
  auto r = Run(Shell("echo to-out; echo to-err >&2"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->out(), "to-out\n");
  EXPECT_EQ(r->err(), "to-err\n");
  EXPECT_TRUE(WIFEXITED(r->RankStatus()) && WEXITSTATUS(r->RankStatus()) == 0)
      << DescribeWaitStatus(r->RankStatus());
}

TEST_F(LauncherTest, FeedsStdin) {
  auto launched = Rank::Launch(Spec("/bin/cat", {"cat"}));
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  Rank& r = **launched;
  ASSERT_TRUE(r.WriteStdin("line one\nline two\n"));
  r.CloseStdin();
  ASSERT_TRUE(r.ReadToEof());
  EXPECT_EQ(r.out(), "line one\nline two\n");
  ASSERT_TRUE(r.Wait().has_value());
  EXPECT_EQ(WEXITSTATUS(r.RankStatus()), 0);
}

TEST_F(LauncherTest, PassesExactlyTheGivenEnvironmentAndCwd) {
  ASSERT_EQ(::setenv("GOS_LAUNCHER_TEST_CALLER_ONLY", "leak", 1), 0);
  RankSpec spec = Shell("echo \"foo=$FOO\"; echo \"caller=$GOS_LAUNCHER_TEST_CALLER_ONLY\"; pwd");
  spec.env.push_back("FOO=bar baz");
  auto r = Run(spec);
  ::unsetenv("GOS_LAUNCHER_TEST_CALLER_ONLY");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->out(), "foo=bar baz\ncaller=\n" + dir_ + "\n");
  EXPECT_EQ(r->err(), "");
}

TEST_F(LauncherTest, PropagatesExitCode) {
  auto r = Run(Shell("exit 3"));
  ASSERT_NE(r, nullptr);
  int st = r->RankStatus();
  ASSERT_TRUE(WIFEXITED(st)) << DescribeWaitStatus(st);
  EXPECT_EQ(WEXITSTATUS(st), 3);
  // init itself exits with the rank's code too.
  EXPECT_EQ(WEXITSTATUS(*r->Wait()), 3);
}

TEST_F(LauncherTest, ReportsRankKilledBySignal) {
  auto r = Run(Shell("kill -TERM $$; sleep 5"));
  ASSERT_NE(r, nullptr);
  int st = r->RankStatus();
  ASSERT_TRUE(WIFSIGNALED(st)) << DescribeWaitStatus(st);
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
  int init = *r->Wait();
  ASSERT_TRUE(WIFEXITED(init)) << DescribeWaitStatus(init);
  EXPECT_EQ(WEXITSTATUS(init), 128 + SIGTERM);
}

TEST_F(LauncherTest, ForwardsSigintFromOutsideToTheRank) {
  // The rank has no SIGINT handler; init (PID 1) would ignore SIGINT if it did not forward.
  auto launched = Rank::Launch(Shell("echo ready; exec sleep 1000"));
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  Rank& r = **launched;
  ASSERT_TRUE(r.ReadUntilStdout("ready\n")) << r.err();
  ASSERT_EQ(::kill(r.pid(), SIGINT), 0);
  auto init = r.Wait(10s);
  ASSERT_TRUE(init.has_value()) << "SIGINT was not forwarded: rank still running";
  int st = r.RankStatus();
  ASSERT_TRUE(WIFSIGNALED(st)) << DescribeWaitStatus(st);
  EXPECT_EQ(WTERMSIG(st), SIGINT);
  EXPECT_EQ(WEXITSTATUS(*init), 128 + SIGINT);
}

TEST_F(LauncherTest, SignalSentRightAfterLaunchIsNotLost) {
  // Sent before init can have set up forwarding: it must stay pending, not be dropped.
  auto launched = Rank::Launch(Spec("/bin/sleep", {"sleep", "1000"}));
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  Rank& r = **launched;
  ASSERT_EQ(::kill(r.pid(), SIGTERM), 0);
  ASSERT_TRUE(r.Wait(10s).has_value()) << "early SIGTERM was lost";
  int st = r.RankStatus();
  ASSERT_TRUE(WIFSIGNALED(st)) << DescribeWaitStatus(st);
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
}

TEST_F(LauncherTest, RankIsPid2InItsOwnPidNamespace) {
  auto r = Run(Shell("echo $$ $PPID"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->out(), "2 1\n") << r->err();
}

// CRIU must be able to dump the tree: new PID namespace, but no private mount namespace.
TEST_F(LauncherTest, SharesTheCallersMountNamespace) {
  auto launched = Rank::Launch(Spec("/bin/sleep", {"sleep", "1000"}));
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  std::error_code ec;
  auto init_ns =
      std::filesystem::read_symlink("/proc/" + std::to_string((*launched)->pid()) + "/ns/mnt", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(init_ns, std::filesystem::read_symlink("/proc/self/ns/mnt"));
  auto init_pidns =
      std::filesystem::read_symlink("/proc/" + std::to_string((*launched)->pid()) + "/ns/pid", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_NE(init_pidns, std::filesystem::read_symlink("/proc/self/ns/pid"));
}

TEST_F(LauncherTest, RunsAsTheGivenUser) {
  RankSpec spec = Shell("id -u; id -g; id -G");
  spec.uid = 65534;
  spec.gid = 65534;
  spec.cwd = "/";
  auto r = Run(spec);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->out(), "65534\n65534\n65534\n") << r->err();
  EXPECT_EQ(WEXITSTATUS(r->RankStatus()), 0);
}

// Fields of /proc/PID/status, environ and cwd.
std::string ProcStatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  }
  return "";
}
std::string ProcFile(pid_t pid, const std::string& name) {
  std::string out;
  int fd = ::open(("/proc/" + std::to_string(pid) + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// CRIU dumps the tree through init (a /proc of the namespace mounted in init's working
// directory), so init keeps the caller's user in RankSpec::init_dir; it gets none of the
// user's environment (LD_PRELOAD & co. must not reach a privileged process). The rank gets
// the user, cwd and environment.
TEST_F(LauncherTest, InitKeepsTheCallersUserInItsDirWithoutTheRanksEnvironment) {
  RankSpec spec = Spec("/bin/sleep", {"sleep", "1000"});
  spec.uid = 65534;
  spec.gid = 65534;
  spec.cwd = "/";
  spec.env.push_back("GOS_LAUNCHER_TEST=rank-only");
  spec.init_dir = dir_ + "/init";
  ASSERT_EQ(::mkdir(spec.init_dir.c_str(), 0700), 0);
  auto launched = Rank::Launch(spec);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  const pid_t init = (*launched)->pid();
  pid_t rank = 0;
  ASSERT_TRUE(PollUntil(
      [&] {
        std::istringstream children(ProcFile(init, "task/" + std::to_string(init) + "/children"));
        return (children >> rank) && ProcFile(rank, "comm") == "sleep\n";
      },
      5s));
  const std::string root = std::to_string(::getuid());
  EXPECT_EQ(ProcStatusField(init, "Uid"), "\t" + root + "\t" + root + "\t" + root + "\t" + root);
  EXPECT_EQ(ProcFile(init, "environ"), "");
  std::error_code ec;
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(init) + "/cwd", ec),
            spec.init_dir);
  EXPECT_EQ(ProcStatusField(rank, "Uid"), "\t65534\t65534\t65534\t65534");
  EXPECT_NE(ProcFile(rank, "environ").find("GOS_LAUNCHER_TEST=rank-only"), std::string::npos);
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(rank) + "/cwd", ec), "/");
  EXPECT_EQ((*launched)->process().init_dir, spec.init_dir);
}

TEST_F(LauncherTest, RankInheritsOnlyStdio) {
  // An fd the caller forgot to mark CLOEXEC must not leak into the rank; nor may fd 3.
  int leaky = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaky, 0);
  auto r = Run(Spec(HelperPath(), {"launcher_test_helper", "fds"}));
  ::close(leaky);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->out(), "0 1 2\n") << r->err();
}

TEST_F(LauncherTest, BackgroundGrandchildDiesWithTheRank) {
  FreezerCgroup* cg = MakeCgroup();
  ASSERT_NE(cg, nullptr);
  RankSpec spec = Shell("sleep 1000 & echo started $!");
  spec.cgroup_procs = cg->procs_file();
  // ReadToEof only finishes if the background sleep, which holds stdout, is gone too.
  auto r = Run(spec);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->out().rfind("started ", 0), 0u) << r->out();
  EXPECT_EQ(WEXITSTATUS(r->RankStatus()), 0);
  EXPECT_TRUE(PollUntil([&] { return cg->Pids().empty(); }, 5s))
      << "processes left in " << cg->path() << ": " << cg->Pids().size();
}

// The CPUs in a task's /proc status ("Cpus_allowed_list:\t0-1" -> "0-1").
std::string CpusAllowed(const std::string& status_path) {
  std::ifstream in(status_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0)
      return line.substr(line.find_first_not_of(" \t", 18));
  }
  return "(no Cpus_allowed_list in " + status_path + ")";
}

TEST_F(LauncherTest, BindsTheRankAndWhatItStartsToItsCpus) {
  const std::vector<int> all = AllowedCpus();
  ASSERT_FALSE(all.empty());
  RankSpec spec = Shell(
      "grep Cpus_allowed_list /proc/self/status; "
      "sh -c 'grep Cpus_allowed_list /proc/self/status'");
  spec.cpus = {all.back()};
  auto bound = Run(spec);
  ASSERT_NE(bound, nullptr);
  const std::string want = "Cpus_allowed_list:\t" + std::to_string(all.back()) + "\n";
  EXPECT_EQ(bound->out(), want + want) << bound->err();
  EXPECT_EQ(bound->err(), "");
  // Unbound: the caller's CPUs.
  spec.cpus.clear();
  auto unbound = Run(spec);
  ASSERT_NE(unbound, nullptr);
  const std::string all_text = "Cpus_allowed_list:\t" + CpuListText(all) + "\n";
  EXPECT_EQ(unbound->out(), all_text + all_text) << unbound->err();
}

// A restored rank is bound after the fact: every thread of every process of its tree.
TEST_F(LauncherTest, BindProcessTreeReachesEveryThreadOfEveryProcess) {
  const std::vector<int> all = AllowedCpus();
  ASSERT_FALSE(all.empty());
  FreezerCgroup* cg = MakeCgroup();
  ASSERT_NE(cg, nullptr);
  RankSpec spec = Spec(HelperPath(), {"launcher_test_helper", "threads"});
  spec.cgroup_procs = cg->procs_file();
  auto launched = Rank::Launch(spec);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  Rank& r = **launched;
  ASSERT_TRUE(r.ReadUntilStdout("ready\n")) << r.err();
  ASSERT_TRUE(BindProcessTree(r.pid(), std::vector<int>{all.front()}).ok());
  // Every task of the cgroup (init, the helper, its child: 2 + 3 + 3 threads).
  std::ifstream tasks(cg->path() + "/tasks");
  std::vector<pid_t> tids;
  for (pid_t t; tasks >> t;) tids.push_back(t);
  EXPECT_EQ(tids.size(), 7u);
  for (pid_t t : tids) {
    EXPECT_EQ(CpusAllowed("/proc/" + std::to_string(t) + "/status"), std::to_string(all.front()))
        << "task " << t;
  }
  EXPECT_FALSE(BindProcessTree(r.pid(), std::vector<int>{CPU_SETSIZE - 1}).ok())
      << "a CPU this machine does not have";
}

// The nodeagent launches the ranks of a job whose row is not scheduled into its already
// FROZEN cgroup: LaunchRank must return at once, and the rank start only on Thaw.
TEST_F(LauncherTest, LaunchIntoFrozenCgroupReturnsAndRunsOnThaw) {
  FreezerCgroup* cg = MakeCgroup();
  ASSERT_NE(cg, nullptr);
  ASSERT_TRUE(cg->Freeze().ok());
  RankSpec spec = Shell("echo running");
  spec.cgroup_procs = cg->procs_file();
  // On this thread: a rank's init dies with the thread that started it (PR_SET_PDEATHSIG).
  // A watchdog thaws the cgroup if LaunchRank blocks on it.
  std::promise<void> returned;
  auto watchdog = std::async(std::launch::async, [&, done = returned.get_future()] {
    if (done.wait_for(5s) == std::future_status::ready) return true;
    cg->Thaw().IgnoreError();  // unblock it, then fail
    return false;
  });
  auto p = LaunchRank(spec);
  returned.set_value();
  ASSERT_TRUE(watchdog.get()) << "LaunchRank blocked on a frozen cgroup";
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Rank r(*p);
  EXPECT_EQ(cg->Pids(), std::vector<pid_t>{r.pid()});
  // The newcomer passes through FREEZING while it stops.
  EXPECT_TRUE(PollUntil([&] { return cg->State().value() == "FROZEN"; }, 2s));
  ASSERT_TRUE(cg->Thaw().ok());
  ASSERT_TRUE(r.ReadToEof());
  EXPECT_EQ(r.out(), "running\n") << r.err();
  ASSERT_TRUE(r.Wait().has_value());
  EXPECT_EQ(WEXITSTATUS(r.RankStatus()), 0);
}

TEST_F(LauncherTest, FailedCgroupJoinExits127WithMessage) {
  RankSpec spec = Shell("echo should-not-run");
  spec.cgroup_procs = dir_ + "/no-cgroup/cgroup.procs";
  auto r = Run(spec);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->out(), "");
  EXPECT_NE(r->err().find("cannot join cgroup: open " + spec.cgroup_procs), std::string::npos)
      << r->err();
  EXPECT_EQ(WEXITSTATUS(r->RankStatus()), 127);
}

TEST_F(LauncherTest, MissingProgramExits127WithMessage) {
  auto r = Run(Spec("/nonexistent/gos-program", {"gos-program"}));
  ASSERT_NE(r, nullptr);
  int st = r->RankStatus();
  ASSERT_TRUE(WIFEXITED(st)) << DescribeWaitStatus(st);
  EXPECT_EQ(WEXITSTATUS(st), 127);
  EXPECT_EQ(r->err(),
            "gos-rank-init: cannot execute /nonexistent/gos-program: No such file or directory\n");
}

TEST_F(LauncherTest, BadCwdFailsTheRankWith127) {
  RankSpec spec = Shell("echo should-not-run");
  spec.cwd = dir_ + "/missing";
  auto r = Run(spec);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->out(), "");
  EXPECT_NE(r->err().find("chdir to " + dir_ + "/missing: No such file or directory"),
            std::string::npos)
      << r->err();
  int st = r->RankStatus();  // init never ran, so its own status is the outcome
  ASSERT_TRUE(WIFEXITED(st)) << DescribeWaitStatus(st);
  EXPECT_EQ(WEXITSTATUS(st), 127);
}

TEST_F(LauncherTest, MissingInitExits127WithMessage) {
  RankSpec spec = Shell("true");
  spec.init_path = dir_ + "/no-init";
  auto r = Run(spec);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->err().find("cannot execute " + dir_ + "/no-init"), std::string::npos) << r->err();
  EXPECT_EQ(WEXITSTATUS(r->RankStatus()), 127);
}

TEST_F(LauncherTest, KilledInitReportsItsOwnStatusAndTakesTheRankWithIt) {
  FreezerCgroup* cg = MakeCgroup();
  ASSERT_NE(cg, nullptr);
  RankSpec spec = Shell("echo ready; sleep 1000");
  spec.cgroup_procs = cg->procs_file();
  auto launched = Rank::Launch(spec);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  Rank& r = **launched;
  ASSERT_TRUE(r.ReadUntilStdout("ready\n"));
  ASSERT_EQ(::kill(r.pid(), SIGKILL), 0);
  ASSERT_TRUE(r.Wait().has_value());
  int st = r.RankStatus();
  ASSERT_TRUE(WIFSIGNALED(st)) << DescribeWaitStatus(st);
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  EXPECT_TRUE(PollUntil([&] { return cg->Pids().empty(); }, 5s));
}

TEST_F(LauncherTest, RejectsBadSpecs) {
  RankSpec relative = Spec("bin/sh", {"sh"});
  EXPECT_EQ(LaunchRank(relative).status().code(), StatusCode::kInvalidArgument);
  RankSpec no_init = Shell("true");
  no_init.init_path.clear();
  EXPECT_EQ(LaunchRank(no_init).status().code(), StatusCode::kInvalidArgument);
}

TEST(RankWaitStatusTest, PrefersTheReportedStatus) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK), 0);
  int32_t reported = 0x0300;  // exit 3
  ASSERT_EQ(::write(fds[1], &reported, sizeof reported), 4);
  EXPECT_EQ(RankWaitStatus(fds[0], 0x0900), 0x0300);
  // Nothing reported (and the writer still open): init's own status.
  EXPECT_EQ(RankWaitStatus(fds[0], 0x0900), 0x0900);
  ::close(fds[1]);
  EXPECT_EQ(RankWaitStatus(fds[0], SIGKILL), SIGKILL);
  ::close(fds[0]);
}

}  // namespace
}  // namespace gos::nodeagent
