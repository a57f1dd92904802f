/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI backend module (libmlcomm-mpi.so): private declarations.
 *
 * Each mlcomm communicator owns two duplicates of an MPI communicator:
 *  - `comm` carries the user's point-to-point messages and MPI's native
 *    collectives (so nothing of ours can match a program's own MPI traffic);
 *  - `hidden` carries algorithm steps (MLC_ALGO_*), the point-to-point pieces
 *    of large v-collectives and control messages (remote abort), so none of
 *    them can match a user receive (DESIGN.md: hidden context).
 * An operation's state lives in its request (req->priv, mlc_mpi_op_t).
 */
#ifndef MLC_MPI_IMPL_H
#define MLC_MPI_IMPL_H
#include <mpi.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/mpi_module.h"

/* The core that loaded this module (mpi_backend.c): the module calls core
 * only through it, as mlc_core->error(...), and logs through it (the
 * MLC_LOG_LEVEL_NOW / MLC_LOG_WRITE definitions in CMakeLists.txt). */
extern const mlc_mpi_core_t *mlc_core;

#define MLC_MPI_EXPORT __attribute__((visibility("default")))

/* MPI-4 large-count calls (MPI_Bcast_c, ...) exist in the library we build against. */
#if MPI_VERSION >= 4
#define MLC_MPI_HAS_LARGE_COUNT 1
#else
#define MLC_MPI_HAS_LARGE_COUNT 0
#endif

/* ---- mlcomm_mpi.h (mpi_handover.c) ------------------------------------------ */

mlc_status_t mlc_mpi_from_mpi(int64_t comm_f, const mlc_config_t *cfg, mlc_comm_t **out);
mlc_status_t mlc_mpi_get_mpi(const mlc_comm_t *comm, int64_t *comm_f);
/* comm's MPI state, or NULL when comm is not on this module's backend. */
const struct mlc_mpi_comm *mlc_mpi_comm_of(const mlc_comm_t *comm);

/* ---- process-wide MPI environment (mpi_env.c) ------------------------------ */

/* Initialize MPI if nobody has (at thread level `level`, 0..3), once per
 * process, waiting at most timeout_s where it can (mpi_env.c); log the level
 * MPI provided. */
mlc_status_t mlc_mpi_env_start(int level, double timeout_s);
/* The thread level MPI runs at (valid after mlc_mpi_env_start or a program's MPI_Init). */
int mlc_mpi_thread_level(void);
/* MPI can no longer be called (finalized by us at exit, or by the program). */
bool mlc_mpi_finalized(void);
/* The MPI_Finalize running is mlcomm's own, at process exit. */
bool mlc_mpi_finalizing_at_exit(void);
/* Below MPI_THREAD_MULTIPLE, MPI may not be called from two threads at once,
 * while mlcomm lets two threads use two communicators at once: every entry
 * of the module's table and every step of its waits runs under one
 * process-wide (recursive) lock then. Returns whether it locked; pass that
 * to leave. No step blocks in MPI while it holds the lock. */
bool mlc_mpi_serial_enter(void);
void mlc_mpi_serial_leave(bool locked);
/* Whether entries run under that lock (MPI below MPI_THREAD_MULTIPLE). */
bool mlc_mpi_serialized(void);
/* Tell core's GPU-direct report whether this MPI is CUDA-aware (mpi_gpu.c). */
void mlc_mpi_report_cuda(void);
/* "MPI_ERR_TRUNCATE: message truncated" from an MPI error code, on one line. */
void mlc_mpi_errtext(int rc, char *buf, size_t len);
/* Whether an MPI error code is a truncation (MLC_ERR_TRUNCATE). */
bool mlc_mpi_truncated(int rc);
/* What a message of the wrong length asks of the caller (every such error says it). */
#define MLC_MPI_COUNT_QUESTION \
    "did the ranks pass different counts? MLC_CHECK=1 compares every call's arguments first"
/* For a collective's truncation, "; " MLC_MPI_COUNT_QUESTION; else "". */
const char *mlc_mpi_count_hint(const mlc_request_t *req, int rc);
/* Set the thread's error for a failed MPI call: BACKEND (TRUNCATE for
 * MPI_ERR_TRUNCATE) with MPI's text. `what` names the call and the rank. */
mlc_status_t mlc_mpi_error(int rc, const char *fmt, ...) MLC_PRINTF(2, 3);

/* ---- limits of one MPI call (mpi_types.c) ----------------------------------- */

typedef struct mlc_mpi_limits {
    size_t count;           /* most elements one MPI call carries (INT_MAX) */
    size_t displ;           /* largest displacement one v-call takes (INT_MAX) */
    bool large_count_calls; /* use the MPI-4 *_c calls when the library has them */
} mlc_mpi_limits_t;
extern mlc_mpi_limits_t mlc_mpi_limits;
/* Internal test knob (tests/mpi): shrink the limits so the large-count paths
 * run with small buffers. Call it between operations, the same on every rank. */
MLC_MPI_EXPORT void mlc_mpi_set_limits(size_t count, size_t displ, int large_count_calls);
/* Large-count calls are on for this operation. */
static inline bool mlc_mpi_use_c(void)
{
    return MLC_MPI_HAS_LARGE_COUNT && mlc_mpi_limits.large_count_calls;
}

/* ---- datatypes and reduction ops (mpi_types.c) ------------------------------- */

/* Create the module's fixed types and ops (after MPI is initialized). */
mlc_status_t mlc_mpi_types_start(void);
/* A rank's word in the agreement after a user op's collective (mpi_op.c). */
typedef struct mlc_mpi_verdict {
    int32_t rank1;  /* this rank + 1 if a user op failed here, else 0 */
    char why[252];  /* the op's reason */
} mlc_mpi_verdict_t;
/* Its type, and the op keeping the highest rank1's entry. */
MPI_Datatype mlc_mpi_verdict_type(void);
MPI_Op mlc_mpi_verdict_op(void);
/* The MPI type moving one element of dtype. *owned = true when the caller
 * must free it (records); else a predefined or module-owned type. */
mlc_status_t mlc_mpi_elem_type(mlc_dtype_t dtype, MPI_Datatype *type, bool *owned);
/* Type and op reducing (dtype, op): MPI's own where it has them, else a
 * module type keyed to (dtype, op) reduced by a user-defined MPI_Op that
 * calls mlc_reduce_apply (fp16, bf16, records, user ops). avg reduces as sum. */
/* MPI reduces dtype/op itself (no user op, no division after): it may run on device memory. */
bool mlc_mpi_reduce_is_native(mlc_dtype_t dtype, mlc_op_t op);
/* Device buffers (src/backends/staged/staged.h): this MPI takes them (CUDA-aware, or MLC_MPI_CUDA_AWARE=1), and
 * whether one call may take them as they are. */
bool mlc_mpi_device_capable(mlc_comm_t *comm);
bool mlc_mpi_device_direct(const mlc_request_t *req);
mlc_status_t mlc_mpi_reduce_type(mlc_dtype_t dtype, mlc_op_t op, MPI_Datatype *type, MPI_Op *mop);
/* A type of n elements of `elem` (extent es) that one count of 1 carries, for n
 * above mlc_mpi_limits.count. The caller frees it. */
int mlc_mpi_big_type(size_t n, MPI_Datatype elem, size_t es, MPI_Datatype *out);

/* ---- communicators (mpi_comm.c) ----------------------------------------------- */

#define MLC_MPI_COMM_MAGIC 0x4d504943u /* "MPIC" */

/* Control messages: {kind, rank, value, the communicator's uid} as int64
 * (mpi_ctrl.c). */
#define MLC_MPI_CTRL_WORDS 4
enum { MLC_MPI_CTRL_ABORT = 1, MLC_MPI_CTRL_QUERY, MLC_MPI_CTRL_REPLY, MLC_MPI_CTRL_FAILED };
#define MLC_MPI_REPLIES 8

typedef struct mlc_mpi_handle mlc_mpi_handle_t;
typedef struct mlc_mpi_op mlc_mpi_op_t;

typedef struct mlc_mpi_comm {
    uint32_t magic;
    mlc_comm_t *owner;       /* the communicator this is the state of (failed when MPI_Finalize starts) */
    MPI_Comm comm;           /* user point-to-point and native collectives */
    MPI_Comm hidden;         /* algorithm steps, large v pieces, control messages */
    int tag_ub;              /* MPI_TAG_UB of both */
    int ctrl_tag;            /* on hidden: control messages (= tag_ub) */
    unsigned seq_window;     /* hidden tags: (seq mod window) << MLC_SCHED_KEY_BITS | key */
    MPI_Request ctrl;        /* posted receive for a control message (mpi_ctrl.c) */
    int64_t ctrl_msg[MLC_MPI_CTRL_WORDS];
    /* Agreed by the members when it is created, sent with every control
     * message: MPI reuses a freed communicator's context for a new one, and
     * a notice sent to the old one that was never received (a second
     * abort, one sent after the receiver freed it) would then fail the new
     * one. */
    int64_t uid;
    atomic_int abort_pending; /* MLC_MPI_ABORT_*: a notice to send (abort or failure), sent */
    int64_t abort_msg[MLC_MPI_CTRL_WORDS]; /* the notice we send: ABORT, or FAILED with its status */
    MPI_Request *notices;    /* sends of that notice, one per rank */
    int nnotices;
    uint64_t started;        /* collectives started here (the last one's seq + 1) */
    int64_t reply_msg[MLC_MPI_REPLIES][MLC_MPI_CTRL_WORDS]; /* answers to queries */
    MPI_Request reply_req[MLC_MPI_REPLIES];
    mlc_mpi_op_t *head, *tail; /* operations in flight, in start order */
    atomic_int npolled;      /* of them, the ones only our polling advances (algorithms) */
    int left_to_mpi;         /* abandoned operations whose collectives MPI still runs */
    bool hidden_in_flight;   /* the creation's agreement was left to MPI on hidden: never free it */
    mlc_mpi_handle_t *free_handles, *all_handles; /* transport handles for algorithms */
    /* the process's progress list (mpi_progress.c) */
    atomic_flag busy;        /* held while head..tail, the ops and handles change, and the control request is tested */
    struct mlc_mpi_comm *list_prev, *list_next;
    bool listed;
} mlc_mpi_comm_t;

enum { MLC_MPI_ABORT_NONE, MLC_MPI_ABORT_PENDING, MLC_MPI_ABORT_SENT };

/* Build the backend state of comm from `base` (duplicated; base stays the caller's). */
mlc_status_t mlc_mpi_comm_create(mlc_comm_t *comm, MPI_Comm base, bool adopt);
/* The table's init, split, destroy, abort, health and tag_max entries. */
mlc_status_t mlc_mpi_init(mlc_comm_t *comm, const mlc_boot_t *boot);
mlc_status_t mlc_mpi_split(mlc_comm_t *parent, int color, int key, const int *members, int nmembers,
                           mlc_comm_t *child);
void mlc_mpi_destroy(mlc_comm_t *comm);
void mlc_mpi_abort(mlc_comm_t *comm);
mlc_status_t mlc_mpi_health(mlc_comm_t *comm);
int mlc_mpi_tag_max(mlc_comm_t *comm);
/* mpi_ctrl.c: post / cancel the control receive (and finish our own control sends). */
mlc_status_t mlc_mpi_ctrl_start(mlc_comm_t *comm);
void mlc_mpi_ctrl_stop(mlc_mpi_comm_t *c);
/* Send pending abort notices (owner thread, or any thread at MPI_THREAD_MULTIPLE). */
void mlc_mpi_flush_abort(mlc_mpi_comm_t *c);
/* The communicator failed here (a timeout): the peers are told, and fail it too. */
void mlc_mpi_post_failure(mlc_comm_t *comm, mlc_status_t st, const char *note);
/* Service control messages (a peer's abort fails comm; queries are answered).
 * Returns comm's sticky status. */
mlc_status_t mlc_mpi_check_ctrl(mlc_comm_t *comm);
/* The control receive completed with rc (inside a wait): handle and repost. */
mlc_status_t mlc_mpi_ctrl_arrived(mlc_comm_t *comm, int rc);
/* At a timeout: ask the peers which of them have not started req's collective. */
void mlc_mpi_query_peers(const mlc_request_t *req, char *buf, size_t len);

/* ---- the process's progress list (mpi_progress.c) ------------------------------ */

/* Algorithm operations pending on every communicator of the process. */
extern atomic_int mlc_mpi_polled_ops;
/* Hold / release c's operations (the owner thread; others only try). */
void mlc_mpi_lock(mlc_mpi_comm_t *c);
void mlc_mpi_unlock(mlc_mpi_comm_t *c);
/* A communicator joins the list once created, leaves it before it is freed. */
void mlc_mpi_progress_join(mlc_mpi_comm_t *c);
void mlc_mpi_progress_leave(mlc_mpi_comm_t *c);
/* MPI_Finalize has started: fail every communicator still alive, so that
 * their calls return an error instead of calling MPI after it. */
void mlc_mpi_progress_fail_all(void);
/* Poll the algorithm steps of every other communicator that is not busy. */
void mlc_mpi_progress_others(const mlc_mpi_comm_t *self, int *moved);
/* Advance c's algorithm operations once (c held by the caller). */
void mlc_mpi_progress_polled(mlc_mpi_comm_t *c, int *moved);

/* ---- operations in flight (mpi_op.c) ------------------------------------------- */

#define MLC_MPI_INLINE_REQS 7
#define MLC_MPI_MAX_TYPES 4

struct mlc_mpi_op {
    mlc_request_t *req;
    mlc_mpi_op_t *prev, *next;
    bool active;           /* linked in the communicator's list */
    bool polled;           /* advanced only by our polling (counted in npolled) */
    bool mpi_owns_heap;    /* a collective still uses heap: never free it (abandoned op) */
    double submitted;      /* mlc_now() when it joined the list (how long a wait polls its collectives) */
    /* reqs[0] is reserved for the control receive while waiting in MPI_Waitany;
     * the operation's own requests are reqs[1..nreq]. */
    int nreq, cap;
    MPI_Request *reqs;
    MPI_Request inline_reqs[MLC_MPI_INLINE_REQS + 1];
    int ncoll;             /* reqs[1..ncoll] are collectives' (never cancelled or freed) */
    MPI_Datatype types[MLC_MPI_MAX_TYPES];
    int ntypes;
    void *heap;            /* arrays and scratch, freed at completion */
    /* finishing touches once MPI is done */
    void *copy_dst;
    const void *copy_src;
    size_t copy_bytes;
    void *avg_buf;
    size_t avg_count;
    /* receive whose status is reported (recv, sendrecv) */
    int recv_index;         /* index in reqs, 0 = none */
    size_t recv_cap;       /* bytes */
    MPI_Datatype recv_type;
    MPI_Status recv_status;
    bool size_known;       /* msg_bytes: the message's size, from its probe */
    size_t msg_bytes;
    bool spilled;          /* recv_type runs on into the spill area (mpi_recv_size.c) */
    /* algorithms over MPI point-to-point */
    mlc_exec_t *exec;
    /* A user op's collective: once MPI is done, the ranks agree whether a
     * user op failed during it (mpi_op.c: agreement_over). */
    uint8_t agree;         /* MLC_MPI_AGREE_* */
    uint64_t op_failures;  /* the process's user-op failures when it was issued */
    mlc_mpi_verdict_t *verdict; /* [2]: this rank's, and the one agreed on (in heap) */
};

enum { MLC_MPI_AGREE_NONE, MLC_MPI_AGREE_WANTED, MLC_MPI_AGREE_STARTED, MLC_MPI_AGREE_DONE };

_Static_assert(sizeof(mlc_mpi_op_t) <= MLC_REQ_PRIV_BYTES, "mlc_mpi_op_t must fit in req->priv");

static inline mlc_mpi_op_t *mlc_mpi_op_of(const mlc_request_t *req) { return (mlc_mpi_op_t *)req->priv; }

/* Reset the request's op state. */
mlc_mpi_op_t *mlc_mpi_op_init(mlc_request_t *req);
/* Room for n more MPI requests; NO_MEMORY on failure. */
mlc_status_t mlc_mpi_op_reserve(mlc_mpi_op_t *op, int n);
/* The next request of op (after op_reserve). */
MPI_Request *mlc_mpi_op_next_req(mlc_mpi_op_t *op);
/* Keep a derived type until the operation ends (committed here). */
mlc_status_t mlc_mpi_op_keep_type(mlc_mpi_op_t *op, MPI_Datatype type);
/* Scratch memory freed when the operation ends (one block per operation). */
void *mlc_mpi_op_alloc(mlc_mpi_op_t *op, size_t bytes);
/*
 * The operation has been issued: with no request left it is finished at
 * once (blocking calls), otherwise it joins the communicator's list.
 */
mlc_status_t mlc_mpi_op_submit(mlc_mpi_op_t *op);
/* Cancel r and complete it; a send MPI cannot cancel (Open MPI) is freed
 * instead and left to MPI (false: its buffer may still be read). Local. */
bool mlc_mpi_drop_request(MPI_Request *r);
/* Release what the operation holds without completing it (failed start). */
void mlc_mpi_op_discard(mlc_mpi_op_t *op);
/* Advance every operation of comm, then every other communicator's algorithm
 * steps, without blocking; *moved = 1 if any did. */
void mlc_mpi_progress_all(mlc_comm_t *comm, int *moved);
/* Abandon every pending operation; returns how many collectives MPI still runs. */
int mlc_mpi_abandon_all(mlc_comm_t *comm);
/* The table's progress, wait_native, idle and pending_peers entries. */
mlc_status_t mlc_mpi_progress(mlc_comm_t *comm, int *progressed);
mlc_status_t mlc_mpi_wait_native(mlc_request_t *req);
void mlc_mpi_idle(mlc_comm_t *comm, double max_s);
void mlc_mpi_pending_peers(const mlc_request_t *req, char *buf, size_t len);

/* Blocking MPI calls are used for a call that waits right away only without
 * a deadline (MLC_TIMEOUT=0); with one, the default 600 s included,
 * everything is nonblocking and waited for with that deadline.
 * A collective's form depends only on what every rank agrees on (MPI matches
 * a blocking collective only with blocking ones): blocking only where no rank
 * had a deadline when the communicator was created, which is also why such a
 * communicator refuses a deadline set later (comm->timeout_refused, set by
 * mpi_comm.c's agree_blocking). A point-to-point call is also
 * nonblocking while an algorithm's steps wait somewhere in this process for
 * our polling, so that they advance while it waits. */
static inline bool mlc_mpi_blocking(const mlc_request_t *req)
{
    if (!req->blocking || req->comm->cfg.timeout_s > 0) return false;
    /* Below MPI_THREAD_MULTIPLE a blocking call would hold the process's MPI
     * lock while it waits for a peer whose own thread may be waiting for its
     * lock: polled steps let it go between them. */
    if (mlc_mpi_serialized()) return false;
    if (req->coll < MLC_COLL_SEND) return req->comm->timeout_refused != NULL;
    return atomic_load_explicit(&mlc_mpi_polled_ops, memory_order_relaxed) == 0;
}

/* ---- the start entries ------------------------------------------------------------- */

/* MPI_<Name>(args) when blk, else MPI_I<name>(args, next request of op). */
#define MLC_MPI_ISSUE(blk, op, Name, IName, ...) \
    ((blk) ? Name(__VA_ARGS__) : IName(__VA_ARGS__, mlc_mpi_op_next_req(op)))
/* The same for MPI-4 large-count calls (only chosen when mlc_mpi_use_c()). */
#if MLC_MPI_HAS_LARGE_COUNT
#define MLC_MPI_ISSUE_C(blk, op, Name, IName, ...) MLC_MPI_ISSUE(blk, op, Name, IName, __VA_ARGS__)
#else
#define MLC_MPI_ISSUE_C(...) MPI_ERR_INTERN
#endif

/* buf + bytes, keeping NULL as NULL (buffers only the root uses). */
static inline void *mlc_mpi_at(const void *buf, size_t bytes) { return buf ? (char *)buf + bytes : NULL; }

/* mpi_coll.c: native collectives (uniform counts) */
mlc_status_t mlc_mpi_start_broadcast(mlc_request_t *req);
mlc_status_t mlc_mpi_start_reduce(mlc_request_t *req);
mlc_status_t mlc_mpi_start_allreduce(mlc_request_t *req);
mlc_status_t mlc_mpi_start_allgather(mlc_request_t *req);
mlc_status_t mlc_mpi_start_reduce_scatter(mlc_request_t *req);
mlc_status_t mlc_mpi_start_alltoall(mlc_request_t *req);
mlc_status_t mlc_mpi_start_gather(mlc_request_t *req);
mlc_status_t mlc_mpi_start_scatter(mlc_request_t *req);
mlc_status_t mlc_mpi_start_barrier(mlc_request_t *req);
/* mpi_vcoll.c: v-collectives */
mlc_status_t mlc_mpi_start_allgatherv(mlc_request_t *req);
mlc_status_t mlc_mpi_start_alltoallv(mlc_request_t *req);
mlc_status_t mlc_mpi_start_gatherv(mlc_request_t *req);
mlc_status_t mlc_mpi_start_scatterv(mlc_request_t *req);
/* mpi_p2p.c */
mlc_status_t mlc_mpi_start_send(mlc_request_t *req);
mlc_status_t mlc_mpi_start_recv(mlc_request_t *req);
mlc_status_t mlc_mpi_start_sendrecv(mlc_request_t *req);
mlc_status_t mlc_mpi_iprobe(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *st);
/* Post one point-to-point piece of n bytes (above the count limit: one big
 * type, or an MPI-4 large-count call); blocking when mreq is NULL. */
int mlc_mpi_isend_bytes(mlc_mpi_op_t *op, const void *buf, size_t n, int peer, int tag, MPI_Comm comm,
                        MPI_Request *mreq);
int mlc_mpi_irecv_bytes(mlc_mpi_op_t *op, void *buf, size_t n, int peer, int tag, MPI_Comm comm,
                        MPI_Request *mreq, MPI_Datatype *type_used);
/* The same receive of a message matched by MPI_(I)mprobe (*msg is consumed). */
int mlc_mpi_imrecv_bytes(mlc_mpi_op_t *op, void *buf, size_t n, MPI_Message *msg, MPI_Request *mreq,
                         MPI_Datatype *type_used);
/* Bytes a completed receive brought (from its status and the type it used). */
size_t mlc_mpi_received_bytes(const MPI_Status *st, MPI_Datatype type);

/* mpi_recv_size.c: user receives that never write outside the user's buffer
 * and learn a truncated message's size; see the file. */
/* Find out once (after MPI_Init) how this MPI reports truncated messages. */
/* MPI_Finalize has begun: free the receive types it keeps (mpi_recv_size.c). */
void mlc_mpi_recv_size_stop(void);
mlc_status_t mlc_mpi_recv_size_start(void);
/* MPI's status of a truncated receive holds the message's size (Open MPI). */
bool mlc_mpi_truncation_reported(void);
/* Receive from src (an MPI value) into cap bytes at buf, blocking when mreq is
 * NULL: a contiguous receive only of a probed message that fits, else a type
 * bounded by the buffer. Sets op->recv_type (and size_known, spilled).
 * `waited`: the caller waits on it at once (probe a little longer first). */
int mlc_mpi_recv_bounded(mlc_mpi_op_t *op, void *buf, size_t cap, int src, int tag, MPI_Comm comm,
                         MPI_Request *mreq, bool waited);
/* Internal test knob (tests/mpi): how much of the spill area a bounded receive
 * names (0: all of it, 1 GiB), so a message longer than buffer + spill can be
 * tested. Call it with no receive pending. */
MLC_MPI_EXPORT void mlc_mpi_set_spill_bytes(size_t bytes);
/* The receive of op is over, `got` bytes long: give back the spill pages it wrote. */
void mlc_mpi_spill_done(const mlc_mpi_op_t *op, size_t got);
/* Whether the spill area is reserved (once per process): bounded receives need it. */
bool mlc_mpi_spill_ready(void);
/* Post a receive into cap bytes of host memory at buf that a longer message
 * never overruns (the bounded type: MPI reports the message's whole length);
 * *type is the committed type to free once it ended. MPI_ERR_NO_MEM (nothing
 * posted) where no spill area could be reserved. Used for the receives of
 * mlcomm's own algorithms, whose lengths the ranks' counts decide. */
int mlc_mpi_irecv_capped(void *buf, size_t cap, int src, int tag, MPI_Comm comm, MPI_Request *r,
                         MPI_Datatype *type);
/* A receive into cap bytes posted so ended `got` bytes long: give back the spill pages it wrote. */
void mlc_mpi_spill_release(size_t cap, size_t got);

/* mpi_algos.c: a src/algos schedule over MPI point-to-point on the hidden comm */
mlc_status_t mlc_mpi_start_algo(mlc_request_t *req);
const char *const *mlc_mpi_algos(mlc_coll_t coll);
/* The algorithm a call runs unless forced: "native" or ours (mpi_algos.c). */
const char *mlc_mpi_choose_algo(const mlc_request_t *req);
/* The collectives mlc_mpi_choose_algo chooses for (the others run native without asking). */
bool mlc_mpi_chooses(mlc_coll_t coll);
int mlc_mpi_hidden_tag(const mlc_mpi_comm_t *c, uint64_t seq, uint32_t key);
/* One round of the executor; returns 1 when done, 0 pending, negative on error. */
int mlc_mpi_algo_progress(mlc_mpi_op_t *op, int *moved);
void mlc_mpi_algo_abandon(mlc_mpi_op_t *op);
void mlc_mpi_algo_pending_peers(const mlc_mpi_op_t *op, char *buf, size_t len);
void mlc_mpi_handles_free(mlc_mpi_comm_t *c);

#endif
