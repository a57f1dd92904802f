/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The generator: step k of sequence S follows from (S, k) alone, the same on
 * every rank and every backend (what a step may do on a backend, such as
 * which algorithm an index names, is resolved when it runs).
 */
#include <stdio.h>
#include <string.h>
#include "diff.h"

uint64_t diff_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t diff_hash3(uint64_t a, uint64_t b, uint64_t c)
{
    return diff_mix(diff_mix(diff_mix(a) ^ b) ^ c);
}

typedef struct rng {
    uint64_t s;
} rng_t;
static uint64_t next(rng_t *g) { return diff_mix(g->s++); }
static unsigned below(rng_t *g, unsigned n) { return n ? (unsigned)(next(g) % n) : 0; }
static size_t range(rng_t *g, size_t lo, size_t hi) { return lo + (size_t)(next(g) % (hi - lo + 1)); }

static const mlc_dtype_t builtin_dtypes[] = {MLC_INT8,    MLC_UINT8,    MLC_INT32,  MLC_UINT32, MLC_INT64,
                                             MLC_UINT64,  MLC_FLOAT16,  MLC_BFLOAT16, MLC_FLOAT32,
                                             MLC_FLOAT64};
#define NBUILTIN (sizeof builtin_dtypes / sizeof *builtin_dtypes)

static bool is_reduction(diff_kind_t k) { return k == K_REDUCE || k == K_ALLREDUCE || k == K_REDUCE_SCATTER; }
static bool is_p2p(diff_kind_t k) { return k >= K_PAIRS; }

/* 0, 1, small, hundreds, thousands, and up to ~160 KB per buffer (past the
 * slot, eager and chunk sizes of the engine). */
static size_t pick_count(rng_t *g, size_t esize)
{
    unsigned c = below(g, 100);
    size_t n;
    if (c < 8) n = 0;
    else if (c < 18) n = 1;
    else if (c < 48) n = range(g, 2, 40);
    else if (c < 74) n = range(g, 41, 1100);
    else if (c < 93) n = range(g, 1101, 5000);
    else n = range(g, 5001, 163840 / esize);
    if (n * esize > 262144) n = 262144 / esize;
    return n;
}

static diff_kind_t pick_kind(rng_t *g, bool batch)
{
    static const unsigned char weight[K_KINDS] = {
        [K_BCAST] = 3, [K_REDUCE] = 4, [K_ALLREDUCE] = 5, [K_ALLGATHER] = 3, [K_ALLGATHERV] = 3,
        [K_REDUCE_SCATTER] = 4, [K_ALLTOALL] = 3, [K_ALLTOALLV] = 3, [K_GATHER] = 2, [K_GATHERV] = 2,
        [K_SCATTER] = 2, [K_SCATTERV] = 2, [K_BARRIER] = 1, [K_PAIRS] = 2, [K_SENDRECV] = 2,
        [K_EXCHANGE] = 3, [K_PROBE] = 2, [K_TRUNC] = 2};
    unsigned total = 0;
    for (int k = 0; k < K_KINDS; k++) total += (batch && k == K_PROBE) ? 0 : weight[k];
    unsigned x = below(g, total);
    for (int k = 0; k < K_KINDS; k++) {
        unsigned w = (batch && k == K_PROBE) ? 0 : weight[k];
        if (x < w) return (diff_kind_t)k;
        x -= w;
    }
    return K_ALLREDUCE;
}

static void gen_op(rng_t *g, bool batch, int pos, diff_op_t *op)
{
    memset(op, 0, sizeof *op);
    op->kind = pick_kind(g, batch);
    unsigned c = below(g, 10);
    op->comm = c < 4 ? 0 : c < 6 ? 1 : c < 8 ? 2 : 3;
    if (is_reduction(op->kind)) {
        unsigned u = below(g, 100);
        if (u < 8) {
            op->rop = R_XOR;
            static const mlc_dtype_t any[] = {MLC_UINT8, MLC_INT32, MLC_FLOAT64, MLC_RECORD(3), MLC_RECORD(12)};
            op->dtype = any[below(g, 5)];
        } else if (u < 16) {
            op->rop = R_AFFINE;
            op->dtype = MLC_RECORD(8);
        } else {
            op->rop = (int)below(g, MLC_OP_BUILTIN_COUNT);
            op->dtype = builtin_dtypes[below(g, NBUILTIN)];
        }
    } else {
        unsigned d = below(g, NBUILTIN + 3);
        op->dtype = d < NBUILTIN ? builtin_dtypes[d] : d == NBUILTIN ? MLC_RECORD(3)
                    : d == NBUILTIN + 1 ? MLC_RECORD(8) : MLC_RECORD(12);
    }
    size_t es = mlc_dtype_size(op->dtype);
    op->count = pick_count(g, es);
    if (op->kind == K_TRUNC) op->count = range(g, 2, 16384 / es + 2); /* Open MPI: ~1 KB to self, ~4 KB to peers */
    op->root_sel = (unsigned)next(g);
    op->inplace = below(g, 10) < 3;
    op->nullroot = below(g, 2);
    op->blocking = !batch && op->kind != K_EXCHANGE && below(g, 2);
    op->recv_first = below(g, 2);
    op->iprobe = below(g, 2);
    op->match = (int)below(g, batch ? 3 : 4);
    op->algo = (!is_p2p(op->kind) && below(g, 10) < 3) ? (int)below(g, 64) : -1;
    op->tag_base = pos * 2048 + (int)below(g, 1024);
    op->h = next(g);
}

void diff_gen_step(uint64_t sequence, int index, diff_step_t *step)
{
    rng_t g = {diff_hash3(sequence, (uint64_t)index, 0x57e9)};
    memset(step, 0, sizeof *step);
    step->index = index;
    step->batch = below(&g, 10) < 3;
    step->nops = step->batch ? (int)range(&g, 2, DIFF_MAX_BATCH) : 1;
    for (int i = 0; i < step->nops; i++) gen_op(&g, step->batch, i, &step->ops[i]);
}

void diff_gen_splits(uint64_t sequence, int nworld, diff_split_spec_t spec[DIFF_COMMS])
{
    rng_t g = {diff_hash3(sequence, 0x5b117, 0)};
    memset(spec, 0, sizeof(diff_split_spec_t) * DIFF_COMMS);
    int out3 = nworld > 2 && below(&g, 10) < 4 ? (int)below(&g, (unsigned)nworld) : -1;
    for (int w = 0; w < nworld; w++) {
        spec[1].parent = 0; /* two groups, keys with ties */
        spec[1].color[w] = (int)below(&g, 2);
        spec[1].key[w] = (int)below(&g, 3);
        spec[2].parent = 1; /* split again; some ranks in none */
        spec[2].color[w] = below(&g, 10) == 0 ? MLC_UNDEFINED : (int)below(&g, 2);
        spec[2].key[w] = (int)below(&g, 4) - 2;
        spec[3].parent = 0; /* everyone (but maybe one), reordered */
        spec[3].color[w] = w == out3 ? MLC_UNDEFINED : 7;
        spec[3].key[w] = (int)below(&g, 8);
    }
}

diff_wait_t diff_gen_wait(uint64_t sequence, int index, int world_rank, unsigned *shuffle)
{
    rng_t g = {diff_hash3(sequence, (uint64_t)index, 0xa17000u + (uint64_t)world_rank)};
    *shuffle = (unsigned)next(&g);
    return (diff_wait_t)below(&g, 4);
}

size_t diff_vcount(const diff_op_t *op, int i, int j)
{
    uint64_t x = diff_hash3(op->h, (uint64_t)i, (uint64_t)j + 0x7c);
    if (x % 5 == 0) return 0;
    return (size_t)((x >> 8) % (op->count + 1)) + (size_t)((x >> 40) % 3);
}

size_t diff_vlayout(uint64_t h, const size_t *counts, int n, size_t *displs)
{
    int order[DIFF_MAX_RANKS];
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(diff_hash3(h, (uint64_t)i, 0x0f) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    size_t pos = 0;
    for (int k = 0; k < n; k++) {
        pos += diff_hash3(h, (uint64_t)k, 0x9a) % 4; /* a gap the call must not touch */
        displs[order[k]] = pos;
        pos += counts[order[k]];
    }
    return pos;
}

static const char *const kind_names[K_KINDS] = {
    "broadcast", "reduce", "allreduce", "allgather", "allgatherv", "reduce_scatter", "alltoall",
    "alltoallv", "gather", "gatherv", "scatter", "scatterv", "barrier", "send/recv pairs",
    "sendrecv shift", "nonblocking exchange", "probe + recv", "truncated recv"};
const char *diff_kind_name(diff_kind_t k) { return k < K_KINDS ? kind_names[k] : "?"; }

const char *diff_rop_name(int rop)
{
    return rop == R_XOR ? "user xor" : rop == R_AFFINE ? "user affine (non-commutative)" : mlc_op_name(rop);
}

mlc_coll_t diff_kind_coll(diff_kind_t k)
{
    static const mlc_coll_t c[] = {MLC_COLL_BROADCAST, MLC_COLL_REDUCE, MLC_COLL_ALLREDUCE, MLC_COLL_ALLGATHER,
                                   MLC_COLL_ALLGATHERV, MLC_COLL_REDUCE_SCATTER, MLC_COLL_ALLTOALL,
                                   MLC_COLL_ALLTOALLV, MLC_COLL_GATHER, MLC_COLL_GATHERV, MLC_COLL_SCATTER,
                                   MLC_COLL_SCATTERV, MLC_COLL_BARRIER};
    return k <= K_BARRIER ? c[k] : MLC_COLL_SEND;
}

void diff_describe(const diff_op_t *op, const diff_comm_t *c, const char *algo, char *out, size_t len)
{
    static const char *const match_names[] = {"specific source+tag", "one tag (non-overtaking)",
                                              "any source", "any tag"};
    char members[160] = "";
    size_t used = 0;
    for (int m = 0; m < c->size && used + 8 < sizeof members; m++)
        used += (size_t)snprintf(members + used, sizeof members - used, "%s%d", m ? "," : "", c->world[m]);
    char dt[24];
    size_t es = mlc_dtype_size(op->dtype);
    if (op->dtype >= MLC_DTYPE_COUNT) snprintf(dt, sizeof dt, "record(%zu)", es);
    else snprintf(dt, sizeof dt, "%s", mlc_dtype_name(op->dtype));
    int n = snprintf(out, len, "%s on comm %d (size %d, world ranks %s), %s", diff_kind_name(op->kind), op->comm,
                     c->size, members, op->kind == K_BARRIER ? "no data" : dt);
    if (n < 0 || (size_t)n >= len) return;
    if (is_reduction(op->kind)) n += snprintf(out + n, len - (size_t)n, " %s", diff_rop_name(op->rop));
    n += snprintf(out + n, len - (size_t)n, ", count %zu", op->count);
    if (op->kind == K_BCAST || op->kind == K_REDUCE || (op->kind >= K_GATHER && op->kind <= K_SCATTERV))
        n += snprintf(out + n, len - (size_t)n, ", root %d%s", c->size ? (int)(op->root_sel % (unsigned)c->size) : 0,
                      op->nullroot ? " (NULL root-only buffers elsewhere)" : "");
    if (is_p2p(op->kind))
        n += snprintf(out + n, len - (size_t)n, ", shift %u, %s, receives posted %s%s",
                      c->size ? op->root_sel % (unsigned)c->size : 0, match_names[op->match],
                      op->recv_first ? "first" : "after the sends",
                      op->kind == K_PROBE ? (op->iprobe ? ", iprobe" : ", probe") : "");
    else if (op->inplace && op->kind != K_BARRIER)
        n += snprintf(out + n, len - (size_t)n, ", in place");
    if (algo) n += snprintf(out + n, len - (size_t)n, ", algorithm %s", algo);
    snprintf(out + n, len - (size_t)n, ", %s", op->blocking ? "blocking" : "nonblocking");
}
