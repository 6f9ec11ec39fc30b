// Helpers shared by the chunk and checkpoint store tests.
#ifndef GOS_TESTS_SUPPORT_CHUNK_TEST_UTIL_H_
#define GOS_TESTS_SUPPORT_CHUNK_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gos/storage/chunks.h"
#include "tests/support/temp_dir.h"

namespace gos::storage::testing {

using TempDir = ::gos::testing::TempDir;

inline std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t x = rng();
    for (size_t j = 0; j < 8 && i + j < n; ++j) v[i + j] = static_cast<uint8_t>(x >> (8 * j));
  }
  return v;
}

inline void WriteFile(const std::string& path, const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Chunks dir/name, checking that the sink sees exactly the refs ChunkFile records and that the
// chunks concatenate to the file's bytes.
inline FileEntry ChunkAll(const std::string& dir, const std::string& name) {
  FileEntry e;
  std::vector<ChunkRef> seen;
  std::vector<uint8_t> joined;
  Status s = ChunkFile(
      dir, name,
      [&](const ChunkRef& ref, std::span<const uint8_t> raw) {
        EXPECT_EQ(ref.raw_len, raw.size());
        EXPECT_EQ(ref.hash, HashBytes(raw));
        seen.push_back(ref);
        joined.insert(joined.end(), raw.begin(), raw.end());
        return OkStatus();
      },
      &e);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, e.chunks);
  EXPECT_EQ(e.name, name);
  EXPECT_EQ(e.size, joined.size());
  EXPECT_TRUE(joined == ReadFile(dir + "/" + name)) << "chunks do not concatenate to " << name;
  return e;
}

}  // namespace gos::storage::testing

#endif  // GOS_TESTS_SUPPORT_CHUNK_TEST_UTIL_H_
