/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Staging device buffers through pinned host memory for the host backends
 * (staged.h). A staged call becomes a pipeline of sub-operations, each the
 * same call on a chunk of the data:
 *
 *   chunk j:  copy in (device -> pinned, async)  ->  the call on the pinned
 *             chunk (the backend's own path)      ->  copy out (pinned ->
 *             device, async)
 *
 * with two pinned buffers, so chunk j+1 is copied in while chunk j travels
 * and chunk j-1 is copied out. Copies run on the communicator's stream.
 *
 * Chunking keeps pinned memory bounded (2 pinbufs of MLC_STAGE_CHUNK per
 * buffer) and must be the same on every rank, since each chunk is a
 * collective of its own: it depends only on the call's counts, the dtype,
 * the communicator size and MLC_STAGE_CHUNK, never on where a rank's
 * buffers live. A rank whose buffers are host memory runs the same chunks
 * on them directly. Uniform-count collectives are cut into chunks; each
 * chunk takes elements [lo, lo+len) of every rank's block, so blocked
 * layouts (allgather, alltoall, ...) are packed into the pinned buffer block by
 * block. Point-to-point and the v-collectives are staged whole (one
 * chunk): their counts differ between ranks, and a receive may be larger
 * than the message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "devrt/pinned.h"
#include "stage_impl.h"

static shape_t shape_of(mlc_coll_t coll)
{
    switch (coll) {
    case MLC_COLL_BROADCAST:
    case MLC_COLL_REDUCE:
    case MLC_COLL_ALLREDUCE: return (shape_t){{L_FLAT, L_FLAT}, false, false};
    case MLC_COLL_ALLGATHER: return (shape_t){{L_FLAT, L_BLOCKS}, false, false};
    case MLC_COLL_GATHER: return (shape_t){{L_FLAT, L_BLOCKS}, false, true};
    case MLC_COLL_REDUCE_SCATTER: return (shape_t){{L_BLOCKS, L_FLAT}, true, false};
    case MLC_COLL_SCATTER: return (shape_t){{L_BLOCKS, L_FLAT}, true, true};
    case MLC_COLL_ALLTOALL: return (shape_t){{L_BLOCKS, L_BLOCKS}, false, false};
    case MLC_COLL_SCATTERV: return (shape_t){{L_NONE, L_NONE}, true, true};
    default: return (shape_t){{L_NONE, L_NONE}, false, false};
    }
}

/* ---- geometry ------------------------------------------------------------------ */

static size_t chunk_len(const mlc_stage_t *op, size_t j)
{
    size_t lo = j * op->per;
    return op->count - lo < op->per ? op->count - lo : op->per;
}

/* Bytes of each buffer of a call staged whole. */
static void whole_bytes(const mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *a, size_t out[2])
{
    size_t es = a->esize;
    int p = comm->size;
    out[SEND] = a->count * es;
    out[RECV] = a->count * es;
    switch (coll) {
    case MLC_COLL_SENDRECV: out[RECV] = a->count2 * es; break;
    case MLC_COLL_ALLGATHERV:
    case MLC_COLL_GATHERV: out[RECV] = mlc_vextent(a->counts, a->displs, p) * es; break;
    case MLC_COLL_SCATTERV: out[SEND] = mlc_vextent(a->counts, a->displs, p) * es; break;
    case MLC_COLL_ALLTOALLV:
        out[SEND] = mlc_vextent(a->counts, a->displs, p) * es;
        out[RECV] = mlc_vextent(a->counts2, a->displs2, p) * es;
        break;
    default: break;
    }
}

static int primary_of(const mlc_stage_t *op) { return op->shape.send_primary ? SEND : RECV; }

/* Where role r of chunk `j` (in pinned buffer s) lives for the sub-operation. */
static char *sub_ptr(const mlc_stage_t *op, int r, int s, size_t j)
{
    const role_t *ro = &op->role[r];
    if (!ro->user) return NULL;
    size_t es = op->args.esize;
    if (ro->derived) {
        int pr = primary_of(op);
        char *base = sub_ptr(op, pr, s, j);
        if (!op->chunked) return base + (ro->user - op->role[pr].user);
        return base + op->kblk * chunk_len(op, j) * es;
    }
    if (ro->pinned) return ro->pin[s];
    if (!op->chunked || ro->nblk > 1) return ro->user; /* one chunk: the caller's layout is the pinned buffer's */
    return ro->user + j * op->per * es;
}

static bool in_pinbuf(const mlc_stage_t *op, int r)
{
    const role_t *ro = &op->role[r];
    return ro->pinned || (ro->derived && op->role[r == SEND ? RECV : SEND].pinned);
}

/* ---- copies -------------------------------------------------------------------- */

mlc_status_t mlc_stage_copy(mlc_stage_t *op, bool device, void *dst, const void *src, size_t n)
{
    if (n == 0 || dst == src) return MLC_SUCCESS;
    if (!device) {
        memcpy(dst, src, n);
        return MLC_SUCCESS;
    }
    int e = op->rt->memcpy_async(dst, src, n, MLC_GPU_MEMCPY_DEFAULT, op->stream);
    if (e == MLC_GPU_SUCCESS) return MLC_SUCCESS;
    char buf[256];
    op->rt->get_last_error();
    return mlc_error(MLC_ERR_BACKEND, "rank %d: staging %s: %sMemcpyAsync(%p <- %p, %zu bytes): %s",
                     op->comm->rank, mlc_coll_name(op->coll), op->rt->prefix, dst, src, n,
                     mlc_gpurt_strerror(op->rt, e, buf, sizeof buf));
}

/*
 * Copy blocks [b0, b0+nb) of role r between the caller's buffer and pinned buffer s
 * for chunk j (to_pinbuf: in, else out). Staged whole: the `bytes` of the extent.
 */
static mlc_status_t copy_blocks(mlc_stage_t *op, int r, int s, size_t j, size_t b0, size_t nb, bool to_pinbuf,
                                size_t whole)
{
    role_t *ro = &op->role[r];
    char *pb = sub_ptr(op, r, s, j);
    if (!op->chunked) return to_pinbuf ? mlc_stage_copy(op, ro->device, pb, ro->user, whole) : mlc_stage_copy(op, ro->device, ro->user, pb, whole);
    size_t es = op->args.esize, len = chunk_len(op, j), lo = j * op->per, stride = op->count * es;
    if (ro->nblk == 1 && !ro->derived) b0 = 0;
    char *user = ro->user;
    if (ro->derived) user = op->role[primary_of(op)].user + op->kblk * stride;
    for (size_t b = b0; b < b0 + nb; b++) {
        char *u = user + b * stride + lo * es, *p = pb + b * len * es;
        mlc_status_t st = to_pinbuf ? mlc_stage_copy(op, ro->device, p, u, len * es) : mlc_stage_copy(op, ro->device, u, p, len * es);
        if (st != MLC_SUCCESS) return st;
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_stage_record(mlc_stage_t *op, pinbuf_t *s)
{
    if (!s->ev) {
        int e = op->rt->event_create_with_flags(&s->ev, MLC_GPU_EVENT_DISABLE_TIMING);
        if (e != MLC_GPU_SUCCESS) {
            char buf[256];
            s->ev = NULL;
            return mlc_error(MLC_ERR_BACKEND, "rank %d: %sEventCreateWithFlags: %s", op->comm->rank, op->rt->prefix,
                             mlc_gpurt_strerror(op->rt, e, buf, sizeof buf));
        }
    }
    int e = op->rt->event_record(s->ev, op->stream);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        return mlc_error(MLC_ERR_BACKEND, "rank %d: %sEventRecord: %s", op->comm->rank, op->rt->prefix,
                         mlc_gpurt_strerror(op->rt, e, buf, sizeof buf));
    }
    s->ev_live = true;
    return MLC_SUCCESS;
}

static mlc_status_t copy_in(mlc_stage_t *op, pinbuf_t *s)
{
    bool device = false;
    for (int r = SEND; r <= RECV; r++) {
        role_t *ro = &op->role[r];
        if (!ro->user || !ro->pinned) continue;
        bool input = r == SEND || (op->args.inplace && primary_of(op) == RECV);
        if (!input) continue;
        /* In place, the recv buffer holds the send data: only those blocks go in. */
        size_t b0 = 0, nb = ro->nblk, bytes = op->whole[r];
        if (r == RECV && op->chunked) {
            b0 = op->kblk;
            nb = op->role[SEND].nblk;
        }
        mlc_status_t st = copy_blocks(op, r, (int)(s - op->pinbufs), s->chunk, b0, nb, true, bytes);
        if (st != MLC_SUCCESS) return st;
        device |= ro->device;
    }
    return device ? mlc_stage_record(op, s) : MLC_SUCCESS;
}

static mlc_status_t copy_out(mlc_stage_t *op, pinbuf_t *s)
{
    role_t *ro = &op->role[RECV];
    if (!ro->user || !in_pinbuf(op, RECV)) return MLC_SUCCESS;
    size_t bytes = op->whole[RECV];
    /* A receive writes only what arrived. */
    if (op->coll == MLC_COLL_RECV || op->coll == MLC_COLL_SENDRECV)
        bytes = s->msg.bytes < bytes ? s->msg.bytes : bytes;
    mlc_status_t st = MLC_SUCCESS;
    const mlc_args_t *a = &op->args;
    const size_t *vc = op->coll == MLC_COLL_ALLTOALLV ? a->counts2 : a->counts;
    const size_t *vd = op->coll == MLC_COLL_ALLTOALLV ? a->displs2 : a->displs;
    if (op->coll == MLC_COLL_ALLGATHERV || op->coll == MLC_COLL_GATHERV || op->coll == MLC_COLL_ALLTOALLV) {
        /* Only the blocks: the gaps between them are not the call's to write. */
        char *pb = sub_ptr(op, RECV, (int)(s - op->pinbufs), s->chunk);
        for (int r = 0; r < op->comm->size && st == MLC_SUCCESS; r++)
            st = mlc_stage_copy(op, ro->device, ro->user + vd[r] * a->esize, pb + vd[r] * a->esize, vc[r] * a->esize);
    } else {
        st = copy_blocks(op, RECV, (int)(s - op->pinbufs), s->chunk, 0, ro->nblk, false, bytes);
    }
    if (st != MLC_SUCCESS) return st;
    return ro->device ? mlc_stage_record(op, s) : MLC_SUCCESS;
}

/* 1: the pinned buffer's copy is complete; 0: not yet (*gpu_wait set: the wait loop polls
 * the GPU); < 0: error (message set). */
int mlc_stage_copy_done(mlc_stage_t *op, pinbuf_t *s, int *gpu_wait)
{
    if (!s->ev_live) return 1;
    int e = op->rt->event_query(s->ev);
    if (e == MLC_GPU_ERROR_NOT_READY) {
        *gpu_wait = 1;
        return 0;
    }
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        op->rt->get_last_error();
        mlc_error(MLC_ERR_BACKEND, "rank %d: staging %s: %sEventQuery: %s", op->comm->rank,
                  mlc_coll_name(op->coll), op->rt->prefix, mlc_gpurt_strerror(op->rt, e, buf, sizeof buf));
        return -1;
    }
    s->ev_live = false;
    return 1;
}

/* ---- the pipeline ---------------------------------------------------------------- */

/* Start one of op's sub-operations (mlcomm's own: not profiled). */
mlc_status_t mlc_stage_start_internal(mlc_stage_t *op, mlc_coll_t coll, const mlc_args_t *a, size_t bytes,
                                   mlc_request_t **sub)
{
    int outer = mlc_comm_own_begin(op->comm, op->comm_call);
    mlc_status_t st = mlc_submit_plain(op->comm, coll, a, bytes, sub);
    mlc_comm_own_end(op->comm, outer);
    return st;
}

/* A finished sub-operation: hand over its status (and message), release it. */
mlc_status_t mlc_stage_take_sub(mlc_request_t **psub)
{
    mlc_request_t *sub = *psub;
    *psub = NULL;
    mlc_status_t st = mlc_request_wait_internal(sub); /* done: returns at once */
    mlc_request_release(sub);
    return st;
}

/* The caller's request is released with a sub-operation still in flight (its
 * communicator failed, or was freed): make sure no peer waits for it, then drop it. */
static void abandon_sub(mlc_stage_t *op, mlc_request_t **psub)
{
    mlc_comm_t *comm = op->comm;
    if (!*psub) return;
    if (!atomic_load_explicit(&(*psub)->done, memory_order_acquire) && !atomic_load(&comm->failed)) {
        mlc_comm_fail(comm, MLC_ERR_ABORTED, "rank %d: a staged %s was abandoned while in flight", comm->rank,
                      mlc_coll_name(op->coll));
        comm->be->abort(comm);
    }
    mlc_stage_take_sub(psub); /* returns at once on a failed communicator */
}

/* Pinned memory is reused only once the GPU no longer copies from or to it. */
void mlc_stage_drop_event(const mlc_stage_t *op, pinbuf_t *s)
{
    if (!s->ev) return;
    if (s->ev_live) op->rt->event_synchronize(s->ev);
    op->rt->event_destroy(s->ev);
    s->ev = NULL;
}

static void free_op(mlc_stage_t *op)
{
    mlc_pinned_pool_t *pool = NULL;
    for (int r = SEND; r <= RECV; r++)
        for (int i = 0; i < 2; i++) {
            if (!op->role[r].pin[i]) continue;
            if (!op->role[r].device) free(op->role[r].pin[i]);
            else if (pool || mlc_pinned_default(&pool) == MLC_SUCCESS) mlc_pinned_free(pool, op->role[r].pin[i]);
        }
    mlc_stage_ipc_free(op);
    free(op);
}

static mlc_status_t start_sub(mlc_stage_t *op, pinbuf_t *s)
{
    int si = (int)(s - op->pinbufs);
    mlc_args_t a = op->args;
    a.sendbuf = sub_ptr(op, SEND, si, s->chunk);
    a.recvbuf = sub_ptr(op, RECV, si, s->chunk);
    size_t bytes = op->req->bytes;
    if (op->chunked) {
        a.count = chunk_len(op, s->chunk);
        bytes = a.count * a.esize;
    }
    /* A receive's status says how much to copy out. */
    if (op->coll == MLC_COLL_RECV || op->coll == MLC_COLL_SENDRECV) a.msg_status = &s->msg;
    s->msg = (mlc_msg_status_t){0};
    return mlc_stage_start_internal(op, op->coll, &a, bytes, &s->sub);
}

/* The operation cannot go on: the peers would wait for chunks that never come, so abort. */
void mlc_stage_fail_op(mlc_stage_t *op, mlc_status_t st)
{
    mlc_comm_t *comm = op->comm;
    char msg[384];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    if (!atomic_load(&comm->failed)) {
        mlc_comm_fail(comm, MLC_ERR_ABORTED, "rank %d aborted: %s", comm->rank, msg);
        comm->be->abort(comm);
    }
    op->finished = true;
    mlc_request_complete(op->req, st, "%s", msg);
}

static void finish_sub(mlc_stage_t *op, pinbuf_t *s)
{
    mlc_status_t st = mlc_stage_take_sub(&s->sub);
    if (st != MLC_SUCCESS) {
        /* A failed chunk fails the call; the communicator's own rules (sticky
         * failure) already tell the peers when it was a collective. */
        op->finished = true;
        mlc_request_complete(op->req, st, "%s", mlc_last_error());
    }
}

/*
 * Sub-operations must be issued in the same order on every rank: a
 * collective's chunks after those of every earlier collective of the
 * communicator, a point-to-point message after earlier ones (MPI's
 * non-overtaking rule). The two classes do not wait for each other (a send
 * queued behind a collective could deadlock a correct program).
 */
static bool same_class(mlc_coll_t a, mlc_coll_t b) { return (a < MLC_COLL_SEND) == (b < MLC_COLL_SEND); }

static bool issued_all(const mlc_stage_t *op)
{
    if (op->finished) return true;
    return op->ipc_phase != IPC_OFF ? op->ipc_issued : op->next_start == op->nchunks;
}

bool mlc_stage_earlier_pending(const mlc_stage_t *op)
{
    for (const mlc_stage_t *o = mlc_devmem_of(op->comm)->active; o && o != op; o = o->next)
        if (same_class(o->coll, op->coll) && !issued_all(o)) return true;
    return false;
}

static bool class_busy(const mlc_devmem_t *d, mlc_coll_t coll)
{
    for (const mlc_stage_t *o = d->active; o; o = o->next)
        if (same_class(o->coll, coll) && !issued_all(o)) return true;
    return false;
}

/* A pinned buffer's copy: 1 complete, 0 not yet, -1 failed (the operation is failed). */
static int copied(mlc_stage_t *op, pinbuf_t *s, int *gpu_wait)
{
    int d = mlc_stage_copy_done(op, s, gpu_wait);
    if (d < 0) mlc_stage_fail_op(op, MLC_ERR_BACKEND);
    return d < 0 ? -1 : d;
}

/* Advance op as far as it goes now. Returns 1 if anything moved. */
static int advance(mlc_stage_t *op, int *gpu_wait)
{
    int moved = 0;
    while (op->ipc_phase != IPC_OFF && !op->finished) {
        int m = mlc_stage_ipc_advance(op, gpu_wait);
        moved |= m;
        if (!m) return moved;
    }
    for (bool again = true; again && !op->finished;) {
        again = false;
        while (op->next_chunk < op->nchunks) {
            pinbuf_t *s = &op->pinbufs[op->next_chunk % (size_t)op->npinbufs];
            if (s->state != S_FREE) break;
            s->chunk = op->next_chunk++;
            mlc_status_t st = copy_in(op, s);
            if (st != MLC_SUCCESS) {
                mlc_stage_fail_op(op, st);
                return 1;
            }
            s->state = S_IN;
            again = true;
        }
        for (int i = 0; i < op->npinbufs && !op->finished; i++) {
            /* Lower chunk first: sub-operations start in chunk order on every rank. */
            pinbuf_t *s = &op->pinbufs[(op->next_start + (size_t)i) % (size_t)op->npinbufs];
            mlc_status_t st;
            int d;
            switch (s->state) {
            case S_IN:
                if (s->chunk != op->next_start || mlc_stage_earlier_pending(op)) break;
                if ((d = copied(op, s, gpu_wait)) < 0) return 1;
                if (d == 0) break;
                st = start_sub(op, s);
                if (st != MLC_SUCCESS) {
                    mlc_stage_fail_op(op, st);
                    return 1;
                }
                op->next_start++;
                s->state = S_RUN;
                again = true;
                break;
            case S_RUN:
                if (!atomic_load_explicit(&s->sub->done, memory_order_acquire)) break;
                if (op->args.msg_status) *op->args.msg_status = s->msg;
                finish_sub(op, s);
                if (op->finished) return 1;
                st = copy_out(op, s);
                if (st != MLC_SUCCESS) {
                    mlc_stage_fail_op(op, st);
                    return 1;
                }
                s->state = S_OUT;
                again = true;
                break;
            case S_OUT:
                if ((d = copied(op, s, gpu_wait)) < 0) return 1;
                if (d == 0) break;
                s->state = S_FREE;
                op->ndone++;
                again = true;
                break;
            case S_FREE: break;
            }
        }
        moved |= again;
    }
    if (!op->finished && op->ndone == op->nchunks) {
        op->finished = true;
        mlc_request_complete(op->req, MLC_SUCCESS, NULL);
        moved = 1;
    }
    return moved;
}

mlc_status_t mlc_stage_progress(mlc_comm_t *comm, int *progressed, int *gpu_wait)
{
    const mlc_devmem_t *d = mlc_devmem_of(comm);
    for (mlc_stage_t *op = d ? d->active : NULL; op; op = op->next)
        if (!op->finished && advance(op, gpu_wait)) *progressed = 1;
    return MLC_SUCCESS;
}

/* ---- setup and teardown ------------------------------------------------------------ */

static void unlink_op(mlc_stage_t *op)
{
    mlc_stage_t **pp = &mlc_devmem_of(op->comm)->active;
    while (*pp && *pp != op) pp = &(*pp)->next;
    if (*pp) *pp = op->next;
}

static void destroy(mlc_stage_t *op)
{
    for (int i = 0; i < op->npinbufs; i++) {
        abandon_sub(op, &op->pinbufs[i].sub);
        mlc_stage_drop_event(op, &op->pinbufs[i]);
    }
    abandon_sub(op, &op->ipc_sub);
    mlc_stage_drop_event(op, &op->ipc_pinbuf);
    unlink_op(op);
    free_op(op);
}

const mlc_request_t *mlc_stage_current_sub(const mlc_request_t *req)
{
    const mlc_stage_t *op = req->decor;
    if (!op) return NULL;
    if (op->ipc_sub) return op->ipc_sub;
    for (int i = 0; i < op->npinbufs; i++)
        if (op->pinbufs[i].sub) return op->pinbufs[i].sub;
    return NULL;
}

void mlc_stage_release(mlc_request_t *req)
{
    mlc_stage_t *op = req->decor;
    req->decor = NULL;
    if (op) destroy(op);
}

void mlc_stage_abandon_all(mlc_comm_t *comm)
{
    const mlc_devmem_t *d = mlc_devmem_of(comm);
    while (d && d->active) {
        mlc_request_t *req = d->active->req;
        mlc_stage_release(req);
    }
}

/* Classify the buffers; decide chunking and pinbufs. as_is: one sub-operation on the caller's buffers. */
static mlc_status_t plan(mlc_stage_t *op, size_t chunk_bytes, bool as_is)
{
    mlc_comm_t *comm = op->comm;
    const mlc_args_t *a = &op->args;
    mlc_coll_t coll = op->coll;
    op->shape = shape_of(coll);
    op->role[SEND].user = (char *)a->sendbuf;
    op->role[RECV].user = a->recvbuf;
    op->chunked = op->shape.lay[SEND] != L_NONE && !as_is;
    whole_bytes(comm, coll, a, op->whole);
    size_t p = (size_t)comm->size, es = a->esize;
    bool blocks = op->chunked && (op->shape.lay[SEND] == L_BLOCKS || op->shape.lay[RECV] == L_BLOCKS);
    for (int r = SEND; r <= RECV; r++) op->role[r].nblk = op->chunked && op->shape.lay[r] == L_BLOCKS ? p : 1;
    op->count = a->count;
    op->per = a->count ? a->count : 1;
    if (op->chunked) {
        size_t per_bytes = chunk_bytes / (blocks ? p : 1);
        op->per = per_bytes / es ? per_bytes / es : 1;
        if (op->per > a->count && a->count) op->per = a->count;
    }
    op->nchunks = op->chunked && a->count ? (a->count + op->per - 1) / op->per : 1;
    op->npinbufs = op->nchunks > 1 ? 2 : 1;
    if (a->inplace) {
        int derived = op->shape.send_primary ? RECV : SEND;
        op->role[derived].derived = true;
        if (op->chunked && op->shape.lay[SEND] != op->shape.lay[RECV])
            op->kblk = (size_t)(op->shape.by_root ? a->root : comm->rank);
    }
    for (int r = SEND; r <= RECV && !as_is; r++) {
        role_t *ro = &op->role[r];
        if (!ro->user || ro->derived) continue;
        mlc_status_t st = mlc_devmem_is_device(comm, ro->user, &ro->device);
        if (st != MLC_SUCCESS) return st;
    }
    for (int r = SEND; r <= RECV; r++) {
        role_t *ro = &op->role[r];
        if (ro->derived) ro->device = op->role[r == SEND ? RECV : SEND].device;
    }
    return MLC_SUCCESS;
}

/* Every rank's buffers turned out to be host memory: one sub-operation on them, as they are. */
void mlc_stage_replan_as_is(mlc_stage_t *op)
{
    plan(op, mlc_devmem_of(op->comm)->chunk, true); /* as is: no classification, cannot fail */
    for (int r = SEND; r <= RECV; r++) op->role[r].pinned = false;
}

mlc_status_t mlc_stage_alloc_pinbufs(mlc_stage_t *op)
{
    mlc_pinned_pool_t *pool = NULL;
    for (int r = SEND; r <= RECV; r++) {
        role_t *ro = &op->role[r];
        if (!ro->pinned) continue;
        size_t bytes = op->chunked ? ro->nblk * op->per * op->args.esize : op->whole[r];
        if (!ro->device) {
            /* Host blocks packed for the backend: no GPU copy touches them, so no pinning
             * (which would need a context). */
            for (int i = 0; i < op->npinbufs; i++)
                if (!(ro->pin[i] = malloc(bytes ? bytes : 1)))
                    return mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory for staging (%zu bytes)",
                                     mlc_coll_name(op->coll), bytes);
            continue;
        }
        if (!pool) {
            mlc_status_t st = mlc_pinned_default(&pool);
            if (st != MLC_SUCCESS) return st;
        }
        for (int i = 0; i < op->npinbufs; i++) {
            mlc_status_t st = mlc_pinned_alloc(pool, bytes ? bytes : 1, (void **)&ro->pin[i]);
            if (st != MLC_SUCCESS) return st;
        }
    }
    return MLC_SUCCESS;
}

/*
 * A call that needs no staging, always started nonblocking and, when the
 * caller blocks, waited by our wait loop: other ranks may stage the same
 * call (their buffers are on the device) and run it as nonblocking
 * sub-operations, which MPI does not match with a blocking collective; and
 * the wait loop advances staged operations in flight, which a peer may need
 * to reach this call.
 */
static mlc_status_t plain(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                          mlc_request_t **out)
{
    if (out) return mlc_submit_plain(comm, coll, args, bytes, out);
    mlc_request_t *req;
    mlc_status_t st = mlc_submit_plain(comm, coll, args, bytes, &req);
    if (st != MLC_SUCCESS) return st;
    st = mlc_request_wait_internal(req);
    mlc_request_release(req);
    return st;
}

/*
 * Device buffers handed to the backend as they are (a CUDA-aware MPI) are read
 * by it at once, from the host's point of view: the work the application
 * queued on the communicator's stream (or the legacy stream) must be done.
 */
static mlc_status_t sync_for_backend(mlc_comm_t *comm, const mlc_args_t *args)
{
    bool dev_send = false, dev_recv = false;
    mlc_status_t st = mlc_devmem_is_device(comm, args->sendbuf, &dev_send);
    if (st == MLC_SUCCESS) st = mlc_devmem_is_device(comm, args->recvbuf, &dev_recv);
    if (st == MLC_SUCCESS && (dev_send || dev_recv)) st = mlc_devmem_sync(comm);
    return st;
}

static mlc_status_t start(mlc_comm_t *comm, mlc_stage_t *op, size_t bytes, mlc_request_t **out, bool ipc);

mlc_status_t mlc_stage_submit(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                              mlc_request_t **out)
{
    mlc_devmem_t *dev = mlc_devmem_of(comm);
    /* Behind a staged operation that has not issued everything, a call waits its turn. */
    bool busy = class_busy(dev, coll), as_is = coll == MLC_COLL_BARRIER;
    if (!as_is && dev->direct && comm->be->device_direct) {
        mlc_request_t probe;
        memset(&probe, 0, sizeof probe);
        probe.comm = comm;
        probe.coll = coll;
        probe.args = *args;
        probe.algo = mlc_request_algo(&probe);
        as_is = comm->be->device_direct(&probe);
        if (as_is) {
            mlc_status_t st = sync_for_backend(comm, args);
            if (st != MLC_SUCCESS) return st;
        }
    }
    if (as_is && !busy) return plain(comm, coll, args, bytes, out);
    mlc_stage_t *op = calloc(1, sizeof *op);
    if (!op) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory for staging", mlc_coll_name(coll));
    op->comm = comm;
    op->coll = coll;
    op->rt = dev->rt;
    op->args = *args;
    mlc_status_t st = plan(op, dev->chunk, as_is);
    bool any_device = op->role[SEND].device || op->role[RECV].device;
    /* CUDA IPC is tried on every rank alike (host buffers on one rank make all of them stage). */
    bool ipc = dev->ipc && !as_is && mlc_stage_ipc_wanted(coll, args) && args->count > 0;
    if (st != MLC_SUCCESS || (op->nchunks == 1 && !any_device && !busy && !ipc)) {
        free(op);
        return st != MLC_SUCCESS ? st : plain(comm, coll, args, bytes, out);
    }
    if (!any_device || dev->device_seen) return start(comm, op, bytes, out, ipc);
    /* The first device buffer: from now on the communicator's device is made current
     * (staged.c's entry points); for the rest of this call, here. */
    dev->device_seen = true;
    int prev = mlc_devmem_enter(comm);
    st = start(comm, op, bytes, out, ipc);
    mlc_devmem_leave(comm, prev);
    return st;
}

/* Start the planned operation op (then wait for it when out is NULL). */
static mlc_status_t start(mlc_comm_t *comm, mlc_stage_t *op, size_t bytes, mlc_request_t **out, bool ipc)
{
    mlc_devmem_t *dev = mlc_devmem_of(comm);
    mlc_coll_t coll = op->coll;
    const mlc_args_t *args = &op->args;
    bool any_device = op->role[SEND].device || op->role[RECV].device;
    mlc_status_t st = MLC_SUCCESS;
    for (int r = SEND; r <= RECV; r++) {
        role_t *ro = &op->role[r];
        ro->pinned = ro->user && !ro->derived && (ro->device || (op->nchunks > 1 && ro->nblk > 1));
    }
    /* A rank whose buffers are all host memory makes no GPU call (no stream, no context). */
    if (any_device) st = mlc_devmem_stream(comm, &op->stream);
    if (st == MLC_SUCCESS && ipc) {
        st = mlc_stage_ipc_prepare(op);
    } else if (st == MLC_SUCCESS) {
        st = mlc_stage_alloc_pinbufs(op);
    }
    mlc_request_t *req = st == MLC_SUCCESS ? mlc_request_alloc(comm) : NULL;
    if (st == MLC_SUCCESS && !req) st = mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory for a request", mlc_coll_name(coll));
    if (st != MLC_SUCCESS) {
        /* Nothing was started: this rank simply did not join (as with any argument error). */
        free_op(op);
        return st;
    }
    req->coll = coll;
    req->args = *args;
    req->bytes = bytes;
    req->blocking = out == NULL;
    req->internal = comm->internal_depth > 0;
    op->comm_call = comm->comm_call;
    if (comm->prof) req->t_start = mlc_now();
    req->decor = op;
    op->req = req;
    op->next = NULL;
    mlc_stage_t **tail = &dev->active;
    while (*tail) tail = &(*tail)->next;
    *tail = op;
    MLC_DEBUG("rank %d: %s staged: %zu chunk(s) of %zu elements, send %s, recv %s", comm->rank, mlc_coll_name(coll),
              op->nchunks, op->per, op->role[SEND].device ? "device" : "host", op->role[RECV].device ? "device" : "host");
    int gpu_wait = 0;
    advance(op, &gpu_wait);
    if (out) {
        *out = req;
        return MLC_SUCCESS;
    }
    st = mlc_request_wait_internal(req);
    mlc_request_release(req);
    return st;
}
