/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The large-count paths of the MPI backend, with the count limit of one MPI
 * call shrunk to 5 by the module's test knob (mlc_mpi_set_limits): chunked
 * reductions, big datatypes, v-collective blocks sent point to point,
 * rebased displacements, big point-to-point messages; once without and once
 * with MPI-4 large-count calls (where the library has them), and on a
 * split communicator.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include "devrt/gpudirect.h"
#include "harness.h"

typedef void (*set_limits_fn)(size_t count, size_t displ, int large_count_calls);

enum { L = 5, N = 13, V = 64 };

static int32_t val(int r, size_t i) { return (int32_t)(r * 1000 + (int)i); }

#define QP qp_
#define DO(call)                                                  \
    do {                                                          \
        mlc_request_t *q_ = NULL, **qp_ = mode ? &q_ : NULL;      \
        CHECK_OK(call);                                           \
        if (mode) CHECK_OK(mlc_request_wait(&q_));                \
    } while (0)

static int uniform(mlc_comm_t *comm, int mode)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm), root = p - 1;
    int32_t x[N * 4], y[N * 4];
    for (size_t i = 0; i < N; i++) x[i] = val(r, i);
    DO(mlc_allreduce(x, y, N, MLC_INT32, MLC_SUM, comm, QP));
    for (size_t i = 0; i < N; i++) {
        int32_t w = 0;
        for (int k = 0; k < p; k++) w += val(k, i);
        CHECK(y[i] == w, "chunked allreduce [%zu] = %d, want %d", i, y[i], w);
    }
    DO(mlc_allreduce(x, x, N, MLC_INT32, MLC_AVG, comm, QP));
    for (size_t i = 0; i < N; i++) CHECK(x[i] == y[i] / p, "chunked avg in place [%zu] = %d", i, x[i]);
    uint16_t h[N], hs[N];
    for (size_t i = 0; i < N; i++) h[i] = 0x3c00; /* float16 1.0: user-op reduction in chunks */
    DO(mlc_allreduce(h, hs, N, MLC_FLOAT16, MLC_SUM, comm, QP));
    const uint16_t sum_bits[] = {0x3c00, 0x4000, 0x4200, 0x4400}; /* 1.0 .. 4.0 */
    for (size_t i = 0; i < N; i++) CHECK(hs[i] == sum_bits[p - 1], "float16 chunked sum [%zu] = %#x", i, hs[i]);
    for (size_t i = 0; i < N; i++) x[i] = val(r, i);
    DO(mlc_reduce(x, r == root ? y : NULL, N, MLC_INT32, MLC_MAX, root, comm, QP));
    if (r == root)
        for (size_t i = 0; i < N; i++) CHECK(y[i] == val(p - 1, i), "chunked reduce [%zu] = %d", i, y[i]);
    /* reduce_scatter above the limit: per-block reduces, and in place */
    for (size_t i = 0; i < N * (size_t)p; i++) x[i] = val(r, i);
    DO(mlc_reduce_scatter(x, y, N, MLC_INT32, MLC_SUM, comm, QP));
    for (size_t i = 0; i < N; i++) {
        int32_t w = 0;
        for (int k = 0; k < p; k++) w += val(k, (size_t)r * N + i);
        CHECK(y[i] == w, "chunked reduce_scatter [%zu] = %d, want %d", i, y[i], w);
    }
    DO(mlc_reduce_scatter(x, x + (size_t)r * N, N, MLC_INT32, MLC_SUM, comm, QP));
    for (size_t i = 0; i < N; i++) CHECK(x[(size_t)r * N + i] == y[i], "chunked reduce_scatter in place [%zu]", i);
    /* data movement as one big datatype per block */
    for (size_t i = 0; i < N; i++) y[i] = r == root ? val(root, i) : -1;
    DO(mlc_broadcast(r == root ? y : NULL, y, N, MLC_INT32, root, comm, QP));
    for (size_t i = 0; i < N; i++) CHECK(y[i] == val(root, i), "big bcast [%zu] = %d", i, y[i]);
    for (size_t i = 0; i < N; i++) x[i] = val(r, i);
    DO(mlc_allgather(x, y, N, MLC_INT32, comm, QP));
    for (size_t i = 0; i < N * (size_t)p; i++) CHECK(y[i] == val((int)(i / N), i % N), "big allgather [%zu]", i);
    for (size_t i = 0; i < N * (size_t)p; i++) x[i] = val(r, i);
    DO(mlc_alltoall(x, y, N, MLC_INT32, comm, QP));
    for (size_t i = 0; i < N * (size_t)p; i++)
        CHECK(y[i] == val((int)(i / N), (size_t)r * N + i % N), "big alltoall [%zu] = %d", i, y[i]);
    for (size_t i = 0; i < N * (size_t)p; i++) y[i] = -1;
    DO(mlc_gather(x, r == root ? y : NULL, N, MLC_INT32, root, comm, QP));
    if (r == root)
        for (size_t i = 0; i < N * (size_t)p; i++) CHECK(y[i] == val((int)(i / N), i % N), "big gather [%zu]", i);
    int32_t z[N];
    DO(mlc_scatter(r == root ? x : NULL, z, N, MLC_INT32, root, comm, QP));
    for (size_t i = 0; i < N; i++) CHECK(z[i] == val(root, (size_t)r * N + i), "big scatter [%zu] = %d", i, z[i]);
    return 0;
}

static int vcolls(mlc_comm_t *comm, int mode)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm), root = 0;
    /* Rank k's block: 3 (native) or 7, 12 (above the limit), in reverse order with gaps. */
    size_t counts[4], displs[4], off = 2;
    for (int k = p - 1; k >= 0; k--) {
        counts[k] = k % 3 == 0 ? 3 : k % 3 == 1 ? 7 : 12;
        displs[k] = off;
        off += counts[k] + 1;
    }
    int32_t s[V], g[V];
    for (size_t i = 0; i < counts[r]; i++) s[i] = val(r, i);
    for (size_t i = 0; i < V; i++) g[i] = -1;
    DO(mlc_allgatherv(s, counts[r], g, counts, displs, MLC_INT32, comm, QP));
    for (int k = 0; k < p; k++)
        for (size_t i = 0; i < counts[k]; i++)
            CHECK(g[displs[k] + i] == val(k, i), "allgatherv [%d][%zu] = %d", k, i, g[displs[k] + i]);
    /* in place */
    for (size_t i = 0; i < V; i++) g[i] = -1;
    for (size_t i = 0; i < counts[r]; i++) g[displs[r] + i] = val(r, i) + 1;
    DO(mlc_allgatherv(g + displs[r], counts[r], g, counts, displs, MLC_INT32, comm, QP));
    for (int k = 0; k < p; k++)
        for (size_t i = 0; i < counts[k]; i++) CHECK(g[displs[k] + i] == val(k, i) + 1, "allgatherv in place");
    for (size_t i = 0; i < V; i++) g[i] = -1;
    DO(mlc_gatherv(s, counts[r], r == root ? g : NULL, r == root ? counts : NULL, r == root ? displs : NULL,
                   MLC_INT32, root, comm, QP));
    if (r == root)
        for (int k = 0; k < p; k++)
            for (size_t i = 0; i < counts[k]; i++) CHECK(g[displs[k] + i] == val(k, i), "gatherv [%d][%zu]", k, i);
    int32_t t[16];
    DO(mlc_scatterv(r == root ? g : NULL, r == root ? counts : NULL, r == root ? displs : NULL, t, counts[r],
                    MLC_INT32, root, comm, QP));
    for (size_t i = 0; i < counts[r]; i++) CHECK(t[i] == val(r, i), "scatterv [%zu] = %d", i, t[i]);
    /* alltoallv: rank r sends (r + k) % 3 * 5 + 1 elements to rank k (1, 6 or 11) */
    size_t sc[4], sd[4], rc[4], rd[4], so = 1, ro = 3;
    for (int k = 0; k < p; k++) {
        sc[k] = (size_t)((r + k) % 3) * 5 + 1;
        sd[k] = so;
        so += sc[k] + 2;
        rc[k] = (size_t)((k + r) % 3) * 5 + 1;
        rd[k] = ro;
        ro += rc[k];
    }
    for (size_t i = 0; i < V; i++) s[i] = val(r, i), g[i] = -1;
    DO(mlc_alltoallv(s, sc, sd, g, rc, rd, MLC_INT32, comm, QP));
    for (int k = 0; k < p; k++) {
        size_t their = 1; /* rank k's displacement for us */
        for (int j = 0; j < r; j++) their += (size_t)((k + j) % 3) * 5 + 1 + 2;
        for (size_t i = 0; i < rc[k]; i++)
            CHECK(g[rd[k] + i] == val(k, their + i), "alltoallv [%d][%zu] = %d", k, i, g[rd[k] + i]);
    }
    return 0;
}

static int p2p(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int32_t s[N], d[N + 4];
    mlc_msg_status_t st;
    for (size_t i = 0; i < N; i++) s[i] = val(r, i);
    mlc_request_t *q = NULL;
    /* 52 bytes from a 68-byte receive: both above the limit of 5 */
    CHECK_OK(mlc_recv(d, N + 4, MLC_INT32, MLC_ANY_SOURCE, 6, comm, &st, &q));
    CHECK_OK(mlc_send(s, N, MLC_INT32, (r + 1) % p, 6, comm, NULL));
    CHECK_OK(mlc_request_wait(&q));
    int prev = (r + p - 1) % p;
    CHECK(st.source == prev && st.bytes == N * 4, "big recv status %d/%zu", st.source, st.bytes);
    for (size_t i = 0; i < N; i++) CHECK(d[i] == val(prev, i), "big p2p [%zu] = %d", i, d[i]);
    CHECK_OK(mlc_sendrecv(s, N, (r + 1) % p, 8, d, N, prev, 8, MLC_INT32, comm, &st, NULL));
    CHECK(st.bytes == N * 4 && d[N - 1] == val(prev, N - 1), "big sendrecv");
    return 0;
}

/* Blocks spread wider than one MPI call can address: refused on every rank. */
static int too_wide(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    size_t counts[4], displs[4];
    for (int k = 0; k < p; k++) counts[k] = 2, displs[k] = (size_t)k * 6;
    int32_t s[2] = {1, 2}, g[32];
    mlc_status_t st = mlc_allgatherv(s, 2, g, counts, displs, MLC_INT32, comm, NULL);
    if (p < 3) CHECK(st == MLC_SUCCESS, "narrow allgatherv: %s", mlc_last_error());
    else CHECK_ERR(mlc_allgatherv(s, 2, g, counts, displs, MLC_INT32, comm, NULL), MLC_ERR_UNSUPPORTED);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0 || mlc_comm_size(comm) > 4) return MLC_TEST_SKIP;
    set_limits_fn set_limits;
    *(void **)&set_limits = dlsym(RTLD_DEFAULT, "mlc_mpi_set_limits");
    CHECK(set_limits != NULL, "the MPI module's test knob mlc_mpi_set_limits is missing: %s", dlerror());
    for (int large_calls = 0; large_calls < 2; large_calls++) {
        set_limits(L, 1000, large_calls);
        for (int mode = 0; mode < 2; mode++)
            if (uniform(comm, mode) || vcolls(comm, mode)) return 1;
        if (p2p(comm)) return 1;
    }
    /* The same on a split communicator (ranks reversed): its hidden tags have
     * the world's room. */
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, -mlc_comm_rank(comm), &child));
    set_limits(L, 1000, 0);
    for (int mode = 0; mode < 2; mode++)
        if (vcolls(child, mode)) return 1;
    CHECK_OK(mlc_comm_free(child));
    /* Displacements: only without large-count calls is there a limit. */
    set_limits(L, 8, 0);
    if (too_wide(comm)) return 1;
    set_limits(0, 0, 1); /* back to the defaults */
    /* The module told core (the program's own copy, statically linked here)
     * whether its MPI is CUDA-aware. */
    mlc_gpudirect_t g;
    mlc_gpudirect_detect(NULL, NULL, &g);
    CHECK(strstr(g.mpi_evidence, "has not reported") == NULL && g.mpi_evidence[0],
          "CUDA-awareness not reported: %s (%s)", mlc_capability_name(g.cuda_aware_mpi), g.mpi_evidence);
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
