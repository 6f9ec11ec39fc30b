#include "gos/replay/log.h"

#include <zstd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "codec.h"
#include "gos/log.h"

namespace gos::replay {
namespace internal {
namespace {

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetLe(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  return v;
}

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}

}  // namespace

const char* SegmentKindName(SegmentKind k) {
  switch (k) {
    case SegmentKind::kJob:
      return "job";
    case SegmentKind::kBytes:
      return "bytes";
    case SegmentKind::kTimeline:
      return "timeline";
  }
  return "unknown";
}

uint32_t Crc32c(uint32_t crc, const void* data, size_t n) {
  static const std::array<uint32_t, 256> kTable = MakeCrcTable();
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::string MakeSegment(SegmentKind kind, uint32_t count, std::string_view payload, int level) {
  if (payload.size() > kMaxSegmentRaw) {
    GOS_LOG(kError, "replay") << "a " << SegmentKindName(kind) << " segment of " << payload.size()
                              << " bytes is over kMaxSegmentRaw";
    std::abort();
  }
  std::string out(kSegmentHeaderBytes, '\0');
  out.resize(kSegmentHeaderBytes + ZSTD_compressBound(payload.size()));
  // One context per thread: making one per segment costs more than compressing a small one.
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(),
                                                                       ZSTD_freeCCtx);
  const size_t n =
      ZSTD_compressCCtx(cctx.get(), out.data() + kSegmentHeaderBytes,
                        out.size() - kSegmentHeaderBytes, payload.data(), payload.size(), level);
  if (ZSTD_isError(n)) {
    // Only a bad level or a destination below the bound can fail; both are bugs here.
    GOS_LOG(kError, "replay") << "zstd: " << ZSTD_getErrorName(n);
    std::abort();
  }
  out.resize(kSegmentHeaderBytes + n);
  std::string h;
  PutLe(h, kSegmentMagic, 4);
  PutLe(h, kSegmentVersion, 2);
  PutLe(h, static_cast<uint8_t>(kind), 1);
  PutLe(h, 0, 1);
  PutLe(h, payload.size(), 4);
  PutLe(h, n, 4);
  PutLe(h, count, 4);
  uint32_t crc = Crc32c(0, h.data(), h.size());
  crc = Crc32c(crc, out.data() + kSegmentHeaderBytes, n);
  PutLe(h, crc, 4);
  out.replace(0, kSegmentHeaderBytes, h);
  return out;
}

namespace {

struct Header {
  uint16_t version;
  SegmentKind kind;
  uint32_t raw_len, frame_len, count;
};

StatusOr<Header> ParseHeader(std::string_view seg) {
  if (seg.size() < kSegmentHeaderBytes) {
    return DataLossError("segment of " + std::to_string(seg.size()) +
                         " bytes is shorter than its header");
  }
  if (GetLe(seg, 0, 4) != kSegmentMagic) return DataLossError("not a replay segment (bad magic)");
  const uint64_t version = GetLe(seg, 4, 2);
  if (version < kMinSegmentVersion || version > kSegmentVersion) {
    return DataLossError("segment format version " + std::to_string(version) +
                         " is not supported (this gos reads " + std::to_string(kMinSegmentVersion) +
                         " to " + std::to_string(kSegmentVersion) + ")");
  }
  const uint64_t kind = GetLe(seg, 6, 1);
  if (kind < 1 || kind > 3) return DataLossError("unknown segment kind " + std::to_string(kind));
  if (GetLe(seg, 7, 1) != 0) return DataLossError("segment header: reserved byte is not 0");
  Header h{static_cast<uint16_t>(version), static_cast<SegmentKind>(kind),
           static_cast<uint32_t>(GetLe(seg, 8, 4)), static_cast<uint32_t>(GetLe(seg, 12, 4)),
           static_cast<uint32_t>(GetLe(seg, 16, 4))};
  if (h.raw_len > kMaxSegmentRaw) {
    return DataLossError("segment claims " + std::to_string(h.raw_len) +
                         " raw bytes, over the limit of " + std::to_string(kMaxSegmentRaw));
  }
  if (seg.size() - kSegmentHeaderBytes != h.frame_len) {
    return DataLossError("segment of " + std::to_string(seg.size()) + " bytes holds a frame of " +
                         std::to_string(seg.size() - kSegmentHeaderBytes) + " bytes, header says " +
                         std::to_string(h.frame_len));
  }
  uint32_t crc = Crc32c(0, seg.data(), 20);
  crc = Crc32c(crc, seg.data() + kSegmentHeaderBytes, h.frame_len);
  if (crc != GetLe(seg, 20, 4)) return DataLossError("segment checksum mismatch");
  return h;
}

}  // namespace

StatusOr<OpenedSegment> OpenSegment(std::string_view seg, SegmentKind want) {
  GOS_ASSIGN_OR_RETURN(Header h, ParseHeader(seg));
  if (h.kind != want) {
    return DataLossError(std::string("a ") + SegmentKindName(h.kind) + " segment where a " +
                         SegmentKindName(want) + " segment belongs");
  }
  const char* frame = seg.data() + kSegmentHeaderBytes;
  const unsigned long long content = ZSTD_getFrameContentSize(frame, h.frame_len);
  if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ||
      content != h.raw_len) {
    return DataLossError("segment's zstd frame does not hold the " + std::to_string(h.raw_len) +
                         " bytes its header says");
  }
  const size_t frame_size = ZSTD_findFrameCompressedSize(frame, h.frame_len);
  if (ZSTD_isError(frame_size) || frame_size != h.frame_len) {
    return DataLossError("segment's zstd frame is truncated or followed by other bytes");
  }
  OpenedSegment out;
  out.version = h.version;
  out.count = h.count;
  out.payload.resize(h.raw_len);
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(),
                                                                       ZSTD_freeDCtx);
  const size_t n =
      ZSTD_decompressDCtx(dctx.get(), out.payload.data(), out.payload.size(), frame, h.frame_len);
  if (ZSTD_isError(n)) {
    return DataLossError(std::string("segment's zstd frame: ") + ZSTD_getErrorName(n));
  }
  if (n != h.raw_len) return DataLossError("segment's zstd frame decompressed to a wrong size");
  return out;
}

}  // namespace internal

using internal::ColumnReader;
using internal::ColumnWriter;
using internal::SegmentKind;

DescKey KeyOf(const bcs::Descriptor& d) {
  return DescKey{d.op, d.peer, d.tag, d.flags, d.group_size, d.context, d.len};
}

std::string Describe(const DescKey& k) {
  auto rank = [](int32_t p, const char* any) {
    return p == bcs::kAnySource ? std::string(any) : "rank " + std::to_string(p);
  };
  auto tag = [](int32_t t) {
    return t == bcs::kAnyTag ? std::string("any tag") : "tag " + std::to_string(t);
  };
  char ctx[32];
  std::snprintf(ctx, sizeof ctx, ", context 0x%llx", static_cast<unsigned long long>(k.context));
  const std::string len = std::to_string(k.len);
  switch (static_cast<bcs::Op>(k.op)) {
    case bcs::Op::kSend:
      return std::string((k.flags & bcs::kFlagSync) ? "synchronous send" : "send") + " to " +
             rank(k.peer, "any source") + ", " + tag(k.tag) + ", " + len + " bytes" + ctx;
    case bcs::Op::kRecv:
      return "receive from " + rank(k.peer, "any source") + ", " + tag(k.tag) + ", " + len +
             "-byte buffer" + ctx;
    case bcs::Op::kProbe:
      return std::string((k.flags & bcs::kFlagNonBlocking) ? "non-blocking probe" : "probe") +
             " for " + rank(k.peer, "any source") + ", " + tag(k.tag) + ctx;
    case bcs::Op::kBarrier:
      return "barrier #" + std::to_string(k.tag) + " of " + std::to_string(k.group_size) +
             " ranks" + ctx;
    case bcs::Op::kBcast:
      return "broadcast #" + std::to_string(k.tag) + " from root " + rank(k.peer, "?") + " of " +
             std::to_string(k.group_size) + " ranks, " + len + " bytes" + ctx;
    case bcs::Op::kCancel:
      return "cancel of a posted receive";
  }
  return "unknown op " + std::to_string(k.op) + ", peer " + std::to_string(k.peer) + ", tag " +
         std::to_string(k.tag) + ", flags " + std::to_string(k.flags) + ", " + len + " bytes" + ctx;
}

// ---------------------------------------------------------------------------------------------
// kJobStream payload (docs/specs/replay-log.md): a count block, then columns, each prefixed by
// its byte length, so that zstd sees long runs of alike bytes.

namespace {

enum Column : int {
  kColStrobe,
  kColTime,
  kColRow,
  kColEarly,
  kColCounts,
  kColOp,
  kColPeer,
  kColTag,
  kColContext,
  kColLen,
  kColFlags,
  kColGroup,
  kColMarks,
  kNumColumns,
};
const char* const kColumnNames[kNumColumns] = {"strobe", "time",       "row",  "early",   "counts",
                                               "op",     "peer",       "tag",  "context", "len",
                                               "flags",  "group_size", "marks"};

enum MarkType : uint8_t { kMarkCheckpoint = 1, kMarkEnd = 2, kMarkRestart = 3 };

// Peer relative to the posting rank (neighbours are small numbers whatever the rank);
// kAnySource is 0.
uint64_t PeerCode(int32_t peer, uint32_t rank) {
  if (peer == bcs::kAnySource) return 0;
  const int64_t d = static_cast<int64_t>(peer) - static_cast<int64_t>(rank);
  return ((static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63)) + 1;
}

// Floor of t / 1000 (times are stored in whole milliseconds).
int64_t FloorMs(int64_t t_us) { return t_us / 1000 - ((t_us % 1000) < 0 ? 1 : 0); }

}  // namespace

struct JobLogWriter::Impl {
  uint32_t world_size;
  // Columns written as steps arrive: strobe, time, marks. Counts and descriptors are kept
  // until Flush, which writes them rank by rank (each rank's part of a column is then the
  // same few descriptors over and over, whichever step took them).
  ColumnWriter strobe, time, row, early, marks;
  std::vector<uint32_t> counts;  // steps x world_size, step-major
  struct RankDescs {
    ColumnWriter op, peer, tag, context, len, flags, group;
    size_t size() const {
      return op.size() + peer.size() + tag.size() + context.size() + len.size() + flags.size() +
             group.size();
    }
  };
  std::map<uint32_t, RankDescs> descs_of;  // only ranks that posted
  size_t desc_bytes = 0;
  uint64_t steps = 0, descs = 0, nmarks = 0;
  uint64_t last_strobe = 0;
  int64_t last_ms = 0;
  uint64_t marks_at = 0;  // steps before the previous mark

  void MarkGap() {
    marks.Var(steps - marks_at);
    marks_at = steps;
  }
};

JobLogWriter::JobLogWriter(uint32_t world_size) : impl_(std::make_shared<Impl>()) {
  if (world_size > kMaxWorldSize) {
    GOS_LOG(kError, "replay") << "JobLogWriter: world size " << world_size << " over the limit";
    std::abort();
  }
  impl_->world_size = world_size;
}

void JobLogWriter::AddStep(const Step& step) {
  Impl& m = *impl_;
  uint64_t total = 0;
  for (uint32_t c : step.counts) total += c;
  if (step.counts.size() != m.world_size || total != step.descs.size() ||
      (m.steps + 1) * m.world_size > kMaxSegmentCounts) {
    GOS_LOG(kError, "replay") << "JobLogWriter::AddStep: " << step.counts.size()
                              << " counts for world size " << m.world_size << ", "
                              << step.descs.size() << " descriptors for " << total << ", "
                              << m.steps << " steps pending";
    std::abort();
  }
  m.strobe.Signed(static_cast<int64_t>(step.strobe - m.last_strobe));
  // Wrapping differences (the decoder wraps back), so any value round-trips without overflow.
  const int64_t ms = FloorMs(step.time_us);
  m.time.Signed(static_cast<int64_t>(static_cast<uint64_t>(ms) - static_cast<uint64_t>(m.last_ms)));
  m.last_strobe = step.strobe;
  m.last_ms = ms;
  m.row.Var(step.row);
  m.early.U8(step.early ? 1 : 0);
  m.counts.insert(m.counts.end(), step.counts.begin(), step.counts.end());
  size_t i = 0;
  for (uint32_t r = 0; r < m.world_size; ++r) {
    const uint32_t c = step.counts[r];
    if (c == 0) continue;
    Impl::RankDescs& d = m.descs_of[r];
    const size_t before = d.size();
    for (uint32_t j = 0; j < c; ++j, ++i) {
      const DescKey& k = step.descs[i];
      d.op.Var(k.op);
      d.peer.Var(PeerCode(k.peer, r));
      d.tag.Signed(k.tag);
      d.context.Var(k.context);
      d.len.Var(k.len);
      d.flags.Var(k.flags);
      d.group.Var(k.group_size);
    }
    m.desc_bytes += d.size() - before;
  }
  m.descs += step.descs.size();
  ++m.steps;
}

void JobLogWriter::AddCheckpoint(const CheckpointMark& mark) {
  Impl& m = *impl_;
  m.MarkGap();
  ColumnWriter& c = m.marks;
  c.U8(kMarkCheckpoint);
  c.Var(mark.epoch);
  c.Var(mark.steps);
  c.Var(mark.strobe);
  c.Signed(mark.time_us);
  ++m.nmarks;
}

void JobLogWriter::AddRestart(const RestartMark& mark) {
  Impl& m = *impl_;
  m.MarkGap();
  ColumnWriter& c = m.marks;
  c.U8(kMarkRestart);
  c.Var(mark.epoch);
  c.Var(mark.steps);
  c.Var(mark.strobe);
  c.Var(mark.dropped_steps);
  c.Signed(mark.time_us);
  ++m.nmarks;
}

void JobLogWriter::AddEnd(const End& end) {
  Impl& m = *impl_;
  m.MarkGap();
  ColumnWriter& c = m.marks;
  c.U8(kMarkEnd);
  c.U8(static_cast<uint8_t>(end.kind));
  c.Signed(end.exit_code);
  c.Signed(end.rank);
  c.Var(end.steps);
  c.Signed(end.time_us);
  const std::string_view msg =
      std::string_view(end.message).substr(0, std::min(end.message.size(), kMaxEndMessage));
  c.Var(msg.size());
  c.Bytes(msg);
  ++m.nmarks;
}

size_t JobLogWriter::pending_bytes() const {
  const Impl& m = *impl_;
  // A count is about a byte once written.
  return m.strobe.size() + m.time.size() + m.row.size() + m.early.size() + m.marks.size() +
         m.counts.size() + m.desc_bytes;
}

uint64_t JobLogWriter::pending_steps() const { return impl_->steps; }

std::string JobLogWriter::Flush(int zstd_level) {
  Impl& m = *impl_;
  if (m.steps == 0 && m.nmarks == 0) return std::string();
  // Counts, rank by rank: a token 2z is a run of z zeros (it may span ranks), 2(c-1)+1 one
  // count c >= 1.
  ColumnWriter counts;
  uint64_t zero_run = 0;
  for (uint32_t r = 0; r < m.world_size; ++r) {
    for (uint64_t s = 0; s < m.steps; ++s) {
      const uint32_t c = m.counts[s * m.world_size + r];
      if (c == 0) {
        ++zero_run;
        continue;
      }
      if (zero_run > 0) counts.Var(zero_run << 1);
      zero_run = 0;
      counts.Var((static_cast<uint64_t>(c - 1) << 1) | 1);
    }
  }
  if (zero_run > 0) counts.Var(zero_run << 1);
  ColumnWriter out;
  out.Var(m.world_size);
  out.Var(m.steps);
  out.Var(m.descs);
  out.Var(m.nmarks);
  auto column = [&](const ColumnWriter& c) {
    out.Var(c.size());
    out.Bytes(c.data());
  };
  // A descriptor column: every rank's part, ranks ascending.
  auto desc_column = [&](ColumnWriter Impl::RankDescs::*field) {
    size_t n = 0;
    for (const auto& [r, d] : m.descs_of) n += (d.*field).size();
    out.Var(n);
    for (const auto& [r, d] : m.descs_of) out.Bytes((d.*field).data());
  };
  column(m.strobe);
  column(m.time);
  column(m.row);
  column(m.early);
  column(counts);
  desc_column(&Impl::RankDescs::op);
  desc_column(&Impl::RankDescs::peer);
  desc_column(&Impl::RankDescs::tag);
  desc_column(&Impl::RankDescs::context);
  desc_column(&Impl::RankDescs::len);
  desc_column(&Impl::RankDescs::flags);
  desc_column(&Impl::RankDescs::group);
  column(m.marks);
  const uint64_t records = m.steps + m.nmarks;
  std::string seg = internal::MakeSegment(
      SegmentKind::kJob, static_cast<uint32_t>(std::min<uint64_t>(records, UINT32_MAX)), out.data(),
      zstd_level);
  m.strobe.Clear();
  m.time.Clear();
  m.row.Clear();
  m.early.Clear();
  m.marks.Clear();
  m.counts.clear();
  m.descs_of.clear();
  m.desc_bytes = 0;
  m.steps = m.descs = m.nmarks = m.marks_at = 0;
  m.last_strobe = 0;
  m.last_ms = 0;
  return seg;
}

namespace {

Status Bad(const char* column, const std::string& what) {
  return DataLossError(std::string(column) + " column: " + what);
}

bool FitsI32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

// Where a mark of a segment sits among its steps: `at` steps of the segment come before it;
// `index` is its place in the log's checkpoints or restarts (an end has none).
struct MarkAt {
  uint64_t at;
  MarkType type;
  size_t index;
};

// One segment's payload, appended to log; with `order`, each mark's place is appended to it.
Status DecodeJobPayload(std::string_view payload, uint16_t version, uint32_t count, bool first,
                        JobLog& log, std::vector<MarkAt>* order = nullptr) {
  ColumnReader in(payload);
  uint64_t world, steps, descs, marks;
  if (!in.Var(&world) || !in.Var(&steps) || !in.Var(&descs) || !in.Var(&marks)) {
    return DataLossError("truncated record counts");
  }
  if (world > kMaxWorldSize) {
    return DataLossError("world size " + std::to_string(world) + " over the limit");
  }
  if (!first && world != log.world_size) {
    return DataLossError("world size " + std::to_string(world) + ", earlier segments " +
                         std::to_string(log.world_size));
  }
  // Every step, descriptor and mark takes at least a byte of the payload.
  if (steps > payload.size() || descs > payload.size() || marks > payload.size()) {
    return DataLossError("record counts exceed the payload's size");
  }
  if (steps * world > kMaxSegmentCounts) {
    return DataLossError(std::to_string(steps) + " steps of " + std::to_string(world) +
                         " ranks exceed the per-segment limit");
  }
  if (steps + marks != count) {
    return DataLossError("header counts " + std::to_string(count) + " records, payload " +
                         std::to_string(steps + marks));
  }
  std::vector<ColumnReader> cols(kNumColumns, ColumnReader(std::string_view()));
  for (int c = 0; c < kNumColumns; ++c) {
    uint64_t len;
    std::string_view bytes;
    if (!in.Var(&len) || len > in.remaining() || !in.Bytes(len, &bytes)) {
      return Bad(kColumnNames[c], "truncated");
    }
    cols[c] = ColumnReader(bytes);
  }
  if (!in.done()) return DataLossError("trailing bytes after the columns");

  log.world_size = static_cast<uint32_t>(world);
  const size_t base = log.steps.size();
  log.steps.resize(base + steps);
  uint64_t strobe = 0;
  int64_t ms = 0;
  for (uint64_t s = 0; s < steps; ++s) {
    int64_t ds, dt;
    if (!cols[kColStrobe].Signed(&ds)) return Bad("strobe", "truncated");
    if (!cols[kColTime].Signed(&dt)) return Bad("time", "truncated");
    strobe += static_cast<uint64_t>(ds);
    ms = static_cast<int64_t>(static_cast<uint64_t>(ms) + static_cast<uint64_t>(dt));
    if (ms > std::numeric_limits<int64_t>::max() / 1000 ||
        ms < std::numeric_limits<int64_t>::min() / 1000) {
      return Bad("time", "value out of range");
    }
    uint64_t row;
    uint8_t early;
    if (!cols[kColRow].Var(&row) || row > UINT32_MAX) return Bad("row", "truncated or bad value");
    if (!cols[kColEarly].U8(&early) || early > 1) return Bad("early", "truncated or bad value");
    log.steps[base + s].strobe = strobe;
    log.steps[base + s].time_us = ms * 1000;
    log.steps[base + s].row = static_cast<uint32_t>(row);
    log.steps[base + s].early = early == 1;
  }
  // Counts, rank by rank: a token 2z is a run of z zeros (z >= 1); 2(c-1)+1 is one count c >= 1.
  for (uint64_t s = 0; s < steps; ++s) log.steps[base + s].counts.assign(world, 0);
  uint64_t zeros = 0, total = 0;
  for (uint64_t r = 0; r < world; ++r) {
    for (uint64_t s = 0; s < steps; ++s) {
      if (zeros > 0) {
        --zeros;
        continue;
      }
      uint64_t t;
      if (!cols[kColCounts].Var(&t)) return Bad("counts", "truncated");
      if ((t & 1) == 0) {
        if (t == 0) return Bad("counts", "empty run of zeros");
        zeros = (t >> 1) - 1;
        continue;
      }
      const uint64_t c = (t >> 1) + 1;
      if (c > descs - total) return Bad("counts", "more descriptors than the segment holds");
      log.steps[base + s].counts[r] = static_cast<uint32_t>(c);
      total += c;
    }
  }
  if (zeros > 0) return Bad("counts", "a run of zeros past the last step");
  if (total != descs) {
    return Bad("counts", "sum " + std::to_string(total) + ", segment holds " +
                             std::to_string(descs) + " descriptors");
  }
  for (uint64_t s = 0; s < steps; ++s) {
    Step& step = log.steps[base + s];
    uint64_t n = 0;
    for (uint32_t c : step.counts) n += c;
    step.descs.clear();
    step.descs.reserve(n);
  }
  // Descriptor columns hold rank 0's descriptors of every step, then rank 1's, ...: appending
  // rank by rank leaves each step's descriptors in rank order.
  for (uint32_t r = 0; r < world; ++r) {
    for (uint64_t s = 0; s < steps; ++s) {
      Step& step = log.steps[base + s];
      for (uint32_t j = 0; j < step.counts[r]; ++j) {
        DescKey k;
        uint64_t op, peer, context, len, flags, group;
        int64_t tag;
        if (!cols[kColOp].Var(&op) || op > UINT32_MAX) return Bad("op", "truncated or bad value");
        if (!cols[kColPeer].Var(&peer)) return Bad("peer", "truncated");
        if (!cols[kColTag].Signed(&tag) || !FitsI32(tag)) return Bad("tag", "truncated or bad");
        if (!cols[kColContext].Var(&context)) return Bad("context", "truncated");
        if (!cols[kColLen].Var(&len)) return Bad("len", "truncated");
        if (!cols[kColFlags].Var(&flags) || flags > UINT32_MAX) return Bad("flags", "bad value");
        if (!cols[kColGroup].Var(&group) || group > UINT32_MAX) {
          return Bad("group_size", "truncated or bad value");
        }
        if (peer == 0) {
          k.peer = bcs::kAnySource;
        } else {
          const uint64_t z = peer - 1;
          const int64_t d = static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
          // |d| <= 2^63 - 1 here, and r < 2^20: no overflow.
          const int64_t p = static_cast<int64_t>(r) + d;
          if (d > (int64_t{1} << 40) || d < -(int64_t{1} << 40) || !FitsI32(p) ||
              p == bcs::kAnySource) {
            return Bad("peer", "value out of range");
          }
          k.peer = static_cast<int32_t>(p);
        }
        k.op = static_cast<uint32_t>(op);
        k.tag = static_cast<int32_t>(tag);
        k.context = context;
        k.len = len;
        k.flags = static_cast<uint32_t>(flags);
        k.group_size = static_cast<uint32_t>(group);
        step.descs.push_back(k);
      }
    }
  }
  uint64_t at = 0;
  for (uint64_t i = 0; i < marks; ++i) {
    ColumnReader& c = cols[kColMarks];
    uint64_t gap;
    uint8_t type;
    if (!c.Var(&gap) || !c.U8(&type)) return Bad("marks", "truncated");
    if (gap > steps - at) return Bad("marks", "a mark after the segment's last step");
    at += gap;
    if (type == kMarkCheckpoint) {
      CheckpointMark m;
      if (!c.Var(&m.epoch) || !c.Var(&m.steps) || !c.Var(&m.strobe) || !c.Signed(&m.time_us)) {
        return Bad("marks", "truncated checkpoint");
      }
      if (order != nullptr) order->push_back({at, kMarkCheckpoint, log.checkpoints.size()});
      log.checkpoints.push_back(m);
    } else if (type == kMarkRestart && version >= 3) {
      RestartMark m;
      if (!c.Var(&m.epoch) || !c.Var(&m.steps) || !c.Var(&m.strobe) || !c.Var(&m.dropped_steps) ||
          !c.Signed(&m.time_us)) {
        return Bad("marks", "truncated restart");
      }
      if (order != nullptr) order->push_back({at, kMarkRestart, log.restarts.size()});
      log.restarts.push_back(m);
    } else if (type == kMarkEnd) {
      End e;
      uint8_t kind;
      int64_t code, rank;
      uint64_t len;
      std::string_view msg;
      if (!c.U8(&kind) || !c.Signed(&code) || !c.Signed(&rank) || !c.Var(&e.steps) ||
          !c.Signed(&e.time_us) || !c.Var(&len)) {
        return Bad("marks", "truncated end");
      }
      if (kind != static_cast<uint8_t>(EndKind::kCompleted) &&
          kind != static_cast<uint8_t>(EndKind::kFailed)) {
        return Bad("marks", "unknown end kind " + std::to_string(kind));
      }
      if (!FitsI32(code) || !FitsI32(rank)) return Bad("marks", "end's exit code or rank");
      if (len > kMaxEndMessage || !c.Bytes(len, &msg)) return Bad("marks", "end's message");
      e.kind = static_cast<EndKind>(kind);
      e.exit_code = static_cast<int32_t>(code);
      e.rank = static_cast<int32_t>(rank);
      e.message.assign(msg);
      if (order != nullptr) order->push_back({at, kMarkEnd, 0});
      log.end = std::move(e);
    } else {
      return Bad("marks", "unknown record type " + std::to_string(type));
    }
  }
  for (int c = 0; c < kNumColumns; ++c) {
    if (!cols[c].done()) return Bad(kColumnNames[c], "trailing bytes");
  }
  return OkStatus();
}

std::string SegmentWhere(size_t i) { return "replay log segment " + std::to_string(i); }

}  // namespace

StatusOr<JobLog> DecodeJobLog(std::span<const std::string> segments) {
  JobLog log;
  for (size_t i = 0; i < segments.size(); ++i) {
    StatusOr<internal::OpenedSegment> seg = internal::OpenSegment(segments[i], SegmentKind::kJob);
    if (!seg.ok()) return seg.status().WithContext(SegmentWhere(i));
    GOS_RETURN_IF_ERROR(DecodeJobPayload(seg->payload, seg->version, seg->count, i == 0, log)
                            .WithContext(SegmentWhere(i)));
  }
  return log;
}

std::string EncodeBytesSegment(std::string_view bytes, int zstd_level) {
  return internal::MakeSegment(SegmentKind::kBytes, 0, bytes, zstd_level);
}

StatusOr<std::string> DecodeBytesSegments(std::span<const std::string> segments) {
  std::string out;
  for (size_t i = 0; i < segments.size(); ++i) {
    StatusOr<internal::OpenedSegment> seg = internal::OpenSegment(segments[i], SegmentKind::kBytes);
    if (!seg.ok()) return seg.status().WithContext(SegmentWhere(i));
    if (seg->count != 0) {
      return DataLossError(SegmentWhere(i) + ": bytes segment with record count " +
                           std::to_string(seg->count));
    }
    out += seg->payload;
  }
  return out;
}

std::string EncodeTimelineSegment(std::span<const uint32_t> blocked_us, int zstd_level) {
  ColumnWriter w;
  for (uint32_t v : blocked_us) w.Var((static_cast<uint64_t>(v) + 500) / 1000);  // nearest ms
  return internal::MakeSegment(SegmentKind::kTimeline, static_cast<uint32_t>(blocked_us.size()),
                               w.data(), zstd_level);
}

StatusOr<std::vector<uint32_t>> DecodeTimelineSegments(std::span<const std::string> segments) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < segments.size(); ++i) {
    StatusOr<internal::OpenedSegment> seg =
        internal::OpenSegment(segments[i], SegmentKind::kTimeline);
    if (!seg.ok()) return seg.status().WithContext(SegmentWhere(i));
    if (seg->count > seg->payload.size()) {
      return DataLossError(SegmentWhere(i) + ": " + std::to_string(seg->count) +
                           " entries cannot fit in " + std::to_string(seg->payload.size()) +
                           " bytes");
    }
    ColumnReader r(seg->payload);
    out.reserve(out.size() + seg->count);
    for (uint32_t k = 0; k < seg->count; ++k) {
      uint64_t v;
      if (!r.Var(&v) || v > UINT32_MAX / 1000 + 1) {
        return DataLossError(SegmentWhere(i) + ": timeline entry " + std::to_string(k) +
                             " truncated or out of range");
      }
      out.push_back(static_cast<uint32_t>(std::min<uint64_t>(v * 1000, UINT32_MAX)));
    }
    if (!r.done()) return DataLossError(SegmentWhere(i) + ": trailing bytes after the entries");
  }
  return out;
}

std::string EncodeStdinPiece(std::string_view bytes) {
  ColumnWriter w;
  w.Var(bytes.size());
  w.Bytes(bytes);
  return EncodeBytesSegment(w.data());
}

StatusOr<std::vector<std::string>> DecodeStdinPieces(std::span<const std::string> segments) {
  GOS_ASSIGN_OR_RETURN(std::string all, DecodeBytesSegments(segments));
  std::vector<std::string> out;
  ColumnReader r(all);
  while (!r.done()) {
    uint64_t len;
    std::string_view piece;
    if (!r.Var(&len) || len > r.remaining() || !r.Bytes(len, &piece)) {
      return DataLossError("stdin stream: piece " + std::to_string(out.size()) + " truncated");
    }
    out.emplace_back(piece);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Cutting a log back to a checkpoint, for a restart.

StatusOr<StreamCut> CutJobStream(std::span<const std::string> segments, RestartMark* restart,
                                 int zstd_level) {
  // Every segment decodes on its own: find the last one holding a mark of the epoch, counting
  // the steps before each, without keeping more than one segment's records at a time.
  uint64_t steps_before = 0, total_steps = 0;
  std::optional<size_t> found;
  uint32_t world = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    StatusOr<internal::OpenedSegment> seg = internal::OpenSegment(segments[i], SegmentKind::kJob);
    if (!seg.ok()) return seg.status().WithContext(SegmentWhere(i));
    JobLog one;
    GOS_RETURN_IF_ERROR(DecodeJobPayload(seg->payload, seg->version, seg->count, true, one)
                            .WithContext(SegmentWhere(i)));
    if (i > 0 && one.world_size != world) {
      return DataLossError(SegmentWhere(i) + ": world size " + std::to_string(one.world_size) +
                           ", earlier segments " + std::to_string(world));
    }
    world = one.world_size;
    for (const CheckpointMark& m : one.checkpoints) {
      if (m.epoch != restart->epoch) continue;
      found = i;
      steps_before = total_steps;
    }
    total_steps += one.steps.size();
  }
  if (!found) {
    return NotFoundError("the log has no mark of checkpoint " + std::to_string(restart->epoch));
  }
  // Re-encode that segment up to the epoch's last mark in it, then the restart mark.
  StatusOr<internal::OpenedSegment> seg =
      internal::OpenSegment(segments[*found], SegmentKind::kJob);
  if (!seg.ok()) return seg.status().WithContext(SegmentWhere(*found));
  JobLog one;
  std::vector<MarkAt> order;
  GOS_RETURN_IF_ERROR(DecodeJobPayload(seg->payload, seg->version, seg->count, true, one, &order)
                          .WithContext(SegmentWhere(*found)));
  size_t last = 0;  // the epoch's last mark in `order`
  for (size_t k = 0; k < order.size(); ++k) {
    if (order[k].type == kMarkCheckpoint && one.checkpoints[order[k].index].epoch == restart->epoch)
      last = k;
  }
  const CheckpointMark& mark = one.checkpoints[order[last].index];
  if (steps_before + order[last].at != mark.steps) {
    return DataLossError("checkpoint " + std::to_string(mark.epoch) + "'s mark says " +
                         std::to_string(mark.steps) + " steps came before it; the log has " +
                         std::to_string(steps_before + order[last].at));
  }
  JobLogWriter w(world);
  uint64_t s = 0;
  for (size_t k = 0; k <= last; ++k) {
    for (; s < order[k].at; ++s) w.AddStep(one.steps[s]);
    switch (order[k].type) {
      case kMarkCheckpoint:
        w.AddCheckpoint(one.checkpoints[order[k].index]);
        break;
      case kMarkRestart:
        w.AddRestart(one.restarts[order[k].index]);
        break;
      case kMarkEnd:
        w.AddEnd(*one.end);
        break;
    }
  }
  restart->steps = mark.steps;
  restart->dropped_steps = total_steps - mark.steps;
  w.AddRestart(*restart);
  StreamCut out;
  out.keep = *found;
  out.tail.push_back(w.Flush(zstd_level));
  return out;
}

StatusOr<StreamCut> CutBytesStream(std::span<const std::string> segments, uint64_t bytes,
                                   int zstd_level) {
  StreamCut out;
  uint64_t before = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (before == bytes) {
      out.keep = i;
      return out;
    }
    StatusOr<SegmentSize> size = SizeOfSegment(segments[i]);
    if (!size.ok()) return size.status().WithContext(SegmentWhere(i));
    if (before + size->raw > bytes) {
      StatusOr<std::string> head = DecodeBytesSegments(segments.subspan(i, 1));
      if (!head.ok()) return head.status().WithContext(SegmentWhere(i));
      out.keep = i;
      out.tail.push_back(EncodeBytesSegment(
          std::string_view(*head).substr(0, static_cast<size_t>(bytes - before)), zstd_level));
      return out;
    }
    before += size->raw;
  }
  if (before < bytes) {
    return DataLossError("the stream holds " + std::to_string(before) + " bytes, the cut is at " +
                         std::to_string(bytes));
  }
  out.keep = segments.size();
  return out;
}

StatusOr<StreamCut> CutTimelineStream(std::span<const std::string> segments, uint64_t entries,
                                      int zstd_level) {
  StreamCut out;
  uint64_t before = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (before == entries) {
      out.keep = i;
      return out;
    }
    StatusOr<std::vector<uint32_t>> one = DecodeTimelineSegments(segments.subspan(i, 1));
    if (!one.ok()) return one.status().WithContext(SegmentWhere(i));
    if (before + one->size() > entries) {
      one->resize(static_cast<size_t>(entries - before));
      out.keep = i;
      out.tail.push_back(EncodeTimelineSegment(*one, zstd_level));
      return out;
    }
    before += one->size();
  }
  out.keep = segments.size();
  if (entries - before > kMaxSegmentRaw) {
    return DataLossError("the timeline holds " + std::to_string(before) +
                         " entries, the cut is at " + std::to_string(entries));
  }
  if (before < entries) {
    // Lost entries (their node died before it shipped them) count as never blocked.
    const std::vector<uint32_t> zeros(static_cast<size_t>(entries - before), 0);
    out.tail.push_back(EncodeTimelineSegment(zeros, zstd_level));
  }
  return out;
}

StatusOr<SegmentSize> SizeOfSegment(std::string_view segment) {
  GOS_ASSIGN_OR_RETURN(internal::Header h, internal::ParseHeader(segment));
  return SegmentSize{h.raw_len, segment.size()};
}

}  // namespace gos::replay
