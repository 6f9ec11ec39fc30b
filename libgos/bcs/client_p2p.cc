// The rank side: requests, point-to-point posting (send, receive, cancel) and probes
// (client_impl.h). A call turns into a descriptor on the channel; its completion comes back
// from the nodeagent at a strobe.
#include <cstdlib>
#include <cstring>
#include <new>
#include <tuple>

#include "client_impl.h"

namespace gos::bcs::internal {

namespace {

uint64_t NewRequest(Kind kind, const gos_comm_t* comm) {
  State& s = S();
  const uint64_t id = s.next_id++;
  Request& r = s.requests[id];
  r.kind = kind;
  if (comm != nullptr) r.comm = *comm;
  return id;
}

int WorldToComm(const gos_comm_t& c, int w) {
  if (w < 0 || w >= S().size) return -1;
  if (c.world == nullptr) return w;
  if (c.world_to_comm != nullptr) return c.world_to_comm[w];
  for (int i = 0; i < c.size; ++i) {
    if (c.world[i] == w) return i;
  }
  return -1;
}

void FillStatus(const Request& r, gos_status_t* st) {
  if (st == nullptr) return;
  if (r.kind == Kind::kSend) {
    *st = gos_status_t{-1, -1, 0, r.agent_done ? MapError(r.c.error) : GOS_OK};
    if (r.agent_done && (r.c.flags & kComplCancelled) != 0) st->cancelled = 1;
    return;
  }
  *st = gos_status_t{WorldToComm(r.comm, r.c.source), r.c.tag, static_cast<size_t>(r.c.len),
                     MapError(r.c.error)};
  if (r.agent_done && (r.c.flags & kComplCancelled) != 0) {
    st->source = -1;
    st->tag = -1;
    st->cancelled = 1;
  }
}

}  // namespace

int CheckComm(const gos_comm_t* c) {
  if (c == nullptr || c->size <= 0 || c->rank < 0 || c->rank >= c->size) return GOS_ERR_ARG;
  if (c->world == nullptr && c->size != S().size) return GOS_ERR_ARG;
  return GOS_OK;
}

int32_t CommToWorld(const gos_comm_t& c, int r) { return c.world != nullptr ? c.world[r] : r; }

void EmptyStatus(gos_status_t* st) {
  if (st != nullptr) *st = gos_status_t{-1, -1, 0, GOS_OK};
}

// Hands a user-visible-complete request back to the user: fills st, drops it (or, for an
// eager send still owed a completion, marks it released). Returns the request's error.
int Reap(uint64_t id, gos_status_t* st) {
  State& s = S();
  auto it = s.requests.find(id);
  Request& r = it->second;
  FillStatus(r, st);
  const int err = r.agent_done ? MapError(r.c.error) : GOS_OK;
  if (r.agent_done) {
    s.requests.erase(it);
  } else {
    r.released = true;
  }
  return err;
}

// The user request `id`, or nullptr if it is not one.
Request* UserRequest(uint64_t id) {
  State& s = S();
  auto it = s.requests.find(id);
  if (it == s.requests.end() || it->second.released || it->second.kind == Kind::kInternal) {
    return nullptr;
  }
  return &it->second;
}

int StartSend(const void* buf, size_t len, int dest, int tag, const gos_comm_t* comm, int flags,
              uint64_t* id) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if ((buf == nullptr && len > 0) || id == nullptr) return GOS_ERR_ARG;
  if (dest < 0 || dest >= comm->size) return GOS_ERR_RANK;
  if (tag < 0) return GOS_ERR_TAG;
  State& s = S();
  Progress();  // keeps eager copies from piling up in programs that never wait
  Descriptor d;
  d.context = comm->ctx;
  d.len = len;
  d.op = static_cast<uint32_t>(Op::kSend);
  d.peer = CommToWorld(*comm, dest);
  d.tag = tag;
  const bool eager = (flags & GOS_SEND_SYNC) == 0 && len <= s.eager_bytes;
  void* copy = nullptr;
  if (eager && len > 0) {
    copy = malloc(len);
    if (copy == nullptr) throw std::bad_alloc();
    memcpy(copy, buf, len);
  }
  d.req = NewRequest(Kind::kSend, comm);
  Request& r = s.requests[d.req];
  r.peer = d.peer;
  r.tag = tag;
  if (eager) {
    r.eager = true;
    r.copy = copy;
    ++s.eager_pending;
    d.addr = reinterpret_cast<uint64_t>(copy);
  } else {
    d.addr = reinterpret_cast<uint64_t>(buf);
    if ((flags & GOS_SEND_SYNC) != 0) d.flags |= kFlagSync;
  }
  Post(d);
  *id = d.req;
  return GOS_OK;
}

int StartRecv(void* buf, size_t len, int source, int tag, const gos_comm_t* comm, uint64_t* id) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if ((buf == nullptr && len > 0) || id == nullptr) return GOS_ERR_ARG;
  if (source != GOS_ANY_SOURCE && (source < 0 || source >= comm->size)) return GOS_ERR_RANK;
  if (tag < 0 && tag != GOS_ANY_TAG) return GOS_ERR_TAG;
  Progress();
  Descriptor d;
  d.req = NewRequest(Kind::kRecv, comm);
  d.context = comm->ctx;
  d.addr = reinterpret_cast<uint64_t>(buf);
  d.len = len;
  d.op = static_cast<uint32_t>(Op::kRecv);
  d.peer = source == GOS_ANY_SOURCE ? kAnySource : CommToWorld(*comm, source);
  d.tag = tag == GOS_ANY_TAG ? kAnyTag : tag;
  Post(d);
  *id = d.req;
  return GOS_OK;
}

int Cancel(const gos_request_t* req) {
  if (req == nullptr) return GOS_ERR_ARG;
  if (*req == GOS_REQUEST_NULL) return GOS_OK;
  if (!Ready()) return GOS_ERR_NOT_INIT;
  Request* r = UserRequest(*req);
  if (r == nullptr) return GOS_ERR_REQUEST;
  // An eager send is complete for the user from the start: nothing left to cancel.
  if ((r->kind != Kind::kRecv && r->kind != Kind::kSend) || r->UserDone() || r->cancel_posted) {
    return GOS_OK;
  }
  r->cancel_posted = true;
  Descriptor d;
  d.req = *req;
  d.op = static_cast<uint32_t>(Op::kCancel);
  Post(d);
  return GOS_OK;
}

// Posts an internal descriptor (probe or collective) and waits for its completion.
int RunInternal(Descriptor d, const gos_comm_t* comm, Completion* out) {
  State& s = S();
  const uint64_t id = NewRequest(Kind::kInternal, comm);
  d.req = id;
  Post(d);
  BlockUntil([&] { return s.requests.at(id).agent_done; });
  const Completion c = s.requests.at(id).c;
  s.requests.erase(id);
  if (out != nullptr) *out = c;
  return MapError(c.error);
}

int Iprobe(int source, int tag, const gos_comm_t* comm, int* flag, gos_status_t* st) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if (flag == nullptr) return GOS_ERR_ARG;
  if (source != GOS_ANY_SOURCE && (source < 0 || source >= comm->size)) return GOS_ERR_RANK;
  if (tag < 0 && tag != GOS_ANY_TAG) return GOS_ERR_TAG;
  State& s = S();
  *flag = 0;
  Progress();
  const int32_t peer = source == GOS_ANY_SOURCE ? kAnySource : CommToWorld(*comm, source);
  const auto key = std::make_tuple(peer, tag, comm->ctx);
  auto p = s.probes.find(key);
  if (p != s.probes.end()) {
    // Whether the outstanding probe's answer has arrived is timing: a decision.
    const uint64_t pid = p->second;
    const uint32_t mode = ModeNow();
    if (mode == kModeReplay) {
      if (!ReplayedFlag(kCallIprobe)) return GOS_OK;
      BlockUntil([pid] { return S().requests.at(pid).agent_done; });
    } else {
      const bool answered = s.requests.at(pid).agent_done;
      Decide(kCallIprobe, answered ? 1 : 0, mode);
      if (!answered) return GOS_OK;
    }
    auto it = s.requests.find(pid);
    const Request r = it->second;
    s.requests.erase(it);
    s.probes.erase(p);
    if ((r.c.flags & kComplFound) != 0 || r.c.error != kOk) {
      *flag = (r.c.flags & kComplFound) != 0 ? 1 : 0;
      FillStatus(r, st);
      return MapError(r.c.error);
    }
    // "Not found": ask again at once, so the next call gets an answer one strobe sooner.
  }
  Descriptor d;
  d.req = NewRequest(Kind::kInternal, comm);
  d.context = comm->ctx;
  d.op = static_cast<uint32_t>(Op::kProbe);
  d.peer = peer;
  d.tag = tag == GOS_ANY_TAG ? kAnyTag : tag;
  d.flags = kFlagNonBlocking;
  s.probes[key] = d.req;
  Post(d);
  return GOS_OK;
}

int Probe(int source, int tag, const gos_comm_t* comm, gos_status_t* st) {
  if (!Ready()) return GOS_ERR_NOT_INIT;
  if (int e = CheckComm(comm); e != GOS_OK) return e;
  if (source != GOS_ANY_SOURCE && (source < 0 || source >= comm->size)) return GOS_ERR_RANK;
  if (tag < 0 && tag != GOS_ANY_TAG) return GOS_ERR_TAG;
  Descriptor d;
  d.context = comm->ctx;
  d.op = static_cast<uint32_t>(Op::kProbe);
  d.peer = source == GOS_ANY_SOURCE ? kAnySource : CommToWorld(*comm, source);
  d.tag = tag == GOS_ANY_TAG ? kAnyTag : tag;
  Completion c;
  const int err = RunInternal(d, comm, &c);
  if (st != nullptr) {
    *st = gos_status_t{WorldToComm(*comm, c.source), c.tag, static_cast<size_t>(c.len), err};
  }
  return err;
}

}  // namespace gos::bcs::internal
