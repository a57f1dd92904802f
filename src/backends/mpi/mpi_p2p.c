/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Point-to-point on the user communicator: send, recv, sendrecv, iprobe.
 * Messages travel as bytes (every dtype, records included); a message above
 * the count limit travels as one big datatype, or through MPI-4's
 * large-count calls where the library has them. Receives match in MPI's
 * order (any source, any tag) and never let a message write outside the
 * user's buffer: the size is probed first, or the receive is posted with a
 * type bounded by the buffer (mpi_recv_size.c).
 */
#include <limits.h>
#include <stdio.h>
#include "mpi_impl.h"

/* Blocking call when mreq is NULL, else the nonblocking one. */
#define MLC_MPI_P2P(mreq, Name, IName, ...) ((mreq) ? IName(__VA_ARGS__, mreq) : Name(__VA_ARGS__))

int mlc_mpi_isend_bytes(mlc_mpi_op_t *op, const void *buf, size_t n, int peer, int tag, MPI_Comm comm,
                        MPI_Request *mreq)
{
    if (n <= mlc_mpi_limits.count)
        return MLC_MPI_P2P(mreq, MPI_Send, MPI_Isend, buf, (int)n, MPI_BYTE, peer, tag, comm);
#if MLC_MPI_HAS_LARGE_COUNT
    if (mlc_mpi_use_c())
        return MLC_MPI_P2P(mreq, MPI_Send_c, MPI_Isend_c, buf, (MPI_Count)n, MPI_BYTE, peer, tag, comm);
#endif
    MPI_Datatype big;
    int rc = mlc_mpi_big_type(n, MPI_BYTE, 1, &big);
    if (rc != MPI_SUCCESS) return rc;
    if (mlc_mpi_op_keep_type(op, big) != MLC_SUCCESS) return MPI_ERR_TYPE;
    return MLC_MPI_P2P(mreq, MPI_Send, MPI_Isend, buf, 1, big, peer, tag, comm);
}

/* Blocking receives (mreq NULL) leave their status in op->recv_status. */
int mlc_mpi_irecv_bytes(mlc_mpi_op_t *op, void *buf, size_t n, int peer, int tag, MPI_Comm comm,
                        MPI_Request *mreq, MPI_Datatype *type_used)
{
    *type_used = MPI_BYTE;
    MPI_Status *st = &op->recv_status;
    if (n <= mlc_mpi_limits.count)
        return mreq ? MPI_Irecv(buf, (int)n, MPI_BYTE, peer, tag, comm, mreq)
                    : MPI_Recv(buf, (int)n, MPI_BYTE, peer, tag, comm, st);
#if MLC_MPI_HAS_LARGE_COUNT
    if (mlc_mpi_use_c())
        return mreq ? MPI_Irecv_c(buf, (MPI_Count)n, MPI_BYTE, peer, tag, comm, mreq)
                    : MPI_Recv_c(buf, (MPI_Count)n, MPI_BYTE, peer, tag, comm, st);
#endif
    MPI_Datatype big;
    int rc = mlc_mpi_big_type(n, MPI_BYTE, 1, &big);
    if (rc != MPI_SUCCESS) return rc;
    if (mlc_mpi_op_keep_type(op, big) != MLC_SUCCESS) return MPI_ERR_TYPE;
    *type_used = big;
    return mreq ? MPI_Irecv(buf, 1, big, peer, tag, comm, mreq) : MPI_Recv(buf, 1, big, peer, tag, comm, st);
}

/* Blocking receives (mreq NULL) leave their status in op->recv_status. */
int mlc_mpi_imrecv_bytes(mlc_mpi_op_t *op, void *buf, size_t n, MPI_Message *msg, MPI_Request *mreq,
                         MPI_Datatype *type_used)
{
    *type_used = MPI_BYTE;
    MPI_Status *st = &op->recv_status;
    if (n <= mlc_mpi_limits.count)
        return mreq ? MPI_Imrecv(buf, (int)n, MPI_BYTE, msg, mreq) : MPI_Mrecv(buf, (int)n, MPI_BYTE, msg, st);
#if MLC_MPI_HAS_LARGE_COUNT
    if (mlc_mpi_use_c())
        return mreq ? MPI_Imrecv_c(buf, (MPI_Count)n, MPI_BYTE, msg, mreq)
                    : MPI_Mrecv_c(buf, (MPI_Count)n, MPI_BYTE, msg, st);
#endif
    MPI_Datatype big;
    int rc = mlc_mpi_big_type(n, MPI_BYTE, 1, &big);
    if (rc != MPI_SUCCESS) return rc;
    if (mlc_mpi_op_keep_type(op, big) != MLC_SUCCESS) return MPI_ERR_TYPE;
    *type_used = big;
    return mreq ? MPI_Imrecv(buf, 1, big, msg, mreq) : MPI_Mrecv(buf, 1, big, msg, st);
}

size_t mlc_mpi_received_bytes(const MPI_Status *st, MPI_Datatype type)
{
    MPI_Count n = 0;
    if (MPI_Get_elements_x(st, type, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0) return 0;
    return (size_t)n;
}

static int src_of(int peer) { return peer == MLC_ANY_SOURCE ? MPI_ANY_SOURCE : peer; }
static int tag_of(int tag) { return tag == MLC_ANY_TAG ? MPI_ANY_TAG : tag; }

/* A blocking receive is over: record it as the finished receive of op. */
static void blocking_recv_done(mlc_mpi_op_t *op, int rc)
{
    int cls = rc;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    op->recv_status.MPI_ERROR = cls == MPI_ERR_TRUNCATE ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
    op->recv_index = -1; /* reported by op_finish, no request behind it */
}

mlc_status_t mlc_mpi_start_send(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_comm_t *c = req->comm->impl;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    int rc = mlc_mpi_isend_bytes(op, a->sendbuf, a->count * a->esize, a->root, a->tag, c->comm,
                                 blk ? NULL : mlc_mpi_op_next_req(op));
    if (rc != MPI_SUCCESS) {
        mlc_mpi_op_discard(op);
        return mlc_mpi_error(rc, "rank %d: send of %zu bytes to rank %d (tag %d)", req->comm->rank,
                             a->count * a->esize, a->root, a->tag);
    }
    return mlc_mpi_op_submit(op);
}

/* Post op's receive, blocking when blk (mpi_recv_size.c: nothing lands outside buf). */
static mlc_status_t post_recv(mlc_mpi_op_t *op, void *buf, size_t cap, int peer, int tag, bool blk)
{
    mlc_request_t *req = op->req;
    mlc_mpi_comm_t *c = req->comm->impl;
    op->recv_cap = cap;
    op->recv_status.MPI_SOURCE = peer; /* what a failed call that writes no status reports */
    op->recv_status.MPI_TAG = tag;
    int rc = mlc_mpi_recv_bounded(op, buf, cap, src_of(peer), tag_of(tag), c->comm,
                                  blk ? NULL : mlc_mpi_op_next_req(op), req->blocking);
    int cls = rc;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (rc != MPI_SUCCESS && !(blk && cls == MPI_ERR_TRUNCATE))
        return mlc_mpi_error(rc, "rank %d: %s of up to %zu bytes from rank %d (tag %d)", req->comm->rank,
                             mlc_core->coll_name(req->coll), cap, peer, tag);
    if (blk) blocking_recv_done(op, rc);
    else op->recv_index = op->nreq;
    return MLC_SUCCESS;
}

mlc_status_t mlc_mpi_start_recv(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    mlc_status_t st = post_recv(op, a->recvbuf, a->count * a->esize, a->root, a->tag, mlc_mpi_blocking(req));
    if (st != MLC_SUCCESS) {
        mlc_mpi_op_discard(op);
        return st;
    }
    return mlc_mpi_op_submit(op);
}

static mlc_status_t sendrecv_send(mlc_mpi_op_t *op, size_t sn, MPI_Request *mreq)
{
    const mlc_request_t *req = op->req;
    const mlc_args_t *a = &req->args;
    const mlc_mpi_comm_t *c = req->comm->impl;
    int rc = mlc_mpi_isend_bytes(op, a->sendbuf, sn, a->root, a->tag, c->comm, mreq);
    if (rc != MPI_SUCCESS)
        return mlc_mpi_error(rc, "rank %d: sendrecv: send of %zu bytes to rank %d (tag %d)", req->comm->rank,
                             sn, a->root, a->tag);
    return MLC_SUCCESS;
}

/* Blocking: the send posted, the probed receive, then the send waited here,
 * so the call ends inside MPI as MPI_Sendrecv would. */
static mlc_status_t sendrecv_blocking(mlc_mpi_op_t *op, size_t sn, size_t rn)
{
    const mlc_args_t *a = &op->req->args;
    MPI_Request send = MPI_REQUEST_NULL;
    mlc_status_t st = sendrecv_send(op, sn, &send);
    if (st == MLC_SUCCESS) st = post_recv(op, a->recvbuf, rn, a->peer2, a->tag2, true);
    if (st != MLC_SUCCESS) {
        if (send != MPI_REQUEST_NULL) MPI_Cancel(&send);
        MPI_Wait(&send, MPI_STATUS_IGNORE);
        return st;
    }
    int rc = MPI_Wait(&send, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return mlc_mpi_error(rc, "rank %d: sendrecv: send of %zu bytes to rank %d (tag %d)", op->req->comm->rank,
                             sn, a->root, a->tag);
    return MLC_SUCCESS;
}

mlc_status_t mlc_mpi_start_sendrecv(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    size_t sn = a->count * a->esize, rn = a->count2 * a->esize;
    /* Not MPI_Sendrecv: its receive is a plain one (mpi_recv_size.c).
     * Nonblocking: the receive posted first, then the send; waited on at
     * once (a deadline), the send first, as the receive probes a while. */
    mlc_status_t st;
    if (mlc_mpi_blocking(req)) {
        st = sendrecv_blocking(op, sn, rn);
    } else {
        st = mlc_mpi_op_reserve(op, 2);
        if (st == MLC_SUCCESS && req->blocking) st = sendrecv_send(op, sn, mlc_mpi_op_next_req(op));
        if (st == MLC_SUCCESS) st = post_recv(op, a->recvbuf, rn, a->peer2, a->tag2, false);
        if (st == MLC_SUCCESS && !req->blocking) st = sendrecv_send(op, sn, mlc_mpi_op_next_req(op));
    }
    if (st != MLC_SUCCESS) {
        mlc_mpi_op_discard(op);
        return st;
    }
    return mlc_mpi_op_submit(op);
}

mlc_status_t mlc_mpi_iprobe(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *out)
{
    mlc_mpi_comm_t *c = comm->impl;
    MPI_Status st;
    int f = 0;
    int rc = MPI_Iprobe(src_of(source), tag_of(tag), c->comm, &f, &st);
    if (rc != MPI_SUCCESS)
        return mlc_mpi_error(rc, "rank %d: iprobe (source %s, tag %s)", comm->rank, mlc_any_or(source).s,
                            mlc_any_or(tag).s);
    *flag = f;
    if (f) *out = (mlc_msg_status_t){st.MPI_SOURCE, st.MPI_TAG, mlc_mpi_received_bytes(&st, MPI_BYTE)};
    return MLC_SUCCESS;
}
