#include "libgos/prim/messages.h"

#include <gtest/gtest.h>

#include <random>

#include "libgos/prim/bootstrap_proto.h"

namespace gos::prim {
namespace {

ControlMsg SamplePiece() {
  ControlMsg m;
  m.type = MsgType::kXferPiece;
  m.src = 2;
  m.origin = 0;
  m.seq = 77;
  m.tree_root = 0;
  m.fanout = 4;
  m.set = NodeSet{1, 2, 9};
  m.offset = 4096;
  m.total_len = 5;
  m.piece_len = 5;
  m.event = 3;
  m.is_inline = true;
  static const uint8_t kData[5] = {9, 8, 7, 6, 5};
  m.inline_data = kData;
  return m;
}

TEST(MessagesTest, XferPieceRoundTrip) {
  std::vector<uint8_t> enc;
  EncodeControl(SamplePiece(), &enc);
  auto d = DecodeControl(enc);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->type, MsgType::kXferPiece);
  EXPECT_EQ(d->src, 2u);
  EXPECT_EQ(d->seq, 77u);
  EXPECT_EQ(d->set, (NodeSet{1, 2, 9}));
  EXPECT_EQ(d->offset, 4096u);
  EXPECT_EQ(d->event, 3u);
  ASSERT_EQ(d->inline_data.size(), 5u);
  EXPECT_EQ(d->inline_data[4], 5);
}

TEST(MessagesTest, CawAndReplyRoundTrip) {
  ControlMsg q;
  q.type = MsgType::kCawQuery;
  q.src = 0;
  q.origin = 3;
  q.seq = 1;
  q.tree_root = 0;
  q.fanout = 2;
  q.set = NodeSet::All(4);
  q.var = 64;
  q.op = CompareOp::kLe;
  q.value = -7;
  q.write_var = 72;
  q.write_value = 1234567890123;
  std::vector<uint8_t> enc;
  EncodeControl(q, &enc);
  auto d = DecodeControl(enc);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->op, CompareOp::kLe);
  EXPECT_EQ(d->value, -7);
  EXPECT_EQ(d->write_value, 1234567890123);

  ControlMsg r;
  r.type = MsgType::kCawResult;
  r.origin = 3;
  r.seq = 1;
  r.code = StatusCode::kUnavailable;
  r.failed = 2;
  r.reason = "node 2 is down";
  EncodeControl(r, &enc);
  d = DecodeControl(enc);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ReplyStatus(), UnavailableError("node 2 is down"));
  EXPECT_EQ(d->failed, 2u);
}

TEST(MessagesTest, RejectsStructuralErrors) {
  std::vector<uint8_t> enc;
  EncodeControl(SamplePiece(), &enc);
  for (size_t cut = 0; cut < enc.size(); ++cut) {
    EXPECT_FALSE(DecodeControl(std::span(enc.data(), cut)).ok()) << "cut at " << cut;
  }
  auto bad = enc;
  bad[4] = 2;  // Version.
  EXPECT_NE(DecodeControl(bad).status().message().find("version"), std::string::npos);
  bad = enc;
  bad[5] = 0;  // Type.
  EXPECT_FALSE(DecodeControl(bad).ok());
  bad = enc;
  bad.push_back(0);  // Trailing byte (payload length no longer matches).
  EXPECT_FALSE(DecodeControl(bad).ok());
  ControlMsg m = SamplePiece();
  m.piece_off = 3;  // Piece beyond the transfer.
  EncodeControl(m, &enc);
  EXPECT_FALSE(DecodeControl(enc).ok());
  m = SamplePiece();
  m.fanout = 0;
  EncodeControl(m, &enc);
  EXPECT_FALSE(DecodeControl(enc).ok());
}

// Random mutations of valid messages never crash the decoder (run under ASan in CI's
// sanitizer build) and never yield a message whose views point outside the input.
TEST(MessagesTest, MutationFuzz) {
  std::mt19937 rng(12345);
  std::vector<uint8_t> base;
  EncodeControl(SamplePiece(), &base);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    auto b = base;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    if (rng() % 8 == 0) b.resize(rng() % (b.size() + 8));
    auto d = DecodeControl(b);
    if (d.ok()) {
      ++accepted;
      if (d->is_inline) {
        EXPECT_GE(d->inline_data.data(), b.data());
        EXPECT_LE(d->inline_data.data() + d->inline_data.size(), b.data() + b.size());
      }
    }
  }
  EXPECT_LT(accepted, 200000);
}

TEST(BootstrapProtoTest, FramesRoundTripAndRejectBadInput) {
  bootstrap::Join j;
  j.requested_id = 5;
  j.provider = "tcp;ofi_rxm";
  j.global_memory_bytes = 1 << 20;
  j.self.pid = 42;
  j.self.host = "h1";
  j.self.fabric_name = {1, 2, 3};
  auto frame = bootstrap::EncodeFrame(bootstrap::FrameType::kJoin, bootstrap::EncodeJoin(j));
  bootstrap::FrameBuffer fb;
  fb.Append(frame.data(), 3);
  bootstrap::Frame f;
  EXPECT_FALSE(*fb.Next(&f));  // Incomplete.
  fb.Append(frame.data() + 3, frame.size() - 3);
  ASSERT_TRUE(*fb.Next(&f));
  auto back = bootstrap::DecodeJoin(f.payload);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->self.host, "h1");
  EXPECT_EQ(back->self.fabric_name, (std::vector<uint8_t>{1, 2, 3}));

  bootstrap::FrameBuffer huge;
  uint8_t len[4] = {0xff, 0xff, 0xff, 0x7f};
  huge.Append(len, 4);
  EXPECT_FALSE(huge.Next(&f).ok());

  std::mt19937 rng(1);
  for (int i = 0; i < 50000; ++i) {
    auto p = bootstrap::EncodeJoin(j);
    p[rng() % p.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) p.resize(rng() % p.size());
    (void)bootstrap::DecodeJoin(p);
    (void)bootstrap::DecodeWelcome(p);
    (void)bootstrap::DecodeDown(p);
  }
}

}  // namespace
}  // namespace gos::prim
