// Bounds-checked byte encoding shared by the bootstrap protocol and the control messages
// of the primitives (docs/specs/). Little-endian, fixed-width integers, length-prefixed
// strings and byte blocks. Every Reader method fails cleanly on short or bad input: no
// decoder of network input may assert or read past the end.
#ifndef GOS_PRIM_WIRE_H_
#define GOS_PRIM_WIRE_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gos/status.h"

namespace gos::prim::wire {

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  void U8(uint8_t v) { out_->push_back(v); }
  void U16(uint16_t v) { Raw(&v, sizeof v); }
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void U64(uint64_t v) { Raw(&v, sizeof v); }
  void I32(int32_t v) { Raw(&v, sizeof v); }
  void I64(int64_t v) { Raw(&v, sizeof v); }
  // u16 length + bytes.
  void Str(std::string_view s);
  // u32 length + bytes.
  void Bytes(std::span<const uint8_t> b);
  void Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }

 private:
  std::vector<uint8_t>* out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  bool U8(uint8_t* v) { return Fixed(v); }
  bool U16(uint16_t* v) { return Fixed(v); }
  bool U32(uint32_t* v) { return Fixed(v); }
  bool U64(uint64_t* v) { return Fixed(v); }
  bool I32(int32_t* v) { return Fixed(v); }
  bool I64(int64_t* v) { return Fixed(v); }
  // Fails if the string is longer than max_len or the input is short.
  bool Str(std::string* s, size_t max_len);
  // A view into the input; fails if longer than max_len or the input is short.
  bool Bytes(std::span<const uint8_t>* b, size_t max_len);
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  template <typename T>
  bool Fixed(T* v) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

}  // namespace gos::prim::wire

#endif  // GOS_PRIM_WIRE_H_
