# System dependencies, all from Debian 12 packages (installed by scripts/setup).
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBFABRIC REQUIRED IMPORTED_TARGET libfabric>=1.17)
find_package(Threads REQUIRED)
if(GOS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
find_package(OpenSSL REQUIRED)
# toml++ (libtomlplusplus-dev): the config file, gos.conf (libgos/os/config.cc).
find_package(tomlplusplus 3 REQUIRED)
# RocksDB from Debian ships no CMake config or .pc file usable here: find it directly.
find_path(ROCKSDB_INCLUDE_DIR rocksdb/db.h REQUIRED)
find_library(ROCKSDB_LIBRARY rocksdb REQUIRED)
add_library(gos_rocksdb INTERFACE)
target_include_directories(gos_rocksdb INTERFACE ${ROCKSDB_INCLUDE_DIR})
target_link_libraries(gos_rocksdb INTERFACE ${ROCKSDB_LIBRARY})
add_library(RocksDB::rocksdb ALIAS gos_rocksdb)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
