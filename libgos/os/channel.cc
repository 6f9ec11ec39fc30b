#include "gos/os/channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "gos/os/auth.h"
#include "gos/prim/bootstrap.h"

namespace gos::os {
namespace {

constexpr size_t kHeaderBytes = 4 + 2 + 2 + 8;
constexpr int kMaxFdsPerMessage = 64;

int PollFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() < 0) return 0;
  pollfd p{fd, events, 0};
  int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
  return rc;
}

}  // namespace

Channel::Channel(int fd, std::vector<uint8_t> key, bool server)
    : fd_(fd), key_(std::move(key)), send_dir_(server ? 1 : 0), recv_dir_(server ? 0 : 1) {
  int flags = fcntl(fd_, F_GETFL);
  fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
}

Channel::~Channel() {
  for (int f : fds_) ::close(f);
  if (fd_ >= 0) ::close(fd_);
}

void Channel::Shutdown() { ::shutdown(fd_, SHUT_RDWR); }

Status Channel::Send(Frame type, std::span<const uint8_t> payload, std::span<const int> fds,
                     std::chrono::milliseconds timeout) {
  if (payload.size() > kMaxFrameBytes) return InvalidArgumentError("frame too large to send");
  std::lock_guard<std::mutex> lock(send_mu_);
  std::vector<uint8_t> buf(kHeaderBytes);
  uint32_t len =
      static_cast<uint32_t>(kHeaderBytes - 4 + payload.size() + (key_.empty() ? 0 : kMacBytes));
  uint16_t version = kChannelVersion, t = static_cast<uint16_t>(type);
  uint64_t seq = ++send_seq_;
  std::memcpy(buf.data(), &len, 4);
  std::memcpy(buf.data() + 4, &version, 2);
  std::memcpy(buf.data() + 6, &t, 2);
  std::memcpy(buf.data() + 8, &seq, 8);
  buf.insert(buf.end(), payload.begin(), payload.end());
  if (!key_.empty()) {
    Mac mac = Hmac(key_, {std::span<const uint8_t>(&send_dir_, 1), std::span<const uint8_t>(buf)});
    buf.insert(buf.end(), mac.begin(), mac.end());
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t off = 0;
  bool fds_sent = fds.empty();
  while (off < buf.size()) {
    ssize_t n;
    if (!fds_sent) {
      if (fds.size() > kMaxFdsPerMessage) return InvalidArgumentError("too many fds in a frame");
      iovec iov{buf.data() + off, buf.size() - off};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
      n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n > 0) fds_sent = true;
    } else {
      n = ::send(fd_, buf.data() + off, buf.size() - off, MSG_NOSIGNAL);
    }
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (PollFor(fd_, POLLOUT, deadline) <= 0) {
        return DeadlineExceededError("peer does not read: send timed out");
      }
      continue;
    }
    return UnavailableError(std::string("connection lost: ") + std::strerror(errno));
  }
  return OkStatus();
}

Status Channel::ReadAvailable(std::vector<FrameIn>* out) {
  for (; !pending_.empty(); pending_.pop_front()) out->push_back(std::move(pending_.front()));
  bool closed = false;
  while (true) {
    uint8_t buf[65536];
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return UnavailableError(std::string("connection lost: ") + std::strerror(errno));
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
          int f;
          std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
          fds_.push_back(f);
        }
      }
    }
    if (n == 0) {
      closed = true;
      break;
    }
    in_.insert(in_.end(), buf, buf + n);
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  // Cut complete frames.
  size_t pos = 0;
  while (in_.size() - pos >= 4) {
    uint32_t len;
    std::memcpy(&len, in_.data() + pos, 4);
    size_t mac = key_.empty() ? 0 : kMacBytes;
    if (len < kHeaderBytes - 4 + mac || len > kMaxFrameBytes + kHeaderBytes + mac) {
      return InvalidArgumentError("bad frame length " + std::to_string(len));
    }
    if (in_.size() - pos - 4 < len) break;
    const uint8_t* f = in_.data() + pos;
    uint16_t version, type;
    uint64_t seq;
    std::memcpy(&version, f + 4, 2);
    std::memcpy(&type, f + 6, 2);
    std::memcpy(&seq, f + 8, 8);
    if (version != kChannelVersion) {
      return InvalidArgumentError("frame version " + std::to_string(version) + ", expected " +
                                  std::to_string(kChannelVersion));
    }
    size_t body = 4 + len - mac;
    if (mac) {
      Mac m =
          Hmac(key_, {std::span<const uint8_t>(&recv_dir_, 1), std::span<const uint8_t>(f, body)});
      if (!MacEqual(m, std::span<const uint8_t>(f + body, mac))) {
        return PermissionDeniedError("frame fails authentication: wrong cluster key");
      }
      if (seq != recv_seq_ + 1) {
        return PermissionDeniedError("frame out of sequence (replayed or lost)");
      }
    }
    recv_seq_ = seq;
    FrameIn in;
    in.type = static_cast<Frame>(type);
    in.payload.assign(f + kHeaderBytes, f + body);
    out->push_back(std::move(in));
    pos += 4 + len;
  }
  in_.erase(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(pos));
  if (closed) return UnavailableError("connection closed by peer");
  return OkStatus();
}

StatusOr<FrameIn> Channel::Receive(std::chrono::steady_clock::time_point deadline) {
  std::vector<FrameIn> frames;
  while (true) {
    Status s = ReadAvailable(&frames);
    if (!frames.empty()) {
      FrameIn first = std::move(frames.front());
      for (size_t i = frames.size(); i-- > 1;) pending_.push_front(std::move(frames[i]));
      return first;
    }
    GOS_RETURN_IF_ERROR(s);
    if (PollFor(fd_, POLLIN, deadline) == 0) {
      return DeadlineExceededError("no reply before the deadline");
    }
  }
}

std::vector<int> Channel::TakeFds(size_t n) {
  std::vector<int> out;
  while (n-- > 0 && !fds_.empty()) {
    out.push_back(fds_.front());
    fds_.pop_front();
  }
  return out;
}

StatusOr<PeerCreds> Channel::Creds() const {
  ucred uc{};
  socklen_t len = sizeof uc;
  if (getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0) {
    return ErrnoError(errno, "SO_PEERCRED");
  }
  return PeerCreds{uc.pid, uc.uid, uc.gid};
}

bool IsUnixAddress(const std::string& address) {
  return address.rfind("unix:", 0) == 0 || (!address.empty() && address[0] == '/');
}

StatusOr<int> ConnectAddress(const std::string& address,
                             std::chrono::steady_clock::time_point deadline) {
  if (!IsUnixAddress(address)) return prim::bootstrap::ConnectTcp(address, deadline);
  std::string path = address.rfind("unix:", 0) == 0 ? address.substr(5) : address;
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (path.size() >= sizeof sun.sun_path) return InvalidArgumentError("socket path too long");
  std::memcpy(sun.sun_path, path.c_str(), path.size() + 1);
  while (true) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoError(errno, "socket");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0) return fd;
    int e = errno;
    ::close(fd);
    if ((e != ECONNREFUSED && e != ENOENT) || std::chrono::steady_clock::now() >= deadline) {
      return ErrnoError(e, "connect to " + path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

StatusOr<int> ListenUnix(const std::string& path, mode_t mode) {
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (path.size() >= sizeof sun.sun_path) return InvalidArgumentError("socket path too long");
  std::memcpy(sun.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoError(errno, "socket");
  ::unlink(path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) != 0 ||
      ::chmod(path.c_str(), mode) != 0 || ::listen(fd, 128) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoError(e, "listen on " + path);
  }
  return fd;
}

StatusOr<int> ListenTcp(const std::string& address, std::string* bound) {
  std::string host;
  uint16_t port;
  GOS_RETURN_IF_ERROR(prim::bootstrap::SplitHostPort(address, &host, &port));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sin.sin_addr) != 1) {
    return InvalidArgumentError("\"" + host + "\" is not an IPv4 address");
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoError(errno, "socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 || ::listen(fd, 256) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoError(e, "listen on " + address);
  }
  socklen_t len = sizeof sin;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len);
  *bound = host + ":" + std::to_string(ntohs(sin.sin_port));
  return fd;
}

}  // namespace gos::os
