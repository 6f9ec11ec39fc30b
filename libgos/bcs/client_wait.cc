// The rank side: completion (client_impl.h). Wait, test, testany, waitany and progress_wait;
// the outcomes that depend on timing are decisions (client_record.cc).
#include "client_impl.h"

namespace gos::bcs::internal {

namespace {

// Validates the requests of testany/waitany. *active counts the non-null ones; *timing says
// whether the outcome can depend on timing: some active non-eager request comes before the
// first active eager send (which is complete from the start, so a scan never passes it).
int CheckAny(int n, const gos_request_t* reqs, int* active, bool* timing) {
  *active = 0;
  *timing = false;
  bool eager = false;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == GOS_REQUEST_NULL) continue;
    if (!Ready()) return GOS_ERR_NOT_INIT;
    const Request* r = UserRequest(reqs[i]);
    if (r == nullptr) return GOS_ERR_REQUEST;
    ++*active;
    if (r->eager) {
      eager = true;
    } else if (!eager) {
      *timing = true;
    }
  }
  return GOS_OK;
}

// The first request complete for the user, or -1.
int FirstDone(int n, const gos_request_t* reqs) {
  for (int i = 0; i < n; ++i) {
    if (reqs[i] != GOS_REQUEST_NULL && S().requests.at(reqs[i]).UserDone()) return i;
  }
  return -1;
}

int ReapAt(int i, gos_request_t* reqs, int* index, gos_status_t* st) {
  *index = i;
  const uint64_t id = reqs[i];
  reqs[i] = GOS_REQUEST_NULL;
  return Reap(id, st);
}

void BlockUntilDone(uint64_t id) {
  BlockUntil([id] { return S().requests.at(id).UserDone(); });
}

}  // namespace

int Wait(gos_request_t* req, gos_status_t* st) {
  if (req == nullptr) return GOS_ERR_ARG;
  if (*req == GOS_REQUEST_NULL) {
    EmptyStatus(st);
    return GOS_OK;
  }
  if (!Ready()) return GOS_ERR_NOT_INIT;
  const uint64_t id = *req;
  if (UserRequest(id) == nullptr) return GOS_ERR_REQUEST;
  BlockUntil([id] { return S().requests.at(id).UserDone(); });
  *req = GOS_REQUEST_NULL;
  return Reap(id, st);
}

int Test(gos_request_t* req, int* flag, gos_status_t* st) {
  if (req == nullptr || flag == nullptr) return GOS_ERR_ARG;
  *flag = 0;
  if (*req == GOS_REQUEST_NULL) {
    *flag = 1;
    EmptyStatus(st);
    return GOS_OK;
  }
  if (!Ready()) return GOS_ERR_NOT_INIT;
  const Request* r = UserRequest(*req);
  if (r == nullptr) return GOS_ERR_REQUEST;
  const uint64_t id = *req;
  Progress();
  // An eager send is complete from the start: no decision.
  if (!r->eager) {
    const uint32_t mode = ModeNow();
    if (mode == kModeReplay) {
      if (!ReplayedFlag(kCallTest)) return GOS_OK;  // even if it is done: not reaped
      BlockUntil([id] { return S().requests.at(id).UserDone(); });
    } else {
      const bool done = r->UserDone();
      Decide(kCallTest, done ? 1 : 0, mode);
      if (!done) return GOS_OK;
    }
  }
  *flag = 1;
  *req = GOS_REQUEST_NULL;
  return Reap(id, st);
}

int Testany(int n, gos_request_t* reqs, int* index, int* flag, gos_status_t* st) {
  if (n < 0 || (n > 0 && reqs == nullptr) || index == nullptr || flag == nullptr) {
    return GOS_ERR_ARG;
  }
  *flag = 0;
  *index = GOS_UNDEFINED_INDEX;
  int active = 0;
  bool timing = false;
  if (int e = CheckAny(n, reqs, &active, &timing); e != GOS_OK) return e;
  if (active == 0) {
    *flag = 1;
    EmptyStatus(st);
    return GOS_OK;
  }
  Progress();
  int i = -1;
  const uint32_t mode = timing ? ModeNow() : kModeOff;
  if (timing && mode == kModeReplay) {
    const uint64_t v = Replayed(kCallTestany);
    if (v == 0) return GOS_OK;
    i = ReplayedIndex(kCallTestany, v - 1, n, reqs);
    BlockUntilDone(reqs[i]);
  } else {
    i = FirstDone(n, reqs);
    if (timing) Decide(kCallTestany, i < 0 ? 0 : static_cast<uint64_t>(i) + 1, mode);
    if (i < 0) return GOS_OK;
  }
  *flag = 1;
  return ReapAt(i, reqs, index, st);
}

int Waitany(int n, gos_request_t* reqs, int* index, gos_status_t* st) {
  if (n < 0 || (n > 0 && reqs == nullptr) || index == nullptr) return GOS_ERR_ARG;
  *index = GOS_UNDEFINED_INDEX;
  int active = 0;
  bool timing = false;
  if (int e = CheckAny(n, reqs, &active, &timing); e != GOS_OK) return e;
  if (active == 0) {
    EmptyStatus(st);
    return GOS_OK;
  }
  // With one active request (or an eager send first) the answer is forced.
  const bool decision = timing && active > 1;
  if (decision && ModeNow() == kModeReplay) {
    const int i = ReplayedIndex(kCallWaitany, Replayed(kCallWaitany), n, reqs);
    BlockUntilDone(reqs[i]);
    return ReapAt(i, reqs, index, st);
  }
  BlockUntil([&] { return FirstDone(n, reqs) >= 0; });
  // The mode again: the rank may have been checkpointed while blocked and restored to replay.
  const uint32_t mode = decision ? ModeNow() : kModeOff;
  if (decision && mode == kModeReplay) {
    const int i = ReplayedIndex(kCallWaitany, Replayed(kCallWaitany), n, reqs);
    BlockUntilDone(reqs[i]);
    return ReapAt(i, reqs, index, st);
  }
  const int i = FirstDone(n, reqs);
  if (decision) Decide(kCallWaitany, static_cast<uint64_t>(i), mode);
  return ReapAt(i, reqs, index, st);
}

int ProgressWait() {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  // In replay every outcome is imposed, so there is nothing to wait for: the caller's next
  // test blocks if the recording says it succeeded.
  if (ModeNow() == kModeReplay) {
    Progress();
    return GOS_OK;
  }
  if (Progress() > 0) return GOS_OK;
  ChannelHeader* h = S().h;
  FlushRun(true);
  const int64_t t0 = MonotonicNs();
  const uint32_t w = h->wake.load(std::memory_order_acquire);
  TraceHop(round_trace::Hop::kRankBlock, 1);
  SetState(kStateBlocked);
  if (Progress() == 0) {
    FutexWait(h->wake, w, kBlockTimeoutNs);
    TraceHop(round_trace::Hop::kRankWake, 0);
  }
  SetState(kStateRunning);
  AddBlocked(t0);
  Progress();
  TraceHop(round_trace::Hop::kRankResume, 0);
  return GOS_OK;
}

}  // namespace gos::bcs::internal
