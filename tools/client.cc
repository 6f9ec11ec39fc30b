#include "client.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gos/files.h"
#include "gos/os/auth.h"
#include "gos/os/messages.h"
#include "gos/prim/prim.h"
#include "gos/programs.h"
#include "netns.h"

namespace gos::tools {
namespace {

using SteadyClock = std::chrono::steady_clock;

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log, bool detach) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (detach) setsid();
  // The daemon's log is root's (README, "Who can read what"), an old one too.
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, kPrivateFile);
  if (fd >= 0) ::fchmod(fd, kPrivateFile);
  int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) dup2(null, 0);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  // Daemons must not die with the user's Ctrl-C to gos-run: gos-run forwards it as a job
  // signal instead.
  if (!detach) setpgid(0, 0);
  execv(args[0], args.data());
  _exit(127);
}

std::string NodeStateDir(const std::string& state, uint32_t node) {
  return state + "/nodes/n" + std::to_string(node);
}

std::string NodeAgentCommandFile(const std::string& state, uint32_t node) {
  return NodeStateDir(state, node) + "/nodeagent.cmd";
}

// argv, NUL-terminated strings.
void SaveNodeAgentCommand(const std::string& state, uint32_t node,
                          const std::vector<std::string>& argv) {
  const std::string path = NodeAgentCommandFile(state, node);
  // The node's state dir, as its nodeagent makes it (a rank passes through to its job dir).
  CreateDirs(NodeStateDir(state, node), kPassDir).IgnoreError();
  std::string bytes;
  for (const auto& a : argv) bytes.append(a.c_str(), a.size() + 1);
  // Best effort: without it only `gos-cluster rejoin` of the node is lost.
  WriteFileWithMode(path, bytes, kPrivateFile).IgnoreError();
}

// A live (not zombie) gos-nodeagent whose --state-dir is `dir`, or 0.
pid_t NodeAgentOf(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(e.path() / "cmdline", std::ios::binary);
    std::vector<std::string> args;
    std::string a;
    while (std::getline(cmd, a, '\0')) args.push_back(a);
    if (args.empty() || std::filesystem::path(args[0]).filename() != "gos-nodeagent") continue;
    bool match = false;
    for (size_t i = 0; i + 1 < args.size(); ++i)
      match |= args[i] == "--state-dir" && args[i + 1] == dir;
    if (!match) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') continue;
    return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

}  // namespace

std::string NodeAgentLog(const std::string& state, uint32_t node) {
  return state + "/log/n" + std::to_string(node) + ".log";
}

StatusOr<pid_t> StartNodeAgentAgain(const std::string& state, uint32_t node) {
  const std::string path = NodeAgentCommandFile(state, node);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("no command for node " + std::to_string(node) + " in " + path +
                         ": was this cluster started with `gos-cluster up`?");
  }
  std::vector<std::string> argv;
  std::string arg;
  while (std::getline(in, arg, '\0')) argv.push_back(arg);
  if (argv.empty()) return InvalidArgumentError(path + " is empty");
  // The node's earlier nodeagent may live on (stopped, or cut off, when it was declared
  // down): two agents on one state dir would trip over each other's job dirs.
  if (pid_t old = NodeAgentOf(NodeStateDir(state, node)); old > 0) {
    return FailedPreconditionError("node " + std::to_string(node) + "'s earlier nodeagent (pid " +
                                   std::to_string(old) +
                                   ") is still running (stopped or cut off?): end it first, "
                                   "e.g. kill -9 " +
                                   std::to_string(old));
  }
  pid_t pid = Spawn(argv, NodeAgentLog(state, node), true);
  if (pid < 0) return ErrnoError(errno, "fork");
  return pid;
}

namespace {
os::Config* loaded_config = nullptr;
}  // namespace

int LoadToolConfig(const char* tool) {
  static os::Config config;
  if (int rc = os::LoadConfigForMain(tool, &config); rc >= 0) return rc;
  loaded_config = &config;
  return -1;
}

const os::Config& ToolConfig() {
  if (loaded_config != nullptr) return *loaded_config;
  static const os::Config from_environment = [] {
    os::Config c;
    os::ApplyEnvironment(&c);
    return c;
  }();
  return from_environment;
}

std::string StateDir() {
  std::string dir = ToolConfig().state_dir;
  if (dir.empty()) {
    if (const char* x = getenv("XDG_STATE_HOME"); x && *x) {
      dir = std::string(x) + "/gos";
    } else {
      const char* home = getenv("HOME");
      dir = std::string(home && *home ? home : "/root") + "/.local/state/gos";
    }
  }
  // A new one as the coordinator makes its data dir: passable (to the client socket), not
  // listable. The coordinator tightens it at start; a user's tools only ever read it.
  CreateDirs(dir, kPassDir).IgnoreError();  // whoever uses it says what is wrong
  return dir;
}

std::string FindCoordinator() {
  if (const std::string& c = ToolConfig().coordinator; !c.empty()) return c;
  std::string sock = StateDir() + "/coordinator.sock";
  auto fd = os::ConnectAddress(sock, SteadyClock::now());
  if (!fd.ok()) return "";
  ::close(*fd);
  return sock;
}

std::string ClientKeyFile() {
  if (const std::string& k = ToolConfig().key_file; !k.empty()) return k;
  return StateDir() + "/cluster.key";
}

StatusOr<std::unique_ptr<os::Channel>> ConnectCoordinator(const std::string& address) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  if (os::IsUnixAddress(address)) {
    GOS_ASSIGN_OR_RETURN(int fd, os::ConnectAddress(address, deadline));
    return std::make_unique<os::Channel>(fd, std::vector<uint8_t>{}, false);
  }
  // Over TCP the coordinator cannot see who connects: the client proves it holds the cluster
  // key (the channel's MACs) and says whom it acts for.
  const std::string key_file = ClientKeyFile();
  auto key = os::LoadClusterKey(key_file);
  if (!key.ok()) {
    return PermissionDeniedError("GOS_COORDINATOR=" + address +
                                 ": a client over TCP needs the cluster key (GOS_KEY_FILE, "
                                 "else " +
                                 key_file + ", readable by root only): " + key.status().message());
  }
  GOS_ASSIGN_OR_RETURN(int fd, os::ConnectAddress(address, deadline));
  auto ch = std::make_unique<os::Channel>(fd, std::move(*key), false);
  const std::string hello = std::to_string(::getuid()) + " " + std::to_string(::getgid()) + " " +
                            std::to_string(::getpid());
  GOS_RETURN_IF_ERROR(ch->Send(os::Frame::kClientHello, os::EncodeText(hello)));
  // The coordinator closes a channel whose MACs do not check out.
  auto ok = ch->Receive(deadline);
  if (!ok.ok() || ok->type != os::Frame::kOk) {
    return PermissionDeniedError("the coordinator at " + address + " refused us (" +
                                 (ok.ok() ? "unexpected answer" : ok.status().message()) +
                                 "): not its cluster key? (" + key_file + ")");
  }
  return ch;
}

Status SendSubmit(os::Channel& ch, const std::string& address, const os::SubmitRequest& req,
                  const std::vector<int>& fds) {
  if (os::IsUnixAddress(address)) return ch.Send(os::Frame::kSubmit, os::Encode(req), fds);
  constexpr size_t kPiece = 1u << 20;
  std::string piece(kPiece, '\0');
  for (size_t i = 0; i < fds.size(); ++i) {
    for (uint64_t offset = 0;;) {
      ssize_t n = ::pread(fds[i], piece.data(), kPiece, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError(errno, "read " + req.files[i].name + " to upload it");
      // An empty file still sends one (empty) piece, so that the coordinator has it.
      if (n == 0 && offset > 0) break;
      GOS_RETURN_IF_ERROR(
          ch.Send(os::Frame::kUpload, os::EncodeJobBytes(static_cast<uint64_t>(i) << 48 | offset,
                                                         piece.substr(0, static_cast<size_t>(n)))));
      offset += static_cast<uint64_t>(n);
      if (n == 0) break;
    }
  }
  return ch.Send(os::Frame::kSubmit, os::Encode(req));
}

std::string DaemonFatal(const std::string& log_path, const std::string& daemon) {
  std::string last;
  if (std::FILE* f = std::fopen(log_path.c_str(), "re")) {
    char line[1024];
    while (std::fgets(line, sizeof line, f)) {
      std::string l(line);
      while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
      if (!l.empty()) last = l;
    }
    std::fclose(f);
  }
  const std::string prefix = daemon + ": ";
  return last.rfind(prefix, 0) == 0 ? last.substr(prefix.size()) : std::string();
}

StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(const LocalClusterOptions& o) {
  std::string state = o.state_dir.empty() ? StateDir() : o.state_dir;
  // The state dir as the coordinator will have it; its daemons' logs are root's (they tell of
  // every job).
  GOS_RETURN_IF_ERROR(MakeDir(state, kPassDir));
  GOS_RETURN_IF_ERROR(MakeDir(state + "/log", kPrivateDir));
  auto c = std::unique_ptr<LocalCluster>(new LocalCluster());
  c->state_ = state;
  c->socket_ = state + "/coordinator.sock";
  // A stale address file would send the nodeagents to a dead coordinator.
  ::unlink((state + "/coordinator.addr").c_str());
  NetnsHosts hosts;
  if (o.netns) {
    GOS_ASSIGN_OR_RETURN(hosts, CreateNetnsHosts(state, o.nodes));
  }
  std::vector<std::string> argv = {GosProgram("gos-coordinator", ProgramDir::kSbin), "--data-dir",
                                   state, "--nodes", std::to_string(o.nodes)};
  if (!o.timeslice.empty()) argv.insert(argv.end(), {"--timeslice", o.timeslice});
  if (!o.mpl.empty()) argv.insert(argv.end(), {"--mpl", o.mpl});
  if (!o.failure_timeout.empty()) argv.insert(argv.end(), {"--failure-timeout", o.failure_timeout});
  if (!o.keep_logs.empty()) argv.insert(argv.end(), {"--keep-logs", o.keep_logs});
  // Unless a provider is asked for: one node on this host talks to the coordinator over
  // shared memory (with doorbells), about twice as fast per message as tcp;ofi_rxm here.
  // Several nodes use tcp;ofi_rxm, like hosts: under libfabric 1.17's shm a node killed while
  // it holds a lock of its shared queue leaves every sender to it, the coordinator included,
  // stuck for good, so one kill -9 could take the whole cluster down (README, "Provider").
  // The daemons read gos.conf too: what must differ from it here is passed to them.
  const std::string provider = o.provider.empty() ? ToolConfig().provider : o.provider;
  c->provider_ =
      provider.empty() && !o.netns && o.nodes == 1 ? "shm" : prim::ResolveProvider(provider);
  argv.insert(argv.end(), {"--provider", c->provider_});
  if (!o.listen.empty()) {
    argv.insert(argv.end(), {"--listen", o.listen});
  } else {
    argv.insert(argv.end(), {"--listen", o.netns ? hosts.bridge_ip + ":0" : "127.0.0.1:0"});
  }
  if (o.embedded) argv.push_back("--exit-when-idle");
  pid_t cpid = Spawn(argv, state + "/log/coordinator.log", o.detach);
  if (cpid < 0) return ErrnoError(errno, "fork");
  c->pids_.push_back(cpid);
  for (uint32_t i = 1; i <= o.nodes; ++i) {
    std::string name = "n" + std::to_string(i);
    std::vector<std::string> a = {GosProgram("gos-nodeagent", ProgramDir::kSbin),
                                  "--coordinator",
                                  state,
                                  "--name",
                                  name,
                                  "--state-dir",
                                  NodeStateDir(state, i),
                                  "--key-file",
                                  state + "/cluster.key",
                                  "--node",
                                  std::to_string(i),
                                  "--exit-with-coordinator"};
    const std::string scratch = o.scratch_dir.empty() ? ToolConfig().scratch_dir : o.scratch_dir;
    if (!scratch.empty()) a.insert(a.end(), {"--scratch-dir", scratch + "/" + name});
    if (o.netns) a = InNetns(hosts.names[i - 1], a);
    // For `gos-cluster rejoin`: the same command, should this nodeagent die.
    SaveNodeAgentCommand(state, i, a);
    pid_t pid = Spawn(a, NodeAgentLog(state, i), o.detach);
    if (pid < 0) return ErrnoError(errno, "fork");
    c->pids_.push_back(pid);
  }
  // The socket answers once the coordinator is up; wait for it (or for it to die).
  auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  while (true) {
    auto fd = os::ConnectAddress(c->socket_, SteadyClock::now());
    if (fd.ok()) {
      ::close(*fd);
      break;
    }
    int status;
    if (waitpid(cpid, &status, WNOHANG) == cpid) {
      c->pids_.erase(c->pids_.begin());
      // Its last words (e.g. an option it refused) say more than a pointer to its log.
      const std::string log = state + "/log/coordinator.log";
      const std::string why = DaemonFatal(log, "gos-coordinator");
      return UnavailableError("the local coordinator exited at start" +
                              (why.empty() ? std::string() : ": " + why) + " (log: " + log + ")");
    }
    if (SteadyClock::now() > deadline) {
      return DeadlineExceededError("the local coordinator did not start; see " + state +
                                   "/log/coordinator.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return c;
}

LocalCluster::~LocalCluster() {
  if (!pids_.empty()) Kill();
}

bool LocalCluster::WaitExit(std::chrono::milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  while (!pids_.empty() && SteadyClock::now() < deadline) {
    for (auto it = pids_.begin(); it != pids_.end();) {
      int status;
      if (waitpid(*it, &status, WNOHANG) == *it) {
        it = pids_.erase(it);
      } else {
        ++it;
      }
    }
    if (!pids_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (pids_.empty()) {
    RemoveClusterFiles(state_);
    return true;
  }
  Kill();
  return false;
}

void LocalCluster::Kill() {
  // The nodeagents first (pids_[0] is the coordinator): an agent that sees its coordinator
  // go before its own SIGTERM would log the closed connection as a failure.
  for (size_t i = pids_.size(); i-- > 0;) ::kill(pids_[i], SIGTERM);
  auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  bool killed = false;
  for (pid_t p : pids_) {
    while (waitpid(p, nullptr, WNOHANG) == 0) {
      if (SteadyClock::now() > deadline) {
        ::kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
        killed = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  pids_.clear();
  RemoveClusterFiles(state_);
  if (killed) prim::SweepDeadShmRegions("/dev/shm");  // what a killed shm node left there
}

std::vector<pid_t> LocalClusterDaemons(const std::string& state) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::vector<std::string> args;
    for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
    if (args.empty()) continue;
    const std::string exe = std::filesystem::path(args[0]).filename();
    if (exe != "gos-coordinator" && exe != "gos-nodeagent") continue;
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == state || args[i].rfind(state + "/", 0) == 0) {
        pids.push_back(std::stoi(name));
        break;
      }
    }
  }
  return pids;
}

std::vector<pid_t> WaitOrStopDaemons(std::vector<pid_t> pids, std::chrono::milliseconds timeout) {
  auto alive = [&pids] {
    pids.erase(std::remove_if(pids.begin(), pids.end(),
                              [](pid_t p) { return ::kill(p, 0) != 0 && errno == ESRCH; }),
               pids.end());
    return !pids.empty();
  };
  auto wait = [&](std::chrono::milliseconds t) {
    const auto deadline = SteadyClock::now() + t;
    while (alive() && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  wait(timeout);
  const std::vector<pid_t> signalled = pids;
  for (pid_t p : pids) ::kill(p, SIGTERM);
  wait(std::chrono::seconds(5));
  for (pid_t p : pids) ::kill(p, SIGKILL);
  wait(std::chrono::seconds(5));
  return signalled;
}

void RemoveClusterFiles(const std::string& state) {
  auto key = os::LoadClusterKey(state + "/cluster.key");
  if (key.ok()) os::RemoveClusterFiles(*key);  // else no cluster ever formed there
}

StatusOr<os::PsReply> QueryPs(const std::string& address,
                              std::chrono::steady_clock::time_point deadline) {
  GOS_ASSIGN_OR_RETURN(auto ch, ConnectCoordinator(address));
  GOS_RETURN_IF_ERROR(ch->Send(os::Frame::kPs, {}));
  GOS_ASSIGN_OR_RETURN(os::FrameIn f, ch->Receive(deadline));
  return os::DecodePsReply(f.payload);
}

Status WaitForNodes(const std::string& address, uint32_t nodes,
                    std::chrono::steady_clock::time_point deadline) {
  while (true) {
    GOS_ASSIGN_OR_RETURN(os::PsReply r, QueryPs(address, deadline));
    uint32_t up = 0;
    for (const auto& n : r.nodes) up += n.up;
    if (up >= nodes && r.strobe > 0) return OkStatus();
    if (SteadyClock::now() > deadline) {
      return DeadlineExceededError(std::to_string(up) + " of " + std::to_string(nodes) +
                                   " nodes up");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

StatusOr<std::string> CoordinatorOrLocalCluster(const LocalClusterOptions& o,
                                                std::unique_ptr<LocalCluster>* started) {
  std::string address = FindCoordinator();
  if (!address.empty()) return address;
  auto c = LocalCluster::Start(o);
  if (!c.ok()) return c.status().WithContext("cannot start a local cluster");
  *started = std::move(*c);
  return (*started)->socket();
}

bool ParseJobArg(const char* tool, const std::vector<std::string>& positional, uint64_t* job) {
  if (positional.size() != 1) {
    std::fprintf(stderr, "%s: give exactly one job id (see --help)\n", tool);
    return false;
  }
  const std::string& arg = positional[0];
  char* end = nullptr;
  errno = 0;
  *job = std::strtoull(arg.c_str(), &end, 10);
  if (arg.empty() || *end != '\0' || *job == 0 || errno != 0 || arg[0] == '-') {
    std::fprintf(stderr, "%s: %s is not a job id\n", tool, arg.c_str());
    return false;
  }
  return true;
}

bool ParseNodeList(const std::string& text, std::vector<uint32_t>* ids, std::string* error) {
  auto number = [](const std::string& t, uint32_t* v) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    *v = static_cast<uint32_t>(std::stoul(t));
    return *v != 0;
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    uint32_t lo = 0, hi = 0;
    const bool ok = dash == std::string::npos
                        ? number(item, &lo) && (hi = lo, true)
                        : number(item.substr(0, dash), &lo) && number(item.substr(dash + 1), &hi);
    if (!ok || hi < lo || hi - lo > 65535) {
      *error = "\"" + item + "\" in \"" + text + "\" is not a node id or a range like 2-4";
      return false;
    }
    for (uint32_t id = lo; id <= hi; ++id) ids->push_back(id);
    start = comma + 1;
  }
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  return true;
}

bool ParseNodeListArgs(const char* tool, const char* option, const std::vector<std::string>& args,
                       std::vector<uint32_t>* ids) {
  for (const std::string& list : args) {
    std::string error;
    if (!ParseNodeList(list, ids, &error)) {
      std::fprintf(stderr, "%s: %s %s\n", tool, option, error.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace gos::tools
