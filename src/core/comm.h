/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The communicator and request objects behind the public handles.
 * Core owns validation, the wait loop (timeouts, abort, peer death),
 * sticky errors and profiling; a backend only moves data.
 */
#ifndef MLC_CORE_COMM_H
#define MLC_CORE_COMM_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "algos/select.h"
#include "base/config.h"
#include "base/scratch.h"
#include "mlcomm.h"

struct mlc_backend;
struct mlc_profiler;

/* Validated arguments of one operation (what each field means depends on coll).
 * A new field also goes into MLC_SET_ARGS and args_copy (api.c), which name
 * every field. */
typedef struct mlc_args {
    const void *sendbuf;
    void *recvbuf;
    size_t count;         /* broadcast/reduce/allreduce/alltoall/gather/scatter/p2p: elements;
                             allgather: per-rank count; reduce_scatter: recvcount;
                             gatherv/allgatherv: sendcount; scatterv: recvcount;
                             sendrecv: sendcount */
    size_t count2;        /* sendrecv: recvcount */
    const size_t *counts; /* *v: recvcounts (gatherv/allgatherv/alltoallv) or sendcounts (scatterv) */
    const size_t *displs; /* matching displacements */
    const size_t *counts2, *displs2; /* alltoallv: recvcounts/rdispls (counts/displs are send side) */
    mlc_dtype_t dtype;
    size_t esize;         /* bytes per element */
    mlc_op_t op;
    int root;             /* rooted collectives; p2p: the peer (dest for send/sendrecv, source for recv) */
    int peer2;            /* sendrecv: source */
    int tag, tag2;        /* p2p tags (sendrecv: sendtag, recvtag) */
    bool inplace;
    mlc_msg_status_t *msg_status; /* recv/sendrecv: where to report what arrived (may be NULL) */
} mlc_args_t;

#define MLC_REQ_PRIV_BYTES 512

struct mlc_request {
    struct mlc_comm *comm;
    mlc_coll_t coll;
    uint64_t seq;          /* per-communicator sequence number of collectives (p2p: 0) */
    mlc_args_t args;
    const char *algo;      /* algorithm name chosen (static storage), NULL for native/p2p */
    size_t bytes;          /* payload bytes per rank, for profiling */
    atomic_int done;       /* set (release) by mlc_request_complete */
    mlc_status_t status;
    char errmsg[384];      /* detailed message when status != 0 */
    double t_start, t_end;
    double idle_since;     /* mlc_request_test: when it first found nothing to do (0: it did not), */
    uint64_t idle_epoch;   /* and comm->progress_epoch then (progress since restarts the clock) */
    struct mlc_request *next_free;
    bool in_use;
    bool blocking;         /* the caller waits right away (no request handed out) */
    bool internal;         /* issued by mlcomm itself (init, split): not profiled */
    int inside_call;       /* mlc_comm_call_t whose own collective it is (0: none), named in messages */
    bool grouped;          /* started inside mlc_group_start/end: a backend with a group_end
                              hook (nccl) may defer it to that hook */
    bool group_open;       /* its group has not ended yet: waiting for it is an error */
    /* Backend-private state: inline storage to keep the small path malloc-free. */
    _Alignas(16) unsigned char priv[MLC_REQ_PRIV_BYTES];
    void *priv_ext;        /* backend-owned heap state when priv is too small (freed by the backend) */
    void *decor;           /* state of a decorating backend (the staged one), freed by its `release` */
};

#define MLC_COMM_KEYS 4

/* The communicator calls that run collectives of their own on a communicator:
 * their signatures carry the call (signature.h), so a user's collective on
 * another rank never matches one of them, and a mismatch names the call.
 * X(id, name shown in messages). */
#define MLC_COMM_CALLS(X)                                                                                   \
    X(NONE, "")                                                                                             \
    X(INIT, "the communicator's creation")                                                                  \
    X(SPLIT, "mlc_comm_split")                                                                              \
    X(SETTINGS, "the settings agreement of a tensor-parallel communicator")                                 \
    X(TENSOR_CHECK, "the argument check of a tensor-layer call")                                            \
    X(MESH_CREATE, "mlc_mesh_create")                                                                       \
    X(MESH_GROUP, "mlc_mesh_group")                                                                         \
    X(TENSOR_SET_CHECKS, "mlc_tensor_set_checks")
#define MLC_COMM_CALL_ENUM(id, name) MLC_COMM_CALL_##id,
typedef enum mlc_comm_call { MLC_COMM_CALLS(MLC_COMM_CALL_ENUM) MLC_COMM_CALL_COUNT } mlc_comm_call_t;
#undef MLC_COMM_CALL_ENUM
/* Its name ("" for NONE). */
const char *mlc_comm_call_name(int call);

struct mlc_comm {
    const struct mlc_backend *be;
    void *impl;            /* backend state */
    int rank, size;
    int *world_ranks;      /* split: each member's rank in the communicator the splits began from; else NULL */
    mlc_cfg_t cfg;
    atomic_int failed;     /* sticky mlc_status_t; 0 while healthy */
    char fail_msg[512];
    atomic_int fail_claim; /* the first failing thread writes fail_msg, then publishes failed */
    uint64_t coll_seq;     /* next collective sequence number */
    uint64_t progress_epoch; /* progress calls of waits and tests that moved something */
    uint64_t seq_base;     /* collectives before coll_seq restarted at 0 (init's own): call numbers never repeat */
    const char *algo_forced[MLC_COLL_COUNT]; /* from env or mlc_comm_set_algo; NULL = auto */
    bool algo_selects[MLC_COLL_COUNT]; /* the backend offers more than native: auto asks the selector */
    bool no_own_algos;     /* the backend cannot run src/algos schedules here: forced ones run as native */
    const char *timeout_refused; /* set by the backend: why a deadline cannot be set later (NULL: it can) */
    struct mlc_profiler *prof;
    mlc_cost_model_t model;  /* the selector's alpha/beta/gamma, identical on every rank */
    int internal_depth;    /* > 0 while mlcomm runs its own collectives on this communicator */
    int comm_call;         /* mlc_comm_call_t: the communicator call whose own collectives run now */
    int group_ops;         /* operations in an open group (mlc_group_start) not yet ended */
    int gpu_kind;          /* mlc_gpu_kind_t whose device memory calls take; -1: host memory only */
    int gpu_device;        /* the device of that memory (mlc_comm_device); -1 without one */
    bool group_submitting; /* a grouped call is being started (its request gets `grouped`) */
    /* request pool */
    struct mlc_request *free_reqs;
    struct mlc_req_chunk *req_chunks;
    int outstanding;       /* requests handed out and not yet released */
    bool freed;            /* mlc_comm_free ran; the object lives until the last request is released */
    void *layer_values[MLC_COMM_KEYS]; /* layers above core: mlc_comm_key_create */
    mlc_scratch_t host_scratch; /* collectives' temporary host buffers, kept between calls (base/scratch.h) */
};

/* mlcomm runs collectives of its own on c, as part of communicator call
 * `call` (not profiled, not the user's; their signatures carry the call):
 * begin returns the outer call, which end restores. */
static inline int mlc_comm_own_begin(mlc_comm_t *c, int call)
{
    int outer = c->comm_call;
    c->internal_depth++;
    c->comm_call = call;
    return outer;
}
static inline void mlc_comm_own_end(mlc_comm_t *c, int outer)
{
    c->comm_call = outer;
    c->internal_depth--;
}

/* --- used by backends ---------------------------------------------------- */

/*
 * Mark req complete with `st` (and `fmt` as its message when st != 0).
 * Callable from any thread (a progress thread included); wakes nobody by
 * itself: a backend whose idle() sleeps must wake it (see backend.h).
 */
void mlc_request_complete(mlc_request_t *req, mlc_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Fail the communicator (sticky): st is TIMEOUT, PEER_LOST or ABORTED. The
 * first failure wins and its message is kept. Returns the sticky status.
 */
mlc_status_t mlc_comm_fail(mlc_comm_t *comm, mlc_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- used inside core ---------------------------------------------------- */
/* Extent in elements of a v-layout: max(displs[i] + counts[i]); 0 when counts is NULL. */
size_t mlc_vextent(const size_t *counts, const size_t *displs, int p);
mlc_request_t *mlc_request_alloc(mlc_comm_t *comm);
/* Return req to its pool; the last release of a freed communicator frees it. */
void mlc_request_release(mlc_request_t *req);
/* mlc_comm_free: end every request still handed out with MLC_ERR_ABORTED (the
 * backend state is gone) and mark the communicator freed. Returns true when no
 * request is outstanding, so the caller may release the object now. */
bool mlc_request_orphan_all(mlc_comm_t *comm);
/* Wait for one request; does not release it. Applies timeout/abort/death rules. */
mlc_status_t mlc_request_wait_internal(mlc_request_t *req);
/* The wait's pieces, for waits over several requests (core/group.c): */
/* One progress call of comm's backend (counts the communicator's progress epoch). */
mlc_status_t mlc_request_progress(mlc_comm_t *comm, int *progressed);
/* What a wait step that moved nothing on comm reports: MLC_WAIT_NOTHING, or
 * MLC_WAIT_BLOCK_NOW where the backend's polling_futile says so. */
int mlc_request_idle_step(mlc_comm_t *comm);
/* The communicator's health: when it failed, req ends (completes if it still can, else fails). */
bool mlc_request_sick(mlc_request_t *req);
/* Nothing moved for `timeout` s: fail req's communicator naming req, tell the peers, fail req. */
void mlc_request_time_out(mlc_request_t *req, double timeout);
/* A progress call failed with st while req was pending: fail req with the communicator's message. */
mlc_status_t mlc_request_fail_pending(mlc_request_t *req, mlc_status_t st);
/* req is done: its status, with its message as this thread's. */
mlc_status_t mlc_request_finish(mlc_request_t *req);
/* "send (peer 1, tag 0, 64 bytes)" / "allreduce #3 (...)": names req in messages. */
void mlc_request_describe(const mlc_request_t *req, char *buf, size_t len);
/* The failure of req's communicator as req's error: "<req>: <why>" (MLC_SUCCESS while healthy). */
mlc_status_t mlc_request_comm_failed(const mlc_request_t *req);
/* Open groups of the calling thread (core/group.c). */
/* Threads of the process with an open group (a cheap "none" test first). */
extern atomic_int mlc_groups_open;
/* True while the calling thread has an open group (mlc_group_start). */
bool mlc_group_is_open(void);
/* MLC_SUCCESS outside an open group; inside one, MLC_ERR_INVALID_ARG naming
 * fn: for calls of the layers above core (tensor, exchange) that wait for
 * collectives or messages of their own, which a group would hold until
 * mlc_group_end, after their buffers are gone. */
mlc_status_t mlc_group_refuse(const char *fn);
/* Start a call inside the open group: a blocking form (out == NULL) returns at
 * once and is waited by mlc_group_end; a request form hands out its request. */
mlc_status_t mlc_group_submit(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                              mlc_request_t **out);
/* core's submit without the group check: the decorator's submit, else mlc_submit_plain (api.c). */
mlc_status_t mlc_submit_now(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                            mlc_request_t **out);
/* Return the sticky error with its message set for this thread, or 0. */
mlc_status_t mlc_comm_check(const mlc_comm_t *comm);
/* Collective: compare the collective-relevant settings (comm->cfg, e.g. after
 * mlc_comm_set_algo at creation) across ranks, as init does; MISMATCH on
 * every rank naming the variable and the ranks. */
mlc_status_t mlc_comm_agree_settings(mlc_comm_t *comm);
/* Allocate a bare communicator object (fields zeroed, pool empty). */
mlc_comm_t *mlc_comm_alloc(void);
void mlc_comm_release(mlc_comm_t *comm);

/*
 * Per-communicator values of the layers above core (src/tensor keeps its
 * checks level this way): a key from mlc_comm_key_create (once per process;
 * -1 when all MLC_COMM_KEYS are taken), then get and set. Core only stores
 * them; `release` (may be NULL) is called on a value still set when the
 * communicator is released. A split's child starts with none.
 */
int mlc_comm_key_create(void (*release)(void *value));
void *mlc_comm_value(const mlc_comm_t *comm, int key);
void mlc_comm_set_value(mlc_comm_t *comm, int key, void *value);
#endif
