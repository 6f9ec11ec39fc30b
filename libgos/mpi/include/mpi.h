/* The gos MPI subset (docs/mpi.md), for C and C++ programs compiled with gos-cc / gos-c++.
 *
 * Every call maps onto the gos native API (gos/gos.h): a rank holds no network state, its
 * sends and receives are descriptors matched by the nodeagents at global strobes. Only the
 * calls declared here exist; a program using anything else (MPI_Win_lock, MPI_Comm_spawn, ...)
 * fails to compile (implicit declaration) or to link (undefined reference), never at run time.
 *
 * Handles are ints (as in MPICH). Errors: MPI_ERRORS_ARE_FATAL by default, so any error prints
 * "gos MPI: <call>: <reason> (rank <r>)" to stderr and ends the job with exit code 1; after
 * MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), calls on that communicator return the
 * error class instead (MPI_ERR_TRUNCATE, MPI_ERR_RANK, ...).
 *
 * Threads: MPI_THREAD_FUNNELED at most; call MPI from one thread at a time.
 *
 * Profiling (PMPI): every function here is also PMPI_<name> (gos_pmpi.h, included at the end);
 * MPI_<name> is a weak alias, so a tool linked before gos's library can replace it.
 */
#ifndef GOS_MPI_H_
#define GOS_MPI_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPI_VERSION 3
#define MPI_SUBVERSION 1

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef int MPI_Group;
typedef int MPI_Info;
typedef int MPI_Win;
typedef ptrdiff_t MPI_Aint;
/* MPI-3 large counts (the _x calls). */
typedef long long MPI_Count;
/* A file offset (there is no MPI I/O; the type is there for MPI_OFFSET). */
typedef long long MPI_Offset;
/* A handle as Fortran holds it (MPI_Comm_c2f, ...): the same int. */
typedef int MPI_Fint;

/* MPI_SOURCE, MPI_TAG and MPI_ERROR are public; gos_bytes is private (use MPI_Get_count). */
typedef struct MPI_Status {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  size_t gos_bytes;
  int gos_cancelled;
} MPI_Status;

/* Error classes (values as MPICH's). */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_ROOT 7
#define MPI_ERR_GROUP 8
#define MPI_ERR_OP 9
#define MPI_ERR_ARG 12
#define MPI_ERR_UNKNOWN 13
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_OTHER 15
#define MPI_ERR_INTERN 16
#define MPI_ERR_IN_STATUS 17
#define MPI_ERR_PENDING 18
#define MPI_ERR_REQUEST 19
#define MPI_ERR_TOPOLOGY 10
#define MPI_ERR_DIMS 11
#define MPI_ERR_NO_MEM 34
#define MPI_ERR_KEYVAL 48
#define MPI_ERR_WIN 45
#define MPI_ERR_SIZE 51
#define MPI_ERR_DISP 52
#define MPI_ERR_RMA_RANGE 55
#define MPI_ERR_LASTCODE 0x3fffffff

#define MPI_MAX_PROCESSOR_NAME 256
#define MPI_MAX_ERROR_STRING 512
#define MPI_MAX_LIBRARY_VERSION_STRING 256
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024

#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

#define MPI_UNDEFINED (-32766)
#define MPI_PROC_NULL (-1)
/* Groups, MPI_Comm_compare and MPI_Group_compare results, MPI_Comm_split_type. */
#define MPI_GROUP_NULL ((MPI_Group)0)
#define MPI_GROUP_EMPTY ((MPI_Group)1)
#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3
#define MPI_INFO_NULL ((MPI_Info)0)
#define MPI_ORDER_C 56
#define MPI_ORDER_FORTRAN 57
#define MPI_COMM_TYPE_SHARED 1
/* Predefined attributes of MPI_COMM_WORLD (MPI_Comm_get_attr). */
#define MPI_TAG_UB 1
#define MPI_HOST 2
#define MPI_IO 3
#define MPI_WTIME_IS_GLOBAL 4
#define MPI_UNIVERSE_SIZE 5
#define MPI_APPNUM 6
#define MPI_LASTUSEDCODE 7
/* No keyval: what MPI_Comm_free_keyval leaves in the handle. */
#define MPI_KEYVAL_INVALID 0x24000000
/* MPI_Topo_test. */
#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3
#define MPI_ANY_SOURCE (-2)
#define MPI_ANY_TAG (-1)

#define MPI_COMM_NULL ((MPI_Comm)0)
#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MPI_COMM_SELF ((MPI_Comm)2)

#define MPI_REQUEST_NULL ((MPI_Request)0)

#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0)
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)1)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)2)
/* MPI 4.0: like MPI_ERRORS_ARE_FATAL here (a job is aborted as a whole). */
#define MPI_ERRORS_ABORT ((MPI_Errhandler)3)

#define MPI_STATUS_IGNORE ((MPI_Status*)0)
#define MPI_STATUSES_IGNORE ((MPI_Status*)0)
#define MPI_IN_PLACE ((void*)-1)
/* Buffer address 0: with a datatype built from absolute addresses (MPI_Get_address). */
#define MPI_BOTTOM ((void*)0)

/* Basic datatypes: handle = gos_type_t + 1 (see gos/gos.h). Derived types get handles >= 64. */
#define MPI_DATATYPE_NULL ((MPI_Datatype)0)
#define MPI_CHAR ((MPI_Datatype)1)
#define MPI_SIGNED_CHAR ((MPI_Datatype)2)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)3)
#define MPI_BYTE ((MPI_Datatype)4)
/* What MPI_Pack writes: raw bytes (every rank of a gos job shares one data representation). */
#define MPI_PACKED MPI_BYTE
#define MPI_SHORT ((MPI_Datatype)5)
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)6)
#define MPI_INT ((MPI_Datatype)7)
#define MPI_UNSIGNED ((MPI_Datatype)8)
#define MPI_LONG ((MPI_Datatype)9)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)10)
#define MPI_LONG_LONG ((MPI_Datatype)11)
#define MPI_LONG_LONG_INT MPI_LONG_LONG
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)12)
#define MPI_INT8_T ((MPI_Datatype)13)
#define MPI_UINT8_T ((MPI_Datatype)14)
#define MPI_INT16_T ((MPI_Datatype)15)
#define MPI_UINT16_T ((MPI_Datatype)16)
#define MPI_INT32_T ((MPI_Datatype)17)
#define MPI_UINT32_T ((MPI_Datatype)18)
#define MPI_INT64_T ((MPI_Datatype)19)
#define MPI_UINT64_T ((MPI_Datatype)20)
#define MPI_FLOAT ((MPI_Datatype)21)
#define MPI_DOUBLE ((MPI_Datatype)22)
#define MPI_LONG_DOUBLE ((MPI_Datatype)23)
#define MPI_C_BOOL ((MPI_Datatype)24)
#define MPI_WCHAR ((MPI_Datatype)25)
/* The MPI-2.2/3.0 address, offset and count types: the C types they are on this (LP64) ABI,
 * so MPI_Type_get_name calls them MPI_LONG and MPI_LONG_LONG_INT. */
#define MPI_AINT MPI_LONG
#define MPI_OFFSET MPI_LONG_LONG
#define MPI_COUNT MPI_LONG_LONG
/* Value/index pairs for MINLOC and MAXLOC: struct { T value; int index; } (C layout). */
#define MPI_FLOAT_INT ((MPI_Datatype)26)
#define MPI_DOUBLE_INT ((MPI_Datatype)27)
#define MPI_LONG_INT ((MPI_Datatype)28)
#define MPI_2INT ((MPI_Datatype)29)
#define MPI_SHORT_INT ((MPI_Datatype)30)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)31)

/* Fortran's datatypes (the Fortran bindings' MPI_INTEGER ..., usable from C too), with
 * gfortran's sizes: LOGICAL and INTEGER are 4 bytes (LOGICAL .TRUE. is 1), REAL 4, DOUBLE
 * PRECISION 8, COMPLEX two REALs, DOUBLE COMPLEX two DOUBLE PRECISIONs; the pair types for
 * MINLOC and MAXLOC hold the index in the value's type. Reductions: as the C type of the same
 * representation (MPI_LOGICAL: LAND, LOR, LXOR only); MPI_SUM and MPI_PROD on the complex
 * types and MINLOC/MAXLOC on the pairs are done by the library, combining in rank order. */
#define MPI_CHARACTER ((MPI_Datatype)32)
#define MPI_LOGICAL ((MPI_Datatype)33)
#define MPI_INTEGER ((MPI_Datatype)34)
#define MPI_REAL ((MPI_Datatype)35)
#define MPI_DOUBLE_PRECISION ((MPI_Datatype)36)
#define MPI_COMPLEX ((MPI_Datatype)37)
#define MPI_DOUBLE_COMPLEX ((MPI_Datatype)38)
#define MPI_2INTEGER ((MPI_Datatype)39)
#define MPI_2REAL ((MPI_Datatype)40)
#define MPI_2DOUBLE_PRECISION ((MPI_Datatype)41)
#define MPI_INTEGER1 ((MPI_Datatype)42)
#define MPI_INTEGER2 ((MPI_Datatype)43)
#define MPI_INTEGER4 ((MPI_Datatype)44)
#define MPI_INTEGER8 ((MPI_Datatype)45)
#define MPI_REAL4 ((MPI_Datatype)46)
#define MPI_REAL8 ((MPI_Datatype)47)
#define MPI_COMPLEX8 ((MPI_Datatype)48)
#define MPI_COMPLEX16 ((MPI_Datatype)49)
/* The last of them (derived types start at 64). */
#define GOS_MPI_LAST_FORTRAN_TYPE MPI_COMPLEX16

/* Predefined reduction operations: handle = gos_op_t + 1. */
#define MPI_OP_NULL ((MPI_Op)0)
#define MPI_SUM ((MPI_Op)1)
#define MPI_PROD ((MPI_Op)2)
#define MPI_MIN ((MPI_Op)3)
#define MPI_MAX ((MPI_Op)4)
#define MPI_LAND ((MPI_Op)5)
#define MPI_LOR ((MPI_Op)6)
#define MPI_LXOR ((MPI_Op)7)
#define MPI_BAND ((MPI_Op)8)
#define MPI_BOR ((MPI_Op)9)
#define MPI_BXOR ((MPI_Op)10)
#define MPI_MINLOC ((MPI_Op)11)
#define MPI_MAXLOC ((MPI_Op)12)

/* User-defined reductions: inoutvec[i] = invec[i] op inoutvec[i] for *len elements. */
typedef void MPI_User_function(void* invec, void* inoutvec, int* len, MPI_Datatype* datatype);
int MPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op);
int MPI_Op_free(MPI_Op* op);
/* Predefined ops are commutative; a user op is what MPI_Op_create was told. */
int MPI_Op_commutative(MPI_Op op, int* commute);
/* inoutbuf[i] = inbuf[i] op inoutbuf[i], on this rank only (predefined or user op). */
int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype,
                     MPI_Op op);

/* Start / stop. */
int MPI_Init(int* argc, char*** argv);
int MPI_Init_thread(int* argc, char*** argv, int required, int* provided);
int MPI_Finalize(void);
int MPI_Initialized(int* flag);
int MPI_Finalized(int* flag);
int MPI_Abort(MPI_Comm comm, int errorcode);

/* Communicators. */
int MPI_Comm_rank(MPI_Comm comm, int* rank);
int MPI_Comm_size(MPI_Comm comm, int* size);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm);
int MPI_Comm_free(MPI_Comm* comm);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler);
/* A handler of the program's own: called with the communicator and the error code of a call
 * that failed on it, after which the call returns that code (unless the handler ends the
 * job). The handler may call MPI. */
typedef void MPI_Comm_errhandler_function(MPI_Comm* comm, int* errorcode, ...);
typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn; /* MPI 2.0's name */
typedef MPI_Comm_errhandler_function MPI_Handler_function;   /* MPI 1's name */
int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* function, MPI_Errhandler* errhandler);
int MPI_Errhandler_create(MPI_Handler_function* function, MPI_Errhandler* errhandler);
/* Applies comm's handler to errorcode as a failed call on comm would; MPI_SUCCESS when the
 * handler returned. */
int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode);
/* Freeing a handler only sets the handle to MPI_ERRHANDLER_NULL: communicators using it keep
 * it. */
int MPI_Errhandler_free(MPI_Errhandler* errhandler);
/* MPI-1 names of MPI_Comm_set_errhandler and MPI_Comm_get_errhandler. */
int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler);
/* There are no intercommunicators: *flag is always false. */
int MPI_Comm_test_inter(MPI_Comm comm, int* flag);
/* Nodes are gos nodes: MPI_COMM_TYPE_SHARED groups the ranks that started on one node. */
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm);
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result);
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm);
/* Called by the group's members only; the others need not call it (a non-member that does
 * gets MPI_COMM_NULL). Needs no communication. */
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm);
int MPI_Comm_group(MPI_Comm comm, MPI_Group* group);
/* The predefined attributes only: *(int**)attribute_val points at the value. */
int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag);
int MPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag);

/* Attribute caching. A user attribute is a void* stored under a keyval; MPI_Comm_get_attr
 * gives it back as *(void**)attribute_val. MPI_Comm_dup calls each attribute's copy function
 * (the new communicator gets *attribute_val_out when it sets *flag); MPI_Comm_free,
 * MPI_Comm_delete_attr and replacing a value call the delete function; a callback's error
 * (anything but MPI_SUCCESS) fails the call. MPI_COMM_SELF's attributes are deleted at the
 * start of MPI_Finalize, the last set first. A freed keyval stays valid for the attributes
 * still stored under it. */
typedef int MPI_Comm_copy_attr_function(MPI_Comm oldcomm, int comm_keyval, void* extra_state,
                                        void* attribute_val_in, void* attribute_val_out, int* flag);
typedef int MPI_Comm_delete_attr_function(MPI_Comm comm, int comm_keyval, void* attribute_val,
                                          void* extra_state);
/* The MPI-1 names of the same function types. */
typedef MPI_Comm_copy_attr_function MPI_Copy_function;
typedef MPI_Comm_delete_attr_function MPI_Delete_function;
/* Predefined callbacks: copy nothing (*flag = 0), delete nothing, copy the pointer. */
int gos_mpi_comm_null_copy_fn(MPI_Comm oldcomm, int comm_keyval, void* extra_state,
                              void* attribute_val_in, void* attribute_val_out, int* flag);
int gos_mpi_comm_null_delete_fn(MPI_Comm comm, int comm_keyval, void* attribute_val,
                                void* extra_state);
int gos_mpi_comm_dup_fn(MPI_Comm oldcomm, int comm_keyval, void* extra_state,
                        void* attribute_val_in, void* attribute_val_out, int* flag);
#define MPI_COMM_NULL_COPY_FN gos_mpi_comm_null_copy_fn
#define MPI_COMM_NULL_DELETE_FN gos_mpi_comm_null_delete_fn
#define MPI_COMM_DUP_FN gos_mpi_comm_dup_fn
#define MPI_NULL_COPY_FN gos_mpi_comm_null_copy_fn
#define MPI_NULL_DELETE_FN gos_mpi_comm_null_delete_fn
#define MPI_DUP_FN gos_mpi_comm_dup_fn
int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval,
                           void* extra_state);
int MPI_Comm_free_keyval(int* comm_keyval);
int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val);
int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval);
/* MPI-1 names (removed in MPI-3): the same as the four above. */
int MPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval,
                      void* extra_state);
int MPI_Keyval_free(int* keyval);
int MPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val);
int MPI_Attr_delete(MPI_Comm comm, int keyval);

/* Groups (ordered sets of processes). */
int MPI_Group_size(MPI_Group group, int* size);
int MPI_Group_rank(MPI_Group group, int* rank);
int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup);
int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup);
/* ranges[i] = {first, last, stride}: the ranks first, first + stride, ... up to last. */
int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup);
int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup);
int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[]);
int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result);
int MPI_Group_free(MPI_Group* group);

/* Point-to-point. */
int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status);
int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request);
int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request);
int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status);
/* MPI 4.0: MPI_Sendrecv as one request, whose status is the receive's. */
int MPI_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                  MPI_Comm comm, MPI_Request* request);
int MPI_Isendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                          int source, int recvtag, MPI_Comm comm, MPI_Request* request);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status);
int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count);
/* Basic elements received (a derived type's partial element counts what arrived of it). */
int MPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count);
int MPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count);
/* Ready and buffered sends: MPI_Rsend is a plain send; MPI_Bsend copies the message and
 * returns (the attached buffer is kept but not needed). */
int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
/* Copies like MPI_Bsend; the request is complete at once. */
int MPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Buffer_attach(void* buffer, int size);
int MPI_Buffer_detach(void* buffer_addr, int* size);
#define MPI_BSEND_OVERHEAD 0
/* Persistent requests: MPI_Start posts the operation again; a completed persistent request
 * stays allocated (inactive) until MPI_Request_free. */
int MPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request* request);
int MPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request);
/* MPI_Start of these: as MPI_Rsend, and as MPI_Ibsend (complete at once). */
int MPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request);
int MPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request);
int MPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request* request);
int MPI_Start(MPI_Request* request);
int MPI_Startall(int count, MPI_Request requests[]);
int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status);

/* Completion. */
int MPI_Wait(MPI_Request* request, MPI_Status* status);
int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]);
int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status);
int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]);
int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]);
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status);
int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]);
int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status);
int MPI_Request_free(MPI_Request* request);
/* MPI_Test that leaves the request alone: a completed one stays for MPI_Wait, MPI_Test or
 * MPI_Request_free, which report the same status. */
int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status);
/* A pending receive is withdrawn at the next strobe unless a message matched it first; a send
 * is never cancelled (it completes normally). Wait or test the request afterwards. */
int MPI_Cancel(MPI_Request* request);
int MPI_Test_cancelled(const MPI_Status* status, int* flag);
/* For generalized requests and layered libraries: what MPI_Test_cancelled and MPI_Get_count /
 * MPI_Get_elements (count elements of a basic type) read back from a status. */
int MPI_Status_set_cancelled(MPI_Status* status, int flag);
int MPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count);
int MPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count);

/* Collectives. */
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm);
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm);
/* An Allreduce of the whole vector, of which each rank keeps its own block. */
int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm);
int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm);
int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm);
/* Nonblocking collectives (no MPI_IN_PLACE for Iallgather and Ialltoall). */
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request);
int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request);
int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request);
int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request);
int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request);
int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request* request);
int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request);
int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request* request);
int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request);
int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request* request);
int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request* request);
int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request);
int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request* request);
int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm);
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm);
int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm);
int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request);

/* Derived datatypes (packed into a temporary buffer to send, unpacked after receiving). */
int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                    MPI_Datatype* newtype);
int MPI_Type_commit(MPI_Datatype* datatype);
int MPI_Type_free(MPI_Datatype* datatype);
int MPI_Type_size(MPI_Datatype datatype, int* size);
int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size);
int MPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype* newtype);
int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype* newtype);
int MPI_Type_indexed(int count, const int blocklengths[], const int displacements[],
                     MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_hindexed(int count, const int blocklengths[], const MPI_Aint displacements[],
                             MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_indexed_block(int count, int blocklength, const int displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype* newtype);
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent);
/* Where one element's data really lies, whatever its (resized) bounds say. */
int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent);
int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent);
int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent);
/* Basic types are named as in mpi.h ("MPI_INT"); derived ones have the empty name until set. */
int MPI_Type_set_name(MPI_Datatype datatype, const char* type_name);
int MPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen);
/* A block of an n-dimensional array (built from hvectors, its extent the whole array's). */
int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                             const int array_of_starts[], int order, MPI_Datatype oldtype,
                             MPI_Datatype* newtype);
/* Packing: the bytes MPI_Pack writes are the typed data in type-map order, back to back. */
int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
             int* position, MPI_Comm comm);
int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
               MPI_Datatype datatype, MPI_Comm comm);
int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size);
int MPI_Get_address(const void* location, MPI_Aint* address);
/* MPI-1 names removed in MPI-3, still used by older codes (HPL): the same as
 * MPI_Get_address and MPI_Type_create_struct. */
int MPI_Address(void* location, MPI_Aint* address);
int MPI_Type_struct(int count, int blocklengths[], MPI_Aint displacements[], MPI_Datatype types[],
                    MPI_Datatype* newtype);
/* More MPI-1 names: MPI_Type_create_hvector, MPI_Type_create_hindexed, and the parts of
 * MPI_Type_get_extent (ub = lb + extent). */
int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                     MPI_Datatype* newtype);
int MPI_Type_hindexed(int count, int blocklengths[], MPI_Aint displacements[], MPI_Datatype oldtype,
                      MPI_Datatype* newtype);
int MPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent);
int MPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement);
int MPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement);
MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp);
MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2);

/* Cartesian topologies (row-major ranks; reorder is ignored: ranks keep their order). */
int MPI_Dims_create(int nnodes, int ndims, int dims[]);
int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm* comm_cart);
int MPI_Cartdim_get(MPI_Comm comm, int* ndims);
int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]);
int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank);
int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]);
int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest);
/* The sub-grids of a Cartesian communicator: remain_dims[d] != 0 keeps dimension d. Each
 * rank gets the communicator of the ranks that share its coordinates in the dropped
 * dimensions, Cartesian over the kept ones (row-major ranks); none kept gives a
 * 0-dimensional one of the rank alone. */
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm);
/* Ranks keep their order: *newrank is the rank in comm, MPI_UNDEFINED beyond the grid. */
int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank);
/* MPI_CART, MPI_DIST_GRAPH or MPI_UNDEFINED. */
int MPI_Topo_test(MPI_Comm comm, int* status);
/* Distributed graph topologies (adjacent form only; reorder is ignored: ranks keep their
 * order). Each rank names its in-neighbours (sources) and out-neighbours (destinations);
 * weights, unless MPI_UNWEIGHTED, are kept and returned. */
/* Markers passed for the weights: the addresses of objects of the library (not small
 * integers cast to pointers, which compilers flag as reads of an empty region). */
extern int gos_mpi_unweighted[1];
extern int gos_mpi_weights_empty[1];
#define MPI_UNWEIGHTED (gos_mpi_unweighted)
#define MPI_WEIGHTS_EMPTY (gos_mpi_weights_empty)
int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm* comm_dist_graph);
int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree, int* weighted);
int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[],
                             int maxoutdegree, int destinations[], int destweights[]);
/* Neighbourhood collectives on a Cartesian or distributed graph communicator. Cartesian: the
 * neighbours, in block order, are for each dimension d the source then the destination of
 * MPI_Cart_shift(comm, d, 1); an MPI_PROC_NULL one (a non-periodic edge) is sent nothing, and
 * its receive block is left as it is. Graph: receive block k comes from sources[k], send
 * block k goes to destinations[k]. Another communicator is MPI_ERR_TOPOLOGY. */
int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, const int recvcounts[], const int displs[],
                            MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                           MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                           const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);

/* Environment. */
double MPI_Wtime(void);
double MPI_Wtick(void);
int MPI_Get_processor_name(char* name, int* resultlen);
int MPI_Error_string(int errorcode, char* string, int* resultlen);
int MPI_Error_class(int errorcode, int* errorclass);
/* Error classes and codes of the program's own, above MPI_ERR_LASTCODE (MPI_LASTUSEDCODE on
 * MPI_COMM_WORLD tells the last one handed out), with texts for MPI_Error_string. */
int MPI_Add_error_class(int* errorclass);
int MPI_Add_error_code(int errorclass, int* errorcode);
int MPI_Add_error_string(int errorcode, const char* string);
int MPI_Get_version(int* version, int* subversion);
int MPI_Get_library_version(char* version, int* resultlen);
int MPI_Query_thread(int* provided);
int MPI_Is_thread_main(int* flag);
/* Info objects: hints, kept and returned; gos acts on none. */
int MPI_Info_create(MPI_Info* info);
int MPI_Info_set(MPI_Info info, const char* key, const char* value);
int MPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag);
/* MPI 4.0: at most *buflen bytes of the value with its NUL; *buflen is set to the length the
 * whole value needs (with the NUL). */
int MPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value, int* flag);
int MPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag);
int MPI_Info_delete(MPI_Info info, const char* key);
int MPI_Info_get_nkeys(MPI_Info info, int* nkeys);
int MPI_Info_get_nthkey(MPI_Info info, int n, char* key);
int MPI_Info_dup(MPI_Info info, MPI_Info* newinfo);
int MPI_Info_free(MPI_Info* info);
int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info);
int MPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used);
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm);
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request);
int MPI_Comm_set_name(MPI_Comm comm, const char* comm_name);
int MPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen);
int MPI_Pcontrol(const int level, ...);
/* One-sided communication, fence synchronization only (docs/mpi.md): an operation is carried
 * out at the MPI_Win_fence that ends its epoch; until then neither its origin buffer nor the
 * target's window may be touched, as MPI requires. MPI_Accumulate takes the predefined ops and
 * MPI_REPLACE. The MPI_MODE_* assertions are accepted and change nothing. */
#define MPI_WIN_NULL ((MPI_Win)0)
#define MPI_REPLACE ((MPI_Op)13)
#define MPI_MODE_NOCHECK 1024
#define MPI_MODE_NOSTORE 2048
#define MPI_MODE_NOPUT 4096
#define MPI_MODE_NOPRECEDE 8192
#define MPI_MODE_NOSUCCEED 16384
int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                   MPI_Win* win);
int MPI_Win_free(MPI_Win* win);
int MPI_Win_fence(int assert, MPI_Win win);
/* A window's errors go to its own handler: MPI_ERRORS_ARE_FATAL until set. */
int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler);
int MPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler* errhandler);
int MPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
            int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype,
            MPI_Win win);
int MPI_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int MPI_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                   int target_rank, MPI_Aint target_disp, int target_count,
                   MPI_Datatype target_datatype, MPI_Op op, MPI_Win win);
/* Handle conversion to and from Fortran (the bindings of mpif.h and the mpi module, and C
 * libraries with Fortran wrappers): the identity, since both are the same int. */
MPI_Fint MPI_Comm_c2f(MPI_Comm comm);
MPI_Comm MPI_Comm_f2c(MPI_Fint comm);
MPI_Fint MPI_Type_c2f(MPI_Datatype datatype);
MPI_Datatype MPI_Type_f2c(MPI_Fint datatype);
MPI_Fint MPI_Group_c2f(MPI_Group group);
MPI_Group MPI_Group_f2c(MPI_Fint group);
MPI_Fint MPI_Request_c2f(MPI_Request request);
MPI_Request MPI_Request_f2c(MPI_Fint request);
MPI_Fint MPI_Op_c2f(MPI_Op op);
MPI_Op MPI_Op_f2c(MPI_Fint op);
MPI_Fint MPI_Info_c2f(MPI_Info info);
MPI_Info MPI_Info_f2c(MPI_Fint info);
MPI_Fint MPI_Errhandler_c2f(MPI_Errhandler errhandler);
MPI_Errhandler MPI_Errhandler_f2c(MPI_Fint errhandler);
/* A status as Fortran holds it: MPI_F_STATUS_SIZE integers, MPI_SOURCE, MPI_TAG and
 * MPI_ERROR at indices MPI_F_SOURCE, MPI_F_TAG and MPI_F_ERROR (Fortran's MPI_SOURCE = 1,
 * ...), then the received bytes (two integers, low half first) and the cancelled flag. */
#define MPI_F_STATUS_SIZE 6
#define MPI_F_SOURCE 0
#define MPI_F_TAG 1
#define MPI_F_ERROR 2
int MPI_Status_c2f(const MPI_Status* c_status, MPI_Fint* f_status);
int MPI_Status_f2c(const MPI_Fint* f_status, MPI_Status* c_status);
/* Memory for the program (plain malloc; a size of 0 gives a pointer to free all the same). */
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr);
int MPI_Free_mem(void* base);

#ifdef __cplusplus
}
#endif

/* The profiling interface: every function above also as PMPI_<name>. */
#include "gos_pmpi.h"

#endif /* GOS_MPI_H_ */
