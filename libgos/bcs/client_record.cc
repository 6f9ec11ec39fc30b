// The rank side: record and replay of its own decisions, and gos_wtime's clock, which is one
// of them (client_impl.h).
//
// Record and replay (docs/specs/rank-decisions.md): the nodeagents decide every match, but a
// few outcomes are decided here, by timing: whether a completion had been published when the
// program tested for it, which request a testany/waitany returned, whether an iprobe's answer
// had arrived, and clock values. In record mode each such decision is appended to the
// channel's record ring; in replay mode it is read from the recording and imposed.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#include "client_impl.h"
#include "gos/codec/bytes.h"

namespace gos::bcs::internal {

namespace {

constexpr uint64_t kStreamVersion = 1;
constexpr uint64_t kInlineValues = 15;  // values 0..14 fit in the first byte; 15 escapes
constexpr size_t kMaxRecord = 1 + 10 + 10;

const char* CallName(uint8_t c) {
  switch (c) {
    case kCallTest:
      return "gos_test";
    case kCallTestany:
      return "gos_testany";
    case kCallWaitany:
      return "gos_waitany";
    case kCallIprobe:
      return "gos_iprobe";
    case kCallWtime:
      return "gos_wtime";
    default:
      return "an unknown call";
  }
}

using codec::PutVarint;
using codec::UnZigZag;
using codec::ZigZag;

// One record: `count` (>= 1) identical events. Byte 0 = call | run bit (8) | min(value, 15)
// << 4; then varint(value - 15) if value >= 15; then varint(count - 2) if count >= 2.
size_t PutRecord(unsigned char* p, uint8_t call, uint64_t value, uint64_t count) {
  const uint64_t nibble = value < kInlineValues ? value : kInlineValues;
  p[0] = static_cast<unsigned char>(call | (count > 1 ? 8u : 0u) | (nibble << 4));
  size_t n = 1;
  if (value >= kInlineValues) n += PutVarint(p + n, value - kInlineValues);
  if (count > 1) n += PutVarint(p + n, count - 2);
  return n;
}

void CountDecision() {
  State& s = S();
  ++s.decisions_done;
  s.h->events.store(s.decisions_done, std::memory_order_relaxed);
}

// Appends n bytes to the record ring, waiting for room if may_block (else drops them when
// full; returns whether they were written).
bool WriteRec(const unsigned char* p, size_t n, bool may_block) {
  State& s = S();
  ChannelHeader* h = s.h;
  const uint64_t head = h->rec_head.load(std::memory_order_relaxed);
  auto room = [&] {  // seq_cst: BlockForRoom's ordering against the agent's
    const uint64_t used = head - h->rec_tail.load(std::memory_order_seq_cst);
    return used <= kRecBytes - n;
  };
  if (head - h->rec_tail.load(std::memory_order_acquire) > kRecBytes) {
    Fatal("corrupt channel: record ring overrun");
  }
  if (!room()) {
    if (!may_block) return false;
    BlockForRoom(room, /*flush=*/false);
  }
  unsigned char* ring = RecRing(s.base);
  for (size_t i = 0; i < n; ++i) ring[(head + i) % kRecBytes] = p[i];
  h->rec_head.store(head + n, std::memory_order_release);
  s.rec_head_mine = head + n;
  return true;
}

// Replay stops here: `note` for the agent (and stderr), the state, then sleep.
[[gnu::format(printf, 2, 3)]] [[noreturn]] void StopReplay(RankState st, const char* fmt, ...) {
  ChannelHeader* h = S().h;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->note, sizeof h->note, fmt, ap);
  va_end(ap);
  fprintf(stderr, "gos: %s\n", h->note);
  fflush(nullptr);
  h->state.store(st, std::memory_order_release);
  RingBell();
  SleepForever();
}

void LoadRecording() {
  State& s = S();
  s.rd_loaded = true;
  const std::string path = s.channel_path + ".replay";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    s.rd_error = "cannot open " + path + ": " + strerror(errno);
    return;
  }
  unsigned char buf[65536];
  for (;;) {
    const ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      s.rd_error = "cannot read " + path + ": " + strerror(errno);
      break;
    }
    if (r == 0) break;
    s.rd.insert(s.rd.end(), buf, buf + r);
  }
  close(fd);
}

bool GetVarint(uint64_t* v) {
  State& s = S();
  codec::Reader in(std::span<const uint8_t>(s.rd.data() + s.rd_pos, s.rd.size() - s.rd_pos));
  const bool ok = in.Var(v);
  s.rd_pos += in.position();
  return ok;
}

// Decodes the next event record into the current run; headers are applied on the way.
// False at the end of the recording or (rd_error set) at a malformed record.
bool NextRecord() {
  State& s = S();
  for (;;) {
    if (s.rd_pos >= s.rd.size()) return false;
    const size_t at = s.rd_pos;
    const unsigned char b = s.rd[s.rd_pos++];
    const uint8_t call = b & 7;
    uint64_t value = b >> 4;
    uint64_t count = 1;
    bool ok = true;
    if (value == kInlineValues) {
      uint64_t x = 0;
      ok = GetVarint(&x) && x <= UINT64_MAX - kInlineValues;
      value = kInlineValues + x;
    }
    if (ok && (b & 8) != 0) {
      uint64_t x = 0;
      ok = GetVarint(&x) && x <= UINT64_MAX - 2;
      count = x + 2;
    }
    if (ok && call == kCallStart) {
      uint64_t base = 0;
      uint64_t wbase = 0;
      ok = count == 1 && value == kStreamVersion && GetVarint(&base) && GetVarint(&wbase);
      if (ok) {
        s.rd_num = base;
        s.rd_prev_wtime = UnZigZag(wbase);
        continue;
      }
    }
    if (!ok || call > kCallWtime) {
      char why[96];
      snprintf(why, sizeof why, "malformed record at byte %zu", at);
      s.rd_error = why;
      return false;
    }
    s.rd_call = call;
    s.rd_value = value;
    s.rd_left = count;
    return true;
  }
}

// Advances the wtime base over k events of the current run.
void SkipEvents(uint64_t k) {
  State& s = S();
  if (s.rd_call == kCallWtime) {
    s.rd_prev_wtime = static_cast<int64_t>(static_cast<uint64_t>(s.rd_prev_wtime) +
                                           k * static_cast<uint64_t>(UnZigZag(s.rd_value)));
  }
  s.rd_num += k;
  s.rd_left -= k;
}

}  // namespace

// The channel's mode, read at every decision: a rank restored from a checkpoint for replay
// finds kModeReplay where it had kModeRecord. What it had not written yet is dropped: from
// here on its decisions come from the recording, which has those too.
uint32_t ModeNow() {
  State& s = S();
  const uint32_t m = s.h->mode.load(std::memory_order_relaxed);
  if (m == kModeReplay) s.run_count = 0;
  return m;
}

// Writes the pending run (record mode). A stream header goes first when this is the first
// write into this ring (a fresh channel: rec_head is not where we left it) or when the run
// does not follow the last written event (decisions taken meanwhile were not recorded), so
// that every stream decodes on its own.
void FlushRun(bool may_block) {
  State& s = S();
  if (s.run_count == 0 || s.h == nullptr) return;
  unsigned char buf[2 * kMaxRecord];
  size_t n = 0;
  const bool fresh =
      !s.rec_started || s.h->rec_head.load(std::memory_order_relaxed) != s.rec_head_mine;
  if (fresh || s.run_first != s.rec_next) {
    n += PutRecord(buf, kCallStart, kStreamVersion, 1);
    n += PutVarint(buf + n, s.run_first);
    n += PutVarint(buf + n, ZigZag(s.run_prev_wtime));
  }
  n += PutRecord(buf + n, s.run_call, s.run_value, s.run_count);
  const uint64_t next = s.run_first + s.run_count;
  s.run_count = 0;  // taken before a possible wait, which may end in Fatal -> AbortWith
  if (!WriteRec(buf, n, may_block)) return;
  s.rec_started = true;
  s.rec_next = next;
}

// Records a decision (record mode: into the pending run) and counts it (every mode but
// replay, which counts in Replayed).
void Decide(uint8_t call, uint64_t value, uint32_t mode) {
  State& s = S();
  if (mode == kModeRecord) {
    // A new strobe also ends the run: a rank that dies without finalize or abort then loses
    // at most the decisions of its last quantum.
    const uint64_t strobe = s.h->strobe.load(std::memory_order_relaxed);
    if (s.run_count > 0 && (s.run_call != call || s.run_value != value || s.run_strobe != strobe ||
                            s.run_first + s.run_count != s.decisions_done)) {
      FlushRun(true);
    }
    if (s.run_count == 0) {
      s.run_call = call;
      s.run_value = value;
      s.run_first = s.decisions_done;
      s.run_prev_wtime = s.rec_prev_wtime;
      s.run_strobe = strobe;
    }
    ++s.run_count;
  }
  CountDecision();
}

// Replay: the recorded outcome of this decision (for kCallWtime, the absolute ns value).
// Never returns when the recording has another call here or no event for it.
uint64_t Replayed(uint8_t call) {
  State& s = S();
  if (!s.rd_loaded) LoadRecording();
  const uint64_t want = s.decisions_done;  // 0-based; notes count from 1
  const auto dn = static_cast<unsigned long long>(want + 1);
  for (;;) {
    if (s.rd_left == 0) {
      if (NextRecord()) continue;
      if (!s.rd_error.empty()) {
        StopReplay(kStateLogEnd,
                   "rank %d needs decision %llu (%s) but the recording is unusable: %s", s.rank, dn,
                   CallName(call), s.rd_error.c_str());
      }
      StopReplay(kStateLogEnd,
                 "rank %d needs decision %llu (%s) but the recording ends after %llu: the "
                 "recorded run stopped here",
                 s.rank, dn, CallName(call), static_cast<unsigned long long>(s.rd_num));
    }
    if (s.rd_num < want) {
      SkipEvents(std::min(s.rd_left, want - s.rd_num));
      continue;
    }
    if (s.rd_num > want) {
      StopReplay(kStateLogEnd,
                 "rank %d needs decision %llu (%s) but the recording has none (it goes on at %llu)",
                 s.rank, dn, CallName(call), static_cast<unsigned long long>(s.rd_num + 1));
    }
    break;
  }
  if (s.rd_call != call) {
    StopReplay(kStateDiverged,
               "rank %d, decision %llu: the recording has %s here, the program called %s", s.rank,
               dn, CallName(s.rd_call), CallName(call));
  }
  const uint64_t value = s.rd_value;
  SkipEvents(1);
  CountDecision();
  return call == kCallWtime ? static_cast<uint64_t>(s.rd_prev_wtime) : value;
}

// Replay: a recorded flag (test, iprobe) must be 0 or 1.
bool ReplayedFlag(uint8_t call) {
  const uint64_t v = Replayed(call);
  if (v > 1) {
    StopReplay(kStateDiverged,
               "rank %d, decision %llu: the recording has %s returning %llu, not a flag (a corrupt "
               "recording)",
               S().rank, static_cast<unsigned long long>(S().decisions_done), CallName(call),
               static_cast<unsigned long long>(v));
  }
  return v == 1;
}

// Replay: a recorded index must name one of the program's active requests.
int ReplayedIndex(uint8_t call, uint64_t index, int n, const gos_request_t* reqs) {
  const auto dn = static_cast<unsigned long long>(S().decisions_done);
  if (index >= static_cast<uint64_t>(n)) {
    StopReplay(kStateDiverged,
               "rank %d, decision %llu: the recording has %s returning index %llu here, the "
               "program called it with %d requests",
               S().rank, dn, CallName(call), static_cast<unsigned long long>(index), n);
  }
  if (reqs[index] == GOS_REQUEST_NULL) {
    StopReplay(kStateDiverged,
               "rank %d, decision %llu: the recording has %s returning index %llu here, the "
               "program's request %llu is null",
               S().rank, dn, CallName(call), static_cast<unsigned long long>(index),
               static_cast<unsigned long long>(index));
  }
  return static_cast<int>(index);
}

// gos_wtime's nanoseconds. Before gos_init and after gos_finalize there is no channel, and
// the clock is read without being a decision.
int64_t WtimeNs() {
  if (!Ready()) return MonotonicNs();
  State& s = S();
  const uint32_t mode = ModeNow();
  if (mode == kModeReplay) return static_cast<int64_t>(Replayed(kCallWtime));
  const int64_t ns = MonotonicNs();
  if (mode == kModeRecord) {
    Decide(kCallWtime,
           ZigZag(static_cast<int64_t>(static_cast<uint64_t>(ns) -
                                       static_cast<uint64_t>(s.rec_prev_wtime))),
           mode);
    s.rec_prev_wtime = ns;
  } else {
    CountDecision();
  }
  return ns;
}

}  // namespace gos::bcs::internal
