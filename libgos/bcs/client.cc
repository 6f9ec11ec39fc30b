// gos.h over the shared-memory channel (gos/bcs/channel.h, docs/specs/bcs-channel.md).
//
// Everything here runs in the user's process and holds no network state: a call turns into
// descriptors written to the channel's descriptor ring; the nodeagent answers with
// completions at strobes. State is process-global (gos.h is MPI_THREAD_FUNNELED-like: one
// thread at a time), kept in one State object. No exception leaves an extern "C" function:
// every entry point runs inside Guard, which turns one into a fatal error (gos_abort(1)).
//
// Record and replay (docs/specs/rank-decisions.md): the nodeagents decide every match, but a
// few outcomes are decided here, by timing: whether a completion had been published when the
// program tested for it, which request a testany/waitany returned, whether an iprobe's answer
// had arrived, and clock values. In record mode each such decision is appended to the
// channel's record ring; in replay mode it is read from the recording and imposed.
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/gos.h"
#include "libgos/bcs/testing.h"

namespace gos::bcs {
namespace {

constexpr size_t kDefaultEagerBytes = 65536;
// Collective sequences stay below 2^30 so that they never clash with tags that other layers
// (the MPI subset) use on the collective context (they set bit 30).
constexpr int32_t kSeqMask = 0x3fffffff;
// A blocked rank re-checks its channel at least this often, whatever the agent does.
constexpr long kBlockTimeoutNs = 1'000'000'000;
// Finalize warns once when it has waited this long for messages nobody received.
constexpr int64_t kFinalizeWarnNs = 5'000'000'000;

enum class Kind : uint8_t {
  kSend,      // user request from gos_isend
  kRecv,      // user request from gos_irecv
  kInternal,  // probes and collectives: never handed to the user
};

struct Request {
  Kind kind = Kind::kSend;
  bool agent_done = false;     // the agent's completion arrived; `c` is valid
  bool eager = false;          // eager send: complete for the user from the start
  bool released = false;       // the user let go (reaped an eager send early, or request_free)
  void* copy = nullptr;        // eager send's private copy of the data; freed on completion
  bool cancel_posted = false;  // a receive the program asked to cancel (once)
  int32_t peer = -1, tag = 0;  // a send's world destination and tag (for messages about it)
  Completion c;
  gos_comm_t comm{};  // translates c.source into a communicator rank

  bool UserDone() const { return agent_done || eager; }
};

struct State {
  bool initialized = false;
  bool finalized = false;
  void* base = nullptr;  // the mapped channel
  ChannelHeader* h = nullptr;
  int rank = -1;
  int size = 0;
  size_t eager_bytes = kDefaultEagerBytes;
  uint64_t next_id = 1;
  size_t eager_pending = 0;  // eager sends whose completion has not arrived
  std::unordered_map<uint64_t, Request> requests;
  // Outstanding non-blocking probes by (source world rank, tag, context).
  std::map<std::tuple<int32_t, int32_t, uint64_t>, uint64_t> probes;
  std::unordered_map<uint64_t, int32_t> coll_seq;  // next collective sequence per context
  int self_world[1] = {0};
  gos_comm_t world{};
  gos_comm_t self{};
  std::string channel_path;  // the replay file is channel_path + ".replay"
  bool aborting = false;

  // Decisions taken so far, in every mode: after a CRIU restore this says how far the
  // program got, so a replay skips that many recorded events.
  uint64_t decisions_done = 0;

  // Record mode. Events are held as a run of identical ones and written when a different one
  // comes (or before blocking, at a new strobe, at finalize or abort).
  uint8_t run_call = 0;
  uint64_t run_value = 0;
  uint64_t run_count = 0;      // 0: no pending run
  uint64_t run_first = 0;      // decision number (0-based) of the run's first event
  int64_t run_prev_wtime = 0;  // stream's wtime base before the run's first event
  uint64_t run_strobe = 0;     // h->strobe when the run started
  int64_t rec_prev_wtime = 0;  // last recorded wtime (ns): the next delta's base
  bool rec_started = false;    // a stream header was written into this channel's ring
  uint64_t rec_next = 0;       // decision number the decoder gives the next written event
  uint64_t rec_head_mine = 0;  // rec_head after our last write (another value: a new ring)

  // Replay mode: the recording, decoded lazily.
  bool rd_loaded = false;
  std::string rd_error;           // why the recording cannot be read (then it "ends" at once)
  std::vector<unsigned char> rd;  // the whole file
  size_t rd_pos = 0;              // next record
  uint8_t rd_call = 0;            // current run
  uint64_t rd_value = 0;
  uint64_t rd_left = 0;  // events of the current run not yet taken
  uint64_t rd_num = 0;   // decision number (0-based) of the next event
  int64_t rd_prev_wtime = 0;
};

// Never destroyed, so that calls from atexit handlers or static destructors still work.
State& S() {
  static State* state = new State;
  return *state;
}

void FlushRun(bool may_block);

// A replayed rank that must not go on (it diverged, the recording ended, or it aborted) waits
// here for the agent, which freezes the job for inspection and later kills it.
[[noreturn]] void SleepForever() {
  for (;;) pause();
}

[[noreturn]] void AbortWith(int code) {
  State& s = S();
  const bool first = !s.aborting;
  s.aborting = true;
  bool replay = false;
  if (s.h != nullptr) {
    replay = s.h->mode.load(std::memory_order_relaxed) == kModeReplay;
    // The recorded run's last decisions, without waiting for ring room: the wait itself may be
    // what failed (then this is not the first call).
    if (first && !replay) FlushRun(false);
    s.h->abort_code.store(code, std::memory_order_relaxed);
    s.h->state.store(kStateAborted, std::memory_order_release);
    s.h->bell.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&s.h->bell), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
  // stdio buffers hold the program's last output; _exit would drop it.
  fflush(nullptr);
  if (replay) SleepForever();
  const int status = code & 0xff;
  _exit(status != 0 ? status : 1);
}

[[noreturn]] void Fatal(const char* what) {
  fprintf(stderr, "gos: rank %d: %s\n", S().rank, what);
  AbortWith(1);
}

template <typename F>
auto Guard(F&& f) noexcept -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    Fatal("out of memory");
  } catch (...) {
    Fatal("internal error");
  }
}

uint32_t* Word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

void FutexWake(std::atomic<uint32_t>& a) {
  syscall(SYS_futex, Word(a), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void FutexWait(std::atomic<uint32_t>& a, uint32_t expected, long timeout_ns) {
  timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
  syscall(SYS_futex, Word(a), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void RingBell() {
  ChannelHeader* h = S().h;
  h->bell.fetch_add(1, std::memory_order_release);
  FutexWake(h->bell);
}

// The agent's bell thread watches for "every rank of the row blocked": it needs a ring when a
// rank blocks, finishes or stops, not when it runs again (which only makes "all blocked"
// false) nor when it posts (what is posted counts only once all are blocked, and the bell
// thread looks at it then). Each ring woke that thread; a Jacobi iteration rang ~8 times a
// rank, and the wake-ups took more CPU than the ranks' own compute.
void SetState(RankState st) {
  S().h->state.store(st, std::memory_order_release);
  if (st != kStateRunning) RingBell();
}

bool Ready() {
  const State& s = S();
  return s.initialized && !s.finalized;
}

int MapError(int32_t e) {
  switch (e) {
    case kOk:
      return GOS_OK;
    case kErrTruncate:
      return GOS_ERR_TRUNCATE;
    case kErrRank:
      return GOS_ERR_RANK;
    default:
      return GOS_ERR_ARG;
  }
}

void OnCompletion(const Completion& c) {
  State& s = S();
  auto it = s.requests.find(c.req);
  if (it == s.requests.end()) return;  // not ours (a corrupt agent); nothing to update
  Request& r = it->second;
  if (r.agent_done) return;
  r.agent_done = true;
  r.c = c;
  if (r.eager) {
    free(r.copy);
    r.copy = nullptr;
    --s.eager_pending;
  }
  if (r.released) s.requests.erase(it);
}

// Consumes every published completion; returns how many.
size_t Progress() {
  State& s = S();
  ChannelHeader* h = s.h;
  const uint64_t head = h->compl_head.load(std::memory_order_acquire);
  uint64_t tail = h->compl_tail.load(std::memory_order_relaxed);
  if (head == tail) return 0;
  if (head - tail > kComplSlots) Fatal("corrupt channel: completion ring overrun");
  const Completion* ring = ComplRing(s.base);
  // The agent keeps completions back only when the ring is full: then it waits for room.
  const bool was_full = head - tail == kComplSlots;
  size_t n = 0;
  for (; tail != head; ++tail, ++n) OnCompletion(ring[tail % kComplSlots]);
  h->compl_tail.store(tail, std::memory_order_release);
  if (was_full) RingBell();
  return n;
}

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void AddBlocked(int64_t since_ns) {
  ChannelHeader* h = S().h;
  const uint64_t d = static_cast<uint64_t>(MonotonicNs() - since_ns);
  // The rank is the only writer: no read-modify-write instruction needed.
  h->blocked_ns.store(h->blocked_ns.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}

// Blocks (state kStateBlocked, sleeping on `wake`) until done() holds. Before sleeping it
// writes the pending record run (unless flush is false: the caller is that write), so the
// agent has every decision taken before a blocked rank.
template <typename Pred>
void BlockUntil(Pred done, bool flush = true) {
  ChannelHeader* h = S().h;
  Progress();
  if (done()) return;
  if (flush) {
    FlushRun(true);
    Progress();
    if (done()) return;
  }
  const int64_t t0 = MonotonicNs();
  for (;;) {
    const uint32_t w = h->wake.load(std::memory_order_acquire);
    SetState(kStateBlocked);
    // A completion published between the check above and the state change would otherwise
    // be missed until the timeout: the agent bumped `wake` before we read it.
    Progress();
    if (!done()) FutexWait(h->wake, w, kBlockTimeoutNs);
    SetState(kStateRunning);
    Progress();
    if (done()) break;
  }
  AddBlocked(t0);
}

void Post(const Descriptor& d) {
  State& s = S();
  ChannelHeader* h = s.h;
  const uint64_t head = h->desc_head.load(std::memory_order_relaxed);
  auto room = [&] { return head - h->desc_tail.load(std::memory_order_acquire) < kDescSlots; };
  if (!room()) BlockUntil(room);
  DescRing(s.base)[head % kDescSlots] = d;
  h->desc_head.store(head + 1, std::memory_order_release);
}

// ---- Decisions: record and replay (docs/specs/rank-decisions.md) ----

// Call kinds of the decision stream (3 bits).
enum Call : uint8_t {
  kCallTest = 0,     // value: the flag returned (0 or 1)
  kCallTestany = 1,  // value: 0 = none, i + 1 = index i
  kCallWaitany = 2,  // value: the index
  kCallIprobe = 3,   // value: 0 = the outstanding probe's answer was pending, 1 = answered
  kCallWtime = 4,    // value: zigzag(ns - previous wtime ns)
  kCallStart = 7,    // stream header: value = version, then varint base, varint zigzag wbase
};
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

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1)); }

size_t PutVarint(unsigned char* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<unsigned char>(v);
  return n;
}

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

// The channel's mode, read at every decision: a rank restored from a checkpoint for replay
// finds kModeReplay where it had kModeRecord. What it had not written yet is dropped: from
// here on its decisions come from the recording, which has those too.
uint32_t ModeNow() {
  State& s = S();
  const uint32_t m = s.h->mode.load(std::memory_order_relaxed);
  if (m == kModeReplay) s.run_count = 0;
  return m;
}

// Appends n bytes to the record ring, waiting for room if may_block (else drops them when
// full; returns whether they were written).
bool WriteRec(const unsigned char* p, size_t n, bool may_block) {
  State& s = S();
  ChannelHeader* h = s.h;
  const uint64_t head = h->rec_head.load(std::memory_order_relaxed);
  auto room = [&] {
    const uint64_t used = head - h->rec_tail.load(std::memory_order_acquire);
    return used <= kRecBytes - n;
  };
  if (head - h->rec_tail.load(std::memory_order_acquire) > kRecBytes) {
    Fatal("corrupt channel: record ring overrun");
  }
  if (!room()) {
    if (!may_block) return false;
    BlockUntil(room, /*flush=*/false);
  }
  unsigned char* ring = RecRing(s.base);
  for (size_t i = 0; i < n; ++i) ring[(head + i) % kRecBytes] = p[i];
  h->rec_head.store(head + n, std::memory_order_release);
  s.rec_head_mine = head + n;
  return true;
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
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (s.rd_pos >= s.rd.size()) return false;
    const unsigned char b = s.rd[s.rd_pos++];
    x |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = x;
      return true;
    }
  }
  return false;
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

uint64_t NewRequest(Kind kind, const gos_comm_t* comm) {
  State& s = S();
  const uint64_t id = s.next_id++;
  Request& r = s.requests[id];
  r.kind = kind;
  if (comm != nullptr) r.comm = *comm;
  return id;
}

int CheckComm(const gos_comm_t* c) {
  if (c == nullptr || c->size <= 0 || c->rank < 0 || c->rank >= c->size) return GOS_ERR_ARG;
  if (c->world == nullptr && c->size != S().size) return GOS_ERR_ARG;
  return GOS_OK;
}

int32_t CommToWorld(const gos_comm_t& c, int r) { return c.world != nullptr ? c.world[r] : r; }

int WorldToComm(const gos_comm_t& c, int w) {
  if (w < 0 || w >= S().size) return -1;
  if (c.world == nullptr) return w;
  if (c.world_to_comm != nullptr) return c.world_to_comm[w];
  for (int i = 0; i < c.size; ++i) {
    if (c.world[i] == w) return i;
  }
  return -1;
}

void EmptyStatus(gos_status_t* st) {
  if (st != nullptr) *st = gos_status_t{-1, -1, 0, GOS_OK};
}

void FillStatus(const Request& r, gos_status_t* st) {
  if (st == nullptr) return;
  if (r.kind == Kind::kSend) {
    *st = gos_status_t{-1, -1, 0, r.agent_done ? MapError(r.c.error) : GOS_OK};
    if (r.agent_done && (r.c.flags & kComplCancelled) != 0) st->cancelled = 1;
    return;
  }
  *st = gos_status_t{WorldToComm(r.comm, r.c.source), r.c.tag, static_cast<size_t>(r.c.len),
                     MapError(r.c.error)};
  if (r.agent_done && (r.c.flags & kComplCancelled) != 0) {
    st->source = -1;
    st->tag = -1;
    st->cancelled = 1;
  }
}

// Hands a user-visible-complete request back to the user: fills st, drops it (or, for an
// eager send still owed a completion, marks it released). Returns the request's error.
int Reap(uint64_t id, gos_status_t* st) {
  State& s = S();
  auto it = s.requests.find(id);
  Request& r = it->second;
  FillStatus(r, st);
  const int err = r.agent_done ? MapError(r.c.error) : GOS_OK;
  if (r.agent_done) {
    s.requests.erase(it);
  } else {
    r.released = true;
  }
  return err;
}

// The user request `id`, or nullptr if it is not one.
Request* UserRequest(uint64_t id) {
  State& s = S();
  auto it = s.requests.find(id);
  if (it == s.requests.end() || it->second.released || it->second.kind == Kind::kInternal) {
    return nullptr;
  }
  return &it->second;
}

int StartSend(const void* buf, size_t len, int dest, int tag, const gos_comm_t* comm, int flags,
              uint64_t* id) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if ((buf == nullptr && len > 0) || id == nullptr) return GOS_ERR_ARG;
  if (dest < 0 || dest >= comm->size) return GOS_ERR_RANK;
  if (tag < 0) return GOS_ERR_TAG;
  State& s = S();
  Progress();  // keeps eager copies from piling up in programs that never wait
  Descriptor d;
  d.context = comm->ctx;
  d.len = len;
  d.op = static_cast<uint32_t>(Op::kSend);
  d.peer = CommToWorld(*comm, dest);
  d.tag = tag;
  const bool eager = (flags & GOS_SEND_SYNC) == 0 && len <= s.eager_bytes;
  void* copy = nullptr;
  if (eager && len > 0) {
    copy = malloc(len);
    if (copy == nullptr) throw std::bad_alloc();
    memcpy(copy, buf, len);
  }
  d.req = NewRequest(Kind::kSend, comm);
  Request& r = s.requests[d.req];
  r.peer = d.peer;
  r.tag = tag;
  if (eager) {
    r.eager = true;
    r.copy = copy;
    ++s.eager_pending;
    d.addr = reinterpret_cast<uint64_t>(copy);
  } else {
    d.addr = reinterpret_cast<uint64_t>(buf);
    if ((flags & GOS_SEND_SYNC) != 0) d.flags |= kFlagSync;
  }
  Post(d);
  *id = d.req;
  return GOS_OK;
}

int StartRecv(void* buf, size_t len, int source, int tag, const gos_comm_t* comm, uint64_t* id) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if ((buf == nullptr && len > 0) || id == nullptr) return GOS_ERR_ARG;
  if (source != GOS_ANY_SOURCE && (source < 0 || source >= comm->size)) return GOS_ERR_RANK;
  if (tag < 0 && tag != GOS_ANY_TAG) return GOS_ERR_TAG;
  Progress();
  Descriptor d;
  d.req = NewRequest(Kind::kRecv, comm);
  d.context = comm->ctx;
  d.addr = reinterpret_cast<uint64_t>(buf);
  d.len = len;
  d.op = static_cast<uint32_t>(Op::kRecv);
  d.peer = source == GOS_ANY_SOURCE ? kAnySource : CommToWorld(*comm, source);
  d.tag = tag == GOS_ANY_TAG ? kAnyTag : tag;
  Post(d);
  *id = d.req;
  return GOS_OK;
}

int Cancel(const gos_request_t* req) {
  if (req == nullptr) return GOS_ERR_ARG;
  if (*req == GOS_REQUEST_NULL) return GOS_OK;
  if (!Ready()) return GOS_ERR_NOT_INIT;
  Request* r = UserRequest(*req);
  if (r == nullptr) return GOS_ERR_REQUEST;
  // An eager send is complete for the user from the start: nothing left to cancel.
  if ((r->kind != Kind::kRecv && r->kind != Kind::kSend) || r->UserDone() || r->cancel_posted) {
    return GOS_OK;
  }
  r->cancel_posted = true;
  Descriptor d;
  d.req = *req;
  d.op = static_cast<uint32_t>(Op::kCancel);
  Post(d);
  return GOS_OK;
}

int Wait(gos_request_t* req, gos_status_t* st) {
  if (req == nullptr) return GOS_ERR_ARG;
  if (*req == GOS_REQUEST_NULL) {
    EmptyStatus(st);
    return GOS_OK;
  }
  if (!Ready()) return GOS_ERR_NOT_INIT;
  const uint64_t id = *req;
  if (UserRequest(id) == nullptr) return GOS_ERR_REQUEST;
  BlockUntil([id] { return S().requests.at(id).UserDone(); });
  *req = GOS_REQUEST_NULL;
  return Reap(id, st);
}

// Posts an internal descriptor (probe or collective) and waits for its completion.
int RunInternal(Descriptor d, const gos_comm_t* comm, Completion* out) {
  State& s = S();
  const uint64_t id = NewRequest(Kind::kInternal, comm);
  d.req = id;
  Post(d);
  BlockUntil([&] { return s.requests.at(id).agent_done; });
  const Completion c = s.requests.at(id).c;
  s.requests.erase(id);
  if (out != nullptr) *out = c;
  return MapError(c.error);
}

int32_t NextSeq(uint64_t ctx) {
  int32_t& next = S().coll_seq[ctx];
  const int32_t seq = next;
  next = (next + 1) & kSeqMask;
  return seq;
}

int Init() {
  State& s = S();
  if (s.initialized) return s.finalized ? GOS_ERR_NOT_INIT : GOS_OK;
  auto parse = [](const char* v, long* out) {
    if (v == nullptr || *v == '\0') return false;
    char* end = nullptr;
    errno = 0;
    *out = strtol(v, &end, 10);
    return errno == 0 && *end == '\0' && *out >= 0 && *out <= INT_MAX;
  };
  long rank = -1;
  long size = -1;
  const bool have_rank = parse(getenv("GOS_RANK"), &rank);
  const bool have_size = parse(getenv("GOS_SIZE"), &size);
  char prefix[48];
  if (have_rank) {
    snprintf(prefix, sizeof prefix, "gos: rank %ld: ", rank);
  } else {
    snprintf(prefix, sizeof prefix, "gos: ");
  }
  const char* path = getenv("GOS_CHANNEL");
  if (path == nullptr || *path == '\0') {
    fprintf(stderr, "%sno GOS_CHANNEL in the environment: run this program with gos-run\n", prefix);
    return GOS_ERR_CHANNEL;
  }
  if (!have_rank || !have_size || size == 0 || rank >= size) {
    fprintf(stderr, "%sGOS_RANK/GOS_SIZE missing or invalid (GOS_RANK=%s GOS_SIZE=%s)\n", prefix,
            getenv("GOS_RANK") ? getenv("GOS_RANK") : "",
            getenv("GOS_SIZE") ? getenv("GOS_SIZE") : "");
    return GOS_ERR_CHANNEL;
  }
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "%scannot open channel %s: %s\n", prefix, path, strerror(errno));
    return GOS_ERR_CHANNEL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || static_cast<uint64_t>(sb.st_size) < kChannelBytes) {
    fprintf(stderr, "%schannel %s is too small (%lld bytes, want %zu)\n", prefix, path,
            static_cast<long long>(sb.st_size), kChannelBytes);
    close(fd);
    return GOS_ERR_CHANNEL;
  }
  void* base = mmap(nullptr, kChannelBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  close(fd);
  if (base == MAP_FAILED) {
    fprintf(stderr, "%scannot map channel %s: %s\n", prefix, path, strerror(map_errno));
    return GOS_ERR_CHANNEL;
  }
  auto* h = static_cast<ChannelHeader*>(base);
  const char* bad = nullptr;
  char why[160];
  if (h->magic != kChannelMagic) {
    snprintf(why, sizeof why, "not a gos channel (magic 0x%08x)", h->magic);
    bad = why;
  } else if (h->version != kChannelVersion) {
    snprintf(why, sizeof why, "channel version %u, this program speaks version %u", h->version,
             kChannelVersion);
    bad = why;
  } else if (h->rank != static_cast<uint32_t>(rank) || h->size != static_cast<uint32_t>(size)) {
    snprintf(why, sizeof why, "the channel belongs to rank %u of %u, not rank %ld of %ld", h->rank,
             h->size, rank, size);
    bad = why;
  }
  if (bad != nullptr) {
    fprintf(stderr, "%s%s: %s\n", prefix, path, bad);
    munmap(base, kChannelBytes);
    return GOS_ERR_CHANNEL;
  }
  s.base = base;
  s.h = h;
  s.channel_path = path;
  s.rank = static_cast<int>(rank);
  s.size = static_cast<int>(size);
  s.eager_bytes = kDefaultEagerBytes;
  if (long eager = 0; parse(getenv("GOS_EAGER_BYTES"), &eager)) {
    s.eager_bytes = static_cast<size_t>(eager);
  }
  s.self_world[0] = s.rank;
  s.world = gos_comm_t{GOS_CTX_WORLD, s.size, s.rank, nullptr, nullptr};
  s.self = gos_comm_t{GOS_CTX_SELF, 1, 0, s.self_world, nullptr};
  s.initialized = true;
  SetState(kStateRunning);
  return GOS_OK;
}

int Finalize() {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  State& s = S();
  ModeNow();  // in replay, drops what was never written
  FlushRun(true);
  // The agent still reads eager copies until it completes them: until a rank receives each
  // message. A program that never receives one waits here for good; say so (once) instead of
  // hanging silently.
  const int64_t since = MonotonicNs();
  bool warned = false;
  BlockUntil([&] {
    if (s.eager_pending == 0) return true;
    if (!warned && MonotonicNs() - since >= kFinalizeWarnNs) {
      warned = true;
      std::string which;
      size_t listed = 0;
      for (const auto& [id, r] : s.requests) {
        if (!r.eager || r.agent_done) continue;
        if (listed++ == 4) {
          which += ", ...";
          break;
        }
        which += (which.empty() ? "" : ", ") + std::string("to rank ") + std::to_string(r.peer) +
                 " tag " + std::to_string(r.tag);
      }
      fprintf(stderr,
              "gos: rank %d: MPI_Finalize has waited %lld s for %zu sent message(s) that no rank "
              "has received (%s); the job cannot end until they are: is a receive missing?\n",
              s.rank, static_cast<long long>(kFinalizeWarnNs / 1'000'000'000), s.eager_pending,
              which.c_str());
    }
    return false;
  });
  SetState(kStateFinalized);
  munmap(s.base, kChannelBytes);
  s.base = nullptr;
  s.h = nullptr;
  s.requests.clear();
  s.probes.clear();
  s.finalized = true;
  return GOS_OK;
}

int Iprobe(int source, int tag, const gos_comm_t* comm, int* flag, gos_status_t* st) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if (flag == nullptr) return GOS_ERR_ARG;
  if (source != GOS_ANY_SOURCE && (source < 0 || source >= comm->size)) return GOS_ERR_RANK;
  if (tag < 0 && tag != GOS_ANY_TAG) return GOS_ERR_TAG;
  State& s = S();
  *flag = 0;
  Progress();
  const int32_t peer = source == GOS_ANY_SOURCE ? kAnySource : CommToWorld(*comm, source);
  const auto key = std::make_tuple(peer, tag, comm->ctx);
  auto p = s.probes.find(key);
  if (p != s.probes.end()) {
    // Whether the outstanding probe's answer has arrived is timing: a decision.
    const uint64_t pid = p->second;
    const uint32_t mode = ModeNow();
    if (mode == kModeReplay) {
      if (!ReplayedFlag(kCallIprobe)) return GOS_OK;
      BlockUntil([pid] { return S().requests.at(pid).agent_done; });
    } else {
      const bool answered = s.requests.at(pid).agent_done;
      Decide(kCallIprobe, answered ? 1 : 0, mode);
      if (!answered) return GOS_OK;
    }
    auto it = s.requests.find(pid);
    const Request r = it->second;
    s.requests.erase(it);
    s.probes.erase(p);
    if ((r.c.flags & kComplFound) != 0 || r.c.error != kOk) {
      *flag = (r.c.flags & kComplFound) != 0 ? 1 : 0;
      FillStatus(r, st);
      return MapError(r.c.error);
    }
    // "Not found": ask again at once, so the next call gets an answer one strobe sooner.
  }
  Descriptor d;
  d.req = NewRequest(Kind::kInternal, comm);
  d.context = comm->ctx;
  d.op = static_cast<uint32_t>(Op::kProbe);
  d.peer = peer;
  d.tag = tag == GOS_ANY_TAG ? kAnyTag : tag;
  d.flags = kFlagNonBlocking;
  s.probes[key] = d.req;
  Post(d);
  return GOS_OK;
}

int Probe(int source, int tag, const gos_comm_t* comm, gos_status_t* st) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if (source != GOS_ANY_SOURCE && (source < 0 || source >= comm->size)) return GOS_ERR_RANK;
  if (tag < 0 && tag != GOS_ANY_TAG) return GOS_ERR_TAG;
  Descriptor d;
  d.context = comm->ctx;
  d.op = static_cast<uint32_t>(Op::kProbe);
  d.peer = source == GOS_ANY_SOURCE ? kAnySource : CommToWorld(*comm, source);
  d.tag = tag == GOS_ANY_TAG ? kAnyTag : tag;
  Completion c;
  const int err = RunInternal(d, comm, &c);
  if (st != nullptr) {
    *st = gos_status_t{WorldToComm(*comm, c.source), c.tag, static_cast<size_t>(c.len), err};
  }
  return err;
}

int Barrier(const gos_comm_t* comm) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  const int32_t seq = NextSeq(comm->ctx);
  if (comm->size == 1) return GOS_OK;
  Descriptor d;
  d.context = comm->ctx;
  d.op = static_cast<uint32_t>(Op::kBarrier);
  d.tag = seq;
  d.group_size = static_cast<uint32_t>(comm->size);
  return RunInternal(d, comm, nullptr);
}

int Bcast(void* buf, size_t len, int root, const gos_comm_t* comm) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if (root < 0 || root >= comm->size) return GOS_ERR_RANK;
  if (buf == nullptr && len > 0) return GOS_ERR_ARG;
  const int32_t seq = NextSeq(comm->ctx);
  if (comm->size == 1) return GOS_OK;
  Descriptor d;
  d.context = comm->ctx;
  d.addr = reinterpret_cast<uint64_t>(buf);
  d.len = len;
  d.op = static_cast<uint32_t>(Op::kBcast);
  d.peer = CommToWorld(*comm, root);
  d.tag = seq;
  d.group_size = static_cast<uint32_t>(comm->size);
  return RunInternal(d, comm, nullptr);
}

int WaitAll(const std::vector<uint64_t>& ids) {
  int first = GOS_OK;
  for (uint64_t id : ids) {
    gos_request_t r = id;
    const int e = Wait(&r, nullptr);
    if (first == GOS_OK) first = e;
  }
  return first;
}

// The arguments of a reduction to `root` (-1: every rank gets the result) are valid.
int CheckReduce(const void* in, const void* out, size_t count, gos_type_t type, gos_op_t op,
                int root, const gos_comm_t* comm) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if (root < -1 || root >= comm->size) return GOS_ERR_RANK;
  if (!gos_op_valid(op, type)) return GOS_ERR_ARG;  // also rejects out-of-range values
  const size_t tsize = gos_type_size(type);
  if (count > SIZE_MAX / tsize / static_cast<size_t>(comm->size)) return GOS_ERR_ARG;
  const bool stores = root < 0 || comm->rank == root;
  if (count > 0 && (in == nullptr || (stores && out == nullptr))) return GOS_ERR_ARG;
  return GOS_OK;
}

// Receives every other rank's contribution into its slot of a block of one slot per rank
// (this rank's own is copied in), sending this rank's to every rank of `to` on the way, then
// combines the slots in rank order into out: slot(r) = slot(r-1) op slot(r), so the result
// is ((in_0 op in_1) op ...) on whichever rank computes it.
int GatherAndCombine(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op,
                     const gos_comm_t* comm, int32_t seq, const std::vector<int>& to) {
  const size_t bytes = count * gos_type_size(type);
  gos_comm_t coll = *comm;
  coll.ctx |= GOS_CTX_COLLECTIVE_BIT;
  // Operator new aligns to 16, and bytes is a multiple of the type's size, so every slot is
  // aligned for the type.
  const size_t n = static_cast<size_t>(comm->size);
  std::vector<unsigned char> slots(n * bytes);
  auto slot = [&](size_t r) { return slots.data() + r * bytes; };
  memcpy(slot(static_cast<size_t>(comm->rank)), in, bytes);
  std::vector<uint64_t> ids;
  ids.reserve(n + to.size());
  uint64_t id = 0;
  int err = GOS_OK;
  for (int r = 0; r < comm->size && err == GOS_OK; ++r) {
    if (r == comm->rank) continue;
    err = StartRecv(slot(static_cast<size_t>(r)), bytes, r, seq, &coll, &id);
    if (err == GOS_OK) ids.push_back(id);
  }
  for (size_t i = 0; i < to.size() && err == GOS_OK; ++i) {
    err = StartSend(in, bytes, to[i], seq, &coll, 0, &id);
    if (err == GOS_OK) ids.push_back(id);
  }
  const int wait_err = WaitAll(ids);
  if (err == GOS_OK) err = wait_err;
  if (err != GOS_OK) return err;
  for (size_t r = 1; r < n; ++r) gos_reduce_local(slot(r - 1), slot(r), count, type, op);
  memcpy(out, slot(n - 1), bytes);
  return GOS_OK;
}

int Reduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op, int root,
           const gos_comm_t* comm) {
  if (int e = CheckReduce(in, out, count, type, op, root, comm); e != GOS_OK) return e;
  if (root < 0) return GOS_ERR_RANK;
  const int32_t seq = NextSeq(comm->ctx);
  if (count == 0) return GOS_OK;
  const size_t bytes = count * gos_type_size(type);
  if (comm->size == 1) {
    if (in != out) memmove(out, in, bytes);
    return GOS_OK;
  }
  if (comm->rank != root) {
    gos_comm_t coll = *comm;
    coll.ctx |= GOS_CTX_COLLECTIVE_BIT;
    uint64_t id = 0;
    if (int e = StartSend(in, bytes, root, seq, &coll, 0, &id); e != GOS_OK) return e;
    return WaitAll({id});
  }
  return GatherAndCombine(in, out, count, type, op, comm, seq, {});
}

// Allreduce. On up to kAllreduceDirectRanks ranks and kAllreduceDirectBytes of contributions
// in all (count x type size x ranks), every rank sends its contribution to every other and
// combines them all itself, in rank order, like Reduce's root: the same result bit for bit on
// every rank, in one strobe round instead of a reduce's and a broadcast's. Otherwise Reduce
// to rank 0 and Bcast: the direct exchange's ranks x (ranks - 1) messages cost more than the
// second round from 8 ranks on (1 double: 2 ranks 117-201 us against 186-323, 4 ranks 303-305
// against 325-403, 8 ranks 718-760 against 606-763, 16 ranks 2250-2390 against 978-1346;
// docs/benchmarks.md).
constexpr int kAllreduceDirectRanks = 4;
constexpr size_t kAllreduceDirectBytes = 16u << 10;

int Allreduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op,
              const gos_comm_t* comm) {
  if (int e = CheckReduce(in, out, count, type, op, -1, comm); e != GOS_OK) return e;
  const size_t bytes = count * gos_type_size(type);
  if (comm->size == 1 || comm->size > kAllreduceDirectRanks ||
      bytes * static_cast<size_t>(comm->size) > kAllreduceDirectBytes) {
    const int err = Reduce(in, out, count, type, op, 0, comm);
    if (err != GOS_OK || comm->size == 1) return err;
    return Bcast(out, bytes, 0, comm);
  }
  const int32_t seq = NextSeq(comm->ctx);
  if (count == 0) return GOS_OK;
  std::vector<int> others;
  for (int r = 0; r < comm->size; ++r) {
    if (r != comm->rank) others.push_back(r);
  }
  return GatherAndCombine(in, out, count, type, op, comm, seq, others);
}

int Test(gos_request_t* req, int* flag, gos_status_t* st) {
  if (req == nullptr || flag == nullptr) return GOS_ERR_ARG;
  *flag = 0;
  if (*req == GOS_REQUEST_NULL) {
    *flag = 1;
    EmptyStatus(st);
    return GOS_OK;
  }
  if (!Ready()) return GOS_ERR_NOT_INIT;
  const Request* r = UserRequest(*req);
  if (r == nullptr) return GOS_ERR_REQUEST;
  const uint64_t id = *req;
  Progress();
  // An eager send is complete from the start: no decision.
  if (!r->eager) {
    const uint32_t mode = ModeNow();
    if (mode == kModeReplay) {
      if (!ReplayedFlag(kCallTest)) return GOS_OK;  // even if it is done: not reaped
      BlockUntil([id] { return S().requests.at(id).UserDone(); });
    } else {
      const bool done = r->UserDone();
      Decide(kCallTest, done ? 1 : 0, mode);
      if (!done) return GOS_OK;
    }
  }
  *flag = 1;
  *req = GOS_REQUEST_NULL;
  return Reap(id, st);
}

// Validates the requests of testany/waitany. *active counts the non-null ones; *timing says
// whether the outcome can depend on timing: some active non-eager request comes before the
// first active eager send (which is complete from the start, so a scan never passes it).
int CheckAny(int n, const gos_request_t* reqs, int* active, bool* timing) {
  *active = 0;
  *timing = false;
  bool eager = false;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == GOS_REQUEST_NULL) continue;
    if (!Ready()) return GOS_ERR_NOT_INIT;
    const Request* r = UserRequest(reqs[i]);
    if (r == nullptr) return GOS_ERR_REQUEST;
    ++*active;
    if (r->eager) {
      eager = true;
    } else if (!eager) {
      *timing = true;
    }
  }
  return GOS_OK;
}

// The first request complete for the user, or -1.
int FirstDone(int n, const gos_request_t* reqs) {
  for (int i = 0; i < n; ++i) {
    if (reqs[i] != GOS_REQUEST_NULL && S().requests.at(reqs[i]).UserDone()) return i;
  }
  return -1;
}

int ReapAt(int i, gos_request_t* reqs, int* index, gos_status_t* st) {
  *index = i;
  const uint64_t id = reqs[i];
  reqs[i] = GOS_REQUEST_NULL;
  return Reap(id, st);
}

void BlockUntilDone(uint64_t id) {
  BlockUntil([id] { return S().requests.at(id).UserDone(); });
}

int Testany(int n, gos_request_t* reqs, int* index, int* flag, gos_status_t* st) {
  if (n < 0 || (n > 0 && reqs == nullptr) || index == nullptr || flag == nullptr) {
    return GOS_ERR_ARG;
  }
  *flag = 0;
  *index = GOS_UNDEFINED_INDEX;
  int active = 0;
  bool timing = false;
  if (int e = CheckAny(n, reqs, &active, &timing); e != GOS_OK) return e;
  if (active == 0) {
    *flag = 1;
    EmptyStatus(st);
    return GOS_OK;
  }
  Progress();
  int i = -1;
  const uint32_t mode = timing ? ModeNow() : kModeOff;
  if (timing && mode == kModeReplay) {
    const uint64_t v = Replayed(kCallTestany);
    if (v == 0) return GOS_OK;
    i = ReplayedIndex(kCallTestany, v - 1, n, reqs);
    BlockUntilDone(reqs[i]);
  } else {
    i = FirstDone(n, reqs);
    if (timing) Decide(kCallTestany, i < 0 ? 0 : static_cast<uint64_t>(i) + 1, mode);
    if (i < 0) return GOS_OK;
  }
  *flag = 1;
  return ReapAt(i, reqs, index, st);
}

int Waitany(int n, gos_request_t* reqs, int* index, gos_status_t* st) {
  if (n < 0 || (n > 0 && reqs == nullptr) || index == nullptr) return GOS_ERR_ARG;
  *index = GOS_UNDEFINED_INDEX;
  int active = 0;
  bool timing = false;
  if (int e = CheckAny(n, reqs, &active, &timing); e != GOS_OK) return e;
  if (active == 0) {
    EmptyStatus(st);
    return GOS_OK;
  }
  // With one active request (or an eager send first) the answer is forced.
  const bool decision = timing && active > 1;
  if (decision && ModeNow() == kModeReplay) {
    const int i = ReplayedIndex(kCallWaitany, Replayed(kCallWaitany), n, reqs);
    BlockUntilDone(reqs[i]);
    return ReapAt(i, reqs, index, st);
  }
  BlockUntil([&] { return FirstDone(n, reqs) >= 0; });
  // The mode again: the rank may have been checkpointed while blocked and restored to replay.
  const uint32_t mode = decision ? ModeNow() : kModeOff;
  if (decision && mode == kModeReplay) {
    const int i = ReplayedIndex(kCallWaitany, Replayed(kCallWaitany), n, reqs);
    BlockUntilDone(reqs[i]);
    return ReapAt(i, reqs, index, st);
  }
  const int i = FirstDone(n, reqs);
  if (decision) Decide(kCallWaitany, static_cast<uint64_t>(i), mode);
  return ReapAt(i, reqs, index, st);
}

int ProgressWait() {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  // In replay every outcome is imposed, so there is nothing to wait for: the caller's next
  // test blocks if the recording says it succeeded.
  if (ModeNow() == kModeReplay) {
    Progress();
    return GOS_OK;
  }
  if (Progress() > 0) return GOS_OK;
  ChannelHeader* h = S().h;
  FlushRun(true);
  const int64_t t0 = MonotonicNs();
  const uint32_t w = h->wake.load(std::memory_order_acquire);
  SetState(kStateBlocked);
  if (Progress() == 0) FutexWait(h->wake, w, kBlockTimeoutNs);
  SetState(kStateRunning);
  AddBlocked(t0);
  Progress();
  return GOS_OK;
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

}  // namespace

namespace testing {

void Reset() {
  State& s = S();
  for (auto& [id, r] : s.requests) free(r.copy);
  if (s.base != nullptr) munmap(s.base, kChannelBytes);
  s.~State();
  new (&s) State;
}

size_t EagerCopies() { return S().eager_pending; }

size_t OpenRequests() { return S().requests.size(); }

uint64_t DecisionsDone() { return S().decisions_done; }

}  // namespace testing
}  // namespace gos::bcs

using gos::bcs::Guard;
using gos::bcs::S;

// Marks every program linked with this library: the coordinator looks for this ELF section
// (gos/os/program.h) to know that the job's nodeagents must run BCS for it. Lives in the same
// object as gos_init, so any program that communicates pulls it in.
[[gnu::section(".gos_bcs"), gnu::used, gnu::retain]] const char kGosBcsMarker[] = "gos bcs v1";

extern "C" {

int gos_init(void) {
  return Guard([] { return gos::bcs::Init(); });
}

int gos_finalize(void) {
  return Guard([] { return gos::bcs::Finalize(); });
}

int gos_initialized(void) { return S().initialized ? 1 : 0; }

int gos_finalized(void) { return S().finalized ? 1 : 0; }

void gos_abort(int code) { gos::bcs::AbortWith(code); }

int gos_world_rank(void) { return gos::bcs::Ready() ? S().rank : -1; }

int gos_world_size(void) { return gos::bcs::Ready() ? S().size : -1; }

const gos_comm_t* gos_comm_world(void) { return &S().world; }

const gos_comm_t* gos_comm_self(void) { return &S().self; }

size_t gos_eager_bytes(void) { return S().eager_bytes; }

int gos_isend(const void* buf, size_t len, int dest, int tag, const gos_comm_t* comm, int flags,
              gos_request_t* req) {
  return Guard([&] { return gos::bcs::StartSend(buf, len, dest, tag, comm, flags, req); });
}

int gos_irecv(void* buf, size_t len, int source, int tag, const gos_comm_t* comm,
              gos_request_t* req) {
  return Guard([&] { return gos::bcs::StartRecv(buf, len, source, tag, comm, req); });
}

int gos_wait(gos_request_t* req, gos_status_t* st) {
  return Guard([&] { return gos::bcs::Wait(req, st); });
}

int gos_test(gos_request_t* req, int* flag, gos_status_t* st) {
  return Guard([&] { return gos::bcs::Test(req, flag, st); });
}

int gos_cancel(const gos_request_t* req) {
  return Guard([&] { return gos::bcs::Cancel(req); });
}

int gos_testany(int n, gos_request_t* reqs, int* index, int* flag, gos_status_t* st) {
  return Guard([&] { return gos::bcs::Testany(n, reqs, index, flag, st); });
}

int gos_waitany(int n, gos_request_t* reqs, int* index, gos_status_t* st) {
  return Guard([&] { return gos::bcs::Waitany(n, reqs, index, st); });
}

int gos_request_free(gos_request_t* req) {
  return Guard([&] {
    if (req == nullptr) return GOS_ERR_ARG;
    if (!gos::bcs::Ready()) return GOS_ERR_NOT_INIT;
    gos::bcs::Request* r = gos::bcs::UserRequest(*req);
    if (r == nullptr) return GOS_ERR_REQUEST;
    if (r->agent_done) {
      S().requests.erase(*req);
    } else {
      r->released = true;
    }
    *req = GOS_REQUEST_NULL;
    return GOS_OK;
  });
}

int gos_progress_wait(void) {
  return Guard([] { return gos::bcs::ProgressWait(); });
}

int gos_iprobe(int source, int tag, const gos_comm_t* comm, int* flag, gos_status_t* st) {
  return Guard([&] { return gos::bcs::Iprobe(source, tag, comm, flag, st); });
}

int gos_probe(int source, int tag, const gos_comm_t* comm, gos_status_t* st) {
  return Guard([&] { return gos::bcs::Probe(source, tag, comm, st); });
}

int gos_barrier(const gos_comm_t* comm) {
  return Guard([&] { return gos::bcs::Barrier(comm); });
}

int gos_bcast(void* buf, size_t len, int root, const gos_comm_t* comm) {
  return Guard([&] { return gos::bcs::Bcast(buf, len, root, comm); });
}

int gos_reduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op, int root,
               const gos_comm_t* comm) {
  return Guard([&] { return gos::bcs::Reduce(in, out, count, type, op, root, comm); });
}

int gos_allreduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op,
                  const gos_comm_t* comm) {
  return Guard([&] { return gos::bcs::Allreduce(in, out, count, type, op, comm); });
}

double gos_wtime(void) {
  // One conversion in every mode, so a replayed value is bit for bit the recorded one.
  return Guard([] { return static_cast<double>(gos::bcs::WtimeNs()) / 1e9; });
}

double gos_wtick(void) {
  timespec ts{};
  if (clock_getres(CLOCK_MONOTONIC, &ts) != 0) return 1e-9;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

const char* gos_error_string(int err) {
  switch (err) {
    case GOS_OK:
      return "success";
    case GOS_ERR_TRUNCATE:
      return "message truncated: longer than the receive buffer";
    case GOS_ERR_RANK:
      return "rank outside the communicator";
    case GOS_ERR_ARG:
      return "invalid argument";
    case GOS_ERR_NOT_INIT:
      return "gos_init has not been called (or gos_finalize has)";
    case GOS_ERR_CHANNEL:
      return "no channel to the nodeagent: not started by gos-run, or a corrupt channel";
    case GOS_ERR_REQUEST:
      return "invalid request";
    case GOS_ERR_TAG:
      return "invalid tag";
    default:
      return "unknown error";
  }
}

}  // extern "C"
