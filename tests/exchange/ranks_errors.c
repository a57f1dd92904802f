/* SPDX-License-Identifier: BSD-3-Clause */
/* Rank test: every error case of the exchange API, and recovery after a failed build. */
#include "harness.h"
#include "mlcomm_exchange.h"

static mlc_box_t b1(int64_t s, int64_t n) { return mlc_box_make(1, &s, &n); }

static mlc_exchange_config_t cfg1(void)
{
    mlc_exchange_config_t c = MLC_EXCHANGE_CONFIG_INIT;
    c.ndim = 1;
    c.dtype = MLC_FLOAT64;
    return c;
}

static int create_errors(mlc_comm_t *comm)
{
    mlc_exchange_t *ex = (mlc_exchange_t *)0x1;
    mlc_exchange_config_t c = cfg1();
    CHECK_ERR(mlc_exchange_create(NULL, &c, &ex), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_exchange_create(comm, NULL, &ex), MLC_ERR_INVALID_ARG);
    c.magic = 0;
    CHECK_ERR(mlc_exchange_create(comm, &c, &ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("MLC_EXCHANGE_CONFIG_INIT");
    c = cfg1();
    c.ndim = 0;
    CHECK_ERR(mlc_exchange_create(comm, &c, &ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("cfg.ndim = 0");
    c.ndim = MLC_EXCHANGE_MAX_DIMS + 1;
    CHECK_ERR(mlc_exchange_create(comm, &c, &ex), MLC_ERR_INVALID_ARG);
    c = cfg1();
    c.dtype = 4242;
    CHECK_ERR(mlc_exchange_create(comm, &c, &ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("cfg.dtype = 4242");
    c = cfg1();
    c.flags = 0x80;
    CHECK_ERR(mlc_exchange_create(comm, &c, &ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("0x80");
    c = cfg1();
    c.periodic[0] = 1;
    CHECK_ERR(mlc_exchange_create(comm, &c, &ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("periodic axis needs cfg.domain");
    c.domain = b1(0, 0);
    CHECK_ERR(mlc_exchange_create(comm, &c, &ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("empty domain");
    int64_t z[2] = {0, 0}, s[2] = {4, 4};
    c.domain = mlc_box_make(2, z, s);
    CHECK_ERR(mlc_exchange_create(comm, &c, &ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("ndim 2, the exchange has 1");
    CHECK(ex == (mlc_exchange_t *)0x1, "output untouched on failure");
    return 0;
}

static int call_errors(mlc_comm_t *comm)
{
    double buf[16] = {0};
    mlc_exchange_config_t c = cfg1();
    mlc_exchange_t *ex;
    CHECK_OK(mlc_exchange_create(comm, &c, &ex));
    mlc_view_t v = {buf, b1(0, 16), b1(10, 8)};
    CHECK_ERR(mlc_exchange_provide(ex, &v, NULL), MLC_ERR_INVALID_ARG);
    CHECK_MSG("region [10,18) is not inside parent [0,16)");
    v.region = b1(0, -1);
    CHECK_ERR(mlc_exchange_need(ex, &v, NULL), MLC_ERR_INVALID_ARG);
    CHECK_MSG("shape[0] = -1");
    int64_t z[2] = {0, 0}, s[2] = {4, 4};
    v.region = mlc_box_make(2, z, s);
    CHECK_ERR(mlc_exchange_need(ex, &v, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_exchange_provide(ex, NULL, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_exchange_provide(NULL, &v, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_exchange_start(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("no plan");
    CHECK_ERR(mlc_exchange_finish(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("no exchange in flight");
    mlc_exchange_info_t info;
    CHECK_ERR(mlc_exchange_info(ex, &info), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_exchange_set_data(ex, MLC_EXCHANGE_PROVIDE, 0, buf), MLC_ERR_INVALID_ARG);
    CHECK_MSG("provide id 0 not in 0..-1");
    CHECK_ERR(mlc_exchange_set_data(ex, (mlc_exchange_side_t)7, 0, buf), MLC_ERR_INVALID_ARG);

    /* A valid plan: each rank provides [16r, 16r+16) and needs its own
     * first cell again through a second array (a local copy). */
    const int rank = mlc_comm_rank(comm);
    double dst[1] = {0};
    mlc_view_t pv = {buf, b1(16 * rank, 16), b1(16 * rank, 16)};
    mlc_view_t nv = {dst, b1(16 * rank, 1), b1(16 * rank, 1)};
    int pid, nid;
    CHECK_OK(mlc_exchange_provide(ex, &pv, &pid));
    CHECK_OK(mlc_exchange_need(ex, &nv, &nid));
    CHECK(pid == 0 && nid == 0, "ids count from 0");
    /* Not inside an open group: building and running wait for collectives
     * and messages of their own, which the group would hold. */
    CHECK_OK(mlc_group_start());
    CHECK_ERR(mlc_exchange_build(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("open group");
    CHECK_OK(mlc_group_end());
    CHECK_OK(mlc_exchange_build(ex));
    CHECK_OK(mlc_group_start());
    CHECK_ERR(mlc_exchange_run(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("open group");
    CHECK_OK(mlc_group_end());
    /* In flight: everything that would change the plan is BUSY. */
    CHECK_OK(mlc_exchange_start(ex));
    CHECK_ERR(mlc_exchange_start(ex), MLC_ERR_BUSY);
    CHECK_MSG("already in flight");
    CHECK_ERR(mlc_exchange_provide(ex, &pv, NULL), MLC_ERR_BUSY);
    CHECK_ERR(mlc_exchange_clear(ex), MLC_ERR_BUSY);
    CHECK_ERR(mlc_exchange_build(ex), MLC_ERR_BUSY);
    CHECK_ERR(mlc_exchange_set_data(ex, MLC_EXCHANGE_NEED, 0, dst), MLC_ERR_BUSY);
    CHECK_OK(mlc_exchange_finish(ex));
    /* Views added after the build: must build again. */
    mlc_view_t nv2 = {dst, b1(16 * rank, 1), b1(16 * rank, 1)};
    CHECK_OK(mlc_exchange_need(ex, &nv2, NULL));
    CHECK_ERR(mlc_exchange_start(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("build again");
    CHECK_OK(mlc_exchange_build(ex));
    /* No data. */
    CHECK_OK(mlc_exchange_set_data(ex, MLC_EXCHANGE_NEED, 1, NULL));
    CHECK_ERR(mlc_exchange_start(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("need 1 ");
    CHECK_MSG("has no data");
    CHECK_OK(mlc_exchange_set_data(ex, MLC_EXCHANGE_NEED, 1, dst));
    buf[0] = 42.0;
    CHECK_OK(mlc_exchange_run(ex));
    CHECK(dst[0] == 42.0, "local copy %g", dst[0]);
    CHECK_OK(mlc_exchange_free(ex));
    CHECK_OK(mlc_exchange_free(NULL));
    return 0;
}

/* Errors found while building are reported on every rank. */
static int build_errors(mlc_comm_t *comm)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm), last = size - 1;
    double buf[16], extra[8], far[3];
    mlc_exchange_config_t c = cfg1();
    mlc_exchange_t *ex;
    CHECK_OK(mlc_exchange_create(comm, &c, &ex));

    /* Overlapping provides: rank `last` also claims [5,12), which rank 0 owns. */
    mlc_view_t pv = {buf, b1(16 * rank, 16), b1(16 * rank, 16)};
    mlc_view_t ov = {extra, b1(5, 8), b1(5, 7)};
    CHECK_OK(mlc_exchange_provide(ex, &pv, NULL));
    if (rank == last) CHECK_OK(mlc_exchange_provide(ex, &ov, NULL));
    CHECK_ERR(mlc_exchange_build(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("mlc_exchange_build: ");
    CHECK_MSG("provided regions overlap: rank 0 provide 0 [0,16)");
    CHECK_MSG("provide 1 [5,12) share [5,12)");

    /* Recovery: the same exchange builds once the layout is fixed. */
    CHECK_OK(mlc_exchange_clear(ex));
    CHECK_OK(mlc_exchange_provide(ex, &pv, NULL));
    CHECK_OK(mlc_exchange_build(ex));

    /* A need nobody provides: its rank names the box, the others name that rank. */
    mlc_view_t fv = {far, b1(1000, 3), b1(1000, 3)};
    if (rank == last) CHECK_OK(mlc_exchange_need(ex, &fv, NULL));
    CHECK_ERR(mlc_exchange_build(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("mlc_exchange_build: ");
    if (rank == last) CHECK_MSG("need 0 [1000,1003): 3 cells no rank provides");
    else CHECK_MSG("failed on rank");
    CHECK_OK(mlc_exchange_free(ex));

    /* The same with MLC_EXCHANGE_ALLOW_UNPROVIDED: left untouched, counted. */
    c.flags = MLC_EXCHANGE_ALLOW_UNPROVIDED;
    CHECK_OK(mlc_exchange_create(comm, &c, &ex));
    CHECK_OK(mlc_exchange_provide(ex, &pv, NULL));
    /* [16*size-1, +3): one cell provided by the last rank, two by nobody. */
    mlc_view_t hv = {far, b1(16 * size - 1, 3), b1(16 * size - 1, 3)};
    if (rank == 0) CHECK_OK(mlc_exchange_need(ex, &hv, NULL));
    CHECK_OK(mlc_exchange_build(ex));
    for (int i = 0; i < 16; i++) buf[i] = 100.0 * rank + i;
    far[0] = far[1] = far[2] = -7.0;
    CHECK_OK(mlc_exchange_run(ex));
    mlc_exchange_info_t info;
    CHECK_OK(mlc_exchange_info(ex, &info));
    if (rank == 0) {
        CHECK(far[0] == 100.0 * last + 15 && far[1] == -7.0 && far[2] == -7.0,
              "partial need: %g %g %g", far[0], far[1], far[2]);
        CHECK(info.unprovided_cells == 2, "unprovided %llu", (unsigned long long)info.unprovided_cells);
    }
    CHECK_OK(mlc_exchange_free(ex));

    /* A provide outside the domain. */
    c = cfg1();
    c.domain = b1(0, 16 * size);
    CHECK_OK(mlc_exchange_create(comm, &c, &ex));
    mlc_view_t xv = {extra, b1(16 * size - 2, 8), b1(16 * size - 2, 5)};
    if (rank == last) CHECK_OK(mlc_exchange_provide(ex, &xv, NULL));
    else CHECK_OK(mlc_exchange_provide(ex, &pv, NULL));
    CHECK_ERR(mlc_exchange_build(ex), MLC_ERR_INVALID_ARG);
    CHECK_MSG("lies outside the domain");
    CHECK_OK(mlc_exchange_free(ex));

    /* Ranks that disagree on the config. */
    if (size > 1) {
        c = cfg1();
        if (rank == 0) c.dtype = MLC_FLOAT32;
        CHECK_OK(mlc_exchange_create(comm, &c, &ex));
        CHECK_ERR(mlc_exchange_build(ex), MLC_ERR_MISMATCH);
        CHECK_MSG("different config");
        CHECK_OK(mlc_exchange_free(ex));
    }
    return 0;
}

/* Freed with an exchange in flight: its receives and sends, pending when the
 * private communicator goes, are released with it (nothing leaks, under ASan). */
static int freed_in_flight(mlc_comm_t *comm)
{
    const int rank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    double buf[16] = {0}, dst[1] = {0};
    mlc_exchange_config_t c = cfg1();
    mlc_exchange_t *ex;
    CHECK_OK(mlc_exchange_create(comm, &c, &ex));
    mlc_view_t pv = {buf, b1(16 * rank, 16), b1(16 * rank, 16)};
    mlc_view_t nv = {dst, b1(16 * ((rank + 1) % p), 1), b1(16 * ((rank + 1) % p), 1)};
    CHECK_OK(mlc_exchange_provide(ex, &pv, NULL));
    CHECK_OK(mlc_exchange_need(ex, &nv, NULL));
    CHECK_OK(mlc_exchange_build(ex));
    CHECK_OK(mlc_barrier(comm, NULL));
    /* Rank 0 starts alone: its receive cannot complete before the free. */
    if (rank == 0) CHECK_OK(mlc_exchange_start(ex));
    CHECK_OK(mlc_exchange_free(ex));
    CHECK_OK(mlc_barrier(comm, NULL));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (create_errors(comm)) return 1;
    if (call_errors(comm)) return 1;
    if (build_errors(comm)) return 1;
    if (freed_in_flight(comm)) return 1;
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
