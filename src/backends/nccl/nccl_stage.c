/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host buffers on a GPU communicator. NCCL reads and writes only memory the
 * device can reach; pageable host memory (the default memory kind, and
 * what core's own agreement check and test harnesses pass) is staged:
 *   user -> pinned block (host memcpy) -> device scratch (async copy on the
 *   stream) -> the operation -> pinned block (async copy) -> user, when the
 *   request's event has completed (in progress, before completing it).
 * Pinned blocks come from the process pinned-memory pool; device scratch
 * is the communicator's, reused in stream order.
 */
#include <stdlib.h>
#include <string.h>
#include "nccl_impl.h"
#include "base/error.h"
#include "devrt/pinned.h"

#define STAGE_ALIGN ((size_t)256)

static size_t align_up(size_t n) { return (n + STAGE_ALIGN - 1) & ~(STAGE_ALIGN - 1); }

void mlc_nccl_gpu_fail(nccl_issue_t *c, int e, const char *fn)
{
    if (e != MLC_GPU_SUCCESS && c->gpu_err == MLC_GPU_SUCCESS) {
        c->gpu_err = e;
        c->gpu_fn = fn;
    }
}

void *mlc_nccl_scratch(nccl_issue_t *c, size_t bytes)
{
    nccl_comm_t *impl = c->impl;
    const mlc_gpurt_t *rt = impl->rt;
    bytes = align_up(bytes ? bytes : 1);
    if (!c->used_scratch && impl->scratch_event)
        /* The last operation that used scratch may be on another stream. */
        mlc_nccl_gpu_fail(c, rt->stream_wait_event(c->stream, impl->scratch_event, 0), "StreamWaitEvent");
    if (c->scratch_off + bytes > impl->scratch_size) {
        size_t want = impl->scratch_size * 2 > bytes ? impl->scratch_size * 2 : bytes;
        if (impl->scratch) {
            void **grown = realloc(impl->retired, (size_t)(impl->nretired + 1) * sizeof *grown);
            if (!grown) {
                mlc_nccl_gpu_fail(c, 2 /* out of memory */, "Malloc");
                return NULL;
            }
            impl->retired = grown;
            impl->retired[impl->nretired++] = impl->scratch;
            impl->scratch = NULL;
            impl->scratch_size = 0;
        }
        void *p = NULL;
        int e = rt->malloc(&p, want);
        if (e != MLC_GPU_SUCCESS) {
            rt->get_last_error();
            mlc_nccl_gpu_fail(c, e, "Malloc");
            return NULL;
        }
        impl->scratch = p;
        impl->scratch_size = want;
        c->scratch_off = 0;
    }
    void *p = (char *)impl->scratch + c->scratch_off;
    c->scratch_off += bytes;
    c->used_scratch = true;
    return p;
}

static size_t vextent(const size_t *counts, const size_t *displs, int n)
{
    size_t e = 0;
    for (int i = 0; i < n; i++)
        if (counts[i] && displs[i] + counts[i] > e) e = displs[i] + counts[i];
    return e;
}

/*
 * Bytes of sendbuf and recvbuf this rank's part of the operation touches;
 * *partial when the operation may leave parts of recvbuf unwritten (the
 * staged copy must then carry the user's bytes in as well).
 */
static void extents(const mlc_request_t *req, int rank, int size, size_t *sbytes, size_t *rbytes,
                    bool *partial)
{
    const mlc_args_t *a = &req->args;
    size_t es = a->esize, n = a->count, p = (size_t)size;
    bool root = rank == a->root;
    size_t s = 0, r = 0;
    *partial = false;
    switch (req->coll) {
    case MLC_COLL_BROADCAST: s = root ? n : 0; r = n; break;
    case MLC_COLL_REDUCE: s = n; r = root ? n : 0; break;
    case MLC_COLL_ALLREDUCE: s = n; r = n; break;
    case MLC_COLL_ALLGATHER: s = n; r = p * n; break;
    case MLC_COLL_ALLGATHERV: s = n; r = vextent(a->counts, a->displs, size); *partial = true; break;
    case MLC_COLL_REDUCE_SCATTER: s = p * n; r = n; break;
    case MLC_COLL_ALLTOALL: s = p * n; r = p * n; break;
    case MLC_COLL_ALLTOALLV:
        s = vextent(a->counts, a->displs, size);
        r = vextent(a->counts2, a->displs2, size);
        *partial = true;
        break;
    case MLC_COLL_GATHER: s = n; r = root ? p * n : 0; break;
    case MLC_COLL_GATHERV: s = n; r = root ? vextent(a->counts, a->displs, size) : 0; *partial = true; break;
    case MLC_COLL_SCATTER: s = root ? p * n : 0; r = n; break;
    case MLC_COLL_SCATTERV: s = root ? vextent(a->counts, a->displs, size) : 0; r = n; break;
    case MLC_COLL_SEND: s = n; break;
    case MLC_COLL_RECV: r = n; break;
    case MLC_COLL_SENDRECV: s = n; r = a->count2; break;
    default: break;
    }
    *sbytes = a->sendbuf ? s * es : 0;
    *rbytes = a->recvbuf ? r * es : 0;
}

typedef struct region {
    const char *user;
    size_t bytes;
    bool in, out; /* copy in before / out after the operation */
    size_t off;   /* in the pinned block and the device copy */
} region_t;

mlc_status_t mlc_nccl_stage_in(nccl_issue_t *c, const mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    size_t sbytes, rbytes;
    bool partial;
    extents(req, c->rank, c->size, &sbytes, &rbytes, &partial);
    bool stage_s = sbytes > 0 && c->smem == MLC_GPU_MEM_UNREGISTERED;
    bool stage_r = rbytes > 0 && c->rmem == MLC_GPU_MEM_UNREGISTERED;
    if (!stage_s && !stage_r) return MLC_SUCCESS;

    /* Regions: [send], [recv], or their union when in place (one memory). */
    const char *lo_s = a->sendbuf, *lo_r = a->recvbuf;
    region_t reg[2];
    int nreg = 0;
    if (stage_s && stage_r && a->inplace) {
        const char *lo = lo_s < lo_r ? lo_s : lo_r;
        const char *hi = lo_s + sbytes > lo_r + rbytes ? lo_s + sbytes : lo_r + rbytes;
        reg[nreg++] = (region_t){lo, (size_t)(hi - lo), true, true, 0};
    } else {
        if (stage_s) reg[nreg++] = (region_t){lo_s, sbytes, true, false, 0};
        if (stage_r) reg[nreg++] = (region_t){lo_r, rbytes, partial, true, 0};
    }
    size_t total = 0;
    for (int i = 0; i < nreg; i++) {
        reg[i].off = total;
        total += align_up(reg[i].bytes);
    }
    mlc_pinned_pool_t *pool;
    mlc_status_t st = mlc_pinned_default(&pool);
    void *pin = NULL;
    if (st == MLC_SUCCESS) st = mlc_pinned_alloc(pool, total, &pin);
    if (st != MLC_SUCCESS) return st;
    char *dev = mlc_nccl_scratch(c, total);
    if (!dev) {
        mlc_pinned_free(pool, pin);
        return MLC_SUCCESS; /* c->gpu_err says why */
    }
    const mlc_gpurt_t *rt = c->impl->rt;
    c->staged = *a;
    for (int i = 0; i < nreg; i++) {
        if (reg[i].in) {
            memcpy((char *)pin + reg[i].off, reg[i].user, reg[i].bytes);
            mlc_nccl_gpu_fail(c, rt->memcpy_async(dev + reg[i].off, (char *)pin + reg[i].off, reg[i].bytes,
                                                  MLC_GPU_MEMCPY_DEFAULT, c->stream),
                              "MemcpyAsync");
        }
        if (reg[i].out) c->out[c->nout++] = (nccl_copyout_t){(void *)reg[i].user, reg[i].off, reg[i].bytes};
        /* Point the staged arguments into the device copy of this region. */
        if (stage_s && lo_s >= reg[i].user && lo_s < reg[i].user + reg[i].bytes)
            c->staged.sendbuf = dev + reg[i].off + (size_t)(lo_s - reg[i].user);
        if (stage_r && lo_r >= reg[i].user && lo_r < reg[i].user + reg[i].bytes)
            c->staged.recvbuf = dev + reg[i].off + (size_t)(lo_r - reg[i].user);
    }
    c->pinned = pin;
    c->dev_base = dev;
    c->a = &c->staged;
    return MLC_SUCCESS;
}

void mlc_nccl_stage_out(nccl_issue_t *c)
{
    const mlc_gpurt_t *rt = c->impl->rt;
    c->out_queued = c->nout > 0;
    for (int i = 0; i < c->nout; i++)
        mlc_nccl_gpu_fail(c, rt->memcpy_async((char *)c->pinned + c->out[i].off,
                                              (char *)c->dev_base + c->out[i].off, c->out[i].bytes,
                                              MLC_GPU_MEMCPY_DEFAULT, c->stream),
                          "MemcpyAsync");
}

void mlc_nccl_stage_finish(nccl_req_t *nr, bool deliver)
{
    if (!nr->pinned) return;
    if (deliver)
        for (int i = 0; i < nr->nout; i++)
            memcpy(nr->out[i].user, (char *)nr->pinned + nr->out[i].off, nr->out[i].bytes);
    mlc_pinned_pool_t *pool;
    if (mlc_pinned_default(&pool) == MLC_SUCCESS) mlc_pinned_free(pool, nr->pinned);
    nr->pinned = NULL;
    nr->nout = 0;
}
