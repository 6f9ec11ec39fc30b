// The manifest of a checkpoint epoch: which files of which rank, cut into which chunks
// (docs/specs/storage-checkpoints.md). The checkpoint store keeps one per committed epoch;
// the nodeagent ships one rank's part of an epoch and restores a rank from one. Part of
// gos::chunks: no RocksDB.
#ifndef GOS_STORAGE_MANIFEST_H_
#define GOS_STORAGE_MANIFEST_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gos/status.h"
#include "gos/storage/chunks.h"

namespace gos::storage {

struct EpochRank {
  uint32_t rank = 0;
  uint32_t node = 0;             // node it was dumped on
  std::vector<FileEntry> files;  // the rank's image dir, file by file

  friend bool operator==(const EpochRank&, const EpochRank&) = default;
};

struct EpochManifest {
  uint64_t job = 0;
  uint64_t epoch = 0;   // 1, 2, ... per job
  uint64_t strobe = 0;  // strobe at which the job was frozen for it
  uint32_t ntasks = 0;
  int64_t taken_ms = 0;          // unix ms when the job was frozen
  uint64_t logical_bytes = 0;    // sum of all files' sizes
  uint64_t new_bytes = 0;        // raw bytes of chunks the store did not hold before
  uint64_t new_compressed = 0;   // their stored (compressed) bytes
  int64_t pause_ms = 0;          // job frozen for the dump
  int64_t total_ms = 0;          // freeze to commit
  std::vector<EpochRank> ranks;  // ascending rank, all ntasks of them

  friend bool operator==(const EpochManifest&, const EpochManifest&) = default;
};

// How many ranks' dumps in m are incremental: their part names their parents' page files
// under "parent/" (docs/specs/checkpoint.md, "Incremental dumps").
uint32_t IncrementalRanks(const EpochManifest& m);

// For a rank whose dump is incremental: "" if its part names a pagemap and a pages image at
// every level of its chain (its own files, "parent/", "parent/parent/", ... down to the
// deepest), else what is missing. "" for a full dump.
std::string ChainProblem(const EpochRank& r);

// Codec of the manifest (exposed for tests and fuzzing); DATA_LOSS on anything malformed.
std::vector<uint8_t> EncodeManifest(const EpochManifest& m);
StatusOr<EpochManifest> DecodeManifest(std::span<const uint8_t> in);

}  // namespace gos::storage

#endif  // GOS_STORAGE_MANIFEST_H_
