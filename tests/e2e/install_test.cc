// `cmake --install` (issue 28 item 1, cmake/GosInstall.cmake) into a temp prefix, and that
// tree on its own: every file where docs/install.md says; nothing installed names the build
// tree (no RUNPATH, no build path in a program or script); the installed gos-cc builds an MPI
// example and the installed gos-run runs it with --checkpoint while the source and build trees
// and scripts/setup's /usr/local/sbin/criu are hidden under empty tmpfs mounts (so the
// daemons, gos-rank-init and CRIU can only be the installed ones); and the installed systemd
// units pass `systemd-analyze verify` (item 3), and the coordinator runs without capabilities,
// as its unit has it.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace gos {
namespace {

namespace fs = std::filesystem;
using gos::testing::ReadFile;
using gos::testing::RunResult;
using gos::testing::TempDir;
using namespace std::chrono_literals;

// The one install every test here looks at (installing takes a second or two: help2man).
class InstallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("gos-install", 0755);
    prefix_ = dir_->path() + "/prefix";
    install_ = new RunResult(gos::testing::Run(
        {GOS_CMAKE_COMMAND, "--install", GOS_BUILD_DIR, "--prefix", prefix_}, {}, 120s));
  }
  static void TearDownTestSuite() {
    delete install_;
    delete dir_;
  }
  void SetUp() override { ASSERT_EQ(install_->code, 0) << install_->Describe(); }

  static inline TempDir* dir_ = nullptr;
  static inline std::string prefix_;
  static inline RunResult* install_ = nullptr;
};

bool IsArchive(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in.gcount() == 8 && std::string(magic, 8) == "!<arch>\n";
}

bool IsElf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string(magic, 4) ==
                                 "\x7f"
                                 "ELF";
}

TEST_F(InstallTest, EveryPartIsWhereTheDocsSay) {
  const std::vector<std::string> want = {"bin/gos-run",
                                         "bin/gos-ps",
                                         "bin/gos-kill",
                                         "bin/gos-ckpt",
                                         "bin/gos-restart",
                                         "bin/gos-replay",
                                         "bin/gos-store",
                                         "bin/gos-attach",
                                         "bin/gos-cluster",
                                         "bin/gos-cc",
                                         "bin/gos-c++",
                                         "sbin/gos-coordinator",
                                         "sbin/gos-nodeagent",
                                         "libexec/gos/gos-rank-init",
                                         "libexec/gos/criu",
                                         "lib/libgos_mpi.a",
                                         "lib/libgos_rank.a",
                                         "include/gos/gos.h",
                                         "include/gos/mpi/mpi.h",
                                         "include/gos/mpi/gos_pmpi.h",
                                         "share/man/man1/gos-run.1.gz",
                                         "share/man/man1/gos-cc.1.gz",
                                         "share/man/man8/gos-nodeagent.8.gz",
                                         "share/man/man8/gos-coordinator.8.gz",
                                         "share/doc/gos/README.md",
                                         "share/doc/gos/install.md",
                                         "share/doc/gos/config.md",
                                         "lib/systemd/system/gos-coordinator.service",
                                         "lib/systemd/system/gos-nodeagent.service",
                                         "etc/gos/gos.conf"};
  for (const auto& f : want) EXPECT_TRUE(fs::exists(prefix_ + "/" + f)) << f;
  // A man page for every program a user or an admin runs, made from its --help.
  size_t pages = 0;
  for (const auto& e : fs::recursive_directory_iterator(prefix_ + "/share/man")) {
    pages += e.is_regular_file();
  }
  // 9 tools, 2 daemons, gos-cc, gos-c++; gos-fort, gos-f90, gos-f77 with the Fortran bindings.
  EXPECT_EQ(pages, fs::exists(prefix_ + "/bin/gos-fort") ? 16u : 13u);
  RunResult man = gos::testing::Run(
      {"bash", "-c", "zcat " + prefix_ + "/share/man/man1/gos-run.1.gz"}, {}, 10s);
  EXPECT_NE(man.output.find("checkpoint the job every DUR"), std::string::npos) << man.output;
  // gos's CRIU is the one this build dir built from this tree's patches (cmake/GosCriu.cmake).
  RunResult criu = gos::testing::Run({prefix_ + "/libexec/gos/criu", "--version"}, {}, 10s);
  EXPECT_NE(criu.output.find("Version: 4.1.1"), std::string::npos) << criu.Describe();
  EXPECT_EQ(ReadFile(prefix_ + "/libexec/gos/criu"),
            ReadFile(std::string(GOS_BUILD_DIR) + "/criu/criu"));
}

TEST_F(InstallTest, NothingInstalledNamesTheBuildTree) {
  const std::string build = fs::canonical(GOS_BUILD_DIR).string();
  const std::string source = fs::canonical(GOS_SOURCE_DIR).string();
  size_t elves = 0;
  for (const auto& e : fs::recursive_directory_iterator(prefix_)) {
    if (!e.is_regular_file()) continue;
    const std::string path = e.path().string();
    if (IsArchive(path)) {
      // The MPI libraries: their objects' debug info names the build dir, as any -g build's;
      // what a program links from them must not.
      const std::string stripped = dir_->path() + "/stripped.a";
      RunResult strip = gos::testing::Run({"objcopy", "--strip-debug", path, stripped}, {}, 30s);
      ASSERT_EQ(strip.code, 0) << strip.Describe();
      const std::string text = ReadFile(stripped);
      EXPECT_EQ(text.find(build), std::string::npos) << path << " names " << build;
      EXPECT_EQ(text.find(source + "/"), std::string::npos) << path << " names " << source;
      continue;
    }
    if (!IsElf(path)) {
      // Scripts (the wrappers), units, the config, docs, man pages (gzipped: their text is
      // checked through gos-cc --showme below and zcat of one).
      const std::string text = ReadFile(path);
      EXPECT_EQ(text.find(build), std::string::npos) << path << " names " << build;
      EXPECT_EQ(text.find(source + "/"), std::string::npos) << path << " names " << source;
      continue;
    }
    ++elves;
    RunResult dyn = gos::testing::Run({"readelf", "-d", path}, {}, 10s);
    EXPECT_EQ(dyn.code, 0) << dyn.Describe();
    EXPECT_EQ(dyn.output.find("RPATH"), std::string::npos) << path << ":\n" << dyn.output;
    EXPECT_EQ(dyn.output.find("RUNPATH"), std::string::npos) << path << ":\n" << dyn.output;
    // What a program can use at run time: everything but its debug info (which names the
    // build directory as DWARF's compilation dir, as any -g build does).
    const std::string stripped = dir_->path() + "/stripped";
    RunResult strip = gos::testing::Run({"objcopy", "--strip-debug", path, stripped}, {}, 30s);
    ASSERT_EQ(strip.code, 0) << strip.Describe();
    EXPECT_EQ(ReadFile(stripped).find(build), std::string::npos) << path << " names " << build;
  }
  EXPECT_EQ(elves, 13u);  // 9 tools, 2 daemons, gos-rank-init, criu (the archives are ar files)
  RunResult showme = gos::testing::Run({prefix_ + "/bin/gos-cc", "--showme"}, {}, 10s);
  EXPECT_EQ(showme.output, "cc -I" + prefix_ + "/include/gos/mpi -I" + prefix_ + "/include -L" +
                               prefix_ + "/lib -lgos_mpi -lgos_rank -lstdc++ -lm\n");
}

TEST_F(InstallTest, InstalledGosRunCheckpointsAnMpiJobWithoutTheBuildTree) {
  const std::string work = dir_->path() + "/job";
  fs::create_directories(work + "/state");
  fs::copy_file(std::string(GOS_SOURCE_DIR) + "/examples/jacobi.c", work + "/jacobi.c");
  const std::string build = fs::canonical(GOS_BUILD_DIR).string();
  const std::string source = fs::canonical(GOS_SOURCE_DIR).string();
  // In a mount namespace of its own: empty tmpfs over the build tree, the source tree and
  // scripts/setup's CRIU, then the installed gos-cc and gos-run with only the prefix on PATH.
  const std::string script = R"sh(set -e
mount -t tmpfs gos-hidden "$1"
mount -t tmpfs gos-hidden "$2"
mount -t tmpfs gos-hidden /usr/local/sbin
for d in "$1" "$2" /usr/local/sbin; do [ ! -e "$d" ] || [ -z "$(ls -A "$d")" ]; done
cd "$3"
gos-cc -O2 -std=c11 -D_DEFAULT_SOURCE -o jacobi jacobi.c -lm
exec gos-run -n 2 --checkpoint=100ms ./jacobi 64 5000 100
)sh";
  RunResult r = gos::testing::Run(
      {"unshare", "--mount", "--propagation", "private", "--", "bash", "-c", script, "hidden",
       build, source, work},
      {"PATH=" + prefix_ + "/bin:/usr/bin:/bin", "HOME=" + work, "GOS_STATE_DIR=" + work + "/state",
       // The installed example config, as /etc/gos/gos.conf would be.
       "GOS_CONFIG=" + prefix_ + "/etc/gos/gos.conf"},
      120s);
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_NE(r.output.find("checkpoint: job 1 epoch 1 committed: 2 ranks"), std::string::npos)
      << r.Describe();
  EXPECT_NE(r.output.find("jacobi: N=64 ranks=2 iterations=5000"), std::string::npos)
      << r.Describe();
}

// What gos-coordinator.service claims: the coordinator needs no capability (it runs with
// CapabilityBoundingSet= and NoNewPrivileges=yes). The installed one, run so, with an installed
// nodeagent, takes a job's checkpoints.
TEST_F(InstallTest, CoordinatorRunsWithoutCapabilities) {
  const std::string work = dir_->path() + "/nocaps";
  fs::create_directories(work + "/data");
  fs::create_directories(work + "/node");
  auto coordinator = gos::testing::Subprocess::Start(
      {"setpriv", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs",
       prefix_ + "/sbin/gos-coordinator", "--data-dir", work + "/data", "--nodes", "1", "--listen",
       "127.0.0.1:0"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status().ToString();
  ASSERT_TRUE(
      gos::testing::WaitUntil([&] { return fs::exists(work + "/data/coordinator.addr"); }, 20s))
      << coordinator->output();
  const std::string caps = ReadFile("/proc/" + std::to_string(coordinator->pid()) + "/status");
  EXPECT_NE(caps.find("CapEff:\t0000000000000000"), std::string::npos) << caps;
  auto agent = gos::testing::Subprocess::Start({prefix_ + "/sbin/gos-nodeagent", "--coordinator",
                                                work + "/data", "--name", "n1", "--state-dir",
                                                work + "/node", "--exit-with-coordinator"});
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  RunResult r = gos::testing::Run({prefix_ + "/bin/gos-run", "-n", "2", "--checkpoint=100ms",
                                   GOS_BUILD_DIR "/examples/jacobi", "64", "5000", "100"},
                                  {"GOS_COORDINATOR=" + work + "/data/coordinator.sock"}, 120s);
  EXPECT_EQ(r.code, 0) << r.Describe() << coordinator->output() << agent->output();
  EXPECT_NE(r.output.find("checkpoint: job 1 epoch 1 committed: 2 ranks"), std::string::npos)
      << r.Describe();
  coordinator->Signal(SIGTERM);
  EXPECT_TRUE(coordinator->Wait(std::chrono::steady_clock::now() + 20s).has_value());
  EXPECT_TRUE(agent->Wait(std::chrono::steady_clock::now() + 20s).has_value()) << agent->output();
}

TEST_F(InstallTest, SystemdUnitsPassSystemdAnalyzeVerify) {
  const std::string units = prefix_ + "/lib/systemd/system";
  const std::vector<std::string> env = {"MANPATH=" + prefix_ + "/share/man:"};
  RunResult v = gos::testing::Run({"systemd-analyze", "verify", units + "/gos-coordinator.service",
                                   units + "/gos-nodeagent.service"},
                                  env, 60s);
  EXPECT_EQ(v.code, 0) << v.Describe();
  EXPECT_EQ(v.output, "") << v.Describe();  // warnings too (an unknown key is only a warning)

  const std::string nodeagent = ReadFile(units + "/gos-nodeagent.service");
  EXPECT_NE(nodeagent.find("\nExecStart=" + prefix_ +
                           "/sbin/gos-nodeagent --cgroup-root /run/gos/freezer/gos\n"),
            std::string::npos)
      << nodeagent;
  for (const char* line : {"\nDelegate=yes\n", "\nRestart=on-failure\n", "\nStateDirectory=gos\n",
                           "\nEnvironment=GOS_CONFIG="}) {
    EXPECT_NE(nodeagent.find(line), std::string::npos) << line;
  }
  const std::string coordinator = ReadFile(units + "/gos-coordinator.service");
  EXPECT_NE(coordinator.find("\nExecStart=" + prefix_ +
                             "/sbin/gos-coordinator --data-dir /var/lib/gos\n"),
            std::string::npos)
      << coordinator;

  // The check can fail: a misspelt key, and a daemon that is not there.
  const std::string bad = dir_->path() + "/gos-bad.service";
  std::ofstream(bad) << nodeagent << "\n[Service]\nRestartt=on-failure\n";
  RunResult b = gos::testing::Run({"systemd-analyze", "verify", bad}, env, 60s);
  EXPECT_NE(b.output.find("Unknown key 'Restartt'"), std::string::npos) << b.Describe();
  const std::string missing = dir_->path() + "/gos-missing.service";
  std::string text = coordinator;
  text.replace(text.find("/sbin/gos-coordinator"), 21, "/sbin/gos-coordinatorr");
  std::ofstream(missing) << text;
  RunResult m = gos::testing::Run({"systemd-analyze", "verify", missing}, env, 60s);
  EXPECT_NE(m.code, 0) << m.Describe();
  EXPECT_NE(m.output.find("is not executable"), std::string::npos) << m.Describe();
}

}  // namespace
}  // namespace gos
