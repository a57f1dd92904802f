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
 * Mappings are cached process-wide (every communicator of the process
 * shares them: CUDA maps a peer's allocation once per process), keyed by
 * the owner's process and allocation address, at most MLC_IPC_CACHE_MAX
 * of them; an operation holds the ones it reads until it is released.
 *
 * The offset needs the allocation's base address, which for CUDA only the
 * driver API tells (cuMemGetAddressRange_v2, looked up in the loaded
 * runtime, then libcuda.so.1) and for HIP the runtime
 * (hipMemGetAddressRange): without it IPC is reported unavailable.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/error.h"
#include "base/log.h"
#include "ipc.h"
#include "staged.h"

/* cuMemGetAddressRange_v2 (driver API) and hipMemGetAddressRange: an allocation's base. */
typedef int (*cu_range_fn_t)(unsigned long long *base, size_t *size, unsigned long long ptr);
typedef int (*hip_range_fn_t)(void **base, size_t *size, void *ptr);

#define MLC_GPU_ERROR_ALREADY_MAPPED 208 /* cudaErrorAlreadyMapped / hipErrorAlreadyMapped */

struct mlc_ipc_map {
    int32_t pid;         /* the owner's process */
    uint64_t base, size; /* the allocation there */
    mlc_gpu_ipc_handle_t handle;
    const mlc_gpurt_t *rt;
    char *mapped;        /* here */
    int held;            /* operations reading it now */
    uint64_t used;       /* last use (for eviction) */
    struct mlc_ipc_map *next;
};
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static mlc_ipc_map_t *cache;
static int cache_n;
static uint64_t cache_clock;

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
static int alloc_base(const mlc_gpurt_t *rt, const void *ptr, uintptr_t *base, size_t *psize)
{
    size_t size = 0;
    void *f = range_sym(rt);
    if (rt->kind == MLC_GPU_HIP) {
        hip_range_fn_t hip;
        *(void **)&hip = f;
        void *b = NULL;
        int e = hip(&b, &size, (void *)ptr);
        *base = (uintptr_t)b;
        *psize = size;
        return e;
    }
    cu_range_fn_t cu;
    *(void **)&cu = f;
    unsigned long long b = 0;
    int e = cu(&b, &size, (unsigned long long)(uintptr_t)ptr);
    *base = (uintptr_t)b;
    *psize = size;
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
    size_t size = 0;
    int e = alloc_base(rt, ptr, &base, &size);
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
    rec->pid = (int32_t)getpid();
    rec->base = (uint64_t)base;
    rec->size = (uint64_t)size;
    rec->ok = 1;
    return MLC_SUCCESS;
}

bool mlc_ipc_probe_map(const mlc_comm_t *comm, const mlc_gpurt_t *rt, const mlc_ipc_rec_t *all, char *why,
                       size_t len)
{
    for (int q = 0; q < comm->size; q++)
        if (all[q].ok != 1) return snprintf(why, len, "rank %d could not export device memory", q), false;
    for (int q = 0; q < comm->size; q++) {
        if (q == comm->rank) continue;
        char *p = NULL;
        mlc_ipc_map_t *held = NULL;
        if (mlc_ipc_open(rt, q, &all[q], &p, &held) != MLC_SUCCESS) {
            snprintf(why, len, "%s", mlc_last_error());
            mlc_error_clear();
            return false;
        }
        mlc_ipc_close(held); /* never read again: its owner frees it after the probe */
    }
    return true;
}

/* Unmap m and drop it from the cache (cache_lock held, m not held). */
static void cache_drop(mlc_ipc_map_t *m)
{
    for (mlc_ipc_map_t **pp = &cache; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    m->rt->ipc_close_mem_handle(m->mapped);
    cache_n--;
    free(m);
}

/* Close the mappings of pid's memory that overlap [base, base + size) and nobody holds;
 * 1 if one is held (cannot be closed). cache_lock held. */
static int close_overlapping(int32_t pid, uint64_t base, uint64_t size)
{
    int busy = 0;
    for (mlc_ipc_map_t *m = cache, *next; m; m = next) {
        next = m->next;
        if (m->pid != pid || !(base < m->base + m->size && m->base < base + size)) continue;
        if (m->held) busy = 1;
        else cache_drop(m);
    }
    return busy;
}

/* Room for one more mapping: close the least recently used that nobody holds. cache_lock held. */
static void make_room(void)
{
    while (cache_n >= MLC_IPC_CACHE_MAX) {
        mlc_ipc_map_t *lru = NULL;
        for (mlc_ipc_map_t *m = cache; m; m = m->next)
            if (!m->held && (!lru || m->used < lru->used)) lru = m;
        if (!lru) return; /* every one is in use: the cache grows past the bound for now */
        cache_drop(lru);
    }
}

static mlc_status_t open_error(const mlc_gpurt_t *rt, int peer, int e)
{
    char buf[256];
    rt->get_last_error();
    return mlc_error(MLC_ERR_BACKEND, "%sIpcOpenMemHandle (memory of rank %d): %s", rt->prefix, peer,
                     mlc_gpurt_strerror(rt, e, buf, sizeof buf));
}

mlc_status_t mlc_ipc_open(const mlc_gpurt_t *rt, int peer, const mlc_ipc_rec_t *rec, char **ptr,
                          mlc_ipc_map_t **held)
{
    mlc_status_t st = MLC_SUCCESS;
    pthread_mutex_lock(&cache_lock);
    mlc_ipc_map_t *m = cache;
    while (m && !(m->pid == rec->pid && m->base == rec->base && m->size == rec->size &&
                  memcmp(&m->handle, &rec->handle, sizeof m->handle) == 0))
        m = m->next;
    if (!m) {
        /* Anything mapped of that range is a stale allocation the owner has freed. */
        if (close_overlapping(rec->pid, rec->base, rec->size)) {
            st = mlc_error(MLC_ERR_BACKEND, "%sIpcOpenMemHandle (memory of rank %d): an older mapping of the "
                           "same memory is still being read (was it freed during a call?)", rt->prefix, peer);
            goto out;
        }
        make_room();
        m = calloc(1, sizeof *m);
        if (!m) {
            st = mlc_error(MLC_ERR_NO_MEMORY, "out of memory for a %s IPC mapping", rt->name);
            goto out;
        }
        void *mapped = NULL;
        int e = rt->ipc_open_mem_handle(&mapped, rec->handle, MLC_GPU_IPC_LAZY_PEER_ACCESS);
        if (e == MLC_GPU_ERROR_ALREADY_MAPPED) {
            /* Mapped by what the cache no longer knows of: every idle mapping of that process goes. */
            rt->get_last_error();
            close_overlapping(rec->pid, 0, UINT64_MAX);
            e = rt->ipc_open_mem_handle(&mapped, rec->handle, MLC_GPU_IPC_LAZY_PEER_ACCESS);
        }
        if (e != MLC_GPU_SUCCESS) {
            free(m);
            st = open_error(rt, peer, e);
            goto out;
        }
        *m = (mlc_ipc_map_t){rec->pid, rec->base, rec->size, rec->handle, rt, mapped, 0, 0, cache};
        cache = m;
        cache_n++;
    }
    m->held++;
    m->used = ++cache_clock;
    *ptr = m->mapped + rec->offset;
    *held = m;
out:
    pthread_mutex_unlock(&cache_lock);
    return st;
}

void mlc_ipc_release(mlc_ipc_map_t *held)
{
    if (!held) return;
    pthread_mutex_lock(&cache_lock);
    held->held--;
    pthread_mutex_unlock(&cache_lock);
}

void mlc_ipc_close(mlc_ipc_map_t *held)
{
    if (!held) return;
    pthread_mutex_lock(&cache_lock);
    if (--held->held == 0) cache_drop(held);
    pthread_mutex_unlock(&cache_lock);
}
