// The cluster's configuration file, /etc/gos/gos.conf (or the file $GOS_CONFIG names): the
// settings every gos daemon and tool shares, in TOML (docs/config.md, docs/gos.conf.example).
// Precedence, highest first: a command-line flag, the environment (GOS_COORDINATOR,
// GOS_KEY_FILE, GOS_STATE_DIR, GOS_FABRIC_PROVIDER), the file, the built-in default below.
// An unknown key or a bad value is an error "FILE:LINE: KEY: why"; programs exit before doing
// anything else.
#ifndef GOS_OS_CONFIG_H_
#define GOS_OS_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::os {

// Read when $GOS_CONFIG is unset; its absence means "no file" (the defaults).
inline constexpr const char* kSystemConfigFile = "/etc/gos/gos.conf";

struct Config {
  // Where the tools reach the coordinator: its nodeagent address "host:port" (with the cluster
  // key, key_file) or its client socket (an absolute path); also gos-nodeagent --coordinator
  // (host:port, or the coordinator's data dir). Environment: GOS_COORDINATOR.
  // Default: "" (the tools: the local cluster in the state dir, if one runs).
  std::string coordinator;
  // gos-coordinator --listen: its address for nodeagents and clients over TCP.
  // Default: "127.0.0.1:0" (any free port on loopback).
  std::string listen = "127.0.0.1:0";
  // The cluster key a client over TCP (the tools) and gos-nodeagent use. Environment:
  // GOS_KEY_FILE. Default: "" (the tools: <state dir>/cluster.key; gos-nodeagent:
  // <coordinator data dir>/cluster.key).
  std::string key_file;
  // The tools' state dir (local clusters, job records), gos-coordinator --data-dir and the
  // parent of gos-nodeagent's state dir (<state_dir>/nodeagent/<name>). Environment:
  // GOS_STATE_DIR. Default: "" (the tools: $XDG_STATE_HOME/gos or ~/.local/state/gos;
  // gos-coordinator: --data-dir is required; gos-nodeagent: /var/lib/gos/nodeagent/<name>).
  std::string state_dir;
  // gos-nodeagent --scratch-dir (checkpoint dumps); a local cluster's nodes use
  // <scratch_dir>/<node name>. Default: "" (the node's state dir).
  std::string scratch_dir;
  // libfabric provider between the nodes (gos-coordinator --provider, local clusters).
  // Environment: GOS_FABRIC_PROVIDER. Default: "" (tcp;ofi_rxm; shm for a one-node local
  // cluster).
  std::string provider;
  // Strobe quantum (gos-coordinator --timeslice), at least 100us. Default: 10 ms.
  std::chrono::microseconds timeslice{10000};
  // Silence after which a node is down (gos-coordinator --failure-timeout), longer than the
  // timeslice. Default: 2 s.
  std::chrono::milliseconds failure_timeout{2000};
  // Nodeagents forming the cluster (gos-coordinator --nodes), at least 1; what the
  // coordinator started by its systemd unit reads (docs/install.md). Default: 0 (unset: the
  // flag is required).
  uint32_t nodes = 0;
  // Multiprogramming level, gang matrix rows (gos-coordinator --mpl), at least 1. Default: 2.
  uint32_t mpl = 2;
  // Replay logs kept, of the most recent jobs; 0 = all (gos-coordinator --keep-logs).
  // Default: 1000.
  uint32_t keep_logs = 1000;
  // How long gos-run, gos-restart and gos-attach wait for a coordinator that went away
  // (--reattach). Default: 5 min.
  std::chrono::milliseconds reattach{300000};
  // [checkpoint]: defaults of checkpointing.
  struct Checkpoint {
    // gos-run / gos-restart --checkpoint without a value, at least 1ms. Default: 60 s.
    std::chrono::milliseconds interval{60000};
    // Epochs kept per job (gos-coordinator --keep), at least 1. Default: 2.
    uint32_t keep = 2;
    // zstd level of checkpoint chunks (gos-coordinator --ckpt-level), 1..19. Default: 1.
    uint32_t level = 1;
  } checkpoint;
  // The file this came from; "" when none was read. Default: "".
  std::string file;
};

// Parses the TOML file at `path`. Every key it sets must be one of Config's, with a value of
// the right type and range; durations are strings with a unit ("10ms", "2s", "5m"). Errors:
// NotFound (no such file), InvalidArgument "PATH:LINE: KEY: why" (also for TOML syntax),
// other file errors with their errno.
StatusOr<Config> LoadConfig(const std::string& path);

// Every key a file may set, dotted ("checkpoint.keep" is keep in [checkpoint]), in the order
// of Config's fields.
std::vector<std::string> ConfigKeys();

// Overrides c's fields from the environment variables that are set and not empty:
// GOS_COORDINATOR, GOS_KEY_FILE, GOS_STATE_DIR, GOS_FABRIC_PROVIDER.
void ApplyEnvironment(Config* c);

// The configuration a program runs with: the file $GOS_CONFIG names if it is set and not
// empty (it must exist), else `system_file` if it exists, else the defaults; then
// ApplyEnvironment.
StatusOr<Config> LoadProgramConfig(const std::string& system_file = kSystemConfigFile);

// For a main, like Flags::Parse: LoadProgramConfig() into *out and -1 (go on), or the exit code
// 2 after printing "<program>: <error>" to stderr.
int LoadConfigForMain(const char* program, Config* out);

}  // namespace gos::os

#endif  // GOS_OS_CONFIG_H_
