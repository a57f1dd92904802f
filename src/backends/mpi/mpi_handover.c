/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm_mpi.h: a program hands over its own MPI communicator. Core's
 * mlc_comm_from_mpi_f / mlc_comm_get_mpi_f reach these through the module's
 * table, with the communicator as its Fortran handle.
 */
#include <string.h>
#include "mpi_impl.h"

extern const mlc_backend_t mlc_mpi_backend_table;

mlc_status_t mlc_mpi_from_mpi(int64_t comm_f, const mlc_config_t *cfg, mlc_comm_t **out)
{
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (!inited || fin)
        return mlc_core->error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: MPI is %s: the program calls MPI_Init "
                         "first (or uses mlc_comm_init with MLC_BACKEND=mpi)",
                         fin ? "already finalized" : "not initialized");
    MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_f);
    if (comm == MPI_COMM_NULL) return mlc_core->error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: comm is MPI_COMM_NULL");
    /* A handle that names no communicator fails here. MPI raises that on
     * MPI_COMM_WORLD's (or MPI_COMM_SELF's) handler, which a program that
     * initialized MPI may have left fatal: errors return, for this call only. */
    MPI_Errhandler world_eh = MPI_ERRHANDLER_NULL, self_eh = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &world_eh);
    MPI_Comm_get_errhandler(MPI_COMM_SELF, &self_eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int inter = 0;
    int rc = MPI_Comm_test_inter(comm, &inter);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, world_eh);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, self_eh);
    MPI_Errhandler_free(&world_eh);
    MPI_Errhandler_free(&self_eh);
    if (rc != MPI_SUCCESS)
        return mlc_mpi_error(rc, "mlc_comm_from_mpi: the handle names no communicator (MPI_Comm_test_inter)");
    if (inter) return mlc_core->error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: comm is an intercommunicator");
    mlc_boot_t boot;
    memset(&boot, 0, sizeof boot);
    MPI_Comm_rank(comm, &boot.rank);
    MPI_Comm_size(comm, &boot.size);
    /* This host's share of comm (collective over comm, as the call is). */
    MPI_Comm local = MPI_COMM_NULL;
    boot.local_rank = boot.rank;
    boot.local_size = boot.size;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, boot.rank, MPI_INFO_NULL, &local) == MPI_SUCCESS &&
        local != MPI_COMM_NULL) {
        MPI_Comm_rank(local, &boot.local_rank);
        MPI_Comm_size(local, &boot.local_size);
        MPI_Comm_free(&local);
    }
    boot.be_arg = &comm;
    return mlc_core->comm_create_with(&mlc_mpi_backend_table, cfg, &boot, out);
}

/* The MPI communicator of an mpi-backend communicator; NULL for another backend's. */
const mlc_mpi_comm_t *mlc_mpi_comm_of(const mlc_comm_t *comm)
{
    const mlc_mpi_comm_t *c = comm ? comm->impl : NULL;
    /* comm->be may be a decorator's copy of this module's table (device buffers). */
    return comm && comm->be->init == mlc_mpi_backend_table.init && c && c->magic == MLC_MPI_COMM_MAGIC ? c : NULL;
}

mlc_status_t mlc_mpi_get_mpi(const mlc_comm_t *comm, int64_t *comm_f)
{
    const mlc_mpi_comm_t *c = mlc_mpi_comm_of(comm);
    if (!c)
        return mlc_core->error(MLC_ERR_INVALID_ARG, "mlc_comm_get_mpi: the communicator is not one of this MPI module's");
    *comm_f = (int64_t)MPI_Comm_c2f(c->comm);
    return MLC_SUCCESS;
}
