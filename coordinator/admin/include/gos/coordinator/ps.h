// The status view of the cluster (gos-ps) built from the job and node tables: used by the
// coordinator for live answers and by gos-ps to read the tables when no coordinator runs.
#ifndef GOS_COORDINATOR_PS_H_
#define GOS_COORDINATOR_PS_H_

#include <cstdint>
#include <vector>

#include "gos/os/messages.h"
#include "gos/storage/checkpoints.h"
#include "gos/storage/tables.h"

namespace gos::coordinator {

// jobs ascending by id. now_ms: unix ms, for the elapsed time of running jobs. Without a
// live coordinator, nodes are shown down ("no coordinator running"). store: where each job's
// newest committed epoch is looked up (none shown without it).
os::PsReply BuildPsReply(const std::vector<storage::JobRecord>& jobs,
                         const std::vector<storage::NodeRecord>& nodes, int64_t now_ms, bool live,
                         storage::CheckpointStore* store);

}  // namespace gos::coordinator

#endif  // GOS_COORDINATOR_PS_H_
