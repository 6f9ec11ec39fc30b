#include "log_cut.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gos/bcs/channel.h"

namespace gos::coordinator {
namespace {

// What the cut needs of rank r's channel as it was dumped for epoch m.
struct Dumped {
  uint64_t rec_head = 0;  // bytes the rank had written into its record ring
};

// From the first bytes of the rank's stored `gos-channel` file (a rank without one is not a
// communicating rank: nothing of it is recorded).
StatusOr<std::optional<Dumped>> DumpedChannel(storage::CheckpointStore* store,
                                              const storage::EpochManifest& m,
                                              const storage::EpochRank& r) {
  const std::string what = "job " + std::to_string(m.job) + " epoch " + std::to_string(m.epoch) +
                           " rank " + std::to_string(r.rank) + ": gos-channel";
  auto f = std::find_if(r.files.begin(), r.files.end(),
                        [](const storage::FileEntry& e) { return e.name == "gos-channel"; });
  if (f == r.files.end()) return std::optional<Dumped>();
  std::vector<uint8_t> head;
  for (const storage::ChunkRef& c : f->chunks) {
    if (head.size() >= sizeof(bcs::ChannelHeader)) break;
    StatusOr<std::vector<uint8_t>> bytes = store->ReadChunk(c);
    if (!bytes.ok()) return bytes.status().WithContext(what);
    head.insert(head.end(), bytes->begin(), bytes->end());
  }
  if (head.size() < sizeof(bcs::ChannelHeader)) {
    return DataLossError(what + " holds " + std::to_string(head.size()) +
                         " bytes, less than a channel header");
  }
  // The header's atomics are lock-free, hence plain memory: reading them from a suitably
  // aligned copy is reading the values.
  alignas(bcs::ChannelHeader) std::byte raw[sizeof(bcs::ChannelHeader)];
  std::memcpy(raw, head.data(), sizeof raw);
  const auto& h = *reinterpret_cast<const bcs::ChannelHeader*>(raw);
  if (h.magic != bcs::kChannelMagic || h.version < bcs::kChannelMinVersion ||
      h.version > bcs::kChannelVersion || h.job != m.job || h.rank != r.rank ||
      h.size != m.ntasks) {
    return DataLossError(what + " is not a version " + std::to_string(bcs::kChannelMinVersion) +
                         " to " + std::to_string(bcs::kChannelVersion) +
                         " channel of that job and rank");
  }
  return std::optional<Dumped>(Dumped{h.rec_head.load(std::memory_order_relaxed)});
}

}  // namespace

StatusOr<replay::RestartMark> CutLogForRestart(storage::CheckpointStore* store,
                                               storage::ReplayStore* logs,
                                               const storage::EpochManifest& m, uint64_t strobe,
                                               int64_t now_us) {
  const std::string where = "the replay log of job " + std::to_string(m.job) +
                            " cut back to epoch " + std::to_string(m.epoch);
  GOS_ASSIGN_OR_RETURN(std::vector<uint32_t> streams, logs->Streams(m.job));
  if (std::find(streams.begin(), streams.end(), replay::kJobStream) == streams.end()) {
    return NotFoundError("job " + std::to_string(m.job) + " has no replay log");
  }
  std::vector<storage::ReplayStreamCut> cuts;
  replay::RestartMark mark;
  mark.epoch = m.epoch;
  mark.strobe = strobe;
  mark.time_us = now_us;
  {
    GOS_ASSIGN_OR_RETURN(std::vector<std::string> segs, logs->Read(m.job, replay::kJobStream));
    StatusOr<replay::StreamCut> c = replay::CutJobStream(segs, &mark, kLogCutZstdLevel);
    if (!c.ok()) return c.status().WithContext(where + ": the job stream");
    cuts.push_back({replay::kJobStream, c->keep, std::move(c->tail)});
  }
  // Every rank's position in its decision stream when it was dumped.
  std::map<uint32_t, uint64_t> rec_bytes;
  for (const storage::EpochRank& r : m.ranks) {
    StatusOr<std::optional<Dumped>> h = DumpedChannel(store, m, r);
    if (!h.ok()) return h.status().WithContext(where);
    if (!h->has_value()) {
      return FailedPreconditionError(where + ": rank " + std::to_string(r.rank) +
                                     " was dumped without a BCS channel, yet the job has a log");
    }
    rec_bytes[r.rank] = (*h)->rec_head;
  }
  for (uint32_t rank = 0; rank < m.ntasks; ++rank) {
    if (!rec_bytes.count(rank)) {
      return DataLossError(where + ": the epoch's manifest has no rank " + std::to_string(rank));
    }
    const std::string rank_where = where + ": rank " + std::to_string(rank);
    const uint32_t decisions = replay::RankStream(rank);
    GOS_ASSIGN_OR_RETURN(std::vector<std::string> segs, logs->Read(m.job, decisions));
    StatusOr<replay::StreamCut> c = replay::CutBytesStream(segs, rec_bytes[rank], kLogCutZstdLevel);
    if (!c.ok()) return c.status().WithContext(rank_where + "'s decision stream");
    if (c->keep != segs.size() || !c->tail.empty()) {
      cuts.push_back({decisions, c->keep, std::move(c->tail)});
    }
    const uint32_t timeline = replay::TimelineStream(rank);
    GOS_ASSIGN_OR_RETURN(segs, logs->Read(m.job, timeline));
    c = replay::CutTimelineStream(segs, mark.steps, kLogCutZstdLevel);
    if (!c.ok()) return c.status().WithContext(rank_where + "'s timeline");
    if (c->keep != segs.size() || !c->tail.empty()) {
      cuts.push_back({timeline, c->keep, std::move(c->tail)});
    }
  }
  GOS_RETURN_IF_ERROR(logs->Cut(m.job, cuts));
  return mark;
}

}  // namespace gos::coordinator
