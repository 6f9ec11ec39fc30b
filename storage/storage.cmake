# gos::storage: the coordinator's job and node tables in RocksDB (docs/specs/storage-tables.md).
gos_cc_library(NAME storage HDRS_DIR include
  SRCS tables.cc codec.cc
  DEPS gos::prim RocksDB::rocksdb)
