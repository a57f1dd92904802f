/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A communicator's host scratch memory, kept between calls. The temporary
 * buffers of a collective (an algorithm's, algos/exec; the engine's direct
 * reductions) are taken from here and given back when the operation ends,
 * so back-to-back large calls reuse one block instead of asking the
 * allocator each time: above glibc's mmap threshold (32 MiB at most) every
 * fresh block is new pages, zeroed and faulted in one by one, which can
 * cost more than the collective itself (a forced recursive-doubling
 * allreduce of 32 MiB took 14 times as long on a VM whose page faults are
 * slow; an in-place 128 MiB direct one 3.5 times as long).
 *
 * One block is cached: the first given back while the cache is empty, if it
 * is at most MLC_SCRATCH_KEEP_MAX bytes; operations in flight at the same
 * time each get their own. Lock-free: take and give may run on any thread.
 * The cache holds its block until mlc_scratch_drain (the communicator's
 * release).
 */
#ifndef MLC_BASE_SCRATCH_H
#define MLC_BASE_SCRATCH_H
#include <stdatomic.h>
#include <stddef.h>

#define MLC_SCRATCH_KEEP_MAX ((size_t)256 << 20) /* larger blocks are freed, not kept */

typedef struct mlc_scratch {
    _Atomic(void *) cached; /* a block's header (see scratch.c), or NULL */
} mlc_scratch_t;

/* At least `bytes` bytes, 64-byte aligned: the cached block when it is free
 * and large enough, else a new one. NULL when out of memory. pool may be
 * NULL (no cache: every block is new). */
void *mlc_scratch_take(mlc_scratch_t *pool, size_t bytes);
/* Give a block from mlc_scratch_take back (NULL is ignored): cached when the
 * cache is empty and the block not too large, else freed. */
void mlc_scratch_give(mlc_scratch_t *pool, void *block);
/* Free the cached block. No take or give may run at the same time. */
void mlc_scratch_drain(mlc_scratch_t *pool);
#endif
