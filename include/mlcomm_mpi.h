/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm_mpi.h - hand a program's own MPI communicator to mlcomm.
 *
 * The only mlcomm header that includes mpi.h. A program using it links
 * libmlcomm and its own MPI; libmlcomm loads its MPI module
 * (libmlcomm-mpi.so, built against the same MPI) on first use. The
 * communicator crosses into the library as its Fortran handle
 * (MPI_Comm_c2f), the one form every MPI can pass through a library that
 * does not include mpi.h. The program owns MPI: it calls MPI_Init (or
 * MPI_Init_thread) before mlc_comm_from_mpi and MPI_Finalize at the end,
 * after freeing its mlcomm communicators; mlcomm never finalizes an MPI it
 * did not initialize.
 */
#ifndef MLCOMM_MPI_H
#define MLCOMM_MPI_H

#include <mpi.h>
#include <stdint.h>
#include "mlcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create an mlcomm communicator over the ranks of `comm` (collective over
 * comm). mlcomm works on its own MPI_Comm_dup of comm, so its traffic never
 * matches the program's, and comm stays the program's to use and free.
 * Rank and size are comm's; cfg (may be NULL) is resolved as in
 * mlc_comm_init, except that the backend is always "mpi".
 * Errors: INVALID_ARG (comm is MPI_COMM_NULL or an intercommunicator, out is
 * NULL, MPI not initialized or already finalized), CONFIG, BACKEND (an MPI
 * call failed; the message has MPI's text), MISMATCH.
 */
static inline mlc_status_t mlc_comm_from_mpi(MPI_Comm comm, const mlc_config_t *cfg, mlc_comm_t **out);

/**
 * The MPI communicator an mpi-backend communicator runs on (mlcomm's
 * duplicate, for MPI_Comm_compare, attributes, or a program's MPI receives of
 * mlc_send messages). It stays mlcomm's: do not free it, and start no
 * collective on it while mlcomm operations are pending.
 * Errors: INVALID_ARG (comm NULL or not on backend "mpi").
 */
static inline mlc_status_t mlc_comm_get_mpi(const mlc_comm_t *comm, MPI_Comm *out);

/* The same two calls with the communicator as its Fortran handle
 * (MPI_Comm_c2f). mlc_comm_from_mpi_f also takes MLC_MPI_NOT_INITIALIZED or
 * MLC_MPI_FINALIZED (outside MPI_Fint's range) for a program whose MPI
 * cannot convert a handle now: it then fails with INVALID_ARG saying so. */
#define MLC_MPI_NOT_INITIALIZED INT64_MIN
#define MLC_MPI_FINALIZED (INT64_MIN + 1)
MLC_API mlc_status_t mlc_comm_from_mpi_f(int64_t comm_f, const mlc_config_t *cfg, mlc_comm_t **out);
MLC_API mlc_status_t mlc_comm_get_mpi_f(const mlc_comm_t *comm, int64_t *comm_f);

static inline mlc_status_t mlc_comm_from_mpi(MPI_Comm comm, const mlc_config_t *cfg, mlc_comm_t **out)
{
    /* MPI_Comm_c2f is not to be called before MPI_Init or after MPI_Finalize. */
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return mlc_comm_from_mpi_f(finalized ? MLC_MPI_FINALIZED : MLC_MPI_NOT_INITIALIZED, cfg, out);
    return mlc_comm_from_mpi_f((int64_t)MPI_Comm_c2f(comm), cfg, out);
}

static inline mlc_status_t mlc_comm_get_mpi(const mlc_comm_t *comm, MPI_Comm *out)
{
    int64_t comm_f = 0;
    mlc_status_t st = mlc_comm_get_mpi_f(comm, out ? &comm_f : NULL);
    if (st == MLC_SUCCESS) *out = MPI_Comm_f2c((MPI_Fint)comm_f);
    return st;
}

#ifdef __cplusplus
}
#endif
#endif /* MLCOMM_MPI_H */
