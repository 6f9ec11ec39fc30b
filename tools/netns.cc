#include "netns.h"

#include <fcntl.h>
#include <net/if.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "gos/fd.h"
#include "gos/files.h"

extern char** environ;

namespace gos::tools {
namespace {

constexpr char kRecord[] = "/netns";

std::string IpPath() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

std::string NsenterPath() {
  for (const char* p : {"/usr/bin/nsenter", "/bin/nsenter", "/usr/sbin/nsenter"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

// Runs `ip args...`; an error carries the command and what it printed.
Status Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {IpPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe");
  Fd out(pipe_fds[0]);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&fa, pipe_fds[1], 1);
  ::posix_spawn_file_actions_adddup2(&fa, pipe_fds[1], 2);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  ::close(pipe_fds[1]);
  if (rc != 0) return ErrnoError(rc, "run " + cmd);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(out.get(), buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return OkStatus();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return InternalError("`" + cmd + "` failed: " + text);
}

bool LinkExists(const std::string& name) { return ::if_nametoindex(name.c_str()) != 0; }

}  // namespace

std::string NetnsUnsupported() {
  if (::geteuid() != 0) return "network namespaces need root";
  if (IpPath().empty()) return "iproute2 (`ip`) is not installed (scripts/setup installs it)";
  if (NsenterPath().empty()) return "`nsenter` (util-linux) is not installed";
  return "";
}

StatusOr<NetnsHosts> CreateNetnsHosts(const std::string& state_dir, uint32_t nodes) {
  if (std::string why = NetnsUnsupported(); !why.empty()) return FailedPreconditionError(why);
  RemoveNetnsHosts(state_dir);  // a cluster of this state dir that died without `down`
  int k = 1;
  while (k < 255 && LinkExists("gosbr" + std::to_string(k))) ++k;
  if (k == 255) return ResourceExhaustedError("no free 198.19.<k>.0/24 subnet for the bridge");
  NetnsHosts h;
  const std::string subnet = "198.19." + std::to_string(k) + ".";
  h.bridge = "gosbr" + std::to_string(k);
  h.bridge_ip = subnet + "1";
  // The record first, so that whatever is made below is removed even after a failure.
  // Root's, as everything of the state dir's but the client socket.
  GOS_RETURN_IF_ERROR(WriteFileWithMode(state_dir + kRecord, "", kPrivateFile));
  std::ofstream record(state_dir + kRecord, std::ios::trunc);
  record << "bridge " << h.bridge << "\n";
  record.flush();
  Status st = Ip({"link", "add", h.bridge, "type", "bridge"});
  if (st.ok()) st = Ip({"addr", "add", h.bridge_ip + "/24", "dev", h.bridge});
  if (st.ok()) st = Ip({"link", "set", h.bridge, "up"});
  for (uint32_t i = 1; st.ok() && i <= nodes; ++i) {
    const std::string ns = "gos-c" + std::to_string(k) + "-n" + std::to_string(i);
    const std::string veth = "gosv" + std::to_string(k) + "n" + std::to_string(i);
    record << "netns " << ns << "\nveth " << veth << "\n";
    record.flush();
    st = Ip({"netns", "add", ns});
    if (st.ok()) {
      st = Ip({"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns});
    }
    if (st.ok()) st = Ip({"link", "set", veth, "master", h.bridge, "up"});
    if (st.ok()) {
      st = Ip({"-n", ns, "addr", "add", subnet + std::to_string(10 + i) + "/24", "dev", "eth0"});
    }
    if (st.ok()) st = Ip({"-n", ns, "link", "set", "eth0", "up"});
    if (st.ok()) st = Ip({"-n", ns, "link", "set", "lo", "up"});
    h.names.push_back(ns);
  }
  if (!st.ok()) {
    RemoveNetnsHosts(state_dir);
    return st;
  }
  return h;
}

void RemoveNetnsHosts(const std::string& state_dir) {
  std::ifstream record(state_dir + kRecord);
  if (!record) return;
  std::string kind, name;
  std::vector<std::string> bridges;
  while (record >> kind >> name) {
    // The veth pair goes with its namespace only once the kernel destroys that, which can be
    // much later: delete our end (and so the pair) now.
    if (kind == "veth" && LinkExists(name)) Ip({"link", "del", name}).IgnoreError();
    if (kind == "netns") Ip({"netns", "del", name}).IgnoreError();
    if (kind == "bridge") bridges.push_back(name);
  }
  for (const auto& b : bridges) {
    if (LinkExists(b)) Ip({"link", "del", b}).IgnoreError();
  }
  ::unlink((state_dir + kRecord).c_str());
}

std::vector<std::string> InNetns(const std::string& name, const std::vector<std::string>& argv) {
  std::vector<std::string> out = {NsenterPath(), "--net=/run/netns/" + name, "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace gos::tools
