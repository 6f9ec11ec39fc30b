// gos-ckpt: checkpoint a running job now, or list a job's checkpoint epochs.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "client.h"
#include "gos/coordinator/store_ops.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "gos/storage/tables.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-ckpt [--list] JOB

Takes a checkpoint of the running job JOB now: at the next quiescent strobe every rank is
frozen and dumped with CRIU, the job resumes, and the new chunks are stored in the
coordinator's checkpoint store; prints progress and the committed epoch.
With --list, prints JOB's checkpoint settings (its --checkpoint interval, --keep and the
automatic restarts it has left: a gos-restart goes on with them) and its stored epochs:
logical size (the bytes of the epoch's files: CRIU images, which leave out pages that hold
only zeros, and gos's own), new chunk bytes (before and after compression), how long the job
was paused and how long the epoch took.
Only the job's owner or root may do either. With no coordinator running, --list reads the
store the last local cluster left in the state dir ($GOS_STATE_DIR, $XDG_STATE_HOME/gos or
~/.local/state/gos), as gos-ps and gos-store do.

options:
      --list        list the stored epochs instead of taking one
      --timeout DUR give up waiting after DUR                            (default 10m)
  -h, --help        this text
Exit code: 0 on success, 1 if the checkpoint failed or the job is unknown, 2 for bad usage.
)";

// --list with no coordinator: straight from the state dir's database.
int ListOffline(uint64_t job) {
  const std::string db = StateDir() + "/db";
  auto tables = storage::Tables::Open(db);
  if (!tables.ok()) {
    std::fprintf(stderr, "gos-ckpt: no coordinator is running, and %s\n",
                 tables.status().ToString().c_str());
    return 1;
  }
  auto rec = (*tables)->GetJob(job);
  if (!rec.ok() || !rec->has_value()) {
    std::fprintf(stderr, "gos-ckpt: no job %llu in %s\n", (unsigned long long)job, db.c_str());
    return 1;
  }
  if (::getuid() != 0 && ::getuid() != (*rec)->uid) {
    std::fprintf(stderr,
                 "gos-ckpt: job %llu belongs to %s; only its owner or root may list its "
                 "checkpoints\n",
                 (unsigned long long)job, (*rec)->user.c_str());
    return 1;
  }
  auto epochs = (*tables)->checkpoints()->ListEpochs(job, /*with_files=*/true);  // DumpKind
  if (!epochs.ok()) {
    std::fprintf(stderr, "gos-ckpt: %s\n", epochs.status().ToString().c_str());
    return 1;
  }
  std::printf("job %llu: %s\n", (unsigned long long)job,
              coordinator::RenderCheckpointSettings(**rec, 0).c_str());
  std::fputs(coordinator::RenderEpochList(job, *epochs).c_str(), stdout);
  return 0;
}

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-ckpt"); rc >= 0) return rc;
  bool list = false;
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  os::Flags flags(argc, argv, kUsage);
  flags.Bool("--list", &list);
  flags.Duration("--timeout", &timeout);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  if (timeout <= std::chrono::milliseconds(0)) {
    std::fprintf(stderr, "gos-ckpt: --timeout must be longer than 0\n");
    return 2;
  }
  uint64_t job = 0;
  if (!ParseJobArg("gos-ckpt", flags.positional(), &job)) return 2;
  std::string address = FindCoordinator();
  if (address.empty() && list) return ListOffline(job);
  if (address.empty()) {
    std::fprintf(stderr,
                 "gos-ckpt: no coordinator is running, so job %llu is not running either (set "
                 "GOS_COORDINATOR or start one with gos-cluster up)\n",
                 (unsigned long long)job);
    return 1;
  }
  auto ch = ConnectCoordinator(address);
  if (!ch.ok()) {
    std::fprintf(stderr, "gos-ckpt: %s\n", ch.status().message().c_str());
    return 1;
  }
  Status s =
      (*ch)->Send(list ? os::Frame::kListEpochs : os::Frame::kCheckpointNow, os::EncodeU64(job));
  if (!s.ok()) {
    std::fprintf(stderr, "gos-ckpt: %s\n", s.message().c_str());
    return 1;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    auto f = (*ch)->Receive(deadline);
    if (!f.ok()) {
      std::fprintf(stderr, "gos-ckpt: job %llu: %s\n", (unsigned long long)job,
                   f.status().message().c_str());
      return 1;
    }
    auto text = os::DecodeText(f->payload);
    std::string t = text.ok() ? *text : std::string();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    switch (f->type) {
      case os::Frame::kPhase:
        std::fprintf(stderr, "gos-ckpt: [%6.2fs] %s\n", secs, t.c_str());
        break;
      case os::Frame::kOk:
        if (list) {
          std::fputs(t.c_str(), stdout);
        } else {
          std::printf("gos-ckpt: [%6.2fs] %s\n", secs, t.c_str());
        }
        return 0;
      case os::Frame::kError:
        std::fprintf(stderr, "gos-ckpt: %s\n", t.c_str());
        return 1;
      default:
        break;
    }
  }
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
