// The checkpoint store on RocksDB (gos/storage/checkpoints.h). Keys and value formats:
// docs/specs/storage-checkpoints.md.
//
// Every stored chunk has a chunk_refs row, written in the same batch as the chunk, holding its
// reference count and sizes: HasChunk, Stats and Gc read only those small rows and never the
// chunk data (which lives in blob files).
#include "gos/storage/checkpoints.h"

#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

#include "gos/codec/bytes.h"
#include "gos/log.h"
#include "manifest_internal.h"
#include "rocks.h"

namespace gos::storage {
namespace {

using internal::EpochName;
using internal::FileProblem;
using internal::ValidateManifest;

constexpr uint8_t kChunkValueVersion = 1;
constexpr uint8_t kRefsValueVersion = 1;
// A zstd frame of a chunk is never much larger than the chunk (ZSTD_compressBound).
constexpr size_t kMaxStoredChunk = kMaxChunkBytes + (kMaxChunkBytes >> 7) + 1024;

// ---------------------------------------------------------------------------------------
// Keys and small values.

void PutBe64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetBe64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// epochs: big-endian job then epoch, so that iteration is in (job, epoch) order.
std::string EpochKey(uint64_t job, uint64_t epoch) {
  std::string k;
  PutBe64(&k, job);
  PutBe64(&k, epoch);
  return k;
}
std::string JobPrefix(uint64_t job) {
  std::string k;
  PutBe64(&k, job);
  return k;
}

rocksdb::Slice HashKey(const ChunkHash& h) {
  return {reinterpret_cast<const char*>(h.data()), h.size()};
}
ChunkHash HashOfKey(const rocksdb::Slice& k) {
  ChunkHash h{};
  std::memcpy(h.data(), k.data(), std::min(k.size(), h.size()));
  return h;
}

// chunk_refs value: u8 version | u64 references | u32 raw length | u32 stored length.
struct RefsRow {
  uint64_t refs = 0;
  uint32_t raw_len = 0;
  uint32_t stored_len = 0;
};

std::vector<uint8_t> EncodeRefsRow(const RefsRow& r) {
  std::vector<uint8_t> out;
  codec::Writer w(&out);
  w.U8(kRefsValueVersion);
  w.U64(r.refs);
  w.U32(r.raw_len);
  w.U32(r.stored_len);
  return out;
}

StatusOr<RefsRow> DecodeRefsRow(const rocksdb::Slice& v, const ChunkHash& h) {
  codec::Reader r(Bytes(v));
  RefsRow row;
  uint8_t version = 0;
  if (!r.U8(&version) || version != kRefsValueVersion || !r.U64(&row.refs) ||
      !r.U32(&row.raw_len) || !r.U32(&row.stored_len) || r.remaining() != 0) {
    return DataLossError("chunk_refs row of chunk " + HashHex(h) + " is corrupt (" +
                         std::to_string(v.size()) + " bytes, version " + std::to_string(version) +
                         ")");
  }
  return row;
}

// chunks value: u8 version | u32 raw length | zstd frame. The frame of a valid value.
StatusOr<std::span<const uint8_t>> ChunkFrame(const rocksdb::Slice& v, const ChunkHash& h) {
  codec::Reader r(Bytes(v));
  uint8_t version = 0;
  uint32_t raw_len = 0;
  if (!r.U8(&version) || version != kChunkValueVersion || !r.U32(&raw_len)) {
    return DataLossError("chunk " + HashHex(h) + ": stored value has a bad header");
  }
  return Bytes(v).subspan(r.position());
}

// ---------------------------------------------------------------------------------------

class RocksCheckpointStore final : public CheckpointStore {
 public:
  RocksCheckpointStore(std::string dir, rocksdb::DB* db, rocksdb::ColumnFamilyHandle* chunks,
                       rocksdb::ColumnFamilyHandle* refs, rocksdb::ColumnFamilyHandle* epochs)
      : dir_(std::move(dir)), db_(db), chunks_(chunks), refs_(refs), epochs_(epochs) {}

  StatusOr<bool> HasChunk(const ChunkHash& hash) override {
    GOS_ASSIGN_OR_RETURN(std::optional<RefsRow> row, GetRefs(hash));
    return row.has_value();
  }

  StatusOr<bool> PutChunk(const ChunkRef& ref, std::span<const uint8_t> compressed) override {
    const std::string hex = HashHex(ref.hash);
    if (ref.raw_len > kMaxChunkBytes || compressed.size() > kMaxStoredChunk) {
      return InvalidArgumentError("chunk " + hex + ": " + std::to_string(ref.raw_len) +
                                  " bytes raw, " + std::to_string(compressed.size()) +
                                  " stored: over the chunk limit");
    }
    std::lock_guard<std::mutex> lock(mu_);
    GOS_ASSIGN_OR_RETURN(std::optional<RefsRow> row, GetRefs(ref.hash));
    if (row) return false;
    std::vector<uint8_t> value;
    codec::Writer w(&value);
    w.U8(kChunkValueVersion);
    w.U32(ref.raw_len);
    w.Raw(compressed.data(), compressed.size());
    RefsRow fresh;
    fresh.raw_len = ref.raw_len;
    fresh.stored_len = static_cast<uint32_t>(compressed.size());
    rocksdb::WriteBatch batch;
    GOS_RETURN_IF_ERROR(Batch(batch.Put(chunks_, HashKey(ref.hash), ToSlice(value)), hex));
    GOS_RETURN_IF_ERROR(
        Batch(batch.Put(refs_, HashKey(ref.hash), ToSlice(EncodeRefsRow(fresh))), hex));
    // Not synced: the chunk only matters once an epoch naming it commits, and that commit's
    // synced write flushes the single WAL, this write included. Saves an fsync per chunk.
    GOS_RETURN_IF_ERROR(FromRocks(db_->Write(rocksdb::WriteOptions(), &batch),
                                  "storage " + dir_ + ": writing chunk " + hex));
    gc_candidates_[ref.hash] = ++gc_seq_;
    return true;
  }

  StatusOr<std::vector<uint8_t>> GetCompressed(const ChunkHash& hash) override {
    rocksdb::PinnableSlice v;
    const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), chunks_, HashKey(hash), &v);
    if (s.IsNotFound()) return NotFoundError("chunk " + HashHex(hash) + " is not stored");
    GOS_RETURN_IF_ERROR(FromRocks(s, "storage " + dir_ + ": reading chunk " + HashHex(hash)));
    GOS_ASSIGN_OR_RETURN(std::span<const uint8_t> frame, ChunkFrame(v, hash));
    return std::vector<uint8_t>(frame.begin(), frame.end());
  }

  StatusOr<std::vector<uint8_t>> ReadChunk(const ChunkRef& ref) override {
    GOS_ASSIGN_OR_RETURN(std::vector<uint8_t> frame, GetCompressed(ref.hash));
    return DecompressChunk(frame, ref);
  }

  Status CommitEpoch(const EpochManifest& m) override {
    GOS_RETURN_IF_ERROR(ValidateManifest(m));
    const std::string key = EpochKey(m.job, m.epoch);
    const std::string name = EpochName(m.job, m.epoch);
    // One increment per reference; first names where it was referenced, for errors.
    struct Inc {
      uint64_t n = 0;
      uint32_t raw_len = 0;
      uint32_t rank = 0;
      const std::string* file = nullptr;
    };
    std::map<ChunkHash, Inc> incs;
    for (const EpochRank& r : m.ranks) {
      for (const FileEntry& f : r.files) {
        for (const ChunkRef& c : f.chunks) {
          Inc& inc = incs[c.hash];
          if (inc.n++ == 0) inc = {1, c.raw_len, r.rank, &f.name};
        }
      }
    }

    std::lock_guard<std::mutex> lock(mu_);
    std::string existing;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), epochs_, key, &existing);
    if (s.ok())
      return AlreadyExistsError("storage " + dir_ + ": " + name + " is already committed");
    if (!s.IsNotFound()) return FromRocks(s, "storage " + dir_ + ": reading " + name);

    rocksdb::WriteBatch batch;
    for (const auto& [hash, inc] : incs) {
      GOS_ASSIGN_OR_RETURN(std::optional<RefsRow> row, GetRefs(hash));
      const std::string where = name + " rank " + std::to_string(inc.rank) + " file " +
                                Printable(*inc.file) + ": chunk " + HashHex(hash);
      if (!row) return FailedPreconditionError(where + " is not stored");
      if (row->raw_len != inc.raw_len) {
        return FailedPreconditionError(where + " has length " + std::to_string(inc.raw_len) +
                                       ", the stored one " + std::to_string(row->raw_len));
      }
      row->refs += inc.n;
      GOS_RETURN_IF_ERROR(
          Batch(batch.Put(refs_, HashKey(hash), ToSlice(EncodeRefsRow(*row))), name));
    }
    GOS_RETURN_IF_ERROR(Batch(batch.Put(epochs_, key, ToSlice(EncodeManifest(m))), name));
    GOS_RETURN_IF_ERROR(
        FromRocks(db_->Write(SyncedWrite(), &batch), "storage " + dir_ + ": committing " + name));
    for (const auto& [hash, inc] : incs) gc_candidates_.erase(hash);
    GOS_LOG(kInfo, "storage") << "committed " << name << ": " << m.ranks.size() << " ranks, "
                              << incs.size() << " distinct chunks, " << m.logical_bytes << " bytes";
    return OkStatus();
  }

  StatusOr<std::vector<EpochManifest>> ListEpochs(uint64_t job, bool with_files) override {
    std::vector<EpochManifest> out;
    GOS_RETURN_IF_ERROR(ForEachEpoch(&job, [&](EpochManifest m) {
      if (!with_files) {
        for (EpochRank& r : m.ranks) r.files.clear();
      }
      out.push_back(std::move(m));
      return OkStatus();
    }));
    return out;
  }

  StatusOr<std::optional<EpochManifest>> GetEpoch(uint64_t job, uint64_t epoch) override {
    rocksdb::PinnableSlice v;
    const std::string key = EpochKey(job, epoch);
    const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), epochs_, key, &v);
    if (s.IsNotFound()) return std::optional<EpochManifest>();
    GOS_RETURN_IF_ERROR(FromRocks(s, "storage " + dir_ + ": reading " + EpochName(job, epoch)));
    GOS_ASSIGN_OR_RETURN(EpochManifest m, DecodeAt(key, v));
    return std::optional<EpochManifest>(std::move(m));
  }

  Status DeleteEpoch(uint64_t job, uint64_t epoch) override {
    std::lock_guard<std::mutex> lock(mu_);
    return DeleteLocked(job, {epoch});
  }

  Status Retain(uint64_t job, uint32_t keep) override {
    if (keep == 0) return InvalidArgumentError("storage: Retain must keep at least one epoch");
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint64_t> epochs;
    const std::string prefix = JobPrefix(job);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), epochs_));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (it->key().size() != 16) {
        return DataLossError("storage " + dir_ + ": malformed epochs key " +
                             Printable(it->key().ToStringView()));
      }
      epochs.push_back(GetBe64(it->key().data() + 8));
    }
    GOS_RETURN_IF_ERROR(FromRocks(it->status(), "storage " + dir_ + ": listing epochs"));
    if (epochs.size() <= keep) return OkStatus();
    epochs.resize(epochs.size() - keep);
    return DeleteLocked(job, epochs);
  }

  StatusOr<GcResult> Gc() override { return GcBefore(GcMark()); }

  uint64_t GcMark() override {
    std::lock_guard<std::mutex> lock(mu_);
    return gc_seq_;
  }

  StatusOr<GcResult> GcBefore(uint64_t mark) override {
    std::lock_guard<std::mutex> lock(mu_);
    GcResult res;
    // Stored or dropped after the mark: not this time.
    auto later = [&](const ChunkHash& h) {
      auto it = gc_candidates_.find(h);
      return it != gc_candidates_.end() && it->second > mark;
    };
    rocksdb::WriteBatch batch;
    // One chunk_refs row: deleted with its chunk if nothing references it.
    auto consider = [&](const rocksdb::Slice& key, const rocksdb::Slice& value) -> Status {
      ++res.rows_examined;
      const ChunkHash h = HashOfKey(key);
      StatusOr<RefsRow> row = DecodeRefsRow(value, h);
      if (!row.ok() || key.size() != h.size()) {
        // Never delete what cannot be read: Verify reports it.
        GOS_LOG(kWarn, "storage") << dir_ << ": gc skips a damaged chunk_refs row: "
                                  << (row.ok() ? "bad key" : row.status().message());
        return OkStatus();
      }
      if (row->refs != 0 || later(h)) return OkStatus();
      GOS_RETURN_IF_ERROR(Batch(batch.Delete(chunks_, key), HashHex(h)));
      GOS_RETURN_IF_ERROR(Batch(batch.Delete(refs_, key), HashHex(h)));
      ++res.chunks_removed;
      res.bytes_removed += row->stored_len;
      return OkStatus();
    };
    if (!gc_scanned_) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), refs_));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        GOS_RETURN_IF_ERROR(consider(it->key(), it->value()));
      }
      GOS_RETURN_IF_ERROR(FromRocks(it->status(), "storage " + dir_ + ": scanning chunk_refs"));
    } else {
      for (const auto& [h, seq] : gc_candidates_) {
        if (seq > mark) continue;
        const rocksdb::Slice key = HashKey(h);
        rocksdb::PinnableSlice v;
        const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), refs_, key, &v);
        if (s.IsNotFound()) continue;
        GOS_RETURN_IF_ERROR(FromRocks(s, "storage " + dir_ + ": reading chunk_refs"));
        GOS_RETURN_IF_ERROR(consider(key, v));
      }
    }
    if (res.chunks_removed > 0) {
      GOS_RETURN_IF_ERROR(FromRocks(db_->Write(SyncedWrite(), &batch),
                                    "storage " + dir_ + ": deleting unreferenced chunks"));
    }
    gc_scanned_ = true;
    std::erase_if(gc_candidates_, [&](const auto& c) { return c.second <= mark; });
    GOS_LOG(kInfo, "storage") << dir_ << ": gc removed " << res.chunks_removed << " chunks, "
                              << res.bytes_removed << " stored bytes";
    return res;
  }

  StatusOr<StoreStats> Stats() override {
    StoreStats st;
    {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), refs_));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        GOS_ASSIGN_OR_RETURN(RefsRow row, DecodeRefsRow(it->value(), HashOfKey(it->key())));
        ++st.chunks;
        st.raw_bytes += row.raw_len;
        st.stored_bytes += row.stored_len;
        if (row.refs == 0) ++st.unreferenced;
      }
      GOS_RETURN_IF_ERROR(FromRocks(it->status(), "storage " + dir_ + ": scanning chunk_refs"));
    }
    std::optional<uint64_t> last_job;
    GOS_RETURN_IF_ERROR(ForEachEpoch(nullptr, [&](EpochManifest m) {
      if (last_job != m.job) ++st.jobs;
      last_job = m.job;
      ++st.epochs;
      st.logical_bytes += m.logical_bytes;
      return OkStatus();
    }));
    return st;
  }

  StatusOr<VerifyResult> Verify(
      const std::function<void(uint64_t done, uint64_t total)>& progress) override {
    VerifyResult res;
    uint64_t total = 0;
    GOS_RETURN_IF_ERROR(ForEachEpoch(nullptr, [&](EpochManifest m) {
      for (const EpochRank& r : m.ranks) {
        for (const FileEntry& f : r.files) total += f.chunks.size();
      }
      return OkStatus();
    }));
    if (progress) progress(0, total);

    // Per distinct chunk: references counted, whether it was read, what was wrong with it,
    // and where it was first named (for reference-count problems).
    struct Seen {
      uint64_t refs = 0;
      bool checked = false;
      bool missing = false;   // not stored at all
      bool row_seen = false;  // its chunk_refs row was found
      std::string problem;
      uint64_t job = 0, epoch = 0;
      uint32_t rank = 0;
      std::string file;
    };
    std::map<ChunkHash, Seen> seen;
    uint64_t done = 0;
    GOS_RETURN_IF_ERROR(ForEachEpoch(nullptr, [&](EpochManifest m) {
      for (const EpochRank& r : m.ranks) {
        // An incremental dump restores only with every parent's page images.
        if (const std::string cp = ChainProblem(r); !cp.empty()) {
          res.problems.push_back({m.job, m.epoch, r.rank, "", "", cp});
        }
        for (const FileEntry& f : r.files) {
          const std::string fp = FileProblem(f);
          if (!fp.empty()) res.problems.push_back({m.job, m.epoch, r.rank, f.name, "", fp});
          for (const ChunkRef& c : f.chunks) {
            Seen& s = seen[c.hash];
            if (s.refs++ == 0) {
              s.job = m.job;
              s.epoch = m.epoch;
              s.rank = r.rank;
              s.file = f.name;
            }
            if (!s.checked) {
              s.checked = true;
              StatusOr<std::vector<uint8_t>> raw = ReadChunk(c);
              if (raw.ok()) {
                res.bytes_checked += raw->size();
              } else if (raw.status().code() == StatusCode::kNotFound) {
                s.missing = true;
                s.problem = "missing";
              } else {
                s.problem = "corrupt: " + raw.status().message();
              }
            }
            ++res.chunks_checked;
            if (!s.problem.empty()) {
              res.problems.push_back({m.job, m.epoch, r.rank, f.name, HashHex(c.hash), s.problem});
            }
            if (progress && ++done % 256 == 0) progress(done, total);
          }
        }
      }
      return OkStatus();
    }));

    // Reference counts: every row against the references the epochs hold.
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), refs_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const ChunkHash h = HashOfKey(it->key());
      auto found = seen.find(h);
      const uint64_t expected = found == seen.end() ? 0 : found->second.refs;
      VerifyProblem p;
      if (found != seen.end()) {
        const Seen& s = found->second;
        p = {s.job, s.epoch, s.rank, s.file, HashHex(h), ""};
        found->second.row_seen = true;
      } else {
        p.chunk = HashHex(h);
      }
      StatusOr<RefsRow> row = DecodeRefsRow(it->value(), h);
      if (!row.ok()) {
        p.problem = "corrupt reference count: " + row.status().message();
      } else if (row->refs != expected) {
        p.problem = "reference count " + std::to_string(row->refs) + ", expected " +
                    std::to_string(expected);
      } else {
        continue;
      }
      res.problems.push_back(std::move(p));
    }
    GOS_RETURN_IF_ERROR(FromRocks(it->status(), "storage " + dir_ + ": scanning chunk_refs"));
    for (const auto& [hash, s] : seen) {
      // A stored chunk without a row (a missing chunk was reported above).
      if (!s.row_seen && !s.missing) {
        res.problems.push_back({s.job, s.epoch, s.rank, s.file, HashHex(hash),
                                "reference count absent, expected " + std::to_string(s.refs)});
      }
    }
    if (progress) progress(done, total);
    return res;
  }

 private:
  Status Batch(const rocksdb::Status& s, const std::string& what) {
    return FromRocks(s, "storage " + dir_ + ": batching " + what);
  }

  StatusOr<std::optional<RefsRow>> GetRefs(const ChunkHash& hash) {
    rocksdb::PinnableSlice v;
    const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), refs_, HashKey(hash), &v);
    if (s.IsNotFound()) return std::optional<RefsRow>();
    GOS_RETURN_IF_ERROR(
        FromRocks(s, "storage " + dir_ + ": reading chunk_refs of " + HashHex(hash)));
    GOS_ASSIGN_OR_RETURN(RefsRow row, DecodeRefsRow(v, hash));
    return std::optional<RefsRow>(row);
  }

  StatusOr<EpochManifest> DecodeAt(std::string_view key, const rocksdb::Slice& v) {
    const std::string where = "storage " + dir_ + " epochs key " + Printable(key);
    if (key.size() != 16) return DataLossError(where + ": malformed key");
    StatusOr<EpochManifest> m = DecodeManifest(Bytes(v));
    if (!m.ok()) return m.status().WithContext(where);
    if (m->job != GetBe64(key.data()) || m->epoch != GetBe64(key.data() + 8)) {
      return DataLossError(where + ": holds the manifest of " + EpochName(m->job, m->epoch));
    }
    return m;
  }

  // Calls fn for every epoch (of *job only, if job), in (job, epoch) order, one at a time.
  template <typename Fn>
  Status ForEachEpoch(const uint64_t* job, Fn fn) {
    const std::string prefix = job ? JobPrefix(*job) : std::string();
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), epochs_));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      GOS_ASSIGN_OR_RETURN(EpochManifest m, DecodeAt(it->key().ToStringView(), it->value()));
      GOS_RETURN_IF_ERROR(fn(std::move(m)));
    }
    return FromRocks(it->status(), "storage " + dir_ + ": scanning epochs");
  }

  // Deletes the job's epochs (absent ones are skipped) and drops their references, in one
  // synced batch. Requires mu_.
  Status DeleteLocked(uint64_t job, const std::vector<uint64_t>& epochs) {
    std::map<ChunkHash, uint64_t> decs;
    std::vector<ChunkHash> unreferenced;
    rocksdb::WriteBatch batch;
    size_t deleted = 0;
    for (uint64_t epoch : epochs) {
      const std::string key = EpochKey(job, epoch);
      rocksdb::PinnableSlice v;
      const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), epochs_, key, &v);
      if (s.IsNotFound()) continue;
      GOS_RETURN_IF_ERROR(FromRocks(s, "storage " + dir_ + ": reading " + EpochName(job, epoch)));
      // A manifest that cannot be read cannot have its references dropped: refuse rather
      // than leak them silently.
      GOS_ASSIGN_OR_RETURN(EpochManifest m, DecodeAt(key, v));
      for (const EpochRank& r : m.ranks) {
        for (const FileEntry& f : r.files) {
          for (const ChunkRef& c : f.chunks) ++decs[c.hash];
        }
      }
      GOS_RETURN_IF_ERROR(Batch(batch.Delete(epochs_, key), EpochName(job, epoch)));
      ++deleted;
    }
    if (deleted == 0) return OkStatus();
    for (const auto& [hash, n] : decs) {
      GOS_ASSIGN_OR_RETURN(std::optional<RefsRow> row, GetRefs(hash));
      if (!row) {
        GOS_LOG(kWarn, "storage") << dir_ << ": chunk " << HashHex(hash)
                                  << " named by a deleted epoch has no chunk_refs row";
        continue;
      }
      if (row->refs < n) {
        GOS_LOG(kWarn, "storage") << dir_ << ": chunk " << HashHex(hash) << " had " << row->refs
                                  << " references, dropping " << n;
      }
      row->refs -= std::min(row->refs, n);
      if (row->refs == 0) unreferenced.push_back(hash);
      GOS_RETURN_IF_ERROR(
          Batch(batch.Put(refs_, HashKey(hash), ToSlice(EncodeRefsRow(*row))), HashHex(hash)));
    }
    GOS_RETURN_IF_ERROR(FromRocks(db_->Write(SyncedWrite(), &batch),
                                  "storage " + dir_ + ": deleting " + std::to_string(deleted) +
                                      " epochs of job " + std::to_string(job)));
    for (const ChunkHash& h : unreferenced) gc_candidates_[h] = ++gc_seq_;
    GOS_LOG(kInfo, "storage") << dir_ << ": deleted " << deleted << " epochs of job " << job;
    return OkStatus();
  }

  const std::string dir_;
  rocksdb::DB* const db_;
  rocksdb::ColumnFamilyHandle* const chunks_;
  rocksdb::ColumnFamilyHandle* const refs_;
  rocksdb::ColumnFamilyHandle* const epochs_;
  // Serializes the read-modify-writes of reference counts (PutChunk, CommitEpoch, deletes,
  // Gc) so no increment is lost and Gc never races a commit.
  std::mutex mu_;
  // Whether a Gc has read every chunk_refs row; since then, the chunks that may have no
  // reference: stored, or their last reference dropped, and not committed since (under mu_).
  bool gc_scanned_ = false;
  std::map<ChunkHash, uint64_t> gc_candidates_;  // -> its place in the sequence (gc_seq_)
  uint64_t gc_seq_ = 0;
};

}  // namespace

std::unique_ptr<CheckpointStore> NewCheckpointStore(std::string dir, rocksdb::DB* db,
                                                    rocksdb::ColumnFamilyHandle* chunks,
                                                    rocksdb::ColumnFamilyHandle* chunk_refs,
                                                    rocksdb::ColumnFamilyHandle* epochs) {
  return std::make_unique<RocksCheckpointStore>(std::move(dir), db, chunks, chunk_refs, epochs);
}

}  // namespace gos::storage
