/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The in-place forms of gather, gatherv, scatter, scatterv and allgatherv
 * (include/mlcomm.h, as MPI_IN_PLACE): the root's own block already sits in
 * its place in the root's buffer (gather: sendbuf == recvbuf + root * count
 * elements; gatherv: + displs[root]; scatter and scatterv: recvbuf ==
 * sendbuf + that), every rank's for allgatherv (+ displs[rank]). Checked:
 * every block lands, the root's own block is left as it was, nothing is
 * written outside the blocks (the gaps of a v-layout keep their bytes), at
 * 1 element, 1001 and about 1 MiB per block, with the root rotating, under every
 * algorithm the backend offers; and a block one element away from its
 * place is refused as an overlap, not taken for the in-place form.
 */
#include "harness.h"

#define GAP 3     /* elements before each v-block */
#define FILL 0x5a /* the gaps' bytes */

static const size_t counts[] = {1, 1001, 262147}; /* float32: 1 MiB + 12 bytes */
#define NCOUNTS (sizeof counts / sizeof *counts)

static uint64_t block_seed(uint64_t seed, int q) { return seed * 64 + (uint64_t)q; }

/* A v-layout with blocks in reverse rank order, GAP elements before each,
 * rank q holding count + q elements; returns the extent in elements. */
static size_t vlayout(int p, size_t count, size_t *vcounts, size_t *displs)
{
    size_t at = 0;
    for (int q = p - 1; q >= 0; q--) {
        at += GAP;
        vcounts[q] = count + (size_t)q;
        displs[q] = at;
        at += vcounts[q];
    }
    return at;
}

/* Every block q of buf (at displs[q], vcounts[q] elements of es) holds its
 * pattern, every gap FILL. */
static int check_layout(mlc_comm_t *comm, const unsigned char *buf, size_t ext, const size_t *vcounts,
                        const size_t *displs, size_t es, uint64_t seed, const char *what)
{
    int p = mlc_comm_size(comm);
    size_t at = 0;
    for (int q = p - 1; q >= 0; q--) {
        for (size_t i = at * es; i < displs[q] * es; i++)
            CHECK(buf[i] == FILL, "%s: byte %zu in the gap before block %d was written", what, i, q);
        size_t bad = mlc_test_pattern_check(buf + displs[q] * es, vcounts[q] * es, block_seed(seed, q));
        CHECK(bad == SIZE_MAX, "%s: block %d wrong at byte %zu", what, q, bad);
        at = displs[q] + vcounts[q];
    }
    CHECK(at == ext, "%s: layout ends at %zu, not %zu", what, at, ext);
    CHECK(mlc_test_guard_ok(buf, ext * es), "%s: write past the end of the buffer", what);
    return 0;
}

static int gather_in_place(mlc_comm_t *comm, size_t count, int root, uint64_t seed, const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t bytes = count * 4, total = bytes * (size_t)p;
    char what[96];
    snprintf(what, sizeof what, "gather in place, count=%zu root=%d algo=%s", count, root, algo);
    unsigned char *buf = mlc_test_alloc(r == root ? total : bytes);
    if (r == root) {
        memset(buf, FILL, total);
        mlc_test_pattern_fill(buf + (size_t)root * bytes, bytes, block_seed(seed, root));
        CHECK_OK(mlc_gather(buf + (size_t)root * bytes, buf, count, MLC_FLOAT32, root, comm, NULL));
        for (int q = 0; q < p; q++) {
            size_t bad = mlc_test_pattern_check(buf + (size_t)q * bytes, bytes, block_seed(seed, q));
            CHECK(bad == SIZE_MAX, "%s: block %d wrong at byte %zu", what, q, bad);
        }
        CHECK(mlc_test_guard_ok(buf, total), "%s: write past the end", what);
    } else {
        mlc_test_pattern_fill(buf, bytes, block_seed(seed, r));
        CHECK_OK(mlc_gather(buf, NULL, count, MLC_FLOAT32, root, comm, NULL));
    }
    mlc_test_free(buf);
    return 0;
}

static int scatter_in_place(mlc_comm_t *comm, size_t count, int root, uint64_t seed, const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t bytes = count * 4, total = bytes * (size_t)p;
    char what[96];
    snprintf(what, sizeof what, "scatter in place, count=%zu root=%d algo=%s", count, root, algo);
    unsigned char *buf = mlc_test_alloc(r == root ? total : bytes);
    if (r == root) {
        for (int q = 0; q < p; q++) mlc_test_pattern_fill(buf + (size_t)q * bytes, bytes, block_seed(seed, q));
        CHECK_OK(mlc_scatter(buf, buf + (size_t)root * bytes, count, MLC_FLOAT32, root, comm, NULL));
        for (int q = 0; q < p; q++) { /* the root's whole buffer is as it was */
            size_t bad = mlc_test_pattern_check(buf + (size_t)q * bytes, bytes, block_seed(seed, q));
            CHECK(bad == SIZE_MAX, "%s: root's block %d changed at byte %zu", what, q, bad);
        }
    } else {
        memset(buf, FILL, bytes);
        CHECK_OK(mlc_scatter(NULL, buf, count, MLC_FLOAT32, root, comm, NULL));
        size_t bad = mlc_test_pattern_check(buf, bytes, block_seed(seed, r));
        CHECK(bad == SIZE_MAX, "%s: block wrong at byte %zu", what, bad);
    }
    CHECK(mlc_test_guard_ok(buf, r == root ? total : bytes), "%s: write past the end", what);
    mlc_test_free(buf);
    return 0;
}

static int gatherv_in_place(mlc_comm_t *comm, size_t count, int root, uint64_t seed, const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t vcounts[64], displs[64], es = 2, ext = vlayout(p, count, vcounts, displs);
    char what[96];
    snprintf(what, sizeof what, "gatherv in place, count=%zu root=%d algo=%s", count, root, algo);
    size_t mine = vcounts[r] * es;
    unsigned char *buf = mlc_test_alloc(r == root ? ext * es : mine);
    if (r == root) {
        memset(buf, FILL, ext * es);
        unsigned char *own = buf + displs[root] * es;
        mlc_test_pattern_fill(own, mine, block_seed(seed, root));
        CHECK_OK(mlc_gatherv(own, vcounts[root], buf, vcounts, displs, MLC_FLOAT16, root, comm, NULL));
        CHECK_RUN(check_layout(comm, buf, ext, vcounts, displs, es, seed, what));
    } else {
        mlc_test_pattern_fill(buf, mine, block_seed(seed, r));
        CHECK_OK(mlc_gatherv(buf, vcounts[r], NULL, NULL, NULL, MLC_FLOAT16, root, comm, NULL));
    }
    mlc_test_free(buf);
    return 0;
}

static int scatterv_in_place(mlc_comm_t *comm, size_t count, int root, uint64_t seed, const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t vcounts[64], displs[64], es = 2, ext = vlayout(p, count, vcounts, displs);
    char what[96];
    snprintf(what, sizeof what, "scatterv in place, count=%zu root=%d algo=%s", count, root, algo);
    size_t mine = vcounts[r] * es;
    unsigned char *buf = mlc_test_alloc(r == root ? ext * es : mine);
    if (r == root) {
        memset(buf, FILL, ext * es);
        for (int q = 0; q < p; q++) mlc_test_pattern_fill(buf + displs[q] * es, vcounts[q] * es, block_seed(seed, q));
        CHECK_OK(mlc_scatterv(buf, vcounts, displs, buf + displs[root] * es, vcounts[root], MLC_FLOAT16, root,
                              comm, NULL));
        CHECK_RUN(check_layout(comm, buf, ext, vcounts, displs, es, seed, what));
    } else {
        memset(buf, FILL, mine);
        CHECK_OK(mlc_scatterv(NULL, NULL, NULL, buf, vcounts[r], MLC_FLOAT16, root, comm, NULL));
        size_t bad = mlc_test_pattern_check(buf, mine, block_seed(seed, r));
        CHECK(bad == SIZE_MAX, "%s: block wrong at byte %zu", what, bad);
        CHECK(mlc_test_guard_ok(buf, mine), "%s: write past the end", what);
    }
    mlc_test_free(buf);
    return 0;
}

static int allgatherv_in_place(mlc_comm_t *comm, size_t count, uint64_t seed, const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t vcounts[64], displs[64], es = 2, ext = vlayout(p, count, vcounts, displs);
    char what[96];
    snprintf(what, sizeof what, "allgatherv in place, count=%zu algo=%s", count, algo);
    unsigned char *buf = mlc_test_alloc(ext * es);
    memset(buf, FILL, ext * es);
    unsigned char *own = buf + displs[r] * es;
    mlc_test_pattern_fill(own, vcounts[r] * es, block_seed(seed, r));
    CHECK_OK(mlc_allgatherv(own, vcounts[r], buf, vcounts, displs, MLC_FLOAT16, comm, NULL));
    CHECK_RUN(check_layout(comm, buf, ext, vcounts, displs, es, seed, what));
    mlc_test_free(buf);
    return 0;
}

/* One element off the in-place place is an overlap: MLC_ERR_INVALID_ARG,
 * and the call names itself. Checked where only this rank decides (the
 * root's buffers; allgatherv's own block), before anything is sent. */
static int near_misses(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t vcounts[64], displs[64], ext = vlayout(p, 4, vcounts, displs);
    float *buf = mlc_test_alloc((ext + 8) * sizeof(float));
    const char *msg;
    CHECK(mlc_gather(buf + (size_t)r * 4 + 1, buf, 4, MLC_FLOAT32, r, comm, NULL) == MLC_ERR_INVALID_ARG,
          "gather with the root's block one element off its place was not refused");
    msg = mlc_last_error();
    CHECK(strstr(msg, "mlc_gather:") && strstr(msg, "overlap"), "gather's message: %s", msg);
    CHECK(mlc_scatter(buf, buf + (size_t)r * 4 + 1, 4, MLC_FLOAT32, r, comm, NULL) == MLC_ERR_INVALID_ARG,
          "scatter with the root's block one element off its place was not refused");
    msg = mlc_last_error();
    CHECK(strstr(msg, "mlc_scatter:") && strstr(msg, "overlap"), "scatter's message: %s", msg);
    CHECK(mlc_gatherv(buf + displs[r] + 1, vcounts[r], buf, vcounts, displs, MLC_FLOAT32, r, comm, NULL) ==
              MLC_ERR_INVALID_ARG,
          "gatherv with the root's block one element off its place was not refused");
    msg = mlc_last_error();
    CHECK(strstr(msg, "mlc_gatherv:") && strstr(msg, "overlap"), "gatherv's message: %s", msg);
    CHECK(mlc_allgatherv(buf + displs[r] + 1, vcounts[r], buf, vcounts, displs, MLC_FLOAT32, comm, NULL) ==
              MLC_ERR_INVALID_ARG,
          "allgatherv with this rank's block one element off its place was not refused");
    msg = mlc_last_error();
    CHECK(strstr(msg, "mlc_allgatherv:") && strstr(msg, "overlap"), "allgatherv's message: %s", msg);
    mlc_test_free(buf);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    CHECK(p <= 64, "at most 64 ranks");
    uint64_t seed = 7;
    CHECK_RUN(near_misses(comm));
    static const mlc_coll_t colls[] = {MLC_COLL_GATHER,  MLC_COLL_SCATTER,  MLC_COLL_GATHERV,
                                       MLC_COLL_SCATTERV, MLC_COLL_ALLGATHERV};
    for (size_t c = 0; c < sizeof colls / sizeof *colls; c++) {
        const char *algos[32];
        size_t nalgo = mlc_test_algos(comm, colls[c], algos, 32);
        for (size_t a = 0; a < nalgo; a++) {
            CHECK_OK(mlc_comm_set_algo(comm, colls[c], algos[a]));
            for (size_t k = 0; k < NCOUNTS; k++) {
                if (colls[c] == MLC_COLL_ALLGATHERV) {
                    CHECK_RUN(allgatherv_in_place(comm, counts[k], seed++, algos[a]));
                    continue;
                }
                for (int root = 0; root < p; root++) {
                    if (colls[c] == MLC_COLL_GATHER)
                        CHECK_RUN(gather_in_place(comm, counts[k], root, seed++, algos[a]));
                    else if (colls[c] == MLC_COLL_SCATTER)
                        CHECK_RUN(scatter_in_place(comm, counts[k], root, seed++, algos[a]));
                    else if (colls[c] == MLC_COLL_GATHERV)
                        CHECK_RUN(gatherv_in_place(comm, counts[k], root, seed++, algos[a]));
                    else
                        CHECK_RUN(scatterv_in_place(comm, counts[k], root, seed++, algos[a]));
                }
            }
        }
        CHECK_OK(mlc_comm_set_algo(comm, colls[c], NULL));
    }
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
