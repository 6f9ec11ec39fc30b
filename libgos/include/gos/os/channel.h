// Channel: framed messages over a connected stream socket (unix or TCP), optionally
// authenticated with the cluster key (docs/specs/os-protocol.md).
//
//   u32 length (of what follows) | u16 version | u16 type | u64 seq | payload | [HMAC]
//
// With a key, every frame carries HMAC-SHA256(key, direction | header | payload) and
// sequence numbers must run 1, 2, 3, ... per direction, so frames cannot be forged, replayed
// or reflected. On unix sockets, file descriptors can travel with a frame (SCM_RIGHTS) and the
// peer's credentials are known (SO_PEERCRED).
//
// Thread-safety: Send may be called from several threads; reading from one thread only.
#ifndef GOS_OS_CHANNEL_H_
#define GOS_OS_CHANNEL_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gos/os/messages.h"
#include "gos/status.h"

namespace gos::os {

inline constexpr uint16_t kChannelVersion = 1;
inline constexpr size_t kMaxFrameBytes = 4u << 20;

struct FrameIn {
  Frame type = Frame::kError;
  std::vector<uint8_t> payload;
};

struct PeerCreds {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

class Channel {
 public:
  // Takes ownership of fd (made non-blocking). key empty = unauthenticated. The two ends
  // must pass opposite values of `server`.
  Channel(int fd, std::vector<uint8_t> key, bool server);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int fd() const { return fd_; }
  // Sends one frame, waiting for socket space up to the timeout; fds go along (unix only).
  Status Send(Frame type, std::span<const uint8_t> payload, std::span<const int> fds = {},
              std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Reads what is available without blocking and appends complete frames. Fails with
  // kUnavailable when the peer closed, or another error for a bad frame (then close it).
  Status ReadAvailable(std::vector<FrameIn>* out);
  // Waits for the next frame until the deadline.
  StatusOr<FrameIn> Receive(std::chrono::steady_clock::time_point deadline);
  // File descriptors received so far, oldest first; the caller owns what it takes.
  std::vector<int> TakeFds(size_t n);
  StatusOr<PeerCreds> Creds() const;
  // Shuts the socket down for both directions (wakes a reader in another thread).
  void Shutdown();

 private:
  int fd_;
  std::vector<uint8_t> key_;
  uint8_t send_dir_, recv_dir_;
  std::mutex send_mu_;
  uint64_t send_seq_ = 0;
  uint64_t recv_seq_ = 0;
  std::vector<uint8_t> in_;
  std::deque<int> fds_;
  std::deque<FrameIn> pending_;  // Frames read by Receive beyond the one it returned.
};

// "unix:/path", "/path" (unix socket) or "host:port" (TCP). Retries refused connections until
// the deadline.
StatusOr<int> ConnectAddress(const std::string& address,
                             std::chrono::steady_clock::time_point deadline);
bool IsUnixAddress(const std::string& address);
// Listens on a unix socket (replacing a stale socket file) with the given file mode.
StatusOr<int> ListenUnix(const std::string& path, mode_t mode);
// Listens on TCP "host:port" (port 0 = any); *bound gets the actual "host:port".
StatusOr<int> ListenTcp(const std::string& address, std::string* bound);

}  // namespace gos::os

#endif  // GOS_OS_CHANNEL_H_
