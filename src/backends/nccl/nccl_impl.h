/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * State shared by the files of the nccl / rccl backend (one code base: RCCL
 * exports the NCCL API, HIP mirrors the CUDA runtime).
 *
 * Requests: an operation is enqueued on the communicator's stream, then a
 * GPU event is recorded after it; the request completes when the event has
 * (progress = event query). The communicator is created non-blocking, so no
 * NCCL call can block: a call that answers ncclInProgress (lazy connection
 * setup, init, split) is polled with the communicator's timeout.
 */
#ifndef MLC_NCCL_IMPL_H
#define MLC_NCCL_IMPL_H
#include <pthread.h>
#include <stdbool.h>
#include "core/backend.h"
#include "ncclapi.h"
#include "core/comm.h"
#include "devrt/gpurt.h"

typedef struct nccl_flavor {
    mlc_nccl_flavor_t lib;  /* NCCL or RCCL */
    mlc_gpu_kind_t gpu;     /* CUDA or HIP */
    const char *name;       /* backend name: "nccl" / "rccl" */
} nccl_flavor_t;

extern const nccl_flavor_t mlc_nccl_flavor_nccl, mlc_nccl_flavor_rccl;

/* A host region staged through pinned memory, copied back on completion. */
typedef struct nccl_copyout {
    void *user;
    size_t off, bytes; /* in the pinned block */
} nccl_copyout_t;

/* Per-request state, inside req->priv. */
typedef struct nccl_req {
    void *event;                        /* recorded after the operation */
    struct mlc_request *prev, *next;    /* the communicator's pending list */
    int peer;                           /* p2p peer, -1 for collectives (timeout messages) */
    void *pinned;                       /* staging block (pinned pool) or NULL */
    nccl_copyout_t out[2];              /* pinned -> user copies when the event completes */
    int nout;
} nccl_req_t;

typedef struct nccl_comm {
    const nccl_flavor_t *fl;
    const mlc_nccl_api_t *api;
    const mlc_gpurt_t *rt;
    /*
     * `lock` serializes every use of `nc` with mlc_comm_abort from another
     * thread (ncclCommAbort frees it). It is held only around calls that
     * cannot block: never while sleeping.
     */
    pthread_mutex_t lock;
    mlc_ncclComm_t nc;    /* NULL once aborted */
    int device;
    void *own_stream;     /* created at init, used until mlc_comm_set_stream */
    void *stream;         /* where operations go */
    struct mlc_request *pending_head, *pending_tail;
    int npending;
    /* Grouped requests (req->grouped), validated and waiting for the group's
     * end (mlc_nccl_group_end), linked through nccl_req_t.next. */
    struct mlc_request *deferred_head, *deferred_tail;
    void **events;        /* idle events for reuse */
    int nevents, cap_events;
    void *scratch;        /* device memory for staging and in-place alltoall(v) */
    size_t scratch_size;
    void *scratch_event;  /* recorded after the last use of scratch */
    void **retired;       /* outgrown scratch buffers, freed at destroy (cudaFree would
                             wait for the device, possibly for a peer: never while running) */
    int nretired;
    void *barrier_buf;    /* one int32 on the device for barrier */
    char algo_applied[32];/* MLC_ALGO_ALLREDUCE in force when NCCL_ALGO was exported */
    int nchannels;        /* ncclConfig_t minCTAs = maxCTAs of this communicator; 0 = NCCL's (split children inherit) */
} nccl_comm_t;

/* One operation being issued (lock held). */
typedef struct nccl_issue {
    nccl_comm_t *impl;
    const mlc_nccl_api_t *api;
    const mlc_args_t *a;  /* the caller's arguments, or staged copies pointing to device memory */
    mlc_ncclComm_t nc;
    void *stream;
    int rank, size;
    mlc_ncclDataType_t dt;
    mlc_ncclRedOp_t op;
    size_t scale;         /* NCCL elements per mlcomm element (record size for records, else 1) */
    size_t es;            /* bytes per mlcomm element */
    int gpu_err;          /* first GPU runtime error, 0 if none */
    const char *gpu_fn;   /* which call gave it */
    mlc_gpu_mem_t smem, rmem; /* what sendbuf / recvbuf are (prepare) */
    bool used_scratch;
    size_t scratch_off;   /* bump offset in impl->scratch for this operation */
    /* staging of pageable host buffers */
    mlc_args_t staged;
    void *pinned;
    void *dev_base;
    nccl_copyout_t out[2];
    int nout;
    bool out_queued;      /* device -> pinned copies are on the stream */
} nccl_issue_t;

_Static_assert(sizeof(nccl_req_t) <= MLC_REQ_PRIV_BYTES, "nccl_req_t must fit in req->priv");
static inline nccl_req_t *nccl_req(mlc_request_t *req) { return (nccl_req_t *)(void *)req->priv; }

/* ---- nccl_backend.c ---- */
/* MLC_TIMEOUT of this communicator (0: none; comm may be NULL). */
double mlc_nccl_timeout(const mlc_comm_t *comm);
/*
 * Poll ncclCommGetAsyncError(nc) until it is no longer ncclInProgress
 * (lock not held by the caller), in the shared wait loop (base/wait.h).
 * Fails the wait with TIMEOUT after timeout_s without progress (0: never;
 * nothing moves while NCCL is in progress, so the time since the call),
 * ABORTED when the communicator was aborted, PEER_LOST when the launcher
 * reports a dead rank. `what` names the operation in messages.
 */
mlc_status_t mlc_nccl_wait_ready(const mlc_nccl_api_t *api, mlc_ncclComm_t nc, nccl_comm_t *impl,
                                 const mlc_comm_t *comm, const char *what, double timeout_s);
/*
 * Turn an NCCL result into a status + message (lock not held). Results that
 * leave the NCCL communicator unusable abort it and fail `comm`.
 */
mlc_status_t mlc_nccl_result(nccl_comm_t *impl, mlc_comm_t *comm, mlc_ncclResult_t r, const char *what);
/*
 * The NCCL communicator is unusable (timeout, dead peer, fatal error):
 * abort it, complete pending requests and fail `comm` (TIMEOUT and
 * PEER_LOST are kept, anything else becomes ABORTED). Returns the sticky
 * status with `msg` as the thread's message. Lock not held.
 */
mlc_status_t mlc_nccl_fail(nccl_comm_t *impl, mlc_comm_t *comm, mlc_status_t st, const char *msg);
/* Lock held: an idle event of the communicator's device, or NULL with *err set. */
void *mlc_nccl_event_get(nccl_comm_t *impl, int *err);
/* Lock held: add a started request to the pending list. */
void mlc_nccl_pending_add(nccl_comm_t *impl, mlc_request_t *req);
/* Make the communicator's device current; *prev receives the caller's (restore with dev_leave). */
mlc_status_t mlc_nccl_dev_enter(const nccl_comm_t *impl, int *prev);
void mlc_nccl_dev_leave(const nccl_comm_t *impl, int prev);

/* ---- nccl_stage.c ---- */
/* Record the first GPU runtime error of an issue. */
void mlc_nccl_gpu_fail(nccl_issue_t *c, int err, const char *fn);
/* Lock held: `bytes` of device scratch for this operation, ordered after its last use; NULL on error. */
void *mlc_nccl_scratch(nccl_issue_t *c, size_t bytes);
/*
 * Lock held: if sendbuf/recvbuf of `req` is pageable host memory, copy it
 * into pinned memory and on to device scratch, and point c->a at staged
 * arguments. Returns an mlcomm status (pinned pool errors).
 */
mlc_status_t mlc_nccl_stage_in(nccl_issue_t *c, const mlc_request_t *req);
/* Lock held, after the operation is on the stream: queue device -> pinned copies. */
void mlc_nccl_stage_out(nccl_issue_t *c);
/* Give a request's staging block back (copy to the user first when `deliver`). */
void mlc_nccl_stage_finish(nccl_req_t *nr, bool deliver);

/* ---- nccl_colls.c ---- */
/* The start entry for every collective kind (one function, dispatching on req->coll).
 * A grouped request is validated and deferred to mlc_nccl_group_end. */
mlc_status_t mlc_nccl_start(mlc_request_t *req);

/* ---- nccl_group.c ---- */
/*
 * The backend's group_end hook: every deferred request of the communicators
 * enqueued inside one NCCL group (ncclGroupStart ... ncclGroupEnd), waited
 * until NCCL has them (ncclInProgress: the communicators' timeouts), then
 * each followed by its event as any operation. A request that cannot be
 * issued is completed with the error, which is also returned.
 */
mlc_status_t mlc_nccl_group_end(mlc_comm_t *const *comms, int ncomms);
/* Lock held: take the communicator's deferred requests (NULL-terminated through nccl_req_t.next). */
mlc_request_t *mlc_nccl_deferred_take(nccl_comm_t *impl);
/* Lock held: the pieces of one operation's issue (nccl_colls.c), for the group. */
typedef struct nccl_op_desc nccl_op_desc_t;
/* Validate req and fill c for it (*d: its shape); MLC_SUCCESS or the error with its message. */
mlc_status_t mlc_nccl_prepare(nccl_comm_t *impl, mlc_request_t *req, const nccl_op_desc_t **d, nccl_issue_t *c);
/* Put the operation on the stream (staging around it); *st a staging error. */
mlc_ncclResult_t mlc_nccl_enqueue(nccl_issue_t *c, const nccl_op_desc_t *d, const mlc_request_t *req,
                                  mlc_status_t *st);
/* After NCCL has it: copies back, the completion event, the pending list; a GPU error or 0. */
int mlc_nccl_finish_enqueue(nccl_issue_t *c, nccl_req_t *nr, mlc_request_t *req);
/* Give back a failed operation's staging block (never one the GPU may still write). */
void mlc_nccl_issue_abandon(nccl_issue_t *c, nccl_req_t *nr, const char *what);

/* ---- nccl_boot.c ---- */
/* Give every rank rank 0's unique id (rank 0 makes it). */
mlc_status_t mlc_nccl_share_id(const mlc_nccl_api_t *api, const mlc_comm_t *comm,
                               const mlc_boot_t *boot, mlc_ncclUniqueId *id);
/* Which host transport carries the id for this job ("none", "shm", "mpi", "tcp"). */
const char *mlc_nccl_boot_method(const mlc_cfg_t *cfg, const mlc_boot_t *boot);

/* ---- nccl_tuning.c ---- */
typedef struct mlc_nccl_tuning {
    char algo[32];    /* value for NCCL_ALGO, "" = NCCL decides (process-wide) */
    int nchannels;    /* ncclConfig_t minCTAs = maxCTAs, 0 = NCCL decides (per communicator) */
    size_t buffsize;  /* NCCL_BUFFSIZE, 0 = NCCL's default (process-wide) */
    bool debug;       /* NCCL_DEBUG=INFO (process-wide; a user's own value stands) */
} mlc_nccl_tuning_t;
/*
 * What NCCL reads from the process environment, once, at the process's first
 * communicator: the values in force then ("" = unset, NCCL's default).
 */
typedef struct mlc_nccl_process_env {
    bool fixed;            /* the first communicator has set them */
    char algo[32];         /* NCCL_ALGO */
    char buffsize[32];     /* NCCL_BUFFSIZE */
} mlc_nccl_process_env_t;
/* From the resolved config (MLC_ALGO_ALLREDUCE, MLC_LOG_LEVEL) and MLC_NCCL_NCHANNELS / MLC_NCCL_BUFFSIZE. */
mlc_status_t mlc_nccl_tuning_resolve(const mlc_cfg_t *cfg, int nccl_version, mlc_nccl_tuning_t *t);
/*
 * The process-wide settings, into `penv` (the process's: mlc_nccl_tuning_apply).
 * Before the first communicator: export them (a different value the user set
 * is a CONFIG error naming both) and fix them. After: a communicator asking
 * for a value other than the fixed one is a CONFIG error naming both; one
 * that asks for nothing gets the process's.
 */
mlc_status_t mlc_nccl_tuning_apply_to(mlc_nccl_process_env_t *penv, const mlc_nccl_tuning_t *t);
/* The same on this process's record (thread-safe): call before each NCCL communicator. */
mlc_status_t mlc_nccl_tuning_apply(const mlc_nccl_tuning_t *t);
/* The per-communicator settings into an ncclConfig_t (nchannels: minCTAs = maxCTAs). */
void mlc_nccl_tuning_config(int nchannels, mlc_ncclConfig_t *config);
#endif
