/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Binomial trees over ranks relative to a root (vr = (rank - root) mod p):
 * vr's parent is vr minus its lowest set bit, and vr's subtree is the
 * relative ranks [vr, vr + lowbit(vr)). Broadcast, reduce, allreduce
 * (reduce to rank 0, then broadcast), gather and scatter, and the
 * scatter + ring-allgather broadcast for large messages.
 */
#include "build.h"

static int mlc_rel(int r, int root, int p) { return mlc_mod(r - root, p); }
static int mlc_abs(int v, int root, int p) { return (v + root) % p; }
/* Size of vr's subtree. */
static int mlc_subtree(int vr, int p)
{
    if (vr == 0) return p;
    int sz = mlc_lowbit(vr);
    return sz < p - vr ? sz : p - vr;
}

/* Binomial broadcast of recvbuf from tree root `root`, rounds r0 .. r0+K-1;
 * the root sends from src. */
static void mlc_binomial_bcast(mlc_bld_t *b, uint32_t r0, int root, mlc_buf_id_t src, size_t n)
{
    int p = b->d->size, vr = mlc_rel(b->d->rank, root, p), K = mlc_log2_ceil(p);
    if (vr > 0) {
        int k = mlc_log2_floor(vr);
        mlc_bld_recv(b, r0 + (uint32_t)k, mlc_abs(vr - (1 << k), root, p), MLC_BUF_RECV, 0, n);
    }
    for (int k = 0; k < K; k++)
        if (vr < (1 << k) && vr + (1 << k) < p)
            mlc_bld_send(b, r0 + (uint32_t)k, mlc_abs(vr + (1 << k), root, p),
                         vr == 0 ? src : MLC_BUF_RECV, 0, n);
}

mlc_status_t mlc_build_bcast_binomial(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    size_t n = d->count * d->esize;
    mlc_buf_id_t in = mlc_input_buf(d);
    mlc_binomial_bcast(&b, 0, d->root, in, n);
    if (d->rank == d->root && d->has_recv) mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, n);
    return b.st;
}

double mlc_cost_bcast_binomial(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_lg(d->size) * (m->alpha + mlc_bytes(d) * m->beta);
}

/*
 * Broadcast for large messages (van de Geijn): a binomial scatter gives
 * relative rank j block j of the message, then a ring allgather over the
 * relative ranks completes every copy.
 */
mlc_status_t mlc_build_bcast_scatter_allgather(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, root = d->root, vr = mlc_rel(d->rank, root, p), K = mlc_log2_ceil(p);
    mlc_blocks_t B = {d->count, d->esize, p, NULL, NULL};
    mlc_buf_id_t in = mlc_input_buf(d);
    for (int t = 0; t < K; t++) {
        int mask = 1 << (K - 1 - t);
        uint32_t round = (uint32_t)t;
        if (vr % (2 * mask) == 0 && vr + mask < p) {
            int hi = vr + 2 * mask < p ? vr + 2 * mask : p;
            size_t o0 = mlc_blocks_off(&B, vr + mask), o1 = mlc_blocks_off(&B, hi);
            mlc_bld_send(&b, round, mlc_abs(vr + mask, root, p), vr == 0 ? in : MLC_BUF_RECV, o0,
                         o1 - o0);
        }
        if (vr != 0 && mlc_lowbit(vr) == mask) {
            int hi = vr + mask < p ? vr + mask : p;
            size_t o0 = mlc_blocks_off(&B, vr), o1 = mlc_blocks_off(&B, hi);
            mlc_bld_recv(&b, round, mlc_abs(vr - mask, root, p), MLC_BUF_RECV, o0, o1 - o0);
        }
    }
    if (vr == 0) mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, mlc_blocks_len(&B, 0));
    mlc_ring_allgather(&b, (uint32_t)K, vr, p, root, 0, &B, MLC_BUF_RECV, mlc_blocks_off(&B, vr));
    return b.st;
}

double mlc_cost_bcast_scatter_allgather(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size;
    return (mlc_lg(p) + p - 1) * m->alpha + 2.0 * mlc_bytes(d) * mlc_frac(p) * m->beta;
}

/*
 * Binomial reduce to tree root `troot` (rounds 0 .. K-1): each node reduces
 * its children's partial results, lowest subtree first, into acc (child
 * data is from higher ranks: SRC_HIGHER) and sends acc to its parent.
 * Returns whether acc holds a result (false when the node had no child and
 * its input stands for itself).
 */
static bool mlc_binomial_reduce(mlc_bld_t *b, int troot, mlc_buf_id_t in, mlc_buf_id_t acc,
                                size_t land, size_t n)
{
    int p = b->d->size, vr = mlc_rel(b->d->rank, troot, p);
    int span = vr == 0 ? p : mlc_lowbit(vr);
    bool acc_init = false;
    for (int j = 0; (1 << j) < span && vr + (1 << j) < p; j++) {
        mlc_bld_recv_reduce(b, (uint32_t)j, mlc_abs(vr + (1 << j), troot, p), MLC_BUF_TMP, land,
                            acc_init ? acc : in, 0, acc, 0, n, MLC_STEP_SRC_HIGHER);
        acc_init = true;
    }
    if (vr != 0)
        mlc_bld_send(b, (uint32_t)mlc_log2_floor(span), mlc_abs(vr - span, troot, p),
                     acc_init ? acc : in, 0, n);
    return acc_init;
}

/*
 * Reduce: rooted at the root for commutative ops. A non-commutative op
 * needs the tree over plain rank order (subtrees are then contiguous rank
 * ranges): it is rooted at rank 0, which sends the result to the root.
 */
mlc_status_t mlc_build_reduce_binomial(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank, root = d->root, troot = d->commutative ? root : 0;
    size_t n = d->count * d->esize;
    mlc_buf_id_t in = mlc_input_buf(d);
    bool is_root = r == root;
    mlc_buf_id_t acc = is_root ? MLC_BUF_RECV : MLC_BUF_TMP;
    size_t land = is_root ? 0 : n;
    bool acc_init = mlc_binomial_reduce(&b, troot, in, acc, land, n);
    if (acc_init) mlc_bld_tmp(&b, land + n);
    uint32_t K = (uint32_t)mlc_log2_ceil(p);
    if (r == troot) {
        if (is_root) {
            if (!acc_init) mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, n);
        } else {
            mlc_bld_send(&b, K, root, acc_init ? acc : in, 0, n);
        }
    } else if (is_root) {
        mlc_bld_recv(&b, K, troot, MLC_BUF_RECV, 0, n);
    }
    return b.st;
}

double mlc_cost_reduce_binomial(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    double n = mlc_bytes(d);
    double t = mlc_lg(d->size) * (m->alpha + n * (m->beta + m->gamma));
    if (!d->commutative && d->root != 0) t += m->alpha + n * m->beta;
    return t;
}

/* Allreduce: binomial reduce to rank 0 in recvbuf, then binomial broadcast. */
mlc_status_t mlc_build_allreduce_binomial(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size;
    size_t n = d->count * d->esize;
    mlc_buf_id_t in = mlc_input_buf(d);
    bool acc_init = mlc_binomial_reduce(&b, 0, in, MLC_BUF_RECV, 0, n);
    if (acc_init) mlc_bld_tmp(&b, n);
    if (p == 1) mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, n);
    mlc_binomial_bcast(&b, (uint32_t)mlc_log2_ceil(p), 0, MLC_BUF_RECV, n);
    return b.st;
}

double mlc_cost_allreduce_binomial(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    double n = mlc_bytes(d), K = mlc_lg(d->size);
    return 2.0 * K * (m->alpha + n * m->beta) + K * n * m->gamma;
}

/*
 * Transfers between a node and the root are in the root's real block order,
 * where a relative block range may wrap past rank p-1: it then travels as
 * two messages. Relative range [a, a+len) -> first segment's length.
 */
static int mlc_first_seg(int p, int root, int a, int len)
{
    int start = (root + a) % p;
    return start + len > p ? p - start : len;
}

/* One side of a transfer of relative blocks [a, a+len); `at_root` says this
 * side's buffer is the root's (real block order), otherwise the buffer
 * holds the blocks from relative block `base` on at `boff`. */
static void mlc_xfer(mlc_bld_t *b, bool send, uint32_t round, int peer, bool at_root, int wraps_root,
                     int a, int len, mlc_buf_id_t buf, size_t boff, int base, size_t blk)
{
    int p = b->d->size, first = wraps_root ? mlc_first_seg(p, b->d->root, a, len) : len;
    int seg_a[2] = {a, a + first}, seg_len[2] = {first, len - first};
    for (int i = 0; i < 2; i++) {
        if (seg_len[i] == 0 && i == 1) break;
        size_t off = at_root ? (size_t)mlc_abs(seg_a[i], b->d->root, p) * blk
                             : boff + (size_t)(seg_a[i] - base) * blk;
        size_t bytes = (size_t)seg_len[i] * blk;
        if (send)
            mlc_bld_send(b, round, peer, buf, off, bytes);
        else
            mlc_bld_recv(b, round, peer, buf, off, bytes);
    }
}

/* Gather: each node collects its subtree's blocks in TMP (relative order) and passes them up. */
mlc_status_t mlc_build_gather_binomial(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, root = d->root, vr = mlc_rel(d->rank, root, p);
    size_t blk = d->count * d->esize;
    int sz = mlc_subtree(vr, p), span = vr == 0 ? p : mlc_lowbit(vr);
    for (int j = 0; (1 << j) < span && vr + (1 << j) < p; j++) {
        int c = vr + (1 << j), csz = mlc_subtree(c, p);
        mlc_xfer(&b, false, (uint32_t)j, mlc_abs(c, root, p), vr == 0, vr == 0, c, csz,
                 vr == 0 ? MLC_BUF_RECV : MLC_BUF_TMP, 0, vr, blk);
    }
    if (vr == 0) {
        if (!d->inplace) mlc_bld_copy(&b, 0, MLC_BUF_SEND, 0, MLC_BUF_RECV, (size_t)root * blk, blk);
        return b.st;
    }
    int parent = vr - span;
    mlc_buf_id_t src = sz == 1 ? MLC_BUF_SEND : MLC_BUF_TMP;
    if (sz > 1) {
        mlc_bld_copy(&b, 0, MLC_BUF_SEND, 0, MLC_BUF_TMP, 0, blk);
        mlc_bld_tmp(&b, (size_t)sz * blk);
    }
    mlc_xfer(&b, true, (uint32_t)mlc_log2_floor(span), mlc_abs(parent, root, p), false, parent == 0,
             vr, sz, src, 0, vr, blk);
    return b.st;
}

double mlc_cost_gather_binomial(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size;
    return mlc_lg(p) * m->alpha + mlc_bytes(d) * p * mlc_frac(p) * m->beta;
}

/* Scatter: the reverse; a node receives its subtree's blocks, keeps its own, passes the rest on. */
mlc_status_t mlc_build_scatter_binomial(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, root = d->root, vr = mlc_rel(d->rank, root, p), K = mlc_log2_ceil(p);
    size_t blk = d->count * d->esize;
    int sz = mlc_subtree(vr, p), span = vr == 0 ? p : mlc_lowbit(vr);
    mlc_buf_id_t held = vr == 0 ? MLC_BUF_SEND : (sz > 1 ? MLC_BUF_TMP : MLC_BUF_RECV);
    if (vr == 0) {
        if (!d->inplace) mlc_bld_copy(&b, 0, MLC_BUF_SEND, (size_t)root * blk, MLC_BUF_RECV, 0, blk);
    } else {
        int parent = vr - span;
        uint32_t round = (uint32_t)(K - 1 - mlc_log2_floor(span));
        mlc_xfer(&b, false, round, mlc_abs(parent, root, p), false, parent == 0, vr, sz, held, 0, vr,
                 blk);
        if (sz > 1) {
            mlc_bld_copy(&b, round, MLC_BUF_TMP, 0, MLC_BUF_RECV, 0, blk);
            mlc_bld_tmp(&b, (size_t)sz * blk);
        }
    }
    for (int t = 0; t < K; t++) {
        int mask = 1 << (K - 1 - t), c = vr + mask;
        if (mask >= span || c >= p) continue;
        mlc_xfer(&b, true, (uint32_t)t, mlc_abs(c, root, p), vr == 0, vr == 0, c, mlc_subtree(c, p),
                 held, 0, vr, blk);
    }
    return b.st;
}

double mlc_cost_scatter_binomial(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_gather_binomial(d, m);
}
