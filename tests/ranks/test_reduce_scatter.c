/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reduce_scatter: every dtype x built-in op at per-rank counts 0, 1, 7 and
 * 333, in-place (recvbuf == sendbuf + rank*recvcount) and out-of-place;
 * 1 MiB per rank for one dtype per op; every algorithm the backend offers.
 */
#include "harness.h"
#include "testdata.h"

static const size_t small_counts[] = {0, 1, 7, 333};
#define MIB (1024u * 1024u)

typedef struct case_desc {
    mlc_dtype_t dt;
    mlc_op_t op;
    size_t count; /* recvcount */
    int inplace;
    uint32_t seed;
    const char *algo;
} case_desc_t;

#define CASE_FMT "reduce_scatter %s %s recvcount=%zu %s algo=%s"
#define CASE_ARGS(c)                                                                      \
    mlc_dtype_name((c)->dt), mlc_op_name((c)->op), (c)->count,                            \
        (c)->inplace ? "in-place" : "out-of-place", (c)->algo

static int check_reduce_scatter(mlc_comm_t *comm, const case_desc_t *c)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(c->dt), bytes = c->count * es, total = bytes * (size_t)p;
    unsigned char *send = mlc_test_alloc(total), *recv = mlc_test_alloc(bytes);
    unsigned char *want = mlc_test_alloc(bytes), *orig = mlc_test_alloc(total);
    /* Element g of the full vector is global index g: block r starts at r*count. */
    mlc_tv_fill(c->dt, c->op, p, r, c->seed, send, 0, c->count * (size_t)p);
    memcpy(orig, send, total);
    mlc_tv_fill_expected(c->dt, c->op, p, c->seed, want, (size_t)r * c->count, c->count);
    unsigned char *out = c->inplace ? send + (size_t)r * bytes : recv;
    CHECK_OK(mlc_reduce_scatter(send, out, c->count, c->dt, c->op, comm, NULL));
    CHECK_MEM(out, want, bytes, es, CASE_FMT, CASE_ARGS(c));
    if (!c->inplace)
        CHECK_MEM(send, orig, total, es, "sendbuf modified by " CASE_FMT, CASE_ARGS(c));
    CHECK(mlc_test_guard_ok(send, total) && mlc_test_guard_ok(recv, bytes),
          "write past the end of a buffer in " CASE_FMT, CASE_ARGS(c));
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    mlc_test_free(orig);
    return 0;
}

static const struct {
    mlc_op_t op;
    mlc_dtype_t dt;
} one_mib_cases[] = {
    {MLC_SUM, MLC_BFLOAT16}, {MLC_PROD, MLC_INT32}, {MLC_MAX, MLC_FLOAT64},
    {MLC_MIN, MLC_INT8},     {MLC_AVG, MLC_FLOAT32},
};

static int body(mlc_comm_t *comm)
{
    uint32_t seed = 1;
    CHECK_OK(mlc_reduce_scatter(NULL, NULL, 0, MLC_FLOAT32, MLC_MAX, comm, NULL));
    for (mlc_dtype_t dt = 0; dt < MLC_DTYPE_COUNT; dt++)
        for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++)
            for (size_t k = 0; k < sizeof small_counts / sizeof *small_counts; k++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    case_desc_t c = {dt, op, small_counts[k], inplace, seed++, "auto"};
                    CHECK_RUN(check_reduce_scatter(comm, &c));
                }
    for (size_t k = 0; k < sizeof one_mib_cases / sizeof *one_mib_cases; k++) {
        mlc_dtype_t dt = one_mib_cases[k].dt;
        case_desc_t c = {dt, one_mib_cases[k].op, MIB / mlc_dtype_size(dt), (int)(k % 2), seed++,
                         "auto"};
        CHECK_RUN(check_reduce_scatter(comm, &c));
    }

    const char *algos[32];
    size_t nalgo = mlc_test_algos(comm, MLC_COLL_REDUCE_SCATTER, algos, 32);
    for (size_t a = 0; a < nalgo; a++) {
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_REDUCE_SCATTER, algos[a]));
        static const size_t counts[] = {1, 333, MIB / 8 + 1};
        for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++)
            for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
                if (counts[k] > 333 && op != MLC_AVG) continue;
                case_desc_t c = {MLC_FLOAT16, op, counts[k], (int)(seed % 2), seed, algos[a]};
                seed++;
                CHECK_RUN(check_reduce_scatter(comm, &c));
            }
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_REDUCE_SCATTER, NULL));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
