/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whether a new communicator is wrapped by the staged backend, and the
 * device-memory state it then has: which runtime classifies its buffers,
 * whether its backend takes device memory itself, and the stream staging
 * copies run on. See staged.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include "base/error.h"
#include "base/log.h"
#include "ipc.h"
#include "staged.h"

/* cudaStreamDefault / hipStreamDefault: a blocking stream, which waits for earlier
 * work of the legacy default stream (the application's kernels on stream 0). */
#define MLC_GPU_STREAM_BLOCKING 0u

/* The runtime for this rank (NULL: host buffers only), per the memory kind, and its
 * device count (cudaGetDeviceCount creates no context). */
static mlc_status_t load_runtime(const mlc_comm_t *comm, const mlc_gpurt_t **out, int *ndev)
{
    static const char *const names[] = {
#define MLC_X_STR(id, str) str,
        MLC_MEMORY_LIST(MLC_X_STR)
#undef MLC_X_STR
    };
    int mem = comm->cfg.memory;
    *out = NULL;
    if (mem == MLC_MEMORY_AUTO) {
        for (int k = 0; k < MLC_GPU_KIND_COUNT; k++) {
            const mlc_gpurt_t *rt;
            int n;
            if (mlc_gpurt_get((mlc_gpu_kind_t)k, &rt) == MLC_SUCCESS && mlc_gpurt_device_count(rt, &n) == MLC_SUCCESS) {
                *out = rt;
                *ndev = n;
                break;
            }
        }
        mlc_error_clear();
        MLC_INFO("rank %d: MLC_MEMORY=auto: %s", comm->rank,
                 *out ? (*out)->name : "no GPU runtime with a device; buffers are host memory");
        return MLC_SUCCESS;
    }
    mlc_gpu_kind_t kind = mem == MLC_MEMORY_CUDA ? MLC_GPU_CUDA : MLC_GPU_HIP;
    const mlc_gpurt_t *rt;
    /* A runtime without a driver or device loads, then fails every call: refuse it here. */
    mlc_status_t st = mlc_gpurt_get(kind, &rt);
    if (st == MLC_SUCCESS) st = mlc_gpurt_device_count(rt, ndev);
    if (st != MLC_SUCCESS)
        return mlc_error(MLC_ERR_UNAVAILABLE, "rank %d: MLC_MEMORY=%s on backend '%s': %s", comm->rank, names[mem],
                         comm->be->name, mlc_last_error());
    *out = rt;
    return MLC_SUCCESS;
}

static bool wants_devmem(const mlc_comm_t *comm)
{
    return comm->cfg.memory != MLC_MEMORY_HOST && !comm->be->device_native;
}

/* This rank's device (-1 without a runtime); why gets the reason it has none it may use. */
static int choose_device(const mlc_comm_t *comm, const mlc_gpurt_t *rt, int ndev, char *why, size_t len)
{
    int device = -1;
    if (rt && mlc_gpu_choose_device(rt, &comm->cfg, comm->cfg.local_rank, comm->cfg.local_size, ndev, &device) !=
                  MLC_SUCCESS) {
        snprintf(why, len, "%s", mlc_last_error());
        mlc_error_clear();
        device = -1;
    }
    return device;
}

/* The decorator's wrap: called by core when a communicator is created
 * (collective: agrees with the other ranks). Memory host: nothing. cuda /
 * rocm: loads that runtime and needs a device (UNAVAILABLE with the reason
 * when it cannot).
 * auto: CUDA, then HIP, else host buffers only (and no wrapper).
 * It makes no device current and allocates nothing (no context): the device
 * is chosen here (mlc_gpu_choose_device), used from the first device buffer
 * on; whether the processes can map each other's memory is probed at the
 * first call where every rank has device buffers (stage_ipc.c). */
static mlc_status_t wrap(mlc_comm_t *comm)
{
    if (!wants_devmem(comm)) return MLC_SUCCESS;
    const mlc_gpurt_t *rt;
    int ndev = 0;
    mlc_status_t st = load_runtime(comm, &rt, &ndev);
    if (st != MLC_SUCCESS) return st;
    char bad_device[384] = "";
    int device = choose_device(comm, rt, ndev, bad_device, sizeof bad_device);
    /* Agree: staged if any rank has a runtime (the others then run the same
     * chunk structure on host buffers); direct only if every backend can. */
    bool capable = rt && comm->be->device_capable && comm->be->device_capable(comm);
    char why[256] = "MLC_CUDA_IPC=0";
    bool ipc = rt && comm->size > 1 && comm->cfg.cuda_ipc && mlc_ipc_capable(comm, rt, why, sizeof why);
    /* One MAX allreduce: [0] = any rank has a runtime, [1] = -(every rank capable), [2] = -(every rank IPC),
     * [3] = a rank has no device it may use (MLC_DEVICE): every rank fails alike. */
    int32_t mine[4] = {rt != NULL, capable ? -1 : 0, ipc ? -1 : 0, bad_device[0] != '\0'};
    int32_t all[4] = {mine[0], mine[1], mine[2], mine[3]};
    if (comm->size > 1) {
        comm->internal_depth++;
        st = mlc_allreduce(mine, all, 4, MLC_INT32, MLC_MAX, comm, NULL);
        comm->internal_depth--;
        if (st != MLC_SUCCESS) return st;
    }
    if (bad_device[0]) return mlc_error(MLC_ERR_CONFIG, "rank %d: %s", comm->rank, bad_device);
    if (all[3])
        return mlc_error(MLC_ERR_CONFIG, "rank %d: another rank's MLC_DEVICE names a device it does not have",
                         comm->rank);
    if (!all[0]) return MLC_SUCCESS; /* memory auto and no rank has a GPU */
    bool ipc_all = all[2] == -1;
    if (ipc && !ipc_all) snprintf(why, sizeof why, "another rank cannot use it");
    st = mlc_staged_wrap(comm, rt, all[1] == -1, ipc_all, device);
    if (st != MLC_SUCCESS) return st;
    const mlc_devmem_t *d = mlc_devmem_of(comm);
    if (!ipc_all && rt && comm->size > 1) MLC_INFO("rank %d: no %s IPC: %s", comm->rank, rt->name, why);
    MLC_INFO("rank %d: device buffers on backend '%s' (%s device %d): %s%s%s%s (staging chunk %zu bytes)",
             comm->rank, comm->be->name, rt ? rt->name : "no", device,
             d->direct ? "the backend moves them itself where it can" : "staged through pinned host memory",
             d->ipc ? ", data movement and reductions through " : "", d->ipc ? rt->name : "",
             d->ipc ? " IPC once a probe at the first call with device buffers on every rank succeeds" : "",
             d->chunk);
    return MLC_SUCCESS;
}

/* mlc_comm_init_all: every rank is in this process; no collective needed. */
static mlc_status_t wrap_local(int n, mlc_comm_t **comms)
{
    if (n < 1 || !wants_devmem(comms[0])) return MLC_SUCCESS;
    const mlc_gpurt_t *rt;
    int ndev = 0;
    mlc_status_t st = load_runtime(comms[0], &rt, &ndev);
    if (st != MLC_SUCCESS || !rt) return st;
    bool direct = comms[0]->be->device_capable && comms[0]->be->device_capable(comms[0]);
    for (int i = 0; i < n && st == MLC_SUCCESS; i++) {
        int device;
        st = mlc_gpu_choose_device(rt, &comms[i]->cfg, comms[i]->cfg.local_rank, comms[i]->cfg.local_size, ndev,
                                   &device);
        if (st == MLC_SUCCESS) st = mlc_staged_wrap(comms[i], rt, direct, false, device);
    }
    return st;
}

const mlc_decorator_t mlc_decorator_staged = {
    .name = "staged",
    .wrap = wrap,
    .wrap_local = wrap_local,
};

void mlc_devmem_release(mlc_devmem_t *d)
{
    if (d->own_stream) d->rt->stream_destroy(d->own_stream);
    d->own_stream = NULL;
}

mlc_status_t mlc_devmem_is_device(const mlc_comm_t *comm, const void *ptr, bool *device)
{
    const mlc_devmem_t *d = mlc_devmem_of(comm);
    *device = false;
    if (!d || !d->rt || !ptr) return MLC_SUCCESS;
    mlc_gpu_mem_t mem;
    int dev;
    mlc_status_t st = mlc_gpurt_pointer_kind(d->rt, ptr, &mem, &dev);
    if (st != MLC_SUCCESS) return st;
    /* Managed memory is reachable from the host; pinned host memory is host memory. */
    *device = mem == MLC_GPU_MEM_DEVICE;
    return MLC_SUCCESS;
}

mlc_status_t mlc_devmem_stream(mlc_comm_t *comm, void **stream)
{
    mlc_devmem_t *d = mlc_devmem_of(comm);
    if (d->stream_set) {
        *stream = d->stream;
        return MLC_SUCCESS;
    }
    if (!d->own_stream) {
        int e = d->rt->stream_create_with_flags(&d->own_stream, MLC_GPU_STREAM_BLOCKING);
        if (e != MLC_GPU_SUCCESS) {
            char buf[256];
            d->own_stream = NULL;
            return mlc_error(MLC_ERR_BACKEND, "rank %d: %sStreamCreateWithFlags: %s", comm->rank, d->rt->prefix,
                             mlc_gpurt_strerror(d->rt, e, buf, sizeof buf));
        }
    }
    *stream = d->own_stream;
    return MLC_SUCCESS;
}

mlc_status_t mlc_devmem_sync(mlc_comm_t *comm)
{
    mlc_devmem_t *d = mlc_devmem_of(comm);
    void *stream, *ev = NULL;
    mlc_status_t st = mlc_devmem_stream(comm, &stream);
    if (st != MLC_SUCCESS) return st;
    /* An event, not cudaStreamSynchronize: an empty blocking stream would not wait
     * for the legacy stream's work, an event recorded on it does. */
    const char *what = "EventCreateWithFlags";
    int e = d->rt->event_create_with_flags(&ev, MLC_GPU_EVENT_DISABLE_TIMING);
    if (e == MLC_GPU_SUCCESS) {
        what = "EventRecord";
        e = d->rt->event_record(ev, stream);
        if (e == MLC_GPU_SUCCESS) {
            what = "EventSynchronize";
            e = d->rt->event_synchronize(ev);
        }
        d->rt->event_destroy(ev);
    }
    if (e == MLC_GPU_SUCCESS) return MLC_SUCCESS;
    char buf[256];
    d->rt->get_last_error();
    return mlc_error(MLC_ERR_BACKEND, "rank %d: %s%s: %s", comm->rank, d->rt->prefix, what,
                     mlc_gpurt_strerror(d->rt, e, buf, sizeof buf));
}

int mlc_devmem_enter(const mlc_comm_t *comm)
{
    const mlc_devmem_t *d = mlc_devmem_of(comm);
    int cur = -1;
    if (!d || !d->rt || d->device < 0 || !d->device_seen) return -1;
    if (d->rt->get_device(&cur) != MLC_GPU_SUCCESS) {
        d->rt->get_last_error();
        return -1;
    }
    if (cur == d->device) return -1;
    bool had_context = mlc_gpurt_thread_has_context(d->rt);
    if (d->rt->set_device(d->device) != MLC_GPU_SUCCESS) {
        d->rt->get_last_error(); /* the call that needs the device reports it */
        return -1;
    }
    return had_context ? cur : -1;
}

void mlc_devmem_leave(const mlc_comm_t *comm, int prev)
{
    const mlc_devmem_t *d = mlc_devmem_of(comm);
    if (prev >= 0 && d && d->rt && d->rt->set_device(prev) != MLC_GPU_SUCCESS) d->rt->get_last_error();
}
