// Chrome trace-event JSON of a recorded run (opens in Perfetto / chrome://tracing).
#ifndef GOS_REPLAY_TRACE_H_
#define GOS_REPLAY_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gos/replay/log.h"
#include "gos/status.h"

namespace gos::replay {

struct TraceDivergence {
  uint64_t strobe = 0;
  uint32_t rank = 0;
  std::string what;
};

struct TraceInput {
  uint64_t job = 0;
  const JobLog* log = nullptr;
  std::vector<uint32_t> rank_node;                // node of each world rank (lane names)
  std::vector<std::vector<uint32_t>> blocked_us;  // per rank, per step (may be shorter/empty)
  std::optional<TraceDivergence> divergence;
};

// The trace: one process per job, one thread (lane) per rank named "rank R (node N)"; per
// step interval a complete event ("X") "compute", "blocked" or "frozen"; a flow ("s"/"f") per
// matched message, from the sender's lane at the step its send was taken to the receiver's at
// the step it matched (matches are recomputed with the nodeagent's Matcher from the log); an
// instant event ("i") per checkpoint, for the end of a failed run, and for a divergence.
StatusOr<std::string> ExportTrace(const TraceInput& in);

}  // namespace gos::replay

#endif  // GOS_REPLAY_TRACE_H_
