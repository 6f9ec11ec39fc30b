// Requests (MPI 4.1, 3.7-3.9): the request table and its completion engine (the compound
// requests of nonblocking collectives included), the wait and test families, cancellation,
// MPI_Request_free, and persistent requests.
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "datatype.h"
#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::Active_Request_free;
using gos::mpi::internal::Fail;
using gos::mpi::internal::FindComm;
using gos::mpi::internal::FindRequest;
using gos::mpi::internal::FindType;
using gos::mpi::internal::FromGos;
using gos::mpi::internal::kFirstPersistent;
using gos::mpi::internal::Persistent;
using gos::mpi::internal::ReleaseRequest;
using gos::mpi::internal::Request;
using gos::mpi::internal::S;
using gos::mpi::internal::SetEmptyStatus;
using gos::mpi::internal::SetStatus;
using gos::mpi::internal::StartBsend;
using gos::mpi::internal::StartRecv;
using gos::mpi::internal::StartSend;
using gos::mpi::internal::WaitOne;

// gos releases a request that completed with an error (e.g. GOS_ERR_TRUNCATE) and returns
// that error; keep it in the status so Finish reports it like any other outcome.
void NoteCompletion(Request* q, int err) {
  q->done = true;
  if (err != GOS_OK && q->st.error == GOS_OK) q->st.error = err;
}

int Poll(Request* q);
int WaitDone(Request* q);
int Finish(MPI_Request r, MPI_Status* status);

// A compound request whose parts are all done: releases them and runs on_done.
void FinishCompound(Request* q) {
  int err = MPI_SUCCESS;
  std::vector<MPI_Request> parts = std::move(q->parts);
  std::function<int()> done = std::move(q->on_done);
  for (size_t i = 0; i < parts.size(); ++i) {
    MPI_Status st{};
    const bool keep = static_cast<int>(i) == q->status_part;
    const int e = Finish(parts[i], keep ? &st : MPI_STATUS_IGNORE);
    if (keep) {
      q->st.source = st.MPI_SOURCE;
      q->st.tag = st.MPI_TAG;
      q->st.len = st.gos_bytes;
      q->st.cancelled = st.gos_cancelled;
    }
    if (err == MPI_SUCCESS) err = e;
  }
  if (err == MPI_SUCCESS && done) err = done();
  q->compound_error = err;
  q->done = true;
}

// Marks a request done once gos reports it complete; never blocks.
int Poll(Request* q) {
  if (q->done) return MPI_SUCCESS;
  if (q->compound) {
    for (MPI_Request p : q->parts) {
      Request* pq = &S().reqs[static_cast<size_t>(p - 1)];
      if (int e = Poll(pq)) return e;
      if (!pq->done) return MPI_SUCCESS;
    }
    FinishCompound(q);
    return MPI_SUCCESS;
  }
  int flag = 0;
  const int err = gos_test(&q->g, &flag, &q->st);
  if (flag) {
    NoteCompletion(q, err);
    return MPI_SUCCESS;
  }
  return FromGos(err);
}

int WaitDone(Request* q) {
  if (q->done) return MPI_SUCCESS;
  if (q->compound) {
    for (MPI_Request p : q->parts) {
      if (int e = WaitDone(&S().reqs[static_cast<size_t>(p - 1)])) return e;
    }
    FinishCompound(q);
    return MPI_SUCCESS;
  }
  const int err = gos_wait(&q->g, &q->st);
  if (q->g == GOS_REQUEST_NULL) {
    NoteCompletion(q, err);
    return MPI_SUCCESS;
  }
  return FromGos(err);
}

// The outcome of a completed request: unpacks a staged receive (once), fills `status`.
// Returns the operation's error (MPI_ERR_TRUNCATE for a too-long message). The request stays.
int Outcome(Request* q, MPI_Status* status) {
  if (q->unpack) {
    gos::mpi::Unpack(q->tmp.data(), std::min(q->st.len, q->tmp.size()), q->count, *q->type,
                     q->user_buf);
    q->unpack = false;
  }
  int err = q->compound ? q->compound_error : FromGos(q->st.error);
  SetStatus(status, q->proc_null ? MPI_PROC_NULL : q->st.source,
            q->proc_null ? MPI_ANY_TAG : q->st.tag, err, q->st.len, q->st.cancelled);
  return err;
}

// Finishes a completed request: its Outcome, then the request is released.
int Finish(MPI_Request r, MPI_Status* status) {
  const int err = Outcome(&S().reqs[static_cast<size_t>(r - 1)], status);
  ReleaseRequest(r);
  return err;
}

int Active_Wait(MPI_Request* request, MPI_Status* status) {
  if (request == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Wait", MPI_ERR_REQUEST);
  if (*request == MPI_REQUEST_NULL) {
    SetEmptyStatus(status, MPI_ANY_SOURCE);
    return MPI_SUCCESS;
  }
  Request* q = FindRequest(*request);
  if (q == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Wait", MPI_ERR_REQUEST);
  const MPI_Comm comm = q->comm;
  const MPI_Request r = *request;
  *request = MPI_REQUEST_NULL;
  GOS_MPI_CHECK(comm, "MPI_Wait", WaitOne(r, status));
  return MPI_SUCCESS;
}

// MPI_Test's and MPI_Request_get_status's look at request `r`: *flag tells whether it is
// complete (MPI_REQUEST_NULL is, with an empty status); *done is the completed request, else
// nullptr.
int PollOne(const char* fn, MPI_Request r, int* flag, MPI_Status* status, Request** done) {
  *done = nullptr;
  if (r == MPI_REQUEST_NULL) {
    *flag = 1;
    SetEmptyStatus(status, MPI_ANY_SOURCE);
    return MPI_SUCCESS;
  }
  Request* q = FindRequest(r);
  if (q == nullptr) return Fail(MPI_COMM_WORLD, fn, MPI_ERR_REQUEST);
  GOS_MPI_CHECK(q->comm, fn, Poll(q));
  *flag = q->done ? 1 : 0;
  if (q->done) *done = q;
  return MPI_SUCCESS;
}

int Active_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (request == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Test", MPI_ERR_REQUEST);
  Request* q = nullptr;
  if (int e = PollOne("MPI_Test", *request, flag, status, &q)) return e;
  if (q == nullptr) return MPI_SUCCESS;
  const MPI_Comm comm = q->comm;
  const MPI_Request r = *request;
  *request = MPI_REQUEST_NULL;
  GOS_MPI_CHECK(comm, "MPI_Test", Finish(r, status));
  return MPI_SUCCESS;
}

// MPI_Test without the release: a completed request keeps its outcome for the call that
// finishes it.
int Active_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  static const char* const kFn = "MPI_Request_get_status";
  if (flag == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  Request* q = nullptr;
  if (int e = PollOne(kFn, request, flag, status, &q)) return e;
  if (q != nullptr) GOS_MPI_CHECK(q->comm, kFn, Outcome(q, status));
  return MPI_SUCCESS;
}

// Validates a request array: every entry is MPI_REQUEST_NULL or a live request.
int CheckRequests(int count, const MPI_Request* requests) {
  if (count < 0) return MPI_ERR_COUNT;
  if (count > 0 && requests == nullptr) return MPI_ERR_REQUEST;
  for (int i = 0; i < count; ++i) {
    if (requests[i] != MPI_REQUEST_NULL && FindRequest(requests[i]) == nullptr) {
      return MPI_ERR_REQUEST;
    }
  }
  return MPI_SUCCESS;
}

// Finishes requests[i] (done), storing the status; reports errors via `*failed_comm`.
int FinishAt(MPI_Request* requests, int i, MPI_Status* status, MPI_Comm* failed_comm) {
  const MPI_Request r = requests[i];
  const MPI_Comm comm = S().reqs[static_cast<size_t>(r - 1)].comm;
  requests[i] = MPI_REQUEST_NULL;
  int err = Finish(r, status);
  if (err != MPI_SUCCESS && *failed_comm == MPI_COMM_NULL) *failed_comm = comm;
  return err;
}

int Active_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  static const char* const kFn = "MPI_Waitall";
  GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, CheckRequests(count, requests));
  MPI_Comm failed = MPI_COMM_NULL;
  int first = MPI_SUCCESS;
  bool any_error = false;
  for (int i = 0; i < count; ++i) {
    MPI_Status* st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    if (requests[i] == MPI_REQUEST_NULL) {
      SetEmptyStatus(st, MPI_ANY_SOURCE);
      continue;
    }
    Request* q = FindRequest(requests[i]);
    int err = WaitDone(q);
    if (err != MPI_SUCCESS) {
      if (failed == MPI_COMM_NULL) failed = q->comm;
    } else {
      err = FinishAt(requests, i, st, &failed);
    }
    if (err != MPI_SUCCESS) {
      any_error = true;
      if (first == MPI_SUCCESS) first = err;
    }
  }
  if (!any_error) return MPI_SUCCESS;
  return Fail(failed, kFn, statuses == MPI_STATUSES_IGNORE ? first : MPI_ERR_IN_STATUS);
}

int Active_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  static const char* const kFn = "MPI_Testall";
  GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, CheckRequests(count, requests));
  // MPI: unless all are complete, no request is released; completions seen meanwhile are
  // kept in the requests (Poll) until then.
  bool all = true;
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    Request* q = FindRequest(requests[i]);
    GOS_MPI_CHECK(q->comm, kFn, Poll(q));
    if (!q->done) all = false;
  }
  *flag = all ? 1 : 0;
  if (!all) return MPI_SUCCESS;
  MPI_Comm failed = MPI_COMM_NULL;
  int first = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) {
    MPI_Status* st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    if (requests[i] == MPI_REQUEST_NULL) {
      SetEmptyStatus(st, MPI_ANY_SOURCE);
      continue;
    }
    int err = FinishAt(requests, i, st, &failed);
    if (first == MPI_SUCCESS) first = err;
  }
  if (first == MPI_SUCCESS) return MPI_SUCCESS;
  return Fail(failed, kFn, statuses == MPI_STATUSES_IGNORE ? first : MPI_ERR_IN_STATUS);
}

int Active_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  static const char* const kFn = "MPI_Testany";
  GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, CheckRequests(count, requests));
  *index = MPI_UNDEFINED;
  bool any_active = false;
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    any_active = true;
    Request* q = FindRequest(requests[i]);
    GOS_MPI_CHECK(q->comm, kFn, Poll(q));
    if (q->done) {
      *flag = 1;
      *index = i;
      MPI_Comm failed = MPI_COMM_NULL;
      GOS_MPI_CHECK(failed, kFn, FinishAt(requests, i, status, &failed));
      return MPI_SUCCESS;
    }
  }
  // With no active request MPI answers flag = true, index = MPI_UNDEFINED, empty status.
  *flag = any_active ? 0 : 1;
  if (!any_active) SetEmptyStatus(status, MPI_ANY_SOURCE);
  return MPI_SUCCESS;
}

int Active_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  static const char* const kFn = "MPI_Waitany";
  GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, CheckRequests(count, requests));
  for (;;) {
    int flag = 0;
    int err = PMPI_Testany(count, requests, index, &flag, status);
    if (err != MPI_SUCCESS || flag) return err;
    GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, FromGos(gos_progress_wait()));
  }
}

int Testsome(const char* fn, int incount, MPI_Request requests[], int* outcount, int indices[],
             MPI_Status statuses[]) {
  GOS_MPI_CHECK(MPI_COMM_WORLD, fn, CheckRequests(incount, requests));
  bool any_active = false;
  for (int i = 0; i < incount; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    any_active = true;
    Request* q = FindRequest(requests[i]);
    GOS_MPI_CHECK(q->comm, fn, Poll(q));
  }
  if (!any_active) {
    *outcount = MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  int n = 0;
  MPI_Comm failed = MPI_COMM_NULL;
  int first = MPI_SUCCESS;
  for (int i = 0; i < incount; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    if (!FindRequest(requests[i])->done) continue;
    MPI_Status* st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[n];
    indices[n++] = i;
    int err = FinishAt(requests, i, st, &failed);
    if (first == MPI_SUCCESS) first = err;
  }
  *outcount = n;
  if (first == MPI_SUCCESS) return MPI_SUCCESS;
  return Fail(failed, fn, statuses == MPI_STATUSES_IGNORE ? first : MPI_ERR_IN_STATUS);
}

int Active_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                    MPI_Status statuses[]) {
  static const char* const kFn = "MPI_Waitsome";
  for (;;) {
    int err = Testsome(kFn, incount, requests, outcount, indices, statuses);
    if (err != MPI_SUCCESS || *outcount != 0) return err;
    GOS_MPI_CHECK(MPI_COMM_WORLD, kFn, FromGos(gos_progress_wait()));
  }
}

int Active_Cancel(MPI_Request* request) {
  if (request == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Cancel", MPI_ERR_REQUEST);
  if (*request == MPI_REQUEST_NULL) return MPI_SUCCESS;
  Request* q = FindRequest(*request);
  if (q == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Cancel", MPI_ERR_REQUEST);
  if (q->done || q->proc_null) return MPI_SUCCESS;
  GOS_MPI_CHECK(q->comm, "MPI_Cancel", FromGos(gos_cancel(&q->g)));
  return MPI_SUCCESS;
}

// ---- Persistent requests (MPI_Send_init, MPI_Recv_init, MPI_Start) ----------------------
// A persistent handle (kFirstPersistent + index) keeps the arguments; MPI_Start posts an
// ordinary request for them (the handle's `active`). The completion functions see the active
// requests in the persistent handles' places, and a persistent handle that completes stays
// the program's, inactive, instead of becoming MPI_REQUEST_NULL.

Persistent* FindPersistent(MPI_Request r) {
  auto& t = S().persistent;
  if (r < kFirstPersistent || static_cast<size_t>(r - kFirstPersistent) >= t.size()) return nullptr;
  Persistent* p = &t[static_cast<size_t>(r - kFirstPersistent)];
  return p->in_use ? p : nullptr;
}

// Runs `f` on a copy of requests[0, n) in which each persistent handle is replaced by its
// active request (MPI_REQUEST_NULL when inactive), then writes back: a persistent handle
// whose request completed becomes inactive and stays in place. Fails with MPI_ERR_REQUEST on
// an unknown handle at or above kFirstPersistent.
template <typename F>
int WithActive(int n, MPI_Request* requests, F f) {
  bool any = false;
  for (int i = 0; i < n && requests != nullptr; ++i) any |= requests[i] >= kFirstPersistent;
  if (!any) return f(requests);
  std::vector<MPI_Request> inner(requests, requests + n);
  std::vector<Persistent*> owner(static_cast<size_t>(n), nullptr);
  for (int i = 0; i < n; ++i) {
    if (requests[i] < kFirstPersistent) continue;
    Persistent* p = FindPersistent(requests[i]);
    if (p == nullptr) return Fail(MPI_COMM_WORLD, "request", MPI_ERR_REQUEST);
    owner[static_cast<size_t>(i)] = p;
    inner[static_cast<size_t>(i)] = p->active;
  }
  const int err = f(inner.data());
  for (int i = 0; i < n; ++i) {
    if (Persistent* p = owner[static_cast<size_t>(i)]) {
      p->active = inner[static_cast<size_t>(i)];
    } else {
      requests[i] = inner[static_cast<size_t>(i)];
    }
  }
  return err;
}

int NewPersistent(Persistent p, MPI_Request* request, const char* fn) {
  if (request == nullptr) return Fail(p.comm, fn, MPI_ERR_ARG);
  if (FindComm(p.comm) == nullptr) return Fail(p.comm, fn, MPI_ERR_COMM);
  if (p.count < 0) return Fail(p.comm, fn, MPI_ERR_COUNT);
  p.layout = FindType(p.type);
  if (p.layout == nullptr) return Fail(p.comm, fn, MPI_ERR_TYPE);
  p.in_use = true;
  auto& t = S().persistent;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].in_use) {
      t[i] = p;
      *request = kFirstPersistent + static_cast<MPI_Request>(i);
      return MPI_SUCCESS;
    }
  }
  t.push_back(p);
  *request = kFirstPersistent + static_cast<MPI_Request>(t.size() - 1);
  return MPI_SUCCESS;
}

}  // namespace

namespace gos::mpi::internal {

int AllocRequest() {
  State& s = S();
  int i;
  if (!s.free_reqs.empty()) {
    i = s.free_reqs.back();
    s.free_reqs.pop_back();
  } else {
    i = static_cast<int>(s.reqs.size());
    s.reqs.emplace_back();
  }
  s.reqs[static_cast<size_t>(i)] = Request{};
  s.reqs[static_cast<size_t>(i)].in_use = true;
  return i + 1;
}

Request* FindRequest(MPI_Request r) {
  State& s = S();
  if (r <= 0 || static_cast<size_t>(r) > s.reqs.size()) return nullptr;
  Request* q = &s.reqs[static_cast<size_t>(r - 1)];
  return q->in_use && !q->detached ? q : nullptr;
}

void ReleaseRequest(MPI_Request r) {
  State& s = S();
  s.reqs[static_cast<size_t>(r - 1)] = Request{};
  s.free_reqs.push_back(r - 1);
}

void SetStatus(MPI_Status* status, int source, int tag, int error, size_t bytes, int cancelled) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = source;
  status->MPI_TAG = tag;
  status->MPI_ERROR = error;
  status->gos_bytes = bytes;
  status->gos_cancelled = cancelled;
}

void SetEmptyStatus(MPI_Status* status, int source) {
  SetStatus(status, source, MPI_ANY_TAG, MPI_SUCCESS, 0, 0);
}

void SweepDetached(bool block) {
  State& s = S();
  if (s.detached == 0) return;
  for (size_t i = 0; i < s.reqs.size(); ++i) {
    Request& q = s.reqs[i];
    if (!q.in_use || !q.detached) continue;
    if (block) {
      (void)WaitDone(&q);
    } else {
      (void)Poll(&q);
    }
    if (q.done) {
      q.detached = false;
      --s.detached;
      (void)Finish(static_cast<MPI_Request>(i + 1), MPI_STATUS_IGNORE);
    }
  }
}

int WaitOne(MPI_Request r, MPI_Status* status) {
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  if (int e = WaitDone(q)) return e;
  return Finish(r, status);
}

int WaitInternal(std::vector<MPI_Request>& reqs) {
  int first = MPI_SUCCESS;
  for (MPI_Request r : reqs) {
    int e = WaitOne(r, MPI_STATUS_IGNORE);
    if (first == MPI_SUCCESS) first = e;
  }
  reqs.clear();
  return first;
}

MPI_Request Compound(MPI_Comm comm, std::vector<MPI_Request> parts, std::function<int()> on_done) {
  MPI_Request r = AllocRequest();
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  q->comm = comm;
  q->compound = true;
  q->parts = std::move(parts);
  q->on_done = std::move(on_done);
  return r;
}

int Active_Request_free(MPI_Request* request) {
  static const char* const kFn = "MPI_Request_free";
  if (request == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_REQUEST);
  Request* q = FindRequest(*request);
  if (q == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_REQUEST);
  const MPI_Request r = *request;
  *request = MPI_REQUEST_NULL;
  SweepDetached(/*block=*/false);
  (void)Poll(q);
  if (q->done) {
    (void)Finish(r, MPI_STATUS_IGNORE);
  } else if (q->tmp.empty() && !q->compound) {
    // Nothing of ours must outlive the transfer: gos finishes it on its own.
    GOS_MPI_CHECK(q->comm, kFn, FromGos(gos_request_free(&q->g)));
    ReleaseRequest(r);
  } else {
    q->detached = true;
    ++S().detached;
  }
  return MPI_SUCCESS;
}

}  // namespace gos::mpi::internal

extern "C" {

GOS_MPI_WEAK_ALIAS(Wait);
int PMPI_Wait(MPI_Request* request, MPI_Status* status) {
  return WithActive(1, request, [&](MPI_Request* r) { return Active_Wait(r, status); });
}

GOS_MPI_WEAK_ALIAS(Test);
int PMPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return WithActive(1, request, [&](MPI_Request* r) { return Active_Test(r, flag, status); });
}

GOS_MPI_WEAK_ALIAS(Request_free);
int PMPI_Request_free(MPI_Request* request) {
  if (request != nullptr && *request >= kFirstPersistent) {
    Persistent* p = FindPersistent(*request);
    if (p == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Request_free", MPI_ERR_REQUEST);
    // An active one is left to finish on its own, like any freed request.
    if (p->active != MPI_REQUEST_NULL) {
      if (int e = Active_Request_free(&p->active)) return e;
    }
    *p = Persistent{};
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
  }
  return Active_Request_free(request);
}

GOS_MPI_WEAK_ALIAS(Waitany);
int PMPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  return WithActive(count, requests,
                    [&](MPI_Request* r) { return Active_Waitany(count, r, index, status); });
}

GOS_MPI_WEAK_ALIAS(Testany);
int PMPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  return WithActive(count, requests,
                    [&](MPI_Request* r) { return Active_Testany(count, r, index, flag, status); });
}

GOS_MPI_WEAK_ALIAS(Waitall);
int PMPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  return WithActive(count, requests,
                    [&](MPI_Request* r) { return Active_Waitall(count, r, statuses); });
}

GOS_MPI_WEAK_ALIAS(Testall);
int PMPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return WithActive(count, requests,
                    [&](MPI_Request* r) { return Active_Testall(count, r, flag, statuses); });
}

GOS_MPI_WEAK_ALIAS(Waitsome);
int PMPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                  MPI_Status statuses[]) {
  return WithActive(incount, requests, [&](MPI_Request* r) {
    return Active_Waitsome(incount, r, outcount, indices, statuses);
  });
}

GOS_MPI_WEAK_ALIAS(Testsome);
int PMPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                  MPI_Status statuses[]) {
  static const char* const kFn = "MPI_Testsome";
  if (outcount == nullptr || incount < 0 ||
      (incount > 0 && (requests == nullptr || indices == nullptr))) {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  }
  int active = 0, done = 0;
  for (int i = 0; i < incount; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    if (requests[i] >= kFirstPersistent) {
      // An inactive persistent request counts as a null one.
      Persistent* p = FindPersistent(requests[i]);
      if (p != nullptr && p->active == MPI_REQUEST_NULL) continue;
    }
    ++active;
    int flag = 0;
    MPI_Status st;
    if (int e = PMPI_Test(&requests[i], &flag, &st)) return e;
    if (!flag) continue;
    indices[done] = i;
    if (statuses != MPI_STATUSES_IGNORE) statuses[done] = st;
    ++done;
  }
  *outcount = active == 0 ? MPI_UNDEFINED : done;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Request_get_status);
int PMPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  // A persistent handle stands for its active request (an inactive one counts as null).
  return WithActive(1, &request,
                    [&](MPI_Request* r) { return Active_Request_get_status(*r, flag, status); });
}

GOS_MPI_WEAK_ALIAS(Cancel);
int PMPI_Cancel(MPI_Request* request) {
  return WithActive(1, request, [&](MPI_Request* r) { return Active_Cancel(r); });
}

GOS_MPI_WEAK_ALIAS(Test_cancelled);
int PMPI_Test_cancelled(const MPI_Status* status, int* flag) {
  if (status == nullptr || flag == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Test_cancelled", MPI_ERR_ARG);
  }
  *flag = status->gos_cancelled != 0 ? 1 : 0;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Status_set_cancelled);
int PMPI_Status_set_cancelled(MPI_Status* status, int flag) {
  if (status == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Status_set_cancelled", MPI_ERR_ARG);
  status->gos_cancelled = flag != 0 ? 1 : 0;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Send_init);
int PMPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request) {
  return NewPersistent({.send = true,
                        .sbuf = buf,
                        .count = count,
                        .type = datatype,
                        .peer = dest,
                        .tag = tag,
                        .comm = comm},
                       request, "MPI_Send_init");
}

GOS_MPI_WEAK_ALIAS(Bsend_init);
int PMPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm, MPI_Request* request) {
  if (int e = PMPI_Send_init(buf, count, datatype, dest, tag, comm, request)) return e;
  if (Persistent* p = FindPersistent(*request)) p->buffered = true;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Ssend_init);
int PMPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm, MPI_Request* request) {
  if (int e = PMPI_Send_init(buf, count, datatype, dest, tag, comm, request)) return e;
  if (Persistent* p = FindPersistent(*request)) p->flags = GOS_SEND_SYNC;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Rsend_init);
int PMPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm, MPI_Request* request) {
  return PMPI_Send_init(buf, count, datatype, dest, tag, comm, request);  // as MPI_Rsend
}

GOS_MPI_WEAK_ALIAS(Recv_init);
int PMPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return NewPersistent(
      {.rbuf = buf, .count = count, .type = datatype, .peer = source, .tag = tag, .comm = comm},
      request, "MPI_Recv_init");
}

GOS_MPI_WEAK_ALIAS(Start);
int PMPI_Start(MPI_Request* request) {
  static const char* const kFn = "MPI_Start";
  Persistent* p = request != nullptr ? FindPersistent(*request) : nullptr;
  if (p == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_REQUEST);
  if (p->active != MPI_REQUEST_NULL) return Fail(p->comm, kFn, MPI_ERR_REQUEST);  // still active
  GOS_MPI_COMM(c, p->comm, kFn);
  if (p->buffered) {
    return StartBsend(kFn, p->sbuf, p->count, p->layout, p->peer, p->tag, p->comm, &p->active);
  }
  if (p->send) {
    GOS_MPI_CHECK(p->comm, kFn,
                  StartSend(p->sbuf, p->count, p->layout, p->peer, p->tag, p->comm, c->g, p->flags,
                            &p->active));
  } else {
    GOS_MPI_CHECK(
        p->comm, kFn,
        StartRecv(p->rbuf, p->count, p->layout, p->peer, p->tag, p->comm, c->g, &p->active));
  }
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Startall);
int PMPI_Startall(int count, MPI_Request requests[]) {
  for (int i = 0; i < count; ++i) {
    if (int e = PMPI_Start(&requests[i])) return e;
  }
  return MPI_SUCCESS;
}

}  // extern "C"
