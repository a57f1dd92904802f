/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rank test: exchanges in 1-D, 2-D, 3-D and 4-D; several patches per rank;
 * uneven cuts; periodic and open axes; ghost widths 1-3; a rank with no
 * patch; runs repeated with fresh data; split phase; double buffering.
 */
#include "harness.h"
#include "xfield.h"

static const xlayout_t layouts[] = {
    /* ndim origin domain cuts ghost periodic esize empty_rank */
    {1, {0}, {29}, {7}, {1}, {1}, 8, -1},
    {1, {-5}, {13}, {5}, {3}, {0}, 4, 1},
    {2, {0, 0}, {24, 19}, {3, 4}, {2, 2}, {1, 1}, 8, -1},
    {2, {3, -2}, {17, 11}, {4, 3}, {1, 2}, {1, 0}, 12, 0},
    {3, {0, 0, 0}, {9, 7, 8}, {2, 3, 2}, {1, 1, 1}, {1, 1, 1}, 8, 2},
    {3, {0, 0, 0}, {6, 8, 5}, {2, 2, 1}, {3, 2, 1}, {0, 1, 1}, 2, -1},
    {4, {0, 0, 0, 0}, {4, 5, 3, 6}, {2, 1, 1, 2}, {1, 1, 1, 1}, {1, 1, 0, 1}, 8, -1},
};

static int run_layout(mlc_comm_t *comm, const xlayout_t *L, int which)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    xfield_t f;
    char why[256];
    CHECK(xfield_make(&f, L, rank, size) == 0, "layout %d: out of memory", which);
    mlc_exchange_config_t cfg = xfield_config(L);
    mlc_exchange_t *ex = NULL;
    CHECK_OK(mlc_exchange_create(comm, &cfg, &ex));
    CHECK_OK(xfield_declare(&f, ex));
    CHECK_OK(mlc_exchange_build(ex));
    /* Blocking runs, fresh data every time. */
    for (uint64_t it = 0; it < 3; it++) {
        xfield_fill(&f, it);
        CHECK_OK(mlc_exchange_run(ex));
        long bad = xfield_verify(&f, it, why, sizeof why);
        CHECK(bad == 0, "layout %d run %llu: %ld wrong cells, first: %s", which,
              (unsigned long long)it, bad, why);
    }
    /* Split phase: the caller may read its valid cells meanwhile. */
    xfield_fill(&f, 7);
    CHECK_OK(mlc_exchange_start(ex));
    CHECK_ERR(mlc_exchange_start(ex), MLC_ERR_BUSY);
    CHECK_OK(mlc_exchange_finish(ex));
    CHECK(xfield_verify(&f, 7, why, sizeof why) == 0, "layout %d split phase: %s", which, why);
    /* Double buffering: the same plan on other buffers (no rebuild). */
    unsigned char **other = calloc((size_t)f.np + 1, sizeof *other);
    CHECK(other != NULL, "calloc");
    for (int i = 0; i < f.np; i++) {
        size_t bytes = L->esize;
        for (int d = 0; d < L->ndim; d++) bytes *= (size_t)f.p[i].parent.shape[d];
        other[i] = malloc(bytes);
        CHECK(other[i] != NULL, "malloc");
    }
    CHECK_OK(xfield_swap(&f, other, ex));
    xfield_fill(&f, 8);
    CHECK_OK(mlc_exchange_run(ex));
    CHECK(xfield_verify(&f, 8, why, sizeof why) == 0, "layout %d other buffers: %s", which, why);
    mlc_exchange_info_t info;
    CHECK_OK(mlc_exchange_info(ex, &info));
    CHECK(info.builds == 1 && info.runs == 5, "builds %llu runs %llu",
          (unsigned long long)info.builds, (unsigned long long)info.runs);
    CHECK(info.send_peers < size && info.recv_peers < size, "peers never include self");
    if (size == 1) CHECK(info.send_peers == 0 && info.recv_peers == 0, "one rank: all local");
    if (f.np == 0) CHECK(info.send_peers == 0 && info.recv_peers == 0 && info.local_copies == 0,
                         "a rank without patches takes no part");
    CHECK_OK(mlc_exchange_free(ex));
    for (int i = 0; i < f.np; i++) free(other[i]);
    free(other);
    xfield_free(&f);
    return 0;
}

/* Every rank needs what rank 0 provides; rank 0 needs nothing, so it may run
 * far ahead: messages of consecutive runs must not cross-match. */
static int back_to_back(mlc_comm_t *comm)
{
    const int rank = mlc_comm_rank(comm);
    enum { N = 64, RUNS = 20 };
    double src[N], dst[N];
    mlc_exchange_config_t cfg = MLC_EXCHANGE_CONFIG_INIT;
    cfg.ndim = 1;
    cfg.dtype = MLC_FLOAT64;
    mlc_exchange_t *ex;
    CHECK_OK(mlc_exchange_create(comm, &cfg, &ex));
    int64_t s0 = 0, n = N;
    mlc_box_t all = mlc_box_make(1, &s0, &n);
    mlc_view_t pv = {src, all, all}, nv = {dst, all, all};
    if (rank == 0) CHECK_OK(mlc_exchange_provide(ex, &pv, NULL));
    if (rank != 0 || mlc_comm_size(comm) == 1) CHECK_OK(mlc_exchange_need(ex, &nv, NULL));
    CHECK_OK(mlc_exchange_build(ex));
    for (int r = 0; r < RUNS; r++) {
        for (int i = 0; i < N; i++) {
            src[i] = r * 1000.0 + i;
            dst[i] = -1.0;
        }
        CHECK_OK(mlc_exchange_run(ex));
        if (rank != 0 || mlc_comm_size(comm) == 1)
            for (int i = 0; i < N; i++)
                CHECK(dst[i] == r * 1000.0 + i, "run %d cell %d: %g", r, i, dst[i]);
    }
    CHECK_OK(mlc_exchange_free(ex));
    return 0;
}

/* Two plans in flight at once, finished in reverse order, while the caller
 * uses the same communicator for its own messages with the same tags. */
static int two_in_flight(mlc_comm_t *comm)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    xlayout_t La = {1, {0}, {31}, {6}, {2}, {1}, 8, -1};
    xlayout_t Lb = {2, {0, 0}, {10, 9}, {2, 3}, {1, 1}, {1, 1}, 4, -1};
    xfield_t fa, fb;
    char why[256];
    CHECK(xfield_make(&fa, &La, rank, size) == 0 && xfield_make(&fb, &Lb, rank, size) == 0, "mem");
    mlc_exchange_config_t ca = xfield_config(&La), cb = xfield_config(&Lb);
    mlc_exchange_t *a, *b;
    CHECK_OK(mlc_exchange_create(comm, &ca, &a));
    CHECK_OK(mlc_exchange_create(comm, &cb, &b));
    CHECK_OK(xfield_declare(&fa, a));
    CHECK_OK(xfield_declare(&fb, b));
    CHECK_OK(mlc_exchange_build(b)); /* build order need not match creation order */
    CHECK_OK(mlc_exchange_build(a));
    for (uint64_t it = 0; it < 4; it++) {
        xfield_fill(&fa, 100 + it);
        xfield_fill(&fb, 200 + it);
        CHECK_OK(mlc_exchange_start(a));
        CHECK_OK(mlc_exchange_start(b));
        /* The caller's own traffic on comm, tags 0 and 1 as the plans use. */
        int32_t out = rank * 10 + (int)it, in = -1;
        int to = (rank + 1) % size, from = (rank + size - 1) % size;
        CHECK_OK(mlc_sendrecv(&out, 1, to, (int)(it % 2), &in, 1, from, (int)(it % 2), MLC_INT32,
                              comm, NULL, NULL));
        CHECK(in == from * 10 + (int)it, "user message %d from %d", in, from);
        CHECK_OK(mlc_exchange_finish(b));
        CHECK_OK(mlc_exchange_finish(a));
        CHECK(xfield_verify(&fa, 100 + it, why, sizeof why) == 0, "plan a run %d: %s", (int)it, why);
        CHECK(xfield_verify(&fb, 200 + it, why, sizeof why) == 0, "plan b run %d: %s", (int)it, why);
    }
    CHECK_ERR(mlc_exchange_finish(a), MLC_ERR_INVALID_ARG);
    CHECK_OK(mlc_exchange_free(a));
    CHECK_OK(mlc_exchange_free(b));
    xfield_free(&fa);
    xfield_free(&fb);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (run_layout(comm, &layouts[i], (int)i)) return 1;
    if (back_to_back(comm)) return 1;
    if (two_in_flight(comm)) return 1;
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
