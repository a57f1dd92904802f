/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strided copies between a region of a dense C-order array and a packed
 * buffer (pack/unpack) or another array (local copy). Descriptors are
 * computed once per plan; axes that are contiguous on both sides are merged,
 * so a region spanning whole rows moves with one memcpy per block.
 */
#ifndef MLC_EXCHANGE_COPY_H
#define MLC_EXCHANGE_COPY_H
#include <stddef.h>
#include <stdint.h>
#include "mlcomm_exchange.h"

/* One side of a copy: where a region lives in memory relative to a base pointer. */
typedef struct mlc_strided {
    int64_t offset;                          /* bytes from the base to the region's first element */
    int64_t stride[MLC_EXCHANGE_MAX_DIMS];   /* bytes between neighbours along each axis */
} mlc_strided_t;

/* A copy of `shape` elements between two strided sides, axes merged where possible. */
typedef struct mlc_copy {
    int ndim;                              /* >= 1; axis ndim-1 is contiguous on both sides */
    int64_t shape[MLC_EXCHANGE_MAX_DIMS];  /* elements per axis (after merging) */
    int64_t src_stride[MLC_EXCHANGE_MAX_DIMS], dst_stride[MLC_EXCHANGE_MAX_DIMS];
    int64_t src_offset, dst_offset;        /* bytes from each side's base */
    size_t run_bytes;                      /* bytes of one contiguous run (innermost axis) */
    size_t bytes;                          /* total bytes copied */
} mlc_copy_t;

/* Side of `region` inside an array holding `parent` (region inside parent). */
mlc_strided_t mlc_strided_in_array(const mlc_box_t *parent, const mlc_box_t *region,
                                   size_t esize);
/* Side of a dense packed block of region's shape starting `offset` bytes into a buffer. */
mlc_strided_t mlc_strided_packed(const mlc_box_t *region, size_t esize, int64_t offset);

/* Copy descriptor for `shape` (a region's shape) from src to dst. Non-empty shape. */
mlc_copy_t mlc_copy_make(const mlc_box_t *shape, size_t esize, const mlc_strided_t *src,
                         const mlc_strided_t *dst);

/* The odometer over the axes outside the innermost two-axis block: advance
 * *src / *dst (and idx, zeroed at the start) along axes outer-1 .. 0;
 * false once every block has been visited. Host and device copies share it. */
int mlc_copy_next_block(const mlc_copy_t *c, int outer, int64_t *idx, const unsigned char **src,
                        unsigned char **dst);

/* Perform the copy: bytes from src_base + src side to dst_base + dst side. */
void mlc_copy_run(const mlc_copy_t *c, const void *src_base, void *dst_base);
#endif
