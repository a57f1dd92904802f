/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA (or HIP) IPC for the shm backend's device buffers: a rank exports the
 * allocation behind a device pointer (handle + offset into it), a peer
 * process on the same host maps it once (cached per communicator until
 * the communicator is freed) and copies device to device with one
 * cudaMemcpyAsync. stage_ipc.c uses it for the collectives that move
 * data (broadcast, allgather, alltoall, gather, scatter) and for allreduce
 * and reduce_scatter (each rank pulls its block from every peer, reduces
 * it on the host and the reduced blocks then move device to device).
 *
 * The offset needs the allocation's base address, which for CUDA only the
 * driver API tells (cuMemGetAddressRange_v2, looked up in the loaded
 * runtime, then libcuda.so.1) and for HIP the runtime
 * (hipMemGetAddressRange): without it IPC is reported unavailable.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/log.h"
#include "ipc.h"
#include "staged.h"

/* cuMemGetAddressRange_v2 (driver API) and hipMemGetAddressRange: an allocation's base. */
typedef int (*cu_range_fn_t)(unsigned long long *base, size_t *size, unsigned long long ptr);
typedef int (*hip_range_fn_t)(void **base, size_t *size, void *ptr);

struct mlc_ipc_map {
    int peer;
    mlc_gpu_ipc_handle_t handle;
    char *base;
    struct mlc_ipc_map *next;
};

/* The runtime's (or for CUDA, the driver's) range lookup; NULL when there is none. */
static void *range_sym(const mlc_gpurt_t *rt)
{
    static void *fn[2];
    static int looked[2];
    int k = rt->kind == MLC_GPU_HIP;
    if (__atomic_load_n(&looked[k], __ATOMIC_ACQUIRE)) return fn[k];
    const char *name = k ? "hipMemGetAddressRange" : "cuMemGetAddressRange_v2";
    void *f = rt->lib.handle ? dlsym(rt->lib.handle, name) : NULL;
    if (!f && !k) {
        void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (drv) f = dlsym(drv, name);
    }
    fn[k] = f;
    __atomic_store_n(&looked[k], 1, __ATOMIC_RELEASE);
    return f;
}

/* Base of the allocation holding ptr; 0 on success, else the runtime's error code. */
static int alloc_base(const mlc_gpurt_t *rt, const void *ptr, uintptr_t *base)
{
    size_t size = 0;
    void *f = range_sym(rt);
    if (rt->kind == MLC_GPU_HIP) {
        hip_range_fn_t hip;
        *(void **)&hip = f;
        void *b = NULL;
        int e = hip(&b, &size, (void *)ptr);
        *base = (uintptr_t)b;
        return e;
    }
    cu_range_fn_t cu;
    *(void **)&cu = f;
    unsigned long long b = 0;
    int e = cu(&b, &size, (unsigned long long)(uintptr_t)ptr);
    *base = (uintptr_t)b;
    return e;
}

bool mlc_ipc_capable(const mlc_comm_t *comm, const mlc_gpurt_t *rt, char *why, size_t len)
{
    if (!comm->be->host_shared) return snprintf(why, len, "only between shm processes"), false;
    if (!rt) return snprintf(why, len, "no GPU runtime"), false;
    if (!rt->ipc_get_mem_handle || !rt->ipc_open_mem_handle || !rt->ipc_close_mem_handle)
        return snprintf(why, len, "the %s runtime has no IPC calls", rt->name), false;
    if (!range_sym(rt))
        return snprintf(why, len, "no %s", rt->kind == MLC_GPU_HIP ? "hipMemGetAddressRange in the HIP runtime"
                                                                   : "cuMemGetAddressRange_v2 (libcuda.so.1)"),
               false;
    return true;
}

mlc_status_t mlc_ipc_export(const mlc_gpurt_t *rt, const void *ptr, mlc_ipc_rec_t *rec)
{
    uintptr_t base = 0;
    int e = alloc_base(rt, ptr, &base);
    if (e != 0)
        return mlc_error(MLC_ERR_BACKEND, "%s(%p) failed with %d",
                         rt->kind == MLC_GPU_HIP ? "hipMemGetAddressRange" : "cuMemGetAddressRange_v2", ptr, e);
    e = rt->ipc_get_mem_handle(&rec->handle, (void *)base);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        rt->get_last_error();
        return mlc_error(MLC_ERR_BACKEND, "%sIpcGetMemHandle(%p): %s", rt->prefix, (void *)base,
                         mlc_gpurt_strerror(rt, e, buf, sizeof buf));
    }
    rec->offset = (uint64_t)((uintptr_t)ptr - base);
    rec->ok = 1;
    return MLC_SUCCESS;
}

/* This rank's half of the probe: export a small allocation of ours, map every peer's. */
static bool probe_local(mlc_comm_t *comm, const mlc_gpurt_t *rt, const mlc_ipc_rec_t *all, int n_ok,
                        char *why, size_t len)
{
    if (n_ok != comm->size) return snprintf(why, len, "a rank could not export device memory"), false;
    for (int q = 0; q < comm->size; q++) {
        if (q == comm->rank) continue;
        void *p = NULL;
        int e = rt->ipc_open_mem_handle(&p, all[q].handle, MLC_GPU_IPC_LAZY_PEER_ACCESS);
        if (e != MLC_GPU_SUCCESS) {
            char buf[256];
            rt->get_last_error();
            snprintf(why, len, "%sIpcOpenMemHandle of rank %d's memory failed: %s", rt->prefix, q,
                     mlc_gpurt_strerror(rt, e, buf, sizeof buf));
            return false;
        }
        rt->ipc_close_mem_handle(p);
    }
    return true;
}

mlc_status_t mlc_ipc_probe(mlc_comm_t *comm, const mlc_gpurt_t *rt, bool *ok, char *why, size_t len)
{
    int p = comm->size;
    mlc_ipc_rec_t mine = {0}, *all = calloc((size_t)p, sizeof *all);
    if (!all) return mlc_error(MLC_ERR_NO_MEMORY, "rank %d: out of memory for the IPC probe", comm->rank);
    void *mem = NULL;
    int e = rt->malloc(&mem, 256);
    if (e != MLC_GPU_SUCCESS) {
        rt->get_last_error();
        snprintf(why, len, "%sMalloc for the IPC probe failed", rt->prefix);
        mem = NULL;
    } else if (mlc_ipc_export(rt, mem, &mine) != MLC_SUCCESS) {
        snprintf(why, len, "%s", mlc_last_error());
        mlc_error_clear();
    }
    comm->internal_depth++;
    mlc_status_t st = mlc_allgather(&mine, all, sizeof mine, MLC_UINT8, comm, NULL);
    int32_t bad = 0, any_bad = 0;
    if (st == MLC_SUCCESS) {
        int n_ok = 0;
        for (int q = 0; q < p; q++) n_ok += all[q].ok == 1;
        bad = !probe_local(comm, rt, all, n_ok, why, len);
        /* Every rank has closed its mappings of ours before anyone frees: the allreduce orders it. */
        st = mlc_allreduce(&bad, &any_bad, 1, MLC_INT32, MLC_MAX, comm, NULL);
    }
    comm->internal_depth--;
    if (mem) rt->free(mem);
    free(all);
    if (st != MLC_SUCCESS) return st;
    if (any_bad && !bad) snprintf(why, len, "another rank could not map this rank's device memory");
    *ok = !any_bad;
    return MLC_SUCCESS;
}

mlc_status_t mlc_ipc_open(mlc_devmem_t *d, int peer, const mlc_ipc_rec_t *rec, char **ptr)
{
    for (mlc_ipc_map_t *m = d->ipc_maps; m; m = m->next)
        if (m->peer == peer && memcmp(&m->handle, &rec->handle, sizeof m->handle) == 0) {
            *ptr = m->base + rec->offset;
            return MLC_SUCCESS;
        }
    mlc_ipc_map_t *m = calloc(1, sizeof *m);
    if (!m) return mlc_error(MLC_ERR_NO_MEMORY, "out of memory for a CUDA IPC mapping");
    void *base = NULL;
    int e = d->rt->ipc_open_mem_handle(&base, rec->handle, MLC_GPU_IPC_LAZY_PEER_ACCESS);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        free(m);
        d->rt->get_last_error();
        return mlc_error(MLC_ERR_BACKEND, "%sIpcOpenMemHandle (memory of rank %d): %s", d->rt->prefix, peer,
                         mlc_gpurt_strerror(d->rt, e, buf, sizeof buf));
    }
    m->peer = peer;
    m->handle = rec->handle;
    m->base = base;
    m->next = d->ipc_maps;
    d->ipc_maps = m;
    *ptr = m->base + rec->offset;
    return MLC_SUCCESS;
}

void mlc_ipc_close_all(mlc_devmem_t *d)
{
    while (d->ipc_maps) {
        mlc_ipc_map_t *m = d->ipc_maps;
        d->ipc_maps = m->next;
        d->rt->ipc_close_mem_handle(m->base);
        free(m);
    }
}
