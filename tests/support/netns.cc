#include "tests/support/netns.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "tests/support/subprocess.h"

namespace gos::testing {

Status RunCommand(const std::vector<std::string>& argv) {
  GOS_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Start(argv));
  auto st = p.Wait(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (!st) return DeadlineExceededError("`" + cmd + "` did not finish in 30 s");
  if (*st != 0) {
    return InternalError("`" + cmd + "` failed (" + DescribeWaitStatus(*st) + "): " + p.output());
  }
  return OkStatus();
}

std::string NetnsHosts::Unsupported() {
  if (geteuid() != 0) return "network namespaces need root (run the tests as root)";
  if (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0 &&
      access("/usr/bin/ip", X_OK) != 0) {
    return "iproute2 (`ip`) is not installed (scripts/setup installs it)";
  }
  std::string probe = "gos-probe-" + std::to_string(getpid());
  if (!RunCommand({"ip", "netns", "add", probe}).ok()) {
    return "`ip netns add` fails here (no CAP_SYS_ADMIN or no netns support in this kernel)";
  }
  RunCommand({"ip", "netns", "del", probe}).IgnoreError();
  return "";
}

// Removes namespaces, veths and bridges of earlier test processes that no longer exist
// (a test killed mid-run cannot clean up after itself).
static void SweepStale() {
  DIR* d = opendir("/run/netns");
  if (d != nullptr) {
    while (dirent* e = readdir(d)) {
      int pid = 0, host = 0;
      if (std::sscanf(e->d_name, "gos-%d-h%d", &pid, &host) == 2 && pid > 0 && kill(pid, 0) != 0 &&
          errno == ESRCH) {
        RunCommand({"ip", "netns", "del", e->d_name}).IgnoreError();
        RunCommand({"ip", "link", "del", "gb" + std::to_string(pid)}).IgnoreError();
      }
    }
    closedir(d);
  }
}

StatusOr<std::unique_ptr<NetnsHosts>> NetnsHosts::Create(int hosts) {
  SweepStale();
  std::unique_ptr<NetnsHosts> n(new NetnsHosts());
  int pid = getpid();
  n->subnet_ = 1 + pid % 250;
  n->bridge_ = "gb" + std::to_string(pid);
  GOS_RETURN_IF_ERROR(RunCommand({"ip", "link", "add", n->bridge_, "type", "bridge"}));
  GOS_RETURN_IF_ERROR(RunCommand({"ip", "addr", "add", n->bridge_ip() + "/24", "dev", n->bridge_}));
  GOS_RETURN_IF_ERROR(RunCommand({"ip", "link", "set", n->bridge_, "up"}));
  for (int i = 0; i < hosts; ++i) {
    std::string ns = "gos-" + std::to_string(pid) + "-h" + std::to_string(i);
    std::string veth = "gv" + std::to_string(pid) + "h" + std::to_string(i);
    GOS_RETURN_IF_ERROR(RunCommand({"ip", "netns", "add", ns}));
    n->names_.push_back(ns);
    GOS_RETURN_IF_ERROR(RunCommand(
        {"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns}));
    n->veths_.push_back(veth);
    GOS_RETURN_IF_ERROR(RunCommand({"ip", "link", "set", veth, "master", n->bridge_, "up"}));
    GOS_RETURN_IF_ERROR(
        RunCommand({"ip", "-n", ns, "addr", "add", n->ip(i) + "/24", "dev", "eth0"}));
    GOS_RETURN_IF_ERROR(RunCommand({"ip", "-n", ns, "link", "set", "eth0", "up"}));
    GOS_RETURN_IF_ERROR(RunCommand({"ip", "-n", ns, "link", "set", "lo", "up"}));
  }
  return n;
}

NetnsHosts::~NetnsHosts() {
  for (const auto& v : veths_) RunCommand({"ip", "link", "del", v}).IgnoreError();
  for (const auto& ns : names_) RunCommand({"ip", "netns", "del", ns}).IgnoreError();
  if (!bridge_.empty()) RunCommand({"ip", "link", "del", bridge_}).IgnoreError();
}

std::string NetnsHosts::ip(int host) const {
  return "198.18." + std::to_string(subnet_) + "." + std::to_string(10 + host);
}

std::string NetnsHosts::bridge_ip() const { return "198.18." + std::to_string(subnet_) + ".1"; }

std::vector<std::string> NetnsHosts::Wrap(int host, const std::vector<std::string>& argv) const {
  std::vector<std::string> out = {"ip", "netns", "exec", names_[host]};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

Status NetnsHosts::SetLinkUp(int host, bool up) {
  return RunCommand({"ip", "link", "set", veths_[host], up ? "up" : "down"});
}

}  // namespace gos::testing
