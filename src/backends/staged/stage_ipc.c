/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA IPC for device buffers between the shm backend's processes (the
 * stage layer's other path; stage.c stages through pinned memory). Every
 * rank first sends its peers one record per buffer they will read (ipc.h:
 * handle and offset); when every rank's records are usable, data moves
 * without the shm backend:
 *
 * - broadcast, allgather, alltoall, gather, scatter: each rank copies what
 *   it receives straight from the peers' device memory (device to device,
 *   one cudaMemcpyAsync per block);
 * - allreduce and reduce_scatter: rank r owns block r. It pulls block r of
 *   every rank's sendbuf into pinned memory (device to host, in sub-chunks,
 *   two pinbufs, so the next pull overlaps the reduction), reduces it on the
 *   host in rank order (user ops and avg too) and pushes the result into
 *   its recvbuf. Allreduce then waits for every rank (a barrier) and copies
 *   the other ranks' reduced blocks from their recvbufs, device to device.
 *   No kernel is compiled or launched: the arithmetic stays on the host,
 *   while every byte a rank does not reduce itself moves device to device.
 *
 * Peers read this rank's buffers on their own streams, which know nothing
 * of the kernels still producing the data on this rank's stream: a rank
 * publishes its records only once the work queued on the communicator's
 * stream (and, through it, on the legacy default stream) before the call is
 * done (an event, polled).
 *
 * A closing barrier keeps every buffer in use until no peer reads it. If
 * any rank's buffers cannot take part (host memory, memory that cannot be
 * exported, no pinned memory), every rank learns it from the records and
 * the call is staged instead, or runs as it is when no rank has device
 * buffers. Whether the processes can map each other's memory at all is
 * probed once per communicator, at the first call where every rank has
 * device buffers (probe_start: nothing is allocated before one is seen);
 * when it fails, that call and every later one are staged. A mapping that
 * still fails later fails the call before any copy is queued.
 */
#include <stdlib.h>
#include <string.h>
#include "base/dtype.h"
#include "base/error.h"
#include "base/log.h"
#include "base/op_failure.h"
#include "devrt/pinned.h"
#include "stage_impl.h"

bool mlc_stage_ipc_wanted(mlc_coll_t coll, const mlc_args_t *a)
{
    switch (coll) {
    case MLC_COLL_BROADCAST:
    case MLC_COLL_ALLGATHER:
    case MLC_COLL_GATHER:
    case MLC_COLL_SCATTER:
    case MLC_COLL_ALLREDUCE:
    case MLC_COLL_REDUCE_SCATTER: return true;
    case MLC_COLL_ALLTOALL: return !a->inplace; /* peers would read what this rank overwrites */
    default: return false;
    }
}

static bool reduces(const mlc_stage_t *op)
{
    return op->coll == MLC_COLL_ALLREDUCE || op->coll == MLC_COLL_REDUCE_SCATTER;
}

/* Allreduce: rank q's block of count elements, as even as integers allow. */
static void block_of(size_t count, int p, int q, size_t *lo, size_t *len)
{
    size_t base = count / (size_t)p, extra = count % (size_t)p, uq = (size_t)q;
    *lo = base * uq + (uq < extra ? uq : extra);
    *len = base + (uq < extra ? 1 : 0);
}

/* The buffer peers read from this rank (NULL: none). */
static const char *ipc_source(const mlc_stage_t *op)
{
    const mlc_args_t *a = &op->args;
    if (op->coll == MLC_COLL_BROADCAST || op->coll == MLC_COLL_SCATTER)
        return op->comm->rank == a->root ? a->sendbuf : NULL;
    return a->sendbuf;
}

/* Export ptr as record rec; false when this rank's buffer cannot be read by peers. */
static bool export_buf(mlc_stage_t *op, const char *ptr, bool device, mlc_ipc_rec_t *rec)
{
    if (!ptr) return true;
    if (!device) return false;
    if (mlc_ipc_export(op->rt, ptr, rec) == MLC_SUCCESS) return true;
    /* Memory that cannot be exported (e.g. from a stream-ordered pool) is staged. */
    MLC_DEBUG("rank %d: %s staged: %s", op->comm->rank, mlc_coll_name(op->coll), mlc_last_error());
    mlc_error_clear();
    return false;
}

/* The probe's record: a small allocation of this rank's, exported (ok = 0 when it cannot be). */
static void probe_export(mlc_stage_t *op, mlc_ipc_rec_t *rec)
{
    const mlc_gpurt_t *rt = op->rt;
    int e = rt->malloc(&op->probe_mem, 256);
    rec->ok = 0;
    if (e != MLC_GPU_SUCCESS) {
        rt->get_last_error();
        op->probe_mem = NULL;
        MLC_DEBUG("rank %d: %sMalloc for the IPC probe failed", op->comm->rank, rt->prefix);
    } else if (mlc_ipc_export(rt, op->probe_mem, rec) != MLC_SUCCESS) {
        MLC_DEBUG("rank %d: IPC probe: %s", op->comm->rank, mlc_last_error());
        mlc_error_clear();
        rec->ok = 0;
    }
}

static void probe_free(mlc_stage_t *op)
{
    if (op->probe_mem && op->rt->free(op->probe_mem) != MLC_GPU_SUCCESS) op->rt->get_last_error();
    op->probe_mem = NULL;
}

/* Reductions: this rank's block and its two pinned buffers; false when none can be had. */
static bool prepare_reduce(mlc_stage_t *op)
{
    const mlc_args_t *a = &op->args;
    mlc_comm_t *comm = op->comm;
    size_t p = (size_t)comm->size, es = a->esize;
    if (!op->role[SEND].device || !op->role[RECV].device) return false;
    if (op->coll == MLC_COLL_ALLREDUCE) {
        block_of(a->count, comm->size, comm->rank, &op->red_lo, &op->red_len);
    } else {
        op->red_lo = (size_t)comm->rank * a->count;
        op->red_len = a->count;
    }
    size_t sub = mlc_devmem_of(comm)->chunk / (p * es);
    if (sub == 0) sub = 1;
    if (sub > op->red_len) sub = op->red_len;
    op->red_sub = sub;
    op->red_nsub = op->red_len ? (op->red_len + sub - 1) / sub : 0;
    if (op->red_nsub == 0) return true;
    mlc_pinned_pool_t *pool;
    mlc_status_t st = mlc_pinned_default(&pool);
    for (int i = 0; i < 2 && st == MLC_SUCCESS; i++) st = mlc_pinned_alloc(pool, p * sub * es, (void **)&op->red_pin[i]);
    if (st == MLC_SUCCESS) return true;
    MLC_DEBUG("rank %d: %s staged: %s", comm->rank, mlc_coll_name(op->coll), mlc_last_error());
    mlc_error_clear();
    return false;
}

mlc_status_t mlc_stage_ipc_prepare(mlc_stage_t *op)
{
    mlc_comm_t *comm = op->comm;
    op->ipc_phase = IPC_EXCHANGE;
    op->ipc_all = calloc(IPC_NRECS * (size_t)comm->size, sizeof *op->ipc_all);
    if (!op->ipc_all) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory", mlc_coll_name(op->coll));
    mlc_ipc_rec_t *mine = op->ipc_mine;
    memset(mine, 0, sizeof op->ipc_mine);
    for (int k = 0; k < IPC_NRECS; k++) mine[k].ok = 1;
    bool ok;
    if (reduces(op)) {
        ok = prepare_reduce(op) && export_buf(op, op->args.sendbuf, true, &mine[0]);
        if (ok && op->coll == MLC_COLL_ALLREDUCE) ok = export_buf(op, op->args.recvbuf, true, &mine[1]);
    } else {
        const char *src = ipc_source(op);
        int sr = op->role[SEND].user == src ? SEND : RECV;
        ok = export_buf(op, src, src && op->role[sr].device, &mine[0]);
    }
    /* If no rank has device buffers, the call runs as it is (see the exchange). */
    mine[0].reserved = op->role[SEND].device || op->role[RECV].device;
    /* A rank with host buffers only makes no GPU call: the call is staged. */
    if (!ok || !mine[0].reserved) mine[0].ok = 0;
    if (mine[0].ok && !mlc_devmem_of(comm)->ipc_probed) probe_export(op, &mine[REC_PROBE]);
    /* What the stream still has to do before peers may read: marked now, published once done. */
    if (mine[0].reserved) return mlc_stage_record(op, &op->ipc_pinbuf);
    return MLC_SUCCESS;
}

/* Does this rank read rank q's buffer `which` (0: the source, 1: allreduce's recvbuf)? */
static bool reads(const mlc_stage_t *op, int q, int which)
{
    const mlc_args_t *a = &op->args;
    int me = op->comm->rank;
    if (which == 1) return op->coll == MLC_COLL_ALLREDUCE;
    switch (op->coll) {
    case MLC_COLL_BROADCAST:
    case MLC_COLL_SCATTER: return q == a->root && !(me == a->root && a->inplace);
    case MLC_COLL_GATHER: return me == a->root;
    default: return true;
    }
}

/* Map every peer buffer this rank will read before any copy is queued: a
 * mapping that fails then fails the call with nothing in flight. */
static mlc_status_t resolve(mlc_stage_t *op)
{
    int p = op->comm->size, me = op->comm->rank;
    op->ipc_ptr = calloc(2 * (size_t)p, sizeof *op->ipc_ptr);
    op->ipc_held = calloc(2 * (size_t)p, sizeof *op->ipc_held);
    op->ipc_nheld = op->ipc_held ? 2 * p : 0;
    if (!op->ipc_ptr || !op->ipc_held) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory", mlc_coll_name(op->coll));
    for (int q = 0; q < p; q++)
        for (int which = 0; which < 2; which++) {
            if (!reads(op, q, which)) continue;
            if (q == me) {
                op->ipc_ptr[2 * q + which] = which ? op->args.recvbuf : op->args.sendbuf;
                continue;
            }
            char *ptr;
            mlc_status_t st = mlc_ipc_open(op->rt, q, &op->ipc_all[IPC_NRECS * q + which], &ptr,
                                           &op->ipc_held[2 * q + which]);
            if (st != MLC_SUCCESS) return st;
            op->ipc_ptr[2 * q + which] = ptr;
        }
    return MLC_SUCCESS;
}

/* Where rank q's buffer `which` is mapped in this process (resolved beforehand). */
static const char *ipc_at(const mlc_stage_t *op, int q, int which) { return op->ipc_ptr[2 * q + which]; }

/* A copy failed after others were queued: the pinned buffer's event must cover them
 * before its memory can be released (best effort: the call has failed anyway). */
static mlc_status_t fail_after_copies(mlc_stage_t *op, pinbuf_t *s, mlc_status_t st)
{
    char msg[384];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    mlc_stage_record(op, s);
    mlc_error(st, "%s", msg);
    return st;
}

/* Every rank's records are here: copy straight from the peers' device memory. */
static mlc_status_t ipc_copy(mlc_stage_t *op)
{
    const mlc_args_t *a = &op->args;
    int me = op->comm->rank, p = op->comm->size;
    size_t es = a->esize, n = a->count * es;
    char *recv = a->recvbuf;
    mlc_status_t st = MLC_SUCCESS;
    switch (op->coll) {
    case MLC_COLL_BROADCAST:
        if (reads(op, a->root, 0)) st = mlc_stage_copy(op, true, recv, ipc_at(op, a->root, 0), n);
        break;
    case MLC_COLL_SCATTER:
        if (reads(op, a->root, 0)) st = mlc_stage_copy(op, true, recv, ipc_at(op, a->root, 0) + (size_t)me * n, n);
        break;
    case MLC_COLL_GATHER:
        if (me != a->root) break;
        /* the root gathers like an allgather */
        __attribute__((fallthrough));
    case MLC_COLL_ALLGATHER:
        for (int q = 0; q < p && st == MLC_SUCCESS; q++) {
            if (q == me && a->inplace) continue;
            st = mlc_stage_copy(op, true, recv + (size_t)q * n, ipc_at(op, q, 0), n);
        }
        break;
    case MLC_COLL_ALLTOALL:
        for (int q = 0; q < p && st == MLC_SUCCESS; q++)
            st = mlc_stage_copy(op, true, recv + (size_t)q * n, ipc_at(op, q, 0) + (size_t)me * n, n);
        break;
    case MLC_COLL_ALLREDUCE:
        /* the other ranks' reduced blocks, from their recvbufs */
        for (int q = 0; q < p && st == MLC_SUCCESS; q++) {
            size_t lo, len;
            block_of(a->count, p, q, &lo, &len);
            if (q == me || len == 0) continue;
            st = mlc_stage_copy(op, true, recv + lo * es, ipc_at(op, q, 1) + lo * es, len * es);
        }
        break;
    default: break;
    }
    if (st != MLC_SUCCESS) return fail_after_copies(op, &op->ipc_pinbuf, st);
    return mlc_stage_record(op, &op->ipc_pinbuf);
}

/* Pull sub-chunk k of this rank's block from every rank into pinned buffer k % 2. */
static mlc_status_t pull(mlc_stage_t *op, size_t k)
{
    int p = op->comm->size;
    size_t es = op->args.esize, off = k * op->red_sub;
    size_t len = op->red_len - off < op->red_sub ? op->red_len - off : op->red_sub;
    char *pb = op->red_pin[k % 2];
    mlc_status_t st = MLC_SUCCESS;
    for (int q = 0; q < p && st == MLC_SUCCESS; q++)
        st = mlc_stage_copy(op, true, pb + (size_t)q * op->red_sub * es, ipc_at(op, q, 0) + (op->red_lo + off) * es,
                            len * es);
    if (st != MLC_SUCCESS) return fail_after_copies(op, &op->red_pinbuf[k % 2], st);
    return mlc_stage_record(op, &op->red_pinbuf[k % 2]);
}

/* The user op failed (mlc_op_fail) reducing this rank's block, which peers
 * copy after the closing barrier: fail the communicator here and post it
 * to them before anything is pushed, so their barrier fails instead. */
static mlc_status_t user_op_failed(mlc_stage_t *op, const char *why)
{
    mlc_comm_t *comm = op->comm;
    char note[384];
    snprintf(note, sizeof note, "rank %d's user op failed in %s: %.300s", comm->rank, mlc_coll_name(op->coll), why);
    mlc_status_t st = mlc_comm_fail(comm, MLC_ERR_USER_OP, "rank %d: its user op failed: %.300s", comm->rank, why);
    if (comm->be->post_failure) comm->be->post_failure(comm, MLC_ERR_USER_OP, note);
    return mlc_error(st, "%s", comm->fail_msg);
}

/* Reduce the pulled sub-chunk k (rank order: x0 op (x1 op (... op x_{p-1}))), then push it. */
static mlc_status_t reduce_push(mlc_stage_t *op, size_t k)
{
    const mlc_args_t *a = &op->args;
    int p = op->comm->size;
    size_t es = a->esize, off = k * op->red_sub, stride = op->red_sub * es;
    size_t len = op->red_len - off < op->red_sub ? op->red_len - off : op->red_sub;
    char *pb = op->red_pin[k % 2], *acc = pb + (size_t)(p - 1) * stride;
    mlc_op_scope_t scope = {0};
    mlc_op_scope_enter(&scope);
    for (int q = p - 2; q >= 0; q--) mlc_reduce_apply(pb + (size_t)q * stride, acc, len, a->dtype, a->op);
    mlc_op_scope_leave(&scope);
    if (scope.failed) return user_op_failed(op, scope.why);
    if (a->op == MLC_AVG) mlc_reduce_divide(acc, len, a->dtype, p);
    size_t dst = op->coll == MLC_COLL_ALLREDUCE ? op->red_lo + off : off;
    /* The pinned buffer's next pull is queued behind this push on the same stream; the
     * event keeps the pinned buffer's memory until the push is done if the call ends early. */
    mlc_status_t st = mlc_stage_copy(op, true, (char *)a->recvbuf + dst * es, acc, len * es);
    return st == MLC_SUCCESS ? mlc_stage_record(op, &op->red_pinbuf[k % 2]) : st;
}

/* Pulls ahead (two pinbufs), reductions as pulls complete. 1 if anything moved. */
static int reduce_step(mlc_stage_t *op, int *gpu_wait, mlc_status_t *st)
{
    int moved = 0;
    for (;;) {
        while (op->red_pulled < op->red_nsub && op->red_pulled - op->red_reduced < 2) {
            if ((*st = pull(op, op->red_pulled)) != MLC_SUCCESS) return 1;
            op->red_pulled++;
            moved = 1;
        }
        if (op->red_reduced == op->red_pulled) return moved;
        int d = mlc_stage_copy_done(op, &op->red_pinbuf[op->red_reduced % 2], gpu_wait);
        if (d < 0) {
            *st = MLC_ERR_BACKEND;
            return 1;
        }
        if (d == 0) return moved;
        if ((*st = reduce_push(op, op->red_reduced)) != MLC_SUCCESS) return 1;
        op->red_reduced++;
        moved = 1;
    }
}

static mlc_status_t barrier(mlc_stage_t *op)
{
    mlc_args_t b = {.dtype = MLC_UINT8, .esize = 1};
    return mlc_stage_start_internal(op, MLC_COLL_BARRIER, &b, 0, &op->ipc_sub);
}

static bool sub_done(const mlc_stage_t *op)
{
    return atomic_load_explicit(&op->ipc_sub->done, memory_order_acquire);
}

/* The call goes on staged through pinned memory (every rank decided alike). */
static mlc_status_t stage_instead(mlc_stage_t *op)
{
    op->ipc_phase = IPC_OFF;
    return mlc_stage_alloc_pinbufs(op);
}

/* Every rank's records are usable and the communicator's probe has succeeded: map and copy. */
static mlc_status_t ipc_start(mlc_stage_t *op)
{
    mlc_status_t st = resolve(op);
    if (st != MLC_SUCCESS) return st;
    if (reduces(op)) {
        op->ipc_phase = IPC_REDUCE;
        return MLC_SUCCESS;
    }
    op->ipc_phase = IPC_COPY;
    return ipc_copy(op);
}

/*
 * The first call where every rank has device buffers probes whether the processes
 * can map each other's memory at all: each maps every peer's probe allocation (sent
 * with the records), then one MAX allreduce tells every rank whether any failed.
 */
static mlc_status_t probe_start(mlc_stage_t *op)
{
    mlc_comm_t *comm = op->comm;
    mlc_ipc_rec_t *recs = malloc((size_t)comm->size * sizeof *recs);
    if (!recs) return mlc_error(MLC_ERR_NO_MEMORY, "rank %d: out of memory for the IPC probe", comm->rank);
    for (int q = 0; q < comm->size; q++) recs[q] = op->ipc_all[IPC_NRECS * q + REC_PROBE];
    char why[384];
    op->probe_bad = !mlc_ipc_probe_map(comm, op->rt, recs, why, sizeof why);
    free(recs);
    if (op->probe_bad) MLC_INFO("rank %d: no %s IPC: %s", comm->rank, op->rt->name, why);
    op->ipc_phase = IPC_PROBE;
    mlc_args_t x = {.sendbuf = &op->probe_bad, .recvbuf = &op->probe_any_bad, .count = 1, .dtype = MLC_INT32,
                    .esize = sizeof(int32_t), .op = MLC_MAX};
    return mlc_stage_start_internal(op, MLC_COLL_ALLREDUCE, &x, sizeof(int32_t), &op->ipc_sub);
}

int mlc_stage_ipc_advance(mlc_stage_t *op, int *gpu_wait)
{
    mlc_status_t st = MLC_SUCCESS;
    int d;
    switch (op->ipc_phase) {
    case IPC_EXCHANGE:
        if (!op->ipc_sub) {
            if (mlc_stage_earlier_pending(op)) return 0;
            if ((d = mlc_stage_copy_done(op, &op->ipc_pinbuf, gpu_wait)) == 0) return 0;
            if (d < 0) {
                st = MLC_ERR_BACKEND;
                break;
            }
            mlc_args_t x = {.sendbuf = op->ipc_mine, .recvbuf = op->ipc_all, .count = sizeof op->ipc_mine,
                            .dtype = MLC_UINT8, .esize = 1};
            st = mlc_stage_start_internal(op, MLC_COLL_ALLGATHER, &x, x.count, &op->ipc_sub);
            break;
        }
        if (!sub_done(op)) return 0;
        st = mlc_stage_take_sub(&op->ipc_sub);
        if (st != MLC_SUCCESS) break;
        bool all_ok = true, any_device = false;
        for (int q = 0; q < op->comm->size; q++) {
            const mlc_ipc_rec_t *r = &op->ipc_all[IPC_NRECS * q];
            all_ok &= r[REC_SOURCE].ok == 1 && r[REC_RECV].ok == 1;
            any_device |= r[REC_SOURCE].reserved != 0;
        }
        if (!all_ok) {
            /* Some rank's buffers rule IPC out: every rank saw it, every rank stages,
             * or, when no rank has device buffers, runs the call as it is. */
            probe_free(op); /* no peer maps it */
            if (!any_device) mlc_stage_replan_as_is(op);
            st = stage_instead(op);
            break;
        }
        if (!mlc_devmem_of(op->comm)->ipc_probed) {
            st = probe_start(op);
            break;
        }
        st = ipc_start(op);
        break;
    case IPC_PROBE:
        if (!sub_done(op)) return 0;
        st = mlc_stage_take_sub(&op->ipc_sub);
        /* Every rank has closed its mappings of ours before anyone frees: the allreduce orders it. */
        probe_free(op);
        if (st != MLC_SUCCESS) break;
        if (op->probe_any_bad) {
            /* The same answer on every rank: this call and every later one are staged. */
            if (!op->probe_bad)
                MLC_INFO("rank %d: no %s IPC: another rank could not map this rank's device memory",
                         op->comm->rank, op->rt->name);
            mlc_devmem_of(op->comm)->ipc = false;
            st = stage_instead(op);
            break;
        }
        mlc_devmem_of(op->comm)->ipc_probed = true;
        st = ipc_start(op);
        break;
    case IPC_REDUCE: {
        int moved = reduce_step(op, gpu_wait, &st);
        if (st == MLC_SUCCESS && op->red_reduced < op->red_nsub) return moved;
        if (st == MLC_SUCCESS) st = mlc_stage_record(op, &op->ipc_pinbuf);
        /* reduce_scatter is done once its pushes are; allreduce first gathers the other blocks */
        op->ipc_phase = op->coll == MLC_COLL_ALLREDUCE ? IPC_HALF : IPC_COPY;
        break;
    }
    case IPC_HALF:
        if ((d = mlc_stage_copy_done(op, &op->ipc_pinbuf, gpu_wait)) == 0) return 0;
        if (d < 0) st = MLC_ERR_BACKEND;
        /* every rank's block is reduced and in its recvbuf once all are here */
        else st = barrier(op);
        op->ipc_phase = IPC_GATHER;
        break;
    case IPC_GATHER:
        if (!sub_done(op)) return 0;
        st = mlc_stage_take_sub(&op->ipc_sub);
        if (st == MLC_SUCCESS) st = ipc_copy(op);
        op->ipc_phase = IPC_COPY;
        break;
    case IPC_COPY:
        if ((d = mlc_stage_copy_done(op, &op->ipc_pinbuf, gpu_wait)) == 0) return 0;
        if (d < 0) {
            st = MLC_ERR_BACKEND;
            break;
        }
        /* Nobody may reuse a buffer a peer still reads: close with a barrier. */
        st = barrier(op);
        op->ipc_issued = st == MLC_SUCCESS;
        op->ipc_phase = IPC_BARRIER;
        break;
    case IPC_BARRIER:
        if (!sub_done(op)) return 0;
        st = mlc_stage_take_sub(&op->ipc_sub);
        if (st == MLC_SUCCESS) {
            op->finished = true;
            mlc_request_complete(op->req, MLC_SUCCESS, NULL);
        }
        break;
    default: return 0;
    }
    if (st != MLC_SUCCESS) mlc_stage_fail_op(op, st);
    return 1;
}

void mlc_stage_ipc_free(mlc_stage_t *op)
{
    mlc_pinned_pool_t *pool;
    for (int i = 0; i < 2; i++) mlc_stage_drop_event(op, &op->red_pinbuf[i]);
    if (mlc_pinned_default(&pool) == MLC_SUCCESS)
        for (int i = 0; i < 2; i++)
            if (op->red_pin[i]) mlc_pinned_free(pool, op->red_pin[i]);
    for (int i = 0; i < op->ipc_nheld; i++) mlc_ipc_release(op->ipc_held[i]);
    free(op->ipc_held);
    probe_free(op);
    free(op->ipc_all);
    free(op->ipc_ptr);
}
