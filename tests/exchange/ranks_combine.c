/* SPDX-License-Identifier: BSD-3-Clause */
/* Rank test: mlc_combine with commutative and non-commutative user ops, small and large values. */
#include "harness.h"
#include "mlcomm_exchange.h"

/* A sum over a record of three doubles (commutative). */
typedef struct stats {
    double sum, min, max;
} stats_t;

static void stats_op(const void *in, void *inout, void *ctx)
{
    const stats_t *a = in;
    stats_t *b = inout;
    b->sum += a->sum;
    b->min = a->min < b->min ? a->min : b->min;
    b->max = a->max > b->max ? a->max : b->max;
}

/* Polynomial-hash concatenation: (h1,p1).(h2,p2) = (h1*p2 + h2, p1*p2) mod 2^64.
 * Associative, not commutative: the result shows the order of application. */
typedef struct phash {
    uint64_t h, p;
} phash_t;

static void phash_op(const void *in, void *inout, void *ctx)
{
    const phash_t *a = in;
    phash_t *b = inout;
    b->h = a->h * b->p + b->h;
    b->p = a->p * b->p;
}

static phash_t phash_of(int rank, int i)
{
    phash_t v = {(uint64_t)(rank + 1) * 1000003u + (uint64_t)i, 31u + 2u * (uint64_t)i};
    return v;
}

/* A large value: many phash pairs combined pairwise (one op call per value). */
enum { BIG_PAIRS = 5000 }; /* 80000 bytes: more than a record dtype holds */

static void big_op(const void *in, void *inout, void *ctx)
{
    for (int i = 0; i < BIG_PAIRS; i++)
        phash_op((const phash_t *)in + i, (phash_t *)inout + i, ctx);
}

static int body(mlc_comm_t *comm)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    /* Commutative record. */
    stats_t mine = {rank + 1.0, rank * 2.0, rank * 3.0}, all;
    CHECK_OK(mlc_combine(&mine, &all, 1, sizeof mine, stats_op, 1, NULL, comm));
    CHECK(all.sum == size * (size + 1) / 2.0 && all.min == 0.0 && all.max == 3.0 * (size - 1),
          "stats %g %g %g", all.sum, all.min, all.max);

    /* Non-commutative, several values, in place. */
    enum { K = 5 };
    phash_t v[K], want[K];
    for (int i = 0; i < K; i++) {
        v[i] = phash_of(rank, i);
        want[i] = phash_of(size - 1, i);
        for (int r = size - 2; r >= 0; r--) {
            phash_t x = phash_of(r, i);
            phash_op(&x, &want[i], NULL);
        }
    }
    CHECK_OK(mlc_combine(v, v, K, sizeof v[0], phash_op, 0, NULL, comm));
    for (int i = 0; i < K; i++)
        CHECK(v[i].h == want[i].h && v[i].p == want[i].p, "value %d: rank order not kept", i);

    /* Larger than a record: gathered and folded in rank order. */
    phash_t *big = malloc(BIG_PAIRS * sizeof *big), *res = malloc(BIG_PAIRS * sizeof *res);
    CHECK(big && res, "malloc");
    for (int i = 0; i < BIG_PAIRS; i++) big[i] = phash_of(rank, i);
    CHECK_OK(mlc_combine(big, res, 1, BIG_PAIRS * sizeof *big, big_op, 0, NULL, comm));
    for (int i = 0; i < BIG_PAIRS; i += 997) {
        phash_t w = phash_of(size - 1, i);
        for (int r = size - 2; r >= 0; r--) {
            phash_t x = phash_of(r, i);
            phash_op(&x, &w, NULL);
        }
        CHECK(res[i].h == w.h && res[i].p == w.p, "big value pair %d: rank order not kept", i);
    }
    free(big);
    free(res);

    /* Bad arguments. */
    CHECK_ERR(mlc_combine(&mine, &all, 1, sizeof mine, NULL, 1, NULL, comm), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_combine(&mine, &all, 1, 0, stats_op, 1, NULL, comm), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_combine(NULL, &all, 1, sizeof mine, stats_op, 1, NULL, comm), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_combine(&mine, &all, 1, sizeof mine, stats_op, 1, NULL, NULL), MLC_ERR_INVALID_ARG);
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
