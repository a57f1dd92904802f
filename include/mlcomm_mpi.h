/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm_mpi.h - hand a program's own MPI communicator to mlcomm.
 *
 * The only mlcomm header that includes mpi.h. A program using it links the
 * MPI module (CMake target mlcomm::mlcomm-mpi, library libmlcomm-mpi.so)
 * and the shared libmlcomm. The program owns MPI: it calls MPI_Init (or
 * MPI_Init_thread) before mlc_comm_from_mpi and MPI_Finalize at the end,
 * after freeing its mlcomm communicators; mlcomm never finalizes an MPI it
 * did not initialize.
 */
#ifndef MLCOMM_MPI_H
#define MLCOMM_MPI_H

#include <mpi.h>
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
MLC_API mlc_status_t mlc_comm_from_mpi(MPI_Comm comm, const mlc_config_t *cfg, mlc_comm_t **out);

/**
 * The MPI communicator an mpi-backend communicator runs on (mlcomm's
 * duplicate, for MPI_Comm_compare, attributes, or a program's MPI receives of
 * mlc_send messages). It stays mlcomm's: do not free it, and start no
 * collective on it while mlcomm operations are pending.
 * Errors: INVALID_ARG (comm NULL or not on backend "mpi").
 */
MLC_API mlc_status_t mlc_comm_get_mpi(const mlc_comm_t *comm, MPI_Comm *out);

#ifdef __cplusplus
}
#endif
#endif /* MLCOMM_MPI_H */
