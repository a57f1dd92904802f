/* SPDX-License-Identifier: BSD-3-Clause */
/* Private to src/algos: the send and receive block layouts of alltoall(v). */
#ifndef MLC_ALGOS_A2A_H
#define MLC_ALGOS_A2A_H
#include "build.h"

typedef struct mlc_a2a {
    mlc_blocks_t send, recv; /* block j: what goes to / comes from rank j */
    mlc_buf_id_t src;        /* where the send blocks are: recvbuf when in place */
} mlc_a2a_t;

/* In place, the blocks to send are where the received ones go (recv layout). */
static inline void mlc_a2a_init(mlc_a2a_t *A, const mlc_coll_desc_t *d)
{
    mlc_blocks_t even = {d->count * (size_t)d->size, d->esize, d->size, NULL, NULL};
    bool v = d->coll == MLC_COLL_ALLTOALLV;
    mlc_blocks_t snd = {0, d->esize, d->size, d->counts, d->displs};
    mlc_blocks_t rcv = {0, d->esize, d->size, d->counts2, d->displs2};
    A->recv = v ? rcv : even;
    A->send = d->inplace ? A->recv : (v ? snd : even);
    A->src = d->inplace ? MLC_BUF_RECV : MLC_BUF_SEND;
}
#endif
