/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI executors, as libmlcomm sees them: entries of the MPI module's
 * table (xexec_mpi.h). A communicator on the mpi backend exists only once
 * the module is loaded, so asking here never loads it for nothing.
 */
#include "core/mpi_module.h"
#include "plan.h"
#include "xexec_mpi.h"

static const mlc_xexec_mpi_table_t *mpi_table(void)
{
    if (!mlc_mpi_module_available(NULL, 0)) return NULL;
    const mlc_xexec_mpi_table_t *t = mlc_mpi_module()->xexec;
    /* A module built against another libmlcomm is not trusted. */
    if (t && t->abi == MLC_XEXEC_MPI_ABI && t->size == sizeof *t && t->exec_bytes == sizeof(mlc_xexec_t) &&
        t->plan_bytes == sizeof(mlc_xplan_t))
        return t;
    return NULL;
}

const mlc_xexec_t *mlc_xexec_lookup_mpi_subarray(void)
{
    const mlc_xexec_mpi_table_t *t = mpi_table();
    return t ? t->subarray : NULL;
}

const mlc_xexec_t *mlc_xexec_lookup_mpi_pack(void)
{
    const mlc_xexec_mpi_table_t *t = mpi_table();
    return t ? t->pack : NULL;
}
