#include "gos/storage/chunks.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>

#include "tests/support/chunk_test_util.h"

namespace gos::storage {
namespace {

using testing::ChunkAll;
using testing::RandomBytes;
using testing::TempDir;
using testing::WriteFile;

std::set<ChunkHash> Hashes(const FileEntry& e) {
  std::set<ChunkHash> s;
  for (const ChunkRef& c : e.chunks) s.insert(c.hash);
  return s;
}

TEST(ChunkHashTest, HexAndKnownVector) {
  const std::string abc = "abc";
  const ChunkHash h = HashBytes({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()});
  EXPECT_EQ(HashHex(h), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ChunkCutTest, ContentDefinedCutsSurviveAnInsertion) {
  TempDir tmp;
  std::vector<uint8_t> data = RandomBytes(4 << 20, 7);
  WriteFile(tmp.Sub("a"), data);
  std::vector<uint8_t> edited = data;
  const std::vector<uint8_t> ins = RandomBytes(100, 8);
  edited.insert(edited.begin() + (2 << 20), ins.begin(), ins.end());
  WriteFile(tmp.Sub("b"), edited);

  const FileEntry a = ChunkAll(tmp.path(), "a");
  const FileEntry b = ChunkAll(tmp.path(), "b");
  ASSERT_EQ(a.size, data.size());
  ASSERT_EQ(b.size, edited.size());
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    EXPECT_LE(a.chunks[i].raw_len, kMaxChunkBytes);
    if (i + 1 < a.chunks.size()) {
      EXPECT_GE(a.chunks[i].raw_len, 16u << 10);
    }
  }
  const double avg = static_cast<double>(a.size) / static_cast<double>(a.chunks.size());
  EXPECT_GT(avg, 40 << 10);
  EXPECT_LT(avg, 100 << 10);

  // Only the chunk(s) around the insertion change.
  const std::set<ChunkHash> old = Hashes(a);
  uint64_t shared_bytes = 0;
  size_t changed = 0;
  for (const ChunkRef& c : b.chunks) {
    if (old.count(c.hash)) {
      shared_bytes += c.raw_len;
    } else {
      ++changed;
    }
  }
  EXPECT_LE(changed, 2u);
  EXPECT_GE(shared_bytes, b.size - 2 * kMaxChunkBytes);
}

TEST(ChunkCutTest, SmallAndEmptyFiles) {
  TempDir tmp;
  WriteFile(tmp.Sub("small"), RandomBytes(10000, 1));
  WriteFile(tmp.Sub("empty"), {});
  ::chmod(tmp.Sub("small").c_str(), 0640);
  const FileEntry small = ChunkAll(tmp.path(), "small");
  ASSERT_EQ(small.chunks.size(), 1u);
  EXPECT_EQ(small.chunks[0].raw_len, 10000u);
  EXPECT_EQ(small.mode, 0640u);
  const FileEntry empty = ChunkAll(tmp.path(), "empty");
  EXPECT_TRUE(empty.chunks.empty());
  EXPECT_EQ(empty.size, 0u);
}

TEST(ChunkCutTest, SubdirectoryNamesAndErrorsNameTheFile) {
  TempDir tmp;
  ASSERT_EQ(::mkdir(tmp.Sub("job").c_str(), 0700), 0);
  WriteFile(tmp.Sub("job/app"), RandomBytes(300000, 2));
  const FileEntry e = ChunkAll(tmp.path(), "job/app");
  EXPECT_EQ(e.size, 300000u);
  FileEntry none;
  Status s = ChunkFile(
      tmp.path(), "nope", [](const ChunkRef&, std::span<const uint8_t>) { return OkStatus(); },
      &none);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(tmp.Sub("nope")), std::string::npos) << s.ToString();
}

// Through a cache the chunks are named exactly as without one; what the last generation saw
// is named from memory, a changed chunk is hashed again, and an older generation is forgotten.
TEST(ChunkHashCacheTest, NamesChunksLikeSha256AndRemembersOneGenerationBack) {
  TempDir tmp;
  std::vector<uint8_t> bytes = RandomBytes(1 << 20, 4);
  WriteFile(tmp.Sub("f"), bytes);
  const FileEntry plain = ChunkAll(tmp.path(), "f");
  ChunkHashCache cache;
  auto chunk = [&] {
    FileEntry e;
    Status s = ChunkFile(
        tmp.path(), "f", [](const ChunkRef&, std::span<const uint8_t>) { return OkStatus(); }, &e,
        &cache);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return e;
  };
  EXPECT_EQ(chunk(), plain);
  const uint64_t n = plain.chunks.size();
  ASSERT_GT(n, 4u);
  EXPECT_EQ(cache.misses(), n);
  EXPECT_EQ(cache.hits(), 0u);
  cache.NextGeneration();
  EXPECT_EQ(chunk(), plain);
  EXPECT_EQ(cache.hits(), n);
  EXPECT_EQ(cache.misses(), n);
  // One byte changes: its chunk (and only the chunks the cut moves) is hashed again, and the
  // result is still SHA-256's.
  bytes[bytes.size() / 2] ^= 0xff;
  WriteFile(tmp.Sub("f"), bytes);
  cache.NextGeneration();
  const FileEntry changed = chunk();
  EXPECT_EQ(changed, ChunkAll(tmp.path(), "f"));
  EXPECT_NE(changed, plain);
  EXPECT_GT(cache.misses(), n);
  EXPECT_LT(cache.misses(), n + 4);
  // Two generations without the original bytes: they are hashed from scratch.
  cache.NextGeneration();
  cache.NextGeneration();
  bytes[bytes.size() / 2] ^= 0xff;
  WriteFile(tmp.Sub("f"), bytes);
  const uint64_t misses = cache.misses();
  EXPECT_EQ(chunk(), plain);
  EXPECT_EQ(cache.misses(), misses + n);
}

TEST(ChunkCutTest, SinkErrorStopsAndIsReturned) {
  TempDir tmp;
  WriteFile(tmp.Sub("f"), RandomBytes(1 << 20, 3));
  int calls = 0;
  FileEntry e;
  Status s = ChunkFile(
      tmp.path(), "f",
      [&](const ChunkRef&, std::span<const uint8_t>) {
        return ++calls == 2 ? UnavailableError("link down") : OkStatus();
      },
      &e);
  EXPECT_EQ(s, UnavailableError("link down"));
  EXPECT_EQ(calls, 2);
}

// A pagemap image as CRIU 4 writes it: two magics, then u32-length-prefixed protobuf
// messages (PagemapHead, PagemapEntry...).
class PagemapWriter {
 public:
  PagemapWriter() {
    U32(0x54564319);
    U32(0x56084025);
  }
  void Head(uint64_t pages_id) {
    std::vector<uint8_t> m;
    Field(&m, 1, pages_id);
    Message(m);
  }
  void Entry(uint64_t vaddr, uint64_t nr_pages, uint64_t flags) {
    std::vector<uint8_t> m;
    Field(&m, 1, vaddr);
    Field(&m, 2, nr_pages);
    Field(&m, 4, flags);
    Message(m);
  }
  const std::vector<uint8_t>& bytes() const { return out_; }

 private:
  static void Varint(std::vector<uint8_t>* o, uint64_t v) {
    while (v >= 0x80) {
      o->push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    o->push_back(static_cast<uint8_t>(v));
  }
  static void Field(std::vector<uint8_t>* o, int n, uint64_t v) {
    Varint(o, static_cast<uint64_t>(n) << 3);
    Varint(o, v);
  }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void Message(const std::vector<uint8_t>& m) {
    U32(static_cast<uint32_t>(m.size()));
    out_.insert(out_.end(), m.begin(), m.end());
  }
  std::vector<uint8_t> out_;
};

std::vector<uint32_t> Sizes(const FileEntry& e) {
  std::vector<uint32_t> v;
  for (const ChunkRef& c : e.chunks) v.push_back(c.raw_len);
  return v;
}

TEST(ChunkPagesTest, PagesAreCutAtAlignedAddressesAndEntryEnds) {
  TempDir tmp;
  PagemapWriter pm;
  pm.Head(7);
  pm.Entry(0xf000, 1, 4);           // present: one page ending at a 64 KiB boundary
  pm.Entry(0x7f0000020000, 20, 6);  // present|lazy: 80 KiB -> 64 + 16
  pm.Entry(0x7f0000040000, 8, 5);   // in the parent image: nothing in pages-7.img
  pm.Entry(0x7f0000050000, 4, 0);   // not present
  pm.Entry(0x7f000005e000, 4, 4);   // 16 KiB straddling 0x60000 -> 8 + 8
  WriteFile(tmp.Sub("pagemap-1234.img"), pm.bytes());
  // A pagemap of another pages image must not be picked.
  PagemapWriter other;
  other.Head(8);
  other.Entry(0x1000, 29, 4);
  WriteFile(tmp.Sub("pagemap-99.img"), other.bytes());
  WriteFile(tmp.Sub("pages-7.img"), RandomBytes((1 + 20 + 4) * 4096, 4));

  const FileEntry e = ChunkAll(tmp.path(), "pages-7.img");
  EXPECT_EQ(Sizes(e), (std::vector<uint32_t>{4096, 65536, 16384, 8192, 8192}));

  // Read through a mapping (a restart's check of a node's own copy): the same chunks, and the
  // same bytes handed to the sink.
  std::vector<uint8_t> seen, mapped_seen;
  auto chunk = [&](ChunkRead how, std::vector<uint8_t>* bytes) {
    FileEntry f;
    Status st = ChunkFile(
        tmp.path(), "pages-7.img",
        [&](const ChunkRef&, std::span<const uint8_t> raw) {
          bytes->insert(bytes->end(), raw.begin(), raw.end());
          return OkStatus();
        },
        &f, nullptr, how);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return f;
  };
  EXPECT_EQ(chunk(ChunkRead::kRead, &seen), e);
  EXPECT_EQ(chunk(ChunkRead::kMap, &mapped_seen), e);
  EXPECT_EQ(mapped_seen, seen);
  EXPECT_EQ(seen.size(), (1 + 20 + 4) * 4096u);
}

TEST(ChunkPagesTest, ShiftedMemoryKeepsOtherRangesChunks) {
  TempDir tmp;
  const std::vector<uint8_t> a = RandomBytes(64 * 4096, 5), b = RandomBytes(32 * 4096, 6);
  PagemapWriter pm1;
  pm1.Head(1);
  pm1.Entry(0x100000, 64, 4);
  pm1.Entry(0x400000, 32, 4);
  WriteFile(tmp.Sub("pagemap-1.img"), pm1.bytes());
  std::vector<uint8_t> img = a;
  img.insert(img.end(), b.begin(), b.end());
  WriteFile(tmp.Sub("pages-1.img"), img);
  const FileEntry first = ChunkAll(tmp.path(), "pages-1.img");

  // The first mapping grew by 3 pages in front: the second range's chunks are unchanged.
  PagemapWriter pm2;
  pm2.Head(1);
  pm2.Entry(0x100000 - 3 * 4096, 67, 4);
  pm2.Entry(0x400000, 32, 4);
  WriteFile(tmp.Sub("pagemap-1.img"), pm2.bytes());
  std::vector<uint8_t> img2 = RandomBytes(3 * 4096, 9);
  img2.insert(img2.end(), img.begin(), img.end());
  WriteFile(tmp.Sub("pages-1.img"), img2);
  const FileEntry second = ChunkAll(tmp.path(), "pages-1.img");

  const std::set<ChunkHash> old = Hashes(first);
  uint64_t fresh = 0;
  for (const ChunkRef& c : second.chunks) {
    if (!old.count(c.hash)) fresh += c.raw_len;
  }
  EXPECT_EQ(fresh, 3u * 4096);
}

TEST(ChunkPagesTest, UnusablePagemapFallsBackToContentCuts) {
  TempDir tmp;
  WriteFile(tmp.Sub("pages-3.img"), RandomBytes(1 << 20, 10));
  // No pagemap at all.
  const FileEntry none = ChunkAll(tmp.path(), "pages-3.img");
  EXPECT_EQ(none.size, 1u << 20);

  // A pagemap whose entries do not account for the file's size.
  PagemapWriter pm;
  pm.Head(3);
  pm.Entry(0x10000, 10, 4);
  WriteFile(tmp.Sub("pagemap-5.img"), pm.bytes());
  EXPECT_EQ(ChunkAll(tmp.path(), "pages-3.img").chunks, none.chunks);

  // Garbage after a valid head.
  std::vector<uint8_t> bad = pm.bytes();
  bad.resize(bad.size() - 3);
  WriteFile(tmp.Sub("pagemap-5.img"), bad);
  EXPECT_EQ(ChunkAll(tmp.path(), "pages-3.img").chunks, none.chunks);
  std::vector<uint8_t> huge = PagemapWriter().bytes();
  for (uint8_t b : {0xff, 0xff, 0xff, 0x7f}) huge.push_back(b);
  WriteFile(tmp.Sub("pagemap-5.img"), huge);
  EXPECT_EQ(ChunkAll(tmp.path(), "pages-3.img").chunks, none.chunks);
}

TEST(ChunkCompressTest, RoundTripAtSeveralLevels) {
  std::vector<uint8_t> raw = RandomBytes(100000, 11);
  std::fill(raw.begin(), raw.begin() + 50000, 0);  // compressible half
  const ChunkRef ref{HashBytes(raw), static_cast<uint32_t>(raw.size())};
  for (int level : {0, 1, 3, 19}) {
    const std::vector<uint8_t> z = CompressChunk(raw, level);
    EXPECT_LT(z.size(), raw.size()) << level;
    StatusOr<std::vector<uint8_t>> back = DecompressChunk(z, ref);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, raw);
  }
  const ChunkRef empty{HashBytes({}), 0};
  StatusOr<std::vector<uint8_t>> e = DecompressChunk(CompressChunk({}, 1), empty);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(e->empty());
}

TEST(ChunkCompressTest, CorruptionAndWrongRefsAreDataLossNamingTheChunk) {
  const std::vector<uint8_t> raw = RandomBytes(70000, 12);
  const ChunkRef ref{HashBytes(raw), static_cast<uint32_t>(raw.size())};
  const std::string hex = HashHex(ref.hash);
  const std::vector<uint8_t> z = CompressChunk(raw, 3);
  auto expect_loss = [&](std::span<const uint8_t> bytes, const ChunkRef& r, const char* what) {
    StatusOr<std::vector<uint8_t>> out = DecompressChunk(bytes, r);
    ASSERT_FALSE(out.ok()) << what;
    EXPECT_EQ(out.status().code(), StatusCode::kDataLoss) << what;
    EXPECT_NE(out.status().message().find("chunk " + HashHex(r.hash)), std::string::npos)
        << what << ": " << out.status().ToString();
  };
  // Flipped bytes in the header, the middle and the end of the frame.
  for (size_t at : {size_t{5}, z.size() / 2, z.size() - 1}) {
    std::vector<uint8_t> bad = z;
    bad[at] ^= 0x40;
    expect_loss(bad, ref, "flipped byte");
  }
  std::vector<uint8_t> cut(z.begin(), z.begin() + static_cast<long>(z.size() / 2));
  expect_loss(cut, ref, "truncated");
  expect_loss({}, ref, "empty");
  ChunkRef wrong_hash = ref;
  wrong_hash.hash[0] ^= 1;
  expect_loss(z, wrong_hash, "wrong hash");
  ChunkRef wrong_len = ref;
  wrong_len.raw_len -= 1;
  expect_loss(z, wrong_len, "wrong length");
  ChunkRef too_long = ref;
  too_long.raw_len = kMaxChunkBytes + 1;
  expect_loss(z, too_long, "over the limit");
  // Bytes that decompress fine but are another chunk.
  const std::vector<uint8_t> other = RandomBytes(70000, 13);
  expect_loss(CompressChunk(other, 1), ref, "another chunk");
}

}  // namespace
}  // namespace gos::storage
