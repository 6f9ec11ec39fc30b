// gos-restart: bring a job back from one of its checkpoints on the live nodes.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "client.h"
#include "follow.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "gos/storage/tables.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-restart [options] JOB

Restarts JOB from its newest checkpoint epoch (or --epoch E): the coordinator maps its ranks
onto live nodes, ships each node its ranks' images (every chunk is checked against its hash;
a node that still holds its own dump of a rank restores it from there, see --from-store),
every rank is restored with CRIU into a fresh PID namespace, frozen, and the job resumes when
all ranks are back. Its output continues here, as with gos-run, from the checkpoint on.
The restarted job keeps the checkpoint settings stored with it: its --checkpoint interval
and --keep (gos-run's, or those of its last restart; also after the coordinator restarted)
and the automatic restarts (gos-run --restart-on-failure) it has left. --checkpoint, --keep
and --no-checkpoint replace them, and are stored with the job in their place.
A job still running must be killed first. Only the job's owner or root may restart it.
With no coordinator running (the job ran on gos-run's embedded cluster), gos-restart starts a
local cluster from the same state dir, with as many nodes as the job had, and stops it
afterwards, as gos-run does.

options:
      --epoch E           restart from epoch E (see gos-ckpt --list JOB)   (default newest)
      --exclude NODES     do not use these node ids (as gos-ps shows them: 2, 1,3 or 2-4;
                          repeatable)
      --checkpoint[=DUR]  checkpoint the restarted job every DUR (default 60s) instead of
                          at its stored interval
      --no-checkpoint     take no periodic checkpoints of the restarted job
      --keep N            checkpoint epochs to keep instead of the job's stored --keep
      --from-store        ship every rank's images from the store; by default a rank placed
                          on a node that still holds its own dump of that epoch (checked
                          chunk by chunk against the epoch) is restored from there
      --reattach DUR      when the coordinator goes away, wait up to DUR for it to come
                          back and follow the job there, as gos-run does   (default 5m)
  -l, --label             prefix every output line with its rank ("3: ...")
  -o, --output PATTERN    ranks' stdout to files (%t = rank, %j = job id), as with gos-run
  -e, --error PATTERN     ranks' stderr likewise                   (default: with stdout)
  -h, --help              this text
Exit code: the job's, as for gos-run; 2 when the restart is refused (no such job or epoch,
not the owner, a corrupted chunk, ...) - the message says why.
)";

// How many nodes the job ran on, from the job table the last local cluster left in the state
// dir (the coordinator's database; nobody holds it while no coordinator runs).
StatusOr<uint32_t> JobNodes(uint64_t job) {
  const std::string db = StateDir() + "/db";
  GOS_ASSIGN_OR_RETURN(auto tables, storage::Tables::Open(db));
  GOS_ASSIGN_OR_RETURN(std::optional<storage::JobRecord> rec, tables->GetJob(job));
  if (!rec) return NotFoundError("there is no job " + std::to_string(job) + " in " + db);
  std::set<uint32_t> nodes(rec->rank_nodes.begin(), rec->rank_nodes.end());
  if (!nodes.empty()) return static_cast<uint32_t>(nodes.size());
  if (rec->nnodes != 0) return rec->nnodes;
  return std::min<uint32_t>(std::max<uint32_t>(rec->ntasks, 1), 4);
}

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-restart"); rc >= 0) return rc;
  uint32_t epoch = 0;
  std::vector<std::string> exclude_args;
  std::string checkpoint_flag;
  bool checkpoint = false, no_checkpoint = false, label = false, from_store = false;
  uint32_t keep = 0;  // 0: the job's stored --keep
  std::chrono::milliseconds reattach = ToolConfig().reattach;
  os::Flags flags(argc, argv, kUsage);
  flags.Duration("--reattach", &reattach);
  flags.Bool("--from-store", &from_store);
  flags.Bool("--no-checkpoint", &no_checkpoint);
  flags.U32("--keep", &keep, 1);
  flags.U32("--epoch", &epoch);
  flags.Strings("--exclude", &exclude_args);
  flags.OptionalValue("--checkpoint", &checkpoint, &checkpoint_flag);
  flags.Bool("-l|--label", &label);
  std::string output_pattern, error_pattern;
  flags.String("-o|--output", &output_pattern);
  flags.String("-e|--error", &error_pattern);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  uint64_t job = 0;
  if (!ParseJobArg("gos-restart", flags.positional(), &job)) return 2;
  os::RestartRequest req;
  req.job = job;
  req.epoch = epoch;
  req.from_store = from_store;
  req.keep = keep;
  if (checkpoint && no_checkpoint) {
    std::fprintf(stderr, "gos-restart: --checkpoint and --no-checkpoint contradict each other\n");
    return 2;
  }
  if (no_checkpoint) req.checkpoint_ms = os::RestartRequest::kNoCheckpoint;
  if (!ParseNodeListArgs("gos-restart", "--exclude", exclude_args, &req.exclude)) return 2;
  if (checkpoint) {
    std::chrono::microseconds us = ToolConfig().checkpoint.interval;
    if (!checkpoint_flag.empty() && !os::ParseDuration(checkpoint_flag, &us, 1'000'000)) us = {};
    if (us.count() < 1000) {
      std::fprintf(stderr, "gos-restart: --checkpoint=%s is not a duration like 30s\n",
                   checkpoint_flag.c_str());
      return 2;
    }
    req.checkpoint_ms = us.count() / 1000;
  }
  if (!InstallFollowSignals()) return 1;
  std::unique_ptr<LocalCluster> cluster;
  std::string address = FindCoordinator();
  if (address.empty()) {
    auto nodes = JobNodes(job);
    if (!nodes.ok()) {
      std::fprintf(stderr, "gos-restart: no coordinator is running, and %s\n",
                   nodes.status().message().c_str());
      return 2;
    }
    LocalClusterOptions lo;
    lo.nodes = *nodes;
    auto started = LocalCluster::Start(lo);
    if (!started.ok()) {
      std::fprintf(stderr, "gos-restart: cannot start a local cluster: %s\n",
                   started.status().message().c_str());
      return 1;
    }
    cluster = std::move(*started);
    address = cluster->socket();
    std::fprintf(stderr,
                 "gos-restart: no coordinator was running: started a local cluster of %u "
                 "nodes\n",
                 *nodes);
  }
  auto ch = ConnectCoordinator(address);
  int rc = 1;
  if (!ch.ok()) {
    std::fprintf(stderr, "gos-restart: %s\n", ch.status().message().c_str());
  } else if (Status s = (*ch)->Send(os::Frame::kRestart, os::Encode(req)); !s.ok()) {
    std::fprintf(stderr, "gos-restart: %s\n", s.message().c_str());
  } else {
    FollowOptions fo;
    fo.tool = "gos-restart";
    fo.label = label;
    fo.output = output_pattern;
    fo.error = error_pattern;
    if (!cluster) {  // a local cluster started here does not come back once it is gone
      fo.reconnect = [address] { return ConnectCoordinator(address); };
      fo.reattach_wait = reattach;
      fo.restored = true;
    }
    rc = FollowJob(ch->get(), fo);
  }
  if (ch.ok()) ch->reset();
  if (cluster && !cluster->WaitExit(std::chrono::seconds(10))) {
    std::fprintf(stderr, "gos-restart: the local cluster did not stop by itself; killed it\n");
  }
  return rc;
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
