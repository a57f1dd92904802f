/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Operations in flight: the MPI requests an operation issued, what to do
 * once MPI is done with them (copy out, divide for avg, report what a
 * receive got), and the ways core drives them: progress (test), wait_native
 * (block in MPI_Waitany, woken by the control receive), idle (poll, back off).
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/clock.h"
#include "base/wait.h"
#include "mpi_impl.h"

typedef struct heap_block {
    struct heap_block *next;
    _Alignas(16) unsigned char data[];
} heap_block_t;

/* Every call starts here: set the fields one by one (a memset of the whole
 * op, statuses and arrays included, costs more than the MPI call at 8 bytes).
 * Arrays are valid up to their counts; recv_status is written before use. */
mlc_mpi_op_t *mlc_mpi_op_init(mlc_request_t *req)
{
    mlc_mpi_op_t *op = mlc_mpi_op_of(req);
    op->req = req;
    op->prev = op->next = NULL;
    op->active = op->polled = op->mpi_owns_heap = false;
    op->nreq = 0;
    op->cap = MLC_MPI_INLINE_REQS;
    op->reqs = op->inline_reqs;
    op->inline_reqs[0] = MPI_REQUEST_NULL;
    op->ncoll = 0;
    op->ntypes = 0;
    op->heap = NULL;
    op->copy_dst = NULL;
    op->copy_src = NULL;
    op->copy_bytes = 0;
    op->avg_buf = NULL;
    op->avg_count = 0;
    op->recv_index = 0;
    op->recv_cap = 0;
    op->recv_type = MPI_BYTE;
    op->size_known = false;
    op->msg_bytes = 0;
    op->spilled = false;
    op->exec = NULL;
    op->agree = MLC_MPI_AGREE_NONE;
    op->verdict = NULL;
    const mlc_args_t *a = &req->args;
    if (req->coll < MLC_COLL_SEND && a->op >= MLC_OP_BUILTIN_COUNT && a->count > 0 && req->comm->size > 1) {
        op->agree = MLC_MPI_AGREE_WANTED;
        op->op_failures = mlc_core->op_failures(NULL, 0);
    }
    return op;
}

mlc_status_t mlc_mpi_op_reserve(mlc_mpi_op_t *op, int n)
{
    if (op->nreq + n <= op->cap) return MLC_SUCCESS;
    int cap = op->nreq + n;
    MPI_Request *r = malloc(sizeof *r * ((size_t)cap + 1));
    if (!r)
        return mlc_core->error(MLC_ERR_NO_MEMORY, "backend 'mpi': out of memory for %d MPI requests of one %s",
                         cap, mlc_core->coll_name(op->req->coll));
    for (int i = 0; i <= cap; i++) r[i] = i <= op->nreq ? op->reqs[i] : MPI_REQUEST_NULL;
    if (op->reqs != op->inline_reqs) free(op->reqs);
    op->reqs = r;
    op->cap = cap;
    return MLC_SUCCESS;
}

MPI_Request *mlc_mpi_op_next_req(mlc_mpi_op_t *op)
{
    MPI_Request *mreq = &op->reqs[++op->nreq];
    *mreq = MPI_REQUEST_NULL; /* stays so if the call that fills it fails */
    return mreq;
}

mlc_status_t mlc_mpi_op_keep_type(mlc_mpi_op_t *op, MPI_Datatype type)
{
    if (op->ntypes == MLC_MPI_MAX_TYPES) {
        MPI_Type_free(&type);
        return mlc_core->error(MLC_ERR_INTERNAL, "backend 'mpi': more than %d datatypes for one %s",
                         MLC_MPI_MAX_TYPES, mlc_core->coll_name(op->req->coll));
    }
    int rc = MPI_Type_commit(&type);
    op->types[op->ntypes++] = type;
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "backend 'mpi': MPI_Type_commit");
    return MLC_SUCCESS;
}

void *mlc_mpi_op_alloc(mlc_mpi_op_t *op, size_t bytes)
{
    heap_block_t *b = malloc(sizeof *b + (bytes ? bytes : 1));
    if (!b) {
        mlc_core->error(MLC_ERR_NO_MEMORY, "backend 'mpi': out of memory for %zu bytes of scratch (%s)", bytes,
                  mlc_core->coll_name(op->req->coll));
        return NULL;
    }
    b->next = op->heap;
    op->heap = b;
    return b->data;
}

/* Free what the operation holds; the heap stays if a collective may still use it. */
static void op_release(mlc_mpi_op_t *op)
{
    for (int i = 0; i < op->ntypes; i++) MPI_Type_free(&op->types[i]);
    op->ntypes = 0;
    if (!op->mpi_owns_heap) {
        for (heap_block_t *b = op->heap; b;) {
            heap_block_t *n = b->next;
            free(b);
            b = n;
        }
    }
    op->heap = NULL;
    if (op->reqs != op->inline_reqs) free(op->reqs);
    op->reqs = op->inline_reqs;
    op->nreq = 0;
}

static void op_unlink(mlc_mpi_op_t *op)
{
    if (!op->active) return;
    mlc_mpi_comm_t *c = op->req->comm->impl;
    if (op->prev) op->prev->next = op->next;
    else c->head = op->next;
    if (op->next) op->next->prev = op->prev;
    else c->tail = op->prev;
    op->prev = op->next = NULL;
    op->active = false;
    if (op->polled) {
        atomic_fetch_sub_explicit(&c->npolled, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&mlc_mpi_polled_ops, 1, memory_order_relaxed);
    }
}

/* What the receive of a recv/sendrecv got: fill the caller's status, or fail on truncation. */
static mlc_status_t recv_report(mlc_mpi_op_t *op, char *msg, size_t len)
{
    const mlc_args_t *a = &op->req->args;
    const MPI_Status *st = &op->recv_status;
    /* The size from the message's probe, else from MPI (with the spill area,
     * beyond the buffer too; see mpi_recv_size.c for where MPI hides it). */
    bool truncated = st->MPI_ERROR == MPI_ERR_TRUNCATE;
    size_t got = op->size_known ? op->msg_bytes : mlc_mpi_received_bytes(st, op->recv_type);
    /* After a truncation MPICH leaves a stale count: believe only an MPI that reports it. */
    if (truncated && !op->size_known && (op->spilled || !mlc_mpi_truncation_reported())) got = 0;
    mlc_mpi_spill_done(op, truncated && !op->size_known ? SIZE_MAX : got);
    if (truncated || got > op->recv_cap) {
        if (got > op->recv_cap)
            snprintf(msg, len, "rank %d: %s from rank %d (tag %d): the message of %zu bytes is longer than "
                     "the %zu-byte receive buffer", op->req->comm->rank, mlc_core->coll_name(op->req->coll),
                     st->MPI_SOURCE, st->MPI_TAG, got, op->recv_cap);
        else
            snprintf(msg, len, "rank %d: %s from rank %d (tag %d): the message is longer than the %zu-byte "
                     "receive buffer (MPI did not report its size)", op->req->comm->rank,
                     mlc_core->coll_name(op->req->coll), st->MPI_SOURCE, st->MPI_TAG, op->recv_cap);
        /* Filled as on shm: a receive from any source learns who sent it (size 0: not reported). */
        if (a->msg_status) *a->msg_status = (mlc_msg_status_t){st->MPI_SOURCE, st->MPI_TAG, got};
        return MLC_ERR_TRUNCATE;
    }
    if (a->msg_status) *a->msg_status = (mlc_msg_status_t){st->MPI_SOURCE, st->MPI_TAG, got};
    return MLC_SUCCESS;
}

/* An operation before op in its communicator's list that has yet to start
 * its agreement. (Lock held: listed operations are not complete.) */
static bool earlier_agreement_waits(const mlc_mpi_op_t *op)
{
    for (const mlc_mpi_op_t *e = op->prev; e; e = e->prev)
        if (e->agree == MLC_MPI_AGREE_WANTED) return true;
    return false;
}

/*
 * A user op runs inside MPI, which cannot stop a collective, so a rank
 * whose op failed (mlc_op_fail; counted process-wide) cannot keep what it
 * left from its peers. Once MPI is done, the ranks therefore agree: an
 * allreduce on the hidden communicator of each rank's verdict ("this rank
 * + 1 and the reason, if a user op failed here since the call was
 * issued"), keeping the highest rank's. Those allreduces must start in the
 * same order on every rank: in the order of the calls, which is the order
 * of the communicator's list (an operation waits while one before it has
 * not started its own; progress passes go through the list in order, and
 * a native wait polls while its call awaits one). A failure of another
 * call's op in this process at the same time fails this call too. True
 * when the agreement is over (or none is needed); false while it waits or
 * runs (op stays listed).
 */
static bool agreement_over(mlc_mpi_op_t *op)
{
    if (op->agree == MLC_MPI_AGREE_NONE || op->agree == MLC_MPI_AGREE_DONE) return true;
    if (op->agree == MLC_MPI_AGREE_STARTED) { /* its allreduce completed: MPI is done again */
        op->agree = MLC_MPI_AGREE_DONE;
        return true;
    }
    mlc_request_t *req = op->req;
    mlc_mpi_comm_t *c = req->comm->impl;
    if (op->active && earlier_agreement_waits(op)) return false;
    static mlc_mpi_verdict_t unknown[2] = {{0, ""}, {-1, ""}}; /* no memory or MPI failed: fail */
    op->agree = MLC_MPI_AGREE_DONE;
    op->verdict = mlc_mpi_op_alloc(op, 2 * sizeof *op->verdict);
    if (!op->verdict) {
        op->verdict = unknown;
        return true;
    }
    mlc_mpi_verdict_t *mine = &op->verdict[0];
    memset(op->verdict, 0, 2 * sizeof *op->verdict);
    if (mlc_core->op_failures(mine->why, sizeof mine->why) != op->op_failures) mine->rank1 = req->comm->rank + 1;
    op->nreq = 0;
    op->ncoll = 0;
    int rc;
    if (!op->active) { /* finished at once (blocking MPI calls): agree the same way */
        rc = MPI_Allreduce(mine, &op->verdict[1], 1, mlc_mpi_verdict_type(), mlc_mpi_verdict_op(), c->hidden);
        if (rc != MPI_SUCCESS) op->verdict = unknown;
        return true;
    }
    if (mlc_mpi_op_reserve(op, 1) != MLC_SUCCESS) {
        op->verdict = unknown;
        return true;
    }
    rc = MPI_Iallreduce(mine, &op->verdict[1], 1, mlc_mpi_verdict_type(), mlc_mpi_verdict_op(), c->hidden,
                        mlc_mpi_op_next_req(op));
    if (rc != MPI_SUCCESS) {
        op->verdict = unknown;
        return true;
    }
    op->ncoll = 1; /* a collective: never cancelled */
    op->agree = MLC_MPI_AGREE_STARTED;
    return false;
}

/* The agreement's verdict: MLC_SUCCESS, or the failure (msg says whose). */
static mlc_status_t agreed_status(mlc_mpi_op_t *op, char *msg, size_t len)
{
    if (op->agree != MLC_MPI_AGREE_DONE || op->verdict[1].rank1 == 0) return MLC_SUCCESS;
    mlc_request_t *req = op->req;
    int r = req->comm->rank;
    const mlc_mpi_verdict_t *v = &op->verdict[1];
    if (op->verdict[0].rank1) {
        snprintf(msg, len, "rank %d: %s: its user op failed: %.250s", r, mlc_core->coll_name(req->coll),
                 op->verdict[0].why);
    } else if (v->rank1 > 0 && v->rank1 <= req->comm->size) {
        snprintf(msg, len, "rank %d: %s: rank %d's user op failed: %.250s", r, mlc_core->coll_name(req->coll),
                 v->rank1 - 1, v->why);
    } else {
        snprintf(msg, len, "rank %d: %s: the ranks could not agree whether a user op failed (an MPI call "
                 "failed): its result is not trusted", r, mlc_core->coll_name(req->coll));
    }
    /* Every rank fails the communicator alike, as on threads and shm. */
    return mlc_core->comm_fail(req->comm, MLC_ERR_USER_OP, "%s", msg);
}

/* MPI is done with every request: finishing touches, then complete. */
static void op_finish(mlc_mpi_op_t *op)
{
    if (!agreement_over(op)) return;
    mlc_request_t *req = op->req;
    char msg[384];
    msg[0] = '\0'; /* not = "": that clears all 384 bytes on every call */
    mlc_status_t st = MLC_SUCCESS;
    if (op->copy_bytes) memcpy(op->copy_dst, op->copy_src, op->copy_bytes);
    if (op->avg_count) mlc_core->reduce_divide(op->avg_buf, op->avg_count, req->args.dtype, req->comm->size);
    if (op->recv_index) st = recv_report(op, msg, sizeof msg);
    if (st == MLC_SUCCESS) st = agreed_status(op, msg, sizeof msg);
    op_unlink(op);
    op_release(op);
    mlc_core->request_complete(req, st, "%s", msg);
}

bool mlc_mpi_drop_request(MPI_Request *r)
{
    if (*r == MPI_REQUEST_NULL) return true;
    MPI_Cancel(r);
    int done = 0;
    for (int i = 0; i < 64 && !done; i++) MPI_Test(r, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    MPI_Request_free(r); /* a send MPI cannot cancel (Open MPI): MPI finishes it, or never */
    return false;
}

/* Stop an operation MPI failed or that is abandoned: cancel what can be
 * cancelled (point-to-point: mlc_mpi_drop_request, local), leave a
 * collective's requests to MPI (they can be neither cancelled nor freed).
 * True when MPI keeps some of them (and the buffers they use). */
static bool op_abandon(mlc_mpi_op_t *op)
{
    bool kept = false;
    if (op->exec) mlc_mpi_algo_abandon(op);
    for (int i = 1; i <= op->nreq; i++) {
        if (op->reqs[i] == MPI_REQUEST_NULL) continue;
        if (i <= op->ncoll) {
            if (!op->mpi_owns_heap) ((mlc_mpi_comm_t *)op->req->comm->impl)->left_to_mpi++;
            op->mpi_owns_heap = kept = true;
            continue;
        }
        if (!mlc_mpi_drop_request(&op->reqs[i])) op->mpi_owns_heap = kept = true;
    }
    op_unlink(op);
    op_release(op);
    return kept;
}

/* A truncation is MLC_ERR_TRUNCATE, as from a blocking call (mlc_mpi_error);
 * in a collective it means the ranks passed different counts. */
static void op_fail(mlc_mpi_op_t *op, int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING + 1];
    mlc_request_t *req = op->req;
    mlc_mpi_errtext(rc, text, sizeof text);
    const char *hint = mlc_mpi_count_hint(req, rc);
    op_abandon(op);
    mlc_core->request_complete(req, mlc_mpi_truncated(rc) ? MLC_ERR_TRUNCATE : MLC_ERR_BACKEND,
                               "rank %d: %s (%s%s): %s", req->comm->rank, what, mlc_core->coll_name(req->coll), hint,
                               text);
}

void mlc_mpi_op_discard(mlc_mpi_op_t *op) { op_abandon(op); }

/* A user op's collective that MPI finished at once agrees at once (a
 * blocking allreduce) only where blocking calls are allowed and no earlier
 * call's agreement waits to start; else it joins the list. */
static bool agreement_queues(mlc_mpi_op_t *op)
{
    if (op->agree != MLC_MPI_AGREE_WANTED) return false;
    if (!mlc_mpi_blocking(op->req)) return true;
    mlc_mpi_comm_t *c = op->req->comm->impl;
    bool queued = false;
    mlc_mpi_lock(c);
    for (mlc_mpi_op_t *e = c->head; e && !queued; e = e->next) queued = e->agree == MLC_MPI_AGREE_WANTED;
    mlc_mpi_unlock(c);
    return queued;
}

mlc_status_t mlc_mpi_op_submit(mlc_mpi_op_t *op)
{
    mlc_mpi_comm_t *c = op->req->comm->impl;
    if (op->nreq == 0 && !op->exec && !agreement_queues(op)) {
        /* Done at once. Another thread may be polling this communicator's
         * algorithm steps: completions (profiling) happen under c. */
        bool shared = atomic_load_explicit(&c->npolled, memory_order_relaxed) > 0;
        if (shared) mlc_mpi_lock(c);
        op_finish(op);
        if (shared) mlc_mpi_unlock(c);
        return MLC_SUCCESS;
    }
    op->submitted = mlc_now();
    mlc_mpi_lock(c);
    op->prev = c->tail;
    op->next = NULL;
    if (c->tail) c->tail->next = op;
    else c->head = op;
    c->tail = op;
    op->active = true;
    if (op->polled) {
        atomic_fetch_add_explicit(&c->npolled, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&mlc_mpi_polled_ops, 1, memory_order_relaxed);
    }
    mlc_mpi_unlock(c);
    return MLC_SUCCESS;
}

/* One completed (or failed) request: returns false when the operation failed. */
static bool request_done(mlc_mpi_op_t *op, int i, int rc, const MPI_Status *st)
{
    if (i == op->recv_index) {
        op->recv_status = *st;
        op->recv_status.MPI_ERROR = MPI_SUCCESS; /* single completions leave it unset */
        int cls = rc;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        if (cls == MPI_ERR_TRUNCATE) {
            op->recv_status.MPI_ERROR = MPI_ERR_TRUNCATE;
            op->reqs[i] = MPI_REQUEST_NULL;
            return true;
        }
    }
    if (rc != MPI_SUCCESS) {
        op->reqs[i] = MPI_REQUEST_NULL; /* a failed request is complete */
        op_fail(op, rc, "MPI request failed");
        return false;
    }
    return true;
}

/* Test every request once; finish when none is left. */
static void op_advance(mlc_mpi_op_t *op, int *moved)
{
    if (atomic_load_explicit(&op->req->done, memory_order_acquire)) {
        /* Core ended the request (its communicator failed or timed out)
         * while MPI still held the operation: stop it, nobody polls it again. */
        op_abandon(op);
        return;
    }
    if (op->exec) {
        int r = mlc_mpi_algo_progress(op, moved);
        if (r < 0) {
            mlc_request_t *req = op->req;
            char msg[384];
            snprintf(msg, sizeof msg, "%s", mlc_core->last_error());
            op_abandon(op);
            mlc_core->request_complete(req, (mlc_status_t)r, "%s", msg);
        } else if (r == 1) {
            op_finish(op);
        }
        return;
    }
    bool pending = false;
    for (int i = 1; i <= op->nreq; i++) {
        if (op->reqs[i] == MPI_REQUEST_NULL) continue;
        int flag = 0;
        MPI_Status st;
        int rc = MPI_Test(&op->reqs[i], &flag, &st);
        if (rc != MPI_SUCCESS || flag) {
            *moved = 1;
            if (!request_done(op, i, rc, &st)) return;
        } else {
            pending = true;
        }
    }
    if (!pending) op_finish(op);
}

/* Advance comm's own operations; *moved = 1 if any did. */
static void progress_here(mlc_comm_t *comm, int *moved)
{
    mlc_mpi_comm_t *c = comm->impl;
    mlc_mpi_lock(c);
    for (mlc_mpi_op_t *op = c->head, *next; op; op = next) {
        next = op->next;
        op_advance(op, moved);
    }
    mlc_mpi_unlock(c);
}

void mlc_mpi_progress_all(mlc_comm_t *comm, int *moved)
{
    progress_here(comm, moved);
    mlc_mpi_progress_others(comm->impl, moved);
}

void mlc_mpi_progress_polled(mlc_mpi_comm_t *c, int *moved)
{
    for (mlc_mpi_op_t *op = c->head, *next; op; op = next) {
        next = op->next;
        if (op->exec) op_advance(op, moved);
    }
}

int mlc_mpi_abandon_all(mlc_comm_t *comm)
{
    mlc_mpi_comm_t *c = comm->impl;
    mlc_mpi_lock(c);
    for (mlc_mpi_op_t *op = c->head, *next; op; op = next) {
        next = op->next;
        /* One that MPI has finished completes as what it was (its peer got it). */
        int moved = 0;
        if (!op->exec && op->agree == MLC_MPI_AGREE_NONE) op_advance(op, &moved);
        if (!op->active) continue;
        mlc_request_t *req = op->req;
        if (op_abandon(op))
            mlc_core->request_complete(req, MLC_ERR_ABORTED, "rank %d: %s (%zu bytes) was still pending when "
                                       "mlc_comm_free freed its communicator, and MPI could not cancel it: MPI may "
                                       "still complete it, using its buffers until then", comm->rank,
                                       mlc_core->coll_name(req->coll), req->bytes);
    }
    int left = c->left_to_mpi;
    mlc_mpi_unlock(c);
    if (left)
        MLC_WARN("rank %d: %d MPI collective(s) still in flight when the communicator was freed were left "
                 "to MPI (MPI cannot cancel collectives); their buffers may still be written",
                 comm->rank, left);
    return left;
}

/* ---- core's wait entries -------------------------------------------------------- */

/* A native wait (no deadline: MLC_TIMEOUT=0) as the shared wait loop sees it (base/wait.h). */
typedef struct native_wait {
    mlc_request_t *req;
    bool ctrl_failed; /* the communicator failed (a control message) */
} native_wait_t;

static int native_step_locked(void *p)
{
    native_wait_t *w = p;
    mlc_request_t *req = w->req;
    mlc_comm_t *comm = req->comm;
    mlc_mpi_comm_t *c = comm->impl;
    mlc_mpi_op_t *op = mlc_mpi_op_of(req);
    mlc_mpi_flush_abort(c);
    if (mlc_mpi_check_ctrl(comm) != MLC_SUCCESS) {
        w->ctrl_failed = true;
        return MLC_WAIT_STOP;
    }
    if (atomic_load_explicit(&mlc_mpi_polled_ops, memory_order_relaxed) > 0 || op->polled ||
        op->agree == MLC_MPI_AGREE_WANTED) {
        /* Algorithm steps, here or on another communicator, advance only
         * when we call: poll everything. So do earlier calls whose agreement
         * must start before this one's (agreement_over). */
        int moved = 0;
        mlc_mpi_progress_all(comm, &moved);
        return moved ? MLC_WAIT_MOVED : MLC_WAIT_NOTHING;
    }
    /* Block in MPI on this operation's requests and the control receive
     * (holding c: other threads skip it, and it has nothing to poll); under
     * the process's MPI lock only test, so that other threads get their turn. */
    mlc_mpi_lock(c);
    op->reqs[0] = c->ctrl;
    int idx = MPI_UNDEFINED, flag = 1;
    MPI_Status mst;
    int rc = mlc_mpi_serialized() ? MPI_Testany(op->nreq + 1, op->reqs, &idx, &flag, &mst)
                                  : MPI_Waitany(op->nreq + 1, op->reqs, &idx, &mst);
    op->reqs[0] = MPI_REQUEST_NULL;
    if (rc == MPI_SUCCESS && !flag) {
        mlc_mpi_unlock(c);
        return MLC_WAIT_NOTHING;
    }
    if (idx == 0) {
        mlc_mpi_unlock(c);
        if (mlc_mpi_ctrl_arrived(comm, rc) != MLC_SUCCESS) {
            w->ctrl_failed = true;
            return MLC_WAIT_STOP;
        }
        return MLC_WAIT_MOVED;
    }
    int moved = 0;
    bool failed = false;
    if (idx == MPI_UNDEFINED) {
        if (rc != MPI_SUCCESS) {
            op_fail(op, rc, "MPI_Waitany");
            failed = true;
        }
    } else if (!request_done(op, idx, rc, &mst)) {
        failed = true;
    }
    if (!failed) op_advance(op, &moved);
    mlc_mpi_unlock(c);
    return failed ? MLC_WAIT_STOP : MLC_WAIT_MOVED;
}

/* A wait's step under the process's MPI lock (mlc_mpi_serial_enter), taken and let go per step. */
static int serial_step(int (*step)(void *), void *p)
{
    bool locked = mlc_mpi_serial_enter();
    int r = step(p);
    mlc_mpi_serial_leave(locked);
    return r;
}

static int native_step(void *p) { return serial_step(native_step_locked, p); }

static int native_done(void *p)
{
    return atomic_load_explicit(&((native_wait_t *)p)->req->done, memory_order_acquire);
}

mlc_status_t mlc_mpi_wait_native(mlc_request_t *req)
{
    /* No deadline (MPI's own blocking wait, as raw MPI would). Polled steps
     * advance only when called: spin a little, yield, then 50 us naps. */
    native_wait_t nw = {.req = req};
    mlc_wait_t w = {.step = native_step, .done = native_done, .ctx = &nw, .what = "MPI wait",
                    .spin_s = 50e-6, .yield_s = 1e-3, .sleep_min_s = 50e-6, .sleep_max_s = 50e-6,
                    .spin_check = 8};
    if (mlc_wait_run(&w) == MLC_WAIT_STOPPED && nw.ctrl_failed) return mlc_core->request_comm_failed(req);
    return MLC_SUCCESS;
}

mlc_status_t mlc_mpi_progress(mlc_comm_t *comm, int *progressed)
{
    mlc_mpi_comm_t *c = comm->impl;
    mlc_mpi_flush_abort(c);
    mlc_status_t st = mlc_mpi_check_ctrl(comm);
    if (st != MLC_SUCCESS) return st;
    /* Only this communicator's movement counts as its progress (the idle
     * clock of MLC_TIMEOUT); other communicators' steps are polled too. */
    int moved = 0, elsewhere = 0;
    progress_here(comm, &moved);
    mlc_mpi_progress_others(c, &elsewhere);
    *progressed = moved;
    return MLC_SUCCESS;
}

/* mlc_mpi_idle as a wait (base/wait.h): over when something moved, a user
 * message arrived (for probe) or a control message failed the communicator. */
typedef struct idle_wait {
    mlc_comm_t *comm;
    int over;
} idle_wait_t;

static int idle_step_locked(void *p)
{
    idle_wait_t *w = p;
    mlc_comm_t *comm = w->comm;
    mlc_mpi_comm_t *c = comm->impl;
    int moved = 0, flag = 0;
    mlc_mpi_flush_abort(c);
    if (mlc_mpi_check_ctrl(comm) != MLC_SUCCESS) return MLC_WAIT_STOP;
    mlc_mpi_progress_all(comm, &moved);
    if (!moved) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &flag, MPI_STATUS_IGNORE);
    w->over = moved || flag;
    return MLC_WAIT_NOTHING;
}

static int idle_step(void *p) { return serial_step(idle_step_locked, p); }

static int idle_done(void *p) { return ((idle_wait_t *)p)->over; }

/* MPI's nonblocking collectives (MPI_Ireduce, ...) advance only inside MPI
 * calls, a round per test: Open MPI splits a 16 MiB reduce into 2048 of
 * them. A wait that naps between tests lets each round wait a nap (2 ranks,
 * 16 MiB reduce: 2.2 s against 5 ms for MPI_Reduce). So while one of this
 * communicator's collectives is young enough that it could still be
 * moving (NATIVE_POLL_MIN_S, plus NATIVE_POLL_S_PER_BYTE for each byte of
 * its payload: a floor of 50 MB/s; at most NATIVE_POLL_MAX_S), the wait
 * tests with sched_yield, not naps; past that its peers are late, and it
 * naps. */
#define NATIVE_POLL_MIN_S 0.01
#define NATIVE_POLL_S_PER_BYTE 20e-9
#define NATIVE_POLL_MAX_S 1.0 /* more ranks than cores: a yielding wait still takes a core */

/* Until when a wait on comm should poll without napping (0: it should not). */
static double native_poll_until(mlc_mpi_comm_t *c)
{
    double until = 0;
    mlc_mpi_lock(c);
    for (const mlc_mpi_op_t *op = c->head; op; op = op->next)
        if (op->ncoll > 0) {
            double young = NATIVE_POLL_MIN_S + (double)op->req->bytes * NATIVE_POLL_S_PER_BYTE;
            double t = op->submitted + (young < NATIVE_POLL_MAX_S ? young : NATIVE_POLL_MAX_S);
            if (t > until) until = t;
        }
    mlc_mpi_unlock(c);
    return until;
}

/* MPI has no timed wait: poll with a growing pause (2 us to 1 ms) until
 * something moves, a message comes, or max_s (the "timeout" here only ends
 * the nap: the caller's wait owns MLC_TIMEOUT); first with sched_yield
 * while a collective of comm is young (above). */
void mlc_mpi_idle(mlc_comm_t *comm, double max_s)
{
    idle_wait_t iw = {.comm = comm};
    double poll_s = native_poll_until(comm->impl) - mlc_now();
    mlc_wait_t w = {.step = idle_step, .done = idle_done, .ctx = &iw, .timeout_s = max_s > 0 ? max_s : 1e-9,
                    .what = "MPI idle", .spin_s = -1, .yield_s = poll_s > 0 ? poll_s : -1,
                    .sleep_min_s = 2e-6, .sleep_max_s = 1e-3};
    mlc_wait_run(&w);
}

void mlc_mpi_pending_peers(const mlc_request_t *req, char *buf, size_t len)
{
    const mlc_mpi_op_t *op = mlc_mpi_op_of(req);
    const mlc_args_t *a = &req->args;
    if (op->polled) { /* exec is cleared by whoever completes it: read under c */
        mlc_mpi_comm_t *c = req->comm->impl;
        mlc_mpi_lock(c);
        if (op->exec) mlc_mpi_algo_pending_peers(op, buf, len);
        else snprintf(buf, len, "none (it has just completed)");
        mlc_mpi_unlock(c);
    } else if (req->coll == MLC_COLL_SEND && a->root == req->comm->rank) {
        /* MPI holds a send too large to buffer until its receive is posted. */
        snprintf(buf, len, "%d itself: MPI holds a send to self until its receive is posted (post it first, "
                 "or use mlc_sendrecv)", a->root);
    } else if (req->coll == MLC_COLL_SEND) {
        snprintf(buf, len, "%d", a->root);
    } else if (req->coll == MLC_COLL_RECV) {
        if (a->root == MLC_ANY_SOURCE) snprintf(buf, len, "any (MLC_ANY_SOURCE)");
        else snprintf(buf, len, "%d", a->root);
    } else if (req->coll == MLC_COLL_SENDRECV) {
        if (a->peer2 == MLC_ANY_SOURCE) snprintf(buf, len, "%d, any (MLC_ANY_SOURCE)", a->root);
        else if (a->peer2 == a->root) snprintf(buf, len, "%d", a->root);
        else snprintf(buf, len, "%d, %d", a->root, a->peer2);
    } else {
        mlc_mpi_query_peers(req, buf, len);
    }
}
