/* SPDX-License-Identifier: BSD-3-Clause */
/* Buffers, descriptions and reference results for the algorithm runs (see cases.h). */
#include "cases.h"
#include "algos/build.h"
#include "base/dtype.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0xA5
#define FRESH_BYTE 0xCD

mlc_op_t tcase_matrix_op;

/* inout = in x inout, row-major 2x2 uint32 matrices, mod 2^32: associative, not commutative. */
static void matrix_mul(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    (void)dtype, (void)ctx;
    const uint32_t *a = in;
    uint32_t *b = inout;
    for (size_t i = 0; i < count; i++, a += 4, b += 4) {
        uint32_t r0 = a[0] * b[0] + a[1] * b[2], r1 = a[0] * b[1] + a[1] * b[3];
        uint32_t r2 = a[2] * b[0] + a[3] * b[2], r3 = a[2] * b[1] + a[3] * b[3];
        b[0] = r0, b[1] = r1, b[2] = r2, b[3] = r3;
    }
}

mlc_status_t tcase_init(void) { return mlc_op_create(matrix_mul, 0, NULL, &tcase_matrix_op); }

bool tcase_is_reducing(mlc_coll_t c)
{
    return c == MLC_COLL_REDUCE || c == MLC_COLL_ALLREDUCE || c == MLC_COLL_REDUCE_SCATTER;
}

bool tcase_is_rooted(mlc_coll_t c)
{
    return c == MLC_COLL_BROADCAST || c == MLC_COLL_REDUCE || c == MLC_COLL_GATHER ||
           c == MLC_COLL_GATHERV || c == MLC_COLL_SCATTER || c == MLC_COLL_SCATTERV;
}

bool tcase_has_inplace(mlc_coll_t c) { return c != MLC_COLL_BARRIER; }

/* ---- values -------------------------------------------------------------------- */

static uint32_t seed_of(int r, size_t i) { return (uint32_t)r * 1009u + (uint32_t)i * 7u + 3u; }

/* Element i of rank r's input, written to dst (one element of c->dtype). */
static void value(const tcase_t *c, int r, size_t i, void *dst)
{
    uint32_t s = seed_of(r, i);
    int32_t v = (int32_t)(s % 19u) - 9;
    if (c->op == MLC_PROD) v = s % 3u == 0 ? 2 : (s % 3u == 1 ? 1 : -1);
    if (c->dtype == MLC_INT32) {
        memcpy(dst, &v, 4);
    } else if (c->dtype == MLC_FLOAT32) {
        float f = (float)v;
        if (c->values == TV_RANDOM) f = (float)((s * 2654435761u) % 1000003u) / 997.0f - 500.0f;
        memcpy(dst, &f, 4);
    } else { /* matrix */
        uint32_t m[4] = {s % 5u + 1u, (s / 5u) % 3u, (s / 15u) % 4u, s % 7u + 1u};
        memcpy(dst, m, 16);
    }
}

static size_t esize_of(const tcase_t *c) { return mlc_dtype_size(c->dtype); }

/* Reduction of element i over ranks 0..p-1 in rank order (and /p for avg). */
static void reduced(const tcase_t *c, size_t i, void *dst)
{
    if (c->dtype == tcase_matrix_dtype) {
        uint32_t acc[4], x[4];
        value(c, 0, i, acc);
        for (int r = 1; r < c->p; r++) {
            value(c, r, i, x);
            matrix_mul(acc, x, 1, c->dtype, NULL); /* x = acc x x */
            memcpy(acc, x, sizeof acc);
        }
        memcpy(dst, acc, 16);
        return;
    }
    double acc = 0;
    for (int r = 0; r < c->p; r++) {
        double x;
        if (c->dtype == MLC_INT32) {
            int32_t v;
            value(c, r, i, &v);
            x = v;
        } else {
            float v;
            value(c, r, i, &v);
            x = v;
        }
        if (r == 0) {
            acc = x;
            continue;
        }
        switch (c->op) {
        case MLC_PROD: acc *= x; break;
        case MLC_MAX: acc = x > acc ? x : acc; break;
        case MLC_MIN: acc = x < acc ? x : acc; break;
        default: acc += x; break;
        }
    }
    if (c->dtype == MLC_INT32) {
        int32_t v = (int32_t)acc;
        if (c->op == MLC_AVG) v /= c->p;
        memcpy(dst, &v, 4);
    } else {
        float v = (float)acc;
        if (c->op == MLC_AVG) v = v / (float)c->p;
        memcpy(dst, &v, 4);
    }
}

/* ---- layouts --------------------------------------------------------------------- */

/* Per-rank counts of the v-variants: some zero, laid out in reverse rank order with gaps. */
static size_t vcount(size_t c, int j) { return (c == 0 || j % 3 == 1) ? 0 : c + (size_t)j; }

static size_t *layout_reverse(const size_t *counts, int p, size_t *total)
{
    size_t *displs = malloc((size_t)p * sizeof *displs), at = 0;
    for (int j = p - 1; j >= 0; j--) {
        displs[j] = at;
        at += counts[j] + 1;
    }
    *total = at;
    return displs;
}

static size_t *layout_forward(const size_t *counts, int p, size_t *total)
{
    size_t *displs = malloc((size_t)p * sizeof *displs), at = 0;
    for (int j = 0; j < p; j++) {
        displs[j] = at;
        at += counts[j] + 1;
    }
    *total = at;
    return displs;
}

/* alltoallv: elements rank r sends to rank j (symmetric in place: the same layout both ways). */
static size_t a2av_count(const tcase_t *c, int r, int j)
{
    int k = c->inplace ? r + j : r + 2 * j;
    return (c->count == 0 || k % 4 == 3) ? 0 : c->count + (size_t)(k % 3);
}

/* ---- buffers ------------------------------------------------------------------------ */

static unsigned char *guarded(trank_t *t, int which, size_t bytes)
{
    unsigned char *m = malloc(bytes + 2 * GUARD);
    memset(m, GUARD_BYTE, GUARD);
    memset(m + GUARD, FRESH_BYTE, bytes);
    memset(m + GUARD + bytes, GUARD_BYTE, GUARD);
    t->mem[which] = m;
    t->memlen[which] = bytes;
    return m + GUARD;
}

static void fill(const tcase_t *c, int r, unsigned char *dst, size_t first, size_t n)
{
    size_t E = esize_of(c);
    for (size_t k = 0; k < n; k++) value(c, r, first + k, dst + k * E);
}

/* Rank j's input element i as the receiver sees it (for moves, not reductions). */
static void moved(const tcase_t *c, int j, size_t i, unsigned char *dst) { value(c, j, i, dst); }

static void expect_block(const tcase_t *c, unsigned char *exp, size_t at, int from, size_t first,
                         size_t n)
{
    size_t E = esize_of(c);
    for (size_t k = 0; k < n; k++) moved(c, from, first + k, exp + (at + k) * E);
}

static void expect_reduced(const tcase_t *c, unsigned char *exp, size_t first, size_t n)
{
    size_t E = esize_of(c);
    for (size_t k = 0; k < n; k++) reduced(c, first + k, exp + k * E);
}

int tcase_setup(const tcase_t *c, trank_t *ranks)
{
    int p = c->p;
    size_t n = c->count, E = esize_of(c);
    size_t *vc = NULL;
    if (c->coll == MLC_COLL_ALLGATHERV || c->coll == MLC_COLL_GATHERV ||
        c->coll == MLC_COLL_SCATTERV) {
        vc = malloc((size_t)p * sizeof *vc);
        for (int j = 0; j < p; j++) vc[j] = vcount(n, j);
    }
    for (int r = 0; r < p; r++) {
        trank_t *t = &ranks[r];
        memset(t, 0, sizeof *t);
        bool root = r == c->root, ip = c->inplace && (!tcase_is_rooted(c->coll) || root);
        size_t send_elems = 0, recv_elems = 0, send_at = 0; /* send_at: in-place offset in recv */
        bool has_send = true, has_recv = true, send_in_recv = false, recv_in_send = false;
        size_t recv_at = 0; /* in-place offset of recv inside send */
        size_t vtotal = 0;
        switch (c->coll) {
        case MLC_COLL_BROADCAST:
            send_elems = n, recv_elems = n, has_send = root, send_in_recv = ip;
            break;
        case MLC_COLL_REDUCE:
            send_elems = n, recv_elems = n, has_recv = root, send_in_recv = ip;
            break;
        case MLC_COLL_ALLREDUCE:
            send_elems = n, recv_elems = n, send_in_recv = ip;
            break;
        case MLC_COLL_ALLGATHER:
            send_elems = n, recv_elems = n * (size_t)p, send_in_recv = ip, send_at = (size_t)r * n;
            break;
        case MLC_COLL_GATHER:
            send_elems = n, recv_elems = n * (size_t)p, has_recv = root, send_in_recv = ip;
            send_at = (size_t)r * n;
            break;
        case MLC_COLL_ALLGATHERV:
        case MLC_COLL_GATHERV:
            t->counts = malloc((size_t)p * sizeof *t->counts);
            memcpy(t->counts, vc, (size_t)p * sizeof *vc);
            t->displs = layout_reverse(vc, p, &vtotal);
            send_elems = vc[r], recv_elems = vtotal, send_in_recv = ip, send_at = t->displs[r];
            if (c->coll == MLC_COLL_GATHERV) {
                has_recv = root;
                if (!root) { /* only the root knows the layout */
                    free(t->counts), free(t->displs);
                    t->counts = t->displs = NULL;
                }
            }
            break;
        case MLC_COLL_REDUCE_SCATTER:
            send_elems = n * (size_t)p, recv_elems = n, recv_in_send = ip, recv_at = (size_t)r * n;
            break;
        case MLC_COLL_ALLTOALL:
            send_elems = recv_elems = n * (size_t)p, send_in_recv = ip;
            break;
        case MLC_COLL_ALLTOALLV: {
            size_t st, rt;
            t->counts = malloc((size_t)p * sizeof *t->counts);
            t->counts2 = malloc((size_t)p * sizeof *t->counts2);
            for (int j = 0; j < p; j++) {
                t->counts[j] = a2av_count(c, r, j);
                t->counts2[j] = a2av_count(c, j, r);
            }
            t->displs = layout_reverse(t->counts, p, &st);
            t->displs2 = layout_forward(t->counts2, p, &rt);
            if (ip) { /* in place the send blocks sit where the received ones go */
                memcpy(t->counts, t->counts2, (size_t)p * sizeof *t->counts);
                memcpy(t->displs, t->displs2, (size_t)p * sizeof *t->displs);
                st = rt;
            }
            send_elems = st, recv_elems = rt, send_in_recv = ip;
            break;
        }
        case MLC_COLL_SCATTER:
            send_elems = n * (size_t)p, recv_elems = n, has_send = root, recv_in_send = ip;
            recv_at = (size_t)r * n;
            break;
        case MLC_COLL_SCATTERV:
            t->counts = malloc((size_t)p * sizeof *t->counts);
            memcpy(t->counts, vc, (size_t)p * sizeof *vc);
            t->displs = layout_reverse(vc, p, &vtotal);
            send_elems = vtotal, recv_elems = vc[r], has_send = root, recv_in_send = ip;
            recv_at = t->displs[r];
            if (!root) {
                free(t->counts), free(t->displs);
                t->counts = t->displs = NULL;
            }
            break;
        case MLC_COLL_BARRIER:
            has_send = has_recv = false;
            break;
        default:
            free(vc);
            return -1;
        }
        t->sendlen = has_send ? send_elems * E : 0;
        t->recvlen = has_recv ? recv_elems * E : 0;
        if (send_in_recv) {
            unsigned char *rb = guarded(t, 1, t->recvlen);
            t->recv = rb;
            t->send = rb + send_at * E;
            if (c->coll == MLC_COLL_ALLTOALLV)
                fill(c, r, rb, 0, recv_elems); /* the whole buffer is this rank's input */
            else
                fill(c, r, t->send, 0, send_elems);
        } else if (recv_in_send) {
            unsigned char *sb = guarded(t, 0, t->sendlen);
            fill(c, r, sb, 0, send_elems);
            t->send = sb;
            t->recv = sb + recv_at * E;
        } else {
            if (has_send) {
                t->send = guarded(t, 0, t->sendlen);
                fill(c, r, t->send, 0, send_elems);
            }
            if (has_recv) t->recv = guarded(t, 1, t->recvlen);
        }
        if (!c->inplace || !(send_in_recv || recv_in_send)) {
            if (t->send) {
                t->send_orig = malloc(t->sendlen ? t->sendlen : 1);
                memcpy(t->send_orig, t->send, t->sendlen);
            }
        }
        /* What recvbuf must hold afterwards: what it holds now, then the results. */
        if (has_recv) {
            unsigned char *exp = malloc(t->recvlen ? t->recvlen : 1);
            memcpy(exp, t->recv, t->recvlen);
            t->expect = exp;
        }
        mlc_coll_desc_t *d = &t->d;
        d->coll = c->coll, d->rank = r, d->size = p, d->root = c->root;
        d->count = n, d->esize = E;
        if (c->coll == MLC_COLL_ALLGATHERV || c->coll == MLC_COLL_GATHERV) d->count = vc[r];
        if (c->coll == MLC_COLL_SCATTERV) d->count = vc[r];
        d->counts = t->counts, d->displs = t->displs, d->counts2 = t->counts2, d->displs2 = t->displs2;
        d->inplace = ip;
        d->commutative = tcase_is_reducing(c->coll) ? mlc_op_commutative(c->op) : true;
        d->has_send = t->send != NULL, d->has_recv = t->recv != NULL;
        if (c->op == MLC_AVG && has_recv && tcase_is_reducing(c->coll)) t->avg_count = n;
    }

    /* Expected results. */
    for (int r = 0; r < p; r++) {
        trank_t *t = &ranks[r];
        unsigned char *exp = t->expect;
        if (!exp) continue;
        switch (c->coll) {
        case MLC_COLL_BROADCAST: expect_block(c, exp, 0, c->root, 0, n); break;
        case MLC_COLL_REDUCE:
        case MLC_COLL_ALLREDUCE: expect_reduced(c, exp, 0, n); break;
        case MLC_COLL_REDUCE_SCATTER: expect_reduced(c, exp, (size_t)r * n, n); break;
        case MLC_COLL_ALLGATHER:
        case MLC_COLL_GATHER:
            for (int j = 0; j < p; j++) expect_block(c, exp, (size_t)j * n, j, 0, n);
            break;
        case MLC_COLL_ALLGATHERV:
        case MLC_COLL_GATHERV:
            for (int j = 0; j < p; j++) expect_block(c, exp, t->displs[j], j, 0, vc[j]);
            break;
        case MLC_COLL_ALLTOALL:
            for (int j = 0; j < p; j++) expect_block(c, exp, (size_t)j * n, j, (size_t)r * n, n);
            break;
        case MLC_COLL_ALLTOALLV:
            for (int j = 0; j < p; j++)
                expect_block(c, exp, t->displs2[j], j, ranks[j].displs[r], t->counts2[j]);
            break;
        case MLC_COLL_SCATTER: expect_block(c, exp, 0, c->root, (size_t)r * n, n); break;
        case MLC_COLL_SCATTERV:
            expect_block(c, exp, 0, c->root, ranks[c->root].displs[r], vc[r]);
            break;
        default: break;
        }
    }
    free(vc);
    return 0;
}

static bool guards_ok(const trank_t *t, int which)
{
    const unsigned char *m = t->mem[which];
    if (!m) return true;
    for (size_t i = 0; i < GUARD; i++)
        if (m[i] != GUARD_BYTE || m[GUARD + t->memlen[which] + i] != GUARD_BYTE) return false;
    return true;
}

int tcase_check(const tcase_t *c, const trank_t *ranks, char *why, size_t len)
{
    size_t E = esize_of(c);
    for (int r = 0; r < c->p; r++) {
        const trank_t *t = &ranks[r];
        if (!guards_ok(t, 0) || !guards_ok(t, 1)) {
            snprintf(why, len, "rank %d wrote outside its buffers", r);
            return -1;
        }
        if (t->send_orig && memcmp(t->send_orig, t->send, t->sendlen) != 0) {
            snprintf(why, len, "rank %d: send buffer changed", r);
            return -1;
        }
        if (!t->expect) continue;
        const unsigned char *got = t->recv;
        if (c->values == TV_RANDOM) {
            /* rounding: bitwise equal to rank 0 (allreduce/allgather), near the reference */
            if (ranks[0].expect && t->recvlen == ranks[0].recvlen &&
                memcmp(got, ranks[0].recv, t->recvlen) != 0) {
                snprintf(why, len, "rank %d's result differs in bits from rank 0's", r);
                return -1;
            }
            for (size_t i = 0; i < t->recvlen / 4; i++) {
                float g, e;
                memcpy(&g, got + 4 * i, 4);
                memcpy(&e, t->expect + 4 * i, 4);
                if (fabsf(g - e) > 1e-3f * (fabsf(e) + 1.0f)) {
                    snprintf(why, len, "rank %d element %zu: %g, expected about %g", r, i,
                             (double)g, (double)e);
                    return -1;
                }
            }
            continue;
        }
        for (size_t i = 0; i < t->recvlen; i++) {
            if (got[i] == t->expect[i]) continue;
            size_t el = i / E;
            char gs[48], es[48];
            if (c->dtype == MLC_INT32) {
                int32_t g, e;
                memcpy(&g, got + el * E, 4), memcpy(&e, t->expect + el * E, 4);
                snprintf(gs, sizeof gs, "%d", g), snprintf(es, sizeof es, "%d", e);
            } else if (c->dtype == MLC_FLOAT32) {
                float g, e;
                memcpy(&g, got + el * E, 4), memcpy(&e, t->expect + el * E, 4);
                snprintf(gs, sizeof gs, "%g", (double)g), snprintf(es, sizeof es, "%g", (double)e);
            } else {
                snprintf(gs, sizeof gs, "byte %02x", got[i]);
                snprintf(es, sizeof es, "byte %02x", t->expect[i]);
            }
            snprintf(why, len, "rank %d recv element %zu: got %s, expected %s", r, el, gs, es);
            return -1;
        }
    }
    return 0;
}

void tcase_free(const tcase_t *c, trank_t *ranks)
{
    for (int r = 0; r < c->p; r++) {
        trank_t *t = &ranks[r];
        free(t->mem[0]), free(t->mem[1]), free(t->expect), free(t->send_orig);
        free(t->counts), free(t->displs), free(t->counts2), free(t->displs2);
        memset(t, 0, sizeof *t);
    }
}

void tcase_describe(const tcase_t *c, char *buf, size_t len)
{
    const char *dt = c->dtype == MLC_INT32 ? "int32" : c->dtype == MLC_FLOAT32 ? "float32" : "matrix";
    const char *op = c->dtype == tcase_matrix_dtype ? "matmul" : mlc_op_name(c->op);
    snprintf(buf, len, "%s p=%d count=%zu %s %s%s%s root=%d", mlc_algos_coll_name(c->coll), c->p,
             c->count, dt, op ? op : "?", c->inplace ? " inplace" : "",
             c->values == TV_RANDOM ? " random" : "", c->root);
}
