/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * v-collectives (allgatherv, gatherv, scatterv, alltoallv) through MPI's own.
 *
 * With MPI-4's large-count calls (MPI_Igatherv_c, ...) any count and
 * displacement goes straight through. Without them the counts and
 * displacements must fit an int, and every rank must take the same path
 * though each sees only its own arrays. So the decision is made per pair:
 * both ends of a block know its count, and a block above the count limit
 * is left out of the MPI call (count 0 on both sides) and sent point to
 * point on the hidden communicator, in pieces of at most 64 MiB. The
 * blocks that stay are addressed from a base pointer moved to the lowest
 * one, so displacements beyond INT_MAX work as long as one rank's blocks
 * span at most INT_MAX elements (else UNSUPPORTED on that rank).
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include "mpi_impl.h"

/* One side (send or receive) of a v-collective as the MPI call wants it. */
typedef struct vside {
    int *counts, *displs;     /* int-count call; NULL when the side is absent */
    size_t shift;             /* elements the base pointer moved */
#if MLC_MPI_HAS_LARGE_COUNT
    MPI_Count *ccounts;       /* large-count call */
    MPI_Aint *cdispls;
#endif
} vside_t;

typedef struct vplan {
    mlc_mpi_op_t *op;
    bool blk, use_c;
    int p, me, tag;
    size_t es;
    MPI_Datatype type;
    MPI_Comm comm, hidden;
    size_t npieces; /* point-to-point pieces to post */
} vplan_t;

static bool is_big(size_t count) { return count > mlc_mpi_limits.count; }

/* Bytes of one point-to-point piece. At most PIECE_BYTES, not the whole
 * count limit: mlcomm sees progress on mpi only when one of MPI's requests
 * completes, and a transfer of INT_MAX bytes through a slow transport
 * (100 MB/s seen on Open MPI 4.1 inside a VM) shows none for 20 s, so a
 * short MLC_TIMEOUT failed it while it moved. */
#define PIECE_BYTES ((size_t)64 << 20)
static size_t piece_bytes(void)
{
    return mlc_mpi_limits.count < PIECE_BYTES ? mlc_mpi_limits.count : PIECE_BYTES;
}

static size_t pieces_of(size_t count, size_t es)
{
    size_t bytes = count * es, L = piece_bytes();
    return bytes == 0 ? 0 : (bytes + L - 1) / L;
}

static mlc_status_t plan_start(mlc_request_t *req, vplan_t *v)
{
    mlc_mpi_comm_t *c = req->comm->impl;
    memset(v, 0, sizeof *v);
    v->op = mlc_mpi_op_init(req);
    v->blk = mlc_mpi_blocking(req);
    v->use_c = mlc_mpi_use_c();
    v->p = req->comm->size;
    v->me = req->comm->rank;
    v->es = req->args.esize;
    v->comm = c->comm;
    v->hidden = c->hidden;
    v->tag = mlc_mpi_hidden_tag(c, req->seq, 0);
    bool owned;
    mlc_status_t st = mlc_mpi_elem_type(req->args.dtype, &v->type, &owned);
    if (st == MLC_SUCCESS && owned) st = mlc_mpi_op_keep_type(v->op, v->type);
    return st;
}

/* Arrays for one side; counts/displs NULL = the side is absent on this rank. */
static mlc_status_t side_build(vplan_t *v, const size_t *counts, const size_t *displs, vside_t *s)
{
    mlc_request_t *req = v->op->req;
    memset(s, 0, sizeof *s);
    if (!counts) return MLC_SUCCESS;
    size_t p = (size_t)v->p;
#if MLC_MPI_HAS_LARGE_COUNT
    if (v->use_c) {
        s->ccounts = mlc_mpi_op_alloc(v->op, p * (sizeof(MPI_Count) + sizeof(MPI_Aint)));
        if (!s->ccounts) return MLC_ERR_NO_MEMORY;
        s->cdispls = (MPI_Aint *)(s->ccounts + p);
        for (size_t r = 0; r < p; r++) {
            s->ccounts[r] = (MPI_Count)counts[r];
            s->cdispls[r] = (MPI_Aint)displs[r];
        }
        return MLC_SUCCESS;
    }
#endif
    s->counts = mlc_mpi_op_alloc(v->op, p * 2 * sizeof(int));
    if (!s->counts) return MLC_ERR_NO_MEMORY;
    s->displs = s->counts + p;
    size_t lo = SIZE_MAX;
    for (size_t r = 0; r < p; r++)
        if (counts[r] && !is_big(counts[r]) && displs[r] < lo) lo = displs[r];
    s->shift = lo == SIZE_MAX ? 0 : lo;
    for (size_t r = 0; r < p; r++) {
        bool native = counts[r] && !is_big(counts[r]);
        s->counts[r] = native ? (int)counts[r] : 0;
        s->displs[r] = 0;
        if (!native) continue;
        size_t rel = displs[r] - s->shift;
        if (rel > mlc_mpi_limits.displ)
            return mlc_core->error(MLC_ERR_UNSUPPORTED,
                             "rank %d: %s: the blocks span %zu elements from displacement %zu, more than one "
                             "MPI call addresses (%zu) without MPI-4 large-count calls",
                             v->me, mlc_core->coll_name(req->coll), rel + counts[r], s->shift, mlc_mpi_limits.displ);
        s->displs[r] = (int)rel;
    }
    return MLC_SUCCESS;
}

/* Post `count` elements at buf to/from peer as pieces of piece_bytes(). */
static int post_pieces(vplan_t *v, bool send, const void *buf, size_t count, int peer)
{
    size_t bytes = count * v->es, L = piece_bytes();
    for (size_t off = 0; off < bytes; off += L) {
        int n = (int)(bytes - off < L ? bytes - off : L);
        MPI_Request *mreq = mlc_mpi_op_next_req(v->op);
        int rc = send ? MPI_Isend((const char *)buf + off, n, MPI_BYTE, peer, v->tag, v->hidden, mreq)
                      : MPI_Irecv((char *)buf + off, n, MPI_BYTE, peer, v->tag, v->hidden, mreq);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/*
 * Issue the MPI call and the pieces in an order that cannot deadlock: a
 * nonblocking call first (its request is the collective one, never
 * cancelled), a blocking one after the pieces are posted.
 */
typedef struct vjob {
    int (*native)(const vplan_t *v, const struct vjob *j);
    int (*pieces)(vplan_t *v, const struct vjob *j); /* posts every piece */
    const mlc_args_t *a;
    vside_t send, recv;
} vjob_t;

static mlc_status_t run(vplan_t *v, vjob_t *j, const char *call)
{
    mlc_mpi_op_t *op = v->op;
    mlc_request_t *req = op->req;
    mlc_status_t st = MLC_SUCCESS;
    if (v->npieces > (size_t)INT_MAX / 2) {
        st = mlc_core->error(MLC_ERR_UNSUPPORTED, "rank %d: %s needs %zu point-to-point pieces", v->me,
                       mlc_core->coll_name(req->coll), v->npieces);
        goto fail;
    }
    if (v->npieces && v->tag < 0) {
        st = mlc_core->error(MLC_ERR_UNSUPPORTED, "rank %d: %s: MPI_TAG_UB is too small for the hidden tags of "
                       "blocks above the count limit", v->me, mlc_core->coll_name(req->coll));
        goto fail;
    }
    st = mlc_mpi_op_reserve(op, (int)(v->npieces + 1));
    if (st != MLC_SUCCESS) goto fail;
    int rc = MPI_SUCCESS;
    if (!v->blk) {
        rc = j->native(v, j);
        op->ncoll = op->nreq;
    }
    if (rc == MPI_SUCCESS && v->npieces) rc = j->pieces(v, j);
    if (rc == MPI_SUCCESS && v->blk) rc = j->native(v, j);
    if (rc != MPI_SUCCESS) {
        st = mlc_mpi_error(rc, "rank %d: %s (%s #%llu)", v->me, call, mlc_core->coll_name(req->coll),
                           (unsigned long long)req->seq);
        goto fail;
    }
    return mlc_mpi_op_submit(op);
fail:
    mlc_mpi_op_discard(op);
    return st;
}

/*
 * One rank: a local copy. (MPICH 4.0 ignores the displacement of a
 * single-rank allgatherv and writes at the start of the buffer.)
 */
static mlc_status_t single_rank(mlc_request_t *req, void *dst, const void *src, size_t count)
{
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    if (dst != src && count) memcpy(dst, src, count * req->args.esize);
    return mlc_mpi_op_submit(op);
}

static mlc_status_t setup_fail(vplan_t *v, mlc_status_t st)
{
    mlc_mpi_op_discard(v->op);
    return st;
}

/* ---- allgatherv -------------------------------------------------------------------- */

static int allgatherv_native(const vplan_t *v, const vjob_t *j)
{
    const mlc_args_t *a = j->a;
    const void *sb = a->inplace ? MPI_IN_PLACE : a->sendbuf;
#if MLC_MPI_HAS_LARGE_COUNT
    if (v->use_c)
        return MLC_MPI_ISSUE_C(v->blk, v->op, MPI_Allgatherv_c, MPI_Iallgatherv_c, sb, (MPI_Count)a->count, v->type,
                               a->recvbuf, j->recv.ccounts, j->recv.cdispls, v->type, v->comm);
#endif
    return MLC_MPI_ISSUE(v->blk, v->op, MPI_Allgatherv, MPI_Iallgatherv, sb, is_big(a->count) ? 0 : (int)a->count,
                         v->type, mlc_mpi_at(a->recvbuf, j->recv.shift * v->es), j->recv.counts, j->recv.displs,
                         v->type, v->comm);
}

static int allgatherv_pieces(vplan_t *v, const vjob_t *j)
{
    const mlc_args_t *a = j->a;
    int rc = MPI_SUCCESS;
    const void *mine = a->inplace ? mlc_mpi_at(a->recvbuf, a->displs[v->me] * v->es) : a->sendbuf;
    for (int q = 0; q < v->p && rc == MPI_SUCCESS; q++) {
        if (q == v->me) continue;
        if (is_big(a->count)) rc = post_pieces(v, true, mine, a->count, q);
        if (rc == MPI_SUCCESS && is_big(a->counts[q]))
            rc = post_pieces(v, false, mlc_mpi_at(a->recvbuf, a->displs[q] * v->es), a->counts[q], q);
    }
    return rc;
}

mlc_status_t mlc_mpi_start_allgatherv(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    vplan_t v;
    vjob_t j = {allgatherv_native, allgatherv_pieces, a, {0}, {0}};
    if (req->comm->size == 1) return single_rank(req, mlc_mpi_at(a->recvbuf, a->displs[0] * a->esize), a->sendbuf, a->count);
    mlc_status_t st = plan_start(req, &v);
    if (st == MLC_SUCCESS) st = side_build(&v, a->counts, a->displs, &j.recv);
    if (st != MLC_SUCCESS) return setup_fail(&v, st);
    if (!v.use_c) {
        for (int q = 0; q < v.p; q++)
            if (q != v.me) v.npieces += pieces_of(a->count, v.es) * is_big(a->count) + pieces_of(a->counts[q], v.es) * is_big(a->counts[q]);
        if (is_big(a->count) && !a->inplace)
            memcpy(mlc_mpi_at(a->recvbuf, a->displs[v.me] * v.es), a->sendbuf, a->count * v.es);
    }
    return run(&v, &j, "MPI_Allgatherv");
}

/* ---- gatherv ------------------------------------------------------------------------- */

static int gatherv_native(const vplan_t *v, const vjob_t *j)
{
    const mlc_args_t *a = j->a;
    bool root = v->me == a->root;
    const void *sb = root && a->inplace ? MPI_IN_PLACE : a->sendbuf;
#if MLC_MPI_HAS_LARGE_COUNT
    if (v->use_c)
        return MLC_MPI_ISSUE_C(v->blk, v->op, MPI_Gatherv_c, MPI_Igatherv_c, sb, (MPI_Count)a->count, v->type,
                               a->recvbuf, j->recv.ccounts, j->recv.cdispls, v->type, a->root, v->comm);
#endif
    return MLC_MPI_ISSUE(v->blk, v->op, MPI_Gatherv, MPI_Igatherv, sb, is_big(a->count) ? 0 : (int)a->count,
                         v->type, root ? mlc_mpi_at(a->recvbuf, j->recv.shift * v->es) : NULL, j->recv.counts,
                         j->recv.displs, v->type, a->root, v->comm);
}

static int gatherv_pieces(vplan_t *v, const vjob_t *j)
{
    const mlc_args_t *a = j->a;
    if (v->me != a->root) return post_pieces(v, true, a->sendbuf, a->count, a->root);
    int rc = MPI_SUCCESS;
    for (int q = 0; q < v->p && rc == MPI_SUCCESS; q++)
        if (q != v->me && is_big(a->counts[q]))
            rc = post_pieces(v, false, mlc_mpi_at(a->recvbuf, a->displs[q] * v->es), a->counts[q], q);
    return rc;
}

mlc_status_t mlc_mpi_start_gatherv(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    vplan_t v;
    vjob_t j = {gatherv_native, gatherv_pieces, a, {0}, {0}};
    if (req->comm->size == 1) return single_rank(req, mlc_mpi_at(a->recvbuf, a->displs[0] * a->esize), a->sendbuf, a->count);
    mlc_status_t st = plan_start(req, &v);
    bool root = req->comm->rank == a->root;
    if (st == MLC_SUCCESS && root) st = side_build(&v, a->counts, a->displs, &j.recv);
    if (st != MLC_SUCCESS) return setup_fail(&v, st);
    if (!v.use_c) {
        if (!root && is_big(a->count)) v.npieces = pieces_of(a->count, v.es);
        for (int q = 0; root && q < v.p; q++)
            if (q != v.me && is_big(a->counts[q])) v.npieces += pieces_of(a->counts[q], v.es);
        if (root && is_big(a->count) && !a->inplace)
            memcpy(mlc_mpi_at(a->recvbuf, a->displs[v.me] * v.es), a->sendbuf, a->count * v.es);
    }
    return run(&v, &j, "MPI_Gatherv");
}

/* ---- scatterv ------------------------------------------------------------------------- */

static int scatterv_native(const vplan_t *v, const vjob_t *j)
{
    const mlc_args_t *a = j->a;
    bool root = v->me == a->root;
    void *rb = root && a->inplace ? MPI_IN_PLACE : a->recvbuf;
#if MLC_MPI_HAS_LARGE_COUNT
    if (v->use_c)
        return MLC_MPI_ISSUE_C(v->blk, v->op, MPI_Scatterv_c, MPI_Iscatterv_c, a->sendbuf, j->send.ccounts,
                               j->send.cdispls, v->type, rb, (MPI_Count)a->count, v->type, a->root, v->comm);
#endif
    return MLC_MPI_ISSUE(v->blk, v->op, MPI_Scatterv, MPI_Iscatterv,
                         root ? mlc_mpi_at(a->sendbuf, j->send.shift * v->es) : NULL, j->send.counts,
                         j->send.displs, v->type, rb, is_big(a->count) ? 0 : (int)a->count, v->type, a->root,
                         v->comm);
}

static int scatterv_pieces(vplan_t *v, const vjob_t *j)
{
    const mlc_args_t *a = j->a;
    if (v->me != a->root) return post_pieces(v, false, a->recvbuf, a->count, a->root);
    int rc = MPI_SUCCESS;
    for (int q = 0; q < v->p && rc == MPI_SUCCESS; q++)
        if (q != v->me && is_big(a->counts[q]))
            rc = post_pieces(v, true, mlc_mpi_at(a->sendbuf, a->displs[q] * v->es), a->counts[q], q);
    return rc;
}

mlc_status_t mlc_mpi_start_scatterv(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    vplan_t v;
    vjob_t j = {scatterv_native, scatterv_pieces, a, {0}, {0}};
    if (req->comm->size == 1) return single_rank(req, a->recvbuf, mlc_mpi_at(a->sendbuf, a->displs[0] * a->esize), a->count);
    mlc_status_t st = plan_start(req, &v);
    bool root = req->comm->rank == a->root;
    if (st == MLC_SUCCESS && root) st = side_build(&v, a->counts, a->displs, &j.send);
    if (st != MLC_SUCCESS) return setup_fail(&v, st);
    if (!v.use_c) {
        if (!root && is_big(a->count)) v.npieces = pieces_of(a->count, v.es);
        for (int q = 0; root && q < v.p; q++)
            if (q != v.me && is_big(a->counts[q])) v.npieces += pieces_of(a->counts[q], v.es);
        if (root && is_big(a->count) && !a->inplace)
            memcpy(a->recvbuf, mlc_mpi_at(a->sendbuf, a->displs[v.me] * v.es), a->count * v.es);
    }
    return run(&v, &j, "MPI_Scatterv");
}

/* ---- alltoallv ------------------------------------------------------------------------- */

static int alltoallv_native(const vplan_t *v, const vjob_t *j)
{
    const mlc_args_t *a = j->a;
#if MLC_MPI_HAS_LARGE_COUNT
    if (v->use_c)
        return MLC_MPI_ISSUE_C(v->blk, v->op, MPI_Alltoallv_c, MPI_Ialltoallv_c, a->sendbuf, j->send.ccounts,
                               j->send.cdispls, v->type, a->recvbuf, j->recv.ccounts, j->recv.cdispls, v->type,
                               v->comm);
#endif
    return MLC_MPI_ISSUE(v->blk, v->op, MPI_Alltoallv, MPI_Ialltoallv, mlc_mpi_at(a->sendbuf, j->send.shift * v->es),
                         j->send.counts, j->send.displs, v->type, mlc_mpi_at(a->recvbuf, j->recv.shift * v->es),
                         j->recv.counts, j->recv.displs, v->type, v->comm);
}

static int alltoallv_pieces(vplan_t *v, const vjob_t *j)
{
    const mlc_args_t *a = j->a;
    int rc = MPI_SUCCESS;
    for (int q = 0; q < v->p && rc == MPI_SUCCESS; q++) {
        if (q == v->me) continue;
        if (is_big(a->counts2[q]))
            rc = post_pieces(v, false, mlc_mpi_at(a->recvbuf, a->displs2[q] * v->es), a->counts2[q], q);
        if (rc == MPI_SUCCESS && is_big(a->counts[q]))
            rc = post_pieces(v, true, mlc_mpi_at(a->sendbuf, a->displs[q] * v->es), a->counts[q], q);
    }
    return rc;
}

mlc_status_t mlc_mpi_start_alltoallv(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    vplan_t v;
    vjob_t j = {alltoallv_native, alltoallv_pieces, a, {0}, {0}};
    if (req->comm->size == 1)
        return single_rank(req, mlc_mpi_at(a->recvbuf, a->displs2[0] * a->esize),
                           mlc_mpi_at(a->sendbuf, a->displs[0] * a->esize), a->counts[0]);
    mlc_status_t st = plan_start(req, &v);
    if (st == MLC_SUCCESS) st = side_build(&v, a->counts, a->displs, &j.send);
    if (st == MLC_SUCCESS) st = side_build(&v, a->counts2, a->displs2, &j.recv);
    if (st != MLC_SUCCESS) return setup_fail(&v, st);
    if (!v.use_c) {
        for (int q = 0; q < v.p; q++) {
            if (q == v.me) continue;
            if (is_big(a->counts[q])) v.npieces += pieces_of(a->counts[q], v.es);
            if (is_big(a->counts2[q])) v.npieces += pieces_of(a->counts2[q], v.es);
        }
        if (is_big(a->counts[v.me]))
            memcpy(mlc_mpi_at(a->recvbuf, a->displs2[v.me] * v.es), mlc_mpi_at(a->sendbuf, a->displs[v.me] * v.es),
                   a->counts[v.me] * v.es);
    }
    return run(&v, &j, "MPI_Alltoallv");
}
