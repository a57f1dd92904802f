/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's cached scratch block (scratch.h). */
#include "scratch.h"
#include <stdint.h>
#include <stdlib.h>

/* Each block starts with a header of one cache line holding its usable
 * size; the caller's pointer is just past it, so stays 64-byte aligned. */
#define HEADER 64

static size_t size_of(void *header)
{
    return *(size_t *)header;
}

static void *user_of(void *header)
{
    return (unsigned char *)header + HEADER;
}

static void *header_of(void *block)
{
    return (unsigned char *)block - HEADER;
}

void *mlc_scratch_take(mlc_scratch_t *pool, size_t bytes)
{
    if (pool) {
        void *h = atomic_exchange(&pool->cached, NULL);
        if (h && size_of(h) >= bytes) return user_of(h);
        free(h); /* too small for this call: a new block replaces it */
    }
    size_t usable = (bytes + 63) & ~(size_t)63;
    if (usable < bytes || usable > SIZE_MAX - HEADER) return NULL;
    void *h = NULL;
    if (posix_memalign(&h, 64, HEADER + usable) != 0) return NULL;
    *(size_t *)h = usable;
    return user_of(h);
}

void mlc_scratch_give(mlc_scratch_t *pool, void *block)
{
    if (!block) return;
    void *h = header_of(block);
    if (!pool) {
        free(h);
        return;
    }
    /* Keep the larger of this block and the one cached (another operation may
     * have given one back meanwhile); free the other. */
    void *old = atomic_exchange(&pool->cached, h);
    if (!old) return;
    if (size_of(old) <= size_of(h)) {
        free(old);
        return;
    }
    void *expected = h;
    if (atomic_compare_exchange_strong(&pool->cached, &expected, old)) free(h);
    else free(old); /* a take got h meanwhile (it uses it now); the cache holds something else or nothing */
}

void mlc_scratch_drain(mlc_scratch_t *pool)
{
    if (pool) free(atomic_exchange(&pool->cached, NULL));
}
