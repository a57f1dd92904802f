/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Verifiable data for mlcomm-bench: every input element is a small integer
 * chosen so that every result (sum, prod, max, min, avg over p ranks) is
 * exactly representable in the dtype, whatever order the library reduces
 * in. Expected results have closed forms, so checking costs O(1) per element
 * even for large rank counts.
 *
 * Input of rank r at global index i (the index into the full send buffer
 * the collective defines, e.g. reduce_scatter's count*p elements):
 *   prod:      2 if (i + seed) % p == r else 1        (the product is 2)
 *   otherwise: base(i) + (rank_term ? r : 0), base(i) = hash(seed, i) % (bound + 1)
 * `bound` and `rank_term` are picked so that p-way sums stay exact.
 */
#ifndef MLC_TOOLS_BENCH_DATA_H
#define MLC_TOOLS_BENCH_DATA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mlcomm.h"

typedef struct mlc_bench_gen {
    mlc_dtype_t dtype;
    size_t esize;
    mlc_op_t op;      /* the reduction, or -1 for collectives that move data only */
    int nranks;
    uint64_t seed;
    uint64_t bound;   /* base values lie in [0, bound] */
    bool rank_term;   /* add the rank to each value */
} mlc_bench_gen_t;

/* Bytes of one element of a built-in dtype, 0 if unknown. */
size_t mlc_bench_dtype_size(mlc_dtype_t dtype);

/* Choose bound/rank_term for (dtype, op, nranks); op < 0 = no reduction. */
void mlc_bench_gen_init(mlc_bench_gen_t *g, mlc_dtype_t dtype, mlc_op_t op, int nranks,
                        uint64_t seed);

/* Input of `rank` at global index i. */
uint64_t mlc_bench_input(const mlc_bench_gen_t *g, int rank, size_t i);
/* The op applied over every rank's input at index i (avg may be a half-integer). */
double mlc_bench_reduced(const mlc_bench_gen_t *g, size_t i);

/* buf[k] = input(rank, first + k) for k < count. */
void mlc_bench_fill(const mlc_bench_gen_t *g, int rank, size_t first, void *buf, size_t count);

/* Element access as double (exact for every value this file produces). */
double mlc_bench_load(mlc_dtype_t dtype, const void *buf, size_t k);
/* Store v; returns false if v is not exactly representable in dtype. */
bool mlc_bench_store(mlc_dtype_t dtype, void *buf, size_t k, double v);

/* Bytes that never equal an expected value: results are pre-filled with it
 * so that an element the library forgot to write is counted as wrong. */
#define MLC_BENCH_SENTINEL_BYTE 0xff
#endif
