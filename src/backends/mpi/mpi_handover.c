/* SPDX-License-Identifier: BSD-3-Clause */
/* mlcomm_mpi.h: a program hands over its own MPI communicator. */
#include <string.h>
#include "mpi_impl.h"
#include "mlcomm_mpi.h"

extern const mlc_backend_t mlc_mpi_backend_table;

mlc_status_t mlc_comm_from_mpi(MPI_Comm comm, const mlc_config_t *cfg, mlc_comm_t **out)
{
    mlc_error_clear();
    if (!out) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: out is NULL");
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (!inited || fin)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: MPI is %s: the program calls MPI_Init "
                         "first (or uses mlc_comm_init with MLC_BACKEND=mpi)",
                         fin ? "already finalized" : "not initialized");
    if (comm == MPI_COMM_NULL) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: comm is MPI_COMM_NULL");
    int inter = 0;
    int rc = MPI_Comm_test_inter(comm, &inter);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "mlc_comm_from_mpi: MPI_Comm_test_inter");
    if (inter) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: comm is an intercommunicator");
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
    return mlc_comm_create_with(&mlc_mpi_backend_table, cfg, &boot, out);
}

mlc_status_t mlc_comm_get_mpi(const mlc_comm_t *comm, MPI_Comm *out)
{
    mlc_error_clear();
    if (!comm || !out)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_get_mpi: %s is NULL", comm ? "out" : "comm");
    const mlc_mpi_comm_t *c = comm->impl;
    if (!comm->be || strcmp(comm->be->name, "mpi") != 0 || !c || c->magic != MLC_MPI_COMM_MAGIC)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_get_mpi: the communicator runs on backend '%s', not 'mpi'",
                         comm->be ? comm->be->name : "(none)");
    *out = c->comm;
    return MLC_SUCCESS;
}
