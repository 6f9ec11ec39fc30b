// Record codecs of the storage tables (docs/specs/storage-tables.md). Input comes from disk,
// so every decoder fails with a DATA_LOSS status on any malformed input and never asserts.
#include "codec.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "gos/codec/bytes.h"

namespace gos::storage {
namespace {

// Reads fields in order and remembers the first one that failed, so the error can say
// which field of which record was bad and at what byte offset.
class FieldReader {
 public:
  FieldReader(const char* record, std::span<const uint8_t> in) : record_(record), r_(in) {}

  bool U8(const char* field, uint8_t* v) { return Check(field, Start() && r_.U8(v)); }
  bool U32(const char* field, uint32_t* v) { return Check(field, Start() && r_.U32(v)); }
  bool U64(const char* field, uint64_t* v) { return Check(field, Start() && r_.U64(v)); }
  bool I32(const char* field, int32_t* v) { return Check(field, Start() && r_.I32(v)); }
  bool I64(const char* field, int64_t* v) { return Check(field, Start() && r_.I64(v)); }
  bool Str(const char* field, std::string* s) {
    return Check(field, Start() && r_.Str(s, kMaxStringBytes));
  }
  // A u32 element count of at most max whose elements take at least min_elem_bytes each;
  // checked against the bytes left so a corrupt count cannot cause a huge allocation.
  bool Count(const char* field, uint32_t* n, size_t max, size_t min_elem_bytes) {
    if (!Check(field, r_.U32(n))) return false;
    if (*n > max)
      return Fail(field, "count " + std::to_string(*n) + " over limit " + std::to_string(max));
    if (static_cast<size_t>(*n) * min_elem_bytes > r_.remaining()) {
      return Fail(field, "count " + std::to_string(*n) + " longer than the value");
    }
    return true;
  }
  bool Fail(const char* field, const std::string& why) {
    if (error_.empty()) {
      error_ = std::string(field) + " at byte " + std::to_string(failed_at_) + ": " + why;
    }
    return false;
  }
  // Version byte, then the body; checks the version is one this build reads (1 .. max).
  bool Version(uint8_t max = kRecordFormatVersion) {
    uint8_t v = 0;
    if (!U8("version", &v)) return false;
    if (v < kRecordFormatVersion || v > max) {
      return Fail("version", "unsupported format version " + std::to_string(v) +
                                 " (this build reads versions " +
                                 std::to_string(kRecordFormatVersion) + " to " +
                                 std::to_string(max) + ")");
    }
    version_ = v;
    return true;
  }
  uint8_t version() const { return version_; }
  bool End() {
    Start();
    if (r_.remaining() != 0) {
      return Fail("end", std::to_string(r_.remaining()) + " trailing bytes");
    }
    return true;
  }
  Status Error() const {
    return DataLossError(std::string("corrupt ") + record_ +
                         " record: " + (error_.empty() ? "malformed" : error_));
  }

 private:
  // Notes where the next field starts, for the error message.
  bool Start() {
    failed_at_ = r_.position();
    return true;
  }
  bool Check(const char* field, bool ok) { return ok || Fail(field, "truncated or over-long"); }

  const char* record_;
  codec::Reader r_;
  size_t failed_at_ = 0;  // where the field being read starts
  uint8_t version_ = 0;
  std::string error_;
};

std::string_view Clamp(const std::string& s) {
  return std::string_view(s).substr(0, kMaxStringBytes);
}

Status CheckString(const char* record, const char* field, const std::string& s) {
  if (s.size() <= kMaxStringBytes) return OkStatus();
  return InvalidArgumentError(std::string(record) + " field " + field + " is " +
                              std::to_string(s.size()) + " bytes, over the limit of " +
                              std::to_string(kMaxStringBytes));
}

}  // namespace

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kStaging:
      return "staging";
    case JobState::kRunning:
      return "running";
    case JobState::kCompleted:
      return "completed";
    case JobState::kFailed:
      return "failed";
    case JobState::kKilled:
      return "killed";
  }
  return "unknown";
}

bool JobStateIsFinal(JobState s) {
  return s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kKilled;
}

std::vector<uint8_t> EncodeJob(const JobRecord& job) {
  std::vector<uint8_t> out;
  codec::Writer w(&out);
  w.U8(kJobFormatVersion);
  w.U64(job.id);
  w.U32(job.uid);
  w.U32(job.gid);
  w.Str(Clamp(job.user));
  const size_t argc = std::min(job.argv.size(), kMaxArgv);
  w.U32(static_cast<uint32_t>(argc));
  for (size_t i = 0; i < argc; ++i) w.Str(Clamp(job.argv[i]));
  w.Str(Clamp(job.cwd));
  w.U8(static_cast<uint8_t>(job.state));
  w.U32(job.ntasks);
  w.U32(job.nnodes);
  w.U32(job.ranks_per_node);
  w.I32(job.row);
  const size_t nranks = std::min(job.rank_nodes.size(), kMaxRankNodes);
  w.U32(static_cast<uint32_t>(nranks));
  for (size_t i = 0; i < nranks; ++i) w.U32(job.rank_nodes[i]);
  w.I32(job.exit_code);
  w.I32(job.failed_rank);
  w.I32(job.failed_node);
  w.Str(Clamp(job.message));
  w.I64(job.submit_ms);
  w.I64(job.start_ms);
  w.I64(job.end_ms);
  w.I64(job.time_limit_ms);
  for (const auto* list : {&job.env, &job.paths}) {
    const size_t n = std::min(list->size(), kMaxArgv);
    w.U32(static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; ++i) w.Str(Clamp((*list)[i]));
  }
  w.U8(job.recorded ? 1 : 0);
  w.U64(job.replay_of);
  w.U8(job.cpu_bind ? 1 : 0);
  // Clamped like the strings: what is written always decodes (Tables refuses such records).
  w.I64(std::max<int64_t>(job.checkpoint_ms, 0));
  w.U32(job.keep);
  w.U32(job.restart_on_failure);
  w.U32(std::min(job.restarts_used, job.restart_on_failure));
  return out;
}

StatusOr<JobRecord> DecodeJob(std::span<const uint8_t> in) {
  FieldReader r("job", in);
  JobRecord j;
  uint32_t argc = 0, nranks = 0;
  uint8_t state = 0;
  if (!r.Version(kJobFormatVersion) || !r.U64("id", &j.id) || !r.U32("uid", &j.uid) ||
      !r.U32("gid", &j.gid) || !r.Str("user", &j.user) || !r.Count("argv", &argc, kMaxArgv, 2)) {
    return r.Error();
  }
  j.argv.resize(argc);
  for (std::string& arg : j.argv) {
    if (!r.Str("argv", &arg)) return r.Error();
  }
  if (!r.Str("cwd", &j.cwd) || !r.U8("state", &state)) return r.Error();
  if (state > static_cast<uint8_t>(JobState::kKilled)) {
    r.Fail("state", "unknown job state " + std::to_string(state));
    return r.Error();
  }
  j.state = static_cast<JobState>(state);
  if (!r.U32("ntasks", &j.ntasks) || !r.U32("nnodes", &j.nnodes) ||
      !r.U32("ranks_per_node", &j.ranks_per_node) || !r.I32("row", &j.row) ||
      !r.Count("rank_nodes", &nranks, kMaxRankNodes, 4)) {
    return r.Error();
  }
  j.rank_nodes.resize(nranks);
  for (uint32_t& node : j.rank_nodes) {
    if (!r.U32("rank_nodes", &node)) return r.Error();
  }
  if (!r.I32("exit_code", &j.exit_code) || !r.I32("failed_rank", &j.failed_rank) ||
      !r.I32("failed_node", &j.failed_node) || !r.Str("message", &j.message) ||
      !r.I64("submit_ms", &j.submit_ms) || !r.I64("start_ms", &j.start_ms) ||
      !r.I64("end_ms", &j.end_ms) || !r.I64("time_limit_ms", &j.time_limit_ms)) {
    return r.Error();
  }
  if (r.version() >= 2) {  // the replay fields
    for (auto* list : {&j.env, &j.paths}) {
      uint32_t n = 0;
      if (!r.Count("strings", &n, kMaxArgv, 4)) return r.Error();
      list->resize(n);
      for (std::string& v : *list) {
        if (!r.Str("strings", &v)) return r.Error();
      }
    }
    uint8_t recorded = 0;
    if (!r.U8("recorded", &recorded) || !r.U64("replay_of", &j.replay_of)) return r.Error();
    if (recorded > 1) {
      r.Fail("recorded", "not 0 or 1: " + std::to_string(recorded));
      return r.Error();
    }
    j.recorded = recorded == 1;
  }
  if (r.version() >= 3) {
    uint8_t bind = 0;
    if (!r.U8("cpu_bind", &bind)) return r.Error();
    if (bind > 1) {
      r.Fail("cpu_bind", "not 0 or 1: " + std::to_string(bind));
      return r.Error();
    }
    j.cpu_bind = bind == 1;
  }
  if (r.version() >= 4) {  // the checkpoint settings
    if (!r.I64("checkpoint_ms", &j.checkpoint_ms)) return r.Error();
    if (j.checkpoint_ms < 0) {
      r.Fail("checkpoint_ms", "negative: " + std::to_string(j.checkpoint_ms));
      return r.Error();
    }
    if (!r.U32("keep", &j.keep) || !r.U32("restart_on_failure", &j.restart_on_failure) ||
        !r.U32("restarts_used", &j.restarts_used)) {
      return r.Error();
    }
    if (j.restarts_used > j.restart_on_failure) {
      r.Fail("restarts_used", std::to_string(j.restarts_used) + " over restart_on_failure " +
                                  std::to_string(j.restart_on_failure));
      return r.Error();
    }
  }
  if (!r.End()) return r.Error();
  return j;
}

std::vector<uint8_t> EncodeNode(const NodeRecord& node) {
  std::vector<uint8_t> out;
  codec::Writer w(&out);
  w.U8(kRecordFormatVersion);
  w.U32(node.id);
  w.Str(Clamp(node.host));
  w.I32(node.pid);
  w.U32(node.cores);
  w.U64(node.mem_bytes);
  w.U8(static_cast<uint8_t>(node.state));
  w.Str(Clamp(node.down_reason));
  w.I64(node.last_seen_ms);
  return out;
}

StatusOr<NodeRecord> DecodeNode(std::span<const uint8_t> in) {
  FieldReader r("node", in);
  NodeRecord n;
  uint8_t state = 0;
  if (!r.Version() || !r.U32("id", &n.id) || !r.Str("host", &n.host) || !r.I32("pid", &n.pid) ||
      !r.U32("cores", &n.cores) || !r.U64("mem_bytes", &n.mem_bytes) || !r.U8("state", &state)) {
    return r.Error();
  }
  if (state > static_cast<uint8_t>(NodeState::kDown)) {
    r.Fail("state", "unknown node state " + std::to_string(state));
    return r.Error();
  }
  n.state = static_cast<NodeState>(state);
  if (!r.Str("down_reason", &n.down_reason) || !r.I64("last_seen_ms", &n.last_seen_ms) ||
      !r.End()) {
    return r.Error();
  }
  return n;
}

std::vector<uint8_t> EncodeNextJobId(uint64_t next) {
  std::vector<uint8_t> out;
  codec::Writer w(&out);
  w.U8(kRecordFormatVersion);
  w.U64(next);
  return out;
}

StatusOr<uint64_t> DecodeNextJobId(std::span<const uint8_t> in) {
  FieldReader r("job id counter", in);
  uint64_t next = 0;
  if (!r.Version() || !r.U64("next_job_id", &next)) return r.Error();
  if (next == 0) {
    r.Fail("next_job_id", "is 0 (ids start at 1)");
    return r.Error();
  }
  if (!r.End()) return r.Error();
  return next;
}

std::string JobKey(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "job/%016" PRIx64, id);
  return buf;
}

std::string NodeKey(uint32_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "node/%08" PRIx32, id);
  return buf;
}

namespace {

std::optional<uint64_t> ParseHexKey(std::string_view key, std::string_view prefix, size_t digits) {
  if (key.size() != prefix.size() + digits || key.substr(0, prefix.size()) != prefix) {
    return std::nullopt;
  }
  uint64_t v = 0;
  for (char c : key.substr(prefix.size())) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace

std::optional<uint64_t> ParseJobKey(std::string_view key) {
  return ParseHexKey(key, kJobPrefix, 16);
}

std::optional<uint32_t> ParseNodeKey(std::string_view key) {
  std::optional<uint64_t> v = ParseHexKey(key, kNodePrefix, 8);
  if (!v) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

Status ValidateJob(const JobRecord& job) {
  GOS_RETURN_IF_ERROR(CheckString("job", "user", job.user));
  GOS_RETURN_IF_ERROR(CheckString("job", "cwd", job.cwd));
  GOS_RETURN_IF_ERROR(CheckString("job", "message", job.message));
  if (job.argv.size() > kMaxArgv) {
    return InvalidArgumentError("job argv has " + std::to_string(job.argv.size()) +
                                " entries, over the limit of " + std::to_string(kMaxArgv));
  }
  for (const std::string& arg : job.argv) GOS_RETURN_IF_ERROR(CheckString("job", "argv", arg));
  if (job.rank_nodes.size() > kMaxRankNodes) {
    return InvalidArgumentError("job rank_nodes has " + std::to_string(job.rank_nodes.size()) +
                                " entries, over the limit of " + std::to_string(kMaxRankNodes));
  }
  if (static_cast<uint8_t>(job.state) > static_cast<uint8_t>(JobState::kKilled)) {
    return InvalidArgumentError("job state " + std::to_string(static_cast<unsigned>(job.state)) +
                                " is not a JobState");
  }
  if (job.checkpoint_ms < 0) {
    return InvalidArgumentError("job checkpoint_ms is negative: " +
                                std::to_string(job.checkpoint_ms));
  }
  if (job.restarts_used > job.restart_on_failure) {
    return InvalidArgumentError("job restarts_used " + std::to_string(job.restarts_used) +
                                " is over restart_on_failure " +
                                std::to_string(job.restart_on_failure));
  }
  return OkStatus();
}

Status ValidateNode(const NodeRecord& node) {
  GOS_RETURN_IF_ERROR(CheckString("node", "host", node.host));
  GOS_RETURN_IF_ERROR(CheckString("node", "down_reason", node.down_reason));
  if (static_cast<uint8_t>(node.state) > static_cast<uint8_t>(NodeState::kDown)) {
    return InvalidArgumentError("node state " + std::to_string(static_cast<unsigned>(node.state)) +
                                " is not a NodeState");
  }
  return OkStatus();
}

}  // namespace gos::storage
