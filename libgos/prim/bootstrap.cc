// The bootstrap service: one thread, poll(2) over the listening socket and every member's
// connection. See gos/prim/bootstrap.h for the contract.
#include "gos/prim/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bootstrap_proto.h"
#include "gos/eventfd.h"
#include "gos/log.h"

namespace gos::prim {
namespace {

using namespace bootstrap;
using SteadyClock = std::chrono::steady_clock;

struct Conn {
  int fd = -1;
  std::string peer;  // "ip:port" of the connection, for messages.
  FrameBuffer in;
  NodeId id = kNoNode;  // Set once joined.
  Join join;
  SteadyClock::time_point last_heard;
};

class BootstrapServerImpl final : public BootstrapServer {
 public:
  explicit BootstrapServerImpl(const BootstrapOptions& o) : options_(o) {}
  ~BootstrapServerImpl() override { Stop(); }

  Status Init() {
    if (options_.group_size == 0 || options_.group_size > kMaxNodes) {
      return InvalidArgumentError("bootstrap group size must be 1.." + std::to_string(kMaxNodes));
    }
    std::string host;
    uint16_t port;
    GOS_RETURN_IF_ERROR(SplitHostPort(options_.listen, &host, &port));
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd_ < 0) return ErrnoError(errno, "socket");
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &sin.sin_addr) != 1) {
      return InvalidArgumentError("bootstrap listen address \"" + host +
                                  "\" is not an IPv4 address");
    }
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) {
      return ErrnoError(errno, "bind bootstrap service to " + options_.listen);
    }
    if (::listen(listen_fd_, 256) != 0) return ErrnoError(errno, "listen");
    socklen_t len = sizeof sin;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sin), &len);
    address_ = host + ":" + std::to_string(ntohs(sin.sin_port));
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return ErrnoError(errno, "eventfd");
    thread_ = std::thread([this] { Loop(); });
    return OkStatus();
  }

  std::string address() const override { return address_; }
  uint64_t rejected_frames() const override { return rejected_.load(); }
  uint32_t down_count() const override { return downs_.load(); }

  void Stop() override {
    if (thread_.joinable()) {
      stop_ = true;
      NotifyEventFd(wake_fd_);
      thread_.join();
    }
    for (auto& [fd, c] : conns_) ::close(fd);
    conns_.clear();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    listen_fd_ = wake_fd_ = -1;
  }

 private:
  void Loop() {
    SetThreadName("prim-bootstrap");
    while (!stop_) {
      std::vector<pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({wake_fd_, POLLIN, 0});
      for (auto& [fd, c] : conns_) fds.push_back({fd, POLLIN, 0});
      int n = ::poll(fds.data(), fds.size(), 100);
      if (n < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) Accept();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents != 0) ReadFrom(fds[i].fd);
      }
      CheckSilence();
    }
  }

  void Accept() {
    while (true) {
      sockaddr_in sin{};
      socklen_t len = sizeof sin;
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sin), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;
      char ip[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip);
      Conn& c = conns_[fd];
      c.fd = fd;
      c.peer = std::string(ip) + ":" + std::to_string(ntohs(sin.sin_port));
      c.last_heard = SteadyClock::now();
    }
  }

  void ReadFrom(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    uint8_t buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      Drop(fd, n == 0 ? "its connection to the bootstrap service closed (process exited or killed)"
                      : std::string("bootstrap connection error: ") + std::strerror(errno));
      return;
    }
    if (n < 0) return;
    c.in.Append(buf, static_cast<size_t>(n));
    c.last_heard = SteadyClock::now();
    while (true) {
      Frame f;
      StatusOr<bool> got = c.in.Next(&f);
      if (!got.ok()) {
        Reject(fd, got.status().message());
        return;
      }
      if (!*got) return;
      if (!Handle(c, f)) return;  // Connection was closed.
    }
  }

  // Returns false if the connection was closed.
  bool Handle(Conn& c, const Frame& f) {
    switch (f.type) {
      case FrameType::kJoin: {
        StatusOr<Join> j = DecodeJoin(f.payload);
        if (!j.ok()) return Reject(c.fd, j.status().message());
        if (c.id != kNoNode) return Reject(c.fd, "JOIN from a node that already joined");
        return OnJoin(c, std::move(*j));
      }
      case FrameType::kHeartbeat:
        if (!f.payload.empty()) return Reject(c.fd, "HEARTBEAT with a payload");
        return true;
      case FrameType::kUpAck: {
        StatusOr<NodeId> up = DecodeUpAck(f.payload);
        if (!up.ok()) return Reject(c.fd, up.status().message());
        if (c.id == kNoNode || !members_.count(c.id)) {
          return Reject(c.fd, "UP_ACK from a node that is not a member");
        }
        Acknowledged(*up, c.id);
        return true;
      }
      case FrameType::kLeave:
        if (c.id != kNoNode) {
          NodeId id = c.id;
          c.id = kNoNode;
          members_.erase(id);
          if (formed_) {
            reserved_.insert(id);  // It may join again, like a node that died.
            rejoining_.erase(id);
            Broadcast(Down{id, true, "left the group"});
            NoLongerAwaited(id);
          }
        }
        Close(c.fd);
        return false;
      default:
        return Reject(c.fd, "frame type " + std::to_string(static_cast<int>(f.type)) +
                                " is not accepted from a node");
    }
  }

  bool OnJoin(Conn& c, Join j) {
    if (formed_) return OnRejoin(c, std::move(j));
    if (!members_.empty()) {
      const Join& first = conns_.at(members_.begin()->second).join;
      if (j.provider != first.provider) {
        return Reject(c.fd, "provider \"" + j.provider + "\" differs from the group's \"" +
                                first.provider + "\"");
      }
      if (j.global_memory_bytes != first.global_memory_bytes) {
        return Reject(c.fd, "global memory of " + std::to_string(j.global_memory_bytes) +
                                " bytes differs from the group's " +
                                std::to_string(first.global_memory_bytes));
      }
    }
    NodeId id = j.requested_id;
    if (id != kNoNode) {
      if (id >= options_.group_size) {
        return Reject(c.fd, "node id " + std::to_string(id) + " is outside the group of " +
                                std::to_string(options_.group_size));
      }
      if (members_.count(id)) {
        return Reject(c.fd, "node id " + std::to_string(id) + " is already taken");
      }
    } else {
      id = 0;
      while (members_.count(id) || reserved_.count(id)) ++id;
      if (id >= options_.group_size) return Reject(c.fd, "no free node id");
    }
    c.id = id;
    c.join = std::move(j);
    c.join.self.id = id;
    members_[id] = c.fd;
    records_[id] = c.join.self;
    GOS_LOG(kInfo, "bootstrap") << "node " << id << " joined from " << c.peer << " (pid "
                                << c.join.self.pid << ", " << members_.size() << "/"
                                << options_.group_size << ")";
    if (members_.size() == options_.group_size) Form();
    return true;
  }

  // A JOIN once the group has formed: a node that is down comes back under its id (a
  // restarted daemon, a repaired host). Every member is told (UP) and must acknowledge
  // (UP_ACK) before the joiner gets its WELCOME, so that whatever it sends after its join
  // reaches members that know its address, and a member that forwards to it can.
  bool OnRejoin(Conn& c, Join j) {
    if (j.provider != provider_) {
      return Reject(
          c.fd, "provider \"" + j.provider + "\" differs from the group's \"" + provider_ + "\"");
    }
    if (j.global_memory_bytes != global_memory_bytes_) {
      return Reject(c.fd, "global memory of " + std::to_string(j.global_memory_bytes) +
                              " bytes differs from the group's " +
                              std::to_string(global_memory_bytes_));
    }
    NodeId id = j.requested_id;
    if (id != kNoNode) {
      if (id >= options_.group_size) {
        return Reject(c.fd, "node id " + std::to_string(id) + " is outside the group of " +
                                std::to_string(options_.group_size));
      }
      if (!reserved_.count(id) || rejoining_.count(id)) {
        return Reject(c.fd, "node " + std::to_string(id) + " of the group of " +
                                std::to_string(options_.group_size) +
                                (rejoining_.count(id) ? " is joining again already"
                                                      : " is up: only a node that is down can "
                                                        "join a formed group"));
      }
    } else {
      auto it = std::find_if(reserved_.begin(), reserved_.end(),
                             [&](NodeId r) { return !rejoining_.count(r); });
      if (it == reserved_.end()) {
        return Reject(c.fd, "the group of " + std::to_string(options_.group_size) +
                                " nodes is complete: no node is down");
      }
      id = *it;
    }
    c.id = id;
    c.join = std::move(j);
    c.join.self.id = id;
    std::set<NodeId>& awaiting = rejoining_[id];
    for (auto& [m, fd] : members_) awaiting.insert(m);
    GOS_LOG(kInfo, "bootstrap") << "node " << id << " joins again from " << c.peer << " (pid "
                                << c.join.self.pid << "); telling " << awaiting.size()
                                << " members";
    std::vector<uint8_t> frame = EncodeFrame(FrameType::kUp, EncodeUp(c.join.self));
    for (auto& [m, fd] : members_) Send(fd, frame);
    MaybeWelcomeBack(id);
    return true;
  }

  // Member `from` can reach node `id` again.
  void Acknowledged(NodeId id, NodeId from) {
    auto it = rejoining_.find(id);
    if (it == rejoining_.end()) return;
    it->second.erase(from);
    MaybeWelcomeBack(id);
  }

  void MaybeWelcomeBack(NodeId id) {
    auto it = rejoining_.find(id);
    if (it == rejoining_.end() || !it->second.empty()) return;
    rejoining_.erase(it);
    int fd = -1;
    for (auto& [cfd, conn] : conns_) {
      if (conn.id == id && !members_.count(id)) fd = cfd;
    }
    if (fd < 0) return;
    Conn& c = conns_.at(fd);
    reserved_.erase(id);
    members_[id] = fd;
    records_[id] = c.join.self;
    c.last_heard = SteadyClock::now();
    Welcome w;
    w.id = id;
    for (NodeId i = 0; i < options_.group_size; ++i) {
      PeerRecord p = records_[i];
      p.id = i;
      // A member that is down: its last host and pid, for messages; no address.
      if (!members_.count(i)) p.fabric_name.clear();
      w.peers.push_back(std::move(p));
    }
    Send(fd, EncodeFrame(FrameType::kWelcome, EncodeWelcome(w)));
    GOS_LOG(kInfo, "bootstrap") << "node " << id << " is up again (" << members_.size() << "/"
                                << options_.group_size << " members)";
  }

  // Nobody waits for the acknowledgement of a member that is gone.
  void NoLongerAwaited(NodeId id) {
    std::vector<NodeId> waiting;
    for (auto& [r, awaiting] : rejoining_) {
      if (awaiting.erase(id) > 0) waiting.push_back(r);
    }
    for (NodeId r : waiting) MaybeWelcomeBack(r);
  }

  void Form() {
    formed_ = true;
    const Join& first = conns_.at(members_.begin()->second).join;
    provider_ = first.provider;
    global_memory_bytes_ = first.global_memory_bytes;
    // Members waited for the group silently: silence counts from now on.
    for (auto& [id, fd] : members_) conns_.at(fd).last_heard = SteadyClock::now();
    Welcome w;
    for (auto& [id, fd] : members_) w.peers.push_back(conns_.at(fd).join.self);
    for (auto& [id, fd] : members_) {
      w.id = id;
      Send(fd, EncodeFrame(FrameType::kWelcome, EncodeWelcome(w)));
    }
  }

  bool Reject(int fd, const std::string& reason) {
    rejected_++;
    auto it = conns_.find(fd);
    GOS_LOG(kWarn, "bootstrap") << "rejecting " << (it != conns_.end() ? it->second.peer : "?")
                                << ": " << reason;
    Send(fd, EncodeFrame(FrameType::kReject, EncodeText(reason)));
    Drop(fd, "protocol error: " + reason);
    return false;
  }

  void Drop(int fd, const std::string& reason) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    NodeId id = it->second.id;
    Close(fd);
    if (id == kNoNode) return;
    members_.erase(id);
    if (!formed_) return;  // Before the group forms, a lost joiner just frees its slot.
    // A dead node's id is given out again only to a node that asks to join under it.
    reserved_.insert(id);
    // A joiner lost before its WELCOME: the members that were told it is up hear it is down.
    rejoining_.erase(id);
    NoLongerAwaited(id);
    downs_++;
    GOS_LOG(kWarn, "bootstrap") << "node " << id << " is down: " << reason;
    Broadcast(Down{id, false, reason});
  }

  void Close(int fd) {
    ::close(fd);
    conns_.erase(fd);
  }

  void Broadcast(const Down& d) {
    std::vector<uint8_t> frame = EncodeFrame(FrameType::kDown, EncodeDown(d));
    for (auto& [id, fd] : members_) Send(fd, frame);
  }

  void Send(int fd, const std::vector<uint8_t>& frame) {
    // Members read promptly; a member that cannot take a small frame within WriteAll's
    // bounded retry is treated like one that is gone on its next failure.
    Status s = WriteAll(fd, frame);
    if (!s.ok()) GOS_LOG(kDebug, "bootstrap") << s.ToString();
  }

  void CheckSilence() {
    if (!formed_) return;
    auto now = SteadyClock::now();
    std::vector<std::pair<int, std::string>> silent;
    for (auto& [id, fd] : members_) {
      auto quiet = now - conns_.at(fd).last_heard;
      if (quiet > options_.failure_timeout) {
        silent.emplace_back(
            fd, "no heartbeat for " +
                    std::to_string(
                        std::chrono::duration_cast<std::chrono::milliseconds>(quiet).count()) +
                    " ms (failure timeout " + std::to_string(options_.failure_timeout.count()) +
                    " ms)");
      }
    }
    for (auto& [fd, reason] : silent) Drop(fd, reason);
  }

  BootstrapOptions options_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint32_t> downs_{0};
  // Owned by the server thread.
  std::map<int, Conn> conns_;
  std::map<NodeId, int> members_;                 // Joined (and not down) node -> fd.
  std::set<NodeId> reserved_;                     // Down since the group formed.
  std::map<NodeId, PeerRecord> records_;          // Each id's latest member.
  std::map<NodeId, std::set<NodeId>> rejoining_;  // Joining again -> members yet to ack.
  std::string provider_;                          // The group's, once formed.
  uint64_t global_memory_bytes_ = 0;
  bool formed_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<BootstrapServer>> BootstrapServer::Start(const BootstrapOptions& options) {
  auto server = std::make_unique<BootstrapServerImpl>(options);
  GOS_RETURN_IF_ERROR(server->Init());
  return std::unique_ptr<BootstrapServer>(std::move(server));
}

}  // namespace gos::prim
