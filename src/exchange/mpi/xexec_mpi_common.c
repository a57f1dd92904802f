/* SPDX-License-Identifier: BSD-3-Clause */
/* Waiting and failure for the MPI exchange executors, and the table the module exports. */
#include <stdio.h>
#include <string.h>
#include "base/wait.h"
#include "exchange/xexec_mpi.h"
#include "xexec_mpi_impl.h"

int mlc_xmpi_applies(mlc_comm_t *comm)
{
    return mlc_mpi_comm_of(comm) != NULL;
}

/* An exchange message failed: fail the communicator (sticky), name the message. */
static mlc_status_t message_failed(mlc_comm_t *comm, int rc, const char *who, int i, int n)
{
    mlc_status_t st = mlc_mpi_error(rc, "rank %d: %s: message %d of %d", comm->rank, who, i, n);
    mlc_core->comm_fail(comm, MLC_ERR_ABORTED, "rank %d: %s failed", comm->rank, who);
    return st;
}

/* Waiting on an exchange's messages with MLC_TIMEOUT (base/wait.h). */
typedef struct xmpi_wait {
    mlc_comm_t *comm;
    int n, first, ndone; /* requests before first are complete; ndone in the last pass */
    MPI_Request *reqs;
    const char *who;
    mlc_status_t st;
} xmpi_wait_t;

/*
 * Test every request, one at a time, each with a real status: MPI_Testall
 * with MPI_STATUSES_IGNORE trips GCC's -Wstringop-overflow under MPICH's
 * mpi.h (a status array of size 0), and a failed request's own code is
 * reported. A completed request stays complete (MPI_REQUEST_NULL, or an
 * inactive persistent request, which MPI_Test reports as complete), so more
 * complete requests than in the last pass is progress.
 */
static int xmpi_step(void *p)
{
    xmpi_wait_t *w = p;
    MPI_Status status;
    int ndone = w->first;
    for (int i = w->first; i < w->n; i++) {
        int done = 0;
        int rc = MPI_Test(&w->reqs[i], &done, &status);
        if (rc != MPI_SUCCESS) {
            w->st = message_failed(w->comm, rc, w->who, i, w->n);
            return MLC_WAIT_STOP;
        }
        if (!done) continue;
        ndone++;
        if (i == w->first) w->first++;
    }
    int moved = ndone > w->ndone;
    w->ndone = ndone;
    if (w->first < w->n && mlc_mpi_check_ctrl(w->comm) != MLC_SUCCESS) {
        w->st = mlc_core->comm_check(w->comm);
        return MLC_WAIT_STOP;
    }
    return moved ? MLC_WAIT_MOVED : MLC_WAIT_NOTHING;
}

/* One polling step under the process's MPI lock (mlc_mpi_serial_enter): taken
 * and let go per step, so that other threads' calls go on between steps. */
static int xmpi_step_serial(void *p)
{
    bool locked = mlc_mpi_serial_enter();
    int r = xmpi_step(p);
    mlc_mpi_serial_leave(locked);
    return r;
}

static int xmpi_done(void *p)
{
    const xmpi_wait_t *w = p;
    return w->first == w->n;
}

/*
 * Wait for reqs[0..n). With no deadline (MLC_TIMEOUT=0): MPI_Wait on each
 * (each with a real status, see xmpi_step). With one (the default 600 s or
 * another): the shared wait loop polls them (spin, yield, then sleeps with
 * backoff) until all complete, a control message fails the communicator, or
 * no message completed for MLC_TIMEOUT seconds.
 */
mlc_status_t mlc_xmpi_wait(mlc_comm_t *comm, int n, MPI_Request *reqs, const char *who)
{
    mlc_status_t st = mlc_core->comm_check(comm);
    if (st) return st;
    /* MLC_TIMEOUT=0: no deadline, MPI's own wait; but not while MPI's calls
     * take turns (below MPI_THREAD_MULTIPLE): a thread blocked in MPI_Wait
     * would hold the others off, so it is polled, without a deadline. */
    if (comm->cfg.timeout_s <= 0 && !mlc_mpi_serialized()) {
        MPI_Status status;
        for (int i = 0; i < n; i++) {
            int rc = MPI_Wait(&reqs[i], &status);
            if (rc != MPI_SUCCESS) return message_failed(comm, rc, who, i, n);
        }
        return MLC_SUCCESS;
    }
    xmpi_wait_t xw = {.comm = comm, .n = n, .reqs = reqs, .who = who, .st = MLC_SUCCESS};
    mlc_wait_t w = {.step = xmpi_step_serial, .done = xmpi_done, .ctx = &xw, .timeout_s = comm->cfg.timeout_s,
                    .what = who, .spin_check = 8};
    switch (mlc_wait_run(&w)) {
    case MLC_WAIT_DONE: return MLC_SUCCESS;
    case MLC_WAIT_STOPPED: return xw.st;
    case MLC_WAIT_TIMEOUT: break;
    }
    mlc_status_t fst = mlc_core->comm_fail(comm, MLC_ERR_TIMEOUT,
                                           "rank %d: %s: message %d of %d made no progress for %g s (MLC_TIMEOUT)",
                                           comm->rank, who, xw.first, n, comm->cfg.timeout_s);
    return mlc_core->error(fst, "%s", comm->fail_msg); /* failing the communicator sets no message */
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
