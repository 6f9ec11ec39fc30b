// Blocking collectives (MPI 4.1, chapter 6), reduction operations (MPI_Op_create, ...) and
// the engines the nonblocking ones (icoll.cc) share: the all-to-all exchange and the
// gathered reduction.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "datatype.h"
#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::TypeNode;
using gos::mpi::internal::AlltoallwImpl;
using gos::mpi::internal::At;
using gos::mpi::internal::CheckCount;
using gos::mpi::internal::Combine;
using gos::mpi::internal::Comm;
using gos::mpi::internal::ExchangeImpl;
using gos::mpi::internal::Fail;
using gos::mpi::internal::FindType;
using gos::mpi::internal::FortranOpValid;
using gos::mpi::internal::FromGos;
using gos::mpi::internal::Gathered;
using gos::mpi::internal::GosTypeOf;
using gos::mpi::internal::IsFortranType;
using gos::mpi::internal::kFirstUserOp;
using gos::mpi::internal::LibraryOp;
using gos::mpi::internal::PackedBlocks;
using gos::mpi::internal::PackInPlace;
using gos::mpi::internal::PrepareGathered;
using gos::mpi::internal::S;
using gos::mpi::internal::StartRecv;
using gos::mpi::internal::StartSend;
using gos::mpi::internal::State;
using gos::mpi::internal::TypePtr;
using gos::mpi::internal::WaitCollective;

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

int ReduceArgs(MPI_Datatype dt, MPI_Op op, int count) {
  if (count < 0) return MPI_ERR_COUNT;
  const int g = GosTypeOf(dt);
  if (g < 0) {
    // Reductions take basic and Fortran types only (a derived type is a valid handle but
    // unsupported); the Fortran types without a gos twin only with LibraryOp's ops.
    if (!IsFortranType(dt)) return MPI_ERR_TYPE;
    return LibraryOp(op, dt) != nullptr ? MPI_SUCCESS : MPI_ERR_OP;
  }
  if (op < MPI_SUM || op > MPI_MAXLOC) return MPI_ERR_OP;
  if (!gos::mpi::OpValid(op - 1, g)) return MPI_ERR_OP;
  if (IsFortranType(dt) && !FortranOpValid(op, dt)) return MPI_ERR_OP;
  return MPI_SUCCESS;
}

MPI_User_function* FindUserOp(MPI_Op op) {
  State& s = S();
  if (op < kFirstUserOp || static_cast<size_t>(op - kFirstUserOp) >= s.user_ops.size()) {
    return nullptr;
  }
  return s.user_ops[static_cast<size_t>(op - kFirstUserOp)];
}

// The function a reduction combines with when gos.h cannot do it: the program's own op, or
// the library's for a predefined op on a Fortran complex or pair type; nullptr otherwise.
MPI_User_function* CombineFn(MPI_Op op, MPI_Datatype dt) {
  if (MPI_User_function* user = FindUserOp(op)) return user;
  return LibraryOp(op, dt);
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
  if (MPI_User_function* user = CombineFn(op, dt)) {
    int len = count;
    MPI_Datatype type = dt;
    // MPI's user function takes its input as non-const, and must not write there.
    user(const_cast<void*>(in), inout, &len, &type);
    return MPI_SUCCESS;
  }
  GOS_MPI_CHECK(comm, fn,
                FromGos(gos_reduce_local(in, inout, static_cast<size_t>(count),
                                         static_cast<gos_type_t>(GosTypeOf(dt)),
                                         static_cast<gos_op_t>(op - 1))));
  return MPI_SUCCESS;
}

// Which ranks' contributions a gathered reduction combines.
enum class Span {
  kAll,        // all ranks, for every rank (Allreduce) or the root (Reduce)
  kInclusive,  // ranks 0..me (Scan)
  kExclusive,  // ranks 0..me-1 (Exscan; rank 0 gets nothing)
};

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
  if (int e = PMPI_Allgather(in, count, dt, g.At(0), count, dt, comm)) return e;
  int last = c->g.size - 1;
  if (span == Span::kInclusive) last = c->g.rank;
  if (span == Span::kExclusive) last = c->g.rank - 1;
  if (!store || last < 0) return MPI_SUCCESS;  // Exscan's rank 0: recvbuf is undefined
  return Combine(fn, comm, g, last, recvbuf);
}

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
  if (int e = PMPI_Allreduce(in, all.data(), static_cast<int>(total), datatype, op, comm)) return e;
  // Element by element through the type map, so that gaps in recvbuf stay untouched.
  std::vector<unsigned char> packed(gos::mpi::PackedSize(static_cast<size_t>(count), *t));
  gos::mpi::Pack(all.data() + offset * extent, static_cast<size_t>(count), *t, packed.data());
  gos::mpi::Unpack(packed.data(), packed.size(), static_cast<size_t>(count), *t, recvbuf);
  return MPI_SUCCESS;
}

}  // namespace

namespace gos::mpi::internal {

char* At(void* buf, int displ, const TypeNode& t) {
  return static_cast<char*>(buf) + static_cast<ptrdiff_t>(displ) * t.extent();
}
const char* At(const void* buf, int displ, const TypeNode& t) {
  return static_cast<const char*>(buf) + static_cast<ptrdiff_t>(displ) * t.extent();
}

int WaitCollective(const char* fn, MPI_Comm comm, int err, std::vector<MPI_Request>& reqs) {
  const int werr = WaitInternal(reqs);
  GOS_MPI_CHECK(comm, fn, err != MPI_SUCCESS ? err : werr);
  return MPI_SUCCESS;
}

int ExchangeImpl(const char* fn, const void* sendbuf, const int* scounts, const int* sdispls,
                 MPI_Datatype sendtype, void* recvbuf, const int* rcounts, const int* rdispls,
                 MPI_Datatype recvtype, Comm* c, MPI_Comm comm, bool self_copy,
                 std::vector<MPI_Request>* started) {
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

}  // namespace gos::mpi::internal

extern "C" {

GOS_MPI_WEAK_ALIAS(Barrier);
int PMPI_Barrier(MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Barrier");
  GOS_MPI_CHECK(comm, "MPI_Barrier", FromGos(gos_barrier(&c->g)));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Bcast);
int PMPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
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

GOS_MPI_WEAK_ALIAS(Gather);
int PMPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Gather");
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> counts(n, recvcount);
  std::vector<int> displs(n);
  for (size_t i = 0; i < n; ++i) displs[i] = static_cast<int>(i) * recvcount;
  return GathervImpl("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, counts.data(),
                     displs.data(), recvtype, root, comm);
}

GOS_MPI_WEAK_ALIAS(Gatherv);
int PMPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm) {
  return GathervImpl("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                     recvtype, root, comm);
}

GOS_MPI_WEAK_ALIAS(Scatter);
int PMPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Scatter");
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> counts(n, sendcount);
  std::vector<int> displs(n);
  for (size_t i = 0; i < n; ++i) displs[i] = static_cast<int>(i) * sendcount;
  return ScattervImpl("MPI_Scatter", sendbuf, counts.data(), displs.data(), sendtype, recvbuf,
                      recvcount, recvtype, root, comm);
}

GOS_MPI_WEAK_ALIAS(Scatterv);
int PMPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm) {
  return ScattervImpl("MPI_Scatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                      recvtype, root, comm);
}

GOS_MPI_WEAK_ALIAS(Allgather);
int PMPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Allgather");
  const size_t n = static_cast<size_t>(c->g.size);
  std::vector<int> counts(n, recvcount);
  std::vector<int> displs(n);
  for (size_t i = 0; i < n; ++i) displs[i] = static_cast<int>(i) * recvcount;
  return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, counts.data(), displs.data(),
                         recvtype, comm);
}

GOS_MPI_WEAK_ALIAS(Allgatherv);
int PMPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
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

GOS_MPI_WEAK_ALIAS(Alltoall);
int PMPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
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
  return PMPI_Alltoallv(sendbuf, scounts.data(), sdispls.data(), sendtype, recvbuf, rcounts.data(),
                        rdispls.data(), recvtype, comm);
}

GOS_MPI_WEAK_ALIAS(Alltoallv);
int PMPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
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

GOS_MPI_WEAK_ALIAS(Alltoallw);
int PMPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  GOS_MPI_COMM(c, comm, "MPI_Alltoallw");
  std::vector<char> in_place;
  return AlltoallwImpl("MPI_Alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                       recvcounts, rdispls, recvtypes, c, comm, &in_place, nullptr);
}

GOS_MPI_WEAK_ALIAS(Reduce);
int PMPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm) {
  static const char* const kFn = "MPI_Reduce";
  if (CombineFn(op, datatype) != nullptr) {
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
    scratch.resize(static_cast<size_t>(count) * gos::mpi::BasicTypeSize(GosTypeOf(datatype)));
    out = scratch.data();
  }
  GOS_MPI_CHECK(comm, kFn,
                FromGos(gos_reduce(in, out, static_cast<size_t>(count),
                                   static_cast<gos_type_t>(GosTypeOf(datatype)),
                                   static_cast<gos_op_t>(op - 1), root, &c->g)));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Op_create);
int PMPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
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

GOS_MPI_WEAK_ALIAS(Op_free);
int PMPI_Op_free(MPI_Op* op) {
  if (op == nullptr || FindUserOp(*op) == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Op_free", MPI_ERR_OP);
  }
  S().user_ops[static_cast<size_t>(*op - kFirstUserOp)] = nullptr;
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Op_commutative);
int PMPI_Op_commutative(MPI_Op op, int* commute) {
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

GOS_MPI_WEAK_ALIAS(Allreduce);
int PMPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm) {
  static const char* const kFn = "MPI_Allreduce";
  if (CombineFn(op, datatype) != nullptr) {
    return GatheredReduce(kFn, sendbuf, recvbuf, count, datatype, op, comm, Span::kAll, -1);
  }
  GOS_MPI_COMM(c, comm, kFn);
  GOS_MPI_CHECK(comm, kFn, ReduceArgs(datatype, op, count));
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  GOS_MPI_CHECK(comm, kFn,
                FromGos(gos_allreduce(in, recvbuf, static_cast<size_t>(count),
                                      static_cast<gos_type_t>(GosTypeOf(datatype)),
                                      static_cast<gos_op_t>(op - 1), &c->g)));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Reduce_local);
int PMPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype,
                      MPI_Op op) {
  static const char* const kFn = "MPI_Reduce_local";
  TypePtr t;
  if (int e = CheckReduction(kFn, MPI_COMM_WORLD, count, datatype, op, &t)) return e;
  if (inbuf == MPI_IN_PLACE || inoutbuf == MPI_IN_PLACE) {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_BUFFER);
  }
  return ApplyOp(kFn, MPI_COMM_WORLD, inbuf, inoutbuf, count, datatype, op);
}

GOS_MPI_WEAK_ALIAS(Reduce_scatter_block);
int PMPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  static const char* const kFn = "MPI_Reduce_scatter_block";
  int size = 0, rank = 0;
  if (int e = PMPI_Comm_size(comm, &size)) return e;
  if (int e = PMPI_Comm_rank(comm, &rank)) return e;
  if (recvcount < 0) return Fail(comm, kFn, MPI_ERR_COUNT);
  const size_t n = static_cast<size_t>(recvcount);
  return ReduceScatter(kFn, sendbuf, recvbuf, n * static_cast<size_t>(size),
                       n * static_cast<size_t>(rank), recvcount, datatype, op, comm);
}

GOS_MPI_WEAK_ALIAS(Reduce_scatter);
int PMPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  static const char* const kFn = "MPI_Reduce_scatter";
  int size = 0, rank = 0;
  if (int e = PMPI_Comm_size(comm, &size)) return e;
  if (int e = PMPI_Comm_rank(comm, &rank)) return e;
  if (recvcounts == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  size_t total = 0, offset = 0;
  for (int i = 0; i < size; ++i) {
    if (recvcounts[i] < 0) return Fail(comm, kFn, MPI_ERR_COUNT);
    if (i < rank) offset += static_cast<size_t>(recvcounts[i]);
    total += static_cast<size_t>(recvcounts[i]);
  }
  return ReduceScatter(kFn, sendbuf, recvbuf, total, offset, recvcounts[rank], datatype, op, comm);
}

GOS_MPI_WEAK_ALIAS(Scan);
int PMPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm) {
  return GatheredReduce("MPI_Scan", sendbuf, recvbuf, count, datatype, op, comm, Span::kInclusive,
                        -1);
}

GOS_MPI_WEAK_ALIAS(Exscan);
int PMPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm) {
  return GatheredReduce("MPI_Exscan", sendbuf, recvbuf, count, datatype, op, comm, Span::kExclusive,
                        -1);
}

}  // extern "C"
