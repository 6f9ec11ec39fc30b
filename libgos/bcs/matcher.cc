// Deterministic BCS matching and slice scheduling; the rules are in matcher.h and
// docs/bcs-matching.md. Everything here must stay a pure function of the call sequence:
// iterate only ordered containers, never hash or pointer order, never read a clock.
#include "gos/bcs/matcher.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <set>
#include <tuple>
#include <utility>

#include "gos/codec/bytes.h"

namespace gos::nodeagent {
namespace {

RankCompletion Done(uint32_t rank, uint64_t req, uint64_t len, int32_t source, int32_t tag,
                    int32_t error, uint32_t flags = 0) {
  RankCompletion rc;
  rc.rank = rank;
  rc.c.req = req;
  rc.c.len = len;
  rc.c.source = source;
  rc.c.tag = tag;
  rc.c.error = error;
  rc.c.flags = flags;
  return rc;
}

RankCompletion Failed(const Posted& p, int32_t error) {
  return Done(p.rank, p.d.req, 0, -1, -1, error);
}

bool InWorld(int32_t rank, uint32_t world_size) {
  return rank >= 0 && static_cast<uint32_t>(rank) < world_size;
}

// Whether `send` satisfies the envelope of a receive or probe.
bool Matches(const Posted& want, const Posted& send) {
  return send.d.context == want.d.context &&
         (want.d.peer == bcs::kAnySource || static_cast<int64_t>(send.rank) == want.d.peer) &&
         (want.d.tag == bcs::kAnyTag || send.d.tag == want.d.tag);
}

// (rank, seq) order; the descriptor bytes break ties so that even a duplicated (rank, seq)
// (a bug upstream) cannot make the result depend on the input order.
bool PostedLess(const Posted* a, const Posted* b) {
  if (a->rank != b->rank) return a->rank < b->rank;
  if (a->seq != b->seq) return a->seq < b->seq;
  return std::memcmp(&a->d, &b->d, sizeof(bcs::Descriptor)) < 0;
}

}  // namespace

Matcher::Matcher(uint32_t world_size)
    : world_size_(world_size), sends_(world_size), recvs_(world_size), probes_(world_size) {}

StepResult Matcher::Step(uint64_t strobe, std::span<const Posted> posted) {
  StepResult out;
  std::vector<const Posted*> order;
  order.reserve(posted.size());
  for (const Posted& p : posted) {
    // The agent only forwards descriptors of the job's ranks; anything else has no channel to
    // answer on and is dropped.
    if (p.rank < world_size_) order.push_back(&p);
  }
  std::sort(order.begin(), order.end(), PostedLess);

  // Ranks whose receives, probes or send queue changed: only they can match anything new.
  std::vector<bool> touched(world_size_, false);
  for (const Posted* pp : order) {
    const Posted& p = *pp;
    const bcs::Descriptor& d = p.d;
    switch (static_cast<bcs::Op>(d.op)) {
      case bcs::Op::kSend:
        if (!InWorld(d.peer, world_size_)) {
          out.completions.push_back(Failed(p, bcs::kErrRank));
        } else if (d.tag < 0) {
          out.completions.push_back(Failed(p, bcs::kErrArg));
        } else {
          sends_[d.peer].push_back({p, strobe});
          touched[d.peer] = true;
        }
        break;
      case bcs::Op::kRecv:
      case bcs::Op::kProbe:
        if (d.peer != bcs::kAnySource && !InWorld(d.peer, world_size_)) {
          out.completions.push_back(Failed(p, bcs::kErrRank));
        } else if (d.tag < 0 && d.tag != bcs::kAnyTag) {
          out.completions.push_back(Failed(p, bcs::kErrArg));
        } else {
          (d.op == static_cast<uint32_t>(bcs::Op::kRecv) ? recvs_ : probes_)[p.rank].push_back(p);
          touched[p.rank] = true;
        }
        break;
      case bcs::Op::kCancel: {
        // Before this strobe's matching: a send exchanged at the same strobe does not win. The
        // request is the rank's own receive, or its own send still waiting for a receive
        // (queued under its destination); one already matched completes as matched.
        RankCompletion c = Done(p.rank, d.req, 0, -1, -1, bcs::kOk);
        c.c.flags |= bcs::kComplCancelled;
        std::deque<Posted>& recvs = recvs_[p.rank];
        auto it = std::find_if(recvs.begin(), recvs.end(),
                               [&](const Posted& r) { return r.d.req == d.req; });
        if (it != recvs.end()) {
          out.completions.push_back(c);
          recvs.erase(it);
          break;
        }
        for (std::deque<SendEntry>& sends : sends_) {
          auto s = std::find_if(sends.begin(), sends.end(), [&](const SendEntry& e) {
            return e.p.rank == p.rank && e.p.d.req == d.req;
          });
          if (s != sends.end()) {
            out.completions.push_back(c);
            sends.erase(s);
            break;
          }
        }
        break;
      }
      case bcs::Op::kBarrier:
        AddCollective(barriers_, p, out);
        break;
      case bcs::Op::kBcast:
        if (!InWorld(d.peer, world_size_)) {
          out.completions.push_back(Failed(p, bcs::kErrRank));
        } else {
          AddCollective(bcasts_, p, out);
        }
        break;
      default:
        out.completions.push_back(Failed(p, bcs::kErrArg));
        break;
    }
  }

  for (uint32_t r = 0; r < world_size_; ++r) {
    if (touched[r]) MatchRank(r, out);
  }
  for (uint32_t r = 0; r < world_size_; ++r) {
    if (touched[r]) AnswerProbes(r, out);
  }
  CompleteBarriers(out);
  CompleteBcasts(out);
  return out;
}

void Matcher::AddCollective(std::map<CollectiveKey, std::vector<Posted>>& table, const Posted& p,
                            StepResult& out) {
  if (p.d.group_size == 0 || p.d.group_size > world_size_) {
    out.completions.push_back(Failed(p, bcs::kErrArg));
    return;
  }
  std::vector<Posted>& members = table[{p.d.context, p.d.tag}];
  if (!members.empty()) {
    const Posted& first = members.front();
    // Members must agree on the group and the root; a rank joins one instance once.
    bool inconsistent =
        first.d.group_size != p.d.group_size || first.d.op != p.d.op ||
        (p.d.op == static_cast<uint32_t>(bcs::Op::kBcast) && first.d.peer != p.d.peer) ||
        std::any_of(members.begin(), members.end(),
                    [&](const Posted& m) { return m.rank == p.rank; });
    if (inconsistent) {
      out.completions.push_back(Failed(p, bcs::kErrArg));
      return;
    }
  }
  members.push_back(p);
}

void Matcher::MatchRank(uint32_t r, StepResult& out) {
  std::deque<SendEntry>& sends = sends_[r];
  std::deque<Posted>& recvs = recvs_[r];
  // A receive that finds nothing stays posted and the scan goes on with the next one: a later
  // receive with another source or tag may well match.
  for (auto recv = recvs.begin(); recv != recvs.end() && !sends.empty();) {
    auto send = std::find_if(sends.begin(), sends.end(),
                             [&](const SendEntry& s) { return Matches(*recv, s.p); });
    if (send == sends.end()) {
      ++recv;
      continue;
    }
    Pair(*recv, send->p, out);
    sends.erase(send);
    recv = recvs.erase(recv);
  }
}

void Matcher::Pair(const Posted& recv, const Posted& send, StepResult& out) {
  out.matches.push_back({recv.rank, recv.seq, send.rank, send.seq});
  const uint64_t moved = std::min(send.d.len, recv.d.len);
  const int32_t error = send.d.len > recv.d.len ? bcs::kErrTruncate : bcs::kOk;
  const auto source = static_cast<int32_t>(send.rank);
  RankCompletion send_done = Done(send.rank, send.d.req, moved, -1, -1, bcs::kOk);
  RankCompletion recv_done = Done(recv.rank, recv.d.req, moved, source, send.d.tag, error);
  if (moved == 0) {
    out.completions.push_back(send_done);
    out.completions.push_back(recv_done);
    return;
  }
  Transfer t;
  t.id = next_transfer_++;
  t.src_rank = send.rank;
  t.src_addr = send.d.addr;
  t.len = moved;
  t.dests.push_back({recv.rank, recv.d.addr});
  t.on_done = {send_done, recv_done};
  out.transfers.push_back(std::move(t));
}

void Matcher::AnswerProbes(uint32_t r, StepResult& out) {
  const std::deque<SendEntry>& sends = sends_[r];
  std::deque<Posted>& probes = probes_[r];
  for (auto probe = probes.begin(); probe != probes.end();) {
    auto send = std::find_if(sends.begin(), sends.end(),
                             [&](const SendEntry& s) { return Matches(*probe, s.p); });
    if (send != sends.end()) {
      out.completions.push_back(Done(r, probe->d.req, send->p.d.len,
                                     static_cast<int32_t>(send->p.rank), send->p.d.tag, bcs::kOk,
                                     bcs::kComplFound));
    } else if (probe->d.flags & bcs::kFlagNonBlocking) {
      out.completions.push_back(Done(r, probe->d.req, 0, -1, -1, bcs::kOk));
    } else {
      ++probe;  // blocking: wait for a later strobe
      continue;
    }
    probe = probes.erase(probe);
  }
}

void Matcher::CompleteBarriers(StepResult& out) {
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    const std::vector<Posted>& members = it->second;
    if (members.size() < members.front().d.group_size) {
      ++it;
      continue;
    }
    for (const Posted& m : members) {
      out.completions.push_back(Done(m.rank, m.d.req, 0, -1, -1, bcs::kOk));
    }
    it = barriers_.erase(it);
  }
}

void Matcher::CompleteBcasts(StepResult& out) {
  for (auto it = bcasts_.begin(); it != bcasts_.end();) {
    std::vector<Posted> members = it->second;
    if (members.size() < members.front().d.group_size) {
      ++it;
      continue;
    }
    it = bcasts_.erase(it);
    // Destinations in rank order, whatever the order the members arrived in.
    std::sort(members.begin(), members.end(),
              [](const Posted& a, const Posted& b) { return a.rank < b.rank; });
    const int32_t root_rank = members.front().d.peer;
    auto root = std::find_if(members.begin(), members.end(), [&](const Posted& m) {
      return static_cast<int64_t>(m.rank) == root_rank;
    });
    if (root == members.end()) {  // the root is not a member of its own broadcast
      for (const Posted& m : members) out.completions.push_back(Failed(m, bcs::kErrArg));
      continue;
    }
    const uint64_t len = root->d.len;
    Transfer t;
    t.src_rank = root->rank;
    t.src_addr = root->d.addr;
    t.len = len;
    const RankCompletion root_done = Done(root->rank, root->d.req, len, -1, -1, bcs::kOk);
    t.on_done.push_back(root_done);
    for (const Posted& m : members) {
      if (&m == &*root) continue;
      if (m.d.len < len) {
        // Too small a buffer: the member gets nothing and an error; the others still get data.
        out.completions.push_back(Done(m.rank, m.d.req, 0, root_rank, -1, bcs::kErrTruncate));
      } else if (len == 0) {
        out.completions.push_back(Done(m.rank, m.d.req, 0, root_rank, -1, bcs::kOk));
      } else {
        t.dests.push_back({m.rank, m.d.addr});
        t.on_done.push_back(Done(m.rank, m.d.req, len, root_rank, -1, bcs::kOk));
      }
    }
    if (t.dests.empty()) {
      out.completions.push_back(root_done);
      continue;
    }
    t.id = next_transfer_++;
    out.transfers.push_back(std::move(t));
  }
}

size_t Matcher::pending() const {
  size_t n = 0;
  for (const auto& q : sends_) n += q.size();
  for (const auto& q : recvs_) n += q.size();
  for (const auto& q : probes_) n += q.size();
  for (const auto& [key, members] : barriers_) n += members.size();
  for (const auto& [key, members] : bcasts_) n += members.size();
  return n;
}

// ---- Checkpoint encoding ----
//
// Version 1, little-endian (docs/bcs-matching.md, "Checkpoints"):
//   u32 magic "GMS1" | u16 version | u16 0 | u32 world_size | u32 0 | u64 next_transfer
//   per rank r < world_size:
//     u32 n, n x (u64 strobe, posted)   sends to r, arrival order
//     u32 n, n x posted                 receives of r, posting order
//     u32 n, n x posted                 waiting probes of r, posting order
//   twice (barriers, then broadcasts), keys ascending:
//     u32 keys, keys x (u64 context, i32 tag, u32 n, n x posted)   members in arrival order
//   u64 FNV-1a of every byte before it
// posted = u32 rank | u32 0 | u64 seq | 64-byte bcs::Descriptor (verbatim).
namespace {

static_assert(std::endian::native == std::endian::little, "the encoding is little-endian");

constexpr uint32_t kStateMagic = 0x31534d47;  // "GMS1"
constexpr uint16_t kStateVersion = 1;
constexpr size_t kHeaderBytes = 4 + 2 + 2 + 4 + 4 + 8;
constexpr size_t kPostedBytes = 4 + 4 + 8 + sizeof(bcs::Descriptor);
constexpr size_t kChecksumBytes = 8;

uint64_t Fnv1a(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    codec::StringWriter(&out_).Put(v);
  }
  void PutPosted(const Posted& p) {
    Put(p.rank);
    Put(uint32_t{0});
    Put(p.seq);
    Put(p.d);
  }
  void PutCount(size_t n) { Put(static_cast<uint32_t>(n)); }
  std::string Finish() {
    Put(Fnv1a({reinterpret_cast<const uint8_t*>(out_.data()), out_.size()}));
    return std::move(out_);
  }

 private:
  std::string out_;
};

// Every read is bounds-checked; the first failure sticks and every later read yields zeros.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <typename T>
  T Get() {
    T v{};
    if (!ok_ || !in_.Get(&v)) ok_ = false;  // a failed Get leaves v zero
    return v;
  }
  // A count of entries of at least `entry_bytes` each: more than the input can hold is
  // malformed (and must not drive an allocation).
  uint32_t GetCount(size_t entry_bytes) {
    const uint32_t n = Get<uint32_t>();
    if (ok_ && n > in_.remaining() / entry_bytes) ok_ = false;
    return ok_ ? n : 0;
  }
  Posted GetPosted() {
    Posted p;
    p.rank = Get<uint32_t>();
    if (Get<uint32_t>() != 0) ok_ = false;
    p.seq = Get<uint64_t>();
    p.d = Get<bcs::Descriptor>();
    return p;
  }
  void Check(bool cond) { ok_ = ok_ && cond; }
  bool ok() const { return ok_; }
  bool at_end() const { return in_.done(); }

 private:
  codec::Reader in_;
  bool ok_ = true;
};

bool IsOp(const Posted& p, bcs::Op op) { return p.d.op == static_cast<uint32_t>(op); }

}  // namespace

std::string Matcher::Save() const {
  Writer w;
  w.Put(kStateMagic);
  w.Put(kStateVersion);
  w.Put(uint16_t{0});
  w.Put(world_size_);
  w.Put(uint32_t{0});
  w.Put(next_transfer_);
  for (uint32_t r = 0; r < world_size_; ++r) {
    w.PutCount(sends_[r].size());
    for (const SendEntry& s : sends_[r]) {
      w.Put(s.strobe);
      w.PutPosted(s.p);
    }
    w.PutCount(recvs_[r].size());
    for (const Posted& p : recvs_[r]) w.PutPosted(p);
    w.PutCount(probes_[r].size());
    for (const Posted& p : probes_[r]) w.PutPosted(p);
  }
  for (const auto* table : {&barriers_, &bcasts_}) {
    w.PutCount(table->size());
    for (const auto& [key, members] : *table) {
      w.Put(key.first);
      w.Put(key.second);
      w.PutCount(members.size());
      for (const Posted& p : members) w.PutPosted(p);
    }
  }
  return w.Finish();
}

StatusOr<Matcher> Matcher::Load(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes + kChecksumBytes) {
    return DataLossError("matcher state: " + std::to_string(bytes.size()) + " bytes is too short");
  }
  const std::span<const uint8_t> body = bytes.first(bytes.size() - kChecksumBytes);
  uint64_t checksum = 0;
  std::memcpy(&checksum, bytes.data() + body.size(), sizeof checksum);
  if (Fnv1a(body) != checksum) return DataLossError("matcher state: checksum mismatch");

  // Past the checksum the input is what some Save wrote, or a forgery: every invariant the
  // matching code relies on is still checked, so that no input can make it misbehave.
  Reader in(body);
  const auto magic = in.Get<uint32_t>();
  const auto version = in.Get<uint16_t>();
  in.Get<uint16_t>();
  if (magic != kStateMagic || version != kStateVersion) {
    return DataLossError("matcher state: bad magic or unknown version " + std::to_string(version));
  }
  const auto world = in.Get<uint32_t>();
  in.Get<uint32_t>();
  const auto next_transfer = in.Get<uint64_t>();
  in.Check(next_transfer >= 1);
  // Each rank takes at least its three counts.
  in.Check(world <= (body.size() - kHeaderBytes) / 12);
  if (!in.ok()) return DataLossError("matcher state: bad header");

  Matcher m(world);
  m.next_transfer_ = next_transfer;
  for (uint32_t r = 0; r < world && in.ok(); ++r) {
    const uint32_t sends = in.GetCount(8 + kPostedBytes);
    for (uint32_t i = 0; i < sends && in.ok(); ++i) {
      in.Get<uint64_t>();  // the arrival strobe: rebased to 0 (see matcher.h)
      Posted p = in.GetPosted();
      in.Check(p.rank < world && IsOp(p, bcs::Op::kSend) && p.d.peer == static_cast<int32_t>(r) &&
               p.d.tag >= 0);
      m.sends_[r].push_back({p, 0});
    }
    for (auto* queue : {&m.recvs_[r], &m.probes_[r]}) {
      const bcs::Op op = queue == &m.recvs_[r] ? bcs::Op::kRecv : bcs::Op::kProbe;
      const uint32_t n = in.GetCount(kPostedBytes);
      for (uint32_t i = 0; i < n && in.ok(); ++i) {
        Posted p = in.GetPosted();
        in.Check(p.rank == r && IsOp(p, op) &&
                 (p.d.peer == bcs::kAnySource || InWorld(p.d.peer, world)) &&
                 (p.d.tag >= 0 || p.d.tag == bcs::kAnyTag));
        queue->push_back(p);
      }
    }
  }
  for (auto* table : {&m.barriers_, &m.bcasts_}) {
    const bcs::Op op = table == &m.barriers_ ? bcs::Op::kBarrier : bcs::Op::kBcast;
    const uint32_t keys = in.GetCount(8 + 4 + 4 + kPostedBytes);
    for (uint32_t k = 0; k < keys && in.ok(); ++k) {
      CollectiveKey key;
      key.first = in.Get<uint64_t>();
      key.second = in.Get<int32_t>();
      // Keys ascending and distinct, as Save writes them.
      in.Check(table->empty() || table->rbegin()->first < key);
      const uint32_t n = in.GetCount(kPostedBytes);
      // A complete instance is never stored: between 1 and group_size - 1 members.
      in.Check(n >= 1);
      std::vector<Posted> members;
      for (uint32_t i = 0; i < n && in.ok(); ++i) {
        Posted p = in.GetPosted();
        const Posted& first = members.empty() ? p : members.front();
        in.Check(
            p.rank < world && IsOp(p, op) && p.d.context == key.first && p.d.tag == key.second &&
            p.d.group_size >= 1 && p.d.group_size <= world && n < p.d.group_size &&
            p.d.group_size == first.d.group_size &&
            (op == bcs::Op::kBarrier || (InWorld(p.d.peer, world) && p.d.peer == first.d.peer)));
        in.Check(std::none_of(members.begin(), members.end(),
                              [&](const Posted& o) { return o.rank == p.rank; }));
        members.push_back(p);
      }
      if (in.ok()) (*table)[key] = std::move(members);
    }
  }
  if (!in.ok() || !in.at_end()) return DataLossError("matcher state: malformed");
  return m;
}

// ---- Scheduler ----

Scheduler::Scheduler(std::vector<uint32_t> rank_node, SchedulerOptions options)
    : rank_node_(std::move(rank_node)), options_(options) {}

uint32_t Scheduler::NodeOf(uint32_t rank) const {
  assert(rank < rank_node_.size());
  return rank_node_[rank];
}

void Scheduler::Add(std::vector<Transfer> transfers) {
  for (Transfer& t : transfers) {
    assert(queue_.empty() || queue_.back().t.id < t.id);
    queue_.push_back({std::move(t), {}});
  }
}

Scheduler::Queued* Scheduler::FindQueued(uint64_t id) {
  return const_cast<Queued*>(std::as_const(*this).FindQueued(id));
}

const Scheduler::Queued* Scheduler::FindQueued(uint64_t id) const {
  auto it = std::lower_bound(queue_.begin(), queue_.end(), id,
                             [](const Queued& q, uint64_t v) { return q.t.id < v; });
  return it != queue_.end() && it->t.id == id ? &*it : nullptr;
}

const Transfer* Scheduler::Find(uint64_t id) const {
  const Queued* q = FindQueued(id);
  return q ? &q->t : nullptr;
}

bool Scheduler::idle() const { return queue_.empty(); }

SlicePlan Scheduler::Plan() {
  SlicePlan plan;
  std::map<uint32_t, uint64_t> local_used, inbox_used, outbox_used;
  using NodePair = std::pair<uint32_t, uint32_t>;  // (src node, dst node)
  std::set<NodePair> started;                      // pairs whose block header is already paid for
  std::set<NodePair> stalled;  // pairs out of budget: later transfers wait (per-pair FIFO)

  for (const Queued& q : queue_) {
    const Transfer& t = q.t;
    if (t.len == 0) continue;
    const uint32_t src = NodeOf(t.src_rank);
    std::vector<uint32_t> dst_nodes;
    for (const Transfer::Dest& d : t.dests) dst_nodes.push_back(NodeOf(d.rank));
    std::sort(dst_nodes.begin(), dst_nodes.end());
    dst_nodes.erase(std::unique(dst_nodes.begin(), dst_nodes.end()), dst_nodes.end());

    for (uint32_t dst : dst_nodes) {
      auto sent_it = q.sent.find(dst);
      const uint64_t done = sent_it == q.sent.end() ? 0 : sent_it->second;
      if (done >= t.len) continue;
      const uint64_t remaining = t.len - done;
      const NodePair pair{src, dst};
      if (stalled.contains(pair)) continue;
      uint64_t take = 0;
      if (src == dst) {
        take = std::min(remaining, options_.local_bytes - local_used[src]);
        local_used[src] += take;
      } else {
        const uint64_t header = started.contains(pair) ? 0 : kBlockHeaderBytes;
        const uint64_t room = std::min(options_.inbox_bytes - inbox_used[dst],
                                       options_.outbox_bytes - outbox_used[src]);
        if (room > header) take = std::min(remaining, room - header);
        if (take > 0) {
          inbox_used[dst] += header + take;
          outbox_used[src] += header + take;
          started.insert(pair);
        }
      }
      if (take < remaining) stalled.insert(pair);
      if (take == 0) continue;
      Move m;
      m.transfer = t.id;
      m.offset = done;
      m.len = take;
      m.src_node = src;
      m.dst_node = dst;
      plan.moves.push_back(m);
    }
  }

  // Blocks in (src, dst) order. That is dst order within each source's outbox and, for a
  // given destination, src order — so one pass lays out both sides.
  std::map<NodePair, std::vector<size_t>> pieces;  // move indices, plan order
  for (size_t i = 0; i < plan.moves.size(); ++i) {
    const Move& m = plan.moves[i];
    if (m.src_node != m.dst_node) pieces[{m.src_node, m.dst_node}].push_back(i);
  }
  std::map<uint32_t, uint64_t> outbox_end, inbox_end;
  for (const auto& [pair, indices] : pieces) {
    Block b;
    b.src_node = pair.first;
    b.dst_node = pair.second;
    b.outbox_offset = outbox_end[b.src_node];
    b.inbox_offset = inbox_end[b.dst_node];
    uint64_t off = kBlockHeaderBytes;
    for (size_t i : indices) {
      Move& m = plan.moves[i];
      m.outbox_offset = b.outbox_offset + off;
      m.inbox_offset = b.inbox_offset + off;
      off += m.len;
    }
    b.len = off;
    outbox_end[b.src_node] += b.len;
    inbox_end[b.dst_node] += b.len;
    plan.blocks.push_back(b);
  }
  return plan;
}

bool Scheduler::Complete(const Queued& q) const {
  for (const Transfer::Dest& d : q.t.dests) {
    auto it = q.sent.find(NodeOf(d.rank));
    if (q.t.len > 0 && (it == q.sent.end() || it->second < q.t.len)) return false;
  }
  return true;
}

std::vector<RankCompletion> Scheduler::Finish(const SlicePlan& plan) {
  for (const Move& m : plan.moves) {
    Queued* q = FindQueued(m.transfer);
    if (q == nullptr) continue;  // a stale plan's move for a transfer already complete
    q->sent[m.dst_node] += m.len;
  }
  std::vector<RankCompletion> done;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!Complete(*it)) {
      ++it;
      continue;
    }
    done.insert(done.end(), it->t.on_done.begin(), it->t.on_done.end());
    it = queue_.erase(it);
  }
  return done;
}

}  // namespace gos::nodeagent
