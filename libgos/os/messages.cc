#include "gos/os/messages.h"

#include "gos/codec/bytes.h"
#include "gos/os/auth.h"

namespace gos::os {
namespace {

using codec::Reader;
using codec::Writer;

constexpr uint32_t kStrobeMagic = 0x42544f47;        // "GOTB"
constexpr uint32_t kStageMagic = 0x47544f47;         // "GOTG"
constexpr uint32_t kCkptBatchMagic = 0x4b544f47;     // "GOTK"
constexpr uint32_t kRestoreBatchMagic = 0x52544f47;  // "GOTR"
constexpr size_t kMaxRuns = 1u << 16;
constexpr size_t kMaxCommands = 1024;
constexpr size_t kMaxOutputBytes = 1u << 20;
constexpr size_t kMaxPsEntries = 1u << 16;

void Strings(Writer& w, const std::vector<std::string>& v) {
  w.U32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) w.Str(s);
}

bool Strings(Reader& r, std::vector<std::string>* v) {
  uint32_t n;
  if (!r.U32(&n) || n > kMaxArgs) return false;
  v->resize(n);
  for (auto& s : *v) {
    if (!r.Str(&s, kMaxStringBytes)) return false;
  }
  return true;
}

template <typename T>
void Ids(Writer& w, const std::vector<T>& v) {
  w.U32(static_cast<uint32_t>(v.size()));
  for (T x : v) w.Raw(&x, sizeof x);
}

template <typename T>
bool Ids(Reader& r, std::vector<T>* v) {
  uint32_t n;
  if (!r.U32(&n) || n > kMaxPsEntries || r.remaining() < n * sizeof(T)) return false;
  v->resize(n);
  for (T& x : *v) {
    if constexpr (sizeof(T) == 8) {
      if (!r.U64(reinterpret_cast<uint64_t*>(&x))) return false;
    } else {
      if (!r.U32(reinterpret_cast<uint32_t*>(&x))) return false;
    }
  }
  return true;
}

Status Bad(const char* what) { return InvalidArgumentError(std::string("malformed ") + what); }

// A relative path without "." or ".." parts: a name inside a rank's image dir.
bool SafeName(const std::string& f) {
  if (f.empty() || f[0] == '/') return false;
  size_t start = 0;
  while (start <= f.size()) {
    size_t end = f.find('/', start);
    if (end == std::string::npos) end = f.size();
    std::string part = f.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// Appends an HMAC over everything written so far.
void Seal(std::vector<uint8_t>* out, std::span<const uint8_t> key) {
  Mac mac = Hmac(key, {std::span<const uint8_t>(*out)});
  out->insert(out->end(), mac.begin(), mac.end());
}

// Finds the sealed length (u32 after the magic) and checks the HMAC.
StatusOr<std::span<const uint8_t>> Unseal(std::span<const uint8_t> bytes, uint32_t magic,
                                          std::span<const uint8_t> key, const char* what) {
  Reader r(bytes);
  uint32_t m, len;
  if (!r.U32(&m) || m != magic) return Bad(what);
  if (!r.U32(&len) || len < 8 || len > bytes.size() || bytes.size() - len < kMacBytes) {
    return Bad(what);
  }
  Mac mac = Hmac(key, {bytes.first(len)});
  if (!MacEqual(mac, bytes.subspan(len, kMacBytes))) {
    return PermissionDeniedError(std::string(what) + " fails authentication (wrong cluster key?)");
  }
  return bytes.first(len);
}

void PatchLength(std::vector<uint8_t>* out) {
  uint32_t len = static_cast<uint32_t>(out->size());
  std::memcpy(out->data() + 4, &len, 4);
}

}  // namespace

std::vector<uint8_t> EncodeStrobe(const Strobe& s, std::span<const uint8_t> key) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U32(kStrobeMagic);
  w.U32(0);  // length, patched
  w.U16(kStrobeVersion);
  w.U64(s.strobe);
  w.U32(s.row);
  w.U8(s.early ? 1 : 0);
  w.U32(static_cast<uint32_t>(s.commands.size()));
  for (const auto& c : s.commands) {
    w.U8(static_cast<uint8_t>(c.type));
    w.U64(c.origin);
    w.U64(c.job);
    w.I32(c.signal);
    w.U64(c.epoch);
    w.U64(c.base);
    if (c.type == CommandType::kLaunch || c.type == CommandType::kRestore) {
      const LaunchCommand& l = c.launch;
      w.U32(l.slot);
      w.U32(l.row);
      w.U32(l.uid);
      w.U32(l.gid);
      w.U32(l.ntasks);
      w.U32(l.flags);
      w.U32(static_cast<uint32_t>(l.runs.size()));
      for (const auto& run : l.runs) {
        w.U32(run.node);
        w.U32(run.first);
        w.U32(run.count);
      }
      w.Str(l.program);
      Strings(w, l.argv);
      Strings(w, l.env);
      w.Str(l.cwd);
    }
  }
  PatchLength(&out);
  Seal(&out, key);
  return out;
}

StatusOr<Strobe> DecodeStrobe(std::span<const uint8_t> bytes, std::span<const uint8_t> key) {
  GOS_ASSIGN_OR_RETURN(std::span<const uint8_t> body, Unseal(bytes, kStrobeMagic, key, "strobe"));
  Reader r(body.subspan(8));
  Strobe s;
  uint16_t version;
  uint32_t n;
  if (!r.U16(&version)) return Bad("strobe");
  if (version != kStrobeVersion) {
    return InvalidArgumentError("strobe version " + std::to_string(version) + ", expected " +
                                std::to_string(kStrobeVersion));
  }
  uint8_t early;
  if (!r.U64(&s.strobe) || !r.U32(&s.row) || !r.U8(&early) || early > 1 || !r.U32(&n) ||
      n > kMaxCommands) {
    return Bad("strobe");
  }
  s.early = early == 1;
  s.commands.resize(n);
  for (auto& c : s.commands) {
    uint8_t type;
    if (!r.U8(&type) || type < 1 || type > 7 || !r.U64(&c.origin) || !r.U64(&c.job) ||
        !r.I32(&c.signal) || !r.U64(&c.epoch) || !r.U64(&c.base)) {
      return Bad("strobe command");
    }
    c.type = static_cast<CommandType>(type);
    if (c.type != CommandType::kLaunch && c.type != CommandType::kRestore) continue;
    LaunchCommand& l = c.launch;
    l.job = c.job;
    uint32_t runs;
    if (!r.U32(&l.slot) || !r.U32(&l.row) || !r.U32(&l.uid) || !r.U32(&l.gid) ||
        !r.U32(&l.ntasks) || !r.U32(&l.flags) || !r.U32(&runs) || runs > kMaxRuns ||
        r.remaining() < runs * 12) {
      return Bad("launch command");
    }
    l.runs.resize(runs);
    for (auto& run : l.runs) {
      if (!r.U32(&run.node) || !r.U32(&run.first) || !r.U32(&run.count)) return Bad("launch");
    }
    if (!r.Str(&l.program, kMaxStringBytes) || !Strings(r, &l.argv) || !Strings(r, &l.env) ||
        !r.Str(&l.cwd, kMaxStringBytes)) {
      return Bad("launch command");
    }
  }
  if (r.remaining() != 0) return Bad("strobe (trailing bytes)");
  return s;
}

namespace {

constexpr size_t kCkptBatchHeaderBytes = 4 + 4 + 4 + 8 + 8 + 8 + 4;
constexpr size_t kRestoreBatchHeaderBytes = kCkptBatchHeaderBytes + 4 + 8;  // + rank, attempt
// Hash, raw length, frame length; a restore chunk adds its file (u16 length, name), mode, offset.
constexpr size_t kCkptBatchChunkBytes = 32 + 4 + 4;
constexpr size_t kRestoreChunkExtraBytes = 2 + 4 + 8;
constexpr size_t kMaxCkptFrameBytes = 1u << 20;
constexpr size_t kMaxRestoreFileBytes = 1024;
// Image files are far smaller; this keeps offset + length far from overflowing.
constexpr uint64_t kMaxRestoreOffset = uint64_t{1} << 48;

uint32_t BatchMagic(BatchKind kind) {
  return kind == BatchKind::kRestore ? kRestoreBatchMagic : kCkptBatchMagic;
}

}  // namespace

size_t CkptBatchChunkBytes(BatchKind kind, const CkptBatchChunk& c) {
  size_t n = kCkptBatchChunkBytes + c.data.size();
  if (kind == BatchKind::kRestore) n += kRestoreChunkExtraBytes + c.file.size();
  return n;
}

size_t CkptBatchBytes(const CkptBatch& b) {
  size_t n = (b.kind == BatchKind::kRestore ? kRestoreBatchHeaderBytes : kCkptBatchHeaderBytes) +
             kMacBytes;
  for (const auto& c : b.chunks) n += CkptBatchChunkBytes(b.kind, c);
  return n;
}

std::vector<uint8_t> EncodeCkptBatch(const CkptBatch& b, std::span<const uint8_t> key) {
  const bool restore = b.kind == BatchKind::kRestore;
  std::vector<uint8_t> out;
  out.reserve(CkptBatchBytes(b));
  Writer w(&out);
  w.U32(BatchMagic(b.kind));
  w.U32(0);
  w.U32(b.node);
  w.U64(b.number);
  w.U64(b.job);
  w.U64(b.epoch);
  if (restore) {
    w.U32(b.rank);
    w.U64(b.attempt);
  }
  w.U32(static_cast<uint32_t>(b.chunks.size()));
  for (const auto& c : b.chunks) {
    w.Raw(c.hash.data(), c.hash.size());
    w.U32(c.raw_len);
    if (restore) {
      w.Str(c.file);
      w.U32(c.mode);
      w.U64(c.offset);
    }
    w.Bytes(c.data);
  }
  PatchLength(&out);
  Seal(&out, key);
  return out;
}

StatusOr<CkptBatch> DecodeCkptBatch(BatchKind kind, std::span<const uint8_t> bytes,
                                    std::span<const uint8_t> key) {
  const bool restore = kind == BatchKind::kRestore;
  const char* what = restore ? "restore batch" : "checkpoint batch";
  GOS_ASSIGN_OR_RETURN(std::span<const uint8_t> body, Unseal(bytes, BatchMagic(kind), key, what));
  Reader r(body.subspan(8));
  CkptBatch b;
  b.kind = kind;
  uint32_t n;
  if (!r.U32(&b.node) || !r.U64(&b.number) || !r.U64(&b.job) || !r.U64(&b.epoch) ||
      (restore && (!r.U32(&b.rank) || !r.U64(&b.attempt))) || !r.U32(&n) ||
      r.remaining() / kCkptBatchChunkBytes < n) {
    return Bad(what);
  }
  b.chunks.resize(n);
  for (auto& c : b.chunks) {
    if (r.remaining() < c.hash.size()) return Bad(what);
    for (auto& x : c.hash) r.U8(&x);
    if (!r.U32(&c.raw_len)) return Bad(what);
    if (restore && (!r.Str(&c.file, kMaxRestoreFileBytes) || !r.U32(&c.mode) || !r.U64(&c.offset) ||
                    c.offset > kMaxRestoreOffset)) {
      return Bad(what);
    }
    if (!r.Bytes(&c.data, kMaxCkptFrameBytes)) return Bad(what);
    if (restore && !SafeName(c.file)) {
      return InvalidArgumentError(std::string(what) + " names a bad file \"" + c.file + "\"");
    }
  }
  if (r.remaining() != 0) return Bad(what);
  return b;
}

std::vector<uint8_t> EncodeStageHeader(const StageHeader& h, std::span<const uint8_t> key) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U32(kStageMagic);
  w.U32(0);
  w.U64(h.seq);
  w.U64(h.job);
  w.Str(h.file);
  w.U32(h.mode);
  w.U64(h.file_size);
  w.U64(h.offset);
  w.U64(h.len);
  w.Raw(h.data_mac.data(), h.data_mac.size());
  PatchLength(&out);
  Seal(&out, key);
  return out;
}

StatusOr<StageHeader> DecodeStageHeader(std::span<const uint8_t> bytes,
                                        std::span<const uint8_t> key) {
  GOS_ASSIGN_OR_RETURN(std::span<const uint8_t> body,
                       Unseal(bytes, kStageMagic, key, "staging header"));
  Reader r(body.subspan(8));
  StageHeader h;
  if (!r.U64(&h.seq) || !r.U64(&h.job) || !r.Str(&h.file, 255) || !r.U32(&h.mode) ||
      !r.U64(&h.file_size) || !r.U64(&h.offset) || !r.U64(&h.len) ||
      !r.Raw(h.data_mac.data(), h.data_mac.size()) || r.remaining() != 0) {
    return Bad("staging header");
  }
  if (h.file.empty() || h.file.find('/') != std::string::npos || h.file == "." || h.file == "..") {
    return InvalidArgumentError("staging header names a bad file \"" + h.file + "\"");
  }
  return h;
}

// ---- Channel frames -------------------------------------------------------------------

std::vector<uint8_t> Encode(const SubmitRequest& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  Strings(w, m.argv);
  Strings(w, m.env);
  w.Str(m.cwd);
  w.U32(m.ntasks);
  w.U32(m.nodes);
  w.U32(m.ranks_per_node);
  w.I64(m.time_limit_ms);
  w.U32(static_cast<uint32_t>(m.files.size()));
  for (const auto& f : m.files) {
    w.Str(f.name);
    w.U32(f.mode);
    w.U64(f.size);
  }
  w.I64(m.checkpoint_ms);
  w.U32(m.keep);
  w.U32(m.restart_on_failure);
  Strings(w, m.paths);
  w.U8(m.record ? 1 : 0);
  w.U64(m.replay_of);
  w.U64(m.stop_at);
  w.U64(m.from_epoch);
  w.U8(m.cpu_bind ? 1 : 0);
  Ids(w, m.exclude);
  Ids(w, m.nodelist);
  return out;
}

StatusOr<SubmitRequest> DecodeSubmit(std::span<const uint8_t> b) {
  Reader r(b);
  SubmitRequest m;
  uint32_t nfiles;
  if (!Strings(r, &m.argv) || !Strings(r, &m.env) || !r.Str(&m.cwd, kMaxStringBytes) ||
      !r.U32(&m.ntasks) || !r.U32(&m.nodes) || !r.U32(&m.ranks_per_node) ||
      !r.I64(&m.time_limit_ms) || !r.U32(&nfiles) || nfiles > 64) {
    return Bad("submit request");
  }
  m.files.resize(nfiles);
  for (auto& f : m.files) {
    if (!r.Str(&f.name, 255) || !r.U32(&f.mode) || !r.U64(&f.size)) return Bad("submit file");
  }
  if (!r.I64(&m.checkpoint_ms) || m.checkpoint_ms < 0 || !r.U32(&m.keep) ||
      !r.U32(&m.restart_on_failure)) {
    return Bad("submit request (checkpoint options)");
  }
  uint8_t record = 1;
  if (!Strings(r, &m.paths) || !r.U8(&record) || record > 1 || !r.U64(&m.replay_of) ||
      !r.U64(&m.stop_at) || !r.U64(&m.from_epoch)) {
    return Bad("submit request (replay options)");
  }
  m.record = record == 1;
  uint8_t bind = 1;
  if (!r.U8(&bind) || bind > 1) return Bad("submit request (cpu binding)");
  m.cpu_bind = bind == 1;
  if (!Ids(r, &m.exclude) || !Ids(r, &m.nodelist)) return Bad("submit request (node lists)");
  if (r.remaining() != 0) return Bad("submit request (trailing bytes)");
  return m;
}

std::vector<uint8_t> Encode(const RestoreRankEnd& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.U64(m.epoch);
  w.U32(m.rank);
  w.U64(m.attempt);
  Strings(w, m.files);
  return out;
}

StatusOr<RestoreRankEnd> DecodeRestoreRankEnd(std::span<const uint8_t> b) {
  Reader r(b);
  RestoreRankEnd m;
  if (!r.U64(&m.job) || !r.U64(&m.epoch) || !r.U32(&m.rank) || !r.U64(&m.attempt) ||
      !Strings(r, &m.files) || r.remaining() != 0) {
    return Bad("restore rank end");
  }
  for (const auto& f : m.files) {
    if (!SafeName(f)) return InvalidArgumentError("restore rank end names a bad file");
  }
  return m;
}

std::vector<uint8_t> Encode(const RestoreReady& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.U32(m.rank);
  w.U8(m.ok ? 1 : 0);
  w.Str(m.message);
  return out;
}

StatusOr<RestoreReady> DecodeRestoreReady(std::span<const uint8_t> b) {
  Reader r(b);
  RestoreReady m;
  uint8_t ok;
  if (!r.U64(&m.job) || !r.U32(&m.rank) || !r.U8(&ok) || ok > 1 ||
      !r.Str(&m.message, kMaxStringBytes) || r.remaining() != 0) {
    return Bad("restore ready");
  }
  m.ok = ok == 1;
  return m;
}

std::vector<uint8_t> Encode(const ReplaySegment& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.U32(m.stream);
  w.Str(m.bytes);
  w.U64(m.launch);
  return out;
}

StatusOr<ReplaySegment> DecodeReplaySegment(std::span<const uint8_t> b) {
  Reader r(b);
  ReplaySegment m;
  if (!r.U64(&m.job) || !r.U32(&m.stream) || !r.Str(&m.bytes, 64u << 20) || !r.U64(&m.launch) ||
      r.remaining() != 0) {
    return Bad("replay segment");
  }
  return m;
}

std::vector<uint8_t> Encode(const ReplayDataEnd& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.U64(m.of);
  w.U64(m.from_epoch);
  w.U64(m.stop_at);
  w.U8(m.completed ? 1 : 0);
  w.I32(m.failed_rank);
  return out;
}

StatusOr<ReplayDataEnd> DecodeReplayDataEnd(std::span<const uint8_t> b) {
  Reader r(b);
  ReplayDataEnd m;
  uint8_t completed = 0;
  if (!r.U64(&m.job) || !r.U64(&m.of) || !r.U64(&m.from_epoch) || !r.U64(&m.stop_at) ||
      !r.U8(&completed) || completed > 1 || !r.I32(&m.failed_rank) || r.remaining() != 0) {
    return Bad("replay data end");
  }
  m.completed = completed == 1;
  return m;
}

std::vector<uint8_t> Encode(const ReplayStopped& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.U8(static_cast<uint8_t>(m.kind));
  w.U64(m.strobe);
  w.I32(m.rank);
  w.Str(m.text);
  w.U32(static_cast<uint32_t>(m.ranks.size()));
  for (const auto& x : m.ranks) {
    w.U32(x.rank);
    w.U32(x.node);
    w.I32(x.pid);
    w.Str(x.host);
  }
  return out;
}

StatusOr<ReplayStopped> DecodeReplayStopped(std::span<const uint8_t> b) {
  Reader r(b);
  ReplayStopped m;
  uint32_t n = 0;
  uint8_t kind = 0;
  if (!r.U64(&m.job) || !r.U8(&kind) || kind < 1 || kind > 5 || !r.U64(&m.strobe) ||
      !r.I32(&m.rank) || !r.Str(&m.text, kMaxStringBytes) || !r.U32(&n) || n > (1u << 20)) {
    return Bad("replay stopped");
  }
  m.kind = static_cast<ReplayStopKind>(kind);
  for (uint32_t i = 0; i < n; ++i) {
    ReplayRank x;
    if (!r.U32(&x.rank) || !r.U32(&x.node) || !r.I32(&x.pid) || !r.Str(&x.host, 1024)) {
      return Bad("replay stopped (ranks)");
    }
    m.ranks.push_back(std::move(x));
  }
  if (r.remaining() != 0) return Bad("replay stopped (trailing bytes)");
  return m;
}

std::vector<uint8_t> Encode(const RankTable& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.U32(static_cast<uint32_t>(m.ranks.size()));
  for (const auto& x : m.ranks) {
    w.U32(x.rank);
    w.U32(x.node);
    w.I32(x.pid);
    w.Str(x.host);
    w.Str(x.exe);
  }
  return out;
}

StatusOr<RankTable> DecodeRankTable(std::span<const uint8_t> b) {
  Reader r(b);
  RankTable m;
  uint32_t n = 0;
  if (!r.U64(&m.job) || !r.U32(&n) || n > (1u << 20)) return Bad("rank table");
  for (uint32_t i = 0; i < n; ++i) {
    RankPlace x;
    if (!r.U32(&x.rank) || !r.U32(&x.node) || !r.I32(&x.pid) || !r.Str(&x.host, 1024) ||
        !r.Str(&x.exe, kMaxStringBytes)) {
      return Bad("rank table (ranks)");
    }
    m.ranks.push_back(std::move(x));
  }
  if (r.remaining() != 0) return Bad("rank table (trailing bytes)");
  return m;
}

std::vector<uint8_t> Encode(const RestartRequest& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.U64(m.epoch);
  Ids(w, m.exclude);
  w.I64(m.checkpoint_ms);
  w.U8(m.from_store ? 1 : 0);
  w.U32(m.keep);
  return out;
}

StatusOr<RestartRequest> DecodeRestart(std::span<const uint8_t> b) {
  Reader r(b);
  RestartRequest m;
  uint8_t from_store;
  if (!r.U64(&m.job) || !r.U64(&m.epoch) || !Ids(r, &m.exclude) || !r.I64(&m.checkpoint_ms) ||
      m.checkpoint_ms < RestartRequest::kNoCheckpoint || !r.U8(&from_store) || from_store > 1) {
    return Bad("restart request");
  }
  m.from_store = from_store == 1;
  // An older client's request ends here (keep = 0: the job's own).
  if (r.remaining() != 0 && (!r.U32(&m.keep) || r.remaining() != 0)) {
    return Bad("restart request");
  }
  return m;
}

std::vector<uint8_t> Encode(const SignalRequest& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.I32(m.signal);
  return out;
}

StatusOr<SignalRequest> DecodeSignal(std::span<const uint8_t> b) {
  Reader r(b);
  SignalRequest m;
  if (!r.U64(&m.job) || !r.I32(&m.signal) || r.remaining() != 0) return Bad("signal request");
  if (m.signal <= 0 || m.signal >= 65) return InvalidArgumentError("bad signal number");
  return m;
}

std::vector<uint8_t> Encode(const OutputChunk& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.U32(m.rank);
  w.U8(m.stream);
  w.Bytes({reinterpret_cast<const uint8_t*>(m.bytes.data()), m.bytes.size()});
  return out;
}

StatusOr<OutputChunk> DecodeOutput(std::span<const uint8_t> b) {
  Reader r(b);
  OutputChunk m;
  std::span<const uint8_t> bytes;
  if (!r.U64(&m.job) || !r.U32(&m.rank) || !r.U8(&m.stream) || (m.stream != 1 && m.stream != 2) ||
      !r.Bytes(&bytes, kMaxOutputBytes) || r.remaining() != 0) {
    return Bad("output chunk");
  }
  m.bytes.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return m;
}

std::vector<uint8_t> Encode(const JobExit& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(m.job);
  w.I32(m.exit_code);
  w.I32(m.failed_rank);
  w.I32(m.failed_node);
  w.Str(m.message);
  for (int64_t t : {m.placed_us, m.staged_us, m.launched_us, m.started_us, m.exited_us}) w.I64(t);
  return out;
}

StatusOr<JobExit> DecodeJobExit(std::span<const uint8_t> b) {
  Reader r(b);
  JobExit m;
  if (!r.U64(&m.job) || !r.I32(&m.exit_code) || !r.I32(&m.failed_rank) || !r.I32(&m.failed_node) ||
      !r.Str(&m.message, kMaxStringBytes) || !r.I64(&m.placed_us) || !r.I64(&m.staged_us) ||
      !r.I64(&m.launched_us) || !r.I64(&m.started_us) || !r.I64(&m.exited_us) ||
      r.remaining() != 0) {
    return Bad("job exit");
  }
  return m;
}

std::vector<uint8_t> Encode(const PsReply& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.I32(m.running_row);
  w.U64(m.strobe);
  w.U32(static_cast<uint32_t>(m.jobs.size()));
  for (const auto& j : m.jobs) {
    w.U64(j.id);
    w.Str(j.user);
    w.Str(j.state);
    w.U32(j.ntasks);
    Ids(w, j.nodes);
    w.I64(j.elapsed_ms);
    w.I32(j.row);
    w.I32(j.exit_code);
    w.Str(j.command);
    w.Str(j.message);
    w.I64(j.checkpoint_ms);
    w.U64(j.last_epoch);
    w.I64(j.last_epoch_age_ms);
  }
  w.U32(static_cast<uint32_t>(m.nodes.size()));
  for (const auto& n : m.nodes) {
    w.U32(n.id);
    w.Str(n.host);
    w.U8(n.up);
    w.Str(n.down_reason);
    w.U32(n.cores);
    w.U64(n.mem_bytes);
    Ids(w, n.jobs);
    w.U32(n.ranks);
  }
  return out;
}

StatusOr<PsReply> DecodePsReply(std::span<const uint8_t> b) {
  Reader r(b);
  PsReply m;
  uint32_t n;
  if (!r.I32(&m.running_row) || !r.U64(&m.strobe) || !r.U32(&n) || n > kMaxPsEntries) {
    return Bad("ps reply");
  }
  m.jobs.resize(n);
  for (auto& j : m.jobs) {
    if (!r.U64(&j.id) || !r.Str(&j.user, 256) || !r.Str(&j.state, 64) || !r.U32(&j.ntasks) ||
        !Ids(r, &j.nodes) || !r.I64(&j.elapsed_ms) || !r.I32(&j.row) || !r.I32(&j.exit_code) ||
        !r.Str(&j.command, kMaxStringBytes) || !r.Str(&j.message, kMaxStringBytes) ||
        !r.I64(&j.checkpoint_ms) || !r.U64(&j.last_epoch) || !r.I64(&j.last_epoch_age_ms)) {
      return Bad("ps reply job");
    }
  }
  if (!r.U32(&n) || n > kMaxPsEntries) return Bad("ps reply");
  m.nodes.resize(n);
  for (auto& x : m.nodes) {
    uint8_t up;
    if (!r.U32(&x.id) || !r.Str(&x.host, 256) || !r.U8(&up) ||
        !r.Str(&x.down_reason, kMaxStringBytes) || !r.U32(&x.cores) || !r.U64(&x.mem_bytes) ||
        !Ids(r, &x.jobs) || !r.U32(&x.ranks)) {
      return Bad("ps reply node");
    }
    x.up = up != 0;
  }
  if (r.remaining() != 0) return Bad("ps reply (trailing bytes)");
  return m;
}

std::vector<uint8_t> Encode(const AgentHello& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.Str(m.name);
  w.Str(m.host);
  w.I32(m.pid);
  w.U32(m.cores);
  w.U64(m.mem_bytes);
  w.U32(m.requested_node);
  return out;
}

StatusOr<AgentHello> DecodeHello(std::span<const uint8_t> b) {
  Reader r(b);
  AgentHello m;
  if (!r.Str(&m.name, 256) || !r.Str(&m.host, 256) || !r.I32(&m.pid) || !r.U32(&m.cores) ||
      !r.U64(&m.mem_bytes) || !r.U32(&m.requested_node) || r.remaining() != 0) {
    return Bad("agent hello");
  }
  return m;
}

std::vector<uint8_t> Encode(const AgentWelcome& m) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U32(m.node);
  w.Str(m.bootstrap);
  w.Str(m.provider);
  w.U64(m.global_memory_bytes);
  w.U32(m.fanout);
  return out;
}

StatusOr<AgentWelcome> DecodeWelcome(std::span<const uint8_t> b) {
  Reader r(b);
  AgentWelcome m;
  if (!r.U32(&m.node) || !r.Str(&m.bootstrap, 256) || !r.Str(&m.provider, 256) ||
      !r.U64(&m.global_memory_bytes) || !r.U32(&m.fanout) || r.remaining() != 0) {
    return Bad("agent welcome");
  }
  return m;
}

std::vector<uint8_t> EncodeU64(uint64_t v) {
  std::vector<uint8_t> out;
  Writer(&out).U64(v);
  return out;
}

StatusOr<uint64_t> DecodeU64(std::span<const uint8_t> b) {
  Reader r(b);
  uint64_t v;
  if (!r.U64(&v) || r.remaining() != 0) return Bad("u64 frame");
  return v;
}

std::vector<uint8_t> EncodeText(const std::string& text) {
  std::vector<uint8_t> out;
  Writer(&out).Str(text);
  return out;
}

StatusOr<std::string> DecodeText(std::span<const uint8_t> b) {
  Reader r(b);
  std::string s;
  if (!r.Str(&s, kMaxStringBytes) || r.remaining() != 0) return Bad("text frame");
  return s;
}

std::vector<uint8_t> EncodeJobBytes(uint64_t job, const std::string& bytes) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.U64(job);
  w.Bytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  return out;
}

StatusOr<std::pair<uint64_t, std::string>> DecodeJobBytes(std::span<const uint8_t> b) {
  Reader r(b);
  uint64_t job;
  std::span<const uint8_t> bytes;
  if (!r.U64(&job) || !r.Bytes(&bytes, kMaxOutputBytes) || r.remaining() != 0) {
    return Bad("job bytes frame");
  }
  return std::make_pair(job,
                        std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace gos::os
