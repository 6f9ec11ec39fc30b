#include "gos/storage/tables.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <limits>

#include "codec.h"
#include "gos/files.h"
#include "gos/log.h"
#include "rocks.h"

namespace gos::storage {
namespace {

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
  // RocksDB creates its files (WAL, SSTs, MANIFEST, LOG) with its own modes, 0644 under the
  // usual umask, and they hold jobs' environments, recorded stdin and checkpoint chunks: the
  // directory is what makes them root's alone (kPrivateDir, tightened if it existed, which
  // also shuts off the files of a store an earlier gos made). Not a umask around DB::Open: the
  // umask is the whole process's (other threads create files meanwhile), and RocksDB goes on
  // creating files long after Open returns, from its own background threads.
  GOS_RETURN_IF_ERROR(MakeDir(dir, kPrivateDir).WithContext("storage " + dir));

  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  // A few thousand small records plus the checkpoint chunks: keep the footprint small.
  options.max_open_files = 64;
  options.keep_log_file_num = 2;
  options.max_log_file_size = 1 << 20;
  options.max_manifest_file_size = 4 << 20;
  options.paranoid_checks = true;

  // Ours, plus any family a newer gos created (RocksDB refuses to open without all of them).
  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName, kChunksFamily,
                                    kChunkRefsFamily, kEpochsFamily, kReplayFamily};
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(options, dir, &existing).ok()) {
    for (const std::string& n : existing) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& n : names) descriptors.emplace_back(n, FamilyOptions(n));

  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, descriptors, &handles, &raw);
  if (!s.ok()) return FromRocks(s, "opening storage " + dir);
  std::unique_ptr<rocksdb::DB> db(raw);
  // handles[0] is the default family, which the DB also reaches through DefaultColumnFamily().
  db->DestroyColumnFamilyHandle(handles[0]).PermitUncheckedError();
  std::vector<rocksdb::ColumnFamilyHandle*> families(handles.begin() + 1, handles.end());
  // Until Tables owns them, a failure below must release them before db closes.
  struct Release {
    rocksdb::DB* db;
    std::vector<rocksdb::ColumnFamilyHandle*>* families;
    ~Release() {
      for (rocksdb::ColumnFamilyHandle* h : *families)
        db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
  } release{db.get(), &families};

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
  std::vector<rocksdb::ColumnFamilyHandle*> owned;
  owned.swap(families);
  return std::unique_ptr<Tables>(new Tables(dir, std::move(db), std::move(owned), next));
}

Tables::Tables(std::string dir, std::unique_ptr<rocksdb::DB> db,
               std::vector<rocksdb::ColumnFamilyHandle*> families, uint64_t next_job_id)
    : dir_(std::move(dir)),
      db_(std::move(db)),
      families_(std::move(families)),
      next_job_id_(next_job_id) {
  // families_ follows the order of the names in Open: chunks, chunk_refs, epochs, replay.
  checkpoints_ = NewCheckpointStore(dir_, db_.get(), families_[0], families_[1], families_[2]);
  replay_ = NewReplayStore(dir_, db_.get(), families_[3]);
}

Tables::~Tables() {
  checkpoints_.reset();
  replay_.reset();
  for (rocksdb::ColumnFamilyHandle* h : families_) {
    rocksdb::Status d = db_->DestroyColumnFamilyHandle(h);
    if (!d.ok()) GOS_LOG(kWarn, "storage") << "closing " << dir_ << ": " << d.ToString();
  }
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
