/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Percentiles of per-call times (-P), shared by mlcomm-bench (tools/) and the
 * MPI peer it is compared with (bench/mpi-bench.c), so both columns mean the
 * same. Nearest rank: percentile q of n sorted values is the value at rank
 * ceil(q * n / 100), computed in integers (no rounding error). For p99 that
 * is the slowest call itself until n reaches 100: such a "p99" is the
 * maximum, not a tail percentile, and the output says so.
 */
#ifndef MLC_BENCH_PERCENTILE_H
#define MLC_BENCH_PERCENTILE_H
#include <stdio.h>

/* Nearest-rank percentile q (1..100) of n (> 0) values sorted ascending. */
static inline double bench_percentile(const double *sorted, long n, int q)
{
    long k = ((long)q * n + 99) / 100;
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1];
}

/* The fewest values for which percentile q (1..99) is not simply the largest:
 * ceil(100 / (100 - q)), 100 for p99. */
static inline long bench_percentile_min_values(int q) { return (100 + (100 - q) - 1) / (100 - q); }

/* A '#' comment line (parsers skip those) when `iters` calls are too few for
 * the p99 column to be more than the slowest call. */
static inline void bench_note_p99_sample(long iters)
{
    if (iters >= bench_percentile_min_values(99)) return;
    printf("# p99 of %ld call%s is the slowest call (nearest rank): a p99 needs at least %ld calls per size\n",
           iters, iters == 1 ? "" : "s", bench_percentile_min_values(99));
}
#endif
