// The MPI subset (mpi.h) on the gos native API (gos.h): the state its files share and the
// helpers more than one of them uses, declared under the file that defines them. Not
// installed. See docs/mpi.md.
//
// State is process-global and unsynchronized: the subset is MPI_THREAD_FUNNELED at most.
#ifndef GOS_LIBGOS_MPI_MPI_IMPL_H_
#define GOS_LIBGOS_MPI_MPI_IMPL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm_logic.h"
#include "datatype.h"
#include "gos/gos.h"
#include "internal.h"
#include "mpi.h"

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

namespace gos::mpi::internal {

using TypePtr = std::shared_ptr<const TypeNode>;

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

// ---- init.cc: startup and the library state

// The library's state, made on first use and never destroyed.
State& S();

// ---- errhandler.cc: error handling

// The MPI error class of a gos.h error code.
int FromGos(int err);

// Applies the error handler of `comm` (MPI_COMM_WORLD's when comm is not a communicator):
// fatal prints the reason and ends the job; MPI_ERRORS_RETURN hands the code back; a handler
// of the program's is called with the communicator and the code, which is then handed back.
int Fail(MPI_Comm comm, const char* fn, int code);

// ---- comm.cc: communicators

// The communicator behind handle `c`, or nullptr (MPI_COMM_NULL, freed, or unknown).
Comm* FindComm(MPI_Comm c);

// Stores a new communicator and returns its handle (handles are not reused).
MPI_Comm AddComm(std::unique_ptr<Comm> c);

// Makes the communicator of parent members `members` (parent ranks, in new-rank order): the
// parent's next dup/split child, for split color `salt` (or kDupSalt).
MPI_Comm MakeChild(const Comm& parent, const std::vector<int>& members, uint64_t salt);

// ---- group.cc: groups

// The world ranks of group `g` in group order, or nullptr (MPI_GROUP_NULL, freed, or unknown).
const std::vector<int>* FindGroup(MPI_Group g);

// Where world rank w is in the group, or -1.
int GroupRankOf(const std::vector<int>& g, int w);

// ---- attr.cc: attribute caching

// Deletes every attribute of comm, the last set first (MPI_Comm_free, and MPI_COMM_SELF's at
// MPI_Finalize); stops at a delete callback's error.
int DeleteAllAttrs(MPI_Comm comm, Comm* c);

// MPI_Comm_dup's copying: each attribute of comm whose copy callback sets its flag is stored
// on newcomm with the value the callback gave; stops at a callback's error.
int CopyAttrs(MPI_Comm comm, const Comm& from, Comm* to);

// ---- info.cc: info objects

using InfoPairs = std::vector<std::pair<std::string, std::string>>;

// The pairs of a live info object, or nullptr.
InfoPairs* FindInfo(MPI_Info info);

// Stores a new info object holding `pairs` and returns its handle.
MPI_Info NewInfo(InfoPairs pairs);

// ---- type.cc: datatypes

// Looks up a datatype; `for_transfer` also requires a derived type to be committed.
TypePtr FindType(MPI_Datatype dt, bool for_transfer = true);

// MPI_*_set_name: at most MPI_MAX_OBJECT_NAME - 1 characters are kept.
void SetName(std::map<int, std::string>& names, int handle, const char* name);

// MPI_*_get_name: the name set, else `predefined` (nullptr: the empty name).
void GetName(const std::map<int, std::string>& names, int handle, const char* predefined, char* out,
             int* resultlen);

// ---- ftype.cc: Fortran's datatypes

// The gos_type_t a basic or Fortran datatype is reduced as (MPI_INTEGER: GOS_INT), or -1
// (derived types, and the Fortran complex and pair types, which LibraryOp reduces).
int GosTypeOf(MPI_Datatype dt);

// MPI_CHARACTER ... GOS_MPI_LAST_FORTRAN_TYPE.
bool IsFortranType(MPI_Datatype dt);

// A Fortran type's name ("MPI_INTEGER"), or nullptr.
const char* FortranTypeName(MPI_Datatype dt);

// A Fortran type's layout (its twin's basic node, or two values of the part type), or nullptr.
TypePtr FortranTypeLayout(MPI_Datatype dt);

// The extra rule for a predefined op on a Fortran type beyond its twin's (MPI_LOGICAL takes
// only the logical ops, MPI_CHARACTER none).
bool FortranOpValid(MPI_Op op, MPI_Datatype dt);

// The library's own function for predefined op on a Fortran type without a twin (SUM and
// PROD on the complex types, MINLOC and MAXLOC on the pairs), or nullptr.
MPI_User_function* LibraryOp(MPI_Op op, MPI_Datatype dt);

// ---- request.cc: the request table and its completion

// A fresh request, in use; returns its handle (slot index + 1).
int AllocRequest();

// The live request behind `r`, or nullptr (unknown, released, or freed by the program).
Request* FindRequest(MPI_Request r);

// Empties request `r`'s slot for reuse.
void ReleaseRequest(MPI_Request r);

// Fills a status unless it is MPI_STATUS_IGNORE.
void SetStatus(MPI_Status* status, int source, int tag, int error, size_t bytes, int cancelled);

// The empty status (MPI_ANY_TAG, no data, no error) from `source`.
void SetEmptyStatus(MPI_Status* status, int source);

// Completes the requests the program freed whose transfers have finished (their staging
// buffers must outlive the transfer); with `block`, waits for all of them.
void SweepDetached(bool block);

// Waits for request `r` and finishes it: its outcome goes into `status`, the request is
// released.
int WaitOne(MPI_Request r, MPI_Status* status);

// Waits for every internal request of a collective; returns the first error.
int WaitInternal(std::vector<MPI_Request>& reqs);

// A compound request (a nonblocking collective) over the started parts.
MPI_Request Compound(MPI_Comm comm, std::vector<MPI_Request> parts, std::function<int()> on_done);

// MPI_Request_free of a request that is not persistent: released at once when it is complete
// or nothing of the library's must outlive its transfer, else detached until SweepDetached
// finishes it.
int Active_Request_free(MPI_Request* request);

// ---- p2p.cc: point-to-point

// MPI_ERR_COUNT for a negative count, else MPI_SUCCESS.
int CheckCount(int count);

// Starts a send of count x dt on `gc` (the communicator's or its collective context).
// `t` is the type's layout itself, not its handle: a persistent request keeps the layout, and
// the program may free the handle before MPI_Start (MPI 4.1, 5.1.9: pending operations are
// not affected).
int StartSend(const void* buf, int count, const TypePtr& t, int dest, int tag, MPI_Comm comm,
              const gos_comm_t& gc, int flags, MPI_Request* out);

// Starts a receive of count x t on `gc`, as StartSend a send; a type that is not contiguous
// is received into a staging buffer and unpacked on completion.
int StartRecv(void* buf, int count, const TypePtr& t, int source, int tag, MPI_Comm comm,
              const gos_comm_t& gc, MPI_Request* out);

// StartSend and StartRecv with the type's handle, which must be usable in a transfer
// (FindType).
int StartSend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              const gos_comm_t& gc, int flags, MPI_Request* out);

int StartRecv(void* buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
              const gos_comm_t& gc, MPI_Request* out);

// A buffered send of count x t: a packed copy that the request owns, then the request is let
// go: the copy lives until the message has moved (a detached request), and the program's
// buffer is free at once. With `done`, also a request that is complete already (MPI_Ibsend's,
// a started MPI_Bsend_init's).
int StartBsend(const char* fn, const void* buf, int count, const TypePtr& t, int dest, int tag,
               MPI_Comm comm, MPI_Request* done);

// ---- coll.cc: the engines of the collectives

// Where element `displ` of type t begins in buf (displ extents of t from it).
char* At(void* buf, int displ, const TypeNode& t);
const char* At(const void* buf, int displ, const TypeNode& t);

// The end of a blocking collective: waits for its internal requests and applies the first
// error, `err` (from posting them) or a completion's.
int WaitCollective(const char* fn, MPI_Comm comm, int err, std::vector<MPI_Request>& reqs);

// The engine of Allgather(v), Alltoall(v): every rank i sends scounts[j] x stype at
// sdispls[j] to every rank j, which receives it as rcounts[i] x rtype at rdispls[i].
// For an allgather every sdispls[j] is 0 and scounts[j] the same.
int ExchangeImpl(const char* fn, const void* sendbuf, const int* scounts, const int* sdispls,
                 MPI_Datatype sendtype, void* recvbuf, const int* rcounts, const int* rdispls,
                 MPI_Datatype recvtype, Comm* c, MPI_Comm comm, bool self_copy,
                 std::vector<MPI_Request>* started = nullptr);

// MPI_(I)alltoallw: ExchangeImpl with a datatype per peer on each side and displacements in
// bytes. sendbuf MPI_IN_PLACE: what recvbuf holds, laid out as the receive, is sent from a
// packed copy (owned by `in_place`, which must outlive the exchange).
int AlltoallwImpl(const char* fn, const void* sendbuf, const int* scounts, const int* sdispls,
                  const MPI_Datatype* stypes, void* recvbuf, const int* rcounts, const int* rdispls,
                  const MPI_Datatype* rtypes, Comm* c, MPI_Comm comm, std::vector<char>* in_place,
                  std::vector<MPI_Request>* started);

// An all-to-all in place sends what recvbuf holds now, laid out as the receive, from a packed
// copy, so that incoming blocks cannot overwrite it first: the copy, and each peer's byte
// count and offset in it.
struct PackedBlocks {
  std::vector<char> data;
  std::vector<int> counts, displs;
};

int PackInPlace(const char* fn, MPI_Comm comm, Comm* c, const void* recvbuf, const int* recvcounts,
                const int* rdispls, MPI_Datatype recvtype, PackedBlocks* p);

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
                    Gathered* g);

// recvbuf = x0 op (x1 op (... op x_last)), combined in rank order; only the type's data is
// written, not the gaps between its blocks.
int Combine(const char* fn, MPI_Comm comm, Gathered& g, int last, void* recvbuf);

}  // namespace gos::mpi::internal

#define GOS_MPI_CHECK(comm, fn, expr)                                \
  do {                                                               \
    if (int gos_mpi_err_ = (expr)) {                                 \
      return ::gos::mpi::internal::Fail((comm), (fn), gos_mpi_err_); \
    }                                                                \
  } while (0)

// Looks up `comm` or fails the call with MPI_ERR_COMM.
#define GOS_MPI_COMM(var, comm, fn)                                                      \
  ::gos::mpi::internal::Comm* var = ::gos::mpi::internal::FindComm(comm);                \
  if (var == nullptr) {                                                                  \
    return ::gos::mpi::internal::Fail(MPI_COMM_WORLD, (fn),                              \
                                      gos_initialized() ? MPI_ERR_COMM : MPI_ERR_OTHER); \
  }

#endif  // GOS_LIBGOS_MPI_MPI_IMPL_H_
