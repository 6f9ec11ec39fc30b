// Point-to-point communication (MPI 4.1, chapter 3): sends and receives in every mode,
// blocking and nonblocking, the buffered-send buffer, probes, and send-receive. The requests
// they post are completed in request.cc.
#include <memory>
#include <utility>
#include <vector>

#include "datatype.h"
#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::AllocRequest;
using gos::mpi::internal::CheckCount;
using gos::mpi::internal::Compound;
using gos::mpi::internal::Fail;
using gos::mpi::internal::FindRequest;
using gos::mpi::internal::FindType;
using gos::mpi::internal::FromGos;
using gos::mpi::internal::Request;
using gos::mpi::internal::S;
using gos::mpi::internal::SetEmptyStatus;
using gos::mpi::internal::SetStatus;
using gos::mpi::internal::StartBsend;
using gos::mpi::internal::StartRecv;
using gos::mpi::internal::StartSend;
using gos::mpi::internal::TypePtr;
using gos::mpi::internal::WaitOne;

// The request of an operation with peer MPI_PROC_NULL: complete at once, moving nothing.
MPI_Request ProcNullRequest(MPI_Comm comm) {
  MPI_Request r = AllocRequest();
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  q->done = true;
  q->proc_null = true;
  q->comm = comm;
  q->st = gos_status_t{};
  return r;
}

int BlockingSend(const char* fn, const void* buf, int count, MPI_Datatype datatype, int dest,
                 int tag, MPI_Comm comm, int flags) {
  GOS_MPI_COMM(c, comm, fn);
  MPI_Request r;
  GOS_MPI_CHECK(comm, fn, StartSend(buf, count, datatype, dest, tag, comm, c->g, flags, &r));
  GOS_MPI_CHECK(comm, fn, WaitOne(r, MPI_STATUS_IGNORE));
  return MPI_SUCCESS;
}

}  // namespace

namespace gos::mpi::internal {

int CheckCount(int count) { return count < 0 ? MPI_ERR_COUNT : MPI_SUCCESS; }

int StartSend(const void* buf, int count, const TypePtr& t, int dest, int tag, MPI_Comm comm,
              const gos_comm_t& gc, int flags, MPI_Request* out) {
  if (int e = CheckCount(count)) return e;
  if (t == nullptr) return MPI_ERR_TYPE;
  if (dest == MPI_PROC_NULL) {
    *out = ProcNullRequest(comm);
    return MPI_SUCCESS;
  }
  if (dest < 0 || dest >= gc.size) return MPI_ERR_RANK;
  if (tag < 0) return MPI_ERR_TAG;
  MPI_Request r = AllocRequest();
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  q->comm = comm;
  const size_t len = gos::mpi::PackedSize(static_cast<size_t>(count), *t);
  const void* data = buf;
  if (!t->contiguous) {
    q->tmp.resize(len);
    gos::mpi::Pack(buf, static_cast<size_t>(count), *t, q->tmp.data());
    data = q->tmp.data();
  }
  int err = gos_isend(data, len, dest, tag, &gc, flags, &q->g);
  if (err != GOS_OK) {
    ReleaseRequest(r);
    return FromGos(err);
  }
  *out = r;
  return MPI_SUCCESS;
}

int StartRecv(void* buf, int count, const TypePtr& t, int source, int tag, MPI_Comm comm,
              const gos_comm_t& gc, MPI_Request* out) {
  if (int e = CheckCount(count)) return e;
  if (t == nullptr) return MPI_ERR_TYPE;
  if (source == MPI_PROC_NULL) {
    *out = ProcNullRequest(comm);
    return MPI_SUCCESS;
  }
  if (source != MPI_ANY_SOURCE && (source < 0 || source >= gc.size)) return MPI_ERR_RANK;
  if (tag < 0 && tag != MPI_ANY_TAG) return MPI_ERR_TAG;
  MPI_Request r = AllocRequest();
  Request* q = &S().reqs[static_cast<size_t>(r - 1)];
  q->comm = comm;
  const size_t len = gos::mpi::PackedSize(static_cast<size_t>(count), *t);
  void* data = buf;
  if (!t->contiguous) {
    q->tmp.resize(len);
    q->unpack = true;
    q->user_buf = buf;
    q->count = static_cast<size_t>(count);
    q->type = t;
    data = q->tmp.data();
  }
  int err = gos_irecv(data, len, source == MPI_ANY_SOURCE ? GOS_ANY_SOURCE : source,
                      tag == MPI_ANY_TAG ? GOS_ANY_TAG : tag, &gc, &q->g);
  if (err != GOS_OK) {
    ReleaseRequest(r);
    return FromGos(err);
  }
  *out = r;
  return MPI_SUCCESS;
}

int StartSend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              const gos_comm_t& gc, int flags, MPI_Request* out) {
  return StartSend(buf, count, FindType(dt), dest, tag, comm, gc, flags, out);
}

int StartRecv(void* buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
              const gos_comm_t& gc, MPI_Request* out) {
  return StartRecv(buf, count, FindType(dt), source, tag, comm, gc, out);
}

int StartBsend(const char* fn, const void* buf, int count, const TypePtr& t, int dest, int tag,
               MPI_Comm comm, MPI_Request* done) {
  GOS_MPI_COMM(c, comm, fn);
  GOS_MPI_CHECK(comm, fn, CheckCount(count));
  if (t == nullptr) return Fail(comm, fn, MPI_ERR_TYPE);
  std::vector<char> copy(gos::mpi::PackedSize(static_cast<size_t>(count), *t));
  gos::mpi::Pack(buf, static_cast<size_t>(count), *t, copy.data());
  MPI_Request r = MPI_REQUEST_NULL;
  GOS_MPI_CHECK(comm, fn,
                StartSend(copy.data(), static_cast<int>(copy.size()), MPI_BYTE, dest, tag, comm,
                          c->g, 0, &r));
  Request* q = FindRequest(r);
  if (q != nullptr && !q->proc_null && q->tmp.empty()) {
    // gos may still read `copy` (a large message): keep it with the request.
    q->tmp = std::move(copy);
  }
  if (int e = Active_Request_free(&r)) return e;
  if (done != nullptr) *done = Compound(comm, {}, nullptr);
  return MPI_SUCCESS;
}

}  // namespace gos::mpi::internal

extern "C" {

GOS_MPI_WEAK_ALIAS(Send);
int PMPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return BlockingSend("MPI_Send", buf, count, datatype, dest, tag, comm, 0);
}

GOS_MPI_WEAK_ALIAS(Recv);
int PMPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Status* status) {
  GOS_MPI_COMM(c, comm, "MPI_Recv");
  MPI_Request r;
  GOS_MPI_CHECK(comm, "MPI_Recv", StartRecv(buf, count, datatype, source, tag, comm, c->g, &r));
  GOS_MPI_CHECK(comm, "MPI_Recv", WaitOne(r, status));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Ssend);
int PMPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm) {
  return BlockingSend("MPI_Ssend", buf, count, datatype, dest, tag, comm, GOS_SEND_SYNC);
}

// MPI_Rsend's precondition (the receive is posted) only allows an implementation to be
// faster; a plain send is correct. MPI_Bsend: the message is copied at once and the call
// returns; the buffer MPI_Buffer_attach gave is not needed for that.
GOS_MPI_WEAK_ALIAS(Rsend);
int PMPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm) {
  return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

GOS_MPI_WEAK_ALIAS(Bsend);
int PMPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm) {
  return StartBsend("MPI_Bsend", buf, count, FindType(datatype), dest, tag, comm, nullptr);
}

GOS_MPI_WEAK_ALIAS(Buffer_attach);
int PMPI_Buffer_attach(void* buffer, int size) {
  if (size < 0 || (buffer == nullptr && size > 0)) {
    return Fail(MPI_COMM_WORLD, "MPI_Buffer_attach", MPI_ERR_BUFFER);
  }
  S().bsend_buffer = buffer;
  S().bsend_size = size;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Buffer_detach);
int PMPI_Buffer_detach(void* buffer_addr, int* size) {
  // Every buffered send's data is in its own copy, so nothing needs to drain here.
  *static_cast<void**>(buffer_addr) = S().bsend_buffer;
  *size = S().bsend_size;
  S().bsend_buffer = nullptr;
  S().bsend_size = 0;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Isend);
int PMPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  GOS_MPI_COMM(c, comm, "MPI_Isend");
  GOS_MPI_CHECK(comm, "MPI_Isend",
                StartSend(buf, count, datatype, dest, tag, comm, c->g, 0, request));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Issend);
int PMPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request) {
  GOS_MPI_COMM(c, comm, "MPI_Issend");
  GOS_MPI_CHECK(comm, "MPI_Issend",
                StartSend(buf, count, datatype, dest, tag, comm, c->g, GOS_SEND_SYNC, request));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Irsend);
int PMPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request) {
  return PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
}

GOS_MPI_WEAK_ALIAS(Ibsend);
int PMPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request) {
  if (request == nullptr) return Fail(comm, "MPI_Ibsend", MPI_ERR_ARG);
  return StartBsend("MPI_Ibsend", buf, count, FindType(datatype), dest, tag, comm, request);
}

GOS_MPI_WEAK_ALIAS(Irecv);
int PMPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
               MPI_Request* request) {
  GOS_MPI_COMM(c, comm, "MPI_Irecv");
  GOS_MPI_CHECK(comm, "MPI_Irecv",
                StartRecv(buf, count, datatype, source, tag, comm, c->g, request));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Iprobe);
int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  static const char* const kFn = "MPI_Iprobe";
  GOS_MPI_COMM(c, comm, kFn);
  if (source == MPI_PROC_NULL) {
    *flag = 1;
    SetEmptyStatus(status, MPI_PROC_NULL);
    return MPI_SUCCESS;
  }
  if (source != MPI_ANY_SOURCE && (source < 0 || source >= c->g.size)) {
    return Fail(comm, kFn, MPI_ERR_RANK);
  }
  if (tag < 0 && tag != MPI_ANY_TAG) return Fail(comm, kFn, MPI_ERR_TAG);
  gos_status_t st{};
  GOS_MPI_CHECK(comm, kFn,
                FromGos(gos_iprobe(source == MPI_ANY_SOURCE ? GOS_ANY_SOURCE : source,
                                   tag == MPI_ANY_TAG ? GOS_ANY_TAG : tag, &c->g, flag, &st)));
  if (*flag) SetStatus(status, st.source, st.tag, MPI_SUCCESS, st.len, 0);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Probe);
int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  static const char* const kFn = "MPI_Probe";
  GOS_MPI_COMM(c, comm, kFn);
  if (source == MPI_PROC_NULL) {
    SetEmptyStatus(status, MPI_PROC_NULL);
    return MPI_SUCCESS;
  }
  if (source != MPI_ANY_SOURCE && (source < 0 || source >= c->g.size)) {
    return Fail(comm, kFn, MPI_ERR_RANK);
  }
  if (tag < 0 && tag != MPI_ANY_TAG) return Fail(comm, kFn, MPI_ERR_TAG);
  gos_status_t st{};
  GOS_MPI_CHECK(comm, kFn,
                FromGos(gos_probe(source == MPI_ANY_SOURCE ? GOS_ANY_SOURCE : source,
                                  tag == MPI_ANY_TAG ? GOS_ANY_TAG : tag, &c->g, &st)));
  SetStatus(status, st.source, st.tag, MPI_SUCCESS, st.len, 0);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Sendrecv);
int PMPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                  MPI_Comm comm, MPI_Status* status) {
  static const char* const kFn = "MPI_Sendrecv";
  GOS_MPI_COMM(c, comm, kFn);
  MPI_Request rr;
  MPI_Request sr;
  GOS_MPI_CHECK(comm, kFn,
                StartRecv(recvbuf, recvcount, recvtype, source, recvtag, comm, c->g, &rr));
  int err = StartSend(sendbuf, sendcount, sendtype, dest, sendtag, comm, c->g, 0, &sr);
  int rerr = WaitOne(rr, status);
  if (err == MPI_SUCCESS) err = WaitOne(sr, MPI_STATUS_IGNORE);
  GOS_MPI_CHECK(comm, kFn, rerr != MPI_SUCCESS ? rerr : err);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Sendrecv_replace);
int PMPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                          int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  static const char* const kFn = "MPI_Sendrecv_replace";
  GOS_MPI_CHECK(comm, kFn, CheckCount(count));
  TypePtr t = FindType(datatype);
  if (t == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
  // The outgoing data is packed aside first, so the receive may overwrite buf.
  std::vector<char> out(gos::mpi::PackedSize(static_cast<size_t>(count), *t));
  gos::mpi::Pack(buf, static_cast<size_t>(count), *t, out.data());
  return PMPI_Sendrecv(out.data(), static_cast<int>(out.size()), MPI_BYTE, dest, sendtag, buf,
                       count, datatype, source, recvtag, comm, status);
}

GOS_MPI_WEAK_ALIAS(Isendrecv);
int PMPI_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                   void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                   MPI_Comm comm, MPI_Request* request) {
  static const char* const kFn = "MPI_Isendrecv";
  GOS_MPI_COMM(c, comm, kFn);
  if (request == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  MPI_Request rr;
  MPI_Request sr;
  GOS_MPI_CHECK(comm, kFn,
                StartRecv(recvbuf, recvcount, recvtype, source, recvtag, comm, c->g, &rr));
  if (int e = StartSend(sendbuf, sendcount, sendtype, dest, sendtag, comm, c->g, 0, &sr)) {
    PMPI_Cancel(&rr);
    (void)WaitOne(rr, MPI_STATUS_IGNORE);
    return Fail(comm, kFn, e);
  }
  *request = Compound(comm, {rr, sr}, nullptr);
  FindRequest(*request)->status_part = 0;  // the receive's
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Isendrecv_replace);
int PMPI_Isendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                           int source, int recvtag, MPI_Comm comm, MPI_Request* request) {
  static const char* const kFn = "MPI_Isendrecv_replace";
  GOS_MPI_COMM(c, comm, kFn);
  if (request == nullptr) return Fail(comm, kFn, MPI_ERR_ARG);
  GOS_MPI_CHECK(comm, kFn, CheckCount(count));
  TypePtr t = FindType(datatype);
  if (t == nullptr) return Fail(comm, kFn, MPI_ERR_TYPE);
  // The message goes from a packed copy, so that the receive may fill buf meanwhile; the copy
  // lives as long as the request.
  auto copy =
      std::make_shared<std::vector<char>>(gos::mpi::PackedSize(static_cast<size_t>(count), *t));
  gos::mpi::Pack(buf, static_cast<size_t>(count), *t, copy->data());
  MPI_Request rr;
  MPI_Request sr;
  GOS_MPI_CHECK(comm, kFn, StartRecv(buf, count, t, source, recvtag, comm, c->g, &rr));
  if (int e = StartSend(copy->data(), static_cast<int>(copy->size()), MPI_BYTE, dest, sendtag, comm,
                        c->g, 0, &sr)) {
    PMPI_Cancel(&rr);
    (void)WaitOne(rr, MPI_STATUS_IGNORE);
    return Fail(comm, kFn, e);
  }
  *request = Compound(comm, {rr, sr}, [copy] { return MPI_SUCCESS; });
  FindRequest(*request)->status_part = 0;
  return MPI_SUCCESS;
}

}  // extern "C"
