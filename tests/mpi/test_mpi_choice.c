/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which algorithm a call on mpi runs unless one is forced: MPI's own
 * collective, except a reduce from 64 KiB (binomial) and a reduce_scatter
 * whose send buffer holds 256 KiB or more (ring), where MPI's nonblocking
 * forms were measured an order of magnitude slower; and MPI's own
 * everywhere when no rank has a deadline (MLC_TIMEOUT=0: MPI's blocking
 * collectives). mlc_comm_get_algo says what runs; results are exact (integer
 * sums, AVG, a commutative user op), and a non-commutative user op, which
 * ring cannot take, runs MPI's own and still gives the ordered result.
 *   test_mpi_choice          under mpirun, MLC_BACKEND=mpi (or MLC_TIMEOUT=0)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

static void expect_algo(mlc_comm_t *comm, mlc_coll_t coll, size_t bytes, const char *want, int *failed)
{
    const char *got = NULL;
    if (mlc_comm_get_algo(comm, coll, bytes, &got) != MLC_SUCCESS || !got || strcmp(got, want) != 0) {
        fprintf(stderr, "[rank %d] %s of %zu bytes runs %s, want %s\n", mlc_comm_rank(comm), mlc_coll_name(coll),
                bytes, got ? got : "(none)", want);
        *failed = 1;
    }
}

/* Affine maps x -> m x + c on pairs (m, c) of int64, the lower rank's
 * applied first: associative, not commutative. */
static void compose(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx)
{
    (void)dt, (void)ctx;
    const int64_t *a = in;
    int64_t *b = inout;
    for (size_t i = 0; i + 1 < count; i += 2) {
        b[i + 1] = b[i] * a[i + 1] + b[i + 1];
        b[i] = a[i] * b[i];
    }
}

static void plus(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx)
{
    (void)dt, (void)ctx;
    const int64_t *a = in;
    int64_t *b = inout;
    for (size_t i = 0; i < count; i++) b[i] += a[i];
}

static int body(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0) return MLC_TEST_SKIP;
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm), failed = 0;
    bool own = mlc_comm_timeout(comm) > 0 && p > 1;
    expect_algo(comm, MLC_COLL_REDUCE, (64 << 10) - 8, "native", &failed);
    expect_algo(comm, MLC_COLL_REDUCE, 64 << 10, own ? "binomial" : "native", &failed);
    expect_algo(comm, MLC_COLL_REDUCE_SCATTER, ((256 << 10) + (size_t)p - 1) / (size_t)p, own ? "ring" : "native",
                &failed);
    expect_algo(comm, MLC_COLL_REDUCE_SCATTER, (128 << 10) / (size_t)p, "native", &failed);
    expect_algo(comm, MLC_COLL_ALLREDUCE, 16 << 20, "native", &failed);
    expect_algo(comm, MLC_COLL_BROADCAST, 16 << 20, "native", &failed);
    if (failed) return 1;

    enum { N = 1 << 18 }; /* int64: 2 MiB */
    int64_t *x = malloc(sizeof *x * N * (size_t)p), *y = malloc(sizeof *y * N * (size_t)p);
    CHECK(x && y, "malloc");
    mlc_op_t add, ord;
    CHECK_OK(mlc_op_create(plus, 1, NULL, &add));
    CHECK_OK(mlc_op_create(compose, 0, NULL, &ord));
    const mlc_op_t ops[] = {MLC_SUM, MLC_AVG, add};
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
        for (int root = 0; root < p; root += p > 1 ? p - 1 : 1) {
            for (size_t i = 0; i < N; i++) x[i] = (int64_t)r * 1000 + (int64_t)i, y[i] = -1;
            CHECK_OK(mlc_reduce(x, y, N, MLC_INT64, ops[o], root, comm, NULL));
            if (r == root)
                for (size_t i = 0; i < N; i++) {
                    int64_t sum = 1000 * (int64_t)p * (p - 1) / 2 + (int64_t)p * (int64_t)i;
                    int64_t want = ops[o] == MLC_AVG ? sum / p : sum;
                    CHECK(y[i] == want, "reduce (op %d, root %d) [%zu] = %lld, want %lld", (int)o, root, i,
                          (long long)y[i], (long long)want);
                }
        }
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
        for (size_t i = 0; i < N * (size_t)p; i++) x[i] = (int64_t)r * 7 + (int64_t)i;
        CHECK_OK(mlc_reduce_scatter(x, y, N, MLC_INT64, ops[o], comm, NULL));
        for (size_t i = 0; i < N; i++) {
            int64_t sum = 7 * (int64_t)p * (p - 1) / 2 + (int64_t)p * ((int64_t)r * N + (int64_t)i);
            int64_t want = ops[o] == MLC_AVG ? sum / p : sum;
            CHECK(y[i] == want, "reduce_scatter (op %d) [%zu] = %lld, want %lld", (int)o, i, (long long)y[i],
                  (long long)want);
        }
    }
    /* Non-commutative: x -> 2x + (r + 1) on each rank, composed in rank order. */
    for (size_t i = 0; i < N * (size_t)p; i++) x[i] = i % 2 ? r + 1 : 2;
    CHECK_OK(mlc_reduce_scatter(x, y, N, MLC_INT64, ord, comm, NULL));
    int64_t m = 1, c = 0;
    for (int q = 0; q < p; q++) m *= 2, c = c * 2 + (q + 1);
    for (size_t i = 0; i < N; i++)
        CHECK(y[i] == (i % 2 ? c : m), "non-commutative reduce_scatter [%zu] = %lld, want %lld", i,
              (long long)y[i], (long long)(i % 2 ? c : m));
    mlc_op_free(add);
    mlc_op_free(ord);
    free(x);
    free(y);
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
