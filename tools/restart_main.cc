// gos-restart: bring a job back from one of its checkpoints on the live nodes.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "tools/client.h"
#include "tools/follow.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-restart [options] JOB

Restarts JOB from its newest checkpoint epoch (or --epoch E): the coordinator maps its ranks
onto live nodes, ships each node its ranks' images (every chunk is checked against its hash;
a node that still holds its own dump of a rank restores it from there, see --from-store),
every rank is restored with CRIU into a fresh PID namespace, frozen, and the job resumes when
all ranks are back. Its output continues here, as with gos-run, from the checkpoint on.
A job still running must be killed first. Only the job's owner or root may restart it.

options:
      --epoch E           restart from epoch E (see gos-ckpt --list JOB)   (default newest)
      --exclude NODE      do not use this node id (repeatable, or a comma list)
      --checkpoint[=DUR]  keep checkpointing the restarted job every DUR     (default 60s)
      --from-store        ship every rank's images from the store; by default a rank placed
                          on a node that still holds its own dump of that epoch (checked
                          chunk by chunk against the epoch) is restored from there
  -l, --label             prefix every output line with its rank ("3: ...")
  -h, --help              this text
Exit code: the job's, as for gos-run; 2 when the restart is refused (no such job or epoch,
not the owner, a corrupted chunk, ...) - the message says why.
)";

int Main(int argc, char** argv) {
  uint32_t epoch = 0;
  std::vector<std::string> exclude_args;
  std::string checkpoint_flag;
  bool checkpoint = false, label = false, from_store = false;
  os::Flags flags(argc, argv, kUsage);
  flags.Bool("--from-store", &from_store);
  flags.U32("--epoch", &epoch);
  flags.Strings("--exclude", &exclude_args);
  flags.OptionalValue("--checkpoint", &checkpoint, &checkpoint_flag);
  flags.Bool("-l|--label", &label);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  uint64_t job = 0;
  if (!ParseJobArg("gos-restart", flags.positional(), &job)) return 2;
  os::RestartRequest req;
  req.job = job;
  req.epoch = epoch;
  req.from_store = from_store;
  for (const std::string& list : exclude_args) {
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      std::string one = list.substr(start, comma - start);
      char* e = nullptr;
      unsigned long n = std::strtoul(one.c_str(), &e, 10);
      if (one.empty() || *e != '\0' || n == 0) {
        std::fprintf(stderr, "gos-restart: --exclude %s is not a node id\n", one.c_str());
        return 2;
      }
      req.exclude.push_back(static_cast<uint32_t>(n));
      start = comma + 1;
    }
  }
  if (checkpoint) {
    std::chrono::microseconds us{60'000'000};
    if (!checkpoint_flag.empty() && !os::ParseDuration(checkpoint_flag, &us, 1'000'000)) us = {};
    if (us.count() < 1000) {
      std::fprintf(stderr, "gos-restart: --checkpoint=%s is not a duration like 30s\n",
                   checkpoint_flag.c_str());
      return 2;
    }
    req.checkpoint_ms = us.count() / 1000;
  }
  if (!InstallFollowSignals()) return 1;
  std::string address = FindCoordinator();
  if (address.empty()) {
    std::fprintf(stderr,
                 "gos-restart: no coordinator is running (set GOS_COORDINATOR or start one "
                 "with gos-cluster up)\n");
    return 1;
  }
  auto ch = ConnectCoordinator(address);
  if (!ch.ok()) {
    std::fprintf(stderr, "gos-restart: %s\n", ch.status().message().c_str());
    return 1;
  }
  Status s = (*ch)->Send(os::Frame::kRestart, os::Encode(req));
  if (!s.ok()) {
    std::fprintf(stderr, "gos-restart: %s\n", s.message().c_str());
    return 1;
  }
  FollowOptions fo;
  fo.tool = "gos-restart";
  fo.label = label;
  return FollowJob(ch->get(), fo);
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
