/* A PMPI tool for Fortran programs, as such tools are written (MPI 4.1, 15.2; mpifort's
 * naming): C functions with gfortran's names of the calls it wants to see (mpi_send_ for
 * MPI_SEND), each counting and then calling the bindings' pmpi_<name>_. Linked before gos's
 * libgos_mpif.a (`gos-fort app.f90 pmpif_counter.c`), its definitions replace the bindings'
 * weak mpi_<name>_ ones. At MPI_FINALIZE each rank prints one line with every count, zeros
 * too, in name order:
 *
 *   pmpif_counter rank 0: Allreduce=2 Barrier=1 ... Wtime=1 calls=21
 *
 * Counted: every call tests/e2e/mpi/programs/pmpif.f90 makes, and MPI_PROBE and
 * MPI_GET_COUNT, which it does not make (0 unless gos's own calls reached the tool). Plain C
 * with mpi.h for MPI_Fint. */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

/* clang-format off */
#define GOS_PMPIF_COUNTED(X) \
  X(Allreduce) X(Barrier) X(Bcast) X(Comm_rank) X(Comm_size) X(Finalize) X(Get_count)    \
  X(Init) X(Irecv) X(Isend) X(Probe) X(Recv) X(Request_free) X(Send) X(Sendrecv)          \
  X(Type_commit) X(Type_free) X(Type_vector) X(Wait) X(Waitall) X(Wtime)
/* clang-format on */

#define GOS_PMPIF_ENUM(name) k##name,
#define GOS_PMPIF_NAME(name) #name,
enum { GOS_PMPIF_COUNTED(GOS_PMPIF_ENUM) kCounted };
static const char* const kNames[kCounted] = {GOS_PMPIF_COUNTED(GOS_PMPIF_NAME)};
static long g_count[kCounted];

typedef MPI_Fint F; /* every argument is passed by reference */

void pmpi_init_(F* ierr);
void pmpi_finalize_(F* ierr);
void pmpi_comm_rank_(F* comm, F* rank, F* ierr);
void pmpi_comm_size_(F* comm, F* size, F* ierr);
double pmpi_wtime_(void);
void pmpi_send_(void* buf, F* count, F* type, F* dest, F* tag, F* comm, F* ierr);
void pmpi_recv_(void* buf, F* count, F* type, F* src, F* tag, F* comm, F* status, F* ierr);
void pmpi_isend_(void* buf, F* count, F* type, F* dest, F* tag, F* comm, F* req, F* ierr);
void pmpi_irecv_(void* buf, F* count, F* type, F* src, F* tag, F* comm, F* req, F* ierr);
void pmpi_wait_(F* req, F* status, F* ierr);
void pmpi_waitall_(F* n, F* reqs, F* statuses, F* ierr);
void pmpi_request_free_(F* req, F* ierr);
void pmpi_sendrecv_(void* sbuf, F* scount, F* stype, F* dest, F* stag, void* rbuf, F* rcount,
                    F* rtype, F* src, F* rtag, F* comm, F* status, F* ierr);
void pmpi_allreduce_(void* sbuf, void* rbuf, F* count, F* type, F* op, F* comm, F* ierr);
void pmpi_bcast_(void* buf, F* count, F* type, F* root, F* comm, F* ierr);
void pmpi_barrier_(F* comm, F* ierr);
void pmpi_type_vector_(F* count, F* blocklen, F* stride, F* old, F* newtype, F* ierr);
void pmpi_type_commit_(F* type, F* ierr);
void pmpi_type_free_(F* type, F* ierr);
void pmpi_probe_(F* src, F* tag, F* comm, F* status, F* ierr);
void pmpi_get_count_(F* status, F* type, F* count, F* ierr);

void mpi_init_(F* ierr) {
  ++g_count[kInit];
  pmpi_init_(ierr);
}

void mpi_finalize_(F* ierr) {
  ++g_count[kFinalize];
  F world = MPI_COMM_WORLD, rank = -1, err = 0;
  pmpi_comm_rank_(&world, &rank, &err);
  char line[1024];
  int n = snprintf(line, sizeof line, "pmpif_counter rank %d:", (int)rank);
  long calls = 0;
  for (int i = 0; i < kCounted; ++i) {
    n += snprintf(line + n, sizeof line - (size_t)n, " %s=%ld", kNames[i], g_count[i]);
    calls += g_count[i];
  }
  snprintf(line + n, sizeof line - (size_t)n, " calls=%ld\n", calls);
  fputs(line, stdout); /* one write per rank: the lines of the ranks do not mix */
  fflush(stdout);
  pmpi_finalize_(ierr);
}

void mpi_comm_rank_(F* comm, F* rank, F* ierr) {
  ++g_count[kComm_rank];
  pmpi_comm_rank_(comm, rank, ierr);
}

void mpi_comm_size_(F* comm, F* size, F* ierr) {
  ++g_count[kComm_size];
  pmpi_comm_size_(comm, size, ierr);
}

double mpi_wtime_(void) {
  ++g_count[kWtime];
  return pmpi_wtime_();
}

void mpi_send_(void* buf, F* count, F* type, F* dest, F* tag, F* comm, F* ierr) {
  ++g_count[kSend];
  pmpi_send_(buf, count, type, dest, tag, comm, ierr);
}

void mpi_recv_(void* buf, F* count, F* type, F* src, F* tag, F* comm, F* status, F* ierr) {
  ++g_count[kRecv];
  pmpi_recv_(buf, count, type, src, tag, comm, status, ierr);
}

void mpi_isend_(void* buf, F* count, F* type, F* dest, F* tag, F* comm, F* req, F* ierr) {
  ++g_count[kIsend];
  pmpi_isend_(buf, count, type, dest, tag, comm, req, ierr);
}

void mpi_irecv_(void* buf, F* count, F* type, F* src, F* tag, F* comm, F* req, F* ierr) {
  ++g_count[kIrecv];
  pmpi_irecv_(buf, count, type, src, tag, comm, req, ierr);
}

void mpi_wait_(F* req, F* status, F* ierr) {
  ++g_count[kWait];
  pmpi_wait_(req, status, ierr);
}

void mpi_waitall_(F* n, F* reqs, F* statuses, F* ierr) {
  ++g_count[kWaitall];
  pmpi_waitall_(n, reqs, statuses, ierr);
}

void mpi_request_free_(F* req, F* ierr) {
  ++g_count[kRequest_free];
  pmpi_request_free_(req, ierr);
}

void mpi_sendrecv_(void* sbuf, F* scount, F* stype, F* dest, F* stag, void* rbuf, F* rcount,
                   F* rtype, F* src, F* rtag, F* comm, F* status, F* ierr) {
  ++g_count[kSendrecv];
  pmpi_sendrecv_(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, status,
                 ierr);
}

void mpi_allreduce_(void* sbuf, void* rbuf, F* count, F* type, F* op, F* comm, F* ierr) {
  ++g_count[kAllreduce];
  pmpi_allreduce_(sbuf, rbuf, count, type, op, comm, ierr);
}

void mpi_bcast_(void* buf, F* count, F* type, F* root, F* comm, F* ierr) {
  ++g_count[kBcast];
  pmpi_bcast_(buf, count, type, root, comm, ierr);
}

void mpi_barrier_(F* comm, F* ierr) {
  ++g_count[kBarrier];
  pmpi_barrier_(comm, ierr);
}

void mpi_type_vector_(F* count, F* blocklen, F* stride, F* old, F* newtype, F* ierr) {
  ++g_count[kType_vector];
  pmpi_type_vector_(count, blocklen, stride, old, newtype, ierr);
}

void mpi_type_commit_(F* type, F* ierr) {
  ++g_count[kType_commit];
  pmpi_type_commit_(type, ierr);
}

void mpi_type_free_(F* type, F* ierr) {
  ++g_count[kType_free];
  pmpi_type_free_(type, ierr);
}

void mpi_probe_(F* src, F* tag, F* comm, F* status, F* ierr) {
  ++g_count[kProbe];
  pmpi_probe_(src, tag, comm, status, ierr);
}

void mpi_get_count_(F* status, F* type, F* count, F* ierr) {
  ++g_count[kGet_count];
  pmpi_get_count_(status, type, count, ierr);
}
