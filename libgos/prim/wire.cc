#include "libgos/prim/wire.h"

namespace gos::prim::wire {

void Writer::Str(std::string_view s) {
  uint16_t n = s.size() > 0xffff ? 0xffff : static_cast<uint16_t>(s.size());
  U16(n);
  Raw(s.data(), n);
}

void Writer::Bytes(std::span<const uint8_t> b) {
  U32(static_cast<uint32_t>(b.size()));
  Raw(b.data(), b.size());
}

bool Reader::Str(std::string* s, size_t max_len) {
  uint16_t n;
  if (!U16(&n) || n > max_len || remaining() < n) return false;
  s->assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
  pos_ += n;
  return true;
}

bool Reader::Bytes(std::span<const uint8_t>* b, size_t max_len) {
  uint32_t n;
  if (!U32(&n) || n > max_len || remaining() < n) return false;
  *b = in_.subspan(pos_, n);
  pos_ += n;
  return true;
}

}  // namespace gos::prim::wire
