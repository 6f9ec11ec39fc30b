/* A PMPI tool, as profilers are written (MPI 4.1, 15.2): it defines MPI_<name> for the calls
 * it wants to see, counts each one and calls PMPI_<name>. Linked before gos's library
 * (`gos-cc app.c pmpi_counter.c`), its definitions replace gos's weak MPI_ ones. At
 * MPI_Finalize each rank prints one line with every count, zeros too, in name order:
 *
 *   pmpi_counter rank 0: Allgather=1 Allreduce=2 ... Wtime=1 calls=42
 *
 * It counts every MPI function tests/e2e/mpi/programs/pmpi.c calls (pmpi_check.sh checks that
 * it covers all of them) and the ones gos builds some of those calls on (MPI_Testany,
 * MPI_Probe, MPI_Type_create_hvector, ...), which must stay at the program's own count: 0.
 * Plain C, no gos header but mpi.h. */
#include <mpi.h>
#include <stdio.h>

/* Every call counted, in name order. */
/* clang-format off */
#define GOS_PMPI_COUNTED(X) \
  X(Allgather) X(Allreduce) X(Alltoall) X(Barrier) X(Bcast) X(Cart_create) X(Comm_free)    \
  X(Comm_rank) X(Comm_set_errhandler) X(Comm_size) X(Comm_split) X(Exscan) X(Finalize)     \
  X(Get_count) X(Init) X(Irecv) X(Isend) X(Probe) X(Put) X(Recv) X(Reduce)                 \
  X(Reduce_scatter) X(Reduce_scatter_block) X(Rsend) X(Send) X(Sendrecv)                   \
  X(Sendrecv_replace) X(Testany) X(Type_commit) X(Type_create_hvector)                     \
  X(Type_create_resized) X(Type_create_struct) X(Type_create_subarray) X(Type_free)        \
  X(Type_get_extent) X(Type_size) X(Wait) X(Waitall) X(Waitany) X(Win_create) X(Win_fence) \
  X(Win_free) X(Wtime)
/* clang-format on */

#define GOS_PMPI_ENUM(name) k##name,
#define GOS_PMPI_NAME(name) #name,
enum { GOS_PMPI_COUNTED(GOS_PMPI_ENUM) kCounted };
static const char* const kNames[kCounted] = {GOS_PMPI_COUNTED(GOS_PMPI_NAME)};
static long g_count[kCounted];

int MPI_Init(int* argc, char*** argv) {
  ++g_count[kInit];
  return PMPI_Init(argc, argv);
}

int MPI_Finalize(void) {
  ++g_count[kFinalize];
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char line[2048];
  int n = snprintf(line, sizeof line, "pmpi_counter rank %d:", rank);
  long calls = 0;
  for (int i = 0; i < kCounted; ++i) {
    n += snprintf(line + n, sizeof line - (size_t)n, " %s=%ld", kNames[i], g_count[i]);
    calls += g_count[i];
  }
  snprintf(line + n, sizeof line - (size_t)n, " calls=%ld\n", calls);
  fputs(line, stdout); /* one write per rank: the lines of the ranks do not mix */
  fflush(stdout);
  return PMPI_Finalize();
}

double MPI_Wtime(void) {
  ++g_count[kWtime];
  return PMPI_Wtime();
}

int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  ++g_count[kComm_rank];
  return PMPI_Comm_rank(comm, rank);
}

int MPI_Comm_size(MPI_Comm comm, int* size) {
  ++g_count[kComm_size];
  return PMPI_Comm_size(comm, size);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  ++g_count[kComm_split];
  return PMPI_Comm_split(comm, color, key, newcomm);
}

int MPI_Comm_free(MPI_Comm* comm) {
  ++g_count[kComm_free];
  return PMPI_Comm_free(comm);
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  ++g_count[kComm_set_errhandler];
  return PMPI_Comm_set_errhandler(comm, errhandler);
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm* comm_cart) {
  ++g_count[kCart_create];
  return PMPI_Cart_create(comm_old, ndims, dims, periods, reorder, comm_cart);
}

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  ++g_count[kSend];
  return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  ++g_count[kRsend];
  return PMPI_Rsend(buf, count, datatype, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  ++g_count[kRecv];
  return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}

int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  ++g_count[kIsend];
  return PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
}

int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  ++g_count[kIrecv];
  return PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  ++g_count[kSendrecv];
  return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                       source, recvtag, comm, status);
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  ++g_count[kSendrecv_replace];
  return PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  ++g_count[kProbe];
  return PMPI_Probe(source, tag, comm, status);
}

int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  ++g_count[kGet_count];
  return PMPI_Get_count(status, datatype, count);
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  ++g_count[kWait];
  return PMPI_Wait(request, status);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  ++g_count[kWaitall];
  return PMPI_Waitall(count, requests, statuses);
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  ++g_count[kWaitany];
  return PMPI_Waitany(count, requests, index, status);
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  ++g_count[kTestany];
  return PMPI_Testany(count, requests, index, flag, status);
}

int MPI_Barrier(MPI_Comm comm) {
  ++g_count[kBarrier];
  return PMPI_Barrier(comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  ++g_count[kBcast];
  return PMPI_Bcast(buffer, count, datatype, root, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  ++g_count[kReduce];
  return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  ++g_count[kAllreduce];
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  ++g_count[kAllgather];
  return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  ++g_count[kAlltoall];
  return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm) {
  ++g_count[kExscan];
  return PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  ++g_count[kReduce_scatter];
  return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  ++g_count[kReduce_scatter_block];
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                             const int array_of_starts[], int order, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  ++g_count[kType_create_subarray];
  return PMPI_Type_create_subarray(ndims, array_of_sizes, array_of_subsizes, array_of_starts, order,
                                   oldtype, newtype);
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype* newtype) {
  ++g_count[kType_create_hvector];
  return PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

int MPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype* newtype) {
  ++g_count[kType_create_struct];
  return PMPI_Type_create_struct(count, blocklengths, displacements, types, newtype);
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype* newtype) {
  ++g_count[kType_create_resized];
  return PMPI_Type_create_resized(oldtype, lb, extent, newtype);
}

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  ++g_count[kType_get_extent];
  return PMPI_Type_get_extent(datatype, lb, extent);
}

int MPI_Type_commit(MPI_Datatype* datatype) {
  ++g_count[kType_commit];
  return PMPI_Type_commit(datatype);
}

int MPI_Type_size(MPI_Datatype datatype, int* size) {
  ++g_count[kType_size];
  return PMPI_Type_size(datatype, size);
}

int MPI_Type_free(MPI_Datatype* datatype) {
  ++g_count[kType_free];
  return PMPI_Type_free(datatype);
}

int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                   MPI_Win* win) {
  ++g_count[kWin_create];
  return PMPI_Win_create(base, size, disp_unit, info, comm, win);
}

int MPI_Win_fence(int assert, MPI_Win win) {
  ++g_count[kWin_fence];
  return PMPI_Win_fence(assert, win);
}

int MPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
            int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype,
            MPI_Win win) {
  ++g_count[kPut];
  return PMPI_Put(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                  target_count, target_datatype, win);
}

int MPI_Win_free(MPI_Win* win) {
  ++g_count[kWin_free];
  return PMPI_Win_free(win);
}
