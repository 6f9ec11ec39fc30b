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
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
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

// Remembers the SHA-256 of chunks by their length and a fast 128-bit hash of their bytes
// (XXH3-128, ~20 times faster than SHA-256 here), so that a chunk seen in the last generation
// (e.g. the job's previous checkpoint) is named without a SHA-256. A hit trusts XXH3, which is
// not collision resistant against a deliberate attack: use one cache for the data of one owner
// only (the nodeagent keeps one per job), so that a crafted collision can at worst misname that
// owner's own chunk. Thread-safe.
class ChunkHashCache {
 public:
  // raw's SHA-256: remembered, or computed and remembered.
  ChunkHash Hash(std::span<const uint8_t> raw);
  // Starts a generation: what was neither looked up nor added since the previous call is
  // forgotten at the next one.
  void NextGeneration();
  // Lookups answered from memory / computed, since the cache was made.
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Key {
    uint64_t low = 0, high = 0;
    uint32_t len = 0;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.low); }
  };
  mutable std::mutex mu_;
  std::unordered_map<Key, ChunkHash, KeyHash> current_, previous_;
  uint64_t hits_ = 0, misses_ = 0;
};

// Cuts dir/name into chunks (rules above; pages-<id>.img needs its pagemap-<id>.img in the
// same dir, else it is cut by content), calls sink for each and fills *out (name, mode, size,
// chunks). Errors name the file. With a cache, chunk hashes come through it.
//
// kMap reads a CRIU page image through a read-only mapping instead of read(): no copy into a
// buffer (a 1 GiB image is hashed in ~90 ms instead of ~150 ms on this VM). Only for a file
// that nothing shrinks meanwhile: a page past a new end raises SIGBUS. Other files are read.
enum class ChunkRead { kRead, kMap };
Status ChunkFile(const std::string& dir, const std::string& name, const ChunkSink& sink,
                 FileEntry* out, ChunkHashCache* cache = nullptr, ChunkRead how = ChunkRead::kRead);

// zstd at the given level (1..19; 0 = zstd's default).
std::vector<uint8_t> CompressChunk(std::span<const uint8_t> raw, int level);
// Decompresses and checks the length and the SHA-256 against ref: DATA_LOSS "chunk <hex>:
// ..." when the bytes are not that chunk (corrupt frame, wrong size, wrong hash).
StatusOr<std::vector<uint8_t>> DecompressChunk(std::span<const uint8_t> compressed,
                                               const ChunkRef& ref);

}  // namespace gos::storage

#endif  // GOS_STORAGE_CHUNKS_H_
