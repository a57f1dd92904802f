/* Waiting and failure for the MPI exchange executors, and the table the module exports. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "exchange/xexec_mpi.h"
#include "xexec_mpi_impl.h"

int mlc_xmpi_applies(mlc_comm_t *comm)
{
    return comm && comm->impl && ((const mlc_mpi_comm_t *)comm->impl)->magic == MLC_MPI_COMM_MAGIC;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

mlc_status_t mlc_xmpi_wait(mlc_comm_t *comm, int n, MPI_Request *reqs, const char *who)
{
    mlc_status_t st = mlc_comm_check(comm);
    if (st) return st;
    if (!comm->cfg.timeout_set || comm->cfg.timeout_s <= 0) {
        int rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
        if (rc == MPI_SUCCESS) return MLC_SUCCESS;
        st = mlc_mpi_error(rc, "rank %d: %s: waiting for %d messages", comm->rank, who, n);
        mlc_comm_fail(comm, MLC_ERR_ABORTED, "rank %d: %s failed", comm->rank, who);
        return st;
    }
    double deadline = now_s() + comm->cfg.timeout_s;
    for (;;) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            st = mlc_mpi_error(rc, "rank %d: %s: testing %d messages", comm->rank, who, n);
            mlc_comm_fail(comm, MLC_ERR_ABORTED, "rank %d: %s failed", comm->rank, who);
            return st;
        }
        if (done) return MLC_SUCCESS;
        st = mlc_mpi_check_ctrl(comm);
        if (st) return mlc_comm_check(comm);
        if (now_s() > deadline)
            return mlc_comm_fail(comm, MLC_ERR_TIMEOUT,
                                 "rank %d: %s: messages not complete after %g s (MLC_TIMEOUT)",
                                 comm->rank, who, comm->cfg.timeout_s);
    }
}

mlc_status_t mlc_xmpi_fail_start(mlc_comm_t *comm, mlc_status_t st, const char *who)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    mlc_comm_fail(comm, MLC_ERR_ABORTED, "rank %d: %s failed half way: %s", comm->rank, who, msg);
    mlc_mpi_abort(comm);
    return mlc_error(st, "%s: %s", who, msg);
}

extern const mlc_xexec_t mlc_xexec_mpi_subarray_impl, mlc_xexec_mpi_pack_impl;

MLC_MPI_EXPORT const mlc_xexec_mpi_table_t mlc_mpi_xexec_table = {
    .abi = MLC_XEXEC_MPI_ABI,
    .size = sizeof(mlc_xexec_mpi_table_t),
    .exec_bytes = sizeof(mlc_xexec_t),
    .plan_bytes = sizeof(mlc_xplan_t),
    .subarray = &mlc_xexec_mpi_subarray_impl,
    .pack = &mlc_xexec_mpi_pack_impl,
};
