/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strided block copies: the layout change between "one contiguous block per
 * rank" (what mlc_allgather/mlc_reduce_scatter move) and "shards side by
 * side along dimension d" of a row-major tensor.
 *
 * A tensor of shape [A..., D, B...] is, in memory, outer = prod(A) rows of
 * D * inner elements (inner = prod(B)). Rank r's shard along d covers
 * columns [off_r, off_r + d_r) of every row: outer pieces of d_r * inner
 * elements, a stride of D * inner apart.
 */
#include <string.h>
#include "tensor_internal.h"

void mlc_tcopy_run(const mlc_tcopy_t *c, const void *src, void *dst)
{
    const unsigned char *s = src;
    unsigned char *d = dst;
    /* Row by row, so that the destination is written front to back. */
    for (size_t o = 0; o < c->outer; o++) {
        for (int j = 0; j < c->nparts; j++) {
            const mlc_tcopy_part_t *p = &c->parts[j];
            if (p->len == 0) continue;
            memcpy(d + p->dst_off + o * p->dst_stride, s + p->src_off + o * p->src_stride, p->len);
        }
    }
}

void mlc_tcopy_plan_concat(size_t outer, size_t inner_bytes, const size_t *d, const size_t *block_off,
                           int p, mlc_tcopy_part_t *parts, mlc_tcopy_t *c)
{
    size_t total = 0, col = 0;
    for (int r = 0; r < p; r++) total += d[r];
    for (int r = 0; r < p; r++) {
        size_t row = d[r] * inner_bytes;
        parts[r] = (mlc_tcopy_part_t){.src_off = block_off[r],
                                      .src_stride = row,
                                      .dst_off = col * inner_bytes,
                                      .dst_stride = total * inner_bytes,
                                      .len = row};
        col += d[r];
    }
    *c = (mlc_tcopy_t){.outer = outer, .nparts = p, .parts = parts};
}

void mlc_tcopy_plan_split(size_t outer, size_t inner_bytes, const size_t *d, const size_t *block_off,
                          int p, mlc_tcopy_part_t *parts, mlc_tcopy_t *c)
{
    size_t total = 0, col = 0;
    for (int r = 0; r < p; r++) total += d[r];
    for (int r = 0; r < p; r++) {
        size_t row = d[r] * inner_bytes;
        parts[r] = (mlc_tcopy_part_t){.src_off = col * inner_bytes,
                                      .src_stride = total * inner_bytes,
                                      .dst_off = block_off[r],
                                      .dst_stride = row,
                                      .len = row};
        col += d[r];
    }
    *c = (mlc_tcopy_t){.outer = outer, .nparts = p, .parts = parts};
}
