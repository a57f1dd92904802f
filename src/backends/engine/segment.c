/* SPDX-License-Identifier: BSD-3-Clause */
/* Segment layout: header, per-rank control blocks, ring headers, CMA matrix,
 * direct-collective slots, stages, ring data. */
#include <string.h>
#include <unistd.h>
#include "engine.h"

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* Ring size per ordered pair: large rings for few ranks (the streaming path
 * carries whole messages when single-copy is unavailable), smaller as the
 * number of pairs grows so the segment stays bounded: 256 MiB of rings up to
 * 256 ranks, one page per pair beyond (a heap segment commits only the pages
 * of the pairs that talk, see threads.c). */
static size_t ring_size_for(int n)
{
    size_t pairs = (size_t)n * (size_t)n;
    size_t r = (size_t)1 << 20; /* 1 MiB */
    while (r > ((size_t)4 << 10) && pairs * r > ((size_t)256 << 20)) r >>= 1;
    return r;
}

/* Slot areas: one per communicator, up to 32 and 64 MiB in all (a slot is
 * ~48 KiB, mostly its announcements: fewer above 42 ranks). */
static uint32_t slot_areas_for(int n)
{
    size_t per_area = sizeof(eng_slot_t) * (size_t)n;
    size_t areas = ((size_t)64 << 20) / per_area;
    return (uint32_t)(areas > ENG_MAX_AREAS ? ENG_MAX_AREAS : areas);
}

/* Stages (direct.c): for the first slot areas, at most 16 MiB in all. Each
 * rank's stage is as deep as lets STAGES_WANTED communicators have one,
 * from 4 chunks (256 KiB) to 32 (2 MiB): 2 ranks 2 MiB each, 4 ranks 1 MiB,
 * 8 ranks 512 KiB, 16 to 64 ranks 256 KiB (4, 2, 1 communicators), more:
 * none; one rank none (every staged path needs a peer). A communicator
 * without stages takes the single-copy paths (without single copy, the
 * rings). A deep stage for a few communicators beat a shallow one for many
 * (with 256 KiB, 2 ranks had 16): docs/ENGINE.md, stage depth. */
#define STAGES_MAX ((size_t)16 << 20)
#define STAGES_WANTED 4
#define STAGE_MIN_BYTES (ENG_STAGE_CHUNK * 4)
#define STAGE_MAX_BYTES (ENG_STAGE_CHUNK * 32)
static size_t stage_bytes_for(int n)
{
    size_t b = STAGE_MAX_BYTES;
    while (b > STAGE_MIN_BYTES && b * (size_t)n * STAGES_WANTED > STAGES_MAX) b >>= 1;
    return b;
}

static uint32_t stage_areas_for(int n, bool stages)
{
    if (!stages || n < 2) return 0;
    size_t areas = STAGES_MAX / (stage_bytes_for(n) * (size_t)n);
    uint32_t slots = slot_areas_for(n);
    return areas < slots ? (uint32_t)areas : slots;
}

size_t eng_seg_size(int n, bool stages, size_t *ring_bytes)
{
    size_t r = ring_size_for(n);
    size_t off = ALIGN_UP(sizeof(eng_seg_t), 4096);
    off += ALIGN_UP(sizeof(eng_ctl_t) * (size_t)n, 4096);
    off += ALIGN_UP(sizeof(eng_ring_hdr_t) * (size_t)n * (size_t)n, 4096);
    off += ALIGN_UP((size_t)n * (size_t)n, 4096);
    off += ALIGN_UP(sizeof(eng_slot_t) * (size_t)n * slot_areas_for(n), 4096);
    off += stage_bytes_for(n) * (size_t)n * stage_areas_for(n, stages);
    off += r * (size_t)n * (size_t)n;
    *ring_bytes = r;
    return off;
}

void eng_seg_format(eng_seg_t *seg, int n, bool stages, bool cma_slow, size_t r, size_t total)
{
    memset(seg, 0, sizeof *seg);
    seg->nranks = (uint32_t)n;
    seg->ring_bytes = r;
    seg->total_bytes = total;
    seg->cma_slow = cma_slow;
    size_t off = ALIGN_UP(sizeof(eng_seg_t), 4096);
    seg->ctl_off = off;
    off += ALIGN_UP(sizeof(eng_ctl_t) * (size_t)n, 4096);
    seg->ring_hdr_off = off;
    off += ALIGN_UP(sizeof(eng_ring_hdr_t) * (size_t)n * (size_t)n, 4096);
    seg->cma_off = off;
    off += ALIGN_UP((size_t)n * (size_t)n, 4096);
    seg->slot_off = off;
    seg->slot_areas = slot_areas_for(n);
    off += ALIGN_UP(sizeof(eng_slot_t) * (size_t)n * seg->slot_areas, 4096);
    seg->stage_off = off;
    seg->stage_areas = stage_areas_for(n, stages);
    seg->stage_bytes = stage_bytes_for(n);
    off += seg->stage_bytes * (size_t)n * seg->stage_areas;
    seg->ring_data_off = off;
    /* ctl blocks, ring headers and the CMA matrix start zeroed (fresh memory). */
    atomic_store_explicit(&seg->nattached, 0, memory_order_relaxed);
    /* Publish the magic last: attachers wait for it. */
    atomic_store_explicit(&seg->magic, ENG_MAGIC, memory_order_release);
}
