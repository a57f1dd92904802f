/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `mpi` entry of the backend registry. libmlcomm never links libmpi: MPI's
 * ABI differs between implementations, so the MPI backend is a module
 * (MLC_MPI_MODULE_NAME, built against the MPI CMake found) loaded here on
 * first use. Its table is exported as mlc_mpi_backend_table; every slot of
 * this table forwards to it, and a communicator whose init succeeded calls
 * the module's table directly. The module is never unloaded (MPI cannot be).
 *
 * Where the module is looked for: next to the object holding this code
 * (libmlcomm.so, or the program when it links libmlcomm statically), then
 * in ../lib from there (a program in bin/), then the loader's default path.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "backends/mpi/mpi_core_api.h"
#include "error.h"
#include "log.h"

#ifndef MLC_MPI_MODULE_NAME
#define MLC_MPI_MODULE_NAME "libmlcomm-mpi.so"
#endif

static pthread_once_t mpi_load_once = PTHREAD_ONCE_INIT;
static const mlc_backend_t *mpi_mod; /* the module's table; NULL when it could not be loaded */
static char mpi_load_why[768];

/* This core's functions, handed to the module (see mpi_core_api.h). */
static const mlc_mpi_core_t mpi_core_table = MLC_MPI_CORE_INIT;

/* Append "path: reason" to the list of places tried. */
static void note_try(char *tried, size_t len, const char *what, const char *err)
{
    size_t used = strlen(tried);
    if (used + 1 >= len) return;
    snprintf(tried + used, len - used, "%s%.200s (%.200s)", used ? "; " : "", what, err ? err : "not loadable");
}

/* dlopen with RTLD_GLOBAL: Open MPI's own plugins resolve libmpi symbols globally. */
static void *open_at(const char *dir, const char *sub, char *tried, size_t len)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s%s/%s", dir, sub, MLC_MPI_MODULE_NAME);
    if (n < 0 || (size_t)n >= sizeof path) return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        const char *err = dlerror();
        /* A missing file is not worth reporting in full; a broken one is. */
        FILE *f = fopen(path, "r");
        if (f) {
            fclose(f);
            note_try(tried, len, path, err);
        }
    }
    return h;
}

static void *open_module(char *tried, size_t len)
{
    Dl_info info;
    if (dladdr((void *)&mpi_core_table, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        *strrchr(dir, '/') = '\0';
        void *h = open_at(dir, "", tried, len);
        if (!h) h = open_at(dir, "/../lib", tried, len);
        if (h) return h;
    }
    void *h = dlopen(MLC_MPI_MODULE_NAME, RTLD_NOW | RTLD_GLOBAL);
    if (!h) note_try(tried, len, MLC_MPI_MODULE_NAME " on the library path", dlerror());
    return h;
}

static void mpi_load(void)
{
    char tried[512] = "";
    void *h = open_module(tried, sizeof tried);
    if (!h) {
        snprintf(mpi_load_why, sizeof mpi_load_why,
                 "the MPI module %s could not be loaded: %s (mlcomm is built with MPI only when CMake "
                 "finds it)",
                 MLC_MPI_MODULE_NAME, tried);
        return;
    }
    mlc_mpi_bind_fn_t bind;
    *(void **)&bind = dlsym(h, MLC_MPI_BIND_SYMBOL);
    const mlc_backend_t *table = dlsym(h, MLC_MPI_TABLE_SYMBOL);
    if (!bind || !table) {
        snprintf(mpi_load_why, sizeof mpi_load_why, "%s lacks the symbol %s: not an mlcomm MPI module",
                 MLC_MPI_MODULE_NAME, bind ? MLC_MPI_TABLE_SYMBOL : MLC_MPI_BIND_SYMBOL);
        return;
    }
    char why[256] = "";
    if (bind(&mpi_core_table, why, sizeof why) != 0) {
        snprintf(mpi_load_why, sizeof mpi_load_why, "%s refused this libmlcomm: %s", MLC_MPI_MODULE_NAME,
                 why);
        return;
    }
    mpi_mod = table;
}

/* The module's table, or NULL with the reason set as the thread's error. */
static const mlc_backend_t *mod(void)
{
    pthread_once(&mpi_load_once, mpi_load);
    if (!mpi_mod) mlc_error(MLC_ERR_UNAVAILABLE, "backend 'mpi' is not available: %s", mpi_load_why);
    return mpi_mod;
}

static int mpi_available(char *why, size_t len)
{
    pthread_once(&mpi_load_once, mpi_load);
    if (!mpi_mod && why && len) snprintf(why, len, "%s", mpi_load_why);
    return mpi_mod != NULL;
}

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
    return !mlc_backend_shm.available(why, sizeof why);
}

/* ---- forwarding slots -------------------------------------------------------- */

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
static void fwd_destroy(mlc_comm_t *comm) { mpi_mod->destroy(comm); }
static void fwd_abort(mlc_comm_t *comm) { mpi_mod->abort(comm); }

static mlc_status_t fwd_start(mlc_request_t *req)
{
    mlc_status_t (*start)(mlc_request_t *) = mpi_mod->start[req->coll];
    if (!start)
        return mlc_error(MLC_ERR_UNSUPPORTED, "mlc_%s is not supported by backend 'mpi'",
                         mlc_coll_name(req->coll));
    return start(req);
}

static mlc_status_t fwd_iprobe(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *st)
{
    return mpi_mod->iprobe(comm, source, tag, flag, st);
}

static mlc_status_t fwd_progress(mlc_comm_t *comm, int *progressed)
{
    return mpi_mod->progress(comm, progressed);
}

static void fwd_idle(mlc_comm_t *comm, double max_s) { mpi_mod->idle(comm, max_s); }
static mlc_status_t fwd_health(mlc_comm_t *comm) { return mpi_mod->health(comm); }

static void fwd_pending_peers(const mlc_request_t *req, char *buf, size_t len)
{
    mpi_mod->pending_peers(req, buf, len);
}

static mlc_status_t fwd_wait_native(mlc_request_t *req) { return mpi_mod->wait_native(req); }
static int fwd_tag_max(mlc_comm_t *comm) { return mpi_mod->tag_max(comm); }

static bool fwd_device_capable(mlc_comm_t *comm) { return mpi_mod->device_capable(comm); }
static bool fwd_device_direct(const mlc_request_t *req) { return mpi_mod->device_direct(req); }

/* Asked while a communicator is set up (after `available`), and by tools. */
static const char *const *fwd_algos(mlc_coll_t coll)
{
    pthread_once(&mpi_load_once, mpi_load);
    return mpi_mod && mpi_mod->algos ? mpi_mod->algos(coll) : NULL;
}

const mlc_backend_t mlc_backend_mpi = {
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
