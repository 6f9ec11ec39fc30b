// CutLogForRestart (coordinator/log_cut.h) over a real RocksDB: a stored epoch's channels say
// where each rank's decision stream is cut, the job stream is cut at the epoch's mark, and the
// whole cut is one write or nothing.
#include "coordinator/log_cut.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/replay/log.h"
#include "gos/storage/tables.h"
#include "tests/support/chunk_test_util.h"

namespace gos::coordinator {
namespace {

using storage::testing::TempDir;

constexpr uint64_t kJob = 42;

std::span<const uint8_t> B(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class LogCutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<storage::Tables>> t = storage::Tables::Open(dir_.Sub("db"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tables_ = std::move(*t);
  }

  // A stored `gos-channel` of rank `rank` of a 2-rank job whose header says rec_head (a channel
  // file shortened to 8 KiB: only its header is read).
  storage::FileEntry StoreChannel(uint32_t rank, uint64_t rec_head, uint64_t job = kJob) {
    std::vector<uint8_t> bytes(8192, 0);
    auto* h = new (bytes.data()) bcs::ChannelHeader{};
    h->magic = bcs::kChannelMagic;
    h->version = bcs::kChannelVersion;
    h->rank = rank;
    h->size = 2;
    h->job = job;
    h->bytes = bcs::kChannelBytes;
    h->rec_head.store(rec_head);
    const std::string dir = dir_.Sub("r" + std::to_string(rank));
    std::filesystem::create_directories(dir);
    storage::testing::WriteFile(dir + "/gos-channel", bytes);
    storage::FileEntry e;
    Status st = storage::ChunkFile(
        dir, "gos-channel",
        [&](const storage::ChunkRef& ref, std::span<const uint8_t> raw) {
          return tables_->checkpoints()->PutChunk(ref, storage::CompressChunk(raw, 1)).status();
        },
        &e);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return e;
  }

  storage::EpochManifest Manifest(uint64_t rec0, uint64_t rec1) {
    storage::EpochManifest m;
    m.job = kJob;
    m.epoch = 2;
    m.ntasks = 2;
    m.ranks = {{0, 1, {StoreChannel(0, rec0)}}, {1, 2, {StoreChannel(1, rec1)}}};
    return m;
  }

  // The recorded run: 10 steps (3 per segment), epoch 1's mark at step 2, epoch 2's at step 6;
  // rank 0 wrote "abcdefghij" (in two segments), rank 1 "xyz"; 10 timeline entries per rank;
  // two pieces of input.
  void RecordRun() {
    replay::JobLogWriter w(2);
    for (uint64_t k = 0; k < 10; ++k) {
      if (k == 2) w.AddCheckpoint({1, 2, 100 + k, 0});
      if (k == 6) w.AddCheckpoint({2, 6, 100 + k, 0});
      replay::Step s;
      s.strobe = 100 + k;
      s.time_us = 1700000000000000 + static_cast<int64_t>(k) * 1000;
      s.counts = {0, 0};
      w.AddStep(s);
      if (k % 3 == 2) Append(replay::kJobStream, w.Flush());
    }
    Append(replay::kJobStream, w.Flush());
    Append(replay::RankStream(0), replay::EncodeBytesSegment("abcde"));
    Append(replay::RankStream(0), replay::EncodeBytesSegment("fghij"));
    Append(replay::RankStream(1), replay::EncodeBytesSegment("xyz"));
    const std::vector<uint32_t> blocked(10, 2000);
    for (uint32_t r : {0u, 1u})
      Append(replay::TimelineStream(r), replay::EncodeTimelineSegment(blocked));
    Append(replay::kStdinStream, replay::EncodeStdinPiece("5\n"));
    Append(replay::kStdinStream, replay::EncodeStdinPiece(""));
  }

  void Append(uint32_t stream, const std::string& seg) {
    ASSERT_TRUE(tables_->replay()->Append(kJob, stream, B(seg)).ok());
  }

  std::vector<std::string> Read(uint32_t stream) {
    StatusOr<std::vector<std::string>> segs = tables_->replay()->Read(kJob, stream);
    EXPECT_TRUE(segs.ok()) << segs.status().ToString();
    return segs.ok() ? *segs : std::vector<std::string>{};
  }

  // Every stream's segments, to check a refused cut changed nothing.
  std::map<uint32_t, std::vector<std::string>> Snapshot() {
    std::map<uint32_t, std::vector<std::string>> out;
    StatusOr<std::vector<uint32_t>> streams = tables_->replay()->Streams(kJob);
    EXPECT_TRUE(streams.ok());
    for (uint32_t s : *streams) out[s] = Read(s);
    return out;
  }

  TempDir dir_;
  std::unique_ptr<storage::Tables> tables_;
};

TEST_F(LogCutTest, CutsEveryStreamAtTheEpoch) {
  RecordRun();
  StatusOr<replay::RestartMark> mark =
      CutLogForRestart(tables_->checkpoints(), tables_->replay(), Manifest(7, 0), 777, 123);
  ASSERT_TRUE(mark.ok()) << mark.status().ToString();
  EXPECT_EQ(mark->epoch, 2u);
  EXPECT_EQ(mark->steps, 6u);
  EXPECT_EQ(mark->dropped_steps, 4u);
  EXPECT_EQ(mark->strobe, 777u);
  EXPECT_EQ(mark->time_us, 123);

  StatusOr<replay::JobLog> log = replay::DecodeJobLog(Read(replay::kJobStream));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->steps.size(), 6u);
  EXPECT_EQ(log->steps.back().strobe, 105u);
  ASSERT_EQ(log->checkpoints.size(), 2u);
  ASSERT_EQ(log->restarts.size(), 1u);
  EXPECT_EQ(log->restarts[0].steps, 6u);
  EXPECT_EQ(*replay::DecodeBytesSegments(Read(replay::RankStream(0))), "abcdefg");
  EXPECT_EQ(*replay::DecodeBytesSegments(Read(replay::RankStream(1))), "");
  for (uint32_t r : {0u, 1u}) {
    EXPECT_EQ(*replay::DecodeTimelineSegments(Read(replay::TimelineStream(r))),
              std::vector<uint32_t>(6, 2000));
  }
  EXPECT_EQ(*replay::DecodeStdinPieces(Read(replay::kStdinStream)),
            (std::vector<std::string>{"5\n", ""}));

  // The restored run appends; a second restart, from an epoch of that run, cuts again.
  replay::JobLogWriter w(2);
  for (uint64_t k = 6; k < 9; ++k) {
    if (k == 8) w.AddCheckpoint({3, 8, 900 + k, 0});
    replay::Step s;
    s.strobe = 900 + k;
    s.counts = {0, 0};
    w.AddStep(s);
  }
  Append(replay::kJobStream, w.Flush());
  Append(replay::RankStream(0), replay::EncodeBytesSegment("GHI"));
  storage::EpochManifest m3 = Manifest(9, 0);
  m3.epoch = 3;
  mark = CutLogForRestart(tables_->checkpoints(), tables_->replay(), m3, 2000, 456);
  ASSERT_TRUE(mark.ok()) << mark.status().ToString();
  EXPECT_EQ(mark->steps, 8u);
  EXPECT_EQ(mark->dropped_steps, 1u);
  log = replay::DecodeJobLog(Read(replay::kJobStream));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->steps.size(), 8u);
  ASSERT_EQ(log->restarts.size(), 2u);
  EXPECT_EQ(log->restarts[1].epoch, 3u);
  EXPECT_EQ(*replay::DecodeBytesSegments(Read(replay::RankStream(0))), "abcdefgGH");
  // Rank 1 never decided and the timelines were not extended: padded to the mark.
  EXPECT_EQ(replay::DecodeTimelineSegments(Read(replay::TimelineStream(1)))->size(), 8u);
}

TEST_F(LogCutTest, ALogThatCannotGoOnIsLeftAsItWas) {
  // No log at all.
  StatusOr<replay::RestartMark> mark =
      CutLogForRestart(tables_->checkpoints(), tables_->replay(), Manifest(0, 0), 1, 1);
  EXPECT_EQ(mark.status().code(), StatusCode::kNotFound) << mark.status().ToString();

  RecordRun();
  const auto before = Snapshot();
  // Rank 0 had written more than its stream holds (its node never shipped the rest).
  mark = CutLogForRestart(tables_->checkpoints(), tables_->replay(), Manifest(11, 0), 1, 1);
  EXPECT_EQ(mark.status().code(), StatusCode::kDataLoss) << mark.status().ToString();
  EXPECT_NE(mark.status().message().find("job 42 cut back to epoch 2: rank 0's decision stream"),
            std::string::npos)
      << mark.status().message();
  EXPECT_EQ(Snapshot(), before);
  // No mark of the epoch.
  storage::EpochManifest m = Manifest(7, 0);
  m.epoch = 5;
  mark = CutLogForRestart(tables_->checkpoints(), tables_->replay(), m, 1, 1);
  EXPECT_EQ(mark.status().code(), StatusCode::kNotFound) << mark.status().ToString();
  EXPECT_NE(mark.status().message().find("no mark of checkpoint 5"), std::string::npos);
  EXPECT_EQ(Snapshot(), before);
  // A channel that is another job's.
  m = Manifest(7, 0);
  m.ranks[1].files = {StoreChannel(1, 0, /*job=*/43)};
  mark = CutLogForRestart(tables_->checkpoints(), tables_->replay(), m, 1, 1);
  EXPECT_EQ(mark.status().code(), StatusCode::kDataLoss) << mark.status().ToString();
  EXPECT_NE(mark.status().message().find("rank 1: gos-channel is not a version"), std::string::npos)
      << mark.status().message();
  EXPECT_EQ(Snapshot(), before);
}

}  // namespace
}  // namespace gos::coordinator
