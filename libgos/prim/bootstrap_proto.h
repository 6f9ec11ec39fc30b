// Bootstrap wire protocol (docs/specs/bootstrap.md): frames over TCP.
//   u32 length (of what follows) | u16 version | u16 type | payload
// Frames longer than kMaxFrameBytes, of another version, of an unknown type or with bad
// payloads are rejected; the connection that sent them is closed.
#ifndef GOS_PRIM_BOOTSTRAP_PROTO_H_
#define GOS_PRIM_BOOTSTRAP_PROTO_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gos/prim/bootstrap.h"
#include "gos/prim/node_set.h"
#include "gos/status.h"

namespace gos::prim::bootstrap {

inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kMaxFrameBytes = 1u << 20;
inline constexpr size_t kMaxNameBytes = 512;
inline constexpr size_t kMaxTextBytes = 1024;

enum class FrameType : uint16_t {
  kJoin = 1,
  kWelcome = 2,
  kHeartbeat = 3,
  kDown = 4,
  kLeave = 5,
  kReject = 6,
  kUp = 7,     // service -> members: a node that was down joined again (its new record)
  kUpAck = 8,  // member -> service: it can reach that node now
};

struct Frame {
  FrameType type;
  std::vector<uint8_t> payload;
};

struct PeerRecord {
  NodeId id = kNoNode;
  int32_t pid = 0;
  std::string host;
  std::vector<uint8_t> fabric_name;
  uint64_t mr_key = 0;
  uint64_t mr_base = 0;
};

struct Join {
  NodeId requested_id = kNoNode;
  std::string provider;
  uint64_t global_memory_bytes = 0;
  PeerRecord self;  // id ignored.
};

struct Welcome {
  NodeId id = kNoNode;
  std::vector<PeerRecord> peers;  // Indexed by node id.
};

struct Down {
  NodeId node = kNoNode;
  bool left = false;  // Clean leave rather than failure.
  std::string reason;
};

std::vector<uint8_t> EncodeFrame(FrameType type, std::span<const uint8_t> payload);
std::vector<uint8_t> EncodeJoin(const Join& join);
std::vector<uint8_t> EncodeWelcome(const Welcome& welcome);
std::vector<uint8_t> EncodeDown(const Down& down);
std::vector<uint8_t> EncodeText(const std::string& text);
std::vector<uint8_t> EncodeUp(const PeerRecord& peer);
std::vector<uint8_t> EncodeUpAck(NodeId node);

StatusOr<Join> DecodeJoin(std::span<const uint8_t> payload);
StatusOr<Welcome> DecodeWelcome(std::span<const uint8_t> payload);
StatusOr<Down> DecodeDown(std::span<const uint8_t> payload);
StatusOr<std::string> DecodeText(std::span<const uint8_t> payload);
StatusOr<PeerRecord> DecodeUp(std::span<const uint8_t> payload);
StatusOr<NodeId> DecodeUpAck(std::span<const uint8_t> payload);

// Accumulates bytes read from a stream and cuts them into frames.
class FrameBuffer {
 public:
  void Append(const uint8_t* data, size_t n) { buf_.insert(buf_.end(), data, data + n); }
  // Next complete frame, nullopt-like empty result if none yet (ok + false), or an error
  // for an oversized or malformed frame.
  StatusOr<bool> Next(Frame* frame);

 private:
  std::vector<uint8_t> buf_;
};

// Blocking helpers over a connected socket (used where latency does not matter).
Status WriteAll(int fd, std::span<const uint8_t> bytes);
// Local IP of a connected socket.
std::string LocalIp(int fd);

}  // namespace gos::prim::bootstrap

#endif  // GOS_PRIM_BOOTSTRAP_PROTO_H_
