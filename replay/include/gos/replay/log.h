// The replay log of a job (docs/specs/replay-log.md): what a recorded run decided, so that a
// rerun can be made to decide the same (DESIGN.md, "Record and replay").
//
// A job's log is a set of streams, each an ordered list of segments (a header plus a zstd
// frame), stored in the coordinator's RocksDB (storage/ReplayStore):
//   - kJobStream: the job's steps, written by the nodeagent of the job's first node. A step is
//     one BCS slice of the job (a strobe at which its row ran and it was not held): which
//     descriptors each rank had posted by then (the matcher's whole input, so every match and
//     wildcard resolution follows from it), plus checkpoint marks and how the run ended.
//   - RankStream(r): rank r's own decisions (test/probe outcomes, wtime values), bytes the
//     rank's library wrote into its channel's record ring; opaque here.
//   - TimelineStream(r): per step, how long rank r was blocked in communication since the
//     previous step (for --export-trace).
#ifndef GOS_REPLAY_LOG_H_
#define GOS_REPLAY_LOG_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/status.h"

namespace gos::replay {

inline constexpr uint32_t kJobStream = 0;
inline constexpr uint32_t RankStream(uint32_t rank) { return 1 + rank; }
inline constexpr uint32_t TimelineStream(uint32_t rank) { return 0x40000000u + rank; }
// What gos-run forwarded to rank 0's stdin, in bytes segments (written by the coordinator).
inline constexpr uint32_t kStdinStream = 0x20000000u;
inline constexpr bool IsRankStream(uint32_t stream) {
  return stream >= RankStream(0) && stream < kStdinStream;
}

// A kStdinStream segment's content: one piece of input (empty = end of input), as the
// coordinator received it.
std::string EncodeStdinPiece(std::string_view bytes);
// The pieces of a kStdinStream, in order (the segments decoded and concatenated).
StatusOr<std::vector<std::string>> DecodeStdinPieces(std::span<const std::string> segments);

// The fields of a descriptor that matching depends on (not the request id or buffer address,
// which differ between runs).
struct DescKey {
  uint32_t op = 0;
  int32_t peer = 0;
  int32_t tag = 0;
  uint32_t flags = 0;
  uint32_t group_size = 0;
  uint64_t context = 0;
  uint64_t len = 0;
  friend bool operator==(const DescKey&, const DescKey&) = default;
};
DescKey KeyOf(const bcs::Descriptor& d);
// "MPI_Send-like send to rank 3, tag 7, 64 bytes, context 0x..." for divergence reports.
std::string Describe(const DescKey& k);

struct Step {
  uint64_t strobe = 0;  // the recorded run's strobe number
  // Unix microseconds at which the recording node applied it. Stored in whole milliseconds:
  // a decoded step's time is a multiple of 1000 (the floor of the recorded one).
  int64_t time_us = 0;
  std::vector<uint32_t> counts;  // per world rank: descriptors it posted that this step took
  std::vector<DescKey> descs;    // those descriptors: rank 0's in order, then rank 1's, ...
  uint32_t row = 0;              // the gang-matrix row the strobe ran
  bool early = false;            // the strobe came before its quantum was over
};

struct CheckpointMark {
  uint64_t epoch = 0;
  uint64_t steps = 0;  // steps taken before the checkpoint (the epoch resumes at step `steps`)
  uint64_t strobe = 0;
  int64_t time_us = 0;
};

enum class EndKind : uint8_t {
  kCompleted = 1,  // every rank exited
  kFailed = 2,     // a rank failed or aborted, or a node died
};

struct End {
  EndKind kind = EndKind::kCompleted;
  int32_t exit_code = 0;
  int32_t rank = -1;   // the failing rank, or -1
  uint64_t steps = 0;  // steps taken by then
  int64_t time_us = 0;
  std::string message;
};

// The job was restarted from a checkpoint (gos-restart, gos-run --restart-on-failure) and its
// log cut back to that checkpoint's mark (CutJobStream): the steps after this mark are the
// restored run's. Written by the coordinator, after the checkpoint's mark.
struct RestartMark {
  uint64_t epoch = 0;          // the checkpoint the job was restarted from
  uint64_t steps = 0;          // steps before it: the restored run's first step is step `steps`
  uint64_t strobe = 0;         // the coordinator's strobe when it cut the log for the restart
  uint64_t dropped_steps = 0;  // steps of the lost run after the checkpoint, removed by the cut
  int64_t time_us = 0;         // unix microseconds of the cut
};

struct JobLog {
  uint32_t world_size = 0;
  std::vector<Step> steps;
  std::vector<CheckpointMark> checkpoints;
  std::vector<RestartMark> restarts;  // in log order (a job restarted twice has two)
  std::optional<End> end;
};

// Limits of a segment; a decoder refuses a segment beyond them (DATA_LOSS), and an encoder
// asked to go beyond them aborts (a caller bug: flush more often).
inline constexpr uint64_t kMaxSegmentRaw = 256u << 20;  // payload bytes before compression
inline constexpr uint32_t kMaxWorldSize = 1u << 20;
// Steps x world_size of one kJobStream segment (what a decoder allocates for the counts):
// flush before pending_steps() * world_size reaches it, whatever pending_bytes() says (empty
// steps cost ~2 raw bytes each).
inline constexpr uint64_t kMaxSegmentCounts = 1u << 26;
inline constexpr size_t kMaxEndMessage = 0xffff;  // End::message is cut to this many bytes

// Appends records and cuts them into segments of kJobStream. Each segment decodes on its own
// (strobes and times restart from absolute values). Not thread-safe.
class JobLogWriter {
 public:
  // world_size <= kMaxWorldSize.
  explicit JobLogWriter(uint32_t world_size);
  // counts.size() must be world_size, descs.size() the sum of counts, and the pending steps
  // stay within kMaxSegmentCounts (checked: a caller breaking it is a bug, and the process
  // aborts).
  void AddStep(const Step& step);
  void AddCheckpoint(const CheckpointMark& mark);
  void AddRestart(const RestartMark& mark);
  void AddEnd(const End& end);
  // Raw (uncompressed) bytes added since the last Flush.
  size_t pending_bytes() const;
  // Steps added since the last Flush.
  uint64_t pending_steps() const;
  // One segment holding everything added since the last Flush (empty string if nothing).
  std::string Flush(int zstd_level = 3);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Segments of kJobStream, in order -> the log. DATA_LOSS names the segment and what is wrong
// (including segments of different world sizes). If several segments hold an End (a failed
// run restarted from a checkpoint), the last one is the log's end. No segments -> an empty log
// of world size 0.
StatusOr<JobLog> DecodeJobLog(std::span<const std::string> segments);

// Segments of a RankStream: the raw bytes, compressed / all segments' bytes concatenated.
std::string EncodeBytesSegment(std::string_view bytes, int zstd_level = 3);
StatusOr<std::string> DecodeBytesSegments(std::span<const std::string> segments);

// Segments of a TimelineStream: blocked microseconds per step, stored to the nearest
// millisecond (decoded values are multiples of 1000).
std::string EncodeTimelineSegment(std::span<const uint32_t> blocked_us, int zstd_level = 3);
StatusOr<std::vector<uint32_t>> DecodeTimelineSegments(std::span<const std::string> segments);

// ---- Cutting a log back to a checkpoint, for a restart (docs/specs/replay.md, "Restarted
// jobs"). Each function reads a stream's segments and says how to cut it: the stream keeps its
// first `keep` segments unchanged, and `tail` (re-encoded segments, possibly none) replaces all
// the later ones. The caller stores every stream's cut at once (storage::ReplayStore::Cut).
struct StreamCut {
  size_t keep = 0;
  std::vector<std::string> tail;
};

// kJobStream: keeps every step and mark up to and including the last checkpoint mark of
// restart->epoch, drops the rest (the lost run's), and writes `*restart` after the mark.
// Fills restart->steps (the mark's) and restart->dropped_steps; the caller sets epoch, strobe
// and time. NOT_FOUND if no segment has a mark of that epoch; DATA_LOSS if a segment does not
// decode or the steps before the mark are not as many as the mark says.
StatusOr<StreamCut> CutJobStream(std::span<const std::string> segments, RestartMark* restart,
                                 int zstd_level = 3);
// A RankStream (or any bytes stream): keeps its first `bytes` bytes (a cut inside a segment
// re-encodes that segment's head). DATA_LOSS if the stream holds fewer bytes.
StatusOr<StreamCut> CutBytesStream(std::span<const std::string> segments, uint64_t bytes,
                                   int zstd_level = 3);
// A TimelineStream: keeps its first `entries` entries. A stream that holds fewer (a node died
// before shipping them) is padded with zero entries up to `entries`, so that later entries
// stay aligned with their steps.
StatusOr<StreamCut> CutTimelineStream(std::span<const std::string> segments, uint64_t entries,
                                      int zstd_level = 3);

// Raw and stored size of a segment (for benchmarks and gos-store stats); DATA_LOSS if it is
// not a segment.
struct SegmentSize {
  uint64_t raw = 0, stored = 0;
};
StatusOr<SegmentSize> SizeOfSegment(std::string_view segment);

}  // namespace gos::replay

#endif  // GOS_REPLAY_LOG_H_
