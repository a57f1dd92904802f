/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every operation of the API, blocking and with a request, in-place forms
 * included, checked value by value. Written for the MPI backend and run on
 * every backend, so the expectations are the API's, not MPI's.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "harness.h"

/* Run `call` (whose last argument is QP) blocking when mode == 0, else with a
 * request that is then waited for. */
#define QP qp_
#define DO(call)                                                  \
    do {                                                          \
        mlc_request_t *q_ = NULL, **qp_ = mode ? &q_ : NULL;      \
        CHECK_OK(call);                                           \
        if (mode) CHECK_OK(mlc_request_wait(&q_));                \
        CHECK(q_ == NULL, "request not released");                \
    } while (0)

enum { N = 37 };

static int32_t val(int rank, size_t i) { return (int32_t)(rank * 1000 + (int)i); }

static int rooted(mlc_comm_t *comm, int mode, int root)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int32_t send[N * 4], recv[N * 4];
    /* broadcast, separate buffers and in place */
    for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t i = 0; i < N; i++) send[i] = val(root, i), recv[i] = -1;
        const void *sb = r == root ? (inplace ? (const void *)recv : send) : NULL;
        if (inplace && r == root) memcpy(recv, send, sizeof(int32_t) * N);
        DO(mlc_broadcast(sb, recv, N, MLC_INT32, root, comm, QP));
        for (size_t i = 0; i < N; i++) CHECK(recv[i] == val(root, i), "bcast[%zu] = %d", i, recv[i]);
    }
    /* reduce (sum) */
    for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t i = 0; i < N; i++) send[i] = val(r, i), recv[i] = -1;
        bool ip = inplace && r == root;
        if (ip) memcpy(recv, send, sizeof(int32_t) * N);
        DO(mlc_reduce(ip ? recv : send, r == root ? recv : NULL, N, MLC_INT32, MLC_SUM, root, comm, QP));
        if (r == root)
            for (size_t i = 0; i < N; i++) {
                int32_t want = 0;
                for (int k = 0; k < p; k++) want += val(k, i);
                CHECK(recv[i] == want, "reduce[%zu] = %d, want %d", i, recv[i], want);
            }
    }
    /* gather / scatter (in place at the root too) */
    for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t i = 0; i < N * (size_t)p; i++) recv[i] = -1;
        for (size_t i = 0; i < N; i++) send[i] = val(r, i);
        bool ip = inplace && r == root;
        if (ip) memcpy(recv + (size_t)root * N, send, sizeof(int32_t) * N);
        DO(mlc_gather(ip ? recv + (size_t)root * N : send, r == root ? recv : NULL, N, MLC_INT32, root, comm, QP));
        if (r == root)
            for (int k = 0; k < p; k++)
                for (size_t i = 0; i < N; i++)
                    CHECK(recv[k * N + i] == val(k, i), "gather[%d][%zu] = %d", k, i, recv[k * N + i]);
        int32_t out[N];
        for (size_t i = 0; i < N * (size_t)p; i++) send[i] = val((int)(i / N), i % N) + 7;
        for (size_t i = 0; i < N; i++) out[i] = -1;
        void *rb = ip ? (void *)(send + (size_t)root * N) : out;
        DO(mlc_scatter(r == root ? send : NULL, rb, N, MLC_INT32, root, comm, QP));
        const int32_t *got = ip ? send + (size_t)root * N : out;
        for (size_t i = 0; i < N; i++) CHECK(got[i] == val(r, i) + 7, "scatter[%zu] = %d", i, got[i]);
    }
    /* gatherv / scatterv: rank k has k+1 elements, blocks in reverse order with gaps */
    size_t counts[4], displs[4], off = 0;
    for (int k = p - 1; k >= 0; k--) {
        counts[k] = (size_t)k + 1;
        displs[k] = off;
        off += counts[k] + 2;
    }
    for (size_t i = 0; i < off; i++) recv[i] = -1;
    for (size_t i = 0; i < counts[r]; i++) send[i] = val(r, i);
    DO(mlc_gatherv(send, counts[r], r == root ? recv : NULL, r == root ? counts : NULL, r == root ? displs : NULL,
                   MLC_INT32, root, comm, QP));
    if (r == root)
        for (int k = 0; k < p; k++)
            for (size_t i = 0; i < counts[k]; i++)
                CHECK(recv[displs[k] + i] == val(k, i), "gatherv[%d][%zu] = %d", k, i, recv[displs[k] + i]);
    int32_t out[8];
    for (size_t i = 0; i < 8; i++) out[i] = -1;
    DO(mlc_scatterv(r == root ? recv : NULL, r == root ? counts : NULL, r == root ? displs : NULL, out, counts[r],
                    MLC_INT32, root, comm, QP));
    for (size_t i = 0; i < counts[r]; i++) CHECK(out[i] == val(r, i), "scatterv[%zu] = %d", i, out[i]);
    CHECK(out[counts[r]] == -1, "scatterv wrote past its count");
    return 0;
}

static int everyone(mlc_comm_t *comm, int mode)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    double d[N], e[N];
    /* allreduce: every built-in op on float64, then in place */
    const mlc_op_t ops[] = {MLC_SUM, MLC_PROD, MLC_MAX, MLC_MIN, MLC_AVG};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (size_t i = 0; i < N; i++) d[i] = (double)(r + 1) * (double)(i % 3 + 1), e[i] = -1;
        DO(mlc_allreduce(d, e, N, MLC_FLOAT64, ops[o], comm, QP));
        for (size_t i = 0; i < N; i++) {
            double want = ops[o] == MLC_PROD ? 1 : ops[o] == MLC_MIN ? 1e300 : ops[o] == MLC_MAX ? -1e300 : 0;
            for (int k = 0; k < p; k++) {
                double x = (double)(k + 1) * (double)(i % 3 + 1);
                if (ops[o] == MLC_PROD) want *= x;
                else if (ops[o] == MLC_MAX) want = x > want ? x : want;
                else if (ops[o] == MLC_MIN) want = x < want ? x : want;
                else want += x;
            }
            if (ops[o] == MLC_AVG) want /= p;
            CHECK(e[i] == want, "allreduce %s [%zu] = %g, want %g", mlc_op_name(ops[o]), i, e[i], want);
        }
    }
    for (size_t i = 0; i < N; i++) d[i] = r + (double)i;
    DO(mlc_allreduce(d, d, N, MLC_FLOAT64, MLC_MAX, comm, QP));
    for (size_t i = 0; i < N; i++) CHECK(d[i] == p - 1 + (double)i, "allreduce in place [%zu] = %g", i, d[i]);

    /* allgather, then in place */
    int64_t g[N * 4], s64[N];
    for (size_t i = 0; i < N; i++) s64[i] = val(r, i);
    for (size_t i = 0; i < N * (size_t)p; i++) g[i] = -1;
    DO(mlc_allgather(s64, g, N, MLC_INT64, comm, QP));
    for (size_t i = 0; i < N * (size_t)p; i++) CHECK(g[i] == val((int)(i / N), i % N), "allgather[%zu]", i);
    for (size_t i = 0; i < N * (size_t)p; i++) g[i] = (size_t)r == i / N ? val(r, i % N) + 1 : -1;
    DO(mlc_allgather(g + (size_t)r * N, g, N, MLC_INT64, comm, QP));
    for (size_t i = 0; i < N * (size_t)p; i++)
        CHECK(g[i] == val((int)(i / N), i % N) + 1, "allgather in place [%zu] = %lld", i, (long long)g[i]);

    /* allgatherv with gaps (in place too) */
    size_t counts[4], displs[4], off = 0;
    for (int k = 0; k < p; k++) {
        counts[k] = (size_t)(p - k) * 3;
        displs[k] = off + 1;
        off += counts[k] + 1;
    }
    for (size_t i = 0; i < off; i++) g[i] = -1;
    for (size_t i = 0; i < counts[r]; i++) s64[i] = val(r, i);
    DO(mlc_allgatherv(s64, counts[r], g, counts, displs, MLC_INT64, comm, QP));
    for (int k = 0; k < p; k++)
        for (size_t i = 0; i < counts[k]; i++) CHECK(g[displs[k] + i] == val(k, i), "allgatherv[%d][%zu]", k, i);
    for (size_t i = 0; i < off; i++) g[i] = -1;
    for (size_t i = 0; i < counts[r]; i++) g[displs[r] + i] = val(r, i) * 2;
    DO(mlc_allgatherv(g + displs[r], counts[r], g, counts, displs, MLC_INT64, comm, QP));
    for (int k = 0; k < p; k++)
        for (size_t i = 0; i < counts[k]; i++)
            CHECK(g[displs[k] + i] == val(k, i) * 2, "allgatherv in place [%d][%zu]", k, i);

    /* reduce_scatter (sum), then in place */
    int32_t rs[N * 4], rr[N];
    for (size_t i = 0; i < N * (size_t)p; i++) rs[i] = val(r, i);
    DO(mlc_reduce_scatter(rs, rr, N, MLC_INT32, MLC_SUM, comm, QP));
    for (size_t i = 0; i < N; i++) {
        int32_t want = 0;
        for (int k = 0; k < p; k++) want += val(k, (size_t)r * N + i);
        CHECK(rr[i] == want, "reduce_scatter[%zu] = %d, want %d", i, rr[i], want);
    }
    for (size_t i = 0; i < N * (size_t)p; i++) rs[i] = val(r, i);
    DO(mlc_reduce_scatter(rs, rs + (size_t)r * N, N, MLC_INT32, MLC_SUM, comm, QP));
    for (size_t i = 0; i < N; i++) {
        int32_t want = 0;
        for (int k = 0; k < p; k++) want += val(k, (size_t)r * N + i);
        CHECK(rs[(size_t)r * N + i] == want, "reduce_scatter in place [%zu] = %d", i, rs[(size_t)r * N + i]);
    }

    /* alltoall (block j goes to rank j), then in place */
    int32_t a[N * 4], b[N * 4];
    for (size_t i = 0; i < N * (size_t)p; i++) a[i] = val(r, i), b[i] = -1;
    DO(mlc_alltoall(a, b, N, MLC_INT32, comm, QP));
    for (int k = 0; k < p; k++)
        for (size_t i = 0; i < N; i++)
            CHECK(b[k * N + i] == val(k, (size_t)r * N + i), "alltoall[%d][%zu] = %d", k, i, b[k * N + i]);
    DO(mlc_alltoall(a, a, N, MLC_INT32, comm, QP));
    for (int k = 0; k < p; k++)
        for (size_t i = 0; i < N; i++) CHECK(a[k * N + i] == val(k, (size_t)r * N + i), "alltoall in place");

    /* alltoallv: rank r sends j+r+1 elements to rank j */
    size_t sc[4], sd[4], rc[4], rd[4], so = 0, ro = 0;
    for (int k = 0; k < p; k++) {
        sc[k] = (size_t)(k + r + 1);
        sd[k] = so;
        so += sc[k];
        rc[k] = (size_t)(r + k + 1);
        rd[k] = ro + 1;
        ro += rc[k] + 1;
    }
    for (size_t i = 0; i < so; i++) a[i] = val(r, i);
    for (size_t i = 0; i < ro; i++) b[i] = -1;
    DO(mlc_alltoallv(a, sc, sd, b, rc, rd, MLC_INT32, comm, QP));
    for (int k = 0; k < p; k++) {
        size_t their = 0; /* where rank k's block for us starts in its sendbuf */
        for (int j = 0; j < r; j++) their += (size_t)(j + k + 1);
        for (size_t i = 0; i < rc[k]; i++)
            CHECK(b[rd[k] + i] == val(k, their + i), "alltoallv[%d][%zu] = %d", k, i, b[rd[k] + i]);
    }
    DO(mlc_barrier(comm, QP));
    return 0;
}

static int p2p(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    int32_t s[N], d[N];
    mlc_msg_status_t st;
    /* ring: receive from anyone, any tag, posted before the send */
    for (size_t i = 0; i < N; i++) s[i] = val(r, i), d[i] = -1;
    mlc_request_t *rq = NULL;
    CHECK_OK(mlc_recv(d, N, MLC_INT32, MLC_ANY_SOURCE, MLC_ANY_TAG, comm, &st, &rq));
    CHECK_OK(mlc_send(s, N - 3, MLC_INT32, next, 10 + r, comm, NULL));
    CHECK_OK(mlc_request_wait(&rq));
    CHECK(st.source == prev && st.tag == 10 + prev && st.bytes == (N - 3) * 4, "recv status %d/%d/%zu",
          st.source, st.tag, st.bytes);
    for (size_t i = 0; i < N - 3; i++) CHECK(d[i] == val(prev, i), "ring[%zu] = %d", i, d[i]);
    /* sendrecv both ways */
    CHECK_OK(mlc_sendrecv(s, N, next, 3, d, N, prev, 3, MLC_INT32, comm, &st, NULL));
    CHECK(st.source == prev && st.bytes == N * 4, "sendrecv status");
    mlc_request_t *sq = NULL;
    CHECK_OK(mlc_sendrecv(s, 5, prev, 4, d, N, MLC_ANY_SOURCE, 4, MLC_INT32, comm, &st, &sq));
    CHECK_OK(mlc_request_wait(&sq));
    CHECK(st.source == next && st.bytes == 20 && d[4] == val(next, 4), "async sendrecv");
    if (p < 2) return 0;
    /* probe, iprobe, truncation: rank 0 -> rank 1 */
    if (r == 0) {
        CHECK_OK(mlc_send(s, 5, MLC_INT32, 1, 42, comm, NULL));
        CHECK_OK(mlc_send(s, 8, MLC_INT32, 1, 43, comm, NULL));
    } else if (r == 1) {
        CHECK_OK(mlc_probe(MLC_ANY_SOURCE, 42, comm, &st));
        CHECK(st.source == 0 && st.tag == 42 && st.bytes == 20, "probe %d/%d/%zu", st.source, st.tag, st.bytes);
        int flag = 0;
        while (!flag) CHECK_OK(mlc_iprobe(0, 43, comm, &flag, &st));
        CHECK(st.bytes == 32, "iprobe bytes %zu", st.bytes);
        CHECK_OK(mlc_recv(d, N, MLC_INT32, 0, 42, comm, &st, NULL));
        CHECK_ERR(mlc_recv(d, 4, MLC_INT32, 0, 43, comm, &st, NULL), MLC_ERR_TRUNCATE);
        CHECK(strstr(mlc_last_error(), "16") != NULL, "truncation message names the buffer: %s", mlc_last_error());
        CHECK_OK(mlc_iprobe(0, MLC_ANY_TAG, comm, &flag, &st));
        CHECK(flag == 0, "the truncated message was not consumed");
    }
    return 0;
}

static int split(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    mlc_comm_t *sub = NULL;
    /* even / odd, reversed order; the last rank (if p > 2) stays out */
    int color = (p > 2 && r == p - 1) ? MLC_UNDEFINED : r % 2;
    CHECK_OK(mlc_comm_split(comm, color, -r, &sub));
    if (color == MLC_UNDEFINED) {
        CHECK(sub == NULL, "MLC_UNDEFINED gave a communicator");
        return 0;
    }
    int n = 0, mine = 0;
    for (int k = 0; k < p; k++) {
        int ck = (p > 2 && k == p - 1) ? MLC_UNDEFINED : k % 2;
        if (ck != color) continue;
        n++;
        if (k > r) mine++;
    }
    CHECK(mlc_comm_size(sub) == n && mlc_comm_rank(sub) == mine, "split rank %d/%d, want %d/%d", mlc_comm_rank(sub),
          mlc_comm_size(sub), mine, n);
    CHECK(strcmp(mlc_comm_backend(sub), mlc_comm_backend(comm)) == 0, "split changed backend");
    int32_t x = r, sum = 0;
    CHECK_OK(mlc_allreduce(&x, &sum, 1, MLC_INT32, MLC_SUM, sub, NULL));
    int32_t want = 0;
    for (int k = 0; k < p; k++)
        if (((p > 2 && k == p - 1) ? MLC_UNDEFINED : k % 2) == color) want += k;
    CHECK(sum == want, "allreduce on split: %d, want %d", sum, want);
    CHECK_OK(mlc_comm_free(sub));
    return 0;
}

/* Several requests in flight at once, completed out of order. */
static int overlap(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int32_t x[3][N], y[3][N];
    mlc_request_t *q[4] = {NULL};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < N; i++) x[k][i] = val(r, i) + k;
        CHECK_OK(mlc_allreduce(x[k], y[k], N, MLC_INT32, MLC_MAX, comm, &q[k]));
    }
    CHECK_OK(mlc_barrier(comm, &q[3]));
    int done = 0;
    while (!done) CHECK_OK(mlc_request_test(&q[3], &done));
    for (int k = 2; k >= 0; k--) CHECK_OK(mlc_request_wait(&q[k]));
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < N; i++) CHECK(y[k][i] == val(p - 1, i) + k, "overlapped allreduce %d[%zu]", k, i);
    return 0;
}

/* A blocking in-place reduce of 16 KB at every root (MPICH 4.0's own
 * crashes at a root other than 0). */
static int inplace_reduce(mlc_comm_t *comm)
{
    enum { M = 4096 };
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    static _Thread_local int32_t x[M];
    for (int root = 0; root < p; root++) {
        for (size_t i = 0; i < M; i++) x[i] = val(r, i);
        CHECK_OK(mlc_reduce(x, r == root ? x : NULL, M, MLC_INT32, MLC_SUM, root, comm, NULL));
        if (r != root) continue;
        for (size_t i = 0; i < M; i++) {
            int32_t want = 0;
            for (int k = 0; k < p; k++) want += val(k, i);
            CHECK(x[i] == want, "in-place reduce at root %d [%zu] = %d, want %d", root, i, x[i], want);
        }
    }
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    if (p > 4) return MLC_TEST_SKIP;
    for (int mode = 0; mode < 2; mode++) {
        for (int root = 0; root < p; root++)
            if (rooted(comm, mode, root)) return 1;
        if (everyone(comm, mode)) return 1;
    }
    if (p2p(comm) || split(comm) || overlap(comm) || inplace_reduce(comm)) return 1;
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
