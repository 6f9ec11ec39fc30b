#include "rocks.h"

#include <rocksdb/advanced_options.h>

namespace gos::storage {

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

rocksdb::ColumnFamilyOptions FamilyOptions(const std::string& name) {
  rocksdb::ColumnFamilyOptions o;
  // Tiny values, or values zstd already compressed: no dependency on whichever compression
  // libraries librocksdb was built with.
  o.compression = rocksdb::kNoCompression;
  if (name == kChunksFamily) {
    // Chunks (up to 256 KiB, typically tens of KiB) go to blob files, so compaction moves
    // only their small index entries, not the data. Blob GC rewrites blob files whose chunks
    // were mostly deleted, so Gc's deletions eventually free disk space.
    o.enable_blob_files = true;
    o.min_blob_size = 4096;
    o.blob_compression_type = rocksdb::kNoCompression;
    o.enable_blob_garbage_collection = true;
  } else {
    o.write_buffer_size = 8 << 20;
  }
  return o;
}

}  // namespace gos::storage
