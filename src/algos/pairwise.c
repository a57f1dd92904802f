/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pairwise exchange: p rounds in which the ranks pair up, and the
 * reduce-scatter that reduces its blocks in rank order.
 */
#include "build.h"
#include "a2a.h"

/*
 * Alltoall(v): in round s rank r swaps blocks with j = (s - r) mod p (and
 * j's partner is r), so in place a received block only has to wait in TMP
 * until the round's send of the same block is done.
 */
static mlc_status_t mlc_alltoall_pairwise_any(const mlc_coll_desc_t *d, mlc_sched_t *s,
                                              const mlc_a2a_t *A)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank;
    size_t tmp = 0;
    for (int k = 0; k < p; k++) {
        int j = mlc_mod(k - r, p);
        uint32_t round = (uint32_t)k;
        size_t roff = mlc_blocks_off(&A->recv, j), rlen = mlc_blocks_len(&A->recv, j);
        if (j == r) {
            mlc_bld_copy(&b, round, A->src, mlc_blocks_off(&A->send, r), MLC_BUF_RECV, roff, rlen);
            continue;
        }
        mlc_bld_send(&b, round, j, A->src, mlc_blocks_off(&A->send, j), mlc_blocks_len(&A->send, j));
        if (d->inplace) {
            mlc_bld_recv(&b, round, j, MLC_BUF_TMP, 0, rlen);
            mlc_bld_copy(&b, round, MLC_BUF_TMP, 0, MLC_BUF_RECV, roff, rlen);
            if (rlen > tmp) tmp = rlen;
        } else {
            mlc_bld_recv(&b, round, j, MLC_BUF_RECV, roff, rlen);
        }
    }
    mlc_bld_tmp(&b, tmp);
    return b.st;
}

static double mlc_cost_pairwise(int p, double total, const mlc_cost_model_t *m)
{
    return (p - 1) * (m->alpha + total / p * m->beta);
}

mlc_status_t mlc_build_alltoall_pairwise(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_a2a_t A;
    mlc_a2a_init(&A, d);
    return mlc_alltoall_pairwise_any(d, s, &A);
}

double mlc_cost_alltoall_pairwise(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_pairwise(d->size, mlc_bytes(d) * d->size, m);
}

mlc_status_t mlc_build_alltoallv_pairwise(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_a2a_t A;
    mlc_a2a_init(&A, d);
    return mlc_alltoall_pairwise_any(d, s, &A);
}

/* counts differ between ranks: the estimate takes d->count per peer. */
double mlc_cost_alltoallv_pairwise(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_pairwise(d->size, mlc_bytes(d) * d->size, m);
}

/*
 * Reduce-scatter: in round s send block r+s to rank r+s and receive block r
 * of rank r-s into a TMP part. At the end the p-1 received blocks and this
 * rank's own are reduced in rank order: lower ranks' into one part, higher
 * ranks' into another, then lower (op) own (op) higher into recvbuf.
 */
mlc_status_t mlc_build_reduce_scatter_pairwise(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank;
    size_t blk = d->count * d->esize, own = (size_t)r * blk;
    if (p == 1) {
        if (!d->inplace) mlc_bld_copy(&b, 0, MLC_BUF_SEND, 0, MLC_BUF_RECV, 0, blk);
        return b.st;
    }
#define MLC_TMP_PART(j) ((size_t)((j) < r ? (j) : (j) - 1) * blk)
    for (int k = 1; k < p; k++) {
        int to = (r + k) % p, from = mlc_mod(r - k, p);
        uint32_t round = (uint32_t)(k - 1);
        mlc_bld_send(&b, round, to, MLC_BUF_SEND, (size_t)to * blk, blk);
        mlc_bld_recv(&b, round, from, MLC_BUF_TMP, MLC_TMP_PART(from), blk);
    }
    uint32_t last = (uint32_t)(p - 2);
    for (int j = 1; j < r; j++) /* lower = x0 (op) ... (op) x(r-1) */
        mlc_bld_reduce(&b, last, MLC_BUF_TMP, MLC_TMP_PART(j), MLC_BUF_TMP, MLC_TMP_PART(0), MLC_BUF_TMP,
                       MLC_TMP_PART(0), blk, MLC_STEP_SRC_HIGHER);
    for (int j = p - 2; j > r; j--) /* higher = x(r+1) (op) ... (op) x(p-1) */
        mlc_bld_reduce(&b, last, MLC_BUF_TMP, MLC_TMP_PART(j), MLC_BUF_TMP, MLC_TMP_PART(p - 1),
                       MLC_BUF_TMP, MLC_TMP_PART(p - 1), blk, 0);
    if (r > 0) {
        mlc_bld_reduce(&b, last, MLC_BUF_TMP, MLC_TMP_PART(0), MLC_BUF_SEND, own, MLC_BUF_RECV, 0, blk, 0);
        if (r < p - 1)
            mlc_bld_reduce(&b, last, MLC_BUF_TMP, MLC_TMP_PART(p - 1), MLC_BUF_RECV, 0, MLC_BUF_RECV, 0,
                           blk, MLC_STEP_SRC_HIGHER);
    } else {
        mlc_bld_reduce(&b, last, MLC_BUF_TMP, MLC_TMP_PART(p - 1), MLC_BUF_SEND, own, MLC_BUF_RECV, 0,
                       blk, MLC_STEP_SRC_HIGHER);
    }
#undef MLC_TMP_PART
    mlc_bld_tmp(&b, (size_t)(p - 1) * blk);
    return b.st;
}

double mlc_cost_reduce_scatter_pairwise(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size;
    double blk = mlc_bytes(d);
    return (p - 1) * (m->alpha + blk * m->beta) + (p - 1) * blk * m->gamma;
}
