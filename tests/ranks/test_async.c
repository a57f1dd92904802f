/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asynchronous operations: many collectives in flight at once (waited in
 * any order, wait_all with statuses), every collective kind plus p2p in
 * flight together, overlap (start, compute, wait), completion through a
 * mlc_request_test loop, a blocking collective issued while an async one is
 * pending, and request-pool reuse over many operations.
 */
#include "harness.h"
#include "testdata.h"

#define MIB (1024u * 1024u)

typedef struct ar_case {
    mlc_dtype_t dt;
    mlc_op_t op;
    size_t count;
    uint32_t seed;
    unsigned char *send, *recv, *want;
} ar_case_t;

static void ar_prepare(mlc_comm_t *comm, ar_case_t *c)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t bytes = c->count * mlc_dtype_size(c->dt);
    c->send = mlc_test_alloc(bytes);
    c->recv = mlc_test_alloc(bytes);
    c->want = mlc_test_alloc(bytes);
    mlc_tv_fill(c->dt, c->op, p, r, c->seed, c->send, 0, c->count);
    mlc_tv_fill_expected(c->dt, c->op, p, c->seed, c->want, 0, c->count);
}

static int ar_verify(mlc_comm_t *comm, ar_case_t *c, const char *what)
{
    size_t es = mlc_dtype_size(c->dt);
    CHECK_MEM(c->recv, c->want, c->count * es, es, "%s: allreduce %s %s count=%zu", what,
              mlc_dtype_name(c->dt), mlc_op_name(c->op), c->count);
    mlc_test_free(c->send);
    mlc_test_free(c->recv);
    mlc_test_free(c->want);
    return 0;
}

/* 16 allreduces in flight; the last is waited first, then wait_all. */
static int many_allreduces(mlc_comm_t *comm)
{
    enum { K = 16 };
    ar_case_t cs[K];
    mlc_request_t *reqs[K];
    mlc_status_t sts[K];
    for (int k = 0; k < K; k++) {
        cs[k] = (ar_case_t){(mlc_dtype_t)(k % MLC_DTYPE_COUNT), (mlc_op_t)(k % MLC_OP_BUILTIN_COUNT),
                            k == 3 ? MIB / 8 : (size_t)(k * 37 + 1), 100u + (uint32_t)k, NULL, NULL,
                            NULL};
        ar_prepare(comm, &cs[k]);
        sts[k] = MLC_ERR_INTERNAL;
    }
    for (int k = 0; k < K; k++) {
        reqs[k] = NULL;
        CHECK_OK(mlc_allreduce(cs[k].send, cs[k].recv, cs[k].count, cs[k].dt, cs[k].op, comm,
                               &reqs[k]));
        CHECK(reqs[k] != NULL, "async allreduce %d gave no request", k);
    }
    CHECK_OK(mlc_request_wait(&reqs[K - 1]));
    CHECK(reqs[K - 1] == NULL, "wait did not clear the request");
    CHECK_OK(mlc_request_wait_all(K, reqs, sts)); /* one entry is already NULL */
    for (int k = 0; k < K; k++) {
        CHECK(reqs[k] == NULL, "wait_all left request %d set", k);
        if (k < K - 1) CHECK(sts[k] == MLC_SUCCESS, "status %d is %s", k, mlc_status_name(sts[k]));
        CHECK_RUN(ar_verify(comm, &cs[k], "many in flight"));
    }
    return 0;
}

/* One of every collective kind and a p2p ring exchange in flight together. */
static int every_kind_in_flight(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    int next = (r + 1) % p, prev = (r + p - 1) % p, root = p - 1;
    enum { N = 513 };
    ar_case_t ar = {MLC_FLOAT32, MLC_SUM, N, 7, NULL, NULL, NULL};
    ar_prepare(comm, &ar);
    int32_t *ag_in = calloc(N, 4), *ag_out = calloc((size_t)p * N, 4);
    int64_t *bc = calloc(N, 8);
    uint8_t *a2a_in = calloc((size_t)p * N, 1), *a2a_out = calloc((size_t)p * N, 1);
    double *rs_in = calloc((size_t)p * N, 8), *rs_out = calloc(N, 8);
    int32_t p2p_out[N], p2p_in[N];
    CHECK(ag_in && ag_out && bc && a2a_in && a2a_out && rs_in && rs_out, "out of memory");
    for (int i = 0; i < N; i++) {
        ag_in[i] = r * N + i;
        bc[i] = r == root ? (int64_t)i * 1000003 : -1;
        p2p_out[i] = r * 7 + i;
        for (int q = 0; q < p; q++) {
            a2a_in[q * N + i] = (uint8_t)(r * 16 + q + i);
            rs_in[q * N + i] = (double)(q + i + r);
        }
    }
    mlc_request_t *reqs[9];
    CHECK_OK(mlc_allreduce(ar.send, ar.recv, N, ar.dt, ar.op, comm, &reqs[0]));
    CHECK_OK(mlc_recv(p2p_in, N, MLC_INT32, prev, 3, comm, NULL, &reqs[1]));
    CHECK_OK(mlc_allgather(ag_in, ag_out, N, MLC_INT32, comm, &reqs[2]));
    CHECK_OK(mlc_broadcast(bc, bc, N, MLC_INT64, root, comm, &reqs[3]));
    CHECK_OK(mlc_barrier(comm, &reqs[4]));
    CHECK_OK(mlc_alltoall(a2a_in, a2a_out, N, MLC_UINT8, comm, &reqs[5]));
    CHECK_OK(mlc_reduce_scatter(rs_in, rs_out, N, MLC_FLOAT64, MLC_MAX, comm, &reqs[6]));
    CHECK_OK(mlc_send(p2p_out, N, MLC_INT32, next, 3, comm, &reqs[7]));
    CHECK_OK(mlc_reduce(ar.send, NULL, 0, MLC_FLOAT32, MLC_SUM, 0, comm, &reqs[8]));
    mlc_status_t sts[9];
    CHECK_OK(mlc_request_wait_all(9, reqs, sts));
    CHECK_RUN(ar_verify(comm, &ar, "every kind in flight"));
    for (int i = 0; i < N; i++) {
        CHECK(p2p_in[i] == prev * 7 + i, "p2p element %d is %d", i, p2p_in[i]);
        CHECK(bc[i] == (int64_t)i * 1000003, "broadcast element %d is %lld", i, (long long)bc[i]);
        CHECK(rs_out[i] == (double)(r + i + p - 1), "reduce_scatter element %d is %g", i, rs_out[i]);
        for (int q = 0; q < p; q++) {
            CHECK(ag_out[q * N + i] == q * N + i, "allgather block %d element %d", q, i);
            CHECK(a2a_out[q * N + i] == (uint8_t)(q * 16 + r + i), "alltoall block %d element %d",
                  q, i);
        }
    }
    free(ag_in);
    free(ag_out);
    free(bc);
    free(a2a_in);
    free(a2a_out);
    free(rs_in);
    free(rs_out);
    return 0;
}

/* Start a 1 MiB allreduce, compute something unrelated, then wait. */
static int overlap(mlc_comm_t *comm)
{
    ar_case_t c = {MLC_FLOAT32, MLC_SUM, MIB / 4, 31, NULL, NULL, NULL};
    ar_prepare(comm, &c);
    mlc_request_t *req = NULL;
    CHECK_OK(mlc_allreduce(c.send, c.recv, c.count, c.dt, c.op, comm, &req));
    volatile double acc = 0; /* the "compute" phase */
    for (int i = 0; i < 2000000; i++) acc = acc + (double)(i % 7) * 0.5;
    CHECK(acc > 0, "compute phase");
    CHECK_OK(mlc_request_wait(&req));
    return ar_verify(comm, &c, "overlap");
}

/* Complete through mlc_request_test only. */
static int test_loop(mlc_comm_t *comm)
{
    ar_case_t c = {MLC_BFLOAT16, MLC_MAX, 100001, 41, NULL, NULL, NULL};
    ar_prepare(comm, &c);
    mlc_request_t *req = NULL;
    int done = 0;
    CHECK_OK(mlc_allreduce(c.send, c.recv, c.count, c.dt, c.op, comm, &req));
    while (!done) {
        CHECK_OK(mlc_request_test(&req, &done));
        if (!done) CHECK(req != NULL, "test cleared a request that is not done");
    }
    CHECK(req == NULL, "test did not clear the completed request");
    /* Waiting on a cleared request is a no-op. */
    CHECK_OK(mlc_request_wait(&req));
    return ar_verify(comm, &c, "test loop");
}

/* A blocking collective while an async one is pending; then many small
 * async operations one after another (the request pool is reused). */
static int mixed_and_reuse(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    ar_case_t c = {MLC_INT64, MLC_MIN, 4099, 51, NULL, NULL, NULL};
    ar_prepare(comm, &c);
    mlc_request_t *req = NULL;
    CHECK_OK(mlc_allreduce(c.send, c.recv, c.count, c.dt, c.op, comm, &req));
    int32_t v = mlc_comm_rank(comm), sum = -1;
    CHECK_OK(mlc_allreduce(&v, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(sum == p * (p - 1) / 2, "blocking allreduce under a pending one gave %d", sum);
    CHECK_OK(mlc_request_wait(&req));
    CHECK_RUN(ar_verify(comm, &c, "pending during a blocking call"));
    for (int i = 0; i < 2000; i++) {
        int32_t in = i + mlc_comm_rank(comm), out = -1;
        CHECK_OK(mlc_allreduce(&in, &out, 1, MLC_INT32, MLC_MAX, comm, &req));
        CHECK_OK(mlc_request_wait(&req));
        CHECK(out == i + p - 1, "iteration %d gave %d", i, out);
    }
    return 0;
}

static int body(mlc_comm_t *comm)
{
    CHECK_RUN(many_allreduces(comm));
    CHECK_RUN(every_kind_in_flight(comm));
    CHECK_RUN(overlap(comm));
    CHECK_RUN(test_loop(comm));
    CHECK_RUN(mixed_and_reuse(comm));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
