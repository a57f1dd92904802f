/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Each operation kind: its buffers with what they must hold afterwards, and
 * the calls (blocking, or nonblocking with requests left for the step to
 * complete in its own order).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diff_run.h"
#include "harness.h"

#define ES (mlc_dtype_size(r->op->dtype))

static diff_buf_t *buf(diff_run_t *r, const char *name, size_t elems, size_t post_guard)
{
    if (r->nbuf == r->capbuf) {
        fprintf(stderr, "diff: more than %d buffers in one operation\n", r->capbuf);
        abort();
    }
    diff_buf_t *b = &r->bufs[r->nbuf];
    diff_buf_alloc(b, name, elems * ES, post_guard, diff_hash3(r->op->h, (uint64_t)r->c->rank, (uint64_t)r->nbuf));
    r->nbuf++;
    return b;
}

static diff_req_t *req(diff_run_t *r, const char *fmt, int arg)
{
    if (r->nreq == r->capreq) {
        fprintf(stderr, "diff: more than %d requests in one operation\n", r->capreq);
        abort();
    }
    diff_req_t *e = &r->reqs[r->nreq++];
    memset(e, 0, sizeof *e);
    snprintf(e->what, sizeof e->what, fmt, arg);
    e->want = MLC_SUCCESS;
    return e;
}

/* Record how a call went: blocking calls complete here, nonblocking ones later. */
static void called(diff_run_t *r, diff_req_t *e, mlc_status_t st)
{
    if (st != MLC_SUCCESS || !e->req) {
        e->got = st;
        e->done = true;
        e->req = NULL;
        if (st != MLC_SUCCESS && st != e->want && !r->fail[0])
            snprintf(r->fail, sizeof r->fail, "%s returned %s: %s", e->what, mlc_status_name(st), mlc_last_error());
    }
}
#define RQ(e) (r->op->blocking ? NULL : &(e)->req)

/* Data of world rank w, part `part`, elements [0, n), into b at element offset at (want and body). */
static void put(diff_run_t *r, diff_buf_t *b, size_t at, int w, uint64_t part, size_t n, bool body, bool want)
{
    if (body) diff_fill_bytes(r->op, w, part, 0, n, b->p + at * ES);
    if (want) diff_fill_bytes(r->op, w, part, 0, n, b->want + at * ES);
}

static size_t *vec(diff_run_t *r, int which) { return r->v + (size_t)which * (size_t)r->c->size; }

static void coll_start(diff_run_t *r)
{
    const diff_op_t *op = r->op;
    mlc_comm_t *comm = r->c->comm;
    int p = r->c->size, me = r->c->rank, w = r->c->world[me];
    int root = (int)(op->root_sel % (unsigned)p), wroot = r->c->world[root];
    size_t n = op->count, es = ES;
    mlc_op_t mop = diff_mlc_op(op->rop);
    diff_req_t *e = req(r, "the call", 0);
    snprintf(e->what, sizeof e->what, "mlc_%s", mlc_coll_name(diff_kind_coll(op->kind)));
    mlc_status_t st = MLC_SUCCESS;
    switch (op->kind) {
    case K_BCAST: {
        if (me == root) {
            diff_buf_t *s = buf(r, op->inplace ? "buffer" : "sendbuf", n, 0);
            put(r, s, 0, w, 0, n, true, true);
            if (op->inplace) st = mlc_broadcast(s->p, s->p, n, op->dtype, root, comm, RQ(e));
            else {
                diff_buf_t *d = buf(r, "recvbuf", n, 0);
                put(r, d, 0, w, 0, n, false, true);
                st = mlc_broadcast(s->p, d->p, n, op->dtype, root, comm, RQ(e));
            }
        } else {
            diff_buf_t *d = buf(r, "recvbuf", n, 0);
            put(r, d, 0, wroot, 0, n, false, true);
            diff_buf_t *s = op->nullroot ? NULL : buf(r, "sendbuf (not root)", n, 0);
            st = mlc_broadcast(s ? s->p : NULL, d->p, n, op->dtype, root, comm, RQ(e));
        }
        break;
    }
    case K_REDUCE:
    case K_ALLREDUCE: {
        bool gets = op->kind == K_ALLREDUCE || me == root;
        diff_buf_t *s = buf(r, op->inplace && gets ? "buffer" : "sendbuf", n, 0);
        diff_fill_contrib(op, r->c, me, 0, n, s->p);
        memcpy(s->want, s->p, n * es);
        diff_buf_t *d = s;
        if (gets && !op->inplace) d = buf(r, "recvbuf", n, 0);
        if (gets) diff_fill_reduced(op, r->c, 0, n, d->want);
        if (op->kind == K_ALLREDUCE) st = mlc_allreduce(s->p, d->p, n, op->dtype, mop, comm, RQ(e));
        else st = mlc_reduce(s->p, gets ? d->p : NULL, n, op->dtype, mop, root, comm, RQ(e));
        break;
    }
    case K_REDUCE_SCATTER: {
        diff_buf_t *s = buf(r, op->inplace ? "buffer" : "sendbuf", n * (size_t)p, 0);
        diff_fill_contrib(op, r->c, me, 0, n * (size_t)p, s->p);
        memcpy(s->want, s->p, n * (size_t)p * es);
        diff_buf_t *d = s;
        size_t at = 0;
        if (op->inplace) {
            at = (size_t)me * n;
            s->check_lo = at * es; /* the other blocks of an in-place buffer are the library's */
            s->check_hi = (at + n) * es;
        } else d = buf(r, "recvbuf", n, 0);
        diff_fill_reduced(op, r->c, (size_t)me * n, n, d->want + at * es);
        st = mlc_reduce_scatter(s->p, d->p + at * es, n, op->dtype, mop, comm, RQ(e));
        break;
    }
    case K_ALLGATHER:
    case K_GATHER: {
        bool gets = op->kind == K_ALLGATHER || me == root;
        diff_buf_t *d = NULL, *s = NULL;
        if (gets || !op->nullroot) d = buf(r, gets ? "recvbuf" : "recvbuf (not root)", n * (size_t)p, 0);
        for (int q = 0; gets && q < p; q++) put(r, d, (size_t)q * n, r->c->world[q], 0, n, false, true);
        if (op->inplace && gets) put(r, d, (size_t)me * n, w, 0, n, true, true);
        else {
            s = buf(r, "sendbuf", n, 0);
            put(r, s, 0, w, 0, n, true, true);
        }
        const void *sp = s ? s->p : d->p + (size_t)me * n * es;
        if (op->kind == K_ALLGATHER) st = mlc_allgather(sp, d->p, n, op->dtype, comm, RQ(e));
        else st = mlc_gather(sp, d ? d->p : NULL, n, op->dtype, root, comm, RQ(e));
        break;
    }
    case K_ALLGATHERV:
    case K_GATHERV: {
        bool gets = op->kind == K_ALLGATHERV || me == root;
        size_t *cnt = vec(r, 0), *dis = vec(r, 1);
        for (int q = 0; q < p; q++) cnt[q] = diff_vcount(op, q, 0);
        size_t ext = diff_vlayout(diff_hash3(op->h, (uint64_t)me, 0x6a), cnt, p, dis);
        diff_buf_t *d = NULL, *s = NULL;
        if (gets || !op->nullroot) d = buf(r, gets ? "recvbuf" : "recvbuf (not root)", ext, 0);
        for (int q = 0; gets && q < p; q++) put(r, d, dis[q], r->c->world[q], 0, cnt[q], false, true);
        if (op->inplace && gets) put(r, d, dis[me], w, 0, cnt[me], true, true);
        else {
            s = buf(r, "sendbuf", cnt[me], 0);
            put(r, s, 0, w, 0, cnt[me], true, true);
        }
        const void *sp = s ? s->p : d->p + dis[me] * es;
        if (op->kind == K_ALLGATHERV) st = mlc_allgatherv(sp, cnt[me], d->p, cnt, dis, op->dtype, comm, RQ(e));
        else
            st = mlc_gatherv(sp, cnt[me], d ? d->p : NULL, d ? cnt : NULL, d ? dis : NULL, op->dtype, root, comm,
                             RQ(e));
        break;
    }
    case K_ALLTOALL: {
        diff_buf_t *s = buf(r, op->inplace ? "buffer" : "sendbuf", n * (size_t)p, 0);
        diff_buf_t *d = op->inplace ? s : buf(r, "recvbuf", n * (size_t)p, 0);
        for (int q = 0; q < p; q++) put(r, s, (size_t)q * n, w, (uint64_t)q, n, true, !op->inplace);
        for (int q = 0; q < p; q++) put(r, d, (size_t)q * n, r->c->world[q], (uint64_t)me, n, false, true);
        st = mlc_alltoall(s->p, d->p, n, op->dtype, comm, RQ(e));
        break;
    }
    case K_ALLTOALLV: {
        size_t *sc = vec(r, 0), *sd = vec(r, 1), *rc = vec(r, 2), *rd = vec(r, 3);
        for (int q = 0; q < p; q++) sc[q] = diff_vcount(op, me, q), rc[q] = diff_vcount(op, q, me);
        size_t sext = diff_vlayout(diff_hash3(op->h, (uint64_t)me, 0x5d), sc, p, sd);
        size_t rext = diff_vlayout(diff_hash3(op->h, (uint64_t)me, 0x7d), rc, p, rd);
        diff_buf_t *s = buf(r, "sendbuf", sext, 0), *d = buf(r, "recvbuf", rext, 0);
        for (int q = 0; q < p; q++) put(r, s, sd[q], w, (uint64_t)q, sc[q], true, true);
        for (int q = 0; q < p; q++) put(r, d, rd[q], r->c->world[q], (uint64_t)me, rc[q], false, true);
        st = mlc_alltoallv(s->p, sc, sd, d->p, rc, rd, op->dtype, comm, RQ(e));
        break;
    }
    case K_SCATTER: {
        diff_buf_t *s = NULL, *d = NULL;
        if (me == root || !op->nullroot) s = buf(r, me == root ? "sendbuf" : "sendbuf (not root)", n * (size_t)p, 0);
        for (int q = 0; me == root && q < p; q++) put(r, s, (size_t)q * n, w, (uint64_t)q, n, true, true);
        if (!(op->inplace && me == root)) {
            d = buf(r, "recvbuf", n, 0);
            put(r, d, 0, wroot, (uint64_t)me, n, false, true);
        }
        void *dp = d ? d->p : s->p + (size_t)root * n * es;
        st = mlc_scatter(s ? s->p : NULL, dp, n, op->dtype, root, comm, RQ(e));
        break;
    }
    case K_SCATTERV: {
        size_t *cnt = vec(r, 0), *dis = vec(r, 1);
        for (int q = 0; q < p; q++) cnt[q] = diff_vcount(op, q, 0);
        size_t ext = diff_vlayout(diff_hash3(op->h, (uint64_t)me, 0x5c), cnt, p, dis);
        diff_buf_t *s = NULL, *d = NULL;
        if (me == root || !op->nullroot) s = buf(r, me == root ? "sendbuf" : "sendbuf (not root)", ext, 0);
        for (int q = 0; me == root && q < p; q++) put(r, s, dis[q], w, (uint64_t)q, cnt[q], true, true);
        if (!(op->inplace && me == root)) {
            d = buf(r, "recvbuf", cnt[me], 0);
            put(r, d, 0, wroot, (uint64_t)me, cnt[me], false, true);
        }
        void *dp = d ? d->p : s->p + dis[root] * es;
        bool sarr = me == root || !op->nullroot;
        st = mlc_scatterv(s ? s->p : NULL, sarr ? cnt : NULL, sarr ? dis : NULL, dp, cnt[me], op->dtype, root, comm,
                          RQ(e));
        break;
    }
    case K_BARRIER: st = mlc_barrier(comm, RQ(e)); break;
    default: break;
    }
    called(r, e, st);
}

/* ---- point-to-point ------------------------------------------------------ */

static size_t msg_count(const diff_op_t *op, int i, int j, int k)
{
    uint64_t x = diff_hash3(op->h, (uint64_t)(i * 64 + j), (uint64_t)k + 0x33);
    return x % 4 == 0 ? 0 : (size_t)((x >> 8) % (op->count + 1));
}
static size_t extra_room(const diff_op_t *op, int i, int j, int k)
{
    return (size_t)(diff_hash3(op->h, (uint64_t)(i * 64 + j), (uint64_t)k + 0x44) % 3);
}
static uint64_t msg_part(int dst, int k) { return 0x1000u + (uint64_t)dst * 8 + (uint64_t)k; }

/* Send message k from me to member j (nonblocking unless the op blocks). */
static void post_send(diff_run_t *r, int j, int k, int tag, size_t cnt)
{
    diff_buf_t *s = buf(r, "send", cnt, 0);
    snprintf(s->name, sizeof s->name, "send to %d #%d", j, k);
    put(r, s, 0, r->c->world[r->c->rank], msg_part(j, k), cnt, true, true);
    diff_req_t *e = req(r, "mlc_send to %d", j);
    called(r, e, mlc_send(s->p, cnt, r->op->dtype, j, tag, r->c->comm, RQ(e)));
}

/* Receive message k from member i: `cnt` elements and some spare room. */
static void post_recv(diff_run_t *r, int i, int k, int src_arg, int tag, int tag_arg, size_t cnt, size_t room)
{
    int me = r->c->rank;
    diff_buf_t *d = buf(r, "recv", cnt + room, 0);
    snprintf(d->name, sizeof d->name, "recv from %d #%d", i, k);
    put(r, d, 0, r->c->world[i], msg_part(me, k), cnt, false, true);
    diff_req_t *e = req(r, "mlc_recv from %d", i);
    e->check_msg = true;
    e->msg_want = (mlc_msg_status_t){i, tag, cnt * ES};
    called(r, e, mlc_recv(d->p, cnt + room, r->op->dtype, src_arg, tag_arg, r->c->comm, &e->msg, RQ(e)));
}

static int src_arg_of(const diff_op_t *op, int i) { return op->match == M_ANY_SOURCE ? MLC_ANY_SOURCE : i; }
static int tag_arg_of(const diff_op_t *op, int tag) { return op->match == M_ANY_TAG ? MLC_ANY_TAG : tag; }

static void pairs_start(diff_run_t *r)
{
    const diff_op_t *op = r->op;
    int p = r->c->size, me = r->c->rank, perm[DIFF_MAX_RANKS], pos = 0;
    for (int i = 0; i < p; i++) perm[i] = i;
    for (int i = p - 1; i > 0; i--) {
        int j = (int)(diff_hash3(op->h, (uint64_t)i, 0x9e) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < p; i++)
        if (perm[i] == me) pos = i;
    if ((pos ^ 1) >= p) return; /* the odd one out */
    int peer = perm[pos ^ 1];
    bool top = (op->h & 15) == 0 && op->blocking;
    int tmax = mlc_comm_tag_max(r->c->comm);
    int tag_out = top ? tmax : op->tag_base + me, tag_in = top ? tmax : op->tag_base + peer;
    size_t out = msg_count(op, me, peer, 0), in = msg_count(op, peer, me, 0);
    bool send_first = op->blocking ? (pos & 1) == 0 : !op->recv_first;
    if (send_first) post_send(r, peer, 0, tag_out, out);
    post_recv(r, peer, 0, src_arg_of(op, peer), tag_in, tag_arg_of(op, tag_in), in, extra_room(op, peer, me, 0));
    if (!send_first) post_send(r, peer, 0, tag_out, out);
}

static void sendrecv_start(diff_run_t *r)
{
    const diff_op_t *op = r->op;
    int p = r->c->size, me = r->c->rank, s = (int)(op->root_sel % (unsigned)p);
    int dst = (me + s) % p, src = (me - s + p) % p;
    size_t out = msg_count(op, me, dst, 0), in = msg_count(op, src, me, 0), room = extra_room(op, src, me, 0);
    diff_buf_t *sb = buf(r, "sendbuf", out, 0);
    put(r, sb, 0, r->c->world[me], msg_part(dst, 0), out, true, true);
    diff_buf_t *rb = buf(r, "recvbuf", in + room, 0);
    put(r, rb, 0, r->c->world[src], msg_part(me, 0), in, false, true);
    diff_req_t *e = req(r, "mlc_sendrecv from %d", src);
    e->check_msg = true;
    int tag_in = op->tag_base + src;
    e->msg_want = (mlc_msg_status_t){src, tag_in, in * ES};
    called(r, e, mlc_sendrecv(sb->p, out, dst, op->tag_base + me, rb->p, in + room, src_arg_of(op, src),
                              tag_arg_of(op, tag_in), op->dtype, r->c->comm, &e->msg, RQ(e)));
}

static int nmsgs(const diff_op_t *op, int i, int j) { return (int)(diff_hash3(op->h, (uint64_t)i, (uint64_t)j + 0x77) % 4); }
static int xtag(const diff_op_t *op, int i, int k) { return op->match == M_SAME_TAG ? op->tag_base : op->tag_base + i * 4 + k; }

static void exchange_start(diff_run_t *r)
{
    const diff_op_t *op = r->op;
    int p = r->c->size, me = r->c->rank;
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0) == op->recv_first)
            for (int i = 0; i < p; i++)
                for (int k = 0; k < nmsgs(op, i, me); k++)
                    post_recv(r, i, k, src_arg_of(op, i), xtag(op, i, k), tag_arg_of(op, xtag(op, i, k)),
                              msg_count(op, i, me, k), extra_room(op, i, me, k));
        else
            for (int j = 0; j < p; j++)
                for (int k = 0; k < nmsgs(op, me, j); k++) post_send(r, j, k, xtag(op, me, k), msg_count(op, me, j, k));
    }
}

static void probe_start(diff_run_t *r)
{
    const diff_op_t *op = r->op;
    int p = r->c->size, me = r->c->rank, s = (int)(op->root_sel % (unsigned)p);
    int dst = (me + s) % p, src = (me - s + p) % p;
    size_t out = msg_count(op, me, dst, 0), in = msg_count(op, src, me, 0);
    diff_buf_t *sb = buf(r, "sendbuf", out, 0);
    put(r, sb, 0, r->c->world[me], msg_part(dst, 0), out, true, true);
    diff_req_t *se = req(r, "mlc_send to %d", dst);
    called(r, se, mlc_send(sb->p, out, op->dtype, dst, op->tag_base + me, r->c->comm, &se->req));
    diff_req_t *pe = req(r, op->iprobe ? "mlc_iprobe from %d" : "mlc_probe from %d", src);
    pe->check_msg = true;
    pe->msg_want = (mlc_msg_status_t){src, op->tag_base + src, in * ES};
    int sa = src_arg_of(op, src), ta = tag_arg_of(op, op->tag_base + src);
    mlc_status_t st;
    if (op->iprobe) {
        int flag = 0;
        while ((st = mlc_iprobe(sa, ta, r->c->comm, &flag, &pe->msg)) == MLC_SUCCESS && !flag) sched_yield();
    } else st = mlc_probe(sa, ta, r->c->comm, &pe->msg);
    pe->got = st;
    pe->done = true;
    if (st != MLC_SUCCESS) {
        snprintf(r->fail, sizeof r->fail, "%s returned %s: %s", pe->what, mlc_status_name(st), mlc_last_error());
        return;
    }
    /* Receive exactly what the probe announced, from whom it named. */
    size_t cnt = pe->msg.bytes / ES;
    diff_buf_t *rb = buf(r, "recvbuf", cnt, 0);
    if (pe->msg.source == src) put(r, rb, 0, r->c->world[src], msg_part(me, 0), cnt, false, true);
    diff_req_t *re = req(r, "mlc_recv from %d", src);
    re->check_msg = true;
    re->msg_want = pe->msg_want;
    called(r, re, mlc_recv(rb->p, cnt, op->dtype, pe->msg.source, pe->msg.tag, r->c->comm, &re->msg, NULL));
    re->done = true;
}

static void trunc_start(diff_run_t *r)
{
    const diff_op_t *op = r->op;
    int p = r->c->size, me = r->c->rank, s = (int)(op->root_sel % (unsigned)p);
    int dst = (me + s) % p, src = (me - s + p) % p;
    size_t n_in = op->count, room = (size_t)(diff_hash3(op->h, (uint64_t)src, 0x7) % op->count);
    diff_buf_t *sb = buf(r, "sendbuf", op->count, 0);
    put(r, sb, 0, r->c->world[me], msg_part(dst, 0), op->count, true, true);
    diff_req_t *se = req(r, "mlc_send to %d", dst);
    called(r, se, mlc_send(sb->p, op->count, op->dtype, dst, op->tag_base + me, r->c->comm, &se->req));
    /* The guard after the buffer covers the whole excess: a write past the end stays in it. */
    diff_buf_t *rb = buf(r, "short recvbuf", room, (n_in - room) * ES + 64);
    rb->check_body = false; /* what a truncated receive leaves in the buffer is not specified */
    diff_req_t *e = req(r, "truncated mlc_recv from %d", src);
    e->want = MLC_ERR_TRUNCATE;
    called(r, e, mlc_recv(rb->p, room, op->dtype, src, op->tag_base + src, r->c->comm, NULL, RQ(e)));
}

void diff_run_start(diff_run_t *r, const diff_op_t *op, diff_comm_t *c)
{
    memset(r, 0, sizeof *r);
    r->op = op;
    r->c = c;
    int p = c->size;
    r->capbuf = r->capreq = 8 * p + 8;
    r->bufs = calloc((size_t)r->capbuf, sizeof *r->bufs);
    r->reqs = calloc((size_t)r->capreq, sizeof *r->reqs);
    r->v = calloc(4 * (size_t)p, sizeof *r->v);
    if (!r->bufs || !r->reqs || !r->v) abort();
    if (op->algo >= 0) {
        const char *names[32];
        size_t n = mlc_test_algos(c->comm, diff_kind_coll(op->kind), names, 32);
        if (n > 0) {
            r->algo = names[(size_t)op->algo % n];
            mlc_status_t st = mlc_comm_set_algo(c->comm, diff_kind_coll(op->kind), r->algo);
            if (st != MLC_SUCCESS) {
                snprintf(r->fail, sizeof r->fail, "mlc_comm_set_algo(%s) returned %s: %s", r->algo,
                         mlc_status_name(st), mlc_last_error());
                return;
            }
        }
    }
    switch (op->kind) {
    case K_PAIRS: pairs_start(r); break;
    case K_SENDRECV: sendrecv_start(r); break;
    case K_EXCHANGE: exchange_start(r); break;
    case K_PROBE: probe_start(r); break;
    case K_TRUNC: trunc_start(r); break;
    default: coll_start(r); break;
    }
}

int diff_run_verify(diff_run_t *r)
{
    if (r->fail[0]) return 1;
    for (int i = 0; i < r->nreq; i++) {
        diff_req_t *e = &r->reqs[i];
        if (e->got != e->want) {
            snprintf(r->fail, sizeof r->fail, "%s: %s, expected %s (%s)", e->what, mlc_status_name(e->got),
                     mlc_status_name(e->want), e->got != MLC_SUCCESS ? mlc_last_error() : "");
            return 1;
        }
        if (e->check_msg && e->got == MLC_SUCCESS &&
            (e->msg.source != e->msg_want.source || e->msg.tag != e->msg_want.tag || e->msg.bytes != e->msg_want.bytes)) {
            snprintf(r->fail, sizeof r->fail, "%s: status says source %d, tag %d, %zu bytes; expected source %d, "
                     "tag %d, %zu bytes", e->what, e->msg.source, e->msg.tag, e->msg.bytes, e->msg_want.source,
                     e->msg_want.tag, e->msg_want.bytes);
            return 1;
        }
    }
    for (int i = 0; i < r->nbuf; i++)
        if (diff_buf_check(&r->bufs[i], mlc_dtype_size(r->op->dtype), r->fail, sizeof r->fail)) return 1;
    if (r->op->kind == K_TRUNC && mlc_comm_status(r->c->comm) != MLC_SUCCESS) {
        snprintf(r->fail, sizeof r->fail, "a truncated receive failed the communicator (%s)",
                 mlc_status_name(mlc_comm_status(r->c->comm)));
        return 1;
    }
    return 0;
}

void diff_run_free(diff_run_t *r)
{
    for (int i = 0; i < r->nbuf; i++) diff_buf_free(&r->bufs[i]);
    for (int i = 0; i < r->nreq; i++)
        if (r->reqs[i].req) mlc_request_wait(&r->reqs[i].req);
    free(r->bufs);
    free(r->reqs);
    free(r->v);
    memset(r, 0, sizeof *r);
}
