// gos-store: the admin's view of the checkpoint store (stats, verify, gc).
#include <chrono>
#include <cstdio>
#include <string>

#include "client.h"
#include "gos/coordinator/store_ops.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "gos/storage/tables.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-store [--db DIR] stats|verify|gc [--keep-logs N]

The checkpoint store: content-addressed, zstd-compressed chunks and per-epoch manifests in
the coordinator's RocksDB database.
  stats    epochs, chunks, logical / deduplicated / compressed sizes; replay logs (jobs, bytes)
  verify   read every chunk every epoch names, check it against its hash and check the
           reference counts; lists each problem with job, epoch, rank, file and chunk
  gc       remove chunks no epoch references (the coordinator also does this after each
           commit and abort); with --keep-logs N also the replay logs of all but the N
           most recent jobs (never of a job still running or being replayed; the
           coordinator keeps 1000 by default, gos-coordinator --keep-logs)
With a coordinator running, it does the work (it holds the database); otherwise gos-store
opens the database itself: --db DIR, default the local cluster's ($GOS_STATE_DIR/db).
Root only.

options:
      --db DIR    the database directory when no coordinator runs
      --keep-logs N  gc: replay logs to keep (of the N most recent jobs; N >= 1)
  -h, --help      this text
Exit code: 0 on success, 1 if the operation failed or verify found problems, 2 bad usage.
)";

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-store"); rc >= 0) return rc;
  std::string db;
  uint32_t keep_logs = 0;  // 0: not given (no pruning)
  os::Flags flags(argc, argv, kUsage);
  flags.String("--db", &db);
  flags.U32("--keep-logs", &keep_logs, 1);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "gos-store: give one operation: stats, verify or gc (see --help)\n");
    return 2;
  }
  const std::string op = flags.positional()[0];
  if (op != "stats" && op != "verify" && op != "gc") {
    std::fprintf(stderr, "gos-store: unknown operation %s (stats, verify or gc)\n", op.c_str());
    return 2;
  }
  if (keep_logs > 0 && op != "gc") {
    std::fprintf(stderr, "gos-store: --keep-logs goes with gc\n");
    return 2;
  }
  coordinator::StoreRequest request{op, keep_logs};
  std::string address = db.empty() ? FindCoordinator() : std::string();
  if (!address.empty()) {
    auto ch = ConnectCoordinator(address);
    if (!ch.ok()) {
      std::fprintf(stderr, "gos-store: %s\n", ch.status().message().c_str());
      return 1;
    }
    Status s =
        (*ch)->Send(os::Frame::kStore, os::EncodeText(coordinator::EncodeStoreRequest(request)));
    while (s.ok()) {
      auto f = (*ch)->Receive(std::chrono::steady_clock::now() + std::chrono::hours(1));
      if (!f.ok()) {
        s = f.status();
        break;
      }
      auto text = os::DecodeText(f->payload);
      std::string t = text.ok() ? *text : std::string();
      if (f->type == os::Frame::kPhase) {
        std::fprintf(stderr, "gos-store: %s\n", t.c_str());
      } else if (f->type == os::Frame::kOk) {
        std::fputs(t.c_str(), stdout);
        return 0;
      } else if (f->type == os::Frame::kError) {
        std::fputs(t.rfind("error: ", 0) == 0 ? t.c_str() + 7 : t.c_str(), stderr);
        if (!t.empty() && t.back() != '\n') std::fputc('\n', stderr);
        return 1;
      }
    }
    std::fprintf(stderr, "gos-store: %s\n", s.message().c_str());
    return 1;
  }
  if (db.empty()) db = StateDir() + "/db";
  auto tables = storage::Tables::Open(db);
  if (!tables.ok()) {
    std::fprintf(stderr, "gos-store: %s\n", tables.status().ToString().c_str());
    return 1;
  }
  std::string out = coordinator::RunStoreOp(
      (*tables)->checkpoints(), request,
      [](const std::string& l) { std::fprintf(stderr, "gos-store: %s\n", l.c_str()); },
      (*tables)->replay());
  if (out.rfind("error: ", 0) == 0) {
    std::fputs(out.c_str() + 7, stderr);
    return 1;
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
