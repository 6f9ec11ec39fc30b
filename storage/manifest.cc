// Epoch manifests (gos/storage/manifest.h): their codec and the checks CommitEpoch shares
// with the decoder. Part of gos::chunks (no RocksDB), so that the nodeagent encodes and
// decodes manifests without linking the store. Format: docs/specs/storage-checkpoints.md.
#include "gos/storage/manifest.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <string_view>

#include "gos/codec/bytes.h"
#include "manifest_internal.h"

namespace gos::storage {
namespace {

constexpr uint8_t kManifestVersion = 1;
// Limits of the manifest format; the decoder refuses anything beyond them.
constexpr uint32_t kMaxRanks = 1u << 20;
constexpr uint32_t kMaxFilesPerRank = 1u << 16;
constexpr size_t kMaxNameBytes = 4096;
constexpr size_t kChunkRefBytes = 32 + 4;

// A relative path inside the rank's image dir: the restorer writes files by these names.
bool SafeName(const std::string& n) {
  if (n.empty() || n.size() > kMaxNameBytes || n.front() == '/' || n.back() == '/') return false;
  if (n.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= n.size()) {
    size_t end = n.find('/', start);
    if (end == std::string::npos) end = n.size();
    const std::string_view part(n.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// Bounds-checked reader that remembers the first failure and where it was.
class ManifestReader {
 public:
  explicit ManifestReader(std::span<const uint8_t> in) : in_(in) {}

  template <typename T>
  bool Int(const char* field, T* v) {
    return in_.Get(v) || Fail(field, "truncated");
  }
  bool Raw(const char* field, uint8_t* out, size_t n) {
    return in_.Raw(out, n) || Fail(field, "truncated");
  }
  // A name longer than what is left fails at the byte after its u16 length.
  bool Str(const char* field, std::string* s) {
    return in_.Str(s, 0xffff) || Fail(field, "truncated");
  }
  // A u32 count of at most max elements of at least min_bytes each, checked against what is
  // left so a corrupt count cannot cause a huge allocation.
  bool Count(const char* field, uint32_t* n, uint64_t max, size_t min_bytes) {
    if (!Int(field, n)) return false;
    if (*n > max || static_cast<uint64_t>(*n) * min_bytes > in_.remaining()) {
      return Fail(field, "count " + std::to_string(*n) + " is over its limit or the value");
    }
    return true;
  }
  bool Fail(const std::string& field, const std::string& why) {
    if (error_.empty()) {
      error_ = field + " at byte " + std::to_string(in_.position()) + ": " + why;
    }
    return false;
  }
  bool End() {
    return in_.done() || Fail("end", std::to_string(in_.remaining()) + " trailing bytes");
  }
  Status Error() const { return DataLossError("corrupt epoch manifest: " + error_); }

 private:
  codec::Reader in_;
  std::string error_;
};

}  // namespace

namespace internal {

std::string EpochName(uint64_t job, uint64_t epoch) {
  return "job " + std::to_string(job) + " epoch " + std::to_string(epoch);
}

// ---------------------------------------------------------------------------------------
// Manifest checks shared by CommitEpoch (INVALID_ARGUMENT) and the decoder (DATA_LOSS).

// Empty if the file entry is well-formed, else what is wrong with it.
std::string FileProblem(const FileEntry& f) {
  if (!SafeName(f.name)) return "name \"" + Printable(f.name) + "\" is not a safe relative path";
  uint64_t sum = 0;
  for (const ChunkRef& c : f.chunks) {
    if (c.raw_len == 0 || c.raw_len > kMaxChunkBytes) {
      return "chunk " + HashHex(c.hash) + " has length " + std::to_string(c.raw_len);
    }
    sum += c.raw_len;
  }
  if (sum != f.size) {
    return "size " + std::to_string(f.size) + " but its chunks hold " + std::to_string(sum) +
           " bytes";
  }
  return "";
}

Status ValidateManifest(const EpochManifest& m) {
  const std::string what = "epoch manifest of " + EpochName(m.job, m.epoch);
  if (m.epoch == 0) return InvalidArgumentError(what + ": epochs count from 1");
  if (m.ranks.size() != m.ntasks || m.ntasks > kMaxRanks) {
    return InvalidArgumentError(what + ": " + std::to_string(m.ranks.size()) +
                                " ranks for ntasks " + std::to_string(m.ntasks));
  }
  for (size_t i = 0; i < m.ranks.size(); ++i) {
    const EpochRank& r = m.ranks[i];
    if (r.rank != i) {
      return InvalidArgumentError(what + ": ranks[" + std::to_string(i) + "] is rank " +
                                  std::to_string(r.rank) + " (want ascending, all of them)");
    }
    if (r.files.size() > kMaxFilesPerRank) {
      return InvalidArgumentError(what + ": rank " + std::to_string(i) + " has " +
                                  std::to_string(r.files.size()) + " files");
    }
    for (const FileEntry& f : r.files) {
      const std::string p = FileProblem(f);
      if (!p.empty()) {
        return InvalidArgumentError(what + ": rank " + std::to_string(i) + " file " +
                                    Printable(f.name) + ": " + p);
      }
    }
  }
  return OkStatus();
}

}  // namespace internal

std::string Printable(std::string_view key) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

std::vector<uint8_t> EncodeManifest(const EpochManifest& m) {
  std::vector<uint8_t> out;
  codec::Writer w(&out);
  w.U8(kManifestVersion);
  w.U64(m.job);
  w.U64(m.epoch);
  w.U64(m.strobe);
  w.U32(m.ntasks);
  w.I64(m.taken_ms);
  w.U64(m.logical_bytes);
  w.U64(m.new_bytes);
  w.U64(m.new_compressed);
  w.I64(m.pause_ms);
  w.I64(m.total_ms);
  w.U32(static_cast<uint32_t>(m.ranks.size()));
  for (const EpochRank& r : m.ranks) {
    w.U32(r.rank);
    w.U32(r.node);
    w.U32(static_cast<uint32_t>(r.files.size()));
    for (const FileEntry& f : r.files) {
      // CommitEpoch validated the name's length; the clamp only keeps the encoding parseable.
      w.Str(std::string_view(f.name).substr(0, kMaxNameBytes));
      w.U32(f.mode);
      w.U64(f.size);
      w.U32(static_cast<uint32_t>(f.chunks.size()));
      for (const ChunkRef& c : f.chunks) {
        w.Raw(c.hash.data(), c.hash.size());
        w.U32(c.raw_len);
      }
    }
  }
  return out;
}

uint32_t IncrementalRanks(const EpochManifest& m) {
  uint32_t n = 0;
  for (const EpochRank& r : m.ranks) {
    n += std::any_of(r.files.begin(), r.files.end(),
                     [](const FileEntry& f) { return f.name.rfind("parent/", 0) == 0; });
  }
  return n;
}

std::string ChainProblem(const EpochRank& r) {
  constexpr std::string_view kParent = "parent/";
  std::map<size_t, std::pair<bool, bool>> levels;  // depth: (a pagemap, a pages image)
  size_t deepest = 0;
  for (const FileEntry& f : r.files) {
    std::string_view name = f.name;
    size_t depth = 0;
    while (name.substr(0, kParent.size()) == kParent) {
      name.remove_prefix(kParent.size());
      ++depth;
    }
    if (name.substr(0, 8) == "pagemap-") levels[depth].first = true;
    if (name.substr(0, 6) == "pages-") levels[depth].second = true;
    deepest = std::max(deepest, depth);
  }
  for (size_t d = 0; d <= deepest && deepest > 0; ++d) {
    std::string where;
    for (size_t i = 0; i < d; ++i) where += kParent;
    if (!levels[d].first || !levels[d].second) {
      return "incomplete chain of incremental dumps: no " +
             std::string(levels[d].first ? "pages image" : "pagemap image") + " at " +
             (d == 0 ? std::string("the rank's own level") : where);
    }
  }
  return "";
}

StatusOr<EpochManifest> DecodeManifest(std::span<const uint8_t> in) {
  ManifestReader r(in);
  EpochManifest m;
  uint8_t version = 0;
  uint32_t nranks = 0;
  if (!r.Int("version", &version)) return r.Error();
  if (version != kManifestVersion) {
    r.Fail("version", "unsupported manifest version " + std::to_string(version) +
                          " (this build reads version " + std::to_string(kManifestVersion) + ")");
    return r.Error();
  }
  if (!r.Int("job", &m.job) || !r.Int("epoch", &m.epoch) || !r.Int("strobe", &m.strobe) ||
      !r.Int("ntasks", &m.ntasks) || !r.Int("taken_ms", &m.taken_ms) ||
      !r.Int("logical_bytes", &m.logical_bytes) || !r.Int("new_bytes", &m.new_bytes) ||
      !r.Int("new_compressed", &m.new_compressed) || !r.Int("pause_ms", &m.pause_ms) ||
      !r.Int("total_ms", &m.total_ms) || !r.Count("ranks", &nranks, kMaxRanks, 12)) {
    return r.Error();
  }
  m.ranks.resize(nranks);
  for (EpochRank& rank : m.ranks) {
    uint32_t nfiles = 0;
    if (!r.Int("rank", &rank.rank) || !r.Int("node", &rank.node) ||
        !r.Count("files", &nfiles, kMaxFilesPerRank, 18)) {
      return r.Error();
    }
    rank.files.resize(nfiles);
    for (FileEntry& f : rank.files) {
      uint32_t nchunks = 0;
      if (!r.Str("file name", &f.name) || !r.Int("mode", &f.mode) || !r.Int("size", &f.size) ||
          !r.Count("chunks", &nchunks, std::numeric_limits<uint32_t>::max(), kChunkRefBytes)) {
        return r.Error();
      }
      f.chunks.resize(nchunks);
      for (ChunkRef& c : f.chunks) {
        if (!r.Raw("chunk hash", c.hash.data(), c.hash.size()) ||
            !r.Int("chunk length", &c.raw_len)) {
          return r.Error();
        }
      }
      const std::string p = internal::FileProblem(f);
      if (!p.empty()) {
        r.Fail("file",
               "rank " + std::to_string(rank.rank) + " file " + Printable(f.name) + ": " + p);
        return r.Error();
      }
    }
  }
  if (!r.End()) return r.Error();
  return m;
}

}  // namespace gos::storage
