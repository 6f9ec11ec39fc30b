// RAII over libfabric: one RDM endpoint with its fabric, domain, address vector, completion
// queue and one registered region (global memory). Every fid is closed exactly once, in
// reverse order of opening. Provider choice lives here and nowhere else.
//
// Used by the Node (libgos/prim/node.cc) and by the raw reference benchmark (bench/).
// Not thread-safe by itself: the owner serialises calls (the Node's progress thread).
#ifndef GOS_PRIM_FABRIC_H_
#define GOS_PRIM_FABRIC_H_

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::prim {

// -FI_E* (or a positive fi_errno) -> Status, message "what: fi_strerror".
Status FabricError(ssize_t rc, const std::string& what);

// True for providers that bind to an IP address (tcp, sockets, verbs, ...), false for shm.
bool ProviderUsesIp(const std::string& provider);

struct FabricConfig {
  std::string provider;        // Exact provider name, e.g. "tcp;ofi_rxm".
  std::string source_address;  // IP to bind (IP providers); empty = provider's choice.
  size_t region_bytes = 0;     // Global memory to allocate and register.
};

class Fabric {
 public:
  static StatusOr<std::unique_ptr<Fabric>> Open(const FabricConfig& config);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  fid_ep* ep() const { return ep_; }
  fid_cq* cq() const { return cq_; }
  fid_fabric* fabric() const { return fabric_; }
  const fi_info* info() const { return info_; }
  // Wait fd of the CQ, or -1 if the provider offers none (then poll, or sleep on the bell).
  int cq_fd() const { return cq_fd_; }
  // Providers without a CQ wait fd (shm) get a doorbell: a datagram socket named after the
  // endpoint (an abstract unix address, so peers on this host and network namespace reach
  // it). A peer rings it after posting to this endpoint, so that the owner sleeps on bell_fd()
  // until there is work instead of polling its queue. -1 without a bell.
  int bell_fd() const { return bell_fd_; }
  // Empties the bell; call before reading the CQ, so that a ring after that read wakes again.
  void DrainBell();
  // Rings the bell of the peer at `addr` (from InsertPeer), if it has one; false when the
  // ring could not be delivered (no such bell: e.g. another network namespace).
  bool Ring(fi_addr_t addr);
  std::string provider_name() const;

  std::byte* region() const { return region_; }
  size_t region_bytes() const { return region_bytes_; }
  uint64_t region_key() const;
  // What a peer adds to an offset to address this region (vaddr, or 0 for offset-based MRs).
  uint64_t region_remote_base() const;
  void* region_desc() const;

  // Endpoint name, as peers insert it into their address vector.
  StatusOr<std::vector<uint8_t>> LocalName() const;
  // "127.0.0.1:41234" for IP providers, else a hex string.
  std::string PrintableName(const std::vector<uint8_t>& name) const;
  StatusOr<fi_addr_t> InsertPeer(const std::vector<uint8_t>& name);

  // fi_cq_readerr after fi_cq_read returned -FI_EAVAIL.
  Status ReadCqError(fi_cq_err_entry* entry);
  // Prepares to block on cq_fd(); false means completions may be pending: read first.
  bool TryWait();

 private:
  Fabric() = default;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_mr* mr_ = nullptr;
  int cq_fd_ = -1;
  int bell_fd_ = -1;
  std::vector<std::string> bells_;  // by fi_addr_t: each peer's bell address ("" none)
  std::byte* region_ = nullptr;
  size_t region_bytes_ = 0;
};

}  // namespace gos::prim

#endif  // GOS_PRIM_FABRIC_H_
