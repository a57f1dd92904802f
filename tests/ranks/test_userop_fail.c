/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A user op that fails (mlc_op_fail) on one rank. The op leaves garbage in
 * its output, as a failing function would. No rank may return success with
 * a result that differs from the true reduction: the rank whose op failed
 * fails with MLC_ERR_USER_OP and its reason, and a rank whose result could
 * hold the garbage fails too, naming the op's failure. (It returned success
 * with the garbage before.) After such a failure the communicator is failed
 * on every rank; its parent is not.
 *
 * Every reducing collective (allreduce, reduce at two roots, reduce_scatter),
 * the selector's choice at sizes from one element to the large paths and
 * every algorithm the backend has for it at two sizes, the failing op on
 * the first or the last rank. Then
 * mlc_reduce_local with a failing op.
 */
#include <stdatomic.h>
#include "harness.h"

#define GARBAGE 0x5A5A5A5A5A5A5A5Aull

static mlc_op_t op_fails_here;
/* The calling thread's op fails (set by the failing rank's own thread). */
static _Thread_local int fail_here;
static _Thread_local int failed_calls;

static void sum_or_fail(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx)
{
    const uint64_t *a = in;
    uint64_t *b = inout;
    if (fail_here) {
        failed_calls++;
        for (size_t i = 0; i < count; i++) b[i] = GARBAGE;
        mlc_op_fail("the test's op refuses on this rank");
        return;
    }
    for (size_t i = 0; i < count; i++) b[i] += a[i];
}

static uint64_t value(int r, size_t i) { return (uint64_t)r * 1000003u + i * 7u + 1u; }

typedef enum { ALLREDUCE, REDUCE, REDUCE_SCATTER } kind_t;
static const char *kind_names[] = {"allreduce", "reduce", "reduce_scatter"};
static const mlc_coll_t kind_colls[] = {MLC_COLL_ALLREDUCE, MLC_COLL_REDUCE, MLC_COLL_REDUCE_SCATTER};

static int one_case(mlc_comm_t *comm, kind_t kind, const char *algo, size_t count, int failing, int root)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    mlc_comm_t *d = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &d));
    if (algo) CHECK_OK(mlc_comm_set_algo(d, kind_colls[kind], algo));
    size_t n = kind == REDUCE_SCATTER ? count * (size_t)p : count, first = kind == REDUCE_SCATTER ? (size_t)r * count : 0;
    uint64_t *send = mlc_test_alloc(n * 8), *out = mlc_test_alloc(count * 8);
    for (size_t i = 0; i < n; i++) send[i] = value(r, i);
    memset(out, 0, count * 8);
    fail_here = r == failing;
    failed_calls = 0;
    mlc_status_t st;
    if (kind == ALLREDUCE)
        st = mlc_allreduce(send, out, count, MLC_UINT64, op_fails_here, d, NULL);
    else if (kind == REDUCE)
        st = mlc_reduce(send, out, count, MLC_UINT64, op_fails_here, root, d, NULL);
    else
        st = mlc_reduce_scatter(send, out, count, MLC_UINT64, op_fails_here, d, NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    fail_here = 0;
    int mine = failed_calls;
    const char *what = kind_names[kind];
    if (mine) {
        CHECK(st == MLC_ERR_USER_OP, "%s count=%zu algo=%s: this rank's op failed, the call -> %s (%s)", what,
              count, algo ? algo : "auto", mlc_status_name(st), msg);
        CHECK(strstr(msg, "the test's op refuses on this rank") != NULL, "%s: message: %s", what, msg);
    } else if (st == MLC_SUCCESS) {
        if (kind != REDUCE || r == root)
            for (size_t i = 0; i < count; i++) {
                uint64_t want = 0;
                for (int q = 0; q < p; q++) want += value(q, first + i);
                CHECK(out[i] == want, "%s count=%zu algo=%s (rank %d's op failed): success, but element %zu is "
                      "%#llx, not %#llx", what, count, algo ? algo : "auto", failing, i,
                      (unsigned long long)out[i], (unsigned long long)want);
            }
    } else {
        CHECK(st == MLC_ERR_USER_OP, "%s count=%zu algo=%s: rank %d's op failed, here -> %s (%s)", what, count,
              algo ? algo : "auto", failing, mlc_status_name(st), msg);
        CHECK(strstr(msg, "the test's op refuses on this rank") != NULL, "%s: message: %s", what, msg);
    }
    /* Did any op fail? Then the communicator is failed on every rank. */
    int any = mine;
    CHECK_OK(mlc_allreduce(&any, &any, 1, MLC_INT32, MLC_MAX, comm, NULL));
    if (any) {
        mlc_status_t again = mlc_barrier(d, NULL);
        CHECK(again == MLC_ERR_USER_OP, "%s: the next call on the communicator -> %s (%s)", what,
              mlc_status_name(again), mlc_last_error());
    } else {
        CHECK(st == MLC_SUCCESS, "%s: no op failed, the call -> %s (%s)", what, mlc_status_name(st), msg);
    }
    mlc_comm_free(d);
    mlc_test_free(send);
    mlc_test_free(out);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    /* The selector's choice at every size (up to the staged paths), each
     * algorithm forced at a small and a mid size. */
    static const size_t counts[] = {1, 1001, 65537, (size_t)2 << 20};
    for (kind_t kind = ALLREDUCE; kind <= REDUCE_SCATTER; kind++) {
        const char *algos[32];
        size_t nalgo = mlc_test_algos(comm, kind_colls[kind], algos, 32);
        for (size_t a = 0; a <= nalgo; a++)
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                if (a < nalgo && (c == 0 || c == 3)) continue;
                size_t count = kind == REDUCE_SCATTER ? counts[c] / (size_t)p + 1 : counts[c];
                for (int f = 0; f < 2; f++) {
                    int failing = f ? p - 1 : 0, root = f ? 0 : p - 1;
                    CHECK_RUN(one_case(comm, kind, a < nalgo ? algos[a] : NULL, count, failing, root));
                }
            }
    }
    /* Calls in flight together, no op failing: on mpi each agrees after
     * MPI is done, in the calls' order on every rank. */
    {
        enum { CALLS = 4, N = 1001 };
        uint64_t *bufs = mlc_test_alloc((size_t)CALLS * N * 8);
        mlc_request_t *q[CALLS];
        int r = mlc_comm_rank(comm);
        for (int k = 0; k < CALLS; k++) {
            for (size_t i = 0; i < N; i++) bufs[(size_t)k * N + i] = value(r, i + (size_t)k);
            CHECK_OK(mlc_allreduce(bufs + (size_t)k * N, bufs + (size_t)k * N, N, MLC_UINT64, op_fails_here, comm,
                                   &q[k]));
        }
        for (int k = CALLS - 1; k >= 0; k--) CHECK_OK(mlc_request_wait(&q[k]));
        for (int k = 0; k < CALLS; k++)
            for (size_t i = 0; i < N; i++) {
                uint64_t want = 0;
                for (int s = 0; s < p; s++) want += value(s, i + (size_t)k);
                CHECK(bufs[(size_t)k * N + i] == want, "call %d in flight together, element %zu: %llu, not %llu", k,
                      i, (unsigned long long)bufs[(size_t)k * N + i], (unsigned long long)want);
            }
        mlc_test_free(bufs);
    }
    /* Locally: the call returns the op's failure. */
    uint64_t in[2] = {1, 2}, inout[2] = {3, 4};
    fail_here = 1;
    mlc_status_t st = mlc_reduce_local(in, inout, 2, MLC_UINT64, op_fails_here);
    fail_here = 0;
    CHECK(st == MLC_ERR_USER_OP && strstr(mlc_last_error(), "refuses") != NULL, "mlc_reduce_local -> %s (%s)",
          mlc_status_name(st), mlc_last_error());
    inout[0] = 3;
    inout[1] = 4;
    CHECK_OK(mlc_reduce_local(in, inout, 2, MLC_UINT64, op_fails_here));
    CHECK(inout[0] == 4 && inout[1] == 6, "reduce_local after a failure: %llu %llu", (unsigned long long)inout[0],
          (unsigned long long)inout[1]);
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv)
{
    if (mlc_op_create(sum_or_fail, 1, NULL, &op_fails_here) != MLC_SUCCESS) {
        fprintf(stderr, "mlc_op_create: %s\n", mlc_last_error());
        return 1;
    }
    int rc = mlc_test_main(argc, argv, body);
    mlc_op_free(op_fails_here);
    return rc;
}
