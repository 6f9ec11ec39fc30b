#include "gos/replay/log.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "replay/codec.h"

namespace gos::replay {
namespace {

DescKey Send(int32_t peer, int32_t tag, uint64_t len, uint64_t ctx = 0x1000) {
  DescKey k;
  k.op = static_cast<uint32_t>(bcs::Op::kSend);
  k.peer = peer;
  k.tag = tag;
  k.len = len;
  k.context = ctx;
  return k;
}

DescKey Recv(int32_t peer, int32_t tag, uint64_t len, uint64_t ctx = 0x1000) {
  DescKey k = Send(peer, tag, len, ctx);
  k.op = static_cast<uint32_t>(bcs::Op::kRecv);
  return k;
}

// Steps keep their time to the millisecond (floor).
int64_t Ms(int64_t us) { return us / 1000 - (us % 1000 < 0 ? 1 : 0); }

void ExpectSameLog(const JobLog& a, const JobLog& b) {
  ASSERT_EQ(a.world_size, b.world_size);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    EXPECT_EQ(a.steps[i].strobe, b.steps[i].strobe);
    EXPECT_EQ(Ms(a.steps[i].time_us), Ms(b.steps[i].time_us));
    EXPECT_EQ(a.steps[i].row, b.steps[i].row);
    EXPECT_EQ(a.steps[i].early, b.steps[i].early);
    EXPECT_EQ(a.steps[i].counts, b.steps[i].counts);
    EXPECT_EQ(a.steps[i].descs, b.steps[i].descs);
  }
  ASSERT_EQ(a.checkpoints.size(), b.checkpoints.size());
  for (size_t i = 0; i < a.checkpoints.size(); ++i) {
    EXPECT_EQ(a.checkpoints[i].epoch, b.checkpoints[i].epoch);
    EXPECT_EQ(a.checkpoints[i].steps, b.checkpoints[i].steps);
    EXPECT_EQ(a.checkpoints[i].strobe, b.checkpoints[i].strobe);
    EXPECT_EQ(a.checkpoints[i].time_us, b.checkpoints[i].time_us);
  }
  ASSERT_EQ(a.end.has_value(), b.end.has_value());
  if (a.end) {
    EXPECT_EQ(a.end->kind, b.end->kind);
    EXPECT_EQ(a.end->exit_code, b.end->exit_code);
    EXPECT_EQ(a.end->rank, b.end->rank);
    EXPECT_EQ(a.end->steps, b.end->steps);
    EXPECT_EQ(a.end->time_us, b.end->time_us);
    EXPECT_EQ(a.end->message, b.end->message);
  }
}

// A log exercising every field: extreme values, wildcards, empty steps, strobes that restart.
JobLog VariedLog() {
  JobLog log;
  log.world_size = 3;
  Step s0{100, 1700000000000000, {2, 0, 1}, {}};
  s0.descs = {Send(1, 7, 64), Recv(bcs::kAnySource, bcs::kAnyTag, 1 << 20),
              Send(0, 0, 0, ~uint64_t{0})};
  DescKey odd;
  odd.op = 99;
  odd.peer = std::numeric_limits<int32_t>::min();
  odd.tag = std::numeric_limits<int32_t>::max();
  odd.flags = ~0u;
  odd.group_size = ~0u;
  odd.context = 1;
  odd.len = ~uint64_t{0};
  DescKey barrier;
  barrier.op = static_cast<uint32_t>(bcs::Op::kBarrier);
  barrier.tag = 3;
  barrier.group_size = 3;
  Step s1{101, 1700000000000900, {0, 0, 0}, {}, 1, true};
  Step s2{105, 1700000000000100, {1, 2, 1}, {odd, barrier, Send(2, 1, 5), barrier}, ~0u, true};
  Step s3{7, -5, {0, 0, 0}, {}, 3, false};  // a restarted strobe counter, a time before the epoch
  log.steps = {s0, s1, s2, s3};
  log.checkpoints = {{1, 2, 103, 1700000000000050}};
  log.end = End{EndKind::kFailed, 134, 2, 4, 1700000000009999, "rank 2: \"SIGABRT\"\n\xff"};
  return log;
}

std::vector<std::string> WriteLog(const JobLog& log, size_t steps_per_segment) {
  JobLogWriter w(log.world_size);
  std::vector<std::string> segs;
  size_t ck = 0;
  for (size_t i = 0; i < log.steps.size(); ++i) {
    while (ck < log.checkpoints.size() && log.checkpoints[ck].steps == i) {
      w.AddCheckpoint(log.checkpoints[ck++]);
    }
    w.AddStep(log.steps[i]);
    if ((i + 1) % steps_per_segment == 0) segs.push_back(w.Flush());
  }
  while (ck < log.checkpoints.size()) w.AddCheckpoint(log.checkpoints[ck++]);
  if (log.end) w.AddEnd(*log.end);
  std::string last = w.Flush();
  if (!last.empty()) segs.push_back(last);
  EXPECT_TRUE(w.Flush().empty());
  EXPECT_EQ(w.pending_bytes(), 0u);
  return segs;
}

TEST(JobLog, RoundTripsInOneSegmentAndInMany) {
  const JobLog log = VariedLog();
  for (size_t per : {1, 2, 100}) {
    SCOPED_TRACE("steps per segment " + std::to_string(per));
    std::vector<std::string> segs = WriteLog(log, per);
    StatusOr<JobLog> back = DecodeJobLog(segs);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ExpectSameLog(log, *back);
  }
}

TEST(JobLog, NoSegmentsIsAnEmptyLog) {
  StatusOr<JobLog> back = DecodeJobLog({});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->world_size, 0u);
  EXPECT_TRUE(back->steps.empty());
  EXPECT_FALSE(back->end);
}

TEST(JobLog, PendingCountsTrackTheWriter) {
  JobLogWriter w(2);
  EXPECT_EQ(w.pending_bytes(), 0u);
  w.AddStep(Step{1, 10, {1, 0}, {Send(1, 0, 8)}});
  EXPECT_EQ(w.pending_steps(), 1u);
  EXPECT_GT(w.pending_bytes(), 0u);
  std::string seg = w.Flush();
  EXPECT_EQ(w.pending_steps(), 0u);
  StatusOr<SegmentSize> size = SizeOfSegment(seg);
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(size->stored, seg.size());
  EXPECT_GT(size->raw, 0u);
}

TEST(JobLog, SegmentsOfDifferentWorldSizesAreDataLoss) {
  JobLogWriter a(2), b(3);
  a.AddStep(Step{1, 10, {0, 0}, {}});
  b.AddStep(Step{2, 20, {0, 0, 0}, {}});
  std::vector<std::string> segs = {a.Flush(), b.Flush()};
  StatusOr<JobLog> back = DecodeJobLog(segs);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(back.status().message().find("segment 1"), std::string::npos)
      << back.status().message();
}

TEST(JobLog, TheLastEndWins) {
  JobLogWriter w(1);
  w.AddStep(Step{1, 10, {0}, {}});
  w.AddEnd(End{EndKind::kFailed, 1, 0, 1, 11, "node lost"});
  std::vector<std::string> segs = {w.Flush()};
  w.AddStep(Step{5, 50, {0}, {}});
  w.AddEnd(End{EndKind::kCompleted, 0, -1, 2, 51, ""});
  segs.push_back(w.Flush());
  StatusOr<JobLog> back = DecodeJobLog(segs);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->end);
  EXPECT_EQ(back->end->kind, EndKind::kCompleted);
  EXPECT_EQ(back->steps.size(), 2u);
}

TEST(JobLog, WrongKindIsDataLoss) {
  const std::string bytes = EncodeBytesSegment("abc");
  std::vector<std::string> segs = {bytes};
  StatusOr<JobLog> back = DecodeJobLog(segs);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(back.status().message().find("bytes segment"), std::string::npos);
}

TEST(BytesAndTimeline, RoundTrip) {
  std::string big(100000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) >> 3);
  std::vector<std::string> segs = {EncodeBytesSegment("hello "), EncodeBytesSegment(""),
                                   EncodeBytesSegment(big)};
  StatusOr<std::string> bytes = DecodeBytesSegments(segs);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, "hello " + big);

  // Blocked time is kept to the nearest millisecond.
  const std::vector<uint32_t> a = {0, 499, 500, 1499, 127000, 0xffffffffu}, b = {42000};
  std::vector<std::string> t = {EncodeTimelineSegment(a), EncodeTimelineSegment(b)};
  StatusOr<std::vector<uint32_t>> tl = DecodeTimelineSegments(t);
  ASSERT_TRUE(tl.ok()) << tl.status().ToString();
  EXPECT_EQ(*tl, (std::vector<uint32_t>{0, 0, 1000, 1000, 127000, 4294967000u, 42000}));
}

TEST(StdinPieces, RoundTripAndTruncation) {
  const std::string big(70000, 'x');
  std::vector<std::string> segs = {EncodeStdinPiece("5\n7\n"), EncodeStdinPiece(big),
                                   EncodeStdinPiece("")};
  StatusOr<std::vector<std::string>> pieces = DecodeStdinPieces(segs);
  ASSERT_TRUE(pieces.ok()) << pieces.status().ToString();
  EXPECT_EQ(*pieces, (std::vector<std::string>{"5\n7\n", big, ""}));
  EXPECT_TRUE(DecodeStdinPieces({}).ok());
  // A piece that claims more bytes than its segment holds.
  std::vector<std::string> bad = {
      EncodeBytesSegment(std::string("\x05"
                                     "ab",
                                     3))};
  EXPECT_EQ(DecodeStdinPieces(bad).status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(IsRankStream(RankStream(0)) && IsRankStream(RankStream(kMaxWorldSize - 1)));
  EXPECT_FALSE(IsRankStream(kJobStream) || IsRankStream(kStdinStream) ||
               IsRankStream(TimelineStream(0)));
}

// Decodes a (possibly damaged) segment with each decoder; none may crash, and a damaged one
// must not decode as a job log.
void DecodeAll(const std::string& seg, int* ok) {
  std::vector<std::string> one = {seg};
  if (DecodeJobLog(one).ok()) ++*ok;
  (void)DecodeBytesSegments(one).ok();
  (void)DecodeTimelineSegments(one).ok();
  (void)SizeOfSegment(seg).ok();
}

TEST(JobLog, TruncationsAndBitFlipsAreDataLoss) {
  const std::vector<std::string> segs = WriteLog(VariedLog(), 100);
  ASSERT_EQ(segs.size(), 1u);
  const std::string& seg = segs[0];
  int ok = 0;
  for (size_t n = 0; n < seg.size(); ++n) {
    StatusOr<JobLog> r = DecodeJobLog(std::vector<std::string>{seg.substr(0, n)});
    ASSERT_FALSE(r.ok()) << "truncated to " << n;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    DecodeAll(seg.substr(0, n), &ok);
  }
  for (size_t bit = 0; bit < seg.size() * 8; ++bit) {
    std::string bad = seg;
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    StatusOr<JobLog> r = DecodeJobLog(std::vector<std::string>{bad});
    ASSERT_FALSE(r.ok()) << "bit " << bit;  // the CRC catches every single-bit flip
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  }
  EXPECT_EQ(ok, 0);
}

// Damage behind a valid checksum: the payload decoder itself must bounds-check.
TEST(JobLog, DamagedPayloadsUnderAValidChecksumNeverCrash) {
  JobLogWriter w(3);
  const JobLog log = VariedLog();
  for (const Step& s : log.steps) w.AddStep(s);
  w.AddCheckpoint(log.checkpoints[0]);
  w.AddEnd(*log.end);
  const std::string seg = w.Flush();
  StatusOr<internal::OpenedSegment> opened =
      internal::OpenSegment(seg, internal::SegmentKind::kJob);
  ASSERT_TRUE(opened.ok());
  const std::string payload = opened->payload;
  const uint32_t count = opened->count;
  std::mt19937_64 rng(6);
  int decoded = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string p = payload;
    switch (iter % 4) {
      case 0:  // truncate
        p.resize(rng() % p.size());
        break;
      case 1:  // flip a few bytes
        for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
          p[rng() % p.size()] = static_cast<char>(rng());
        }
        break;
      case 2:  // insert a byte
        p.insert(p.begin() + static_cast<std::ptrdiff_t>(rng() % p.size()),
                 static_cast<char>(rng()));
        break;
      case 3:  // large varints
        p[rng() % p.size()] = static_cast<char>(0xff);
        p[rng() % p.size()] = static_cast<char>(0x80 | (rng() & 0x7f));
        break;
    }
    std::vector<std::string> one = {
        internal::MakeSegment(internal::SegmentKind::kJob, count + (iter % 7 == 0), p, 1)};
    StatusOr<JobLog> r = DecodeJobLog(one);
    if (r.ok()) {
      ++decoded;
      // Whatever decodes must satisfy the log's invariants.
      for (const Step& s : r->steps) {
        ASSERT_EQ(s.counts.size(), r->world_size);
        uint64_t total = 0;
        for (uint32_t c : s.counts) total += c;
        ASSERT_EQ(total, s.descs.size());
      }
    } else {
      ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    }
  }
  std::printf("damaged payloads that still decoded (as another valid log): %d of 20000\n", decoded);
}

TEST(Describe, NamesTheCall) {
  EXPECT_EQ(Describe(Send(3, 7, 64, 0x2a)), "send to rank 3, tag 7, 64 bytes, context 0x2a");
  EXPECT_EQ(Describe(Recv(bcs::kAnySource, bcs::kAnyTag, 8, 1)),
            "receive from any source, any tag, 8-byte buffer, context 0x1");
  bcs::Descriptor d{};
  d.op = static_cast<uint32_t>(bcs::Op::kBarrier);
  d.tag = 2;
  d.group_size = 4;
  d.req = 77;
  d.addr = 0x1234;
  const DescKey k = KeyOf(d);
  EXPECT_EQ(k.group_size, 4u);
  EXPECT_EQ(Describe(k), "barrier #2 of 4 ranks, context 0x0");
}

// A 1-D Jacobi run: 4 ranks in a line, each iteration every rank sends its edge to each
// neighbour and receives theirs (6 messages an iteration). A step is one BCS slice; ranks
// drift: now and then a rank's iteration lands in the next slice, some slices take nothing.
TEST(JobLog, JacobiSizes) {
  constexpr uint32_t kRanks = 4;
  constexpr int kIterations = 2000;
  std::mt19937_64 rng(42);
  JobLog log;
  log.world_size = kRanks;
  std::vector<int> done(kRanks, 0);
  uint64_t strobe = 1000;
  int64_t time = 1700000000000000;
  uint64_t messages = 0;
  while (*std::min_element(done.begin(), done.end()) < kIterations) {
    Step s;
    s.strobe = strobe;
    s.time_us = time;
    s.counts.assign(kRanks, 0);
    for (uint32_t r = 0; r < kRanks; ++r) {
      if (done[r] >= kIterations || rng() % 10 == 0) continue;  // late for this slice
      for (int32_t nb : {static_cast<int32_t>(r) - 1, static_cast<int32_t>(r) + 1}) {
        if (nb < 0 || nb >= static_cast<int32_t>(kRanks)) continue;
        s.descs.push_back(Send(nb, 17, 8 * 1024, 0x5a5a0001));
        s.descs.push_back(Recv(nb, 17, 8 * 1024, 0x5a5a0001));
        s.counts[r] += 2;
        ++messages;
      }
      ++done[r];
    }
    log.steps.push_back(std::move(s));
    strobe += rng() % 50 == 0 ? 2 : 1;                  // descheduled for a strobe now and then
    time += 1000 + static_cast<int64_t>(rng() % 2000);  // early strobes: 1-3 ms apart
  }
  // The nodeagent flushes a segment every 64 KiB of raw log or so.
  JobLogWriter w(kRanks);
  std::vector<std::string> segs;
  uint64_t raw = 0, stored = 0;
  for (const Step& s : log.steps) {
    w.AddStep(s);
    if (w.pending_bytes() >= 64 * 1024) segs.push_back(w.Flush());
  }
  w.AddEnd(End{EndKind::kCompleted, 0, -1, log.steps.size(), time, ""});
  segs.push_back(w.Flush());
  for (const std::string& seg : segs) {
    StatusOr<SegmentSize> size = SizeOfSegment(seg);
    ASSERT_TRUE(size.ok());
    raw += size->raw;
    stored += size->stored;
  }
  StatusOr<JobLog> back = DecodeJobLog(segs);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  log.end = back->end;
  ExpectSameLog(log, *back);
  const double per_raw = static_cast<double>(raw) / static_cast<double>(messages);
  const double per_stored = static_cast<double>(stored) / static_cast<double>(messages);
  std::printf(
      "jacobi %u ranks x %d iterations: %zu steps, %llu messages, %zu segments, raw %llu B "
      "(%.2f B/message), stored %llu B (%.3f B/message)\n",
      kRanks, kIterations, log.steps.size(), static_cast<unsigned long long>(messages), segs.size(),
      static_cast<unsigned long long>(raw), per_raw, static_cast<unsigned long long>(stored),
      per_stored);
  EXPECT_LE(per_stored, 1.0);
}

// ---- Cutting a log back to a checkpoint (a restart) ------------------------------------------

// Step k of a synthetic 2-rank run: rank k % 2 sends to the other, which receives.
Step RunStep(uint64_t k) {
  Step s;
  s.strobe = 1000 + 3 * k;
  s.time_us = 1700000000000000 + static_cast<int64_t>(k) * 5000;
  s.row = static_cast<uint32_t>(k % 2);
  s.early = k % 3 == 0;
  const int32_t from = static_cast<int32_t>(k % 2), to = 1 - from;
  s.counts = {1, 1};
  s.descs = from == 0 ? std::vector<DescKey>{Send(to, 7, k), Recv(from, 7, k)}
                      : std::vector<DescKey>{Recv(from, 7, k), Send(to, 7, k)};
  return s;
}

// The job stream of steps [from, to) with checkpoint marks (epoch, at step) where they fall,
// cut into segments of `per` steps (a mark right at a segment's end goes into the next one).
std::vector<std::string> RunSegments(uint64_t from, uint64_t to, size_t per,
                                     const std::vector<std::pair<uint64_t, uint64_t>>& marks) {
  JobLogWriter w(2);
  std::vector<std::string> segs;
  for (uint64_t k = from; k <= to; ++k) {
    for (const auto& [epoch, at] : marks) {
      if (at == k) w.AddCheckpoint({epoch, at, 1000 + 3 * at, 1700000000000000 + int64_t(at)});
    }
    if (k == to) break;
    w.AddStep(RunStep(k));
    if ((k - from + 1) % per == 0) segs.push_back(w.Flush());
  }
  std::string last = w.Flush();
  if (!last.empty()) segs.push_back(last);
  return segs;
}

// The stream once `cut` is applied to it, as the store would leave it.
std::vector<std::string> Apply(const std::vector<std::string>& segs, const StreamCut& cut) {
  std::vector<std::string> out(segs.begin(), segs.begin() + static_cast<ptrdiff_t>(cut.keep));
  out.insert(out.end(), cut.tail.begin(), cut.tail.end());
  return out;
}

TEST(CutJobStream, KeepsTheRunUpToTheMarkAndAppendsTheRestart) {
  // 20 steps; epochs 1 and 2 at steps 6 and 13 (inside segments of 4 steps, and at the
  // boundary of segments of 13), epoch 3 at step 18 (the lost run's).
  for (size_t per : {1, 4, 13, 100}) {
    SCOPED_TRACE("steps per segment " + std::to_string(per));
    const auto segs = RunSegments(0, 20, per, {{1, 6}, {2, 13}, {3, 18}});
    RestartMark r;
    r.epoch = 2;
    r.strobe = 5000;
    r.time_us = 1700000000999000;
    StatusOr<StreamCut> cut = CutJobStream(segs, &r);
    ASSERT_TRUE(cut.ok()) << cut.status().ToString();
    EXPECT_EQ(r.steps, 13u);
    EXPECT_EQ(r.dropped_steps, 7u);
    ASSERT_EQ(cut->tail.size(), 1u);
    EXPECT_LE(cut->keep, segs.size() - 1);
    // The segments kept are untouched, the cut one re-encoded.
    std::vector<std::string> log = Apply(segs, *cut);
    StatusOr<JobLog> back = DecodeJobLog(log);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->steps.size(), 13u);
    for (uint64_t k = 0; k < 13; ++k) {
      EXPECT_EQ(back->steps[k].strobe, RunStep(k).strobe);
      EXPECT_EQ(back->steps[k].descs, RunStep(k).descs);
      EXPECT_EQ(back->steps[k].early, RunStep(k).early);
    }
    ASSERT_EQ(back->checkpoints.size(), 2u);
    EXPECT_EQ(back->checkpoints[1].epoch, 2u);
    EXPECT_EQ(back->checkpoints[1].steps, 13u);
    ASSERT_EQ(back->restarts.size(), 1u);
    EXPECT_EQ(back->restarts[0].epoch, 2u);
    EXPECT_EQ(back->restarts[0].steps, 13u);
    EXPECT_EQ(back->restarts[0].strobe, 5000u);
    EXPECT_EQ(back->restarts[0].dropped_steps, 7u);
    EXPECT_EQ(back->restarts[0].time_us, 1700000000999000);

    // The restored run appends its own steps (strobes of the coordinator's later count) and
    // marks its epoch 4 with the absolute step count: one consistent log.
    JobLogWriter w(2);
    for (uint64_t k = 13; k < 17; ++k) {
      Step s = RunStep(k);
      s.strobe += 9000;
      if (k == 15) w.AddCheckpoint({4, 15, s.strobe - 1, 0});
      w.AddStep(s);
    }
    log.push_back(w.Flush());
    back = DecodeJobLog(log);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->steps.size(), 17u);
    ASSERT_EQ(back->checkpoints.size(), 3u);
    EXPECT_EQ(back->checkpoints[2].epoch, 4u);
    EXPECT_EQ(back->checkpoints[2].steps, 15u);

    // Restarted again, from epoch 4: the first restart stays, the second follows it.
    RestartMark r2;
    r2.epoch = 4;
    r2.strobe = 20000;
    cut = CutJobStream(log, &r2);
    ASSERT_TRUE(cut.ok()) << cut.status().ToString();
    EXPECT_EQ(r2.steps, 15u);
    EXPECT_EQ(r2.dropped_steps, 2u);
    back = DecodeJobLog(Apply(log, *cut));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->steps.size(), 15u);
    ASSERT_EQ(back->restarts.size(), 2u);
    EXPECT_EQ(back->restarts[0].epoch, 2u);
    EXPECT_EQ(back->restarts[1].epoch, 4u);
    EXPECT_EQ(back->restarts[1].steps, 15u);
  }
}

TEST(CutJobStream, AMarkAtTheVeryEndAndARepeatedEpoch) {
  // The mark is the last record of the stream: nothing is dropped.
  auto segs = RunSegments(0, 5, 2, {{1, 5}});
  RestartMark r;
  r.epoch = 1;
  StatusOr<StreamCut> cut = CutJobStream(segs, &r);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(r.steps, 5u);
  EXPECT_EQ(r.dropped_steps, 0u);
  StatusOr<JobLog> back = DecodeJobLog(Apply(segs, *cut));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->steps.size(), 5u);
  EXPECT_EQ(back->restarts.size(), 1u);

  // An epoch whose mark appears twice (an aborted epoch's number taken again): the last one.
  segs = RunSegments(0, 10, 3, {{1, 2}, {1, 7}});
  r = RestartMark{};
  r.epoch = 1;
  cut = CutJobStream(segs, &r);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(r.steps, 7u);
  EXPECT_EQ(r.dropped_steps, 3u);
}

TEST(CutJobStream, NoMarkOrInconsistentStepsAreRefused) {
  const auto segs = RunSegments(0, 12, 4, {{1, 6}});
  RestartMark r;
  r.epoch = 2;
  StatusOr<StreamCut> cut = CutJobStream(segs, &r);
  EXPECT_EQ(cut.status().code(), StatusCode::kNotFound) << cut.status().ToString();
  EXPECT_NE(cut.status().message().find("no mark of checkpoint 2"), std::string::npos);
  EXPECT_EQ(CutJobStream({}, &r).status().code(), StatusCode::kNotFound);
  // A segment before the mark is missing: the mark's step count no longer holds.
  std::vector<std::string> holed = {segs[1], segs[2]};
  r.epoch = 1;
  cut = CutJobStream(holed, &r);
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss) << cut.status().ToString();
  EXPECT_NE(cut.status().message().find("says 6 steps came before it; the log has 2"),
            std::string::npos)
      << cut.status().message();
  // A damaged segment anywhere is named.
  std::vector<std::string> bad = segs;
  bad[2][30] ^= 1;
  cut = CutJobStream(bad, &r);
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("segment 2"), std::string::npos);
}

// The segment with version `v` in its header (and a checksum that matches again).
std::string WithVersion(std::string seg, uint16_t v) {
  seg[4] = static_cast<char>(v & 0xff);
  seg[5] = static_cast<char>(v >> 8);
  uint32_t crc = internal::Crc32c(0, seg.data(), 20);
  crc = internal::Crc32c(crc, seg.data() + internal::kSegmentHeaderBytes,
                         seg.size() - internal::kSegmentHeaderBytes);
  for (int i = 0; i < 4; ++i) seg[20 + i] = static_cast<char>(crc >> (8 * i));
  return seg;
}

TEST(JobLog, Version2SegmentsStillDecodeButHoldNoRestart) {
  const auto segs = RunSegments(0, 6, 100, {{1, 3}});
  ASSERT_EQ(segs.size(), 1u);
  StatusOr<JobLog> back = DecodeJobLog(std::vector<std::string>{WithVersion(segs[0], 2)});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->steps.size(), 6u);
  // A restart mark is version 3's.
  JobLogWriter w(2);
  w.AddRestart({1, 0, 5, 0, 0});
  const std::string v3 = w.Flush();
  EXPECT_TRUE(DecodeJobLog(std::vector<std::string>{v3}).ok());
  back = DecodeJobLog(std::vector<std::string>{WithVersion(v3, 2)});
  EXPECT_EQ(back.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(back.status().message().find("unknown record type 3"), std::string::npos)
      << back.status().message();
  for (uint16_t v : {1, 4}) {
    back = DecodeJobLog(std::vector<std::string>{WithVersion(segs[0], v)});
    EXPECT_NE(back.status().message().find("version " + std::to_string(v) + " is not supported"),
              std::string::npos)
        << back.status().message();
  }
}

TEST(CutBytesStream, KeepsExactlyThePrefix) {
  const std::vector<std::string> parts = {"0123456789", "", "abcdef", "XYZ"};
  std::vector<std::string> segs;
  std::string all;
  for (const auto& p : parts) {
    segs.push_back(EncodeBytesSegment(p));
    all += p;
  }
  for (uint64_t n = 0; n <= all.size(); ++n) {
    SCOPED_TRACE("cut at " + std::to_string(n));
    StatusOr<StreamCut> cut = CutBytesStream(segs, n);
    ASSERT_TRUE(cut.ok()) << cut.status().ToString();
    EXPECT_LE(cut->tail.size(), 1u);
    std::vector<std::string> log = Apply(segs, *cut);
    StatusOr<std::string> bytes = DecodeBytesSegments(log);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(*bytes, all.substr(0, n));
    // The restored run's bytes follow seamlessly.
    log.push_back(EncodeBytesSegment("++"));
    EXPECT_EQ(*DecodeBytesSegments(log), all.substr(0, n) + "++");
  }
  StatusOr<StreamCut> cut = CutBytesStream(segs, 10);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->keep, 1u);  // at a segment's end: nothing re-encoded
  EXPECT_TRUE(cut->tail.empty());
  cut = CutBytesStream(segs, all.size() + 1);
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("holds 19 bytes, the cut is at 20"), std::string::npos)
      << cut.status().message();
  EXPECT_TRUE(CutBytesStream({}, 0).ok());
  EXPECT_EQ(CutBytesStream({}, 1).status().code(), StatusCode::kDataLoss);
}

TEST(CutTimelineStream, KeepsThePrefixAndPadsWhatWasLost) {
  const std::vector<uint32_t> a = {1000, 2000, 3000}, b = {4000, 5000};
  const std::vector<std::string> segs = {EncodeTimelineSegment(a), EncodeTimelineSegment(b)};
  const std::vector<uint32_t> all = {1000, 2000, 3000, 4000, 5000};
  for (uint64_t n = 0; n <= 8; ++n) {
    SCOPED_TRACE("cut at " + std::to_string(n));
    StatusOr<StreamCut> cut = CutTimelineStream(segs, n);
    ASSERT_TRUE(cut.ok()) << cut.status().ToString();
    StatusOr<std::vector<uint32_t>> back = DecodeTimelineSegments(Apply(segs, *cut));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    std::vector<uint32_t> want(all.begin(), all.begin() + std::min<uint64_t>(n, all.size()));
    want.resize(n, 0);  // entries the stream never got count as not blocked
    EXPECT_EQ(*back, want);
  }
}

}  // namespace
}  // namespace gos::replay
