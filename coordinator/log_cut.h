// What a restart does to a recorded job's replay log (docs/specs/replay.md, "Restarted jobs"):
// the log must describe the run that produces the job's outcome, so it is cut back to the
// checkpoint the job restarts from, and the restored run's log is appended after it.
#ifndef GOS_COORDINATOR_LOG_CUT_H_
#define GOS_COORDINATOR_LOG_CUT_H_

#include <cstdint>

#include "gos/replay/log.h"
#include "gos/status.h"
#include "gos/storage/checkpoints.h"
#include "gos/storage/replay.h"

namespace gos::coordinator {

// Cuts the log of job m.job back to checkpoint m (a committed epoch of it) and writes the
// restart mark, in one synced WriteBatch (storage::ReplayStore::Cut):
//   - the job stream after the epoch's checkpoint mark (replay::CutJobStream), then a restart
//     mark {m.epoch, strobe, now_us};
//   - rank r's decision stream after the bytes r had written into its record ring when it was
//     dumped: rec_head of its channel, read from the epoch's stored `gos-channel` file. Those
//     are whole records, and the decisions the rank held unwritten in its memory were dumped
//     with it: the restored rank writes them, right after, as the uninterrupted rank would
//     have;
//   - rank r's timeline after the mark's step count.
// Other streams (the recorded input) are left as they are. Returns the restart mark written.
// NOT_FOUND if the job has no job stream (nothing was recorded, or the log was pruned);
// DATA_LOSS or FAILED_PRECONDITION, naming the job, epoch, rank and stream, when the log cannot
// be continued consistently (a stream shorter than the checkpoint, a channel that is not the
// rank's); the log is then unchanged.
StatusOr<replay::RestartMark> CutLogForRestart(storage::CheckpointStore* store,
                                               storage::ReplayStore* logs,
                                               const storage::EpochManifest& m, uint64_t strobe,
                                               int64_t now_us);

// The zstd level of the segments a cut re-encodes (the nodeagents' level).
inline constexpr int kLogCutZstdLevel = 9;

}  // namespace gos::coordinator

#endif  // GOS_COORDINATOR_LOG_CUT_H_
