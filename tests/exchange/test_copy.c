/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit test: strided pack / unpack / local copy against a cell-by-cell reference. */
#include <stdint.h>
#include "exchange/copy.h"
#include "xunit.h"

/* Byte offset of cell c in an array holding `parent`, C order. */
static size_t ref_offset(const mlc_box_t *parent, const int64_t *c, size_t esize)
{
    size_t off = 0;
    for (int d = 0; d < parent->ndim; d++)
        off = off * (size_t)parent->shape[d] + (size_t)(c[d] - parent->start[d]);
    return off * esize;
}

/* Advance an odometer over `b`; 0 when it wraps. */
static int next_cell(const mlc_box_t *b, int64_t *c)
{
    for (int d = b->ndim - 1; d >= 0; d--) {
        if (++c[d] < b->start[d] + b->shape[d]) return 1;
        c[d] = b->start[d];
    }
    return 0;
}

static mlc_box_t random_box_in(uint64_t *seed, const mlc_box_t *outer)
{
    mlc_box_t b = *outer;
    for (int d = 0; d < outer->ndim; d++) {
        int64_t a = xrange(seed, 0, outer->shape[d] - 1);
        int64_t len = xrange(seed, 1, outer->shape[d] - a);
        /* Often span the whole axis, so that axes merge. */
        if (xrand(seed) % 3 == 0) {
            a = 0;
            len = outer->shape[d];
        }
        b.start[d] = outer->start[d] + a;
        b.shape[d] = len;
    }
    return b;
}

static int test_pack_unpack_random(void)
{
    static const size_t esizes[] = {1, 2, 3, 4, 8, 12, 16, 40};
    uint64_t seed = 99;
    for (int iter = 0; iter < 400; iter++) {
        int nd = (int)xrange(&seed, 1, 4);
        size_t esize = esizes[xrand(&seed) % (sizeof esizes / sizeof esizes[0])];
        mlc_box_t parent = {0}, parent2 = {0};
        parent.ndim = parent2.ndim = nd;
        for (int d = 0; d < nd; d++) {
            parent.start[d] = xrange(&seed, -5, 5);
            parent.shape[d] = xrange(&seed, 1, 7);
        }
        mlc_box_t region = random_box_in(&seed, &parent);
        /* A second array whose parent also contains region, with other margins. */
        for (int d = 0; d < nd; d++) {
            int64_t lo = xrange(&seed, 0, 2), hi = xrange(&seed, 0, 2);
            parent2.start[d] = region.start[d] - lo;
            parent2.shape[d] = region.shape[d] + lo + hi;
        }
        size_t n1 = esize, n2 = esize, nr = esize;
        for (int d = 0; d < nd; d++) {
            n1 *= (size_t)parent.shape[d];
            n2 *= (size_t)parent2.shape[d];
            nr *= (size_t)region.shape[d];
        }
        unsigned char *a = malloc(n1), *b = malloc(n2), *packed = malloc(nr + 16);
        CHECK(a && b && packed, "malloc");
        for (size_t i = 0; i < n1; i++) a[i] = (unsigned char)xrand(&seed);
        memset(b, 0xEE, n2);
        memset(packed, 0xEE, nr + 16);

        /* pack at offset 16 into a buffer: dense C order of the region */
        mlc_strided_t in_a = mlc_strided_in_array(&parent, &region, esize);
        mlc_strided_t pk = mlc_strided_packed(&region, esize, 16 - 16);
        mlc_copy_t c = mlc_copy_make(&region, esize, &in_a, &pk);
        CHECK(c.bytes == nr, "bytes %zu want %zu", c.bytes, nr);
        mlc_copy_run(&c, a, packed);
        int64_t cell[MLC_EXCHANGE_MAX_DIMS];
        for (int d = 0; d < nd; d++) cell[d] = region.start[d];
        size_t k = 0;
        do {
            CHECK(memcmp(packed + k, a + ref_offset(&parent, cell, esize), esize) == 0,
                  "iter %d: packed element %zu differs (nd %d esize %zu merged ndim %d)", iter,
                  k / esize, nd, esize, c.ndim);
            k += esize;
        } while (next_cell(&region, cell));
        CHECK(packed[nr] == 0xEE, "pack wrote past its block");

        /* unpack into the second array */
        mlc_strided_t in_b = mlc_strided_in_array(&parent2, &region, esize);
        mlc_copy_t u = mlc_copy_make(&region, esize, &pk, &in_b);
        mlc_copy_run(&u, packed, b);
        size_t inside = 0;
        for (int d = 0; d < nd; d++) cell[d] = parent2.start[d];
        do {
            const unsigned char *got = b + ref_offset(&parent2, cell, esize);
            int in_region = 1;
            for (int d = 0; d < nd; d++)
                in_region &= cell[d] >= region.start[d] && cell[d] < region.start[d] + region.shape[d];
            if (in_region) {
                inside++;
                CHECK(memcmp(got, a + ref_offset(&parent, cell, esize), esize) == 0,
                      "iter %d: unpacked element differs", iter);
            } else {
                for (size_t i = 0; i < esize; i++)
                    CHECK(got[i] == 0xEE, "iter %d: unpack wrote outside the region", iter);
            }
        } while (next_cell(&parent2, cell));
        CHECK(inside * esize == nr, "region cells");

        /* direct array-to-array copy gives the same as pack + unpack */
        memset(b, 0xEE, n2);
        mlc_copy_t l = mlc_copy_make(&region, esize, &in_a, &in_b);
        mlc_copy_run(&l, a, b);
        for (int d = 0; d < nd; d++) cell[d] = region.start[d];
        do {
            CHECK(memcmp(b + ref_offset(&parent2, cell, esize), a + ref_offset(&parent, cell, esize),
                         esize) == 0,
                  "iter %d: local copy differs", iter);
        } while (next_cell(&region, cell));
        free(a);
        free(b);
        free(packed);
    }
    return 0;
}

/* Whole rows merge into one run; a column is one element per run. */
static int test_merging(void)
{
    int64_t ps[3] = {0, 0, 0}, pe[3] = {4, 6, 8};
    mlc_box_t parent = mlc_box_make(3, ps, pe);
    int64_t rs[3] = {1, 0, 0}, re[3] = {2, 6, 8};
    mlc_box_t rows = mlc_box_make(3, rs, re);
    mlc_strided_t a = mlc_strided_in_array(&parent, &rows, 8);
    mlc_strided_t p = mlc_strided_packed(&rows, 8, 0);
    mlc_copy_t c = mlc_copy_make(&rows, 8, &a, &p);
    CHECK(c.ndim == 1 && c.run_bytes == 2 * 6 * 8 * 8, "slab of planes is one run: ndim %d run %zu",
          c.ndim, c.run_bytes);
    CHECK(c.src_offset == 6 * 8 * 8, "offset %lld", (long long)c.src_offset);
    int64_t cs[3] = {0, 0, 7}, ce[3] = {4, 6, 1};
    mlc_box_t col = mlc_box_make(3, cs, ce);
    a = mlc_strided_in_array(&parent, &col, 8);
    p = mlc_strided_packed(&col, 8, 0);
    c = mlc_copy_make(&col, 8, &a, &p);
    CHECK(c.ndim == 2 && c.run_bytes == 8 && c.shape[0] == 24,
          "column: the two outer axes merge (stride 64 over 6 rows): ndim %d run %zu shape0 %lld",
          c.ndim, c.run_bytes, (long long)c.shape[0]);
    return 0;
}

int main(void)
{
    int failures = 0;
    XRUN(test_merging);
    XRUN(test_pack_unpack_random);
    return failures ? 1 : 0;
}
