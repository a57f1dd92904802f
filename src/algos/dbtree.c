/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Double binary tree allreduce (as NCCL): half the data is reduced up and
 * broadcast down one binary tree, the other half another tree in which the
 * first tree's leaves are inner nodes, so every rank's links carry about the
 * same load. Each half is cut into chunks that flow through the tree as a
 * pipeline. Every chunk is reduced once (at the tree nodes, children in a
 * fixed order) and then broadcast, so all ranks get the same bits. The
 * second tree is a shifted or mirrored copy: commutative ops only.
 */
#include "build.h"

#define MLC_DBTREE_CHUNK_BYTES (64u << 10)
#define MLC_DBTREE_MAX_CHUNKS 64

/*
 * NCCL's in-order binary tree on ranks 0..n-1: rank r > 0 with lowest set
 * bit 2^h has children r - 2^(h-1) and (the largest in range of) r + 2^(h-1),
 * r + 2^(h-2), ...; rank 0 is the root with the one child 2^floor(log2(n-1)).
 * In-order: the left subtree holds lower ranks, the right one higher.
 */
static void mlc_btree(int n, int r, int *up, int *d0, int *d1)
{
    int bit = 1;
    while (bit < n && !(bit & r)) bit <<= 1;
    if (r == 0) {
        *up = -1, *d0 = -1, *d1 = n > 1 ? bit >> 1 : -1;
        return;
    }
    int u = (r ^ bit) | (bit << 1);
    *up = u >= n ? r ^ bit : u;
    int low = bit >> 1;
    *d0 = low == 0 ? -1 : r - low;
    while (low != 0 && r + low >= n) low >>= 1;
    *d1 = low == 0 ? -1 : r + low;
}

/* Rounds from v's first send up to the root: leaves 0 (see mlc_btree). */
static int mlc_btree_height(int n, int v)
{
    if (v != 0) return mlc_log2_floor(mlc_lowbit(v));
    return n > 1 ? 1 + mlc_log2_floor(n - 1) : 0;
}

static int mlc_btree_depth(int n, int v)
{
    int depth = 0, up, d0, d1;
    for (; v != 0; depth++) {
        mlc_btree(n, v, &up, &d0, &d1);
        v = up;
    }
    return depth;
}

/* Tree t's virtual rank of real rank r and back: tree 1 is tree 0 shifted by
 * one rank (odd p) or mirrored (even p). */
static int mlc_dbt_virt(int t, int p, int r)
{
    if (t == 0) return r;
    return p % 2 ? mlc_mod(r - 1, p) : p - 1 - r;
}
static int mlc_dbt_real(int t, int p, int v)
{
    if (t == 0 || v < 0) return v;
    return p % 2 ? (v + 1) % p : p - 1 - v;
}

static int mlc_dbtree_chunks(size_t half_bytes)
{
    size_t k = (half_bytes + MLC_DBTREE_CHUNK_BYTES - 1) / MLC_DBTREE_CHUNK_BYTES;
    if (k < 1) k = 1;
    return k > MLC_DBTREE_MAX_CHUNKS ? MLC_DBTREE_MAX_CHUNKS : (int)k;
}

/* One tree's half: elements [e0, e0+ecount), k chunks; part0/1 are TMP
 * offsets for the children's chunks (per half). */
static void mlc_dbtree_half(mlc_bld_t *b, int t, size_t e0, size_t ecount, int k, size_t part[2])
{
    const mlc_coll_desc_t *d = b->d;
    int p = d->size, v = mlc_dbt_virt(t, p, d->rank), up, dn[2];
    size_t E = d->esize;
    mlc_buf_id_t in = mlc_input_buf(d);
    mlc_btree(p, v, &up, &dn[0], &dn[1]);
    int h = mlc_btree_height(p, v), T0 = mlc_btree_height(p, 0), depth = mlc_btree_depth(p, v);
    int hc[2] = {dn[0] >= 0 ? mlc_btree_height(p, dn[0]) : -1,
                 dn[1] >= 0 ? mlc_btree_height(p, dn[1]) : -1};
    /* Children in arrival order (ties: lower first); hc[0] >= hc[1] always. */
    int order[2] = {0, 1};
    if (dn[0] >= 0 && dn[1] >= 0 && hc[1] < hc[0]) order[0] = 1, order[1] = 0;
    bool inner = dn[0] >= 0 || dn[1] >= 0;

    for (int c = 0; c < k; c++) {
        size_t off = (e0 + mlc_blk_start(ecount, k, c)) * E, len = mlc_blk_len(ecount, k, c) * E;
        size_t rel = mlc_blk_start(ecount, k, c) * E; /* offset inside the half */
        /* Reduce up: acc = left (op) own (op) right, in recvbuf. */
        bool acc_init = false;
        for (int i = 0; i < 2; i++) {
            int ch = order[i];
            if (dn[ch] < 0) continue;
            uint32_t round = (uint32_t)(hc[ch] + c);
            mlc_bld_recv(b, round, mlc_dbt_real(t, p, dn[ch]), MLC_BUF_TMP, part[ch] + rel, len);
            mlc_bld_reduce(b, round, MLC_BUF_TMP, part[ch] + rel, acc_init ? MLC_BUF_RECV : in, off,
                           MLC_BUF_RECV, off, len, ch == 1 ? MLC_STEP_SRC_HIGHER : 0);
            acc_init = true;
        }
        if (up >= 0)
            mlc_bld_send(b, (uint32_t)(h + c), mlc_dbt_real(t, p, up), inner ? MLC_BUF_RECV : in,
                         off, len);
        else if (!inner)
            mlc_bld_copy(b, 0, in, off, MLC_BUF_RECV, off, len); /* p == 1 */
        /* Broadcast down. */
        if (up >= 0)
            mlc_bld_recv(b, (uint32_t)(T0 + depth - 1 + c), mlc_dbt_real(t, p, up), MLC_BUF_RECV,
                         off, len);
        for (int ch = 0; ch < 2; ch++)
            if (dn[ch] >= 0)
                mlc_bld_send(b, (uint32_t)(T0 + depth + c), mlc_dbt_real(t, p, dn[ch]),
                             MLC_BUF_RECV, off, len);
    }
}

mlc_status_t mlc_build_allreduce_dbtree(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size;
    size_t half_max = mlc_blk_len(d->count, 2, 0) * d->esize;
    int k = mlc_dbtree_chunks(half_max);
    size_t parts = 0, part[2][2];
    for (int t = 0; t < 2; t++) {
        int up, dn[2];
        mlc_btree(p, mlc_dbt_virt(t, p, d->rank), &up, &dn[0], &dn[1]);
        for (int ch = 0; ch < 2; ch++) part[t][ch] = dn[ch] >= 0 ? (parts++) * half_max : 0;
    }
    for (int t = 0; t < 2; t++)
        mlc_dbtree_half(&b, t, mlc_blk_start(d->count, 2, t), mlc_blk_len(d->count, 2, t), k,
                        part[t]);
    mlc_bld_tmp(&b, parts * half_max);
    return b.st;
}

/* Per pipeline round an inner node moves about four chunks of n/(2k) bytes
 * each way and reduces two; 2*height + k - 1 rounds. */
double mlc_cost_allreduce_dbtree(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    double n = mlc_bytes(d);
    int k = mlc_dbtree_chunks(mlc_blk_len(d->count, 2, 0) * d->esize);
    double rounds = 2.0 * mlc_btree_height(d->size, 0) + k - 1;
    if (rounds < 1) rounds = 1;
    return rounds * (m->alpha + n / k * (2.0 * m->beta + m->gamma));
}
