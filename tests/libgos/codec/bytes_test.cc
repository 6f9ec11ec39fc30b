// gos/codec/bytes.h: the exact bytes of each encoding (the formats built on it must not
// change), round trips, and short or malformed input.
#include "gos/codec/bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gos::codec {
namespace {

using Bytes = std::vector<uint8_t>;

TEST(Codec, FixedWidthIsLittleEndian) {
  Bytes out;
  Writer w(&out);
  w.U8(0x01);
  w.U16(0x0302);
  w.U32(0x07060504);
  w.U64(0x0f0e0d0c0b0a0908);
  w.I32(-2);
  w.I64(-3);
  const Bytes want = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
                      0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0xfe, 0xff, 0xff,
                      0xff, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(out, want);

  Reader r{std::span<const uint8_t>(out)};
  uint8_t a;
  uint16_t b;
  uint32_t c;
  uint64_t d;
  int32_t e;
  int64_t f;
  ASSERT_TRUE(r.U8(&a) && r.U16(&b) && r.U32(&c) && r.U64(&d) && r.I32(&e) && r.I64(&f));
  EXPECT_EQ(a, 0x01);
  EXPECT_EQ(b, 0x0302);
  EXPECT_EQ(c, 0x07060504u);
  EXPECT_EQ(d, 0x0f0e0d0c0b0a0908u);
  EXPECT_EQ(e, -2);
  EXPECT_EQ(f, -3);
  EXPECT_TRUE(r.done());
  EXPECT_FALSE(r.U8(&a));
}

TEST(Codec, ShortFixedReadFailsAndLeavesEverythingAlone) {
  const Bytes in = {1, 2, 3};
  Reader r{std::span<const uint8_t>(in)};
  uint32_t v = 42;
  EXPECT_FALSE(r.U32(&v));
  EXPECT_EQ(v, 42u);
  EXPECT_EQ(r.position(), 0u);
  uint16_t h = 0;
  EXPECT_TRUE(r.U16(&h));
  EXPECT_EQ(h, 0x0201);
  EXPECT_EQ(r.remaining(), 1u);
}

TEST(Codec, StringsHaveAU16LengthAndByteBlocksAU32One) {
  Bytes out;
  Writer w(&out);
  w.Str("ab");
  const Bytes blob = {9, 8, 7};
  w.Bytes(blob);
  EXPECT_EQ(out, (Bytes{2, 0, 'a', 'b', 3, 0, 0, 0, 9, 8, 7}));

  Reader r{std::span<const uint8_t>(out)};
  std::string s;
  std::span<const uint8_t> b;
  ASSERT_TRUE(r.Str(&s, 16));
  ASSERT_TRUE(r.Bytes(&b, 16));
  EXPECT_EQ(s, "ab");
  EXPECT_EQ(Bytes(b.begin(), b.end()), blob);
  EXPECT_TRUE(r.done());
}

TEST(Codec, AStringOver0xffffBytesIsCut) {
  Bytes out;
  Writer w(&out);
  w.Str(std::string(70000, 'x'));
  ASSERT_EQ(out.size(), 2u + 0xffff);
  EXPECT_EQ(out[0], 0xff);
  EXPECT_EQ(out[1], 0xff);
}

TEST(Codec, LengthsOverTheLimitOrTheInputFail) {
  Bytes out;
  Writer w(&out);
  w.Str("abcd");
  std::string s;
  Reader over{std::span<const uint8_t>(out)};
  EXPECT_FALSE(over.Str(&s, 3));
  Bytes cut(out.begin(), out.end() - 1);
  Reader shortr{std::span<const uint8_t>(cut)};
  EXPECT_FALSE(shortr.Str(&s, 16));
  EXPECT_EQ(shortr.position(), 2u);  // the length was read

  Bytes blk = {0xff, 0xff, 0xff, 0xff, 1};
  Reader r{std::span<const uint8_t>(blk)};
  std::span<const uint8_t> b;
  EXPECT_FALSE(r.Bytes(&b, std::numeric_limits<size_t>::max()));
}

TEST(Codec, VarintsAreLeb128AndSignedOnesZigzag) {
  std::string out;
  StringWriter w(&out);
  w.Var(0);
  w.Var(127);
  w.Var(128);
  w.Var(300);
  w.Signed(-1);
  w.Signed(1);
  w.Signed(-64);
  EXPECT_EQ(out, std::string("\x00\x7f\x80\x01\xac\x02\x01\x02\x7f", 9));

  std::string max;
  StringWriter(&max).Var(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(max, std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10));

  uint8_t raw[kMaxVarintBytes];
  EXPECT_EQ(PutVarint(raw, 300), 2u);
  EXPECT_EQ(raw[0], 0xac);
  EXPECT_EQ(raw[1], 0x02);
}

TEST(Codec, VarintsRoundTrip) {
  std::mt19937_64 rng(25);
  std::vector<uint64_t> u;
  std::vector<int64_t> s;
  for (int i = 0; i < 2000; ++i) {
    const int bits = static_cast<int>(rng() % 65);
    const uint64_t v = bits == 0 ? 0 : rng() >> (64 - bits);
    u.push_back(v);
    s.push_back(static_cast<int64_t>(v));
  }
  u.push_back(std::numeric_limits<uint64_t>::max());
  s.push_back(std::numeric_limits<int64_t>::min());
  s.push_back(std::numeric_limits<int64_t>::max());
  std::string out;
  StringWriter w(&out);
  for (uint64_t v : u) w.Var(v);
  for (int64_t v : s) w.Signed(v);
  Reader r{std::string_view(out)};
  for (uint64_t want : u) {
    uint64_t got = 0;
    ASSERT_TRUE(r.Var(&got));
    EXPECT_EQ(got, want);
  }
  for (int64_t want : s) {
    int64_t got = 0;
    ASSERT_TRUE(r.Signed(&got));
    EXPECT_EQ(got, want);
  }
  EXPECT_TRUE(r.done());
}

TEST(Codec, MalformedVarintsFail) {
  uint64_t v = 0;
  // Truncated: a continuation bit and then nothing.
  Reader cut{std::string_view("\x80", 1)};
  EXPECT_FALSE(cut.Var(&v));
  // Eleven bytes.
  Reader longer{std::string_view("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x81\x00", 11)};
  EXPECT_FALSE(longer.Var(&v));
  // The tenth byte holds more than the top bit of a u64.
  Reader over{std::string_view("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10)};
  EXPECT_FALSE(over.Var(&v));
  Reader empty{std::string_view()};
  EXPECT_FALSE(empty.Var(&v));
}

TEST(Codec, ViewsSkipsAndRawValues) {
  struct Pod {
    uint32_t a;
    uint16_t b;
    uint16_t c;
  };
  std::string out;
  StringWriter w(&out);
  w.Put(Pod{1, 2, 3});
  w.Raw("xyz", 3);
  ASSERT_EQ(out.size(), sizeof(Pod) + 3);
  Reader r{std::string_view(out)};
  Pod p{};
  ASSERT_TRUE(r.Get(&p));
  EXPECT_EQ(p.a, 1u);
  EXPECT_EQ(p.b, 2);
  EXPECT_EQ(p.c, 3);
  std::string_view v;
  EXPECT_FALSE(r.View(4, &v));
  ASSERT_TRUE(r.Skip(1));
  ASSERT_TRUE(r.View(2, &v));
  EXPECT_EQ(v, "yz");
  EXPECT_FALSE(r.Skip(1));
  EXPECT_TRUE(r.done());
}

}  // namespace
}  // namespace gos::codec
