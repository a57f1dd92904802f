/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Recursive halving (reduce-scatter) on the virtual ranks of a fold, and the
 * algorithms built from it: Rabenseifner allreduce (halving, then the
 * mirror-image recursive-doubling allgather), Rabenseifner reduce (halving,
 * then a binomial gather of the pieces) and the "rhalving" reduce-scatter.
 *
 * The data is cut into p2 chunks. At each step a rank and its partner
 * (virtual rank XOR mask) share a range of chunks; each keeps one half,
 * sends the other, and reduces what it receives into the half it keeps.
 * Masks ascending (1, 2, 4, ...) combine contiguous groups of ranks, so
 * the op's order is kept and rank v ends with chunk bitrev(v); masks
 * descending end with chunk v but interleave the groups (commutative only).
 */
#include "build.h"

typedef struct mlc_halving {
    const mlc_fold_t *f;
    /* chunk c: bytes [off(c), off(c+1)) of the full vector */
    size_t count, esize; /* even split of count elements into p2 chunks, or ... */
    size_t blk;          /* ... blk > 0: chunk c is the blocks of the real ranks behind virtual c */
    bool ascending;
    int lo[31], hi[31];  /* chunk range held before step j */
} mlc_halving_t;

static size_t mlc_chunk_off(const mlc_halving_t *h, int c)
{
    const mlc_fold_t *f = h->f;
    if (h->blk) return (size_t)(c < f->rem ? 2 * c : c + f->rem) * h->blk;
    return mlc_blk_start(h->count, f->p2, c) * h->esize;
}

static int mlc_halving_mask(const mlc_halving_t *h, int j)
{
    return h->ascending ? 1 << j : h->f->p2 >> (j + 1);
}

/* This rank keeps the lower half at step j when its mask bit is 0. */
static void mlc_halving_split(const mlc_halving_t *h, int j, int *keep_lo, int *keep_hi,
                              int *give_lo, int *give_hi)
{
    int lo = h->lo[j], hi = h->hi[j], mid = lo + (hi - lo) / 2;
    if ((h->f->vrank & mlc_halving_mask(h, j)) == 0) {
        *keep_lo = lo, *keep_hi = mid, *give_lo = mid, *give_hi = hi;
    } else {
        *keep_lo = mid, *keep_hi = hi, *give_lo = lo, *give_hi = mid;
    }
}

/*
 * The reduce-scatter steps, rounds r0 .. r0+lg-1. The input is in_buf, the
 * running result acc_buf (both laid out as the full vector, from their base
 * offsets); acc_init says acc already holds this rank's partial result.
 * Received halves land in TMP at `land`. Returns the chunk this rank holds.
 */
static int mlc_halving_rs(mlc_bld_t *b, mlc_halving_t *h, uint32_t r0, mlc_buf_id_t in_buf,
                          size_t in_base, mlc_buf_id_t acc_buf, size_t acc_base, bool acc_init,
                          size_t land)
{
    const mlc_fold_t *f = h->f;
    int lo = 0, hi = f->p2;
    for (int j = 0; j < f->lg; j++) {
        h->lo[j] = lo, h->hi[j] = hi;
        int m = mlc_halving_mask(h, j), kl, kh, gl, gh;
        mlc_halving_split(h, j, &kl, &kh, &gl, &gh);
        int peer = mlc_fold_real(f, f->vrank ^ m);
        size_t g0 = mlc_chunk_off(h, gl), g1 = mlc_chunk_off(h, gh);
        size_t k0 = mlc_chunk_off(h, kl), k1 = mlc_chunk_off(h, kh);
        uint32_t round = r0 + (uint32_t)j;
        mlc_buf_id_t src = acc_init ? acc_buf : in_buf;
        size_t src_base = acc_init ? acc_base : in_base;
        mlc_bld_send(b, round, peer, src, src_base + g0, g1 - g0);
        mlc_bld_recv_reduce(b, round, peer, MLC_BUF_TMP, land, src, src_base + k0, acc_buf,
                            acc_base + k0, k1 - k0,
                            (f->vrank & m) == 0 ? MLC_STEP_SRC_HIGHER : 0);
        acc_init = true;
        lo = kl, hi = kh;
    }
    return lo;
}

/* The mirror image: the allgather steps, rounds r0 .. r0+lg-1, in acc. */
static void mlc_halving_ag(mlc_bld_t *b, const mlc_halving_t *h, uint32_t r0, mlc_buf_id_t acc_buf,
                           size_t acc_base)
{
    const mlc_fold_t *f = h->f;
    for (int i = 0; i < f->lg; i++) {
        int j = f->lg - 1 - i, kl, kh, gl, gh;
        mlc_halving_split(h, j, &kl, &kh, &gl, &gh);
        int peer = mlc_fold_real(f, f->vrank ^ mlc_halving_mask(h, j));
        size_t k0 = mlc_chunk_off(h, kl), k1 = mlc_chunk_off(h, kh);
        size_t g0 = mlc_chunk_off(h, gl), g1 = mlc_chunk_off(h, gh);
        mlc_bld_send(b, r0 + (uint32_t)i, peer, acc_buf, acc_base + k0, k1 - k0);
        mlc_bld_recv(b, r0 + (uint32_t)i, peer, acc_buf, acc_base + g0, g1 - g0);
    }
}

/* Binomial gather of the chunks to virtual rank vroot, rounds r0 .. r0+lg-1. */
static void mlc_halving_gather(mlc_bld_t *b, const mlc_halving_t *h, uint32_t r0, int vroot,
                               mlc_buf_id_t acc_buf, size_t acc_base)
{
    const mlc_fold_t *f = h->f;
    int w = f->vrank ^ vroot;
    for (int i = 0; i < f->lg; i++) {
        int j = f->lg - 1 - i, m = mlc_halving_mask(h, j), kl, kh, gl, gh;
        mlc_halving_split(h, j, &kl, &kh, &gl, &gh);
        int peer = mlc_fold_real(f, f->vrank ^ m);
        if (w & m) {
            size_t k0 = mlc_chunk_off(h, kl), k1 = mlc_chunk_off(h, kh);
            mlc_bld_send(b, r0 + (uint32_t)i, peer, acc_buf, acc_base + k0, k1 - k0);
            return; /* this rank's part is with its parent now */
        }
        size_t g0 = mlc_chunk_off(h, gl), g1 = mlc_chunk_off(h, gh);
        mlc_bld_recv(b, r0 + (uint32_t)i, peer, acc_buf, acc_base + g0, g1 - g0);
    }
}

/* Round 0 of a fold: the folded rank sends all n bytes; its survivor reduces them into acc. */
static void mlc_fold_in(mlc_bld_t *b, const mlc_fold_t *f, int r, mlc_buf_id_t in, size_t n,
                        mlc_buf_id_t acc, size_t acc_base, size_t land)
{
    if (f->vrank < 0)
        mlc_bld_send(b, 0, f->partner, in, 0, n);
    else if (f->partner >= 0)
        mlc_bld_recv_reduce(b, 0, f->partner, MLC_BUF_TMP, land, in, 0, acc, acc_base, n,
                            f->partner > r ? MLC_STEP_SRC_HIGHER : 0);
}

mlc_status_t mlc_build_allreduce_rabenseifner(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int r = d->rank;
    size_t n = d->count * d->esize;
    mlc_buf_id_t in = mlc_input_buf(d);
    mlc_fold_t f;
    mlc_fold_init(&f, r, d->size, -1);
    if (d->size == 1) {
        mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, n);
        return b.st;
    }
    uint32_t base = f.rem > 0 ? 1 : 0, last = base + 2 * (uint32_t)f.lg;
    mlc_fold_in(&b, &f, r, in, n, MLC_BUF_RECV, 0, 0);
    if (f.vrank < 0) {
        mlc_bld_recv(&b, last, f.partner, MLC_BUF_RECV, 0, n);
        return b.st;
    }
    mlc_halving_t h = {.f = &f, .count = d->count, .esize = d->esize, .ascending = true};
    mlc_halving_rs(&b, &h, base, in, 0, MLC_BUF_RECV, 0, f.partner >= 0, 0);
    mlc_halving_ag(&b, &h, base + (uint32_t)f.lg, MLC_BUF_RECV, 0);
    if (f.partner >= 0) mlc_bld_send(&b, last, f.partner, MLC_BUF_RECV, 0, n);
    mlc_bld_tmp(&b, n);
    return b.st;
}

double mlc_cost_allreduce_rabenseifner(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int lg = mlc_log2_floor(d->size), p2 = 1 << lg;
    double n = mlc_bytes(d), fr = mlc_frac(p2);
    double t = 2.0 * lg * m->alpha + 2.0 * n * fr * m->beta + n * fr * m->gamma;
    if (p2 != d->size) t += 2.0 * m->alpha + 2.0 * n * m->beta + n * m->gamma;
    return t;
}

/* Reduce: the root survives its pair, accumulates in recvbuf and gathers the chunks. */
mlc_status_t mlc_build_reduce_rabenseifner(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int r = d->rank;
    size_t n = d->count * d->esize;
    mlc_buf_id_t in = mlc_input_buf(d);
    mlc_fold_t f;
    mlc_fold_init(&f, r, d->size, d->root);
    if (d->size == 1) {
        mlc_bld_copy(&b, 0, in, 0, MLC_BUF_RECV, 0, n);
        return b.st;
    }
    bool root = r == d->root;
    mlc_buf_id_t acc = root ? MLC_BUF_RECV : MLC_BUF_TMP;
    size_t land = root ? 0 : n;
    uint32_t base = f.rem > 0 ? 1 : 0;
    mlc_fold_in(&b, &f, r, in, n, acc, 0, land);
    if (f.vrank < 0) return b.st;
    mlc_halving_t h = {.f = &f, .count = d->count, .esize = d->esize, .ascending = true};
    mlc_halving_rs(&b, &h, base, in, 0, acc, 0, f.partner >= 0, land);
    mlc_halving_gather(&b, &h, base + (uint32_t)f.lg, mlc_fold_virt(&f, d->root), acc, 0);
    mlc_bld_tmp(&b, land + n);
    return b.st;
}

double mlc_cost_reduce_rabenseifner(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int lg = mlc_log2_floor(d->size), p2 = 1 << lg;
    double n = mlc_bytes(d), fr = mlc_frac(p2);
    double t = 2.0 * lg * m->alpha + 2.0 * n * fr * m->beta + n * fr * m->gamma;
    if (p2 != d->size) t += m->alpha + n * (m->beta + m->gamma);
    return t;
}

/*
 * Reduce-scatter: chunk c is the blocks of the real ranks behind virtual
 * rank c. Commutative ops halve with descending masks (rank v ends with its
 * own chunk); others ascend, keeping order, and the chunks travel to their
 * owners in one last round, as do the blocks of folded ranks.
 */
mlc_status_t mlc_build_reduce_scatter_rhalving(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int r = d->rank, p = d->size;
    size_t blk = d->count * d->esize, n = blk * (size_t)p;
    if (p == 1) {
        if (!d->inplace) mlc_bld_copy(&b, 0, MLC_BUF_SEND, 0, MLC_BUF_RECV, 0, blk);
        return b.st;
    }
    mlc_fold_t f;
    mlc_fold_init(&f, r, p, -1);
    mlc_halving_t h = {.f = &f, .blk = blk, .ascending = !d->commutative};
    uint32_t base = f.rem > 0 ? 1 : 0, last = base + (uint32_t)f.lg;
    mlc_fold_in(&b, &f, r, MLC_BUF_SEND, n, MLC_BUF_TMP, 0, n);
    if (f.vrank >= 0) {
        int held = mlc_halving_rs(&b, &h, base, MLC_BUF_SEND, 0, MLC_BUF_TMP, 0, f.partner >= 0, n);
        int b0 = held < f.rem ? 2 * held : held + f.rem, b1 = held < f.rem ? b0 + 2 : b0 + 1;
        for (int blkno = b0; blkno < b1; blkno++) {
            if (blkno == r)
                mlc_bld_copy(&b, last, MLC_BUF_TMP, (size_t)blkno * blk, MLC_BUF_RECV, 0, blk);
            else
                mlc_bld_send(&b, last, blkno, MLC_BUF_TMP, (size_t)blkno * blk, blk);
        }
    }
    /* The holder of the chunk with this rank's block (bitrev is its own inverse). */
    int c = mlc_fold_virt(&f, r);
    int holder = mlc_fold_real(&f, h.ascending ? mlc_bitrev(c, f.lg) : c);
    if (holder != r) mlc_bld_recv(&b, last, holder, MLC_BUF_RECV, 0, blk);
    if (f.vrank >= 0) mlc_bld_tmp(&b, 2 * n);
    return b.st;
}

double mlc_cost_reduce_scatter_rhalving(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    int p = d->size, lg = mlc_log2_floor(p), p2 = 1 << lg;
    double n = mlc_bytes(d) * p;
    double t = lg * m->alpha + n * mlc_frac(p2) * (m->beta + m->gamma);
    bool fold = p2 != p;
    if (fold) t += m->alpha + n * (m->beta + m->gamma);
    if (fold || (!d->commutative && p > 2)) t += m->alpha + mlc_bytes(d) * m->beta;
    return t;
}
