// Private to the BCS engine: its per-job and per-rank state, shared by bcs_engine.cc (the
// exchange, matching and data movement) and bcs_recording.cc (recording a job's decisions and
// imposing a recorded run on a replay).
#ifndef GOS_NODEAGENT_BCS_ENGINE_IMPL_H_
#define GOS_NODEAGENT_BCS_ENGINE_IMPL_H_

#include <sys/mman.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bcs_engine.h"
#include "gos/bcs/channel.h"
#include "gos/bcs/matcher.h"
#include "gos/os/layout.h"
#include "gos/replay/log.h"

namespace gos::nodeagent {
namespace internal {

class CopyThread;  // bcs_engine.cc

// A job round's id: 2^63 + the job's round count on this node (spec 6, version 2).
inline constexpr uint64_t kJobRound = uint64_t{1} << 63;

// Increments a futex word and wakes its waiters.
void Bump(std::atomic<uint32_t>* word);

}  // namespace internal

struct BcsEngine::Rank {
  uint32_t rank = 0;
  std::string path;
  void* base = nullptr;
  bcs::ChannelHeader* h = nullptr;
  std::atomic<pid_t> init_pid{0};
  pid_t pid = 0;  // the rank itself, resolved lazily (strobe thread)
  std::atomic<bool> exited{false};
  uint64_t consumed = 0;  // descriptors drained (== desc_tail)
  // A version 2 channel (restored from a checkpoint) has no `room_wait`: its rank is woken
  // after every freeing of ring room, as version 2 did (spec 5).
  bool wake_on_any_room = false;

  // After freeing descriptor slots or record bytes (the tail stored seq_cst): bumps `wake` if
  // the rank waits for room. The seq_cst load pairs with the rank's (spec 5, Doorbells).
  void RoomFreed() const {
    if (wake_on_any_room || h->room_wait.load(std::memory_order_seq_cst) != 0) {
      internal::Bump(&h->wake);
    }
  }
  // Record: decision-log bytes drained from the record ring and blocked time per step, not
  // yet taken (under Job::rec_mu).
  std::string decisions;
  std::vector<uint32_t> timeline;
  uint64_t last_blocked_ns = 0;
  std::atomic<bool> stop_reported{false};  // replay: this rank's stop was reported

  ~Rank() {
    if (base != nullptr) ::munmap(base, bcs::kChannelBytes);
  }
};

struct BcsEngine::Job {
  BcsJob spec;
  std::vector<uint32_t> nodes;  // the job's nodes, ascending
  uint32_t position = 0;        // this node's index in nodes
  std::vector<std::unique_ptr<Rank>> ranks;
  std::map<uint32_t, Rank*> by_rank;
  Matcher matcher;
  Scheduler scheduler;
  std::map<uint32_t, std::vector<bcs::Completion>> pending;  // per local rank, in order
  std::atomic<bool> work{false};  // pending completions or transfers (read by the bell thread)
  std::atomic<bool> held{false};  // Hold: invisible to OnStrobe and the bell thread
  bool broken = false;            // a peer failed us: no more exchanges
  bool broken_reported = false;   // on_broken was called
  std::string error;              // why it broke
  uint64_t last_strobe = 0;
  uint64_t job_rounds = 0;  // job rounds taken on this node (spec 6), under State::round_mu

  // Record (spec.record): the job stream is written by the job's first node only.
  std::mutex rec_mu;
  std::unique_ptr<replay::JobLogWriter> writer;
  std::atomic<uint64_t> steps{0};  // slices taken (record) / recorded steps imposed (replay)

  // Replay (spec.replay).
  std::shared_ptr<const ReplayPlan> plan;
  std::vector<std::vector<replay::DescKey>> keys;  // per rank: recorded descriptors, seq order
  std::vector<uint64_t> taken;                     // per rank: descriptors given to the matcher
  std::vector<std::deque<Posted>> got;             // per rank: exchanged, not yet given
  uint64_t matcher_strobe = 0;                     // the last strobe given to the matcher
  std::atomic<bool> stopped{false};

  explicit Job(const BcsJob& s)
      : spec(s),
        matcher(static_cast<uint32_t>(s.rank_node.size())),
        scheduler(s.rank_node,
                  SchedulerOptions{os::kBcsInboxBytes, os::kBcsOutboxBytes, 64u << 20}) {}
};

struct BcsEngine::State {
  std::mutex mu;
  std::map<uint64_t, std::shared_ptr<Job>> jobs;
  std::atomic<uint32_t> ctl{0};  // bumped to make the bell thread look again
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> strobe{0};   // being applied
  std::atomic<uint64_t> applied{0};  // slice work done (what blocked reports carry)
  std::atomic<uint32_t> row{0};
  bool early = false;  // the current round is early (under round_mu)
  // Held by whoever runs rounds: the strobe thread while it applies a strobe, the bell thread
  // for a job round (spec 6, "Job rounds").
  std::mutex round_mu;
  // The round being run (under round_mu): its strobe, or kJobRound + n for a job round; the
  // rank side sees it in ChannelHeader::strobe and the round trace.
  uint64_t round_id = 0;
  std::thread bell;
  std::vector<std::byte> bounce;  // under round_mu
  // Made at the first split copy (under round_mu).
  std::unique_ptr<internal::CopyThread> copier;
};

}  // namespace gos::nodeagent

#endif  // GOS_NODEAGENT_BCS_ENGINE_IMPL_H_
