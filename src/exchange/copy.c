/* SPDX-License-Identifier: BSD-3-Clause */
/* Strided copy kernels for pack, unpack and local copies. */
#include "copy.h"
#include <string.h>

mlc_strided_t mlc_strided_in_array(const mlc_box_t *parent, const mlc_box_t *region, size_t esize)
{
    mlc_strided_t s = {0};
    int64_t stride = (int64_t)esize;
    for (int d = parent->ndim - 1; d >= 0; d--) {
        s.stride[d] = stride;
        s.offset += (region->start[d] - parent->start[d]) * stride;
        stride *= parent->shape[d];
    }
    return s;
}

mlc_strided_t mlc_strided_packed(const mlc_box_t *region, size_t esize, int64_t offset)
{
    mlc_strided_t s = {0};
    int64_t stride = (int64_t)esize;
    s.offset = offset;
    for (int d = region->ndim - 1; d >= 0; d--) {
        s.stride[d] = stride;
        stride *= region->shape[d];
    }
    return s;
}

mlc_copy_t mlc_copy_make(const mlc_box_t *shape, size_t esize, const mlc_strided_t *src,
                         const mlc_strided_t *dst)
{
    mlc_copy_t c = {0};
    c.src_offset = src->offset;
    c.dst_offset = dst->offset;
    /* Build from the innermost axis outward, merging axis d into the current
     * outermost merged axis when both sides step exactly over it. Axes of
     * extent 1 are skipped (their stride never matters). */
    int64_t sh[MLC_EXCHANGE_MAX_DIMS], ss[MLC_EXCHANGE_MAX_DIMS], ds[MLC_EXCHANGE_MAX_DIMS];
    int n = 0;
    int nd = shape->ndim;
    /* Innermost axis: contiguous by construction (stride esize on both sides). */
    sh[0] = shape->shape[nd - 1];
    ss[0] = src->stride[nd - 1];
    ds[0] = dst->stride[nd - 1];
    n = 1;
    for (int d = nd - 2; d >= 0; d--) {
        int64_t ext = shape->shape[d];
        int m = n - 1; /* current outermost merged axis */
        if (ext == 1) continue;
        if (src->stride[d] == ss[m] * sh[m] && dst->stride[d] == ds[m] * sh[m]) {
            sh[m] *= ext;
            continue;
        }
        sh[n] = ext;
        ss[n] = src->stride[d];
        ds[n] = dst->stride[d];
        n++;
    }
    /* Stored outermost first, as the arrays are. */
    c.ndim = n;
    for (int i = 0; i < n; i++) {
        c.shape[i] = sh[n - 1 - i];
        c.src_stride[i] = ss[n - 1 - i];
        c.dst_stride[i] = ds[n - 1 - i];
    }
    /* The innermost merged axis keeps stride esize on both sides. */
    c.run_bytes = (size_t)c.shape[n - 1] * esize;
    uint64_t total = esize;
    for (int d = 0; d < shape->ndim; d++) total *= (uint64_t)shape->shape[d];
    c.bytes = (size_t)total;
    return c;
}

/* Copy `count` runs of `run` bytes; constant sizes let the compiler inline the moves. */
#define MLC_RUN_LOOP(run)                                                 \
    for (int64_t i = 0; i < count; i++) {                                 \
        memcpy(d + i * dstep, s + i * sstep, run);                        \
    }

static void copy_runs(unsigned char *d, const unsigned char *s, int64_t count, int64_t dstep,
                      int64_t sstep, size_t run)
{
    switch (run) {
    case 1: MLC_RUN_LOOP(1); break;
    case 2: MLC_RUN_LOOP(2); break;
    case 4: MLC_RUN_LOOP(4); break;
    case 8: MLC_RUN_LOOP(8); break;
    case 16: MLC_RUN_LOOP(16); break;
    case 24: MLC_RUN_LOOP(24); break;
    case 32: MLC_RUN_LOOP(32); break;
    default: MLC_RUN_LOOP(run); break;
    }
}

void mlc_copy_run(const mlc_copy_t *c, const void *src_base, void *dst_base)
{
    const unsigned char *src = (const unsigned char *)src_base + c->src_offset;
    unsigned char *dst = (unsigned char *)dst_base + c->dst_offset;
    if (c->bytes == 0) return;
    if (c->ndim == 1) {
        memcpy(dst, src, c->run_bytes);
        return;
    }
    /* The axis just outside the run is the inner loop (copy_runs); an
     * odometer walks the axes outside that. */
    int outer = c->ndim - 2;
    int64_t idx[MLC_EXCHANGE_MAX_DIMS] = {0};
    do {
        copy_runs(dst, src, c->shape[outer], c->dst_stride[outer], c->src_stride[outer],
                  c->run_bytes);
    } while (mlc_copy_next_block(c, outer, idx, &src, &dst));
}

int mlc_copy_next_block(const mlc_copy_t *c, int outer, int64_t *idx, const unsigned char **src,
                        unsigned char **dst)
{
    for (int d = outer - 1; d >= 0; d--) {
        *src += c->src_stride[d];
        *dst += c->dst_stride[d];
        if (++idx[d] < c->shape[d]) return 1;
        *src -= c->src_stride[d] * c->shape[d];
        *dst -= c->dst_stride[d] * c->shape[d];
        idx[d] = 0;
    }
    return 0;
}
