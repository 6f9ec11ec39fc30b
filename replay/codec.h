// Private to gos::replay (and its tests): the segment envelope and the varint columns of
// docs/specs/replay-log.md.
#ifndef GOS_REPLAY_CODEC_H_
#define GOS_REPLAY_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gos/codec/bytes.h"
#include "gos/replay/log.h"
#include "gos/status.h"

namespace gos::replay::internal {

enum class SegmentKind : uint8_t { kJob = 1, kBytes = 2, kTimeline = 3 };
const char* SegmentKindName(SegmentKind k);

inline constexpr uint32_t kSegmentMagic = 0x314c5247;  // "GRL1" little-endian
// The version written. Version 3 added the restart mark (a kJobStream mark of type 3); a
// reader takes versions kMinSegmentVersion..kSegmentVersion.
inline constexpr uint16_t kSegmentVersion = 3;
inline constexpr uint16_t kMinSegmentVersion = 2;
// u32 magic | u16 version | u8 kind | u8 0 | u32 raw_len | u32 frame_len | u32 count |
// u32 crc32c (of bytes [0, 20) and of the frame).
inline constexpr size_t kSegmentHeaderBytes = 24;

// CRC-32C (Castagnoli), continuing from `crc` (0 to start).
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// The segment: header + one zstd frame of payload (<= kMaxSegmentRaw, else it aborts).
std::string MakeSegment(SegmentKind kind, uint32_t count, std::string_view payload, int level);

struct OpenedSegment {
  uint16_t version = 0;
  uint32_t count = 0;
  std::string payload;  // decompressed
};
// Checks the header (magic, version, kind == want, lengths, checksum) and decompresses.
// DATA_LOSS saying what is wrong otherwise.
StatusOr<OpenedSegment> OpenSegment(std::string_view segment, SegmentKind want);

// Appends LEB128 varints (and zigzag for signed values) to a string (gos/codec/bytes.h).
class ColumnWriter {
 public:
  void U8(uint8_t v) { codec::StringWriter(&out_).U8(v); }
  void Var(uint64_t v) { codec::StringWriter(&out_).Var(v); }
  void Signed(int64_t v) { codec::StringWriter(&out_).Signed(v); }
  void Bytes(std::string_view b) { out_.append(b); }
  const std::string& data() const { return out_; }
  size_t size() const { return out_.size(); }
  void Clear() { out_.clear(); }

 private:
  std::string out_;
};

// Reads what ColumnWriter wrote, bounds-checked (gos/codec/bytes.h): every getter returns
// false (and leaves the reader failed) past the end or on a malformed varint.
class ColumnReader {
 public:
  explicit ColumnReader(std::string_view in) : in_(in) {}
  bool U8(uint8_t* v) { return in_.U8(v); }
  bool Var(uint64_t* v) { return in_.Var(v); }
  bool Signed(int64_t* v) { return in_.Signed(v); }
  bool Bytes(size_t n, std::string_view* b) { return in_.View(n, b); }
  size_t remaining() const { return in_.remaining(); }
  bool done() const { return in_.done(); }

 private:
  codec::Reader in_;
};

}  // namespace gos::replay::internal

#endif  // GOS_REPLAY_CODEC_H_
