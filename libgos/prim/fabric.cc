#include "fabric.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <rdma/fi_rma.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gos/prim/prim.h"

namespace gos::prim {

Status FabricError(ssize_t rc, const std::string& what) {
  int err = static_cast<int>(rc < 0 ? -rc : rc);
  std::string m = what + ": " + fi_strerror(err) + " (-" + std::to_string(err) + ")";
  switch (err) {
    case FI_EAGAIN:
      return UnavailableError(m);
    case FI_ENODATA:
      return NotFoundError(m);
    case FI_ETIMEDOUT:
      return DeadlineExceededError(m);
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_EHOSTUNREACH:
    case FI_ENOTCONN:
    case FI_EIO:
      return UnavailableError(m);
    case FI_ETRUNC:
    case FI_EMSGSIZE:
      return OutOfRangeError(m);
    case FI_EINVAL:
      return InvalidArgumentError(m);
    case FI_ENOMEM:
      return ResourceExhaustedError(m);
    case FI_ECANCELED:
      return CancelledError(m);
    default:
      return InternalError(m);
  }
}

namespace {

// The abstract unix address of the bell of the endpoint with this name: "\0gos-bell/" and
// a 64-bit FNV-1a hash of the name (endpoint names are unique on a host).
std::string BellAddress(const std::vector<uint8_t>& name) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : name) h = (h ^ b) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string(1, '\0') + "gos-bell/" + hex;
}

sockaddr_un UnixAddress(const std::string& path, socklen_t* len) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  return sa;
}

}  // namespace

StatusOr<std::unique_ptr<Fabric>> Fabric::Open(const FabricConfig& config) {
  if (config.provider.rfind("shm", 0) == 0) SweepDeadShmRegions("/dev/shm");
  std::unique_ptr<Fabric> f(new Fabric());
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) return ResourceExhaustedError("fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  // Control messages must reach a peer after the RMA writes posted before them: that is
  // how a receiver knows a piece is complete (all-or-none visibility).
  hints->tx_attr->msg_order = FI_ORDER_SAW | FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAW | FI_ORDER_SAS;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(config.provider.c_str());
  if (!ProviderUsesIp(config.provider)) hints->addr_format = FI_ADDR_STR;

  const char* node = config.source_address.empty() ? nullptr : config.source_address.c_str();
  uint64_t flags = node != nullptr ? FI_SOURCE : 0;
  int rc =
      fi_getinfo(FI_VERSION(1, 17), node, node != nullptr ? "0" : nullptr, flags, hints, &f->info_);
  fi_freeinfo(hints);
  if (rc != 0) {
    return FabricError(rc, "no libfabric provider \"" + config.provider +
                               "\" with RDM endpoints, RMA writes and send-after-write "
                               "ordering" +
                               (node ? std::string(" on ") + node : std::string()) +
                               " (see fi_info -l; set GOS_FABRIC_PROVIDER)");
  }
  if ((rc = fi_fabric(f->info_->fabric_attr, &f->fabric_, nullptr)) != 0) {
    return FabricError(rc, "fi_fabric");
  }
  if ((rc = fi_domain(f->fabric_, f->info_, &f->domain_, nullptr)) != 0) {
    return FabricError(rc, "fi_domain");
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if ((rc = fi_av_open(f->domain_, &av_attr, &f->av_, nullptr)) != 0) {
    return FabricError(rc, "fi_av_open");
  }
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_MSG;
  cq_attr.size = 4096;
  cq_attr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(f->domain_, &cq_attr, &f->cq_, nullptr) != 0) {
    // Providers without wait objects: the owner polls.
    cq_attr.wait_obj = FI_WAIT_NONE;
    if ((rc = fi_cq_open(f->domain_, &cq_attr, &f->cq_, nullptr)) != 0) {
      return FabricError(rc, "fi_cq_open");
    }
  } else if (fi_control(&f->cq_->fid, FI_GETWAIT, &f->cq_fd_) != 0) {
    f->cq_fd_ = -1;
  }
  if ((rc = fi_endpoint(f->domain_, f->info_, &f->ep_, nullptr)) != 0) {
    return FabricError(rc, "fi_endpoint");
  }
  if ((rc = fi_ep_bind(f->ep_, &f->av_->fid, 0)) != 0) return FabricError(rc, "bind av");
  if ((rc = fi_ep_bind(f->ep_, &f->cq_->fid, FI_TRANSMIT | FI_RECV)) != 0) {
    return FabricError(rc, "bind cq");
  }
  if ((rc = fi_enable(f->ep_)) != 0) return FabricError(rc, "fi_enable");
  if (f->cq_fd_ < 0) {
    GOS_ASSIGN_OR_RETURN(std::vector<uint8_t> name, f->LocalName());
    f->bell_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (f->bell_fd_ < 0) return ErrnoError(errno, "doorbell socket");
    socklen_t len;
    sockaddr_un sa = UnixAddress(BellAddress(name), &len);
    if (::bind(f->bell_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
      return ErrnoError(errno, "bind of the doorbell socket");
    }
  }

  f->region_bytes_ = config.region_bytes;
  if (f->region_bytes_ > 0) {
    void* p =
        mmap(nullptr, f->region_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return ErrnoError(errno, "mmap of global memory");
    f->region_ = static_cast<std::byte*>(p);
    rc = fi_mr_reg(f->domain_, f->region_, f->region_bytes_,
                   FI_REMOTE_WRITE | FI_REMOTE_READ | FI_WRITE | FI_SEND | FI_RECV, 0, 0, 0,
                   &f->mr_, nullptr);
    if (rc != 0) return FabricError(rc, "fi_mr_reg of global memory");
  }
  return f;
}

Fabric::~Fabric() {
  if (bell_fd_ >= 0) ::close(bell_fd_);
  if (ep_ != nullptr) fi_close(&ep_->fid);
  if (mr_ != nullptr) fi_close(&mr_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (av_ != nullptr) fi_close(&av_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (info_ != nullptr) fi_freeinfo(info_);
  if (region_ != nullptr) munmap(region_, region_bytes_);
}

std::string Fabric::provider_name() const { return info_->fabric_attr->prov_name; }

uint64_t Fabric::region_key() const { return mr_ != nullptr ? fi_mr_key(mr_) : 0; }

uint64_t Fabric::region_remote_base() const {
  bool virt = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0 ||
              info_->domain_attr->mr_mode == FI_MR_BASIC;
  return virt ? reinterpret_cast<uint64_t>(region_) : 0;
}

void* Fabric::region_desc() const { return mr_ != nullptr ? fi_mr_desc(mr_) : nullptr; }

StatusOr<std::vector<uint8_t>> Fabric::LocalName() const {
  std::vector<uint8_t> name(256);
  size_t len = name.size();
  int rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(&ep_->fid, name.data(), &len);
  }
  if (rc != 0) return FabricError(rc, "fi_getname");
  name.resize(len);
  return name;
}

std::string Fabric::PrintableName(const std::vector<uint8_t>& name) const {
  if (info_->addr_format == FI_SOCKADDR_IN && name.size() >= sizeof(sockaddr_in)) {
    sockaddr_in sin;
    std::memcpy(&sin, name.data(), sizeof sin);
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(sin.sin_port));
  }
  char buf[256];
  size_t len = sizeof buf;
  fi_av_straddr(av_, name.data(), buf, &len);
  return buf;
}

StatusOr<fi_addr_t> Fabric::InsertPeer(const std::vector<uint8_t>& name) {
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  int rc = fi_av_insert(av_, name.data(), 1, &addr, 0, nullptr);
  if (rc != 1) return FabricError(rc < 0 ? rc : -FI_EINVAL, "fi_av_insert");
  if (bell_fd_ >= 0) {
    if (bells_.size() <= addr) bells_.resize(addr + 1);
    bells_[addr] = BellAddress(name);
  }
  return addr;
}

Status Fabric::ReadCqError(fi_cq_err_entry* entry) {
  *entry = fi_cq_err_entry{};
  ssize_t rc = fi_cq_readerr(cq_, entry, 0);
  if (rc < 0) return FabricError(rc, "fi_cq_readerr");
  char buf[256];
  const char* detail = fi_cq_strerror(cq_, entry->prov_errno, entry->err_data, buf, sizeof buf);
  return FabricError(entry->err, detail != nullptr ? detail : "completion error");
}

void Fabric::DrainBell() {
  if (bell_fd_ < 0) return;
  char buf[64];
  while (::recv(bell_fd_, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

bool Fabric::Ring(fi_addr_t addr) {
  if (bell_fd_ < 0 || addr >= bells_.size() || bells_[addr].empty()) return false;
  socklen_t len;
  sockaddr_un sa = UnixAddress(bells_[addr], &len);
  const char one = 1;
  ssize_t n = ::sendto(bell_fd_, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                       reinterpret_cast<sockaddr*>(&sa), len);
  // A full bell has rung already.
  return n == 1 || errno == EAGAIN || errno == EWOULDBLOCK;
}

bool Fabric::TryWait() {
  if (cq_fd_ < 0) return false;
  fid* fids[1] = {&cq_->fid};
  return fi_trywait(fabric_, fids, 1) == FI_SUCCESS;
}

}  // namespace gos::prim
