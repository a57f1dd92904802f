/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pinned pool and GPU-direct detection as public API (mlcomm.h, "Host
 * memory pool, GPU-direct capabilities, backend availability"), for
 * language bindings.
 */
#include <stdbool.h>
#include <string.h>
#include "base/error.h"
#include "gpudirect.h"
#include "pinned.h"

/* A runtime loaded in the process that has a device (one loaded without a
 * driver or device cannot pin). */
static bool usable(mlc_gpu_kind_t kind)
{
    const mlc_gpurt_t *rt = mlc_gpurt_peek(kind);
    int n = 0;
    return rt && mlc_gpurt_device_count(rt, &n) == MLC_SUCCESS && n > 0;
}

MLC_API mlc_status_t mlc_pinned_pool_open(size_t limit, mlc_pinned_pool_t **pool)
{
    mlc_error_clear();
    if (!pool) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_pinned_pool_open: pool is NULL");
    mlc_pinned_mode_t mode = usable(MLC_GPU_CUDA) ? MLC_PINNED_CUDA
                             : usable(MLC_GPU_HIP) ? MLC_PINNED_HIP
                                                   : MLC_PINNED_MLOCK;
    mlc_error_clear();
    return mlc_pinned_pool_create(limit, mode, pool);
}

MLC_API mlc_status_t mlc_pinned_pool_close(mlc_pinned_pool_t *pool)
{
    mlc_error_clear();
    mlc_pinned_pool_destroy(pool);
    return MLC_SUCCESS;
}

#define NEED_POOL(fn)                                                                     \
    do {                                                                                  \
        mlc_error_clear();                                                                \
        if (!pool) return mlc_error(MLC_ERR_INVALID_ARG, "%s: pool is NULL", fn);         \
    } while (0)

MLC_API mlc_status_t mlc_pinned_pool_alloc(mlc_pinned_pool_t *pool, size_t bytes, void **ptr)
{
    NEED_POOL("mlc_pinned_pool_alloc");
    if (!ptr) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_pinned_pool_alloc: ptr is NULL");
    return mlc_error_in("mlc_pinned_pool_alloc", mlc_pinned_alloc(pool, bytes, ptr));
}

MLC_API mlc_status_t mlc_pinned_pool_release(mlc_pinned_pool_t *pool, void *ptr)
{
    NEED_POOL("mlc_pinned_pool_release");
    return mlc_error_in("mlc_pinned_pool_release", mlc_pinned_free(pool, ptr));
}

MLC_API mlc_status_t mlc_pinned_pool_pin(mlc_pinned_pool_t *pool, void *ptr, size_t bytes)
{
    NEED_POOL("mlc_pinned_pool_pin");
    return mlc_error_in("mlc_pinned_pool_pin", mlc_pinned_register(pool, ptr, bytes));
}

MLC_API mlc_status_t mlc_pinned_pool_unpin(mlc_pinned_pool_t *pool, void *ptr)
{
    NEED_POOL("mlc_pinned_pool_unpin");
    return mlc_error_in("mlc_pinned_pool_unpin", mlc_pinned_unregister(pool, ptr));
}

MLC_API mlc_status_t mlc_pinned_pool_info(mlc_pinned_pool_t *pool, mlc_pinned_info_t *info)
{
    NEED_POOL("mlc_pinned_pool_info");
    if (!info) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_pinned_pool_info: info is NULL");
    mlc_pinned_stats_t s;
    mlc_pinned_get_stats(pool, &s);
    info->limit = s.limit;
    info->bytes_pinned = s.bytes_pinned;
    info->bytes_in_use = s.bytes_in_use;
    info->bytes_cached = s.bytes_cached;
    info->hits = s.hits;
    info->misses = s.misses;
    info->evictions = s.evictions;
    info->mode = mlc_pinned_mode_name(mlc_pinned_pool_mode(pool));
    return MLC_SUCCESS;
}

MLC_API mlc_status_t mlc_gpudirect_query(mlc_gpudirect_info_t *info)
{
    static _Thread_local mlc_gpudirect_t g;
    mlc_error_clear();
    if (!info) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_gpudirect_query: info is NULL");
    /* The runtime the process uses; else a private copy, closed again, so
     * that asking does not change what the process pins or stages with. */
    const mlc_gpurt_t *rt = mlc_gpurt_peek(MLC_GPU_CUDA);
    if (!rt) rt = mlc_gpurt_peek(MLC_GPU_HIP);
    mlc_gpurt_t own;
    bool opened = false;
    char why[256];
    if (!rt) {
        if (mlc_gpurt_open(MLC_GPU_CUDA, NULL, &own, why, sizeof why) == MLC_SUCCESS ||
            mlc_gpurt_open(MLC_GPU_HIP, NULL, &own, why, sizeof why) == MLC_SUCCESS) {
            rt = &own;
            opened = true;
        }
    }
    mlc_error_clear(); /* a missing runtime is an answer (unknown), not an error */
    mlc_gpudirect_detect(rt, NULL, &g);
    if (opened) mlc_gpurt_close(&own);
    mlc_error_clear();
    info->rdma = g.rdma;
    info->rdma_evidence = g.rdma_evidence;
    info->peer_access = g.peer_access;
    info->peer_evidence = g.peer_evidence;
    info->cuda_aware_mpi = g.cuda_aware_mpi;
    info->mpi_evidence = g.mpi_evidence;
    info->ipc = g.ipc;
    info->ipc_evidence = g.ipc_evidence;
    return MLC_SUCCESS;
}
