/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The portable executor: one packed message per neighbour rank, so it works
 * on every backend.
 *
 * Host backends: nonblocking mlc_send / mlc_recv; a message made of one
 * contiguous segment is sent from / received into the array itself (no
 * packing).
 *
 * Device-native backends (nccl, rccl) have no tags and progress
 * point-to-point traffic only when it is grouped: every message of a run is
 * one mlc_alltoallv over the packed buffers (zero counts to the ranks that
 * are no neighbours), which those backends issue as one group of
 * ncclSend / ncclRecv.
 *
 * Views in device memory (devcopy.h) are packed and unpacked through the GPU
 * runtime on the executor's stream, never touched by the host. The packed
 * buffers are then pinned host memory (host backends: what they send as it
 * is) or device memory (device-native backends).
 *
 * A wait for the device copies that fails (MLC_TIMEOUT) leaves them queued:
 * the GPU may still write the packed buffers and the views, or read them,
 * at any later time. The exchange's communicator is then failed (no run
 * reuses the buffers) and its buffers are never freed: they are left
 * allocated for the life of the process rather than handed back to the
 * pinned pool or the runtime while copies may still land in them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/error.h"
#include "base/log.h"
#include "core/backend.h"
#include "core/comm.h"
#include "devcopy.h"
#include "devrt/gpuwait.h"
#include "devrt/pinned.h"
#include "executor.h"

/* Where the packed buffers live. */
typedef enum arena_kind { ARENA_HEAP, ARENA_PINNED, ARENA_DEVICE } arena_kind_t;

typedef struct p2p_state {
    mlc_comm_t *comm;
    const mlc_gpurt_t *rt; /* NULL: host views only */
    void *stream;          /* device copies (with rt) */
    bool grouped;          /* one mlc_alltoallv per run (device-native backends) */
    arena_kind_t arena;
    mlc_pinned_pool_t *pool; /* ARENA_PINNED */
    unsigned char *send_arena, *recv_arena;
    size_t *v;             /* grouped: sendcounts, sdispls, recvcounts, rdispls (4 x ranks) */
    bool copies_pending;   /* device copies enqueued since the last wait on the stream */
    bool copies_stuck;     /* a wait for them failed: they may still run (see the top) */
    double timeout_s;      /* the communicator's MLC_TIMEOUT (release runs after it is freed) */
    mlc_request_t **reqs;  /* receives first, then sends */
    size_t nreqs;          /* posted in the current exchange */
} p2p_state_t;

static int p2p_applies(mlc_comm_t *comm) { return comm != NULL; }

/* A peer whose message is a single contiguous segment needs no arena
 * (grouped runs pack everything: one send and one receive buffer). */
static int direct_segment(const p2p_state_t *s, const mlc_xpeer_t *p, const mlc_xseg_t *segs)
{
    return !s->grouped && p->nseg == 1 && segs[p->first_seg].copy.ndim == 1;
}

static mlc_status_t arena_alloc(p2p_state_t *s, size_t bytes, unsigned char **out)
{
    *out = NULL;
    /* Grouped runs always pass two distinct buffers (never "in place"). */
    if (bytes == 0 && !s->grouped) return MLC_SUCCESS;
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes == 0) bytes = 64;
    void *p = NULL;
    switch (s->arena) {
    case ARENA_DEVICE: {
        int e = s->rt->malloc(&p, bytes);
        if (e) {
            s->rt->get_last_error();
            return mlc_error(MLC_ERR_NO_MEMORY, "exchange p2p: %sMalloc of %zu bytes of message "
                             "buffers failed (error %d)", s->rt->prefix, bytes, e);
        }
        break;
    }
    case ARENA_PINNED: {
        mlc_status_t st = mlc_pinned_alloc(s->pool, bytes, &p);
        if (st) return st;
        break;
    }
    case ARENA_HEAP:
        p = aligned_alloc(64, bytes);
        if (!p) return mlc_error(MLC_ERR_NO_MEMORY, "exchange p2p: %zu bytes of message buffers", bytes);
        break;
    }
    *out = p;
    return MLC_SUCCESS;
}

static void arena_free(p2p_state_t *s, unsigned char *p)
{
    if (!p) return;
    switch (s->arena) {
    case ARENA_DEVICE: s->rt->free(p); break;
    case ARENA_PINNED: mlc_pinned_free(s->pool, p); break;
    case ARENA_HEAP: free(p); break;
    }
}

static void p2p_release(void *state)
{
    p2p_state_t *s = state;
    if (!s) return;
    /* Only mlc_exchange_free releases a run in flight, after freeing the
     * communicator: its requests end at once (ABORTED) and are given back. */
    if (s->nreqs) {
        mlc_request_wait_all(s->nreqs, s->reqs, NULL);
        mlc_error_clear();
    }
    /* Copies still queued read or write the buffers freed below. */
    if (s->copies_pending && !s->copies_stuck &&
        mlc_gpu_stream_wait(s->rt, s->stream, s->timeout_s, "exchange free") != MLC_SUCCESS) {
        MLC_WARN("%s", mlc_last_error());
        mlc_error_clear();
        s->copies_stuck = true;
    }
    if (s->copies_stuck) {
        /* Left allocated on purpose: the GPU may still copy into or out of
         * them, and memory freed now could be handed out again first. */
        if (s->send_arena || s->recv_arena)
            MLC_WARN("exchange: its GPU copies did not finish; its message buffers stay allocated "
                     "for the life of the process");
    } else {
        arena_free(s, s->send_arena);
        arena_free(s, s->recv_arena);
    }
    /* Work still queued on the stream finishes after it is destroyed (CUDA, HIP). */
    mlc_xdev_stream_destroy(s->rt, s->stream);
    free(s->v);
    free(s->reqs);
    free(s);
}

/* The grouped run's counts and displacements, in bytes, from the plan's peers. */
static void fill_counts(p2p_state_t *s, const mlc_xplan_t *plan, int nranks)
{
    size_t *sc = s->v, *sd = sc + nranks, *rc = sd + nranks, *rd = rc + nranks;
    for (int i = 0; i < plan->nsend; i++) {
        sc[plan->send[i].rank] = plan->send[i].bytes;
        sd[plan->send[i].rank] = plan->send[i].offset;
    }
    for (int i = 0; i < plan->nrecv; i++) {
        rc[plan->recv[i].rank] = plan->recv[i].bytes;
        rd[plan->recv[i].rank] = plan->recv[i].offset;
    }
}

static mlc_status_t p2p_prepare(const mlc_xplan_t *plan, mlc_comm_t *comm, void **state)
{
    p2p_state_t *s = calloc(1, sizeof *s);
    if (!s) return mlc_error(MLC_ERR_NO_MEMORY, "exchange p2p: %zu bytes", sizeof *s);
    mlc_status_t st = MLC_SUCCESS;
    const int nranks = mlc_comm_size(comm);
    size_t n = (size_t)plan->nsend + (size_t)plan->nrecv;
    s->comm = comm;
    s->timeout_s = comm->cfg.timeout_s;
    s->rt = mlc_xdev_runtime(comm);
    s->grouped = mlc_xdev_native(comm);
    s->arena = !s->rt ? ARENA_HEAP : s->grouped ? ARENA_DEVICE : ARENA_PINNED;
    if (s->rt) st = mlc_xdev_stream_create(s->rt, &s->stream);
    if (!st && s->arena == ARENA_PINNED) st = mlc_pinned_default(&s->pool);
    if (!st) st = arena_alloc(s, plan->send_arena, &s->send_arena);
    if (!st) st = arena_alloc(s, plan->recv_arena, &s->recv_arena);
    if (!st && s->grouped) {
        s->v = calloc(4 * (size_t)nranks, sizeof *s->v);
        if (!s->v) st = mlc_error(MLC_ERR_NO_MEMORY, "exchange p2p: counts for %d ranks", nranks);
        else fill_counts(s, plan, nranks);
    }
    if (!st) {
        /* + 1: a grouped run is one request, also on a rank without peers. */
        s->reqs = calloc(n + 1, sizeof *s->reqs);
        if (!s->reqs) st = mlc_error(MLC_ERR_NO_MEMORY, "exchange p2p: %zu requests", n);
    }
    if (st) {
        p2p_release(s);
        return st;
    }
    *state = s;
    return MLC_SUCCESS;
}

/* One segment or local copy: on the host when neither side can be device
 * memory, else enqueued on the runtime's stream. */
static mlc_status_t copy(p2p_state_t *s, const mlc_copy_t *c, const void *src, void *dst,
                         bool device)
{
    if (!device) {
        mlc_copy_run(c, src, dst);
        return MLC_SUCCESS;
    }
    s->copies_pending = true;
    return mlc_xdev_copy(s->rt, s->stream, c, src, dst);
}

static bool is_dev(const bool *dev, int id) { return dev && dev[id]; }

/* The copies may still run (a wait for them failed with st): fail the
 * communicator as a timed-out wait does, so its peers stop waiting for this
 * rank and no later run reuses the buffers. Returns st with its message. */
static mlc_status_t copies_stuck(p2p_state_t *s, mlc_status_t st)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    s->copies_stuck = true;
    mlc_comm_t *comm = s->comm;
    if (st == MLC_ERR_TIMEOUT) {
        mlc_comm_fail(comm, MLC_ERR_TIMEOUT, "rank %d: %s", comm->rank, msg);
        char note[600];
        snprintf(note, sizeof note, "on rank %d, %s", comm->rank, msg);
        if (comm->be->post_failure) comm->be->post_failure(comm, MLC_ERR_TIMEOUT, note);
    } else {
        mlc_comm_abort(comm);
    }
    return mlc_error(st, "%s", msg);
}

/* Wait for the copies enqueued so far (pack before send, unpack before finish returns). */
static mlc_status_t settle(p2p_state_t *s, const char *what)
{
    if (s->copies_stuck) return mlc_comm_check(s->comm);
    if (!s->copies_pending) return MLC_SUCCESS;
    mlc_status_t st = mlc_xdev_sync(s->comm, s->rt, s->stream, what);
    if (st) return copies_stuck(s, st);
    s->copies_pending = false;
    return MLC_SUCCESS;
}

static mlc_status_t pack(p2p_state_t *s, const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    const bool arena_dev = s->arena == ARENA_DEVICE;
    mlc_status_t st = MLC_SUCCESS;
    for (int i = 0; i < plan->nsend && !st; i++) {
        const mlc_xpeer_t *p = &plan->send[i];
        if (direct_segment(s, p, plan->send_segs)) continue;
        for (size_t k = p->first_seg; k < p->first_seg + p->nseg && !st; k++) {
            const mlc_xseg_t *seg = &plan->send_segs[k];
            st = copy(s, &seg->copy, b->provs[seg->id].data, s->send_arena,
                      arena_dev || is_dev(b->prov_dev, seg->id));
        }
    }
    if (!st) st = settle(s, "exchange start (packing)");
    return st;
}

static mlc_status_t local_copies(p2p_state_t *s, const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    if (!b->prov_dev && !b->need_dev) {
        mlc_xexec_local_copies(plan, b);
        return MLC_SUCCESS;
    }
    for (size_t i = 0; i < plan->nlocals; i++) {
        const mlc_xlocal_t *l = &plan->locals[i];
        const void *src = b->provs[l->src_id].data;
        void *dst = b->needs[l->dst_id].data;
        if (mlc_xexec_same_memory(&l->copy, src, dst)) continue;
        mlc_status_t st =
            copy(s, &l->copy, src, dst, is_dev(b->prov_dev, l->src_id) || is_dev(b->need_dev, l->dst_id));
        if (st) return st;
    }
    return MLC_SUCCESS;
}

static mlc_status_t post_messages(p2p_state_t *s, const mlc_xplan_t *plan, const mlc_xbind_t *b,
                                  int tag)
{
    mlc_status_t st = MLC_SUCCESS;
    for (int i = 0; i < plan->nrecv && !st; i++) {
        const mlc_xpeer_t *p = &plan->recv[i];
        void *buf;
        if (direct_segment(s, p, plan->recv_segs)) {
            const mlc_xseg_t *seg = &plan->recv_segs[p->first_seg];
            buf = (unsigned char *)b->needs[seg->id].data + seg->copy.dst_offset;
        } else {
            buf = s->recv_arena + p->offset;
        }
        st = mlc_recv(buf, p->bytes, MLC_UINT8, p->rank, tag, s->comm, NULL, &s->reqs[s->nreqs]);
        if (!st) s->nreqs++;
    }
    if (!st) st = pack(s, plan, b);
    for (int i = 0; i < plan->nsend && !st; i++) {
        const mlc_xpeer_t *p = &plan->send[i];
        const void *buf;
        if (direct_segment(s, p, plan->send_segs)) {
            const mlc_xseg_t *seg = &plan->send_segs[p->first_seg];
            buf = (const unsigned char *)b->provs[seg->id].data + seg->copy.src_offset;
        } else {
            buf = s->send_arena + p->offset;
        }
        st = mlc_send(buf, p->bytes, MLC_UINT8, p->rank, tag, s->comm, &s->reqs[s->nreqs]);
        if (!st) s->nreqs++;
    }
    return st;
}

static mlc_status_t post_grouped(p2p_state_t *s, const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    mlc_status_t st = pack(s, plan, b);
    if (st) return st;
    const size_t n = (size_t)mlc_comm_size(s->comm);
    st = mlc_alltoallv(s->send_arena, s->v, s->v + n, s->recv_arena, s->v + 2 * n, s->v + 3 * n,
                       MLC_UINT8, s->comm, &s->reqs[0]);
    if (!st) s->nreqs = 1;
    return st;
}

static mlc_status_t p2p_start(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b, int tag)
{
    p2p_state_t *s = state;
    s->nreqs = 0;
    /* An earlier run's copies may still be queued: nothing may touch the buffers again. */
    if (s->copies_stuck) {
        mlc_status_t failed = mlc_comm_check(s->comm);
        char why[512];
        snprintf(why, sizeof why, "%s", mlc_last_error());
        return mlc_error(failed ? failed : MLC_ERR_ABORTED, "exchange start: the GPU copies of an earlier "
                         "run did not finish, so this exchange cannot run again (%s)", why);
    }
    mlc_status_t st;
    if (s->grouped) {
        st = post_grouped(s, plan, b);
    } else {
        st = post_messages(s, plan, b, tag);
    }
    /* Local copies overlap the messages in flight. */
    if (!st) st = local_copies(s, plan, b);
    if (st) {
        /* Half an exchange cannot be taken back: fail the exchange's private
         * communicator on every rank, so no peer waits for the rest, and
         * release what was posted. */
        char msg[512];
        strncpy(msg, mlc_last_error(), sizeof msg - 1);
        msg[sizeof msg - 1] = '\0';
        mlc_comm_abort(s->comm);
        mlc_request_wait_all(s->nreqs, s->reqs, NULL);
        s->nreqs = 0;
        if (s->copies_pending) settle(s, "exchange start");
        return mlc_error(st, "exchange start: %s", msg);
    }
    return MLC_SUCCESS;
}

static mlc_status_t p2p_finish(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    p2p_state_t *s = state;
    mlc_status_t st = mlc_request_wait_all(s->nreqs, s->reqs, NULL);
    s->nreqs = 0;
    const bool arena_dev = s->arena == ARENA_DEVICE;
    for (int i = 0; i < plan->nrecv && !st; i++) {
        const mlc_xpeer_t *p = &plan->recv[i];
        if (direct_segment(s, p, plan->recv_segs)) continue;
        for (size_t k = p->first_seg; k < p->first_seg + p->nseg && !st; k++) {
            const mlc_xseg_t *seg = &plan->recv_segs[k];
            st = copy(s, &seg->copy, s->recv_arena, b->needs[seg->id].data,
                      arena_dev || is_dev(b->need_dev, seg->id));
        }
    }
    /* The local copies of start and the unpacking are done when finish returns. */
    mlc_status_t st2 = settle(s, "exchange finish");
    return st ? st : st2;
}

const mlc_xexec_t mlc_xexec_p2p = {
    .name = "p2p",
    .device = true,
    .applies = p2p_applies,
    .prepare = p2p_prepare,
    .start = p2p_start,
    .finish = p2p_finish,
    .release = p2p_release,
};
