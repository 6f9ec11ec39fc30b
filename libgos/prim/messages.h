// Control messages of the primitives, sent as libfabric messages between nodes of a group.
// Spec: docs/specs/prim-wire.md. Header: magic "GOSP", version, type, source node, payload
// length; then per-type fields. Decode() checks structure (lengths, ranges of the wire
// format); the node checks meaning (offsets inside global memory, ids inside the group).
#ifndef GOS_PRIM_MESSAGES_H_
#define GOS_PRIM_MESSAGES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gos/prim/node_set.h"
#include "gos/prim/prim.h"
#include "gos/status.h"

namespace gos::prim {

enum class MsgType : uint8_t {
  kXferPiece = 1,      // A piece of an XFER-AND-SIGNAL (data inline, or already RMA-written).
  kXferAck = 2,        // Subtree has all of the transfer (or the error that stopped it).
  kCawRequest = 3,     // Initiator -> sequencer: please run this COMPARE-AND-WRITE.
  kCawQuery = 4,       // Down the tree: evaluate the comparison.
  kCawQueryReply = 5,  // Up the tree: AND of the subtree.
  kCawWrite = 6,       // Down the tree: apply the write.
  kCawWriteAck = 7,    // Up the tree: subtree applied it.
  kCawResult = 8,      // Sequencer -> initiator: the outcome.
  kPing = 9,           // Nothing: opens the connection to a peer early (NodeImpl::Init).
};
inline constexpr uint8_t kMaxMsgType = 9;

inline constexpr uint32_t kMsgMagic = 0x50534f47;  // "GOSP" little-endian.
inline constexpr uint8_t kMsgVersion = 1;
inline constexpr size_t kMsgHeaderBytes = 16;
// Receive buffers are this large; a longer message is truncated by the provider and dropped.
inline constexpr size_t kMaxControlBytes = 40u << 10;
inline constexpr size_t kMaxInlineBytes = 32u << 10;
inline constexpr size_t kMaxReasonBytes = 512;
inline constexpr uint16_t kMaxFanout = 64;

struct ControlMsg {
  MsgType type = MsgType::kXferPiece;
  NodeId src = kNoNode;
  // The operation: node that started it and its sequence number there.
  NodeId origin = kNoNode;
  uint32_t seq = 0;
  // Trees (kXferPiece, kCawQuery, kCawWrite): root, fan-out and member set.
  NodeId tree_root = kNoNode;
  uint16_t fanout = 0;
  NodeSet set;
  // kXferPiece.
  uint64_t offset = 0;
  uint64_t total_len = 0;
  uint64_t piece_off = 0;  // Relative to offset.
  uint64_t piece_len = 0;
  EventId event = kNoEvent;
  bool is_inline = false;
  std::span<const uint8_t> inline_data;  // Views the buffer it was decoded from.
  // COMPARE-AND-WRITE.
  uint64_t var = 0;
  CompareOp op = CompareOp::kEq;
  int64_t value = 0;
  uint64_t write_var = Node::kNoWrite;
  int64_t write_value = 0;
  // Replies (kXferAck, kCawQueryReply, kCawWriteAck, kCawResult).
  bool result = false;
  StatusCode code = StatusCode::kOk;
  NodeId failed = kNoNode;
  std::string reason;

  Status ReplyStatus() const { return code == StatusCode::kOk ? OkStatus() : Status(code, reason); }
};

void EncodeControl(const ControlMsg& msg, std::vector<uint8_t>* out);
StatusOr<ControlMsg> DecodeControl(std::span<const uint8_t> bytes);
const char* MsgTypeName(MsgType type);

}  // namespace gos::prim

#endif  // GOS_PRIM_MESSAGES_H_
