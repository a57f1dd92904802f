/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to src/algos: the list of algorithms and the helpers their
 * schedule builders share (appending steps with a sticky status, block
 * partitions, the fold that reduces a non-power-of-two rank count to a
 * power of two).
 */
#ifndef MLC_ALGOS_BUILD_H
#define MLC_ALGOS_BUILD_H
#include "sched.h"
#include "select.h"

/*
 * Every algorithm, one list per collective, in selector tie-break order:
 * X(collective, name, function suffix, order preserving). The suffix names
 * mlc_build_<suffix> (the schedule) and mlc_cost_<suffix> (its predicted
 * time), both defined in the algorithm family's file.
 */
#define MLC_ALGOS_BROADCAST(X)                                                  \
    X(MLC_COLL_BROADCAST, "binomial", bcast_binomial, true)                     \
    X(MLC_COLL_BROADCAST, "scatter_allgather", bcast_scatter_allgather, true)
#define MLC_ALGOS_REDUCE(X)                                                     \
    X(MLC_COLL_REDUCE, "binomial", reduce_binomial, true)                       \
    X(MLC_COLL_REDUCE, "rabenseifner", reduce_rabenseifner, true)
#define MLC_ALGOS_ALLREDUCE(X)                                                  \
    X(MLC_COLL_ALLREDUCE, "rd", allreduce_rd, true)                             \
    X(MLC_COLL_ALLREDUCE, "rabenseifner", allreduce_rabenseifner, true)         \
    X(MLC_COLL_ALLREDUCE, "ring", allreduce_ring, false)                        \
    X(MLC_COLL_ALLREDUCE, "binomial", allreduce_binomial, true)                 \
    X(MLC_COLL_ALLREDUCE, "dbtree", allreduce_dbtree, false)
#define MLC_ALGOS_ALLGATHER(X)                                                  \
    X(MLC_COLL_ALLGATHER, "rd", allgather_rd, true)                             \
    X(MLC_COLL_ALLGATHER, "bruck", allgather_bruck, true)                       \
    X(MLC_COLL_ALLGATHER, "ring", allgather_ring, true)
#define MLC_ALGOS_ALLGATHERV(X)                                                 \
    X(MLC_COLL_ALLGATHERV, "ring", allgatherv_ring, true)
#define MLC_ALGOS_REDUCE_SCATTER(X)                                             \
    X(MLC_COLL_REDUCE_SCATTER, "rhalving", reduce_scatter_rhalving, true)       \
    X(MLC_COLL_REDUCE_SCATTER, "ring", reduce_scatter_ring, false)              \
    X(MLC_COLL_REDUCE_SCATTER, "pairwise", reduce_scatter_pairwise, true)
#define MLC_ALGOS_ALLTOALL(X)                                                   \
    X(MLC_COLL_ALLTOALL, "bruck", alltoall_bruck, true)                         \
    X(MLC_COLL_ALLTOALL, "linear", alltoall_linear, true)                       \
    X(MLC_COLL_ALLTOALL, "pairwise", alltoall_pairwise, true)
#define MLC_ALGOS_ALLTOALLV(X)                                                  \
    X(MLC_COLL_ALLTOALLV, "linear", alltoallv_linear, true)                     \
    X(MLC_COLL_ALLTOALLV, "pairwise", alltoallv_pairwise, true)
#define MLC_ALGOS_GATHER(X)                                                     \
    X(MLC_COLL_GATHER, "binomial", gather_binomial, true)                       \
    X(MLC_COLL_GATHER, "linear", gather_linear, true)
#define MLC_ALGOS_GATHERV(X) X(MLC_COLL_GATHERV, "linear", gatherv_linear, true)
#define MLC_ALGOS_SCATTER(X)                                                    \
    X(MLC_COLL_SCATTER, "binomial", scatter_binomial, true)                     \
    X(MLC_COLL_SCATTER, "linear", scatter_linear, true)
#define MLC_ALGOS_SCATTERV(X) X(MLC_COLL_SCATTERV, "linear", scatterv_linear, true)
#define MLC_ALGOS_BARRIER(X) X(MLC_COLL_BARRIER, "dissemination", barrier_dissemination, true)

/* F(collective, its list) for every collective that has algorithms. */
#define MLC_ALGO_FAMILIES(F)                                  \
    F(MLC_COLL_BROADCAST, MLC_ALGOS_BROADCAST)                \
    F(MLC_COLL_REDUCE, MLC_ALGOS_REDUCE)                      \
    F(MLC_COLL_ALLREDUCE, MLC_ALGOS_ALLREDUCE)                \
    F(MLC_COLL_ALLGATHER, MLC_ALGOS_ALLGATHER)                \
    F(MLC_COLL_ALLGATHERV, MLC_ALGOS_ALLGATHERV)              \
    F(MLC_COLL_REDUCE_SCATTER, MLC_ALGOS_REDUCE_SCATTER)      \
    F(MLC_COLL_ALLTOALL, MLC_ALGOS_ALLTOALL)                  \
    F(MLC_COLL_ALLTOALLV, MLC_ALGOS_ALLTOALLV)                \
    F(MLC_COLL_GATHER, MLC_ALGOS_GATHER)                      \
    F(MLC_COLL_GATHERV, MLC_ALGOS_GATHERV)                    \
    F(MLC_COLL_SCATTER, MLC_ALGOS_SCATTER)                    \
    F(MLC_COLL_SCATTERV, MLC_ALGOS_SCATTERV)                  \
    F(MLC_COLL_BARRIER, MLC_ALGOS_BARRIER)

#define MLC_X_DECL(coll, name, fn, ordered)                                           \
    mlc_status_t mlc_build_##fn(const mlc_coll_desc_t *d, mlc_sched_t *s);           \
    double mlc_cost_##fn(const mlc_coll_desc_t *d, const mlc_cost_model_t *m);
#define MLC_F_DECL(coll, list) list(MLC_X_DECL)
MLC_ALGO_FAMILIES(MLC_F_DECL)
#undef MLC_F_DECL
#undef MLC_X_DECL

/* The collective's short name, for messages (kept here so that src/algos
 * needs nothing from the API layer). */
static inline const char *mlc_algos_coll_name(mlc_coll_t coll)
{
    static const char *const names[] = {
#define MLC_X_NAME(id, str, env) str,
        MLC_COLL_LIST(MLC_X_NAME)
#undef MLC_X_NAME
    };
    return coll >= 0 && coll < MLC_COLL_COUNT ? names[coll] : "(unknown collective)";
}

/* ---- appending steps ------------------------------------------------------ */

/* A builder: the first failing append is kept in st, later appends do nothing. */
typedef struct mlc_bld {
    const mlc_coll_desc_t *d;
    mlc_sched_t *s;
    mlc_status_t st;
} mlc_bld_t;

static inline mlc_bld_t mlc_bld_make(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = {d, s, MLC_SUCCESS};
    return b;
}
void mlc_bld_send(mlc_bld_t *b, uint32_t round, int peer, mlc_buf_id_t buf, size_t off,
                  size_t bytes);
void mlc_bld_recv(mlc_bld_t *b, uint32_t round, int peer, mlc_buf_id_t buf, size_t off,
                  size_t bytes);
/* Receive into land[loff..], then dbuf = land (op) sbuf (SRC_HIGHER: sbuf (op) land). */
void mlc_bld_recv_reduce(mlc_bld_t *b, uint32_t round, int peer, mlc_buf_id_t land, size_t loff,
                         mlc_buf_id_t sbuf, size_t soff, mlc_buf_id_t dbuf, size_t doff,
                         size_t bytes, uint8_t flags);
/* dbuf = src; nothing when source and destination are the same bytes. */
void mlc_bld_copy(mlc_bld_t *b, uint32_t round, mlc_buf_id_t src, size_t soff, mlc_buf_id_t dbuf,
                  size_t doff, size_t bytes);
/* dbuf = buf (op) sbuf (SRC_HIGHER: sbuf (op) buf), local. */
void mlc_bld_reduce(mlc_bld_t *b, uint32_t round, mlc_buf_id_t buf, size_t off, mlc_buf_id_t sbuf,
                    size_t soff, mlc_buf_id_t dbuf, size_t doff, size_t bytes, uint8_t flags);
/* The schedule needs at least `bytes` of TMP. */
static inline void mlc_bld_tmp(mlc_bld_t *b, size_t bytes)
{
    if (bytes > b->s->tmp_bytes) b->s->tmp_bytes = bytes;
}

/* ---- arithmetic ------------------------------------------------------------ */

/* Block i of `count` elements split into nb nearly equal blocks (the first
 * count % nb get one more): first element; i == nb gives count. */
static inline size_t mlc_blk_start(size_t count, int nb, int i)
{
    size_t q = count / (size_t)nb, r = count % (size_t)nb, ui = (size_t)i;
    return ui * q + (ui < r ? ui : r);
}
static inline size_t mlc_blk_len(size_t count, int nb, int i)
{
    return mlc_blk_start(count, nb, i + 1) - mlc_blk_start(count, nb, i);
}
/* floor(log2 p) and ceil(log2 p) for p >= 1; 2^floor(log2 p). */
static inline int mlc_log2_floor(int p)
{
    int l = 0;
    while ((p >> (l + 1)) != 0) l++;
    return l;
}
static inline int mlc_log2_ceil(int p)
{
    int l = mlc_log2_floor(p);
    return (1 << l) < p ? l + 1 : l;
}
static inline int mlc_pow2_floor(int p) { return 1 << mlc_log2_floor(p); }
/* Lowest set bit of v (v > 0). */
static inline int mlc_lowbit(int v) { return v & -v; }
static inline int mlc_mod(int a, int p) { return ((a % p) + p) % p; }
/* The low `bits` bits of v in reverse order. */
static inline int mlc_bitrev(int v, int bits)
{
    int r = 0;
    for (int i = 0; i < bits; i++) r |= ((v >> i) & 1) << (bits - 1 - i);
    return r;
}

/* A block layout in elements: count split into nb nearly equal blocks, or
 * (counts != NULL) block i is counts[i] elements at displs[i]. */
typedef struct mlc_blocks {
    size_t count, esize;
    int nb;
    const size_t *counts, *displs;
} mlc_blocks_t;
static inline size_t mlc_blocks_off(const mlc_blocks_t *B, int i)
{
    return (B->counts ? B->displs[i] : mlc_blk_start(B->count, B->nb, i)) * B->esize;
}
static inline size_t mlc_blocks_len(const mlc_blocks_t *B, int i)
{
    return (B->counts ? B->counts[i] : mlc_blk_len(B->count, B->nb, i)) * B->esize;
}

/*
 * Ring allgather into RECV over p ring positions (rounds r0 .. r0+p-2).
 * Position q is real rank (q + shift) % p and starts with block (q + d0) % p;
 * this rank (position pos) reads its starting block from own_buf[own_off..]
 * in the first round and from RECV afterwards.
 */
void mlc_ring_allgather(mlc_bld_t *b, uint32_t r0, int pos, int p, int shift, int d0,
                        const mlc_blocks_t *B, mlc_buf_id_t own_buf, size_t own_off);

/*
 * The fold to a power of two: with p2 = 2^floor(log2 p) and rem = p - p2,
 * ranks 2i and 2i+1 (i < rem) pair up and one of them (2i, or 2i+1 when it
 * is `keep`) carries on as virtual rank i for both; rank r >= 2 rem is
 * virtual rank r - rem. Virtual ranks keep the order of real ranks, so
 * order-preserving algorithms stay so on the virtual ranks.
 */
typedef struct mlc_fold {
    int p2, rem, lg;  /* lg = log2(p2) */
    int vrank;        /* this rank's virtual rank, -1 when folded into its partner */
    int partner;      /* the other rank of this rank's pair, -1 when unpaired */
    int keep;
} mlc_fold_t;
void mlc_fold_init(mlc_fold_t *f, int rank, int size, int keep);
/* The real rank acting as virtual rank v. */
int mlc_fold_real(const mlc_fold_t *f, int v);
/* The virtual rank whose data includes real rank r's (its own or its partner's). */
int mlc_fold_virt(const mlc_fold_t *f, int r);

/* Input of an allreduce/reduce/broadcast on this rank: recvbuf when in place. */
static inline mlc_buf_id_t mlc_input_buf(const mlc_coll_desc_t *d)
{
    return d->inplace ? MLC_BUF_RECV : MLC_BUF_SEND;
}

/* ---- cost-model helpers ------------------------------------------------------ */
static inline double mlc_lg(int p) { return (double)mlc_log2_ceil(p); }
static inline double mlc_frac(int p) { return (double)(p - 1) / (double)p; }
/* bytes of the collective's per-rank count */
static inline double mlc_bytes(const mlc_coll_desc_t *d) { return (double)d->count * (double)d->esize; }
#endif
