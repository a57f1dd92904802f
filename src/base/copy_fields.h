/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Copying a struct whose fields were stored one by one a moment ago.
 *
 * A plain struct copy reads 16 bytes at a time, and a load that spans two
 * earlier stores cannot take its data from the store buffer: it waits until
 * every older store has left the core. On the engine's hot path one of them
 * is usually the previous call's store to a cache line a peer is reading,
 * which waits for that line to come back (measured: about a quarter of a
 * 2-rank 8-byte broadcast root's time, at one such copy). Copied field by
 * field, each load lies inside one store and is forwarded at once.
 */
#ifndef MLC_BASE_COPY_FIELDS_H
#define MLC_BASE_COPY_FIELDS_H

/* dst->f = src->f; the empty asm keeps the compiler from merging this
 * field's load with its neighbours' into one wide load again. */
#define MLC_COPY_FIELD(dst, src, f)                                                                \
    do {                                                                                           \
        (dst)->f = (src)->f;                                                                       \
        __asm__ volatile("" ::: "memory");                                                         \
    } while (0)

#endif
