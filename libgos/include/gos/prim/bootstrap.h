// The bootstrap service: how nodes of a group find each other (address exchange) and learn
// when one of them dies. It is not a data path: the three primitives never go through it.
//
// Protocol (docs/specs/bootstrap.md): TCP, length-prefixed frames with a version field.
// A node sends JOIN (its fabric address, memory key, pid, host); once `group_size` nodes have
// joined, every node gets WELCOME with its id and the whole table. Nodes send HEARTBEATs; a
// node whose connection closes, or that is silent for failure_timeout, is declared down and
// every other node gets DOWN naming it and the cause. A node that is down may join again
// under its id: every member gets UP with its new address and acknowledges it before the
// joiner gets WELCOME.
#ifndef GOS_PRIM_BOOTSTRAP_H_
#define GOS_PRIM_BOOTSTRAP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "gos/status.h"

namespace gos::prim {

struct BootstrapOptions {
  // Address to listen on, "host:port"; port 0 picks a free one. Default: 127.0.0.1:0.
  std::string listen = "127.0.0.1:0";
  // Members to wait for before the group forms. Required (1 .. kMaxNodes).
  uint32_t group_size = 0;
  // A joined node silent this long is declared down. Default: 2 s.
  std::chrono::milliseconds failure_timeout{2000};
};

class BootstrapServer {
 public:
  // Binds and starts serving on a background thread.
  static StatusOr<std::unique_ptr<BootstrapServer>> Start(const BootstrapOptions& options);
  virtual ~BootstrapServer() = default;
  // "host:port" that nodes pass as NodeOptions::bootstrap.
  virtual std::string address() const = 0;
  // Frames rejected as malformed or oversized so far.
  virtual uint64_t rejected_frames() const = 0;
  // Nodes declared down so far.
  virtual uint32_t down_count() const = 0;
  // Stops serving and closes every connection.
  virtual void Stop() = 0;
};

}  // namespace gos::prim

// TCP helpers of the bootstrap service that other components use too (the os channel's
// TCP transport): blocking, for connection set-up only.
namespace gos::prim::bootstrap {

// "host:port" -> connected TCP socket, retrying refused connections until the deadline, or
// until *cancel is true (CANCELLED).
StatusOr<int> ConnectTcp(const std::string& address, std::chrono::steady_clock::time_point deadline,
                         const std::atomic<bool>* cancel = nullptr);
// Splits "host:port"; fails if malformed.
Status SplitHostPort(const std::string& address, std::string* host, uint16_t* port);

}  // namespace gos::prim::bootstrap

#endif  // GOS_PRIM_BOOTSTRAP_H_
