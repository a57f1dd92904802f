/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's scratch cache (base/scratch.h): a block given back is
 * the next one taken (no new allocation for back-to-back calls), a call
 * needing more gets a larger block that replaces it, operations in flight
 * together get distinct blocks, the cache keeps the larger of two given
 * back, every block is 64-byte aligned and writable over its whole size,
 * and draining empties it. Run under the sanitizers, no block leaks. */
#include <stdint.h>
#include <string.h>

#include "base/scratch.h"
#include "unit.h"

static int aligned(const void *p)
{
    return ((uintptr_t)p & 63) == 0;
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

    /* Two in flight: distinct blocks; the larger is the one kept. */
    unsigned char *small = mlc_scratch_take(&pool, 4096);
    CHECK(small && small != big, "an operation in flight beside another gets its own block");
    mlc_scratch_give(&pool, big);
    mlc_scratch_give(&pool, small);
    CHECK(mlc_scratch_take(&pool, 1) == big, "of two blocks given back the larger stays cached");
    small = mlc_scratch_take(&pool, 4096);
    mlc_scratch_give(&pool, small);
    mlc_scratch_give(&pool, big);
    CHECK(mlc_scratch_take(&pool, 1) == big, "the larger block replaces a smaller one cached");
    mlc_scratch_give(&pool, big);

    mlc_scratch_drain(&pool);
    CHECK(atomic_load(&pool.cached) == NULL, "drained: nothing cached");
    mlc_scratch_drain(&pool); /* twice is harmless */

    /* No pool: every block is its own; sizes no allocator can give fail. */
    unsigned char *own = mlc_scratch_take(NULL, 100);
    CHECK(own && aligned(own), "a block without a pool");
    mlc_scratch_give(NULL, own);
    mlc_scratch_give(&pool, NULL);
    CHECK(mlc_scratch_take(&pool, SIZE_MAX - 10) == NULL, "an impossible size gives NULL");
    return unit_result("scratch");
}
