/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host memory the other processes of this host can map (mlc_mem_alloc):
 * each block is a memfd of its own, which a peer opens as
 * /proc/<pid>/fd/<fd> and maps read-only, so the shared-memory engine reads
 * a peer's buffer in place, with plain loads, instead of copying it through
 * a stage or with process_vm_readv (src/backends/engine/peer_mem.c).
 *
 * The process keeps a registry of its live blocks (which buffer of a call
 * lies in which block) and, in a memfd page of its own, a log of the blocks
 * it freed: a peer that still maps a freed block sees its id there and
 * unmaps it, so freed memory is not held by peers' stale mappings.
 * Thread-safe.
 */
#ifndef MLC_BASE_SHARED_MEM_H
#define MLC_BASE_SHARED_MEM_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mlcomm.h"

/* Where a buffer lies, as a peer needs it to map the block: size 0 = not in
 * a shared block. Fixed-size fields: it is published in shared memory. */
typedef struct mlc_shmem_ref {
    uint64_t id;     /* the block's number in its process, never reused */
    uint64_t base;   /* the block's address in its process */
    uint64_t size;   /* its bytes (whole pages) */
    uint64_t dev, ino; /* its memfd's device and inode: a reader checks the file it opened */
    uint64_t log_ino;
    int32_t fd;      /* the memfd, in the owner's process */
    int32_t log_fd;  /* the owner's free log (mlc_shmem_log_t) */
} mlc_shmem_ref_t;

/* The free log: the ids of the latest MLC_SHMEM_LOG blocks freed, block
 * number `frees - 1` in freed[(frees - 1) % MLC_SHMEM_LOG]. A reader that
 * fell further behind forgets every block of that process it maps. */
#define MLC_SHMEM_LOG 255
typedef struct mlc_shmem_log {
    atomic_uint_fast64_t frees;
    atomic_uint_fast64_t freed[MLC_SHMEM_LOG];
} mlc_shmem_log_t;

/* A new block of at least `bytes` bytes (0 counts as 1), page-aligned, zeroed. */
mlc_status_t mlc_shmem_alloc(size_t bytes, void **ptr);
/* Free a block from mlc_shmem_alloc: INVALID_ARG naming ptr when it is not one. */
mlc_status_t mlc_shmem_free(void *ptr);
/* Whether [p, p + len) lies in one live block; fills *ref if so. */
bool mlc_shmem_find(const void *p, size_t len, mlc_shmem_ref_t *ref);
#endif
