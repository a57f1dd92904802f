/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Communicator creation besides the harness's own: mlc_comm_init_rank with a
 * unique id made by rank 0 and broadcast (same backend as the world, ranks
 * in order and reversed), the version string, per-collective profile
 * statistics (run with MLC_PROFILE=stats) and an algorithm forced from the
 * environment (run with MLC_ALGO_ALLREDUCE=ring) on every communicator.
 */
#include "harness.h"

#define STR2(x) #x
#define STR(x) STR2(x)

static int join(mlc_comm_t *comm, int as_rank, mlc_comm_t **out)
{
    int p = mlc_comm_size(comm);
    mlc_unique_id_t id;
    memset(&id, 0, sizeof id);
    if (mlc_comm_rank(comm) == 0) CHECK_OK(mlc_get_unique_id(&id));
    CHECK_OK(mlc_broadcast(&id, &id, sizeof id, MLC_UINT8, 0, comm, NULL));
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = mlc_comm_backend(comm);
    CHECK_OK(mlc_comm_init_rank(&id, p, as_rank, &cfg, out));
    CHECK(mlc_comm_size(*out) == p && mlc_comm_rank(*out) == as_rank, "joined as %d of %d",
          mlc_comm_rank(*out), mlc_comm_size(*out));
    CHECK(strcmp(mlc_comm_backend(*out), mlc_comm_backend(comm)) == 0, "backend %s",
          mlc_comm_backend(*out));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    const char *want_version = STR(MLC_VERSION_MAJOR) "." STR(MLC_VERSION_MINOR) "." STR(MLC_VERSION_PATCH);
    CHECK(strcmp(mlc_version(), want_version) == 0, "mlc_version() is %s, header says %s",
          mlc_version(), want_version);
    CHECK(mlc_comm_memory(comm) == MLC_MEMORY_KIND_HOST && mlc_comm_device(comm) == -1,
          "MLC_MEMORY=host: mlc_comm_memory = %d, mlc_comm_device = %d", (int)mlc_comm_memory(comm),
          mlc_comm_device(comm));

    mlc_comm_t *same = NULL, *reversed = NULL;
    CHECK_RUN(join(comm, r, &same));
    CHECK_RUN(join(comm, p - 1 - r, &reversed));
    int32_t me = r, *all = calloc((size_t)p, sizeof *all);
    CHECK(all, "out of memory");
    CHECK_OK(mlc_allgather(&me, all, 1, MLC_INT32, reversed, NULL));
    for (int q = 0; q < p; q++)
        CHECK(all[q] == p - 1 - q, "rank %d of the reversed communicator is world rank %d", q, all[q]);

    const char *forced = getenv("MLC_ALGO_ALLREDUCE"), *names[32];
    if (forced && mlc_test_algos(comm, MLC_COLL_ALLREDUCE, names, 32) > 0) {
        static const size_t sizes[] = {8, 4096, 1u << 24};
        for (size_t k = 0; k < 3; k++) {
            const char *a = NULL, *b = NULL;
            CHECK_OK(mlc_comm_get_algo(comm, MLC_COLL_ALLREDUCE, sizes[k], &a));
            CHECK_OK(mlc_comm_get_algo(reversed, MLC_COLL_ALLREDUCE, sizes[k], &b));
            CHECK(a && b && strcmp(a, forced) == 0 && strcmp(b, forced) == 0,
                  "MLC_ALGO_ALLREDUCE=%s but %zu bytes get %s (world) and %s (joined)", forced,
                  sizes[k], a ? a : "(null)", b ? b : "(null)");
        }
    }

    /* Five allreduces and a barrier, then the statistics say so. */
    double x[100], y[100];
    for (int i = 0; i < 100; i++) x[i] = r + i;
    for (int k = 0; k < 5; k++) CHECK_OK(mlc_allreduce(x, y, 100, MLC_FLOAT64, MLC_SUM, same, NULL));
    CHECK(y[7] == p * (p - 1) / 2.0 + 7.0 * p, "allreduce on the joined communicator gave %g", y[7]);
    CHECK_OK(mlc_barrier(same, NULL));
    mlc_profile_stat_t stats[MLC_COLL_COUNT];
    size_t n = MLC_COLL_COUNT;
    CHECK_OK(mlc_profile_stats(same, stats, &n));
    /* Only what the caller ran: the library's own traffic (init, split) is not
     * the caller's and must not show up. */
    char seen[512] = "";
    uint64_t ar_count = 0, ar_bytes = 0, other = 0;
    for (size_t i = 0; i < n && i < MLC_COLL_COUNT; i++) {
        size_t used = strlen(seen);
        snprintf(seen + used, sizeof seen - used, " %s:%llu calls/%llu bytes", mlc_coll_name(stats[i].coll),
                 (unsigned long long)stats[i].count, (unsigned long long)stats[i].bytes);
        if (stats[i].coll == MLC_COLL_ALLREDUCE) ar_count = stats[i].count, ar_bytes = stats[i].bytes;
        else if (stats[i].coll != MLC_COLL_BARRIER) other++;
    }
    if (getenv("MLC_PROFILE") && strcmp(getenv("MLC_PROFILE"), "stats") == 0)
        CHECK(n == 2 && ar_count == 5 && ar_bytes == 5 * 800 && other == 0,
              "expected allreduce:5 calls/4000 bytes and one barrier, profile stats say:%s", seen);

    CHECK_OK(mlc_comm_free(same));
    CHECK_OK(mlc_comm_free(reversed));
    free(all);
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
