/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pinned (page-locked) host memory pool: the staging buffers for copies
 * between host and GPU (and for an MPI that is not CUDA-aware).
 *
 * - A byte limit (default 1 GiB, MLC_PINNED_LIMIT, K/M/G suffixes) caps all
 *   memory the pool keeps pinned: blocks in use, freed blocks kept for
 *   reuse, and user memory pinned with mlc_pinned_register.
 * - Freed blocks are cached for reuse by size class (4 classes per power of
 *   two, at most 25% rounding); when the limit is reached the least recently
 *   freed cached blocks are unpinned first. Memory in use is never evicted.
 *   When even eviction cannot make room the call fails with
 *   MLC_ERR_NO_MEMORY naming the request, the limit and the bytes in use.
 * - Pinning uses cudaHostAlloc / cudaHostRegister when the CUDA runtime is
 *   loaded (hipHostMalloc / hipHostRegister for HIP), else mmap + mlock, so
 *   it also works (and is tested) on machines without a GPU. An mlock that
 *   RLIMIT_MEMLOCK refuses is reported with the limit and the fix.
 * - Thread-safe: every function may be called from any thread.
 */
#ifndef MLC_GPU_PINNED_H
#define MLC_GPU_PINNED_H
#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "mlcomm.h"

/* MLC_PINNED_LIMIT's default, from the config table. */
#define MLC_PINNED_DEFAULT_LIMIT mlc_env_default_size(MLC_ENV_PINNED_LIMIT)

/* How the pool pins: X(enumerator, name). */
#define MLC_PINNED_MODE_LIST(X)   \
    X(MLC_PINNED_AUTO, "auto")    \
    X(MLC_PINNED_CUDA, "cuda")    \
    X(MLC_PINNED_HIP, "hip")      \
    X(MLC_PINNED_MLOCK, "mlock")
typedef enum mlc_pinned_mode {
#define MLC_X_ENUM(name, text) name,
    MLC_PINNED_MODE_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
} mlc_pinned_mode_t;
const char *mlc_pinned_mode_name(mlc_pinned_mode_t mode);

typedef struct mlc_pinned_pool mlc_pinned_pool_t;

typedef struct mlc_pinned_stats {
    size_t limit;
    size_t bytes_pinned;   /* everything pinned now: in use + cached + registered */
    size_t bytes_in_use;   /* blocks handed out + registered user memory */
    size_t bytes_cached;   /* freed blocks kept for reuse */
    uint64_t hits;         /* allocations served from the cache */
    uint64_t misses;       /* allocations that pinned new memory */
    uint64_t evictions;    /* cached blocks unpinned to stay under the limit */
    uint64_t blocks_in_use, blocks_cached, regions_registered;
} mlc_pinned_stats_t;

/*
 * Create a pool. limit 0 = MLC_PINNED_LIMIT or the default (a malformed
 * variable is MLC_ERR_CONFIG naming it). AUTO pins through the GPU runtime
 * already loaded in the process (CUDA, then HIP), else with mlock; CUDA and
 * HIP load their runtime now and fail with UNAVAILABLE when they cannot.
 */
mlc_status_t mlc_pinned_pool_create(size_t limit, mlc_pinned_mode_t mode, mlc_pinned_pool_t **pool);
/* Unpin and free everything (also blocks still in use). NULL is a no-op. */
void mlc_pinned_pool_destroy(mlc_pinned_pool_t *pool);

/* The process-wide pool (AUTO, limit from the environment), made on first use. */
mlc_status_t mlc_pinned_default(mlc_pinned_pool_t **pool);

/* At least `bytes` (> 0) of pinned memory. */
mlc_status_t mlc_pinned_alloc(mlc_pinned_pool_t *pool, size_t bytes, void **ptr);
/* Give a block back (it is cached for reuse). INVALID_ARG for a pointer the pool did not hand out. */
mlc_status_t mlc_pinned_free(mlc_pinned_pool_t *pool, void *ptr);

/*
 * Pin user memory in place (PinMemory(tensor) of the C# specification); it counts
 * against the limit (cached blocks are evicted to make room) until
 * mlc_pinned_unregister. With mlock, locks do not nest: unregistering
 * unlocks the whole pages even if another region shares them.
 */
mlc_status_t mlc_pinned_register(mlc_pinned_pool_t *pool, void *ptr, size_t bytes);
mlc_status_t mlc_pinned_unregister(mlc_pinned_pool_t *pool, void *ptr);

/* Unpin every cached block now. */
void mlc_pinned_trim(mlc_pinned_pool_t *pool);

void mlc_pinned_get_stats(mlc_pinned_pool_t *pool, mlc_pinned_stats_t *stats);
/* What the pool pins new memory with right now (CUDA, HIP or mlock). */
mlc_pinned_mode_t mlc_pinned_pool_mode(mlc_pinned_pool_t *pool);

/* The size class a request of `bytes` is rounded to (exposed for tests). */
size_t mlc_pinned_class_size(size_t bytes);
#endif
