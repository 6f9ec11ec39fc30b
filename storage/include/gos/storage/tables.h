// The coordinator's durable state: the job table and the node table, in one RocksDB database,
// whose other column families hold the checkpoint store (checkpoints()) and the replay logs
// (replay()).
//
// Layout and value formats: docs/specs/storage-tables.md. Every write is synced (WAL fsync)
// before it is acknowledged, so a process killed at any point loses nothing a call returned
// OK for. Values are read back through bounds-checked decoders: a corrupt, truncated or
// unknown-version value is a DATA_LOSS error naming its key, never a crash.
#ifndef GOS_STORAGE_TABLES_H_
#define GOS_STORAGE_TABLES_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gos/status.h"
#include "gos/storage/checkpoints.h"
#include "gos/storage/replay.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace gos::storage {

enum class JobState : uint8_t {
  kQueued = 0,
  kStaging = 1,
  kRunning = 2,
  kCompleted = 3,
  kFailed = 4,
  kKilled = 5,
};

// "queued", "staging", "running", "completed", "failed", "killed" ("unknown" otherwise).
const char* JobStateName(JobState s);
// True for completed, failed and killed.
bool JobStateIsFinal(JobState s);

struct JobRecord {
  uint64_t id = 0;
  uint32_t uid = 0, gid = 0;
  std::string user;               // user name at submit time
  std::vector<std::string> argv;  // argv[0] = program path as given
  std::string cwd;
  JobState state = JobState::kQueued;
  uint32_t ntasks = 0;
  uint32_t nnodes = 0;               // nodes requested (0 = any)
  uint32_t ranks_per_node = 0;       // requested (0 = auto)
  int32_t row = -1;                  // gang-matrix row while placed
  std::vector<uint32_t> rank_nodes;  // node id of each rank, once placed
  int32_t exit_code = -1;    // job's exit code once final (highest rank code, or 128+signal)
  int32_t failed_rank = -1;  // rank that gave exit_code (or -1)
  int32_t failed_node = -1;  // node of that rank, or the node whose loss failed the job
  std::string message;       // human reason when failed/killed ("node 3 is down: ...")
  int64_t submit_ms = 0, start_ms = 0, end_ms = 0;  // unix epoch milliseconds, 0 = not yet
  int64_t time_limit_ms = 0;                        // 0 = none
  // Added after version 1's first fields (absent in older records: empty / true):
  std::vector<std::string> env;    // the environment the job ran with
  std::vector<std::string> paths;  // absolute path of the executable and each staged file
  bool recorded = true;            // its decisions were recorded (gos-replay can rerun it)
  uint64_t replay_of = 0;          // this job replays that recorded job
  // Added in version 3 (absent in older records: true):
  bool cpu_bind = true;  // its ranks are bound to CPUs (gos-run --cpu-bind; restarts keep it)
  // Added in version 4, its checkpoint settings (absent in older records: 0, which is no
  // periodic checkpoints, the coordinator's --keep, no automatic restarts). A restart of the
  // job (gos-restart, or an automatic one) goes on with them.
  int64_t checkpoint_ms = 0;        // an epoch this often (--checkpoint); 0 = none; never < 0
  uint32_t keep = 0;                // epochs kept (--keep); 0 = the coordinator's --keep
  uint32_t restart_on_failure = 0;  // automatic restarts allowed (--restart-on-failure=N)
  uint32_t restarts_used = 0;       // automatic restarts taken so far; <= restart_on_failure

  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

enum class NodeState : uint8_t { kUp = 0, kDown = 1 };

struct NodeRecord {
  uint32_t id = 0;
  std::string host;  // host name or IP the agent reported
  int32_t pid = 0;   // agent pid
  uint32_t cores = 0;
  uint64_t mem_bytes = 0;
  NodeState state = NodeState::kUp;
  std::string down_reason;
  int64_t last_seen_ms = 0;  // unix ms

  friend bool operator==(const NodeRecord&, const NodeRecord&) = default;
};

// Limits of the value formats. A record beyond them is refused by Put* (INVALID_ARGUMENT)
// and by the decoders (DATA_LOSS).
inline constexpr size_t kMaxStringBytes = 0xffff;  // every string field (u16 length)
inline constexpr size_t kMaxArgv = 4096;           // argv entries
inline constexpr size_t kMaxRankNodes = 1u << 20;  // rank_nodes entries

// Thread-safe: every method may be called from any thread at the same time. Not shared
// between processes: RocksDB's LOCK file makes a second Open of the same dir fail.
class Tables {
 public:
  // Opens (creating if missing) the RocksDB database in dir, creating any of its column
  // families that are missing (a database written before checkpoints existed has only
  // "default"). Errors name dir and carry
  // RocksDB's text: FAILED_PRECONDITION if dir exists but is not a directory, UNAVAILABLE if
  // another Tables (in any process) holds it, DATA_LOSS if the id counter is corrupt.
  static StatusOr<std::unique_ptr<Tables>> Open(const std::string& dir);
  ~Tables();
  Tables(const Tables&) = delete;
  Tables& operator=(const Tables&) = delete;

  const std::string& dir() const { return dir_; }

  // The checkpoint chunks and epochs in this database (docs/specs/storage-checkpoints.md).
  // Owned by Tables; valid until it is destroyed. Thread-safe.
  CheckpointStore* checkpoints() { return checkpoints_.get(); }
  // The jobs' replay logs in this database (docs/specs/replay-log.md). Owned by Tables; valid
  // until it is destroyed. Thread-safe.
  ReplayStore* replay() { return replay_.get(); }

  // Inserts or replaces the job with job.id. INVALID_ARGUMENT if it breaks a format limit.
  Status PutJob(const JobRecord& job);
  // nullopt if there is no such job.
  StatusOr<std::optional<JobRecord>> GetJob(uint64_t id);
  // All jobs, ascending id.
  StatusOr<std::vector<JobRecord>> ListJobs();
  // Inserts or replaces the node with node.id.
  Status PutNode(const NodeRecord& node);
  // All nodes, ascending id.
  StatusOr<std::vector<NodeRecord>> ListNodes();
  // Removes the node; OK if there was none.
  Status DeleteNode(uint32_t id);
  // Allocates the next job id (1, 2, 3, ...), durable: never repeats across reopen/crash.
  // Also never returns an id at or below one already stored in the job table.
  StatusOr<uint64_t> NextJobId();
  // Several puts atomically, in one rocksdb::WriteBatch: after a crash either all or none
  // are present. Validates every record before writing any.
  Status PutAll(const std::vector<JobRecord>& jobs, const std::vector<NodeRecord>& nodes);

 private:
  Tables(std::string dir, std::unique_ptr<rocksdb::DB> db,
         std::vector<rocksdb::ColumnFamilyHandle*> families, uint64_t next_job_id);

  const std::string dir_;
  const std::unique_ptr<rocksdb::DB> db_;
  // Every column family handle but the default one; destroyed before db_ is closed.
  std::vector<rocksdb::ColumnFamilyHandle*> families_;
  std::unique_ptr<CheckpointStore> checkpoints_;  // uses families_
  std::unique_ptr<ReplayStore> replay_;           // uses families_
  std::mutex id_mu_;
  uint64_t next_job_id_;  // guarded by id_mu_; the next id to hand out
};

// Codecs (exposed for tests and fuzzing): versioned binary encoding, first byte = format
// version (kRecordFormatVersion). Encoders clamp over-long strings to kMaxStringBytes and
// lists to their limit; Tables refuses such records before encoding. Decoders accept exactly
// one encoded record: anything else (short input, trailing bytes, bad enum, over-limit
// length, unknown version) is DATA_LOSS saying what and where.
inline constexpr uint8_t kRecordFormatVersion = 1;
// Job records are version 4 (version 1 plus env, paths, recorded, replay_of in version 2, plus
// cpu_bind in 3, plus the checkpoint settings in 4); older job records still decode, with the
// missing fields empty / true / 0.
inline constexpr uint8_t kJobFormatVersion = 4;
std::vector<uint8_t> EncodeJob(const JobRecord& job);
StatusOr<JobRecord> DecodeJob(std::span<const uint8_t> in);
std::vector<uint8_t> EncodeNode(const NodeRecord& node);
StatusOr<NodeRecord> DecodeNode(std::span<const uint8_t> in);

}  // namespace gos::storage

#endif  // GOS_STORAGE_TABLES_H_
