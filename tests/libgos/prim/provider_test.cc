// Choosing a provider, and sweeping the shm regions that processes killed with SIGKILL left.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "gos/prim/prim.h"
#include "tests/support/temp_dir.h"

namespace gos::prim {
namespace {

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

TEST(ProviderTest, RequestedThenEnvironmentThenTcpRxm) {
  ::unsetenv("GOS_FABRIC_PROVIDER");
  EXPECT_EQ(ResolveProvider(""), "tcp;ofi_rxm");
  EXPECT_EQ(ResolveProvider("shm"), "shm");
  ::setenv("GOS_FABRIC_PROVIDER", "tcp", 1);
  EXPECT_EQ(ResolveProvider(""), "tcp");
  EXPECT_EQ(ResolveProvider("shm"), "shm");
  ::unsetenv("GOS_FABRIC_PROVIDER");
}

// Only regions (PID:N:N) of processes that are gone are removed: not a live process's, nor
// files of other names.
TEST(ProviderTest, SweepRemovesOnlyRegionsOfDeadProcesses) {
  const gos::testing::TempDir tmp("gos-shm-sweep");
  const std::string dir = tmp.path();
  // A pid that certainly existed and is gone now: a child that exited and was reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead = std::to_string(child) + ":0:0";
  const std::string alive = std::to_string(::getpid()) + ":1:2";
  for (const std::string& name : {dead, alive, std::string("notaregion"),
                                  std::to_string(child) + ":4", std::to_string(child) + ":0:0x"}) {
    std::ofstream(dir + "/" + name) << "x";
  }
  SweepDeadShmRegions(dir);
  EXPECT_EQ(Names(dir), (std::set<std::string>{alive, "notaregion", std::to_string(child) + ":4",
                                               std::to_string(child) + ":0:0x"}));
  SweepDeadShmRegions(dir + "/missing");  // no such dir: nothing happens
}

}  // namespace
}  // namespace gos::prim
