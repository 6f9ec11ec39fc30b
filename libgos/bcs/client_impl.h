// The rank side of BCS communication (gos.h over the shared-memory channel): the process-global
// state and the functions its pieces share. Private to gos_rank, which users' programs link:
// it uses libc and libstdc++ only. The definitions are split by concern:
//   client.cc         the state, the channel (bell, completions, posting), init/finalize and
//                     the extern "C" entry points of gos.h
//   client_p2p.cc     requests, point-to-point posting (send, receive, cancel) and probes
//   client_wait.cc    completion: wait, test, testany, waitany, progress_wait
//   client_coll.cc    collectives: barrier, bcast, reduce, allreduce
//   client_record.cc  record and replay of the rank's own decisions, and gos_wtime's clock
#ifndef GOS_LIBGOS_BCS_CLIENT_IMPL_H_
#define GOS_LIBGOS_BCS_CLIENT_IMPL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/gos.h"
#include "gos/round_trace.h"

namespace gos::bcs::internal {

constexpr size_t kDefaultEagerBytes = 65536;
// A blocked rank re-checks its channel at least this often, whatever the agent does.
constexpr long kBlockTimeoutNs = 1'000'000'000;

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
  uint64_t job = 0;   // the channel's job (round trace)
  uint32_t node = 0;  // $GOS_NODE (round trace)
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

// The process-global state (client.cc).
State& S();

// ---- client.cc: the channel

[[noreturn]] void SleepForever();
[[noreturn]] void AbortWith(int code);
[[noreturn]] void Fatal(const char* what);
void FutexWait(std::atomic<uint32_t>& a, uint32_t expected, long timeout_ns);
void RingBell();
void SetState(RankState st);
bool Ready();
int MapError(int32_t e);
size_t Progress();
int64_t MonotonicNs();
void AddBlocked(int64_t since_ns);
void Post(const Descriptor& d);

// Records a hop of the round trace (docs/specs/round-trace.md) if it is on: `ahead` is added
// to the last strobe the agent published (1 for hops that come before the next strobe).
inline void TraceHop(round_trace::Hop hop, uint64_t ahead) {
  round_trace::Recorder* r = round_trace::g_recorder.load(std::memory_order_relaxed);
  if (__builtin_expect(r != nullptr, 0)) {
    const State& s = S();
    r->Append(hop, s.h->strobe.load(std::memory_order_relaxed) + ahead, s.job, s.node, s.rank);
  }
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

uint32_t ModeNow();
void FlushRun(bool may_block);
void Decide(uint8_t call, uint64_t value, uint32_t mode);
uint64_t Replayed(uint8_t call);
bool ReplayedFlag(uint8_t call);
int ReplayedIndex(uint8_t call, uint64_t index, int n, const gos_request_t* reqs);
int64_t WtimeNs();

// ---- client_p2p.cc: requests, point to point, probes

int CheckComm(const gos_comm_t* c);
int32_t CommToWorld(const gos_comm_t& c, int r);
void EmptyStatus(gos_status_t* st);
int Reap(uint64_t id, gos_status_t* st);
Request* UserRequest(uint64_t id);
int StartSend(const void* buf, size_t len, int dest, int tag, const gos_comm_t* comm, int flags,
              uint64_t* id);
int StartRecv(void* buf, size_t len, int source, int tag, const gos_comm_t* comm, uint64_t* id);
int Cancel(const gos_request_t* req);
int RunInternal(Descriptor d, const gos_comm_t* comm, Completion* out);
int Iprobe(int source, int tag, const gos_comm_t* comm, int* flag, gos_status_t* st);
int Probe(int source, int tag, const gos_comm_t* comm, gos_status_t* st);

// ---- client_wait.cc: completion

int Wait(gos_request_t* req, gos_status_t* st);
int Test(gos_request_t* req, int* flag, gos_status_t* st);
int Testany(int n, gos_request_t* reqs, int* index, int* flag, gos_status_t* st);
int Waitany(int n, gos_request_t* reqs, int* index, gos_status_t* st);
int ProgressWait();

// ---- client_coll.cc: collectives

int Barrier(const gos_comm_t* comm);
int Bcast(void* buf, size_t len, int root, const gos_comm_t* comm);
int Reduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op, int root,
           const gos_comm_t* comm);
int Allreduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op,
              const gos_comm_t* comm);

// ---- blocking (a template: defined here for every piece that blocks)

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
    TraceHop(round_trace::Hop::kRankBlock, 1);
    SetState(kStateBlocked);
    // A completion published between the check above and the state change would otherwise
    // be missed until the timeout: the agent bumped `wake` before we read it.
    Progress();
    if (!done()) {
      FutexWait(h->wake, w, kBlockTimeoutNs);
      TraceHop(round_trace::Hop::kRankWake, 0);
    }
    SetState(kStateRunning);
    Progress();
    if (done()) break;
  }
  TraceHop(round_trace::Hop::kRankResume, 0);
  AddBlocked(t0);
}

// BlockUntil(room, flush) for room in the descriptor or record ring: the one wait for which
// the agent bumps `wake` when it frees room, and only while `room_wait` says so (spec 5). No
// lost wake-up, Dekker-style: `room_wait` is stored seq_cst here, before BlockUntil reads `w`
// and checks room() a last time, and room() must load the ring's tail seq_cst; the agent
// stores the tail seq_cst, then loads `room_wait` seq_cst. One side sees the other's store:
// either room() sees the freed room, or the agent sees `room_wait` and bumps `wake` after
// `w` was read, so the futex wait returns at once. A count, not a flag: a wait for record
// room nests inside a wait for descriptor room (BlockUntil's flush).
template <typename Pred>
void BlockForRoom(Pred room, bool flush) {
  ChannelHeader* h = S().h;
  const uint32_t was = h->room_wait.load(std::memory_order_relaxed);
  h->room_wait.store(was + 1, std::memory_order_seq_cst);
  BlockUntil(room, flush);
  h->room_wait.store(was, std::memory_order_relaxed);
}

}  // namespace gos::bcs::internal

#endif  // GOS_LIBGOS_BCS_CLIENT_IMPL_H_
