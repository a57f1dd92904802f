/* SPDX-License-Identifier: BSD-3-Clause */
/* Pure plan building: validate publications, match needs, assemble both sides. */
#include "plan.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "base/error.h"

/* At most this many periodic images of one need (a need spanning more than
 * a few periods is almost surely a mistake, and each image costs a query). */
#define MLC_MAX_IMAGES 4096

/* qsort has no context argument; per thread, as ranks of the threads backend build at once. */
static _Thread_local int g_sort_axis;

static int cmp_pub(const void *a, const void *b)
{
    const mlc_xpub_t *x = a, *y = b;
    int ax = g_sort_axis;
    if (x->box.start[ax] != y->box.start[ax]) return x->box.start[ax] < y->box.start[ax] ? -1 : 1;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The axis along which boxes are spread over the most "cells" of their size. */
static int choose_axis(const mlc_xpub_t *p, size_t n, int ndim, int64_t *max_extent)
{
    int best = 0;
    double best_cells = -1.0;
    for (int d = 0; d < ndim; d++) {
        int64_t lo = INT64_MAX, hi = INT64_MIN, ext = 1;
        for (size_t i = 0; i < n; i++) {
            const mlc_box_t *b = &p[i].box;
            if (b->start[d] < lo) lo = b->start[d];
            if (b->start[d] + b->shape[d] > hi) hi = b->start[d] + b->shape[d];
            if (b->shape[d] > ext) ext = b->shape[d];
        }
        double cells = n ? (double)(hi - lo) / (double)ext : 0.0;
        if (cells > best_cells) {
            best_cells = cells;
            best = d;
            *max_extent = ext;
        }
    }
    return best;
}

/* First index whose start along the index axis is >= v. */
static size_t lower_bound(const mlc_xindex_t *idx, int64_t v)
{
    size_t lo = 0, hi = idx->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idx->pubs[mid].box.start[idx->axis] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

mlc_status_t mlc_xindex_build(const mlc_xgeom_t *g, mlc_xpub_t *pubs, size_t n, mlc_xindex_t *out)
{
    char b1[MLC_BOX_STR_LEN], b2[MLC_BOX_STR_LEN], b3[MLC_BOX_STR_LEN];
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (mlc_box_empty(&pubs[i].box)) continue;
        if (g->has_domain && !mlc_box_contains(&g->domain, &pubs[i].box)) {
            mlc_status_t st = mlc_error(
                MLC_ERR_INVALID_ARG, "rank %d provide %d %s lies outside the domain %s",
                pubs[i].rank, pubs[i].id, mlc_box_str(&pubs[i].box, b1, sizeof b1),
                mlc_box_str(&g->domain, b2, sizeof b2));
            free(pubs);
            return st;
        }
        pubs[kept++] = pubs[i];
    }
    mlc_xindex_t idx = {pubs, kept, 0, 1};
    idx.axis = choose_axis(pubs, kept, g->ndim, &idx.max_extent);
    g_sort_axis = idx.axis;
    if (kept > 1) qsort(pubs, kept, sizeof *pubs, cmp_pub);
    /* Overlap sweep: only boxes starting before i ends along the axis can meet i. */
    for (size_t i = 0; i < kept; i++) {
        const mlc_box_t *a = &pubs[i].box;
        int64_t end = a->start[idx.axis] + a->shape[idx.axis];
        for (size_t j = i + 1; j < kept && pubs[j].box.start[idx.axis] < end; j++) {
            mlc_box_t cut;
            if (!mlc_box_intersect(a, &pubs[j].box, &cut)) continue;
            mlc_status_t st = mlc_error(
                MLC_ERR_INVALID_ARG,
                "provided regions overlap: rank %d provide %d %s and rank %d provide %d %s share %s",
                pubs[i].rank, pubs[i].id, mlc_box_str(a, b1, sizeof b1), pubs[j].rank,
                pubs[j].id, mlc_box_str(&pubs[j].box, b2, sizeof b2),
                mlc_box_str(&cut, b3, sizeof b3));
            free(pubs);
            return st;
        }
    }
    *out = idx;
    return MLC_SUCCESS;
}

void mlc_xindex_free(mlc_xindex_t *idx)
{
    free(idx->pubs);
    idx->pubs = NULL;
    idx->n = 0;
}

/* A growable array of matches. */
typedef struct match_vec {
    mlc_xmatch_t *v;
    size_t n, cap;
} match_vec_t;

static mlc_status_t match_push(match_vec_t *mv, const mlc_xmatch_t *m)
{
    if (mv->n == mv->cap) {
        size_t cap = mv->cap ? 2 * mv->cap : 16;
        mlc_xmatch_t *v = realloc(mv->v, cap * sizeof *v);
        if (!v) return mlc_error(MLC_ERR_NO_MEMORY, "exchange plan: %zu matches", cap);
        mv->v = v;
        mv->cap = cap;
    }
    mv->v[mv->n++] = *m;
    return MLC_SUCCESS;
}

/* Name one box of `need` that no match covers (error path only). */
static mlc_status_t report_uncovered(int need_id, const mlc_box_t *need, const mlc_xmatch_t *m,
                                     size_t nm, uint64_t missing)
{
    char b1[MLC_BOX_STR_LEN], b2[MLC_BOX_STR_LEN];
    size_t cap = 64, n = 1;
    mlc_box_t *pieces = malloc(cap * sizeof *pieces);
    mlc_box_t *next = malloc(cap * sizeof *next);
    mlc_box_t example = *need;
    if (pieces && next) {
        pieces[0] = *need;
        for (size_t i = 0; i < nm && n > 0; i++) {
            if (m[i].need_id != need_id) continue;
            size_t k = 0;
            for (size_t j = 0; j < n; j++) {
                if (k + 2 * MLC_EXCHANGE_MAX_DIMS > cap) {
                    /* Too fragmented to track: fall back to naming the need alone. */
                    n = 0;
                    break;
                }
                k += (size_t)mlc_box_subtract(&pieces[j], &m[i].dst, next + k);
            }
            if (n == 0) break;
            mlc_box_t *t = pieces;
            pieces = next;
            next = t;
            n = k;
        }
        if (n > 0) example = pieces[0];
    }
    free(pieces);
    free(next);
    return mlc_error(MLC_ERR_INVALID_ARG,
                     "need %d %s: %" PRIu64 " cells no rank provides (e.g. %s); set "
                     "MLC_EXCHANGE_ALLOW_UNPROVIDED to leave them untouched",
                     need_id, mlc_box_str(need, b1, sizeof b1), missing,
                     mlc_box_str(&example, b2, sizeof b2));
}

/* Matches of one need against every periodic image of the index. */
static mlc_status_t match_one(const mlc_xgeom_t *g, const mlc_xindex_t *idx, int need_id,
                              const mlc_box_t *need, match_vec_t *mv, uint64_t *covered)
{
    int64_t klo[MLC_EXCHANGE_MAX_DIMS], khi[MLC_EXCHANGE_MAX_DIMS], k[MLC_EXCHANGE_MAX_DIMS];
    uint64_t images = 1;
    for (int d = 0; d < g->ndim; d++) {
        klo[d] = khi[d] = 0;
        if (g->periodic[d]) {
            int64_t L = g->domain.shape[d], D0 = g->domain.start[d];
            klo[d] = mlc_floor_div(need->start[d] - D0, L);
            khi[d] = mlc_floor_div(need->start[d] + need->shape[d] - 1 - D0, L);
        }
        images *= (uint64_t)(khi[d] - klo[d] + 1);
        if (images > MLC_MAX_IMAGES) {
            char b1[MLC_BOX_STR_LEN];
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "need %d %s spans more than %d periodic images of the domain",
                             need_id, mlc_box_str(need, b1, sizeof b1), MLC_MAX_IMAGES);
        }
        k[d] = klo[d];
    }
    *covered = 0;
    for (;;) {
        int64_t shift[MLC_EXCHANGE_MAX_DIMS] = {0}, back[MLC_EXCHANGE_MAX_DIMS] = {0};
        for (int d = 0; d < g->ndim; d++) {
            shift[d] = k[d] * (g->periodic[d] ? g->domain.shape[d] : 0);
            back[d] = -shift[d];
        }
        /* q: the need seen in the domain's own coordinates for this image. */
        mlc_box_t q = mlc_box_shift(need, back);
        int a = idx->axis;
        int64_t qend = q.start[a] + q.shape[a];
        for (size_t i = lower_bound(idx, q.start[a] - idx->max_extent + 1);
             i < idx->n && idx->pubs[i].box.start[a] < qend; i++) {
            mlc_xmatch_t m;
            if (!mlc_box_intersect(&q, &idx->pubs[i].box, &m.src)) continue;
            m.rank = idx->pubs[i].rank;
            m.prov_id = idx->pubs[i].id;
            m.need_id = need_id;
            m.dst = mlc_box_shift(&m.src, shift);
            *covered += mlc_box_volume(&m.src);
            mlc_status_t st = match_push(mv, &m);
            if (st) return st;
        }
        int d = g->ndim - 1;
        for (; d >= 0; d--) {
            if (++k[d] <= khi[d]) break;
            k[d] = klo[d];
        }
        if (d < 0) return MLC_SUCCESS;
    }
}

typedef struct match_key {
    int rank;
    size_t pos;
} match_key_t;

static int cmp_match_key(const void *a, const void *b)
{
    const match_key_t *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

mlc_status_t mlc_xmatch_needs(const mlc_xgeom_t *g, const mlc_xindex_t *idx,
                              const mlc_box_t *needs, int nneeds, bool allow_unprovided,
                              mlc_xmatch_t **out, size_t *nout, uint64_t *unprovided)
{
    match_vec_t mv = {0};
    uint64_t missing_total = 0;
    mlc_status_t st = MLC_SUCCESS;
    for (int i = 0; i < nneeds; i++) {
        if (mlc_box_empty(&needs[i])) continue;
        size_t first = mv.n;
        uint64_t covered = 0;
        st = match_one(g, idx, i, &needs[i], &mv, &covered);
        if (st) goto fail;
        uint64_t vol = mlc_box_volume(&needs[i]);
        if (covered < vol) {
            if (!allow_unprovided) {
                st = report_uncovered(i, &needs[i], mv.v + first, mv.n - first, vol - covered);
                goto fail;
            }
            missing_total += vol - covered;
        }
    }
    /* Group by provider, keeping need order within a provider: both sides
     * agree on the order of segments in a message through it. */
    if (mv.n > 1) {
        match_key_t *keys = malloc(mv.n * sizeof *keys);
        mlc_xmatch_t *sorted = malloc(mv.n * sizeof *sorted);
        if (!keys || !sorted) {
            free(keys);
            free(sorted);
            st = mlc_error(MLC_ERR_NO_MEMORY, "exchange plan: %zu matches", mv.n);
            goto fail;
        }
        for (size_t i = 0; i < mv.n; i++) keys[i] = (match_key_t){mv.v[i].rank, i};
        qsort(keys, mv.n, sizeof *keys, cmp_match_key);
        for (size_t i = 0; i < mv.n; i++) sorted[i] = mv.v[keys[i].pos];
        free(keys);
        free(mv.v);
        mv.v = sorted;
    }
    *out = mv.v;
    *nout = mv.n;
    *unprovided = missing_total;
    return MLC_SUCCESS;
fail:
    free(mv.v);
    return st;
}
