// Process topologies (MPI 4.1, chapter 8): Cartesian and distributed graph communicators,
// and the neighbourhood collectives on them.
#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "comm_logic.h"
#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::At;
using gos::mpi::internal::Comm;
using gos::mpi::internal::DistGraph;
using gos::mpi::internal::Fail;
using gos::mpi::internal::FindComm;
using gos::mpi::internal::FindType;
using gos::mpi::internal::MakeChild;
using gos::mpi::internal::StartRecv;
using gos::mpi::internal::StartSend;
using gos::mpi::internal::TypePtr;
using gos::mpi::internal::WaitCollective;

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

GOS_MPI_WEAK_ALIAS(Cart_create);
int PMPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
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
  if (int e = PMPI_Comm_split(comm_old, rank < product ? 0 : MPI_UNDEFINED, rank, comm_cart)) {
    return e;
  }
  if (Comm* n = FindComm(*comm_cart)) n->cart = std::move(cart);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Dims_create);
int PMPI_Dims_create(int nnodes, int ndims, int dims[]) {
  if (ndims < 0 || (ndims > 0 && dims == nullptr)) {
    return Fail(MPI_COMM_WORLD, "MPI_Dims_create", MPI_ERR_ARG);
  }
  if (!gos::mpi::DimsCreate(nnodes, std::span<int>(dims, static_cast<size_t>(ndims)))) {
    return Fail(MPI_COMM_WORLD, "MPI_Dims_create", MPI_ERR_DIMS);
  }
  return MPI_SUCCESS;
}

int gos_mpi_unweighted[1];
int gos_mpi_weights_empty[1];

GOS_MPI_WEAK_ALIAS(Dist_graph_create_adjacent);
int PMPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
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

GOS_MPI_WEAK_ALIAS(Topo_test);
int PMPI_Topo_test(MPI_Comm comm, int* status) {
  GOS_MPI_COMM(c, comm, "MPI_Topo_test");
  if (status == nullptr) return Fail(comm, "MPI_Topo_test", MPI_ERR_ARG);
  *status = c->cart ? MPI_CART : c->graph ? MPI_DIST_GRAPH : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Cartdim_get);
int PMPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  int err = MPI_SUCCESS;
  Comm* cc = CartComm(comm, "MPI_Cartdim_get", &err);
  if (cc == nullptr) return err;
  const gos::mpi::Cart* cart = &*cc->cart;
  *ndims = static_cast<int>(cart->dims.size());
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Cart_get);
int PMPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
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

GOS_MPI_WEAK_ALIAS(Cart_rank);
int PMPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  int err = MPI_SUCCESS;
  Comm* cc = CartComm(comm, "MPI_Cart_rank", &err);
  if (cc == nullptr) return err;
  const gos::mpi::Cart* cart = &*cc->cart;
  int r = gos::mpi::CartRank(*cart, std::span<const int>(coords, cart->dims.size()));
  if (r < 0) return Fail(comm, "MPI_Cart_rank", MPI_ERR_ARG);
  *rank = r;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Cart_coords);
int PMPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
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

GOS_MPI_WEAK_ALIAS(Dist_graph_neighbors_count);
int PMPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree, int* weighted) {
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

GOS_MPI_WEAK_ALIAS(Dist_graph_neighbors);
int PMPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[],
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

GOS_MPI_WEAK_ALIAS(Cart_shift);
int PMPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest) {
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

GOS_MPI_WEAK_ALIAS(Cart_sub);
int PMPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
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
  if (int e = PMPI_Comm_split(comm, sub.color, sub.key, newcomm)) return e;
  if (Comm* n = FindComm(*newcomm)) n->cart = std::move(sub.sub);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Cart_map);
int PMPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int /*periods*/[],
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

GOS_MPI_WEAK_ALIAS(Neighbor_allgather);
int PMPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return NeighborBlocks("MPI_Neighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount,
                        recvtype, comm, false);
}

GOS_MPI_WEAK_ALIAS(Neighbor_allgatherv);
int PMPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm) {
  const size_t nout = NeighborDegrees(comm).second;
  const std::vector<int> scounts(nout, sendcount), sdispls(nout, 0);
  return NeighborExchange("MPI_Neighbor_allgatherv", comm, sendbuf, scounts.data(), sdispls.data(),
                          sendtype, recvbuf, recvcounts, displs, recvtype);
}

GOS_MPI_WEAK_ALIAS(Neighbor_alltoall);
int PMPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return NeighborBlocks("MPI_Neighbor_alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount,
                        recvtype, comm, true);
}

GOS_MPI_WEAK_ALIAS(Neighbor_alltoallv);
int PMPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                            MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return NeighborExchange("MPI_Neighbor_alltoallv", comm, sendbuf, sendcounts, sdispls, sendtype,
                          recvbuf, recvcounts, rdispls, recvtype);
}

}  // extern "C"
