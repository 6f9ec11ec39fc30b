// The replay store over the "replay" column family (docs/specs/replay-log.md, "Storage").
#include "gos/storage/replay.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>

#include "rocks.h"

namespace gos::storage {
namespace {

constexpr size_t kKeyBytes = 20;  // u64 job | u32 stream | u64 seq, big-endian

void PutBe(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetBe(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(in[at + i]);
  return v;
}

std::string JobPrefix(uint64_t job) {
  std::string k;
  PutBe(k, job, 8);
  return k;
}

std::string StreamPrefix(uint64_t job, uint32_t stream) {
  std::string k = JobPrefix(job);
  PutBe(k, stream, 4);
  return k;
}

std::string SegmentKey(uint64_t job, uint32_t stream, uint64_t seq) {
  std::string k = StreamPrefix(job, stream);
  PutBe(k, seq, 8);
  return k;
}

// Past every key of the job (keys are 20 bytes; this is 21, all 0xff after the job).
std::string JobEnd(uint64_t job) { return JobPrefix(job) + std::string(13, '\xff'); }

// Past every key of the stream (21 bytes, all 0xff after the stream).
std::string StreamEnd(uint64_t job, uint32_t stream) {
  return StreamPrefix(job, stream) + std::string(9, '\xff');
}

struct Key {
  uint64_t job;
  uint32_t stream;
  uint64_t seq;
};

std::optional<Key> ParseKey(const rocksdb::Slice& s) {
  if (s.size() != kKeyBytes) return std::nullopt;
  const std::string_view k(s.data(), s.size());
  return Key{GetBe(k, 0, 8), static_cast<uint32_t>(GetBe(k, 8, 4)), GetBe(k, 12, 8)};
}

class RocksReplayStore final : public ReplayStore {
 public:
  RocksReplayStore(std::string dir, rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf)
      : dir_(std::move(dir)), db_(db), cf_(cf) {}

  Status Append(uint64_t job, uint32_t stream, std::span<const uint8_t> segment) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::pair<uint64_t, uint32_t> id(job, stream);
    auto it = next_seq_.find(id);
    if (it == next_seq_.end()) {
      GOS_ASSIGN_OR_RETURN(uint64_t next, FindNextSeq(job, stream));
      it = next_seq_.emplace(id, next).first;
    }
    if (it->second == std::numeric_limits<uint64_t>::max()) {
      return ResourceExhaustedError(Where(job, stream) + ": segment numbers exhausted");
    }
    const std::string key = SegmentKey(job, stream, it->second);
    GOS_RETURN_IF_ERROR(
        FromRocks(db_->Put(rocksdb::WriteOptions(), cf_, key, ToSlice(segment)),
                  Where(job, stream) + ": appending segment " + std::to_string(it->second)));
    ++it->second;
    return OkStatus();
  }

  Status Sync() override {
    return FromRocks(db_->SyncWAL(), "storage " + dir_ + ": syncing the replay logs");
  }

  StatusOr<std::vector<uint32_t>> Streams(uint64_t job) override {
    std::vector<uint32_t> out;
    const std::string end = JobEnd(job);
    const rocksdb::Slice upper(end);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, cf_));
    it->Seek(JobPrefix(job));
    while (it->Valid()) {
      GOS_ASSIGN_OR_RETURN(Key k, Parse(it->key()));
      out.push_back(k.stream);
      if (k.stream == std::numeric_limits<uint32_t>::max()) break;
      // Skip the stream's other segments.
      it->Seek(StreamPrefix(job, k.stream + 1));
    }
    GOS_RETURN_IF_ERROR(FromRocks(it->status(), Where(job) + ": listing streams"));
    return out;
  }

  StatusOr<std::vector<std::string>> Read(uint64_t job, uint32_t stream) override {
    std::vector<std::string> out;
    GOS_RETURN_IF_ERROR(
        Scan(StreamPrefix(job, stream), [&](const Key& k, const rocksdb::Slice& value) -> Status {
          // Segments are numbered from 0 without gaps; a hole means one was lost.
          if (k.seq != out.size()) {
            return DataLossError(Where(job, stream) + ": segment " + std::to_string(out.size()) +
                                 " is missing (next is " + std::to_string(k.seq) + ")");
          }
          out.emplace_back(value.data(), value.size());
          return OkStatus();
        }));
    return out;
  }

  StatusOr<std::map<uint32_t, ReplayStreamStats>> Stats(uint64_t job) override {
    std::map<uint32_t, ReplayStreamStats> out;
    GOS_RETURN_IF_ERROR(
        Scan(JobPrefix(job), [&](const Key& k, const rocksdb::Slice& value) -> Status {
          ReplayStreamStats& s = out[k.stream];
          ++s.segments;
          s.bytes += value.size();
          return OkStatus();
        }));
    return out;
  }

  StatusOr<std::map<uint64_t, uint64_t>> Jobs() override {
    std::map<uint64_t, uint64_t> out;
    GOS_RETURN_IF_ERROR(Scan(std::string(), [&](const Key& k, const rocksdb::Slice& value) {
      out[k.job] += value.size();
      return OkStatus();
    }));
    return out;
  }

  StatusOr<std::vector<uint64_t>> JobIds() override {
    std::vector<uint64_t> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_));
    it->Seek(std::string());
    while (it->Valid()) {
      GOS_ASSIGN_OR_RETURN(Key k, Parse(it->key()));
      out.push_back(k.job);
      if (k.job == std::numeric_limits<uint64_t>::max()) break;
      it->Seek(JobPrefix(k.job + 1));  // past the job's other segments
    }
    GOS_RETURN_IF_ERROR(FromRocks(it->status(), "storage " + dir_ + ": listing the replay logs"));
    return out;
  }

  Status DeleteJob(uint64_t job) override {
    std::lock_guard<std::mutex> lock(mu_);
    GOS_RETURN_IF_ERROR(FromRocks(db_->DeleteRange(SyncedWrite(), cf_, JobPrefix(job), JobEnd(job)),
                                  Where(job) + ": deleting"));
    next_seq_.erase(next_seq_.lower_bound({job, 0}),
                    next_seq_.upper_bound({job, std::numeric_limits<uint32_t>::max()}));
    return OkStatus();
  }

  Status Cut(uint64_t job, std::span<const ReplayStreamCut> cuts) override {
    std::lock_guard<std::mutex> lock(mu_);
    rocksdb::WriteBatch batch;
    for (const ReplayStreamCut& c : cuts) {
      const std::string where =
          Where(job, c.stream) + ": cutting at segment " + std::to_string(c.keep);
      // A cut past the stream's end would leave a hole in its seq numbers.
      GOS_ASSIGN_OR_RETURN(uint64_t have, FindNextSeq(job, c.stream));
      if (c.keep > have) {
        return InvalidArgumentError(where + ": the stream has only " + std::to_string(have) +
                                    " segments");
      }
      GOS_RETURN_IF_ERROR(FromRocks(
          batch.DeleteRange(cf_, SegmentKey(job, c.stream, c.keep), StreamEnd(job, c.stream)),
          where));
      for (size_t i = 0; i < c.tail.size(); ++i) {
        GOS_RETURN_IF_ERROR(
            FromRocks(batch.Put(cf_, SegmentKey(job, c.stream, c.keep + i), c.tail[i]), where));
      }
    }
    GOS_RETURN_IF_ERROR(
        FromRocks(db_->Write(SyncedWrite(), &batch), Where(job) + ": cutting the log"));
    for (const ReplayStreamCut& c : cuts) next_seq_[{job, c.stream}] = c.keep + c.tail.size();
    return OkStatus();
  }

 private:
  std::string Where(uint64_t job) const {
    return "storage " + dir_ + ": replay log of job " + std::to_string(job);
  }
  std::string Where(uint64_t job, uint32_t stream) const {
    return Where(job) + " stream " + std::to_string(stream);
  }

  StatusOr<Key> Parse(const rocksdb::Slice& key) const {
    std::optional<Key> k = ParseKey(key);
    if (!k) {
      return DataLossError("storage " + dir_ + ": malformed replay key " +
                           Printable(std::string_view(key.data(), key.size())));
    }
    return *k;
  }

  // Calls f(key, value) for every key starting with prefix, in order.
  template <typename F>
  Status Scan(const std::string& prefix, F f) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      GOS_ASSIGN_OR_RETURN(Key k, Parse(it->key()));
      GOS_RETURN_IF_ERROR(f(k, it->value()));
    }
    return FromRocks(it->status(), "storage " + dir_ + ": scanning the replay logs");
  }

  // The seq after the stream's last segment (0 if it has none).
  StatusOr<uint64_t> FindNextSeq(uint64_t job, uint32_t stream) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_));
    const std::string prefix = StreamPrefix(job, stream);
    it->SeekForPrev(SegmentKey(job, stream, std::numeric_limits<uint64_t>::max()));
    if (it->Valid() && it->key().starts_with(prefix)) {
      GOS_ASSIGN_OR_RETURN(Key k, Parse(it->key()));
      if (k.seq == std::numeric_limits<uint64_t>::max()) {
        return ResourceExhaustedError(Where(job, stream) + ": segment numbers exhausted");
      }
      return k.seq + 1;
    }
    GOS_RETURN_IF_ERROR(FromRocks(it->status(), Where(job, stream) + ": finding the last segment"));
    return uint64_t{0};
  }

  const std::string dir_;
  rocksdb::DB* const db_;
  rocksdb::ColumnFamilyHandle* const cf_;
  std::mutex mu_;  // serializes Append's seq assignment and DeleteJob
  // (job, stream) -> seq of its next segment; filled on first Append.
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> next_seq_;
};

}  // namespace

StatusOr<PrunedLogs> PruneLogs(ReplayStore* store, size_t keep, const std::set<uint64_t>& in_use) {
  PrunedLogs out;
  if (keep == 0) return out;
  GOS_ASSIGN_OR_RETURN(std::vector<uint64_t> jobs, store->JobIds());
  size_t kept = 0;
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {  // newest first
    if (in_use.count(*it)) continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    GOS_ASSIGN_OR_RETURN(auto stats, store->Stats(*it));
    for (const auto& [stream, s] : stats) out.bytes += s.bytes;
    GOS_RETURN_IF_ERROR(store->DeleteJob(*it));
    out.jobs.push_back(*it);
  }
  std::reverse(out.jobs.begin(), out.jobs.end());
  return out;
}

std::unique_ptr<ReplayStore> NewReplayStore(std::string dir, rocksdb::DB* db,
                                            rocksdb::ColumnFamilyHandle* replay) {
  return std::make_unique<RocksReplayStore>(std::move(dir), db, replay);
}

}  // namespace gos::storage
