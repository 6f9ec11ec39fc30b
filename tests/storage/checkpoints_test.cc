#include "gos/storage/checkpoints.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <map>
#include <memory>

#include "gos/storage/tables.h"
#include "storage/codec.h"
#include "tests/support/chunk_test_util.h"

namespace gos::storage {
namespace {

using testing::RandomBytes;
using testing::TempDir;

struct Chunk {
  ChunkRef ref;
  std::vector<uint8_t> raw, z;
};

Chunk MakeChunk(uint64_t seed, size_t n = 20000) {
  Chunk c;
  c.raw = RandomBytes(n, seed);
  c.ref = {HashBytes(c.raw), static_cast<uint32_t>(n)};
  c.z = CompressChunk(c.raw, 1);
  return c;
}

FileEntry File(const std::string& name, const std::vector<const Chunk*>& chunks) {
  FileEntry f;
  f.name = name;
  f.mode = 0644;
  for (const Chunk* c : chunks) {
    f.chunks.push_back(c->ref);
    f.size += c->ref.raw_len;
  }
  return f;
}

// An epoch of ntasks ranks; rank r holds the files files_of(r).
EpochManifest Epoch(uint64_t job, uint64_t epoch, std::vector<std::vector<FileEntry>> ranks) {
  EpochManifest m;
  m.job = job;
  m.epoch = epoch;
  m.strobe = 1000 + epoch;
  m.ntasks = static_cast<uint32_t>(ranks.size());
  m.taken_ms = 1700000000000 + static_cast<int64_t>(epoch);
  m.new_bytes = 11;
  m.new_compressed = 7;
  m.pause_ms = 12;
  m.total_ms = 34;
  for (size_t r = 0; r < ranks.size(); ++r) {
    EpochRank er;
    er.rank = static_cast<uint32_t>(r);
    er.node = static_cast<uint32_t>(r % 2);
    er.files = std::move(ranks[r]);
    for (const FileEntry& f : er.files) m.logical_bytes += f.size;
    m.ranks.push_back(std::move(er));
  }
  return m;
}

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    auto t = Tables::Open(tmp_.Sub("db"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tables_ = std::move(*t);
    store_ = tables_->checkpoints();
    ASSERT_NE(store_, nullptr);
  }
  void Close() {
    store_ = nullptr;
    tables_.reset();
  }
  void Put(const Chunk& c) {
    StatusOr<bool> r = store_->PutChunk(c.ref, c.z);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  uint64_t StoredChunks() {
    StatusOr<StoreStats> s = store_->Stats();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->chunks : 0;
  }
  VerifyResult VerifyOk() {
    StatusOr<VerifyResult> v = store_->Verify(nullptr);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : VerifyResult();
  }
  std::string Problems(const VerifyResult& v) {
    std::string s;
    for (const VerifyProblem& p : v.problems) {
      s += "job " + std::to_string(p.job) + " epoch " + std::to_string(p.epoch) + " rank " +
           std::to_string(p.rank) + " file " + p.file + " chunk " + p.chunk + ": " + p.problem +
           "\n";
    }
    return s;
  }

  TempDir tmp_;
  std::unique_ptr<Tables> tables_;
  CheckpointStore* store_ = nullptr;
};

TEST_F(CheckpointStoreTest, PutHasGetChunks) {
  const Chunk a = MakeChunk(1);
  EXPECT_FALSE(*store_->HasChunk(a.ref.hash));
  StatusOr<bool> first = store_->PutChunk(a.ref, a.z);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  EXPECT_FALSE(*store_->PutChunk(a.ref, a.z));  // idempotent
  EXPECT_TRUE(*store_->HasChunk(a.ref.hash));
  EXPECT_EQ(*store_->GetCompressed(a.ref.hash), a.z);
  StatusOr<std::vector<uint8_t>> raw = store_->ReadChunk(a.ref);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(*raw, a.raw);

  const Chunk b = MakeChunk(2);
  StatusOr<std::vector<uint8_t>> missing = store_->GetCompressed(b.ref.hash);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(HashHex(b.ref.hash)), std::string::npos);
  EXPECT_EQ(store_->ReadChunk(b.ref).status().code(), StatusCode::kNotFound);

  ChunkRef huge = b.ref;
  huge.raw_len = kMaxChunkBytes + 1;
  EXPECT_EQ(store_->PutChunk(huge, b.z).status().code(), StatusCode::kInvalidArgument);

  StatusOr<StoreStats> st = store_->Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->chunks, 1u);
  EXPECT_EQ(st->raw_bytes, a.raw.size());
  EXPECT_EQ(st->stored_bytes, a.z.size());
  EXPECT_EQ(st->unreferenced, 1u);
}

TEST_F(CheckpointStoreTest, CommitWithAMissingChunkIsRefusedNamingIt) {
  const Chunk a = MakeChunk(1), b = MakeChunk(2);
  Put(a);
  const EpochManifest m =
      Epoch(5, 1, {{File("core-1.img", {&a})}, {File("pages-1.img", {&a, &b})}});
  Status s = store_->CommitEpoch(m);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find(HashHex(b.ref.hash)), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("pages-1.img"), std::string::npos) << s.ToString();
  EXPECT_FALSE(store_->GetEpoch(5, 1)->has_value());
  EXPECT_EQ(store_->Stats()->unreferenced, 1u);  // no reference was taken
}

TEST_F(CheckpointStoreTest, CommitListGetDelete) {
  const Chunk a = MakeChunk(1), b = MakeChunk(2);
  Put(a);
  Put(b);
  // Jobs 2, 256 and 1: big-endian keys list them in numeric order.
  for (uint64_t job : {256u, 2u, 1u}) {
    for (uint64_t e : {2u, 1u, 10u}) {
      Status s = store_->CommitEpoch(Epoch(job, e, {{File("pages-1.img", {&a, &b})}}));
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
  const EpochManifest m = Epoch(2, 10, {{File("pages-1.img", {&a, &b})}});
  EXPECT_EQ(store_->CommitEpoch(m).code(), StatusCode::kAlreadyExists);

  StatusOr<std::optional<EpochManifest>> got = store_->GetEpoch(2, 10);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, m);
  StatusOr<std::vector<EpochManifest>> full = store_->ListEpochs(256, true);
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->size(), 3u);
  EXPECT_EQ((*full)[0].epoch, 1u);
  EXPECT_EQ((*full)[1].epoch, 2u);
  EXPECT_EQ((*full)[2].epoch, 10u);
  EXPECT_EQ((*full)[2], Epoch(256, 10, {{File("pages-1.img", {&a, &b})}}));
  StatusOr<std::vector<EpochManifest>> brief = store_->ListEpochs(2, false);
  ASSERT_TRUE(brief.ok());
  ASSERT_EQ(brief->size(), 3u);
  EXPECT_TRUE((*brief)[0].ranks[0].files.empty());
  EXPECT_EQ((*brief)[0].logical_bytes, a.raw.size() + b.raw.size());
  EXPECT_TRUE(store_->ListEpochs(3, true)->empty());

  ASSERT_TRUE(store_->DeleteEpoch(2, 2).ok());
  ASSERT_TRUE(store_->DeleteEpoch(2, 2).ok());  // absent: OK
  EXPECT_FALSE(store_->GetEpoch(2, 2)->has_value());
  EXPECT_EQ(store_->ListEpochs(2, false)->size(), 2u);
  StatusOr<StoreStats> st = store_->Stats();
  EXPECT_EQ(st->jobs, 3u);
  EXPECT_EQ(st->epochs, 8u);
  EXPECT_EQ(st->logical_bytes, 8 * (a.raw.size() + b.raw.size()));
  EXPECT_TRUE(VerifyOk().problems.empty());
}

TEST_F(CheckpointStoreTest, ReferenceCountsAndGc) {
  const Chunk a = MakeChunk(1), b = MakeChunk(2), c = MakeChunk(3), d = MakeChunk(4),
              orphan = MakeChunk(5);
  for (const Chunk* x : {&a, &b, &c, &d, &orphan}) Put(*x);
  // Epoch 1 names a twice (two files), b and c; epoch 2 names a and d.
  ASSERT_TRUE(store_
                  ->CommitEpoch(Epoch(1, 1,
                                      {{File("pages-1.img", {&a, &b}), File("x", {&a})},
                                       {File("pages-1.img", {&c})}}))
                  .ok());
  ASSERT_TRUE(store_->CommitEpoch(Epoch(1, 2, {{File("pages-1.img", {&a, &d})}, {}})).ok());
  VerifyResult v = VerifyOk();
  EXPECT_TRUE(v.problems.empty()) << Problems(v);
  EXPECT_EQ(v.chunks_checked, 6u);
  EXPECT_EQ(store_->Stats()->unreferenced, 1u);

  StatusOr<GcResult> gc = store_->Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->chunks_removed, 1u);  // only the orphan
  EXPECT_EQ(gc->bytes_removed, orphan.z.size());
  EXPECT_FALSE(*store_->HasChunk(orphan.ref.hash));

  ASSERT_TRUE(store_->DeleteEpoch(1, 1).ok());
  EXPECT_EQ(store_->Stats()->unreferenced, 2u);  // b, c
  gc = store_->Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->chunks_removed, 2u);
  EXPECT_EQ(gc->bytes_removed, b.z.size() + c.z.size());
  EXPECT_TRUE(*store_->HasChunk(a.ref.hash));
  EXPECT_TRUE(*store_->HasChunk(d.ref.hash));
  EXPECT_FALSE(*store_->HasChunk(b.ref.hash));
  EXPECT_FALSE(*store_->HasChunk(c.ref.hash));
  EXPECT_EQ(*store_->ReadChunk(a.ref), a.raw);
  v = VerifyOk();
  EXPECT_TRUE(v.problems.empty()) << Problems(v);

  ASSERT_TRUE(store_->DeleteEpoch(1, 2).ok());
  EXPECT_EQ(store_->Gc()->chunks_removed, 2u);
  EXPECT_EQ(StoredChunks(), 0u);
}

// After its first (full) Gc, a store reads only the chunks that may have lost their last
// reference since; what an earlier process left unreferenced is found by the next process's
// first Gc.
TEST_F(CheckpointStoreTest, GcAfterTheFirstReadsOnlyCandidates) {
  std::vector<Chunk> chunks;
  std::vector<const Chunk*> all;
  for (uint64_t i = 0; i < 50; ++i) chunks.push_back(MakeChunk(100 + i));
  for (const Chunk& c : chunks) {
    Put(c);
    all.push_back(&c);
  }
  ASSERT_TRUE(store_->CommitEpoch(Epoch(4, 1, {{File("pages-1.img", all)}})).ok());
  StatusOr<GcResult> gc = store_->Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->rows_examined, 50u);  // the first: every row
  EXPECT_EQ(gc->chunks_removed, 0u);

  // One orphan and one new chunk of a committed epoch: only the orphan is read (a commit
  // takes its chunks off the list).
  const Chunk orphan = MakeChunk(1), kept = MakeChunk(2);
  Put(orphan);
  Put(kept);
  ASSERT_TRUE(store_->CommitEpoch(Epoch(4, 2, {{File("pages-1.img", {&chunks[0], &kept})}})).ok());
  gc = store_->Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->rows_examined, 1u);
  EXPECT_EQ(gc->chunks_removed, 1u);
  EXPECT_FALSE(*store_->HasChunk(orphan.ref.hash));
  EXPECT_TRUE(*store_->HasChunk(kept.ref.hash));

  // Deleting epoch 1 leaves chunks 1..49 unreferenced (chunk 0 is in epoch 2 too).
  ASSERT_TRUE(store_->DeleteEpoch(4, 1).ok());
  gc = store_->Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->rows_examined, 49u);
  EXPECT_EQ(gc->chunks_removed, 49u);
  EXPECT_TRUE(*store_->HasChunk(chunks[0].ref.hash));
  EXPECT_EQ(store_->Gc()->rows_examined, 0u);
  EXPECT_EQ(StoredChunks(), 2u);

  // A chunk stored after the mark (an epoch ordered after the caller saw none in flight)
  // stays until a later mark.
  uint64_t mark = store_->GcMark();
  const Chunk late = MakeChunk(4);
  Put(late);
  gc = store_->GcBefore(mark);
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->chunks_removed, 0u);
  EXPECT_TRUE(*store_->HasChunk(late.ref.hash));
  EXPECT_EQ(store_->Gc()->chunks_removed, 1u);

  // An orphan left by a process that stopped before its Gc: the next one's first Gc reads
  // every row and finds it, and still keeps what was stored after its mark.
  const Chunk left = MakeChunk(3);
  Put(left);
  Close();
  Open();
  mark = store_->GcMark();
  Put(late);
  gc = store_->GcBefore(mark);
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->rows_examined, 4u);
  EXPECT_EQ(gc->chunks_removed, 1u);
  EXPECT_FALSE(*store_->HasChunk(left.ref.hash));
  EXPECT_TRUE(*store_->HasChunk(late.ref.hash));
  EXPECT_EQ(store_->Gc()->chunks_removed, 1u);
  EXPECT_TRUE(VerifyOk().problems.empty());
}

TEST_F(CheckpointStoreTest, RetainKeepsTheNewest) {
  std::vector<Chunk> chunks;
  for (uint64_t i = 0; i < 5; ++i) chunks.push_back(MakeChunk(10 + i));
  for (uint64_t e = 1; e <= 5; ++e) {
    Put(chunks[e - 1]);
    ASSERT_TRUE(store_->CommitEpoch(Epoch(9, e, {{File("f", {&chunks[e - 1]})}})).ok());
  }
  ASSERT_TRUE(store_->CommitEpoch(Epoch(8, 1, {{File("f", {&chunks[0]})}})).ok());
  EXPECT_EQ(store_->Retain(9, 0).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_->Retain(9, 2).ok());
  StatusOr<std::vector<EpochManifest>> left = store_->ListEpochs(9, false);
  ASSERT_EQ(left->size(), 2u);
  EXPECT_EQ((*left)[0].epoch, 4u);
  EXPECT_EQ((*left)[1].epoch, 5u);
  EXPECT_EQ(store_->ListEpochs(8, false)->size(), 1u);  // other jobs untouched
  ASSERT_TRUE(store_->Retain(9, 7).ok());
  EXPECT_EQ(store_->ListEpochs(9, false)->size(), 2u);
  EXPECT_EQ(store_->Gc()->chunks_removed, 2u);  // chunks of epochs 2 and 3; 1's is job 8's
  EXPECT_TRUE(VerifyOk().problems.empty());
}

TEST_F(CheckpointStoreTest, ReopenFindsEverything) {
  const Chunk a = MakeChunk(1), b = MakeChunk(2);
  Put(a);
  Put(b);
  const EpochManifest m = Epoch(3, 1, {{File("pages-1.img", {&a, &b, &a})}});
  ASSERT_TRUE(store_->CommitEpoch(m).ok());
  JobRecord job;
  job.id = 3;
  job.ntasks = 1;
  ASSERT_TRUE(tables_->PutJob(job).ok());
  Close();
  Open();
  EXPECT_EQ(**store_->GetEpoch(3, 1), m);
  EXPECT_EQ(*store_->ReadChunk(b.ref), b.raw);
  EXPECT_TRUE(tables_->GetJob(3)->has_value());
  VerifyResult v = VerifyOk();
  EXPECT_TRUE(v.problems.empty()) << Problems(v);
  EXPECT_EQ(v.bytes_checked, a.raw.size() + b.raw.size());
  ASSERT_TRUE(store_->DeleteEpoch(3, 1).ok());
  EXPECT_EQ(store_->Gc()->chunks_removed, 2u);
}

TEST(CheckpointStoreOpenTest, DatabaseWithOnlyTheDefaultFamilyOpens) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  {
    // As the Tables of issue 4 left it: one family, a job record.
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    JobRecord job;
    job.id = 4;
    job.user = "old";
    const std::vector<uint8_t> v = EncodeJob(job);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), JobKey(4),
                        rocksdb::Slice(reinterpret_cast<const char*>(v.data()), v.size()))
                    .ok());
    ASSERT_TRUE(db->Close().ok());
  }
  for (int round = 0; round < 2; ++round) {
    auto t = Tables::Open(dir);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    StatusOr<std::optional<JobRecord>> job = (*t)->GetJob(4);
    ASSERT_TRUE(job.ok() && job->has_value());
    EXPECT_EQ((*job)->user, "old");
    const Chunk a = MakeChunk(1);
    ASSERT_TRUE((*t)->checkpoints()->PutChunk(a.ref, a.z).ok());
    EXPECT_EQ(*(*t)->checkpoints()->ReadChunk(a.ref), a.raw);
  }
  std::vector<std::string> families;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &families).ok());
  for (const char* f : {"default", "chunks", "chunk_refs", "epochs", "replay"}) {
    EXPECT_NE(std::find(families.begin(), families.end(), f), families.end()) << f;
  }
}

// Opens the closed database directly, to damage it the way a disk would.
class RawDb {
 public:
  explicit RawDb(const std::string& dir) {
    std::vector<rocksdb::ColumnFamilyDescriptor> d;
    for (const char* f : {"default", "chunks", "chunk_refs", "epochs", "replay"}) {
      d.emplace_back(f, rocksdb::ColumnFamilyOptions());
    }
    rocksdb::DB* raw = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir, d, &h_, &raw).ok());
    db_.reset(raw);
  }
  ~RawDb() {
    for (auto* h : h_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db_->Close().PermitUncheckedError();
  }
  void Put(int family, const ChunkHash& key, const std::vector<uint8_t>& v) {
    ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), h_[family],
                         rocksdb::Slice(reinterpret_cast<const char*>(key.data()), key.size()),
                         rocksdb::Slice(reinterpret_cast<const char*>(v.data()), v.size()))
                    .ok());
  }
  void Delete(int family, const ChunkHash& key) {
    ASSERT_TRUE(db_->Delete(rocksdb::WriteOptions(), h_[family],
                            rocksdb::Slice(reinterpret_cast<const char*>(key.data()), key.size()))
                    .ok());
  }
  static constexpr int kChunks = 1, kRefs = 2;

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> h_;
};

// An incremental epoch's part names its parents' page images under parent/ (checkpoint.md,
// "Incremental dumps"): verify checks that every level of the chain has a pagemap and pages.
TEST_F(CheckpointStoreTest, VerifyChecksChainsOfIncrementalDumps) {
  const Chunk a = MakeChunk(1), b = MakeChunk(2), c = MakeChunk(3);
  for (const Chunk* x : {&a, &b, &c}) Put(*x);
  const std::vector<FileEntry> whole = {File("pagemap-1.img", {&a}),
                                        File("pages-1.img", {&b}),
                                        File("parent/pagemap-1.img", {&a}),
                                        File("parent/pages-1.img", {&c}),
                                        File("parent/parent/pagemap-1.img", {&a}),
                                        File("parent/parent/pages-1.img", {&b})};
  std::vector<FileEntry> broken = whole;
  broken.erase(broken.begin() + 3);  // parent/pages-1.img
  ASSERT_TRUE(
      store_->CommitEpoch(Epoch(8, 1, {{File("pagemap-1.img", {&a}), File("pages-1.img", {&b})}}))
          .ok());
  ASSERT_TRUE(store_->CommitEpoch(Epoch(8, 3, {whole, broken})).ok());
  auto epochs = store_->ListEpochs(8, true);
  ASSERT_TRUE(epochs.ok());
  EXPECT_EQ(IncrementalRanks((*epochs)[0]), 0u);
  EXPECT_EQ(IncrementalRanks((*epochs)[1]), 2u);
  VerifyResult v = VerifyOk();
  ASSERT_EQ(v.problems.size(), 1u) << Problems(v);
  EXPECT_EQ(v.problems[0].epoch, 3u);
  EXPECT_EQ(v.problems[0].rank, 1u);
  EXPECT_NE(v.problems[0].problem.find("no pages image at parent/"), std::string::npos)
      << v.problems[0].problem;
}

TEST_F(CheckpointStoreTest, VerifyFindsCorruptMissingAndMiscountedChunks) {
  const Chunk good = MakeChunk(1), bad = MakeChunk(2), gone = MakeChunk(3),
              miscounted = MakeChunk(4);
  Put(good);
  // Stored under bad's hash: bytes of another chunk (as a bad upload or a flipped disk block
  // would leave it).
  ASSERT_TRUE(*store_->PutChunk(bad.ref, CompressChunk(RandomBytes(bad.raw.size(), 99), 1)));
  Put(gone);
  Put(miscounted);
  ASSERT_TRUE(store_
                  ->CommitEpoch(Epoch(7, 3,
                                      {{File("core-1.img", {&good})},
                                       {File("pages-1.img", {&good, &bad}),
                                        File("files.img", {&gone, &miscounted})}}))
                  .ok());
  const std::string bad_hex = HashHex(bad.ref.hash);
  StatusOr<std::vector<uint8_t>> read = store_->ReadChunk(bad.ref);
  EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find(bad_hex), std::string::npos);
  Close();
  {
    RawDb raw(tmp_.Sub("db"));
    raw.Delete(RawDb::kChunks, gone.ref.hash);
    // chunk_refs row: u8 version 1 | u64 refs | u32 raw length | u32 stored length.
    std::vector<uint8_t> row = {1, 5, 0, 0, 0, 0, 0, 0, 0};
    for (uint32_t v : {miscounted.ref.raw_len, static_cast<uint32_t>(miscounted.z.size())}) {
      for (int i = 0; i < 4; ++i) row.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
    raw.Put(RawDb::kRefs, miscounted.ref.hash, row);
  }
  Open();

  uint64_t last_done = 0, last_total = 0;
  StatusOr<VerifyResult> v = store_->Verify([&](uint64_t done, uint64_t total) {
    last_done = done;
    last_total = total;
  });
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->chunks_checked, 5u);
  EXPECT_EQ(last_done, 5u);
  EXPECT_EQ(last_total, 5u);
  std::map<std::string, VerifyProblem> by_chunk;
  for (const VerifyProblem& p : v->problems) by_chunk[p.chunk] = p;
  ASSERT_EQ(v->problems.size(), 3u) << Problems(*v);
  const VerifyProblem& corrupt = by_chunk[bad_hex];
  EXPECT_EQ(corrupt.job, 7u);
  EXPECT_EQ(corrupt.epoch, 3u);
  EXPECT_EQ(corrupt.rank, 1u);
  EXPECT_EQ(corrupt.file, "pages-1.img");
  EXPECT_EQ(corrupt.problem.rfind("corrupt: ", 0), 0u) << corrupt.problem;
  const VerifyProblem& missing = by_chunk[HashHex(gone.ref.hash)];
  EXPECT_EQ(missing.file, "files.img");
  EXPECT_EQ(missing.problem, "missing");
  const VerifyProblem& count = by_chunk[HashHex(miscounted.ref.hash)];
  EXPECT_EQ(count.rank, 1u);
  EXPECT_EQ(count.problem, "reference count 5, expected 1");
}

TEST(ManifestCodecTest, RoundTripAndTruncation) {
  const Chunk a = MakeChunk(1), b = MakeChunk(2);
  EpochManifest m =
      Epoch(0xfedcba9876543210ull, 42,
            {{File("pages-1.img", {&a, &b}), File("job/app", {&b})}, {}, {File("e", {})}});
  m.ranks[1].node = 77;
  const std::vector<uint8_t> enc = EncodeManifest(m);
  StatusOr<EpochManifest> dec = DecodeManifest(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, m);
  for (size_t n = 0; n < enc.size(); ++n) {
    StatusOr<EpochManifest> cut = DecodeManifest({enc.data(), n});
    ASSERT_FALSE(cut.ok()) << n;
    EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss) << n;
  }
  std::vector<uint8_t> longer = enc;
  longer.push_back(0);
  EXPECT_EQ(DecodeManifest(longer).status().code(), StatusCode::kDataLoss);
  std::vector<uint8_t> v2 = enc;
  v2[0] = 2;
  EXPECT_NE(DecodeManifest(v2).status().message().find("version"), std::string::npos);
  // Random damage never crashes and is always either a manifest or DATA_LOSS.
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    std::vector<uint8_t> bad = enc;
    const std::vector<uint8_t> noise = RandomBytes(3, seed);
    bad[noise[0] * bad.size() / 256] ^= static_cast<uint8_t>(noise[1] | 1);
    StatusOr<EpochManifest> r = DecodeManifest(bad);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    }
  }
}

TEST_F(CheckpointStoreTest, UnsafeOrInconsistentManifestsAreRefused) {
  const Chunk a = MakeChunk(1);
  Put(a);
  for (const char* name : {"../x", "/etc/passwd", "a//b", "a/./b", "", "a/"}) {
    Status s = store_->CommitEpoch(Epoch(1, 1, {{File(name, {&a})}}));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name;
    // The same manifest read back from disk is DATA_LOSS, never a path to write to.
    EXPECT_EQ(DecodeManifest(EncodeManifest(Epoch(1, 1, {{File(name, {&a})}}))).status().code(),
              StatusCode::kDataLoss)
        << name;
  }
  EpochManifest wrong_size = Epoch(1, 1, {{File("f", {&a})}});
  wrong_size.ranks[0].files[0].size += 1;
  EXPECT_EQ(store_->CommitEpoch(wrong_size).code(), StatusCode::kInvalidArgument);
  EpochManifest missing_rank = Epoch(1, 1, {{File("f", {&a})}});
  missing_rank.ntasks = 2;
  EXPECT_EQ(store_->CommitEpoch(missing_rank).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CommitEpoch(Epoch(1, 0, {{}})).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->ListEpochs(1, false)->empty());
}

}  // namespace
}  // namespace gos::storage
