/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The module's backend table (exported as mlc_mpi_backend_table; the
 * registry's `mpi` entry forwards to it) and its binding to core.
 */
#include <stdio.h>
#include "mpi_impl.h"

/* Until bound, the core of libmlcomm.so, which this module links. */
#undef mlc_log_level_current
mlc_mpi_core_t mlc_mpi_core = MLC_MPI_CORE_INIT;

MLC_MPI_EXPORT int mlc_mpi_module_bind(const mlc_mpi_core_t *core, char *why, size_t why_len)
{
    const mlc_mpi_core_t mine = MLC_MPI_CORE_INIT;
    if (core->abi != mine.abi || core->size != mine.size || core->comm_bytes != mine.comm_bytes ||
        core->request_bytes != mine.request_bytes || core->backend_bytes != mine.backend_bytes ||
        core->cfg_bytes != mine.cfg_bytes) {
        snprintf(why, why_len, "it was built against another libmlcomm (interface %u/%u bytes, module %u/%u)",
                 core->abi, core->size, mine.abi, mine.size);
        return -1;
    }
    mlc_mpi_core = *core;
    return 0;
}

static mlc_status_t mpi_start(mlc_request_t *req)
{
    static mlc_status_t (*const native[MLC_COLL_COUNT])(mlc_request_t *) = {
        [MLC_COLL_BROADCAST] = mlc_mpi_start_broadcast,
        [MLC_COLL_REDUCE] = mlc_mpi_start_reduce,
        [MLC_COLL_ALLREDUCE] = mlc_mpi_start_allreduce,
        [MLC_COLL_ALLGATHER] = mlc_mpi_start_allgather,
        [MLC_COLL_ALLGATHERV] = mlc_mpi_start_allgatherv,
        [MLC_COLL_REDUCE_SCATTER] = mlc_mpi_start_reduce_scatter,
        [MLC_COLL_ALLTOALL] = mlc_mpi_start_alltoall,
        [MLC_COLL_ALLTOALLV] = mlc_mpi_start_alltoallv,
        [MLC_COLL_GATHER] = mlc_mpi_start_gather,
        [MLC_COLL_GATHERV] = mlc_mpi_start_gatherv,
        [MLC_COLL_SCATTER] = mlc_mpi_start_scatter,
        [MLC_COLL_SCATTERV] = mlc_mpi_start_scatterv,
        [MLC_COLL_BARRIER] = mlc_mpi_start_barrier,
        [MLC_COLL_SEND] = mlc_mpi_start_send,
        [MLC_COLL_RECV] = mlc_mpi_start_recv,
        [MLC_COLL_SENDRECV] = mlc_mpi_start_sendrecv,
    };
    if (req->coll < MLC_COLL_SEND) {
        mlc_mpi_comm_t *c = req->comm->impl;
        c->started = req->seq + 1; /* what this rank answers a timed-out peer */
    }
    if (req->algo) {
        mlc_status_t st = mlc_mpi_start_algo(req);
        if (st != MLC_ERR_UNSUPPORTED) return st;
        /* A forced algorithm that cannot take this call falls back to MPI's own
         * (as NCCL_ALGO does); every rank sees the same reason. */
        MLC_DEBUG("rank %d: %s #%llu: algorithm '%s' cannot run it (%s); using MPI's own", req->comm->rank,
                  mlc_coll_name(req->coll), (unsigned long long)req->seq, req->algo, mlc_last_error());
        mlc_error_clear();
        req->algo = NULL;
    }
    return native[req->coll](req);
}

static int mpi_module_available(char *why, size_t len)
{
    (void)why;
    (void)len;
    return 1;
}

MLC_MPI_EXPORT const mlc_backend_t mlc_mpi_backend_table = {
    .name = "mpi",
    .priority = 30,
    .available = mpi_module_available,
    .init = mlc_mpi_init,
    .split = mlc_mpi_split,
    .destroy = mlc_mpi_destroy,
    .abort = mlc_mpi_abort,
    .start =
        {
#define MLC_X_START(id, str, env) [id] = mpi_start,
            MLC_COLL_LIST(MLC_X_START)
#undef MLC_X_START
        },
    .iprobe = mlc_mpi_iprobe,
    .progress = mlc_mpi_progress,
    .idle = mlc_mpi_idle,
    .health = mlc_mpi_health,
    .pending_peers = mlc_mpi_pending_peers,
    .wait_native = mlc_mpi_wait_native,
    .tag_max = mlc_mpi_tag_max,
    .algos = mlc_mpi_algos,
    .device_capable = mlc_mpi_device_capable,
    .device_direct = mlc_mpi_device_direct,
};
