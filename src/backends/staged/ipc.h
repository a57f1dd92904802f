/* SPDX-License-Identifier: BSD-3-Clause */
/* CUDA IPC between the shm backend's processes (ipc.c). */
#ifndef MLC_STAGED_IPC_H
#define MLC_STAGED_IPC_H
#include <stdbool.h>
#include <stdint.h>
#include "core/backend.h"
#include "devrt/gpurt.h"

typedef struct mlc_ipc_map mlc_ipc_map_t;

/* What a rank tells its peers about the buffer they read from it (exchanged by allgather). */
typedef struct mlc_ipc_rec {
    int32_t ok;      /* 1: exported (or nothing to export); 0: this rank's buffers rule IPC out */
    int32_t reserved;
    uint64_t offset; /* of the buffer in its allocation */
    mlc_gpu_ipc_handle_t handle;
    int32_t pid;     /* the exporting process ... */
    int32_t pad;
    uint64_t base, size; /* ... and its allocation there: a new handle for the same range is a new allocation */
} mlc_ipc_rec_t;

/* Mappings kept open for reuse, process-wide (least recently used closed first). */
#define MLC_IPC_CACHE_MAX 64

/* Whether this rank can use CUDA IPC on comm; why says why not. */
bool mlc_ipc_capable(const mlc_comm_t *comm, const mlc_gpurt_t *rt, char *why, size_t len);
/* This rank's half of the probe (stage_ipc.c runs it, collectively, at the first call
 * where every rank has device buffers): map every peer's record all[q] (a small
 * allocation each rank exported), then close the mapping, so the processes really can
 * share memory (containers may forbid it). false with why when one cannot be mapped. */
bool mlc_ipc_probe_map(const mlc_comm_t *comm, const mlc_gpurt_t *rt, const mlc_ipc_rec_t *all, char *why,
                       size_t len);
/* Fill rec for device pointer ptr (ok = 1). */
mlc_status_t mlc_ipc_export(const mlc_gpurt_t *rt, const void *ptr, mlc_ipc_rec_t *rec);
/*
 * Map peer's buffer described by rec (*ptr: where it is here) and hold the
 * mapping until mlc_ipc_release(*held). Mappings are cached process-wide by
 * (process, allocation address): a record with a new handle for a range
 * already mapped (the owner freed and allocated again there) closes the
 * stale mapping first, as does an overlapping one, since CUDA refuses to
 * map a range twice (cudaErrorAlreadyMapped).
 */
mlc_status_t mlc_ipc_open(const mlc_gpurt_t *rt, int peer, const mlc_ipc_rec_t *rec, char **ptr,
                          mlc_ipc_map_t **held);
void mlc_ipc_release(mlc_ipc_map_t *held);
/* Release and, when nobody else holds it, unmap now (memory its owner is about to free). */
void mlc_ipc_close(mlc_ipc_map_t *held);
#endif
