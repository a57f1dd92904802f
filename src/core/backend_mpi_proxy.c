/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `mpi` entry of the backend registry. The MPI backend lives in a module
 * (src/core/mpi_module.h) loaded on first use; every entry of this table
 * forwards to the module's table, and a communicator whose init succeeded
 * calls the module's table directly.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "backend.h"
#include "base/error.h"
#include "mpi_module.h"

/* The module's table, or NULL with the reason set as the thread's error. */
static const mlc_backend_t *mod(void)
{
    const mlc_mpi_module_t *m = mlc_mpi_module();
    return m ? m->backend : NULL;
}

static int mpi_available(char *why, size_t len) { return mlc_mpi_module_available(why, len); }

/*
 * `auto` takes mpi for a job started by mpirun/mpiexec/srun that spans more
 * than one host (or whose host count is unknown), or when shm cannot run.
 */
static int mpi_accepts(const mlc_cfg_t *cfg)
{
    static const char *const mpi_launchers[] = {"open-mpi", "mpich", "slurm"};
    bool by_mpi = false;
    for (size_t i = 0; i < sizeof mpi_launchers / sizeof mpi_launchers[0]; i++)
        if (cfg->rank_source && strcmp(cfg->rank_source, mpi_launchers[i]) == 0) by_mpi = true;
    if (!by_mpi) return 0;
    if (cfg->local_size <= 0 || cfg->local_size < cfg->world_size) return 1;
    char why[256];
    const mlc_backend_t *shm = mlc_backend_find("shm");
    return !shm || !shm->available(why, sizeof why);
}

/* ---- forwarding entries -------------------------------------------------------- */

/* Once set up, the communicator calls the module's table itself: no forwarding per call. */
static mlc_status_t fwd_init(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    const mlc_backend_t *m = mod();
    if (!m) return MLC_ERR_UNAVAILABLE;
    mlc_status_t st = m->init(comm, boot);
    if (st == MLC_SUCCESS) comm->be = m;
    return st;
}

static mlc_status_t fwd_split(mlc_comm_t *parent, int color, int key, const int *members, int n,
                              mlc_comm_t *child)
{
    const mlc_backend_t *m = mod();
    return m ? m->split(parent, color, key, members, n, child) : MLC_ERR_UNAVAILABLE;
}

/* A communicator exists only if the module loaded, so these need no check. */
static void fwd_destroy(mlc_comm_t *comm) { mod()->destroy(comm); }
static void fwd_abort(mlc_comm_t *comm) { mod()->abort(comm); }

static mlc_status_t fwd_start(mlc_request_t *req) { return mod()->start[req->coll](req); }

static mlc_status_t fwd_iprobe(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *st)
{
    return mod()->iprobe(comm, source, tag, flag, st);
}

static mlc_status_t fwd_progress(mlc_comm_t *comm, int *progressed)
{
    return mod()->progress(comm, progressed);
}

static void fwd_idle(mlc_comm_t *comm, double max_s) { mod()->idle(comm, max_s); }
static mlc_status_t fwd_health(mlc_comm_t *comm) { return mod()->health(comm); }

static void fwd_pending_peers(const mlc_request_t *req, char *buf, size_t len)
{
    mod()->pending_peers(req, buf, len);
}

static mlc_status_t fwd_wait_native(mlc_request_t *req) { return mod()->wait_native(req); }
static int fwd_tag_max(mlc_comm_t *comm) { return mod()->tag_max(comm); }

static bool fwd_device_capable(mlc_comm_t *comm) { return mod()->device_capable(comm); }
static bool fwd_device_direct(const mlc_request_t *req) { return mod()->device_direct(req); }

/* Asked while a communicator is set up (after `available`), and by tools. */
static const char *const *fwd_algos(mlc_coll_t coll)
{
    if (!mlc_mpi_module_available(NULL, 0)) return NULL;
    const mlc_backend_t *m = mod();
    return m->algos ? m->algos(coll) : NULL;
}

const mlc_backend_t mlc_backend_mpi = {
    MLC_BACKEND_HEADER,
    .name = "mpi",
    .priority = 30,
    .available = mpi_available,
    .accepts = mpi_accepts,
    .init = fwd_init,
    .split = fwd_split,
    .destroy = fwd_destroy,
    .abort = fwd_abort,
    .start =
        {
#define MLC_X_FWD(id, str, env) [id] = fwd_start,
            MLC_COLL_LIST(MLC_X_FWD)
#undef MLC_X_FWD
        },
    .iprobe = fwd_iprobe,
    .progress = fwd_progress,
    .idle = fwd_idle,
    .health = fwd_health,
    .pending_peers = fwd_pending_peers,
    .wait_native = fwd_wait_native,
    .tag_max = fwd_tag_max,
    .algos = fwd_algos,
    .device_capable = fwd_device_capable,
    .device_direct = fwd_device_direct,
};
