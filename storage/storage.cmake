# gos::chunks: cutting, hashing and compressing checkpoint chunks (gos/storage/chunks.h), and
# the epoch manifests' codec (gos/storage/manifest.h). No RocksDB: the nodeagent links this
# alone.
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
gos_cc_library(NAME chunks HDRS_DIR include
  SRCS chunks.cc manifest.cc
  DEPS gos::common OpenSSL::Crypto PkgConfig::ZSTD PkgConfig::XXHASH)

# gos::storage: the coordinator's RocksDB database — job and node tables
# (docs/specs/storage-tables.md), the checkpoint store (docs/specs/storage-checkpoints.md) and
# the replay logs (docs/specs/replay-log.md).
gos_cc_library(NAME storage HDRS_DIR include
  SRCS tables.cc codec.cc rocks.cc checkpoints.cc replay.cc
  DEPS gos::common gos::chunks RocksDB::rocksdb)
