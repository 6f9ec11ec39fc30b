#include "gos/storage/tables.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "storage/codec.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace gos::storage {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------
// Fixtures and sample records.

using ::gos::testing::TempDir;

// Every field set to a value different from its default, so a field the codec forgot would
// fail the round trip.
JobRecord SampleJob(uint64_t id) {
  JobRecord j;
  j.id = id;
  j.uid = 1000 + static_cast<uint32_t>(id);
  j.gid = 2000;
  j.user = "alice";
  j.argv = {"./a.out", "--size=" + std::to_string(id), "", std::string("nul\0byte", 8)};
  j.cwd = "/home/alice/run";
  j.state = JobState::kFailed;
  j.ntasks = 64;
  j.nnodes = 4;
  j.ranks_per_node = 16;
  j.row = 3;
  for (uint32_t r = 0; r < 64; ++r) j.rank_nodes.push_back(r / 16);
  j.exit_code = 137;
  j.failed_rank = 17;
  j.failed_node = 1;
  j.message = "node 1 is down: connection reset \xe2\x9c\x97";
  j.submit_ms = 1700000000000 + static_cast<int64_t>(id);
  j.start_ms = 1700000000500;
  j.end_ms = 1700000009999;
  j.time_limit_ms = 3600000;
  j.env = {"PATH=/usr/bin", "OMP_NUM_THREADS=" + std::to_string(id)};
  j.paths = {"/home/alice/run/a.out"};
  j.recorded = id % 2 == 0;
  j.replay_of = id / 3;
  j.cpu_bind = id % 3 != 0;
  j.checkpoint_ms = 1500 + static_cast<int64_t>(id % 1000);
  j.keep = 3;
  j.restart_on_failure = 4;
  j.restarts_used = 1;
  return j;
}

// The bytes of version 4's checkpoint settings, at the end of a job record.
constexpr size_t kCheckpointSettingsBytes = 8 + 4 + 4 + 4;

NodeRecord SampleNode(uint32_t id) {
  NodeRecord n;
  n.id = id;
  n.host = "node" + std::to_string(id) + ".cluster";
  n.pid = 4242 + static_cast<int32_t>(id);
  n.cores = 32;
  n.mem_bytes = 128ull << 30;
  n.state = NodeState::kDown;
  n.down_reason = "heartbeat timeout";
  n.last_seen_ms = 1700000001234;
  return n;
}

std::unique_ptr<Tables> MustOpen(const std::string& dir) {
  auto t = Tables::Open(dir);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return nullptr;
  return std::move(t).value();
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------------
// Codecs.

TEST(StorageCodecTest, JobStateNamesAndFinality) {
  EXPECT_STREQ(JobStateName(JobState::kQueued), "queued");
  EXPECT_STREQ(JobStateName(JobState::kStaging), "staging");
  EXPECT_STREQ(JobStateName(JobState::kRunning), "running");
  EXPECT_STREQ(JobStateName(JobState::kCompleted), "completed");
  EXPECT_STREQ(JobStateName(JobState::kFailed), "failed");
  EXPECT_STREQ(JobStateName(JobState::kKilled), "killed");
  EXPECT_FALSE(JobStateIsFinal(JobState::kQueued));
  EXPECT_FALSE(JobStateIsFinal(JobState::kStaging));
  EXPECT_FALSE(JobStateIsFinal(JobState::kRunning));
  EXPECT_TRUE(JobStateIsFinal(JobState::kCompleted));
  EXPECT_TRUE(JobStateIsFinal(JobState::kFailed));
  EXPECT_TRUE(JobStateIsFinal(JobState::kKilled));
}

TEST(StorageCodecTest, JobRoundTripsEveryField) {
  const JobRecord j = SampleJob(0x0123456789abcdefull);
  std::vector<uint8_t> enc = EncodeJob(j);
  ASSERT_FALSE(enc.empty());
  EXPECT_EQ(enc[0], kJobFormatVersion);
  auto d = DecodeJob(enc);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, j);
  EXPECT_EQ(d->argv[3], std::string("nul\0byte", 8));
  // Extremes of the signed and unsigned fields.
  JobRecord x = j;
  x.id = UINT64_MAX;
  x.uid = UINT32_MAX;
  x.row = INT32_MIN;
  x.exit_code = INT32_MAX;
  x.submit_ms = INT64_MIN;
  x.time_limit_ms = INT64_MAX;
  auto dx = DecodeJob(EncodeJob(x));
  ASSERT_TRUE(dx.ok()) << dx.status().ToString();
  EXPECT_EQ(*dx, x);
}

TEST(StorageCodecTest, DefaultJobAndEveryStateRoundTrip) {
  for (uint8_t s = 0; s <= static_cast<uint8_t>(JobState::kKilled); ++s) {
    JobRecord j;
    j.state = static_cast<JobState>(s);
    auto d = DecodeJob(EncodeJob(j));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(*d, j);
  }
}

TEST(StorageCodecTest, NodeRoundTripsEveryField) {
  const NodeRecord n = SampleNode(7);
  std::vector<uint8_t> enc = EncodeNode(n);
  EXPECT_EQ(enc[0], kRecordFormatVersion);
  auto d = DecodeNode(enc);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, n);
  NodeRecord up;
  auto du = DecodeNode(EncodeNode(up));
  ASSERT_TRUE(du.ok()) << du.status().ToString();
  EXPECT_EQ(*du, up);
}

TEST(StorageCodecTest, Version1JobRecordsStillDecode) {
  // A version 1 record is version 2's without the trailing replay fields.
  JobRecord j = SampleJob(4);
  j.env.clear();
  j.paths.clear();
  j.recorded = true;
  j.replay_of = 0;
  j.checkpoint_ms = 0;
  j.keep = 0;
  j.restart_on_failure = 0;
  j.restarts_used = 0;
  std::vector<uint8_t> enc = EncodeJob(j);
  enc.resize(enc.size() - (4 + 4 + 1 + 8 + 1 + kCheckpointSettingsBytes));
  enc[0] = 1;
  auto d = DecodeJob(enc);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, j);
  enc.push_back(0);  // but not with a stray byte after it
  EXPECT_FALSE(DecodeJob(enc).ok());
}

TEST(StorageCodecTest, Version2JobRecordsDecodeAsBound) {
  // A version 2 record is version 3's without the trailing cpu_bind byte.
  JobRecord j = SampleJob(5);
  j.cpu_bind = true;
  j.checkpoint_ms = 0;
  j.keep = 0;
  j.restart_on_failure = 0;
  j.restarts_used = 0;
  std::vector<uint8_t> enc = EncodeJob(j);
  enc.resize(enc.size() - kCheckpointSettingsBytes - 1);
  enc[0] = 2;
  auto d = DecodeJob(enc);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, j);
  // Version 3 keeps an unbound job unbound, and refuses a byte that is not 0 or 1.
  j.cpu_bind = false;
  enc = EncodeJob(j);
  auto d4 = DecodeJob(enc);
  ASSERT_TRUE(d4.ok()) << d4.status().ToString();
  EXPECT_FALSE(d4->cpu_bind);
  enc.resize(enc.size() - kCheckpointSettingsBytes);
  enc[0] = 3;
  auto d3 = DecodeJob(enc);
  ASSERT_TRUE(d3.ok()) << d3.status().ToString();
  EXPECT_FALSE(d3->cpu_bind);
  enc.back() = 2;
  auto bad = DecodeJob(enc);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "cpu_bind")) << bad.status().ToString();
}

TEST(StorageCodecTest, Version3JobRecordsDecodeWithoutCheckpointSettings) {
  // A version 3 record (written before the checkpoint settings were stored) is version 4's
  // without them: no periodic checkpoints, the coordinator's --keep, no automatic restarts.
  JobRecord j = SampleJob(6);
  std::vector<uint8_t> enc = EncodeJob(j);
  enc.resize(enc.size() - kCheckpointSettingsBytes);
  enc[0] = 3;
  auto d = DecodeJob(enc);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->checkpoint_ms, 0);
  EXPECT_EQ(d->keep, 0u);
  EXPECT_EQ(d->restart_on_failure, 0u);
  EXPECT_EQ(d->restarts_used, 0u);
  JobRecord want = j;
  want.checkpoint_ms = 0;
  want.keep = 0;
  want.restart_on_failure = 0;
  want.restarts_used = 0;
  EXPECT_EQ(*d, want);
  // Re-encoded, it is a version 4 record of the same job.
  std::vector<uint8_t> again = EncodeJob(*d);
  EXPECT_EQ(again[0], 4);
  auto d4 = DecodeJob(again);
  ASSERT_TRUE(d4.ok()) << d4.status().ToString();
  EXPECT_EQ(*d4, want);
  // Every truncation of the old record fails, and so does a version 3 record carrying the
  // settings (trailing bytes) or a version 4 record without them (truncated).
  for (size_t len = 0; len < enc.size(); ++len) {
    auto cut = DecodeJob(std::span<const uint8_t>(enc).first(len));
    ASSERT_FALSE(cut.ok()) << len;
    EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  }
  std::vector<uint8_t> v3_with = EncodeJob(j);
  v3_with[0] = 3;
  auto trailing = DecodeJob(v3_with);
  ASSERT_FALSE(trailing.ok());
  EXPECT_TRUE(Contains(trailing.status().message(), "trailing")) << trailing.status().ToString();
  enc[0] = 4;
  auto short4 = DecodeJob(enc);
  ASSERT_FALSE(short4.ok());
  EXPECT_TRUE(Contains(short4.status().message(), "checkpoint_ms")) << short4.status().ToString();
}

TEST(StorageCodecTest, CheckpointSettingsRoundTripAndBadValuesAreRejected) {
  JobRecord j = SampleJob(7);
  j.checkpoint_ms = INT64_MAX;
  j.keep = UINT32_MAX;
  j.restart_on_failure = UINT32_MAX;
  j.restarts_used = UINT32_MAX;
  auto d = DecodeJob(EncodeJob(j));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, j);

  // The settings are the record's last 20 bytes: i64 checkpoint_ms, u32 keep,
  // u32 restart_on_failure, u32 restarts_used.
  j = SampleJob(7);
  const std::vector<uint8_t> good = EncodeJob(j);
  const size_t at = good.size() - kCheckpointSettingsBytes;
  std::vector<uint8_t> enc = good;
  const int64_t negative = -1000;
  std::memcpy(&enc[at], &negative, 8);
  auto neg = DecodeJob(enc);
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(neg.status().message(), "checkpoint_ms")) << neg.status().ToString();
  enc = good;
  const uint32_t used = j.restart_on_failure + 1;
  std::memcpy(&enc[at + 16], &used, 4);
  auto over = DecodeJob(enc);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(over.status().message(), "restarts_used")) << over.status().ToString();

  // Validation refuses what the decoder would: nothing undecodable is ever written.
  JobRecord bad = SampleJob(7);
  bad.checkpoint_ms = -1;
  Status s = ValidateJob(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "checkpoint_ms")) << s.ToString();
  bad = SampleJob(7);
  bad.restarts_used = bad.restart_on_failure + 1;
  s = ValidateJob(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "restarts_used")) << s.ToString();
  // And the encoder clamps such a record into one that decodes.
  auto clamped = DecodeJob(EncodeJob(bad));
  ASSERT_TRUE(clamped.ok()) << clamped.status().ToString();
  EXPECT_EQ(clamped->restarts_used, bad.restart_on_failure);
}

TEST(StorageCodecTest, UnknownVersionIsRejected) {
  std::vector<uint8_t> enc = EncodeJob(SampleJob(1));
  enc[0] = kJobFormatVersion + 1;
  auto d = DecodeJob(enc);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(d.status().message(), "unsupported format version 5"))
      << d.status().ToString();
  std::vector<uint8_t> node = EncodeNode(SampleNode(1));
  node[0] = 0;
  auto dn = DecodeNode(node);
  ASSERT_FALSE(dn.ok());
  EXPECT_EQ(dn.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(dn.status().message(), "version")) << dn.status().ToString();
}

TEST(StorageCodecTest, TrailingBytesAndBadEnumsAreRejected) {
  std::vector<uint8_t> enc = EncodeJob(SampleJob(1));
  enc.push_back(0);
  auto d = DecodeJob(enc);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(d.status().message(), "trailing")) << d.status().ToString();

  // Node state is the byte after version, id, host, pid, cores, mem_bytes.
  NodeRecord n = SampleNode(1);
  std::vector<uint8_t> node = EncodeNode(n);
  const size_t state_at = 1 + 4 + 2 + n.host.size() + 4 + 4 + 8;
  ASSERT_EQ(node[state_at], static_cast<uint8_t>(NodeState::kDown));
  node[state_at] = 9;
  auto dn = DecodeNode(node);
  ASSERT_FALSE(dn.ok());
  EXPECT_TRUE(Contains(dn.status().message(), "unknown node state 9")) << dn.status().ToString();

  JobRecord j;  // empty strings and lists: state is at a fixed offset
  std::vector<uint8_t> job = EncodeJob(j);
  const size_t job_state_at = 1 + 8 + 4 + 4 + 2 + 4 + 2;
  ASSERT_EQ(job[job_state_at], static_cast<uint8_t>(JobState::kQueued));
  job[job_state_at] = 6;
  auto dj = DecodeJob(job);
  ASSERT_FALSE(dj.ok());
  EXPECT_TRUE(Contains(dj.status().message(), "unknown job state 6")) << dj.status().ToString();
}

TEST(StorageCodecTest, OverLimitCountsAreRejectedWithoutAllocating) {
  JobRecord j;
  std::vector<uint8_t> enc = EncodeJob(j);
  // argv count follows version, id, uid, gid, user (empty).
  const size_t argc_at = 1 + 8 + 4 + 4 + 2;
  uint32_t huge = 0xffffffffu;
  std::memcpy(&enc[argc_at], &huge, 4);
  auto d = DecodeJob(enc);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(Contains(d.status().message(), "argv")) << d.status().ToString();
  EXPECT_TRUE(Contains(d.status().message(), "over limit")) << d.status().ToString();

  // Under the limit but longer than the value.
  uint32_t many = 4000;
  std::memcpy(&enc[argc_at], &many, 4);
  d = DecodeJob(enc);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(Contains(d.status().message(), "longer than the value")) << d.status().ToString();

  // rank_nodes count over 1<<20.
  enc = EncodeJob(j);
  const size_t nranks_at = argc_at + 4 + 2 + 1 + 4 + 4 + 4 + 4;
  uint32_t over = static_cast<uint32_t>(kMaxRankNodes + 1);
  std::memcpy(&enc[nranks_at], &over, 4);
  d = DecodeJob(enc);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(Contains(d.status().message(), "rank_nodes")) << d.status().ToString();
}

TEST(StorageCodecTest, CounterCodec) {
  auto v = DecodeNextJobId(EncodeNextJobId(42));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 42u);
  EXPECT_EQ(DecodeNextJobId(EncodeNextJobId(0)).status().code(), StatusCode::kDataLoss);
  std::vector<uint8_t> enc = EncodeNextJobId(42);
  enc.pop_back();
  EXPECT_EQ(DecodeNextJobId(enc).status().code(), StatusCode::kDataLoss);
}

TEST(StorageCodecTest, KeysSortByIdAndParse) {
  EXPECT_EQ(JobKey(1), "job/0000000000000001");
  EXPECT_EQ(JobKey(0xabcdef0123456789ull), "job/abcdef0123456789");
  EXPECT_EQ(NodeKey(255), "node/000000ff");
  EXPECT_LT(JobKey(15), JobKey(16));
  EXPECT_LT(JobKey(0xffffffffull), JobKey(0x100000000ull));
  EXPECT_EQ(ParseJobKey(JobKey(0xabcdef0123456789ull)), 0xabcdef0123456789ull);
  EXPECT_EQ(ParseNodeKey(NodeKey(0xfffffffeu)), 0xfffffffeu);
  EXPECT_FALSE(ParseJobKey("job/zz").has_value());
  EXPECT_FALSE(ParseJobKey("job/000000000000000G").has_value());
  EXPECT_FALSE(ParseJobKey("node/00000001").has_value());
  EXPECT_FALSE(ParseNodeKey("node/0000001").has_value());
}

// Decode, and if that succeeds the bytes must be exactly the encoding of what was decoded
// (the format has one encoding per record), so a mutation cannot be silently misread.
template <typename Decode, typename Encode>
void ExpectOkOrDataLoss(const std::vector<uint8_t>& in, Decode decode, Encode encode) {
  auto d = decode(std::span<const uint8_t>(in));
  if (d.ok()) {
    std::vector<uint8_t> again = encode(*d);
    if (!in.empty() && !again.empty() && in[0] < again[0]) {
      // An older version's record (job records version 1): it re-encodes in the current
      // version, to the same record.
      auto d2 = decode(std::span<const uint8_t>(again));
      ASSERT_TRUE(d2.ok()) << d2.status().ToString();
      EXPECT_EQ(*d2, *d);
    } else {
      EXPECT_EQ(again, in);
    }
  } else {
    EXPECT_EQ(d.status().code(), StatusCode::kDataLoss) << d.status().ToString();
    EXPECT_FALSE(d.status().message().empty());
  }
}

template <typename Decode, typename Encode>
void FuzzDecoder(const std::vector<uint8_t>& valid, Decode decode, Encode encode, uint32_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  // Every truncation fails (there is no optional tail).
  for (size_t len = 0; len < valid.size(); ++len) {
    std::vector<uint8_t> cut(valid.begin(), valid.begin() + static_cast<ptrdiff_t>(len));
    auto d = decode(std::span<const uint8_t>(cut));
    ASSERT_FALSE(d.ok()) << "truncated to " << len << " of " << valid.size() << " decoded";
    ASSERT_EQ(d.status().code(), StatusCode::kDataLoss) << d.status().ToString();
  }
  std::mt19937 rng(seed);
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> m = valid;
    const int mutations = 1 + static_cast<int>(pick(4));
    for (int k = 0; k < mutations; ++k) {
      switch (pick(5)) {
        case 0:  // flip one bit
          m[pick(m.size())] ^= static_cast<uint8_t>(1u << pick(8));
          break;
        case 1:  // random byte
          m[pick(m.size())] = static_cast<uint8_t>(rng());
          break;
        case 2:  // extreme byte, to hit length and count fields
          m[pick(m.size())] = pick(2) ? 0xff : 0x00;
          break;
        case 3:  // delete a byte
          if (m.size() > 1) m.erase(m.begin() + static_cast<ptrdiff_t>(pick(m.size())));
          break;
        case 4:  // insert a byte
          m.insert(m.begin() + static_cast<ptrdiff_t>(pick(m.size() + 1)),
                   static_cast<uint8_t>(rng()));
          break;
      }
    }
    if (pick(4) == 0) m.resize(pick(m.size() + 1));
    ExpectOkOrDataLoss(m, decode, encode);
    if (::testing::Test::HasFailure()) return;
  }
  // Pure noise, with a valid version byte half the time.
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<uint8_t> m(pick(256));
    for (uint8_t& b : m) b = static_cast<uint8_t>(rng());
    if (!m.empty() && pick(2)) m[0] = kRecordFormatVersion;
    ExpectOkOrDataLoss(m, decode, encode);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(StorageCodecTest, FuzzJobDecoder) {
  JobRecord j = SampleJob(99);
  j.rank_nodes.resize(8);  // keep the record short so mutations hit every field often
  FuzzDecoder(EncodeJob(j), DecodeJob, EncodeJob, 1234);
  FuzzDecoder(EncodeJob(JobRecord{}), DecodeJob, EncodeJob, 5678);
  // A version 3 record (no checkpoint settings), as written by older builds.
  std::vector<uint8_t> v3 = EncodeJob(j);
  v3.resize(v3.size() - kCheckpointSettingsBytes);
  v3[0] = 3;
  FuzzDecoder(v3, DecodeJob, EncodeJob, 9012);
}

TEST(StorageCodecTest, FuzzNodeDecoder) {
  FuzzDecoder(EncodeNode(SampleNode(3)), DecodeNode, EncodeNode, 4321);
  FuzzDecoder(EncodeNode(NodeRecord{}), DecodeNode, EncodeNode, 8765);
}

// ---------------------------------------------------------------------------------------
// Tables on a real RocksDB.

TEST(StorageTablesTest, PutGetRoundTripsEveryField) {
  TempDir tmp;
  auto t = MustOpen(tmp.Sub("db"));
  ASSERT_NE(t, nullptr);
  const JobRecord j = SampleJob(5);
  ASSERT_TRUE(t->PutJob(j).ok());
  auto got = t->GetJob(5);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, j);

  auto missing = t->GetJob(6);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_FALSE(missing->has_value());

  // Put replaces.
  JobRecord j2 = j;
  j2.state = JobState::kRunning;
  j2.message.clear();
  j2.rank_nodes = {9, 9};
  ASSERT_TRUE(t->PutJob(j2).ok());
  got = t->GetJob(5);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, j2);
  auto all = t->ListJobs();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
}

TEST(StorageTablesTest, ListsAreInAscendingIdOrder) {
  TempDir tmp;
  auto t = MustOpen(tmp.Sub("db"));
  ASSERT_NE(t, nullptr);
  // Inserted out of order; ids that sort wrongly as decimal or as little-endian bytes.
  const std::vector<uint64_t> ids = {300, 2, 0x100000000ull, 16, 15, 1, 256, 10};
  for (uint64_t id : ids) ASSERT_TRUE(t->PutJob(SampleJob(id)).ok());
  const std::vector<uint32_t> nids = {17, 0, 256, 3, 0xffffffffu, 16};
  for (uint32_t id : nids) ASSERT_TRUE(t->PutNode(SampleNode(id)).ok());

  auto jobs = t->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  std::vector<uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(jobs->size(), sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    EXPECT_EQ((*jobs)[i].id, sorted[i]);
    EXPECT_EQ((*jobs)[i], SampleJob(sorted[i]));
  }
  auto nodes = t->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  std::vector<uint32_t> nsorted = nids;
  std::sort(nsorted.begin(), nsorted.end());
  ASSERT_EQ(nodes->size(), nsorted.size());
  for (size_t i = 0; i < nsorted.size(); ++i) EXPECT_EQ((*nodes)[i], SampleNode(nsorted[i]));
}

TEST(StorageTablesTest, NodesPutReplaceAndDelete) {
  TempDir tmp;
  auto t = MustOpen(tmp.Sub("db"));
  ASSERT_NE(t, nullptr);
  auto empty = t->ListNodes();
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(t->PutNode(SampleNode(i)).ok());
  NodeRecord up = SampleNode(2);
  up.state = NodeState::kUp;
  up.down_reason.clear();
  ASSERT_TRUE(t->PutNode(up).ok());
  ASSERT_TRUE(t->DeleteNode(1).ok());
  ASSERT_TRUE(t->DeleteNode(77).ok());  // absent: still OK
  auto nodes = t->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0], SampleNode(0));
  EXPECT_EQ((*nodes)[1], up);
  EXPECT_EQ((*nodes)[2], SampleNode(3));
  // The node table and the job table do not see each other.
  auto jobs = t->ListJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty());
}

TEST(StorageTablesTest, NextJobIdCountsFromOneAndSurvivesReopen) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  {
    auto t = MustOpen(dir);
    ASSERT_NE(t, nullptr);
    for (uint64_t want = 1; want <= 3; ++want) {
      auto id = t->NextJobId();
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      EXPECT_EQ(*id, want);
    }
  }
  auto t = MustOpen(dir);
  ASSERT_NE(t, nullptr);
  auto id = t->NextJobId();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, 4u);
}

TEST(StorageTablesTest, NextJobIdSkipsIdsAlreadyInTheJobTable) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  {
    auto t = MustOpen(dir);
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->PutJob(SampleJob(41)).ok());  // stored without allocating its id
  }
  auto t = MustOpen(dir);
  ASSERT_NE(t, nullptr);
  auto id = t->NextJobId();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, 42u);
}

TEST(StorageTablesTest, NextJobIdIsAtomicAcrossThreads) {
  TempDir tmp;
  auto t = MustOpen(tmp.Sub("db"));
  ASSERT_NE(t, nullptr);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 40;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < kPerThread; ++k) {
        auto id = t->NextJobId();
        if (!id.ok()) return;
        got[i].push_back(*id);
        // Other writes interleave with id allocation.
        if (!t->PutJob(SampleJob(*id)).ok()) return;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::set<uint64_t> all;
  for (const auto& v : got) {
    ASSERT_EQ(v.size(), static_cast<size_t>(kPerThread));
    ASSERT_TRUE(std::is_sorted(v.begin(), v.end()));
    all.insert(v.begin(), v.end());
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), static_cast<uint64_t>(kThreads * kPerThread));
  auto jobs = t->ListJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), all.size());
}

TEST(StorageTablesTest, ReopenRecoversJobsNodesAndCounter) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  std::vector<JobRecord> jobs;
  {
    auto t = MustOpen(dir);
    ASSERT_NE(t, nullptr);
    for (int i = 0; i < 10; ++i) {
      auto id = t->NextJobId();
      ASSERT_TRUE(id.ok());
      JobRecord j = SampleJob(*id);
      j.state = static_cast<JobState>(i % 6);
      ASSERT_TRUE(t->PutJob(j).ok());
      jobs.push_back(j);
    }
    for (uint32_t n = 0; n < 5; ++n) ASSERT_TRUE(t->PutNode(SampleNode(n)).ok());
    ASSERT_TRUE(t->DeleteNode(3).ok());
  }
  auto t = MustOpen(dir);
  ASSERT_NE(t, nullptr);
  auto got = t->ListJobs();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, jobs);
  auto nodes = t->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 4u);
  EXPECT_EQ((*nodes)[3], SampleNode(4));
  auto id = t->NextJobId();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 11u);
}

TEST(StorageTablesTest, PutAllWritesEverythingOrNothing) {
  TempDir tmp;
  auto t = MustOpen(tmp.Sub("db"));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->PutAll({SampleJob(1), SampleJob(2)}, {SampleNode(0), SampleNode(1)}).ok());
  auto jobs = t->ListJobs();
  auto nodes = t->ListNodes();
  ASSERT_TRUE(jobs.ok() && nodes.ok());
  EXPECT_EQ(jobs->size(), 2u);
  EXPECT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1], SampleNode(1));

  // The last record is invalid: nothing of the batch is written.
  NodeRecord bad = SampleNode(9);
  bad.host.assign(kMaxStringBytes + 1, 'h');
  Status s = t->PutAll({SampleJob(3)}, {SampleNode(8), bad});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "host")) << s.ToString();
  auto j3 = t->GetJob(3);
  ASSERT_TRUE(j3.ok());
  EXPECT_FALSE(j3->has_value());
  nodes = t->ListNodes();
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(nodes->size(), 2u);

  ASSERT_TRUE(t->PutAll({}, {}).ok());
}

TEST(StorageTablesTest, LimitsAreEnforcedOnWriteAndLargeRecordsRoundTrip) {
  TempDir tmp;
  auto t = MustOpen(tmp.Sub("db"));
  ASSERT_NE(t, nullptr);
  JobRecord big = SampleJob(1);
  big.message.assign(kMaxStringBytes, 'm');
  big.argv.assign(kMaxArgv, "arg");
  big.rank_nodes.resize(200000);
  for (size_t i = 0; i < big.rank_nodes.size(); ++i) {
    big.rank_nodes[i] = static_cast<uint32_t>(i * 7);
  }
  ASSERT_TRUE(t->PutJob(big).ok());
  auto got = t->GetJob(1);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  EXPECT_EQ(**got, big);

  JobRecord j = SampleJob(2);
  j.cwd.assign(kMaxStringBytes + 1, 'c');
  Status s = t->PutJob(j);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "cwd")) << s.ToString();
  j = SampleJob(2);
  j.argv.assign(kMaxArgv + 1, "x");
  s = t->PutJob(j);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "argv")) << s.ToString();
  j = SampleJob(2);
  j.rank_nodes.resize(kMaxRankNodes + 1);
  s = t->PutJob(j);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "rank_nodes")) << s.ToString();
  auto j2 = t->GetJob(2);
  ASSERT_TRUE(j2.ok());
  EXPECT_FALSE(j2->has_value());
}

// ---------------------------------------------------------------------------------------
// Damaged databases and bad directories.

// Writes raw key/values into dir with RocksDB itself, as disk damage or a foreign writer would.
void RawPut(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& kvs) {
  rocksdb::Options o;
  o.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, dir, &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<rocksdb::DB> db(raw);
  for (const auto& [k, v] : kvs) ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, v).ok());
  ASSERT_TRUE(db->Close().ok());
}

std::string AsString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

TEST(StorageCorruptionTest, CorruptJobValuesAreDataLossNamingTheKey) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  std::string truncated = AsString(EncodeJob(SampleJob(6)));
  truncated.resize(truncated.size() / 2);
  std::string wrong_version = AsString(EncodeJob(SampleJob(8)));
  wrong_version[0] = 7;
  RawPut(dir, {{JobKey(4), AsString(EncodeJob(SampleJob(4)))},
               {JobKey(5), "garbage"},
               {JobKey(6), truncated},
               {JobKey(7), AsString(EncodeJob(SampleJob(70)))},  // another job's record
               {JobKey(8), wrong_version},
               {JobKey(9), ""}});
  auto t = MustOpen(dir);
  ASSERT_NE(t, nullptr);
  auto ok = t->GetJob(4);
  ASSERT_TRUE(ok.ok() && ok->has_value()) << ok.status().ToString();
  EXPECT_EQ(**ok, SampleJob(4));
  for (uint64_t id : {5, 6, 7, 8, 9}) {
    auto g = t->GetJob(id);
    ASSERT_FALSE(g.ok()) << "job " << id;
    EXPECT_EQ(g.status().code(), StatusCode::kDataLoss) << g.status().ToString();
    EXPECT_TRUE(Contains(g.status().message(), JobKey(id))) << g.status().ToString();
    EXPECT_TRUE(Contains(g.status().message(), dir)) << g.status().ToString();
  }
  EXPECT_TRUE(Contains(t->GetJob(8).status().message(), "unsupported format version 7"));
  EXPECT_TRUE(Contains(t->GetJob(7).status().message(), "id 70"));
  auto list = t->ListJobs();
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(list.status().message(), JobKey(5))) << list.status().ToString();
  // Writing a good record over the damage repairs it.
  ASSERT_TRUE(t->PutJob(SampleJob(5)).ok());
  auto g5 = t->GetJob(5);
  ASSERT_TRUE(g5.ok() && g5->has_value());
}

TEST(StorageCorruptionTest, CorruptNodeValueAndMalformedKeysAreDataLoss) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  std::string bad_node = AsString(EncodeNode(SampleNode(3)));
  bad_node.push_back('x');
  // "job/...1x" sorts between job 1 and job 2, so it is not the last job key.
  RawPut(dir, {{NodeKey(2), AsString(EncodeNode(SampleNode(2)))},
               {NodeKey(3), bad_node},
               {JobKey(1), AsString(EncodeJob(SampleJob(1)))},
               {"job/0000000000000001x", AsString(EncodeJob(SampleJob(1)))},
               {JobKey(2), AsString(EncodeJob(SampleJob(2)))}});
  auto t = MustOpen(dir);
  ASSERT_NE(t, nullptr);
  auto nodes = t->ListNodes();
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(nodes.status().message(), NodeKey(3))) << nodes.status().ToString();
  EXPECT_TRUE(Contains(nodes.status().message(), "trailing")) << nodes.status().ToString();
  auto jobs = t->ListJobs();
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(jobs.status().message(), "malformed key job/0000000000000001x"))
      << jobs.status().ToString();
  // Individual good records stay readable.
  auto j2 = t->GetJob(2);
  ASSERT_TRUE(j2.ok() && j2->has_value()) << j2.status().ToString();
  EXPECT_EQ(**j2, SampleJob(2));
  // Deleting the damaged node clears the node table's error.
  ASSERT_TRUE(t->DeleteNode(3).ok());
  nodes = t->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0], SampleNode(2));
}

TEST(StorageCorruptionTest, MalformedLastJobKeyFailsOpen) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  RawPut(dir, {{JobKey(1), AsString(EncodeJob(SampleJob(1)))}, {"job/zz\x01", "x"}});
  auto t = Tables::Open(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(t.status().message(), "job/zz\\x01")) << t.status().ToString();
}

TEST(StorageCorruptionTest, CorruptIdCounterFailsOpen) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  RawPut(dir, {{std::string(kNextJobIdKey), "\x01\x02"}});
  auto t = Tables::Open(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(t.status().message(), "meta/next_job_id")) << t.status().ToString();
  EXPECT_TRUE(Contains(t.status().message(), dir)) << t.status().ToString();
}

TEST(StorageOpenTest, DirThatIsAFileIsAClearError) {
  TempDir tmp;
  const std::string file = tmp.Sub("not-a-dir");
  std::ofstream(file) << "hello";
  auto t = Tables::Open(file);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(t.status().message(), file)) << t.status().ToString();
  EXPECT_TRUE(Contains(t.status().message(), "not a directory")) << t.status().ToString();
  // Below a file: RocksDB's own error, still naming the dir.
  auto below = Tables::Open(file + "/db");
  ASSERT_FALSE(below.ok());
  EXPECT_TRUE(Contains(below.status().message(), file + "/db")) << below.status().ToString();
}

// RocksDB makes its files with its own modes (0644 here): the store's directory keeps them to
// its owner, whatever the umask, and an existing one (an earlier gos made it 0755) is
// tightened when opened.
TEST(StorageOpenTest, TheStoreDirIsTheOwnersAloneWhateverTheUmask) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  const mode_t old_mask = ::umask(0);
  {
    auto t = MustOpen(dir);
    ASSERT_NE(t, nullptr);
  }
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  {
    auto t = MustOpen(dir);
    ASSERT_NE(t, nullptr);
  }
  ::umask(old_mask);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST(StorageOpenTest, SecondOpenOfTheSameDirFails) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  auto first = MustOpen(dir);
  ASSERT_NE(first, nullptr);
  auto second = Tables::Open(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
  EXPECT_TRUE(Contains(second.status().message(), dir)) << second.status().ToString();
  EXPECT_TRUE(Contains(second.status().message(), "LOCK")) << second.status().ToString();
}

// ---------------------------------------------------------------------------------------
// A writer process killed with SIGKILL loses nothing it acknowledged.
//
// The child is this test binary re-executed (fork + exec) with the variables below set; a
// static initializer turns it into the writer before gtest starts. Exec rather than a bare
// fork: the parent has RocksDB background threads from earlier tests, and a forked copy of
// a threaded process may not touch RocksDB (locks held by threads that no longer exist).

constexpr char kWriterDirEnv[] = "GOS_STORAGE_TEST_WRITER_DIR";
constexpr char kWriterFdEnv[] = "GOS_STORAGE_TEST_WRITER_FD";

JobRecord WriterJob(uint64_t id) {
  JobRecord j = SampleJob(id);
  j.state = JobState::kRunning;
  j.row = static_cast<int32_t>(id % 8);
  return j;
}

NodeRecord WriterNode(uint64_t id) {
  NodeRecord n = SampleNode(static_cast<uint32_t>(id % 4));
  n.last_seen_ms = static_cast<int64_t>(id);
  return n;
}

// Per job: allocate an id, write it queued, then (atomically) running plus a node update,
// then acknowledge the id on the pipe. Runs until killed.
[[noreturn]] void RunWriter(const char* dir, int ack_fd) {
  auto t = Tables::Open(dir);
  if (!t.ok()) {
    std::fprintf(stderr, "writer: %s\n", t.status().ToString().c_str());
    _exit(2);
  }
  for (;;) {
    auto id = (*t)->NextJobId();
    if (!id.ok()) {
      std::fprintf(stderr, "writer: %s\n", id.status().ToString().c_str());
      _exit(3);
    }
    JobRecord queued = SampleJob(*id);
    queued.state = JobState::kQueued;
    Status s = (*t)->PutJob(queued);
    if (s.ok()) s = (*t)->PutAll({WriterJob(*id)}, {WriterNode(*id)});
    if (!s.ok()) {
      std::fprintf(stderr, "writer: %s\n", s.ToString().c_str());
      _exit(4);
    }
    uint64_t ack = *id;
    if (::write(ack_fd, &ack, sizeof ack) != sizeof ack) _exit(5);
  }
}

int MaybeBecomeWriter() {
  const char* dir = std::getenv(kWriterDirEnv);
  const char* fd = std::getenv(kWriterFdEnv);
  if (dir != nullptr && fd != nullptr) RunWriter(dir, std::atoi(fd));
  return 0;
}

[[maybe_unused]] const int kBecomeWriter = MaybeBecomeWriter();

// Kills and reaps the child on every path out of the test.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      Reap();
    }
  }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  int Reap() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

TEST(StorageKillTest, SigkilledWriterLosesNothingAcknowledged) {
  TempDir tmp;
  const std::string dir = tmp.Sub("db");
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0) << std::strerror(errno);
  constexpr int kChildAckFd = 100;

  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back(std::string(kWriterDirEnv) + "=" + dir);
  env_strings.push_back(std::string(kWriterFdEnv) + "=" + std::to_string(kChildAckFd));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  std::string name = "storage-writer";
  char* argv[] = {name.data(), nullptr};

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    // dup2 clears close-on-exec on the new descriptor.
    if (::dup2(fds[1], kChildAckFd) < 0) _exit(126);
    ::execve(self.c_str(), argv, envp.data());
    _exit(127);
  }
  ChildGuard child(pid);
  ::close(fds[1]);
  const int rd = fds[0];

  std::vector<uint64_t> acked;
  std::string partial;
  auto read_acks = [&](int timeout_ms) {
    pollfd p{rd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return true;
    char buf[4096];
    ssize_t n = ::read(rd, buf, sizeof buf);
    if (n <= 0) return false;  // EOF: the child is gone
    partial.append(buf, static_cast<size_t>(n));
    size_t whole = partial.size() / 8 * 8;
    for (size_t off = 0; off < whole; off += 8) {
      uint64_t id;
      std::memcpy(&id, partial.data() + off, 8);
      acked.push_back(id);
    }
    partial.erase(0, whole);
    return true;
  };
  // Let it run until it has acknowledged a good number of jobs, then kill it mid-stream.
  constexpr size_t kWantAcks = 40;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (acked.size() < kWantAcks && std::chrono::steady_clock::now() < deadline) {
    if (!read_acks(100)) break;
  }
  ASSERT_GE(acked.size(), kWantAcks) << "writer acknowledged only " << acked.size();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const int status = child.Reap();
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "writer ended on its own, status " << status;
  while (read_acks(1000)) {
  }
  ::close(rd);
  EXPECT_TRUE(partial.empty());

  // Every acknowledged id is stored in its final (running) form, acks are 1, 2, 3, ...
  auto t = MustOpen(dir);
  ASSERT_NE(t, nullptr);
  for (size_t i = 0; i < acked.size(); ++i) {
    ASSERT_EQ(acked[i], i + 1);
    auto j = t->GetJob(acked[i]);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    ASSERT_TRUE(j->has_value()) << "acknowledged job " << acked[i] << " lost";
    EXPECT_EQ(**j, WriterJob(acked[i]));
  }
  // What was in flight at the kill is whole or absent; nothing is unreadable.
  auto jobs = t->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_GE(jobs->size(), acked.size());
  EXPECT_LE(jobs->size(), acked.size() + 1);
  auto nodes = t->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 4u);
  for (const NodeRecord& n : *nodes) {
    // Each node was last written with the highest id of its residue (atomically with that
    // job): at least the last acknowledged one.
    uint64_t last_acked_for_node = 0;
    for (uint64_t id : acked) {
      if (id % 4 == n.id) last_acked_for_node = id;
    }
    EXPECT_GE(static_cast<uint64_t>(n.last_seen_ms), last_acked_for_node);
    EXPECT_EQ(n, WriterNode(static_cast<uint64_t>(n.last_seen_ms)));
    auto j = t->GetJob(static_cast<uint64_t>(n.last_seen_ms));
    ASSERT_TRUE(j.ok() && j->has_value());
    EXPECT_EQ(**j, WriterJob(static_cast<uint64_t>(n.last_seen_ms)));
  }
  // The counter never goes back: the next id is past everything acknowledged or stored.
  auto next = t->NextJobId();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(*next, acked.back());
  EXPECT_GT(*next, jobs->back().id);
}

}  // namespace
}  // namespace gos::storage
