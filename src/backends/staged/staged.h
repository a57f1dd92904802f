/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The staged backend: device buffers on the host backends (threads, shm,
 * mpi). It is a decorator: when a communicator's memory kind is cuda, rocm
 * or auto and its backend is not device-native (nccl, rccl are), comm
 * creation wraps the backend's table with this one (mlc_decorator_staged,
 * src/core/backend.h). The wrapper forwards every entry to the backend it
 * wraps, except that it takes whole calls first (`submit`), classifies
 * their buffers with the GPU runtime and either
 *   - hands them to the backend as they are, when the backend moves device
 *     memory itself for this call (a CUDA-aware MPI: backend entries
 *     device_capable / device_direct, agreed across ranks at init), or
 *   - moves them between shm processes with CUDA IPC (stage_ipc.c), or
 *   - stages them through pinned host memory (stage.c): chunked and
 *     double-buffered, so the copies of one chunk overlap the transfer of
 *     the next.
 * A communicator of memory kind `host` is never wrapped and pays nothing.
 */
#ifndef MLC_STAGED_H
#define MLC_STAGED_H
#include <stdbool.h>
#include <stddef.h>
#include "core/backend.h"
#include "devrt/gpurt.h"

#define MLC_STAGE_CHUNK_DEFAULT mlc_env_default_size(MLC_ENV_STAGE_CHUNK) /* from the config table */

typedef struct mlc_stage mlc_stage_t;

typedef struct mlc_devmem {
    /* Present on every rank once any rank has a GPU runtime: every rank then
     * runs its calls through the stage layer, so they cut them alike. */
    const mlc_gpurt_t *rt;  /* NULL on a rank without the runtime (memory auto): all its buffers are host */
    bool direct;            /* every rank's backend moves device memory itself (device_capable) */
    bool ipc;               /* every rank may map its peers' device memory (CUDA IPC, shm); false
                               once the probe found they cannot */
    bool ipc_probed;        /* the probe (stage_ipc.c, first call with device buffers on every
                               rank) found that they can */
    bool device_seen;       /* a call had device buffers here: the device may be made current */
    size_t chunk;           /* staging chunk, bytes (MLC_STAGE_CHUNK, the same on every rank) */
    int device;             /* the communicator's device (mlc_gpu_choose_device at creation; made
                               current, and streams, events and copies made there, only once
                               device buffers are seen) */
    void *stream;           /* the user's (mlc_comm_set_stream; NULL: the legacy default stream) */
    bool stream_set;        /* mlc_comm_set_stream was called */
    void *own_stream;       /* created on first use when the user set none */
    mlc_stage_t *active;    /* staged operations in flight, in start order */
    int gpu_wait;           /* the last progress call found a staged operation waiting on a GPU copy */
} mlc_devmem_t;

/* A wrapped communicator's table and state (comm->be points to `table`). */
typedef struct mlc_staged {
    mlc_backend_t table;       /* the wrapped backend's, with the entries below replaced */
    uint32_t magic;            /* MLC_STAGED_MAGIC */
    const mlc_backend_t *inner; /* the wrapped backend */
    mlc_devmem_t dev;
} mlc_staged_t;

#define MLC_STAGED_MAGIC 0x53544744u /* "STGD" */

/* comm's staged state, or NULL when comm is not wrapped. */
mlc_staged_t *mlc_staged_of(const mlc_comm_t *comm);
static inline mlc_devmem_t *mlc_devmem_of(const mlc_comm_t *comm)
{
    mlc_staged_t *w = mlc_staged_of(comm);
    return w ? &w->dev : NULL;
}

/* Wrap comm (devmem.c decides whether, then staged.c builds the table); device: the
 * chosen one (-1: none, no runtime on this rank). Makes no GPU call. */
mlc_status_t mlc_staged_wrap(mlc_comm_t *comm, const mlc_gpurt_t *rt, bool direct, bool ipc, int device);
/* The device-memory state of a wrapped communicator is released. */
void mlc_devmem_release(mlc_devmem_t *d);

/* Whether ptr is device memory this rank must not touch from the host. */
mlc_status_t mlc_devmem_is_device(const mlc_comm_t *comm, const void *ptr, bool *device);
/* The stream staging copies run on: the user's (mlc_comm_set_stream) or our own. */
mlc_status_t mlc_devmem_stream(mlc_comm_t *comm, void **stream);
/* Wait (blocking) until the work queued so far on the communicator's stream is done
 * (and, through it, earlier work of the legacy default stream). */
mlc_status_t mlc_devmem_sync(mlc_comm_t *comm);
/*
 * Make the communicator's device current on this thread for a staged entry
 * point, once a call has had device buffers here (before that nothing is
 * made current: a host-only job creates no context); returns what
 * mlc_devmem_leave needs to restore the thread's own (only when the thread
 * had a context: restoring device 0 on a thread that never used one would
 * create a context there).
 */
int mlc_devmem_enter(const mlc_comm_t *comm);
void mlc_devmem_leave(const mlc_comm_t *comm, int prev);

/*
 * Start the validated call `args` on a wrapped communicator: direct, plain,
 * or staged. The backend table's `submit` (out == NULL: block until done).
 */
mlc_status_t mlc_stage_submit(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                              mlc_request_t **out);
/* Advance every staged operation of comm; *progressed |= 1 if one moved,
 * *gpu_wait = 1 if one waits on a GPU copy (the caller should not sleep long). */
mlc_status_t mlc_stage_progress(mlc_comm_t *comm, int *progressed, int *gpu_wait);
/* The sub-operation a staged operation's request waits for now, or NULL. */
const mlc_request_t *mlc_stage_current_sub(const mlc_request_t *req);
/* The request of a staged operation is released: free what it holds. */
void mlc_stage_release(mlc_request_t *req);
/* The communicator is freed: release the staging state of every operation still in flight. */
void mlc_stage_abandon_all(mlc_comm_t *comm);
#endif
