// Unit tests of the global OS's wire layer: strobe and staging codecs (with the HMAC), channel
// frames (authentication, sequence, fd passing), client/agent message codecs under mutation,
// the cluster key file, and the flag parser.
#include "gos/os/messages.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gos/os/auth.h"
#include "gos/os/channel.h"
#include "gos/os/flags.h"
#include "gos/os/program.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace gos::os {
namespace {

std::vector<uint8_t> Key(uint8_t seed) { return std::vector<uint8_t>(32, seed); }

Strobe SampleStrobe() {
  Strobe s;
  s.strobe = 42;
  s.row = 1;
  StrobeCommand launch;
  launch.type = CommandType::kLaunch;
  launch.origin = 40;  // sent again: strobe 40 was not confirmed everywhere
  launch.job = 7;
  launch.launch = {7,
                   3,
                   1,
                   1000,
                   1000,
                   4,
                   kLaunchBcs,
                   {{1, 0, 2}, {2, 2, 2}},
                   "hello",
                   {"./hello", "x"},
                   {"A=1", "PATH=/bin"},
                   "/tmp"};
  StrobeCommand sig;
  sig.type = CommandType::kSignal;
  sig.origin = 42;
  sig.job = 9;
  sig.signal = 2;
  s.commands = {launch, sig};
  return s;
}

TEST(StrobeCodec, RoundTrip) {
  auto bytes = EncodeStrobe(SampleStrobe(), Key(1));
  auto s = DecodeStrobe(bytes, Key(1));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->strobe, 42u);
  EXPECT_EQ(s->row, 1u);
  ASSERT_EQ(s->commands.size(), 2u);
  const LaunchCommand& l = s->commands[0].launch;
  EXPECT_EQ(l.job, 7u);
  EXPECT_EQ(l.slot, 3u);
  EXPECT_EQ(l.uid, 1000u);
  EXPECT_EQ(l.flags, kLaunchBcs);
  ASSERT_EQ(l.runs.size(), 2u);
  EXPECT_EQ(l.runs[1].node, 2u);
  EXPECT_EQ(l.runs[1].first, 2u);
  EXPECT_EQ(l.argv, (std::vector<std::string>{"./hello", "x"}));
  EXPECT_EQ(l.env[1], "PATH=/bin");
  EXPECT_EQ(l.cwd, "/tmp");
  EXPECT_EQ(s->commands[0].origin, 40u);
  EXPECT_EQ(s->commands[1].origin, 42u);
  EXPECT_EQ(s->commands[1].type, CommandType::kSignal);
  EXPECT_EQ(s->commands[1].signal, 2);
}

TEST(StrobeCodec, WrongKeyOrTamperingIsRejected) {
  auto bytes = EncodeStrobe(SampleStrobe(), Key(1));
  auto s = DecodeStrobe(bytes, Key(2));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kPermissionDenied);
  for (size_t i = 8; i < bytes.size(); i += 7) {
    auto copy = bytes;
    copy[i] ^= 0x40;
    EXPECT_FALSE(DecodeStrobe(copy, Key(1)).ok()) << "flip at " << i;
  }
}

TEST(StrobeCodec, MutationsNeverCrash) {
  auto bytes = EncodeStrobe(SampleStrobe(), Key(1));
  std::mt19937 rng(7);
  for (size_t n = 0; n <= bytes.size(); ++n) {
    EXPECT_FALSE(DecodeStrobe(std::span(bytes).first(n), Key(1)).ok() && n < bytes.size());
  }
  for (int i = 0; i < 5000; ++i) {
    auto copy = bytes;
    for (int k = 0; k < 4; ++k) copy[rng() % copy.size()] = static_cast<uint8_t>(rng());
    (void)DecodeStrobe(copy, Key(1));
    std::vector<uint8_t> junk(rng() % 256);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    (void)DecodeStrobe(junk, Key(1));
    (void)DecodeStageHeader(junk, Key(1));
  }
}

CkptBatch SampleBatch(BatchKind kind, const std::vector<std::vector<uint8_t>>& frames) {
  CkptBatch b;
  b.kind = kind;
  b.node = 3;
  b.number = 17;
  b.job = 12;
  b.epoch = 4;
  if (kind == BatchKind::kRestore) {
    b.rank = 5;
    b.attempt = 99;
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    CkptBatchChunk c;
    c.hash.fill(static_cast<uint8_t>(i + 1));
    c.raw_len = static_cast<uint32_t>(1000 + i);
    c.data = frames[i];
    if (kind == BatchKind::kRestore) {
      c.file = i == 0 ? "pages-1.img" : "job/prog";
      c.mode = 0640;
      c.offset = 4096 * i;
    }
    b.chunks.push_back(c);
  }
  return b;
}

// Both kinds of batch, through one codec.
class CkptBatchCodec : public ::testing::TestWithParam<BatchKind> {};

TEST_P(CkptBatchCodec, RoundTripInASlotWithRoomToSpare) {
  const BatchKind kind = GetParam();
  std::vector<std::vector<uint8_t>> frames = {{1, 2, 3}, {}, std::vector<uint8_t>(70000, 9)};
  const CkptBatch sample = SampleBatch(kind, frames);
  auto bytes = EncodeCkptBatch(sample, Key(1));
  EXPECT_EQ(bytes.size(), CkptBatchBytes(sample));
  CkptBatch empty = sample;
  empty.chunks.clear();
  size_t sum = CkptBatchBytes(empty);
  for (const auto& c : sample.chunks) sum += CkptBatchChunkBytes(kind, c);
  EXPECT_EQ(sum, bytes.size()) << "what Add counts a chunk by";
  bytes.resize(bytes.size() + 4096, 0xee);  // the rest of the slot: last batch's bytes
  auto b = DecodeCkptBatch(kind, bytes, Key(1));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->kind, kind);
  EXPECT_EQ(b->node, 3u);
  EXPECT_EQ(b->number, 17u);
  EXPECT_EQ(b->job, 12u);
  EXPECT_EQ(b->epoch, 4u);
  EXPECT_EQ(b->rank, sample.rank);
  EXPECT_EQ(b->attempt, sample.attempt);
  ASSERT_EQ(b->chunks.size(), 3u);
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(b->chunks[i].hash[0], i + 1);
    EXPECT_EQ(b->chunks[i].raw_len, 1000 + i);
    EXPECT_EQ(b->chunks[i].file, sample.chunks[i].file);
    EXPECT_EQ(b->chunks[i].mode, sample.chunks[i].mode);
    EXPECT_EQ(b->chunks[i].offset, sample.chunks[i].offset);
    EXPECT_EQ(std::vector<uint8_t>(b->chunks[i].data.begin(), b->chunks[i].data.end()), frames[i]);
    // A view into the slot, not a copy.
    EXPECT_GE(b->chunks[i].data.data(), bytes.data());
    EXPECT_LE(b->chunks[i].data.data() + b->chunks[i].data.size(), bytes.data() + bytes.size());
  }
  // Neither kind is ever taken for the other.
  const BatchKind other =
      kind == BatchKind::kRestore ? BatchKind::kCheckpoint : BatchKind::kRestore;
  EXPECT_FALSE(DecodeCkptBatch(other, bytes, Key(1)).ok());
}

TEST_P(CkptBatchCodec, WrongKeyTamperingAndTruncationAreRejected) {
  const BatchKind kind = GetParam();
  std::vector<std::vector<uint8_t>> frames = {{1, 2, 3}, {4, 5}};
  auto bytes = EncodeCkptBatch(SampleBatch(kind, frames), Key(1));
  auto wrong = DecodeCkptBatch(kind, bytes, Key(2));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied);
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto copy = bytes;
    copy[i] ^= 0x10;
    EXPECT_FALSE(DecodeCkptBatch(kind, copy, Key(1)).ok()) << "flip at " << i;
  }
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeCkptBatch(kind, std::span(bytes).first(n), Key(1)).ok()) << n << " bytes";
  }
}

// A sender that holds the key but sends garbage (a bug, not an attacker): mutations of the
// body, sealed again, are refused or decode to views inside the input; never a crash.
TEST_P(CkptBatchCodec, SealedMutationsStayInBounds) {
  const BatchKind kind = GetParam();
  std::vector<std::vector<uint8_t>> frames = {{1, 2, 3}, {4, 5}, std::vector<uint8_t>(300, 7)};
  const auto base = EncodeCkptBatch(SampleBatch(kind, frames), Key(1));
  const size_t sealed = base.size() - kMacBytes;
  std::mt19937 rng(11);
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    auto copy = base;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
      copy[8 + rng() % (sealed - 8)] = static_cast<uint8_t>(rng());
    }
    Mac mac = Hmac(Key(1), {std::span<const uint8_t>(copy).first(sealed)});
    std::copy(mac.begin(), mac.end(), copy.begin() + static_cast<std::ptrdiff_t>(sealed));
    auto b = DecodeCkptBatch(kind, copy, Key(1));
    if (!b.ok()) {
      ++refused;
      continue;
    }
    for (const auto& c : b->chunks) {
      EXPECT_GE(c.data.data(), copy.data());
      EXPECT_LE(c.data.data() + c.data.size(), copy.data() + copy.size());
      if (kind == BatchKind::kRestore) {
        EXPECT_FALSE(c.file.empty());
        EXPECT_NE(c.file.front(), '/');
        const std::string parts = "/" + c.file + "/";
        EXPECT_EQ(parts.find("/../"), std::string::npos) << c.file;
        EXPECT_EQ(parts.find("//"), std::string::npos) << c.file;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

INSTANTIATE_TEST_SUITE_P(BothKinds, CkptBatchCodec,
                         ::testing::Values(BatchKind::kCheckpoint, BatchKind::kRestore),
                         [](const ::testing::TestParamInfo<BatchKind>& p) {
                           return p.param == BatchKind::kRestore ? "Restore" : "Checkpoint";
                         });

// A restore chunk names a file in the rank's image dir: nothing that leaves it, sealed or not.
TEST(RestoreBatchCodec, BadFileNamesAndOffsetsAreRefused) {
  std::vector<std::vector<uint8_t>> frames = {{1, 2, 3}};
  for (const char* bad : {"../etc/passwd", "/etc/passwd", "a/../../b", "a//b", ".", ""}) {
    CkptBatch b = SampleBatch(BatchKind::kRestore, frames);
    b.chunks[0].file = bad;
    auto d = DecodeCkptBatch(BatchKind::kRestore, EncodeCkptBatch(b, Key(1)), Key(1));
    EXPECT_FALSE(d.ok()) << bad;
  }
  CkptBatch far = SampleBatch(BatchKind::kRestore, frames);
  far.chunks[0].offset = ~uint64_t{0} - 10;  // offset + length would wrap
  EXPECT_FALSE(DecodeCkptBatch(BatchKind::kRestore, EncodeCkptBatch(far, Key(1)), Key(1)).ok());
  CkptBatch fine = SampleBatch(BatchKind::kRestore, frames);
  fine.chunks[0].file = "sub/dir/pages-3.img";
  EXPECT_TRUE(DecodeCkptBatch(BatchKind::kRestore, EncodeCkptBatch(fine, Key(1)), Key(1)).ok());
}

TEST(StageCodec, RoundTripAndBadNames) {
  StageHeader h{5, 7, "hello", 0755, 100, 0, 100};
  auto back = DecodeStageHeader(EncodeStageHeader(h, Key(3)), Key(3));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, 5u);
  EXPECT_EQ(back->file, "hello");
  // The data's HMAC travels sealed in the header.
  h.data_mac[0] = 0xab;
  h.data_mac[31] = 0xcd;
  back = DecodeStageHeader(EncodeStageHeader(h, Key(3)), Key(3));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->data_mac, h.data_mac);
  for (const char* bad : {"../etc/passwd", "a/b", "..", ""}) {
    h.file = bad;
    EXPECT_FALSE(DecodeStageHeader(EncodeStageHeader(h, Key(3)), Key(3)).ok()) << bad;
  }
}

TEST(MessageCodecs, RoundTripAndMutation) {
  SubmitRequest req;
  req.argv = {"./a", "b"};
  req.env = {"X=1"};
  req.cwd = "/w";
  req.ntasks = 8;
  req.nodes = 2;
  req.time_limit_ms = 5000;
  req.files = {{"a", 0755, 10}, {"data", 0644, 20}};
  req.cpu_bind = false;
  req.exclude = {2, 5};
  req.nodelist = {1, 2, 3};
  auto sb = Encode(req);
  auto back = DecodeSubmit(sb);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ntasks, 8u);
  EXPECT_EQ(back->files[1].name, "data");
  EXPECT_FALSE(back->cpu_bind);
  EXPECT_EQ(back->exclude, (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(back->nodelist, (std::vector<uint32_t>{1, 2, 3}));
  PsReply ps;
  ps.running_row = 1;
  ps.jobs.push_back({3, "root", "running", 4, {1, 2}, 1000, 0, -1, "a b", ""});
  ps.nodes.push_back({1, "vm", true, "", 2, 1 << 30, {3}, 2});
  auto pb = Encode(ps);
  auto pback = DecodePsReply(pb);
  ASSERT_TRUE(pback.ok());
  EXPECT_EQ(pback->jobs[0].nodes, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(pback->nodes[0].jobs, (std::vector<uint64_t>{3}));
  JobExit e{9, 3, 5, 2, "rank 5 exited", 1, 2, 3, 4, 5};
  auto eb = DecodeJobExit(Encode(e));
  ASSERT_TRUE(eb.ok());
  EXPECT_EQ(eb->failed_rank, 5);
  std::mt19937 rng(11);
  for (const auto* base : {&sb, &pb}) {
    for (size_t n = 0; n < base->size(); ++n) {
      auto prefix = std::span(*base).first(n);
      EXPECT_FALSE(DecodeSubmit(prefix).ok() && base == &sb);
      EXPECT_FALSE(DecodePsReply(prefix).ok() && base == &pb);
    }
    for (int i = 0; i < 3000; ++i) {
      auto copy = *base;
      copy[rng() % copy.size()] = static_cast<uint8_t>(rng());
      (void)DecodeSubmit(copy);
      (void)DecodePsReply(copy);
      (void)DecodeHello(copy);
      (void)DecodeOutput(copy);
    }
  }
}

TEST(MessageCodecs, RestoreRankEndRoundTripsAndRefusesBadNames) {
  RestoreRankEnd end;
  end.job = 4;
  end.epoch = 2;
  end.rank = 3;
  end.attempt = 1700000000123;
  end.files = {"pages-1.img", "job/prog", "gos-channel"};
  const auto bytes = Encode(end);
  auto back = DecodeRestoreRankEnd(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->attempt, end.attempt);
  EXPECT_EQ(back->files, end.files);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeRestoreRankEnd(std::span(bytes).first(n)).ok()) << n << " bytes";
  }
  end.files.push_back("../../etc/passwd");
  EXPECT_FALSE(DecodeRestoreRankEnd(Encode(end)).ok());
}

TEST(MessageCodecs, ReplayStoppedRoundTripsEveryKindAndRefusesOthers) {
  ReplayStopped m;
  m.job = 12;
  m.strobe = 167;
  m.rank = 2;
  m.text = "rank 2 on node 2 (n2) crashed: SIGSEGV\n  #0  crash_segv () at crash_at.c:19";
  m.ranks = {{2, 2, 16882, "n2"}};
  for (ReplayStopKind kind :
       {ReplayStopKind::kDivergence, ReplayStopKind::kStopAt, ReplayStopKind::kLogEnd,
        ReplayStopKind::kAborted, ReplayStopKind::kCrashed}) {
    m.kind = kind;
    auto back = DecodeReplayStopped(Encode(m));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->kind, kind);
    EXPECT_EQ(back->text, m.text);
    ASSERT_EQ(back->ranks.size(), 1u);
    EXPECT_EQ(back->ranks[0].pid, 16882);
  }
  auto bytes = Encode(m);
  bytes[8] = 6;  // the kind, after the u64 job: no such kind
  EXPECT_FALSE(DecodeReplayStopped(bytes).ok());
}

TEST(MessageCodecs, RankTableRoundTripsAndRefusesTruncation) {
  RankTable t;
  t.job = 5;
  t.ranks = {{0, 1, 6324, "vm", "/state/nodes/n1/jobs/5/app"}, {1, 2, 0, "vm", ""}};
  const auto bytes = Encode(t);
  auto back = DecodeRankTable(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->job, 5u);
  ASSERT_EQ(back->ranks.size(), 2u);
  EXPECT_EQ(back->ranks[0].pid, 6324);
  EXPECT_EQ(back->ranks[0].exe, "/state/nodes/n1/jobs/5/app");
  EXPECT_EQ(back->ranks[1].node, 2u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeRankTable(std::span(bytes).first(n)).ok()) << n << " bytes";
  }
}

TEST(MessageCodecs, RestartRequestRoundTripsAndReadsOlderClients) {
  RestartRequest req;
  req.job = 7;
  req.epoch = 3;
  req.exclude = {2};
  req.checkpoint_ms = 1500;
  req.from_store = true;
  req.keep = 4;
  const std::vector<uint8_t> enc = Encode(req);
  auto back = DecodeRestart(enc);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->job, 7u);
  EXPECT_EQ(back->epoch, 3u);
  EXPECT_EQ(back->exclude, std::vector<uint32_t>{2});
  EXPECT_EQ(back->checkpoint_ms, 1500);
  EXPECT_TRUE(back->from_store);
  EXPECT_EQ(back->keep, 4u);
  req.checkpoint_ms = RestartRequest::kNoCheckpoint;
  back = DecodeRestart(Encode(req));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->checkpoint_ms, RestartRequest::kNoCheckpoint);
  // An older client's request has no keep: the job's own.
  const std::span<const uint8_t> old = std::span(enc).first(enc.size() - 4);
  back = DecodeRestart(old);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->keep, 0u);
  EXPECT_EQ(back->checkpoint_ms, 1500);
  // Any other length, and an interval below kNoCheckpoint, is refused.
  for (size_t n = 0; n < enc.size(); ++n) {
    if (n != old.size()) {
      EXPECT_FALSE(DecodeRestart(std::span(enc).first(n)).ok()) << n;
    }
  }
  std::vector<uint8_t> longer = enc;
  longer.push_back(0);
  EXPECT_FALSE(DecodeRestart(longer).ok());
  req.checkpoint_ms = -2;
  EXPECT_FALSE(DecodeRestart(Encode(req)).ok());
  std::mt19937 rng(12);
  for (int i = 0; i < 3000; ++i) {
    auto copy = enc;
    copy[rng() % copy.size()] = static_cast<uint8_t>(rng());
    auto m = DecodeRestart(copy);
    if (m.ok()) {
      EXPECT_GE(m->checkpoint_ms, RestartRequest::kNoCheckpoint);
    }
  }
}

struct Pair {
  std::unique_ptr<Channel> client, server;
};

Pair MakePair(std::vector<uint8_t> client_key, std::vector<uint8_t> server_key) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  return {std::make_unique<Channel>(sv[0], client_key, false),
          std::make_unique<Channel>(sv[1], server_key, true)};
}

auto Soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(5); }

TEST(ChannelTest, AuthenticatedFramesRoundTrip) {
  Pair p = MakePair(Key(5), Key(5));
  ASSERT_TRUE(p.client->Send(Frame::kHello, EncodeText("one")).ok());
  ASSERT_TRUE(p.client->Send(Frame::kOutputDone, EncodeU64(77)).ok());
  auto f1 = p.server->Receive(Soon());
  ASSERT_TRUE(f1.ok()) << f1.status().ToString();
  EXPECT_EQ(f1->type, Frame::kHello);
  EXPECT_EQ(*DecodeText(f1->payload), "one");
  auto f2 = p.server->Receive(Soon());
  ASSERT_TRUE(f2.ok());
  EXPECT_EQ(*DecodeU64(f2->payload), 77u);
  // And back.
  ASSERT_TRUE(p.server->Send(Frame::kWelcome, EncodeU64(1)).ok());
  EXPECT_TRUE(p.client->Receive(Soon()).ok());
}

TEST(ChannelTest, WrongKeyIsRefused) {
  Pair p = MakePair(Key(5), Key(6));
  ASSERT_TRUE(p.client->Send(Frame::kHello, EncodeText("x")).ok());
  auto f = p.server->Receive(Soon());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(f.status().message().find("cluster key"), std::string::npos);
}

TEST(ChannelTest, ReplayedOrReflectedFrameIsRefused) {
  // Capture a frame's bytes by sending into a raw socketpair.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Channel sender(sv[0], Key(5), false);
  ASSERT_TRUE(sender.Send(Frame::kHello, EncodeText("x")).ok());
  uint8_t buf[512];
  ssize_t n = ::read(sv[1], buf, sizeof buf);
  ASSERT_GT(n, 0);
  ::close(sv[1]);
  // Replay: the same frame twice.
  int rv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rv), 0);
  Channel receiver(rv[1], Key(5), true);
  ASSERT_EQ(::write(rv[0], buf, n), n);
  ASSERT_EQ(::write(rv[0], buf, n), n);
  EXPECT_TRUE(receiver.Receive(Soon()).ok());
  auto again = receiver.Receive(Soon());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kPermissionDenied);
  ::close(rv[0]);
  // Reflection: a client's frame fed back to a client is refused (direction is MAC'd).
  int fv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fv), 0);
  Channel other_client(fv[1], Key(5), false);
  ASSERT_EQ(::write(fv[0], buf, n), n);
  EXPECT_FALSE(other_client.Receive(Soon()).ok());
  ::close(fv[0]);
}

TEST(ChannelTest, OversizedAndGarbageFramesAreErrors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Channel receiver(sv[1], {}, true);
  uint32_t huge = 0x7fffffff;
  ASSERT_EQ(::write(sv[0], &huge, 4), 4);
  auto f = receiver.Receive(Soon());
  EXPECT_FALSE(f.ok());
  ::close(sv[0]);
}

TEST(ChannelTest, PassesFileDescriptorsAndPeerCredentials) {
  Pair p = MakePair({}, {});
  char path[] = "/tmp/gos-os-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  int fds[] = {fd};
  ASSERT_TRUE(p.client->Send(Frame::kSubmit, EncodeText("f"), fds).ok());
  ::close(fd);
  auto f = p.server->Receive(Soon());
  ASSERT_TRUE(f.ok());
  auto got = p.server->TakeFds(1);
  ASSERT_EQ(got.size(), 1u);
  char buf[4] = {};
  EXPECT_EQ(::pread(got[0], buf, 3, 0), 3);
  EXPECT_STREQ(buf, "abc");
  ::close(got[0]);
  ::unlink(path);
  auto creds = p.server->Creds();
  ASSERT_TRUE(creds.ok());
  EXPECT_EQ(creds->uid, getuid());
  EXPECT_EQ(creds->pid, getpid());
}

// RFC 4231's HMAC-SHA256 test cases 1 and 2, in alternation and from several threads: each
// thread keeps a context keyed once, which must follow the key it is given.
TEST(HmacTest, KnownAnswersWithAlternatingKeysAndThreads) {
  auto bytes = [](std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  auto hex = [](const Mac& m) {
    std::string out;
    char b[3];
    for (uint8_t v : m) {
      std::snprintf(b, sizeof b, "%02x", v);
      out += b;
    }
    return out;
  };
  const std::vector<uint8_t> key1(20, 0x0b), data1 = bytes("Hi There");
  const std::vector<uint8_t> key2 = bytes("Jefe"), data2 = bytes("what do ya want for nothing?");
  const std::string want1 = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7";
  const std::string want2 = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
  auto check = [&] {
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(hex(Hmac(key1, {data1})), want1);
      EXPECT_EQ(hex(Hmac(key1, {data1})), want1);
      EXPECT_EQ(hex(Hmac(key2, {data2})), want2);
      // The same bytes in several parts.
      std::span<const uint8_t> d2(data2);
      EXPECT_EQ(hex(Hmac(key2, {d2.first(4), d2.subspan(4, 10), d2.subspan(14)})), want2);
    }
  };
  check();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(check);
  for (auto& t : threads) t.join();
}

TEST(ClusterKey, CreatedPrivateAndRefusedWhenReadable) {
  const gos::testing::TempDir dir("gos-key");
  std::string path = dir.Sub("cluster.key");
  auto key = LoadOrCreateClusterKey(path);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->size(), 32u);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = LoadOrCreateClusterKey(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *key);
  chmod(path.c_str(), 0644);
  auto refused = LoadClusterKey(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
}

TEST(FlagsTest, FormatsDurationsInTheLargestWholeUnit) {
  EXPECT_EQ(FormatDurationMs(250), "250ms");
  EXPECT_EQ(FormatDurationMs(1500), "1500ms");
  EXPECT_EQ(FormatDurationMs(1000), "1s");
  EXPECT_EQ(FormatDurationMs(90'000), "90s");
  EXPECT_EQ(FormatDurationMs(300'000), "5m");
  EXPECT_EQ(FormatDurationMs(7'200'000), "2h");
  EXPECT_EQ(FormatDurationMs(0), "0ms");
  for (int64_t ms : {250, 1500, 90'000, 7'200'000}) {  // ParseDuration reads it back
    std::chrono::microseconds us;
    ASSERT_TRUE(ParseDuration(FormatDurationMs(ms), &us));
    EXPECT_EQ(us.count(), ms * 1000);
  }
}

TEST(FlagsTest, ParsesDurationsAliasesAndPositionals) {
  std::chrono::microseconds us;
  ASSERT_TRUE(ParseDuration("500us", &us));
  EXPECT_EQ(us.count(), 500);
  ASSERT_TRUE(ParseDuration("1.5s", &us));
  EXPECT_EQ(us.count(), 1500000);
  ASSERT_TRUE(ParseDuration("10", &us, 1000));
  EXPECT_EQ(us.count(), 10000);
  EXPECT_FALSE(ParseDuration("10parsecs", &us));
  const char* argv[] = {"gos-run", "-n", "8", "--time=2m", "--checkpoint", "./app", "-n", "3"};
  uint32_t n = 0;
  std::chrono::milliseconds t{0};
  bool ck = false;
  std::string ckv;
  Flags f(8, const_cast<char**>(argv), "usage", true);
  f.U32("-n|--ntasks", &n);
  f.Duration("-t|--time", &t);
  f.OptionalValue("--checkpoint", &ck, &ckv);
  ASSERT_EQ(f.Parse(), -1);
  EXPECT_EQ(n, 8u);
  EXPECT_EQ(t.count(), 120000);
  EXPECT_TRUE(ck);
  EXPECT_EQ(f.positional(), (std::vector<std::string>{"./app", "-n", "3"}));
  const char* bad[] = {"gos-run", "--bogus"};
  Flags g(2, const_cast<char**>(bad), "usage", true);
  EXPECT_EQ(g.Parse(), 2);
}

// A minimum applies to given values only: the default may lie below it ("not given").
TEST(FlagsTest, U32MinimumRefusesSmallerValuesOnly) {
  uint32_t keep = 0;
  const char* none[] = {"gos-run", "./app"};
  Flags a(2, const_cast<char**>(none), "usage", true);
  a.U32("--keep", &keep, 1);
  EXPECT_EQ(a.Parse(), -1);
  EXPECT_EQ(keep, 0u);
  const char* one[] = {"gos-run", "--keep=1", "./app"};
  Flags b(3, const_cast<char**>(one), "usage", true);
  b.U32("--keep", &keep, 1);
  EXPECT_EQ(b.Parse(), -1);
  EXPECT_EQ(keep, 1u);
  const char* zero[] = {"gos-run", "--keep", "0", "./app"};
  Flags c(4, const_cast<char**>(zero), "usage", true);
  keep = 7;
  c.U32("--keep", &keep, 1);
  EXPECT_EQ(c.Parse(), 2);
  EXPECT_EQ(keep, 7u);
}

TEST(ProgramUsesBcs, FindsTheSectionOnlyInProgramsThatHaveIt) {
  // This test binary has no .gos_bcs section; a copy with one added by objcopy has.
  int self = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(self, 0);
  EXPECT_FALSE(ProgramUsesBcs(self));
  ::close(self);
  const gos::testing::TempDir tmp("gos-elf");
  const std::string dir = tmp.path();
  std::string marked = std::string(dir) + "/marked";
  std::string cmd = "printf 'gos bcs v1' > " + std::string(dir) +
                    "/note && objcopy --add-section .gos_bcs=" + std::string(dir) +
                    "/note /proc/self/exe " + marked;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  int fd = ::open(marked.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(ProgramUsesBcs(fd));
  ::close(fd);
  // Not ELF at all, and an empty file.
  int text = ::open((std::string(dir) + "/note").c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_FALSE(ProgramUsesBcs(text));
  ::close(text);
}

}  // namespace
}  // namespace gos::os
