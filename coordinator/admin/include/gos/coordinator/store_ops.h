// The admin operations of gos-store on a checkpoint store, rendered as text: run by the
// coordinator when it holds the database, or by gos-store itself when no coordinator does.
#ifndef GOS_COORDINATOR_STORE_OPS_H_
#define GOS_COORDINATOR_STORE_OPS_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gos/storage/checkpoints.h"
#include "gos/storage/manifest.h"
#include "gos/storage/replay.h"
#include "gos/storage/tables.h"

namespace gos::coordinator {

// A gos-store request as it travels to the coordinator: "stats", "verify", "gc", or
// "gc keep-logs=N" (also remove the replay logs of all but the N most recent jobs).
struct StoreRequest {
  std::string op;
  uint64_t keep_logs = 0;  // gc: 0 = leave the replay logs alone
};
std::string EncodeStoreRequest(const StoreRequest& r);
// False for anything else.
bool ParseStoreRequest(const std::string& text, StoreRequest* r);

// progress gets a line now and then during verify. Returns the report; a report that starts
// with "error:" means the operation failed or found problems. stats also counts the replay
// logs when replay is given; gc with keep_logs prunes them (never those of logs_in_use).
std::string RunStoreOp(storage::CheckpointStore* store, const StoreRequest& request,
                       const std::function<void(const std::string&)>& progress,
                       storage::ReplayStore* replay = nullptr,
                       const std::set<uint64_t>& logs_in_use = {});

// "12.3 MiB".
std::string Mib(uint64_t bytes);

// How the epoch's ranks were dumped: "full", or "incremental R/N" when R of its N ranks' dumps
// were incremental (docs/specs/checkpoint.md, "Incremental dumps"). Needs m's files.
std::string DumpKind(const storage::EpochManifest& m);

// gos-ckpt --list's table of a job's epochs (ListEpochs with files: DumpKind), or "job J has no
// checkpoint". Rendered by the coordinator, or by gos-ckpt itself when no coordinator runs.
std::string RenderEpochList(uint64_t job, const std::vector<storage::EpochManifest>& epochs);

// Automatic restarts (gos-run --restart-on-failure) the job has left.
uint32_t RestartsLeft(const storage::JobRecord& rec);

// A job's stored checkpoint settings, as gos-ckpt --list and gos-restart show them:
// "checkpoints every 30s, keeps 3 epochs, 1 of 2 automatic restarts left" (or "no periodic
// checkpoints, ..."). default_keep is the coordinator's --keep, for a job without its own;
// 0 when it is not known (no coordinator runs).
std::string RenderCheckpointSettings(const storage::JobRecord& rec, uint32_t default_keep);

}  // namespace gos::coordinator

#endif  // GOS_COORDINATOR_STORE_OPS_H_
