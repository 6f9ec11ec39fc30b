// gos.h over the shared-memory channel (gos/bcs/channel.h, docs/specs/bcs-channel.md).
//
// Everything here runs in the user's process and holds no network state: a call turns into
// descriptors written to the channel's descriptor ring; the nodeagent answers with
// completions at strobes. State is process-global (gos.h is MPI_THREAD_FUNNELED-like: one
// thread at a time), kept in one State object. No exception leaves an extern "C" function:
// every entry point runs inside Guard, which turns one into a fatal error (gos_abort(1)).
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
#include <map>
#include <new>
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

enum class Kind : uint8_t {
  kSend,      // user request from gos_isend
  kRecv,      // user request from gos_irecv
  kInternal,  // probes and collectives: never handed to the user
};

struct Request {
  Kind kind = Kind::kSend;
  bool agent_done = false;  // the agent's completion arrived; `c` is valid
  bool eager = false;       // eager send: complete for the user from the start
  bool released = false;    // the user let go (reaped an eager send early, or request_free)
  void* copy = nullptr;     // eager send's private copy of the data; freed on completion
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
};

// Never destroyed, so that calls from atexit handlers or static destructors still work.
State& S() {
  static State* state = new State;
  return *state;
}

[[noreturn]] void AbortWith(int code) {
  State& s = S();
  if (s.h != nullptr) {
    s.h->abort_code.store(code, std::memory_order_relaxed);
    s.h->state.store(kStateAborted, std::memory_order_release);
    s.h->bell.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&s.h->bell), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
  // stdio buffers hold the program's last output; _exit would drop it.
  fflush(nullptr);
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

void SetState(RankState st) {
  S().h->state.store(st, std::memory_order_release);
  RingBell();
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
  size_t n = 0;
  for (; tail != head; ++tail, ++n) OnCompletion(ring[tail % kComplSlots]);
  h->compl_tail.store(tail, std::memory_order_release);
  RingBell();  // the agent may hold completions waiting for room
  return n;
}

// Blocks (state kStateBlocked, sleeping on `wake`) until done() holds.
template <typename Pred>
void BlockUntil(Pred done) {
  ChannelHeader* h = S().h;
  for (;;) {
    Progress();
    if (done()) return;
    const uint32_t w = h->wake.load(std::memory_order_acquire);
    SetState(kStateBlocked);
    // A completion published between the check above and the state change would otherwise
    // be missed until the timeout: the agent bumped `wake` before we read it.
    Progress();
    if (!done()) FutexWait(h->wake, w, kBlockTimeoutNs);
    SetState(kStateRunning);
  }
}

void Post(const Descriptor& d) {
  State& s = S();
  ChannelHeader* h = s.h;
  const uint64_t head = h->desc_head.load(std::memory_order_relaxed);
  auto room = [&] { return head - h->desc_tail.load(std::memory_order_acquire) < kDescSlots; };
  if (!room()) BlockUntil(room);
  DescRing(s.base)[head % kDescSlots] = d;
  h->desc_head.store(head + 1, std::memory_order_release);
  RingBell();
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
    return;
  }
  *st = gos_status_t{WorldToComm(r.comm, r.c.source), r.c.tag, static_cast<size_t>(r.c.len),
                     MapError(r.c.error)};
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
  // The agent still reads eager copies until it completes them.
  BlockUntil([&] { return s.eager_pending == 0; });
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
    auto it = s.requests.find(p->second);
    if (!it->second.agent_done) return GOS_OK;
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

int Reduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op, int root,
           const gos_comm_t* comm) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if (root < 0 || root >= comm->size) return GOS_ERR_RANK;
  if (!gos_op_valid(op, type)) return GOS_ERR_ARG;  // also rejects out-of-range values
  const size_t tsize = gos_type_size(type);
  if (count > SIZE_MAX / tsize / static_cast<size_t>(comm->size)) return GOS_ERR_ARG;
  const bool is_root = comm->rank == root;
  if (count > 0 && (in == nullptr || (is_root && out == nullptr))) return GOS_ERR_ARG;
  const int32_t seq = NextSeq(comm->ctx);
  if (count == 0) return GOS_OK;
  const size_t bytes = count * tsize;
  if (comm->size == 1) {
    if (in != out) memmove(out, in, bytes);
    return GOS_OK;
  }
  gos_comm_t coll = *comm;
  coll.ctx |= GOS_CTX_COLLECTIVE_BIT;
  uint64_t id = 0;
  if (!is_root) {
    if (int e = StartSend(in, bytes, root, seq, &coll, 0, &id); e != GOS_OK) return e;
    return WaitAll({id});
  }
  // One slot per rank; operator new aligns to 16, and bytes is a multiple of the type's
  // size, so every slot is aligned for the type.
  const size_t n = static_cast<size_t>(comm->size);
  std::vector<unsigned char> slots(n * bytes);
  auto slot = [&](size_t r) { return slots.data() + r * bytes; };
  memcpy(slot(static_cast<size_t>(root)), in, bytes);
  std::vector<uint64_t> ids;
  ids.reserve(n);
  int err = GOS_OK;
  for (int r = 0; r < comm->size && err == GOS_OK; ++r) {
    if (r == root) continue;
    err = StartRecv(slot(static_cast<size_t>(r)), bytes, r, seq, &coll, &id);
    if (err == GOS_OK) ids.push_back(id);
  }
  const int wait_err = WaitAll(ids);
  if (err == GOS_OK) err = wait_err;
  if (err != GOS_OK) return err;
  // In rank order: slot(r) = slot(r-1) op slot(r), so the result is ((in_0 op in_1) op ...).
  for (size_t r = 1; r < n; ++r) gos_reduce_local(slot(r - 1), slot(r), count, type, op);
  memcpy(out, slot(n - 1), bytes);
  return GOS_OK;
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
  return Guard([&] {
    if (req == nullptr || flag == nullptr) return GOS_ERR_ARG;
    *flag = 0;
    if (*req == GOS_REQUEST_NULL) {
      *flag = 1;
      gos::bcs::EmptyStatus(st);
      return GOS_OK;
    }
    if (!gos::bcs::Ready()) return GOS_ERR_NOT_INIT;
    if (gos::bcs::UserRequest(*req) == nullptr) return GOS_ERR_REQUEST;
    gos::bcs::Progress();
    if (!S().requests.at(*req).UserDone()) return GOS_OK;
    *flag = 1;
    const uint64_t id = *req;
    *req = GOS_REQUEST_NULL;
    return gos::bcs::Reap(id, st);
  });
}

int gos_testany(int n, gos_request_t* reqs, int* index, int* flag, gos_status_t* st) {
  return Guard([&] {
    if (n < 0 || (n > 0 && reqs == nullptr) || index == nullptr || flag == nullptr) {
      return GOS_ERR_ARG;
    }
    *flag = 0;
    *index = GOS_UNDEFINED_INDEX;
    bool any = false;
    for (int i = 0; i < n; ++i) {
      if (reqs[i] == GOS_REQUEST_NULL) continue;
      if (!gos::bcs::Ready()) return GOS_ERR_NOT_INIT;
      if (gos::bcs::UserRequest(reqs[i]) == nullptr) return GOS_ERR_REQUEST;
      any = true;
    }
    if (!any) {
      *flag = 1;
      gos::bcs::EmptyStatus(st);
      return GOS_OK;
    }
    gos::bcs::Progress();
    for (int i = 0; i < n; ++i) {
      if (reqs[i] == GOS_REQUEST_NULL || !S().requests.at(reqs[i]).UserDone()) continue;
      *flag = 1;
      *index = i;
      const uint64_t id = reqs[i];
      reqs[i] = GOS_REQUEST_NULL;
      return gos::bcs::Reap(id, st);
    }
    return GOS_OK;
  });
}

int gos_waitany(int n, gos_request_t* reqs, int* index, gos_status_t* st) {
  return Guard([&] {
    if (n < 0 || (n > 0 && reqs == nullptr) || index == nullptr) return GOS_ERR_ARG;
    int flag = 0;
    int err = gos_testany(n, reqs, index, &flag, st);
    if (err != GOS_OK || flag) return err;
    gos::bcs::BlockUntil([&] {
      for (int i = 0; i < n; ++i) {
        if (reqs[i] != GOS_REQUEST_NULL && S().requests.at(reqs[i]).UserDone()) {
          return true;
        }
      }
      return false;
    });
    return gos_testany(n, reqs, index, &flag, st);
  });
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
  return Guard([] {
    if (!gos::bcs::Ready()) return GOS_ERR_NOT_INIT;
    if (gos::bcs::Progress() > 0) return GOS_OK;
    gos::bcs::ChannelHeader* h = S().h;
    const uint32_t w = h->wake.load(std::memory_order_acquire);
    gos::bcs::SetState(gos::bcs::kStateBlocked);
    if (gos::bcs::Progress() == 0) gos::bcs::FutexWait(h->wake, w, gos::bcs::kBlockTimeoutNs);
    gos::bcs::SetState(gos::bcs::kStateRunning);
    gos::bcs::Progress();
    return GOS_OK;
  });
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
  return Guard([&] {
    if (count > 0 && out == nullptr) return GOS_ERR_ARG;
    const int err = gos::bcs::Reduce(in, out, count, type, op, 0, comm);
    if (err != GOS_OK) return err;
    // Reduce validated type and count; the product cannot overflow.
    return gos::bcs::Bcast(out, count * gos_type_size(type), 0, comm);
  });
}

double gos_wtime(void) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
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
