/* SPDX-License-Identifier: BSD-3-Clause */
/* FNV-1a 64: layout hashes for the plan cache (not for security). */
#ifndef MLC_EXCHANGE_HASH_H
#define MLC_EXCHANGE_HASH_H
#include <stddef.h>
#include <stdint.h>
#include "mlcomm_exchange.h"

#define MLC_FNV_INIT 0xcbf29ce484222325ull

static inline uint64_t mlc_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static inline uint64_t mlc_fnv1a_u64(uint64_t h, uint64_t v) { return mlc_fnv1a(h, &v, sizeof v); }

/* Hash the ndim meaningful coordinates of a box (not the unused tail). */
static inline uint64_t mlc_fnv1a_box(uint64_t h, const mlc_box_t *b)
{
    h = mlc_fnv1a_u64(h, (uint64_t)b->ndim);
    for (int d = 0; d < b->ndim && d < MLC_EXCHANGE_MAX_DIMS; d++) {
        h = mlc_fnv1a_u64(h, (uint64_t)b->start[d]);
        h = mlc_fnv1a_u64(h, (uint64_t)b->shape[d]);
    }
    return h;
}
#endif
