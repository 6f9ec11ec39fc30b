// What the command-line tools share: where the local cluster lives, how to reach the
// coordinator, and starting a local cluster (coordinator plus K nodeagents on this machine).
#ifndef GOS_TOOLS_CLIENT_H_
#define GOS_TOOLS_CLIENT_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gos/os/channel.h"
#include "gos/os/config.h"
#include "gos/os/messages.h"
#include "gos/status.h"

namespace gos::tools {

// Loads the configuration this tool runs with (os::LoadProgramConfig: gos.conf, the
// environment over it), first thing in Main: -1 to go on, else the exit code (2) after
// printing "<tool>: FILE:LINE: KEY: why".
int LoadToolConfig(const char* tool);
// That configuration; before LoadToolConfig, the defaults with the environment over them.
const os::Config& ToolConfig();

// state_dir (gos.conf, $GOS_STATE_DIR), else $XDG_STATE_HOME/gos, else ~/.local/state/gos
// (created).
std::string StateDir();

// The coordinator to use: coordinator (gos.conf, $GOS_COORDINATOR) if set, else the local cluster's
// socket if a coordinator answers there, else "" (none running).
std::string FindCoordinator();

// The cluster key a TCP client uses: key_file (gos.conf, $GOS_KEY_FILE), else
// <state dir>/cluster.key.
std::string ClientKeyFile();

// Connects to a coordinator: its unix socket (the peer credentials say who we are), or
// "host:port", its nodeagent port, with the cluster key (ClientKeyFile) and a hello naming
// our uid and gid.
StatusOr<std::unique_ptr<os::Channel>> ConnectCoordinator(const std::string& address);

// Sends a job: over the unix socket the files go as the passed descriptors `fds`; over TCP
// (`address` host:port) their contents are uploaded first (kUpload), 1 MiB at a time.
Status SendSubmit(os::Channel& ch, const std::string& address, const os::SubmitRequest& req,
                  const std::vector<int>& fds);

struct LocalClusterOptions {
  uint32_t nodes = 1;
  std::string state_dir;        // default StateDir()
  std::string timeslice;        // e.g. "10ms"; "" = default
  std::string mpl;              // "" = default
  std::string failure_timeout;  // "" = default
  std::string keep_logs;        // gos-coordinator --keep-logs; "" = default
  // "" = provider (gos.conf, $GOS_FABRIC_PROVIDER) if set, else shm for one node, tcp;ofi_rxm
  // for several (a node killed under shm can leave its peers stuck in libfabric; client.cc)
  std::string provider;
  bool embedded = true;  // exit when idle (gos-run) vs. persistent (gos-cluster)
  bool detach = false;   // new session, survives the caller (gos-cluster up)
  // Each nodeagent in a network namespace of its own (tools/netns.h), the coordinator on
  // their bridge; the namespaces are recorded in the state dir for RemoveNetnsHosts.
  bool netns = false;
  std::string listen;  // coordinator's nodeagent address, "" = 127.0.0.1:0 (netns: the bridge)
  // nodeagents' --scratch-dir is <scratch_dir>/<name>; "" = gos.conf's scratch_dir, else none
  std::string scratch_dir;
};

// The reason a daemon ("gos-coordinator", "gos-nodeagent") gave when it exited on an error:
// the last line of its log, if that is its "<daemon>: ..." farewell (without the prefix); ""
// otherwise.
std::string DaemonFatal(const std::string& log_path, const std::string& daemon);

// A coordinator and K nodeagents started on this machine. Logs go to <state>/log/.
class LocalCluster {
 public:
  static StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& o);
  ~LocalCluster();
  const std::string& socket() const { return socket_; }
  // The libfabric provider between its nodes (the one chosen, or the coordinator's default).
  const std::string& provider() const { return provider_; }
  // Waits for every daemon to exit (embedded clusters exit once idle); kills what is left at
  // the deadline. Returns false if something had to be killed.
  bool WaitExit(std::chrono::milliseconds timeout);
  // Stops every daemon now: SIGTERM (they shut down cleanly), SIGKILL after 5 s.
  void Kill();
  // Lets the daemons outlive this object (gos-cluster up).
  void Detach() { pids_.clear(); }

 private:
  std::vector<pid_t> pids_;
  std::string state_;
  std::string socket_;
  std::string provider_;
};

// Removes the files the local cluster in `state` leaves outside it (os::RemoveClusterFiles:
// BCS channel files, rank-init dirs), once none of its daemons runs: a nodeagent that was
// killed could not remove those of its ranks.
void RemoveClusterFiles(const std::string& state);

// The daemons (gos-coordinator, gos-nodeagent) of the local cluster in `state` running on this
// machine, found by their command lines, which name `state`.
std::vector<pid_t> LocalClusterDaemons(const std::string& state);

// Waits up to `timeout` for `pids` (not children) to exit; SIGTERM to those left, SIGKILL 5 s
// later. Returns the pids that had to be signalled.
std::vector<pid_t> WaitOrStopDaemons(std::vector<pid_t> pids, std::chrono::milliseconds timeout);

// The log of node `node`'s nodeagent of the local cluster in `state`.
std::string NodeAgentLog(const std::string& state, uint32_t node);

// Starts node `node`'s nodeagent of the local cluster in `state` again, with the command
// `gos-cluster up` started it with (recorded in the state dir), detached; its log goes on in
// NodeAgentLog. It joins in place of the node if that node is down.
StatusOr<pid_t> StartNodeAgentAgain(const std::string& state, uint32_t node);

// The coordinator to use (FindCoordinator), or, when none runs, a local cluster started with
// `o` into *started (gos-run, gos-replay).
StatusOr<std::string> CoordinatorOrLocalCluster(const LocalClusterOptions& o,
                                                std::unique_ptr<LocalCluster>* started);

// The one positional argument, a job id. Otherwise prints "<tool>: ..." to stderr and returns
// false (the caller exits with 2).
bool ParseJobArg(const char* tool, const std::vector<std::string>& positional, uint64_t* job);

// Node ids as gos-ps shows them, comma-separated, with ranges: "2", "1,3", "2-4,7". Appends
// them to *ids (ascending, without duplicates); false with *error set for anything else.
bool ParseNodeList(const std::string& text, std::vector<uint32_t>* ids, std::string* error);
// Every value of a repeatable node-list option into *ids; on a bad one prints
// "TOOL: OPTION ..." and returns false (the caller exits with 2).
bool ParseNodeListArgs(const char* tool, const char* option, const std::vector<std::string>& args,
                       std::vector<uint32_t>* ids);

// The coordinator's job and node tables (what gos-ps shows).
StatusOr<os::PsReply> QueryPs(const std::string& address,
                              std::chrono::steady_clock::time_point deadline);

// Waits until the coordinator at address reports `nodes` nodes up, or the deadline.
Status WaitForNodes(const std::string& address, uint32_t nodes,
                    std::chrono::steady_clock::time_point deadline);

}  // namespace gos::tools

#endif  // GOS_TOOLS_CLIENT_H_
