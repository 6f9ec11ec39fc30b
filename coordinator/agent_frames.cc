// The coordinator's IO thread, nodeagent side: the frames nodeagents send (hello, join,
// output, rank failures, checkpoint and restore answers, replay segments and stops).
#include <signal.h>

#include <algorithm>
#include <span>

#include "coordinator_impl.h"
#include "gos/coordinator/store_ops.h"
#include "gos/log.h"
#include "gos/os/layout.h"
#include "gos/storage/replay.h"

namespace gos::coordinator::internal {

void CoordinatorImpl::OnAgentFrame(const std::shared_ptr<Agent>& a, os::FrameIn& f, After& after) {
  if (a->node == 0 && f.type != Frame::kHello) return;
  switch (f.type) {
    case Frame::kHello: {
      auto hello = os::DecodeHello(f.payload);
      if (!hello.ok() || a->node != 0) return;
      // Node ids 1..nodes; a nodeagent may ask for one (--node). Once the cluster has formed,
      // only in place of a node that is down: it joins again under that id.
      auto free_slot = [&](uint32_t i) {
        if (node_agents_.count(i)) return false;
        if (!formed_) return true;
        auto nt = nodes_.find(i);
        return nt != nodes_.end() && nt->second.state == NodeState::kDown;
      };
      const uint32_t want = hello->requested_node;
      const std::string cluster = "the cluster of " + std::to_string(o_.nodes) + " nodes";
      uint32_t id = 0;
      std::string why;
      if (want >= 1 && want <= o_.nodes) {
        if (free_slot(want)) {
          id = want;
        } else if (formed_) {
          const NodeRecord& held = nodes_[want];
          why = "node " + std::to_string(want) + " of " + cluster +
                (held.state == NodeState::kUp ? " is up" : " is joining again already") +
                " (nodeagent pid " + std::to_string(held.pid) + " on " + held.host +
                "): a nodeagent can join only in place of a node that is down";
        }
      } else if (want != 0 && formed_) {
        why = "node " + std::to_string(want) + " is outside " + cluster;
      }
      for (uint32_t i = 1; id == 0 && why.empty() && i <= o_.nodes; ++i) {
        if (free_slot(i)) id = i;
      }
      auto ch = a->ch;
      if (id == 0) {
        if (why.empty()) {
          why = formed_ ? "all " + std::to_string(o_.nodes) + " nodes of " + cluster +
                              " are up: a nodeagent can join only in place of a node that is down"
                        : "all " + std::to_string(o_.nodes) + " node slots are taken";
        }
        after.push_back([ch, why] { ch->Send(Frame::kReject, os::EncodeText(why)).IgnoreError(); });
        return;
      }
      a->node = id;
      node_agents_[id] = a;
      NodeRecord& n = nodes_[id];
      n.id = id;
      n.host = hello->host.empty() ? a->peer : hello->host;
      n.pid = hello->pid;
      n.cores = hello->cores;
      n.mem_bytes = hello->mem_bytes;
      // A node joining a formed cluster again stays down until it is in the primitives'
      // group (kAgentJoined): strobes go to it only from then on.
      n.state = formed_ ? NodeState::kDown : NodeState::kUp;
      n.down_reason = formed_ ? "joining again" : "";
      n.last_seen_ms = UnixMs();
      PersistNode(n);
      GOS_LOG(kInfo, "coordinator")
          << "node " << id << " (" << hello->name << ", " << n.host << ", pid " << n.pid << ", "
          << n.cores << " cores) " << (formed_ ? "joins again" : "joined");
      os::AgentWelcome w;
      w.node = id;
      w.bootstrap = bootstrap_->address();
      w.provider = o_.provider;
      w.global_memory_bytes = os::kGlobalMemoryBytes;
      w.fanout = o_.fanout;
      auto bytes = os::Encode(w);
      after.push_back([ch, bytes] { ch->Send(Frame::kWelcome, bytes).IgnoreError(); });
      return;
    }
    case Frame::kAgentJoined: {
      auto nt = nodes_.find(a->node);
      if (!formed_ || nt == nodes_.end() || nt->second.state == NodeState::kUp) return;
      NodeRecord& n = nt->second;
      // Every member of the group, this coordinator included, can reach it by now: the
      // bootstrap service welcomes a node that joins again only once all acknowledged it.
      prim::NodeInfo info = node_->node_info(a->node);
      if (!info.alive || info.pid != n.pid) {
        GOS_LOG(kWarn, "coordinator")
            << "node " << a->node << " (" << n.host << ", pid " << n.pid
            << ") says it joined, but the group has "
            << (info.alive ? "pid " + std::to_string(info.pid) : "it down: " + info.down_reason)
            << "; dropping it";
        a->ch->Shutdown();
        return;
      }
      n.state = NodeState::kUp;
      n.down_reason.clear();
      n.last_seen_ms = UnixMs();
      PersistNode(n);
      matrix_.SetNode(a->node, true);
      GOS_LOG(kInfo, "coordinator")
          << "node " << a->node << " (" << n.host << ", pid " << n.pid << ") is up again";
      Schedule(after);
      return;
    }
    case Frame::kAgentOutput: {
      auto out = os::DecodeOutput(f.payload);
      if (!out.ok()) return;
      auto jt = jobs_.find(out->job);
      if (jt == jobs_.end()) return;
      if (!jt->second.client) {
        if (jt->second.awaits_client) KeepUnclaimed(jt->second, Frame::kOutput, f.payload);
        return;
      }
      auto ch = jt->second.client->ch;
      auto bytes = std::move(f.payload);
      after.push_back([ch, bytes] { ch->Send(Frame::kOutput, bytes).IgnoreError(); });
      return;
    }
    case Frame::kRankFailed: {
      auto e = os::DecodeJobExit(f.payload);
      if (!e.ok()) return;
      Job* j = FailableOn(e->job, a->node);
      if (j == nullptr) return;
      GOS_LOG(kInfo, "coordinator") << "job " << e->job << ": " << e->message;
      FailAndKill(*j, e->exit_code, e->failed_rank, a->node, "job failed: " + e->message);
      return;
    }
    case Frame::kBrokenDump: {
      // criu died in the middle of a dump here: the job's ranks on that node are frozen and
      // must not run again. Restart it from its newest epoch, as for a lost node, or fail it.
      auto jb = os::DecodeJobBytes(f.payload);
      if (!jb.ok()) return;
      Job* j = FailableOn(jb->first, a->node);
      if (j == nullptr) return;
      const std::string id = std::to_string(jb->first);
      const std::string why = jb->second + "; its ranks there cannot go on";
      GOS_LOG(kWarn, "coordinator") << "job " << id << ": " << why;
      if (RestartsLeft(j->rec) > 0) {
        Notice(*j, "job " + id + ": " + why, after);
        if (RequeueForRestart(*j, "a dump broke", after)) return;
      }
      std::string hint;
      if (auto epochs = store()->ListEpochs(j->rec.id, false); epochs.ok() && !epochs->empty()) {
        hint = RestartHint(j->rec.id, epochs->back().epoch);
      }
      FailAndKill(*j, kNodeFailureExit, -1, a->node, "job failed: " + why + hint);
      return;
    }
    case Frame::kCkptRank:
    case Frame::kCkptFailed: {
      auto jb = os::DecodeJobBytes(f.payload);
      if (!jb.ok()) return;
      const uint32_t node = a->node;
      const Frame type = f.type;
      // The node sends a rank's manifest once the inbox thread took every chunk of it.
      after.push_back([this, node, type, job = jb->first, bytes = std::move(jb->second)] {
        std::lock_guard<std::mutex> lock(mu_);
        auto jt = jobs_.find(job);
        if (jt == jobs_.end() || !jt->second.epoch) return;
        EpochInFlight& e = *jt->second.epoch;
        if (type == Frame::kCkptFailed) {
          if (e.failure.empty()) e.failure = bytes;
          return;
        }
        auto m = storage::DecodeManifest(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
        if (!m.ok() || m->epoch != e.epoch) return;
        for (auto& r : m->ranks) {
          r.node = node;
          e.ranks[r.rank] = std::move(r);
        }
      });
      return;
    }
    case Frame::kRestoreLocalReply:
    case Frame::kRestoreReady: {
      auto m = os::DecodeRestoreReady(f.payload);
      if (!m.ok()) return;
      auto jt = jobs_.find(m->job);
      if (jt == jobs_.end()) return;
      // A restore answers per rank, a replay's log per node (rank = node id); the answer to
      // RESTORE_LOCAL says whether the node had the rank's dump.
      auto& answers =
          f.type == Frame::kRestoreLocalReply ? jt->second.local_ready : jt->second.restore_ready;
      answers[m->rank] = *m;
      restore_cv_.notify_all();
      return;
    }
    case Frame::kReplaySegment: {
      auto m = os::DecodeReplaySegment(f.payload);
      if (!m.ok()) return;
      // Only the current incarnation's segments belong to the log: a run lost to a restart
      // (its survivors ship what they have when they forget it, maybe after the log was cut
      // back for the restored run) is not the job's history any more.
      uint64_t current = 0;
      if (auto jt = jobs_.find(m->job); jt != jobs_.end()) {
        current = jt->second.launch_strobe;
      } else if (auto et = ended_launch_.find(m->job); et != ended_launch_.end()) {
        current = et->second;
      } else {
        current = m->launch;  // ended before this coordinator started: nothing to compare
      }
      if (m->launch != current) {
        GOS_LOG(kInfo, "coordinator")
            << "job " << m->job << ": dropped a replay segment of stream " << m->stream
            << " from node " << a->node << ": it was recorded by the run launched at strobe "
            << m->launch << ", which a restart replaced";
        return;
      }
      auto* rs = tables_->replay();
      const auto* b = reinterpret_cast<const uint8_t*>(m->bytes.data());
      if (Status st = rs->Append(m->job, m->stream, {b, m->bytes.size()}); !st.ok()) {
        GOS_LOG(kWarn, "coordinator") << "job " << m->job << ": replay log: " << st.ToString();
      }
      return;
    }
    case Frame::kAgentRanks: {
      auto m = os::DecodeRankTable(f.payload);
      if (m.ok()) OnAgentRanks(a, std::move(*m), after);
      return;
    }
    case Frame::kReplayStop:
    case Frame::kReplayStopped: {
      auto m = os::DecodeReplayStopped(f.payload);
      if (m.ok()) OnReplayStop(a, std::move(*m), f.type == Frame::kReplayStopped, after);
      return;
    }
    case Frame::kOutputDone: {
      auto job = os::DecodeU64(f.payload);
      if (!job.ok()) return;
      auto jt = jobs_.find(*job);
      if (jt != jobs_.end()) jt->second.output_done.insert(a->node);
      return;
    }
    default:
      return;
  }
}

Job* CoordinatorImpl::FailableOn(uint64_t id, uint32_t node) {
  auto jt = jobs_.find(id);
  if (jt == jobs_.end()) return nullptr;
  Job& j = jt->second;
  if (j.rank_failed || j.kill_requested || j.phase == Phase::kDone ||
      std::find(j.nodes.begin(), j.nodes.end(), node) == j.nodes.end()) {
    return nullptr;
  }
  return &j;
}

void CoordinatorImpl::FailAndKill(Job& j, int32_t exit_code, int32_t rank, uint32_t node,
                                  const std::string& message) {
  j.rank_failed = true;
  j.exit_code = exit_code;
  j.failed_rank = rank;
  j.failed_node = static_cast<int32_t>(node);
  j.rec.message = message;
  os::StrobeCommand cmd;
  cmd.type = os::CommandType::kSignal;
  cmd.job = j.rec.id;
  cmd.signal = SIGKILL;
  Command(cmd);
}

}  // namespace gos::coordinator::internal
