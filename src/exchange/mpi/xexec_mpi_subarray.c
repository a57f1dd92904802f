/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_subarray: no packing. Each segment of a message is an
 * MPI_Type_create_subarray over its view's parent box (as the C# specification's
 * make_mpi_type); a neighbour's segments are joined into one struct type at
 * the views' absolute addresses, so each run is one MPI_Irecv / MPI_Isend
 * per neighbour from MPI_BOTTOM and one MPI_Waitall. A type is bound to the
 * data pointers it was made for: when a view is re-pointed (set_data, a
 * cached rebuild) the types of the messages touching it are made again at
 * the next start, before anything is posted.
 *
 * Messages are byte-for-byte those of mpi_pack (segments back to back in
 * need order, same tag), so the two executors interoperate.
 */
#include <limits.h>
#include <stdlib.h>
#include "xexec_mpi_impl.h"

typedef struct sub_msg {
    MPI_Datatype type;  /* MPI_DATATYPE_NULL until bound */
    const void **bound; /* the view pointer each segment's type was made for */
} sub_msg_t;

typedef struct sub_state {
    mlc_comm_t *comm;
    MPI_Datatype elem;  /* esize bytes */
    sub_msg_t *msgs;    /* receives first, then sends */
    MPI_Request *reqs;
    const void **ptrs;  /* all segments' bound pointers (msgs[i].bound point in here) */
    MPI_Datatype *scratch_types;
    int *scratch_len;
    MPI_Aint *scratch_disp;
    int nmsgs, nreqs;
} sub_state_t;

static void sub_release(void *state)
{
    sub_state_t *s = state;
    if (!s) return;
    if (!mlc_mpi_finalized()) {
        for (int i = 0; s->msgs && i < s->nmsgs; i++)
            if (s->msgs[i].type != MPI_DATATYPE_NULL) MPI_Type_free(&s->msgs[i].type);
        if (s->elem != MPI_DATATYPE_NULL) MPI_Type_free(&s->elem);
    }
    free(s->msgs);
    free(s->reqs);
    free(s->ptrs);
    free(s->scratch_types);
    free(s->scratch_len);
    free(s->scratch_disp);
    free(s);
}

static mlc_status_t sub_prepare(const mlc_xplan_t *plan, mlc_comm_t *comm, void **state)
{
    int n = plan->nsend + plan->nrecv;
    size_t nsegs = plan->nsend_segs + plan->nrecv_segs, most = 1;
    for (int i = 0; i < plan->nrecv; i++) most = plan->recv[i].nseg > most ? plan->recv[i].nseg : most;
    for (int i = 0; i < plan->nsend; i++) most = plan->send[i].nseg > most ? plan->send[i].nseg : most;
    if (most > INT_MAX || plan->esize > INT_MAX)
        return mlc_core->error(MLC_ERR_UNSUPPORTED, "exchange mpi_subarray: %zu segments in one message, "
                         "%zu-byte elements (MPI takes int)", most, plan->esize);
    sub_state_t *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->comm = comm;
    s->elem = MPI_DATATYPE_NULL;
    s->msgs = n ? calloc((size_t)n, sizeof *s->msgs) : NULL;
    s->reqs = n ? calloc((size_t)n, sizeof *s->reqs) : NULL;
    s->ptrs = nsegs ? calloc(nsegs, sizeof *s->ptrs) : NULL;
    s->scratch_types = malloc(most * sizeof *s->scratch_types);
    s->scratch_len = malloc(most * sizeof *s->scratch_len);
    s->scratch_disp = malloc(most * sizeof *s->scratch_disp);
    if ((n && (!s->msgs || !s->reqs)) || (nsegs && !s->ptrs) || !s->scratch_types ||
        !s->scratch_len || !s->scratch_disp)
        goto oom;
    s->nmsgs = n;
    for (int i = 0; i < n; i++) {
        const mlc_xpeer_t *p = i < plan->nrecv ? &plan->recv[i] : &plan->send[i - plan->nrecv];
        s->msgs[i].type = MPI_DATATYPE_NULL;
        s->msgs[i].bound = s->ptrs + (i < plan->nrecv ? 0 : plan->nrecv_segs) + p->first_seg;
    }
    int rc = MPI_Type_contiguous((int)plan->esize, MPI_BYTE, &s->elem);
    if (rc != MPI_SUCCESS) {
        s->elem = MPI_DATATYPE_NULL;
        sub_release(s);
        return mlc_mpi_error(rc, "rank %d: exchange mpi_subarray: element type of %zu bytes",
                             comm->rank, plan->esize);
    }
    *state = s;
    return MLC_SUCCESS;
oom:
    sub_release(s);
    return mlc_core->error(MLC_ERR_NO_MEMORY, "exchange mpi_subarray: state for %d messages", n);
}

/* The subarray type of `box` inside `parent` (both in the view's coordinates). */
static int subarray_type(const mlc_box_t *parent, const mlc_box_t *box, MPI_Datatype elem,
                         MPI_Datatype *out)
{
    int sizes[MLC_EXCHANGE_MAX_DIMS], subs[MLC_EXCHANGE_MAX_DIMS], starts[MLC_EXCHANGE_MAX_DIMS];
    for (int d = 0; d < parent->ndim; d++) {
        if (parent->shape[d] > INT_MAX) return MPI_ERR_DIMS;
        sizes[d] = (int)parent->shape[d];
        subs[d] = (int)box->shape[d];
        starts[d] = (int)(box->start[d] - parent->start[d]);
    }
    return MPI_Type_create_subarray(parent->ndim, sizes, subs, starts, MPI_ORDER_C, elem, out);
}

/* Make message m's struct type for the current views (segments of `segs`). */
static int bind_message(sub_state_t *s, sub_msg_t *m, const mlc_xpeer_t *p, const mlc_xseg_t *segs,
                        const mlc_view_t *views)
{
    int nseg = (int)p->nseg, made = 0, rc = MPI_SUCCESS;
    if (m->type != MPI_DATATYPE_NULL) MPI_Type_free(&m->type);
    for (int k = 0; k < nseg && rc == MPI_SUCCESS; k++) {
        const mlc_xseg_t *seg = &segs[p->first_seg + (size_t)k];
        const mlc_view_t *v = &views[seg->id];
        rc = subarray_type(&v->parent, &seg->box, s->elem, &s->scratch_types[k]);
        if (rc != MPI_SUCCESS) break;
        made++;
        s->scratch_len[k] = 1;
        rc = MPI_Get_address(v->data, &s->scratch_disp[k]);
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Type_create_struct(nseg, s->scratch_len, s->scratch_disp, s->scratch_types, &m->type);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&m->type);
    for (int k = 0; k < made; k++) MPI_Type_free(&s->scratch_types[k]);
    if (rc != MPI_SUCCESS) {
        if (m->type != MPI_DATATYPE_NULL) MPI_Type_free(&m->type);
        m->type = MPI_DATATYPE_NULL;
        return rc;
    }
    for (int k = 0; k < nseg; k++) m->bound[k] = views[segs[p->first_seg + (size_t)k].id].data;
    return MPI_SUCCESS;
}

/* Bind every message whose views moved since its type was made. */
static mlc_status_t rebind(sub_state_t *s, const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    for (int i = 0; i < s->nmsgs; i++) {
        bool recv = i < plan->nrecv;
        const mlc_xpeer_t *p = recv ? &plan->recv[i] : &plan->send[i - plan->nrecv];
        const mlc_xseg_t *segs = recv ? plan->recv_segs : plan->send_segs;
        const mlc_view_t *views = recv ? b->needs : b->provs;
        sub_msg_t *m = &s->msgs[i];
        bool same = m->type != MPI_DATATYPE_NULL;
        for (size_t k = 0; k < p->nseg && same; k++)
            same = m->bound[k] == views[segs[p->first_seg + k].id].data;
        if (same) continue;
        int rc = bind_message(s, m, p, segs, views);
        if (rc != MPI_SUCCESS)
            return mlc_mpi_error(rc, "rank %d: exchange mpi_subarray: datatype of the %zu segments %s "
                                 "rank %d", s->comm->rank, p->nseg, recv ? "from" : "to", p->rank);
    }
    return MLC_SUCCESS;
}

static mlc_status_t sub_start(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b, int tag)
{
    (void)tag; /* MLC_XMPI_TAG, as mpi_pack */
    sub_state_t *s = state;
    MPI_Comm mc = mlc_xmpi_comm(s->comm);
    s->nreqs = 0;
    mlc_status_t st = mlc_core->comm_check(s->comm);
    if (!st) st = rebind(s, plan, b); /* nothing posted yet: a failure here is clean */
    if (st) return st;
    int rc = MPI_SUCCESS;
    for (int i = 0; i < s->nmsgs && rc == MPI_SUCCESS; i++) {
        bool recv = i < plan->nrecv;
        const mlc_xpeer_t *p = recv ? &plan->recv[i] : &plan->send[i - plan->nrecv];
        rc = recv ? MPI_Irecv(MPI_BOTTOM, 1, s->msgs[i].type, p->rank, MLC_XMPI_TAG, mc, &s->reqs[i])
                  : MPI_Isend(MPI_BOTTOM, 1, s->msgs[i].type, p->rank, MLC_XMPI_TAG, mc, &s->reqs[i]);
        if (rc == MPI_SUCCESS) s->nreqs++;
    }
    if (rc != MPI_SUCCESS) {
        st = mlc_mpi_error(rc, "rank %d: exchange mpi_subarray: posting message %d of %d", s->comm->rank,
                           s->nreqs, s->nmsgs);
        return mlc_xmpi_fail_start(s->comm, st, "exchange start (mpi_subarray)");
    }
    mlc_xexec_local_copies(plan, b);
    return MLC_SUCCESS;
}

static mlc_status_t sub_finish(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    (void)plan;
    (void)b;
    sub_state_t *s = state;
    mlc_status_t st = mlc_xmpi_wait(s->comm, s->nreqs, s->reqs, "exchange finish (mpi_subarray)");
    s->nreqs = 0;
    return st;
}

MLC_XMPI_SERIAL_STEPS(sub)

const mlc_xexec_t mlc_xexec_mpi_subarray_impl = {
    .name = "mpi_subarray",
    .applies = mlc_xmpi_applies,
    .prepare = sub_prepare_serial,
    .start = sub_start_serial,
    .finish = sub_finish,
    .release = sub_release_serial,
};
