/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The collective part of mlc_exchange_build: publish the provided regions
 * to every rank (all-gather, as AMReX replicates its box list), match needs
 * locally, then send each provider only the requests meant for it (an
 * all-to-all of counts, then point-to-point). Local failures are agreed on
 * before every communication step, so a rank that fails never leaves the
 * others waiting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/error.h"
#include "exchange_impl.h"

mlc_status_t mlc_xagree(mlc_comm_t *comm, mlc_status_t mine, const char *what)
{
    /* One MIN-allreduce: failing ranks sort first, then by rank; the low
     * byte carries the code. */
    int me = mlc_comm_rank(comm);
    int64_t key = ((int64_t)(mine == MLC_SUCCESS) << 62) | ((int64_t)me << 8) |
                  (int64_t)(uint8_t)(-(int)mine);
    int64_t first = key;
    char msg[1024] = "";
    if (mine) snprintf(msg, sizeof msg, "%s", mlc_last_error());
    mlc_status_t st = mlc_allreduce(&key, &first, 1, MLC_INT64, MLC_MIN, comm, NULL);
    if (mine) {
        /* The allreduce cleared this rank's own message: put it back. */
        mlc_error_set_text(msg);
        return mine;
    }
    if (st) return st;
    if ((first >> 62) & 1) return MLC_SUCCESS;
    int rank = (int)((first >> 8) & 0x3fffffff);
    mlc_status_t code = (mlc_status_t)(-(int)(first & 0xff));
    return mlc_error(code, "%s failed on rank %d (%s); that rank's mlc_last_error() has the cause",
                     what, rank, mlc_status_name(code));
}

/* Scratch of one build: all freed at the end. */
typedef struct build_tmp {
    uint64_t *counts2;      /* per rank: published regions, config hash */
    size_t *rcounts, *displs;
    uint64_t *req_counts, *in_counts;
    mlc_request_t **reqs;
    int64_t *mine, *all, *reqs_out, *reqs_in;
    mlc_box_t *need_boxes;
    mlc_xshape_t *prov_shapes, *need_shapes;
    mlc_xmatch_t *matches;
    mlc_xindex_t index;
} build_tmp_t;

static void tmp_free(build_tmp_t *t)
{
    free(t->counts2);
    free(t->rcounts);
    free(t->displs);
    free(t->req_counts);
    free(t->in_counts);
    free(t->reqs);
    free(t->mine);
    free(t->all);
    free(t->reqs_out);
    free(t->reqs_in);
    free(t->need_boxes);
    free(t->prov_shapes);
    free(t->need_shapes);
    free(t->matches);
    mlc_xindex_free(&t->index);
}

static void shapes_of(const mlc_xviews_t *v, mlc_xshape_t *out)
{
    for (int i = 0; i < v->n; i++) {
        out[i].parent = v->v[i].parent;
        out[i].region = v->v[i].region;
    }
}

/* Steps before any communication: everything sized by the rank count. */
static mlc_status_t prepare_local(mlc_exchange_t *ex, int p, build_tmp_t *t, uint64_t *npub)
{
    const int nd = ex->geom.ndim;
    const size_t rl = mlc_xreq_len(nd);
    size_t np = (size_t)p;
    t->counts2 = calloc(2 * np, sizeof *t->counts2);
    t->rcounts = calloc(np, sizeof *t->rcounts);
    t->displs = calloc(np, sizeof *t->displs);
    t->req_counts = calloc(np, sizeof *t->req_counts);
    t->in_counts = calloc(np, sizeof *t->in_counts);
    t->reqs = calloc(2 * np, sizeof *t->reqs);
    t->mine = malloc(((size_t)ex->provs.n + 1) * rl * sizeof *t->mine);
    t->need_boxes = malloc(((size_t)ex->needs.n + 1) * sizeof *t->need_boxes);
    t->prov_shapes = malloc(((size_t)ex->provs.n + 1) * sizeof *t->prov_shapes);
    t->need_shapes = malloc(((size_t)ex->needs.n + 1) * sizeof *t->need_shapes);
    if (!t->counts2 || !t->rcounts || !t->displs || !t->req_counts || !t->in_counts ||
        !t->reqs || !t->mine || !t->need_boxes || !t->prov_shapes || !t->need_shapes)
        return mlc_error(MLC_ERR_NO_MEMORY, "mlc_exchange_build: scratch for %d ranks", p);
    uint64_t n = 0;
    for (int i = 0; i < ex->provs.n; i++) {
        const mlc_box_t *b = &ex->provs.v[i].region;
        if (mlc_box_empty(b)) continue;
        int64_t *rec = t->mine + n * rl;
        rec[0] = i;
        for (int d = 0; d < nd; d++) {
            rec[1 + d] = b->start[d];
            rec[1 + nd + d] = b->shape[d];
        }
        n++;
    }
    for (int i = 0; i < ex->needs.n; i++) t->need_boxes[i] = ex->needs.v[i].region;
    shapes_of(&ex->provs, t->prov_shapes);
    shapes_of(&ex->needs, t->need_shapes);
    *npub = n;
    return MLC_SUCCESS;
}

/* All-gather the published regions and index them (same result on every rank). */
static mlc_status_t publish(mlc_exchange_t *ex, int p, uint64_t npub, build_tmp_t *t)
{
    mlc_comm_t *c = ex->priv;
    const int nd = ex->geom.ndim;
    const size_t rl = mlc_xreq_len(nd);
    uint64_t mine2[2] = {npub, ex->cfg_hash};
    mlc_status_t st = mlc_allgather(mine2, t->counts2, 2, MLC_UINT64, c, NULL);
    if (st) return st;
    for (int r = 0; r < p; r++)
        if (t->counts2[2 * r + 1] != ex->cfg_hash)
            return mlc_error(MLC_ERR_MISMATCH,
                             "mlc_exchange_build: rank %d created its exchange with a different "
                             "config (ndim, dtype, flags, domain or periodic) than rank %d",
                             r, mlc_comm_rank(c));
    size_t total = 0;
    for (int r = 0; r < p; r++) {
        t->displs[r] = total;
        t->rcounts[r] = (size_t)t->counts2[2 * r] * rl;
        total += t->rcounts[r];
    }
    size_t npubs = total / rl;
    t->all = malloc((total ? total : 1) * sizeof *t->all);
    mlc_xpub_t *pubs = malloc((npubs ? npubs : 1) * sizeof *pubs);
    st = t->all && pubs ? MLC_SUCCESS
                        : mlc_error(MLC_ERR_NO_MEMORY, "mlc_exchange_build: %zu published regions",
                                    npubs);
    st = mlc_xagree(c, st, "mlc_exchange_build (publishing)");
    if (st) {
        free(pubs);
        return st;
    }
    st = mlc_allgatherv(t->mine, (size_t)npub * rl, t->all, t->rcounts, t->displs, MLC_INT64, c,
                        NULL);
    if (st) {
        free(pubs);
        return st;
    }
    size_t k = 0;
    for (int r = 0; r < p; r++) {
        for (uint64_t i = 0; i < t->counts2[2 * r]; i++, k++) {
            const int64_t *rec = t->all + k * rl;
            mlc_xpub_t *x = &pubs[k];
            memset(x, 0, sizeof *x);
            x->rank = r;
            x->id = (int)rec[0];
            x->box.ndim = nd;
            for (int d = 0; d < nd; d++) {
                x->box.start[d] = rec[1 + d];
                x->box.shape[d] = rec[1 + nd + d];
            }
        }
    }
    return mlc_xindex_build(&ex->geom, pubs, npubs, &t->index);
}

/* The routing on a backend without tags that needs its point-to-point traffic
 * grouped (nccl, rccl): one alltoallv of the request records. */
static mlc_status_t route_grouped(mlc_comm_t *c, int p, size_t rl, build_tmp_t *t)
{
    size_t *v = calloc(4 * (size_t)p, sizeof *v);
    mlc_status_t st = v ? MLC_SUCCESS
                        : mlc_error(MLC_ERR_NO_MEMORY, "mlc_exchange_build: counts for %d ranks", p);
    st = mlc_xagree(c, st, "mlc_exchange_build (routing)");
    if (st) {
        free(v);
        return st;
    }
    size_t *sc = v, *sd = v + p, *rc = v + 2 * p, *rd = v + 3 * p, soff = 0, roff = 0;
    for (int r = 0; r < p; r++) {
        sc[r] = (size_t)t->req_counts[r] * rl;
        sd[r] = soff;
        soff += sc[r];
        rc[r] = (size_t)t->in_counts[r] * rl;
        rd[r] = roff;
        roff += rc[r];
    }
    st = mlc_alltoallv(t->reqs_out, sc, sd, t->reqs_in, rc, rd, MLC_INT64, c, NULL);
    free(v);
    return st;
}

/* Send each provider the records of what this rank needs from it. */
static mlc_status_t route_requests(mlc_exchange_t *ex, int p, build_tmp_t *t)
{
    mlc_comm_t *c = ex->priv;
    const size_t rl = mlc_xreq_len(ex->geom.ndim);
    const int tag = ex->run_tags; /* the build tag: runs never use it */
    mlc_status_t st = mlc_alltoall(t->req_counts, t->in_counts, 1, MLC_UINT64, c, NULL);
    if (st) return st;
    size_t nin = 0;
    for (int r = 0; r < p; r++) nin += (size_t)t->in_counts[r];
    t->reqs_in = malloc((nin ? nin : 1) * rl * sizeof *t->reqs_in);
    st = t->reqs_in ? MLC_SUCCESS
                    : mlc_error(MLC_ERR_NO_MEMORY, "mlc_exchange_build: %zu incoming requests", nin);
    st = mlc_xagree(c, st, "mlc_exchange_build (routing)");
    if (st) return st;
    if (mlc_xdev_native(c)) return route_grouped(c, p, rl, t);
    size_t nreq = 0, off = 0;
    for (int r = 0; r < p && !st; r++) {
        if (!t->in_counts[r]) continue;
        size_t n = (size_t)t->in_counts[r] * rl;
        st = mlc_recv(t->reqs_in + off, n, MLC_INT64, r, tag, c, NULL, &t->reqs[nreq]);
        if (!st) nreq++;
        off += n;
    }
    off = 0;
    for (int r = 0; r < p && !st; r++) {
        if (!t->req_counts[r]) continue;
        size_t n = (size_t)t->req_counts[r] * rl;
        st = mlc_send(t->reqs_out + off, n, MLC_INT64, r, tag, c, &t->reqs[nreq]);
        if (!st) nreq++;
        off += n;
    }
    if (st) {
        /* Cannot finish the routing with the others: make them fail too
         * (keeping the cause, which those calls would clear). */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", mlc_last_error());
        mlc_comm_abort(c);
        mlc_request_wait_all(nreq, t->reqs, NULL);
        mlc_error_set_text(msg);
        return st;
    }
    return mlc_request_wait_all(nreq, t->reqs, NULL);
}

mlc_status_t mlc_xbuild(mlc_exchange_t *ex, mlc_xplan_t *plan, void **exec_state)
{
    mlc_comm_t *c = ex->priv;
    const int p = mlc_comm_size(c), me = mlc_comm_rank(c);
    build_tmp_t t = {0};
    mlc_xplan_t np = {0};
    uint64_t npub = 0;
    size_t nmatch = 0;
    void *state = NULL;

    mlc_status_t st = prepare_local(ex, p, &t, &npub);
    st = mlc_xagree(c, st, "mlc_exchange_build (preparing)");
    if (st) goto out;
    st = publish(ex, p, npub, &t);
    if (st) goto out; /* the same on every rank: all saw the same regions */
    st = mlc_xmatch_needs(&ex->geom, &t.index, t.need_boxes, ex->needs.n,
                          (ex->cfg.flags & MLC_EXCHANGE_ALLOW_UNPROVIDED) != 0, &t.matches,
                          &nmatch, &np.unprovided_cells);
    if (!st)
        st = mlc_xplan_recv_side(&np, &ex->geom, me, p, t.matches, nmatch, t.prov_shapes,
                                 ex->provs.n, t.need_shapes, ex->needs.n, t.req_counts,
                                 &t.reqs_out);
    st = mlc_xagree(c, st, "mlc_exchange_build (matching needs)");
    if (st) goto out;
    st = route_requests(ex, p, &t);
    if (st) goto out;
    st = mlc_xplan_send_side(&np, &ex->geom, p, t.in_counts, t.reqs_in, t.prov_shapes,
                             ex->provs.n);
    if (!st) st = ex->exec->prepare(&np, c, &state);
    st = mlc_xagree(c, st, "mlc_exchange_build (send side)");
    if (st) goto out;
    *plan = np;
    *exec_state = state;
    tmp_free(&t);
    return MLC_SUCCESS;
out:
    if (state) ex->exec->release(state);
    mlc_xplan_free(&np);
    tmp_free(&t);
    return st;
}
