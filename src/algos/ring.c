/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ring algorithms: allreduce (reduce-scatter then allgather around the
 * ring), reduce-scatter and allgather(v). Every block is reduced once, by
 * the ranks around the ring in turn, so every rank gets the same bits; the
 * ring's order wraps around, so reductions are for commutative ops only.
 */
#include "build.h"

/*
 * Allreduce: count split into p blocks. Reduce-scatter round s: send block
 * (r-s) to the right, receive block (r-s-1) from the left and reduce it with
 * this rank's own block into recvbuf. After p-1 rounds rank r holds block
 * r+1 fully reduced; p-1 allgather rounds spread the blocks.
 */
mlc_status_t mlc_build_allreduce_ring(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank;
    mlc_buf_id_t in = mlc_input_buf(d);
    mlc_blocks_t B = {d->count, d->esize, p, NULL, NULL};
    if (p == 1) {
        mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, d->count * d->esize);
        return b.st;
    }
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    for (int k = 0; k < p - 1; k++) {
        int sb = mlc_mod(r - k, p), rb = mlc_mod(r - k - 1, p);
        /* Round 0 sends this rank's own data; later rounds the partial sums in recvbuf. */
        mlc_bld_send(&b, (uint32_t)k, right, k == 0 ? in : MLC_BUF_RECV, mlc_blocks_off(&B, sb),
                     mlc_blocks_len(&B, sb));
        mlc_bld_recv_reduce(&b, (uint32_t)k, left, MLC_BUF_TMP, 0, in, mlc_blocks_off(&B, rb),
                            MLC_BUF_RECV, mlc_blocks_off(&B, rb), mlc_blocks_len(&B, rb), 0);
    }
    mlc_bld_tmp(&b, mlc_blocks_len(&B, 0));
    mlc_ring_allgather(&b, (uint32_t)(p - 1), r, p, 0, 1, &B, MLC_BUF_RECV,
                       mlc_blocks_off(&B, (r + 1) % p));
    return b.st;
}

double mlc_cost_allreduce_ring(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size;
    double n = mlc_bytes(d);
    return 2.0 * (p - 1) * m->alpha + 2.0 * n * mlc_frac(p) * m->beta + n * mlc_frac(p) * m->gamma;
}

/*
 * Reduce-scatter: p blocks of count elements. Round s sends block (r-s-1) and
 * receives block (r-s-2), reducing it with this rank's own block; partial
 * blocks live in two alternating TMP parts, and the last round (block r)
 * reduces straight into recvbuf.
 */
mlc_status_t mlc_build_reduce_scatter_ring(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank;
    size_t blk = d->count * d->esize;
    if (p == 1) {
        if (!d->inplace) mlc_bld_copy(&b, 0, MLC_BUF_SEND, 0, MLC_BUF_RECV, 0, blk);
        return b.st;
    }
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    for (int k = 0; k < p - 1; k++) {
        int sb = mlc_mod(r - k - 1, p), rb = mlc_mod(r - k - 2, p);
        size_t part = (size_t)(k % 2) * blk, prev = (size_t)((k + 1) % 2) * blk;
        if (k == 0)
            mlc_bld_send(&b, 0, right, MLC_BUF_SEND, (size_t)sb * blk, blk);
        else
            mlc_bld_send(&b, (uint32_t)k, right, MLC_BUF_TMP, prev, blk);
        if (k == p - 2) /* rb == r: the result */
            mlc_bld_recv_reduce(&b, (uint32_t)k, left, MLC_BUF_TMP, part, MLC_BUF_SEND,
                                (size_t)rb * blk, MLC_BUF_RECV, 0, blk, 0);
        else
            mlc_bld_recv_reduce(&b, (uint32_t)k, left, MLC_BUF_TMP, part, MLC_BUF_SEND,
                                (size_t)rb * blk, MLC_BUF_TMP, part, blk, 0);
    }
    mlc_bld_tmp(&b, (p > 2 ? 2 : 1) * blk);
    return b.st;
}

double mlc_cost_reduce_scatter_ring(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size;
    double n = mlc_bytes(d) * p;
    return (p - 1) * m->alpha + n * mlc_frac(p) * (m->beta + m->gamma);
}

static mlc_status_t mlc_allgather_ring_any(const mlc_coll_desc_t *d, mlc_sched_t *s,
                                           const mlc_blocks_t *B)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int r = d->rank;
    size_t own = mlc_blocks_off(B, r), len = mlc_blocks_len(B, r);
    mlc_buf_id_t src = d->inplace ? MLC_BUF_RECV : MLC_BUF_SEND;
    size_t src_off = d->inplace ? own : 0;
    mlc_ring_allgather(&b, 0, r, d->size, 0, 0, B, src, src_off);
    /* After round 0 the first send of the own block has completed. */
    if (!d->inplace) mlc_bld_copy(&b, 0, MLC_BUF_SEND, 0, MLC_BUF_RECV, own, len);
    return b.st;
}

mlc_status_t mlc_build_allgather_ring(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_blocks_t B = {d->count * (size_t)d->size, d->esize, d->size, NULL, NULL};
    return mlc_allgather_ring_any(d, s, &B);
}

double mlc_cost_allgather_ring(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size;
    return (p - 1) * m->alpha + mlc_bytes(d) * p * mlc_frac(p) * m->beta;
}

mlc_status_t mlc_build_allgatherv_ring(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_blocks_t B = {0, d->esize, d->size, d->counts, d->displs};
    return mlc_allgather_ring_any(d, s, &B);
}

/* Uses the total of the counts (the same on every rank); without counts
 * (size queries) every rank's count is taken as d->count. */
double mlc_cost_allgatherv_ring(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size;
    double n = (double)d->count * p;
    if (d->counts) {
        n = 0;
        for (int i = 0; i < p; i++) n += (double)d->counts[i];
    }
    return (p - 1) * m->alpha + n * (double)d->esize * mlc_frac(p) * m->beta;
}
