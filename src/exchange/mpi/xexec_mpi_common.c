/* SPDX-License-Identifier: BSD-3-Clause */
/* Waiting and failure for the MPI exchange executors, and the table the module exports. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "exchange/xexec_mpi.h"
#include "xexec_mpi_impl.h"

int mlc_xmpi_applies(mlc_comm_t *comm)
{
    return mlc_mpi_comm_of(comm) != NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An exchange message failed: fail the communicator (sticky), name the message. */
static mlc_status_t message_failed(mlc_comm_t *comm, int rc, const char *who, int i, int n)
{
    mlc_status_t st = mlc_mpi_error(rc, "rank %d: %s: message %d of %d", comm->rank, who, i, n);
    mlc_core->comm_fail(comm, MLC_ERR_ABORTED, "rank %d: %s failed", comm->rank, who);
    return st;
}

/*
 * One request at a time, each with a real status: MPI_Waitall/Testall with
 * MPI_STATUSES_IGNORE trip GCC's -Wstringop-overflow under MPICH's mpi.h
 * (a status array of size 0), and a failed request's own code is reported.
 * Waiting on the first request still progresses all of them; persistent
 * requests (mpi_pack) become inactive, which MPI_Test reports as complete.
 */
mlc_status_t mlc_xmpi_wait(mlc_comm_t *comm, int n, MPI_Request *reqs, const char *who)
{
    mlc_status_t st = mlc_core->comm_check(comm);
    if (st) return st;
    MPI_Status status;
    if (!comm->cfg.timeout_set || comm->cfg.timeout_s <= 0) {
        for (int i = 0; i < n; i++) {
            int rc = MPI_Wait(&reqs[i], &status);
            if (rc != MPI_SUCCESS) return message_failed(comm, rc, who, i, n);
        }
        return MLC_SUCCESS;
    }
    double deadline = now_s() + comm->cfg.timeout_s;
    int first = 0; /* requests before it are complete */
    for (;;) {
        while (first < n) {
            int done = 0;
            int rc = MPI_Test(&reqs[first], &done, &status);
            if (rc != MPI_SUCCESS) return message_failed(comm, rc, who, first, n);
            if (!done) break;
            first++;
        }
        if (first == n) return MLC_SUCCESS;
        st = mlc_mpi_check_ctrl(comm);
        if (st) return mlc_core->comm_check(comm);
        if (now_s() > deadline)
            return mlc_core->comm_fail(comm, MLC_ERR_TIMEOUT,
                                 "rank %d: %s: message %d of %d still not complete after %g s (MLC_TIMEOUT)",
                                 comm->rank, who, first, n, comm->cfg.timeout_s);
    }
}

mlc_status_t mlc_xmpi_fail_start(mlc_comm_t *comm, mlc_status_t st, const char *who)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mlc_core->last_error());
    mlc_core->comm_fail(comm, MLC_ERR_ABORTED, "rank %d: %s failed half way: %s", comm->rank, who, msg);
    mlc_mpi_abort(comm);
    return mlc_core->error(st, "%s: %s", who, msg);
}

extern const mlc_xexec_t mlc_xexec_mpi_subarray_impl, mlc_xexec_mpi_pack_impl;

const mlc_xexec_mpi_table_t mlc_mpi_xexec_table = {
    .abi = MLC_XEXEC_MPI_ABI,
    .size = sizeof(mlc_xexec_mpi_table_t),
    .exec_bytes = sizeof(mlc_xexec_t),
    .plan_bytes = sizeof(mlc_xplan_t),
    .subarray = &mlc_xexec_mpi_subarray_impl,
    .pack = &mlc_xexec_mpi_pack_impl,
};
