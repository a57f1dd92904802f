/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reduce: every dtype x built-in op at sizes 0, 1, 7 and 1001, in-place (at
 * the root) and out-of-place, with the root rotating over every rank; 1 MiB
 * for one dtype per op (roots rotating); non-roots pass recvbuf NULL or a
 * buffer that must stay untouched; every algorithm the backend offers.
 * Also mlc_reduce_local for every dtype x op.
 */
#include "harness.h"
#include "testdata.h"

static const size_t small_counts[] = {0, 1, 7, 1001};
#define MIB (1024u * 1024u)

typedef struct case_desc {
    mlc_dtype_t dt;
    mlc_op_t op;
    size_t count;
    int inplace;
    int root;
    int nonroot_recv; /* non-roots pass a recvbuf (that must stay untouched) */
    uint32_t seed;
    const char *algo;
} case_desc_t;

#define CASE_FMT "reduce %s %s count=%zu %s root=%d algo=%s"
#define CASE_ARGS(c)                                                                      \
    mlc_dtype_name((c)->dt), mlc_op_name((c)->op), (c)->count,                            \
        (c)->inplace ? "in-place" : "out-of-place", (c)->root, (c)->algo

static int check_reduce(mlc_comm_t *comm, const case_desc_t *c)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(c->dt), bytes = c->count * es;
    unsigned char *send = mlc_test_alloc(bytes), *recv = mlc_test_alloc(bytes);
    unsigned char *want = mlc_test_alloc(bytes), *orig = mlc_test_alloc(bytes);
    unsigned char *fresh = mlc_test_alloc(bytes); /* what an untouched buffer holds */
    mlc_tv_fill(c->dt, c->op, p, r, c->seed, send, 0, c->count);
    memcpy(orig, send, bytes);
    if (r == c->root) mlc_tv_fill_expected(c->dt, c->op, p, c->seed, want, 0, c->count);

    void *out;
    if (r == c->root) out = c->inplace ? send : recv;
    else out = c->nonroot_recv ? recv : NULL;
    CHECK_OK(mlc_reduce(send, out, c->count, c->dt, c->op, c->root, comm, NULL));
    if (r == c->root) {
        CHECK_MEM(out, want, bytes, es, CASE_FMT, CASE_ARGS(c));
        if (!c->inplace) CHECK_MEM(send, orig, bytes, es, "sendbuf modified by " CASE_FMT, CASE_ARGS(c));
    } else {
        CHECK_MEM(send, orig, bytes, es, "non-root sendbuf modified by " CASE_FMT, CASE_ARGS(c));
        CHECK_MEM(recv, fresh, bytes, es, "non-root recvbuf written by " CASE_FMT, CASE_ARGS(c));
    }
    CHECK(mlc_test_guard_ok(send, bytes) && mlc_test_guard_ok(recv, bytes),
          "write past the end of a buffer in " CASE_FMT, CASE_ARGS(c));
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    mlc_test_free(orig);
    mlc_test_free(fresh);
    return 0;
}

static int full_matrix(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    uint32_t seed = 1;
    for (mlc_dtype_t dt = 0; dt < MLC_DTYPE_COUNT; dt++)
        for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++)
            for (size_t k = 0; k < sizeof small_counts / sizeof *small_counts; k++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    /* The root walks over every rank (p - 1 first: not 0). */
                    int root = (int)((seed + (uint32_t)p - 1) % (uint32_t)p);
                    case_desc_t c = {dt, op, small_counts[k], inplace, root, (int)(seed % 3 == 0),
                                     seed, "auto"};
                    seed++;
                    CHECK_RUN(check_reduce(comm, &c));
                }
    return 0;
}

static const struct {
    mlc_op_t op;
    mlc_dtype_t dt;
} one_mib_cases[] = {
    {MLC_SUM, MLC_INT64}, {MLC_PROD, MLC_FLOAT32}, {MLC_MAX, MLC_INT8},
    {MLC_MIN, MLC_FLOAT16}, {MLC_AVG, MLC_BFLOAT16},
};

/* 1 MiB for one dtype per op, each case with another root (not 0 first). */
static int one_mib(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    uint32_t seed = 20000;
    for (size_t k = 0; k < sizeof one_mib_cases / sizeof *one_mib_cases; k++) {
        mlc_dtype_t dt = one_mib_cases[k].dt;
        int root = (int)((k + 1) % (size_t)p);
        case_desc_t c = {dt, one_mib_cases[k].op, MIB / mlc_dtype_size(dt), (int)(k % 2), root, 1,
                         seed++, "auto"};
        CHECK_RUN(check_reduce(comm, &c));
    }
    return 0;
}

static int every_algorithm(mlc_comm_t *comm)
{
    static const mlc_dtype_t dts[] = {MLC_INT32, MLC_UINT8, MLC_BFLOAT16, MLC_FLOAT32};
    static const size_t counts[] = {1, 1001, MIB / 4 + 3};
    int p = mlc_comm_size(comm);
    const char *algos[32];
    size_t nalgo = mlc_test_algos(comm, MLC_COLL_REDUCE, algos, 32);
    uint32_t seed = 50000;
    for (size_t a = 0; a < nalgo; a++) {
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_REDUCE, algos[a]));
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
            for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++)
                for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
                    if (counts[k] > 1001 && op != MLC_SUM) continue; /* one large case per dtype */
                    int root = (int)(seed % (uint32_t)p);
                    case_desc_t c = {dts[d], op, counts[k], (int)(seed % 2), root, 0, seed,
                                     algos[a]};
                    seed++;
                    CHECK_RUN(check_reduce(comm, &c));
                }
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_REDUCE, NULL));
    return 0;
}

/* mlc_reduce_local: inout[i] = in[i] op inout[i]; MLC_AVG behaves as MLC_SUM. */
static int reduce_local(mlc_comm_t *comm)
{
    enum { N = 33 };
    for (mlc_dtype_t dt = 0; dt < MLC_DTYPE_COUNT; dt++)
        for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++) {
            mlc_op_t ref_op = op == MLC_AVG ? MLC_SUM : op;
            size_t es = mlc_dtype_size(dt);
            unsigned char in[N * 8], inout[N * 8], want[N * 8];
            uint32_t seed = 900u + (uint32_t)(dt * 8 + op);
            mlc_tv_fill(dt, ref_op, 2, 0, seed, in, 0, N);
            mlc_tv_fill(dt, ref_op, 2, 1, seed, inout, 0, N);
            mlc_tv_fill_expected(dt, ref_op, 2, seed, want, 0, N);
            CHECK_OK(mlc_reduce_local(in, inout, N, dt, op));
            CHECK_MEM(inout, want, N * es, es, "reduce_local %s %s", mlc_dtype_name(dt),
                      mlc_op_name(op));
        }
    return 0;
}

static int body(mlc_comm_t *comm)
{
    CHECK_OK(mlc_reduce(NULL, NULL, 0, MLC_INT32, MLC_SUM, mlc_comm_size(comm) - 1, comm, NULL));
    CHECK_RUN(reduce_local(comm));
    CHECK_RUN(full_matrix(comm));
    CHECK_RUN(one_mib(comm));
    CHECK_RUN(every_algorithm(comm));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
