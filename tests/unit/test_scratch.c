/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's host scratch cache (base/scratch.h): a block given back
 * is the next one taken (no new allocation for back-to-back calls), a call
 * needing more gets a larger block that replaces it, operations in flight
 * together get distinct blocks, a block above MLC_SCRATCH_KEEP_MAX is not
 * kept, every block is 64-byte aligned and writable over its whole size,
 * draining empties the cache, and threads taking and giving at once never
 * share or lose a block (run under the sanitizers: no use after free, no
 * leak). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "base/scratch.h"
#include "unit.h"

static int aligned(const void *p)
{
    return ((uintptr_t)p & 63) == 0;
}

static mlc_scratch_t shared;
static atomic_int clashes;

/* Take, write, check, give back, with sizes that make takes replace the
 * cached block now and then. */
static void *hammer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t bytes = 64 + (seed >> 8) % 8192;
        unsigned char *b = mlc_scratch_take(&shared, bytes);
        if (!b) continue;
        unsigned char mark = (unsigned char)(seed >> 3);
        memset(b, mark, bytes);
        for (size_t k = 0; k < bytes; k += 61)
            if (b[k] != mark) atomic_fetch_add(&clashes, 1); /* another thread wrote it: shared */
        mlc_scratch_give(&shared, b);
    }
    return NULL;
}

int main(void)
{
    mlc_scratch_t pool = {0};
    unsigned char *a = mlc_scratch_take(&pool, 1000);
    CHECK(a && aligned(a), "a 1000-byte block, 64-byte aligned");
    memset(a, 1, 1000);
    mlc_scratch_give(&pool, a);
    unsigned char *again = mlc_scratch_take(&pool, 900);
    CHECK(again == a, "a block given back is taken again (%p, then %p)", (void *)a, (void *)again);
    mlc_scratch_give(&pool, again);

    unsigned char *big = mlc_scratch_take(&pool, (size_t)3 << 20);
    CHECK(big && big != a && aligned(big), "a larger call gets a new, larger block");
    memset(big, 2, (size_t)3 << 20);
    CHECK(atomic_load(&pool.cached) == NULL, "the smaller cached block was freed, not kept");
    mlc_scratch_give(&pool, big);
    CHECK(mlc_scratch_take(&pool, 64) == big, "the larger block serves smaller calls after it");

    /* Two in flight: distinct blocks; the first given back is the one kept. */
    unsigned char *small = mlc_scratch_take(&pool, 4096);
    CHECK(small && small != big, "an operation in flight beside another gets its own block");
    mlc_scratch_give(&pool, big);
    mlc_scratch_give(&pool, small);
    CHECK(mlc_scratch_take(&pool, 1) == big, "a full cache keeps its block and frees the one given back");
    mlc_scratch_give(&pool, big);

    /* Above the limit: used, then freed rather than kept. */
    mlc_scratch_drain(&pool);
    unsigned char *huge = mlc_scratch_take(&pool, MLC_SCRATCH_KEEP_MAX + 1);
    CHECK(huge && aligned(huge), "a block above the keep limit");
    huge[MLC_SCRATCH_KEEP_MAX] = 3;
    mlc_scratch_give(&pool, huge);
    CHECK(atomic_load(&pool.cached) == NULL, "a block above MLC_SCRATCH_KEEP_MAX is not kept");

    mlc_scratch_drain(&pool);
    CHECK(atomic_load(&pool.cached) == NULL, "drained: nothing cached");
    mlc_scratch_drain(&pool); /* twice is harmless */

    /* No pool: every block is its own; a size no block can have fails. */
    unsigned char *own = mlc_scratch_take(NULL, 100);
    CHECK(own && aligned(own), "a block without a pool");
    mlc_scratch_give(NULL, own);
    mlc_scratch_give(&pool, NULL);
    CHECK(mlc_scratch_take(&pool, SIZE_MAX - 10) == NULL, "an impossible size gives NULL");

    /* Four threads at once on one cache. */
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, hammer, (void *)(uintptr_t)(i * 7919 + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&clashes) == 0, "%d checks saw a block another thread was writing", atomic_load(&clashes));
    mlc_scratch_drain(&shared);
    return unit_result("scratch");
}
