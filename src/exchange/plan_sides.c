/* SPDX-License-Identifier: BSD-3-Clause */
/* Assemble the two sides of a plan: receive segments + local copies + requests, and send segments. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "base/error.h"
#include "plan.h"

#define MLC_ARENA_ALIGN 64

static size_t align_up(size_t v) { return (v + MLC_ARENA_ALIGN - 1) & ~(size_t)(MLC_ARENA_ALIGN - 1); }

static void put_record(int64_t *rec, int ndim, int prov_id, const mlc_box_t *box)
{
    rec[0] = prov_id;
    for (int d = 0; d < ndim; d++) {
        rec[1 + d] = box->start[d];
        rec[1 + ndim + d] = box->shape[d];
    }
}

static mlc_box_t get_record(const int64_t *rec, int ndim, int64_t *prov_id)
{
    mlc_box_t b = {0};
    b.ndim = ndim;
    *prov_id = rec[0];
    for (int d = 0; d < ndim; d++) {
        b.start[d] = rec[1 + d];
        b.shape[d] = rec[1 + ndim + d];
    }
    return b;
}

mlc_status_t mlc_xplan_recv_side(mlc_xplan_t *plan, const mlc_xgeom_t *g, int me, int nranks,
                                 const mlc_xmatch_t *m, size_t nm, const mlc_xshape_t *provs,
                                 int nprovs, const mlc_xshape_t *needs, int nneeds,
                                 uint64_t *req_counts, int64_t **reqs)
{
    size_t nlocal = 0, nremote = 0;
    int npeers = 0;
    const size_t rl = mlc_xreq_len(g->ndim);
    for (size_t i = 0; i < nm; i++) {
        if (m[i].rank < 0 || m[i].rank >= nranks || m[i].need_id < 0 || m[i].need_id >= nneeds ||
            (i > 0 && m[i].rank < m[i - 1].rank))
            return mlc_error(MLC_ERR_INTERNAL,
                             "exchange plan: match %zu names rank %d need %d (out of range or "
                             "not grouped by rank)",
                             i, m[i].rank, m[i].need_id);
        if (m[i].rank == me) {
            if (m[i].prov_id < 0 || m[i].prov_id >= nprovs)
                return mlc_error(MLC_ERR_INTERNAL, "exchange plan: local match names provide %d of %d",
                                 m[i].prov_id, nprovs);
            nlocal++;
        } else {
            /* Matches come grouped by rank: a new rank starts a new peer. */
            if (i == 0 || m[i - 1].rank != m[i].rank) npeers++;
            nremote++;
        }
    }
    mlc_xpeer_t *peers = npeers ? calloc((size_t)npeers, sizeof *peers) : NULL;
    mlc_xseg_t *segs = nremote ? calloc(nremote, sizeof *segs) : NULL;
    mlc_xlocal_t *locals = nlocal ? calloc(nlocal, sizeof *locals) : NULL;
    int64_t *out = nremote ? malloc(nremote * rl * sizeof *out) : NULL;
    if ((npeers && !peers) || (nremote && (!segs || !out)) || (nlocal && !locals)) {
        free(peers);
        free(segs);
        free(locals);
        free(out);
        return mlc_error(MLC_ERR_NO_MEMORY, "exchange plan: %zu remote and %zu local overlaps",
                         nremote, nlocal);
    }
    /* Matches come grouped by rank: each run of one remote rank is one message. */
    size_t arena = 0, ns = 0, nl = 0, total = 0, local_bytes = 0;
    int np = -1;
    for (size_t i = 0; i < nm; i++) {
        const mlc_xmatch_t *x = &m[i];
        const mlc_xshape_t *nv = &needs[x->need_id];
        if (x->rank == me) {
            mlc_xlocal_t *l = &locals[nl++];
            mlc_strided_t src = mlc_strided_in_array(&provs[x->prov_id].parent, &x->src, g->esize);
            mlc_strided_t dst = mlc_strided_in_array(&nv->parent, &x->dst, g->esize);
            l->src_id = x->prov_id;
            l->dst_id = x->need_id;
            l->src = x->src;
            l->dst = x->dst;
            l->copy = mlc_copy_make(&x->src, g->esize, &src, &dst);
            local_bytes += l->copy.bytes;
            continue;
        }
        if (np < 0 || peers[np].rank != x->rank) {
            if (np >= 0) arena = align_up(peers[np].offset + peers[np].bytes);
            np++;
            peers[np].rank = x->rank;
            peers[np].first_seg = ns;
            peers[np].offset = arena;
        }
        mlc_xseg_t *s = &segs[ns];
        mlc_strided_t src = mlc_strided_packed(&x->dst, g->esize,
                                               (int64_t)(peers[np].offset + peers[np].bytes));
        mlc_strided_t dst = mlc_strided_in_array(&nv->parent, &x->dst, g->esize);
        s->id = x->need_id;
        s->box = x->dst;
        s->copy = mlc_copy_make(&x->dst, g->esize, &src, &dst);
        put_record(out + ns * rl, g->ndim, x->prov_id, &x->src);
        peers[np].nseg++;
        peers[np].bytes += s->copy.bytes;
        total += s->copy.bytes;
        ns++;
    }
    if (np >= 0) arena = align_up(peers[np].offset + peers[np].bytes);
    for (int r = 0; r < nranks; r++) req_counts[r] = 0;
    for (int i = 0; i < npeers; i++) req_counts[peers[i].rank] = peers[i].nseg;
    plan->esize = g->esize;
    plan->recv = peers;
    plan->nrecv = npeers;
    plan->recv_segs = segs;
    plan->nrecv_segs = nremote;
    plan->locals = locals;
    plan->nlocals = nlocal;
    plan->recv_arena = arena;
    plan->recv_bytes = total;
    plan->local_bytes = local_bytes;
    *reqs = out;
    return MLC_SUCCESS;
}

mlc_status_t mlc_xplan_send_side(mlc_xplan_t *plan, const mlc_xgeom_t *g, int nranks,
                                 const uint64_t *in_counts, const int64_t *in,
                                 const mlc_xshape_t *provs, int nprovs)
{
    char b1[MLC_BOX_STR_LEN], b2[MLC_BOX_STR_LEN];
    const size_t rl = mlc_xreq_len(g->ndim);
    size_t nsegs = 0;
    int npeers = 0;
    for (int r = 0; r < nranks; r++) {
        nsegs += in_counts[r];
        if (in_counts[r]) npeers++;
    }
    mlc_xpeer_t *peers = npeers ? calloc((size_t)npeers, sizeof *peers) : NULL;
    mlc_xseg_t *segs = nsegs ? calloc(nsegs, sizeof *segs) : NULL;
    if ((npeers && !peers) || (nsegs && !segs)) {
        free(peers);
        free(segs);
        return mlc_error(MLC_ERR_NO_MEMORY, "exchange plan: %zu send segments", nsegs);
    }
    mlc_status_t st = MLC_SUCCESS;
    size_t arena = 0, ns = 0, total = 0;
    int np = 0;
    for (int r = 0; r < nranks; r++) {
        if (!in_counts[r]) continue;
        mlc_xpeer_t *p = &peers[np++];
        p->rank = r;
        p->first_seg = ns;
        p->offset = arena;
        for (uint64_t k = 0; k < in_counts[r]; k++, ns++) {
            int64_t id;
            mlc_box_t box = get_record(in + ns * rl, g->ndim, &id);
            if (id < 0 || id >= nprovs || mlc_box_empty(&box) ||
                !mlc_box_contains(&provs[id].region, &box)) {
                st = mlc_error(MLC_ERR_INTERNAL,
                               "exchange plan: rank %d asked for %s of provide %" PRId64
                               " (this rank has %d provides%s%s)",
                               r, mlc_box_str(&box, b1, sizeof b1), id, nprovs,
                               id >= 0 && id < nprovs ? ", region " : "",
                               id >= 0 && id < nprovs
                                   ? mlc_box_str(&provs[id].region, b2, sizeof b2)
                                   : "");
                goto fail;
            }
            mlc_xseg_t *s = &segs[ns];
            mlc_strided_t src = mlc_strided_in_array(&provs[id].parent, &box, g->esize);
            mlc_strided_t dst = mlc_strided_packed(&box, g->esize, (int64_t)(p->offset + p->bytes));
            s->id = (int)id;
            s->box = box;
            s->copy = mlc_copy_make(&box, g->esize, &src, &dst);
            p->nseg++;
            p->bytes += s->copy.bytes;
            total += s->copy.bytes;
        }
        arena = align_up(p->offset + p->bytes);
    }
    plan->esize = g->esize;
    plan->send = peers;
    plan->nsend = npeers;
    plan->send_segs = segs;
    plan->nsend_segs = nsegs;
    plan->send_arena = arena;
    plan->send_bytes = total;
    return MLC_SUCCESS;
fail:
    free(peers);
    free(segs);
    return st;
}

void mlc_xplan_free(mlc_xplan_t *plan)
{
    if (!plan) return;
    free(plan->send);
    free(plan->recv);
    free(plan->send_segs);
    free(plan->recv_segs);
    free(plan->locals);
    memset(plan, 0, sizeof *plan);
}
