/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Guarded buffers: every buffer an operation touches has guard zones before
 * and after it, and an expected content (want) for the body. The body starts
 * as a stale pattern, so a region the call must not write keeps it, and a
 * region it must write cannot match by accident.
 *
 * DIFF_MEMORY says where buffers live: malloc (the default); shared, every
 * buffer in a block of mlc_mem_alloc (which peers on shm read in place);
 * mixed, each buffer one or the other by its tag (so ranks differ within
 * one call).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diff.h"

#define PRE_GUARD 64

static unsigned char guard_byte(size_t i) { return (unsigned char)(0xA5 ^ (i * 29)); }

static bool in_shared_block(uint64_t tag)
{
    const char *m = getenv("DIFF_MEMORY");
    if (!m || strcmp(m, "malloc") == 0) return false;
    if (strcmp(m, "shared") == 0) return true;
    if (strcmp(m, "mixed") == 0) return diff_hash3(tag, 0x5ea, 0) & 1;
    fprintf(stderr, "diff: DIFF_MEMORY=%s is none of malloc, shared, mixed\n", m);
    abort();
}

void diff_buf_alloc(diff_buf_t *b, const char *name, size_t bytes, size_t post_guard, uint64_t tag)
{
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->bytes = bytes;
    b->pre = PRE_GUARD;
    b->post = post_guard > 64 ? post_guard : 64;
    b->shared = in_shared_block(tag);
    if (b->shared) {
        if (mlc_mem_alloc(b->pre + bytes + b->post, (void **)&b->mem) != MLC_SUCCESS) {
            fprintf(stderr, "diff: mlc_mem_alloc of %zu bytes: %s\n", b->pre + bytes + b->post, mlc_last_error());
            abort();
        }
    } else {
        b->mem = malloc(b->pre + bytes + b->post);
    }
    b->want = malloc(bytes ? bytes : 1);
    if (!b->mem || !b->want) {
        fprintf(stderr, "diff: out of memory for %zu bytes\n", bytes);
        abort();
    }
    b->p = b->mem + b->pre;
    for (size_t i = 0; i < b->pre; i++) b->mem[i] = guard_byte(i);
    for (size_t i = 0; i < b->post; i++) b->p[bytes + i] = guard_byte(i + 7);
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t x = diff_hash3(tag, i, 0x57a1e);
        for (size_t k = 0; k < 8 && i + k < bytes; k++) b->p[i + k] = (unsigned char)(x >> (8 * k));
    }
    memcpy(b->want, b->p, bytes);
    b->check_body = true;
}

void diff_buf_free(diff_buf_t *b)
{
    if (b->shared) {
        if (mlc_mem_free(b->mem) != MLC_SUCCESS) {
            fprintf(stderr, "diff: mlc_mem_free: %s\n", mlc_last_error());
            abort();
        }
    } else {
        free(b->mem);
    }
    free(b->want);
    memset(b, 0, sizeof *b);
}

static void hex(const unsigned char *p, size_t n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used + 3 < len; i++) used += (size_t)snprintf(out + used, len - used, "%02x", p[i]);
}

int diff_buf_check(const diff_buf_t *b, size_t esize, char *out, size_t len)
{
    for (size_t i = 0; i < b->pre; i++)
        if (b->mem[i] != guard_byte(i)) {
            snprintf(out, len, "%s: guard byte %zu before the buffer was overwritten (0x%02x)", b->name,
                     b->pre - i, b->mem[i]);
            return 1;
        }
    size_t lastbad = SIZE_MAX, firstbad = SIZE_MAX;
    for (size_t i = 0; i < b->post; i++)
        if (b->p[b->bytes + i] != guard_byte(i + 7)) {
            if (firstbad == SIZE_MAX) firstbad = i;
            lastbad = i;
        }
    if (firstbad != SIZE_MAX) {
        snprintf(out, len, "%s (%zu bytes): guard bytes %zu..%zu after the buffer were overwritten", b->name,
                 b->bytes, firstbad, lastbad);
        return 1;
    }
    size_t lo = b->check_lo, hi = b->check_hi ? b->check_hi : b->bytes;
    if (!b->check_body || hi <= lo || memcmp(b->p + lo, b->want + lo, hi - lo) == 0) return 0;
    if (esize == 0) esize = 1;
    size_t n = b->bytes / esize, first = SIZE_MAX, ndiff = 0;
    for (size_t e = lo / esize; e < hi / esize; e++)
        if (memcmp(b->p + e * esize, b->want + e * esize, esize) != 0) {
            if (first == SIZE_MAX) first = e;
            ndiff++;
        }
    size_t show = esize < 16 ? esize : 16;
    char g[40], w[40];
    hex(b->p + first * esize, show, g, sizeof g);
    hex(b->want + first * esize, show, w, sizeof w);
    snprintf(out, len, "%s: element %zu (byte %zu) is 0x%s, expected 0x%s (%zu of %zu elements differ)", b->name,
             first, first * esize, g, w, ndiff, n);
    return 1;
}
