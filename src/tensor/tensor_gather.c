/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * All-gather along any dimension.
 *
 * Along dim 0 (more precisely: when every dimension before `dim` has length
 * 1) each rank's shard is one contiguous block of the output, and the
 * shards are gathered straight into it (mlc_allgather, or mlc_allgatherv
 * for uneven shards). Along an inner dimension each shard is `outer`
 * strided pieces of the output: the shards are gathered contiguously into a
 * staging buffer and moved into place when the request completes.
 */
#include <stdlib.h>
#include "core/comm.h"
#include "base/error.h"
#include "tensor_internal.h"

typedef struct gather_plan {
    int dim;
    size_t outer, inner, esize;
    bool overlap; /* shard and out share bytes */
} gather_plan_t;

static mlc_status_t allgather_local(mlc_tcall_t *c, const mlc_tensor_t *shard,
                                    const mlc_tensor_t *out, int dim, gather_plan_t *g)
{
    mlc_status_t st;
    if ((st = mlc_tdesc_check(shard, c->fn, "shard")) || (st = mlc_tdesc_check(out, c->fn, "out")))
        return st;
    if ((st = mlc_tdevice_check(shard, c->comm, c->fn, "shard")) ||
        (st = mlc_tdevice_check(out, c->comm, c->fn, "out")))
        return st;
    if ((st = mlc_tdim_normalize(dim, shard->ndim, c->fn, &g->dim))) return st;
    if ((st = mlc_tpair_check(shard, out, g->dim, c->fn, "shard", "out"))) return st;
    if (c->trusted &&
        (st = mlc_tcall_check_split(c, shard->shape[g->dim], out->shape[g->dim], g->dim, "shard")))
        return st;
    g->outer = mlc_tshape_prod(shard->shape, 0, g->dim);
    g->inner = mlc_tshape_prod(shard->shape, g->dim + 1, shard->ndim);
    g->esize = mlc_dtype_size(shard->dtype);
    size_t out_bytes = mlc_tensor_bytes(out);
    g->overlap = mlc_tbytes_overlap(shard->data, mlc_tensor_bytes(shard), out->data, out_bytes);

    /* Everything this call may need is allocated now, before the ranks agree. */
    mlc_tensor_request_t *r = c->r;
    r->vec = malloc(4 * (size_t)c->p * sizeof *r->vec);
    if (!r->vec) return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for %d counts", c->fn, c->p);
    if ((g->outer > 1 || g->overlap) && out_bytes > 0) {
        if (shard->device != MLC_DEVICE_HOST || out->device != MLC_DEVICE_HOST)
            return mlc_error(MLC_ERR_UNSUPPORTED,
                             "%s: gathering GPU tensors along dim %d (outer size %zu) or into an "
                             "overlapping output needs a host-side layout change",
                             c->fn, g->dim, g->outer);
        r->staging = malloc(out_bytes);
        r->parts = malloc((size_t)c->p * sizeof *r->parts);
        if (!r->staging || !r->parts)
            return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for a %zu-byte staging buffer",
                             c->fn, out_bytes);
    }
    return MLC_SUCCESS;
}

/* Shards agree except along dim; every rank's out holds exactly the concatenation. */
static mlc_status_t allgather_global(const mlc_tcall_t *c, int dim, uint64_t *total)
{
    const mlc_tmeta_t *a = &c->all[0];
    char sa[160], sb[160];
    uint64_t sum = 0;
    for (int r = 0; r < c->p; r++) {
        const mlc_tmeta_t *b = &c->all[r];
        if (!mlc_tshape_equal(a->shape, b->shape, a->ndim, dim)) {
            mlc_tshape_format(sa, sizeof sa, a->dtype, a->ndim, a->shape);
            mlc_tshape_format(sb, sizeof sb, b->dtype, b->ndim, b->shape);
            return mlc_error(MLC_ERR_MISMATCH,
                             "%s: shards do not fit: rank 0 has %s, rank %d has %s; shards may "
                             "differ only along dim %d",
                             c->fn, sa, r, sb, dim);
        }
        sum += b->shape[dim];
    }
    for (int r = 0; r < c->p; r++) {
        const mlc_tmeta_t *b = &c->all[r];
        if (b->out_shape[dim] == sum) continue;
        uint64_t want[MLC_TENSOR_MAX_DIMS];
        for (int i = 0; i < a->ndim; i++) want[i] = a->shape[i];
        want[dim] = sum;
        mlc_tshape_format(sa, sizeof sa, b->out_dtype, b->out_ndim, b->out_shape);
        mlc_tshape_format(sb, sizeof sb, a->dtype, a->ndim, want);
        return mlc_error(r == c->rank ? MLC_ERR_INVALID_ARG : MLC_ERR_MISMATCH,
                         "%s: rank %d's out is %s but the gathered tensor is %s", c->fn, r, sa, sb);
    }
    *total = sum;
    return MLC_SUCCESS;
}

static mlc_status_t allgather_start(mlc_tcall_t *c, const mlc_tensor_t *shard, mlc_tensor_t *out,
                                    const gather_plan_t *g)
{
    mlc_tensor_request_t *r = c->r;
    int p = c->p;
    size_t *counts = r->vec, *displs = r->vec + p, *d = r->vec + 2 * (size_t)p;
    size_t *block_off = r->vec + 3 * (size_t)p; /* bytes; displs stay read by the collective */
    bool even = true;
    for (int q = 0; q < p; q++) {
        d[q] = mlc_tcall_part(c, q, g->dim, false, out->shape[g->dim]);
        counts[q] = g->outer * d[q] * g->inner;
        displs[q] = q ? displs[q - 1] + counts[q - 1] : 0;
        if (d[q] != d[0]) even = false;
    }
    if (mlc_tensor_numel(out) == 0) return MLC_SUCCESS; /* nothing to move on any rank */

    size_t me = (size_t)c->rank;
    const unsigned char *in_place = (const unsigned char *)out->data + displs[me] * g->esize;
    bool direct = g->outer == 1 && (!g->overlap || (even && shard->data == (const void *)in_place));
    void *target = direct ? out->data : r->staging;
    mlc_status_t st;
    if (even)
        st = mlc_allgather(shard->data, target, counts[me], shard->dtype, c->comm, mlc_treq_out(r));
    else
        st = mlc_allgatherv(shard->data, counts[me], target, counts, displs, shard->dtype, c->comm,
                            mlc_treq_out(r));
    mlc_treq_note(r, st);
    if (st != MLC_SUCCESS || direct) return st;

    /* Staged: block q of the staging buffer moves to columns [off_q, off_q + d_q)
     * of every row; the block offsets are the displacements in bytes. */
    for (int q = 0; q < p; q++) block_off[q] = displs[q] * g->esize;
    mlc_tcopy_plan_concat(g->outer, g->inner * g->esize, d, block_off, p, r->parts, &r->unpack);
    r->has_unpack = true;
    r->unpack_src = r->staging;
    r->unpack_dst = out->data;
    return MLC_SUCCESS;
}

MLC_API mlc_status_t mlc_tensor_allgather(const mlc_tensor_t *shard, mlc_tensor_t *out, int dim,
                                          mlc_comm_t *comm, mlc_tensor_request_t **req)
{
    mlc_tcall_t c;
    gather_plan_t g = {0};
    mlc_status_t local = MLC_SUCCESS;
    mlc_status_t st = mlc_tcall_begin(&c, MLC_TOP_ALLGATHER, comm, req != NULL, &local);
    if (st != MLC_SUCCESS) return st;
    if (local == MLC_SUCCESS) local = allgather_local(&c, shard, out, dim, &g);
    c.mine.dim = local == MLC_SUCCESS ? g.dim : dim;
    mlc_tmeta_shapes(&c.mine, shard, out);
    st = mlc_tcall_agree(&c, local);
    uint64_t total = 0;
    if (st == MLC_SUCCESS && !c.trusted) st = allgather_global(&c, g.dim, &total);
    if (st == MLC_SUCCESS) st = allgather_start(&c, shard, out, &g);
    return mlc_tcall_end(&c, st, req);
}
