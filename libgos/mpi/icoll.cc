// Nonblocking collectives (MPI 4.1, 6.12): point-to-point exchanges on the collective
// context, started at the call (so a rank that has called it counts as entered, whatever it
// does next), and a compound request that completes when they all have (docs/mpi.md).
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::AlltoallwImpl;
using gos::mpi::internal::At;
using gos::mpi::internal::Combine;
using gos::mpi::internal::Comm;
using gos::mpi::internal::Compound;
using gos::mpi::internal::ExchangeImpl;
using gos::mpi::internal::Fail;
using gos::mpi::internal::FindType;
using gos::mpi::internal::Gathered;
using gos::mpi::internal::PackedBlocks;
using gos::mpi::internal::PackInPlace;
using gos::mpi::internal::PrepareGathered;
using gos::mpi::internal::TypePtr;

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

GOS_MPI_WEAK_ALIAS(Ibarrier);
int PMPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  static const char* const kFn = "MPI_Ibarrier";
  GOS_MPI_COMM(c, comm, kFn);
  // An empty message from every member to every other: all have entered once all arrived.
  std::vector<int> zero(static_cast<size_t>(c->g.size), 0);
  return StartExchange(kFn, c, comm, nullptr, zero, zero, MPI_BYTE, nullptr, zero, zero, MPI_BYTE,
                       false, nullptr, request);
}

GOS_MPI_WEAK_ALIAS(Ibcast);
int PMPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
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

GOS_MPI_WEAK_ALIAS(Igather);
int PMPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return StartRooted("MPI_Igather", true, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                     recvtype, nullptr, nullptr, root, comm, request);
}

GOS_MPI_WEAK_ALIAS(Igatherv);
int PMPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                  MPI_Comm comm, MPI_Request* request) {
  return StartRooted("MPI_Igatherv", true, sendbuf, sendcount, sendtype, recvbuf, 0, recvtype,
                     recvcounts, displs, root, comm, request);
}

GOS_MPI_WEAK_ALIAS(Iscatter);
int PMPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                  MPI_Request* request) {
  return StartRooted("MPI_Iscatter", false, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                     recvtype, nullptr, nullptr, root, comm, request);
}

GOS_MPI_WEAK_ALIAS(Iscatterv);
int PMPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                   MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                   int root, MPI_Comm comm, MPI_Request* request) {
  return StartRooted("MPI_Iscatterv", false, sendbuf, 0, sendtype, recvbuf, recvcount, recvtype,
                     sendcounts, displs, root, comm, request);
}

GOS_MPI_WEAK_ALIAS(Iallgather);
int PMPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return StartBlocks("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                     comm, false, request);
}

GOS_MPI_WEAK_ALIAS(Iallgatherv);
int PMPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
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

GOS_MPI_WEAK_ALIAS(Ialltoall);
int PMPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return StartBlocks("MPI_Ialltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                     comm, true, request);
}

GOS_MPI_WEAK_ALIAS(Ialltoallv);
int PMPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
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

GOS_MPI_WEAK_ALIAS(Ialltoallw);
int PMPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
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

GOS_MPI_WEAK_ALIAS(Ireduce);
int PMPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                 int root, MPI_Comm comm, MPI_Request* request) {
  if (root < 0) return Fail(comm, "MPI_Ireduce", MPI_ERR_ROOT);
  return StartGatheredReduce("MPI_Ireduce", sendbuf, recvbuf, count, datatype, op, root, comm,
                             request);
}

GOS_MPI_WEAK_ALIAS(Iallreduce);
int PMPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, MPI_Request* request) {
  return StartGatheredReduce("MPI_Iallreduce", sendbuf, recvbuf, count, datatype, op, -1, comm,
                             request);
}

GOS_MPI_WEAK_ALIAS(Ireduce_scatter_block);
int PMPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                               MPI_Request* request) {
  int size = 0;
  if (int e = PMPI_Comm_size(comm, &size)) return e;
  const std::vector<int> counts(static_cast<size_t>(size), recvcount);
  return StartReduceScatter("MPI_Ireduce_scatter_block", sendbuf, recvbuf, counts.data(), datatype,
                            op, comm, request);
}

GOS_MPI_WEAK_ALIAS(Ireduce_scatter);
int PMPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return StartReduceScatter("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm,
                            request);
}

GOS_MPI_WEAK_ALIAS(Iscan);
int PMPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm, MPI_Request* request) {
  return StartPrefixReduce("MPI_Iscan", false, sendbuf, recvbuf, count, datatype, op, comm,
                           request);
}

GOS_MPI_WEAK_ALIAS(Iexscan);
int PMPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                 MPI_Comm comm, MPI_Request* request) {
  return StartPrefixReduce("MPI_Iexscan", true, sendbuf, recvbuf, count, datatype, op, comm,
                           request);
}

}  // extern "C"
