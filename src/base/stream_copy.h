/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Copying with streaming (non-temporal) stores, for results far larger than
 * the caches. A plain store first reads the destination line into the cache
 * (read for ownership) and later writes it back: three line transfers per
 * line. A streaming store writes the line once and leaves the caches to
 * what the caller uses next; but a line a peer reads right after comes from
 * memory then, not from the cache (see the engine's use, docs/ENGINE.md).
 *
 * Streaming stores are not ordered with later stores: mlc_copy_stream ends
 * with a store fence, so a flag stored after it (release) is seen after
 * the data. Where the CPU has no streaming stores it is memcpy.
 */
#ifndef MLC_BASE_STREAM_COPY_H
#define MLC_BASE_STREAM_COPY_H

#include <stddef.h>

/* dst = src, n bytes (no overlap), streaming the whole 64-byte lines of dst. */
void mlc_copy_stream(void *dst, const void *src, size_t n);

#endif
