#include "tests/support/cluster.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gos/os/channel.h"

namespace gos::testing {

using SteadyClock = std::chrono::steady_clock;

// ---- The coordinator and its daemons' logs ----------------------------------------------------

StatusOr<os::PsReply> Ps(const std::string& socket, std::chrono::seconds timeout) {
  GOS_ASSIGN_OR_RETURN(int fd, os::ConnectAddress(socket, SteadyClock::now() + 2s));
  os::Channel ch(fd, {}, false);
  GOS_RETURN_IF_ERROR(ch.Send(os::Frame::kPs, {}));
  GOS_ASSIGN_OR_RETURN(os::FrameIn f, ch.Receive(SteadyClock::now() + timeout));
  if (f.type != os::Frame::kPsReply) {
    return InternalError("unexpected reply to PS: frame " +
                         std::to_string(static_cast<int>(f.type)));
  }
  return os::DecodePsReply(f.payload);
}

uint32_t NodesUp(const os::PsReply& r) {
  uint32_t up = 0;
  for (const auto& n : r.nodes) up += n.up ? 1 : 0;
  return up;
}

std::string DescribePs(const StatusOr<os::PsReply>& r) {
  if (!r.ok()) return "PS failed: " + r.status().ToString() + "\n";
  std::string s = "jobs:\n";
  for (const auto& j : r->jobs) {
    s += "  " + std::to_string(j.id) + " " + j.state + " exit " + std::to_string(j.exit_code) +
         " row " + std::to_string(j.row) + " nodes";
    for (uint32_t n : j.nodes) s += " " + std::to_string(n);
    s += " `" + j.command + "` " + j.message + "\n";
  }
  s += "nodes:\n";
  for (const auto& n : r->nodes) {
    s += "  " + std::to_string(n.id) + " " + n.host + (n.up ? " up" : " down: " + n.down_reason) +
         "\n";
  }
  return s;
}

std::string DaemonLogs(const std::string& state, size_t tail) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(state + "/log", ec)) {
    files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::string s;
  for (const auto& f : files) {
    std::string text = ReadFile(f);
    if (text.size() > tail) text = "...\n" + text.substr(text.size() - tail);
    s += "=== " + f + ":\n" + text;
  }
  return s;
}

// ---- LocalCluster -------------------------------------------------------------------------

LocalCluster::LocalCluster(const std::string& prefix) : dir_(prefix, 0755), state_(dir_.path()) {
  unsetenv("GOS_COORDINATOR");
}

LocalCluster::~LocalCluster() {
  for (const auto& [pid, what] : FindProcesses(state_)) ::kill(pid, SIGKILL);
  RemoveClusterFiles(state_);
}

Result LocalCluster::Up(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GosBin("gos-cluster"), "up"};
  argv.insert(argv.end(), args.begin(), args.end());
  Result up = Run(argv, Env(), 60s);
  up_ = up.code == 0;
  return up;
}

void LocalCluster::Down() {
  if (!up_) return;
  up_ = false;
  Result down = Run({GosBin("gos-cluster"), "down"}, Env(), 60s);
  EXPECT_EQ(down.code, 0) << down.Describe();
  std::map<pid_t, std::string> left;
  EXPECT_TRUE(WaitUntil([&] { return (left = FindProcesses(state_)).empty(); }, 15s))
      << "processes of the test cluster still running after gos-cluster down:\n"
      << DescribeProcesses(left);
  for (const auto& [pid, what] : FindProcesses(state_)) ::kill(pid, SIGKILL);
  RemoveClusterFiles(state_);
}

}  // namespace gos::testing
