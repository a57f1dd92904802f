/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device buffers on the host backends (threads, shm, mpi): DESIGN.md,
 * "memory kind". A communicator whose memory kind is cuda, rocm or auto
 * gets an mlc_devmem_t; every call on it then classifies its buffers with
 * the GPU runtime and either
 *   - hands them to the backend as they are, when the backend moves device
 *     memory itself for this call (a CUDA-aware MPI: backend slots
 *     device_capable / device_direct, agreed across ranks at init), or
 *   - moves them between shm processes with CUDA IPC (stage_ipc.c), or
 *   - stages them through pinned host memory (stage.c): chunked and
 *     double-buffered, so the copies of one chunk overlap the transfer of
 *     the next.
 * A communicator of memory kind `host` has none of this and pays nothing.
 */
#ifndef MLC_GPU_DEVMEM_H
#define MLC_GPU_DEVMEM_H
#include <stdbool.h>
#include <stddef.h>
#include "core/comm.h"
#include "gpu/gpurt.h"

#define MLC_STAGE_CHUNK_DEFAULT mlc_env_default_size(MLC_ENV_STAGE_CHUNK) /* from the config table */

typedef struct mlc_stage mlc_stage_t;
typedef struct mlc_ipc_map mlc_ipc_map_t;

typedef struct mlc_devmem {
    /* Present on every rank once any rank has a GPU runtime: every rank then
     * runs its calls through the stage layer, so they cut them alike. */
    const mlc_gpurt_t *rt;  /* NULL on a rank without the runtime (memory auto): all its buffers are host */
    bool direct;            /* every rank's backend moves device memory itself (device_capable) */
    bool ipc;               /* every rank can map its peers' device memory (CUDA IPC, shm) */
    mlc_ipc_map_t *ipc_maps; /* peers' allocations mapped so far (ipc.c) */
    size_t chunk;           /* staging chunk, bytes (MLC_STAGE_CHUNK, the same on every rank) */
    void *own_stream;       /* created on first use when the user set none */
    mlc_stage_t *active;    /* staged operations in flight, in start order */
} mlc_devmem_t;

/*
 * Called by core when a communicator is created (collective: agrees with
 * the other ranks). Memory host: nothing. cuda / rocm: loads that runtime
 * (UNAVAILABLE with the reason when it cannot). auto: CUDA, then HIP, else
 * host buffers only.
 */
mlc_status_t mlc_devmem_setup(mlc_comm_t *comm);
/* A split's child inherits the parent's decisions (no collective). */
mlc_status_t mlc_devmem_inherit(mlc_comm_t *child, const mlc_comm_t *parent);
/* mlc_comm_init_all: every rank is in this process; no collective needed. */
mlc_status_t mlc_devmem_setup_local(int n, mlc_comm_t **comms);
/* Release (staged operations still in flight are abandoned safely). */
void mlc_devmem_free(mlc_comm_t *comm);

/* Whether ptr is device memory this rank must not touch from the host. */
mlc_status_t mlc_devmem_is_device(const mlc_comm_t *comm, const void *ptr, bool *device);
/* The stream staging copies run on: the user's (mlc_comm_set_stream) or our own. */
mlc_status_t mlc_devmem_stream(mlc_comm_t *comm, void **stream);

/*
 * Start the validated call `args` on a communicator with comm->dev:
 * direct, plain, or staged. Same contract as core's submit (out == NULL:
 * block until done).
 */
mlc_status_t mlc_stage_submit(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                              mlc_request_t **out);
/* Advance every staged operation of comm; *progressed |= 1 if one moved,
 * *gpu_wait = 1 if one waits on a GPU copy (the caller should not sleep long). */
mlc_status_t mlc_stage_progress(mlc_comm_t *comm, int *progressed, int *gpu_wait);
/* The request of a staged operation is released: free what it holds. */
void mlc_stage_release(mlc_request_t *req);
/* The communicator is freed: release the staging state of every operation still in flight. */
void mlc_stage_abandon_all(mlc_comm_t *comm);

/* core's submit without the device-buffer layer (api.c). */
mlc_status_t mlc_submit_plain(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                              mlc_request_t **out);
#endif
