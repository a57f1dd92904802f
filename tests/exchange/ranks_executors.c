/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rank test: the executors. Every executor the backend has (mpi_pack and
 * mpi_subarray on mpi; p2p everywhere) moves the same fields right, through
 * double buffering (set_data: the subarray types are rebound, the pack
 * requests are not touched), split-phase runs and switching executors on a
 * built plan; on mpi, ranks using different MPI executors interoperate.
 * MLC_EXCHANGE_EXEC (set by the forced variants in CMakeLists.txt) must be
 * the executor a new exchange gets.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "xfield.h"

static const xlayout_t layouts[] = {
    {2, {0, 0}, {13, 11}, {3, 4}, {1, 2}, {1, 1}, 8, -1},
    {3, {-2, 0, 5}, {6, 7, 5}, {2, 2, 3}, {1, 1, 2}, {1, 0, 1}, 3, -1},
};
static const char *const names[] = {"p2p", "mpi_pack", "mpi_subarray"};
#define NNAMES (sizeof names / sizeof names[0])

static int is_mpi(mlc_comm_t *comm) { return strcmp(mlc_comm_backend(comm), "mpi") == 0; }

static int expect_executor(mlc_comm_t *comm, mlc_exchange_t *ex, const char *want)
{
    mlc_exchange_info_t info;
    CHECK_OK(mlc_exchange_info(ex, &info));
    CHECK(strcmp(info.executor, want) == 0, "executor %s, want %s", info.executor, want);
    return 0;
}

/* Fill, run (whole or split), verify, then point every view at the other buffers. */
static int runs(mlc_comm_t *comm, mlc_exchange_t *ex, xfield_t *f, unsigned char **other,
                uint64_t *iter, const char *label)
{
    char why[256];
    for (int k = 0; k < 4; k++, (*iter)++) {
        xfield_fill(f, *iter);
        if (k % 2) {
            CHECK_OK(mlc_exchange_run(ex));
        } else {
            CHECK_OK(mlc_exchange_start(ex));
            CHECK(mlc_exchange_set_executor(ex, "p2p") == MLC_ERR_BUSY, "%s: switch while in flight", label);
            CHECK_OK(mlc_exchange_finish(ex));
        }
        CHECK(xfield_verify(f, *iter, why, sizeof why) == 0, "%s, run %d: %s", label, k, why);
        CHECK_OK(xfield_swap(f, other, ex));
    }
    return 0;
}

static int one_layout(mlc_comm_t *comm, const xlayout_t *L)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    xfield_t f;
    CHECK(!xfield_make(&f, L, rank, size), "memory");
    unsigned char **other = calloc((size_t)f.np + 1, sizeof *other);
    CHECK(other, "memory");
    for (int i = 0; i < f.np; i++) {
        size_t cells = 1;
        for (int d = 0; d < L->ndim; d++) cells *= (size_t)f.p[i].parent.shape[d];
        other[i] = calloc(cells, L->esize);
        CHECK(other[i], "memory");
    }
    mlc_exchange_config_t cfg = xfield_config(L);
    mlc_exchange_t *ex;
    CHECK_OK(mlc_exchange_create(comm, &cfg, &ex));
    CHECK_OK(xfield_declare(&f, ex));
    CHECK_OK(mlc_exchange_build(ex));
    const char *forced = getenv("MLC_EXCHANGE_EXEC");
    if (forced && forced[0] && strcmp(forced, "auto") != 0)
        CHECK(!expect_executor(comm, ex, forced), "MLC_EXCHANGE_EXEC=%s", forced);
    uint64_t iter = 1;
    CHECK(!runs(comm, ex, &f, other, &iter, "as created"), "as created");

    for (size_t n = 0; n < NNAMES; n++) {
        mlc_status_t st = mlc_exchange_set_executor(ex, names[n]);
        bool mpi_only = strncmp(names[n], "mpi_", 4) == 0;
        if (mpi_only && !is_mpi(comm)) {
            CHECK(st == MLC_ERR_UNSUPPORTED, "%s on %s: %s", names[n], mlc_comm_backend(comm),
                  mlc_status_name(st));
            continue;
        }
        CHECK_OK(st);
        CHECK(!expect_executor(comm, ex, names[n]), "set_executor");
        CHECK(!runs(comm, ex, &f, other, &iter, names[n]), "%s", names[n]);
    }
    /* The default: an MPI executor on mpi, p2p elsewhere. */
    CHECK_OK(mlc_exchange_set_executor(ex, "auto"));
    mlc_exchange_info_t info;
    CHECK_OK(mlc_exchange_info(ex, &info));
    CHECK(is_mpi(comm) ? strncmp(info.executor, "mpi_", 4) == 0 : strcmp(info.executor, "p2p") == 0,
          "auto chose %s on %s", info.executor, mlc_comm_backend(comm));
    CHECK(!runs(comm, ex, &f, other, &iter, "auto"), "auto");
    /* The two MPI executors send the same bytes: ranks may mix them. */
    if (is_mpi(comm)) {
        CHECK_OK(mlc_exchange_set_executor(ex, rank % 2 ? "mpi_pack" : "mpi_subarray"));
        CHECK(!runs(comm, ex, &f, other, &iter, "mixed"), "mixed");
    }
    CHECK(mlc_exchange_set_executor(ex, "carrier-pigeon") == MLC_ERR_INVALID_ARG, "unknown name");
    CHECK(strstr(mlc_last_error(), "carrier-pigeon") && strstr(mlc_last_error(), "mpi_subarray"),
          "message: %s", mlc_last_error());
    CHECK_OK(mlc_exchange_free(ex));
    for (int i = 0; i < f.np; i++) free(other[i]);
    free(other);
    xfield_free(&f);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        CHECK(!one_layout(comm, &layouts[i]), "layout %zu", i);
    return 0;
}

MLC_TEST_MAIN(body)
