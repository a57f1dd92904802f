/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Native collectives with uniform counts, through MPI's own: blocking calls
 * when the caller waits right away and there is no deadline (MLC_TIMEOUT=0), MPI-3 nonblocking
 * collectives otherwise (never a thread running the blocking one).
 *
 * Counts above what one MPI call takes (mlc_mpi_limits.count, INT_MAX):
 * reductions and broadcast are cut into chunks, one collective each, all
 * started at once in the same order on every rank; the other data movement
 * uses MPI-4's large-count calls where the library has them, else one big
 * datatype per block.
 */
#include <limits.h>
#include <string.h>
#include "mpi_impl.h"

/* How n elements of the request's dtype travel in one MPI call. */
typedef struct span {
    MPI_Datatype type;
    int count;       /* int-count calls */
    MPI_Count big;   /* large-count calls (use_c) */
    bool use_c;
} span_t;

static mlc_status_t span_of(mlc_mpi_op_t *op, size_t n, span_t *s)
{
    const mlc_args_t *a = &op->req->args;
    bool owned;
    mlc_status_t st = mlc_mpi_elem_type(a->dtype, &s->type, &owned);
    if (st != MLC_SUCCESS) return st;
    if (owned && (st = mlc_mpi_op_keep_type(op, s->type)) != MLC_SUCCESS) return st;
    s->use_c = false;
    s->count = (int)(n <= mlc_mpi_limits.count ? n : 1);
    s->big = (MPI_Count)n;
    if (n <= mlc_mpi_limits.count) return MLC_SUCCESS;
    if (mlc_mpi_use_c()) {
        s->use_c = true;
        return MLC_SUCCESS;
    }
    MPI_Datatype big;
    int rc = mlc_mpi_big_type(n, s->type, a->esize, &big);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: building a datatype of %zu elements", op->req->comm->rank, n);
    s->type = big;
    return mlc_mpi_op_keep_type(op, big);
}

/* The request's collectives are issued: record them, then finish or wait. */
static mlc_status_t issued(mlc_mpi_op_t *op, int rc, const char *call)
{
    op->ncoll = op->nreq;
    if (rc != MPI_SUCCESS) {
        mlc_request_t *req = op->req;
        mlc_mpi_op_discard(op);
        return mlc_mpi_error(rc, "rank %d: %s (%s #%llu, %zu bytes%s)", req->comm->rank, call,
                             mlc_core->coll_name(req->coll), (unsigned long long)req->seq, req->bytes,
                             mlc_mpi_count_hint(req, rc));
    }
    return mlc_mpi_op_submit(op);
}

static mlc_status_t fail_setup(mlc_mpi_op_t *op, mlc_status_t st)
{
    mlc_mpi_op_discard(op);
    return st;
}

static MPI_Comm comm_of(const mlc_request_t *req) { return ((mlc_mpi_comm_t *)req->comm->impl)->comm; }

/* Elements per chunk: the count limit, and at most INT_MAX bytes (MPICH 4.0
 * fails nonblocking collectives that move more in one call). */
static size_t chunk_elems(size_t es)
{
    size_t per = mlc_mpi_limits.count;
    return per > (size_t)INT_MAX / es ? (size_t)INT_MAX / es : per;
}

static size_t nchunks(size_t n, size_t per) { return n == 0 ? 1 : (n + per - 1) / per; }

/* Chunks of n elements of es bytes, *per elements each (see chunk_elems).
 * What one call takes is one chunk, found without a division: the 8-byte
 * path pays for every instruction. */
static size_t chunking(size_t n, size_t es, size_t *per)
{
    if (n <= mlc_mpi_limits.count && n * es <= (size_t)INT_MAX) {
        *per = n ? n : 1;
        return 1;
    }
    *per = chunk_elems(es);
    return nchunks(n, *per);
}

/* Elements in chunk k of n. */
static size_t chunk_len(size_t n, size_t k, size_t per)
{
    size_t off = k * per;
    return n - off < per ? n - off : per;
}

/* ---- data movement -------------------------------------------------------------- */

/*
 * Broadcast is cut into chunks of at most the count limit and INT_MAX bytes,
 * like the reductions: MPICH 4.0's nonblocking broadcast of more than
 * INT_MAX bytes fails on the receivers, large-count call or not.
 */
mlc_status_t mlc_mpi_start_broadcast(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    size_t n = a->count, es = a->esize, per, k = chunking(n, es, &per);
    MPI_Datatype t;
    bool owned;
    mlc_status_t st = mlc_mpi_elem_type(a->dtype, &t, &owned);
    if (st == MLC_SUCCESS && owned) st = mlc_mpi_op_keep_type(op, t);
    if (st == MLC_SUCCESS && k > (size_t)INT_MAX / 2)
        st = mlc_core->error(MLC_ERR_UNSUPPORTED, "rank %d: broadcast of %zu elements needs %zu MPI calls",
                       req->comm->rank, n, k);
    if (st == MLC_SUCCESS && !blk) st = mlc_mpi_op_reserve(op, (int)k);
    if (st != MLC_SUCCESS) return fail_setup(op, st);
    /* MPI broadcasts one buffer: the root's data starts in its recvbuf. */
    if (req->comm->rank == a->root && !a->inplace && n) memcpy(a->recvbuf, a->sendbuf, n * es);
    int rc = MPI_SUCCESS;
    for (size_t i = 0; i < k && rc == MPI_SUCCESS; i++) {
        rc = MLC_MPI_ISSUE(blk, op, MPI_Bcast, MPI_Ibcast, mlc_mpi_at(a->recvbuf, i * per * es),
                           (int)chunk_len(n, i, per), t, a->root, comm_of(req));
    }
    return issued(op, rc, "MPI_Bcast");
}

mlc_status_t mlc_mpi_start_allgather(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    span_t s;
    mlc_status_t st = span_of(op, a->count, &s);
    if (st != MLC_SUCCESS) return fail_setup(op, st);
    const void *sb = a->inplace ? MPI_IN_PLACE : a->sendbuf;
    int rc = s.use_c ? MLC_MPI_ISSUE_C(blk, op, MPI_Allgather_c, MPI_Iallgather_c, sb, s.big, s.type, a->recvbuf, s.big,
                               s.type, comm_of(req))
                     : MLC_MPI_ISSUE(blk, op, MPI_Allgather, MPI_Iallgather, sb, s.count, s.type, a->recvbuf, s.count,
                             s.type, comm_of(req));
    return issued(op, rc, "MPI_Allgather");
}

mlc_status_t mlc_mpi_start_alltoall(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    span_t s;
    mlc_status_t st = span_of(op, a->count, &s);
    if (st != MLC_SUCCESS) return fail_setup(op, st);
    const void *sb = a->inplace ? MPI_IN_PLACE : a->sendbuf;
    int rc = s.use_c ? MLC_MPI_ISSUE_C(blk, op, MPI_Alltoall_c, MPI_Ialltoall_c, sb, s.big, s.type, a->recvbuf, s.big,
                               s.type, comm_of(req))
                     : MLC_MPI_ISSUE(blk, op, MPI_Alltoall, MPI_Ialltoall, sb, s.count, s.type, a->recvbuf, s.count,
                             s.type, comm_of(req));
    return issued(op, rc, "MPI_Alltoall");
}

mlc_status_t mlc_mpi_start_gather(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    span_t s;
    mlc_status_t st = span_of(op, a->count, &s);
    if (st != MLC_SUCCESS) return fail_setup(op, st);
    const void *sb = a->inplace ? MPI_IN_PLACE : a->sendbuf;
    int rc = s.use_c ? MLC_MPI_ISSUE_C(blk, op, MPI_Gather_c, MPI_Igather_c, sb, s.big, s.type, a->recvbuf, s.big, s.type,
                               a->root, comm_of(req))
                     : MLC_MPI_ISSUE(blk, op, MPI_Gather, MPI_Igather, sb, s.count, s.type, a->recvbuf, s.count, s.type,
                             a->root, comm_of(req));
    return issued(op, rc, "MPI_Gather");
}

mlc_status_t mlc_mpi_start_scatter(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    span_t s;
    mlc_status_t st = span_of(op, a->count, &s);
    if (st != MLC_SUCCESS) return fail_setup(op, st);
    void *rb = a->inplace ? MPI_IN_PLACE : a->recvbuf;
    int rc = s.use_c ? MLC_MPI_ISSUE_C(blk, op, MPI_Scatter_c, MPI_Iscatter_c, a->sendbuf, s.big, s.type, rb, s.big,
                               s.type, a->root, comm_of(req))
                     : MLC_MPI_ISSUE(blk, op, MPI_Scatter, MPI_Iscatter, a->sendbuf, s.count, s.type, rb, s.count, s.type,
                             a->root, comm_of(req));
    return issued(op, rc, "MPI_Scatter");
}

mlc_status_t mlc_mpi_start_barrier(mlc_request_t *req)
{
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    int rc = MLC_MPI_ISSUE(mlc_mpi_blocking(req), op, MPI_Barrier, MPI_Ibarrier, comm_of(req));
    return issued(op, rc, "MPI_Barrier");
}

/* ---- reductions ---------------------------------------------------------------- */

/* Type, op and room for `calls` requests; avg divides `avg_buf` at the end. */
static mlc_status_t reduce_setup(mlc_mpi_op_t *op, size_t calls, bool blk, void *avg_buf, size_t avg_count,
                                 MPI_Datatype *type, MPI_Op *mop)
{
    const mlc_args_t *a = &op->req->args;
    mlc_status_t st = mlc_mpi_reduce_type(a->dtype, a->op, type, mop);
    if (st != MLC_SUCCESS) return st;
    if (calls > (size_t)INT_MAX / 2)
        return mlc_core->error(MLC_ERR_UNSUPPORTED, "rank %d: %s of %zu elements needs %zu MPI calls",
                         op->req->comm->rank, mlc_core->coll_name(op->req->coll), a->count, calls);
    if (!blk && (st = mlc_mpi_op_reserve(op, (int)calls)) != MLC_SUCCESS) return st;
    if (a->op == MLC_AVG && avg_buf) {
        op->avg_buf = avg_buf;
        op->avg_count = avg_count;
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_mpi_start_allreduce(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    size_t n = a->count, es = a->esize, per, k = chunking(n, es, &per);
    MPI_Datatype t;
    MPI_Op mop;
    mlc_status_t st = reduce_setup(op, k, blk, a->recvbuf, n, &t, &mop);
    if (st != MLC_SUCCESS) return fail_setup(op, st);
    int rc = MPI_SUCCESS;
    for (size_t i = 0; i < k && rc == MPI_SUCCESS; i++) {
        size_t off = i * per * es;
        const void *sb = a->inplace ? MPI_IN_PLACE : mlc_mpi_at(a->sendbuf, off);
        rc = MLC_MPI_ISSUE(blk, op, MPI_Allreduce, MPI_Iallreduce, sb, mlc_mpi_at(a->recvbuf, off),
                           (int)chunk_len(n, i, per), t, mop, comm_of(req));
    }
    return issued(op, rc, "MPI_Allreduce");
}

mlc_status_t mlc_mpi_start_reduce(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    bool root = req->comm->rank == a->root;
    size_t n = a->count, es = a->esize, per, k = chunking(n, es, &per);
    MPI_Datatype t;
    MPI_Op mop;
    mlc_status_t st = reduce_setup(op, k, blk, root ? a->recvbuf : NULL, n, &t, &mop);
    if (st != MLC_SUCCESS) return fail_setup(op, st);
    /* MPICH 4.0's blocking MPI_Reduce crashes in place at a root other than 0
     * (from about 4 KB; its nonblocking one does not, and the form must be the
     * same on every rank): that root reduces a copy of each chunk instead. */
    void *copy = NULL;
#ifdef MPICH_VERSION
    if (blk && root && a->inplace && a->root != 0 && n) {
        copy = mlc_mpi_op_alloc(op, per * es);
        if (!copy) return fail_setup(op, MLC_ERR_NO_MEMORY);
    }
#endif
    int rc = MPI_SUCCESS;
    for (size_t i = 0; i < k && rc == MPI_SUCCESS; i++) {
        size_t off = i * per * es, len = chunk_len(n, i, per);
        const void *sb = root && a->inplace ? MPI_IN_PLACE : mlc_mpi_at(a->sendbuf, off);
        if (copy) sb = memcpy(copy, mlc_mpi_at(a->recvbuf, off), len * es);
        rc = MLC_MPI_ISSUE(blk, op, MPI_Reduce, MPI_Ireduce, sb, root ? mlc_mpi_at(a->recvbuf, off) : NULL,
                           (int)len, t, mop, a->root, comm_of(req));
    }
    return issued(op, rc, "MPI_Reduce");
}

/*
 * reduce_scatter is MPI_Reduce_scatter_block. In place (recvbuf = sendbuf +
 * rank*recvcount) MPI would leave the result at the start of the buffer, so
 * it lands in scratch and is copied to recvbuf. Above the count limit: one
 * chunked MPI_Reduce per block, to the rank that owns it.
 */
mlc_status_t mlc_mpi_start_reduce_scatter(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    bool blk = mlc_mpi_blocking(req);
    int p = req->comm->size, me = req->comm->rank;
    size_t n = a->count, es = a->esize, bytes = n * es, per, k = chunking(n, es, &per);
    bool chunked = k > 1;
    MPI_Datatype t;
    MPI_Op mop;
    mlc_status_t st = reduce_setup(op, chunked ? k * (size_t)p : 1, blk, a->recvbuf, n, &t, &mop);
    if (st != MLC_SUCCESS) return fail_setup(op, st);
    int rc = MPI_SUCCESS;
    if (!chunked) {
        void *rb = a->recvbuf;
        if (a->inplace) {
            rb = mlc_mpi_op_alloc(op, bytes);
            if (!rb) return fail_setup(op, MLC_ERR_NO_MEMORY);
            op->copy_dst = a->recvbuf;
            op->copy_src = rb;
            op->copy_bytes = bytes;
        }
        rc = MLC_MPI_ISSUE(blk, op, MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, a->sendbuf, rb, (int)n, t, mop,
                   comm_of(req));
        return issued(op, rc, "MPI_Reduce_scatter_block");
    }
    for (int r = 0; r < p && rc == MPI_SUCCESS; r++) {
        for (size_t i = 0; i < k && rc == MPI_SUCCESS; i++) {
            size_t off = i * per * es;
            const void *sb = r == me && a->inplace ? MPI_IN_PLACE : mlc_mpi_at(a->sendbuf, (size_t)r * bytes + off);
            rc = MLC_MPI_ISSUE(blk, op, MPI_Reduce, MPI_Ireduce, sb, r == me ? mlc_mpi_at(a->recvbuf, off) : NULL,
                               (int)chunk_len(n, i, per), t, mop, r, comm_of(req));
        }
    }
    return issued(op, rc, "MPI_Reduce (reduce_scatter block)");
}
