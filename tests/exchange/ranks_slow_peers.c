/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MLC_TIMEOUT means "no progress for N seconds" in an exchange too: rank 0
 * needs the blocks of ranks 1 and 2, which start their exchanges 2 s and 4 s
 * after it (MLC_TIMEOUT=3). Rank 0's finish waits 4 s in all, longer than
 * the timeout, but a message arrives every 2 s: it must not time out. On mpi
 * the forced variants run the MPI executors' own wait (mlc_xmpi_wait).
 * Rank 0 waits mostly asleep: its thread uses under a quarter of the wait's
 * wall time in CPU (a busy-polling wait uses all of it on an idle machine).
 * Then rank 0 runs it once more alone: it times out, with a message.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"
#include "mlcomm_exchange.h"

enum { BLOCK = 4, NRANKS = 3 };
#define STAGGER_S 2.0

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    if (mlc_comm_size(comm) != NRANKS) return MLC_TEST_SKIP;
    mlc_exchange_config_t c = MLC_EXCHANGE_CONFIG_INIT;
    c.ndim = 1;
    c.dtype = MLC_FLOAT64;
    mlc_exchange_t *ex = NULL;
    CHECK_OK(mlc_exchange_create(comm, &c, &ex));
    double mine[BLOCK], all[NRANKS * BLOCK];
    for (int i = 0; i < BLOCK; i++) mine[i] = 100.0 * r + i;
    for (int i = 0; i < NRANKS * BLOCK; i++) all[i] = -1;
    int64_t start = (int64_t)r * BLOCK, n = BLOCK, whole = NRANKS * BLOCK, zero = 0, others = BLOCK,
            rest = (NRANKS - 1) * BLOCK;
    mlc_view_t pv = {mine, mlc_box_make(1, &start, &n), mlc_box_make(1, &start, &n)};
    CHECK_OK(mlc_exchange_provide(ex, &pv, NULL));
    if (r == 0) {
        mlc_view_t nv = {all, mlc_box_make(1, &zero, &whole), mlc_box_make(1, &others, &rest)};
        CHECK_OK(mlc_exchange_need(ex, &nv, NULL));
    }
    CHECK_OK(mlc_exchange_build(ex));
    double built = mlc_test_now(); /* the build is collective: the ranks left it together */
    const char *forced = getenv("MLC_EXCHANGE_EXEC");
    mlc_exchange_info_t info;
    CHECK_OK(mlc_exchange_info(ex, &info));
    if (forced && strcmp(mlc_comm_backend(comm), "mpi") == 0)
        CHECK(strcmp(info.executor, forced) == 0, "executor %s, MLC_EXCHANGE_EXEC=%s", info.executor, forced);

    usleep((useconds_t)(r * STAGGER_S * 1e6));
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    double t0 = mlc_test_now();
    CHECK_OK(mlc_exchange_run(ex));
    double took = mlc_test_now() - t0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    if (r == 0) {
        CHECK(took > 1.5 * STAGGER_S, "rank 0's exchange took %.2f s; the stagger did not hold it", took);
        CHECK(cpu < 0.25 * took, "rank 0 spent %.2f s of CPU in a %.2f s wait: it did not sleep", cpu, took);
        for (int q = 1; q < NRANKS; q++)
            for (int i = 0; i < BLOCK; i++)
                CHECK(all[q * BLOCK + i] == 100.0 * q + i, "element %d: %g", q * BLOCK + i, all[q * BLOCK + i]);
    }
    /* Peers alive but not running the exchange (busy elsewhere for longer than
     * MLC_TIMEOUT): rank 0's run times out, and says so in its message (the
     * MPI executors' wait returned none). */
    if (r == 0) {
        mlc_status_t st = mlc_exchange_run(ex);
        CHECK(st == MLC_ERR_TIMEOUT, "a run without its peers -> %s (%s)", mlc_status_name(st), mlc_last_error());
        CHECK(strstr(mlc_last_error(), "MLC_TIMEOUT") != NULL, "message of the timeout: \"%s\"", mlc_last_error());
    } else {
        /* Rank 0 ran again at about 2 x STAGGER_S after the build and times
         * out 3 s (MLC_TIMEOUT) later; the peers free theirs 1.5 s after
         * that, and so meet rank 0's final barrier 1.5 s before its own
         * timeout would end it. */
        double until = built + 2 * STAGGER_S + 3.0 + 1.5, left = until - mlc_test_now();
        if (left > 0) usleep((useconds_t)(left * 1e6));
    }
    CHECK_OK(mlc_exchange_free(ex));
    CHECK_OK(mlc_barrier(comm, NULL));
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
