/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every operation of the nccl / rccl backend: NCCL's own collectives where
 * it has them (broadcast, reduce, allreduce, allgather, reduce_scatter),
 * grouped ncclSend/ncclRecv for the rest (alltoall(v), gather(v),
 * scatter(v), allgatherv, sendrecv), an allreduce of one integer for
 * barrier. Each is enqueued on the communicator's stream and followed by an
 * event; the request completes when the event has.
 */
#include <stdio.h>
#include <string.h>
#include "nccl_impl.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/log.h"

typedef nccl_issue_t issue_t;

static mlc_ncclResult_t keep_first(mlc_ncclResult_t have, mlc_ncclResult_t r)
{
    return have != mlc_ncclSuccess ? have : r;
}

/* Device-to-device (or any UVA) copy on the stream, skipped when in place. */
static void copy_on_stream(issue_t *c, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || dst == src) return;
    mlc_nccl_gpu_fail(c, c->impl->rt->memcpy_async(dst, src, bytes, MLC_GPU_MEMCPY_DEFAULT, c->stream), "MemcpyAsync");
}

static char *at(const void *base, size_t elems, size_t es)
{
    return (char *)base + elems * es;
}

static mlc_ncclResult_t send_to(issue_t *c, const void *buf, size_t count, int peer)
{
    if (count == 0) return mlc_ncclSuccess;
    return c->api->ncclSend(buf, count * c->scale, c->dt, peer, c->nc, c->stream);
}

static mlc_ncclResult_t recv_from(issue_t *c, void *buf, size_t count, int peer)
{
    if (count == 0) return mlc_ncclSuccess;
    return c->api->ncclRecv(buf, count * c->scale, c->dt, peer, c->nc, c->stream);
}

/* ---- one function per shape ------------------------------------------------- */
static mlc_ncclResult_t do_broadcast(issue_t *c)
{
    const mlc_args_t *a = c->a;
    void *recv = a->recvbuf ? a->recvbuf : (void *)a->sendbuf; /* root without recvbuf: in place */
    const void *send = c->rank == a->root ? a->sendbuf : recv;
    return c->api->ncclBroadcast(send, recv, a->count * c->scale, c->dt, a->root, c->nc, c->stream);
}

static mlc_ncclResult_t do_reduce(issue_t *c)
{
    const mlc_args_t *a = c->a;
    return c->api->ncclReduce(a->sendbuf, a->recvbuf, a->count, c->dt, c->op, a->root, c->nc, c->stream);
}

static mlc_ncclResult_t do_allreduce(issue_t *c)
{
    const mlc_args_t *a = c->a;
    return c->api->ncclAllReduce(a->sendbuf, a->recvbuf, a->count, c->dt, c->op, c->nc, c->stream);
}

static mlc_ncclResult_t do_allgather(issue_t *c)
{
    const mlc_args_t *a = c->a;
    return c->api->ncclAllGather(a->sendbuf, a->recvbuf, a->count * c->scale, c->dt, c->nc, c->stream);
}

static mlc_ncclResult_t do_reduce_scatter(issue_t *c)
{
    const mlc_args_t *a = c->a;
    return c->api->ncclReduceScatter(a->sendbuf, a->recvbuf, a->count, c->dt, c->op, c->nc, c->stream);
}

static mlc_ncclResult_t do_barrier(issue_t *c)
{
    nccl_comm_t *impl = c->impl;
    if (!impl->barrier_buf) {
        int e = impl->rt->malloc(&impl->barrier_buf, sizeof(int32_t));
        if (e != MLC_GPU_SUCCESS) {
            impl->barrier_buf = NULL;
            mlc_nccl_gpu_fail(c, e, "Malloc");
            return mlc_ncclSuccess;
        }
    }
    /* The value is irrelevant (unsigned: wrapping is defined); completing is the barrier. */
    return c->api->ncclAllReduce(impl->barrier_buf, impl->barrier_buf, 1, mlc_ncclUint32, mlc_ncclSum,
                                 c->nc, c->stream);
}

/* The p2p shapes run inside one NCCL group so that they progress together. */
static mlc_ncclResult_t do_allgatherv(issue_t *c)
{
    const mlc_args_t *a = c->a;
    mlc_ncclResult_t r = mlc_ncclSuccess;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank) {
            copy_on_stream(c, at(a->recvbuf, a->displs[p], c->es), a->sendbuf, a->count * c->es);
            continue;
        }
        r = keep_first(r, send_to(c, a->sendbuf, a->count, p));
        r = keep_first(r, recv_from(c, at(a->recvbuf, a->displs[p], c->es), a->counts[p], p));
    }
    return r;
}

/* alltoall(v): sc/sd send counts/displacements, rc/rd receive (NULL counts = uniform `count`). */
static mlc_ncclResult_t exchange(issue_t *c, const size_t *sc, const size_t *sd, const size_t *rc,
                                 const size_t *rd)
{
    const mlc_args_t *a = c->a;
    const void *src = a->sendbuf;
#define SCOUNT(p) (sc ? sc[p] : a->count)
#define SDISP(p) (sd ? sd[p] : (size_t)(p) * a->count)
#define RCOUNT(p) (rc ? rc[p] : a->count)
#define RDISP(p) (rd ? rd[p] : (size_t)(p) * a->count)
    if (a->inplace) {
        /* Sending block j while block j is being overwritten would race: send from a copy. */
        size_t extent = 0;
        for (int p = 0; p < c->size; p++) {
            size_t end = SDISP(p) + SCOUNT(p);
            if (end > extent) extent = end;
        }
        void *copy = mlc_nccl_scratch(c, extent * c->es);
        if (!copy) return mlc_ncclSuccess;
        copy_on_stream(c, copy, a->sendbuf, extent * c->es);
        src = copy;
    }
    mlc_ncclResult_t r = mlc_ncclSuccess;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank) {
            copy_on_stream(c, at(a->recvbuf, RDISP(p), c->es), at(src, SDISP(p), c->es), SCOUNT(p) * c->es);
            continue;
        }
        r = keep_first(r, send_to(c, at(src, SDISP(p), c->es), SCOUNT(p), p));
        r = keep_first(r, recv_from(c, at(a->recvbuf, RDISP(p), c->es), RCOUNT(p), p));
    }
    return r;
#undef SCOUNT
#undef SDISP
#undef RCOUNT
#undef RDISP
}

static mlc_ncclResult_t do_alltoall(issue_t *c) { return exchange(c, NULL, NULL, NULL, NULL); }

static mlc_ncclResult_t do_alltoallv(issue_t *c)
{
    const mlc_args_t *a = c->a;
    return exchange(c, a->counts, a->displs, a->counts2, a->displs2);
}

/* gather(v): counts/displs NULL = uniform blocks of `count`. */
static mlc_ncclResult_t collect(issue_t *c, const size_t *counts, const size_t *displs)
{
    const mlc_args_t *a = c->a;
    if (c->rank != a->root) return send_to(c, a->sendbuf, a->count, a->root);
    mlc_ncclResult_t r = mlc_ncclSuccess;
    for (int p = 0; p < c->size; p++) {
        size_t n = counts ? counts[p] : a->count;
        char *dst = at(a->recvbuf, displs ? displs[p] : (size_t)p * a->count, c->es);
        if (p == c->rank) copy_on_stream(c, dst, a->sendbuf, a->count * c->es);
        else r = keep_first(r, recv_from(c, dst, n, p));
    }
    return r;
}

static mlc_ncclResult_t do_gather(issue_t *c) { return collect(c, NULL, NULL); }
static mlc_ncclResult_t do_gatherv(issue_t *c) { return collect(c, c->a->counts, c->a->displs); }

/* scatter(v): counts/displs NULL = uniform blocks of `count`. */
static mlc_ncclResult_t distribute(issue_t *c, const size_t *counts, const size_t *displs)
{
    const mlc_args_t *a = c->a;
    if (c->rank != a->root) return recv_from(c, a->recvbuf, a->count, a->root);
    mlc_ncclResult_t r = mlc_ncclSuccess;
    for (int p = 0; p < c->size; p++) {
        size_t n = counts ? counts[p] : a->count;
        const char *src = at(a->sendbuf, displs ? displs[p] : (size_t)p * a->count, c->es);
        if (p == c->rank) copy_on_stream(c, a->recvbuf, src, n * c->es);
        else r = keep_first(r, send_to(c, src, n, p));
    }
    return r;
}

static mlc_ncclResult_t do_scatter(issue_t *c) { return distribute(c, NULL, NULL); }
static mlc_ncclResult_t do_scatterv(issue_t *c) { return distribute(c, c->a->counts, c->a->displs); }

static mlc_ncclResult_t do_send(issue_t *c) { return send_to(c, c->a->sendbuf, c->a->count, c->a->root); }
static mlc_ncclResult_t do_recv(issue_t *c) { return recv_from(c, c->a->recvbuf, c->a->count, c->a->root); }

static mlc_ncclResult_t do_sendrecv(issue_t *c)
{
    const mlc_args_t *a = c->a;
    mlc_ncclResult_t r = send_to(c, a->sendbuf, a->count, a->root);
    return keep_first(r, recv_from(c, a->recvbuf, a->count2, a->peer2));
}

/* X(kind, issue function, grouped, reduces) */
#define NCCL_OPS(X)                                             \
    X(MLC_COLL_BROADCAST, do_broadcast, false, false)           \
    X(MLC_COLL_REDUCE, do_reduce, false, true)                  \
    X(MLC_COLL_ALLREDUCE, do_allreduce, false, true)            \
    X(MLC_COLL_ALLGATHER, do_allgather, false, false)           \
    X(MLC_COLL_ALLGATHERV, do_allgatherv, true, false)          \
    X(MLC_COLL_REDUCE_SCATTER, do_reduce_scatter, false, true)  \
    X(MLC_COLL_ALLTOALL, do_alltoall, true, false)              \
    X(MLC_COLL_ALLTOALLV, do_alltoallv, true, false)            \
    X(MLC_COLL_GATHER, do_gather, true, false)                  \
    X(MLC_COLL_GATHERV, do_gatherv, true, false)                \
    X(MLC_COLL_SCATTER, do_scatter, true, false)                \
    X(MLC_COLL_SCATTERV, do_scatterv, true, false)              \
    X(MLC_COLL_BARRIER, do_barrier, false, false)               \
    X(MLC_COLL_SEND, do_send, false, false)                     \
    X(MLC_COLL_RECV, do_recv, false, false)                     \
    X(MLC_COLL_SENDRECV, do_sendrecv, true, false)

struct nccl_op_desc {
    mlc_ncclResult_t (*issue)(issue_t *c);
    bool grouped, reduces;
};
typedef nccl_op_desc_t op_desc_t;
static const op_desc_t ops[MLC_COLL_COUNT] = {
#define MLC_X_OP(kind, fn, grouped, reduces) [kind] = {fn, grouped, reduces},
    NCCL_OPS(MLC_X_OP)
#undef MLC_X_OP
};

/* ---- argument mapping ---------------------------------------------------------- */
static mlc_status_t map_dtype(const nccl_comm_t *impl, const mlc_request_t *req, bool reduces,
                              mlc_ncclDataType_t *dt, size_t *scale)
{
    mlc_dtype_t d = req->args.dtype;
    const char *be = impl->fl->name;
    *scale = 1;
    if (mlc_dtype_is_record(d)) {
        if (reduces)
            return mlc_error(MLC_ERR_UNSUPPORTED,
                             "%s %s: records of %zu bytes can only be reduced by user ops, which "
                             "NCCL cannot run on the device",
                             be, mlc_coll_name(req->coll), req->args.esize);
        *dt = mlc_ncclUint8;
        *scale = req->args.esize;
        return MLC_SUCCESS;
    }
    static const mlc_ncclDataType_t table[MLC_DTYPE_COUNT] = {
        [MLC_INT8] = mlc_ncclInt8,       [MLC_UINT8] = mlc_ncclUint8,
        [MLC_INT32] = mlc_ncclInt32,     [MLC_UINT32] = mlc_ncclUint32,
        [MLC_INT64] = mlc_ncclInt64,     [MLC_UINT64] = mlc_ncclUint64,
        [MLC_FLOAT16] = mlc_ncclFloat16, [MLC_BFLOAT16] = mlc_ncclBfloat16,
        [MLC_FLOAT32] = mlc_ncclFloat32, [MLC_FLOAT64] = mlc_ncclFloat64,
    };
    if (d < 0 || d >= MLC_DTYPE_COUNT)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s %s: unknown dtype %d", be, mlc_coll_name(req->coll), (int)d);
    if (d == MLC_BFLOAT16 && impl->api->version < mlc_nccl_version_code(2, 10, 0))
        return mlc_error(MLC_ERR_UNSUPPORTED, "%s %s: bfloat16 needs NCCL 2.10 or later", be,
                         mlc_coll_name(req->coll));
    *dt = table[d];
    return MLC_SUCCESS;
}

static mlc_status_t map_op(const nccl_comm_t *impl, const mlc_request_t *req, mlc_ncclRedOp_t *op)
{
    static const mlc_ncclRedOp_t table[MLC_OP_BUILTIN_COUNT] = {
        [MLC_SUM] = mlc_ncclSum, [MLC_PROD] = mlc_ncclProd, [MLC_MAX] = mlc_ncclMax,
        [MLC_MIN] = mlc_ncclMin, [MLC_AVG] = mlc_ncclAvg,
    };
    mlc_op_t o = req->args.op;
    if (o < 0 || o >= MLC_OP_BUILTIN_COUNT)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s %s: user-defined reduction ops run on the host; NCCL reduces on the "
                         "device (use the shm or mpi backend for them)",
                         impl->fl->name, mlc_coll_name(req->coll));
    if (o == MLC_AVG && impl->api->version < mlc_nccl_version_code(2, 10, 0))
        return mlc_error(MLC_ERR_UNSUPPORTED, "%s %s: avg needs NCCL 2.10 or later", impl->fl->name,
                         mlc_coll_name(req->coll));
    *op = table[o];
    return MLC_SUCCESS;
}

/* NCCL has no tags, no wildcard source and no probe. */
static mlc_status_t check_p2p(const nccl_comm_t *impl, const mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    const char *be = impl->fl->name;
    const char *op = mlc_coll_name(req->coll);
    bool recvs = req->coll == MLC_COLL_RECV || req->coll == MLC_COLL_SENDRECV;
    int source = req->coll == MLC_COLL_SENDRECV ? a->peer2 : a->root;
    int send_tag = a->tag, recv_tag = req->coll == MLC_COLL_SENDRECV ? a->tag2 : a->tag;
    if (recvs && source == MLC_ANY_SOURCE)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s %s: MLC_ANY_SOURCE is not possible: NCCL receives from a named peer", be, op);
    if (req->coll != MLC_COLL_RECV && send_tag != 0)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s %s: tag %d: NCCL has no tags, only tag 0 is accepted (messages match "
                         "in call order)", be, op, send_tag);
    if (recvs && recv_tag != 0 && recv_tag != MLC_ANY_TAG)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s %s: tag %d: NCCL has no tags, only tag 0 (or MLC_ANY_TAG) is accepted",
                         be, op, recv_tag);
    /* Checked here, never left to NCCL: NCCL 2.28 keeps a refused call as the
     * communicator's error, which would end the communicator. */
    if (!req->grouped && req->coll != MLC_COLL_SENDRECV && a->root == req->comm->rank)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "%s %s: peer %d is this rank: outside a group a %s to itself never completes on "
                         "NCCL (its other half would be queued behind it); use mlc_sendrecv, or both "
                         "halves between mlc_group_start and mlc_group_end",
                         be, op, a->root, op);
    return MLC_SUCCESS;
}

/* Device buffers must be on the communicator's device (pageable host memory is staged). */
static mlc_status_t check_buffer(const nccl_comm_t *impl, const mlc_request_t *req, const void *ptr,
                                 const char *name, mlc_gpu_mem_t *mem)
{
    *mem = MLC_GPU_MEM_DEVICE;
    if (!ptr) return MLC_SUCCESS;
    int dev;
    mlc_status_t st = mlc_gpurt_pointer_kind(impl->rt, ptr, mem, &dev);
    if (st != MLC_SUCCESS) return st;
    if (*mem == MLC_GPU_MEM_DEVICE && dev != impl->device)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "%s %s: %s %p is on %s device %d but the communicator uses device %d",
                         impl->fl->name, mlc_coll_name(req->coll), name, ptr, impl->rt->name, dev,
                         impl->device);
    return MLC_SUCCESS;
}

/* ---- the start entry --------------------------------------------------------------- */
static mlc_status_t check_args(nccl_comm_t *impl, mlc_request_t *req, const op_desc_t *d, issue_t *c)
{
    mlc_status_t st = MLC_SUCCESS;
    if (req->coll == MLC_COLL_SEND || req->coll == MLC_COLL_RECV || req->coll == MLC_COLL_SENDRECV)
        st = check_p2p(impl, req);
    if (st == MLC_SUCCESS && req->coll != MLC_COLL_BARRIER)
        st = map_dtype(impl, req, d->reduces, &c->dt, &c->scale);
    if (st == MLC_SUCCESS && d->reduces) st = map_op(impl, req, &c->op);
    if (st == MLC_SUCCESS) st = check_buffer(impl, req, req->args.sendbuf, "sendbuf", &c->smem);
    c->rmem = c->smem;
    if (st == MLC_SUCCESS && req->args.recvbuf != req->args.sendbuf)
        st = check_buffer(impl, req, req->args.recvbuf, "recvbuf", &c->rmem);
    return st;
}

mlc_ncclResult_t mlc_nccl_enqueue(issue_t *c, const op_desc_t *d, const mlc_request_t *req,
                                  mlc_status_t *st)
{
    *st = mlc_nccl_stage_in(c, req);
    if (*st != MLC_SUCCESS || c->gpu_err != MLC_GPU_SUCCESS) return mlc_ncclSuccess;
    if (!d->grouped) return d->issue(c);
    mlc_ncclResult_t r = c->api->ncclGroupStart();
    if (r != mlc_ncclSuccess) return r;
    r = d->issue(c);
    /* The group must be closed even when a member failed. */
    mlc_ncclResult_t g = c->api->ncclGroupEnd();
    return r != mlc_ncclSuccess ? r : g;
}

int mlc_nccl_finish_enqueue(issue_t *c, nccl_req_t *nr, mlc_request_t *req)
{
    nccl_comm_t *impl = c->impl;
    const mlc_gpurt_t *rt = impl->rt;
    mlc_nccl_stage_out(c);
    if (c->gpu_err != MLC_GPU_SUCCESS) return c->gpu_err;
    int e = MLC_GPU_SUCCESS;
    void *ev = mlc_nccl_event_get(impl, &e);
    if (ev) e = rt->event_record(ev, c->stream);
    if (e == MLC_GPU_SUCCESS && c->used_scratch) {
        if (!impl->scratch_event)
            e = rt->event_create_with_flags(&impl->scratch_event, MLC_GPU_EVENT_DISABLE_TIMING);
        if (e == MLC_GPU_SUCCESS) e = rt->event_record(impl->scratch_event, c->stream);
    }
    if (e != MLC_GPU_SUCCESS) {
        if (ev) rt->event_destroy(ev);
        c->gpu_fn = "EventRecord";
        return e;
    }
    nr->event = ev;
    nr->pinned = c->pinned;
    nr->nout = c->nout;
    memcpy(nr->out, c->out, sizeof nr->out);
    mlc_nccl_pending_add(impl, req);
    return MLC_GPU_SUCCESS;
}

/* NCCL reads NCCL_ALGO once per process: a different forced algorithm cannot apply. */
static mlc_status_t check_algo(const nccl_comm_t *impl, const mlc_request_t *req)
{
    if (!req->algo || strcmp(req->algo, "native") == 0) return MLC_SUCCESS;
    if (req->coll == MLC_COLL_ALLREDUCE && strcmp(req->algo, impl->algo_applied) == 0) return MLC_SUCCESS;
    return mlc_error(MLC_ERR_UNSUPPORTED,
                     "%s %s: algorithm '%s' cannot be switched per call: NCCL reads NCCL_ALGO once "
                     "per process; set MLC_ALGO_ALLREDUCE before the first communicator (in force: '%s')",
                     impl->fl->name, mlc_coll_name(req->coll), req->algo,
                     impl->algo_applied[0] ? impl->algo_applied : "NCCL's choice");
}

mlc_status_t mlc_nccl_prepare(nccl_comm_t *impl, mlc_request_t *req, const op_desc_t **d, issue_t *c)
{
    mlc_comm_t *comm = req->comm;
    nccl_req_t *nr = nccl_req(req);
    memset(nr, 0, sizeof *nr);
    bool p2p = req->coll == MLC_COLL_SEND || req->coll == MLC_COLL_RECV;
    nr->peer = p2p ? req->args.root : -1;
    if (req->coll < 0 || req->coll >= MLC_COLL_COUNT || !ops[req->coll].issue)
        return mlc_error(MLC_ERR_UNSUPPORTED, "%s: operation %d is not supported", impl->fl->name, (int)req->coll);
    *d = &ops[req->coll];
    *c = (issue_t){.impl = impl, .api = impl->api, .a = &req->args, .rank = comm->rank,
                   .size = comm->size, .scale = 1, .es = req->args.esize};
    mlc_status_t st = check_algo(impl, req);
    if (st == MLC_SUCCESS) st = check_args(impl, req, *d, c);
    return st;
}

void mlc_nccl_issue_abandon(issue_t *c, nccl_req_t *nr, const char *what)
{
    if (c->pinned) {
        if (c->out_queued) {
            /* The GPU may still copy into the block: better pinned forever than reused. */
            MLC_WARN("%s %s: a staging block stays allocated after the failure", c->impl->fl->name, what);
        } else {
            nccl_req_t tmp = {.pinned = c->pinned};
            mlc_nccl_stage_finish(&tmp, false);
        }
    }
    nr->pinned = NULL;
}

mlc_status_t mlc_nccl_start(mlc_request_t *req)
{
    mlc_comm_t *comm = req->comm;
    nccl_comm_t *impl = comm->impl;
    nccl_req_t *nr = nccl_req(req);
    const op_desc_t *d = NULL;
    issue_t c;
    mlc_status_t st = mlc_nccl_prepare(impl, req, &d, &c);
    if (st != MLC_SUCCESS) return st;
    if (req->grouped) {
        /* Issued with the rest of its group, in one NCCL group (mlc_nccl_group_end). */
        pthread_mutex_lock(&impl->lock);
        nr->next = NULL;
        if (impl->deferred_tail) nccl_req(impl->deferred_tail)->next = req;
        else impl->deferred_head = req;
        impl->deferred_tail = req;
        pthread_mutex_unlock(&impl->lock);
        return MLC_SUCCESS;
    }

    int prev;
    st = mlc_nccl_dev_enter(impl, &prev);
    if (st != MLC_SUCCESS) return st;
    char what[64];
    snprintf(what, sizeof what, "%s #%llu", mlc_coll_name(req->coll), (unsigned long long)req->seq);

    pthread_mutex_lock(&impl->lock);
    mlc_ncclComm_t nc = impl->nc;
    mlc_ncclResult_t r = mlc_ncclSuccess;
    if (nc) {
        c.nc = nc;
        c.stream = impl->stream;
        r = mlc_nccl_enqueue(&c, d, req, &st);
    }
    pthread_mutex_unlock(&impl->lock);

    if (st != MLC_SUCCESS) {
        /* staging failed before anything reached NCCL */
    } else if (!nc) {
        st = mlc_error(MLC_ERR_ABORTED, "%s %s: communicator aborted", impl->fl->name, what);
    } else if (r == mlc_ncclInProgress) {
        /* Non-blocking communicator still connecting: the operation is on the
         * stream once NCCL says so; what follows it must come after. */
        st = mlc_nccl_wait_ready(impl->api, nc, impl, comm, what, mlc_nccl_timeout(comm));
        if (st != MLC_SUCCESS && st != MLC_ERR_ABORTED) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", mlc_last_error());
            st = mlc_nccl_fail(impl, comm, st, msg);
        }
    } else {
        st = mlc_nccl_result(impl, comm, r, what);
    }

    if (st == MLC_SUCCESS) {
        pthread_mutex_lock(&impl->lock);
        int e = c.gpu_err;
        if (!impl->nc) st = mlc_error(MLC_ERR_ABORTED, "%s %s: communicator aborted", impl->fl->name, what);
        else if (e == MLC_GPU_SUCCESS) e = mlc_nccl_finish_enqueue(&c, nr, req);
        pthread_mutex_unlock(&impl->lock);
        if (st == MLC_SUCCESS && e != MLC_GPU_SUCCESS) {
            char buf[256];
            impl->rt->get_last_error();
            st = mlc_error(MLC_ERR_BACKEND, "%s %s: %s%s: %s", impl->fl->name, what, impl->rt->prefix,
                           c.gpu_fn ? c.gpu_fn : "?", mlc_gpurt_strerror(impl->rt, e, buf, sizeof buf));
        }
    }
    if (st != MLC_SUCCESS) mlc_nccl_issue_abandon(&c, nr, what);
    mlc_nccl_dev_leave(impl, prev);
    return st;
}
