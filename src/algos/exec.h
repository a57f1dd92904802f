/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs a schedule over a backend's point-to-point operations, round by
 * round, without blocking: the caller's progress loop calls
 * mlc_exec_progress until it reports completion.
 */
#ifndef MLC_ALGOS_EXEC_H
#define MLC_ALGOS_EXEC_H
#include "base/scratch.h"
#include "sched.h"

/* The point-to-point operations a backend lends to the executor. Tags are
 * unique per (operation sequence number, message between two ranks) - see
 * mlc_exec_tag - and are carried in the backend's hidden internal context,
 * so they never match user receives. */
typedef struct mlc_transport {
    mlc_status_t (*isend)(void *tp, int peer, uint64_t tag, const void *buf, size_t bytes,
                          void **handle);
    mlc_status_t (*irecv)(void *tp, int peer, uint64_t tag, void *buf, size_t bytes,
                          void **handle);
    /* 1 when complete (handle released), 0 while pending, negative mlc_status_t on error
     * (handle released, message set with mlc_error). */
    int (*test)(void *tp, void *handle);
    /* Abandon a pending operation (handle released): true when its buffer is
     * no longer touched; false when the transport had to leave it running
     * (a send MPI cannot cancel), so its buffer may still be read. */
    bool (*cancel)(void *tp, void *handle);
} mlc_transport_t;

typedef struct mlc_exec mlc_exec_t;

/* The tag of a step's message: (seq << MLC_SCHED_KEY_BITS) | key, so it is
 * unique per (operation sequence number, message between two ranks) and the
 * same on both sides. Backends map it into their own tag space. */
static inline uint64_t mlc_exec_tag(uint64_t seq, uint32_t key)
{
    return (seq << MLC_SCHED_KEY_BITS) | key;
}

/*
 * Build the executor for one operation: bufs[MLC_BUF_SEND/RECV] are the
 * caller's buffers; TMP (s->tmp_bytes) is taken from `scratch` (the
 * communicator's, or NULL: allocated for this operation alone) and given
 * back by mlc_exec_destroy. For avg, the
 * executor divides recvbuf[0, avg_count) by avg_p when the schedule ends
 * (avg_count = 0: no division). Takes ownership of *s: on return (success
 * or not) *s is empty and may be freed or reused. Finalizes s if needed.
 * INTERNAL when a step reads a buffer that is NULL or writes sendbuf.
 */
mlc_status_t mlc_exec_create(mlc_sched_t *s, const void *sendbuf, void *recvbuf, mlc_dtype_t dtype,
                             mlc_op_t op, size_t avg_count, int avg_p, uint64_t seq,
                             mlc_scratch_t *scratch, mlc_exec_t **out);
/* Advance without blocking. Returns 1 when done, 0 while pending, negative on error
 * (the transport's status; later calls return it again). *progressed is set to 1 if
 * anything moved and left alone otherwise. */
int mlc_exec_progress(mlc_exec_t *x, const mlc_transport_t *t, void *tp, int *progressed);
/* Ranks whose steps are outstanding, e.g. "1, 3". */
void mlc_exec_pending_peers(const mlc_exec_t *x, char *buf, size_t len);
/* 1 if a posted step with `peer` is outstanding (the schedule waits for it). */
int mlc_exec_waits_for(const mlc_exec_t *x, int peer);
/* Cancel outstanding steps and free. */
void mlc_exec_destroy(mlc_exec_t *x, const mlc_transport_t *t, void *tp);
#endif
