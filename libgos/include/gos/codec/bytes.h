// Bounds-checked byte encoding shared by every binary format of gos: the primitives' control
// messages and bootstrap protocol, the storage records and manifests, the matcher's
// checkpoint, the replay log's columns and the CRIU image fields the chunker reads.
//
// Little-endian fixed-width integers (the host order: gos runs on little-endian machines
// only), LEB128 varints (zigzag for signed values), strings with a u16 length and byte blocks
// with a u32 length. Every Reader method fails cleanly on short or bad input and returns
// false: no decoder of network or disk input may assert or read past the end.
//
// Header-only and standard library only, so that the rank library (gos_rank, linked into
// users' programs) may use it too.
#ifndef GOS_CODEC_BYTES_H_
#define GOS_CODEC_BYTES_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gos::codec {

static_assert(std::endian::native == std::endian::little, "the encodings are little-endian");

// Longest LEB128 encoding of a u64.
inline constexpr size_t kMaxVarintBytes = 10;

// Writes v as a LEB128 varint at p (room for kMaxVarintBytes); returns the bytes written.
inline size_t PutVarint(uint8_t* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<uint8_t>(v);
  return n;
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1)); }

// Appends to a byte buffer it does not own: std::vector<uint8_t> or std::string.
template <typename Buffer>
class BasicWriter {
 public:
  explicit BasicWriter(Buffer* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(static_cast<typename Buffer::value_type>(v)); }
  void U16(uint16_t v) { Raw(&v, sizeof v); }
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void U64(uint64_t v) { Raw(&v, sizeof v); }
  void I32(int32_t v) { Raw(&v, sizeof v); }
  void I64(int64_t v) { Raw(&v, sizeof v); }
  // Any trivially copyable value, verbatim (its in-memory bytes).
  template <typename T>
  void Put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Raw(&v, sizeof v);
  }
  // u16 length + bytes; a longer string is cut to its first 0xffff bytes.
  void Str(std::string_view s) {
    const uint16_t n = s.size() > 0xffff ? 0xffff : static_cast<uint16_t>(s.size());
    U16(n);
    Raw(s.data(), n);
  }
  // u32 length + bytes.
  void Bytes(std::span<const uint8_t> b) {
    U32(static_cast<uint32_t>(b.size()));
    Raw(b.data(), b.size());
  }
  // LEB128 varint; zigzag + varint for signed values.
  void Var(uint64_t v) {
    uint8_t buf[kMaxVarintBytes];
    Raw(buf, PutVarint(buf, v));
  }
  void Signed(int64_t v) { Var(ZigZag(v)); }
  // Bytes as they are, no length.
  void Raw(const void* p, size_t n) {
    const auto* b = static_cast<const typename Buffer::value_type*>(p);
    out_->insert(out_->end(), b, b + n);
  }

 private:
  Buffer* out_;
};

using Writer = BasicWriter<std::vector<uint8_t>>;
using StringWriter = BasicWriter<std::string>;

// Reads what a Writer wrote, from a view of bytes it does not own. A getter that fails
// returns false and leaves its output alone; fixed-width reads also leave the position alone
// (Str and Bytes have consumed their length by then, Var the bytes it looked at).
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  explicit Reader(std::string_view in)
      : in_(reinterpret_cast<const uint8_t*>(in.data()), in.size()) {}

  bool U8(uint8_t* v) { return Get(v); }
  bool U16(uint16_t* v) { return Get(v); }
  bool U32(uint32_t* v) { return Get(v); }
  bool U64(uint64_t* v) { return Get(v); }
  bool I32(int32_t* v) { return Get(v); }
  bool I64(int64_t* v) { return Get(v); }
  // Any trivially copyable value, verbatim (as BasicWriter::Put wrote it).
  template <typename T>
  bool Get(T* v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return Raw(v, sizeof(T));
  }
  // Copies the next n bytes to out.
  bool Raw(void* out, size_t n) {
    if (remaining() < n) return false;
    std::memcpy(out, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  // Fails if the string is longer than max_len or the input is short.
  bool Str(std::string* s, size_t max_len) {
    uint16_t n;
    if (!U16(&n) || n > max_len || remaining() < n) return false;
    s->assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  // A view into the input; fails if longer than max_len or the input is short.
  bool Bytes(std::span<const uint8_t>* b, size_t max_len) {
    uint32_t n;
    if (!U32(&n) || n > max_len || remaining() < n) return false;
    *b = in_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  // A view of the next n bytes (no length prefix).
  bool View(size_t n, std::span<const uint8_t>* b) {
    if (remaining() < n) return false;
    *b = in_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  bool View(size_t n, std::string_view* b) {
    std::span<const uint8_t> s;
    if (!View(n, &s)) return false;
    *b = std::string_view(reinterpret_cast<const char*>(s.data()), s.size());
    return true;
  }
  bool Skip(size_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }
  // LEB128 varint of at most kMaxVarintBytes; the tenth byte may hold only the top bit.
  bool Var(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= in_.size()) return false;
      const uint8_t b = in_[pos_++];
      if (shift == 63 && b > 1) return false;
      r |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  bool Signed(int64_t* v) {
    uint64_t u;
    if (!Var(&u)) return false;
    *v = UnZigZag(u);
    return true;
  }

  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

}  // namespace gos::codec

#endif  // GOS_CODEC_BYTES_H_
