// Messages of the global OS (docs/specs/strobe.md, docs/specs/os-protocol.md):
//   - the strobe payload, multicast by the coordinator with XFER-AND-SIGNAL every quantum;
//   - the staging chunk header (launch: the executable multicast in chunks);
//   - batches of checkpoint chunks, XFERed into slots of the receiver's global memory (to the
//     coordinator's store for a checkpoint, from it for a restart);
//   - frames between clients (gos-run, gos-ps, ...) and the coordinator, and between nodeagents
//     and the coordinator, carried by a Channel (channel.h).
// Every Decode* bounds-checks and fails with a Status on bad input; none asserts.
#ifndef GOS_OS_MESSAGES_H_
#define GOS_OS_MESSAGES_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gos/os/auth.h"
#include "gos/status.h"

namespace gos::os {

inline constexpr uint16_t kStrobeVersion = 6;
inline constexpr size_t kMaxArgs = 4096;
inline constexpr size_t kMaxStringBytes = 32u << 10;

// One run of consecutive ranks on one node: ranks first .. first+count-1 on node.
struct RankRun {
  uint32_t node = 0;
  uint32_t first = 0;
  uint32_t count = 0;
};

struct LaunchCommand {
  uint64_t job = 0;
  uint32_t slot = 0;
  uint32_t row = 0;
  uint32_t uid = 0, gid = 0;
  uint32_t ntasks = 0;
  uint32_t flags = 0;  // kLaunch*
  std::vector<RankRun> runs;
  std::string program;  // file name inside the job dir (the staged executable)
  std::vector<std::string> argv, env;
  std::string cwd;
};

// LaunchCommand::flags.
// The program is linked with gos's communication library (its ELF file has a .gos_bcs section):
// the job's nodeagents run the BCS exchange for it at every strobe of its row.
inline constexpr uint32_t kLaunchBcs = 1u << 0;
// Record the job's decisions (docs/specs/replay.md): the nodeagents ship them as kReplaySegment.
inline constexpr uint32_t kLaunchRecord = 1u << 1;
// Replay a recorded run: the nodeagents were sent its log (kReplayData) before the launch.
inline constexpr uint32_t kLaunchReplay = 1u << 2;
// Leave the ranks unbound (gos-run --cpu-bind=none); otherwise each nodeagent binds the job's
// local ranks to blocks of its CPUs (nodeagent/cpu_bind.h).
inline constexpr uint32_t kLaunchNoBind = 1u << 3;

enum class CommandType : uint8_t {
  kLaunch = 1,  // start the job's local ranks (staged files are in place)
  kSignal = 2,  // send a signal to the job's ranks (SIGKILL kills the whole cgroup)
  kForget = 3,  // the job is over: remove its cgroup and job dir
  // Take checkpoint `epoch` of the job (docs/specs/checkpoint.md): at the first strobe from
  // this one at which the job has no BCS transfer in flight, freeze and hold its ranks, save
  // the BCS state, dump each rank with CRIU, set VarDumped(slot) = epoch, then ship the new
  // chunks and the rank manifests and set VarStored(slot) = epoch.
  kCheckpoint = 4,
  kResume = 5,   // release a held job (after a dump, or once every node restored it)
  kRestore = 6,  // restore the job's local ranks from the images shipped for `epoch`, held
  // A replayed job stopped (divergence, --stop-at, the recorded failure): freeze and hold its
  // ranks for inspection and answer with kReplayStopped (its ranks' pids).
  kStop = 7,
};

struct StrobeCommand {
  CommandType type = CommandType::kSignal;
  // The strobe that first carried it. A command goes out again in every strobe until a strobe
  // that carries it is confirmed by every live node; an agent applies it once.
  uint64_t origin = 0;
  uint64_t job = 0;
  int32_t signal = 0;    // kSignal; kCheckpoint: zstd level
  uint64_t epoch = 0;    // kCheckpoint, kRestore
  uint64_t base = 0;     // kCheckpoint: the job's newest committed epoch (0 = none): chunks
                         //   the node shipped for it are still stored and need not be sent
  LaunchCommand launch;  // kLaunch, kRestore
};

struct Strobe {
  uint64_t strobe = 0;
  uint32_t row = 0;  // gang-matrix row to run during this slice
  // Sent before the quantum was over: the running row was all blocked in communication, or
  // a job exited (the record of a run keeps it).
  bool early = false;
  std::vector<StrobeCommand> commands;
};

// The payload is authenticated: HMAC-SHA256 with the cluster key over everything before it.
std::vector<uint8_t> EncodeStrobe(const Strobe& s, std::span<const uint8_t> key);
// Checks version, bounds and the HMAC.
StatusOr<Strobe> DecodeStrobe(std::span<const uint8_t> bytes, std::span<const uint8_t> key);

// A batch of checkpoint chunks, shipped with XFER-AND-SIGNAL into a slot of its receiver's
// global memory (layout.h; docs/specs/checkpoint.md, "Shipping"), one of two kinds:
enum class BatchKind : uint8_t {
  // A node's chunks the store may not hold yet, into the coordinator's checkpoint inbox.
  kCheckpoint = 1,
  // A rank's stored chunks for a restart, from the coordinator into the rank's new node.
  kRestore = 2,
};
// Authenticated like the strobe; the two kinds have different magics, so neither is ever
// taken for the other.
struct CkptBatchChunk {
  std::array<uint8_t, 32> hash{};  // SHA-256 of the raw bytes
  uint32_t raw_len = 0;
  std::span<const uint8_t> data;  // zstd frame (a view: into the encoder's input, or into
                                  // the decoded bytes)
  // kRestore: where the raw bytes go in the rank's image dir (a relative path).
  std::string file;
  uint32_t mode = 0600;
  uint64_t offset = 0;
};
struct CkptBatch {
  BatchKind kind = BatchKind::kCheckpoint;
  // The nodeagent's end: the sender of a checkpoint batch, the receiver of a restore batch.
  uint32_t node = 0;
  uint64_t number = 0;  // the sender's batch number (from 1)
  uint64_t job = 0, epoch = 0;
  // kRestore: the rank whose images these are, and the coordinator's attempt at shipping
  // them (a node drops what an earlier attempt left of the rank).
  uint32_t rank = 0;
  uint64_t attempt = 0;
  std::vector<CkptBatchChunk> chunks;
};
// Encoded size of b, and what one more chunk c adds to a batch of that kind.
size_t CkptBatchBytes(const CkptBatch& b);
size_t CkptBatchChunkBytes(BatchKind kind, const CkptBatchChunk& c);
std::vector<uint8_t> EncodeCkptBatch(const CkptBatch& b, std::span<const uint8_t> key);
// Checks the magic of `kind`, bounds (a restore chunk's file name and offset too) and the HMAC;
// bytes may hold more after the batch (the rest of its slot). The chunks' data are views into
// bytes.
StatusOr<CkptBatch> DecodeCkptBatch(BatchKind kind, std::span<const uint8_t> bytes,
                                    std::span<const uint8_t> key);

// Header of a staging chunk (the chunk's data follows at a fixed offset).
struct StageHeader {
  uint64_t seq = 0;  // global chunk sequence number (monotonic)
  uint64_t job = 0;
  std::string file;  // name in the job dir
  uint32_t mode = 0755;
  uint64_t file_size = 0;
  uint64_t offset = 0;  // of this chunk in the file
  uint64_t len = 0;
  // HMAC-SHA256 of the chunk's data under the cluster key: a receiver stores the chunk only
  // once its data is all there (and is the coordinator's), whatever order the slots' bytes
  // landed in.
  Mac data_mac{};
};
std::vector<uint8_t> EncodeStageHeader(const StageHeader& h, std::span<const uint8_t> key);
StatusOr<StageHeader> DecodeStageHeader(std::span<const uint8_t> bytes,
                                        std::span<const uint8_t> key);

// ---- Channel frames -------------------------------------------------------------------
enum class Frame : uint16_t {
  // client -> coordinator
  kSubmit = 1,
  kStdin = 2,      // bytes; empty = EOF
  kSignalJob = 3,  // SignalRequest
  kPs = 4,
  kShutdown = 5,
  // coordinator -> client
  kAccepted = 20,  // u64 job
  kOutput = 21,    // OutputChunk
  kExit = 22,      // JobExit
  kError = 23,     // text
  kPsReply = 24,   // PsReply
  kOk = 25,        // text
  kPhase = 26,     // text: a phase line for --timing
  kNotice = 27,    // text: an event of the job the user should see (checkpoints, restarts)
  // nodeagent <-> coordinator
  kHello = 40,        // AgentHello
  kWelcome = 41,      // AgentWelcome
  kAgentOutput = 42,  // OutputChunk
  kOutputDone = 43,   // u64 job
  kAgentStdin = 44,   // u64 job + bytes (empty = EOF)
  kReject = 45,       // text
  kRankFailed = 46,   // JobExit: a communicating rank died or aborted; the job must fail
  // 47: retired (chunks travelled on the channel; they are XFERed into the checkpoint inbox)
  kCkptRank = 48,    // JobBytes: job + storage::EncodeManifest of one rank's part of an epoch
  kCkptFailed = 49,  // JobBytes: job + why this node could not take the job's epoch
  // 50: retired (a restart's chunks travelled on the channel; they are XFERed in restore
  //     batches into the node's memory)
  kRestoreRankEnd = 51,     // coordinator -> agent: RestoreRankEnd
  kRestoreReady = 52,       // agent -> coordinator: RestoreReady
  kReplaySegment = 53,      // agent -> coordinator: ReplaySegment of a recorded job's log
  kReplayStop = 54,         // agent -> coordinator: ReplayStopped (no ranks): why a replay stops
  kReplayStopped = 55,      // agent -> coordinator: ReplayStopped (this node's ranks) after kStop;
                            // coordinator -> client: ReplayStopped (every rank)
  kReplayData = 56,         // coordinator -> agent: ReplaySegment of the log to impose
  kReplayDataEnd = 57,      // coordinator -> agent: ReplayDataEnd (then the agent answers
                            //   kRestoreReady, rank 0, ok or why not)
  kRestoreLocal = 58,       // coordinator -> agent: storage::EncodeManifest of one rank of an
                            //   epoch: restore it from this node's own copy of its dump if it
                            //   has one that matches, chunk by chunk
  kRestoreLocalReply = 59,  // agent -> coordinator: RestoreReady (ok: the rank's images are in
                            //   place; not ok: ship them)
  kAgentJoined = 60,        // agent -> coordinator: empty; it joined the primitives' group
                            //   (after kWelcome; what makes a node that joins again usable)
  kBrokenDump = 61,  // agent -> coordinator: JobBytes: job + why: criu died in the middle of a
                     //   dump of the job's ranks here, which stay frozen and must not run
                     //   again (then kCkptFailed for the epoch as usual)
  // client -> coordinator (checkpoint tools)
  kCheckpointNow = 6,  // u64 job: take an epoch now; kPhase lines, then kOk or kError
  kListEpochs = 7,     // u64 job: kOk with the table of epochs
  kRestart = 8,        // RestartRequest: the client then follows the job like gos-run
  kStore = 9,          // text "stats" | "verify" | "gc": kPhase lines, then kOk or kError
  kReplayInfo = 10,    // u64 job: kReplayInfoReply (a SubmitRequest that reruns it) or kError
  kReplayInfoReply = 28,
  kReplayLog = 11,  // u64 job: its log as kReplayData frames (ReplaySegment), then kOk
  // A client over TCP (GOS_COORDINATOR=host:port), on a channel authenticated with the cluster
  // key: its first frame, text "UID GID PID", who it acts for (a unix-socket client's are
  // its peer credentials). Only a holder of the key can send it. Answered with kOk.
  kClientHello = 12,
  // A TCP client's file to submit (it cannot pass descriptors), before its kSubmit: JobBytes
  // with (file index << 48 | byte offset) for the job field and a piece of the file, in
  // order, at most 1 MiB each. The submit's files are then these, by index.
  kUpload = 13,
  // u64 job: follow a job no client follows — one a restarted coordinator restarted from its
  // newest epoch (gos-run --restart-on-failure) — like gos-run: kAccepted, what the job
  // wrote meanwhile, then its output and exit. A job already over: kAccepted and its kExit.
  // Owner or root.
  kAttach = 14,
  // MPIR process acquisition (docs/specs/os-protocol.md, issue 29): where a running job's ranks
  // are. Client -> coordinator u64 job (owner or root), answered by kRanksReply (RankTable, every
  // rank) or kError; the coordinator asks each node of the job (kRanksQuery, u64 job), which
  // answers with its ranks (kAgentRanks, RankTable).
  kRanks = 15,
  kRanksReply = 29,
  kRanksQuery = 62,
  kAgentRanks = 63,
};

struct SubmitFile {
  std::string name;  // in the job dir
  uint32_t mode = 0755;
  uint64_t size = 0;  // the file itself comes as a passed fd, in order
};

struct SubmitRequest {
  std::vector<std::string> argv;  // argv[0] as the user typed it
  std::vector<std::string> env;
  std::string cwd;
  uint32_t ntasks = 1;
  uint32_t nodes = 0;
  uint32_t ranks_per_node = 0;
  int64_t time_limit_ms = 0;
  std::vector<SubmitFile> files;    // files[0] is the executable
  int64_t checkpoint_ms = 0;        // take an epoch this often (0 = never)
  uint32_t keep = 0;                // epochs to keep (0 = the coordinator's default)
  uint32_t restart_on_failure = 0;  // automatic restarts from the last epoch after a failure
  std::vector<std::string> paths;   // absolute path of each file (gos-replay opens them again)
  bool record = true;               // record the run's decisions for gos-replay
  uint64_t replay_of = 0;           // replay this recorded job instead (gos-replay)
  uint64_t stop_at = 0;             // replay: stop at this strobe (0 = never)
  uint64_t from_epoch = 0;          // replay from this checkpoint of replay_of (0 = the start)
  bool cpu_bind = true;             // bind the ranks to CPUs (false: --cpu-bind=none)
  std::vector<uint32_t> exclude;    // never these nodes (gos-run -x), ascending
  std::vector<uint32_t> nodelist;   // only these nodes (gos-run -w), ascending; empty = any
};

struct ReplaySegment {
  uint64_t job = 0;
  uint32_t stream = 0;
  std::string bytes;
  // From a nodeagent: the incarnation of the job that recorded it (the origin of its LAUNCH or
  // RESTORE), so that the coordinator can drop what a run lost to a restart still ships.
  // 0 elsewhere.
  uint64_t launch = 0;
};

struct ReplayDataEnd {
  uint64_t job = 0;
  uint64_t of = 0;          // the recorded job (its id names the restored ranks' channels)
  uint64_t from_epoch = 0;  // restored from this checkpoint of it (0 = from the start)
  uint64_t stop_at = 0;
  bool completed = false;
  int32_t failed_rank = -1;
};

struct ReplayRank {
  uint32_t rank = 0;
  uint32_t node = 0;
  int32_t pid = 0;
  std::string host;
};

// Why a replayed job stopped (docs/specs/replay.md, "Stops").
enum class ReplayStopKind : uint8_t {
  kDivergence = 1,  // the run did something else than the recording
  kStopAt = 2,      // --stop-at: the next step is past the requested strobe
  kLogEnd = 3,      // the recording ends here: the recorded run stopped (failed) there
  kAborted = 4,     // a rank called gos_abort/MPI_Abort, as in the recorded run
  kCrashed = 5,     // a rank got a fatal signal and is held at the faulting instruction
};

struct ReplayStopped {
  uint64_t job = 0;
  ReplayStopKind kind = ReplayStopKind::kLogEnd;
  uint64_t strobe = 0;
  int32_t rank = -1;
  std::string text;
  std::vector<ReplayRank> ranks;
};

// Where a rank runs, for a debugger to attach (MPIR_proctable).
struct RankPlace {
  uint32_t rank = 0;
  uint32_t node = 0;
  int32_t pid = 0;   // in its node's PID namespace; 0 = not started yet, or gone
  std::string host;  // the host's name (gethostname), where a debugger attaches
  std::string exe;   // the rank's executable on that host
};

struct RankTable {
  uint64_t job = 0;
  std::vector<RankPlace> ranks;
};

// Every restore batch of the rank has been answered (files = every file of its image dir,
// chunkless ones included by name): the node reports the rank ready, or the first problem.
struct RestoreRankEnd {
  uint64_t job = 0, epoch = 0;
  uint32_t rank = 0;
  uint64_t attempt = 0;            // as in the rank's batches
  std::vector<std::string> files;  // every file of the rank's image dir (empty ones too)
};

struct RestoreReady {
  uint64_t job = 0;
  uint32_t rank = 0;
  bool ok = true;
  std::string message;  // why not
};

struct RestartRequest {
  // checkpoint_ms: the restored job takes no periodic checkpoints (gos-restart --no-checkpoint).
  static constexpr int64_t kNoCheckpoint = -1;

  uint64_t job = 0;
  uint64_t epoch = 0;  // 0 = the newest
  std::vector<uint32_t> exclude;
  // Checkpoint the restored job this often; 0 = as the job's stored setting says (gos-run's
  // --checkpoint, or the last restart's); kNoCheckpoint = never. Stored with the job.
  int64_t checkpoint_ms = 0;
  bool from_store = false;  // ship every rank from the store, even where a node still has
                            // its own copy of the rank's dump
  // Epochs to keep; 0 = the job's stored --keep. Stored with the job. (Absent from the
  // requests of older clients, which decode with 0.)
  uint32_t keep = 0;
};

struct SignalRequest {
  uint64_t job = 0;
  int32_t signal = 0;
};

struct OutputChunk {
  uint64_t job = 0;
  uint32_t rank = 0;
  uint8_t stream = 1;  // 1 stdout, 2 stderr
  std::string bytes;
};

struct JobExit {
  uint64_t job = 0;
  int32_t exit_code = 0;
  int32_t failed_rank = -1;
  int32_t failed_node = -1;
  std::string message;
  // Phase times, microseconds since submit (0 = did not happen).
  int64_t placed_us = 0, staged_us = 0, launched_us = 0, started_us = 0, exited_us = 0;
};

struct PsJob {
  uint64_t id = 0;
  std::string user;
  std::string state;
  uint32_t ntasks = 0;
  std::vector<uint32_t> nodes;
  int64_t elapsed_ms = 0;
  int32_t row = -1;
  int32_t exit_code = -1;
  std::string command;
  std::string message;
  int64_t checkpoint_ms = 0;       // periodic epochs this often (gos-run --checkpoint); 0 = none
  uint64_t last_epoch = 0;         // newest committed checkpoint epoch; 0 = none
  int64_t last_epoch_age_ms = -1;  // how long ago it was taken; -1 = none
};

struct PsNode {
  uint32_t id = 0;
  std::string host;
  bool up = false;
  std::string down_reason;
  uint32_t cores = 0;
  uint64_t mem_bytes = 0;
  std::vector<uint64_t> jobs;
  uint32_t ranks = 0;
};

struct PsReply {
  std::vector<PsJob> jobs;
  std::vector<PsNode> nodes;
  int32_t running_row = -1;
  uint64_t strobe = 0;
};

struct AgentHello {
  std::string name;
  std::string host;
  int32_t pid = 0;
  uint32_t cores = 0;
  uint64_t mem_bytes = 0;
  uint32_t requested_node = 0;  // 0 = any
};

struct AgentWelcome {
  uint32_t node = 0;
  std::string bootstrap;  // host:port of the primitives' bootstrap service
  std::string provider;
  uint64_t global_memory_bytes = 0;
  uint32_t fanout = 4;
};

std::vector<uint8_t> Encode(const SubmitRequest& m);
std::vector<uint8_t> Encode(const SignalRequest& m);
std::vector<uint8_t> Encode(const OutputChunk& m);
std::vector<uint8_t> Encode(const JobExit& m);
std::vector<uint8_t> Encode(const PsReply& m);
std::vector<uint8_t> Encode(const AgentHello& m);
std::vector<uint8_t> Encode(const AgentWelcome& m);
std::vector<uint8_t> Encode(const RestoreRankEnd& m);
std::vector<uint8_t> Encode(const RestoreReady& m);
std::vector<uint8_t> Encode(const RestartRequest& m);
std::vector<uint8_t> Encode(const ReplaySegment& m);
std::vector<uint8_t> Encode(const ReplayDataEnd& m);
std::vector<uint8_t> Encode(const ReplayStopped& m);
std::vector<uint8_t> Encode(const RankTable& m);
std::vector<uint8_t> EncodeU64(uint64_t v);
std::vector<uint8_t> EncodeText(const std::string& text);
std::vector<uint8_t> EncodeJobBytes(uint64_t job, const std::string& bytes);

StatusOr<SubmitRequest> DecodeSubmit(std::span<const uint8_t> b);
StatusOr<SignalRequest> DecodeSignal(std::span<const uint8_t> b);
StatusOr<OutputChunk> DecodeOutput(std::span<const uint8_t> b);
StatusOr<JobExit> DecodeJobExit(std::span<const uint8_t> b);
StatusOr<PsReply> DecodePsReply(std::span<const uint8_t> b);
StatusOr<AgentHello> DecodeHello(std::span<const uint8_t> b);
StatusOr<AgentWelcome> DecodeWelcome(std::span<const uint8_t> b);
StatusOr<RestoreRankEnd> DecodeRestoreRankEnd(std::span<const uint8_t> b);
StatusOr<RestoreReady> DecodeRestoreReady(std::span<const uint8_t> b);
StatusOr<RestartRequest> DecodeRestart(std::span<const uint8_t> b);
StatusOr<ReplaySegment> DecodeReplaySegment(std::span<const uint8_t> b);
StatusOr<ReplayDataEnd> DecodeReplayDataEnd(std::span<const uint8_t> b);
StatusOr<ReplayStopped> DecodeReplayStopped(std::span<const uint8_t> b);
StatusOr<RankTable> DecodeRankTable(std::span<const uint8_t> b);
StatusOr<uint64_t> DecodeU64(std::span<const uint8_t> b);
StatusOr<std::string> DecodeText(std::span<const uint8_t> b);
StatusOr<std::pair<uint64_t, std::string>> DecodeJobBytes(std::span<const uint8_t> b);

}  // namespace gos::os

#endif  // GOS_OS_MESSAGES_H_
