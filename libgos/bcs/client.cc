// gos.h over the shared-memory channel (gos/bcs/channel.h, docs/specs/bcs-channel.md).
//
// Everything here runs in the user's process and holds no network state: a call turns into
// descriptors written to the channel's descriptor ring; the nodeagent answers with
// completions at strobes. State is process-global (gos.h is MPI_THREAD_FUNNELED-like: one
// thread at a time), kept in one State object. No exception leaves an extern "C" function:
// every entry point runs inside Guard, which turns one into a fatal error (gos_abort(1)).
//
// The pieces are declared in client_impl.h; this file holds the state, the channel, init and
// finalize, and the extern "C" entry points.
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "client_impl.h"
#include "gos/bcs/channel.h"
#include "gos/gos.h"
#include "testing.h"

namespace gos::bcs {
namespace internal {
namespace {

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

}  // namespace

// Never destroyed, so that calls from atexit handlers or static destructors still work.
State& S() {
  static State* state = new State;
  return *state;
}

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
  // stdio buffers hold the program's last output; _exit would drop it (and the round trace).
  fflush(nullptr);
  round_trace::FlushNow();
  if (replay) SleepForever();
  const int status = code & 0xff;
  _exit(status != 0 ? status : 1);
}

[[noreturn]] void Fatal(const char* what) {
  fprintf(stderr, "gos: rank %d: %s\n", S().rank, what);
  AbortWith(1);
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
  TraceHop(round_trace::Hop::kRankVisible, 0);
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

void Post(const Descriptor& d) {
  State& s = S();
  ChannelHeader* h = s.h;
  const uint64_t head = h->desc_head.load(std::memory_order_relaxed);
  // seq_cst: BlockForRoom's ordering against the agent's.
  auto room = [&] { return head - h->desc_tail.load(std::memory_order_seq_cst) < kDescSlots; };
  if (!room()) BlockForRoom(room, /*flush=*/true);
  DescRing(s.base)[head % kDescSlots] = d;
  h->desc_head.store(head + 1, std::memory_order_release);
  TraceHop(round_trace::Hop::kRankPost, 1);
}

namespace {

// Finalize warns once when it has waited this long for messages nobody received.
constexpr int64_t kFinalizeWarnNs = 5'000'000'000;

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
  s.job = h->job;
  if (long node = 0; parse(getenv("GOS_NODE"), &node)) s.node = static_cast<uint32_t>(node);
  round_trace::Start({round_trace::Role::kRank, s.node, s.rank, s.job});
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

}  // namespace
}  // namespace internal

namespace testing {

using internal::S;
using internal::State;

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

using gos::bcs::internal::Guard;
using gos::bcs::internal::S;

// Marks every program linked with this library: the coordinator looks for this ELF section
// (gos/os/program.h) to know that the job's nodeagents must run BCS for it. Lives in the same
// object as gos_init, so any program that communicates pulls it in.
[[gnu::section(".gos_bcs"), gnu::used, gnu::retain]] const char kGosBcsMarker[] = "gos bcs v1";

extern "C" {

int gos_init(void) {
  return Guard([] { return gos::bcs::internal::Init(); });
}

int gos_finalize(void) {
  return Guard([] { return gos::bcs::internal::Finalize(); });
}

int gos_initialized(void) { return S().initialized ? 1 : 0; }

int gos_finalized(void) { return S().finalized ? 1 : 0; }

void gos_abort(int code) { gos::bcs::internal::AbortWith(code); }

int gos_world_rank(void) { return gos::bcs::internal::Ready() ? S().rank : -1; }

int gos_world_size(void) { return gos::bcs::internal::Ready() ? S().size : -1; }

const gos_comm_t* gos_comm_world(void) { return &S().world; }

const gos_comm_t* gos_comm_self(void) { return &S().self; }

size_t gos_eager_bytes(void) { return S().eager_bytes; }

int gos_isend(const void* buf, size_t len, int dest, int tag, const gos_comm_t* comm, int flags,
              gos_request_t* req) {
  return Guard(
      [&] { return gos::bcs::internal::StartSend(buf, len, dest, tag, comm, flags, req); });
}

int gos_irecv(void* buf, size_t len, int source, int tag, const gos_comm_t* comm,
              gos_request_t* req) {
  return Guard([&] { return gos::bcs::internal::StartRecv(buf, len, source, tag, comm, req); });
}

int gos_wait(gos_request_t* req, gos_status_t* st) {
  return Guard([&] { return gos::bcs::internal::Wait(req, st); });
}

int gos_test(gos_request_t* req, int* flag, gos_status_t* st) {
  return Guard([&] { return gos::bcs::internal::Test(req, flag, st); });
}

int gos_cancel(const gos_request_t* req) {
  return Guard([&] { return gos::bcs::internal::Cancel(req); });
}

int gos_testany(int n, gos_request_t* reqs, int* index, int* flag, gos_status_t* st) {
  return Guard([&] { return gos::bcs::internal::Testany(n, reqs, index, flag, st); });
}

int gos_waitany(int n, gos_request_t* reqs, int* index, gos_status_t* st) {
  return Guard([&] { return gos::bcs::internal::Waitany(n, reqs, index, st); });
}

int gos_request_free(gos_request_t* req) {
  return Guard([&] {
    if (req == nullptr) return GOS_ERR_ARG;
    if (!gos::bcs::internal::Ready()) return GOS_ERR_NOT_INIT;
    gos::bcs::internal::Request* r = gos::bcs::internal::UserRequest(*req);
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
  return Guard([] { return gos::bcs::internal::ProgressWait(); });
}

int gos_iprobe(int source, int tag, const gos_comm_t* comm, int* flag, gos_status_t* st) {
  return Guard([&] { return gos::bcs::internal::Iprobe(source, tag, comm, flag, st); });
}

int gos_probe(int source, int tag, const gos_comm_t* comm, gos_status_t* st) {
  return Guard([&] { return gos::bcs::internal::Probe(source, tag, comm, st); });
}

int gos_barrier(const gos_comm_t* comm) {
  return Guard([&] { return gos::bcs::internal::Barrier(comm); });
}

int gos_bcast(void* buf, size_t len, int root, const gos_comm_t* comm) {
  return Guard([&] { return gos::bcs::internal::Bcast(buf, len, root, comm); });
}

int gos_reduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op, int root,
               const gos_comm_t* comm) {
  return Guard([&] { return gos::bcs::internal::Reduce(in, out, count, type, op, root, comm); });
}

int gos_allreduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op,
                  const gos_comm_t* comm) {
  return Guard([&] { return gos::bcs::internal::Allreduce(in, out, count, type, op, comm); });
}

double gos_wtime(void) {
  // One conversion in every mode, so a replayed value is bit for bit the recorded one.
  return Guard([] { return static_cast<double>(gos::bcs::internal::WtimeNs()) / 1e9; });
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
