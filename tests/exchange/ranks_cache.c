/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rank test: the plan cache. Same layout on new buffers reuses the plan;
 * a regrid rebuilds it; a change on one rank alone is noticed by all
 * (hash mode); with a topology version, an unbumped change is an error.
 */
#include "harness.h"
#include "xfield.h"

static const xlayout_t L1 = {2, {0, 0}, {12, 10}, {3, 2}, {1, 1}, {1, 1}, 8, -1};
static const xlayout_t L2 = {2, {0, 0}, {12, 10}, {4, 3}, {1, 1}, {1, 1}, 8, -1};

static int run_and_verify(mlc_comm_t *comm, mlc_exchange_t *ex, xfield_t *f, uint64_t it)
{
    char why[256];
    xfield_fill(f, it);
    CHECK_OK(mlc_exchange_run(ex));
    CHECK(xfield_verify(f, it, why, sizeof why) == 0, "iteration %llu: %s", (unsigned long long)it,
          why);
    return 0;
}

static int expect_counts(mlc_comm_t *comm, mlc_exchange_t *ex, uint64_t builds, uint64_t hits)
{
    mlc_exchange_info_t info;
    CHECK_OK(mlc_exchange_info(ex, &info));
    CHECK(info.builds == builds && info.cache_hits == hits, "builds %llu hits %llu, want %llu %llu",
          (unsigned long long)info.builds, (unsigned long long)info.cache_hits,
          (unsigned long long)builds, (unsigned long long)hits);
    return 0;
}

static int hash_mode(mlc_comm_t *comm)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    xfield_t f1, f2, f3;
    CHECK(!xfield_make(&f1, &L1, rank, size) && !xfield_make(&f2, &L1, rank, size) &&
              !xfield_make(&f3, &L2, rank, size),
          "memory");
    mlc_exchange_config_t cfg = xfield_config(&L1);
    mlc_exchange_t *ex;
    CHECK_OK(mlc_exchange_create(comm, &cfg, &ex));
    CHECK_OK(xfield_declare(&f1, ex));
    CHECK_OK(mlc_exchange_build(ex));
    CHECK(!expect_counts(comm, ex, 1, 0), "first build");
    CHECK(!run_and_verify(comm, ex, &f1, 1), "f1");
    /* The same boxes on new buffers: cached. */
    CHECK_OK(mlc_exchange_clear(ex));
    CHECK_OK(xfield_declare(&f2, ex));
    CHECK_OK(mlc_exchange_build(ex));
    CHECK(!expect_counts(comm, ex, 1, 1), "same layout");
    CHECK(!run_and_verify(comm, ex, &f2, 2), "f2 through the cached plan");
    /* Regrid: rebuilt. */
    CHECK_OK(mlc_exchange_clear(ex));
    CHECK_OK(xfield_declare(&f3, ex));
    CHECK_OK(mlc_exchange_build(ex));
    CHECK(!expect_counts(comm, ex, 2, 1), "regrid");
    CHECK(!run_and_verify(comm, ex, &f3, 3), "f3 after regrid");
    /* Only the last rank changes (one more need): every rank rebuilds, and
     * its providers now send it the extra cell. */
    double extra = -1.0;
    int64_t origin[2] = {0, 0}, one[2] = {1, 1};
    mlc_box_t cell = mlc_box_make(2, origin, one);
    mlc_view_t v = {&extra, cell, cell};
    if (rank == size - 1) CHECK_OK(mlc_exchange_need(ex, &v, NULL));
    CHECK_OK(mlc_exchange_build(ex));
    CHECK(!expect_counts(comm, ex, 3, 1), "one rank changed");
    CHECK(!run_and_verify(comm, ex, &f3, 4), "f3 with the extra need");
    if (rank == size - 1) {
        double want;
        xfield_value(origin, 2, 4, 8, (unsigned char *)&want);
        CHECK(memcmp(&extra, &want, 8) == 0, "the extra need got its cell");
    }
    CHECK_OK(mlc_exchange_free(ex));
    xfield_free(&f1);
    xfield_free(&f2);
    xfield_free(&f3);
    return 0;
}

static int version_mode(mlc_comm_t *comm)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    xfield_t f1, f2, f3;
    CHECK(!xfield_make(&f1, &L1, rank, size) && !xfield_make(&f2, &L1, rank, size) &&
              !xfield_make(&f3, &L2, rank, size),
          "memory");
    mlc_exchange_config_t cfg = xfield_config(&L1);
    mlc_exchange_t *ex;
    CHECK_OK(mlc_exchange_create(comm, &cfg, &ex));
    CHECK_OK(mlc_exchange_set_topology_version(ex, 1));
    CHECK_OK(xfield_declare(&f1, ex));
    CHECK_OK(mlc_exchange_build(ex));
    CHECK_OK(mlc_exchange_clear(ex));
    CHECK_OK(xfield_declare(&f2, ex));
    CHECK_OK(mlc_exchange_build(ex));
    CHECK(!expect_counts(comm, ex, 1, 1), "same version: cached");
    CHECK(!run_and_verify(comm, ex, &f2, 5), "f2");
    /* Boxes changed, version not bumped: refused (every rank has patches
     * in both layouts, so every rank notices). */
    CHECK_OK(mlc_exchange_clear(ex));
    CHECK_OK(xfield_declare(&f3, ex));
    if (f3.np > 0) {
        CHECK_ERR(mlc_exchange_build(ex), MLC_ERR_INVALID_ARG);
        CHECK(strstr(mlc_last_error(), "topology version is still 1"), "message: %s",
              mlc_last_error());
    }
    CHECK(mlc_test_any_failed(comm, 0) == 0, "agreement");
    CHECK_OK(mlc_exchange_set_topology_version(ex, 2));
    CHECK_OK(mlc_exchange_build(ex));
    CHECK(!expect_counts(comm, ex, 2, 1), "bumped: rebuilt");
    CHECK(!run_and_verify(comm, ex, &f3, 6), "f3");
    CHECK_OK(mlc_exchange_free(ex));
    xfield_free(&f1);
    xfield_free(&f2);
    xfield_free(&f3);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (hash_mode(comm)) return 1;
    if (version_mode(comm)) return 1;
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
