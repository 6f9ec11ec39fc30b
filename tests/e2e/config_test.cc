// The config file, end to end (docs/config.md): real gos-run and gos-coordinator processes
// with GOS_CONFIG naming a temp file. The file's state dir and timeslice take effect, a flag
// and the environment override them, and a bad file stops the program before it does anything,
// naming file:line:key. Needs root, like the other e2e tests (gos-run starts a local cluster).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/support/cluster.h"

namespace gos::testing {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

class ConfigE2ETest : public ::testing::Test {
 protected:
  // Writes `text` as a config file in the temp dir; returns "GOS_CONFIG=<its path>".
  std::string Config(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return "GOS_CONFIG=" + path;
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  // No daemon of the test's is left running.
  void ExpectNothingLeft() {
    auto left = FindProcesses(dir_.path());
    EXPECT_TRUE(left.empty()) << DescribeProcesses(left);
  }

  TempDir dir_{"gos-config-e2e", 0755};
};

// gos-run uses the file's state dir for its local cluster; GOS_STATE_DIR overrides the file.
TEST_F(ConfigE2ETest, GosRunTakesTheStateDirFromTheFileAndTheEnvironmentOverridesIt) {
  const std::string conf = Config(
      "gos.conf", "# test\nstate_dir = \"" + Path("from-file") + "\"\ntimeslice = \"2ms\"\n");
  auto run = Execute({Bin("gos-run"), "-n", "2", Example("hello")}, {conf}, 60s);
  ASSERT_EQ(run.code, 0) << run.Describe();
  EXPECT_TRUE(Exists(Path("from-file") + "/log/coordinator.log")) << run.Describe();
  EXPECT_TRUE(Exists(Path("from-file") + "/db")) << run.Describe();

  auto env = Execute({Bin("gos-run"), "-n", "2", Example("hello")},
                     {conf, "GOS_STATE_DIR=" + Path("from-env")}, 60s);
  ASSERT_EQ(env.code, 0) << env.Describe();
  EXPECT_TRUE(Exists(Path("from-env") + "/log/coordinator.log")) << env.Describe();
  // gos-ps reads the job table of the state dir it is given: one job in each.
  auto ps = Execute({Bin("gos-ps"), "-a", "--jobs"}, {conf}, 30s);
  EXPECT_EQ(ps.code, 0) << ps.Describe();
  EXPECT_NE(ps.output.find("hello"), std::string::npos) << ps.Describe();
  ExpectNothingLeft();
}

// gos-coordinator: --data-dir defaults to the file's state_dir, and the file's timeslice is
// its strobe quantum (a failure timeout not longer than it is refused); flags override both.
TEST_F(ConfigE2ETest, GosCoordinatorTakesTheFileAndFlagsOverrideIt) {
  const std::string conf =
      Config("gos.conf", "state_dir = \"" + Path("coord") +
                             "\"\ntimeslice = \"1s\"\nfailure_timeout = \"3s\"\n");
  // No agent joins: it gives up after --join-timeout, having made its data dir and key.
  auto file =
      Execute({Bin("gos-coordinator"), "--nodes", "1", "--join-timeout", "1s"}, {conf}, 30s);
  EXPECT_TRUE(Exists(Path("coord") + "/cluster.key")) << file.Describe();
  EXPECT_EQ(file.output.find("are required"), std::string::npos) << file.Describe();

  auto flag = Execute(
      {Bin("gos-coordinator"), "--nodes", "1", "--join-timeout", "1s", "--data-dir", Path("flag")},
      {conf}, 30s);
  EXPECT_TRUE(Exists(Path("flag") + "/cluster.key")) << flag.Describe();

  // The file's 1 s timeslice is in force: a 500 ms failure timeout is refused...
  auto refused = Execute({Bin("gos-coordinator"), "--nodes", "1", "--join-timeout", "1s",
                          "--data-dir", Path("refused"), "--failure-timeout", "500ms"},
                         {conf}, 30s);
  EXPECT_EQ(refused.code, 1) << refused.Describe();
  EXPECT_NE(refused.output.find("--failure-timeout must be longer than --timeslice"),
            std::string::npos)
      << refused.Describe();
  // ...unless --timeslice overrides it.
  auto both = Execute({Bin("gos-coordinator"), "--nodes", "1", "--join-timeout", "1s", "--data-dir",
                       Path("both"), "--failure-timeout", "500ms", "--timeslice", "10ms"},
                      {conf}, 30s);
  EXPECT_EQ(both.output.find("--failure-timeout must be longer"), std::string::npos)
      << both.Describe();
  EXPECT_TRUE(Exists(Path("both") + "/cluster.key")) << both.Describe();

  // nodes in the file stands for --nodes (what the systemd unit relies on, docs/install.md);
  // without either the coordinator refuses to start.
  const std::string with_nodes =
      Config("nodes.conf", "state_dir = \"" + Path("nodes") + "\"\nnodes = 1\n");
  auto nodes = Execute({Bin("gos-coordinator"), "--join-timeout", "1s"}, {with_nodes}, 30s);
  EXPECT_TRUE(Exists(Path("nodes") + "/cluster.key")) << nodes.Describe();
  auto none = Execute({Bin("gos-coordinator"), "--join-timeout", "1s"}, {conf}, 30s);
  EXPECT_EQ(none.code, 2) << none.Describe();
  EXPECT_NE(none.output.find("--nodes (or nodes) are required"), std::string::npos)
      << none.Describe();
  ExpectNothingLeft();
}

// A bad file stops gos-run and gos-coordinator with exit code 2, naming file:line and the key,
// before anything starts; so does a GOS_CONFIG that names no file.
TEST_F(ConfigE2ETest, BadFilesStopTheProgramsNamingFileLineAndKey) {
  const std::string state = Path("state");
  struct Case {
    std::string file, text, error;
  };
  for (const Case& c : {
           Case{"unknown.conf", "mpl = 2\n\ntimeslise = \"5ms\"\n",
                Path("unknown.conf") + ":3: timeslise: unknown key"},
           Case{"value.conf", "[checkpoint]\nlevel = 42\n",
                Path("value.conf") + ":2: checkpoint.level: 42 is not in 1..19"},
           Case{"syntax.conf", "mpl = 2\ntimeslice = \"10ms\n", Path("syntax.conf") + ":2: "},
       }) {
    SCOPED_TRACE(c.file);
    const std::string conf = Config(c.file, c.text);
    auto run = Execute({Bin("gos-run"), "-n", "2", Example("hello")},
                       {conf, "GOS_STATE_DIR=" + state}, 20s);
    EXPECT_EQ(run.code, 2) << run.Describe();
    EXPECT_NE(run.output.find("gos-run: " + c.error), std::string::npos) << run.Describe();
    EXPECT_EQ(run.output.find("hello from"), std::string::npos) << run.Describe();
    EXPECT_FALSE(Exists(state + "/log/coordinator.log")) << "a local cluster was started";

    auto coord =
        Execute({Bin("gos-coordinator"), "--nodes", "1", "--data-dir", state}, {conf}, 20s);
    EXPECT_EQ(coord.code, 2) << coord.Describe();
    EXPECT_NE(coord.output.find("gos-coordinator: " + c.error), std::string::npos)
        << coord.Describe();
    EXPECT_FALSE(Exists(state + "/cluster.key")) << "the coordinator started";
  }
  auto missing = Execute({Bin("gos-ps")}, {"GOS_CONFIG=" + Path("nonexistent.conf")}, 20s);
  EXPECT_EQ(missing.code, 2) << missing.Describe();
  EXPECT_NE(missing.output.find("gos-ps: GOS_CONFIG: cannot read the config file " +
                                Path("nonexistent.conf")),
            std::string::npos)
      << missing.Describe();
  ExpectNothingLeft();
}

}  // namespace
}  // namespace gos::testing
