/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bruck's algorithms: allgather and alltoall in ceil(lg p) rounds for any p,
 * for small messages where latency dominates.
 */
#include "build.h"

/*
 * Allgather: in round k rank r sends the blocks it holds, r .. r+cnt-1
 * (mod p, cnt = min(2^k, p - 2^k)), to r - 2^k and receives r+2^k ..
 * r+2^k+cnt-1 from r + 2^k. Blocks go straight to their final place in
 * recvbuf, so no rotation is needed; a range that wraps past p-1 travels as
 * two messages.
 */
mlc_status_t mlc_build_allgather_bruck(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank, K = mlc_log2_ceil(p);
    size_t blk = d->count * d->esize, own = (size_t)r * blk;
    for (int k = 0; k < K; k++) {
        int dist = 1 << k, cnt = dist < p - dist ? dist : p - dist;
        int to = mlc_mod(r - dist, p), from = (r + dist) % p;
        uint32_t round = (uint32_t)k;
        /* Send blocks [r, r+cnt), receive blocks [from, from+cnt), both mod p. */
        int starts[2] = {r, from}, peers[2] = {to, from};
        for (int side = 0; side < 2; side++) {
            int a = starts[side], first = a + cnt > p ? p - a : cnt;
            int seg_a[2] = {a, 0}, seg_n[2] = {first, cnt - first};
            for (int i = 0; i < 2; i++) {
                if (seg_n[i] == 0) continue;
                size_t off = (size_t)seg_a[i] * blk, bytes = (size_t)seg_n[i] * blk;
                if (side == 1) {
                    mlc_bld_recv(&b, round, peers[side], MLC_BUF_RECV, off, bytes);
                } else if (k == 0) { /* the own block, still in sendbuf */
                    mlc_bld_send(&b, round, to, d->inplace ? MLC_BUF_RECV : MLC_BUF_SEND,
                                 d->inplace ? own : 0, bytes);
                } else {
                    mlc_bld_send(&b, round, to, MLC_BUF_RECV, off, bytes);
                }
            }
        }
    }
    if (!d->inplace) mlc_bld_copy(&b, 0, MLC_BUF_SEND, 0, MLC_BUF_RECV, own, blk);
    return b.st;
}

double mlc_cost_allgather_bruck(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size;
    return mlc_lg(p) * m->alpha + mlc_bytes(d) * p * mlc_frac(p) * m->beta;
}

/* Blocks j in [0, p) with bit k set come in runs [a, a + 2^k): the i-th run's start. */
static int mlc_run_start(int k, int i) { return (2 * i + 1) << k; }

/* How many blocks j in [0, p) have bit k set. */
static int mlc_bruck_count(int p, int k)
{
    int n = 0;
    for (int i = 0; mlc_run_start(k, i) < p; i++) {
        int a = mlc_run_start(k, i), e = a + (1 << k) < p ? a + (1 << k) : p;
        n += e - a;
    }
    return n;
}

/* Copy the blocks with bit k set between R (TMP, rotated order) and a packed buffer. */
static void mlc_bruck_pack(mlc_bld_t *b, uint32_t round, int k, size_t blk, size_t packed,
                           bool unpack)
{
    int p = b->d->size, idx = 0;
    for (int i = 0; mlc_run_start(k, i) < p; i++) {
        int a = mlc_run_start(k, i), e = a + (1 << k) < p ? a + (1 << k) : p;
        size_t rot = (size_t)a * blk, pk = packed + (size_t)idx * blk, bytes = (size_t)(e - a) * blk;
        if (unpack)
            mlc_bld_copy(b, round, MLC_BUF_TMP, pk, MLC_BUF_TMP, rot, bytes);
        else
            mlc_bld_copy(b, round, MLC_BUF_TMP, rot, MLC_BUF_TMP, pk, bytes);
        idx += e - a;
    }
}

/*
 * Alltoall: rotate so that block j is the one for rank r+j; in round k send
 * every block with bit k of j set to r + 2^k (packed into one message) and
 * put the blocks from r - 2^k in their place; at the end block j came from
 * rank r-j. TMP: rotated blocks, then the packed send and receive buffers.
 */
mlc_status_t mlc_build_alltoall_bruck(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank, K = mlc_log2_ceil(p);
    size_t blk = d->count * d->esize;
    mlc_buf_id_t in = mlc_input_buf(d);
    if (p == 1) {
        mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, blk);
        return b.st;
    }
    size_t maxcnt = (size_t)(p + 1) / 2;
    size_t P = (size_t)p * blk, U = P + maxcnt * blk;
    mlc_bld_copy(&b, 0, in, (size_t)r * blk, MLC_BUF_TMP, 0, (size_t)(p - r) * blk);
    mlc_bld_copy(&b, 0, in, 0, MLC_BUF_TMP, (size_t)(p - r) * blk, (size_t)r * blk);
    mlc_bruck_pack(&b, 0, 0, blk, P, false);
    for (int k = 0; k < K; k++) {
        uint32_t round = (uint32_t)k + 1;
        size_t bytes = (size_t)mlc_bruck_count(p, k) * blk;
        mlc_bld_send(&b, round, (r + (1 << k)) % p, MLC_BUF_TMP, P, bytes);
        mlc_bld_recv(&b, round, mlc_mod(r - (1 << k), p), MLC_BUF_TMP, U, bytes);
        mlc_bruck_pack(&b, round, k, blk, U, true);
        if (k + 1 < K) mlc_bruck_pack(&b, round, k + 1, blk, P, false);
    }
    for (int j = 0; j < p; j++)
        mlc_bld_copy(&b, (uint32_t)K, MLC_BUF_TMP, (size_t)j * blk, MLC_BUF_RECV,
                     (size_t)mlc_mod(r - j, p) * blk, blk);
    mlc_bld_tmp(&b, U + maxcnt * blk);
    return b.st;
}

/* Each round moves about half the data; the local rotations and (un)packing
 * copy (2 + lg p) n bytes, priced at beta. */
double mlc_cost_alltoall_bruck(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    double K = mlc_lg(d->size), n = mlc_bytes(d) * d->size;
    return K * m->alpha + (K / 2.0 + 2.0 + K) * n * m->beta;
}
