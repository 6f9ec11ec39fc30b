// The config file loader (gos/os/config.h): every key, types and ranges, errors with
// file:line:key, GOS_CONFIG, the environment over the file, and the documented sample.
#include "gos/os/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace gos::os {
namespace {

using namespace std::chrono_literals;

std::string Source(const std::string& relative) {
  std::ifstream in(std::filesystem::path(GOS_SOURCE_DIR) / relative);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"GOS_CONFIG", "GOS_COORDINATOR", "GOS_KEY_FILE", "GOS_STATE_DIR",
                          "GOS_FABRIC_PROVIDER"}) {
      if (const char* old = getenv(v)) saved_.emplace_back(v, old);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : {"GOS_CONFIG", "GOS_COORDINATOR", "GOS_KEY_FILE", "GOS_STATE_DIR",
                          "GOS_FABRIC_PROVIDER"}) {
      unsetenv(v);
    }
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }
  // Writes `text` to a file of the temp dir and returns its path.
  std::string Write(const std::string& text, const std::string& name = "gos.conf") {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The error message LoadConfig gives for `text`, which must be refused.
  std::string Error(const std::string& text) {
    auto c = LoadConfig(Write(text));
    EXPECT_FALSE(c.ok()) << text;
    if (c.ok()) return "";
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().ToString();
    return c.status().message();
  }

  testing::TempDir dir_{"gos-config-test"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(ConfigTest, EveryKeyIsParsed) {
  const std::string path = Write(R"(# every key
coordinator = "head:7000"
listen = "0.0.0.0:7000"
key_file = "/etc/gos/cluster.key"
state_dir = "/var/lib/gos"
scratch_dir = "/scratch/gos"
provider = "tcp"
timeslice = "500us"
failure_timeout = "5s"
nodes = 16
mpl = 3
keep_logs = 0
reattach = "1m"

[checkpoint]
interval = "2m"
keep = 4
level = 19
)");
  auto c = LoadConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->coordinator, "head:7000");
  EXPECT_EQ(c->listen, "0.0.0.0:7000");
  EXPECT_EQ(c->key_file, "/etc/gos/cluster.key");
  EXPECT_EQ(c->state_dir, "/var/lib/gos");
  EXPECT_EQ(c->scratch_dir, "/scratch/gos");
  EXPECT_EQ(c->provider, "tcp");
  EXPECT_EQ(c->timeslice, 500us);
  EXPECT_EQ(c->failure_timeout, 5s);
  EXPECT_EQ(c->nodes, 16u);
  EXPECT_EQ(c->mpl, 3u);
  EXPECT_EQ(c->keep_logs, 0u);
  EXPECT_EQ(c->reattach, 1min);
  EXPECT_EQ(c->checkpoint.interval, 2min);
  EXPECT_EQ(c->checkpoint.keep, 4u);
  EXPECT_EQ(c->checkpoint.level, 19u);
  EXPECT_EQ(c->file, path);
  EXPECT_EQ(ConfigKeys().size(), 15u) << "a new key: add it to this test and the docs";
}

TEST_F(ConfigTest, AnEmptyFileGivesTheDefaults) {
  auto c = LoadConfig(Write(""));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Config d;
  EXPECT_EQ(c->coordinator, d.coordinator);
  EXPECT_EQ(c->listen, "127.0.0.1:0");
  EXPECT_EQ(c->timeslice, 10ms);
  EXPECT_EQ(c->failure_timeout, 2s);
  EXPECT_EQ(c->nodes, 0u);
  EXPECT_EQ(c->mpl, 2u);
  EXPECT_EQ(c->keep_logs, 1000u);
  EXPECT_EQ(c->reattach, 5min);
  EXPECT_EQ(c->checkpoint.interval, 60s);
  EXPECT_EQ(c->checkpoint.keep, 2u);
  EXPECT_EQ(c->checkpoint.level, 1u);
  // /dev/null, which tests may name in GOS_CONFIG for "no settings".
  auto null = LoadConfig("/dev/null");
  ASSERT_TRUE(null.ok()) << null.status().ToString();
  EXPECT_EQ(null->timeslice, 10ms);
}

TEST_F(ConfigTest, UnknownKeysAreErrorsWithFileLineAndKey) {
  const std::string path = dir_.path() + "/gos.conf";
  EXPECT_EQ(Error("mpl = 2\n\ntimeslise = \"5ms\"\n"),
            path + ":3: timeslise: unknown key (see docs/gos.conf.example)");
  EXPECT_EQ(Error("[checkpoint]\nkeep = 2\nkept = 3\n"),
            path + ":3: checkpoint.kept: unknown key (see docs/gos.conf.example)");
  EXPECT_EQ(Error("mpl = 2\n[nodeagent]\nname = \"a\"\n"),
            path + ":2: nodeagent: unknown key (see docs/gos.conf.example)");
  EXPECT_EQ(Error("mpl = 2\n[coordinator]\nlisten = \"a:1\"\n"),
            path + ":2: coordinator: a table is not a string");
  EXPECT_EQ(Error("checkpoint = 5\n"), path + ":1: checkpoint: 5 is not a table ([checkpoint])");
}

TEST_F(ConfigTest, BadValuesAreErrorsWithFileLineAndKey) {
  const std::string p = dir_.path() + "/gos.conf:";
  EXPECT_EQ(Error("\nmpl = \"2\"\n"), p + "2: mpl: \"2\" is not an integer");
  EXPECT_EQ(Error("mpl = 0\n"), p + "1: mpl: 0 is not in 1..4294967295");
  EXPECT_EQ(Error("mpl = -3\n"), p + "1: mpl: -3 is not in 1..4294967295");
  EXPECT_EQ(Error("keep_logs = 1.5\n"), p + "1: keep_logs: 1.5 is not an integer");
  EXPECT_EQ(Error("timeslice = 10\n"),
            p + "1: timeslice: 10 is not a duration string such as \"10ms\"");
  EXPECT_EQ(Error("timeslice = \"10\"\n"),
            p + "1: timeslice: \"10\" is not a duration with a unit (us, ms, s, m, h)");
  EXPECT_EQ(Error("timeslice = \"10 parsecs\"\n"),
            p + "1: timeslice: \"10 parsecs\" is not a duration with a unit (us, ms, s, m, h)");
  EXPECT_EQ(Error("timeslice = \"50us\"\n"), p + "1: timeslice: \"50us\" is shorter than 100us");
  EXPECT_EQ(Error("timeslice = \"3s\"\n"),
            p + "1: timeslice: the failure timeout must be longer than the timeslice");
  EXPECT_EQ(Error("timeslice = \"1s\"\nfailure_timeout = \"500ms\"\n"),
            p + "2: failure_timeout: the failure timeout must be longer than the timeslice");
  EXPECT_EQ(Error("state_dir = \"var/lib/gos\"\n"),
            p + "1: state_dir: \"var/lib/gos\" is not an absolute path");
  EXPECT_EQ(Error("key_file = \"\"\n"), p + "1: key_file: must not be empty");
  EXPECT_EQ(Error("scratch_dir = [\"/a\"]\n"), p + "1: scratch_dir: an array is not a string");
  EXPECT_EQ(Error("listen = \"head\"\n"), p + "1: listen: \"head\" is not an address host:port");
  EXPECT_EQ(Error("coordinator = \"head\"\n"),
            p + "1: coordinator: \"head\" is neither an address host:port nor an absolute path");
  EXPECT_EQ(Error("provider = true\n"), p + "1: provider: true is not a string");
  EXPECT_EQ(Error("[checkpoint]\nlevel = 20\n"), p + "2: checkpoint.level: 20 is not in 1..19");
  EXPECT_EQ(Error("[checkpoint]\nkeep = 0\n"), p + "2: checkpoint.keep: 0 is not in 1..4294967295");
  EXPECT_EQ(Error("[checkpoint]\ninterval = \"0s\"\n"),
            p + "2: checkpoint.interval: \"0s\" is shorter than 1ms");
}

TEST_F(ConfigTest, SyntaxErrorsNameFileAndLine) {
  const std::string p = dir_.path() + "/gos.conf:";
  std::string e = Error("mpl = 2\ntimeslice = \"10ms\n");
  EXPECT_EQ(e.rfind(p + "2: ", 0), 0u) << e;
  e = Error("mpl = 2\nmpl = 3\n");  // TOML: a key set twice
  EXPECT_EQ(e.rfind(p + "2: ", 0), 0u) << e;
  e = Error("\n\n[checkpoint\n");
  EXPECT_EQ(e.rfind(p + "3: ", 0), 0u) << e;
}

TEST_F(ConfigTest, GosConfigMustNameAFileThatExists) {
  const std::string missing = dir_.path() + "/nonexistent.conf";
  setenv("GOS_CONFIG", missing.c_str(), 1);
  auto c = LoadProgramConfig(dir_.path() + "/no-system.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("GOS_CONFIG"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(missing), std::string::npos) << c.status().message();

  // A bad file named by GOS_CONFIG: its own file:line error.
  const std::string bad = Write("mpl = 0\n", "bad.conf");
  setenv("GOS_CONFIG", bad.c_str(), 1);
  c = LoadProgramConfig(dir_.path() + "/no-system.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind(bad + ":1: mpl: ", 0), 0u) << c.status().message();
}

TEST_F(ConfigTest, NoSystemFileMeansTheDefaultsAndGosConfigReplacesIt) {
  // Without GOS_CONFIG a missing system file is no error.
  auto none = LoadProgramConfig(dir_.path() + "/no-system.conf");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->file, "");
  EXPECT_EQ(none->mpl, 2u);
  // A system file is read, a bad one refused; GOS_CONFIG's file is read in its place.
  const std::string system = Write("mpl = 5\n", "system.conf");
  auto sys = LoadProgramConfig(system);
  ASSERT_TRUE(sys.ok()) << sys.status().ToString();
  EXPECT_EQ(sys->mpl, 5u);
  EXPECT_FALSE(LoadProgramConfig(Write("mpl = x\n", "broken.conf")).ok());
  setenv("GOS_CONFIG", Write("mpl = 7\n", "mine.conf").c_str(), 1);
  auto mine = LoadProgramConfig(system);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->mpl, 7u);
  EXPECT_EQ(mine->file, dir_.path() + "/mine.conf");
}

TEST_F(ConfigTest, TheEnvironmentOverridesTheFile) {
  setenv("GOS_CONFIG",
         Write("coordinator = \"a:1\"\nkey_file = \"/k\"\nstate_dir = \"/s\"\nprovider = \"tcp\"\n")
             .c_str(),
         1);
  auto file = LoadProgramConfig();
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->coordinator, "a:1");
  EXPECT_EQ(file->key_file, "/k");
  EXPECT_EQ(file->state_dir, "/s");
  EXPECT_EQ(file->provider, "tcp");
  setenv("GOS_COORDINATOR", "b:2", 1);
  setenv("GOS_KEY_FILE", "/k2", 1);
  setenv("GOS_STATE_DIR", "/s2", 1);
  setenv("GOS_FABRIC_PROVIDER", "shm", 1);
  auto env = LoadProgramConfig();
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->coordinator, "b:2");
  EXPECT_EQ(env->key_file, "/k2");
  EXPECT_EQ(env->state_dir, "/s2");
  EXPECT_EQ(env->provider, "shm");
  setenv("GOS_STATE_DIR", "", 1);  // empty: as if unset
  auto empty = LoadProgramConfig();
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->state_dir, "/s");
}

// docs/gos.conf.example names every key (set, or commented out as "# key = value") and loads,
// with every key uncommented too; docs/config.md has a row for each.
TEST_F(ConfigTest, EveryKeyIsDocumented) {
  const std::string example = Source("docs/gos.conf.example");
  const std::string page = Source("docs/config.md");
  ASSERT_FALSE(example.empty());
  ASSERT_FALSE(page.empty());
  auto as_is = LoadConfig(Write(example, "example.conf"));
  ASSERT_TRUE(as_is.ok()) << as_is.status().ToString();
  const std::string uncommented =
      std::regex_replace(example, std::regex("(^|\n)# ([a-z_]+ = )"), "$1$2");
  auto all = LoadConfig(Write(uncommented, "all.conf"));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  for (const std::string& key : ConfigKeys()) {
    const std::string last = key.substr(key.rfind('.') + 1);
    EXPECT_TRUE(std::regex_search(uncommented, std::regex("(^|\n)" + last + " = ")))
        << key << " is not in docs/gos.conf.example";
    EXPECT_NE(page.find("| `" + key + "`"), std::string::npos)
        << key << " is not in docs/config.md";
  }
  // The sample's values are the defaults it says they are.
  EXPECT_EQ(all->timeslice, Config().timeslice);
  EXPECT_EQ(all->failure_timeout, Config().failure_timeout);
  EXPECT_EQ(all->mpl, Config().mpl);
  EXPECT_EQ(all->keep_logs, Config().keep_logs);
  EXPECT_EQ(all->reattach, Config().reattach);
  EXPECT_EQ(all->listen, Config().listen);
  EXPECT_EQ(all->checkpoint.interval, Config().checkpoint.interval);
  EXPECT_EQ(all->checkpoint.keep, Config().checkpoint.keep);
  EXPECT_EQ(all->checkpoint.level, Config().checkpoint.level);
}

}  // namespace
}  // namespace gos::os
