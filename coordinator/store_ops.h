// The admin operations of gos-store on a checkpoint store, rendered as text: run by the
// coordinator when it holds the database, or by gos-store itself when no coordinator does.
#ifndef GOS_COORDINATOR_STORE_OPS_H_
#define GOS_COORDINATOR_STORE_OPS_H_

#include <functional>
#include <string>

#include "gos/storage/checkpoints.h"
#include "gos/storage/replay.h"

namespace gos::coordinator {

// op: "stats", "verify" or "gc". progress gets a line now and then during verify. Returns the
// report; a report that starts with "error:" means the operation failed or found problems.
// stats also counts the replay logs when replay is given.
std::string RunStoreOp(storage::CheckpointStore* store, const std::string& op,
                       const std::function<void(const std::string&)>& progress,
                       storage::ReplayStore* replay = nullptr);

}  // namespace gos::coordinator

#endif  // GOS_COORDINATOR_STORE_OPS_H_
