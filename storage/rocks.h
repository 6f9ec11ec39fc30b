// Private to gos::storage: the edge between RocksDB and gos (status conversion, slices) and
// the constructors of the checkpoint and replay stores, shared by tables.cc, checkpoints.cc and
// replay.cc.
#ifndef GOS_STORAGE_ROCKS_H_
#define GOS_STORAGE_ROCKS_H_

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gos/status.h"
#include "gos/storage/checkpoints.h"
#include "gos/storage/replay.h"
#include "manifest_internal.h"

namespace gos::storage {

// The one place RocksDB's status becomes a gos::Status; RocksDB's text is kept after what.
Status FromRocks(const rocksdb::Status& s, std::string_view what);

inline std::span<const uint8_t> Bytes(const rocksdb::Slice& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
inline rocksdb::Slice ToSlice(std::span<const uint8_t> v) {
  return {reinterpret_cast<const char*>(v.data()), v.size()};
}

// fsync the WAL before acknowledging: a write that returned OK survives SIGKILL and power
// loss.
inline rocksdb::WriteOptions SyncedWrite() {
  rocksdb::WriteOptions w;
  w.sync = true;
  return w;
}

// Column families of the database besides "default" (docs/specs/storage-checkpoints.md).
inline constexpr char kChunksFamily[] = "chunks";
inline constexpr char kChunkRefsFamily[] = "chunk_refs";
inline constexpr char kEpochsFamily[] = "epochs";
inline constexpr char kReplayFamily[] = "replay";  // replay log segments (storage/replay.cc)

// Options of each of our column families.
rocksdb::ColumnFamilyOptions FamilyOptions(const std::string& name);

// The checkpoint store over db's families; the handles stay owned by the caller and must
// outlive the store.
std::unique_ptr<CheckpointStore> NewCheckpointStore(std::string dir, rocksdb::DB* db,
                                                    rocksdb::ColumnFamilyHandle* chunks,
                                                    rocksdb::ColumnFamilyHandle* chunk_refs,
                                                    rocksdb::ColumnFamilyHandle* epochs);

// The replay store over db's "replay" family; the handle stays owned by the caller and must
// outlive the store.
std::unique_ptr<ReplayStore> NewReplayStore(std::string dir, rocksdb::DB* db,
                                            rocksdb::ColumnFamilyHandle* replay);

}  // namespace gos::storage

#endif  // GOS_STORAGE_ROCKS_H_
