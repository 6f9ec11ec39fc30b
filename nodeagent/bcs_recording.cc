// The BCS engine's record and replay (docs/specs/replay.md): recording the steps the matcher
// takes, the ranks' decisions and blocked time; imposing a recorded run's steps on a replay
// and stopping it where it ends or diverges.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>

#include "bcs_engine.h"
#include "bcs_engine_impl.h"
#include "gos/bcs/channel.h"
#include "gos/log.h"
#include "gos/replay/matcher_input.h"

namespace gos::nodeagent {
namespace {

// zstd level of the replay log's segments: they are small and few, so compress them well.
constexpr int kLogLevel = 9;

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One step of the record: what the matcher is about to get, and how long each local rank
// was blocked since the last step.
void BcsEngine::Record(uint64_t strobe, Job& j, std::vector<Posted>& all) {
  std::lock_guard<std::mutex> lock(j.rec_mu);
  ++j.steps;
  for (auto& r : j.ranks) {
    // Whole milliseconds (the remainder carries over to the next step): enough for a
    // timeline, and it compresses to a fraction of a byte per step.
    const uint64_t b = r->h->blocked_ns.load(std::memory_order_relaxed);
    const uint64_t ms = (b - r->last_blocked_ns) / 1'000'000;
    r->timeline.push_back(static_cast<uint32_t>(std::min<uint64_t>(ms * 1000, UINT32_MAX)));
    r->last_blocked_ns += ms * 1'000'000;
  }
  if (!j.writer) return;
  std::sort(all.begin(), all.end(), [](const Posted& a, const Posted& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.seq < b.seq;
  });
  replay::Step step;
  step.strobe = strobe;
  step.row = s_->row.load();
  step.early = s_->early;
  step.time_us = UnixMicros();
  step.counts.assign(j.spec.rank_node.size(), 0);
  step.descs.reserve(all.size());
  for (const Posted& p : all) {
    if (p.rank >= step.counts.size()) continue;
    ++step.counts[p.rank];
    step.descs.push_back(replay::KeyOf(p.d));
  }
  j.writer->AddStep(step);
}

// Replay: keeps what the exchange brought and gives the matcher every recorded step whose
// descriptors have all arrived, with the recorded strobe numbers. Every node of the job has
// the same descriptors after an exchange, so every node takes the same steps.
void BcsEngine::ReplaySteps(Job& j, std::vector<Posted>& all) {
  std::sort(all.begin(), all.end(), [](const Posted& a, const Posted& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.seq < b.seq;
  });
  for (Posted& p : all) {
    if (p.rank < j.got.size()) j.got[p.rank].push_back(p);
  }
  const auto& steps = j.plan->log.steps;
  while (!j.stopped && j.steps < steps.size()) {
    const replay::Step& st = steps[j.steps];
    if (j.plan->stop_at != 0 && st.strobe > j.plan->stop_at) {
      ReplayStop stop;
      stop.kind = ReplayStop::Kind::kStopAt;
      stop.strobe = j.steps > 0 ? steps[j.steps - 1].strobe : 0;
      stop.text = "stopped at strobe " + std::to_string(j.plan->stop_at) + " (after step " +
                  std::to_string(j.steps) + " of " + std::to_string(steps.size()) + ")";
      StopReplay(j, stop);
      return;
    }
    bool ready = true;
    for (uint32_t r = 0; r < st.counts.size() && ready; ++r)
      ready = j.got[r].size() >= st.counts[r];
    if (!ready) break;
    StepResult step = replay::MatchStep(
        j.matcher, st,
        [&j](uint32_t r) {
          Posted p = j.got[r].front();
          j.got[r].pop_front();
          return p;
        },
        &j.matcher_strobe);
    for (uint32_t r = 0; r < st.counts.size(); ++r) j.taken[r] += st.counts[r];
    for (const RankCompletion& c : step.completions) {
      if (j.by_rank.count(c.rank)) j.pending[c.rank].push_back(c.c);
    }
    j.scheduler.Add(std::move(step.transfers));
    ++j.steps;
  }
  if (j.stopped || j.steps < steps.size()) return;
  // Every recorded step is taken.
  const uint64_t last = steps.empty() ? 0 : steps.back().strobe;
  if (j.plan->completed) {
    for (auto& r : j.ranks) {
      if (r->h->desc_head.load(std::memory_order_acquire) > j.keys[r->rank].size()) {
        ReplayStop stop;
        stop.kind = ReplayStop::Kind::kDivergence;
        stop.strobe = last;
        stop.rank = static_cast<int32_t>(r->rank);
        stop.text = "rank " + std::to_string(r->rank) + " posted descriptor " +
                    std::to_string(j.keys[r->rank].size()) +
                    " after the end of the recorded run (which had " +
                    std::to_string(j.keys[r->rank].size()) + ")";
        StopReplay(j, stop);
        return;
      }
    }
    return;
  }
  // The recorded run stopped here. A failing rank reports its own stop (gos_abort); else
  // stop once nothing here can move any more.
  if (j.plan->failed_rank >= 0) return;
  if (!j.scheduler.idle()) return;
  for (auto& [rank, list] : j.pending) {
    if (!list.empty()) return;
  }
  for (auto& r : j.ranks) {
    const uint32_t state = r->h->state.load(std::memory_order_acquire);
    const bool waiting =
        state == bcs::kStateBlocked && r->h->compl_tail.load(std::memory_order_acquire) ==
                                           r->h->compl_head.load(std::memory_order_relaxed);
    if (!waiting && state != bcs::kStateFinalized && state < bcs::kStateAborted && !r->exited) {
      return;
    }
  }
  ReplayStop stop;
  stop.kind = ReplayStop::Kind::kLogEnd;
  stop.strobe = last;
  stop.text = "the recording ends at strobe " + std::to_string(last) + " (step " +
              std::to_string(steps.size()) + "): the recorded run stopped there";
  StopReplay(j, stop);
}

void BcsEngine::StopReplay(Job& j, ReplayStop stop) {
  if (j.stopped.exchange(true)) return;
  stop.job = j.spec.job;
  GOS_LOG(kInfo, "bcs") << "job " << j.spec.job << ": replay stops: " << stop.text;
  if (o_.on_replay_stop) o_.on_replay_stop(stop);
}

void BcsEngine::DrainDecisions(Job& j) {
  std::lock_guard<std::mutex> lock(j.rec_mu);
  for (auto& r : j.ranks) {
    bcs::ChannelHeader* h = r->h;
    const uint64_t head = h->rec_head.load(std::memory_order_acquire);
    uint64_t tail = h->rec_tail.load(std::memory_order_relaxed);
    if (head == tail) continue;
    if (head - tail > bcs::kRecBytes) tail = head - bcs::kRecBytes;  // corrupt: keep the newest
    const unsigned char* ring = bcs::RecRing(r->base);
    while (tail != head) {
      const size_t at = tail % bcs::kRecBytes;
      const size_t n = std::min<uint64_t>(head - tail, bcs::kRecBytes - at);
      r->decisions.append(reinterpret_cast<const char*>(ring + at), n);
      tail += n;
    }
    h->rec_tail.store(tail, std::memory_order_seq_cst);  // spec 5, Doorbells
    r->RoomFreed();                                      // a rank waiting for room
  }
}

std::vector<RecordSegment> BcsEngine::TakeRecord(uint64_t job) {
  std::vector<RecordSegment> out;
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr || !j->spec.record) return out;
  DrainDecisions(*j);
  std::lock_guard<std::mutex> lock(j->rec_mu);
  if (j->writer) {
    std::string seg = j->writer->Flush(kLogLevel);
    if (!seg.empty()) out.push_back({replay::kJobStream, std::move(seg)});
  }
  for (auto& r : j->ranks) {
    if (!r->decisions.empty()) {
      out.push_back(
          {replay::RankStream(r->rank), replay::EncodeBytesSegment(r->decisions, kLogLevel)});
      r->decisions.clear();
    }
    if (!r->timeline.empty()) {
      out.push_back(
          {replay::TimelineStream(r->rank), replay::EncodeTimelineSegment(r->timeline, kLogLevel)});
      r->timeline.clear();
    }
  }
  return out;
}

size_t BcsEngine::RecordPending(uint64_t job) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr || !j->spec.record) return 0;
  std::lock_guard<std::mutex> lock(j->rec_mu);
  // Empty steps cost almost no bytes; a segment must still not grow without bound.
  size_t n = j->writer ? j->writer->pending_bytes() + j->writer->pending_steps() * 16 : 0;
  for (auto& r : j->ranks) n += r->decisions.size() + r->timeline.size() * 2;
  return n;
}

void BcsEngine::MarkCheckpoint(uint64_t job, uint64_t epoch) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr || !j->spec.record) return;
  std::lock_guard<std::mutex> lock(j->rec_mu);
  if (!j->writer) return;
  replay::CheckpointMark m;
  m.epoch = epoch;
  m.steps = j->steps;
  m.strobe = s_->strobe.load();
  m.time_us = UnixMicros();
  j->writer->AddCheckpoint(m);
}

pid_t BcsEngine::RankPidOf(uint64_t job, uint32_t rank) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr) return 0;
  auto rt = j->by_rank.find(rank);
  if (rt == j->by_rank.end()) return 0;
  pid_t init = rt->second->init_pid.load();
  if (init <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(init) + "/task/" + std::to_string(init) + "/children");
  long pid = 0;
  return in >> pid ? static_cast<pid_t>(pid) : 0;
}

uint64_t BcsEngine::ReplayedStrobe(uint64_t job) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr || !j->plan) return 0;
  const uint64_t taken = j->steps.load();
  const auto& steps = j->plan->log.steps;
  return taken > 0 && taken <= steps.size() ? steps[taken - 1].strobe : 0;
}

bool BcsEngine::StopReplayOf(uint64_t job, ReplayStop stop) {
  std::shared_ptr<Job> j = FindJob(job);
  if (j == nullptr || !j->plan || j->stopped.load()) return false;
  StopReplay(*j, std::move(stop));
  return true;
}

}  // namespace gos::nodeagent
