// The rank side: collectives (client_impl.h). Barrier and bcast are one descriptor each;
// reduce and allreduce are point-to-point exchanges on the collective context, combined here.
#include <cstdint>
#include <cstring>
#include <vector>

#include "client_impl.h"

namespace gos::bcs::internal {

namespace {

// Collective sequences stay below 2^30 so that they never clash with tags that other layers
// (the MPI subset) use on the collective context (they set bit 30).
constexpr int32_t kSeqMask = 0x3fffffff;

int32_t NextSeq(uint64_t ctx) {
  int32_t& next = S().coll_seq[ctx];
  const int32_t seq = next;
  next = (next + 1) & kSeqMask;
  return seq;
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

}  // namespace

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

}  // namespace gos::bcs::internal
