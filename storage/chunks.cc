// Chunk cutting, hashing and compression (gos/storage/chunks.h; formats and cut rules in
// docs/specs/storage-checkpoints.md). Everything here reads files through a bounded buffer:
// at most one read buffer plus one chunk is in memory, whatever the file size.
#include "gos/storage/chunks.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "gos/codec/bytes.h"
#include "gos/fd.h"
#include "gos/log.h"

namespace gos::storage {
namespace {

// ---------------------------------------------------------------------------------------
// Cut parameters. They decide chunk identity across checkpoints (and gos versions): changing
// any of them makes every chunk new once. docs/specs/storage-checkpoints.md.

constexpr uint32_t kCdcMin = 16u << 10;
constexpr uint32_t kCdcAvg = 64u << 10;  // the switch point of normalized chunking
constexpr uint32_t kCdcMax = kMaxChunkBytes;
// FastCDC-style normalized chunking: a harder condition before kCdcAvg and an easier one
// after it pulls sizes towards the average. The condition tests the top bits of the gear
// hash (they depend on the last 64 bytes; the low bits only on the last few).
constexpr int kCdcBitsBelowAvg = 16;
constexpr int kCdcBitsAboveAvg = 14;
// Pages chunks end at every multiple of this in virtual address space.
constexpr uint64_t kPagesAlign = 64u << 10;
constexpr size_t kReadBuffer = 4 * static_cast<size_t>(kCdcMax);

// CRIU image magics (criu/include/magic.h): every protobuf image starts with the common
// magic, then its own.
constexpr uint32_t kCriuImgCommonMagic = 0x54564319;
constexpr uint32_t kCriuPagemapMagic = 0x56084025;
// PagemapEntry.flags (images/pagemap.proto).
constexpr uint32_t kPeParent = 1;
constexpr uint32_t kPePresent = 4;
// An entry is a few varints: anything far larger is not a pagemap we understand.
constexpr uint32_t kMaxPagemapRecord = 4096;

// The gear table: 256 pseudo-random u64 from splitmix64 with a fixed seed, so that every
// build cuts identically.
constexpr std::array<uint64_t, 256> MakeGear() {
  std::array<uint64_t, 256> g{};
  uint64_t x = 0x676f732d63646321ull;  // "gos-cdc!"
  for (uint64_t& v : g) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    v = z ^ (z >> 31);
  }
  return g;
}
constexpr std::array<uint64_t, 256> kGear = MakeGear();

// Length of the next content-defined chunk of data[0, n): n <= kCdcMax, and n < kCdcMax
// only at the end of the file.
size_t CdcCut(const uint8_t* data, size_t n) {
  if (n <= kCdcMin) return n;
  const size_t limit = std::min<size_t>(n, kCdcMax);
  const size_t normal = std::min<size_t>(limit, kCdcAvg);
  uint64_t h = 0;
  size_t i = kCdcMin;
  for (; i < normal; ++i) {
    h = (h << 1) + kGear[data[i]];
    if ((h >> (64 - kCdcBitsBelowAvg)) == 0) return i + 1;
  }
  for (; i < limit; ++i) {
    h = (h << 1) + kGear[data[i]];
    if ((h >> (64 - kCdcBitsAboveAvg)) == 0) return i + 1;
  }
  return limit;
}

// ---------------------------------------------------------------------------------------
// Files.

// Reads up to n bytes (fewer only at end of file).
StatusOr<size_t> ReadFull(int fd, uint8_t* buf, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, buf + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "reading " + path);
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

StatusOr<Fd> OpenRead(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "opening " + path);
  return Fd(fd);
}

// Sequential little-endian / protobuf reader over a file, through a small buffer.
class ImageReader {
 public:
  ImageReader(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  // nullopt at a clean end of file; an error for a short or failed read.
  StatusOr<std::optional<uint32_t>> U32OrEof() {
    uint8_t b[4];
    GOS_ASSIGN_OR_RETURN(size_t n, Read(b, 4));
    if (n == 0) return std::optional<uint32_t>();
    if (n != 4) return Bad("truncated record length");
    return std::optional<uint32_t>(
        static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
        (static_cast<uint32_t>(b[2]) << 16) | (static_cast<uint32_t>(b[3]) << 24));
  }
  Status Bytes(uint8_t* out, size_t n) {
    GOS_ASSIGN_OR_RETURN(size_t got, Read(out, n));
    if (got != n) return Bad("truncated record");
    return OkStatus();
  }
  Status Bad(const std::string& why) const {
    return DataLossError(path_ + " is not a pagemap this build reads: " + why);
  }

 private:
  StatusOr<size_t> Read(uint8_t* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      if (pos_ == end_) {
        GOS_ASSIGN_OR_RETURN(size_t got, ReadFull(fd_, buf_.data(), buf_.size(), path_));
        pos_ = 0;
        end_ = got;
        if (got == 0) break;
      }
      const size_t k = std::min(n - done, end_ - pos_);
      std::memcpy(out + done, buf_.data() + pos_, k);
      pos_ += k;
      done += k;
    }
    return done;
  }

  int fd_;
  std::string path_;
  std::array<uint8_t, 8192> buf_{};
  size_t pos_ = 0, end_ = 0;
};

// Calls field(number, value) for each varint field of a protobuf message; other wire types
// are skipped. False on malformed input (varints bounds-checked by gos/codec/bytes.h).
template <typename F>
bool ForEachVarint(std::span<const uint8_t> msg, F field) {
  codec::Reader in(msg);
  while (!in.done()) {
    uint64_t key = 0, v = 0;
    if (!in.Var(&key)) return false;
    switch (key & 7) {
      case 0:
        if (!in.Var(&v)) return false;
        field(key >> 3, v);
        break;
      case 1:
        if (!in.Skip(8)) return false;
        break;
      case 2:
        if (!in.Var(&v) || !in.Skip(v)) return false;
        break;
      case 5:
        if (!in.Skip(4)) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

struct PagemapEntry {
  uint64_t vaddr = 0;
  uint64_t bytes = 0;
  bool in_pages_file = false;  // its pages are stored in pages-<id>.img
};

// Reads one pagemap image: the two magics, the PagemapHead, then entries.
class PagemapReader {
 public:
  static StatusOr<std::unique_ptr<PagemapReader>> Open(const std::string& path) {
    GOS_ASSIGN_OR_RETURN(Fd fd, OpenRead(path));
    std::unique_ptr<PagemapReader> r(new PagemapReader(std::move(fd), path));
    GOS_ASSIGN_OR_RETURN(std::optional<uint32_t> m1, r->in_.U32OrEof());
    GOS_ASSIGN_OR_RETURN(std::optional<uint32_t> m2, r->in_.U32OrEof());
    if (!m1 || !m2 || *m1 != kCriuImgCommonMagic || *m2 != kCriuPagemapMagic) {
      return r->in_.Bad("bad magic");
    }
    GOS_ASSIGN_OR_RETURN(std::optional<std::vector<uint8_t>> head, r->Record());
    if (!head) return r->in_.Bad("no PagemapHead");
    bool have_id = false;
    if (!ForEachVarint(*head,
                       [&](uint64_t field, uint64_t v) {
                         if (field == 1) {
                           r->pages_id_ = v;
                           have_id = true;
                         }
                       }) ||
        !have_id) {
      return r->in_.Bad("malformed PagemapHead");
    }
    return r;
  }

  uint64_t pages_id() const { return pages_id_; }

  // The next entry; nullopt at the end.
  StatusOr<std::optional<PagemapEntry>> Next() {
    GOS_ASSIGN_OR_RETURN(std::optional<std::vector<uint8_t>> rec, Record());
    if (!rec) return std::optional<PagemapEntry>();
    PagemapEntry e;
    uint64_t nr_pages = 0, flags = 0;
    bool in_parent = false, have_flags = false;
    if (!ForEachVarint(*rec, [&](uint64_t field, uint64_t v) {
          if (field == 1) e.vaddr = v;
          if (field == 2) nr_pages = v;
          if (field == 3) in_parent = v != 0;
          if (field == 4) {
            flags = v;
            have_flags = true;
          }
        })) {
      return in_.Bad("malformed PagemapEntry");
    }
    // As CRIU reads images of older versions (init_compat_pagemap_entry in criu/pagemap.c).
    if (in_parent) {
      flags |= kPeParent;
    } else if (!have_flags) {
      flags = kPePresent;
    }
    static const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    if (nr_pages > (UINT64_MAX / kPage) || e.vaddr > UINT64_MAX - nr_pages * kPage) {
      return in_.Bad("entry out of range");
    }
    e.bytes = nr_pages * kPage;
    // Pages CRIU wrote to pages-<id>.img: present and not left in a parent image. Lazy pages
    // are written too unless CRIU runs with --lazy-pages, where they are not PRESENT.
    e.in_pages_file = (flags & kPePresent) != 0 && (flags & kPeParent) == 0;
    return std::optional<PagemapEntry>(e);
  }

 private:
  PagemapReader(Fd fd, const std::string& path) : fd_(std::move(fd)), in_(fd_.get(), path) {}

  StatusOr<std::optional<std::vector<uint8_t>>> Record() {
    GOS_ASSIGN_OR_RETURN(std::optional<uint32_t> len, in_.U32OrEof());
    if (!len) return std::optional<std::vector<uint8_t>>();
    if (*len > kMaxPagemapRecord) return in_.Bad("record of " + std::to_string(*len) + " bytes");
    std::vector<uint8_t> rec(*len);
    GOS_RETURN_IF_ERROR(in_.Bytes(rec.data(), rec.size()));
    return std::optional<std::vector<uint8_t>>(std::move(rec));
  }

  Fd fd_;
  ImageReader in_;
  uint64_t pages_id_ = 0;
};

// "pages-<id>.img" -> id.
std::optional<uint64_t> PagesId(std::string_view base) {
  constexpr std::string_view kPre = "pages-", kSuf = ".img";
  if (base.size() <= kPre.size() + kSuf.size() || !base.starts_with(kPre) ||
      !base.ends_with(kSuf)) {
    return std::nullopt;
  }
  const std::string_view digits = base.substr(kPre.size(), base.size() - kPre.size() - kSuf.size());
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// The pagemap image (pagemap-<pid>.img or pagemap-shmem-<id>.img) in dir whose PagemapHead
// names pages_id, checked against the pages file: its present entries must add up to exactly
// pages_size bytes. nullopt (with the reason logged) when there is none that fits.
std::optional<std::string> FindPagemap(const std::string& dir, uint64_t pages_id,
                                       uint64_t pages_size, const std::string& pages_path) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) {
    GOS_LOG(kWarn, "chunks") << pages_path << ": cannot list " << dir << ": "
                             << std::strerror(errno) << "; cutting it by content";
    return std::nullopt;
  }
  std::string last_problem = "no pagemap image names pages id " + std::to_string(pages_id);
  while (const dirent* de = ::readdir(d.get())) {
    const std::string_view n(de->d_name);
    if (!n.starts_with("pagemap-") || !n.ends_with(".img")) continue;
    const std::string path = dir + "/" + std::string(n);
    StatusOr<std::unique_ptr<PagemapReader>> pm = PagemapReader::Open(path);
    if (!pm.ok()) {
      last_problem = pm.status().message();
      continue;
    }
    if ((*pm)->pages_id() != pages_id) continue;
    uint64_t total = 0;
    Status bad;
    for (;;) {
      StatusOr<std::optional<PagemapEntry>> e = (*pm)->Next();
      if (!e.ok()) {
        bad = e.status();
        break;
      }
      if (!e->has_value()) break;
      if ((*e)->in_pages_file) total += (*e)->bytes;
    }
    if (bad.ok() && total == pages_size) return path;
    last_problem = bad.ok() ? path + " accounts for " + std::to_string(total) +
                                  " bytes of pages, the file has " + std::to_string(pages_size)
                            : bad.message();
  }
  GOS_LOG(kWarn, "chunks") << pages_path << ": " << last_problem << "; cutting it by content";
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------
// Hashing.

const EVP_MD* Sha256() {
  // Fetched once: the implicit fetch behind EVP_sha256() costs a lock and a lookup per call.
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (md == nullptr) {
    GOS_LOG(kError, "chunks") << "OpenSSL has no SHA256";
    std::abort();
  }
  return md;
}

// Everything a sink call needs: hashes the chunk, calls sink, appends the ref.
Status Emit(std::span<const uint8_t> raw, const ChunkSink& sink, FileEntry* out,
            ChunkHashCache* cache) {
  ChunkRef ref;
  ref.hash = cache != nullptr ? cache->Hash(raw) : HashBytes(raw);
  ref.raw_len = static_cast<uint32_t>(raw.size());
  GOS_RETURN_IF_ERROR(sink(ref, raw));
  out->chunks.push_back(ref);
  out->size += raw.size();
  return OkStatus();
}

Status ChunkByContent(int fd, const std::string& path, const ChunkSink& sink, FileEntry* out,
                      ChunkHashCache* cache) {
  std::vector<uint8_t> buf(kReadBuffer);
  size_t start = 0, end = 0;
  bool eof = false;
  for (;;) {
    if (end - start < kCdcMax && !eof) {
      std::memmove(buf.data(), buf.data() + start, end - start);
      end -= start;
      start = 0;
      GOS_ASSIGN_OR_RETURN(size_t got, ReadFull(fd, buf.data() + end, buf.size() - end, path));
      end += got;
      eof = end < buf.size();
    }
    if (start == end) return OkStatus();
    const size_t cut = CdcCut(buf.data() + start, end - start);
    GOS_RETURN_IF_ERROR(Emit({buf.data() + start, cut}, sink, out, cache));
    start += cut;
  }
}

Status ChunkPages(int fd, const std::string& path, const std::string& pagemap,
                  const ChunkSink& sink, FileEntry* out, ChunkHashCache* cache, uint64_t size,
                  ChunkRead how) {
  GOS_ASSIGN_OR_RETURN(std::unique_ptr<PagemapReader> pm, PagemapReader::Open(pagemap));
  // Mapped: the pieces are hashed where the page cache holds them.
  const uint8_t* map = nullptr;
  if (how == ChunkRead::kMap && size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      ::madvise(p, size, MADV_SEQUENTIAL);
      map = static_cast<const uint8_t*>(p);
    }
  }
  struct Unmap {
    const uint8_t* p;
    uint64_t n;
    ~Unmap() {
      if (p) ::munmap(const_cast<uint8_t*>(p), n);
    }
  } unmap{map, size};
  std::vector<uint8_t> buf(map ? 0 : kPagesAlign);
  uint64_t at = 0;
  for (;;) {
    GOS_ASSIGN_OR_RETURN(std::optional<PagemapEntry> e, pm->Next());
    if (!e) return OkStatus();
    if (!e->in_pages_file) continue;
    uint64_t vaddr = e->vaddr, left = e->bytes;
    while (left > 0) {
      const uint64_t piece = std::min(left, (vaddr | (kPagesAlign - 1)) + 1 - vaddr);
      std::span<const uint8_t> raw;
      if (map != nullptr) {
        raw = {map + at, std::min<uint64_t>(piece, size - at)};
      } else {
        GOS_ASSIGN_OR_RETURN(size_t got, ReadFull(fd, buf.data(), piece, path));
        raw = {buf.data(), got};
      }
      if (raw.size() != piece) {
        return DataLossError(path + " ended before the pages " + pagemap + " lists");
      }
      at += piece;
      GOS_RETURN_IF_ERROR(Emit(raw, sink, out, cache));
      vaddr += piece;
      left -= piece;
    }
  }
}

}  // namespace

std::string HashHex(const ChunkHash& h) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < h.size(); ++i) {
    s[2 * i] = kHex[h[i] >> 4];
    s[2 * i + 1] = kHex[h[i] & 0xf];
  }
  return s;
}

ChunkHash HashBytes(std::span<const uint8_t> raw) {
  ChunkHash h{};
  unsigned int len = 0;
  if (EVP_Digest(raw.data(), raw.size(), h.data(), &len, Sha256(), nullptr) != 1 ||
      len != h.size()) {
    GOS_LOG(kError, "chunks") << "SHA-256 failed";
    std::abort();
  }
  return h;
}

ChunkHash ChunkHashCache::Hash(std::span<const uint8_t> raw) {
  const XXH128_hash_t x = XXH3_128bits(raw.data(), raw.size());
  const Key key{x.low64, x.high64, static_cast<uint32_t>(raw.size())};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = current_.find(key); it != current_.end()) {
      ++hits_;
      return it->second;
    }
    if (auto it = previous_.find(key); it != previous_.end()) {
      ++hits_;
      return current_.emplace(key, it->second).first->second;
    }
    ++misses_;
  }
  const ChunkHash h = HashBytes(raw);
  std::lock_guard<std::mutex> lock(mu_);
  current_.emplace(key, h);
  return h;
}

void ChunkHashCache::NextGeneration() {
  std::lock_guard<std::mutex> lock(mu_);
  previous_ = std::move(current_);
  current_.clear();
}

uint64_t ChunkHashCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t ChunkHashCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

Status ChunkFile(const std::string& dir, const std::string& name, const ChunkSink& sink,
                 FileEntry* out, ChunkHashCache* cache, ChunkRead how) {
  const std::string path = dir + "/" + name;
  *out = FileEntry();
  out->name = name;
  GOS_ASSIGN_OR_RETURN(Fd fd, OpenRead(path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "chunking " + path + ": fstat");
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError("chunking " + path + ": not a file");
  out->mode = st.st_mode & 07777;

  const size_t slash = path.rfind('/');
  const std::string file_dir = path.substr(0, slash);
  const std::optional<uint64_t> pages_id = PagesId(std::string_view(path).substr(slash + 1));
  std::optional<std::string> pagemap;
  if (pages_id) {
    pagemap = FindPagemap(file_dir, *pages_id, static_cast<uint64_t>(st.st_size), path);
  }
  Status s = pagemap ? ChunkPages(fd.get(), path, *pagemap, sink, out, cache,
                                  static_cast<uint64_t>(st.st_size), how)
                     : ChunkByContent(fd.get(), path, sink, out, cache);
  if (!s.ok()) return s;
  if (out->size != static_cast<uint64_t>(st.st_size)) {
    return AbortedError("chunking " + path + ": changed while being read (" +
                        std::to_string(st.st_size) + " bytes at open, " +
                        std::to_string(out->size) + " read)");
  }
  return OkStatus();
}

std::vector<uint8_t> CompressChunk(std::span<const uint8_t> raw, int level) {
  // One context per thread: creating one costs more than compressing a small chunk.
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(),
                                                                       ZSTD_freeCCtx);
  level = std::clamp(level, ZSTD_minCLevel(), 19);
  std::vector<uint8_t> out(ZSTD_compressBound(raw.size()));
  const size_t n =
      ZSTD_compressCCtx(cctx.get(), out.data(), out.size(), raw.data(), raw.size(), level);
  if (ZSTD_isError(n)) {
    // Only allocation failure can get here: the destination is compressBound-sized.
    GOS_LOG(kError, "chunks") << "zstd compression failed: " << ZSTD_getErrorName(n);
    std::abort();
  }
  out.resize(n);
  return out;
}

StatusOr<std::vector<uint8_t>> DecompressChunk(std::span<const uint8_t> compressed,
                                               const ChunkRef& ref) {
  const auto fail = [&](const std::string& why) {
    return DataLossError("chunk " + HashHex(ref.hash) + ": " + why);
  };
  if (ref.raw_len > kMaxChunkBytes) {
    return fail("length " + std::to_string(ref.raw_len) + " is over the chunk limit");
  }
  const unsigned long long declared =
      ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) return fail("not a zstd frame");
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ref.raw_len) {
    return fail("frame holds " + std::to_string(declared) + " bytes, the reference says " +
                std::to_string(ref.raw_len));
  }
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(),
                                                                       ZSTD_freeDCtx);
  std::vector<uint8_t> raw(ref.raw_len);
  const size_t n =
      ZSTD_decompressDCtx(dctx.get(), raw.data(), raw.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n)) return fail(std::string("corrupt zstd frame: ") + ZSTD_getErrorName(n));
  if (n != ref.raw_len) {
    return fail("decompressed to " + std::to_string(n) + " bytes, the reference says " +
                std::to_string(ref.raw_len));
  }
  if (HashBytes(raw) != ref.hash) return fail("content does not match its hash");
  return raw;
}

}  // namespace gos::storage
