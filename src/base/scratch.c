/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's cached scratch block (scratch.h). */
#include "scratch.h"
#include <stdint.h>
#include <stdlib.h>

/* Each block starts with a header of one cache line holding its usable
 * size; the caller's pointer is just past it, so stays 64-byte aligned. */
#define HEADER 64

void *mlc_scratch_take(mlc_scratch_t *pool, size_t bytes)
{
    if (pool) {
        unsigned char *h = atomic_exchange(&pool->cached, NULL);
        if (h && *(size_t *)h >= bytes) return h + HEADER;
        free(h); /* too small for this call: a new block replaces it */
    }
    size_t usable = (bytes + 63) & ~(size_t)63;
    if (usable < bytes || usable > SIZE_MAX - HEADER) return NULL;
    void *h = NULL;
    if (posix_memalign(&h, 64, HEADER + usable) != 0) return NULL;
    *(size_t *)h = usable;
    return (unsigned char *)h + HEADER;
}

void mlc_scratch_give(mlc_scratch_t *pool, void *block)
{
    if (!block) return;
    void *h = (unsigned char *)block - HEADER, *none = NULL;
    /* Once h is in the cache another thread may take and free it: nothing of
     * h is read after the exchange. */
    if (!pool || *(size_t *)h > MLC_SCRATCH_KEEP_MAX || !atomic_compare_exchange_strong(&pool->cached, &none, h))
        free(h);
}

void mlc_scratch_drain(mlc_scratch_t *pool)
{
    if (pool) free(atomic_exchange(&pool->cached, NULL));
}
