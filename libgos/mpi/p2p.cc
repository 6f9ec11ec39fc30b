// The MPI subset (mpi.h) on the gos native API (gos.h). See docs/mpi.md.
//
// State is process-global and unsynchronized: the subset is MPI_THREAD_FUNNELED at most.
#include "mpi.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gos/gos.h"
#include "libgos/mpi/comm_logic.h"
#include "libgos/mpi/datatype.h"
#include "libgos/mpi/internal.h"

namespace {

using gos::mpi::TypeNode;
using TypePtr = std::shared_ptr<const TypeNode>;

// mpi.h's handles for basic types and ops are gos.h's enums plus one.
static_assert(MPI_CHAR - 1 == GOS_CHAR && MPI_BYTE - 1 == GOS_BYTE);
static_assert(MPI_INT - 1 == GOS_INT && MPI_UNSIGNED_LONG_LONG - 1 == GOS_UNSIGNED_LONG_LONG);
static_assert(MPI_INT8_T - 1 == GOS_INT8 && MPI_UINT64_T - 1 == GOS_UINT64);
static_assert(MPI_FLOAT - 1 == GOS_FLOAT && MPI_WCHAR - 1 == GOS_WCHAR);
static_assert(MPI_FLOAT_INT - 1 == GOS_FLOAT_INT && MPI_LONG_DOUBLE_INT - 1 == GOS_LONG_DOUBLE_INT);
static_assert(MPI_LONG_DOUBLE_INT == GOS_TYPE_COUNT);
static_assert(MPI_SUM - 1 == GOS_SUM && MPI_BXOR - 1 == GOS_BXOR && MPI_MAXLOC - 1 == GOS_MAXLOC);
static_assert(MPI_MAXLOC == GOS_OP_COUNT);
// MPI_AINT, MPI_OFFSET and MPI_COUNT name the basic types of the same C type.
static_assert(sizeof(MPI_Aint) == sizeof(long) && sizeof(MPI_Offset) == sizeof(long long) &&
              sizeof(MPI_Count) == sizeof(long long));

constexpr MPI_Datatype kFirstDerivedType = 64;
constexpr MPI_Op kFirstUserOp = 64;  // MPI_Op_create's handles: kFirstUserOp + index
// MPI_Send_init / MPI_Recv_init handles: kFirstPersistent + index (above any plain request).
constexpr MPI_Request kFirstPersistent = 1 << 24;
// Tags of the library's own point-to-point collectives (on the collective context), apart
// from the tags gos.h's reductions use internally.
constexpr int kCollTagBase = 0x40000000;
constexpr int kCollTagMask = 0x3fffffff;
// MPI_Comm_create_keyval's handles: kFirstKeyval + index (above the predefined MPI_TAG_UB ...).
constexpr int kFirstKeyval = 64;
constexpr MPI_Errhandler kFirstUserErrhandler = 16;

// A distributed graph topology (MPI_Dist_graph_create_adjacent): this rank's in- and
// out-neighbours (comm ranks, in the order given) and, when weighted, their weights.
struct DistGraph {
  std::vector<int> sources, source_weights;
  std::vector<int> destinations, dest_weights;
  bool weighted = false;
};

// A user keyval (MPI_Comm_create_keyval); null callbacks do nothing (no copy, no delete).
struct Keyval {
  MPI_Comm_copy_attr_function* copy = nullptr;
  MPI_Comm_delete_attr_function* del = nullptr;
  void* extra = nullptr;
  bool freed = false;  // MPI_Comm_free_keyval'd: no new attributes, the stored ones live on
};

struct Comm {
  gos_comm_t g{};
  std::vector<int> world;          // world rank of each member (empty: g.world is gos's)
  std::vector<int> world_to_comm;  // world size entries, -1 = not a member
  uint64_t children = 0;           // dup/split calls on this communicator, for DeriveContext
  uint32_t coll_seq = 0;           // collectives done by this library on it
  MPI_Errhandler errhandler = MPI_ERRORS_ARE_FATAL;
  std::optional<gos::mpi::Cart> cart;        // MPI_Cart_create's topology (kept by MPI_Comm_dup)
  std::optional<DistGraph> graph;            // MPI_Dist_graph_create_adjacent's (kept by dup)
  std::vector<std::pair<int, void*>> attrs;  // user attributes (keyval, value), in set order
  // MPI_Comm_create_group calls so far per (group, tag) key: only the group's members call
  // it, so `children` cannot number them; each member counts the calls for its own group.
  std::map<uint64_t, uint64_t> group_creates;

  int WorldRank(int r) const { return g.world != nullptr ? g.world[r] : r; }
  gos_comm_t Collective() const {
    gos_comm_t c = g;
    c.ctx |= GOS_CTX_COLLECTIVE_BIT;
    return c;
  }
  int NextCollTag() { return kCollTagBase | static_cast<int>(coll_seq++ & kCollTagMask); }
};

struct Request {
  bool in_use = false;
  bool done = false;       // completed (gos released its request); status in `st`
  bool detached = false;   // MPI_Request_free'd before completion
  bool proc_null = false;  // peer was MPI_PROC_NULL: complete from the start, empty status
  gos_request_t g = GOS_REQUEST_NULL;
  gos_status_t st{};
  MPI_Comm comm = MPI_COMM_NULL;  // whose error handler applies
  // Packed data of a derived-type send, or the staging buffer of a derived-type receive,
  // which is unpacked into (user_buf, count, type) on completion.
  std::vector<char> tmp;
  bool unpack = false;
  void* user_buf = nullptr;
  size_t count = 0;
  TypePtr type;
  // A nonblocking collective: done once every part is, then on_done runs (it may combine
  // what the parts received); its MPI error, if any, is the request's.
  bool compound = false;
  std::vector<MPI_Request> parts;
  std::function<int()> on_done;
  int compound_error = MPI_SUCCESS;
  int status_part = -1;  // the part whose status is the compound's (MPI_Isendrecv's receive)
};

// A persistent request's arguments (MPI_Send_init, MPI_Recv_init); MPI_Start posts them.
struct Persistent {
  bool in_use = false;
  bool send = false;
  bool buffered = false;  // MPI_Bsend_init: each MPI_Start copies and is complete at once
  int flags = 0;          // GOS_SEND_SYNC for MPI_Ssend_init
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  TypePtr layout;  // the type's layout, kept: the handle may be freed before MPI_Start
  int peer = 0, tag = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request active = MPI_REQUEST_NULL;
};

struct State {
  std::vector<std::unique_ptr<Comm>> comms;  // index = MPI_Comm; 0 = MPI_COMM_NULL
  std::vector<TypePtr> types;                // index = MPI_Datatype - kFirstDerivedType
  std::vector<bool> committed;
  // MPI_Type_free'd while still used (by a pending operation, or a type built on it): the
  // handle resolves until then (a user op of a pending reduction is given it), but is never
  // freed twice nor used for a new transfer. AddType drops the layout once nothing else holds it.
  std::vector<bool> freed;
  std::vector<size_t> freed_in_use;          // indices of such types whose layout is still held
  std::vector<MPI_User_function*> user_ops;  // index = MPI_Op - kFirstUserOp; nullptr = freed
  std::vector<bool> user_op_commute;         // MPI_Op_create's commute, same index
  void* bsend_buffer = nullptr;  // MPI_Buffer_attach's (not used: Bsend copies on its own)
  int bsend_size = 0;
  std::vector<Persistent> persistent;  // index = MPI_Request - kFirstPersistent
  // Groups as world ranks in group order; index = MPI_Group (0 = MPI_GROUP_NULL, never set;
  // 1 = MPI_GROUP_EMPTY); nullopt = freed.
  std::vector<std::optional<std::vector<int>>> groups;
  std::deque<Request> reqs;  // index + 1 = MPI_Request; a deque keeps Request* valid
  std::vector<int> free_reqs;
  int detached = 0;  // requests freed by the program that are still in flight
  std::map<MPI_Comm, std::string> comm_names;      // MPI_Comm_set_name's; erased at MPI_Comm_free
  std::map<MPI_Datatype, std::string> type_names;  // MPI_Type_set_name's; erased at MPI_Type_free
  // MPI_Info objects: index + 1 = MPI_Info (0 = MPI_INFO_NULL); nullopt = freed. Keys in the
  // order they were first set (MPI_Info_get_nthkey).
  std::vector<std::optional<std::vector<std::pair<std::string, std::string>>>> infos;
  std::thread::id main_thread;  // the thread that called MPI_Init
  std::vector<Keyval> keyvals;  // index = keyval - kFirstKeyval; never reused
  // MPI_Comm_create_errhandler's functions: index = MPI_Errhandler - kFirstUserErrhandler;
  // never reused (a freed handler stays valid for the communicators that use it).
  std::vector<MPI_Comm_errhandler_function*> errhandlers;
  // MPI_Add_error_class/_code: the class of each code handed out, index = code -
  // MPI_ERR_LASTCODE - 1 (a class is its own), and MPI_Add_error_string's texts.
  std::vector<int> user_code_class;
  std::map<int, std::string> user_error_strings;
  int last_used_code = MPI_ERR_LASTCODE;  // MPI_LASTUSEDCODE's value
};

State& S() {
  static State* s = new State();
  return *s;
}

const char* ErrorText(int code) {
  switch (code) {
    case MPI_SUCCESS:
      return "no error";
    case MPI_ERR_BUFFER:
      return "invalid buffer pointer";
    case MPI_ERR_COUNT:
      return "invalid count";
    case MPI_ERR_TYPE:
      return "invalid datatype";
    case MPI_ERR_TAG:
      return "invalid tag";
    case MPI_ERR_COMM:
      return "invalid communicator";
    case MPI_ERR_RANK:
      return "invalid rank";
    case MPI_ERR_ROOT:
      return "invalid root";
    case MPI_ERR_GROUP:
      return "invalid group";
    case MPI_ERR_OP:
      return "invalid reduction operation for this datatype";
    case MPI_ERR_ARG:
      return "invalid argument";
    case MPI_ERR_UNKNOWN:
      return "unknown error";
    case MPI_ERR_TRUNCATE:
      return "message truncated";
    case MPI_ERR_OTHER:
      return "MPI is not initialized, or was finalized";
    case MPI_ERR_INTERN:
      return "internal error (channel to the nodeagent)";
    case MPI_ERR_IN_STATUS:
      return "error code is in status";
    case MPI_ERR_PENDING:
      return "pending request";
    case MPI_ERR_REQUEST:
      return "invalid request";
    case MPI_ERR_TOPOLOGY:
      return "invalid topology (the communicator lacks the one the call needs)";
    case MPI_ERR_DIMS:
      return "invalid dimensions";
    case MPI_ERR_NO_MEM:
      return "out of memory";
    case MPI_ERR_KEYVAL:
      return "invalid keyval";
    case MPI_ERR_WIN:
      return "invalid window";
    case MPI_ERR_SIZE:
      return "invalid window size";
    case MPI_ERR_DISP:
      return "invalid displacement or displacement unit";
    case MPI_ERR_RMA_RANGE:
      return "target range outside the target's window";
    default:
      return nullptr;
  }
}

int FromGos(int err) {
  switch (err) {
    case GOS_OK:
      return MPI_SUCCESS;
    case GOS_ERR_TRUNCATE:
      return MPI_ERR_TRUNCATE;
    case GOS_ERR_RANK:
      return MPI_ERR_RANK;
    case GOS_ERR_ARG:
      return MPI_ERR_ARG;
    case GOS_ERR_NOT_INIT:
      return MPI_ERR_OTHER;
    case GOS_ERR_CHANNEL:
      return MPI_ERR_INTERN;
    case GOS_ERR_REQUEST:
      return MPI_ERR_REQUEST;
    case GOS_ERR_TAG:
      return MPI_ERR_TAG;
    default:
      return MPI_ERR_UNKNOWN;
  }
}

// The class of a code MPI_Add_error_code/_class handed out, or -1.
int UserErrorClass(int code) {
  const State& s = S();
  if (code <= MPI_ERR_LASTCODE || code > s.last_used_code) return -1;
  return s.user_code_class[static_cast<size_t>(code - MPI_ERR_LASTCODE - 1)];
}

// ErrorText, and the program's texts for its own codes ("" when it gave none).
const char* AnyErrorText(int code) {
  if (UserErrorClass(code) < 0) return ErrorText(code);
  const auto& strings = S().user_error_strings;
  auto it = strings.find(code);
  return it != strings.end() ? it->second.c_str() : "";
}

Comm* FindComm(MPI_Comm c) {
  State& s = S();
  if (c <= 0 || static_cast<size_t>(c) >= s.comms.size()) return nullptr;
  return s.comms[static_cast<size_t>(c)].get();
}

// The program's handler behind `e`, or nullptr (a predefined one, or no handler).
MPI_Comm_errhandler_function* UserErrhandler(MPI_Errhandler e) {
  const State& s = S();
  if (e < kFirstUserErrhandler ||
      static_cast<size_t>(e - kFirstUserErrhandler) >= s.errhandlers.size()) {
    return nullptr;
  }
  return s.errhandlers[static_cast<size_t>(e - kFirstUserErrhandler)];
}

// Applies the error handler of `comm` (MPI_COMM_WORLD's when comm is not a communicator):
// fatal prints the reason and ends the job; MPI_ERRORS_RETURN hands the code back; a handler
// of the program's is called with the communicator and the code, which is then handed back.
int Fail(MPI_Comm comm, const char* fn, int code) {
  if (code == MPI_SUCCESS) return code;
  Comm* c = FindComm(comm);
  if (c == nullptr) {
    comm = MPI_COMM_WORLD;
    c = FindComm(comm);
  }
  if (c != nullptr && c->errhandler == MPI_ERRORS_RETURN) return code;
  if (MPI_Comm_errhandler_function* user = c != nullptr ? UserErrhandler(c->errhandler) : nullptr) {
    int handed = code;
    user(&comm, &handed);
    return code;
  }
  const char* text = AnyErrorText(code);
  std::fprintf(stderr, "gos MPI: %s: %s (rank %d)\n", fn, text != nullptr ? text : "error",
               gos_initialized() ? gos_world_rank() : -1);
  std::fflush(stderr);
  gos_abort(1);
}

// Looks up a datatype; `for_transfer` also requires a derived type to be committed.
TypePtr FindType(MPI_Datatype dt, bool for_transfer = true) {
  if (dt >= MPI_CHAR && dt <= MPI_LONG_DOUBLE_INT) return gos::mpi::BasicType(dt - 1);
  State& s = S();
  if (dt < kFirstDerivedType) return nullptr;
  size_t i = static_cast<size_t>(dt - kFirstDerivedType);
  if (i >= s.types.size() || s.types[i] == nullptr) return nullptr;
  if (for_transfer && (!s.committed[i] || s.freed[i])) return nullptr;
  return s.types[i];
}

// The basic types' names (MPI_Type_get_name), index = gos_type_t (handle - 1); MPI_LONG_LONG
// is also MPI_LONG_LONG_INT, MPI_PACKED is MPI_BYTE.
constexpr const char* kBasicTypeNames[] = {"MPI_CHAR",
                                           "MPI_SIGNED_CHAR",
                                           "MPI_UNSIGNED_CHAR",
                                           "MPI_BYTE",
                                           "MPI_SHORT",
                                           "MPI_UNSIGNED_SHORT",
                                           "MPI_INT",
                                           "MPI_UNSIGNED",
                                           "MPI_LONG",
                                           "MPI_UNSIGNED_LONG",
                                           "MPI_LONG_LONG_INT",
                                           "MPI_UNSIGNED_LONG_LONG",
                                           "MPI_INT8_T",
                                           "MPI_UINT8_T",
                                           "MPI_INT16_T",
                                           "MPI_UINT16_T",
                                           "MPI_INT32_T",
                                           "MPI_UINT32_T",
                                           "MPI_INT64_T",
                                           "MPI_UINT64_T",
                                           "MPI_FLOAT",
                                           "MPI_DOUBLE",
                                           "MPI_LONG_DOUBLE",
                                           "MPI_C_BOOL",
                                           "MPI_WCHAR",
                                           "MPI_FLOAT_INT",
                                           "MPI_DOUBLE_INT",
                                           "MPI_LONG_INT",
                                           "MPI_2INT",
                                           "MPI_SHORT_INT",
                                           "MPI_LONG_DOUBLE_INT"};
static_assert(std::size(kBasicTypeNames) == GOS_TYPE_COUNT);

// A basic type's name, or nullptr for a derived type.
const char* BasicTypeName(MPI_Datatype dt) {
  return dt >= MPI_CHAR && dt <= MPI_LONG_DOUBLE_INT ? kBasicTypeNames[dt - 1] : nullptr;
}

// MPI_*_set_name: at most MPI_MAX_OBJECT_NAME - 1 characters are kept.
void SetName(std::map<int, std::string>& names, int handle, const char* name) {
  names[handle] = std::string(name).substr(0, MPI_MAX_OBJECT_NAME - 1);
}

// MPI_*_get_name: the name set, else `predefined` (nullptr: the empty name).
void GetName(const std::map<int, std::string>& names, int handle, const char* predefined, char* out,
             int* resultlen) {
  auto it = names.find(handle);
  const char* name = it != names.end() ? it->second.c_str() : predefined ? predefined : "";
  std::snprintf(out, MPI_MAX_OBJECT_NAME, "%s", name);
  *resultlen = static_cast<int>(std::strlen(out));
}

// What an int result of a large-count query holds: the value, or MPI_UNDEFINED when it does
// not fit (MPI's rule for the calls without _x).
template <typename T>
T Narrow(MPI_Count v) {
  if constexpr (std::is_same_v<T, MPI_Count>) {
    return v;
  } else {
    return v > std::numeric_limits<T>::max() ? MPI_UNDEFINED : static_cast<T>(v);
  }
}

// MPI_Type_size(_x): the bytes of data in one element.
template <typename T>
int TypeSize(const char* fn, MPI_Datatype datatype, T* size) {
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (t == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_TYPE);
  if (size == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
  *size = Narrow<T>(static_cast<MPI_Count>(gos::mpi::PackedSize(1, *t)));
  return MPI_SUCCESS;
}

// MPI_Type_get_extent(_x), and with `true_bounds` MPI_Type_get_true_extent(_x): where one
// element's data really lies, whatever its (resized) bounds say.
template <typename T>
int TypeBounds(const char* fn, MPI_Datatype datatype, bool true_bounds, T* lb, T* extent) {
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (t == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_TYPE);
  if (lb == nullptr || extent == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
  auto [lo, hi] = true_bounds ? gos::mpi::TrueBounds(*t) : std::make_pair(t->lb, t->ub);
  *lb = static_cast<T>(lo);
  *extent = static_cast<T>(hi - lo);
  return MPI_SUCCESS;
}

// MPI_Get_elements(_x): the basic elements a receive got.
template <typename T>
int GetElements(const char* fn, const MPI_Status* status, MPI_Datatype datatype, T* count) {
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (status == nullptr || t == nullptr || count == nullptr) {
    return Fail(MPI_COMM_WORLD, fn, t == nullptr ? MPI_ERR_TYPE : MPI_ERR_ARG);
  }
  const long n = gos::mpi::ElementsOf(status->gos_bytes, *t, MPI_UNDEFINED);
  *count = n == MPI_UNDEFINED ? MPI_UNDEFINED : Narrow<T>(n);
  return MPI_SUCCESS;
}

int AllocRequest() {
  State& s = S();
  int i;
  if (!s.free_reqs.empty()) {
    i = s.free_reqs.back();
    s.free_reqs.pop_back();
  } else {
    i = static_cast<int>(s.reqs.size());
    s.reqs.emplace_back();
  }
  s.reqs[static_cast<size_t>(i)] = Request{};
  s.reqs[static_cast<size_t>(i)].in_use = true;
  return i + 1;
}

Request* FindRequest(MPI_Request r) {
  State& s = S();
  if (r <= 0 || static_cast<size_t>(r) > s.reqs.size()) return nullptr;
  Request* q = &s.reqs[static_cast<size_t>(r - 1)];
  return q->in_use && !q->detached ? q : nullptr;
}

void ReleaseRequest(MPI_Request r) {
  State& s = S();
  s.reqs[static_cast<size_t>(r - 1)] = Request{};
  s.free_reqs.push_back(r - 1);
}

// gos releases a request that completed with an error (e.g. GOS_ERR_TRUNCATE) and returns
// that error; keep it in the status so Finish reports it like any other outcome.
void NoteCompletion(Request* q, int err) {
  q->done = true;
  if (err != GOS_OK && q->st.error == GOS_OK) q->st.error = err;
}

int Poll(Request* q);
int WaitDone(Request* q);
int Finish(MPI_Request r, MPI_Status* status);

// A compound request whose parts are all done: releases them and runs on_done.
void FinishCompound(Request* q) {
  int err = MPI_SUCCESS;
  std::vector<MPI_Request> parts = std::move(q->parts);
  std::function<int()> done = std::move(q->on_done);
  for (size_t i = 0; i < parts.size(); ++i) {
    MPI_Status st{};
    const bool keep = static_cast<int>(i) == q->status_part;
    const int e = Finish(parts[i], keep ? &st : MPI_STATUS_IGNORE);
    if (keep) {
      q->st.source = st.MPI_SOURCE;
      q->st.tag = st.MPI_TAG;
      q->st.len = st.gos_bytes;
      q->st.cancelled = st.gos_cancelled;
    }
    if (err == MPI_SUCCESS) err = e;
  }
  if (err == MPI_SUCCESS && done) err = done();
  q->compound_error = err;
  q->done = true;
}

// Marks a request done once gos reports it complete; never blocks.
int Poll(Request* q) {
  if (q->done) return MPI_SUCCESS;
  if (q->compound) {
    for (MPI_Request p : q->parts) {
      Request* pq = &S().reqs[static_cast<size_t>(p - 1)];
      if (int e = Poll(pq)) return e;
      if (!pq->done) return MPI_SUCCESS;
    }
    FinishCompound(q);
    return MPI_SUCCESS;
  }
  int flag = 0;
  const int err = gos_test(&q->g, &flag, &q->st);
  if (flag) {
    NoteCompletion(q, err);
    return MPI_SUCCESS;
  }
  return FromGos(err);
}

int WaitDone(Request* q) {
  if (q->done) return MPI_SUCCESS;
  if (q->compound) {
    for (MPI_Request p : q->parts) {
      if (int e = WaitDone(&S().reqs[static_cast<size_t>(p - 1)])) return e;
    }
    FinishCompound(q);
    return MPI_SUCCESS;
  }
  const int err = gos_wait(&q->g, &q->st);
  if (q->g == GOS_REQUEST_NULL) {
    NoteCompletion(q, err);
    return MPI_SUCCESS;
  }
  return FromGos(err);
}

// Fills a status unless it is MPI_STATUS_IGNORE.
void SetStatus(MPI_Status* status, int source, int tag, int error, size_t bytes, int cancelled) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = source;
  status->MPI_TAG = tag;
  status->MPI_ERROR = error;
  status->gos_bytes = bytes;
  status->gos_cancelled = cancelled;
}

// The outcome of a completed request: unpacks a staged receive (once), fills `status`.
// Returns the operation's error (MPI_ERR_TRUNCATE for a too-long message). The request stays.
int Outcome(Request* q, MPI_Status* status) {
  if (q->unpack) {
    gos::mpi::Unpack(q->tmp.data(), std::min(q->st.len, q->tmp.size()), q->count, *q->type,
                     q->user_buf);
    q->unpack = false;
  }
  int err = q->compound ? q->compound_error : FromGos(q->st.error);
  SetStatus(status, q->proc_null ? MPI_PROC_NULL : q->st.source,
            q->proc_null ? MPI_ANY_TAG : q->st.tag, err, q->st.len, q->st.cancelled);
  return err;
}

// Finishes a completed request: its Outcome, then the request is released.
int Finish(MPI_Request r, MPI_Status* status) {
  const int err = Outcome(&S().reqs[static_cast<size_t>(r - 1)], status);
  ReleaseRequest(r);
  return err;
}

// Completes the requests the program freed whose transfers have finished (their staging
// buffers must outlive the transfer); with `block`, waits for all of them.
void SweepDetached(bool block) {
  State& s = S();
  if (s.detached == 0) return;
  for (size_t i = 0; i < s.reqs.size(); ++i) {
    Request& q = s.reqs[i];
    if (!q.in_use || !q.detached) continue;
    if (block) {
      (void)WaitDone(&q);
    } else {
      (void)Poll(&q);
    }
    if (q.done) {
      q.detached = false;
      --s.detached;
      (void)Finish(static_cast<MPI_Request>(i + 1), MPI_STATUS_IGNORE);
    }
  }
}

void SetEmptyStatus(MPI_Status* status, int source) {
  SetStatus(status, source, MPI_ANY_TAG, MPI_SUCCESS, 0, 0);
}

// The request of an operation with peer MPI_PROC_NULL: complete at once, moving nothing.
MPI_Request ProcNullRequest(MPI_Comm comm) {
  MPI_Request r = AllocRequest();
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  q->done = true;
  q->proc_null = true;
  q->comm = comm;
  q->st = gos_status_t{};
  return r;
}

int CheckCount(int count) { return count < 0 ? MPI_ERR_COUNT : MPI_SUCCESS; }

// Starts a send of count x dt on `gc` (the communicator's or its collective context).
// `t` is the type's layout itself, not its handle: a persistent request keeps the layout, and
// the program may free the handle before MPI_Start (MPI 4.1, 5.1.9: pending operations are
// not affected).
int StartSend(const void* buf, int count, const TypePtr& t, int dest, int tag, MPI_Comm comm,
              const gos_comm_t& gc, int flags, MPI_Request* out) {
  if (int e = CheckCount(count)) return e;
  if (t == nullptr) return MPI_ERR_TYPE;
  if (dest == MPI_PROC_NULL) {
    *out = ProcNullRequest(comm);
    return MPI_SUCCESS;
  }
  if (dest < 0 || dest >= gc.size) return MPI_ERR_RANK;
  if (tag < 0) return MPI_ERR_TAG;
  MPI_Request r = AllocRequest();
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  q->comm = comm;
  const size_t len = gos::mpi::PackedSize(static_cast<size_t>(count), *t);
  const void* data = buf;
  if (!t->contiguous) {
    q->tmp.resize(len);
    gos::mpi::Pack(buf, static_cast<size_t>(count), *t, q->tmp.data());
    data = q->tmp.data();
  }
  int err = gos_isend(data, len, dest, tag, &gc, flags, &q->g);
  if (err != GOS_OK) {
    ReleaseRequest(r);
    return FromGos(err);
  }
  *out = r;
  return MPI_SUCCESS;
}

int StartRecv(void* buf, int count, const TypePtr& t, int source, int tag, MPI_Comm comm,
              const gos_comm_t& gc, MPI_Request* out) {
  if (int e = CheckCount(count)) return e;
  if (t == nullptr) return MPI_ERR_TYPE;
  if (source == MPI_PROC_NULL) {
    *out = ProcNullRequest(comm);
    return MPI_SUCCESS;
  }
  if (source != MPI_ANY_SOURCE && (source < 0 || source >= gc.size)) return MPI_ERR_RANK;
  if (tag < 0 && tag != MPI_ANY_TAG) return MPI_ERR_TAG;
  MPI_Request r = AllocRequest();
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  q->comm = comm;
  const size_t len = gos::mpi::PackedSize(static_cast<size_t>(count), *t);
  void* data = buf;
  if (!t->contiguous) {
    q->tmp.resize(len);
    q->unpack = true;
    q->user_buf = buf;
    q->count = static_cast<size_t>(count);
    q->type = t;
    data = q->tmp.data();
  }
  int err = gos_irecv(data, len, source == MPI_ANY_SOURCE ? GOS_ANY_SOURCE : source,
                      tag == MPI_ANY_TAG ? GOS_ANY_TAG : tag, &gc, &q->g);
  if (err != GOS_OK) {
    ReleaseRequest(r);
    return FromGos(err);
  }
  *out = r;
  return MPI_SUCCESS;
}

int StartSend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              const gos_comm_t& gc, int flags, MPI_Request* out) {
  return StartSend(buf, count, FindType(dt), dest, tag, comm, gc, flags, out);
}

int StartRecv(void* buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
              const gos_comm_t& gc, MPI_Request* out) {
  return StartRecv(buf, count, FindType(dt), source, tag, comm, gc, out);
}

int WaitOne(MPI_Request r, MPI_Status* status) {
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  if (int e = WaitDone(q)) return e;
  return Finish(r, status);
}

// Waits for every internal request of a collective; returns the first error.
int WaitInternal(std::vector<MPI_Request>& reqs) {
  int first = MPI_SUCCESS;
  for (MPI_Request r : reqs) {
    int e = WaitOne(r, MPI_STATUS_IGNORE);
    if (first == MPI_SUCCESS) first = e;
  }
  reqs.clear();
  return first;
}

// Copies count x st at sbuf into rcount x rt at rbuf (a rank's own block in a collective).
int LocalCopy(const void* sbuf, int scount, const TypeNode& st, void* rbuf, int rcount,
              const TypeNode& rt) {
  const size_t bytes = gos::mpi::PackedSize(static_cast<size_t>(scount), st);
  if (bytes > gos::mpi::PackedSize(static_cast<size_t>(rcount), rt)) return MPI_ERR_TRUNCATE;
  if (st.contiguous && rt.contiguous) {
    if (bytes > 0) std::memmove(rbuf, sbuf, bytes);
    return MPI_SUCCESS;
  }
  std::vector<char> tmp(bytes);
  gos::mpi::Pack(sbuf, static_cast<size_t>(scount), st, tmp.data());
  gos::mpi::Unpack(tmp.data(), bytes, static_cast<size_t>(rcount), rt, rbuf);
  return MPI_SUCCESS;
}

char* At(void* buf, int displ, const TypeNode& t) {
  return static_cast<char*>(buf) + static_cast<ptrdiff_t>(displ) * t.extent();
}
const char* At(const void* buf, int displ, const TypeNode& t) {
  return static_cast<const char*>(buf) + static_cast<ptrdiff_t>(displ) * t.extent();
}

#define GOS_MPI_CHECK(comm, fn, expr)          \
  do {                                         \
    if (int gos_mpi_err_ = (expr)) {           \
      return Fail((comm), (fn), gos_mpi_err_); \
    }                                          \
  } while (0)

// Looks up `comm` or fails the call with MPI_ERR_COMM.
#define GOS_MPI_COMM(var, comm, fn)                                                      \
  Comm* var = FindComm(comm);                                                            \
  if (var == nullptr) {                                                                  \
    return Fail(MPI_COMM_WORLD, (fn), gos_initialized() ? MPI_ERR_COMM : MPI_ERR_OTHER); \
  }

// The end of a blocking collective: waits for its internal requests and applies the first
// error, `err` (from posting them) or a completion's.
int WaitCollective(const char* fn, MPI_Comm comm, int err, std::vector<MPI_Request>& reqs) {
  const int werr = WaitInternal(reqs);
  GOS_MPI_CHECK(comm, fn, err != MPI_SUCCESS ? err : werr);
  return MPI_SUCCESS;
}

// The engine of Gather(v): root receives rcounts[i] x rtype at displs[i] from every rank i.
int GathervImpl(const char* fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                void* recvbuf, const int* rcounts, const int* displs, MPI_Datatype recvtype,
                int root, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, fn);
  if (root < 0 || root >= c->g.size) return Fail(comm, fn, MPI_ERR_ROOT);
  const int me = c->g.rank;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (in_place && me != root) return Fail(comm, fn, MPI_ERR_BUFFER);
  const gos_comm_t gc = c->Collective();
  const int tag = c->NextCollTag();
  std::vector<MPI_Request> reqs;
  int err = MPI_SUCCESS;
  if (me == root) {
    TypePtr rt = FindType(recvtype);
    if (rt == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
    for (int i = 0; i < c->g.size && err == MPI_SUCCESS; ++i) {
      if (rcounts[i] < 0) {
        err = MPI_ERR_COUNT;
      } else if (i == me) {
        if (!in_place) {
          TypePtr st = FindType(sendtype);
          if (st == nullptr) {
            err = MPI_ERR_TYPE;
          } else if (CheckCount(sendcount) != MPI_SUCCESS) {
            err = MPI_ERR_COUNT;
          } else {
            err = LocalCopy(sendbuf, sendcount, *st, At(recvbuf, displs[i], *rt), rcounts[i], *rt);
          }
        }
      } else {
        MPI_Request r;
        err = StartRecv(At(recvbuf, displs[i], *rt), rcounts[i], recvtype, i, tag, comm, gc, &r);
        if (err == MPI_SUCCESS) reqs.push_back(r);
      }
    }
  } else {
    MPI_Request r;
    err = StartSend(sendbuf, sendcount, sendtype, root, tag, comm, gc, 0, &r);
    if (err == MPI_SUCCESS) reqs.push_back(r);
  }
  return WaitCollective(fn, comm, err, reqs);
}

// The engine of Scatter(v): root sends scounts[i] x stype at displs[i] to every rank i.
int ScattervImpl(const char* fn, const void* sendbuf, const int* scounts, const int* displs,
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, fn);
  if (root < 0 || root >= c->g.size) return Fail(comm, fn, MPI_ERR_ROOT);
  const int me = c->g.rank;
  const bool in_place = recvbuf == MPI_IN_PLACE;
  if (in_place && me != root) return Fail(comm, fn, MPI_ERR_BUFFER);
  const gos_comm_t gc = c->Collective();
  const int tag = c->NextCollTag();
  std::vector<MPI_Request> reqs;
  int err = MPI_SUCCESS;
  if (me == root) {
    TypePtr st = FindType(sendtype);
    if (st == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
    for (int i = 0; i < c->g.size && err == MPI_SUCCESS; ++i) {
      if (scounts[i] < 0) {
        err = MPI_ERR_COUNT;
      } else if (i == me) {
        if (!in_place) {
          TypePtr rt = FindType(recvtype);
          if (rt == nullptr) {
            err = MPI_ERR_TYPE;
          } else if (CheckCount(recvcount) != MPI_SUCCESS) {
            err = MPI_ERR_COUNT;
          } else {
            err = LocalCopy(At(sendbuf, displs[i], *st), scounts[i], *st, recvbuf, recvcount, *rt);
          }
        }
      } else {
        MPI_Request r;
        err = StartSend(At(sendbuf, displs[i], *st), scounts[i], sendtype, i, tag, comm, gc, 0, &r);
        if (err == MPI_SUCCESS) reqs.push_back(r);
      }
    }
  } else {
    MPI_Request r;
    err = StartRecv(recvbuf, recvcount, recvtype, root, tag, comm, gc, &r);
    if (err == MPI_SUCCESS) reqs.push_back(r);
  }
  return WaitCollective(fn, comm, err, reqs);
}

// One rank's block of an all-to-all exchange: count x type at buf.
struct Block {
  const void* buf;
  int count;
  TypePtr type;
};

// The exchange under every all-to-all: receives recv_block(i) from every other rank i, sends
// send_block(j) to every other rank j, copies its own block (self_copy), then waits for it all
// or, with `started`, hands the requests over (a nonblocking collective waits for them).
int ExchangeBlocks(const char* fn, Comm* c, MPI_Comm comm,
                   const std::function<Block(int)>& send_block,
                   const std::function<Block(int)>& recv_block, bool self_copy,
                   std::vector<MPI_Request>* started) {
  const int n = c->g.size;
  const int me = c->g.rank;
  const gos_comm_t gc = c->Collective();
  const int tag = c->NextCollTag();
  std::vector<MPI_Request> reqs;
  int err = MPI_SUCCESS;
  for (int k = 1; k < n && err == MPI_SUCCESS; ++k) {
    const int from = (me - k + n) % n;
    const Block b = recv_block(from);
    MPI_Request r;
    err = StartRecv(const_cast<void*>(b.buf), b.count, b.type, from, tag, comm, gc, &r);
    if (err == MPI_SUCCESS) reqs.push_back(r);
  }
  for (int k = 1; k < n && err == MPI_SUCCESS; ++k) {
    const int to = (me + k) % n;
    const Block b = send_block(to);
    MPI_Request r;
    err = StartSend(b.buf, b.count, b.type, to, tag, comm, gc, 0, &r);
    if (err == MPI_SUCCESS) reqs.push_back(r);
  }
  if (err == MPI_SUCCESS && self_copy) {
    const Block out = send_block(me);
    const Block in = recv_block(me);
    err = LocalCopy(out.buf, out.count, *out.type, const_cast<void*>(in.buf), in.count, *in.type);
  }
  if (started != nullptr && err == MPI_SUCCESS) {
    *started = std::move(reqs);
    return MPI_SUCCESS;
  }
  return WaitCollective(fn, comm, err, reqs);
}

// The engine of Allgather(v), Alltoall(v): every rank i sends scounts[j] x stype at
// sdispls[j] to every rank j, which receives it as rcounts[i] x rtype at rdispls[i].
// For an allgather every sdispls[j] is 0 and scounts[j] the same.
int ExchangeImpl(const char* fn, const void* sendbuf, const int* scounts, const int* sdispls,
                 MPI_Datatype sendtype, void* recvbuf, const int* rcounts, const int* rdispls,
                 MPI_Datatype recvtype, Comm* c, MPI_Comm comm, bool self_copy,
                 std::vector<MPI_Request>* started = nullptr) {
  TypePtr st = FindType(sendtype);
  TypePtr rt = FindType(recvtype);
  if (st == nullptr || rt == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  for (int i = 0; i < c->g.size; ++i) {
    if (scounts[i] < 0 || rcounts[i] < 0) return Fail(comm, fn, MPI_ERR_COUNT);
  }
  return ExchangeBlocks(
      fn, c, comm,
      [&](int i) {
        return Block{At(sendbuf, sdispls[i], *st), scounts[i], st};
      },
      [&](int i) {
        return Block{At(recvbuf, rdispls[i], *rt), rcounts[i], rt};
      },
      self_copy, started);
}

// MPI_(I)alltoallw: ExchangeImpl with a datatype per peer on each side and displacements in
// bytes. sendbuf MPI_IN_PLACE: what recvbuf holds, laid out as the receive, is sent from a
// packed copy (owned by `in_place`, which must outlive the exchange).
int AlltoallwImpl(const char* fn, const void* sendbuf, const int* scounts, const int* sdispls,
                  const MPI_Datatype* stypes, void* recvbuf, const int* rcounts, const int* rdispls,
                  const MPI_Datatype* rtypes, Comm* c, MPI_Comm comm, std::vector<char>* in_place,
                  std::vector<MPI_Request>* started) {
  const int n = c->g.size;
  const bool inplace = sendbuf == MPI_IN_PLACE;
  std::vector<TypePtr> st(static_cast<size_t>(n)), rt(static_cast<size_t>(n));
  std::vector<size_t> packed_at(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    rt[k] = FindType(rtypes[i]);
    st[k] = inplace ? rt[k] : FindType(stypes[i]);
    if (st[k] == nullptr || rt[k] == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
    if (rcounts[i] < 0 || (!inplace && scounts[i] < 0)) return Fail(comm, fn, MPI_ERR_COUNT);
    packed_at[k + 1] =
        packed_at[k] +
        (inplace ? gos::mpi::PackedSize(static_cast<size_t>(rcounts[i]), *rt[k]) : 0);
  }
  if (inplace) {
    in_place->resize(packed_at.back());
    for (int i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      gos::mpi::Pack(static_cast<const char*>(recvbuf) + rdispls[i],
                     static_cast<size_t>(rcounts[i]), *rt[k], in_place->data() + packed_at[k]);
    }
  }
  // What goes to peer i: count x type at its byte displacement, or its packed block.
  TypePtr bytes = FindType(MPI_BYTE);
  auto send_block = [&](int i) {
    const size_t k = static_cast<size_t>(i);
    if (inplace) {
      return Block{in_place->data() + packed_at[k],
                   static_cast<int>(packed_at[k + 1] - packed_at[k]), bytes};
    }
    return Block{static_cast<const char*>(sendbuf) + sdispls[i], scounts[i], st[k]};
  };
  auto recv_block = [&](int i) {
    return Block{static_cast<char*>(recvbuf) + rdispls[i], rcounts[i], rt[static_cast<size_t>(i)]};
  };
  return ExchangeBlocks(fn, c, comm, send_block, recv_block, /*self_copy=*/!inplace, started);
}

// An all-to-all in place sends what recvbuf holds now, laid out as the receive, from a packed
// copy, so that incoming blocks cannot overwrite it first: the copy, and each peer's byte
// count and offset in it.
struct PackedBlocks {
  std::vector<char> data;
  std::vector<int> counts, displs;
};
int PackInPlace(const char* fn, MPI_Comm comm, Comm* c, const void* recvbuf, const int* recvcounts,
                const int* rdispls, MPI_Datatype recvtype, PackedBlocks* p) {
  TypePtr rt = FindType(recvtype);
  if (rt == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  const size_t n = static_cast<size_t>(c->g.size);
  p->counts.assign(n, 0);
  p->displs.assign(n, 0);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (recvcounts[i] < 0) return Fail(comm, fn, MPI_ERR_COUNT);
    p->counts[i] = static_cast<int>(gos::mpi::PackedSize(static_cast<size_t>(recvcounts[i]), *rt));
    p->displs[i] = static_cast<int>(total);
    total += static_cast<size_t>(p->counts[i]);
  }
  p->data.resize(total);
  for (size_t i = 0; i < n; ++i) {
    gos::mpi::Pack(At(recvbuf, rdispls[i], *rt), static_cast<size_t>(recvcounts[i]), *rt,
                   p->data.data() + p->displs[i]);
  }
  return MPI_SUCCESS;
}

int ReduceArgs(MPI_Datatype dt, MPI_Op op, int count) {
  if (count < 0) return MPI_ERR_COUNT;
  if (dt < MPI_CHAR || dt > MPI_LONG_DOUBLE_INT) {
    // Reductions take basic types only (a derived type is a valid handle but unsupported).
    return MPI_ERR_TYPE;
  }
  if (op < MPI_SUM || op > MPI_MAXLOC) return MPI_ERR_OP;
  if (!gos::mpi::OpValid(op - 1, dt - 1)) return MPI_ERR_OP;
  return MPI_SUCCESS;
}

MPI_Comm AddComm(std::unique_ptr<Comm> c) {
  State& s = S();
  s.comms.push_back(std::move(c));
  return static_cast<MPI_Comm>(s.comms.size() - 1);
}

// Makes the communicator of parent members `members` (parent ranks, in new-rank order) with
// context `ctx`.
MPI_Comm MakeChildWithContext(const Comm& parent, const std::vector<int>& members, uint64_t ctx) {
  auto c = std::make_unique<Comm>();
  c->errhandler = parent.errhandler;
  c->g.ctx = ctx;
  c->g.size = static_cast<int>(members.size());
  c->world_to_comm.assign(static_cast<size_t>(gos_world_size()), -1);
  for (size_t i = 0; i < members.size(); ++i) {
    const int w = parent.WorldRank(members[i]);
    c->world.push_back(w);
    c->world_to_comm[static_cast<size_t>(w)] = static_cast<int>(i);
    if (members[i] == parent.g.rank) c->g.rank = static_cast<int>(i);
  }
  c->g.world = c->world.data();
  c->g.world_to_comm = c->world_to_comm.data();
  return AddComm(std::move(c));
}

// Makes the communicator of parent members `members` (parent ranks, in new-rank order): the
// parent's next dup/split child, for split color `salt` (or kDupSalt).
MPI_Comm MakeChild(const Comm& parent, const std::vector<int>& members, uint64_t salt) {
  return MakeChildWithContext(parent, members,
                              gos::mpi::DeriveContext(parent.g.ctx, parent.children, salt));
}

int InitState() {
  State& s = S();
  s.comms.clear();
  s.comms.push_back(nullptr);  // MPI_COMM_NULL
  for (const gos_comm_t* g : {gos_comm_world(), gos_comm_self()}) {
    if (g == nullptr) return MPI_ERR_INTERN;
    auto c = std::make_unique<Comm>();
    c->g = *g;  // gos owns its world arrays for the life of the process
    AddComm(std::move(c));
  }
  s.groups.clear();
  s.groups.emplace_back();                    // MPI_GROUP_NULL
  s.groups.emplace_back(std::vector<int>{});  // MPI_GROUP_EMPTY
  return MPI_SUCCESS;
}

const std::vector<int>* FindGroup(MPI_Group g) {
  State& s = S();
  if (g <= 0 || static_cast<size_t>(g) >= s.groups.size() || !s.groups[static_cast<size_t>(g)]) {
    return nullptr;
  }
  return &*s.groups[static_cast<size_t>(g)];
}

MPI_Group AddGroup(std::vector<int> world_ranks) {
  State& s = S();
  s.groups.emplace_back(std::move(world_ranks));
  return static_cast<MPI_Group>(s.groups.size() - 1);
}

// Where world rank w is in the group, or -1.
int GroupRankOf(const std::vector<int>& g, int w) {
  auto it = std::find(g.begin(), g.end(), w);
  return it == g.end() ? -1 : static_cast<int>(it - g.begin());
}

MPI_User_function* FindUserOp(MPI_Op op) {
  State& s = S();
  if (op < kFirstUserOp || static_cast<size_t>(op - kFirstUserOp) >= s.user_ops.size()) {
    return nullptr;
  }
  return s.user_ops[static_cast<size_t>(op - kFirstUserOp)];
}

// Checks a reduction's arguments: a predefined op on a basic type, or a user op on any
// committed type. On success *t is the type.
int CheckReduction(const char* fn, MPI_Comm comm, int count, MPI_Datatype dt, MPI_Op op,
                   TypePtr* t) {
  if (FindUserOp(op) == nullptr) GOS_MPI_CHECK(comm, fn, ReduceArgs(dt, op, count));
  if (count < 0) return Fail(comm, fn, MPI_ERR_COUNT);
  *t = FindType(dt);
  if (*t == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  return MPI_SUCCESS;
}

// inout = in op inout, element by element, for `count` elements of dt laid out in memory: the
// user function, or gos's own for a predefined op. Arguments checked (CheckReduction).
int ApplyOp(const char* fn, MPI_Comm comm, const void* in, void* inout, int count, MPI_Datatype dt,
            MPI_Op op) {
  if (MPI_User_function* user = FindUserOp(op)) {
    int len = count;
    MPI_Datatype type = dt;
    // MPI's user function takes its input as non-const, and must not write there.
    user(const_cast<void*>(in), inout, &len, &type);
    return MPI_SUCCESS;
  }
  GOS_MPI_CHECK(
      comm, fn,
      FromGos(gos_reduce_local(in, inout, static_cast<size_t>(count),
                               static_cast<gos_type_t>(dt - 1), static_cast<gos_op_t>(op - 1))));
  return MPI_SUCCESS;
}

// Which ranks' contributions a gathered reduction combines.
enum class Span {
  kAll,        // all ranks, for every rank (Allreduce) or the root (Reduce)
  kInclusive,  // ranks 0..me (Scan)
  kExclusive,  // ranks 0..me-1 (Exscan; rank 0 gets nothing)
};

// Every rank's contribution, a block per rank in the type's memory layout (as a user op sees
// them), and how to combine them.
struct Gathered {
  std::vector<char> all;
  size_t base = 0;   // room below a negative lower bound
  size_t block = 0;  // bytes per rank
  int count = 0;
  MPI_Datatype dt = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  TypePtr type;
  char* At(int r) { return all.data() + base + block * static_cast<size_t>(r); }
};

// Checks a reduction's arguments (a predefined op on a basic type, or a user op on any
// committed type) and sizes the buffer for every rank's contribution.
int PrepareGathered(const char* fn, Comm* c, MPI_Comm comm, int count, MPI_Datatype dt, MPI_Op op,
                    Gathered* g) {
  if (int e = CheckReduction(fn, comm, count, dt, op, &g->type)) return e;
  g->count = count;
  g->dt = dt;
  g->op = op;
  g->block =
      static_cast<size_t>(count) * static_cast<size_t>(std::max<ptrdiff_t>(g->type->extent(), 0));
  g->base = static_cast<size_t>(-std::min<ptrdiff_t>(g->type->lb, 0));
  g->all.assign(g->block * static_cast<size_t>(c->g.size) + g->base, 0);
  return MPI_SUCCESS;
}

// recvbuf = x0 op (x1 op (... op x_last)), combined in rank order; only the type's data is
// written, not the gaps between its blocks.
int Combine(const char* fn, MPI_Comm comm, Gathered& g, int last, void* recvbuf) {
  const size_t n = static_cast<size_t>(g.count);
  std::vector<char> acc(g.block + g.base);
  std::memcpy(acc.data(), g.At(last) - g.base, g.block + g.base);
  char* a = acc.data() + g.base;
  for (int r = last - 1; r >= 0; --r) {
    if (int e = ApplyOp(fn, comm, g.At(r), a, g.count, g.dt, g.op)) return e;
  }
  std::vector<char> packed(gos::mpi::PackedSize(n, *g.type));
  gos::mpi::Pack(a, n, *g.type, packed.data());
  gos::mpi::Unpack(packed.data(), packed.size(), n, *g.type, recvbuf);
  return MPI_SUCCESS;
}

// Reductions by gathering: every contribution goes to every rank (MPI_Allgather), which
// combines the ones it needs in rank order. `root` >= 0: only it stores the result
// (MPI_Reduce). Serves the scans, and every reduction with a user op.
int GatheredReduce(const char* fn, const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt,
                   MPI_Op op, MPI_Comm comm, Span span, int root) {
  GOS_MPI_COMM(c, comm, fn);
  Gathered g;
  if (int e = PrepareGathered(fn, c, comm, count, dt, op, &g)) return e;
  if (root >= c->g.size) return Fail(comm, fn, MPI_ERR_ROOT);
  const bool store = root < 0 || c->g.rank == root;
  if (sendbuf == MPI_IN_PLACE && !store) return Fail(comm, fn, MPI_ERR_BUFFER);
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  if (int e = MPI_Allgather(in, count, dt, g.At(0), count, dt, comm)) return e;
  int last = c->g.size - 1;
  if (span == Span::kInclusive) last = c->g.rank;
  if (span == Span::kExclusive) last = c->g.rank - 1;
  if (!store || last < 0) return MPI_SUCCESS;  // Exscan's rank 0: recvbuf is undefined
  return Combine(fn, comm, g, last, recvbuf);
}

// A compound request (a nonblocking collective) over the started parts.
MPI_Request Compound(MPI_Comm comm, std::vector<MPI_Request> parts, std::function<int()> on_done) {
  MPI_Request r = AllocRequest();
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  q->comm = comm;
  q->compound = true;
  q->parts = std::move(parts);
  q->on_done = std::move(on_done);
  return r;
}

// Starts the point-to-point exchange of a nonblocking collective (ExchangeImpl's layout) and
// returns it as one compound request; on_done runs once every part is done.
int StartExchange(const char* fn, Comm* c, MPI_Comm comm, const void* sbuf,
                  const std::vector<int>& scounts, const std::vector<int>& sdispls,
                  MPI_Datatype stype, void* rbuf, const std::vector<int>& rcounts,
                  const std::vector<int>& rdispls, MPI_Datatype rtype, bool self_copy,
                  std::function<int()> on_done, MPI_Request* request) {
  std::vector<MPI_Request> parts;
  if (int e = ExchangeImpl(fn, sbuf, scounts.data(), sdispls.data(), stype, rbuf, rcounts.data(),
                           rdispls.data(), rtype, c, comm, self_copy, &parts)) {
    return e;
  }
  *request = Compound(comm, std::move(parts), std::move(on_done));
  return MPI_SUCCESS;
}

// MPI_Ialltoall(v) in place: the exchange from a packed copy that lives as long as the request.
int StartAlltoallInPlace(const char* fn, Comm* c, MPI_Comm comm, void* recvbuf,
                         const std::vector<int>& recvcounts, const std::vector<int>& rdispls,
                         MPI_Datatype recvtype, MPI_Request* request) {
  auto p = std::make_shared<PackedBlocks>();
  if (int e =
          PackInPlace(fn, comm, c, recvbuf, recvcounts.data(), rdispls.data(), recvtype, p.get())) {
    return e;
  }
  return StartExchange(
      fn, c, comm, p->data.data(), p->counts, p->displs, MPI_BYTE, recvbuf, recvcounts, rdispls,
      recvtype, true, [p] { return MPI_SUCCESS; }, request);
}

// ---- Attribute caching.

// A user keyval, freed ones included (their stored attributes outlive them), or nullptr.
Keyval* FindKeyval(int keyval) {
  State& s = S();
  if (keyval < kFirstKeyval || static_cast<size_t>(keyval - kFirstKeyval) >= s.keyvals.size()) {
    return nullptr;
  }
  return &s.keyvals[static_cast<size_t>(keyval - kFirstKeyval)];
}

bool IsPredefinedKeyval(int keyval) { return keyval >= MPI_TAG_UB && keyval <= MPI_LASTUSEDCODE; }

std::vector<std::pair<int, void*>>::iterator FindAttr(Comm* c, int keyval) {
  return std::find_if(c->attrs.begin(), c->attrs.end(),
                      [keyval](const auto& a) { return a.first == keyval; });
}

// Deletes attribute `keyval` of comm (nothing when it is not set): its delete callback runs
// first, and an error from it leaves the attribute in place and is returned. The callback
// may call MPI, so the attribute is looked up again after it.
int DeleteAttr(MPI_Comm comm, Comm* c, int keyval) {
  auto it = FindAttr(c, keyval);
  if (it == c->attrs.end()) return MPI_SUCCESS;
  const Keyval* kv = FindKeyval(keyval);
  if (kv != nullptr && kv->del != nullptr) {
    if (int e = kv->del(comm, keyval, it->second, kv->extra)) return e;
  }
  it = FindAttr(c, keyval);
  if (it != c->attrs.end()) c->attrs.erase(it);
  return MPI_SUCCESS;
}

// Deletes every attribute of comm, the last set first (MPI_Comm_free, and MPI_COMM_SELF's at
// MPI_Finalize); stops at a delete callback's error.
int DeleteAllAttrs(MPI_Comm comm, Comm* c) {
  while (!c->attrs.empty()) {
    if (int e = DeleteAttr(comm, c, c->attrs.back().first)) return e;
  }
  return MPI_SUCCESS;
}

// MPI_Comm_dup's copying: each attribute of comm whose copy callback sets its flag is stored
// on newcomm with the value the callback gave; stops at a callback's error.
int CopyAttrs(MPI_Comm comm, const Comm& from, Comm* to) {
  const std::vector<std::pair<int, void*>> attrs = from.attrs;
  for (const auto& [keyval, value] : attrs) {
    const Keyval* kv = FindKeyval(keyval);
    if (kv == nullptr || kv->copy == nullptr) continue;
    void* out = nullptr;
    int flag = 0;
    if (int e = kv->copy(comm, keyval, kv->extra, value, &out, &flag)) return e;
    if (flag != 0) to->attrs.emplace_back(keyval, out);
  }
  return MPI_SUCCESS;
}

// MPI_Group_range_incl / _excl: the ranges' ranks, then MPI_Group_incl / _excl of them.
int GroupRanges(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup, bool include) {
  const char* const fn = include ? "MPI_Group_range_incl" : "MPI_Group_range_excl";
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_GROUP);
  std::vector<int> ranks;
  if (!gos::mpi::ExpandRanges(n, ranges, static_cast<int>(g->size()), &ranks)) {
    return Fail(MPI_COMM_WORLD, fn, MPI_ERR_RANK);
  }
  const int count = static_cast<int>(ranks.size());
  return include ? MPI_Group_incl(group, count, ranks.data(), newgroup)
                 : MPI_Group_excl(group, count, ranks.data(), newgroup);
}

}  // namespace

namespace gos::mpi {

std::shared_ptr<const TypeNode> TransferLayout(MPI_Datatype datatype) {
  return FindType(datatype, /*for_transfer=*/true);
}

int FailCall(MPI_Comm comm, const char* fn, int code) { return Fail(comm, fn, code); }

}  // namespace gos::mpi

extern "C" {

int MPI_Init(int* /*argc*/, char*** /*argv*/) {
  int err = gos_init();
  if (err != GOS_OK) {
    // No communicator exists yet, so the only handler is the fatal default.
    std::fprintf(stderr, "gos MPI: MPI_Init: %s\n", gos_error_string(err));
    std::fflush(stderr);
    gos_abort(1);
  }
  GOS_MPI_CHECK(MPI_COMM_WORLD, "MPI_Init", InitState());
  S().main_thread = std::this_thread::get_id();
  return MPI_SUCCESS;
}

static int g_thread_level = MPI_THREAD_SINGLE;  // what MPI_Init_thread provided

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int err = MPI_Init(argc, argv);
  g_thread_level = std::clamp(required, MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED);
  if (provided != nullptr) *provided = g_thread_level;
  return err;
}

int MPI_Finalize(void) {
  // As if MPI_COMM_SELF were freed first (MPI-3.1 8.7.1): programs hook cleanup there.
  if (Comm* self = FindComm(MPI_COMM_SELF)) {
    GOS_MPI_CHECK(MPI_COMM_SELF, "MPI_Finalize", DeleteAllAttrs(MPI_COMM_SELF, self));
  }
  SweepDetached(/*block=*/true);
  GOS_MPI_CHECK(MPI_COMM_WORLD, "MPI_Finalize", FromGos(gos_finalize()));
  return MPI_SUCCESS;
}

int MPI_Initialized(int* flag) {
  *flag = gos_initialized();
  return MPI_SUCCESS;
}

int MPI_Finalized(int* flag) {
  *flag = gos_finalized();
  return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm /*comm*/, int errorcode) {
  // gos ends the whole job, whatever the communicator (as most MPIs do).
  gos_abort(errorcode);
}

int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_rank");
  *rank = c->g.rank;
  return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int* size) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_size");
  *size = c->g.size;
  return MPI_SUCCESS;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_dup");
  // Every member calls dup in the same order, so `children` agrees everywhere and the new
  // context needs no communication.
  std::vector<int> members(static_cast<size_t>(c->g.size));
  for (int i = 0; i < c->g.size; ++i) members[static_cast<size_t>(i)] = i;
  const MPI_Comm dup = MakeChild(*c, members, gos::mpi::kDupSalt);
  Comm* n = FindComm(dup);
  if (n == nullptr) return Fail(comm, "MPI_Comm_dup", MPI_ERR_INTERN);
  n->cart = c->cart;
  n->graph = c->graph;
  ++c->children;
  if (int e = CopyAttrs(comm, *c, n)) {
    // A copy callback failed: the attributes copied so far are deleted with the new one.
    (void)DeleteAllAttrs(dup, n);
    S().comms[static_cast<size_t>(dup)].reset();
    *newcomm = MPI_COMM_NULL;
    return Fail(comm, "MPI_Comm_dup", e);
  }
  *newcomm = dup;
  return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  static const char* const kFn = "MPI_Comm_split";
  GOS_MPI_COMM(c, comm, kFn);
  if (color < 0 && color != MPI_UNDEFINED) return Fail(comm, kFn, MPI_ERR_ARG);
  const int n = c->g.size;
  std::vector<int> mine = {color, key};
  std::vector<int> all(2 * static_cast<size_t>(n));
  std::vector<int> counts(static_cast<size_t>(n), 2);
  std::vector<int> displs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) displs[static_cast<size_t>(i)] = 2 * i;
  all[2 * static_cast<size_t>(c->g.rank)] = color;
  all[2 * static_cast<size_t>(c->g.rank) + 1] = key;
  if (int e = ExchangeImpl(kFn, mine.data(), counts.data(), std::vector<int>(n, 0).data(), MPI_INT,
                           all.data(), counts.data(), displs.data(), MPI_INT, c, comm,
                           /*self_copy=*/false)) {
    return e;
  }
  std::vector<gos::mpi::SplitEntry> entries(static_cast<size_t>(n));
  for (size_t i = 0; i < entries.size(); ++i) entries[i] = {all[2 * i], all[2 * i + 1]};
  std::vector<int> members = gos::mpi::SplitMembers(entries, c->g.rank, MPI_UNDEFINED);
  *newcomm = members.empty() ? MPI_COMM_NULL : MakeChild(*c, members, static_cast<uint64_t>(color));
  ++c->children;
  return MPI_SUCCESS;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info /*info*/,
                        MPI_Comm* newcomm) {
  if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED) {
    return Fail(comm, "MPI_Comm_split_type", MPI_ERR_ARG);
  }
  // The node the rank was launched on (a restored rank keeps its communicators).
  const char* node = std::getenv("GOS_NODE");
  const int color = split_type == MPI_UNDEFINED ? MPI_UNDEFINED : node ? std::atoi(node) : 0;
  return MPI_Comm_split(comm, color, key, newcomm);
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  static const char* const kFn = "MPI_Comm_compare";
  Comm* a = FindComm(comm1);
  Comm* b = FindComm(comm2);
  if (a == nullptr || b == nullptr) return Fail(comm1, kFn, MPI_ERR_COMM);
  if (result == nullptr) return Fail(comm1, kFn, MPI_ERR_ARG);
  std::vector<int> wa(static_cast<size_t>(a->g.size)), wb(static_cast<size_t>(b->g.size));
  for (int i = 0; i < a->g.size; ++i) wa[static_cast<size_t>(i)] = a->WorldRank(i);
  for (int i = 0; i < b->g.size; ++i) wb[static_cast<size_t>(i)] = b->WorldRank(i);
  if (comm1 == comm2) {
    *result = MPI_IDENT;
  } else if (wa == wb) {
    *result = MPI_CONGRUENT;
  } else {
    std::sort(wa.begin(), wa.end());
    std::sort(wb.begin(), wb.end());
    *result = wa == wb ? MPI_SIMILAR : MPI_UNEQUAL;
  }
  return MPI_SUCCESS;
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_group");
  std::vector<int> w(static_cast<size_t>(c->g.size));
  for (int i = 0; i < c->g.size; ++i) w[static_cast<size_t>(i)] = c->WorldRank(i);
  *group = AddGroup(std::move(w));
  return MPI_SUCCESS;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  static const char* const kFn = "MPI_Comm_create";
  GOS_MPI_COMM(c, comm, kFn);
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(comm, kFn, MPI_ERR_GROUP);
  for (int w : *g) {
    if (w < 0 || w >= gos_world_size() ||
        (c->g.world_to_comm != nullptr && c->g.world_to_comm[w] < 0)) {
      return Fail(comm, kFn, MPI_ERR_GROUP);  // not a subset of comm
    }
  }
  // Members in group order; the others get MPI_COMM_NULL (a split every member makes). Since
  // MPI 2.2 the ranks may pass different, disjoint groups and each group becomes its own
  // communicator: the color is the group's lowest world rank, which disjoint groups never
  // share.
  const int at = GroupRankOf(*g, c->WorldRank(c->g.rank));
  const int color = at < 0 ? MPI_UNDEFINED : *std::min_element(g->begin(), g->end());
  return MPI_Comm_split(comm, color, at, newcomm);
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  static const char* const kFn = "MPI_Comm_create_group";
  GOS_MPI_COMM(c, comm, kFn);
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(comm, kFn, MPI_ERR_GROUP);
  if (tag < 0) return Fail(comm, kFn, MPI_ERR_TAG);
  if (newcomm == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  std::vector<int> members;
  for (int w : *g) {
    const int r = w < 0 || w >= gos_world_size()  ? -1
                  : c->g.world_to_comm != nullptr ? c->g.world_to_comm[w]
                                                  : w;
    if (r < 0 || r >= c->g.size) return Fail(comm, kFn, MPI_ERR_GROUP);  // not a subset of comm
    members.push_back(r);
  }
  if (std::find(members.begin(), members.end(), c->g.rank) == members.end()) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  // Only the members call, so the context comes from what they all share and nobody else
  // does: the group (in order), the tag, and how many times they made one of this key.
  const uint64_t key = gos::mpi::GroupKey(*g, tag);
  const uint64_t serial = c->group_creates[key]++;
  *newcomm = MakeChildWithContext(
      *c, members, gos::mpi::DeriveContext(c->g.ctx, serial, gos::mpi::kCreateGroupSalt ^ key));
  return MPI_SUCCESS;
}

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag) {
  static const char* const kFn = "MPI_Comm_get_attr";
  static int tag_ub = 0x7fffffff, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_global = 0,
             universe = 0;
  GOS_MPI_COMM(c, comm, kFn);
  if (attribute_val == nullptr || flag == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  if (!IsPredefinedKeyval(comm_keyval)) {
    if (FindKeyval(comm_keyval) == nullptr) return Fail(comm, kFn, MPI_ERR_KEYVAL);
    auto it = FindAttr(c, comm_keyval);
    *flag = it != c->attrs.end() ? 1 : 0;
    if (*flag != 0) *static_cast<void**>(attribute_val) = it->second;
    return MPI_SUCCESS;
  }
  int* value = nullptr;
  switch (comm_keyval) {
    case MPI_TAG_UB:
      value = &tag_ub;
      break;
    case MPI_HOST:
      value = &host;
      break;
    case MPI_IO:
      value = &io;  // every rank can do I/O
      break;
    case MPI_WTIME_IS_GLOBAL:
      value = &wtime_global;  // each node's own clock
      break;
    case MPI_UNIVERSE_SIZE:
      universe = gos_world_size();
      value = &universe;
      break;
    case MPI_LASTUSEDCODE:
      value = &S().last_used_code;
      break;
    default:
      break;
  }
  *flag = value != nullptr ? 1 : 0;
  if (value != nullptr) *static_cast<int**>(attribute_val) = value;
  return MPI_SUCCESS;
}

int MPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  return MPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}

int gos_mpi_comm_null_copy_fn(MPI_Comm /*oldcomm*/, int /*comm_keyval*/, void* /*extra_state*/,
                              void* /*attribute_val_in*/, void* /*attribute_val_out*/, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

int gos_mpi_comm_null_delete_fn(MPI_Comm /*comm*/, int /*comm_keyval*/, void* /*attribute_val*/,
                                void* /*extra_state*/) {
  return MPI_SUCCESS;
}

int gos_mpi_comm_dup_fn(MPI_Comm /*oldcomm*/, int /*comm_keyval*/, void* /*extra_state*/,
                        void* attribute_val_in, void* attribute_val_out, int* flag) {
  *static_cast<void**>(attribute_val_out) = attribute_val_in;
  *flag = 1;
  return MPI_SUCCESS;
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval,
                           void* extra_state) {
  if (comm_keyval == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Comm_create_keyval", MPI_ERR_ARG);
  State& s = S();
  s.keyvals.push_back({comm_copy_attr_fn, comm_delete_attr_fn, extra_state, false});
  *comm_keyval = kFirstKeyval + static_cast<int>(s.keyvals.size() - 1);
  return MPI_SUCCESS;
}

int MPI_Comm_free_keyval(int* comm_keyval) {
  Keyval* kv = comm_keyval != nullptr ? FindKeyval(*comm_keyval) : nullptr;
  if (kv == nullptr || kv->freed) {
    return Fail(MPI_COMM_WORLD, "MPI_Comm_free_keyval", MPI_ERR_KEYVAL);
  }
  kv->freed = true;
  *comm_keyval = MPI_KEYVAL_INVALID;
  return MPI_SUCCESS;
}

int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val) {
  static const char* const kFn = "MPI_Comm_set_attr";
  GOS_MPI_COMM(c, comm, kFn);
  const Keyval* kv = FindKeyval(comm_keyval);
  if (kv == nullptr || kv->freed) return Fail(comm, kFn, MPI_ERR_KEYVAL);
  // A value already there is deleted first, as by MPI_Comm_delete_attr (its callback runs).
  if (int e = DeleteAttr(comm, c, comm_keyval)) return Fail(comm, kFn, e);
  c->attrs.emplace_back(comm_keyval, attribute_val);
  return MPI_SUCCESS;
}

int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
  static const char* const kFn = "MPI_Comm_delete_attr";
  GOS_MPI_COMM(c, comm, kFn);
  if (FindKeyval(comm_keyval) == nullptr) return Fail(comm, kFn, MPI_ERR_KEYVAL);
  GOS_MPI_CHECK(comm, kFn, DeleteAttr(comm, c, comm_keyval));
  return MPI_SUCCESS;
}

int MPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval,
                      void* extra_state) {
  return MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}

int MPI_Keyval_free(int* keyval) { return MPI_Comm_free_keyval(keyval); }

int MPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val) {
  return MPI_Comm_set_attr(comm, keyval, attribute_val);
}

int MPI_Attr_delete(MPI_Comm comm, int keyval) { return MPI_Comm_delete_attr(comm, keyval); }

int MPI_Group_size(MPI_Group group, int* size) {
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_size", MPI_ERR_GROUP);
  *size = static_cast<int>(g->size());
  return MPI_SUCCESS;
}

int MPI_Group_rank(MPI_Group group, int* rank) {
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_rank", MPI_ERR_GROUP);
  const int at = GroupRankOf(*g, gos_world_rank());
  *rank = at < 0 ? MPI_UNDEFINED : at;
  return MPI_SUCCESS;
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_incl", MPI_ERR_GROUP);
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= static_cast<int>(g->size()) ||
        std::find(ranks, ranks + i, ranks[i]) != ranks + i) {
      return Fail(MPI_COMM_WORLD, "MPI_Group_incl", MPI_ERR_RANK);
    }
    out.push_back((*g)[static_cast<size_t>(ranks[i])]);
  }
  *newgroup = out.empty() ? MPI_GROUP_EMPTY : AddGroup(std::move(out));
  return MPI_SUCCESS;
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  const std::vector<int>* g = FindGroup(group);
  if (g == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_excl", MPI_ERR_GROUP);
  std::vector<bool> drop(g->size(), false);
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= static_cast<int>(g->size())) {
      return Fail(MPI_COMM_WORLD, "MPI_Group_excl", MPI_ERR_RANK);
    }
    drop[static_cast<size_t>(ranks[i])] = true;
  }
  std::vector<int> out;
  for (size_t i = 0; i < g->size(); ++i) {
    if (!drop[i]) out.push_back((*g)[i]);
  }
  *newgroup = out.empty() ? MPI_GROUP_EMPTY : AddGroup(std::move(out));
  return MPI_SUCCESS;
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  return GroupRanges(group, n, ranges, newgroup, true);
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  return GroupRanges(group, n, ranges, newgroup, false);
}

}  // extern "C"

namespace {

// Union (a, then b's not in a), intersection (a's in b) or difference (a's not in b), in
// the order of the first group, as MPI defines them.
enum class SetOp { kUnion, kIntersection, kDifference };

int GroupSetOp(const char* fn, MPI_Group g1, MPI_Group g2, MPI_Group* out, SetOp which) {
  const std::vector<int>* a = FindGroup(g1);
  const std::vector<int>* b = FindGroup(g2);
  if (a == nullptr || b == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_GROUP);
  std::vector<int> r;
  auto in = [](const std::vector<int>& g, int w) { return GroupRankOf(g, w) >= 0; };
  for (int w : *a) {
    if (which == SetOp::kUnion || (which == SetOp::kIntersection) == in(*b, w)) r.push_back(w);
  }
  if (which == SetOp::kUnion) {
    for (int w : *b) {
      if (!in(*a, w)) r.push_back(w);
    }
  }
  *out = r.empty() ? MPI_GROUP_EMPTY : AddGroup(std::move(r));
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return GroupSetOp("MPI_Group_union", group1, group2, newgroup, SetOp::kUnion);
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return GroupSetOp("MPI_Group_intersection", group1, group2, newgroup, SetOp::kIntersection);
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return GroupSetOp("MPI_Group_difference", group1, group2, newgroup, SetOp::kDifference);
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[]) {
  const std::vector<int>* a = FindGroup(group1);
  const std::vector<int>* b = FindGroup(group2);
  if (a == nullptr || b == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Group_translate_ranks", MPI_ERR_GROUP);
  }
  for (int i = 0; i < n; ++i) {
    if (ranks1[i] == MPI_PROC_NULL) {
      ranks2[i] = MPI_PROC_NULL;
      continue;
    }
    if (ranks1[i] < 0 || ranks1[i] >= static_cast<int>(a->size())) {
      return Fail(MPI_COMM_WORLD, "MPI_Group_translate_ranks", MPI_ERR_RANK);
    }
    const int at = GroupRankOf(*b, (*a)[static_cast<size_t>(ranks1[i])]);
    ranks2[i] = at < 0 ? MPI_UNDEFINED : at;
  }
  return MPI_SUCCESS;
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result) {
  const std::vector<int>* a = FindGroup(group1);
  const std::vector<int>* b = FindGroup(group2);
  if (a == nullptr || b == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Group_compare", MPI_ERR_GROUP);
  if (*a == *b) {
    *result = MPI_IDENT;
    return MPI_SUCCESS;
  }
  std::vector<int> sa = *a, sb = *b;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  *result = sa == sb ? MPI_SIMILAR : MPI_UNEQUAL;
  return MPI_SUCCESS;
}

int MPI_Group_free(MPI_Group* group) {
  if (group == nullptr || FindGroup(*group) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Group_free", MPI_ERR_GROUP);
  }
  if (*group != MPI_GROUP_EMPTY) S().groups[static_cast<size_t>(*group)].reset();
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm* comm) {
  Comm* c = comm != nullptr ? FindComm(*comm) : nullptr;
  if (c == nullptr || *comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF) {
    return Fail(comm != nullptr ? *comm : MPI_COMM_WORLD, "MPI_Comm_free", MPI_ERR_COMM);
  }
  // The attributes' delete callbacks run first; one's error leaves the communicator as it is.
  GOS_MPI_CHECK(*comm, "MPI_Comm_free", DeleteAllAttrs(*comm, c));
  S().comms[static_cast<size_t>(*comm)].reset();
  S().comm_names.erase(*comm);
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

// The error handlers there are: the predefined ones and those MPI_Comm_create_errhandler made.
static bool IsErrhandler(MPI_Errhandler e) {
  return e == MPI_ERRORS_ARE_FATAL || e == MPI_ERRORS_RETURN || e == MPI_ERRORS_ABORT ||
         UserErrhandler(e) != nullptr;
}

int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* function, MPI_Errhandler* errhandler) {
  if (function == nullptr || errhandler == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Comm_create_errhandler", MPI_ERR_ARG);
  }
  State& s = S();
  s.errhandlers.push_back(function);
  *errhandler = kFirstUserErrhandler + static_cast<MPI_Errhandler>(s.errhandlers.size() - 1);
  return MPI_SUCCESS;
}

int MPI_Errhandler_create(MPI_Handler_function* function, MPI_Errhandler* errhandler) {
  return MPI_Comm_create_errhandler(function, errhandler);
}

int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_call_errhandler");
  (void)c;
  Fail(comm, "MPI_Comm_call_errhandler", errorcode);
  return MPI_SUCCESS;
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_set_errhandler");
  if (!IsErrhandler(errhandler)) return Fail(comm, "MPI_Comm_set_errhandler", MPI_ERR_ARG);
  c->errhandler = errhandler;
  return MPI_SUCCESS;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_get_errhandler");
  *errhandler = c->errhandler;
  return MPI_SUCCESS;
}

int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler) {
  return MPI_Comm_set_errhandler(comm, errhandler);
}

int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return MPI_Comm_get_errhandler(comm, errhandler);
}

int MPI_Errhandler_free(MPI_Errhandler* errhandler) {
  if (errhandler == nullptr || !IsErrhandler(*errhandler)) {
    return Fail(MPI_COMM_WORLD, "MPI_Errhandler_free", MPI_ERR_ARG);
  }
  // Predefined handlers are never freed: communicators using one keep it.
  *errhandler = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

int MPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_test_inter");
  (void)c;
  if (flag == nullptr) return Fail(comm, "MPI_Comm_test_inter", MPI_ERR_ARG);
  *flag = 0;  // every communicator is an intracommunicator
  return MPI_SUCCESS;
}

int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  GOS_MPI_COMM(c, comm, "MPI_Isend");
  GOS_MPI_CHECK(comm, "MPI_Isend",
                StartSend(buf, count, datatype, dest, tag, comm, c->g, 0, request));
  return MPI_SUCCESS;
}

int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  GOS_MPI_COMM(c, comm, "MPI_Issend");
  GOS_MPI_CHECK(comm, "MPI_Issend",
                StartSend(buf, count, datatype, dest, tag, comm, c->g, GOS_SEND_SYNC, request));
  return MPI_SUCCESS;
}

int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  GOS_MPI_COMM(c, comm, "MPI_Irecv");
  GOS_MPI_CHECK(comm, "MPI_Irecv",
                StartRecv(buf, count, datatype, source, tag, comm, c->g, request));
  return MPI_SUCCESS;
}

static int BlockingSend(const char* fn, const void* buf, int count, MPI_Datatype datatype, int dest,
                        int tag, MPI_Comm comm, int flags) {
  GOS_MPI_COMM(c, comm, fn);
  MPI_Request r;
  GOS_MPI_CHECK(comm, fn, StartSend(buf, count, datatype, dest, tag, comm, c->g, flags, &r));
  GOS_MPI_CHECK(comm, fn, WaitOne(r, MPI_STATUS_IGNORE));
  return MPI_SUCCESS;
}

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return BlockingSend("MPI_Send", buf, count, datatype, dest, tag, comm, 0);
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return BlockingSend("MPI_Ssend", buf, count, datatype, dest, tag, comm, GOS_SEND_SYNC);
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  GOS_MPI_COMM(c, comm, "MPI_Recv");
  MPI_Request r;
  GOS_MPI_CHECK(comm, "MPI_Recv", StartRecv(buf, count, datatype, source, tag, comm, c->g, &r));
  GOS_MPI_CHECK(comm, "MPI_Recv", WaitOne(r, status));
  return MPI_SUCCESS;
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  static const char* const kFn = "MPI_Sendrecv";
  GOS_MPI_COMM(c, comm, kFn);
  MPI_Request rr;
  MPI_Request sr;
  GOS_MPI_CHECK(comm, kFn,
                StartRecv(recvbuf, recvcount, recvtype, source, recvtag, comm, c->g, &rr));
  int err = StartSend(sendbuf, sendcount, sendtype, dest, sendtag, comm, c->g, 0, &sr);
  int rerr = WaitOne(rr, status);
  if (err == MPI_SUCCESS) err = WaitOne(sr, MPI_STATUS_IGNORE);
  GOS_MPI_CHECK(comm, kFn, rerr != MPI_SUCCESS ? rerr : err);
  return MPI_SUCCESS;
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  static const char* const kFn = "MPI_Iprobe";
  GOS_MPI_COMM(c, comm, kFn);
  if (source == MPI_PROC_NULL) {
    *flag = 1;
    SetEmptyStatus(status, MPI_PROC_NULL);
    return MPI_SUCCESS;
  }
  if (source != MPI_ANY_SOURCE && (source < 0 || source >= c->g.size)) {
    return Fail(comm, kFn, MPI_ERR_RANK);
  }
  if (tag < 0 && tag != MPI_ANY_TAG) return Fail(comm, kFn, MPI_ERR_TAG);
  gos_status_t st{};
  GOS_MPI_CHECK(comm, kFn,
                FromGos(gos_iprobe(source == MPI_ANY_SOURCE ? GOS_ANY_SOURCE : source,
                                   tag == MPI_ANY_TAG ? GOS_ANY_TAG : tag, &c->g, flag, &st)));
  if (*flag) SetStatus(status, st.source, st.tag, MPI_SUCCESS, st.len, 0);
  return MPI_SUCCESS;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  static const char* const kFn = "MPI_Probe";
  GOS_MPI_COMM(c, comm, kFn);
  if (source == MPI_PROC_NULL) {
    SetEmptyStatus(status, MPI_PROC_NULL);
    return MPI_SUCCESS;
  }
  if (source != MPI_ANY_SOURCE && (source < 0 || source >= c->g.size)) {
    return Fail(comm, kFn, MPI_ERR_RANK);
  }
  if (tag < 0 && tag != MPI_ANY_TAG) return Fail(comm, kFn, MPI_ERR_TAG);
  gos_status_t st{};
  GOS_MPI_CHECK(comm, kFn,
                FromGos(gos_probe(source == MPI_ANY_SOURCE ? GOS_ANY_SOURCE : source,
                                  tag == MPI_ANY_TAG ? GOS_ANY_TAG : tag, &c->g, &st)));
  SetStatus(status, st.source, st.tag, MPI_SUCCESS, st.len, 0);
  return MPI_SUCCESS;
}

int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (status == nullptr || t == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Get_count", status == nullptr ? MPI_ERR_ARG : MPI_ERR_TYPE);
  }
  *count = gos::mpi::CountOf(status->gos_bytes, *t, MPI_UNDEFINED);
  return MPI_SUCCESS;
}

int MPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return GetElements("MPI_Get_elements", status, datatype, count);
}

int MPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  return GetElements("MPI_Get_elements_x", status, datatype, count);
}

static int Active_Wait(MPI_Request* request, MPI_Status* status) {
  if (request == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Wait", MPI_ERR_REQUEST);
  if (*request == MPI_REQUEST_NULL) {
    SetEmptyStatus(status, MPI_ANY_SOURCE);
    return MPI_SUCCESS;
  }
  Request* q = FindRequest(*request);
  if (q == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Wait", MPI_ERR_REQUEST);
  const MPI_Comm comm = q->comm;
  const MPI_Request r = *request;
  *request = MPI_REQUEST_NULL;
  GOS_MPI_CHECK(comm, "MPI_Wait", WaitOne(r, status));
  return MPI_SUCCESS;
}

// MPI_Test's and MPI_Request_get_status's look at request `r`: *flag tells whether it is
// complete (MPI_REQUEST_NULL is, with an empty status); *done is the completed request, else
// nullptr.
static int PollOne(const char* fn, MPI_Request r, int* flag, MPI_Status* status, Request** done) {
  *done = nullptr;
  if (r == MPI_REQUEST_NULL) {
    *flag = 1;
    SetEmptyStatus(status, MPI_ANY_SOURCE);
    return MPI_SUCCESS;
  }
  Request* q = FindRequest(r);
  if (q == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_REQUEST);
  GOS_MPI_CHECK(q->comm, fn, Poll(q));
  *flag = q->done ? 1 : 0;
  if (q->done) *done = q;
  return MPI_SUCCESS;
}

static int Active_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (request == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Test", MPI_ERR_REQUEST);
  Request* q = nullptr;
  if (int e = PollOne("MPI_Test", *request, flag, status, &q)) return e;
  if (q == nullptr) return MPI_SUCCESS;
  const MPI_Comm comm = q->comm;
  const MPI_Request r = *request;
  *request = MPI_REQUEST_NULL;
  GOS_MPI_CHECK(comm, "MPI_Test", Finish(r, status));
  return MPI_SUCCESS;
}

// MPI_Test without the release: a completed request keeps its outcome for the call that
// finishes it.
static int Active_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  static const char* const kFn = "MPI_Request_get_status";
  if (flag == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  Request* q = nullptr;
  if (int e = PollOne(kFn, request, flag, status, &q)) return e;
  if (q != nullptr) GOS_MPI_CHECK(q->comm, kFn, Outcome(q, status));
  return MPI_SUCCESS;
}

// Validates a request array: every entry is MPI_REQUEST_NULL or a live request.
static int CheckRequests(int count, const MPI_Request* requests) {
  if (count < 0) return MPI_ERR_COUNT;
  if (count > 0 && requests == nullptr) return MPI_ERR_REQUEST;
  for (int i = 0; i < count; ++i) {
    if (requests[i] != MPI_REQUEST_NULL && FindRequest(requests[i]) == nullptr) {
      return MPI_ERR_REQUEST;
    }
  }
  return MPI_SUCCESS;
}

// Finishes requests[i] (done), storing the status; reports errors via `*failed_comm`.
static int FinishAt(MPI_Request* requests, int i, MPI_Status* status, MPI_Comm* failed_comm) {
  const MPI_Request r = requests[i];
  const MPI_Comm comm = S().reqs[static_cast<size_t>(r - 1)].comm;
  requests[i] = MPI_REQUEST_NULL;
  int err = Finish(r, status);
  if (err != MPI_SUCCESS && *failed_comm == MPI_COMM_NULL) *failed_comm = comm;
  return err;
}

static int Active_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  static const char* const kFn = "MPI_Waitall";
  GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, CheckRequests(count, requests));
  MPI_Comm failed = MPI_COMM_NULL;
  int first = MPI_SUCCESS;
  bool any_error = false;
  for (int i = 0; i < count; ++i) {
    MPI_Status* st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    if (requests[i] == MPI_REQUEST_NULL) {
      SetEmptyStatus(st, MPI_ANY_SOURCE);
      continue;
    }
    Request* q = FindRequest(requests[i]);
    int err = WaitDone(q);
    if (err != MPI_SUCCESS) {
      if (failed == MPI_COMM_NULL) failed = q->comm;
    } else {
      err = FinishAt(requests, i, st, &failed);
    }
    if (err != MPI_SUCCESS) {
      any_error = true;
      if (first == MPI_SUCCESS) first = err;
    }
  }
  if (!any_error) return MPI_SUCCESS;
  return Fail(failed, kFn, statuses == MPI_STATUSES_IGNORE ? first : MPI_ERR_IN_STATUS);
}

static int Active_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  static const char* const kFn = "MPI_Testall";
  GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, CheckRequests(count, requests));
  // MPI: unless all are complete, no request is released; completions seen meanwhile are
  // kept in the requests (Poll) until then.
  bool all = true;
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    Request* q = FindRequest(requests[i]);
    GOS_MPI_CHECK(q->comm, kFn, Poll(q));
    if (!q->done) all = false;
  }
  *flag = all ? 1 : 0;
  if (!all) return MPI_SUCCESS;
  MPI_Comm failed = MPI_COMM_NULL;
  int first = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) {
    MPI_Status* st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    if (requests[i] == MPI_REQUEST_NULL) {
      SetEmptyStatus(st, MPI_ANY_SOURCE);
      continue;
    }
    int err = FinishAt(requests, i, st, &failed);
    if (first == MPI_SUCCESS) first = err;
  }
  if (first == MPI_SUCCESS) return MPI_SUCCESS;
  return Fail(failed, kFn, statuses == MPI_STATUSES_IGNORE ? first : MPI_ERR_IN_STATUS);
}

static int Active_Testany(int count, MPI_Request requests[], int* index, int* flag,
                          MPI_Status* status) {
  static const char* const kFn = "MPI_Testany";
  GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, CheckRequests(count, requests));
  *index = MPI_UNDEFINED;
  bool any_active = false;
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    any_active = true;
    Request* q = FindRequest(requests[i]);
    GOS_MPI_CHECK(q->comm, kFn, Poll(q));
    if (q->done) {
      *flag = 1;
      *index = i;
      MPI_Comm failed = MPI_COMM_NULL;
      GOS_MPI_CHECK(failed, kFn, FinishAt(requests, i, status, &failed));
      return MPI_SUCCESS;
    }
  }
  // With no active request MPI answers flag = true, index = MPI_UNDEFINED, empty status.
  *flag = any_active ? 0 : 1;
  if (!any_active) SetEmptyStatus(status, MPI_ANY_SOURCE);
  return MPI_SUCCESS;
}

static int Active_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  static const char* const kFn = "MPI_Waitany";
  GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, CheckRequests(count, requests));
  for (;;) {
    int flag = 0;
    int err = MPI_Testany(count, requests, index, &flag, status);
    if (err != MPI_SUCCESS || flag) return err;
    GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, FromGos(gos_progress_wait()));
  }
}

static int Testsome(const char* fn, int incount, MPI_Request requests[], int* outcount,
                    int indices[], MPI_Status statuses[]) {
  GOS_MPI_CHECK(MPI_COMM_WORLD, fn, CheckRequests(incount, requests));
  bool any_active = false;
  for (int i = 0; i < incount; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    any_active = true;
    Request* q = FindRequest(requests[i]);
    GOS_MPI_CHECK(q->comm, fn, Poll(q));
  }
  if (!any_active) {
    *outcount = MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  int n = 0;
  MPI_Comm failed = MPI_COMM_NULL;
  int first = MPI_SUCCESS;
  for (int i = 0; i < incount; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    if (!FindRequest(requests[i])->done) continue;
    MPI_Status* st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[n];
    indices[n++] = i;
    int err = FinishAt(requests, i, st, &failed);
    if (first == MPI_SUCCESS) first = err;
  }
  *outcount = n;
  if (first == MPI_SUCCESS) return MPI_SUCCESS;
  return Fail(failed, fn, statuses == MPI_STATUSES_IGNORE ? first : MPI_ERR_IN_STATUS);
}

static int Active_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                           MPI_Status statuses[]) {
  static const char* const kFn = "MPI_Waitsome";
  for (;;) {
    int err = Testsome(kFn, incount, requests, outcount, indices, statuses);
    if (err != MPI_SUCCESS || *outcount != 0) return err;
    GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, FromGos(gos_progress_wait()));
  }
}

static int Active_Cancel(MPI_Request* request) {
  if (request == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Cancel", MPI_ERR_REQUEST);
  if (*request == MPI_REQUEST_NULL) return MPI_SUCCESS;
  Request* q = FindRequest(*request);
  if (q == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Cancel", MPI_ERR_REQUEST);
  if (q->done || q->proc_null) return MPI_SUCCESS;
  GOS_MPI_CHECK(q->comm, "MPI_Cancel", FromGos(gos_cancel(&q->g)));
  return MPI_SUCCESS;
}

int MPI_Test_cancelled(const MPI_Status* status, int* flag) {
  if (status == nullptr || flag == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Test_cancelled", MPI_ERR_ARG);
  }
  *flag = status->gos_cancelled != 0 ? 1 : 0;
  return MPI_SUCCESS;
}

int MPI_Status_set_cancelled(MPI_Status* status, int flag) {
  if (status == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Status_set_cancelled", MPI_ERR_ARG);
  status->gos_cancelled = flag != 0 ? 1 : 0;
  return MPI_SUCCESS;
}

// What MPI_Get_count / MPI_Get_elements read back: count elements of datatype's size.
int MPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count) {
  static const char* const kFn = "MPI_Status_set_elements";
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (status == nullptr || count < 0) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  if (t == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_TYPE);
  // count basic elements: whole items of the type, then the rest of one at the item's mean
  // element size (exact for a type of one basic type, as every use of this call has).
  const size_t item = gos::mpi::PackedSize(1, *t);
  const long per_item = gos::mpi::ElementsOf(item, *t, MPI_UNDEFINED);
  if (item == 0 || per_item <= 0) {
    status->gos_bytes = 0;
    return count == 0 ? MPI_SUCCESS : Fail(MPI_COMM_WORLD, kFn, MPI_ERR_TYPE);
  }
  const auto n = static_cast<size_t>(count);
  const auto e = static_cast<size_t>(per_item);
  status->gos_bytes = n / e * item + n % e * (item / e);
  return MPI_SUCCESS;
}

int MPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count) {
  return MPI_Status_set_elements_x(status, datatype, count);
}

static int Active_Request_free(MPI_Request* request) {
  static const char* const kFn = "MPI_Request_free";
  if (request == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_REQUEST);
  Request* q = FindRequest(*request);
  if (q == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_REQUEST);
  const MPI_Request r = *request;
  *request = MPI_REQUEST_NULL;
  SweepDetached(/*block=*/false);
  (void)Poll(q);
  if (q->done) {
    (void)Finish(r, MPI_STATUS_IGNORE);
  } else if (q->tmp.empty() && !q->compound) {
    // Nothing of ours must outlive the transfer: gos finishes it on its own.
    GOS_MPI_CHECK(q->comm, kFn, FromGos(gos_request_free(&q->g)));
    ReleaseRequest(r);
  } else {
    q->detached = true;
    ++S().detached;
  }
  return MPI_SUCCESS;
}

}  // extern "C"

namespace {

// ---- Persistent requests (MPI_Send_init, MPI_Recv_init, MPI_Start) ----------------------
// A persistent handle (kFirstPersistent + index) keeps the arguments; MPI_Start posts an
// ordinary request for them (the handle's `active`). The completion functions see the active
// requests in the persistent handles' places, and a persistent handle that completes stays
// the program's, inactive, instead of becoming MPI_REQUEST_NULL.

Persistent* FindPersistent(MPI_Request r) {
  auto& t = S().persistent;
  if (r < kFirstPersistent || static_cast<size_t>(r - kFirstPersistent) >= t.size()) return nullptr;
  Persistent* p = &t[static_cast<size_t>(r - kFirstPersistent)];
  return p->in_use ? p : nullptr;
}

// Runs `f` on a copy of requests[0, n) in which each persistent handle is replaced by its
// active request (MPI_REQUEST_NULL when inactive), then writes back: a persistent handle
// whose request completed becomes inactive and stays in place. Fails with MPI_ERR_REQUEST on
// an unknown handle at or above kFirstPersistent.
template <typename F>
int WithActive(int n, MPI_Request* requests, F f) {
  bool any = false;
  for (int i = 0; i < n && requests != nullptr; ++i) any |= requests[i] >= kFirstPersistent;
  if (!any) return f(requests);
  std::vector<MPI_Request> inner(requests, requests + n);
  std::vector<Persistent*> owner(static_cast<size_t>(n), nullptr);
  for (int i = 0; i < n; ++i) {
    if (requests[i] < kFirstPersistent) continue;
    Persistent* p = FindPersistent(requests[i]);
    if (p == nullptr) return Fail(MPI_COMM_WORLD, "request", MPI_ERR_REQUEST);
    owner[static_cast<size_t>(i)] = p;
    inner[static_cast<size_t>(i)] = p->active;
  }
  const int err = f(inner.data());
  for (int i = 0; i < n; ++i) {
    if (Persistent* p = owner[static_cast<size_t>(i)]) {
      p->active = inner[static_cast<size_t>(i)];
    } else {
      requests[i] = inner[static_cast<size_t>(i)];
    }
  }
  return err;
}

int NewPersistent(Persistent p, MPI_Request* request, const char* fn) {
  if (request == nullptr) return Fail(p.comm, fn, MPI_ERR_ARG);
  if (FindComm(p.comm) == nullptr) return Fail(p.comm, fn, MPI_ERR_COMM);
  if (p.count < 0) return Fail(p.comm, fn, MPI_ERR_COUNT);
  p.layout = FindType(p.type);
  if (p.layout == nullptr) return Fail(p.comm, fn, MPI_ERR_TYPE);
  p.in_use = true;
  auto& t = S().persistent;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].in_use) {
      t[i] = p;
      *request = kFirstPersistent + static_cast<MPI_Request>(i);
      return MPI_SUCCESS;
    }
  }
  t.push_back(p);
  *request = kFirstPersistent + static_cast<MPI_Request>(t.size() - 1);
  return MPI_SUCCESS;
}

// A buffered send of count x t: a packed copy that the request owns, then the request is let
// go: the copy lives until the message has moved (a detached request), and the program's
// buffer is free at once. With `done`, also a request that is complete already (MPI_Ibsend's,
// a started MPI_Bsend_init's).
int StartBsend(const char* fn, const void* buf, int count, const TypePtr& t, int dest, int tag,
               MPI_Comm comm, MPI_Request* done) {
  GOS_MPI_COMM(c, comm, fn);
  GOS_MPI_CHECK(comm, fn, CheckCount(count));
  if (t == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  std::vector<char> copy(gos::mpi::PackedSize(static_cast<size_t>(count), *t));
  gos::mpi::Pack(buf, static_cast<size_t>(count), *t, copy.data());
  MPI_Request r = MPI_REQUEST_NULL;
  GOS_MPI_CHECK(comm, fn,
                StartSend(copy.data(), static_cast<int>(copy.size()), MPI_BYTE, dest, tag, comm,
                          c->g, 0, &r));
  Request* q = FindRequest(r);
  if (q != nullptr && !q->proc_null && q->tmp.empty()) {
    // gos may still read `copy` (a large message): keep it with the request.
    q->tmp = std::move(copy);
  }
  if (int e = Active_Request_free(&r)) return e;
  if (done != nullptr) *done = Compound(comm, {}, nullptr);
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int MPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request* request) {
  return NewPersistent({.send = true,
                        .sbuf = buf,
                        .count = count,
                        .type = datatype,
                        .peer = dest,
                        .tag = tag,
                        .comm = comm},
                       request, "MPI_Send_init");
}

int MPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request) {
  if (int e = MPI_Send_init(buf, count, datatype, dest, tag, comm, request)) return e;
  if (Persistent* p = FindPersistent(*request)) p->flags = GOS_SEND_SYNC;
  return MPI_SUCCESS;
}

int MPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request) {
  return MPI_Send_init(buf, count, datatype, dest, tag, comm, request);  // as MPI_Rsend
}

int MPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request) {
  if (int e = MPI_Send_init(buf, count, datatype, dest, tag, comm, request)) return e;
  if (Persistent* p = FindPersistent(*request)) p->buffered = true;
  return MPI_SUCCESS;
}

int MPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return NewPersistent(
      {.rbuf = buf, .count = count, .type = datatype, .peer = source, .tag = tag, .comm = comm},
      request, "MPI_Recv_init");
}

int MPI_Start(MPI_Request* request) {
  static const char* const kFn = "MPI_Start";
  Persistent* p = request != nullptr ? FindPersistent(*request) : nullptr;
  if (p == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_REQUEST);
  if (p->active != MPI_REQUEST_NULL) return Fail(p->comm, kFn, MPI_ERR_REQUEST);  // still active
  GOS_MPI_COMM(c, p->comm, kFn);
  if (p->buffered) {
    return StartBsend(kFn, p->sbuf, p->count, p->layout, p->peer, p->tag, p->comm, &p->active);
  }
  if (p->send) {
    GOS_MPI_CHECK(p->comm, kFn,
                  StartSend(p->sbuf, p->count, p->layout, p->peer, p->tag, p->comm, c->g, p->flags,
                            &p->active));
  } else {
    GOS_MPI_CHECK(
        p->comm, kFn,
        StartRecv(p->rbuf, p->count, p->layout, p->peer, p->tag, p->comm, c->g, &p->active));
  }
  return MPI_SUCCESS;
}

int MPI_Startall(int count, MPI_Request requests[]) {
  for (int i = 0; i < count; ++i) {
    if (int e = MPI_Start(&requests[i])) return e;
  }
  return MPI_SUCCESS;
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  return WithActive(1, request, [&](MPI_Request* r) { return Active_Wait(r, status); });
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return WithActive(1, request, [&](MPI_Request* r) { return Active_Test(r, flag, status); });
}

int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  // A persistent handle stands for its active request (an inactive one counts as null).
  return WithActive(1, &request,
                    [&](MPI_Request* r) { return Active_Request_get_status(*r, flag, status); });
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  return WithActive(count, requests,
                    [&](MPI_Request* r) { return Active_Waitall(count, r, statuses); });
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return WithActive(count, requests,
                    [&](MPI_Request* r) { return Active_Testall(count, r, flag, statuses); });
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  return WithActive(count, requests,
                    [&](MPI_Request* r) { return Active_Waitany(count, r, index, status); });
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  return WithActive(count, requests,
                    [&](MPI_Request* r) { return Active_Testany(count, r, index, flag, status); });
}

int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  return WithActive(incount, requests, [&](MPI_Request* r) {
    return Active_Waitsome(incount, r, outcount, indices, statuses);
  });
}

int MPI_Cancel(MPI_Request* request) {
  return WithActive(1, request, [&](MPI_Request* r) { return Active_Cancel(r); });
}

int MPI_Request_free(MPI_Request* request) {
  if (request != nullptr && *request >= kFirstPersistent) {
    Persistent* p = FindPersistent(*request);
    if (p == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Request_free", MPI_ERR_REQUEST);
    // An active one is left to finish on its own, like any freed request.
    if (p->active != MPI_REQUEST_NULL) {
      if (int e = Active_Request_free(&p->active)) return e;
    }
    *p = Persistent{};
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
  }
  return Active_Request_free(request);
}

// MPI_Rsend's precondition (the receive is posted) only allows an implementation to be
// faster; a plain send is correct. MPI_Bsend: the message is copied at once and the call
// returns; the buffer MPI_Buffer_attach gave is not needed for that.
int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return MPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return MPI_Isend(buf, count, datatype, dest, tag, comm, request);
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return StartBsend("MPI_Bsend", buf, count, FindType(datatype), dest, tag, comm, nullptr);
}

int MPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (request == nullptr) return Fail(comm, "MPI_Ibsend", MPI_ERR_ARG);
  return StartBsend("MPI_Ibsend", buf, count, FindType(datatype), dest, tag, comm, request);
}

int MPI_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                  MPI_Comm comm, MPI_Request* request) {
  static const char* const kFn = "MPI_Isendrecv";
  GOS_MPI_COMM(c, comm, kFn);
  if (request == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  MPI_Request rr;
  MPI_Request sr;
  GOS_MPI_CHECK(comm, kFn,
                StartRecv(recvbuf, recvcount, recvtype, source, recvtag, comm, c->g, &rr));
  if (int e = StartSend(sendbuf, sendcount, sendtype, dest, sendtag, comm, c->g, 0, &sr)) {
    MPI_Cancel(&rr);
    (void)WaitOne(rr, MPI_STATUS_IGNORE);
    return Fail(comm, kFn, e);
  }
  *request = Compound(comm, {rr, sr}, nullptr);
  FindRequest(*request)->status_part = 0;  // the receive's
  return MPI_SUCCESS;
}

int MPI_Isendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                          int source, int recvtag, MPI_Comm comm, MPI_Request* request) {
  static const char* const kFn = "MPI_Isendrecv_replace";
  GOS_MPI_COMM(c, comm, kFn);
  if (request == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  GOS_MPI_CHECK(comm, kFn, CheckCount(count));
  TypePtr t = FindType(datatype);
  if (t == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
  // The message goes from a packed copy, so that the receive may fill buf meanwhile; the copy
  // lives as long as the request.
  auto copy =
      std::make_shared<std::vector<char>>(gos::mpi::PackedSize(static_cast<size_t>(count), *t));
  gos::mpi::Pack(buf, static_cast<size_t>(count), *t, copy->data());
  MPI_Request rr;
  MPI_Request sr;
  GOS_MPI_CHECK(comm, kFn, StartRecv(buf, count, t, source, recvtag, comm, c->g, &rr));
  if (int e = StartSend(copy->data(), static_cast<int>(copy->size()), MPI_BYTE, dest, sendtag, comm,
                        c->g, 0, &sr)) {
    MPI_Cancel(&rr);
    (void)WaitOne(rr, MPI_STATUS_IGNORE);
    return Fail(comm, kFn, e);
  }
  *request = Compound(comm, {rr, sr}, [copy] { return MPI_SUCCESS; });
  FindRequest(*request)->status_part = 0;
  return MPI_SUCCESS;
}

int MPI_Buffer_attach(void* buffer, int size) {
  if (size < 0 || (buffer == nullptr && size > 0)) {
    return Fail(MPI_COMM_WORLD, "MPI_Buffer_attach", MPI_ERR_BUFFER);
  }
  S().bsend_buffer = buffer;
  S().bsend_size = size;
  return MPI_SUCCESS;
}

int MPI_Buffer_detach(void* buffer_addr, int* size) {
  // Every buffered send's data is in its own copy, so nothing needs to drain here.
  *static_cast<void**>(buffer_addr) = S().bsend_buffer;
  *size = S().bsend_size;
  S().bsend_buffer = nullptr;
  S().bsend_size = 0;
  return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Barrier");
  GOS_MPI_CHECK(comm, "MPI_Barrier", FromGos(gos_barrier(&c->g)));
  return MPI_SUCCESS;
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  static const char* const kFn = "MPI_Bcast";
  GOS_MPI_COMM(c, comm, kFn);
  GOS_MPI_CHECK(comm, kFn, CheckCount(count));
  TypePtr t = FindType(datatype);
  if (t == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
  if (root < 0 || root >= c->g.size) return Fail(comm, kFn, MPI_ERR_ROOT);
  const size_t n = static_cast<size_t>(count);
  const size_t len = gos::mpi::PackedSize(n, *t);
  if (t->contiguous) {
    GOS_MPI_CHECK(comm, kFn, FromGos(gos_bcast(buffer, len, root, &c->g)));
    return MPI_SUCCESS;
  }
  std::vector<char> tmp(len);
  const bool is_root = c->g.rank == root;
  if (is_root) gos::mpi::Pack(buffer, n, *t, tmp.data());
  GOS_MPI_CHECK(comm, kFn, FromGos(gos_bcast(tmp.data(), len, root, &c->g)));
  if (!is_root) gos::mpi::Unpack(tmp.data(), len, n, *t, buffer);
  return MPI_SUCCESS;
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  static const char* const kFn = "MPI_Reduce";
  if (FindUserOp(op) != nullptr) {
    if (root < 0) return Fail(comm, kFn, MPI_ERR_ROOT);
    return GatheredReduce(kFn, sendbuf, recvbuf, count, datatype, op, comm, Span::kAll, root);
  }
  GOS_MPI_COMM(c, comm, kFn);
  GOS_MPI_CHECK(comm, kFn, ReduceArgs(datatype, op, count));
  if (root < 0 || root >= c->g.size) return Fail(comm, kFn, MPI_ERR_ROOT);
  const bool is_root = c->g.rank == root;
  if (sendbuf == MPI_IN_PLACE && !is_root) return Fail(comm, kFn, MPI_ERR_BUFFER);
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  // recvbuf is insignificant (often NULL) on non-roots: give gos scratch space there.
  std::vector<char> scratch;
  void* out = recvbuf;
  if (!is_root) {
    scratch.resize(static_cast<size_t>(count) * gos::mpi::BasicTypeSize(datatype - 1));
    out = scratch.data();
  }
  GOS_MPI_CHECK(
      comm, kFn,
      FromGos(gos_reduce(in, out, static_cast<size_t>(count), static_cast<gos_type_t>(datatype - 1),
                         static_cast<gos_op_t>(op - 1), root, &c->g)));
  return MPI_SUCCESS;
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  static const char* const kFn = "MPI_Allreduce";
  if (FindUserOp(op) != nullptr) {
    return GatheredReduce(kFn, sendbuf, recvbuf, count, datatype, op, comm, Span::kAll, -1);
  }
  GOS_MPI_COMM(c, comm, kFn);
  GOS_MPI_CHECK(comm, kFn, ReduceArgs(datatype, op, count));
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  GOS_MPI_CHECK(comm, kFn,
                FromGos(gos_allreduce(in, recvbuf, static_cast<size_t>(count),
                                      static_cast<gos_type_t>(datatype - 1),
                                      static_cast<gos_op_t>(op - 1), &c->g)));
  return MPI_SUCCESS;
}

}  // extern "C"

namespace {

// The communicator if it has a Cartesian topology, else nullptr (and the error applied).
Comm* CartComm(MPI_Comm comm, const char* fn, int* err) {
  Comm* c = FindComm(comm);
  if (c == nullptr) {
    *err = Fail(comm, fn, MPI_ERR_COMM);
    return nullptr;
  }
  if (!c->cart) {
    *err = Fail(comm, fn, MPI_ERR_TOPOLOGY);
    return nullptr;
  }
  return c;
}

}  // namespace

extern "C" {

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm) {
  return GatheredReduce("MPI_Scan", sendbuf, recvbuf, count, datatype, op, comm, Span::kInclusive,
                        -1);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm) {
  return GatheredReduce("MPI_Exscan", sendbuf, recvbuf, count, datatype, op, comm, Span::kExclusive,
                        -1);
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  static const char* const kFn = "MPI_Sendrecv_replace";
  GOS_MPI_CHECK(comm, kFn, CheckCount(count));
  TypePtr t = FindType(datatype);
  if (t == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
  // The outgoing data is packed aside first, so the receive may overwrite buf.
  std::vector<char> out(gos::mpi::PackedSize(static_cast<size_t>(count), *t));
  gos::mpi::Pack(buf, static_cast<size_t>(count), *t, out.data());
  return MPI_Sendrecv(out.data(), static_cast<int>(out.size()), MPI_BYTE, dest, sendtag, buf, count,
                      datatype, source, recvtag, comm, status);
}

int MPI_Dims_create(int nnodes, int ndims, int dims[]) {
  if (ndims < 0 || (ndims > 0 && dims == nullptr)) {
    return Fail(MPI_COMM_WORLD, "MPI_Dims_create", MPI_ERR_ARG);
  }
  if (!gos::mpi::DimsCreate(nnodes, std::span<int>(dims, static_cast<size_t>(ndims)))) {
    return Fail(MPI_COMM_WORLD, "MPI_Dims_create", MPI_ERR_DIMS);
  }
  return MPI_SUCCESS;
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int /*reorder*/, MPI_Comm* comm_cart) {
  static const char* const kFn = "MPI_Cart_create";
  GOS_MPI_COMM(c, comm_old, kFn);
  // ndims 0 is valid since MPI 2.1: a grid of one point (rank 0 alone).
  if (ndims < 0 || (ndims > 0 && (dims == nullptr || periods == nullptr)) || comm_cart == nullptr) {
    return Fail(comm_old, kFn, MPI_ERR_ARG);
  }
  gos::mpi::Cart cart;
  int64_t product = 1;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] <= 0) return Fail(comm_old, kFn, MPI_ERR_DIMS);
    product *= dims[i];
    if (product > c->g.size) return Fail(comm_old, kFn, MPI_ERR_DIMS);
    cart.dims.push_back(dims[i]);
    cart.periods.push_back(periods[i] != 0);
  }
  // Ranks beyond the grid get MPI_COMM_NULL; the others keep their order.
  const int rank = c->g.rank;
  if (int e = MPI_Comm_split(comm_old, rank < product ? 0 : MPI_UNDEFINED, rank, comm_cart)) {
    return e;
  }
  if (Comm* n = FindComm(*comm_cart)) n->cart = std::move(cart);
  return MPI_SUCCESS;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  static const char* const kFn = "MPI_Cart_sub";
  int err = MPI_SUCCESS;
  Comm* cc = CartComm(comm, kFn, &err);
  if (cc == nullptr) return err;
  const size_t ndims = cc->cart->dims.size();
  if ((ndims > 0 && remain_dims == nullptr) || newcomm == nullptr) {
    return Fail(comm, kFn, MPI_ERR_ARG);
  }
  gos::mpi::CartSubResult sub =
      gos::mpi::CartSub(*cc->cart, cc->g.rank, std::span<const int>(remain_dims, ndims));
  // One split on every member: the color names the sub-grid, the key orders it row-major.
  if (int e = MPI_Comm_split(comm, sub.color, sub.key, newcomm)) return e;
  if (Comm* n = FindComm(*newcomm)) n->cart = std::move(sub.sub);
  return MPI_SUCCESS;
}

int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int /*periods*/[],
                 int* newrank) {
  static const char* const kFn = "MPI_Cart_map";
  GOS_MPI_COMM(c, comm, kFn);
  if (ndims < 0 || (ndims > 0 && dims == nullptr) || newrank == nullptr) {
    return Fail(comm, kFn, MPI_ERR_ARG);
  }
  int64_t product = 1;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] <= 0) return Fail(comm, kFn, MPI_ERR_DIMS);
    product *= dims[i];
    if (product > c->g.size) return Fail(comm, kFn, MPI_ERR_DIMS);
  }
  *newrank = c->g.rank < product ? c->g.rank : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int MPI_Topo_test(MPI_Comm comm, int* status) {
  GOS_MPI_COMM(c, comm, "MPI_Topo_test");
  if (status == nullptr) return Fail(comm, "MPI_Topo_test", MPI_ERR_ARG);
  *status = c->cart ? MPI_CART : c->graph ? MPI_DIST_GRAPH : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int MPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  int err = MPI_SUCCESS;
  Comm* cc = CartComm(comm, "MPI_Cartdim_get", &err);
  if (cc == nullptr) return err;
  const gos::mpi::Cart* cart = &*cc->cart;
  *ndims = static_cast<int>(cart->dims.size());
  return MPI_SUCCESS;
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  int err = MPI_SUCCESS;
  Comm* cc = CartComm(comm, "MPI_Cart_get", &err);
  if (cc == nullptr) return err;
  const gos::mpi::Cart* cart = &*cc->cart;
  std::vector<int> mine = gos::mpi::CartCoords(*cart, cc->g.rank);
  const size_t n = std::min(static_cast<size_t>(std::max(maxdims, 0)), cart->dims.size());
  for (size_t i = 0; i < n; ++i) {
    dims[i] = cart->dims[i];
    periods[i] = cart->periods[i] ? 1 : 0;
    coords[i] = mine[i];
  }
  return MPI_SUCCESS;
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  int err = MPI_SUCCESS;
  Comm* cc = CartComm(comm, "MPI_Cart_rank", &err);
  if (cc == nullptr) return err;
  const gos::mpi::Cart* cart = &*cc->cart;
  int r = gos::mpi::CartRank(*cart, std::span<const int>(coords, cart->dims.size()));
  if (r < 0) return Fail(comm, "MPI_Cart_rank", MPI_ERR_ARG);
  *rank = r;
  return MPI_SUCCESS;
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  int err = MPI_SUCCESS;
  Comm* cc = CartComm(comm, "MPI_Cart_coords", &err);
  if (cc == nullptr) return err;
  const gos::mpi::Cart* cart = &*cc->cart;
  if (rank < 0 || rank >= cart->Size()) return Fail(comm, "MPI_Cart_coords", MPI_ERR_RANK);
  if (maxdims < static_cast<int>(cart->dims.size())) {
    return Fail(comm, "MPI_Cart_coords", MPI_ERR_ARG);
  }
  std::vector<int> c = gos::mpi::CartCoords(*cart, rank);
  std::copy(c.begin(), c.end(), coords);
  return MPI_SUCCESS;
}

int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest) {
  int err = MPI_SUCCESS;
  Comm* cc = CartComm(comm, "MPI_Cart_shift", &err);
  if (cc == nullptr) return err;
  const gos::mpi::Cart* cart = &*cc->cart;
  if (direction < 0 || direction >= static_cast<int>(cart->dims.size())) {
    return Fail(comm, "MPI_Cart_shift", MPI_ERR_ARG);
  }
  auto [from, to] = gos::mpi::CartShift(*cart, cc->g.rank, direction, disp);
  *rank_source = from < 0 ? MPI_PROC_NULL : from;
  *rank_dest = to < 0 ? MPI_PROC_NULL : to;
  return MPI_SUCCESS;
}

}  // extern "C"

namespace {

// ---- Neighbourhood collectives on a Cartesian or distributed graph communicator:
// point-to-point on the collective context, like the other collectives. On a Cartesian one
// the neighbours are, in MPI's order, for each dimension the source then the destination of
// MPI_Cart_shift(comm, d, 1), both ways; on a graph, the sources (receive blocks) and the
// destinations (send blocks) as given.

// The receive and send blocks of a neighbourhood collective on comm ({0, 0} when comm has
// no such topology, which NeighborExchange then reports).
std::pair<size_t, size_t> NeighborDegrees(MPI_Comm comm) {
  Comm* c = FindComm(comm);
  if (c != nullptr && c->cart) return {2 * c->cart->dims.size(), 2 * c->cart->dims.size()};
  if (c != nullptr && c->graph) return {c->graph->sources.size(), c->graph->destinations.size()};
  return {0, 0};
}

// The engine: receive block k (rcounts[k] x rtype at rdispls[k]) comes from in-neighbour k,
// send block k (scounts[k] x stype at sdispls[k]) goes to out-neighbour k; MPI_PROC_NULL
// neighbours move nothing.
// Cartesian: each direction along a dimension has a tag of its own: what a rank sends to its
// destination (block 2d + 1) its destination receives from its source (block 2d), and the
// other way round (k ^ 1), so each block lands in its place even when both neighbours are
// one rank (a periodic dimension of 1 or 2).
// Graph: one tag per call; several edges between two ranks pair up in the order each side
// lists them, as MPI's non-overtaking order matches them.
int NeighborExchange(const char* fn, MPI_Comm comm, const void* sendbuf, const int* scounts,
                     const int* sdispls, MPI_Datatype sendtype, void* recvbuf, const int* rcounts,
                     const int* rdispls, MPI_Datatype recvtype) {
  Comm* c = FindComm(comm);
  if (c == nullptr) return Fail(comm, fn, MPI_ERR_COMM);
  if (!c->cart && !c->graph) return Fail(comm, fn, MPI_ERR_TOPOLOGY);
  if (sendbuf == MPI_IN_PLACE || recvbuf == MPI_IN_PLACE) return Fail(comm, fn, MPI_ERR_BUFFER);
  TypePtr st = FindType(sendtype);
  TypePtr rt = FindType(recvtype);
  if (st == nullptr || rt == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  std::vector<int> in, out, in_tags, out_tags;
  if (c->cart) {
    in = out = gos::mpi::CartNeighbors(*c->cart, c->g.rank);
    out_tags.resize(out.size());
    for (int& tag : out_tags) tag = c->NextCollTag();
    for (size_t k = 0; k < in.size(); ++k) in_tags.push_back(out_tags[k ^ 1]);
  } else {
    in = c->graph->sources;
    out = c->graph->destinations;
    const int tag = c->NextCollTag();
    in_tags.assign(in.size(), tag);
    out_tags.assign(out.size(), tag);
  }
  if ((!in.empty() && (rcounts == nullptr || rdispls == nullptr)) ||
      (!out.empty() && (scounts == nullptr || sdispls == nullptr))) {
    return Fail(comm, fn, MPI_ERR_ARG);
  }
  for (size_t k = 0; k < in.size(); ++k) {
    if (rcounts[k] < 0) return Fail(comm, fn, MPI_ERR_COUNT);
  }
  for (size_t k = 0; k < out.size(); ++k) {
    if (scounts[k] < 0) return Fail(comm, fn, MPI_ERR_COUNT);
  }
  const gos_comm_t gc = c->Collective();
  int err = MPI_SUCCESS;
  std::vector<MPI_Request> reqs;
  for (size_t k = 0; k < in.size() && err == MPI_SUCCESS; ++k) {
    MPI_Request r;
    err = StartRecv(At(recvbuf, rdispls[k], *rt), rcounts[k], recvtype,
                    in[k] < 0 ? MPI_PROC_NULL : in[k], in_tags[k], comm, gc, &r);
    if (err == MPI_SUCCESS) reqs.push_back(r);
  }
  for (size_t k = 0; k < out.size() && err == MPI_SUCCESS; ++k) {
    MPI_Request r;
    err = StartSend(At(sendbuf, sdispls[k], *st), scounts[k], sendtype,
                    out[k] < 0 ? MPI_PROC_NULL : out[k], out_tags[k], comm, gc, 0, &r);
    if (err == MPI_SUCCESS) reqs.push_back(r);
  }
  return WaitCollective(fn, comm, err, reqs);
}

// MPI_Neighbor_allgather (every neighbour gets the same block) and MPI_Neighbor_alltoall
// (block k to neighbour k): equal blocks.
int NeighborBlocks(const char* fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                   void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                   bool block_per_neighbor) {
  const auto [nin, nout] = NeighborDegrees(comm);
  std::vector<int> scounts(nout, sendcount), sdispls(nout, 0), rcounts(nin, recvcount),
      rdispls(nin);
  for (size_t k = 0; k < nout; ++k) {
    if (block_per_neighbor) sdispls[k] = static_cast<int>(k) * sendcount;
  }
  for (size_t k = 0; k < nin; ++k) rdispls[k] = static_cast<int>(k) * recvcount;
  return NeighborExchange(fn, comm, sendbuf, scounts.data(), sdispls.data(), sendtype, recvbuf,
                          rcounts.data(), rdispls.data(), recvtype);
}

}  // namespace

extern "C" {

int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return NeighborBlocks("MPI_Neighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount,
                        recvtype, comm, false);
}

int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return NeighborBlocks("MPI_Neighbor_alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount,
                        recvtype, comm, true);
}

int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, const int recvcounts[], const int displs[],
                            MPI_Datatype recvtype, MPI_Comm comm) {
  const size_t nout = NeighborDegrees(comm).second;
  const std::vector<int> scounts(nout, sendcount), sdispls(nout, 0);
  return NeighborExchange("MPI_Neighbor_allgatherv", comm, sendbuf, scounts.data(), sdispls.data(),
                          sendtype, recvbuf, recvcounts, displs, recvtype);
}

int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                           MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                           const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return NeighborExchange("MPI_Neighbor_alltoallv", comm, sendbuf, sendcounts, sdispls, sendtype,
                          recvbuf, recvcounts, rdispls, recvtype);
}

int gos_mpi_unweighted[1];
int gos_mpi_weights_empty[1];

int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[],
                                   MPI_Info /*info*/, int /*reorder*/, MPI_Comm* comm_dist_graph) {
  static const char* const kFn = "MPI_Dist_graph_create_adjacent";
  GOS_MPI_COMM(c, comm_old, kFn);
  if (indegree < 0 || outdegree < 0 || comm_dist_graph == nullptr ||
      (indegree > 0 && sources == nullptr) || (outdegree > 0 && destinations == nullptr)) {
    return Fail(comm_old, kFn, MPI_ERR_ARG);
  }
  DistGraph graph;
  graph.weighted = sourceweights != MPI_UNWEIGHTED && destweights != MPI_UNWEIGHTED;
  auto take = [&](int n, const int* ranks, const int* weights, std::vector<int>& to,
                  std::vector<int>& to_weights) {
    for (int i = 0; i < n; ++i) {
      if (ranks[i] < 0 || ranks[i] >= c->g.size) return false;
      to.push_back(ranks[i]);
      if (graph.weighted) {
        if (weights == nullptr || weights == MPI_WEIGHTS_EMPTY) return false;
        to_weights.push_back(weights[i]);
      }
    }
    return true;
  };
  if (!take(indegree, sources, sourceweights, graph.sources, graph.source_weights) ||
      !take(outdegree, destinations, destweights, graph.destinations, graph.dest_weights)) {
    return Fail(comm_old, kFn, MPI_ERR_ARG);
  }
  // Like MPI_Comm_dup (every member calls it, in the same order), without the attributes.
  std::vector<int> members(static_cast<size_t>(c->g.size));
  for (int i = 0; i < c->g.size; ++i) members[static_cast<size_t>(i)] = i;
  *comm_dist_graph = MakeChild(*c, members, gos::mpi::kDupSalt);
  ++c->children;
  if (Comm* n = FindComm(*comm_dist_graph)) n->graph = std::move(graph);
  return MPI_SUCCESS;
}

int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree, int* weighted) {
  static const char* const kFn = "MPI_Dist_graph_neighbors_count";
  GOS_MPI_COMM(c, comm, kFn);
  if (!c->graph) return Fail(comm, kFn, MPI_ERR_TOPOLOGY);
  if (indegree == nullptr || outdegree == nullptr || weighted == nullptr) {
    return Fail(comm, kFn, MPI_ERR_ARG);
  }
  *indegree = static_cast<int>(c->graph->sources.size());
  *outdegree = static_cast<int>(c->graph->destinations.size());
  *weighted = c->graph->weighted ? 1 : 0;
  return MPI_SUCCESS;
}

int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[],
                             int maxoutdegree, int destinations[], int destweights[]) {
  static const char* const kFn = "MPI_Dist_graph_neighbors";
  GOS_MPI_COMM(c, comm, kFn);
  if (!c->graph) return Fail(comm, kFn, MPI_ERR_TOPOLOGY);
  const DistGraph& g = *c->graph;
  const size_t nin = std::min(static_cast<size_t>(std::max(maxindegree, 0)), g.sources.size());
  const size_t nout =
      std::min(static_cast<size_t>(std::max(maxoutdegree, 0)), g.destinations.size());
  if ((nin > 0 && sources == nullptr) || (nout > 0 && destinations == nullptr)) {
    return Fail(comm, kFn, MPI_ERR_ARG);
  }
  const bool in_w = g.weighted && sourceweights != nullptr && sourceweights != MPI_UNWEIGHTED;
  const bool out_w = g.weighted && destweights != nullptr && destweights != MPI_UNWEIGHTED;
  for (size_t k = 0; k < nin; ++k) {
    sources[k] = g.sources[k];
    if (in_w) sourceweights[k] = g.source_weights[k];
  }
  for (size_t k = 0; k < nout; ++k) {
    destinations[k] = g.destinations[k];
    if (out_w) destweights[k] = g.dest_weights[k];
  }
  return MPI_SUCCESS;
}

// ---- Nonblocking collectives: point-to-point exchanges on the collective context, started
// at the call (so a rank that has called it counts as entered, whatever it does next), and a
// compound request that completes when they all have (docs/mpi.md).

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  static const char* const kFn = "MPI_Ibarrier";
  GOS_MPI_COMM(c, comm, kFn);
  // An empty message from every member to every other: all have entered once all arrived.
  std::vector<int> zero(static_cast<size_t>(c->g.size), 0);
  return StartExchange(kFn, c, comm, nullptr, zero, zero, MPI_BYTE, nullptr, zero, zero, MPI_BYTE,
                       false, nullptr, request);
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request) {
  static const char* const kFn = "MPI_Ibcast";
  GOS_MPI_COMM(c, comm, kFn);
  if (root < 0 || root >= c->g.size) return Fail(comm, kFn, MPI_ERR_ROOT);
  const size_t n = static_cast<size_t>(c->g.size);
  const bool is_root = c->g.rank == root;
  std::vector<int> scounts(n, is_root ? count : 0), rcounts(n, 0), zero(n, 0);
  if (!is_root) rcounts[static_cast<size_t>(root)] = count;
  return StartExchange(kFn, c, comm, buffer, scounts, zero, datatype, buffer, rcounts, zero,
                       datatype, false, nullptr, request);
}

}  // extern "C"

namespace {

// MPI_Iallgather (every rank gets the same block) and MPI_Ialltoall (block i to rank i).
int StartBlocks(const char* fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                bool block_per_rank, MPI_Request* request) {
  GOS_MPI_COMM(c, comm, fn);
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (in_place) {
    // An allgather in place sends its own block from where it already is in recvbuf.
    TypePtr rt = FindType(recvtype);
    if (rt == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
    if (block_per_rank) {  // an alltoall in place
      const size_t n = static_cast<size_t>(c->g.size);
      std::vector<int> counts(n, recvcount), displs(n);
      for (size_t i = 0; i < n; ++i) displs[i] = static_cast<int>(i) * recvcount;
      return StartAlltoallInPlace(fn, c, comm, recvbuf, counts, displs, recvtype, request);
    }
    sendbuf = At(recvbuf, c->g.rank * recvcount, *rt);
    sendcount = recvcount;
    sendtype = recvtype;
  }
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> scounts(n, sendcount), sdispls(n, 0), rcounts(n, recvcount), rdispls(n);
  for (size_t i = 0; i < n; ++i) {
    if (block_per_rank) sdispls[i] = static_cast<int>(i) * sendcount;
    rdispls[i] = static_cast<int>(i) * recvcount;
  }
  return StartExchange(fn, c, comm, sendbuf, scounts, sdispls, sendtype, recvbuf, rcounts, rdispls,
                       recvtype, !in_place, nullptr, request);
}

// MPI_Igather(v) (gather = true) and MPI_Iscatter(v): between the root and every rank, one
// block each, at the root's counts and displacements (in elements of its type; none: equal
// blocks); the others send or receive their count. MPI_IN_PLACE at the root leaves its own
// block where it is.
int StartRooted(const char* fn, bool gather, const void* sendbuf, int sendcount,
                MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                const int* root_counts, const int* root_displs, int root, MPI_Comm comm,
                MPI_Request* request) {
  GOS_MPI_COMM(c, comm, fn);
  if (root < 0 || root >= c->g.size) return Fail(comm, fn, MPI_ERR_ROOT);
  const size_t n = static_cast<size_t>(c->g.size), r = static_cast<size_t>(root);
  const bool is_root = c->g.rank == root;
  const bool in_place = is_root && (gather ? sendbuf == MPI_IN_PLACE : recvbuf == MPI_IN_PLACE);
  std::vector<int> scounts(n, 0), sdispls(n, 0), rcounts(n, 0), rdispls(n, 0);
  std::vector<int>& root_side_counts = gather ? rcounts : scounts;
  std::vector<int>& root_side_displs = gather ? rdispls : sdispls;
  if (is_root) {
    // No counts: equal blocks of the root's count (MPI_Igather, MPI_Iscatter).
    const int block = gather ? recvcount : sendcount;
    for (size_t i = 0; i < n; ++i) {
      root_side_counts[i] = root_counts != nullptr ? root_counts[i] : block;
      root_side_displs[i] = root_counts != nullptr ? root_displs[i] : static_cast<int>(i) * block;
    }
    if (in_place) root_side_counts[r] = 0;
  }
  if (!in_place) (gather ? scounts : rcounts)[r] = gather ? sendcount : recvcount;
  // What MPI says is insignificant may be anything, MPI_DATATYPE_NULL included: the root
  // side's type on the other ranks, and the root's own side when it is in place. Nothing
  // moves there (the counts are 0): any valid type does.
  const bool root_side_used = is_root;
  const bool own_side_used = !in_place;
  MPI_Datatype stype = sendtype, rtype = recvtype;
  if (!(gather ? own_side_used : root_side_used)) stype = MPI_BYTE;
  if (!(gather ? root_side_used : own_side_used)) rtype = MPI_BYTE;
  return StartExchange(fn, c, comm, sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls,
                       rtype, true, nullptr, request);
}

}  // namespace

extern "C" {

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request) {
  return StartRooted("MPI_Igather", true, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                     recvtype, nullptr, nullptr, root, comm, request);
}

int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request* request) {
  return StartRooted("MPI_Igatherv", true, sendbuf, sendcount, sendtype, recvbuf, 0, recvtype,
                     recvcounts, displs, root, comm, request);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return StartRooted("MPI_Iscatter", false, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                     recvtype, nullptr, nullptr, root, comm, request);
}

int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request* request) {
  return StartRooted("MPI_Iscatterv", false, sendbuf, 0, sendtype, recvbuf, recvcount, recvtype,
                     sendcounts, displs, root, comm, request);
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  static const char* const kFn = "MPI_Iallgatherv";
  GOS_MPI_COMM(c, comm, kFn);
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (in_place) {
    // Its own block goes from where it already is in recvbuf.
    TypePtr rt = FindType(recvtype);
    if (rt == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
    sendbuf = At(recvbuf, displs[c->g.rank], *rt);
    sendcount = recvcounts[c->g.rank];
    sendtype = recvtype;
  }
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> scounts(n, sendcount), sdispls(n, 0), rcounts(recvcounts, recvcounts + n),
      rdispls(displs, displs + n);
  return StartExchange(kFn, c, comm, sendbuf, scounts, sdispls, sendtype, recvbuf, rcounts, rdispls,
                       recvtype, !in_place, nullptr, request);
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  static const char* const kFn = "MPI_Ialltoallv";
  GOS_MPI_COMM(c, comm, kFn);
  const size_t n = static_cast<size_t>(c->g.size);
  if (sendbuf == MPI_IN_PLACE) {
    return StartAlltoallInPlace(kFn, c, comm, recvbuf, std::vector<int>(recvcounts, recvcounts + n),
                                std::vector<int>(rdispls, rdispls + n), recvtype, request);
  }
  return StartExchange(kFn, c, comm, sendbuf, std::vector<int>(sendcounts, sendcounts + n),
                       std::vector<int>(sdispls, sdispls + n), sendtype, recvbuf,
                       std::vector<int>(recvcounts, recvcounts + n),
                       std::vector<int>(rdispls, rdispls + n), recvtype, true, nullptr, request);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return StartBlocks("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                     comm, false, request);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return StartBlocks("MPI_Ialltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                     comm, true, request);
}

}  // extern "C"

namespace {

// MPI_Iallreduce (root < 0) and MPI_Ireduce: every contribution goes to every rank (or to the
// root), which combines them in rank order when they have all arrived.
int StartGatheredReduce(const char* fn, const void* sendbuf, void* recvbuf, int count,
                        MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm, MPI_Request* request) {
  GOS_MPI_COMM(c, comm, fn);
  auto g = std::make_shared<Gathered>();
  if (int e = PrepareGathered(fn, c, comm, count, dt, op, g.get())) return e;
  if (root >= c->g.size) return Fail(comm, fn, MPI_ERR_ROOT);
  const bool store = root < 0 || c->g.rank == root;
  if (sendbuf == MPI_IN_PLACE && !store) return Fail(comm, fn, MPI_ERR_BUFFER);
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> scounts(n, root < 0 ? count : 0), sdispls(n, 0), rcounts(n, store ? count : 0),
      rdispls(n);
  if (root >= 0) scounts[static_cast<size_t>(root)] = count;
  for (size_t i = 0; i < n; ++i) rdispls[i] = static_cast<int>(i) * count;
  // The own block is copied at once (self_copy): with MPI_IN_PLACE recvbuf is rewritten later.
  const int last = c->g.size - 1;
  return StartExchange(
      fn, c, comm, in, scounts, sdispls, dt, g->At(0), rcounts, rdispls, dt, true,
      [fn, comm, g, last, recvbuf, store] {
        return store ? Combine(fn, comm, *g, last, recvbuf) : MPI_SUCCESS;
      },
      request);
}

}  // namespace

namespace {

// MPI_Iscan and MPI_Iexscan (exclusive): each contribution goes to the ranks after it (and,
// for the scan, to its own rank), which combine those of ranks 0..r (0..r-1) in rank order.
// Rank 0's result of an exclusive scan is undefined: its recvbuf is left alone.
int StartPrefixReduce(const char* fn, bool exclusive, const void* sendbuf, void* recvbuf, int count,
                      MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  GOS_MPI_COMM(c, comm, fn);
  auto g = std::make_shared<Gathered>();
  if (int e = PrepareGathered(fn, c, comm, count, dt, op, g.get())) return e;
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  const int me = c->g.rank, last = exclusive ? me - 1 : me;
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> scounts(n, 0), sdispls(n, 0), rcounts(n, 0), rdispls(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int r = static_cast<int>(i);
    if (exclusive ? r > me : r >= me) scounts[i] = count;
    if (r <= last) rcounts[i] = count;
    rdispls[i] = r * count;
  }
  return StartExchange(
      fn, c, comm, in, scounts, sdispls, dt, g->At(0), rcounts, rdispls, dt, true,
      [fn, comm, g, last, recvbuf] {
        return last >= 0 ? Combine(fn, comm, *g, last, recvbuf) : MPI_SUCCESS;
      },
      request);
}

// MPI_Ireduce_scatter(_block): block i of every rank's vector goes to rank i (counts[i]
// elements), which combines the blocks it got in rank order.
int StartReduceScatter(const char* fn, const void* sendbuf, void* recvbuf, const int* counts,
                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  GOS_MPI_COMM(c, comm, fn);
  if (counts == nullptr) return Fail(comm, fn, MPI_ERR_ARG);
  const size_t n = static_cast<size_t>(c->g.size);
  const int mine = counts[c->g.rank];
  auto g = std::make_shared<Gathered>();
  if (int e = PrepareGathered(fn, c, comm, mine, dt, op, g.get())) return e;
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  std::vector<int> scounts(counts, counts + n), sdispls(n, 0), rcounts(n, mine), rdispls(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (counts[i] < 0) return Fail(comm, fn, MPI_ERR_COUNT);
    if (i > 0) sdispls[i] = sdispls[i - 1] + counts[i - 1];
    rdispls[i] = static_cast<int>(i) * mine;
  }
  const int last = c->g.size - 1;
  return StartExchange(
      fn, c, comm, in, scounts, sdispls, dt, g->At(0), rcounts, rdispls, dt, true,
      [fn, comm, g, last, recvbuf] { return Combine(fn, comm, *g, last, recvbuf); }, request);
}

}  // namespace

extern "C" {

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request* request) {
  return StartPrefixReduce("MPI_Iscan", false, sendbuf, recvbuf, count, datatype, op, comm,
                           request);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request* request) {
  return StartPrefixReduce("MPI_Iexscan", true, sendbuf, recvbuf, count, datatype, op, comm,
                           request);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return StartReduceScatter("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm,
                            request);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request* request) {
  int size = 0;
  if (int e = MPI_Comm_size(comm, &size)) return e;
  const std::vector<int> counts(static_cast<size_t>(size), recvcount);
  return StartReduceScatter("MPI_Ireduce_scatter_block", sendbuf, recvbuf, counts.data(), datatype,
                            op, comm, request);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  return StartGatheredReduce("MPI_Iallreduce", sendbuf, recvbuf, count, datatype, op, -1, comm,
                             request);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  if (root < 0) return Fail(comm, "MPI_Ireduce", MPI_ERR_ROOT);
  return StartGatheredReduce("MPI_Ireduce", sendbuf, recvbuf, count, datatype, op, root, comm,
                             request);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Gather");
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> counts(n, recvcount);
  std::vector<int> displs(n);
  for (size_t i = 0; i < n; ++i) displs[i] = static_cast<int>(i) * recvcount;
  return GathervImpl("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, counts.data(),
                     displs.data(), recvtype, root, comm);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  return GathervImpl("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                     recvtype, root, comm);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Scatter");
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> counts(n, sendcount);
  std::vector<int> displs(n);
  for (size_t i = 0; i < n; ++i) displs[i] = static_cast<int>(i) * sendcount;
  return ScattervImpl("MPI_Scatter", sendbuf, counts.data(), displs.data(), sendtype, recvbuf,
                      recvcount, recvtype, root, comm);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
  return ScattervImpl("MPI_Scatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                      recvtype, root, comm);
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  static const char* const kFn = "MPI_Allgatherv";
  GOS_MPI_COMM(c, comm, kFn);
  const size_t n = static_cast<size_t>(c->g.size);
  const bool in_place = sendbuf == MPI_IN_PLACE;
  TypePtr rt = FindType(recvtype);
  if (rt == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
  // In place, this rank's block is already at displs[rank] of recvbuf: send it from there.
  const int me = c->g.rank;
  const void* src = in_place ? At(recvbuf, displs[me], *rt) : sendbuf;
  const int scount = in_place ? recvcounts[me] : sendcount;
  const MPI_Datatype stype = in_place ? recvtype : sendtype;
  std::vector<int> scounts(n, scount);
  std::vector<int> sdispls(n, 0);
  return ExchangeImpl(kFn, src, scounts.data(), sdispls.data(), stype, recvbuf, recvcounts, displs,
                      recvtype, c, comm, /*self_copy=*/!in_place);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Allgather");
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> counts(n, recvcount);
  std::vector<int> displs(n);
  for (size_t i = 0; i < n; ++i) displs[i] = static_cast<int>(i) * recvcount;
  return MPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, counts.data(), displs.data(),
                        recvtype, comm);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  static const char* const kFn = "MPI_Alltoallv";
  GOS_MPI_COMM(c, comm, kFn);
  if (sendbuf != MPI_IN_PLACE) {
    return ExchangeImpl(kFn, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                        recvtype, c, comm, /*self_copy=*/true);
  }
  PackedBlocks p;
  if (int e = PackInPlace(kFn, comm, c, recvbuf, recvcounts, rdispls, recvtype, &p)) return e;
  return ExchangeImpl(kFn, p.data.data(), p.counts.data(), p.displs.data(), MPI_BYTE, recvbuf,
                      recvcounts, rdispls, recvtype, c, comm, /*self_copy=*/true);
}

int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Alltoallw");
  std::vector<char> in_place;
  return AlltoallwImpl("MPI_Alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                       recvcounts, rdispls, recvtypes, c, comm, &in_place, nullptr);
}

int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request) {
  static const char* const kFn = "MPI_Ialltoallw";
  GOS_MPI_COMM(c, comm, kFn);
  // An in-place exchange sends from a packed copy that lives until the request is done.
  auto in_place = std::make_shared<std::vector<char>>();
  std::vector<MPI_Request> parts;
  if (int e = AlltoallwImpl(kFn, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                            rdispls, recvtypes, c, comm, in_place.get(), &parts)) {
    return e;
  }
  *request = Compound(comm, std::move(parts), [in_place] { return MPI_SUCCESS; });
  return MPI_SUCCESS;
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Alltoall");
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> scounts(n, sendcount);
  std::vector<int> sdispls(n);
  std::vector<int> rcounts(n, recvcount);
  std::vector<int> rdispls(n);
  for (size_t i = 0; i < n; ++i) {
    sdispls[i] = static_cast<int>(i) * sendcount;
    rdispls[i] = static_cast<int>(i) * recvcount;
  }
  return MPI_Alltoallv(sendbuf, scounts.data(), sdispls.data(), sendtype, recvbuf, rcounts.data(),
                       rdispls.data(), recvtype, comm);
}

static int AddType(TypePtr t, MPI_Datatype* newtype) {
  State& s = S();
  std::erase_if(s.freed_in_use, [&](size_t i) {
    if (s.types[i].use_count() > 1) return false;
    s.types[i].reset();
    return true;
  });
  s.types.push_back(std::move(t));
  s.committed.push_back(false);
  s.freed.push_back(false);
  *newtype = kFirstDerivedType + static_cast<MPI_Datatype>(s.types.size() - 1);
  return MPI_SUCCESS;
}

int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return MPI_Type_vector(count, 1, 1, oldtype, newtype);
}

int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                    MPI_Datatype* newtype) {
  static const char* const kFn = "MPI_Type_vector";
  TypePtr old = FindType(oldtype, /*for_transfer=*/false);
  if (old == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_TYPE);
  if (count < 0 || blocklength < 0) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_COUNT);
  if (newtype == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  return AddType(gos::mpi::MakeVector(count, blocklength, stride, std::move(old)), newtype);
}

namespace {

// The blocks of MPI_Type_create_struct and the h/indexed constructors: displacements in
// bytes, or in extents of the old type when `scale` is that extent.
int AddBlocksType(const char* fn, int count, const int blocklengths[], const MPI_Aint* byte_displs,
                  const int* elem_displs, const MPI_Datatype* types, MPI_Datatype oldtype,
                  MPI_Datatype* newtype, int same_blocklen = -1) {
  if (count < 0) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
  if (newtype == nullptr || (count > 0 && blocklengths == nullptr && same_blocklen < 0)) {
    return Fail(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
  }
  std::vector<gos::mpi::TypeBlock> blocks;
  for (int i = 0; i < count; ++i) {
    TypePtr t = FindType(types != nullptr ? types[i] : oldtype, /*for_transfer=*/false);
    if (t == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_TYPE);
    const int len = same_blocklen >= 0 ? same_blocklen : blocklengths[i];
    if (len < 0) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
    const ptrdiff_t disp = byte_displs != nullptr ? byte_displs[i] : elem_displs[i] * t->extent();
    blocks.push_back({disp, len, std::move(t)});
  }
  // Only a struct gets MPI's alignment padding (epsilon), as C pads a struct.
  return AddType(gos::mpi::MakeBlocks(std::move(blocks), /*pad=*/types != nullptr), newtype);
}

}  // namespace

int MPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype* newtype) {
  if (count > 0 && (displacements == nullptr || types == nullptr)) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_struct", MPI_ERR_ARG);
  }
  return AddBlocksType("MPI_Type_create_struct", count, blocklengths, displacements, nullptr, types,
                       MPI_DATATYPE_NULL, newtype);
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype* newtype) {
  if (count < 0 || blocklength < 0) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_hvector", MPI_ERR_COUNT);
  }
  std::vector<MPI_Aint> displs(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) displs[static_cast<size_t>(i)] = i * stride;
  return AddBlocksType("MPI_Type_create_hvector", count, nullptr, displs.data(), nullptr, nullptr,
                       oldtype, newtype, blocklength);
}

int MPI_Type_indexed(int count, const int blocklengths[], const int displacements[],
                     MPI_Datatype oldtype, MPI_Datatype* newtype) {
  if (count > 0 && displacements == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_indexed", MPI_ERR_ARG);
  }
  return AddBlocksType("MPI_Type_indexed", count, blocklengths, nullptr, displacements, nullptr,
                       oldtype, newtype);
}

int MPI_Type_create_hindexed(int count, const int blocklengths[], const MPI_Aint displacements[],
                             MPI_Datatype oldtype, MPI_Datatype* newtype) {
  if (count > 0 && displacements == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_hindexed", MPI_ERR_ARG);
  }
  return AddBlocksType("MPI_Type_create_hindexed", count, blocklengths, displacements, nullptr,
                       nullptr, oldtype, newtype);
}

int MPI_Type_create_indexed_block(int count, int blocklength, const int displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype* newtype) {
  if (blocklength < 0) return Fail(MPI_COMM_WORLD, "MPI_Type_create_indexed_block", MPI_ERR_COUNT);
  if (count > 0 && displacements == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_indexed_block", MPI_ERR_ARG);
  }
  return AddBlocksType("MPI_Type_create_indexed_block", count, nullptr, nullptr, displacements,
                       nullptr, oldtype, newtype, blocklength);
}

int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  static const char* const kFn = "MPI_Type_create_hindexed_block";
  if (blocklength < 0) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_COUNT);
  if (count > 0 && displacements == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  return AddBlocksType(kFn, count, nullptr, displacements, nullptr, nullptr, oldtype, newtype,
                       blocklength);
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype* newtype) {
  TypePtr old = FindType(oldtype, /*for_transfer=*/false);
  if (old == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_create_resized", MPI_ERR_TYPE);
  if (newtype == nullptr || extent < 0) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_create_resized", MPI_ERR_ARG);
  }
  return AddType(gos::mpi::MakeResized(std::move(old), lb, extent), newtype);
}

int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  TypePtr old = FindType(oldtype, /*for_transfer=*/false);
  if (old == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_dup", MPI_ERR_TYPE);
  if (newtype == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_dup", MPI_ERR_ARG);
  // The same layout; a duplicate is committed when its original was (MPI 4.1, 5.1.10).
  if (int e = AddType(std::move(old), newtype)) return e;
  if (FindType(oldtype) != nullptr) {
    S().committed[static_cast<size_t>(*newtype - kFirstDerivedType)] = true;
  }
  return MPI_SUCCESS;
}

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  return TypeBounds("MPI_Type_get_extent", datatype, false, lb, extent);
}

int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent) {
  return TypeBounds("MPI_Type_get_true_extent", datatype, true, true_lb, true_extent);
}

int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return TypeBounds("MPI_Type_get_extent_x", datatype, false, lb, extent);
}

int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent) {
  return TypeBounds("MPI_Type_get_true_extent_x", datatype, true, true_lb, true_extent);
}

int MPI_Type_set_name(MPI_Datatype datatype, const char* type_name) {
  if (FindType(datatype, /*for_transfer=*/false) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_set_name", MPI_ERR_TYPE);
  }
  if (type_name == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_set_name", MPI_ERR_ARG);
  SetName(S().type_names, datatype, type_name);
  return MPI_SUCCESS;
}

int MPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen) {
  if (FindType(datatype, /*for_transfer=*/false) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_get_name", MPI_ERR_TYPE);
  }
  if (type_name == nullptr || resultlen == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_get_name", MPI_ERR_ARG);
  }
  GetName(S().type_names, datatype, BasicTypeName(datatype), type_name, resultlen);
  return MPI_SUCCESS;
}

int MPI_Get_address(const void* location, MPI_Aint* address) {
  *address = reinterpret_cast<MPI_Aint>(location);
  return MPI_SUCCESS;
}

int MPI_Address(void* location, MPI_Aint* address) { return MPI_Get_address(location, address); }

int MPI_Type_struct(int count, int blocklengths[], MPI_Aint displacements[], MPI_Datatype types[],
                    MPI_Datatype* newtype) {
  return MPI_Type_create_struct(count, blocklengths, displacements, types, newtype);
}

int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                     MPI_Datatype* newtype) {
  return MPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

int MPI_Type_hindexed(int count, int blocklengths[], MPI_Aint displacements[], MPI_Datatype oldtype,
                      MPI_Datatype* newtype) {
  return MPI_Type_create_hindexed(count, blocklengths, displacements, oldtype, newtype);
}

int MPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent) {
  MPI_Aint lb = 0;
  return TypeBounds("MPI_Type_extent", datatype, false, &lb, extent);
}

int MPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint extent = 0;
  return TypeBounds("MPI_Type_lb", datatype, false, displacement, &extent);
}

int MPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint lb = 0, extent = 0;
  if (int e = TypeBounds("MPI_Type_ub", datatype, false, &lb, &extent)) return e;
  if (displacement == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Type_ub", MPI_ERR_ARG);
  *displacement = lb + extent;
  return MPI_SUCCESS;
}

MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp) { return base + disp; }

MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) { return addr1 - addr2; }

// Fortran and C handles are the same ints.
MPI_Fint MPI_Comm_c2f(MPI_Comm comm) { return comm; }
MPI_Comm MPI_Comm_f2c(MPI_Fint comm) { return comm; }
MPI_Fint MPI_Type_c2f(MPI_Datatype datatype) { return datatype; }
MPI_Datatype MPI_Type_f2c(MPI_Fint datatype) { return datatype; }
MPI_Fint MPI_Group_c2f(MPI_Group group) { return group; }
MPI_Group MPI_Group_f2c(MPI_Fint group) { return group; }
MPI_Fint MPI_Request_c2f(MPI_Request request) { return request; }
MPI_Request MPI_Request_f2c(MPI_Fint request) { return request; }
MPI_Fint MPI_Op_c2f(MPI_Op op) { return op; }
MPI_Op MPI_Op_f2c(MPI_Fint op) { return op; }
MPI_Fint MPI_Info_c2f(MPI_Info info) { return info; }
MPI_Info MPI_Info_f2c(MPI_Fint info) { return info; }
MPI_Fint MPI_Errhandler_c2f(MPI_Errhandler errhandler) { return errhandler; }
MPI_Errhandler MPI_Errhandler_f2c(MPI_Fint errhandler) { return errhandler; }

int MPI_Type_commit(MPI_Datatype* datatype) {
  if (datatype == nullptr || FindType(*datatype, /*for_transfer=*/false) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_commit", MPI_ERR_TYPE);
  }
  // Committing a basic type is allowed and does nothing.
  if (*datatype >= kFirstDerivedType) {
    S().committed[static_cast<size_t>(*datatype - kFirstDerivedType)] = true;
  }
  return MPI_SUCCESS;
}

int MPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
  // Every reduction with a user op combines in rank order, so commutativity does not matter;
  // it is kept for MPI_Op_commutative.
  if (user_fn == nullptr || op == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Op_create", MPI_ERR_ARG);
  }
  State& s = S();
  s.user_ops.push_back(user_fn);
  s.user_op_commute.push_back(commute != 0);
  *op = kFirstUserOp + static_cast<MPI_Op>(s.user_ops.size() - 1);
  return MPI_SUCCESS;
}

int MPI_Op_free(MPI_Op* op) {
  if (op == nullptr || FindUserOp(*op) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Op_free", MPI_ERR_OP);
  }
  S().user_ops[static_cast<size_t>(*op - kFirstUserOp)] = nullptr;
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}

int MPI_Op_commutative(MPI_Op op, int* commute) {
  static const char* const kFn = "MPI_Op_commutative";
  if (commute == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  if (FindUserOp(op) != nullptr) {
    *commute = S().user_op_commute[static_cast<size_t>(op - kFirstUserOp)] ? 1 : 0;
  } else if (op >= MPI_SUM && op <= MPI_MAXLOC) {
    *commute = 1;  // every predefined op is
  } else {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_OP);
  }
  return MPI_SUCCESS;
}

int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype,
                     MPI_Op op) {
  static const char* const kFn = "MPI_Reduce_local";
  TypePtr t;
  if (int e = CheckReduction(kFn, MPI_COMM_WORLD, count, datatype, op, &t)) return e;
  if (inbuf == MPI_IN_PLACE || inoutbuf == MPI_IN_PLACE) {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_BUFFER);
  }
  return ApplyOp(kFn, MPI_COMM_WORLD, inbuf, inoutbuf, count, datatype, op);
}

int MPI_Type_size(MPI_Datatype datatype, int* size) {
  return TypeSize("MPI_Type_size", datatype, size);
}

int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size) {
  return TypeSize("MPI_Type_size_x", datatype, size);
}

int MPI_Type_free(MPI_Datatype* datatype) {
  if (datatype == nullptr || *datatype < kFirstDerivedType ||
      FindType(*datatype, /*for_transfer=*/false) == nullptr ||
      S().freed[static_cast<size_t>(*datatype - kFirstDerivedType)]) {
    return Fail(MPI_COMM_WORLD, "MPI_Type_free", MPI_ERR_TYPE);
  }
  // Pending operations and types built on this one keep their own references to the layout;
  // while they do, the handle still resolves (a pending reduction gives it to its user op).
  const size_t i = static_cast<size_t>(*datatype - kFirstDerivedType);
  if (S().types[i].use_count() > 1) {
    S().freed[i] = true;
    S().freed_in_use.push_back(i);
  } else {
    S().types[i].reset();
    S().committed[i] = false;
  }
  S().type_names.erase(*datatype);
  *datatype = MPI_DATATYPE_NULL;
  return MPI_SUCCESS;
}

double MPI_Wtime(void) { return gos_wtime(); }

double MPI_Wtick(void) { return gos_wtick(); }

int MPI_Get_processor_name(char* name, int* resultlen) {
  if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0) {
    std::snprintf(name, MPI_MAX_PROCESSOR_NAME, "unknown");
  }
  name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
  *resultlen = static_cast<int>(std::strlen(name));
  return MPI_SUCCESS;
}

int MPI_Get_version(int* version, int* subversion) {
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

int MPI_Query_thread(int* provided) {
  *provided = g_thread_level;
  return MPI_SUCCESS;
}

int MPI_Pcontrol(const int /*level*/, ...) { return MPI_SUCCESS; }

int MPI_Error_string(int errorcode, char* string, int* resultlen) {
  const char* text = AnyErrorText(errorcode);
  if (text == nullptr) {
    std::snprintf(string, MPI_MAX_ERROR_STRING, "unknown error code %d", errorcode);
  } else {
    std::snprintf(string, MPI_MAX_ERROR_STRING, "%s", text);
  }
  *resultlen = static_cast<int>(std::strlen(string));
  return MPI_SUCCESS;
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  static const char* const kFn = "MPI_Testsome";
  if (outcount == nullptr || incount < 0 ||
      (incount > 0 && (requests == nullptr || indices == nullptr))) {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  }
  int active = 0, done = 0;
  for (int i = 0; i < incount; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    if (requests[i] >= kFirstPersistent) {
      // An inactive persistent request counts as a null one.
      Persistent* p = FindPersistent(requests[i]);
      if (p != nullptr && p->active == MPI_REQUEST_NULL) continue;
    }
    ++active;
    int flag = 0;
    MPI_Status st;
    if (int e = MPI_Test(&requests[i], &flag, &st)) return e;
    if (!flag) continue;
    indices[done] = i;
    if (statuses != MPI_STATUSES_IGNORE) statuses[done] = st;
    ++done;
  }
  *outcount = active == 0 ? MPI_UNDEFINED : done;
  return MPI_SUCCESS;
}

int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  static const char* const kFn = "MPI_Pack_size";
  TypePtr t = FindType(datatype, /*for_transfer=*/false);
  if (t == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
  if (incount < 0) return Fail(comm, kFn, MPI_ERR_COUNT);
  if (size == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  *size = static_cast<int>(gos::mpi::PackedSize(static_cast<size_t>(incount), *t));
  return MPI_SUCCESS;
}

}  // extern "C"

namespace {

// MPI_Pack's and MPI_Unpack's checks: `count` elements of `datatype` at *position of a packed
// buffer of `bufsize` bytes. On success *t is the type and *bytes their packed size.
int PackedSpan(const char* fn, MPI_Datatype datatype, int count, int bufsize, const int* position,
               MPI_Comm comm, TypePtr* t, size_t* bytes) {
  *t = FindType(datatype);
  if (*t == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  if (count < 0) return Fail(comm, fn, MPI_ERR_COUNT);
  if (position == nullptr || *position < 0 || *position > bufsize) {
    return Fail(comm, fn, MPI_ERR_ARG);
  }
  *bytes = gos::mpi::PackedSize(static_cast<size_t>(count), **t);
  if (*bytes > static_cast<size_t>(bufsize - *position)) return Fail(comm, fn, MPI_ERR_TRUNCATE);
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
             int* position, MPI_Comm comm) {
  TypePtr t;
  size_t bytes = 0;
  if (int e = PackedSpan("MPI_Pack", datatype, incount, outsize, position, comm, &t, &bytes)) {
    return e;
  }
  gos::mpi::Pack(inbuf, static_cast<size_t>(incount), *t, static_cast<char*>(outbuf) + *position);
  *position += static_cast<int>(bytes);
  return MPI_SUCCESS;
}

int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
               MPI_Datatype datatype, MPI_Comm comm) {
  TypePtr t;
  size_t bytes = 0;
  if (int e = PackedSpan("MPI_Unpack", datatype, outcount, insize, position, comm, &t, &bytes)) {
    return e;
  }
  gos::mpi::Unpack(static_cast<const char*>(inbuf) + *position, bytes,
                   static_cast<size_t>(outcount), *t, outbuf);
  *position += static_cast<int>(bytes);
  return MPI_SUCCESS;
}

int MPI_Error_class(int errorcode, int* errorclass) {
  // Every error code gos returns is itself a class; the program's codes have theirs.
  const int user = UserErrorClass(errorcode);
  if (errorclass == nullptr || (user < 0 && ErrorText(errorcode) == nullptr)) {
    return Fail(MPI_COMM_WORLD, "MPI_Error_class", MPI_ERR_ARG);
  }
  *errorclass = user >= 0 ? user : errorcode;
  return MPI_SUCCESS;
}

int MPI_Add_error_class(int* errorclass) {
  if (errorclass == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Add_error_class", MPI_ERR_ARG);
  State& s = S();
  *errorclass = ++s.last_used_code;
  s.user_code_class.push_back(*errorclass);
  return MPI_SUCCESS;
}

int MPI_Add_error_code(int errorclass, int* errorcode) {
  // A predefined class, or one the program added (not a code of its own that is no class).
  const bool is_class = UserErrorClass(errorclass) == errorclass ||
                        (errorclass <= MPI_ERR_LASTCODE && ErrorText(errorclass) != nullptr);
  if (errorcode == nullptr || !is_class) {
    return Fail(MPI_COMM_WORLD, "MPI_Add_error_code", MPI_ERR_ARG);
  }
  State& s = S();
  *errorcode = ++s.last_used_code;
  s.user_code_class.push_back(errorclass);
  return MPI_SUCCESS;
}

int MPI_Add_error_string(int errorcode, const char* string) {
  // Only for the program's own codes and classes (MPI 4.1, 9.5).
  if (string == nullptr || UserErrorClass(errorcode) < 0) {
    return Fail(MPI_COMM_WORLD, "MPI_Add_error_string", MPI_ERR_ARG);
  }
  S().user_error_strings[errorcode] = std::string(string).substr(0, MPI_MAX_ERROR_STRING - 1);
  return MPI_SUCCESS;
}

int MPI_Get_library_version(char* version, int* resultlen) {
  std::snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                "gos MPI (MPI %d.%d subset over buffered coscheduling; docs/mpi.md)", MPI_VERSION,
                MPI_SUBVERSION);
  *resultlen = static_cast<int>(std::strlen(version));
  return MPI_SUCCESS;
}

int MPI_Is_thread_main(int* flag) {
  if (flag == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Is_thread_main", MPI_ERR_ARG);
  *flag = std::this_thread::get_id() == S().main_thread;
  return MPI_SUCCESS;
}

int MPI_Comm_set_name(MPI_Comm comm, const char* comm_name) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_set_name");
  (void)c;
  if (comm_name == nullptr) return Fail(comm, "MPI_Comm_set_name", MPI_ERR_ARG);
  SetName(S().comm_names, comm, comm_name);
  return MPI_SUCCESS;
}

int MPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_get_name");
  (void)c;
  if (comm_name == nullptr || resultlen == nullptr) {
    return Fail(comm, "MPI_Comm_get_name", MPI_ERR_ARG);
  }
  // Unnamed communicators have the empty name; the predefined ones their own (MPI 4.1, 7.8).
  const char* predefined = comm == MPI_COMM_WORLD  ? "MPI_COMM_WORLD"
                           : comm == MPI_COMM_SELF ? "MPI_COMM_SELF"
                                                   : nullptr;
  GetName(S().comm_names, comm, predefined, comm_name, resultlen);
  return MPI_SUCCESS;
}

}  // extern "C"

namespace {

// MPI_Reduce_scatter(_block): an Allreduce of all `total` elements into a scratch vector, of
// which this rank keeps `count` elements from element `offset` on.
int ReduceScatter(const char* fn, const void* sendbuf, void* recvbuf, size_t total, size_t offset,
                  int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  TypePtr t = FindType(datatype);
  if (t == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  if (t->lb != 0) return Fail(comm, fn, MPI_ERR_TYPE);  // scratch laid out from 0
  const size_t extent = static_cast<size_t>(t->extent());
  std::vector<unsigned char> all(std::max<size_t>(total * extent, 1));
  // In place, the whole input vector is in recvbuf.
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  if (int e = MPI_Allreduce(in, all.data(), static_cast<int>(total), datatype, op, comm)) return e;
  // Element by element through the type map, so that gaps in recvbuf stay untouched.
  std::vector<unsigned char> packed(gos::mpi::PackedSize(static_cast<size_t>(count), *t));
  gos::mpi::Pack(all.data() + offset * extent, static_cast<size_t>(count), *t, packed.data());
  gos::mpi::Unpack(packed.data(), packed.size(), static_cast<size_t>(count), *t, recvbuf);
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  static const char* const kFn = "MPI_Reduce_scatter";
  int size = 0, rank = 0;
  if (int e = MPI_Comm_size(comm, &size)) return e;
  if (int e = MPI_Comm_rank(comm, &rank)) return e;
  if (recvcounts == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  size_t total = 0, offset = 0;
  for (int i = 0; i < size; ++i) {
    if (recvcounts[i] < 0) return Fail(comm, kFn, MPI_ERR_COUNT);
    if (i < rank) offset += static_cast<size_t>(recvcounts[i]);
    total += static_cast<size_t>(recvcounts[i]);
  }
  return ReduceScatter(kFn, sendbuf, recvbuf, total, offset, recvcounts[rank], datatype, op, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  static const char* const kFn = "MPI_Reduce_scatter_block";
  int size = 0, rank = 0;
  if (int e = MPI_Comm_size(comm, &size)) return e;
  if (int e = MPI_Comm_rank(comm, &rank)) return e;
  if (recvcount < 0) return Fail(comm, kFn, MPI_ERR_COUNT);
  const size_t n = static_cast<size_t>(recvcount);
  return ReduceScatter(kFn, sendbuf, recvbuf, n * static_cast<size_t>(size),
                       n * static_cast<size_t>(rank), recvcount, datatype, op, comm);
}

int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                             const int array_of_starts[], int order, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  static const char* const kFn = "MPI_Type_create_subarray";
  if (ndims < 1 || array_of_sizes == nullptr || array_of_subsizes == nullptr ||
      array_of_starts == nullptr || newtype == nullptr ||
      (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)) {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  }
  for (int d = 0; d < ndims; ++d) {
    if (array_of_sizes[d] < 1 || array_of_subsizes[d] < 1 ||
        array_of_subsizes[d] > array_of_sizes[d] || array_of_starts[d] < 0 ||
        array_of_starts[d] > array_of_sizes[d] - array_of_subsizes[d]) {
      return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
    }
  }
  MPI_Aint lb = 0, extent = 0;
  if (int e = MPI_Type_get_extent(oldtype, &lb, &extent)) return e;
  // From the fastest-varying dimension out: each level repeats the one inside it
  // subsizes[d] times, one row of the full array apart.
  MPI_Datatype t = oldtype;
  MPI_Aint stride = extent, offset = 0;
  for (int k = 0; k < ndims; ++k) {
    const int d = order == MPI_ORDER_C ? ndims - 1 - k : k;
    MPI_Datatype next;
    if (int e = MPI_Type_create_hvector(array_of_subsizes[d], 1, stride, t, &next)) return e;
    if (t != oldtype) MPI_Type_free(&t);
    t = next;
    offset += array_of_starts[d] * stride;
    stride *= array_of_sizes[d];
  }
  // Placed at its start inside the array, and as wide as the whole array.
  const int one = 1;
  MPI_Datatype placed;
  if (int e = MPI_Type_create_struct(1, &one, &offset, &t, &placed)) return e;
  MPI_Type_free(&t);
  const int e = MPI_Type_create_resized(placed, lb, stride, newtype);
  MPI_Type_free(&placed);
  return e;
}

// ---- MPI_Info: key/value hints. gos acts on none of them; they are kept and returned.

}  // extern "C"

namespace {

using InfoPairs = std::vector<std::pair<std::string, std::string>>;

InfoPairs* FindInfo(MPI_Info info) {
  auto& infos = S().infos;
  if (info < 1 || static_cast<size_t>(info) > infos.size()) return nullptr;
  auto& slot = infos[static_cast<size_t>(info - 1)];
  return slot ? &*slot : nullptr;
}

MPI_Info NewInfo(InfoPairs pairs) {
  S().infos.emplace_back(std::move(pairs));
  return static_cast<MPI_Info>(S().infos.size());
}

// The pairs of `info` when it is a live info object and the call's other arguments are valid
// (`args_ok`); else nullptr, with *err the error applied (MPI_ERR_ARG).
InfoPairs* InfoArgs(const char* fn, MPI_Info info, bool args_ok, int* err) {
  InfoPairs* pairs = args_ok ? FindInfo(info) : nullptr;
  if (pairs == nullptr) *err = Fail(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
  return pairs;
}

// The value of key, or nullptr.
std::string* InfoValue(InfoPairs& pairs, const char* key) {
  for (auto& [k, v] : pairs) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace

extern "C" {

int MPI_Info_create(MPI_Info* info) {
  if (info == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Info_create", MPI_ERR_ARG);
  *info = NewInfo({});
  return MPI_SUCCESS;
}

int MPI_Info_set(MPI_Info info, const char* key, const char* value) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs =
      InfoArgs("MPI_Info_set", info,
               key != nullptr && value != nullptr && *key != '\0' &&
                   std::strlen(key) < MPI_MAX_INFO_KEY && std::strlen(value) < MPI_MAX_INFO_VAL,
               &err);
  if (pairs == nullptr) return err;
  if (std::string* v = InfoValue(*pairs, key)) {
    *v = value;
  } else {
    pairs->emplace_back(key, value);
  }
  return MPI_SUCCESS;
}

int MPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs =
      InfoArgs("MPI_Info_get", info,
               key != nullptr && value != nullptr && flag != nullptr && valuelen >= 0, &err);
  if (pairs == nullptr) return err;
  const std::string* v = InfoValue(*pairs, key);
  *flag = v != nullptr;
  // At most valuelen characters, and the terminating NUL (value has valuelen + 1 bytes).
  if (v != nullptr) std::snprintf(value, static_cast<size_t>(valuelen) + 1, "%s", v->c_str());
  return MPI_SUCCESS;
}

int MPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value, int* flag) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_get_string", info,
                              key != nullptr && buflen != nullptr && *buflen >= 0 &&
                                  flag != nullptr && (*buflen == 0 || value != nullptr),
                              &err);
  if (pairs == nullptr) return err;
  const std::string* v = InfoValue(*pairs, key);
  *flag = v != nullptr;
  if (v == nullptr) return MPI_SUCCESS;
  // At most *buflen bytes with the NUL; *buflen becomes what the whole value needs.
  if (*buflen > 0) std::snprintf(value, static_cast<size_t>(*buflen), "%s", v->c_str());
  *buflen = static_cast<int>(v->size()) + 1;
  return MPI_SUCCESS;
}

int MPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_get_valuelen", info,
                              key != nullptr && valuelen != nullptr && flag != nullptr, &err);
  if (pairs == nullptr) return err;
  const std::string* v = InfoValue(*pairs, key);
  *flag = v != nullptr;
  if (v != nullptr) *valuelen = static_cast<int>(v->size());
  return MPI_SUCCESS;
}

int MPI_Info_delete(MPI_Info info, const char* key) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_delete", info, key != nullptr, &err);
  if (pairs == nullptr) return err;
  if (std::erase_if(*pairs, [&](const auto& kv) { return kv.first == key; }) == 0) {
    return Fail(MPI_COMM_WORLD, "MPI_Info_delete", MPI_ERR_ARG);  // no such key
  }
  return MPI_SUCCESS;
}

int MPI_Info_get_nkeys(MPI_Info info, int* nkeys) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_get_nkeys", info, nkeys != nullptr, &err);
  if (pairs == nullptr) return err;
  *nkeys = static_cast<int>(pairs->size());
  return MPI_SUCCESS;
}

int MPI_Info_get_nthkey(MPI_Info info, int n, char* key) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_get_nthkey", info, key != nullptr && n >= 0, &err);
  if (pairs == nullptr) return err;
  if (static_cast<size_t>(n) >= pairs->size()) {
    return Fail(MPI_COMM_WORLD, "MPI_Info_get_nthkey", MPI_ERR_ARG);
  }
  std::snprintf(key, MPI_MAX_INFO_KEY, "%s", (*pairs)[static_cast<size_t>(n)].first.c_str());
  return MPI_SUCCESS;
}

int MPI_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  int err = MPI_SUCCESS;
  InfoPairs* pairs = InfoArgs("MPI_Info_dup", info, newinfo != nullptr, &err);
  if (pairs == nullptr) return err;
  *newinfo = NewInfo(*pairs);
  return MPI_SUCCESS;
}

int MPI_Info_free(MPI_Info* info) {
  if (info == nullptr || FindInfo(*info) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Info_free", MPI_ERR_ARG);
  }
  S().infos[static_cast<size_t>(*info - 1)].reset();
  *info = MPI_INFO_NULL;
  return MPI_SUCCESS;
}

// Hints on communicators: accepted and ignored; MPI_Comm_get_info returns an empty set.
int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_set_info");
  (void)c;
  if (info != MPI_INFO_NULL && FindInfo(info) == nullptr) {
    return Fail(comm, "MPI_Comm_set_info", MPI_ERR_ARG);
  }
  return MPI_SUCCESS;
}

int MPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_get_info");
  (void)c;
  if (info_used == nullptr) return Fail(comm, "MPI_Comm_get_info", MPI_ERR_ARG);
  *info_used = NewInfo({});
  return MPI_SUCCESS;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  if (int e = MPI_Comm_set_info(comm, info)) return e;
  return MPI_Comm_dup(comm, newcomm);
}

// MPI_Comm_dup needs no communication here (see there): the request is complete at once.
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
  if (request == nullptr) return Fail(comm, "MPI_Comm_idup", MPI_ERR_ARG);
  if (int e = MPI_Comm_dup(comm, newcomm)) return e;
  *request = Compound(comm, {}, nullptr);
  return MPI_SUCCESS;
}

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  static const char* const kFn = "MPI_Alloc_mem";
  if (size < 0 || baseptr == nullptr || (info != MPI_INFO_NULL && FindInfo(info) == nullptr)) {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  }
  // At least a byte: a size of 0 also gives a pointer of its own, freed like any other.
  void* p = std::malloc(std::max<size_t>(static_cast<size_t>(size), 1));
  if (p == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_NO_MEM);
  *static_cast<void**>(baseptr) = p;
  return MPI_SUCCESS;
}

int MPI_Free_mem(void* base) {
  std::free(base);
  return MPI_SUCCESS;
}

}  // extern "C"
