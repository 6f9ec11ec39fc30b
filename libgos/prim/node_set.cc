#include "gos/prim/node_set.h"

#include <bit>

namespace gos::prim {

NodeSet::NodeSet(std::initializer_list<NodeId> ids) {
  for (NodeId id : ids) Add(id);
}

NodeSet NodeSet::All(uint32_t group_size) { return Range(0, group_size); }

NodeSet NodeSet::Range(NodeId first, NodeId last_exclusive) {
  NodeSet s;
  for (NodeId id = first; id < last_exclusive; ++id) s.Add(id);
  return s;
}

void NodeSet::Add(NodeId id) {
  if (id >= kMaxNodes) return;
  size_t w = id / 64;
  if (words_.size() <= w) words_.resize(w + 1, 0);
  uint64_t bit = uint64_t{1} << (id % 64);
  if ((words_[w] & bit) == 0) {
    words_[w] |= bit;
    ++count_;
  }
}

void NodeSet::Remove(NodeId id) {
  size_t w = id / 64;
  if (w >= words_.size()) return;
  uint64_t bit = uint64_t{1} << (id % 64);
  if ((words_[w] & bit) != 0) {
    words_[w] &= ~bit;
    --count_;
  }
}

bool NodeSet::Contains(NodeId id) const {
  size_t w = id / 64;
  return w < words_.size() && (words_[w] & (uint64_t{1} << (id % 64))) != 0;
}

uint32_t NodeSet::Bound() const {
  for (size_t w = words_.size(); w-- > 0;) {
    if (words_[w] != 0) return static_cast<uint32_t>(w * 64 + 64 - std::countl_zero(words_[w]));
  }
  return 0;
}

std::vector<NodeId> NodeSet::ToVector() const {
  std::vector<NodeId> out;
  out.reserve(count_);
  for (size_t w = 0; w < words_.size(); ++w) {
    uint64_t bits = words_[w];
    while (bits != 0) {
      int b = std::countr_zero(bits);
      out.push_back(static_cast<NodeId>(w * 64 + b));
      bits &= bits - 1;
    }
  }
  return out;
}

std::string NodeSet::ToString() const {
  std::string s = "{";
  std::vector<NodeId> ids = ToVector();
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (s.size() > 1) s += ',';
    s += std::to_string(ids[i]);
    if (j > i) s += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return s + "}";
}

std::vector<uint8_t> NodeSet::Encode() const {
  std::vector<uint8_t> out((Bound() + 7) / 8, 0);
  for (NodeId id : ToVector()) out[id / 8] |= static_cast<uint8_t>(1u << (id % 8));
  return out;
}

StatusOr<NodeSet> NodeSet::Decode(std::span<const uint8_t> bytes) {
  if (bytes.size() > kMaxNodes / 8) {
    return InvalidArgumentError("node set bitmap of " + std::to_string(bytes.size()) +
                                " bytes exceeds the " + std::to_string(kMaxNodes / 8) +
                                "-byte limit");
  }
  NodeSet s;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      if (bytes[i] & (1u << b)) s.Add(static_cast<NodeId>(i * 8 + b));
    }
  }
  return s;
}

bool operator==(const NodeSet& a, const NodeSet& b) { return a.ToVector() == b.ToVector(); }

}  // namespace gos::prim
