/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_pack: one packed message per neighbour, like p2p, but over persistent
 * MPI requests (MPI_Send_init / MPI_Recv_init) made once per plan. They are
 * bound to the executor's own pack buffers, never to the caller's arrays,
 * so the plan keeps serving new data pointers (mlc_exchange_set_data, a
 * cached rebuild) without making them again. A run is: pack, MPI_Startall,
 * local copies; then MPI_Waitall and unpack.
 */
#include <limits.h>
#include <stdlib.h>
#include "xexec_mpi_impl.h"

typedef struct pack_state {
    mlc_comm_t *comm;
    unsigned char *send_arena, *recv_arena;
    MPI_Request *reqs;    /* receives first, then sends; persistent */
    MPI_Datatype *types;  /* messages above the count limit: one big type each */
    int nreqs, ntypes;
} pack_state_t;

static void *arena_alloc(size_t bytes)
{
    if (bytes == 0) return NULL;
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

static void pack_release(void *state)
{
    pack_state_t *s = state;
    if (!s) return;
    if (!mlc_mpi_finalized()) {
        for (int i = 0; i < s->nreqs; i++)
            if (s->reqs[i] != MPI_REQUEST_NULL) MPI_Request_free(&s->reqs[i]);
        for (int i = 0; i < s->ntypes; i++) MPI_Type_free(&s->types[i]);
    }
    free(s->send_arena);
    free(s->recv_arena);
    free(s->reqs);
    free(s->types);
    free(s);
}

/* The (buffer, count, type) one MPI call moves `bytes` with. */
static int message_type(pack_state_t *s, size_t bytes, int *count, MPI_Datatype *type)
{
    if (bytes <= mlc_mpi_limits.count && bytes <= INT_MAX) {
        *count = (int)bytes;
        *type = MPI_BYTE;
        return MPI_SUCCESS;
    }
    int rc = mlc_mpi_big_type(bytes, MPI_BYTE, 1, type);
    if (rc == MPI_SUCCESS) {
        s->types[s->ntypes++] = *type;
        *count = 1;
    }
    return rc;
}

static mlc_status_t pack_prepare(const mlc_xplan_t *plan, mlc_comm_t *comm, void **state)
{
    size_t n = (size_t)plan->nsend + (size_t)plan->nrecv;
    MPI_Comm mc = mlc_xmpi_comm(comm);
    pack_state_t *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->comm = comm;
    s->send_arena = arena_alloc(plan->send_arena);
    s->recv_arena = arena_alloc(plan->recv_arena);
    s->reqs = n ? malloc(n * sizeof *s->reqs) : NULL;
    s->types = n ? malloc(n * sizeof *s->types) : NULL;
    if ((plan->send_arena && !s->send_arena) || (plan->recv_arena && !s->recv_arena) ||
        (n && (!s->reqs || !s->types)))
        goto oom;
    for (int i = 0; i < plan->nrecv; i++) {
        const mlc_xpeer_t *p = &plan->recv[i];
        int count;
        MPI_Datatype type;
        int rc = message_type(s, p->bytes, &count, &type);
        if (rc == MPI_SUCCESS)
            rc = MPI_Recv_init(s->recv_arena + p->offset, count, type, p->rank, MLC_XMPI_TAG, mc,
                               &s->reqs[s->nreqs]);
        if (rc != MPI_SUCCESS) {
            pack_release(s);
            return mlc_mpi_error(rc, "rank %d: exchange mpi_pack: MPI_Recv_init of %zu bytes from rank %d",
                                 comm->rank, p->bytes, p->rank);
        }
        s->nreqs++;
    }
    for (int i = 0; i < plan->nsend; i++) {
        const mlc_xpeer_t *p = &plan->send[i];
        int count;
        MPI_Datatype type;
        int rc = message_type(s, p->bytes, &count, &type);
        if (rc == MPI_SUCCESS)
            rc = MPI_Send_init(s->send_arena + p->offset, count, type, p->rank, MLC_XMPI_TAG, mc,
                               &s->reqs[s->nreqs]);
        if (rc != MPI_SUCCESS) {
            pack_release(s);
            return mlc_mpi_error(rc, "rank %d: exchange mpi_pack: MPI_Send_init of %zu bytes to rank %d",
                                 comm->rank, p->bytes, p->rank);
        }
        s->nreqs++;
    }
    *state = s;
    return MLC_SUCCESS;
oom:
    pack_release(s);
    return mlc_core->error(MLC_ERR_NO_MEMORY, "exchange mpi_pack: %zu + %zu bytes of message buffers",
                     plan->send_arena, plan->recv_arena);
}

static mlc_status_t pack_start(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b, int tag)
{
    (void)tag; /* persistent requests carry MLC_XMPI_TAG */
    pack_state_t *s = state;
    mlc_status_t st = mlc_core->comm_check(s->comm);
    if (st) return st;
    /* Receives first: they are ready before any peer's message arrives. */
    int rc = plan->nrecv ? MPI_Startall(plan->nrecv, s->reqs) : MPI_SUCCESS;
    for (int i = 0; i < plan->nsend && rc == MPI_SUCCESS; i++) {
        const mlc_xpeer_t *p = &plan->send[i];
        for (size_t k = p->first_seg; k < p->first_seg + p->nseg; k++)
            mlc_copy_run(&plan->send_segs[k].copy, b->provs[plan->send_segs[k].id].data,
                         s->send_arena);
    }
    if (rc == MPI_SUCCESS && plan->nsend) rc = MPI_Startall(plan->nsend, s->reqs + plan->nrecv);
    if (rc != MPI_SUCCESS) {
        st = mlc_mpi_error(rc, "rank %d: MPI_Startall of %d receives and %d sends", s->comm->rank,
                           plan->nrecv, plan->nsend);
        return mlc_xmpi_fail_start(s->comm, st, "exchange start (mpi_pack)");
    }
    mlc_xexec_local_copies(plan, b);
    return MLC_SUCCESS;
}

static mlc_status_t pack_finish(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    pack_state_t *s = state;
    mlc_status_t st = mlc_xmpi_wait(s->comm, s->nreqs, s->reqs, "exchange finish (mpi_pack)");
    if (st) return st;
    for (size_t k = 0; k < plan->nrecv_segs; k++)
        mlc_copy_run(&plan->recv_segs[k].copy, s->recv_arena, b->needs[plan->recv_segs[k].id].data);
    return MLC_SUCCESS;
}

MLC_XMPI_SERIAL_STEPS(pack)

const mlc_xexec_t mlc_xexec_mpi_pack_impl = {
    .name = "mpi_pack",
    .applies = mlc_xmpi_applies,
    .prepare = pack_prepare_serial,
    .start = pack_start_serial,
    .finish = pack_finish,
    .release = pack_release_serial,
};
