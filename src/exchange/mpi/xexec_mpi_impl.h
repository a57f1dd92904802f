/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the exchange executors compiled into the MPI module
 * (xexec_mpi_pack.c, xexec_mpi_subarray.c). They run on the exchange's
 * private communicator: its `comm` duplicate carries only this exchange's
 * messages, so a fixed tag is enough (MPI keeps messages between two ranks
 * in order, and a run has one message per neighbour and direction).
 */
#ifndef MLC_XEXEC_MPI_IMPL_H
#define MLC_XEXEC_MPI_IMPL_H
#include "backends/mpi/mpi_impl.h"
#include "exchange/executor.h"

/* The tag of exchange messages on the private communicator. */
#define MLC_XMPI_TAG 0

/* comm is an mpi-backend communicator (its state is the module's). */
int mlc_xmpi_applies(mlc_comm_t *comm);
static inline MPI_Comm mlc_xmpi_comm(mlc_comm_t *comm) { return mlc_mpi_comm_of(comm)->comm; }

/*
 * Wait for reqs[0..n). With no deadline (MLC_TIMEOUT=0): MPI_Wait on each. With one:
 * polled by the shared wait loop (base/wait.h) with the control receive (a
 * peer's mlc_comm_abort); it times out when no message completed for
 * MLC_TIMEOUT seconds.
 * On failure the communicator is failed (sticky), so no peer waits for a
 * rank that gave up; the requests are left to MPI.
 */
mlc_status_t mlc_xmpi_wait(mlc_comm_t *comm, int n, MPI_Request *reqs, const char *who);

/* A start could post only part of an exchange: fail the private
 * communicator on every rank (abort notice) and return st with `msg`. */
mlc_status_t mlc_xmpi_fail_start(mlc_comm_t *comm, mlc_status_t st, const char *who);
#endif
