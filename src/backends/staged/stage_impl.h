/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The stage layer's private state (stage.c: staging through pinned memory;
 * stage_ipc.c: CUDA IPC between shm processes). Not part of staged.h's
 * interface: only these two files include it.
 */
#ifndef MLC_STAGED_STAGE_IMPL_H
#define MLC_STAGED_STAGE_IMPL_H
#include <stdbool.h>
#include <stddef.h>
#include "core/backend.h"
#include "ipc.h"
#include "staged.h"

enum { SEND, RECV };
/*
 * CUDA IPC phases. Data movement: exchange the records, copy, barrier.
 * Reductions (allreduce, reduce_scatter): exchange, reduce this rank's
 * block (pull it from every rank, reduce on the host, push it back), and
 * for allreduce a barrier then copy the other ranks' reduced blocks; then
 * the closing barrier.
 */
enum { IPC_OFF, IPC_EXCHANGE, IPC_PROBE, IPC_REDUCE, IPC_HALF, IPC_GATHER, IPC_COPY, IPC_BARRIER };
/* The records each rank sends: the buffer peers read, allreduce's recvbuf, and (until the
 * communicator's probe has succeeded) a small allocation of its own for the probe. */
enum { REC_SOURCE, REC_RECV, REC_PROBE, IPC_NRECS };
typedef enum { L_NONE, L_FLAT, L_BLOCKS } layout_t;
typedef enum { S_FREE, S_IN, S_RUN, S_OUT } pinbuf_state_t;

/* How a collective's two buffers are shaped. */
typedef struct shape {
    layout_t lay[2];    /* chunkable collectives; L_NONE: staged whole */
    bool send_primary;  /* in place: recv lies inside send (else send inside recv) */
    bool by_root;       /* in place: the block is the root's, else this rank's */
} shape_t;

typedef struct role {
    char *user;     /* the caller's buffer; NULL: this rank has none for this call */
    bool device;    /* device memory (never touched from the host) */
    bool derived;   /* in place: it lies inside the other buffer */
    bool pinned;   /* has staging buffers of its own (pinned when the role is device memory) */
    size_t nblk;    /* blocks (1 or comm size) */
    size_t whole;   /* staged whole: bytes of the extent */
    char *pin[2];
} role_t;

typedef struct pinbuf {
    pinbuf_state_t state;
    size_t chunk;
    void *ev;       /* the copy in or out of this pinned buffer */
    bool ev_live;   /* recorded and not yet seen complete */
    mlc_request_t *sub;
    mlc_msg_status_t msg;
} pinbuf_t;

struct mlc_stage {
    mlc_request_t *req; /* the caller's request */
    mlc_stage_t *next;
    mlc_comm_t *comm;
    int comm_call; /* the communicator call this op is part of (comm.h): its sub-operations, started later, carry it */
    mlc_coll_t coll;
    const mlc_gpurt_t *rt;
    void *stream;
    mlc_args_t args;    /* the caller's */
    role_t role[2];
    shape_t shape;
    bool chunked;
    size_t count, per, nchunks, kblk;
    size_t whole[2];     /* staged whole: bytes of each buffer's extent */
    size_t next_chunk, next_start, ndone;
    int npinbufs;
    pinbuf_t pinbufs[2];
    bool finished;
    /* CUDA IPC */
    int ipc_phase;       /* IPC_*; IPC_OFF: staged (also after the exchange ruled IPC out) */
    bool ipc_issued;     /* the closing barrier is started */
    mlc_request_t *ipc_sub;
    pinbuf_t ipc_pinbuf;     /* its event tracks the copies */
    mlc_ipc_rec_t ipc_mine[IPC_NRECS], *ipc_all; /* REC_*; IPC_NRECS per rank */
    void *probe_mem;      /* this rank's allocation for the probe (NULL: none) */
    int32_t probe_bad, probe_any_bad; /* this rank could not map a peer's; any rank could not */
    const char **ipc_ptr; /* where each of those is mapped here (2 per rank; NULL: not needed) */
    mlc_ipc_map_t **ipc_held; /* the mappings this operation holds (ipc_nheld; NULL: none) */
    int ipc_nheld;
    /* CUDA IPC reductions: this rank's block, elements [red_lo, red_lo + red_len) of every
     * rank's sendbuf, pulled in sub-chunks of red_sub elements into two pinned buffers */
    size_t red_lo, red_len, red_sub, red_nsub, red_pulled, red_reduced;
    char *red_pin[2];
    pinbuf_t red_pinbuf[2];
};

/* stage.c's helpers for stage_ipc.c. */
mlc_status_t mlc_stage_copy(mlc_stage_t *op, bool device, void *dst, const void *src, size_t n);
mlc_status_t mlc_stage_record(mlc_stage_t *op, pinbuf_t *s);
int mlc_stage_copy_done(mlc_stage_t *op, pinbuf_t *s, int *gpu_wait);
void mlc_stage_drop_event(const mlc_stage_t *op, pinbuf_t *s);
mlc_status_t mlc_stage_start_internal(mlc_stage_t *op, mlc_coll_t coll, const mlc_args_t *a, size_t bytes,
                                      mlc_request_t **sub);
mlc_status_t mlc_stage_take_sub(mlc_request_t **psub);
void mlc_stage_fail_op(mlc_stage_t *op, mlc_status_t st);
bool mlc_stage_earlier_pending(const mlc_stage_t *op);
mlc_status_t mlc_stage_alloc_pinbufs(mlc_stage_t *op);
void mlc_stage_replan_as_is(mlc_stage_t *op);

/* stage_ipc.c */
bool mlc_stage_ipc_wanted(mlc_coll_t coll, const mlc_args_t *a);
/* Prepare op for the IPC path (this rank's records); errors are reported, unusable buffers are not. */
mlc_status_t mlc_stage_ipc_prepare(mlc_stage_t *op);
/* 1 if anything moved; leaves ipc_phase IPC_OFF when the call goes on staged. */
int mlc_stage_ipc_advance(mlc_stage_t *op, int *gpu_wait);
/* Events and memory of the IPC path (events first: a copy may still use the memory). */
void mlc_stage_ipc_free(mlc_stage_t *op);
#endif
