/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduce-scatter along any dimension.
 *
 * Rank r's part is columns [off_r, off_r + d_r) of dimension `dim` of the
 * reduced tensor. When every dimension before `dim` has length 1 the parts
 * are already contiguous blocks of the input; otherwise the input is packed
 * into a staging buffer, part by part, when the call starts (so the caller
 * may reuse the input while the operation runs). Equal parts use one
 * mlc_reduce_scatter straight into the caller's output; unequal parts use
 * one mlc_reduce per part, rooted at its owner.
 */
#include <stdio.h>
#include <stdlib.h>
#include "core/comm.h"
#include "base/dtype.h"
#include "base/error.h"
#include "tensor_internal.h"

typedef struct scatter_plan {
    int dim;
    size_t outer, inner, esize;
    bool overlap;
} scatter_plan_t;

static mlc_status_t reduce_scatter_local(mlc_tcall_t *c, const mlc_tensor_t *in,
                                         const mlc_tensor_t *out, int dim, mlc_op_t op,
                                         scatter_plan_t *g)
{
    mlc_status_t st;
    if ((st = mlc_tdesc_check(in, c->fn, "in")) || (st = mlc_tdesc_check(out, c->fn, "out")))
        return st;
    if ((st = mlc_tdevice_check(in, c->comm, c->fn, "in")) ||
        (st = mlc_tdevice_check(out, c->comm, c->fn, "out")))
        return st;
    if ((st = mlc_tdim_normalize(dim, in->ndim, c->fn, &g->dim))) return st;
    if ((st = mlc_tpair_check(in, out, g->dim, c->fn, "in", "out"))) return st;
    if (c->trusted &&
        (st = mlc_tcall_check_split(c, out->shape[g->dim], in->shape[g->dim], g->dim, "out")))
        return st;
    if ((st = mlc_op_check(in->dtype, op))) return mlc_error_in(c->fn, st);
    g->outer = mlc_tshape_prod(in->shape, 0, g->dim);
    g->inner = mlc_tshape_prod(in->shape, g->dim + 1, in->ndim);
    g->esize = mlc_dtype_size(in->dtype);
    size_t in_bytes = mlc_tensor_bytes(in);
    g->overlap = mlc_tbytes_overlap(in->data, in_bytes, out->data, mlc_tensor_bytes(out));

    /* Allocate everything now, before the ranks agree to start. */
    mlc_tensor_request_t *r = c->r;
    if ((st = mlc_treq_reserve(r, c->p, c->fn))) return st;
    r->vec = malloc(4 * (size_t)c->p * sizeof *r->vec);
    if (!r->vec) return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for %d counts", c->fn, c->p);
    if ((g->outer > 1 || g->overlap) && in_bytes > 0) {
        if (in->device != MLC_DEVICE_HOST || out->device != MLC_DEVICE_HOST)
            return mlc_error(MLC_ERR_UNSUPPORTED,
                             "%s: scattering GPU tensors along dim %d (outer size %zu) or into an "
                             "overlapping output needs a host-side layout change",
                             c->fn, g->dim, g->outer);
        r->staging = malloc(in_bytes);
        r->parts = malloc((size_t)c->p * sizeof *r->parts);
        if (!r->staging || !r->parts)
            return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for a %zu-byte staging buffer",
                             c->fn, in_bytes);
    }
    return MLC_SUCCESS;
}

/* Inputs agree; the parts (each rank's out length along dim) add up to the input's. */
static mlc_status_t reduce_scatter_global(const mlc_tcall_t *c, int dim)
{
    const mlc_tmeta_t *a = &c->all[0];
    char sa[160], sb[160];
    uint64_t sum = 0;
    for (int r = 0; r < c->p; r++) {
        const mlc_tmeta_t *b = &c->all[r];
        if (!mlc_tshape_equal(a->shape, b->shape, a->ndim, -1)) {
            mlc_tshape_format(sa, sizeof sa, a->dtype, a->ndim, a->shape);
            mlc_tshape_format(sb, sizeof sb, b->dtype, b->ndim, b->shape);
            return mlc_error(MLC_ERR_MISMATCH,
                             "%s: inputs do not fit: rank 0 has %s, rank %d has %s; every rank "
                             "must pass the same input shape",
                             c->fn, sa, r, sb);
        }
        sum += b->out_shape[dim];
    }
    if (sum == a->shape[dim]) return MLC_SUCCESS;
    char parts[256];
    size_t used = 0;
    for (int r = 0; r < c->p && used < sizeof parts; r++)
        used += (size_t)snprintf(parts + used, sizeof parts - used, "%srank %d: %llu", r ? ", " : "",
                                 r, (unsigned long long)c->all[r].out_shape[dim]);
    mlc_tshape_format(sa, sizeof sa, a->dtype, a->ndim, a->shape);
    return mlc_error(MLC_ERR_MISMATCH,
                     "%s: the outputs' lengths along dim %d add up to %llu (%s) but the input %s "
                     "has %llu",
                     c->fn, dim, (unsigned long long)sum, parts, sa,
                     (unsigned long long)a->shape[dim]);
}

static mlc_status_t reduce_scatter_start(mlc_tcall_t *c, const mlc_tensor_t *in, mlc_tensor_t *out,
                                         mlc_op_t op, const scatter_plan_t *g)
{
    mlc_tensor_request_t *r = c->r;
    int p = c->p;
    size_t *counts = r->vec, *displs = r->vec + p, *d = r->vec + 2 * (size_t)p;
    size_t *block_off = r->vec + 3 * (size_t)p;
    bool even = true;
    for (int q = 0; q < p; q++) {
        d[q] = mlc_tcall_part(c, q, g->dim, true, in->shape[g->dim]);
        counts[q] = g->outer * d[q] * g->inner;
        displs[q] = q ? displs[q - 1] + counts[q - 1] : 0;
        block_off[q] = displs[q] * g->esize;
        if (d[q] != d[0]) even = false;
    }
    if (mlc_tensor_numel(in) == 0) return MLC_SUCCESS; /* nothing to move on any rank */

    size_t me = (size_t)c->rank;
    const unsigned char *send = in->data;
    /* out being exactly this rank's block of in is the in-place form of the core calls */
    bool in_place = g->outer == 1 && out->data == (void *)(send + block_off[me]);
    if (g->outer > 1 || (g->overlap && !in_place)) {
        mlc_tcopy_t pack;
        mlc_tcopy_plan_split(g->outer, g->inner * g->esize, d, block_off, p, r->parts, &pack);
        mlc_tcopy_run(&pack, in->data, r->staging);
        send = r->staging;
    }
    mlc_status_t st;
    if (even) {
        st = mlc_reduce_scatter(send, out->data, counts[me], in->dtype, op, c->comm,
                                mlc_treq_out(r));
        mlc_treq_note(r, st);
        return st;
    }
    for (int q = 0; q < p; q++) {
        st = mlc_reduce(send + block_off[q], q == c->rank ? out->data : NULL, counts[q], in->dtype,
                        op, q, c->comm, mlc_treq_out(r));
        mlc_treq_note(r, st);
        if (st != MLC_SUCCESS) return st;
    }
    return MLC_SUCCESS;
}

MLC_API mlc_status_t mlc_tensor_reduce_scatter(const mlc_tensor_t *in, mlc_tensor_t *out, int dim,
                                               mlc_op_t op, mlc_comm_t *comm,
                                               mlc_tensor_request_t **req)
{
    mlc_tcall_t c;
    scatter_plan_t g = {0};
    mlc_status_t local = MLC_SUCCESS;
    mlc_status_t st = mlc_tcall_begin(&c, MLC_TOP_REDUCE_SCATTER, comm, req != NULL, &local);
    if (st != MLC_SUCCESS) return st;
    if (local == MLC_SUCCESS) local = reduce_scatter_local(&c, in, out, dim, op, &g);
    c.mine.dim = local == MLC_SUCCESS ? g.dim : dim;
    c.mine.arg = op;
    mlc_tmeta_shapes(&c.mine, in, out);
    st = mlc_tcall_agree(&c, local);
    if (st == MLC_SUCCESS && !c.trusted) st = reduce_scatter_global(&c, g.dim);
    if (st == MLC_SUCCESS) st = reduce_scatter_start(&c, in, out, op, &g);
    return mlc_tcall_end(&c, st, req);
}
