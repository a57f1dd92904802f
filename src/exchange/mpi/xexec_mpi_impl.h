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

/*
 * prefix_prepare, prefix_start and prefix_release as the exchange calls them
 * (prefix_*_serial): below MPI_THREAD_MULTIPLE under the process's MPI lock,
 * as the backend's entries (mpi_backend.c), since another thread may be
 * using another communicator meanwhile. Finish needs no wrapper: its wait
 * takes the lock per polling step (mlc_xmpi_wait).
 */
#define MLC_XMPI_SERIAL_STEPS(prefix)                                                                     \
    static mlc_status_t prefix##_prepare_serial(const mlc_xplan_t *plan, mlc_comm_t *comm, void **state)  \
    {                                                                                                     \
        bool locked = mlc_mpi_serial_enter();                                                             \
        mlc_status_t st = prefix##_prepare(plan, comm, state);                                            \
        mlc_mpi_serial_leave(locked);                                                                     \
        return st;                                                                                        \
    }                                                                                                     \
    static mlc_status_t prefix##_start_serial(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b, \
                                              int tag)                                                    \
    {                                                                                                     \
        bool locked = mlc_mpi_serial_enter();                                                             \
        mlc_status_t st = prefix##_start(state, plan, b, tag);                                            \
        mlc_mpi_serial_leave(locked);                                                                     \
        return st;                                                                                        \
    }                                                                                                     \
    static void prefix##_release_serial(void *state)                                                      \
    {                                                                                                     \
        bool locked = mlc_mpi_serial_enter();                                                             \
        prefix##_release(state);                                                                          \
        mlc_mpi_serial_leave(locked);                                                                     \
    }

/* A start could post only part of an exchange: fail the private
 * communicator on every rank (abort notice) and return st with `msg`. */
mlc_status_t mlc_xmpi_fail_start(mlc_comm_t *comm, mlc_status_t st, const char *who);
#endif
