/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI executors, as libmlcomm sees them: entries of the module's
 * exported table (xexec_mpi.h). The module is never loaded from here: a
 * communicator on the mpi backend exists only once the backend registry has
 * loaded it, so RTLD_NOLOAD finds it exactly when it can be used.
 */
#include <dlfcn.h>
#include <pthread.h>
#include "plan.h"
#include "xexec_mpi.h"

#ifndef MLC_MPI_MODULE_NAME
#define MLC_MPI_MODULE_NAME "libmlcomm-mpi.so"
#endif

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static const mlc_xexec_mpi_table_t *table; /* found once; the module is never unloaded */

static const mlc_xexec_mpi_table_t *mpi_table(void)
{
    pthread_mutex_lock(&table_lock);
    if (!table) {
        void *h = dlopen(MLC_MPI_MODULE_NAME, RTLD_NOW | RTLD_NOLOAD);
        const mlc_xexec_mpi_table_t *t = h ? dlsym(h, MLC_XEXEC_MPI_SYMBOL) : NULL;
        /* A module built against another libmlcomm is not trusted. */
        if (t && t->abi == MLC_XEXEC_MPI_ABI && t->size == sizeof *t &&
            t->exec_bytes == sizeof(mlc_xexec_t) && t->plan_bytes == sizeof(mlc_xplan_t))
            table = t;
        if (h) dlclose(h); /* drops the reference NOLOAD took; the module stays */
    }
    const mlc_xexec_mpi_table_t *t = table;
    pthread_mutex_unlock(&table_lock);
    return t;
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
