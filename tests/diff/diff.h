/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Randomized differential test: shared types.
 *
 * A sequence number names a random sequence of steps; step k follows from
 * (sequence, k) alone, so every rank generates the same steps and any step can
 * be run by itself. A step is one operation, blocking or not, or a batch of
 * nonblocking operations in flight together. Each operation's inputs follow
 * from (its hash, the world rank of the member, the element index), so every
 * rank computes every expected result itself (diff_values.c) and compares its
 * buffers bitwise, guard bytes included (diff_bufs.c).
 */
#ifndef MLC_DIFF_H
#define MLC_DIFF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mlcomm.h"

#define DIFF_MAX_BATCH 6
#define DIFF_MAX_RANKS 64
#define DIFF_COMMS 4 /* world, a split, a split of that split, world reordered */

typedef enum {
    K_BCAST, K_REDUCE, K_ALLREDUCE, K_ALLGATHER, K_ALLGATHERV, K_REDUCE_SCATTER, K_ALLTOALL,
    K_ALLTOALLV, K_GATHER, K_GATHERV, K_SCATTER, K_SCATTERV, K_BARRIER,
    K_PAIRS,    /* pairs of ranks exchange with send/recv */
    K_SENDRECV, /* sendrecv with a shift around the communicator */
    K_EXCHANGE, /* nonblocking messages to a random set of peers (self included) */
    K_PROBE,    /* probe or iprobe, then receive exactly what it announced */
    K_TRUNC,    /* receive into a buffer shorter than the message */
    K_KINDS
} diff_kind_t;

/* Reduction ops: the built-ins, then two user ops. */
enum { R_XOR = MLC_OP_BUILTIN_COUNT, /* commutative, any dtype (bytewise) */
       R_AFFINE,                     /* non-commutative, 8-byte records */
       R_KINDS };

/* How the receives of a p2p operation name what they match. */
enum { M_SPECIFIC, M_SAME_TAG, M_ANY_SOURCE, M_ANY_TAG };

typedef struct diff_op {
    diff_kind_t kind;
    int comm;          /* index into the communicator table */
    mlc_dtype_t dtype;
    int rop;           /* reduction: MLC_SUM.. or R_XOR / R_AFFINE */
    size_t count;      /* per-rank element count (base for v-layouts and messages) */
    unsigned root_sel; /* root = root_sel % size; p2p: shift */
    bool inplace;
    bool nullroot;     /* root-only buffers are NULL on other ranks (else they must stay untouched) */
    bool blocking;     /* the call waits (no request) */
    bool recv_first;   /* p2p: receives posted before sends */
    bool iprobe;       /* K_PROBE: poll with iprobe */
    int match;         /* p2p: M_* */
    int algo;          /* -1: as configured; else index into the backend's list for the collective */
    int tag_base;      /* p2p tags are tag_base + small offsets (< 32768 together) */
    uint64_t h;        /* everything else (v-counts, layouts, values) follows from h */
} diff_op_t;

typedef enum { W_IN_ORDER, W_SHUFFLED, W_ALL, W_TEST_LOOP } diff_wait_t;

typedef struct diff_step {
    int index;
    int nops;
    bool batch;
    diff_op_t ops[DIFF_MAX_BATCH];
} diff_step_t;

/* One communicator of the table as this rank sees it. */
typedef struct diff_comm {
    mlc_comm_t *comm; /* NULL when this rank is not a member */
    int size, rank;
    int world[DIFF_MAX_RANKS]; /* world rank of each member, in communicator order */
} diff_comm_t;

/* How the table's splits are made: colour and key of every world rank. */
typedef struct diff_split_spec {
    int parent;
    int color[DIFF_MAX_RANKS], key[DIFF_MAX_RANKS];
} diff_split_spec_t;

/* ---- diff_gen.c ---------------------------------------------------------- */
uint64_t diff_mix(uint64_t x);
uint64_t diff_hash3(uint64_t a, uint64_t b, uint64_t c);
void diff_gen_step(uint64_t sequence, int index, diff_step_t *step);
void diff_gen_splits(uint64_t sequence, int nworld, diff_split_spec_t spec[DIFF_COMMS]);
diff_wait_t diff_gen_wait(uint64_t sequence, int index, int world_rank, unsigned *shuffle);
const char *diff_kind_name(diff_kind_t k);
const char *diff_rop_name(int rop);
mlc_coll_t diff_kind_coll(diff_kind_t k);
void diff_describe(const diff_op_t *op, const diff_comm_t *c, const char *algo, char *out, size_t len);
/* v-layouts: count of block (i, j) and the displacements of a layout (with gaps, blocks in random order). */
size_t diff_vcount(const diff_op_t *op, int i, int j);
size_t diff_vlayout(uint64_t h, const size_t *counts, int n, size_t *displs);

/* ---- diff_values.c ------------------------------------------------------- */
extern mlc_op_t diff_user_op[2]; /* xor, affine; created by main */
int diff_create_user_ops(void);
void diff_free_user_ops(void);
mlc_op_t diff_mlc_op(int rop);
/* Element e of part `part` of world rank w's data of op (data movement: any bytes). */
void diff_fill_bytes(const diff_op_t *op, int w, uint64_t part, size_t first, size_t n, void *buf);
/* Reductions: member m's contribution (global element indices first..first+n). */
void diff_fill_contrib(const diff_op_t *op, const diff_comm_t *c, int m, size_t first, size_t n, void *buf);
/* The exact reduction over every member, in communicator order. */
void diff_fill_reduced(const diff_op_t *op, const diff_comm_t *c, size_t first, size_t n, void *buf);

/* ---- diff_bufs.c --------------------------------------------------------- */
typedef struct diff_buf {
    unsigned char *mem, *p, *want;
    size_t bytes, pre, post;
    bool shared;     /* mem is a block of mlc_mem_alloc (DIFF_MEMORY), not malloc's */
    bool check_body; /* compare the body with want (else only the guards) */
    size_t check_lo, check_hi; /* the bytes of the body compared (check_hi 0: all) */
    char name[24];
} diff_buf_t;
/* Allocate `bytes` with guard zones; the body is filled with a stale pattern. */
void diff_buf_alloc(diff_buf_t *b, const char *name, size_t bytes, size_t post_guard, uint64_t tag);
void diff_buf_free(diff_buf_t *b);
/* First difference (body or guards) described in out; 0 when none. */
int diff_buf_check(const diff_buf_t *b, size_t esize, char *out, size_t len);
#endif
