/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The nccl and rccl backends: communicator life cycle, progress and
 * failure handling. Operations are in nccl_colls.c, the unique-id
 * bootstrap in nccl_boot.c, the NCCL_* tuning variables in nccl_tuning.c.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nccl_impl.h"
#include "base/clock.h"
#include "base/wait.h"
#include "base/config.h"
#include "base/error.h"
#include "base/jobstate.h"
#include "base/log.h"

const nccl_flavor_t mlc_nccl_flavor_nccl = {MLC_NCCL_FLAVOR_NCCL, MLC_GPU_CUDA, "nccl"};
const nccl_flavor_t mlc_nccl_flavor_rccl = {MLC_NCCL_FLAVOR_RCCL, MLC_GPU_HIP, "rccl"};

static const nccl_flavor_t *flavor_of(const mlc_comm_t *comm)
{
    return comm->be == &mlc_backend_rccl ? &mlc_nccl_flavor_rccl : &mlc_nccl_flavor_nccl;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- small helpers used by every file of the backend ----------------------- */
double mlc_nccl_timeout(const mlc_comm_t *comm) { return comm ? comm->cfg.timeout_s : 0; }

mlc_status_t mlc_nccl_dev_enter(const nccl_comm_t *impl, int *prev)
{
    int cur = -1;
    if (impl->rt->get_device(&cur) != MLC_GPU_SUCCESS) {
        impl->rt->get_last_error();
        cur = -1;
    }
    *prev = -1;
    if (cur == impl->device) return MLC_SUCCESS;
    /* A thread that never chose a device reports 0: "restoring" that would create a
     * context on GPU 0 (cudaSetDevice does since CUDA 12). Only a real one is given back. */
    if (cur >= 0 && mlc_gpurt_thread_has_context(impl->rt)) *prev = cur;
    int e = impl->rt->set_device(impl->device);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        impl->rt->get_last_error();
        return mlc_error(MLC_ERR_BACKEND, "%s: %sSetDevice(%d): %s", impl->fl->name, impl->rt->prefix,
                         impl->device, mlc_gpurt_strerror(impl->rt, e, buf, sizeof buf));
    }
    return MLC_SUCCESS;
}

void mlc_nccl_dev_leave(const nccl_comm_t *impl, int prev)
{
    if (prev >= 0 && prev != impl->device) impl->rt->set_device(prev);
}

void *mlc_nccl_event_get(nccl_comm_t *impl, int *err)
{
    if (impl->nevents > 0) return impl->events[--impl->nevents];
    void *ev = NULL;
    *err = impl->rt->event_create_with_flags(&ev, MLC_GPU_EVENT_DISABLE_TIMING);
    return *err == MLC_GPU_SUCCESS ? ev : NULL;
}

/* Lock held. */
static void event_put(nccl_comm_t *impl, void *ev)
{
    if (!ev) return;
    if (impl->nevents == impl->cap_events) {
        int cap = impl->cap_events ? impl->cap_events * 2 : 16;
        void **grown = realloc(impl->events, (size_t)cap * sizeof *grown);
        if (!grown) {
            impl->rt->event_destroy(ev);
            return;
        }
        impl->events = grown;
        impl->cap_events = cap;
    }
    impl->events[impl->nevents++] = ev;
}

void mlc_nccl_pending_add(nccl_comm_t *impl, mlc_request_t *req)
{
    nccl_req_t *nr = nccl_req(req);
    nr->next = NULL;
    nr->prev = impl->pending_tail;
    if (impl->pending_tail) nccl_req(impl->pending_tail)->next = req;
    else impl->pending_head = req;
    impl->pending_tail = req;
    impl->npending++;
}

/* Lock held. */
static void pending_unlink(nccl_comm_t *impl, mlc_request_t *req)
{
    nccl_req_t *nr = nccl_req(req);
    if (nr->prev) nccl_req(nr->prev)->next = nr->next;
    else impl->pending_head = nr->next;
    if (nr->next) nccl_req(nr->next)->prev = nr->prev;
    else impl->pending_tail = nr->prev;
    nr->prev = nr->next = NULL;
    impl->npending--;
}

/* Lock held: take every pending request off the list (events back to the pool). */
static mlc_request_t *pending_detach(nccl_comm_t *impl)
{
    mlc_request_t *head = impl->pending_head;
    for (mlc_request_t *r = head; r; r = nccl_req(r)->next) {
        event_put(impl, nccl_req(r)->event);
        nccl_req(r)->event = NULL;
    }
    impl->pending_head = impl->pending_tail = NULL;
    impl->npending = 0;
    return head;
}

static void complete_all(mlc_request_t *list, mlc_status_t st, const char *msg)
{
    while (list) {
        mlc_request_t *next = nccl_req(list)->next;
        nccl_req(list)->next = nccl_req(list)->prev = NULL;
        mlc_nccl_stage_finish(nccl_req(list), false);
        mlc_request_complete(list, st, "%s", msg);
        list = next;
    }
}

/* Lock held: ncclCommAbort (it frees the communicator: nc becomes NULL). */
static void abort_locked(nccl_comm_t *impl)
{
    if (!impl->nc) return;
    mlc_ncclResult_t r = impl->api->ncclCommAbort(impl->nc);
    if (r != mlc_ncclSuccess)
        MLC_WARN("%s: ncclCommAbort: %s", impl->fl->name, impl->api->ncclGetErrorString(r));
    impl->nc = NULL;
}

/* A rank the launcher reports dead, or -1. */
static int dead_rank(unsigned *code)
{
    const mlc_jobstate_t *js = mlc_jobstate_get();
    if (!js || atomic_load(&js->ndead) == 0) return -1;
    for (uint32_t r = 0; r < js->nranks && r < MLC_JOBSTATE_MAX_RANKS; r++) {
        unsigned d = atomic_load(&js->dead[r]);
        if (d) {
            *code = d;
            return (int)r;
        }
    }
    return -1;
}

/* An NCCL call still in progress, as the shared wait loop sees it (base/wait.h). */
typedef struct ready_wait {
    const mlc_nccl_api_t *api;
    mlc_ncclComm_t nc;
    nccl_comm_t *impl;
    const mlc_comm_t *comm;
    const char *what;
    mlc_status_t st;
    int ready;
} ready_wait_t;

static int ready_step(void *p)
{
    ready_wait_t *w = p;
    const mlc_nccl_api_t *api = w->api;
    mlc_ncclResult_t e = mlc_ncclInProgress;
    mlc_ncclResult_t r;
    if (w->impl) {
        pthread_mutex_lock(&w->impl->lock);
        if (w->impl->nc != w->nc) {
            pthread_mutex_unlock(&w->impl->lock);
            w->st = mlc_error(MLC_ERR_ABORTED, "%s: communicator aborted during %s", api->name, w->what);
            return MLC_WAIT_STOP;
        }
        r = api->ncclCommGetAsyncError(w->nc, &e);
        pthread_mutex_unlock(&w->impl->lock);
    } else {
        r = api->ncclCommGetAsyncError(w->nc, &e);
    }
    if (r != mlc_ncclSuccess) e = r;
    if (e == mlc_ncclSuccess) {
        w->ready = 1;
        return MLC_WAIT_MOVED;
    }
    if (e != mlc_ncclInProgress) {
        const char *last = api->ncclGetLastError ? api->ncclGetLastError(w->nc) : NULL;
        w->st = mlc_error(e == mlc_ncclRemoteError ? MLC_ERR_PEER_LOST : MLC_ERR_BACKEND, "%s: %s failed: %s%s%s",
                          api->name, w->what, api->ncclGetErrorString(e), last && last[0] ? ": " : "",
                          last ? last : "");
        return MLC_WAIT_STOP;
    }
    return MLC_WAIT_NOTHING;
}

static int ready_done(void *p) { return ((ready_wait_t *)p)->ready; }

/* Abort and death checks, before every sleep. */
static int ready_check(void *p)
{
    ready_wait_t *w = p;
    const mlc_comm_t *comm = w->comm;
    if (comm && atomic_load(&comm->failed) != MLC_SUCCESS) {
        w->st = mlc_error((mlc_status_t)atomic_load(&comm->failed), "%s: %s interrupted: %s", w->api->name,
                          w->what, comm->fail_msg);
        return 1;
    }
    unsigned code = 0;
    int dead = dead_rank(&code);
    if (dead < 0) return 0;
    w->st = mlc_error(MLC_ERR_PEER_LOST, "%s: %s: rank %d of the job died (%s %u)", w->api->name, w->what, dead,
                      (code & MLC_JOB_DEAD_SIGNAL) ? "signal" : "exit code", code & 0xffu);
    return 1;
}

mlc_status_t mlc_nccl_wait_ready(const mlc_nccl_api_t *api, mlc_ncclComm_t nc, nccl_comm_t *impl,
                                 const mlc_comm_t *comm, const char *what, double timeout_s)
{
    /* Nothing moves while NCCL is in progress: the timeout is the time since
     * the call. Backoff from 20 us to 5 ms. */
    ready_wait_t rw = {.api = api, .nc = nc, .impl = impl, .comm = comm, .what = what, .st = MLC_SUCCESS};
    mlc_wait_t w = {.step = ready_step, .done = ready_done, .check = ready_check, .ctx = &rw,
                    .timeout_s = timeout_s, .what = what, .spin_s = -1, .yield_s = -1, .sleep_min_s = 20e-6,
                    .sleep_max_s = 5e-3};
    switch (mlc_wait_run(&w)) {
    case MLC_WAIT_DONE: return MLC_SUCCESS;
    case MLC_WAIT_STOPPED: return rw.st;
    case MLC_WAIT_TIMEOUT: break;
    }
    return mlc_error(MLC_ERR_TIMEOUT,
                     "%s: %s still in progress after %.1f s: some rank has not made the matching call (MLC_TIMEOUT)",
                     api->name, what, w.idle_s);
}

mlc_status_t mlc_nccl_fail(nccl_comm_t *impl, mlc_comm_t *comm, mlc_status_t st, const char *msg)
{
    if (st != MLC_ERR_TIMEOUT && st != MLC_ERR_PEER_LOST) st = MLC_ERR_ABORTED;
    /* Abort so that no kernel waits forever for a peer, then fail ours. */
    pthread_mutex_lock(&impl->lock);
    abort_locked(impl);
    mlc_request_t *pending = pending_detach(impl);
    pthread_mutex_unlock(&impl->lock);
    st = mlc_comm_fail(comm, st, "%s; the NCCL communicator was aborted", msg);
    complete_all(pending, st, msg);
    return mlc_error(st, "%s; the NCCL communicator was aborted", msg);
}

mlc_status_t mlc_nccl_result(nccl_comm_t *impl, mlc_comm_t *comm, mlc_ncclResult_t r, const char *what)
{
    if (r == mlc_ncclSuccess) return MLC_SUCCESS;
    const mlc_nccl_api_t *api = impl->api;
    const char *last = api->ncclGetLastError ? api->ncclGetLastError(NULL) : NULL;
    char msg[512];
    snprintf(msg, sizeof msg, "%s %s: %s%s%s", impl->fl->name, what, api->ncclGetErrorString(r),
             last && last[0] ? ": " : "", last ? last : "");
    if (r == mlc_ncclInvalidArgument || r == mlc_ncclInvalidUsage) {
        /* Arguments are checked before NCCL sees them. Should NCCL refuse one
         * anyway: before 2.28 the refusal is this call's alone; from 2.28 on
         * it is also the communicator's asynchronous error, which no later
         * call survives, so the communicator fails now, saying why. */
        mlc_ncclResult_t e = mlc_ncclSuccess;
        pthread_mutex_lock(&impl->lock);
        if (impl->nc && api->ncclCommGetAsyncError(impl->nc, &e) != mlc_ncclSuccess) e = mlc_ncclSuccess;
        pthread_mutex_unlock(&impl->lock);
        if (e == mlc_ncclSuccess || e == mlc_ncclInProgress) return mlc_error(MLC_ERR_INVALID_ARG, "%s", msg);
        char sticky[640];
        snprintf(sticky, sizeof sticky, "%s (NCCL keeps the refusal as the communicator's error: it cannot be "
                 "used again)", msg);
        return mlc_nccl_fail(impl, comm, MLC_ERR_ABORTED, sticky);
    }
    /* Anything else leaves the NCCL communicator unusable. */
    return mlc_nccl_fail(impl, comm, r == mlc_ncclRemoteError ? MLC_ERR_PEER_LOST : MLC_ERR_ABORTED, msg);
}

/* ---- availability ----------------------------------------------------------- */
static int available_common(const nccl_flavor_t *fl, char *why, size_t len)
{
    const mlc_nccl_api_t *api;
    const mlc_gpurt_t *rt;
    int n;
    if (mlc_nccl_api_get(fl->lib, &api) != MLC_SUCCESS ||
        mlc_gpurt_get(fl->gpu, &rt) != MLC_SUCCESS || mlc_gpurt_device_count(rt, &n) != MLC_SUCCESS) {
        snprintf(why, len, "%s", mlc_last_error());
        return 0;
    }
    return 1;
}
static int nccl_available(char *why, size_t len) { return available_common(&mlc_nccl_flavor_nccl, why, len); }
static int rccl_available(char *why, size_t len) { return available_common(&mlc_nccl_flavor_rccl, why, len); }

/* `auto` picks a GPU backend only for GPU memory; the check is free (no library loaded). */
static int nccl_accepts(const mlc_cfg_t *cfg) { return cfg->memory == MLC_MEMORY_CUDA; }
static int rccl_accepts(const mlc_cfg_t *cfg) { return cfg->memory == MLC_MEMORY_ROCM; }

/* ---- communicator life cycle ------------------------------------------------ */
static mlc_status_t load_libs(const nccl_flavor_t *fl, const mlc_nccl_api_t **api,
                              const mlc_gpurt_t **rt, int *ndev)
{
    mlc_status_t st = mlc_nccl_api_get(fl->lib, api);
    if (st == MLC_SUCCESS) st = mlc_gpurt_get(fl->gpu, rt);
    if (st == MLC_SUCCESS) st = mlc_gpurt_device_count(*rt, ndev);
    return st;
}

/*
 * NCCL_COMM_BLOCKING in the environment beats the config's blocking field:
 * at 1 every NCCL call may block, beyond MLC_TIMEOUT and mlc_comm_abort
 * (which would wait for the call's lock), so it is refused, saying why.
 */
static mlc_status_t check_comm_blocking(const nccl_flavor_t *fl)
{
    const char *v = mlc_env_text(MLC_ENV_NCCL_COMM_BLOCKING);
    long long b = 0;
    if (!v) return MLC_SUCCESS;
    if (!mlc_parse_int(v, LLONG_MIN, LLONG_MAX, &b))
        return mlc_error(MLC_ERR_CONFIG, "%s: NCCL_COMM_BLOCKING='%s' is not an integer", fl->name, v);
    if (b == 0) return MLC_SUCCESS;
    return mlc_error(MLC_ERR_CONFIG,
                     "%s: NCCL_COMM_BLOCKING=%s in the environment overrides the non-blocking mode mlcomm "
                     "creates NCCL communicators in: NCCL calls could then block without end, beyond "
                     "MLC_TIMEOUT and mlc_comm_abort; unset it (or set it to 0)",
                     fl->name, v);
}

static mlc_ncclConfig_t nonblocking_config(void)
{
    mlc_ncclConfig_t c = {sizeof(mlc_ncclConfig_t), MLC_NCCL_CONFIG_MAGIC, MLC_NCCL_CONFIG_VERSION, 0,
                          MLC_NCCL_CONFIG_UNDEF_INT, MLC_NCCL_CONFIG_UNDEF_INT,
                          MLC_NCCL_CONFIG_UNDEF_INT, NULL};
    return c;
}

/* Wrap an initialized NCCL communicator (device current) into our state. */
static mlc_status_t impl_create(const nccl_flavor_t *fl, const mlc_nccl_api_t *api,
                                const mlc_gpurt_t *rt, int device, mlc_ncclComm_t nc,
                                nccl_comm_t **out)
{
    nccl_comm_t *impl = calloc(1, sizeof *impl);
    if (!impl) return mlc_error(MLC_ERR_NO_MEMORY, "%s: out of memory", fl->name);
    /* A blocking stream (flags 0): it is ordered with the legacy default
     * stream, so data written there by the caller is ready for us. */
    int e = rt->stream_create_with_flags(&impl->own_stream, 0);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        rt->get_last_error();
        free(impl);
        return mlc_error(MLC_ERR_BACKEND, "%s: %sStreamCreateWithFlags: %s", fl->name, rt->prefix,
                         mlc_gpurt_strerror(rt, e, buf, sizeof buf));
    }
    pthread_mutex_init(&impl->lock, NULL);
    impl->fl = fl;
    impl->api = api;
    impl->rt = rt;
    impl->nc = nc;
    impl->device = device;
    impl->stream = impl->own_stream;
    *out = impl;
    return MLC_SUCCESS;
}

/* NCCL and we must agree on who is who. */
static mlc_status_t check_identity(const mlc_nccl_api_t *api, mlc_ncclComm_t nc, const mlc_comm_t *comm)
{
    int n = -1, r = -1;
    if (api->ncclCommCount(nc, &n) != mlc_ncclSuccess || api->ncclCommUserRank(nc, &r) != mlc_ncclSuccess ||
        n != comm->size || r != comm->rank)
        return mlc_error(MLC_ERR_INTERNAL,
                         "%s: NCCL communicator is rank %d of %d, mlcomm expected rank %d of %d",
                         api->name, r, n, comm->rank, comm->size);
    return MLC_SUCCESS;
}

static mlc_status_t nccl_init(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    const nccl_flavor_t *fl = flavor_of(comm);
    const mlc_nccl_api_t *api;
    const mlc_gpurt_t *rt;
    int ndev = 0;
    mlc_status_t st = load_libs(fl, &api, &rt, &ndev);
    if (st != MLC_SUCCESS) return st;

    st = check_comm_blocking(fl);
    if (st != MLC_SUCCESS) return st;
    mlc_nccl_tuning_t tuning;
    st = mlc_nccl_tuning_resolve(&comm->cfg, api->version, &tuning);
    if (st == MLC_SUCCESS) st = mlc_nccl_tuning_apply(&tuning);
    if (st != MLC_SUCCESS) return st;

    int device;
    st = mlc_gpu_choose_device(rt, &comm->cfg, boot->local_rank, boot->local_size, ndev, &device);
    if (st != MLC_SUCCESS) return st;
    int e = rt->set_device(device);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        rt->get_last_error();
        return mlc_error(MLC_ERR_UNAVAILABLE, "%s: rank %d cannot use device %d of %d: %s", fl->name,
                         comm->rank, device, ndev, mlc_gpurt_strerror(rt, e, buf, sizeof buf));
    }

    mlc_ncclUniqueId id;
    memset(&id, 0, sizeof id);
    st = mlc_nccl_share_id(api, comm, boot, &id);
    if (st != MLC_SUCCESS) return st;

    mlc_ncclComm_t nc = NULL;
    mlc_ncclConfig_t config = nonblocking_config();
    mlc_nccl_tuning_config(tuning.nchannels, &config);
    mlc_ncclResult_t r = api->ncclCommInitRankConfig(&nc, comm->size, id, comm->rank, &config);
    if (r == mlc_ncclSuccess || r == mlc_ncclInProgress) {
        st = nc ? mlc_nccl_wait_ready(api, nc, NULL, comm, "ncclCommInitRank", mlc_nccl_timeout(comm))
                : mlc_error(MLC_ERR_BACKEND, "%s: ncclCommInitRankConfig returned no communicator", fl->name);
    } else {
        const char *last = api->ncclGetLastError ? api->ncclGetLastError(NULL) : NULL;
        st = mlc_error(MLC_ERR_BACKEND, "%s: ncclCommInitRankConfig (rank %d of %d, device %d): %s%s%s",
                       fl->name, comm->rank, comm->size, device, api->ncclGetErrorString(r),
                       last && last[0] ? ": " : "", last ? last : "");
    }
    if (st == MLC_SUCCESS) st = check_identity(api, nc, comm);
    nccl_comm_t *impl = NULL;
    if (st == MLC_SUCCESS) st = impl_create(fl, api, rt, device, nc, &impl);
    if (st != MLC_SUCCESS) {
        if (nc) api->ncclCommAbort(nc);
        return st;
    }
    snprintf(impl->algo_applied, sizeof impl->algo_applied, "%s", comm->cfg.algo[MLC_COLL_ALLREDUCE]);
    impl->nchannels = tuning.nchannels;
    comm->impl = impl;
    comm->gpu_kind = (int)rt->kind;
    comm->gpu_device = device;
    char ver[32];
    mlc_nccl_version_text(api->version, ver, sizeof ver);
    MLC_INFO("%s %s: rank %d of %d on %s device %d", fl->name, ver, comm->rank, comm->size, rt->name,
             device);
    return MLC_SUCCESS;
}

static mlc_status_t nccl_split(mlc_comm_t *parent, int color, int key, const int *members,
                               int nmembers, mlc_comm_t *child)
{
    nccl_comm_t *pi = parent->impl;
    const mlc_nccl_api_t *api = pi->api;
    if (!api->ncclCommSplit)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s: mlc_comm_split needs ncclCommSplit, which %s %s (%s) does not export "
                         "(NCCL 2.18 or later has it)",
                         pi->fl->name, api->name, "library", api->lib.path);
    mlc_status_t bst = check_comm_blocking(pi->fl);
    if (bst != MLC_SUCCESS) return bst;
    int ncolor = color == MLC_UNDEFINED ? MLC_NCCL_SPLIT_NOCOLOR : color;
    if (ncolor < 0 && ncolor != MLC_NCCL_SPLIT_NOCOLOR)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: split colour %d must be >= 0 or MLC_UNDEFINED",
                         pi->fl->name, color);
    int prev;
    mlc_status_t st = mlc_nccl_dev_enter(pi, &prev);
    if (st != MLC_SUCCESS) return st;
    mlc_ncclComm_t newnc = NULL;
    mlc_ncclConfig_t config = nonblocking_config();
    mlc_nccl_tuning_config(pi->nchannels, &config);
    pthread_mutex_lock(&pi->lock);
    mlc_ncclComm_t pnc = pi->nc;
    mlc_ncclResult_t r = pnc ? api->ncclCommSplit(pnc, ncolor, key, &newnc, &config) : mlc_ncclSuccess;
    pthread_mutex_unlock(&pi->lock);
    if (!pnc) st = mlc_error(MLC_ERR_ABORTED, "%s: split of an aborted communicator", pi->fl->name);
    else if (r == mlc_ncclSuccess || r == mlc_ncclInProgress)
        st = newnc ? mlc_nccl_wait_ready(api, newnc, NULL, parent, "ncclCommSplit", mlc_nccl_timeout(parent))
                   : mlc_nccl_wait_ready(api, pnc, pi, parent, "ncclCommSplit", mlc_nccl_timeout(parent));
    else st = mlc_nccl_result(pi, parent, r, "ncclCommSplit");
    if (st == MLC_SUCCESS && child) {
        if (!newnc) st = mlc_error(MLC_ERR_INTERNAL, "%s: ncclCommSplit gave no communicator for colour %d",
                                   pi->fl->name, color);
        else st = check_identity(api, newnc, child);
        nccl_comm_t *ci = NULL;
        if (st == MLC_SUCCESS) st = impl_create(pi->fl, api, pi->rt, pi->device, newnc, &ci);
        if (st == MLC_SUCCESS) {
            memcpy(ci->algo_applied, pi->algo_applied, sizeof ci->algo_applied);
            ci->nchannels = pi->nchannels;
            /* Core gives the child the parent's stream: keep using it. */
            if (pi->stream != pi->own_stream) ci->stream = pi->stream;
            child->impl = ci;
            child->gpu_kind = parent->gpu_kind;
            child->gpu_device = parent->gpu_device;
        }
    }
    if (st != MLC_SUCCESS && newnc) api->ncclCommAbort(newnc);
    mlc_nccl_dev_leave(pi, prev);
    (void)members;
    (void)nmembers;
    return st;
}

static void nccl_destroy(mlc_comm_t *comm)
{
    nccl_comm_t *impl = comm->impl;
    if (!impl) return;
    const mlc_nccl_api_t *api = impl->api;
    const mlc_gpurt_t *rt = impl->rt;
    int prev;
    if (mlc_nccl_dev_enter(impl, &prev) != MLC_SUCCESS) prev = -1;
    pthread_mutex_lock(&impl->lock);
    mlc_request_t *pending = pending_detach(impl);
    mlc_request_t *deferred = mlc_nccl_deferred_take(impl);
    mlc_ncclComm_t nc = impl->nc;
    impl->nc = NULL;
    pthread_mutex_unlock(&impl->lock);
    if (nc) {
        /* Work still queued, or a failed communicator: only abort is sure to return. */
        bool clean = !pending && atomic_load(&comm->failed) == MLC_SUCCESS;
        mlc_status_t st = MLC_ERR_ABORTED;
        if (clean && api->ncclCommFinalize) {
            mlc_ncclResult_t r = api->ncclCommFinalize(nc);
            if (r == mlc_ncclSuccess || r == mlc_ncclInProgress)
                st = mlc_nccl_wait_ready(api, nc, NULL, NULL, "ncclCommFinalize", mlc_nccl_timeout(comm));
            if (st != MLC_SUCCESS) MLC_WARN("%s: %s; aborting instead", impl->fl->name, mlc_last_error());
        } else if (clean) {
            st = MLC_SUCCESS;
        }
        if (st == MLC_SUCCESS) api->ncclCommDestroy(nc);
        else api->ncclCommAbort(nc);
    }
    complete_all(pending, MLC_ERR_ABORTED, "communicator freed while the operation was pending");
    complete_all(deferred, MLC_ERR_ABORTED, "communicator freed before its group ended");
    for (int i = 0; i < impl->nevents; i++) rt->event_destroy(impl->events[i]);
    free(impl->events);
    if (impl->scratch_event) rt->event_destroy(impl->scratch_event);
    if (impl->scratch) rt->free(impl->scratch);
    for (int i = 0; i < impl->nretired; i++) rt->free(impl->retired[i]);
    free(impl->retired);
    if (impl->barrier_buf) rt->free(impl->barrier_buf);
    rt->stream_destroy(impl->own_stream);
    mlc_nccl_dev_leave(impl, prev);
    pthread_mutex_destroy(&impl->lock);
    free(impl);
    comm->impl = NULL;
}

static void nccl_abort(mlc_comm_t *comm)
{
    nccl_comm_t *impl = comm->impl;
    if (!impl) return;
    mlc_comm_fail(comm, MLC_ERR_ABORTED, "%s: communicator aborted (mlc_comm_abort)", impl->fl->name);
    pthread_mutex_lock(&impl->lock);
    abort_locked(impl);
    mlc_request_t *pending = pending_detach(impl);
    mlc_request_t *deferred = mlc_nccl_deferred_take(impl);
    pthread_mutex_unlock(&impl->lock);
    complete_all(pending, MLC_ERR_ABORTED, "communicator aborted (mlc_comm_abort)");
    complete_all(deferred, MLC_ERR_ABORTED, "communicator aborted (mlc_comm_abort) before its group ended");
}

/* ---- progress ---------------------------------------------------------------- */
static void fill_msg_status(mlc_request_t *req)
{
    mlc_args_t *a = &req->args;
    if (!a->msg_status) return;
    if (req->coll == MLC_COLL_RECV)
        *a->msg_status = (mlc_msg_status_t){a->root, 0, a->count * a->esize};
    else if (req->coll == MLC_COLL_SENDRECV)
        *a->msg_status = (mlc_msg_status_t){a->peer2, 0, a->count2 * a->esize};
}

static mlc_status_t nccl_progress(mlc_comm_t *comm, int *progressed)
{
    nccl_comm_t *impl = comm->impl;
    mlc_request_t *done = NULL, *failed = NULL;
    int failed_err = 0;
    *progressed = 0;
    pthread_mutex_lock(&impl->lock);
    mlc_request_t *r = impl->pending_head;
    while (r) {
        mlc_request_t *next = nccl_req(r)->next;
        int q = impl->rt->event_query(nccl_req(r)->event);
        if (q != MLC_GPU_ERROR_NOT_READY) {
            pending_unlink(impl, r);
            if (q == MLC_GPU_SUCCESS) {
                event_put(impl, nccl_req(r)->event);
                nccl_req(r)->next = done;
                done = r;
            } else {
                impl->rt->event_destroy(nccl_req(r)->event);
                impl->rt->get_last_error();
                failed_err = q;
                nccl_req(r)->next = failed;
                failed = r;
            }
            nccl_req(r)->event = NULL;
        }
        r = next;
    }
    pthread_mutex_unlock(&impl->lock);
    while (done) {
        mlc_request_t *next = nccl_req(done)->next;
        mlc_nccl_stage_finish(nccl_req(done), true);
        fill_msg_status(done);
        mlc_request_complete(done, MLC_SUCCESS, "%s", "");
        *progressed = 1;
        done = next;
    }
    if (failed) {
        char buf[256];
        mlc_gpurt_strerror(impl->rt, failed_err, buf, sizeof buf);
        while (failed) {
            mlc_request_t *next = nccl_req(failed)->next;
            mlc_nccl_stage_finish(nccl_req(failed), false);
            mlc_request_complete(failed, MLC_ERR_BACKEND, "%s %s #%llu: %sEventQuery: %s",
                                 impl->fl->name, mlc_coll_name(failed->coll),
                                 (unsigned long long)failed->seq, impl->rt->prefix, buf);
            *progressed = 1;
            failed = next;
        }
    }
    return MLC_SUCCESS;
}

/* Poll the oldest pending event until it completes or max_s passes. */
static void nccl_idle(mlc_comm_t *comm, double max_s)
{
    nccl_comm_t *impl = comm->impl;
    double end = mlc_now() + max_s;
    double delay = 10e-6;
    for (int spins = 0;; spins++) {
        pthread_mutex_lock(&impl->lock);
        mlc_request_t *head = impl->pending_head;
        int q = head ? impl->rt->event_query(nccl_req(head)->event) : MLC_GPU_ERROR_NOT_READY;
        pthread_mutex_unlock(&impl->lock);
        if (q != MLC_GPU_ERROR_NOT_READY) return;
        double now = mlc_now();
        if (now >= end) return;
        if (!head) {
            /* Nothing of ours pending (completed elsewhere, e.g. by an abort). */
            sleep_s(fmin(1e-3, end - now));
            return;
        }
        /* A short busy poll catches small operations; then back off to 1 ms. */
        if (spins < 32) continue;
        sleep_s(fmin(delay, end - now));
        if (delay < 1e-3) delay *= 2;
    }
}

static mlc_status_t nccl_health(mlc_comm_t *comm)
{
    nccl_comm_t *impl = comm->impl;
    mlc_ncclResult_t e = mlc_ncclSuccess;
    pthread_mutex_lock(&impl->lock);
    if (!impl->nc) {
        pthread_mutex_unlock(&impl->lock);
        mlc_status_t st = (mlc_status_t)atomic_load(&comm->failed);
        return st != MLC_SUCCESS ? st : mlc_comm_fail(comm, MLC_ERR_ABORTED, "%s: communicator aborted", impl->fl->name);
    }
    mlc_ncclResult_t r = impl->api->ncclCommGetAsyncError(impl->nc, &e);
    if (r != mlc_ncclSuccess) e = r;
    if (e == mlc_ncclSuccess || e == mlc_ncclInProgress) {
        pthread_mutex_unlock(&impl->lock);
        return MLC_SUCCESS;
    }
    const char *last = impl->api->ncclGetLastError ? impl->api->ncclGetLastError(impl->nc) : NULL;
    char msg[512];
    snprintf(msg, sizeof msg, "%s: asynchronous error: %s%s%s", impl->fl->name,
             impl->api->ncclGetErrorString(e), last && last[0] ? ": " : "", last ? last : "");
    pthread_mutex_unlock(&impl->lock);
    mlc_status_t st = mlc_nccl_fail(impl, comm, e == mlc_ncclRemoteError ? MLC_ERR_PEER_LOST : MLC_ERR_ABORTED, msg);
    return st;
}

static void nccl_pending_peers(const mlc_request_t *req, char *buf, size_t len)
{
    const nccl_req_t *nr = (const nccl_req_t *)(const void *)req->priv;
    if (nr->peer >= 0) snprintf(buf, len, "%d", nr->peer);
    else snprintf(buf, len, "unknown (NCCL does not report which ranks have not joined)");
}

static mlc_status_t nccl_set_stream(mlc_comm_t *comm, void *stream)
{
    nccl_comm_t *impl = comm->impl;
    pthread_mutex_lock(&impl->lock);
    /* As with NCCL, NULL is the legacy default stream. */
    impl->stream = stream;
    pthread_mutex_unlock(&impl->lock);
    return MLC_SUCCESS;
}

static mlc_status_t nccl_iprobe(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *st)
{
    return mlc_error(MLC_ERR_UNSUPPORTED,
                     "%s: probe is not possible: NCCL matches sends and receives by call order, "
                     "without tags or message envelopes",
                     comm->be->name);
}

/* allreduce may be forced to NCCL's ring or tree (exported as NCCL_ALGO at init). */
static const char *const *nccl_algos(mlc_coll_t coll)
{
    static const char *const allreduce[] = {"native", "ring", "tree", NULL};
    return coll == MLC_COLL_ALLREDUCE ? allreduce : NULL;
}

#define MLC_X_START(id, str, env) [id] = mlc_nccl_start,
#define NCCL_BACKEND(ident, label, avail, acc)                                                  \
    const mlc_backend_t mlc_backend_##ident = {                                                 \
        MLC_BACKEND_HEADER,                                                                     \
        .name = label,                                                                          \
        .priority = 90,                                                                         \
        .available = avail,                                                                     \
        .accepts = acc,                                                                         \
        .device_native = true,                                                                  \
        .init = nccl_init,                                                                      \
        .split = nccl_split,                                                                    \
        .destroy = nccl_destroy,                                                                \
        .abort = nccl_abort,                                                                    \
        .start = {MLC_COLL_LIST(MLC_X_START)},                                                  \
        .group_end = mlc_nccl_group_end,                                                        \
        .iprobe = nccl_iprobe,                                                                  \
        .progress = nccl_progress,                                                              \
        .idle = nccl_idle,                                                                      \
        .health = nccl_health,                                                                  \
        .pending_peers = nccl_pending_peers,                                                    \
        .algos = nccl_algos,                                                                    \
        .set_stream = nccl_set_stream,                                                          \
    };
NCCL_BACKEND(nccl, "nccl", nccl_available, nccl_accepts)
NCCL_BACKEND(rccl, "rccl", rccl_available, rccl_accepts)
#undef NCCL_BACKEND
#undef MLC_X_START
