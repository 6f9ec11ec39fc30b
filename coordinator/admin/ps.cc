#include "gos/coordinator/ps.h"

#include <algorithm>
#include <map>
#include <set>

namespace gos::coordinator {

os::PsReply BuildPsReply(const std::vector<storage::JobRecord>& jobs,
                         const std::vector<storage::NodeRecord>& nodes, int64_t now_ms, bool live,
                         storage::CheckpointStore* store) {
  os::PsReply r;
  std::map<uint32_t, os::PsNode> by_id;
  for (const auto& n : nodes) {
    os::PsNode& p = by_id[n.id];
    p.id = n.id;
    p.host = n.host;
    p.up = live && n.state == storage::NodeState::kUp;
    p.down_reason =
        live || n.state != storage::NodeState::kUp ? n.down_reason : "no coordinator running";
    p.cores = n.cores;
    p.mem_bytes = n.mem_bytes;
  }
  for (const auto& rec : jobs) {
    os::PsJob p;
    p.id = rec.id;
    p.user = rec.user;
    p.state = storage::JobStateName(rec.state);
    p.ntasks = rec.ntasks;
    std::set<uint32_t> ns(rec.rank_nodes.begin(), rec.rank_nodes.end());
    p.nodes.assign(ns.begin(), ns.end());
    p.elapsed_ms = rec.start_ms == 0 ? 0 : (rec.end_ms ? rec.end_ms : now_ms) - rec.start_ms;
    p.row = rec.row;
    bool final = storage::JobStateIsFinal(rec.state);
    p.exit_code = final ? rec.exit_code : -1;
    for (const auto& a : rec.argv) p.command += (p.command.empty() ? "" : " ") + a;
    p.message = rec.message;
    p.checkpoint_ms = rec.checkpoint_ms;
    if (store != nullptr) {
      auto epochs = store->ListEpochs(rec.id, /*with_files=*/false);
      if (epochs.ok() && !epochs->empty()) {
        p.last_epoch = epochs->back().epoch;
        p.last_epoch_age_ms = std::max<int64_t>(0, now_ms - epochs->back().taken_ms);
      }
    }
    r.jobs.push_back(std::move(p));
    if (final || !live) continue;
    for (uint32_t n : rec.rank_nodes) {
      auto it = by_id.find(n);
      if (it == by_id.end()) continue;
      if (it->second.jobs.empty() || it->second.jobs.back() != rec.id) {
        it->second.jobs.push_back(rec.id);
      }
      it->second.ranks++;
    }
  }
  for (auto& [id, n] : by_id) r.nodes.push_back(std::move(n));
  return r;
}

}  // namespace gos::coordinator
