/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The staged backend's table: a copy of the wrapped backend's, per
 * communicator, with the entries that device buffers change replaced (see
 * staged.h). The wrapper lives until core releases the communicator (a
 * per-communicator value, src/core/comm.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include "base/error.h"
#include "staged.h"

static void staged_destroy(mlc_comm_t *comm);

mlc_staged_t *mlc_staged_of(const mlc_comm_t *comm)
{
    mlc_staged_t *w = (mlc_staged_t *)comm->be;
    return w && w->table.destroy == staged_destroy && w->magic == MLC_STAGED_MAGIC ? w : NULL;
}

static mlc_staged_t *staged(const mlc_comm_t *comm) { return (mlc_staged_t *)comm->be; }

/* Every entry point that makes GPU calls does so on the communicator's device. */
static mlc_status_t staged_submit(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                                  mlc_request_t **out)
{
    int prev = mlc_devmem_enter(comm);
    mlc_status_t st = mlc_stage_submit(comm, coll, args, bytes, out);
    mlc_devmem_leave(comm, prev);
    return st;
}

/* The wrapped backend's progress, then the staged operations'. */
static mlc_status_t staged_progress(mlc_comm_t *comm, int *progressed)
{
    mlc_staged_t *w = staged(comm);
    mlc_status_t st = w->inner->progress(comm, progressed);
    w->dev.gpu_wait = 0;
    if (st == MLC_SUCCESS && w->dev.active) {
        int prev = mlc_devmem_enter(comm);
        st = mlc_stage_progress(comm, progressed, &w->dev.gpu_wait);
        mlc_devmem_leave(comm, prev);
    }
    return st;
}

static void staged_idle(mlc_comm_t *comm, double max_s)
{
    mlc_staged_t *w = staged(comm);
    if (w->dev.gpu_wait) {
        /* A GPU copy ends without waking anyone: poll it every 20 us. */
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    } else if (w->inner->idle) {
        w->inner->idle(comm, max_s);
    } else {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* Staged operations still in flight hold the wrapped backend's requests: they go first. */
static void staged_destroy(mlc_comm_t *comm)
{
    mlc_staged_t *w = mlc_staged_of(comm);
    if (!w) {
        /* A split's child that failed before it was wrapped: its own backend's. */
        comm->be->destroy(comm);
        return;
    }
    int prev = mlc_devmem_enter(comm);
    mlc_stage_abandon_all(comm);
    mlc_devmem_release(&w->dev);
    mlc_devmem_leave(comm, prev);
    w->inner->destroy(comm);
}

static mlc_status_t staged_split(mlc_comm_t *parent, int color, int key, const int *members, int n,
                                 mlc_comm_t *child)
{
    mlc_staged_t *w = staged(parent);
    if (child) child->be = w->inner;
    mlc_status_t st = w->inner->split(parent, color, key, members, n, child);
    if (st != MLC_SUCCESS || !child) return st;
    /* The child inherits the parent's decisions (no collective). */
    st = mlc_staged_wrap(child, w->dev.rt, w->dev.direct, w->dev.ipc && child->size > 1, w->dev.device);
    if (st == MLC_SUCCESS) {
        mlc_devmem_t *d = mlc_devmem_of(child);
        d->ipc_probed = w->dev.ipc_probed;
        d->device_seen = w->dev.device_seen;
        d->stream = w->dev.stream;
        d->stream_set = w->dev.stream_set;
    }
    return st;
}

/* Staging copies run on the user's stream (NULL: the legacy default stream, as on nccl);
 * a backend with streams of its own gets it too. */
static mlc_status_t staged_set_stream(mlc_comm_t *comm, void *stream)
{
    mlc_staged_t *w = staged(comm);
    if (w->inner->set_stream) {
        mlc_status_t st = w->inner->set_stream(comm, stream);
        if (st != MLC_SUCCESS) return st;
    }
    w->dev.stream = stream;
    w->dev.stream_set = true;
    return MLC_SUCCESS;
}

static void staged_release(mlc_request_t *req)
{
    if (!req->decor) return;
    int prev = mlc_devmem_enter(req->comm);
    mlc_stage_release(req);
    mlc_devmem_leave(req->comm, prev);
}

/* A staged operation, or any call while one is in flight, needs our progress. */
static bool staged_keeps_polling(const mlc_request_t *req)
{
    return req->decor != NULL || staged(req->comm)->dev.active != NULL;
}

/* A staged operation's request is ours, not the wrapped backend's: ask about
 * the sub-operation it waits for. */
static void staged_pending_peers(const mlc_request_t *req, char *buf, size_t len)
{
    mlc_staged_t *w = staged(req->comm);
    if (!req->decor) {
        if (w->inner->pending_peers) w->inner->pending_peers(req, buf, len);
        return;
    }
    const mlc_request_t *sub = mlc_stage_current_sub(req);
    if (sub && w->inner->pending_peers) w->inner->pending_peers(sub, buf, len);
    else if (len) buf[0] = '\0';
}

/* The wrapper goes with the communicator. */
static void free_wrapper(void *value)
{
    mlc_staged_t *w = value;
    mlc_devmem_release(&w->dev); /* a no-op after destroy */
    free(w);
}

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int wrapper_key = -1;
static void make_key(void) { wrapper_key = mlc_comm_key_create(free_wrapper); }

mlc_status_t mlc_staged_wrap(mlc_comm_t *comm, const mlc_gpurt_t *rt, bool direct, bool ipc, int device)
{
    pthread_once(&key_once, make_key);
    if (wrapper_key < 0)
        return mlc_error(MLC_ERR_NO_MEMORY, "rank %d: no per-communicator key left for the staged backend", comm->rank);
    mlc_staged_t *w = calloc(1, sizeof *w);
    if (!w) return mlc_error(MLC_ERR_NO_MEMORY, "rank %d: out of memory for the device-memory state", comm->rank);
    w->inner = comm->be;
    w->magic = MLC_STAGED_MAGIC;
    w->table = *comm->be;
    w->table.submit = staged_submit;
    w->table.progress = staged_progress;
    w->table.idle = staged_idle;
    w->table.destroy = staged_destroy;
    w->table.split = staged_split;
    w->table.set_stream = staged_set_stream;
    w->table.release = staged_release;
    /* Waits go through core's loop while staged operations need progress. */
    w->table.keeps_polling = staged_keeps_polling;
    /* polling_futile stays the inner backend's (copied above): staged
     * sub-operations ring the rank's doorbell when they complete. */
    w->table.pending_peers = staged_pending_peers;
    w->dev.chunk = comm->cfg.stage_chunk ? comm->cfg.stage_chunk : MLC_STAGE_CHUNK_DEFAULT;
    w->dev.rt = rt;
    w->dev.device = rt ? device : -1;
    comm->gpu_kind = rt ? (int)rt->kind : -1;
    comm->gpu_device = w->dev.device;
    w->dev.direct = direct;
    w->dev.ipc = ipc;
    mlc_comm_set_value(comm, wrapper_key, w);
    comm->be = &w->table;
    return MLC_SUCCESS;
}
