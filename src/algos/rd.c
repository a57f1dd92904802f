/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Recursive doubling: allreduce and allgather in lg p rounds of pairwise
 * exchanges (partner = rank XOR 2^k). A rank count that is not a power of
 * two is folded first (build.h): each extra rank hands its data to its pair
 * partner in round 0 and gets the result back in the last round.
 */
#include "build.h"

/*
 * Allreduce: both partners combine lower-ranked data (op) higher-ranked data,
 * so they compute identical bits and the order of a non-commutative op is
 * kept (each rank's accumulator covers an aligned group of virtual ranks).
 */
mlc_status_t mlc_build_allreduce_rd(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int r = d->rank;
    size_t n = d->count * d->esize;
    mlc_buf_id_t in = mlc_input_buf(d);
    mlc_fold_t f;
    mlc_fold_init(&f, r, d->size, -1);
    uint32_t round = 0;
    bool acc = false; /* recvbuf holds this rank's running result */

    if (f.rem > 0) {
        if (f.vrank < 0) {
            mlc_bld_send(&b, 0, f.partner, in, 0, n);
            mlc_bld_recv(&b, (uint32_t)f.lg + 1, f.partner, MLC_BUF_RECV, 0, n);
            return b.st;
        }
        if (f.partner >= 0) {
            mlc_bld_recv_reduce(&b, 0, f.partner, MLC_BUF_TMP, 0, in, 0, MLC_BUF_RECV, 0, n,
                                f.partner > r ? MLC_STEP_SRC_HIGHER : 0);
            acc = true;
        }
        round = 1;
    }
    for (int k = 0; k < f.lg; k++, round++) {
        int peer = mlc_fold_real(&f, f.vrank ^ (1 << k));
        uint8_t fl = peer > r ? MLC_STEP_SRC_HIGHER : 0;
        mlc_bld_send(&b, round, peer, acc ? MLC_BUF_RECV : in, 0, n);
        if (!acc && in != MLC_BUF_RECV) {
            /* recvbuf is not being sent: reduce the moment the data lands. */
            mlc_bld_recv_reduce(&b, round, peer, MLC_BUF_TMP, 0, in, 0, MLC_BUF_RECV, 0, n, fl);
        } else {
            mlc_bld_recv(&b, round, peer, MLC_BUF_TMP, 0, n);
            mlc_bld_reduce(&b, round, MLC_BUF_TMP, 0, MLC_BUF_RECV, 0, MLC_BUF_RECV, 0, n, fl);
        }
        acc = true;
    }
    if (!acc) mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, n); /* p == 1 */
    if (f.rem > 0 && f.partner >= 0) mlc_bld_send(&b, round, f.partner, MLC_BUF_RECV, 0, n);
    if (d->size > 1) mlc_bld_tmp(&b, n);
    return b.st;
}

double mlc_cost_allreduce_rd(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int lg = mlc_log2_floor(d->size), fold = d->size != (1 << lg);
    double n = mlc_bytes(d);
    return (lg + 2 * fold) * m->alpha + n * (lg + 2 * fold) * m->beta + n * (lg + fold) * m->gamma;
}

/* First block of virtual rank v's data (v == p2 gives p). */
static int mlc_vblock(const mlc_fold_t *f, int v) { return v < f->rem ? 2 * v : v + f->rem; }

/*
 * Allgather: virtual rank v's group at step k is the aligned 2^k virtual
 * ranks around v, whose blocks are contiguous in recvbuf; partners swap
 * their groups' ranges.
 */
mlc_status_t mlc_build_allgather_rd(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int r = d->rank;
    size_t blk = d->count * d->esize, own = (size_t)r * blk;
    mlc_fold_t f;
    mlc_fold_init(&f, r, d->size, -1);
    mlc_buf_id_t src = d->inplace ? MLC_BUF_RECV : MLC_BUF_SEND;
    size_t src_off = d->inplace ? own : 0;

    /* Round 0: folded ranks hand their block over (and get everything back at
     * the end); everyone else puts its own block into recvbuf. */
    if (f.rem > 0 && f.vrank < 0) {
        mlc_bld_send(&b, 0, f.partner, src, src_off, blk);
        mlc_bld_recv(&b, (uint32_t)f.lg + 1, f.partner, MLC_BUF_RECV, 0, blk * (size_t)d->size);
        return b.st;
    }
    if (f.partner >= 0) mlc_bld_recv(&b, 0, f.partner, MLC_BUF_RECV, (size_t)f.partner * blk, blk);
    mlc_bld_copy(&b, 0, src, src_off, MLC_BUF_RECV, own, blk);
    uint32_t round = 1;
    for (int k = 0; k < f.lg; k++, round++) {
        int mine = (f.vrank >> k) << k, theirs = mine ^ (1 << k);
        int peer = mlc_fold_real(&f, f.vrank ^ (1 << k));
        size_t m0 = (size_t)mlc_vblock(&f, mine), m1 = (size_t)mlc_vblock(&f, mine + (1 << k));
        size_t t0 = (size_t)mlc_vblock(&f, theirs), t1 = (size_t)mlc_vblock(&f, theirs + (1 << k));
        mlc_bld_send(&b, round, peer, MLC_BUF_RECV, m0 * blk, (m1 - m0) * blk);
        mlc_bld_recv(&b, round, peer, MLC_BUF_RECV, t0 * blk, (t1 - t0) * blk);
    }
    if (f.partner >= 0) mlc_bld_send(&b, round, f.partner, MLC_BUF_RECV, 0, blk * (size_t)d->size);
    return b.st;
}

double mlc_cost_allgather_rd(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size, lg = mlc_log2_floor(p), fold = p != (1 << lg);
    double n = mlc_bytes(d) * p;
    double t = lg * m->alpha + n * (double)((1 << lg) - 1) / (double)(1 << lg) * m->beta;
    if (fold) t += 2 * m->alpha + (mlc_bytes(d) + n) * m->beta;
    return t;
}
