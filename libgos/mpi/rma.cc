// One-sided communication with fence synchronization (MPI_Win_create, MPI_Put, MPI_Get,
// MPI_Accumulate, MPI_Win_fence, MPI_Win_free), built on the subset's own point-to-point calls.
//
// A rank holds no network state and nothing serves its memory while it computes, so an
// operation is recorded at its call (the origin data packed then) and carried out at the fence
// that ends the epoch: there every rank learns how many operations target it (a reduce-scatter
// of counts, which also keeps one epoch's messages from meeting the next one's, since no rank
// sends before all have entered the fence), sends its own to their targets on the window's
// private communicator, and applies the ones that reach it in arrival order, which keeps the
// operations of one origin on one target in call order (MPI's default accumulate ordering).
// The target layout travels as runs of basic values (Flatten): the target need not know the
// origin's derived type handles.
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "datatype.h"
#include "gos/gos.h"
#include "internal.h"
#include "mpi.h"

namespace {

using gos::mpi::FailCall;
using gos::mpi::FlatRun;
using gos::mpi::TypeNode;
using TypePtr = std::shared_ptr<const TypeNode>;

// Tags on the window's private communicator.
constexpr int kRequestTag = 1;
constexpr int kReplyTag = 2;

enum Kind : int32_t { kPut = 1, kGet = 2, kAccumulate = 3 };

// An operation on the wire: the header, `runs` WireRuns (byte offsets into the target's
// window), then for a put or an accumulate `bytes` bytes of data in run order.
struct WireHeader {
  int32_t kind = 0;
  int32_t op = 0;  // kAccumulate: the MPI_Op (MPI_REPLACE acts as a put)
  uint64_t runs = 0;
  uint64_t bytes = 0;
};
struct WireRun {
  int64_t disp = 0;
  int32_t basic = 0;
  int32_t unused = 0;
  uint64_t n = 0;
};

// An operation of this rank's current epoch.
struct Pending {
  int target = 0;
  std::vector<char> msg;
  // A get: where its data goes at the fence.
  bool get = false;
  void* origin = nullptr;
  int origin_count = 0;
  TypePtr origin_type;
  std::vector<char> reply;
};

struct Window {
  MPI_Comm comm = MPI_COMM_NULL;  // private: the creating communicator's ranks, split off
  char* base = nullptr;
  MPI_Aint size = 0;
  std::vector<MPI_Aint> sizes;  // every rank's window size, in bytes
  std::vector<MPI_Aint> units;  // every rank's displacement unit
  std::vector<Pending> pending;
};

// index + 1 = MPI_Win; nullptr = freed.
std::vector<std::unique_ptr<Window>>& Windows() {
  static auto* w = new std::vector<std::unique_ptr<Window>>();
  return *w;
}

Window* FindWindow(MPI_Win win) {
  auto& w = Windows();
  if (win <= 0 || static_cast<size_t>(win) > w.size()) return nullptr;
  return w[static_cast<size_t>(win) - 1].get();
}

// Carries out one operation that reached this rank (its runs were checked by the origin
// against this window's size; checked again, since a bad one would write anywhere). A get's
// data is appended to `reply`.
int Apply(const Window& w, const std::vector<char>& msg, std::vector<char>* reply) {
  WireHeader h;
  if (msg.size() < sizeof h) return MPI_ERR_INTERN;
  std::memcpy(&h, msg.data(), sizeof h);
  const size_t runs_end = sizeof h + h.runs * sizeof(WireRun);
  if (msg.size() < runs_end || (h.kind != kGet && msg.size() != runs_end + h.bytes)) {
    return MPI_ERR_INTERN;
  }
  const char* data = msg.data() + runs_end;
  for (uint64_t i = 0; i < h.runs; ++i) {
    WireRun r;
    std::memcpy(&r, msg.data() + sizeof h + i * sizeof r, sizeof r);
    const size_t bytes = r.n * gos::mpi::BasicTypeSize(r.basic);
    if (r.disp < 0 || static_cast<uint64_t>(r.disp) + bytes > static_cast<uint64_t>(w.size)) {
      return MPI_ERR_RMA_RANGE;
    }
    char* at = w.base + r.disp;
    if (h.kind == kGet) {
      reply->insert(reply->end(), at, at + bytes);
      continue;
    }
    if (h.kind == kPut || h.op == MPI_REPLACE) {
      std::memmove(at, data, bytes);
    } else if (gos_reduce_local(data, at, r.n, static_cast<gos_type_t>(r.basic),
                                static_cast<gos_op_t>(h.op - 1)) != GOS_OK) {
      return MPI_ERR_OP;
    }
    data += bytes;
  }
  return MPI_SUCCESS;
}

// Ends the epoch: every operation recorded on any rank is done when it returns (collective).
int Complete(const char* fn, Window& w) {
  int size = 0;
  PMPI_Comm_size(w.comm, &size);
  std::vector<int> counts(static_cast<size_t>(size), 0);
  for (const Pending& p : w.pending) ++counts[static_cast<size_t>(p.target)];
  int incoming = 0;
  if (int e = PMPI_Reduce_scatter_block(counts.data(), &incoming, 1, MPI_INT, MPI_SUM, w.comm)) {
    return FailCall(w.comm, fn, e);
  }
  std::vector<MPI_Request> reqs;
  for (Pending& p : w.pending) {
    reqs.push_back(MPI_REQUEST_NULL);
    if (int e = PMPI_Isend(p.msg.data(), static_cast<int>(p.msg.size()), MPI_BYTE, p.target,
                           kRequestTag, w.comm, &reqs.back())) {
      return FailCall(w.comm, fn, e);
    }
    if (!p.get) continue;
    reqs.push_back(MPI_REQUEST_NULL);
    if (int e = PMPI_Irecv(p.reply.data(), static_cast<int>(p.reply.size()), MPI_BYTE, p.target,
                           kReplyTag, w.comm, &reqs.back())) {
      return FailCall(w.comm, fn, e);
    }
  }
  std::deque<std::vector<char>> replies;  // stable addresses for the reply sends
  std::vector<char> in;
  for (int i = 0; i < incoming; ++i) {
    MPI_Status st;
    int len = 0;
    if (int e = PMPI_Probe(MPI_ANY_SOURCE, kRequestTag, w.comm, &st))
      return FailCall(w.comm, fn, e);
    PMPI_Get_count(&st, MPI_BYTE, &len);
    in.resize(static_cast<size_t>(len));
    if (int e = PMPI_Recv(in.data(), len, MPI_BYTE, st.MPI_SOURCE, kRequestTag, w.comm,
                          MPI_STATUS_IGNORE)) {
      return FailCall(w.comm, fn, e);
    }
    std::vector<char> reply;
    if (int e = Apply(w, in, &reply)) return FailCall(w.comm, fn, e);
    WireHeader h;
    std::memcpy(&h, in.data(), sizeof h);
    if (h.kind != kGet) continue;
    replies.push_back(std::move(reply));
    reqs.push_back(MPI_REQUEST_NULL);
    if (int e = PMPI_Isend(replies.back().data(), static_cast<int>(replies.back().size()), MPI_BYTE,
                           st.MPI_SOURCE, kReplyTag, w.comm, &reqs.back())) {
      return FailCall(w.comm, fn, e);
    }
  }
  if (int e = PMPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE)) {
    return FailCall(w.comm, fn, e);
  }
  for (Pending& p : w.pending) {
    if (p.get) {
      gos::mpi::Unpack(p.reply.data(), p.reply.size(), static_cast<size_t>(p.origin_count),
                       *p.origin_type, p.origin);
    }
  }
  w.pending.clear();
  return MPI_SUCCESS;
}

// Records a put, get or accumulate of this epoch after checking it against the target's window.
int Record(const char* fn, Kind kind, const void* origin, int origin_count,
           MPI_Datatype origin_datatype, int target, MPI_Aint target_disp, int target_count,
           MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  Window* w = FindWindow(win);
  if (w == nullptr) return FailCall(MPI_COMM_WORLD, fn, MPI_ERR_WIN);
  if (origin_count < 0 || target_count < 0) return FailCall(w->comm, fn, MPI_ERR_COUNT);
  TypePtr ot = gos::mpi::TransferLayout(origin_datatype);
  TypePtr tt = gos::mpi::TransferLayout(target_datatype);
  if (ot == nullptr || tt == nullptr) return FailCall(w->comm, fn, MPI_ERR_TYPE);
  if (target == MPI_PROC_NULL) return MPI_SUCCESS;
  if (target < 0 || static_cast<size_t>(target) >= w->sizes.size()) {
    return FailCall(w->comm, fn, MPI_ERR_RANK);
  }
  if (target_disp < 0) return FailCall(w->comm, fn, MPI_ERR_DISP);
  const size_t bytes = gos::mpi::PackedSize(static_cast<size_t>(origin_count), *ot);
  if (bytes != gos::mpi::PackedSize(static_cast<size_t>(target_count), *tt)) {
    return FailCall(w->comm, fn, MPI_ERR_TYPE);  // the signatures cannot match
  }
  if (kind == kAccumulate && op != MPI_REPLACE && (op < MPI_SUM || op > MPI_MAXLOC)) {
    return FailCall(w->comm, fn, MPI_ERR_OP);  // only predefined ops, as MPI says
  }
  // The target applies the op to the basic values the types are made of: a complex number's
  // product is not that of its parts (a derived type of complex numbers is not caught here).
  const auto complex = [](MPI_Datatype t) {
    return t == MPI_COMPLEX || t == MPI_DOUBLE_COMPLEX || t == MPI_COMPLEX8 || t == MPI_COMPLEX16;
  };
  if (kind == kAccumulate && op == MPI_PROD &&
      (complex(origin_datatype) || complex(target_datatype))) {
    return FailCall(w->comm, fn, MPI_ERR_OP);
  }
  const MPI_Aint offset = target_disp * w->units[static_cast<size_t>(target)];
  const MPI_Aint limit = w->sizes[static_cast<size_t>(target)];
  std::vector<FlatRun> runs = gos::mpi::Flatten(static_cast<size_t>(target_count), *tt);
  Pending p;
  p.target = target;
  WireHeader h;
  h.kind = kind;
  h.op = op;
  h.runs = runs.size();
  h.bytes = kind == kGet ? 0 : bytes;
  p.msg.resize(sizeof h + runs.size() * sizeof(WireRun) + h.bytes);
  std::memcpy(p.msg.data(), &h, sizeof h);
  for (size_t i = 0; i < runs.size(); ++i) {
    const FlatRun& r = runs[i];
    const MPI_Aint start = offset + r.disp;
    const MPI_Aint end = start + static_cast<MPI_Aint>(r.n * gos::mpi::BasicTypeSize(r.basic));
    if (start < 0 || end > limit) return FailCall(w->comm, fn, MPI_ERR_RMA_RANGE);
    if (kind == kAccumulate && op != MPI_REPLACE && !gos::mpi::OpValid(op - 1, r.basic)) {
      return FailCall(w->comm, fn, MPI_ERR_OP);
    }
    WireRun wr;
    wr.disp = start;
    wr.basic = r.basic;
    wr.n = r.n;
    std::memcpy(p.msg.data() + sizeof h + i * sizeof wr, &wr, sizeof wr);
  }
  if (kind == kGet) {
    p.get = true;
    p.origin = const_cast<void*>(origin);
    p.origin_count = origin_count;
    p.origin_type = ot;
    p.reply.resize(bytes);
  } else if (bytes > 0) {
    gos::mpi::Pack(origin, static_cast<size_t>(origin_count), *ot,
                   p.msg.data() + sizeof h + runs.size() * sizeof(WireRun));
  }
  w->pending.push_back(std::move(p));
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

GOS_MPI_WEAK_ALIAS(Win_create);
int PMPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info /*info*/, MPI_Comm comm,
                    MPI_Win* win) {
  static const char* const kFn = "MPI_Win_create";
  if (win == nullptr) return FailCall(comm, kFn, MPI_ERR_ARG);
  if (size < 0) return FailCall(comm, kFn, MPI_ERR_SIZE);
  if (disp_unit <= 0) return FailCall(comm, kFn, MPI_ERR_DISP);
  auto w = std::make_unique<Window>();
  // A split rather than a dup: a dup would run the copy callbacks of the program's attributes.
  int rank = 0;
  if (int e = PMPI_Comm_rank(comm, &rank)) return e;
  if (int e = PMPI_Comm_split(comm, 0, rank, &w->comm)) return e;
  // A window's errors go to its own handler, MPI_ERRORS_ARE_FATAL until set (as MPI says),
  // whatever the communicator's.
  PMPI_Comm_set_errhandler(w->comm, MPI_ERRORS_ARE_FATAL);
  int n = 0;
  PMPI_Comm_size(w->comm, &n);
  const MPI_Aint mine[2] = {size, disp_unit};
  std::vector<MPI_Aint> all(2 * static_cast<size_t>(n));
  if (int e = PMPI_Allgather(mine, 2, MPI_AINT, all.data(), 2, MPI_AINT, w->comm)) {
    PMPI_Comm_free(&w->comm);
    return e;
  }
  for (int r = 0; r < n; ++r) {
    w->sizes.push_back(all[2 * static_cast<size_t>(r)]);
    w->units.push_back(all[2 * static_cast<size_t>(r) + 1]);
  }
  w->base = static_cast<char*>(base);
  w->size = size;
  Windows().push_back(std::move(w));
  *win = static_cast<MPI_Win>(Windows().size());
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Win_fence);
int PMPI_Win_fence(int /*assert*/, MPI_Win win) {
  Window* w = FindWindow(win);
  if (w == nullptr) return FailCall(MPI_COMM_WORLD, "MPI_Win_fence", MPI_ERR_WIN);
  return Complete("MPI_Win_fence", *w);
}

// Collective, like a fence: operations still pending (no closing fence, which MPI requires)
// are carried out first, so no rank frees a window others still target.
GOS_MPI_WEAK_ALIAS(Win_free);
int PMPI_Win_free(MPI_Win* win) {
  static const char* const kFn = "MPI_Win_free";
  Window* w = win != nullptr ? FindWindow(*win) : nullptr;
  if (w == nullptr) return FailCall(MPI_COMM_WORLD, kFn, MPI_ERR_WIN);
  if (int e = Complete(kFn, *w)) return e;
  PMPI_Comm_free(&w->comm);
  Windows()[static_cast<size_t>(*win) - 1].reset();
  *win = MPI_WIN_NULL;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Win_set_errhandler);
int PMPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler) {
  Window* w = FindWindow(win);
  if (w == nullptr) return FailCall(MPI_COMM_WORLD, "MPI_Win_set_errhandler", MPI_ERR_WIN);
  return PMPI_Comm_set_errhandler(w->comm, errhandler);
}

GOS_MPI_WEAK_ALIAS(Win_get_errhandler);
int PMPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler* errhandler) {
  Window* w = FindWindow(win);
  if (w == nullptr) return FailCall(MPI_COMM_WORLD, "MPI_Win_get_errhandler", MPI_ERR_WIN);
  return PMPI_Comm_get_errhandler(w->comm, errhandler);
}

GOS_MPI_WEAK_ALIAS(Put);
int PMPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
             int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype,
             MPI_Win win) {
  return Record("MPI_Put", kPut, origin_addr, origin_count, origin_datatype, target_rank,
                target_disp, target_count, target_datatype, MPI_OP_NULL, win);
}

GOS_MPI_WEAK_ALIAS(Get);
int PMPI_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  return Record("MPI_Get", kGet, origin_addr, origin_count, origin_datatype, target_rank,
                target_disp, target_count, target_datatype, MPI_OP_NULL, win);
}

GOS_MPI_WEAK_ALIAS(Accumulate);
int PMPI_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                    int target_rank, MPI_Aint target_disp, int target_count,
                    MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  return Record("MPI_Accumulate", kAccumulate, origin_addr, origin_count, origin_datatype,
                target_rank, target_disp, target_count, target_datatype, op, win);
}

}  // extern "C"
