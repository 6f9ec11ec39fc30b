#include "messages.h"

#include "wire.h"

namespace gos::prim {
namespace {

void EncodeTree(const ControlMsg& m, wire::Writer& w) {
  w.U32(m.tree_root);
  w.U16(m.fanout);
  std::vector<uint8_t> bitmap = m.set.Encode();
  w.U16(static_cast<uint16_t>(bitmap.size()));
  w.Raw(bitmap.data(), bitmap.size());
}

bool DecodeTree(wire::Reader& r, ControlMsg* m) {
  uint16_t bitmap_len;
  if (!r.U32(&m->tree_root) || !r.U16(&m->fanout) || !r.U16(&bitmap_len)) return false;
  if (m->fanout == 0 || m->fanout > kMaxFanout || m->tree_root >= kMaxNodes) return false;
  if (bitmap_len > kMaxNodes / 8 || r.remaining() < bitmap_len) return false;
  std::vector<uint8_t> bitmap(bitmap_len);
  for (auto& b : bitmap) r.U8(&b);
  auto set = NodeSet::Decode(bitmap);
  if (!set.ok()) return false;
  m->set = std::move(*set);
  return true;
}

void EncodeReply(const ControlMsg& m, wire::Writer& w) {
  w.U8(m.result ? 1 : 0);
  w.U8(static_cast<uint8_t>(m.code));
  w.U32(m.failed);
  w.Str(m.reason.size() > kMaxReasonBytes ? m.reason.substr(0, kMaxReasonBytes) : m.reason);
}

bool DecodeReply(wire::Reader& r, ControlMsg* m) {
  uint8_t result, code;
  if (!r.U8(&result) || !r.U8(&code) || !r.U32(&m->failed)) return false;
  if (result > 1 || code > static_cast<uint8_t>(StatusCode::kDataLoss)) return false;
  m->result = result == 1;
  m->code = static_cast<StatusCode>(code);
  return r.Str(&m->reason, kMaxReasonBytes);
}

}  // namespace

const char* MsgTypeName(MsgType type) {
  switch (type) {
    case MsgType::kXferPiece:
      return "XFER_PIECE";
    case MsgType::kXferAck:
      return "XFER_ACK";
    case MsgType::kCawRequest:
      return "CAW_REQUEST";
    case MsgType::kCawQuery:
      return "CAW_QUERY";
    case MsgType::kCawQueryReply:
      return "CAW_QUERY_REPLY";
    case MsgType::kCawWrite:
      return "CAW_WRITE";
    case MsgType::kCawWriteAck:
      return "CAW_WRITE_ACK";
    case MsgType::kCawResult:
      return "CAW_RESULT";
    case MsgType::kPing:
      return "PING";
  }
  return "?";
}

void EncodeControl(const ControlMsg& m, std::vector<uint8_t>* out) {
  out->clear();
  wire::Writer w(out);
  w.U32(kMsgMagic);
  w.U8(kMsgVersion);
  w.U8(static_cast<uint8_t>(m.type));
  w.U16(0);
  w.U32(m.src);
  w.U32(0);  // Payload length, patched below.
  w.U32(m.origin);
  w.U32(m.seq);
  switch (m.type) {
    case MsgType::kXferPiece:
      EncodeTree(m, w);
      w.U64(m.offset);
      w.U64(m.total_len);
      w.U64(m.piece_off);
      w.U64(m.piece_len);
      w.U32(m.event);
      w.U8(m.is_inline ? 1 : 0);
      if (m.is_inline) w.Bytes(m.inline_data);
      break;
    case MsgType::kCawRequest:
    case MsgType::kCawQuery:
    case MsgType::kCawWrite:
      EncodeTree(m, w);
      w.U64(m.var);
      w.U8(static_cast<uint8_t>(m.op));
      w.I64(m.value);
      w.U64(m.write_var);
      w.I64(m.write_value);
      break;
    case MsgType::kXferAck:
    case MsgType::kCawQueryReply:
    case MsgType::kCawWriteAck:
    case MsgType::kCawResult:
      EncodeReply(m, w);
      break;
    case MsgType::kPing:
      break;
  }
  uint32_t payload = static_cast<uint32_t>(out->size() - kMsgHeaderBytes);
  std::memcpy(out->data() + 12, &payload, sizeof payload);
}

StatusOr<ControlMsg> DecodeControl(std::span<const uint8_t> bytes) {
  auto bad = [&](const char* what) {
    return InvalidArgumentError(std::string("malformed control message (") +
                                std::to_string(bytes.size()) + " bytes): " + what);
  };
  wire::Reader r(bytes);
  uint32_t magic, payload;
  uint8_t version, type;
  uint16_t reserved;
  ControlMsg m;
  if (!r.U32(&magic) || !r.U8(&version) || !r.U8(&type) || !r.U16(&reserved) || !r.U32(&m.src) ||
      !r.U32(&payload)) {
    return bad("short header");
  }
  if (magic != kMsgMagic) return bad("bad magic");
  if (version != kMsgVersion) {
    return bad(("unsupported version " + std::to_string(version)).c_str());
  }
  if (type == 0 || type > kMaxMsgType) return bad("unknown type");
  if (payload != r.remaining()) return bad("payload length does not match");
  m.type = static_cast<MsgType>(type);
  if (!r.U32(&m.origin) || !r.U32(&m.seq)) return bad("short operation id");
  switch (m.type) {
    case MsgType::kXferPiece: {
      uint8_t is_inline;
      if (!DecodeTree(r, &m) || !r.U64(&m.offset) || !r.U64(&m.total_len) || !r.U64(&m.piece_off) ||
          !r.U64(&m.piece_len) || !r.U32(&m.event) || !r.U8(&is_inline) || is_inline > 1) {
        return bad("bad XFER_PIECE fields");
      }
      m.is_inline = is_inline == 1;
      if (m.is_inline &&
          (!r.Bytes(&m.inline_data, kMaxInlineBytes) || m.inline_data.size() != m.piece_len)) {
        return bad("bad inline data");
      }
      if (m.piece_len > m.total_len || m.piece_off > m.total_len - m.piece_len) {
        return bad("piece outside the transfer");
      }
      break;
    }
    case MsgType::kCawRequest:
    case MsgType::kCawQuery:
    case MsgType::kCawWrite: {
      uint8_t op;
      if (!DecodeTree(r, &m) || !r.U64(&m.var) || !r.U8(&op) || !r.I64(&m.value) ||
          !r.U64(&m.write_var) || !r.I64(&m.write_value) ||
          op > static_cast<uint8_t>(CompareOp::kGe)) {
        return bad("bad COMPARE-AND-WRITE fields");
      }
      m.op = static_cast<CompareOp>(op);
      break;
    }
    case MsgType::kXferAck:
    case MsgType::kCawQueryReply:
    case MsgType::kCawWriteAck:
    case MsgType::kCawResult:
      if (!DecodeReply(r, &m)) return bad("bad reply fields");
      break;
    case MsgType::kPing:
      break;
  }
  if (r.remaining() != 0) return bad("trailing bytes");
  return m;
}

}  // namespace gos::prim
