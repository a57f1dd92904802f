/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * allreduce: every dtype x built-in op at sizes 0, 1, 7 and 1001 (not a
 * multiple of any rank count), in-place and out-of-place; 1 MiB for one
 * dtype per op; every algorithm the backend offers; results checked against
 * a local reference and bitwise identical on every rank; large in-place calls
 * that reuse the communicator's scratch, two of them in flight at once.
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
    uint32_t seed;
    const char *algo;
} case_desc_t;

#define CASE_FMT "allreduce %s %s count=%zu %s algo=%s"
#define CASE_ARGS(c)                                                                      \
    mlc_dtype_name((c)->dt), mlc_op_name((c)->op), (c)->count,                            \
        (c)->inplace ? "in-place" : "out-of-place", (c)->algo

static int check_allreduce(mlc_comm_t *comm, const case_desc_t *c)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t bytes = c->count * mlc_dtype_size(c->dt);
    unsigned char *send = mlc_test_alloc(bytes), *recv = mlc_test_alloc(bytes);
    unsigned char *want = mlc_test_alloc(bytes), *orig = mlc_test_alloc(bytes);
    mlc_tv_fill(c->dt, c->op, p, r, c->seed, send, 0, c->count);
    memcpy(orig, send, bytes);
    mlc_tv_fill_expected(c->dt, c->op, p, c->seed, want, 0, c->count);
    unsigned char *out = c->inplace ? send : recv;

    CHECK_OK(mlc_allreduce(send, out, c->count, c->dt, c->op, comm, NULL));
    CHECK_MEM(out, want, bytes, mlc_dtype_size(c->dt), CASE_FMT, CASE_ARGS(c));
    if (!c->inplace)
        CHECK_MEM(send, orig, bytes, mlc_dtype_size(c->dt), "sendbuf modified by " CASE_FMT,
                  CASE_ARGS(c));
    CHECK(mlc_test_guard_ok(send, bytes) && mlc_test_guard_ok(recv, bytes),
          "write past the end of a buffer in " CASE_FMT, CASE_ARGS(c));
    CHECK(mlc_test_same_on_all_ranks(comm, out, bytes, "allreduce") == 0,
          "ranks disagree in " CASE_FMT, CASE_ARGS(c));
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    mlc_test_free(orig);
    return 0;
}

/* The full dtype x op x size x placement matrix with the selector's choice. */
static int full_matrix(mlc_comm_t *comm)
{
    uint32_t seed = 1;
    for (mlc_dtype_t dt = 0; dt < MLC_DTYPE_COUNT; dt++)
        for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++)
            for (size_t k = 0; k < sizeof small_counts / sizeof *small_counts; k++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    case_desc_t c = {dt, op, small_counts[k], inplace, seed++, "auto"};
                    CHECK_RUN(check_allreduce(comm, &c));
                }
    return 0;
}

/* 1 MiB of data for one dtype per op (a different dtype for each op). */
static const struct {
    mlc_op_t op;
    mlc_dtype_t dt;
} one_mib_cases[] = {
    {MLC_SUM, MLC_FLOAT32}, {MLC_PROD, MLC_FLOAT64}, {MLC_MAX, MLC_BFLOAT16},
    {MLC_MIN, MLC_UINT64},  {MLC_AVG, MLC_INT32},    {MLC_AVG, MLC_FLOAT16},
};

static int one_mib(mlc_comm_t *comm, const char *algo, uint32_t seed)
{
    for (size_t k = 0; k < sizeof one_mib_cases / sizeof *one_mib_cases; k++) {
        mlc_dtype_t dt = one_mib_cases[k].dt;
        case_desc_t c = {dt, one_mib_cases[k].op, MIB / mlc_dtype_size(dt), (int)(k % 2),
                         seed + (uint32_t)k, algo};
        CHECK_RUN(check_allreduce(comm, &c));
    }
    return 0;
}

/* Every algorithm the backend offers, each forced through mlc_comm_set_algo. */
static int every_algorithm(mlc_comm_t *comm)
{
    static const mlc_dtype_t dts[] = {MLC_INT8, MLC_UINT32, MLC_FLOAT16, MLC_BFLOAT16, MLC_FLOAT64};
    static const size_t counts[] = {1, 7, 1001};
    const char *algos[32];
    size_t nalgo = mlc_test_algos(comm, MLC_COLL_ALLREDUCE, algos, 32);
    uint32_t seed = 50000;
    for (size_t a = 0; a < nalgo; a++) {
        const char *got = NULL;
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLREDUCE, algos[a]));
        CHECK_OK(mlc_comm_get_algo(comm, MLC_COLL_ALLREDUCE, 4096, &got));
        CHECK(got && strcmp(got, algos[a]) == 0, "forced %s, get_algo says %s", algos[a],
              got ? got : "(null)");
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
            for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++)
                for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        case_desc_t c = {dts[d], op, counts[k], inplace, seed++, algos[a]};
                        CHECK_RUN(check_allreduce(comm, &c));
                    }
        /* 1 MiB + 3 elements: chunks that do not divide evenly. */
        case_desc_t big = {MLC_FLOAT32, MLC_SUM, MIB / 4 + 3, (int)(a % 2), seed++, algos[a]};
        CHECK_RUN(check_allreduce(comm, &big));
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLREDUCE, "auto"));
    const char *got = NULL;
    CHECK_OK(mlc_comm_get_algo(comm, MLC_COLL_ALLREDUCE, 4096, &got));
    CHECK(got != NULL, "get_algo after clearing the override gave no name");
    return 0;
}

/* Large in-place reductions share scratch kept by the communicator between
 * calls: a smaller call after a larger one, a larger after a smaller, and
 * two in flight at once (each must get scratch of its own). */
static int scratch_reuse(mlc_comm_t *comm)
{
    static const size_t counts[] = {MIB / 2 + 5, MIB / 16 + 1, MIB + 3};
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    uint32_t seed = 90000;
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        case_desc_t c = {MLC_FLOAT32, MLC_SUM, counts[k], 1, seed++, "auto"};
        CHECK_RUN(check_allreduce(comm, &c));
    }
    size_t n = MIB / 4 + 7, bytes = n * 4;
    unsigned char *buf[2], *want[2];
    mlc_request_t *req[2];
    for (int i = 0; i < 2; i++) {
        buf[i] = mlc_test_alloc(bytes);
        want[i] = mlc_test_alloc(bytes);
        mlc_tv_fill(MLC_INT32, MLC_SUM, p, r, seed + (uint32_t)i, buf[i], 0, n);
        mlc_tv_fill_expected(MLC_INT32, MLC_SUM, p, seed + (uint32_t)i, want[i], 0, n);
        CHECK_OK(mlc_allreduce(buf[i], buf[i], n, MLC_INT32, MLC_SUM, comm, &req[i]));
    }
    for (int i = 1; i >= 0; i--) CHECK_OK(mlc_request_wait(&req[i]));
    for (int i = 0; i < 2; i++) {
        CHECK_MEM(buf[i], want[i], bytes, 4, "in-place allreduce %d of two in flight", i);
        mlc_test_free(buf[i]);
        mlc_test_free(want[i]);
    }
    return 0;
}

static int body(mlc_comm_t *comm)
{
    /* count 0: buffers may be NULL. */
    CHECK_OK(mlc_allreduce(NULL, NULL, 0, MLC_FLOAT32, MLC_SUM, comm, NULL));
    CHECK_RUN(full_matrix(comm));
    CHECK_RUN(one_mib(comm, "auto", 20000));
    CHECK_RUN(scratch_reuse(comm));
    CHECK_RUN(every_algorithm(comm));
    /* The communicator is still healthy and agrees that everyone passed. */
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "communicator failed: %s",
          mlc_status_name(mlc_comm_status(comm)));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
