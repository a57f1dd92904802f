/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The module's backend table and its one exported symbol, the entry point
 * through which core binds it (src/core/mpi_module.h).
 */
#include <stdio.h>
#include "mpi_impl.h"

/* The core that loaded this module; set by the entry point before any other call. */
const mlc_mpi_core_t *mlc_core;

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
    /* A peer may have told this rank that the communicator failed there (its
     * wait timed out, it aborted) in a control message not read yet. Read it
     * first: that peer's collective is still in flight in MPI, and one
     * started now would be matched with it and write this call's buffers
     * after the call had returned the error. */
    if (mlc_mpi_check_ctrl(req->comm) != MLC_SUCCESS) return mlc_core->request_comm_failed(req);
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
                  mlc_core->coll_name(req->coll), (unsigned long long)req->seq, req->algo, mlc_core->last_error());
        mlc_core->error_clear();
        req->algo = NULL;
    }
    return native[req->coll](req);
}

/* ---- the table's entries under the process's MPI lock (mlc_mpi_serial_enter) ---- */

#define SERIAL(call)                                \
    do {                                            \
        bool locked_ = mlc_mpi_serial_enter();      \
        mlc_status_t st_ = (call);                  \
        mlc_mpi_serial_leave(locked_);              \
        return st_;                                 \
    } while (0)

static mlc_status_t serial_init(mlc_comm_t *comm, const mlc_boot_t *boot) { SERIAL(mlc_mpi_init(comm, boot)); }
static mlc_status_t serial_split(mlc_comm_t *parent, int color, int key, const int *members, int n,
                                 mlc_comm_t *child)
{
    SERIAL(mlc_mpi_split(parent, color, key, members, n, child));
}
static void serial_destroy(mlc_comm_t *comm)
{
    bool locked = mlc_mpi_serial_enter();
    mlc_mpi_destroy(comm);
    mlc_mpi_serial_leave(locked);
}
static mlc_status_t serial_start(mlc_request_t *req) { SERIAL(mpi_start(req)); }
static mlc_status_t serial_iprobe(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *st)
{
    SERIAL(mlc_mpi_iprobe(comm, source, tag, flag, st));
}
static mlc_status_t serial_progress(mlc_comm_t *comm, int *progressed) { SERIAL(mlc_mpi_progress(comm, progressed)); }
static mlc_status_t serial_health(mlc_comm_t *comm) { SERIAL(mlc_mpi_health(comm)); }
static void serial_post_failure(mlc_comm_t *comm, mlc_status_t st, const char *note)
{
    bool locked = mlc_mpi_serial_enter();
    mlc_mpi_post_failure(comm, st, note);
    mlc_mpi_serial_leave(locked);
}
static mlc_status_t serial_from_mpi(int64_t comm_f, const mlc_config_t *cfg, mlc_comm_t **out)
{
    SERIAL(mlc_mpi_from_mpi(comm_f, cfg, out));
}
static mlc_status_t serial_get_mpi(const mlc_comm_t *comm, int64_t *comm_f) { SERIAL(mlc_mpi_get_mpi(comm, comm_f)); }

static int mpi_module_available(char *why, size_t len)
{
    (void)why;
    (void)len;
    return 1;
}

const mlc_backend_t mlc_mpi_backend_table = {
    MLC_BACKEND_HEADER,
    .name = "mpi",
    .priority = 30,
    .available = mpi_module_available,
    .init = serial_init,
    .split = serial_split,
    .destroy = serial_destroy,
    .abort = mlc_mpi_abort,
    .start =
        {
#define MLC_X_START(id, str, env) [id] = serial_start,
            MLC_COLL_LIST(MLC_X_START)
#undef MLC_X_START
        },
    .iprobe = serial_iprobe,
    .progress = serial_progress,
    .idle = mlc_mpi_idle,
    .health = serial_health,
    .pending_peers = mlc_mpi_pending_peers,
    .post_failure = serial_post_failure,
    .wait_native = mlc_mpi_wait_native,
    .tag_max = mlc_mpi_tag_max,
    .algos = mlc_mpi_algos,
    .choose_algo = mlc_mpi_choose_algo,
    .chooses = mlc_mpi_chooses,
    .device_capable = mlc_mpi_device_capable,
    .device_direct = mlc_mpi_device_direct,
};

/* The exchange executors compiled into this module (src/exchange/mpi). */
extern const struct mlc_xexec_mpi_table mlc_mpi_xexec_table;

static const mlc_mpi_module_t module = {
    .abi = MLC_MPI_ABI,
    .size = sizeof(mlc_mpi_module_t),
    .backend = &mlc_mpi_backend_table,
    .xexec = &mlc_mpi_xexec_table,
    .from_mpi = serial_from_mpi,
    .get_mpi = serial_get_mpi,
};

MLC_MPI_EXPORT const mlc_mpi_module_t *mlc_mpi_module_entry(const mlc_mpi_core_t *core, char *why, size_t why_len)
{
    if (core->abi != MLC_MPI_ABI || core->size != sizeof *core || core->comm_bytes != sizeof(mlc_comm_t) ||
        core->request_bytes != sizeof(mlc_request_t) || core->backend_bytes != sizeof(mlc_backend_t) ||
        core->cfg_bytes != sizeof(mlc_cfg_t)) {
        snprintf(why, why_len, "it was built against another libmlcomm (interface %u/%u bytes, module %u/%zu)",
                 core->abi, core->size, MLC_MPI_ABI, sizeof *core);
        return NULL;
    }
    mlc_core = core;
    return &module;
}
