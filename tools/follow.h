// Following a job from a client: its output, stdin, Ctrl-C handling and exit, as gos-run
// does for a job it submitted and gos-restart for a job it restarted.
#ifndef GOS_TOOLS_FOLLOW_H_
#define GOS_TOOLS_FOLLOW_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "gos/os/channel.h"
#include "gos/os/messages.h"

namespace gos::tools {

struct FollowOptions {
  std::string tool = "gos-run";  // prefix of messages
  bool label = false;            // "R: " before every output line
  bool forward_stdin = true;     // stdin to rank 0
  // Where the ranks' stdout goes: "" = here, else a file name pattern in which %t is the rank,
  // %j the job id and %% a %; without %t every rank writes to the one file. Files are
  // truncated when first written. stderr follows `error`, or, when that is "", stdout.
  std::string output, error;
  // Called with the job's id when the coordinator accepts the request.
  std::function<void(uint64_t)> on_accepted;
  // Called with the job's exit report before FollowJob returns (e.g. --timing).
  std::function<void(const os::JobExit&)> on_exit;
  // gos-replay: the replayed job stopped for inspection (every rank stopped). FollowJob kills
  // the job once this returns, and goes on until its exit.
  std::function<void(const os::ReplayStopped&)> on_replay_stopped;
  // When the coordinator goes away while the job has a committed epoch: a coordinator started
  // again restarts the job from it if the job has automatic restarts left (gos-run
  // --restart-on-failure). FollowJob then waits up to reattach_wait for a coordinator to
  // answer `reconnect` (a new connection to the same place) and attaches to the job there
  // (kAttach), going on with its output and exit. Unset (or a zero wait): it returns 255.
  std::function<StatusOr<std::unique_ptr<os::Channel>>()> reconnect;
  std::chrono::milliseconds reattach_wait{0};
  // The job comes from a checkpoint (gos-restart, gos-attach): it has one even before this
  // client sees an epoch committed.
  bool restored = false;
};

// Waits until the user is done: a line or end of file on stdin, or SIGINT/SIGTERM/SIGHUP.
void WaitForUser();

// Installs SIGINT/SIGTERM/SIGHUP handling (once Ctrl-C forwards SIGINT to every rank; twice
// within a second kills the job) and SIGPIPE ignoring. Call before connecting.
bool InstallFollowSignals();

// Reads frames from ch until the job's exit: output to stdout/stderr, notices and errors to
// stderr, stdin forwarded. Returns the job's exit code (2 when the request was refused before
// a job was accepted, 255 when the coordinator went away and did not come back; see
// FollowOptions::reconnect).
int FollowJob(os::Channel* ch, const FollowOptions& o);

}  // namespace gos::tools

#endif  // GOS_TOOLS_FOLLOW_H_
