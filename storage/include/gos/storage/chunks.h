// Content-addressed checkpoint chunks: cutting CRIU image files into chunks, hashing and
// compressing them (on the nodeagent), and decompressing and verifying them (anywhere).
// Pure: files in, callbacks out; no RocksDB (that is checkpoints.h).
//
// A chunk is named by the SHA-256 of its raw (uncompressed) bytes. Chunks are cut so that
// memory that did not change between two checkpoints maps to chunks that did not change:
//   - CRIU's pages-<id>.img holds page contents in the order of the pagemap-<id>.img entries
//     (virtual address ranges). Its chunks end at every 64 KiB-aligned *virtual address*
//     boundary of the pages and at every pagemap entry boundary, so a mapping that grows,
//     shrinks or moves shifts no other range's chunks.
//   - Every other file is cut by content (a gear rolling hash; 16 KiB min, 64 KiB average,
//     256 KiB max), so an insertion shifts only the chunks around it.
// Nothing holds more than one chunk (plus a read buffer) in memory.
#ifndef GOS_STORAGE_CHUNKS_H_
#define GOS_STORAGE_CHUNKS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::storage {

using ChunkHash = std::array<uint8_t, 32>;  // SHA-256 of the raw bytes

// Lower-case hex, 64 characters.
std::string HashHex(const ChunkHash& h);
ChunkHash HashBytes(std::span<const uint8_t> raw);

inline constexpr uint32_t kMaxChunkBytes = 256u << 10;

struct ChunkRef {
  ChunkHash hash{};
  uint32_t raw_len = 0;

  friend bool operator==(const ChunkRef&, const ChunkRef&) = default;
};

// One file of a rank's checkpoint: its bytes are the concatenation of its chunks.
struct FileEntry {
  std::string name;  // relative path inside the rank's image dir ("pages-1.img", "job/app")
  uint32_t mode = 0600;
  uint64_t size = 0;
  std::vector<ChunkRef> chunks;

  friend bool operator==(const FileEntry&, const FileEntry&) = default;
};

// Called once per chunk, in file order. raw is valid only during the call. A non-OK return
// stops ChunkFile, which returns it.
using ChunkSink = std::function<Status(const ChunkRef& ref, std::span<const uint8_t> raw)>;

// Cuts dir/name into chunks (rules above; pages-<id>.img needs its pagemap-<id>.img in the
// same dir, else it is cut by content), calls sink for each and fills *out (name, mode, size,
// chunks). Errors name the file.
Status ChunkFile(const std::string& dir, const std::string& name, const ChunkSink& sink,
                 FileEntry* out);

// zstd at the given level (1..19; 0 = zstd's default).
std::vector<uint8_t> CompressChunk(std::span<const uint8_t> raw, int level);
// Decompresses and checks the length and the SHA-256 against ref: DATA_LOSS "chunk <hex>:
// ..." when the bytes are not that chunk (corrupt frame, wrong size, wrong hash).
StatusOr<std::vector<uint8_t>> DecompressChunk(std::span<const uint8_t> compressed,
                                               const ChunkRef& ref);

}  // namespace gos::storage

#endif  // GOS_STORAGE_CHUNKS_H_
