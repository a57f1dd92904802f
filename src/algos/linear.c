/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Linear algorithms: every message goes directly between the two ranks
 * concerned, all posted in one round. Gather(v), scatter(v) and alltoall(v).
 */
#include "build.h"
#include "a2a.h"

static double mlc_cost_linear(int p, double total, const mlc_cost_model_t *m)
{
    return (p - 1) * m->alpha + total * mlc_frac(p) * m->beta;
}

/* Root: block j of recvbuf (block layout B) from rank j; others: send sendcount elements. */
static mlc_status_t mlc_gather_linear_any(const mlc_coll_desc_t *d, mlc_sched_t *s,
                                          const mlc_blocks_t *B)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank, root = d->root;
    if (r != root) {
        mlc_bld_send(&b, 0, root, MLC_BUF_SEND, 0, d->count * d->esize);
        return b.st;
    }
    for (int i = 1; i < p; i++) {
        int j = (root + i) % p;
        mlc_bld_recv(&b, 0, j, MLC_BUF_RECV, mlc_blocks_off(B, j), mlc_blocks_len(B, j));
    }
    if (!d->inplace)
        mlc_bld_copy(&b, 0, MLC_BUF_SEND, 0, MLC_BUF_RECV, mlc_blocks_off(B, r),
                     mlc_blocks_len(B, r));
    return b.st;
}

/* Root: send block j of sendbuf (layout B) to rank j; others: receive recvcount elements. */
static mlc_status_t mlc_scatter_linear_any(const mlc_coll_desc_t *d, mlc_sched_t *s,
                                           const mlc_blocks_t *B)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank, root = d->root;
    if (r != root) {
        mlc_bld_recv(&b, 0, root, MLC_BUF_RECV, 0, d->count * d->esize);
        return b.st;
    }
    for (int i = 1; i < p; i++) {
        int j = (root + i) % p;
        mlc_bld_send(&b, 0, j, MLC_BUF_SEND, mlc_blocks_off(B, j), mlc_blocks_len(B, j));
    }
    if (!d->inplace)
        mlc_bld_copy(&b, 0, MLC_BUF_SEND, mlc_blocks_off(B, r), MLC_BUF_RECV, 0,
                     mlc_blocks_len(B, r));
    return b.st;
}

mlc_status_t mlc_build_gather_linear(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_blocks_t B = {d->count * (size_t)d->size, d->esize, d->size, NULL, NULL};
    return mlc_gather_linear_any(d, s, &B);
}

double mlc_cost_gather_linear(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_linear(d->size, mlc_bytes(d) * d->size, m);
}

mlc_status_t mlc_build_gatherv_linear(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_blocks_t B = {0, d->esize, d->size, d->counts, d->displs};
    return mlc_gather_linear_any(d, s, &B);
}

/* counts are known at the root only: the estimate takes every rank's count as d->count. */
double mlc_cost_gatherv_linear(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_linear(d->size, mlc_bytes(d) * d->size, m);
}

mlc_status_t mlc_build_scatter_linear(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_blocks_t B = {d->count * (size_t)d->size, d->esize, d->size, NULL, NULL};
    return mlc_scatter_linear_any(d, s, &B);
}

double mlc_cost_scatter_linear(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_linear(d->size, mlc_bytes(d) * d->size, m);
}

mlc_status_t mlc_build_scatterv_linear(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_blocks_t B = {0, d->esize, d->size, d->counts, d->displs};
    return mlc_scatter_linear_any(d, s, &B);
}

double mlc_cost_scatterv_linear(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_linear(d->size, mlc_bytes(d) * d->size, m);
}

/*
 * Alltoall(v): receive from r-i and send to r+i for i = 1..p-1, all at
 * once. In place, the arriving blocks wait in TMP until every send is done.
 */
static mlc_status_t mlc_alltoall_linear_any(const mlc_coll_desc_t *d, mlc_sched_t *s,
                                            const mlc_a2a_t *A)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank;
    size_t tmp = 0;
    for (int i = 1; i < p; i++) {
        int to = (r + i) % p, from = mlc_mod(r - i, p);
        size_t rlen = mlc_blocks_len(&A->recv, from);
        if (d->inplace) {
            mlc_bld_recv(&b, 0, from, MLC_BUF_TMP, tmp, rlen);
            mlc_bld_copy(&b, 0, MLC_BUF_TMP, tmp, MLC_BUF_RECV, mlc_blocks_off(&A->recv, from), rlen);
            tmp += rlen;
        } else {
            mlc_bld_recv(&b, 0, from, MLC_BUF_RECV, mlc_blocks_off(&A->recv, from), rlen);
        }
        mlc_bld_send(&b, 0, to, A->src, mlc_blocks_off(&A->send, to), mlc_blocks_len(&A->send, to));
    }
    mlc_bld_copy(&b, 0, A->src, mlc_blocks_off(&A->send, r), MLC_BUF_RECV,
                 mlc_blocks_off(&A->recv, r), mlc_blocks_len(&A->recv, r));
    mlc_bld_tmp(&b, tmp);
    return b.st;
}

mlc_status_t mlc_build_alltoall_linear(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_a2a_t A;
    mlc_a2a_init(&A, d);
    return mlc_alltoall_linear_any(d, s, &A);
}

double mlc_cost_alltoall_linear(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_linear(d->size, mlc_bytes(d) * d->size, m);
}

mlc_status_t mlc_build_alltoallv_linear(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_a2a_t A;
    mlc_a2a_init(&A, d);
    return mlc_alltoall_linear_any(d, s, &A);
}

/* counts differ between ranks: the estimate takes d->count per peer. */
double mlc_cost_alltoallv_linear(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_cost_linear(d->size, mlc_bytes(d) * d->size, m);
}
