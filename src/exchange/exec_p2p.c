/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The portable executor: one packed message per neighbour rank over
 * mlc_send / mlc_recv (nonblocking), so it works on every backend. A
 * message made of one contiguous segment is sent from / received into the
 * array itself (no packing).
 */
#include <stdlib.h>
#include <string.h>
#include "base/error.h"
#include "executor.h"

typedef struct p2p_state {
    mlc_comm_t *comm;
    unsigned char *send_arena, *recv_arena;
    mlc_request_t **reqs; /* receives first, then sends */
    size_t nreqs;         /* posted in the current exchange */
} p2p_state_t;

static int p2p_applies(mlc_comm_t *comm) { return comm != NULL; }

/* A peer whose message is a single contiguous segment needs no arena. */
static int direct_segment(const mlc_xpeer_t *p, const mlc_xseg_t *segs)
{
    return p->nseg == 1 && segs[p->first_seg].copy.ndim == 1;
}

static void *arena_alloc(size_t bytes)
{
    if (bytes == 0) return NULL;
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

static mlc_status_t p2p_prepare(const mlc_xplan_t *plan, mlc_comm_t *comm, void **state)
{
    p2p_state_t *s = calloc(1, sizeof *s);
    size_t n = (size_t)plan->nsend + (size_t)plan->nrecv;
    if (!s) goto oom;
    s->comm = comm;
    s->send_arena = arena_alloc(plan->send_arena);
    s->recv_arena = arena_alloc(plan->recv_arena);
    s->reqs = n ? calloc(n, sizeof *s->reqs) : NULL;
    if ((plan->send_arena && !s->send_arena) || (plan->recv_arena && !s->recv_arena) ||
        (n && !s->reqs))
        goto oom;
    *state = s;
    return MLC_SUCCESS;
oom:
    if (s) {
        free(s->send_arena);
        free(s->recv_arena);
        free(s->reqs);
        free(s);
    }
    return mlc_error(MLC_ERR_NO_MEMORY, "exchange p2p: %zu + %zu bytes of message buffers",
                     plan->send_arena, plan->recv_arena);
}

static mlc_status_t p2p_start(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b, int tag)
{
    p2p_state_t *s = state;
    mlc_status_t st = MLC_SUCCESS;
    s->nreqs = 0;
    for (int i = 0; i < plan->nrecv && !st; i++) {
        const mlc_xpeer_t *p = &plan->recv[i];
        void *buf;
        if (direct_segment(p, plan->recv_segs)) {
            const mlc_xseg_t *seg = &plan->recv_segs[p->first_seg];
            buf = (unsigned char *)b->needs[seg->id].data + seg->copy.dst_offset;
        } else {
            buf = s->recv_arena + p->offset;
        }
        st = mlc_recv(buf, p->bytes, MLC_UINT8, p->rank, tag, s->comm, NULL, &s->reqs[s->nreqs]);
        if (!st) s->nreqs++;
    }
    for (int i = 0; i < plan->nsend && !st; i++) {
        const mlc_xpeer_t *p = &plan->send[i];
        const void *buf;
        if (direct_segment(p, plan->send_segs)) {
            const mlc_xseg_t *seg = &plan->send_segs[p->first_seg];
            buf = (const unsigned char *)b->provs[seg->id].data + seg->copy.src_offset;
        } else {
            buf = s->send_arena + p->offset;
            for (size_t k = p->first_seg; k < p->first_seg + p->nseg; k++)
                mlc_copy_run(&plan->send_segs[k].copy, b->provs[plan->send_segs[k].id].data,
                             s->send_arena);
        }
        st = mlc_send(buf, p->bytes, MLC_UINT8, p->rank, tag, s->comm, &s->reqs[s->nreqs]);
        if (!st) s->nreqs++;
    }
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
        return mlc_error(st, "exchange start: %s", msg);
    }
    /* Local copies overlap the messages in flight. */
    mlc_xexec_local_copies(plan, b);
    return MLC_SUCCESS;
}

static mlc_status_t p2p_finish(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    p2p_state_t *s = state;
    mlc_status_t st = mlc_request_wait_all(s->nreqs, s->reqs, NULL);
    s->nreqs = 0;
    if (st) return st;
    for (int i = 0; i < plan->nrecv; i++) {
        const mlc_xpeer_t *p = &plan->recv[i];
        if (direct_segment(p, plan->recv_segs)) continue;
        for (size_t k = p->first_seg; k < p->first_seg + p->nseg; k++)
            mlc_copy_run(&plan->recv_segs[k].copy, s->recv_arena,
                         b->needs[plan->recv_segs[k].id].data);
    }
    return MLC_SUCCESS;
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
    free(s->send_arena);
    free(s->recv_arena);
    free(s->reqs);
    free(s);
}

const mlc_xexec_t mlc_xexec_p2p = {
    .name = "p2p",
    .applies = p2p_applies,
    .prepare = p2p_prepare,
    .start = p2p_start,
    .finish = p2p_finish,
    .release = p2p_release,
};
