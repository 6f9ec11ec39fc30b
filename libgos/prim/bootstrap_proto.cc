#include "bootstrap_proto.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "wire.h"

namespace gos::prim::bootstrap {
namespace {

void EncodePeer(const PeerRecord& p, wire::Writer& w) {
  w.U32(p.id);
  w.I32(p.pid);
  w.Str(p.host);
  w.Bytes(p.fabric_name);
  w.U64(p.mr_key);
  w.U64(p.mr_base);
}

bool DecodePeer(wire::Reader& r, PeerRecord* p) {
  std::span<const uint8_t> name;
  if (!r.U32(&p->id) || !r.I32(&p->pid) || !r.Str(&p->host, kMaxTextBytes) ||
      !r.Bytes(&name, kMaxNameBytes) || !r.U64(&p->mr_key) || !r.U64(&p->mr_base)) {
    return false;
  }
  p->fabric_name.assign(name.begin(), name.end());
  return true;
}

Status Malformed(const char* what) {
  return InvalidArgumentError(std::string("malformed bootstrap ") + what + " frame");
}

}  // namespace

std::vector<uint8_t> EncodeFrame(FrameType type, std::span<const uint8_t> payload) {
  std::vector<uint8_t> out;
  wire::Writer w(&out);
  w.U32(static_cast<uint32_t>(payload.size() + 4));
  w.U16(kVersion);
  w.U16(static_cast<uint16_t>(type));
  w.Raw(payload.data(), payload.size());
  return out;
}

std::vector<uint8_t> EncodeJoin(const Join& join) {
  std::vector<uint8_t> out;
  wire::Writer w(&out);
  w.U32(join.requested_id);
  w.Str(join.provider);
  w.U64(join.global_memory_bytes);
  EncodePeer(join.self, w);
  return out;
}

StatusOr<Join> DecodeJoin(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  Join j;
  if (!r.U32(&j.requested_id) || !r.Str(&j.provider, kMaxTextBytes) ||
      !r.U64(&j.global_memory_bytes) || !DecodePeer(r, &j.self) || r.remaining() != 0) {
    return Malformed("JOIN");
  }
  return j;
}

std::vector<uint8_t> EncodeWelcome(const Welcome& welcome) {
  std::vector<uint8_t> out;
  wire::Writer w(&out);
  w.U32(welcome.id);
  w.U32(static_cast<uint32_t>(welcome.peers.size()));
  for (const PeerRecord& p : welcome.peers) EncodePeer(p, w);
  return out;
}

StatusOr<Welcome> DecodeWelcome(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  Welcome w;
  uint32_t n;
  if (!r.U32(&w.id) || !r.U32(&n) || n == 0 || n > kMaxNodes || w.id >= n) {
    return Malformed("WELCOME");
  }
  w.peers.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (!DecodePeer(r, &w.peers[i]) || w.peers[i].id != i) return Malformed("WELCOME");
  }
  if (r.remaining() != 0) return Malformed("WELCOME");
  return w;
}

std::vector<uint8_t> EncodeDown(const Down& down) {
  std::vector<uint8_t> out;
  wire::Writer w(&out);
  w.U32(down.node);
  w.U8(down.left ? 1 : 0);
  w.Str(down.reason);
  return out;
}

StatusOr<Down> DecodeDown(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  Down d;
  uint8_t left;
  if (!r.U32(&d.node) || !r.U8(&left) || left > 1 || !r.Str(&d.reason, kMaxTextBytes) ||
      r.remaining() != 0 || d.node >= kMaxNodes) {
    return Malformed("DOWN");
  }
  d.left = left == 1;
  return d;
}

std::vector<uint8_t> EncodeUp(const PeerRecord& peer) {
  std::vector<uint8_t> out;
  wire::Writer w(&out);
  EncodePeer(peer, w);
  return out;
}

StatusOr<PeerRecord> DecodeUp(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  PeerRecord p;
  if (!DecodePeer(r, &p) || r.remaining() != 0 || p.id >= kMaxNodes || p.fabric_name.empty()) {
    return Malformed("UP");
  }
  return p;
}

std::vector<uint8_t> EncodeUpAck(NodeId node) {
  std::vector<uint8_t> out;
  wire::Writer w(&out);
  w.U32(node);
  return out;
}

StatusOr<NodeId> DecodeUpAck(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  NodeId id;
  if (!r.U32(&id) || r.remaining() != 0 || id >= kMaxNodes) return Malformed("UP_ACK");
  return id;
}

std::vector<uint8_t> EncodeText(const std::string& text) {
  std::vector<uint8_t> out;
  wire::Writer w(&out);
  w.Str(text.substr(0, kMaxTextBytes));
  return out;
}

StatusOr<std::string> DecodeText(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  std::string s;
  if (!r.Str(&s, kMaxTextBytes) || r.remaining() != 0) return Malformed("text");
  return s;
}

StatusOr<bool> FrameBuffer::Next(Frame* frame) {
  if (buf_.size() < 4) return false;
  uint32_t len;
  std::memcpy(&len, buf_.data(), 4);
  if (len < 4 || len > kMaxFrameBytes) {
    return InvalidArgumentError("bootstrap frame of " + std::to_string(len) +
                                " bytes is outside [4, " + std::to_string(kMaxFrameBytes) + "]");
  }
  if (buf_.size() < 4 + size_t{len}) return false;
  uint16_t version, type;
  std::memcpy(&version, buf_.data() + 4, 2);
  std::memcpy(&type, buf_.data() + 6, 2);
  if (version != kVersion) {
    return InvalidArgumentError("bootstrap frame version " + std::to_string(version) +
                                " (this build speaks " + std::to_string(kVersion) + ")");
  }
  if (type < 1 || type > static_cast<uint16_t>(FrameType::kUpAck)) {
    return InvalidArgumentError("unknown bootstrap frame type " + std::to_string(type));
  }
  frame->type = static_cast<FrameType>(type);
  frame->payload.assign(buf_.begin() + 8, buf_.begin() + 4 + len);
  buf_.erase(buf_.begin(), buf_.begin() + 4 + len);
  return true;
}

Status WriteAll(int fd, std::span<const uint8_t> bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      return ErrnoError(errno, "write to bootstrap connection");
    }
    off += static_cast<size_t>(n);
  }
  return OkStatus();
}

Status SplitHostPort(const std::string& address, std::string* host, uint16_t* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgumentError("address \"" + address + "\" is not host:port");
  }
  *host = address.substr(0, colon);
  char* end = nullptr;
  long p = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p < 0 || p > 65535) {
    return InvalidArgumentError("bad port in \"" + address + "\"");
  }
  *port = static_cast<uint16_t>(p);
  return OkStatus();
}

StatusOr<int> ConnectTcp(const std::string& address, std::chrono::steady_clock::time_point deadline,
                         const std::atomic<bool>* cancel) {
  std::string host;
  uint16_t port;
  GOS_RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    return InvalidArgumentError("cannot resolve \"" + host + "\": " + gai_strerror(rc));
  }
  sockaddr_in sin;
  std::memcpy(&sin, res->ai_addr, sizeof sin);
  freeaddrinfo(res);
  int last_errno = 0;
  do {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoError(errno, "socket");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    last_errno = errno;
    ::close(fd);
    if (last_errno != ECONNREFUSED && last_errno != ENETUNREACH && last_errno != EHOSTUNREACH) {
      break;
    }
    if (cancel != nullptr && cancel->load()) {
      return CancelledError("connecting to bootstrap service " + address + ": cancelled");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  return ErrnoError(last_errno, "connect to bootstrap service " + address);
}

std::string LocalIp(int fd) {
  sockaddr_in sin{};
  socklen_t len = sizeof sin;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) return "";
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip);
  return ip;
}

}  // namespace gos::prim::bootstrap
