/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gather, gatherv, scatter, scatterv: every dtype (and a record) at counts
 * 0, 1, 7 and 1001 with the root rotating over every rank, 1 MiB from every
 * root; the v-variants with uneven counts (one rank 0), displacements in
 * reverse order with gaps; arguments only the root uses are NULL elsewhere;
 * every algorithm the backend offers.
 */
#include "harness.h"

static const size_t small_counts[] = {0, 1, 7, 1001};
#define MIB (1024u * 1024u)

static const mlc_dtype_t all_dtypes[] = {
#define X(name, str, size) name,
    MLC_DTYPE_LIST(X)
#undef X
        MLC_RECORD(9),
};
#define NDTYPES (sizeof all_dtypes / sizeof *all_dtypes)

static uint64_t block_seed(uint64_t seed, int q) { return seed * 64 + (uint64_t)q; }

static int check_gather(mlc_comm_t *comm, mlc_dtype_t dt, size_t count, int root, uint64_t seed,
                        const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt), bytes = count * es, total = bytes * (size_t)p;
    unsigned char *send = mlc_test_alloc(bytes), *recv = NULL, *want = NULL;
    mlc_test_pattern_fill(send, bytes, block_seed(seed, r));
    if (r == root) {
        recv = mlc_test_alloc(total);
        want = mlc_test_alloc(total);
        for (int q = 0; q < p; q++)
            mlc_test_pattern_fill(want + (size_t)q * bytes, bytes, block_seed(seed, q));
    }
    CHECK_OK(mlc_gather(send, recv, count, dt, root, comm, NULL));
    if (r == root) {
        CHECK_MEM(recv, want, total, es, "gather %s count=%zu root=%d algo=%s", mlc_dtype_name(dt),
                  count, root, algo);
        CHECK(mlc_test_guard_ok(recv, total), "write past the end of recvbuf (count=%zu)", count);
    }
    CHECK(mlc_test_pattern_check(send, bytes, block_seed(seed, r)) == SIZE_MAX,
          "sendbuf modified by gather count=%zu", count);
    mlc_test_free(send);
    if (recv) mlc_test_free(recv);
    if (want) mlc_test_free(want);
    return 0;
}

static int check_scatter(mlc_comm_t *comm, mlc_dtype_t dt, size_t count, int root, uint64_t seed,
                         const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt), bytes = count * es, total = bytes * (size_t)p;
    unsigned char *send = NULL, *recv = mlc_test_alloc(bytes), *want = mlc_test_alloc(bytes);
    if (r == root) {
        send = mlc_test_alloc(total);
        for (int q = 0; q < p; q++)
            mlc_test_pattern_fill(send + (size_t)q * bytes, bytes, block_seed(seed, q));
    }
    mlc_test_pattern_fill(want, bytes, block_seed(seed, r));
    CHECK_OK(mlc_scatter(send, recv, count, dt, root, comm, NULL));
    CHECK_MEM(recv, want, bytes, es, "scatter %s count=%zu root=%d algo=%s", mlc_dtype_name(dt),
              count, root, algo);
    CHECK(mlc_test_guard_ok(recv, bytes), "write past the end of recvbuf (count=%zu)", count);
    if (send) {
        for (int q = 0; q < p; q++)
            CHECK(mlc_test_pattern_check(send + (size_t)q * bytes, bytes, block_seed(seed, q)) ==
                      SIZE_MAX,
                  "root sendbuf modified by scatter");
        mlc_test_free(send);
    }
    mlc_test_free(recv);
    mlc_test_free(want);
    return 0;
}

/* Uneven layout: rank q has counts[q] elements (rank 1: none), blocks in
 * reverse rank order with `gap` elements before each. Returns the extent. */
static size_t v_layout(int p, size_t base, size_t gap, size_t *counts, size_t *displs)
{
    size_t at = 0;
    for (int q = 0; q < p; q++) counts[q] = q == 1 ? 0 : base * (size_t)(q + 1) + (size_t)q;
    for (int q = p - 1; q >= 0; q--) {
        at += gap;
        displs[q] = at;
        at += counts[q];
    }
    return at;
}

static int check_gatherv(mlc_comm_t *comm, mlc_dtype_t dt, size_t base, size_t gap, int root,
                         uint64_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt);
    size_t *counts = calloc((size_t)p, sizeof *counts), *displs = calloc((size_t)p, sizeof *displs);
    CHECK(counts && displs, "out of memory");
    size_t extent = v_layout(p, base, gap, counts, displs) * es;
    unsigned char *send = mlc_test_alloc(counts[r] * es), *recv = NULL, *want = NULL;
    mlc_test_pattern_fill(send, counts[r] * es, block_seed(seed, r));
    if (r == root) {
        recv = mlc_test_alloc(extent);
        want = mlc_test_alloc(extent);
        for (int q = 0; q < p; q++)
            mlc_test_pattern_fill(want + displs[q] * es, counts[q] * es, block_seed(seed, q));
    }
    /* recvcounts and displs are only the root's business. */
    CHECK_OK(mlc_gatherv(send, counts[r], recv, r == root ? counts : NULL,
                         r == root ? displs : NULL, dt, root, comm, NULL));
    if (r == root) {
        CHECK_MEM(recv, want, extent, es, "gatherv %s base=%zu gap=%zu root=%d", mlc_dtype_name(dt),
                  base, gap, root);
        CHECK(mlc_test_guard_ok(recv, extent), "write past the end of recvbuf");
        mlc_test_free(recv);
        mlc_test_free(want);
    }
    mlc_test_free(send);
    free(counts);
    free(displs);
    return 0;
}

static int check_scatterv(mlc_comm_t *comm, mlc_dtype_t dt, size_t base, size_t gap, int root,
                          uint64_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt);
    size_t *counts = calloc((size_t)p, sizeof *counts), *displs = calloc((size_t)p, sizeof *displs);
    CHECK(counts && displs, "out of memory");
    size_t extent = v_layout(p, base, gap, counts, displs) * es;
    unsigned char *send = NULL, *recv = mlc_test_alloc(counts[r] * es);
    unsigned char *want = mlc_test_alloc(counts[r] * es);
    if (r == root) {
        send = mlc_test_alloc(extent);
        for (int q = 0; q < p; q++)
            mlc_test_pattern_fill(send + displs[q] * es, counts[q] * es, block_seed(seed, q));
    }
    mlc_test_pattern_fill(want, counts[r] * es, block_seed(seed, r));
    CHECK_OK(mlc_scatterv(send, r == root ? counts : NULL, r == root ? displs : NULL, recv,
                          counts[r], dt, root, comm, NULL));
    CHECK_MEM(recv, want, counts[r] * es, es, "scatterv %s base=%zu gap=%zu root=%d",
              mlc_dtype_name(dt), base, gap, root);
    CHECK(mlc_test_guard_ok(recv, counts[r] * es), "write past the end of recvbuf");
    if (send) mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    free(counts);
    free(displs);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    uint64_t seed = 1;
    CHECK_OK(mlc_gather(NULL, NULL, 0, MLC_INT8, 0, comm, NULL));
    CHECK_OK(mlc_scatter(NULL, NULL, 0, MLC_INT8, p - 1, comm, NULL));
    for (size_t d = 0; d < NDTYPES; d++)
        for (size_t k = 0; k < sizeof small_counts / sizeof *small_counts; k++) {
            int root = (int)((seed + (uint64_t)p - 1) % (uint64_t)p);
            CHECK_RUN(check_gather(comm, all_dtypes[d], small_counts[k], root, seed++, "auto"));
            CHECK_RUN(check_scatter(comm, all_dtypes[d], small_counts[k], root, seed++, "auto"));
        }
    for (int root = 0; root < p; root++) {
        CHECK_RUN(check_gather(comm, MLC_FLOAT32, MIB / 4 / (size_t)p, root, seed++, "auto"));
        CHECK_RUN(check_scatter(comm, MLC_FLOAT64, MIB / 8 / (size_t)p + 1, root, seed++, "auto"));
        CHECK_RUN(check_gatherv(comm, MLC_INT32, 33, 2, root, seed++));
        CHECK_RUN(check_scatterv(comm, MLC_UINT64, 33, 2, root, seed++));
    }
    static const size_t bases[] = {0, 1, 1001, MIB / 8};
    for (size_t k = 0; k < sizeof bases / sizeof *bases; k++) {
        int root = (int)(k % (size_t)p);
        CHECK_RUN(check_gatherv(comm, MLC_BFLOAT16, bases[k], k % 2 ? 3 : 0, root, seed++));
        CHECK_RUN(check_scatterv(comm, MLC_RECORD(6), bases[k], k % 2 ? 0 : 4, root, seed++));
    }

    static const mlc_coll_t colls[] = {MLC_COLL_GATHER, MLC_COLL_SCATTER};
    for (size_t c = 0; c < 2; c++) {
        const char *algos[32];
        size_t nalgo = mlc_test_algos(comm, colls[c], algos, 32);
        for (size_t a = 0; a < nalgo; a++) {
            CHECK_OK(mlc_comm_set_algo(comm, colls[c], algos[a]));
            for (int root = 0; root < p; root++) {
                if (colls[c] == MLC_COLL_GATHER) {
                    CHECK_RUN(check_gather(comm, MLC_UINT8, 1, root, seed++, algos[a]));
                    CHECK_RUN(check_gather(comm, MLC_UINT8, MIB / 2 + 1, root, seed++, algos[a]));
                } else {
                    CHECK_RUN(check_scatter(comm, MLC_UINT8, 1, root, seed++, algos[a]));
                    CHECK_RUN(check_scatter(comm, MLC_UINT8, MIB / 2 + 1, root, seed++, algos[a]));
                }
            }
        }
        CHECK_OK(mlc_comm_set_algo(comm, colls[c], NULL));
    }
    static const mlc_coll_t vcolls[] = {MLC_COLL_GATHERV, MLC_COLL_SCATTERV};
    for (size_t c = 0; c < 2; c++) {
        const char *algos[32];
        size_t nalgo = mlc_test_algos(comm, vcolls[c], algos, 32);
        for (size_t a = 0; a < nalgo; a++) {
            CHECK_OK(mlc_comm_set_algo(comm, vcolls[c], algos[a]));
            for (int root = 0; root < p; root++) {
                if (vcolls[c] == MLC_COLL_GATHERV)
                    CHECK_RUN(check_gatherv(comm, MLC_FLOAT16, 7, 1, root, seed++));
                else
                    CHECK_RUN(check_scatterv(comm, MLC_FLOAT16, 7, 1, root, seed++));
            }
        }
        CHECK_OK(mlc_comm_set_algo(comm, vcolls[c], NULL));
    }
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
