/* SPDX-License-Identifier: BSD-3-Clause */
/* Rank-test helper: decomposed fields with checkable ghost cells. */
#include "xfield.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t cell_hash(const int64_t *c, int nd, uint64_t iter)
{
    uint64_t h = 1469598103934665603ull ^ (iter * 0x9e3779b97f4a7c15ull);
    for (int d = 0; d < nd; d++) {
        h ^= (uint64_t)c[d];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static void cell_value(const int64_t *c, int nd, uint64_t iter, size_t esize, unsigned char *out)
{
    uint64_t h = cell_hash(c, nd, iter);
    for (size_t i = 0; i < esize; i++) out[i] = (unsigned char)((h >> (8 * (i % 8))) + i);
}

static size_t offset_in(const mlc_box_t *parent, const int64_t *c, size_t esize)
{
    size_t off = 0;
    for (int d = 0; d < parent->ndim; d++)
        off = off * (size_t)parent->shape[d] + (size_t)(c[d] - parent->start[d]);
    return off * esize;
}

static int next_cell(const mlc_box_t *b, int64_t *c)
{
    for (int d = b->ndim - 1; d >= 0; d--) {
        if (++c[d] < b->start[d] + b->shape[d]) return 1;
        c[d] = b->start[d];
    }
    return 0;
}

/* Uneven cut of [0, n) into k parts. */
static int64_t cut_at(int64_t n, int k, int i)
{
    if (i == 0) return 0;
    if (i == k) return n;
    int64_t c = i * n / k + (i % 2);
    return c < n ? c : n - 1;
}

mlc_exchange_config_t xfield_config(const xlayout_t *L)
{
    mlc_exchange_config_t cfg = MLC_EXCHANGE_CONFIG_INIT;
    cfg.ndim = L->ndim;
    cfg.dtype = L->esize == 8 ? MLC_FLOAT64 : MLC_RECORD((int)L->esize);
    cfg.domain = mlc_box_make(L->ndim, L->origin, L->domain);
    for (int d = 0; d < L->ndim; d++) {
        cfg.periodic[d] = L->periodic[d];
        if (!L->periodic[d]) cfg.flags |= MLC_EXCHANGE_ALLOW_UNPROVIDED;
    }
    return cfg;
}

int xfield_make(xfield_t *f, const xlayout_t *L, int rank, int nranks)
{
    const int nd = L->ndim;
    int npatch = 1;
    memset(f, 0, sizeof *f);
    f->L = *L;
    for (int d = 0; d < nd; d++) npatch *= L->cuts[d];
    f->p = calloc((size_t)npatch, sizeof *f->p);
    if (!f->p) return 1;
    for (int p = 0; p < npatch; p++) {
        int owner = (p * 5 + 1) % nranks;
        if (nranks > 1 && owner == L->empty_rank) owner = (owner + 1) % nranks;
        if (owner != rank) continue;
        int rem = p, idx[4] = {0};
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = rem % L->cuts[d];
            rem /= L->cuts[d];
        }
        xpatch_t *x = &f->p[f->np];
        x->valid.ndim = x->parent.ndim = nd;
        size_t bytes = L->esize;
        for (int d = 0; d < nd; d++) {
            int64_t a = cut_at(L->domain[d], L->cuts[d], idx[d]);
            int64_t b = cut_at(L->domain[d], L->cuts[d], idx[d] + 1);
            x->valid.start[d] = L->origin[d] + a;
            x->valid.shape[d] = b - a;
            x->parent.start[d] = x->valid.start[d] - L->ghost[d];
            x->parent.shape[d] = x->valid.shape[d] + 2 * L->ghost[d];
            bytes *= (size_t)x->parent.shape[d];
        }
        x->data = malloc(bytes);
        if (!x->data) return 1;
        f->np++;
    }
    return 0;
}

mlc_status_t xfield_declare(xfield_t *f, mlc_exchange_t *ex)
{
    for (int i = 0; i < f->np; i++) {
        xpatch_t *x = &f->p[i];
        mlc_view_t v = {x->data, x->parent, x->valid};
        mlc_status_t st = mlc_exchange_provide(ex, &v, &x->prov_id);
        if (st) return st;
        mlc_box_t halo[2 * MLC_EXCHANGE_MAX_DIMS];
        int nh = 0;
        if ((st = mlc_box_halo(&x->valid, f->L.ghost, halo, &nh))) return st;
        x->nneeds = nh;
        for (int h = 0; h < nh; h++) {
            int id;
            v.region = halo[h];
            if ((st = mlc_exchange_need(ex, &v, &id))) return st;
            if (h == 0) x->need_first = id;
        }
    }
    return MLC_SUCCESS;
}

mlc_status_t xfield_swap(xfield_t *f, unsigned char **other, mlc_exchange_t *ex)
{
    for (int i = 0; i < f->np; i++) {
        xpatch_t *x = &f->p[i];
        unsigned char *t = x->data;
        x->data = other[i];
        other[i] = t;
        mlc_status_t st = mlc_exchange_set_data(ex, MLC_EXCHANGE_PROVIDE, x->prov_id, x->data);
        for (int h = 0; h < x->nneeds && !st; h++)
            st = mlc_exchange_set_data(ex, MLC_EXCHANGE_NEED, x->need_first + h, x->data);
        if (st) return st;
    }
    return MLC_SUCCESS;
}

void xfield_fill(xfield_t *f, uint64_t iter)
{
    const int nd = f->L.ndim;
    for (int i = 0; i < f->np; i++) {
        xpatch_t *x = &f->p[i];
        int64_t c[4];
        for (int d = 0; d < nd; d++) c[d] = x->parent.start[d];
        do {
            int in = 1;
            for (int d = 0; d < nd; d++)
                in &= c[d] >= x->valid.start[d] && c[d] < x->valid.start[d] + x->valid.shape[d];
            unsigned char *cell = x->data + offset_in(&x->parent, c, f->L.esize);
            if (in) cell_value(c, nd, iter, f->L.esize, cell);
            else memset(cell, XF_SENTINEL, f->L.esize);
        } while (next_cell(&x->parent, c));
    }
}

long xfield_verify(const xfield_t *f, uint64_t iter, char *why, size_t len)
{
    const int nd = f->L.ndim;
    long bad = 0;
    for (int i = 0; i < f->np; i++) {
        const xpatch_t *x = &f->p[i];
        int64_t c[4], w[4];
        for (int d = 0; d < nd; d++) c[d] = x->parent.start[d];
        do {
            int outside = 0;
            for (int d = 0; d < nd; d++) {
                int64_t L = f->L.domain[d], o = f->L.origin[d];
                w[d] = c[d];
                if (f->L.periodic[d]) w[d] = o + ((c[d] - o) % L + L) % L;
                else outside |= c[d] < o || c[d] >= o + L;
            }
            unsigned char want[64];
            const unsigned char *got = x->data + offset_in(&x->parent, c, f->L.esize);
            if (outside) memset(want, XF_SENTINEL, f->L.esize);
            else cell_value(w, nd, iter, f->L.esize, want);
            if (memcmp(got, want, f->L.esize) != 0) {
                if (bad == 0)
                    snprintf(why, len, "patch %d cell (%lld,%lld,%lld,%lld)%s: got byte0 0x%02x want 0x%02x",
                             i, (long long)c[0], (long long)(nd > 1 ? c[1] : 0),
                             (long long)(nd > 2 ? c[2] : 0), (long long)(nd > 3 ? c[3] : 0),
                             outside ? " (outside the open domain)" : "", got[0], want[0]);
                bad++;
            }
        } while (next_cell(&x->parent, c));
    }
    return bad;
}

void xfield_free(xfield_t *f)
{
    for (int i = 0; i < f->np; i++) free(f->p[i].data);
    free(f->p);
    memset(f, 0, sizeof *f);
}

void xfield_value(const int64_t *c, int nd, uint64_t iter, size_t esize, unsigned char *out)
{
    cell_value(c, nd, iter, esize, out);
}
