/* The gos native communication API (C). docs/native-api.md describes it in full.
 *
 * A process started by gos-run (GOS_CHANNEL, GOS_RANK and GOS_SIZE in its environment) talks
 * only to its local nodeagent, through a shared-memory channel (gos/bcs/channel.h). Every call
 * below posts descriptors into that channel; the nodeagents match and move messages at global
 * strobes (buffered coscheduling), so a blocking call returns after one or two strobes.
 *
 * Communicators: a gos_comm_t names a context id (messages match only within one context) and
 * the world ranks of its members. gos_comm_world() is every rank of the job. Ranks passed to
 * and returned by calls are ranks in the given communicator.
 *
 * Threads: single-threaded (MPI_THREAD_SINGLE / FUNNELED): call from one thread at a time.
 * Errors: every int-returning call returns GOS_OK or a GOS_ERR_* code (gos_error_string).
 * Buffers passed to non-blocking calls must stay valid and (for receives) untouched until the
 * request completes, as in MPI.
 */
#ifndef GOS_GOS_H_
#define GOS_GOS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GOS_OK 0
#define GOS_ERR_TRUNCATE 1 /* message longer than the receive buffer */
#define GOS_ERR_RANK 2     /* rank outside the communicator */
#define GOS_ERR_ARG 3      /* invalid argument (null pointer, negative count, bad type/op) */
#define GOS_ERR_NOT_INIT 4 /* gos_init has not been called (or gos_finalize has) */
#define GOS_ERR_CHANNEL 5  /* no channel: not started by gos-run, or a corrupt channel */
#define GOS_ERR_REQUEST 6  /* invalid request handle */
#define GOS_ERR_TAG 7      /* negative tag where one is not allowed */

#define GOS_ANY_SOURCE (-1)
#define GOS_ANY_TAG (-1)

/* Context ids at or above this value are reserved for the library's collectives. */
#define GOS_CTX_COLLECTIVE_BIT (UINT64_C(1) << 63)
#define GOS_CTX_WORLD UINT64_C(1)
#define GOS_CTX_SELF UINT64_C(2)

typedef struct gos_comm {
  uint64_t ctx;             /* context id, unique per communicator, < GOS_CTX_COLLECTIVE_BIT */
  int size;                 /* members */
  int rank;                 /* this process's rank in the communicator */
  const int* world;         /* world rank of each member; NULL = identity (size == world size) */
  const int* world_to_comm; /* inverse of world (world size entries, -1 = not a member); may be
                               NULL, then lookups scan `world` */
} gos_comm_t;

typedef uint64_t gos_request_t; /* 0 = GOS_REQUEST_NULL */
#define GOS_REQUEST_NULL UINT64_C(0)

typedef struct gos_status {
  int source; /* communicator rank of the sender */
  int tag;
  size_t len;    /* bytes received (or of the probed message) */
  int error;     /* GOS_OK or GOS_ERR_TRUNCATE */
  int cancelled; /* a receive or send withdrawn by gos_cancel (then len is 0) */
} gos_status_t;

/* Flags of gos_isend. */
#define GOS_SEND_SYNC 1 /* complete only once matched (MPI_Ssend); never buffered */

/* Start / stop. gos_init maps the channel named by GOS_CHANNEL. */
int gos_init(void);
int gos_finalize(void);
int gos_initialized(void);
int gos_finalized(void);
/* Tells the nodeagent the job must fail with `code`, then exits the process with it. */
void gos_abort(int code) __attribute__((noreturn));

int gos_world_rank(void);
int gos_world_size(void);
const gos_comm_t* gos_comm_world(void);
const gos_comm_t* gos_comm_self(void);

/* Point-to-point. Sends of at most gos_eager_bytes() bytes (default 64 KiB, GOS_EAGER_BYTES)
 * are copied and complete at once unless GOS_SEND_SYNC; larger ones complete when the data
 * has moved. */
int gos_isend(const void* buf, size_t len, int dest, int tag, const gos_comm_t* comm, int flags,
              gos_request_t* req);
int gos_irecv(void* buf, size_t len, int source, int tag, const gos_comm_t* comm,
              gos_request_t* req);
size_t gos_eager_bytes(void);

/* Completion. A completed request is released and set to GOS_REQUEST_NULL; waiting on or
 * testing GOS_REQUEST_NULL succeeds at once with an empty status (source -1, tag -1, len 0).
 * st may be NULL. */
int gos_wait(gos_request_t* req, gos_status_t* st);
int gos_test(gos_request_t* req, int* flag, gos_status_t* st);
/* Asks to withdraw a pending receive, or a send that is not complete yet (a send larger than
 * the eager limit, or a synchronous one): at the next strobe it completes cancelled (status
 * `cancelled` = 1) unless it was matched first. The request must still be waited for or
 * tested. An eager send (complete from the start), or a completed request, is not cancelled. */
int gos_cancel(const gos_request_t* req);
/* *index = GOS_UNDEFINED_INDEX when every request is GOS_REQUEST_NULL. */
#define GOS_UNDEFINED_INDEX (-1)
int gos_waitany(int n, gos_request_t* reqs, int* index, gos_status_t* st);
int gos_testany(int n, gos_request_t* reqs, int* index, int* flag, gos_status_t* st);
/* Releases a request without waiting; the operation still completes (MPI_Request_free). */
int gos_request_free(gos_request_t* req);
/* Blocks until the nodeagent publishes new completions (at most until the next strobe);
 * the building block of wait-for-any loops. */
int gos_progress_wait(void);

/* Probing: does not receive the message. */
int gos_iprobe(int source, int tag, const gos_comm_t* comm, int* flag, gos_status_t* st);
int gos_probe(int source, int tag, const gos_comm_t* comm, gos_status_t* st);

/* Collectives (every member calls, in the same order). Barrier and broadcast are done by the
 * nodeagents natively at strobes; the reductions gather to the root, which combines the
 * contributions in rank order (so results are bitwise reproducible), then broadcast. */
typedef enum gos_type {
  GOS_CHAR = 0,
  GOS_SIGNED_CHAR,
  GOS_UNSIGNED_CHAR,
  GOS_BYTE,
  GOS_SHORT,
  GOS_UNSIGNED_SHORT,
  GOS_INT,
  GOS_UNSIGNED,
  GOS_LONG,
  GOS_UNSIGNED_LONG,
  GOS_LONG_LONG,
  GOS_UNSIGNED_LONG_LONG,
  GOS_INT8,
  GOS_UINT8,
  GOS_INT16,
  GOS_UINT16,
  GOS_INT32,
  GOS_UINT32,
  GOS_INT64,
  GOS_UINT64,
  GOS_FLOAT,
  GOS_DOUBLE,
  GOS_LONG_DOUBLE,
  GOS_C_BOOL,
  GOS_WCHAR,
  /* value/index pairs for MINLOC and MAXLOC (layouts as MPI's) */
  GOS_FLOAT_INT,
  GOS_DOUBLE_INT,
  GOS_LONG_INT,
  GOS_2INT,
  GOS_SHORT_INT,
  GOS_LONG_DOUBLE_INT,
  GOS_TYPE_COUNT
} gos_type_t;

typedef enum gos_op {
  GOS_SUM = 0,
  GOS_PROD,
  GOS_MIN,
  GOS_MAX,
  GOS_LAND,
  GOS_LOR,
  GOS_LXOR,
  GOS_BAND,
  GOS_BOR,
  GOS_BXOR,
  GOS_MINLOC,
  GOS_MAXLOC,
  GOS_OP_COUNT
} gos_op_t;

size_t gos_type_size(gos_type_t type);
/* 1 if op applies to type (e.g. BAND to integers, MINLOC to pair types only). */
int gos_op_valid(gos_op_t op, gos_type_t type);
/* inout[i] = in[i] op inout[i] for count elements. */
int gos_reduce_local(const void* in, void* inout, size_t count, gos_type_t type, gos_op_t op);

int gos_barrier(const gos_comm_t* comm);
int gos_bcast(void* buf, size_t len, int root, const gos_comm_t* comm);
/* in may equal out (in place). */
int gos_reduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op, int root,
               const gos_comm_t* comm);
int gos_allreduce(const void* in, void* out, size_t count, gos_type_t type, gos_op_t op,
                  const gos_comm_t* comm);

/* Seconds since an arbitrary point, monotonic; resolution gos_wtick(). */
double gos_wtime(void);
double gos_wtick(void);
const char* gos_error_string(int err);

#ifdef __cplusplus
}
#endif

#endif /* GOS_GOS_H_ */
