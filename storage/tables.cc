#include "gos/storage/tables.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>

#include <cerrno>
#include <limits>

#include "gos/log.h"
#include "storage/codec.h"

namespace gos::storage {
namespace {

// The one place RocksDB's status becomes a gos::Status; RocksDB's text is kept.
Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return OkStatus();
  std::string m(what);
  m += ": ";
  m += s.ToString();
  if (s.IsCorruption()) return DataLossError(std::move(m));
  if (s.IsNotFound()) return NotFoundError(std::move(m));
  if (s.IsInvalidArgument()) return InvalidArgumentError(std::move(m));
  if (s.IsNotSupported()) return UnimplementedError(std::move(m));
  if (s.IsAborted()) return AbortedError(std::move(m));
  if (s.IsNoSpace()) return ResourceExhaustedError(std::move(m));
  // Another process holds the LOCK file, or a transient I/O condition.
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) {
    return UnavailableError(std::move(m));
  }
  return InternalError(std::move(m));
}

// Keys are ASCII when written by us; a damaged one is shown with its odd bytes escaped.
std::string Printable(std::string_view key) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

std::span<const uint8_t> Bytes(const rocksdb::Slice& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

rocksdb::Slice ToSlice(const std::vector<uint8_t>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size()};
}

rocksdb::WriteOptions SyncedWrite() {
  rocksdb::WriteOptions w;
  // fsync the WAL before acknowledging: a write that returned OK survives SIGKILL and
  // power loss. The coordinator writes a few records per job, so this is cheap enough.
  w.sync = true;
  return w;
}

// The first byte after every key with this prefix ("job/" -> "job0").
std::string UpperBound(std::string_view prefix) {
  std::string b(prefix);
  b.back() = static_cast<char>(b.back() + 1);
  return b;
}

// Decodes one table value: a bad value, or one whose id is not the key's, is DATA_LOSS
// naming the key.
template <typename Record, typename Decode>
StatusOr<Record> DecodeAt(const std::string& dir, std::string_view key, uint64_t key_id,
                          const rocksdb::Slice& value, Decode decode) {
  StatusOr<Record> rec = decode(Bytes(value));
  std::string where = "storage " + dir + " key " + Printable(key);
  if (!rec.ok()) return rec.status().WithContext(where);
  if (rec->id != key_id) {
    return DataLossError(where + ": holds the record of id " + std::to_string(rec->id));
  }
  return rec;
}

template <typename Record, typename Parse, typename Decode>
StatusOr<std::vector<Record>> ListPrefix(rocksdb::DB* db, const std::string& dir,
                                         std::string_view prefix, Parse parse, Decode decode) {
  const std::string upper = UpperBound(prefix);
  const rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
  std::vector<Record> out;
  for (it->Seek(rocksdb::Slice(prefix.data(), prefix.size())); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    auto id = parse(key);
    if (!id) return DataLossError("storage " + dir + ": malformed key " + Printable(key));
    GOS_ASSIGN_OR_RETURN(Record rec, DecodeAt<Record>(dir, key, *id, it->value(), decode));
    out.push_back(std::move(rec));
  }
  GOS_RETURN_IF_ERROR(
      FromRocks(it->status(), "storage " + dir + ": scanning " + std::string(prefix)));
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<Tables>> Tables::Open(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return FailedPreconditionError("storage " + dir + " exists and is not a directory");
  }

  rocksdb::Options options;
  options.create_if_missing = true;
  // A few thousand small records: keep the footprint small.
  options.max_open_files = 64;
  options.keep_log_file_num = 2;
  options.max_log_file_size = 1 << 20;
  options.max_manifest_file_size = 4 << 20;
  // Tiny values; no dependency on whichever compression libraries librocksdb was built with.
  options.compression = rocksdb::kNoCompression;
  options.paranoid_checks = true;

  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) return FromRocks(s, "opening storage " + dir);
  std::unique_ptr<rocksdb::DB> db(raw);

  uint64_t next = 1;
  std::string value;
  s = db->Get(rocksdb::ReadOptions(), std::string(kNextJobIdKey), &value);
  if (s.ok()) {
    StatusOr<uint64_t> stored =
        DecodeNextJobId({reinterpret_cast<const uint8_t*>(value.data()), value.size()});
    if (!stored.ok()) {
      return stored.status().WithContext("storage " + dir + " key " + std::string(kNextJobIdKey));
    }
    next = *stored;
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "storage " + dir + ": reading " + std::string(kNextJobIdKey));
  }

  // Never hand out an id a stored job already has, even if the counter were behind.
  {
    const std::string upper = UpperBound(kJobPrefix);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    it->SeekForPrev(rocksdb::Slice(upper));
    if (it->Valid() &&
        it->key().starts_with(rocksdb::Slice(kJobPrefix.data(), kJobPrefix.size()))) {
      const std::string_view key(it->key().data(), it->key().size());
      std::optional<uint64_t> last = ParseJobKey(key);
      if (!last) return DataLossError("storage " + dir + ": malformed key " + Printable(key));
      if (*last == std::numeric_limits<uint64_t>::max()) {
        return DataLossError("storage " + dir + ": job id space exhausted by key " +
                             Printable(key));
      }
      if (*last >= next) next = *last + 1;
    }
    GOS_RETURN_IF_ERROR(FromRocks(it->status(), "storage " + dir + ": finding the last job"));
  }

  GOS_LOG(kInfo, "storage") << "opened " << dir << ", next job id " << next;
  return std::unique_ptr<Tables>(new Tables(dir, std::move(db), next));
}

Tables::Tables(std::string dir, std::unique_ptr<rocksdb::DB> db, uint64_t next_job_id)
    : dir_(std::move(dir)), db_(std::move(db)), next_job_id_(next_job_id) {}

Tables::~Tables() {
  rocksdb::Status s = db_->Close();
  if (!s.ok()) GOS_LOG(kWarn, "storage") << "closing " << dir_ << ": " << s.ToString();
}

Status Tables::PutJob(const JobRecord& job) {
  GOS_RETURN_IF_ERROR(ValidateJob(job).WithContext("storage: job " + std::to_string(job.id)));
  const std::string key = JobKey(job.id);
  return FromRocks(db_->Put(SyncedWrite(), key, ToSlice(EncodeJob(job))),
                   "storage " + dir_ + ": writing " + key);
}

StatusOr<std::optional<JobRecord>> Tables::GetJob(uint64_t id) {
  const std::string key = JobKey(id);
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), key, &value);
  if (s.IsNotFound()) return std::optional<JobRecord>();
  GOS_RETURN_IF_ERROR(FromRocks(s, "storage " + dir_ + ": reading " + key));
  GOS_ASSIGN_OR_RETURN(JobRecord job, DecodeAt<JobRecord>(dir_, key, id, value, DecodeJob));
  return std::optional<JobRecord>(std::move(job));
}

StatusOr<std::vector<JobRecord>> Tables::ListJobs() {
  return ListPrefix<JobRecord>(db_.get(), dir_, kJobPrefix, ParseJobKey, DecodeJob);
}

Status Tables::PutNode(const NodeRecord& node) {
  GOS_RETURN_IF_ERROR(ValidateNode(node).WithContext("storage: node " + std::to_string(node.id)));
  const std::string key = NodeKey(node.id);
  return FromRocks(db_->Put(SyncedWrite(), key, ToSlice(EncodeNode(node))),
                   "storage " + dir_ + ": writing " + key);
}

StatusOr<std::vector<NodeRecord>> Tables::ListNodes() {
  return ListPrefix<NodeRecord>(db_.get(), dir_, kNodePrefix, ParseNodeKey, DecodeNode);
}

Status Tables::DeleteNode(uint32_t id) {
  const std::string key = NodeKey(id);
  return FromRocks(db_->Delete(SyncedWrite(), key), "storage " + dir_ + ": deleting " + key);
}

StatusOr<uint64_t> Tables::NextJobId() {
  std::lock_guard<std::mutex> lock(id_mu_);
  if (next_job_id_ == std::numeric_limits<uint64_t>::max()) {
    return ResourceExhaustedError("storage " + dir_ + ": job ids exhausted");
  }
  const uint64_t id = next_job_id_;
  // Persist the counter past id before handing id out. If the write fails it may still have
  // reached disk; keeping the old value in memory then at worst skips an id, never repeats.
  GOS_RETURN_IF_ERROR(FromRocks(
      db_->Put(SyncedWrite(), std::string(kNextJobIdKey), ToSlice(EncodeNextJobId(id + 1))),
      "storage " + dir_ + ": writing " + std::string(kNextJobIdKey)));
  next_job_id_ = id + 1;
  return id;
}

Status Tables::PutAll(const std::vector<JobRecord>& jobs, const std::vector<NodeRecord>& nodes) {
  rocksdb::WriteBatch batch;
  for (const JobRecord& job : jobs) {
    GOS_RETURN_IF_ERROR(ValidateJob(job).WithContext("storage: job " + std::to_string(job.id)));
    rocksdb::Status s = batch.Put(JobKey(job.id), ToSlice(EncodeJob(job)));
    if (!s.ok()) return FromRocks(s, "storage " + dir_ + ": batching job " + JobKey(job.id));
  }
  for (const NodeRecord& node : nodes) {
    GOS_RETURN_IF_ERROR(ValidateNode(node).WithContext("storage: node " + std::to_string(node.id)));
    rocksdb::Status s = batch.Put(NodeKey(node.id), ToSlice(EncodeNode(node)));
    if (!s.ok()) return FromRocks(s, "storage " + dir_ + ": batching node " + NodeKey(node.id));
  }
  return FromRocks(db_->Write(SyncedWrite(), &batch),
                   "storage " + dir_ + ": writing a batch of " + std::to_string(jobs.size()) +
                       " jobs and " + std::to_string(nodes.size()) + " nodes");
}

}  // namespace gos::storage
