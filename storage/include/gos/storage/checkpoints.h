// Checkpoint storage in the coordinator's RocksDB database (the one Tables opens; its own
// column families — docs/specs/storage-checkpoints.md):
//   chunks      hash -> stored chunk (zstd frame as shipped by the nodeagent)
//   chunk_refs  hash -> number of committed epochs' file entries that name it
//   epochs      (job, epoch) -> EpochManifest
// A chunk is written once (PutChunk is idempotent) and unreferenced until an epoch naming it
// commits. CommitEpoch writes the manifest and every reference increment in one WriteBatch,
// so after a crash an epoch is either whole or absent. DeleteEpoch is one WriteBatch too.
// Gc removes chunks nothing references — including chunks uploaded for an epoch that is
// still being taken, so the caller runs it only when no epoch is in flight. The first Gc of a
// store object reads every chunk_refs row; later ones read only the candidates this object
// saw since: chunks it stored and chunks whose last reference it dropped (a commit takes a
// chunk off the list), so a Gc after each commit costs what that commit changed, not the
// size of the store. GcBefore(mark) spares what was stored or dropped after GcMark(), so a
// caller may decide "no epoch in flight" under its own lock and collect outside it.
// Every read of a chunk for use is verified against its hash (DecompressChunk).
// Thread-safe.
#ifndef GOS_STORAGE_CHECKPOINTS_H_
#define GOS_STORAGE_CHECKPOINTS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gos/status.h"
#include "gos/storage/chunks.h"
#include "gos/storage/manifest.h"

namespace gos::storage {

struct StoreStats {
  uint64_t chunks = 0;        // stored chunks
  uint64_t raw_bytes = 0;     // their raw size
  uint64_t stored_bytes = 0;  // their stored (compressed) size
  uint64_t unreferenced = 0;  // chunks with no reference (Gc would remove them)
  uint64_t jobs = 0;          // jobs with at least one epoch
  uint64_t epochs = 0;
  uint64_t logical_bytes = 0;  // sum of epochs' logical_bytes
};

struct GcResult {
  uint64_t chunks_removed = 0;
  uint64_t bytes_removed = 0;  // stored bytes
  uint64_t rows_examined = 0;  // chunk_refs rows read: all of them, or only the candidates
};

struct VerifyProblem {
  uint64_t job = 0, epoch = 0;
  uint32_t rank = 0;
  std::string file;
  std::string chunk;    // hex
  std::string problem;  // "missing", "corrupt: ...", "reference count 1, expected 2", ...
};

struct VerifyResult {
  uint64_t chunks_checked = 0;
  uint64_t bytes_checked = 0;  // raw
  std::vector<VerifyProblem> problems;
};

class CheckpointStore {
 public:
  virtual ~CheckpointStore() = default;

  virtual StatusOr<bool> HasChunk(const ChunkHash& hash) = 0;
  // Stores the compressed chunk unless already present. Returns true if it was new. Does not
  // verify (the reader does). INVALID_ARGUMENT if raw_len > kMaxChunkBytes.
  virtual StatusOr<bool> PutChunk(const ChunkRef& ref, std::span<const uint8_t> compressed) = 0;
  // The stored (compressed) bytes, unverified, for shipping; NOT_FOUND naming the hash.
  virtual StatusOr<std::vector<uint8_t>> GetCompressed(const ChunkHash& hash) = 0;
  // Decompressed and verified; NOT_FOUND or DATA_LOSS naming the hash.
  virtual StatusOr<std::vector<uint8_t>> ReadChunk(const ChunkRef& ref) = 0;

  // Commits the epoch: FAILED_PRECONDITION (naming the chunk, rank and file) if a chunk it
  // names is not stored, ALREADY_EXISTS if (job, epoch) exists.
  virtual Status CommitEpoch(const EpochManifest& m) = 0;
  // All epochs of the job, ascending; with files (and chunk lists) only if with_files.
  virtual StatusOr<std::vector<EpochManifest>> ListEpochs(uint64_t job, bool with_files) = 0;
  virtual StatusOr<std::optional<EpochManifest>> GetEpoch(uint64_t job, uint64_t epoch) = 0;
  // Removes the epoch and drops its references (chunks stay until Gc). OK if absent.
  virtual Status DeleteEpoch(uint64_t job, uint64_t epoch) = 0;
  // Deletes all but the newest `keep` epochs of the job (keep >= 1).
  virtual Status Retain(uint64_t job, uint32_t keep) = 0;
  // Removes every unreferenced chunk.
  virtual StatusOr<GcResult> Gc() = 0;
  // A point in this object's sequence of stores and dropped references: GcBefore(mark)
  // removes the unreferenced chunks but those stored or dropped after GcMark() returned mark
  // (e.g. by an epoch ordered after the caller saw none in flight).
  virtual uint64_t GcMark() = 0;
  virtual StatusOr<GcResult> GcBefore(uint64_t mark) = 0;
  virtual StatusOr<StoreStats> Stats() = 0;
  // Reads every chunk every epoch names (verifying it) and checks reference counts.
  // progress(done, total) is called now and then (total = chunk references to check).
  virtual StatusOr<VerifyResult> Verify(
      const std::function<void(uint64_t done, uint64_t total)>& progress) = 0;
};

}  // namespace gos::storage

#endif  // GOS_STORAGE_CHECKPOINTS_H_
