#include "gang.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace gos::coordinator {
namespace {

std::string Plural(uint64_t n, std::string_view word) {
  std::string s = std::to_string(n) + " " + std::string(word);
  if (n != 1) s += "s";
  return s;
}

// Block distribution of ntasks ranks over n nodes (see Placement::rank_nodes). The caller has
// checked that every node gets at least one rank.
std::vector<NodeId> RankNodes(const JobRequest& r, const std::vector<NodeId>& nodes) {
  std::vector<NodeId> out;
  out.reserve(r.ntasks);
  const uint32_t n = static_cast<uint32_t>(nodes.size());
  for (uint32_t i = 0; i < n && out.size() < r.ntasks; ++i) {
    uint32_t k;
    if (r.ranks_per_node > 0) {
      k = std::min<uint32_t>(r.ranks_per_node, r.ntasks - static_cast<uint32_t>(out.size()));
    } else {
      k = r.ntasks / n + (i < r.ntasks % n ? 1 : 0);
    }
    out.insert(out.end(), k, nodes[i]);
  }
  return out;
}

// Moves ranks onto their home nodes where the block distribution's per-node counts allow; the
// other ranks take the places left, in rank order and ascending node order.
std::vector<NodeId> HomeRanks(std::vector<NodeId> block, const std::vector<NodeId>& home) {
  if (home.size() != block.size()) return block;
  std::map<NodeId, uint32_t> room;
  for (NodeId n : block) ++room[n];
  std::vector<NodeId> out(block.size(), 0);
  for (size_t r = 0; r < home.size(); ++r) {
    auto it = room.find(home[r]);
    if (home[r] == 0 || it == room.end() || it->second == 0) continue;
    out[r] = home[r];
    --it->second;
  }
  auto next = room.begin();
  for (NodeId& n : out) {
    if (n != 0) continue;
    while (next->second == 0) ++next;
    n = next->first;
    --next->second;
  }
  return out;
}

}  // namespace

GangMatrix::GangMatrix(uint32_t mpl) : rows_(std::max<uint32_t>(mpl, 1)), row_jobs_(rows_.size()) {}

void GangMatrix::SetNode(NodeId node, bool up) {
  auto [it, inserted] = up_.try_emplace(node, up);
  if (!inserted) {
    if (it->second == up) return;
    it->second = up;
    if (!up) {
      --up_count_;
      return;
    }
  }
  if (up) ++up_count_;
}

std::vector<NodeId> GangMatrix::Nodes() const {
  std::vector<NodeId> out;
  out.reserve(up_.size());
  for (const auto& [node, up] : up_) out.push_back(node);
  return out;
}

bool GangMatrix::IsUp(NodeId node) const {
  auto it = up_.find(node);
  return it != up_.end() && it->second;
}

StatusOr<uint32_t> GangMatrix::NodesFor(const JobRequest& r) const {
  if (r.job == 0) return InvalidArgumentError("job id 0 is reserved");
  if (r.ntasks == 0) return InvalidArgumentError("a job needs at least 1 rank");
  if (r.time_limit_ms < 0) {
    return InvalidArgumentError("time limit " + std::to_string(r.time_limit_ms) +
                                " ms is negative");
  }
  const uint64_t ntasks = r.ntasks;
  const uint64_t rpn = r.ranks_per_node;
  uint64_t usable = up_count_;
  for (NodeId x : r.exclude) usable -= IsUp(x) ? 1 : 0;
  uint64_t n = r.nodes;
  if (n > ntasks) {
    return InvalidArgumentError("-N " + std::to_string(n) + " is more nodes than the " +
                                Plural(ntasks, "rank") + " (every node needs a rank)");
  }
  if (n == 0) {
    n = rpn > 0 ? (ntasks + rpn - 1) / rpn : std::min<uint64_t>(ntasks, usable);
    n = std::max<uint64_t>(n, 1);
  } else if (rpn > 0) {
    if (rpn * n < ntasks) {
      return InvalidArgumentError("--ranks-per-node " + std::to_string(rpn) + " with -N " +
                                  std::to_string(n) + " cannot hold " + Plural(ntasks, "rank"));
    }
    if (rpn * (n - 1) >= ntasks) {
      return InvalidArgumentError("--ranks-per-node " + std::to_string(rpn) + " with -N " +
                                  std::to_string(n) + " leaves a node without ranks for " +
                                  Plural(ntasks, "rank"));
    }
  }
  if (n > usable) {
    return ResourceExhaustedError("needs " + Plural(n, "node") + ", the cluster has " +
                                  std::to_string(usable) + " up" +
                                  (r.exclude.empty() ? std::string() : " and not excluded"));
  }
  return static_cast<uint32_t>(n);
}

Status GangMatrix::Check(const JobRequest& r) const { return NodesFor(r).status(); }

std::optional<Placement> GangMatrix::TryPlace(const JobRequest& r, const Reservation* avoid) {
  auto n = NodesFor(r);
  if (!n.ok() || jobs_.contains(r.job)) return std::nullopt;
  for (uint32_t row = 0; row < rows_.size(); ++row) {
    const auto& cells = rows_[row];
    const bool avoiding = avoid != nullptr && avoid->row == row;
    auto usable = [&](NodeId node) {
      auto it = up_.find(node);
      if (it == up_.end() || !it->second || cells.contains(node)) return false;
      if (std::binary_search(r.exclude.begin(), r.exclude.end(), node)) return false;
      return !avoiding || !std::binary_search(avoid->nodes.begin(), avoid->nodes.end(), node);
    };
    // Home nodes first (in the order of their ranks), then the others in ascending order.
    std::vector<NodeId> picked;
    for (NodeId node : r.rank_home) {
      if (picked.size() == *n) break;
      if (node != 0 && usable(node) &&
          std::find(picked.begin(), picked.end(), node) == picked.end()) {
        picked.push_back(node);
      }
    }
    for (const auto& [node, up] : up_) {
      if (picked.size() == *n) break;
      if (usable(node) && std::find(picked.begin(), picked.end(), node) == picked.end()) {
        picked.push_back(node);
      }
    }
    if (picked.size() < *n) continue;
    std::sort(picked.begin(), picked.end());
    Placement p;
    p.job = r.job;
    p.row = row;
    p.rank_nodes = HomeRanks(RankNodes(r, picked), r.rank_home);
    p.nodes = std::move(picked);
    Insert(p);
    return p;
  }
  return std::nullopt;
}

Status GangMatrix::Restore(const Placement& p) {
  const std::string what = "placement of job " + std::to_string(p.job);
  if (p.job == 0) return InvalidArgumentError("placement of job id 0");
  if (p.row >= rows_.size()) {
    return InvalidArgumentError(what + ": row " + std::to_string(p.row) + " >= mpl " +
                                std::to_string(rows_.size()));
  }
  if (p.nodes.empty() || p.rank_nodes.empty()) {
    return InvalidArgumentError(what + " has no nodes or no ranks");
  }
  for (size_t i = 1; i < p.nodes.size(); ++i) {
    if (p.nodes[i - 1] >= p.nodes[i]) {
      return InvalidArgumentError(what + ": nodes not strictly ascending");
    }
  }
  std::vector<bool> has_rank(p.nodes.size(), false);
  for (NodeId node : p.rank_nodes) {
    auto it = std::lower_bound(p.nodes.begin(), p.nodes.end(), node);
    if (it == p.nodes.end() || *it != node) {
      return InvalidArgumentError(what + ": a rank is on node " + std::to_string(node) +
                                  ", which is not one of its nodes");
    }
    has_rank[static_cast<size_t>(it - p.nodes.begin())] = true;
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (!has_rank[i]) {
      return InvalidArgumentError(what + ": node " + std::to_string(p.nodes[i]) + " holds no rank");
    }
  }
  if (jobs_.contains(p.job))
    return AlreadyExistsError("job " + std::to_string(p.job) + " is already placed");
  for (NodeId node : p.nodes) {
    JobId owner = At(p.row, node);
    if (owner != 0) {
      return AlreadyExistsError(what + ": cell (row " + std::to_string(p.row) + ", node " +
                                std::to_string(node) + ") is held by job " + std::to_string(owner));
    }
  }
  for (NodeId node : p.nodes) {
    if (!up_.contains(node)) SetNode(node, false);
  }
  Insert(p);
  return OkStatus();
}

void GangMatrix::Insert(const Placement& p) {
  for (NodeId node : p.nodes) rows_[p.row][node] = p.job;
  row_jobs_[p.row].insert(p.job);
  jobs_[p.job] = p;
}

void GangMatrix::Remove(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  const Placement& p = it->second;
  for (NodeId node : p.nodes) rows_[p.row].erase(node);
  row_jobs_[p.row].erase(job);
  jobs_.erase(it);
}

const Placement* GangMatrix::Find(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<JobId> GangMatrix::JobsOnNode(NodeId node) const {
  std::vector<JobId> out;
  for (const auto& cells : rows_) {
    auto it = cells.find(node);
    if (it != cells.end()) out.push_back(it->second);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<JobId> GangMatrix::JobsInRow(uint32_t row) const {
  if (row >= row_jobs_.size()) return {};
  return {row_jobs_[row].begin(), row_jobs_[row].end()};
}

uint32_t GangMatrix::NextRow(uint32_t current) const {
  const uint32_t m = mpl();
  // An out-of-range `current` behaves like the last row, so the search starts at row 0.
  if (current >= m) current = m - 1;
  for (uint32_t i = 1; i <= m; ++i) {
    uint32_t row = (current + i) % m;
    if (!row_jobs_[row].empty()) return row;
  }
  return 0;
}

JobId GangMatrix::At(uint32_t row, NodeId node) const {
  if (row >= rows_.size()) return 0;
  auto it = rows_[row].find(node);
  return it == rows_[row].end() ? 0 : it->second;
}

std::optional<Reservation> GangMatrix::Reserve(const JobRequest& r, int64_t now_ms,
                                               const std::map<JobId, int64_t>& end_ms) const {
  auto n = NodesFor(r);
  if (!n.ok()) return std::nullopt;
  auto free_at = [&](JobId owner) -> int64_t {
    if (owner == 0) return now_ms;
    auto it = end_ms.find(owner);
    if (it == end_ms.end()) return kUnknownTime;
    return std::max(it->second, now_ms);
  };
  std::optional<Reservation> best;
  std::vector<std::pair<int64_t, NodeId>> cells;
  for (uint32_t row = 0; row < rows_.size(); ++row) {
    cells.clear();
    for (const auto& [node, up] : up_) {
      if (up) cells.emplace_back(free_at(At(row, node)), node);
    }
    if (cells.size() < *n) continue;  // Cannot happen: NodesFor checked the up count.
    // The row can host r once its n-th earliest cell is free; r then gets the lowest ids among
    // the cells free by that time, as TryPlace would.
    std::nth_element(cells.begin(), cells.begin() + (*n - 1), cells.end());
    const int64_t start = cells[*n - 1].first;
    std::vector<std::pair<NodeId, int64_t>> ready;
    for (const auto& [t, node] : cells) {
      if (t <= start) ready.emplace_back(node, t);
    }
    std::sort(ready.begin(), ready.end());
    ready.resize(*n);
    Reservation res;
    res.job = r.job;
    res.row = row;
    for (const auto& [node, t] : ready) {
      res.nodes.push_back(node);
      if (t == kUnknownTime) ++res.unknown_cells;
    }
    res.start_ms = start;
    if (!best || std::pair(res.start_ms, res.unknown_cells) <
                     std::pair(best->start_ms, best->unknown_cells)) {
      best = std::move(res);
    }
  }
  return best;
}

std::string GangMatrix::ToString() const {
  std::string out;
  for (uint32_t row = 0; row < rows_.size(); ++row) {
    out += "row " + std::to_string(row) + ":";
    for (const auto& [node, up] : up_) {
      JobId owner = At(row, node);
      out += " ";
      out += owner != 0 ? std::to_string(owner) : (up ? "." : "x");
    }
    out += "\n";
  }
  return out;
}

void JobQueue::Push(const JobRequest& r) {
  if (!Contains(r.job)) queue_.push_back(r);
}

bool JobQueue::Remove(JobId job) {
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [job](const JobRequest& r) { return r.job == job; });
  if (it == queue_.end()) return false;
  queue_.erase(it);
  return true;
}

bool JobQueue::Contains(JobId job) const { return Find(job) != nullptr; }

const JobRequest* JobQueue::Find(JobId job) const {
  for (const JobRequest& r : queue_) {
    if (r.job == job) return &r;
  }
  return nullptr;
}

std::vector<JobId> JobQueue::Ids() const {
  std::vector<JobId> out;
  out.reserve(queue_.size());
  for (const JobRequest& r : queue_) out.push_back(r.job);
  return out;
}

const JobRequest* JobQueue::Head(const GangMatrix& matrix) const {
  for (const JobRequest& r : queue_) {
    if (!matrix.Has(r.job) && matrix.Check(r).ok()) return &r;
  }
  return nullptr;
}

std::vector<Placement> JobQueue::Schedule(GangMatrix& matrix, int64_t now_ms,
                                          const std::map<JobId, int64_t>& running_end_ms) {
  std::vector<Placement> started;
  std::map<JobId, int64_t> ends = running_end_ms;
  auto start = [&](const JobRequest& r, const Reservation* avoid) {
    std::optional<Placement> p = matrix.TryPlace(r, avoid);
    if (!p) return false;
    if (r.time_limit_ms > 0) {
      ends[r.job] = now_ms + r.time_limit_ms;
    } else {
      ends.erase(r.job);  // Unknown end.
    }
    started.push_back(std::move(*p));
    return true;
  };
  auto eligible = [&](const JobRequest& r) { return !matrix.Has(r.job) && matrix.Check(r).ok(); };

  // FCFS: start jobs in order until the first eligible one that does not fit (the head).
  size_t i = 0;
  std::optional<Reservation> reservation;
  std::vector<bool> done(queue_.size(), false);
  for (; i < queue_.size(); ++i) {
    if (!eligible(queue_[i])) continue;
    if (start(queue_[i], nullptr)) {
      done[i] = true;
      continue;
    }
    reservation = matrix.Reserve(queue_[i], now_ms, ends);
    break;
  }

  // Backfill behind the head. Every job started here either ends by the head's reserved start
  // or keeps off the reserved cells, so the reservation computed once stays valid.
  if (reservation) {
    for (size_t j = i + 1; j < queue_.size(); ++j) {
      const JobRequest& r = queue_[j];
      if (!eligible(r)) continue;
      const bool ends_in_time = r.time_limit_ms > 0 && reservation->start_ms != kUnknownTime &&
                                r.time_limit_ms <= reservation->start_ms - now_ms;
      done[j] = start(r, ends_in_time ? nullptr : &*reservation);
    }
  }

  size_t k = 0;
  for (size_t j = 0; j < queue_.size(); ++j) {
    if (!done[j]) queue_[k++] = std::move(queue_[j]);
  }
  queue_.resize(k);
  return started;
}

}  // namespace gos::coordinator
