// Replay logs in the coordinator's database (column family "replay"; key and value formats in
// docs/specs/replay-log.md). A job's log is a set of streams (gos/replay/log.h), each an
// ordered list of opaque segments; this store keeps them, it does not parse them.
#ifndef GOS_STORAGE_REPLAY_H_
#define GOS_STORAGE_REPLAY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gos/status.h"

namespace gos::storage {

struct ReplayStreamStats {
  uint64_t segments = 0;
  uint64_t bytes = 0;  // stored bytes (segments as given)
};

// One stream's new end (a restart cuts a log back to a checkpoint: replay/log.h, CutJobStream
// and its siblings): the stream keeps its first `keep` segments, loses the later ones, and
// gets `tail` after them, as segments keep, keep + 1, ...
struct ReplayStreamCut {
  uint32_t stream = 0;
  uint64_t keep = 0;
  std::vector<std::string> tail;
};

class ReplayStore {
 public:
  virtual ~ReplayStore() = default;
  // Appends a segment after the stream's last one. Not synced on its own (Sync does, and any
  // later synced write covers it): a crash may lose the tail of a log, never reorder it.
  virtual Status Append(uint64_t job, uint32_t stream, std::span<const uint8_t> segment) = 0;
  virtual Status Sync() = 0;
  // The job's streams, ascending (empty if it has no log).
  virtual StatusOr<std::vector<uint32_t>> Streams(uint64_t job) = 0;
  // Every segment of one stream, in order.
  virtual StatusOr<std::vector<std::string>> Read(uint64_t job, uint32_t stream) = 0;
  // Per stream of the job.
  virtual StatusOr<std::map<uint32_t, ReplayStreamStats>> Stats(uint64_t job) = 0;
  // All jobs with a log: job -> total stored bytes.
  virtual StatusOr<std::map<uint64_t, uint64_t>> Jobs() = 0;
  // The jobs with a log, ascending: one seek per job, no segment read.
  virtual StatusOr<std::vector<uint64_t>> JobIds() = 0;
  // Removes the job's whole log (synced).
  virtual Status DeleteJob(uint64_t job) = 0;
  // Applies every cut to the job's streams in one synced WriteBatch: after a crash the log is
  // wholly as before or wholly cut, never torn. Streams without a cut are left alone; a cut of
  // a stream that has no segments adds its tail. Appends to a cut stream go after its tail.
  virtual Status Cut(uint64_t job, std::span<const ReplayStreamCut> cuts) = 0;
};

struct PrunedLogs {
  std::vector<uint64_t> jobs;  // whose logs were removed, ascending
  uint64_t bytes = 0;          // their stored bytes
};

// Retention: removes the logs of all but the `keep` most recent jobs (job ids grow with
// time), never the log of a job in `in_use` (still recording, or being replayed).
// keep == 0 keeps everything.
StatusOr<PrunedLogs> PruneLogs(ReplayStore* store, size_t keep, const std::set<uint64_t>& in_use);

}  // namespace gos::storage

#endif  // GOS_STORAGE_REPLAY_H_
