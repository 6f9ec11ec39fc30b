// gos-attach: follow a job that no client follows (sattach-like), e.g. one a restarted
// coordinator restarted by itself from its newest checkpoint.
#include <cstdio>

#include "client.h"
#include "follow.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-attach [options] JOB

Follows JOB like gos-run: its output (what it wrote since it was restarted, up to 1 MiB kept
for this, then as it comes), stdin to rank 0, Ctrl-C, and its exit code. For a job no client
follows: one that a coordinator restarted from its newest checkpoint when it started again
after going away while the job ran (gos-run --restart-on-failure), and whose gos-run stopped
waiting for it (see gos-run --reattach). A job that is over gives its end at once. As with
gos-run, the job is killed if gos-attach goes away before it ends. Only the job's owner or
root may attach.

options:
  -l, --label             prefix every output line with its rank ("3: ...")
  -o, --output PATTERN    ranks' stdout to files (%t = rank, %j = job id), as with gos-run
  -e, --error PATTERN     ranks' stderr likewise                   (default: with stdout)
      --reattach DUR      when the coordinator goes away, wait up to DUR for it to come
                          back and follow the job there, as gos-run does   (default 5m)
  -h, --help              this text
Exit code: the job's, as for gos-run; 2 when the attach is refused (no such job, not the
owner, followed by another client) - the message says why.
)";

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-attach"); rc >= 0) return rc;
  FollowOptions fo;
  fo.tool = "gos-attach";
  std::chrono::milliseconds reattach = ToolConfig().reattach;
  os::Flags flags(argc, argv, kUsage);
  flags.Bool("-l|--label", &fo.label);
  flags.String("-o|--output", &fo.output);
  flags.String("-e|--error", &fo.error);
  flags.Duration("--reattach", &reattach);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  uint64_t job = 0;
  if (!ParseJobArg("gos-attach", flags.positional(), &job)) return 2;
  if (!InstallFollowSignals()) return 1;
  const std::string address = FindCoordinator();
  if (address.empty()) {
    std::fprintf(stderr, "gos-attach: no coordinator is running\n");
    return 1;
  }
  auto ch = ConnectCoordinator(address);
  if (!ch.ok()) {
    std::fprintf(stderr, "gos-attach: %s\n", ch.status().message().c_str());
    return 1;
  }
  if (Status s = (*ch)->Send(os::Frame::kAttach, os::EncodeU64(job)); !s.ok()) {
    std::fprintf(stderr, "gos-attach: %s\n", s.message().c_str());
    return 1;
  }
  fo.reconnect = [address] { return ConnectCoordinator(address); };
  fo.reattach_wait = reattach;
  fo.restored = true;
  return FollowJob(ch->get(), fo);
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
