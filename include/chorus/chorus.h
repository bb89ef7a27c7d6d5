/*
 * chorus C API.
 *
 * Every function returns a chorus_status_t. On failure, chorus_last_error()
 * returns a thread-local, human-readable description of the most recent
 * failure on the calling thread (what failed, which peer, the provider's
 * message). The string stays valid until the next chorus call on that thread.
 *
 * Buffers: `count` is a number of elements of `dtype`. In-place operation:
 * pass the same pointer as send and receive buffer (allreduce, reduce,
 * broadcast), or CHORUS_IN_PLACE as the send buffer.
 */
#ifndef CHORUS_CHORUS_H
#define CHORUS_CHORUS_H

#include <chorus/version.h> /* CHORUS_VERSION_MAJOR, _MINOR, _PATCH, _STRING */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum chorus_status {
  CHORUS_SUCCESS = 0,
  CHORUS_ERR_INVALID_ARGUMENT = 1, /* bad argument or misuse by the caller */
  CHORUS_ERR_CONFIG = 2,           /* invalid CHORUS_* variable or launcher environment */
  CHORUS_ERR_TRANSPORT = 3,        /* the fabric/provider reported an error */
  CHORUS_ERR_TIMEOUT = 4,          /* a wait exceeded CHORUS_TIMEOUT */
  CHORUS_ERR_PEER_FAILED = 5,      /* a peer disappeared or its connection broke */
  CHORUS_ERR_BOOTSTRAP = 6,        /* the TCP key/value store failed or refused us */
  CHORUS_ERR_UNSUPPORTED = 7,      /* not available in this build or on this fabric */
  CHORUS_ERR_FINALIZED = 8,        /* used after finalize */
  CHORUS_ERR_TRUNCATED = 9,        /* a message was larger than the receive buffer */
  CHORUS_ERR_INTERNAL = 10         /* a bug in chorus: please report it */
} chorus_status_t;

/* Element types. Values are stable ABI. */
typedef enum chorus_datatype {
  CHORUS_INT8 = 0,
  CHORUS_UINT8 = 1,
  CHORUS_INT16 = 2,
  CHORUS_UINT16 = 3,
  CHORUS_INT32 = 4,
  CHORUS_UINT32 = 5,
  CHORUS_INT64 = 6,
  CHORUS_UINT64 = 7,
  CHORUS_FLOAT16 = 8,  /* IEEE 754 binary16 */
  CHORUS_BFLOAT16 = 9, /* bfloat16 (upper half of a binary32) */
  CHORUS_FLOAT32 = 10,
  CHORUS_FLOAT64 = 11
} chorus_datatype_t;
#define CHORUS_NUM_DATATYPES 12

typedef enum chorus_op {
  CHORUS_SUM = 0,
  CHORUS_PROD = 1,
  CHORUS_MIN = 2,
  CHORUS_MAX = 3
} chorus_op_t;
#define CHORUS_NUM_OPS 4

/* Pass as send buffer to request in-place operation. */
#define CHORUS_IN_PLACE ((const void*)1)

typedef struct chorus_comm* chorus_comm_t;

/* Creates the world communicator from the launcher environment (chorusrun,
 * mpirun, srun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT). Collective. */
chorus_status_t chorus_init(chorus_comm_t* comm);
/* Tears the communicator down and frees it; *comm becomes NULL. For the
 * world communicator (chorus_init) collective: leaves the job, and every
 * communicator split from it becomes unusable. For a communicator made by
 * chorus_comm_split/chorus_comm_dup/chorus_comm_create_group local: releases
 * just that one. */
chorus_status_t chorus_finalize(chorus_comm_t* comm);

/* Sub-communicators, as MPI_Comm_split / MPI_Comm_dup. Collective over comm.
 * Ranks passing the same color >= 0 form a new communicator, ranked by
 * (key, rank in comm); a negative color joins none and gets *newcomm = NULL.
 * The new communicator shares comm's connections but has its own tag space:
 * its collectives and messages never match another communicator's. Release
 * it with chorus_finalize. chorus_comm_dup is chorus_comm_split(comm, 0, rank). */
chorus_status_t chorus_comm_split(chorus_comm_t comm, int color, int key, chorus_comm_t* newcomm);
chorus_status_t chorus_comm_dup(chorus_comm_t comm, chorus_comm_t* newcomm);
/* A communicator of the `count` ranks of comm in `members` (in the new
 * communicator's rank order; this rank among them), as
 * MPI_Comm_create_group: collective over the members only, the other ranks
 * need not call. Concurrent calls on comm whose member lists overlap pass
 * different tags (0..2^31-1). Release it with chorus_finalize. */
chorus_status_t chorus_comm_create_group(chorus_comm_t comm, const int* members, size_t count, int tag,
                                         chorus_comm_t* newcomm);

chorus_status_t chorus_comm_rank(chorus_comm_t comm, int* rank);
chorus_status_t chorus_comm_size(chorus_comm_t comm, int* size);

chorus_status_t chorus_allreduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 chorus_datatype_t dtype, chorus_op_t op);
chorus_status_t chorus_broadcast(chorus_comm_t comm, void* buf, size_t count, chorus_datatype_t dtype, int root);
chorus_status_t chorus_barrier(chorus_comm_t comm);
chorus_status_t chorus_reduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                              chorus_datatype_t dtype, chorus_op_t op, int root);
/* recvbuf holds size*count elements; rank r's block lands at r*count. */
chorus_status_t chorus_allgather(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 chorus_datatype_t dtype);
/* sendbuf holds size*count elements; rank r receives the reduction of block r. */
chorus_status_t chorus_reduce_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                      chorus_datatype_t dtype, chorus_op_t op);
/* sendbuf and recvbuf hold size*count elements; block j of rank i goes to block i of rank j. */
chorus_status_t chorus_alltoall(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_datatype_t dtype);

/* Rooted, variable-size and prefix collectives (as MPI's). Counts and
 * displacements are elements; arrays hold one entry per rank (comm size). A
 * NULL displacement array means packed blocks (displs[r] = counts[0] + ... +
 * counts[r-1]). Arguments marked (root) are read only at the root; other
 * ranks may pass NULL. CHORUS_IN_PLACE: as the send buffer at the root of
 * gather/gatherv (the root's block is already in recvbuf), as the receive
 * buffer at the root of scatter/scatterv (the root's block stays in sendbuf;
 * pass (void*)CHORUS_IN_PLACE), as the send buffer of allgatherv (own block
 * already at recvbuf + displs[rank]), alltoallv (recvbuf holds the input,
 * laid out by recvcounts/rdispls; sendcounts/sdispls are ignored), scan and
 * exscan. exscan leaves rank 0's recvbuf unchanged. */
/* recvbuf (root) holds size*count elements; rank r's block lands at r*count. */
chorus_status_t chorus_gather(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                              chorus_datatype_t dtype, int root);
/* Rank r sends sendcount elements; at the root they land at recvbuf + displs[r];
 * recvcounts[r] (root) must equal rank r's sendcount. */
chorus_status_t chorus_gatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                               const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype, int root);
/* Block r (count elements at sendbuf + r*count, root) goes to rank r. */
chorus_status_t chorus_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, int root);
/* sendcounts[r] elements at sendbuf + displs[r] (root) go to rank r, whose recvcount must equal them. */
chorus_status_t chorus_scatterv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                const size_t* displs, void* recvbuf, size_t recvcount, chorus_datatype_t dtype,
                                int root);
/* Every rank ends with rank r's sendcount elements at recvbuf + displs[r]; all pass the same recvcounts. */
chorus_status_t chorus_allgatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                  const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype);
/* sendcounts[j] elements at sendbuf + sdispls[j] go to rank j; recvcounts[i]
 * elements from rank i land at recvbuf + rdispls[i]. */
chorus_status_t chorus_alltoallv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                 const size_t* rdispls, chorus_datatype_t dtype);
/* Rank r gets the reduction of the inputs of ranks 0..r (scan) or 0..r-1 (exscan). */
chorus_status_t chorus_scan(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                            chorus_datatype_t dtype, chorus_op_t op);
chorus_status_t chorus_exscan(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                              chorus_datatype_t dtype, chorus_op_t op);

/* Blocking point-to-point of raw bytes; tag must be in [0, 2^31). A receive
 * takes a message of at most `bytes` bytes from exactly `peer` with exactly
 * `tag` (C++ Communicator::recv also takes wildcards). */
chorus_status_t chorus_send(chorus_comm_t comm, const void* buf, size_t bytes, int peer, int tag);
chorus_status_t chorus_recv(chorus_comm_t comm, void* buf, size_t bytes, int peer, int tag);

/* Where this process runs and what carries its traffic (as the C++
 * Communicator's local_rank(), local_size() and transport_name()). Local
 * rank and size count the job's processes on this host. The transport name
 * (e.g. "shm", "ofi:tcp;ofi_rxm", "verbs:rxe0") is copied into name, at most
 * capacity bytes with the terminating NUL; a longer name fails with
 * CHORUS_ERR_TRUNCATED and *length (if not NULL) says how many bytes it needs.
 * On success *length (if not NULL) is strlen(name). */
chorus_status_t chorus_comm_local_rank(chorus_comm_t comm, int* local_rank);
chorus_status_t chorus_comm_local_size(chorus_comm_t comm, int* local_size);
chorus_status_t chorus_comm_transport_name(chorus_comm_t comm, char* name, size_t capacity, size_t* length);

/* This rank's host, numbered 0.. by the lowest rank of the job on each, and
 * the payload bytes this process sent and received since init over every
 * communicator, split by where the peer is (as the C++ Communicator's host()
 * and traffic(); docs/transport-hybrid.md, "Bytes"). */
typedef struct chorus_traffic {
  uint64_t bytes_out_this_host, bytes_in_this_host;
  uint64_t bytes_out_other_hosts, bytes_in_other_hosts;
} chorus_traffic_t;
chorus_status_t chorus_comm_host(chorus_comm_t comm, int* host);
chorus_status_t chorus_comm_traffic(chorus_comm_t comm, chorus_traffic_t* traffic);

/* The version of the library this program runs with: "MAJOR.MINOR.PATCH"
 * (compare CHORUS_VERSION_STRING, the headers' version). Any pointer may be
 * NULL. Needs no communicator. */
const char* chorus_version(int* major, int* minor, int* patch);

/* ---- Non-blocking operations (docs/nonblocking.md) ----------------------
 * Each i-call takes the blocking call's arguments, starts the operation and
 * returns a request in *request; the buffers belong to chorus until the
 * request is reported complete. Collectives of one communicator, blocking or
 * not, are started in the same order on every rank; they may complete and be
 * waited for in any order. A completed (or failed) request is freed and its
 * handle set to NULL; NULL handles are inactive and wait for nothing, as
 * MPI_REQUEST_NULL. An operation's error (peer failed, timeout, truncation)
 * is returned by the wait/test that reports it. */
typedef struct chorus_request* chorus_request_t;

/* What a completed receive got (chorus_irecv): sender's rank, tag, length in
 * bytes; {-1, -1, 0} for other operations. */
typedef struct chorus_received {
  int source;
  int tag;
  size_t bytes;
} chorus_received_t;

/* Wildcards for chorus_irecv (and the C++ API's recv). */
#define CHORUS_ANY_SOURCE (-1)
#define CHORUS_ANY_TAG (-1)

chorus_status_t chorus_iallreduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  chorus_datatype_t dtype, chorus_op_t op, chorus_request_t* request);
chorus_status_t chorus_ibroadcast(chorus_comm_t comm, void* buf, size_t count, chorus_datatype_t dtype, int root,
                                  chorus_request_t* request);
chorus_status_t chorus_ibarrier(chorus_comm_t comm, chorus_request_t* request);
chorus_status_t chorus_ireduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, chorus_op_t op, int root, chorus_request_t* request);
chorus_status_t chorus_iallgather(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  chorus_datatype_t dtype, chorus_request_t* request);
chorus_status_t chorus_ireduce_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                       chorus_datatype_t dtype, chorus_op_t op, chorus_request_t* request);
chorus_status_t chorus_ialltoall(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 chorus_datatype_t dtype, chorus_request_t* request);
/* The rooted, v- and prefix collectives, as chorus_gather .. chorus_exscan
 * (CHORUS_IN_PLACE too); the count and displacement arrays, like the
 * buffers, must stay untouched until the request completes. */
chorus_status_t chorus_igather(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, int root, chorus_request_t* request);
chorus_status_t chorus_igatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype, int root,
                                chorus_request_t* request);
chorus_status_t chorus_iscatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_datatype_t dtype, int root, chorus_request_t* request);
chorus_status_t chorus_iscatterv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                 const size_t* displs, void* recvbuf, size_t recvcount, chorus_datatype_t dtype,
                                 int root, chorus_request_t* request);
chorus_status_t chorus_iallgatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                   const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype,
                                   chorus_request_t* request);
chorus_status_t chorus_ialltoallv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                  const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                  const size_t* rdispls, chorus_datatype_t dtype, chorus_request_t* request);
chorus_status_t chorus_iscan(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                             chorus_datatype_t dtype, chorus_op_t op, chorus_request_t* request);
chorus_status_t chorus_iexscan(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, chorus_op_t op, chorus_request_t* request);
/* Point-to-point: tag in [0, 2^31); chorus_irecv's peer may be
 * CHORUS_ANY_SOURCE and its tag CHORUS_ANY_TAG. */
chorus_status_t chorus_isend(chorus_comm_t comm, const void* buf, size_t bytes, int peer, int tag,
                             chorus_request_t* request);
chorus_status_t chorus_irecv(chorus_comm_t comm, void* buf, size_t bytes, int peer, int tag,
                             chorus_request_t* request);
/* A synchronous send (MPI_Issend): completes only once the receiver has
 * matched it. */
chorus_status_t chorus_issend(chorus_comm_t comm, const void* buf, size_t bytes, int peer, int tag,
                              chorus_request_t* request);
/* Withdraws a receive that no message has matched yet (MPI_Cancel):
 * *cancelled = 1, the request is freed and *request NULL; the buffer is the
 * caller's again. Otherwise (a send, a collective, a receive whose message
 * arrived, NULL) *cancelled = 0 and the request goes on: wait for it. */
chorus_status_t chorus_cancel(chorus_request_t* request, int* cancelled);

/* Probes (MPI_Iprobe, MPI_Probe): whether a message from `peer` (or
 * CHORUS_ANY_SOURCE) with `tag` (or CHORUS_ANY_TAG) has arrived, without
 * receiving it; `received` (may be NULL) gets its source, tag and length,
 * and a receive posted next for that source and tag gets that message.
 * chorus_probe waits for one (CHORUS_TIMEOUT bounds the wait). */
chorus_status_t chorus_iprobe(chorus_comm_t comm, int peer, int tag, int* flag, chorus_received_t* received);
chorus_status_t chorus_probe(chorus_comm_t comm, int peer, int tag, chorus_received_t* received);

/* A message a matched probe took (MPI_Improbe, MPI_Mprobe): no receive
 * matches it any more, and only chorus_mrecv / chorus_imrecv of it receive
 * it, once, whichever thread calls them (MPI-3.1 3.8.2). A plain value;
 * receiving it sets `id` to 0 (an empty message, as MPI_MESSAGE_NULL). One
 * never received stays with the communicator until it is finalized. */
typedef struct chorus_message {
  chorus_comm_t comm;     /* the communicator that probed it */
  chorus_received_t info; /* its source, tag and length in bytes */
  uint64_t id;            /* chorus' name for it; 0: none */
} chorus_message_t;

/* *flag = 1 and *message filled when a message matched, else *flag = 0 and
 * *message empty. */
chorus_status_t chorus_improbe(chorus_comm_t comm, int peer, int tag, int* flag, chorus_message_t* message);
chorus_status_t chorus_mprobe(chorus_comm_t comm, int peer, int tag, chorus_message_t* message);
/* Receives a matched message into at most `bytes` bytes (a longer one is
 * CHORUS_ERR_TRUNCATED) and empties *message. A call refused before it
 * starts (an empty message, a NULL buffer) leaves *message to receive. */
chorus_status_t chorus_mrecv(chorus_message_t* message, void* buf, size_t bytes, chorus_received_t* received);
chorus_status_t chorus_imrecv(chorus_message_t* message, void* buf, size_t bytes, chorus_request_t* request);

/* Waits until *request completes; `received` (may be NULL) gets what a
 * receive got. *request becomes NULL, whatever the outcome. */
chorus_status_t chorus_wait(chorus_request_t* request, chorus_received_t* received);
/* Progresses once; *flag = 1 (and *request NULL) once complete, else 0. */
chorus_status_t chorus_test(chorus_request_t* request, int* flag, chorus_received_t* received);
/* Waits for all `count` requests (received: NULL or `count` entries). On
 * errors every request is still waited for and the first error returned. */
chorus_status_t chorus_waitall(size_t count, chorus_request_t requests[], chorus_received_t received[]);
/* Waits until one active request completes: *index is its position (the
 * request is then NULL), or `count` when no request is active. */
chorus_status_t chorus_waitany(size_t count, chorus_request_t requests[], size_t* index, chorus_received_t* received);
/* Progresses once; *flag = 1 when every request has completed. */
chorus_status_t chorus_testall(size_t count, chorus_request_t requests[], int* flag, chorus_received_t received[]);
/* Progresses once; *flag = 1 and *index set when one request completed,
 * *flag = 1 and *index = count when none is active, else *flag = 0. */
chorus_status_t chorus_testany(size_t count, chorus_request_t requests[], size_t* index, int* flag,
                               chorus_received_t* received);
/* Detaches the operation, as MPI_Request_free: it still completes (its
 * buffers stay chorus' until then) and an error it meets is reported by the
 * communicator's next call. *request becomes NULL. */
chorus_status_t chorus_request_free(chorus_request_t* request);
/* ---- end of non-blocking operations ---- */

/* Description of the most recent failure on this thread ("" if none). */
const char* chorus_last_error(void);
/* Short name of a status code, e.g. "CHORUS_ERR_TIMEOUT". */
const char* chorus_status_string(chorus_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_CHORUS_H */
