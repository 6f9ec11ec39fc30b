# gos::replay: the replay log's codecs (docs/specs/replay-log.md) and the Chrome trace
# exporter. No RocksDB: the nodeagent links this alone; the coordinator stores the segments
# through gos::storage's ReplayStore.
if(NOT TARGET PkgConfig::ZSTD)
  pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
endif()
gos_cc_library(NAME replay HDRS_DIR include
  SRCS log.cc trace.cc matcher_input.cc
  DEPS gos::common gos::matcher PkgConfig::ZSTD)
