/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The exchange executors that call MPI live in the MPI module
 * (libmlcomm-mpi.so, sources in src/exchange/mpi/), because libmlcomm never
 * links libmpi. The module's entry point hands core this table
 * (src/core/mpi_module.h); exec_mpi_lookup.c reads it there. No MPI header
 * here: both sides compile it.
 */
#ifndef MLC_EXCHANGE_XEXEC_MPI_H
#define MLC_EXCHANGE_XEXEC_MPI_H
#include <stdint.h>
#include "exec.h"

#define MLC_XEXEC_MPI_ABI 1u

typedef struct mlc_xexec_mpi_table {
    uint32_t abi;  /* MLC_XEXEC_MPI_ABI */
    uint32_t size; /* sizeof(mlc_xexec_mpi_table_t) */
    uint32_t exec_bytes, plan_bytes; /* layouts both sides share */
    const mlc_xexec_t *subarray; /* MPI_Type_create_subarray over the parent, Irecv/Isend */
    const mlc_xexec_t *pack;     /* packed messages, persistent requests on own buffers */
} mlc_xexec_mpi_table_t;
#endif
