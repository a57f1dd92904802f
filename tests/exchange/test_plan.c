/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit test: plan building without ranks. Several "ranks" live in this one
 * process; the pure steps (index, match, both sides) run for each, requests
 * and messages are delivered by memcpy, and every ghost cell is compared
 * with the value of the global cell it mirrors (periodic images included).
 */
#include <stdint.h>
#include "exchange/executor.h"
#include "exchange/plan.h"
#include "xunit.h"

#define MAX_RANKS 8
#define MAX_PATCHES 64
#define SENTINEL 0xA5

typedef struct scenario {
    const char *name;
    int ndim, nranks;
    int64_t domain[4];      /* domain shape, start at `origin` */
    int64_t origin[4];
    int cuts[4];            /* patches per axis (uneven splits) */
    int ghost[4];
    int periodic[4];
    size_t esize;
    int empty_rank;         /* a rank given no patch (-1: none) */
} scenario_t;

typedef struct vrank {
    mlc_view_t pv[MAX_PATCHES], nv[MAX_PATCHES * 8];
    mlc_xshape_t ps[MAX_PATCHES], ns[MAX_PATCHES * 8];
    int np, nn;
    mlc_xplan_t plan;
    uint64_t req_counts[MAX_RANKS];
    int64_t *reqs;
    unsigned char *send_arena, *recv_arena;
} vrank_t;

static uint64_t cell_hash(const int64_t *c, int nd)
{
    uint64_t h = 1469598103934665603ull;
    for (int d = 0; d < nd; d++) {
        h ^= (uint64_t)c[d];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static void cell_value(const int64_t *c, int nd, size_t esize, unsigned char *out)
{
    uint64_t h = cell_hash(c, nd);
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

/* Uneven split of [0, n) into k parts: part i starts at i*n/k + (i*i % 2). */
static int64_t cut_at(int64_t n, int k, int i)
{
    if (i == 0) return 0;
    if (i == k) return n;
    int64_t c = i * n / k + (i % 2);
    return c < n ? c : n - 1;
}

static int run_scenario(const scenario_t *s)
{
    const int nd = s->ndim;
    mlc_xgeom_t g = {0};
    g.ndim = nd;
    g.esize = s->esize;
    g.has_domain = true;
    g.domain.ndim = nd;
    bool allow = false;
    for (int d = 0; d < nd; d++) {
        g.domain.start[d] = s->origin[d];
        g.domain.shape[d] = s->domain[d];
        g.periodic[d] = s->periodic[d] != 0;
        allow |= !s->periodic[d];
    }
    static vrank_t R[MAX_RANKS];
    memset(R, 0, sizeof R);
    /* Patches over the patch grid, dealt to ranks (skipping empty_rank). */
    int npatch = 1, idx[4] = {0};
    for (int d = 0; d < nd; d++) npatch *= s->cuts[d];
    CHECK(npatch <= MAX_PATCHES, "too many patches");
    for (int p = 0; p < npatch; p++) {
        int rem = p;
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = rem % s->cuts[d];
            rem /= s->cuts[d];
        }
        mlc_box_t valid = {0};
        valid.ndim = nd;
        int w[MLC_EXCHANGE_MAX_DIMS] = {0};
        for (int d = 0; d < nd; d++) {
            int64_t a = cut_at(s->domain[d], s->cuts[d], idx[d]);
            int64_t b = cut_at(s->domain[d], s->cuts[d], idx[d] + 1);
            valid.start[d] = s->origin[d] + a;
            valid.shape[d] = b - a;
            w[d] = s->ghost[d];
        }
        int r = (p * 5 + 1) % s->nranks;
        if (r == s->empty_rank) r = (r + 1) % s->nranks;
        vrank_t *v = &R[r];
        mlc_box_t parent = valid;
        for (int d = 0; d < nd; d++) {
            parent.start[d] -= w[d];
            parent.shape[d] += 2 * w[d];
        }
        size_t bytes = s->esize;
        for (int d = 0; d < nd; d++) bytes *= (size_t)parent.shape[d];
        unsigned char *data = malloc(bytes);
        CHECK(data, "malloc");
        memset(data, SENTINEL, bytes);
        int64_t c[4];
        for (int d = 0; d < nd; d++) c[d] = valid.start[d];
        do cell_value(c, nd, s->esize, data + offset_in(&parent, c, s->esize));
        while (next_cell(&valid, c));
        v->pv[v->np] = (mlc_view_t){data, parent, valid};
        v->ps[v->np] = (mlc_xshape_t){parent, valid};
        v->np++;
        mlc_box_t halo[2 * MLC_EXCHANGE_MAX_DIMS];
        int nh = 0;
        CHECK_OK(mlc_box_halo(&valid, w, halo, &nh));
        for (int h = 0; h < nh; h++) {
            v->nv[v->nn] = (mlc_view_t){data, parent, halo[h]};
            v->ns[v->nn] = (mlc_xshape_t){parent, halo[h]};
            v->nn++;
        }
    }
    /* Publish: everyone sees every provide. */
    size_t total = 0;
    for (int r = 0; r < s->nranks; r++) total += (size_t)R[r].np;
    const size_t rl = mlc_xreq_len(nd);
    for (int r = 0; r < s->nranks; r++) {
        mlc_xpub_t *pubs = malloc((total + 1) * sizeof *pubs);
        CHECK(pubs, "malloc");
        size_t k = 0;
        for (int q = 0; q < s->nranks; q++)
            for (int i = 0; i < R[q].np; i++) pubs[k++] = (mlc_xpub_t){q, i, R[q].pv[i].region};
        mlc_xindex_t index;
        CHECK_OK(mlc_xindex_build(&g, pubs, total, &index));
        mlc_box_t needs[MAX_PATCHES * 8];
        for (int i = 0; i < R[r].nn; i++) needs[i] = R[r].nv[i].region;
        mlc_xmatch_t *m = NULL;
        size_t nm = 0;
        uint64_t missing = 0;
        CHECK_OK(mlc_xmatch_needs(&g, &index, needs, R[r].nn, allow, &m, &nm, &missing));
        CHECK(allow || missing == 0, "periodic everywhere: nothing missing");
        CHECK_OK(mlc_xplan_recv_side(&R[r].plan, &g, r, s->nranks, m, nm, R[r].ps, R[r].np,
                                     R[r].ns, R[r].nn, R[r].req_counts, &R[r].reqs));
        CHECK(R[r].req_counts[r] == 0, "no request to self");
        free(m);
        mlc_xindex_free(&index);
    }
    /* Route requests to providers (rank order), build the send sides. */
    for (int q = 0; q < s->nranks; q++) {
        uint64_t in_counts[MAX_RANKS] = {0};
        size_t nin = 0;
        for (int r = 0; r < s->nranks; r++) nin += R[r].req_counts[q];
        int64_t *in = malloc((nin + 1) * rl * sizeof *in);
        CHECK(in, "malloc");
        size_t k = 0;
        for (int r = 0; r < s->nranks; r++) {
            size_t before = 0;
            for (int q2 = 0; q2 < q; q2++) before += R[r].req_counts[q2];
            in_counts[r] = R[r].req_counts[q];
            if (in_counts[r]) memcpy(in + k * rl, R[r].reqs + before * rl, in_counts[r] * rl * sizeof *in);
            k += in_counts[r];
        }
        CHECK_OK(mlc_xplan_send_side(&R[q].plan, &g, s->nranks, in_counts, in, R[q].ps, R[q].np));
        free(in);
    }
    /* One message per neighbour: peers unique and ascending on both sides. */
    for (int r = 0; r < s->nranks; r++) {
        const mlc_xplan_t *pl = &R[r].plan;
        for (int i = 1; i < pl->nsend; i++)
            CHECK(pl->send[i].rank > pl->send[i - 1].rank, "send peers ascending");
        for (int i = 1; i < pl->nrecv; i++)
            CHECK(pl->recv[i].rank > pl->recv[i - 1].rank, "recv peers ascending");
        for (int i = 0; i < pl->nsend; i++) CHECK(pl->send[i].rank != r, "no message to self");
        R[r].send_arena = malloc(pl->send_arena + 1);
        R[r].recv_arena = malloc(pl->recv_arena + 1);
        CHECK(R[r].send_arena && R[r].recv_arena, "malloc");
    }
    /* Execute: pack, deliver, unpack, local copies. */
    for (int q = 0; q < s->nranks; q++) {
        const mlc_xplan_t *pl = &R[q].plan;
        for (size_t k = 0; k < pl->nsend_segs; k++)
            mlc_copy_run(&pl->send_segs[k].copy, R[q].pv[pl->send_segs[k].id].data, R[q].send_arena);
        for (int i = 0; i < pl->nsend; i++) {
            const mlc_xpeer_t *sp = &pl->send[i];
            const mlc_xplan_t *rp = &R[sp->rank].plan;
            const mlc_xpeer_t *match = NULL;
            for (int j = 0; j < rp->nrecv; j++)
                if (rp->recv[j].rank == q) match = &rp->recv[j];
            CHECK(match, "rank %d sends to %d, which expects nothing", q, sp->rank);
            CHECK(match->bytes == sp->bytes, "message %d->%d: %zu bytes sent, %zu expected", q,
                  sp->rank, sp->bytes, match->bytes);
            CHECK(match->nseg == sp->nseg, "segments agree");
            memcpy(R[sp->rank].recv_arena + match->offset, R[q].send_arena + sp->offset, sp->bytes);
        }
    }
    for (int r = 0; r < s->nranks; r++) {
        const mlc_xplan_t *pl = &R[r].plan;
        for (int j = 0; j < pl->nrecv; j++) {
            bool sent = false;
            const mlc_xplan_t *sp = &R[pl->recv[j].rank].plan;
            for (int i = 0; i < sp->nsend; i++) sent |= sp->send[i].rank == r;
            CHECK(sent, "rank %d expects a message from %d that never comes", r, pl->recv[j].rank);
        }
        for (size_t k = 0; k < pl->nrecv_segs; k++)
            mlc_copy_run(&pl->recv_segs[k].copy, R[r].recv_arena, R[r].nv[pl->recv_segs[k].id].data);
        mlc_xbind_t b = {R[r].pv, R[r].nv};
        mlc_xexec_local_copies(pl, &b);
    }
    /* Verify every cell of every parent array. */
    for (int r = 0; r < s->nranks; r++) {
        CHECK(r != s->empty_rank || (R[r].np == 0 && R[r].plan.nsend == 0 && R[r].plan.nrecv == 0),
              "empty rank takes no part");
        for (int i = 0; i < R[r].np; i++) {
            const mlc_view_t *v = &R[r].pv[i];
            int64_t c[4], w[4];
            for (int d = 0; d < nd; d++) c[d] = v->parent.start[d];
            do {
                bool outside = false;
                for (int d = 0; d < nd; d++) {
                    int64_t L = s->domain[d], o = s->origin[d];
                    w[d] = c[d];
                    if (s->periodic[d]) w[d] = o + ((c[d] - o) % L + L) % L;
                    else outside |= c[d] < o || c[d] >= o + L;
                }
                unsigned char want[64], *got = (unsigned char *)v->data + offset_in(&v->parent, c, s->esize);
                if (outside) memset(want, SENTINEL, s->esize);
                else cell_value(w, nd, s->esize, want);
                CHECK(memcmp(got, want, s->esize) == 0,
                      "%s: rank %d patch %d cell (%lld,%lld,%lld,%lld) wrong%s", s->name, r, i,
                      (long long)c[0], (long long)(nd > 1 ? c[1] : 0),
                      (long long)(nd > 2 ? c[2] : 0), (long long)(nd > 3 ? c[3] : 0),
                      outside ? " (outside: must stay untouched)" : "");
            } while (next_cell(&v->parent, c));
        }
    }
    for (int r = 0; r < s->nranks; r++) {
        for (int i = 0; i < R[r].np; i++) free(R[r].pv[i].data);
        free(R[r].reqs);
        free(R[r].send_arena);
        free(R[r].recv_arena);
        mlc_xplan_free(&R[r].plan);
    }
    return 0;
}

static const scenario_t scenarios[] = {
    {"1d periodic g1", 1, 3, {17}, {0}, {5}, {1}, {1}, 8, -1},
    {"1d open g3 wide ghosts", 1, 4, {11}, {-4}, {6}, {3}, {0}, 4, 2},
    {"1d periodic ghost wider than patches", 1, 2, {7}, {3}, {4}, {3}, {1}, 3, -1},
    {"2d periodic g1 12 patches 4 ranks", 2, 4, {20, 23}, {0, 0}, {3, 4}, {1, 1}, {1, 1}, 8, -1},
    {"2d periodic g2 one rank", 2, 1, {9, 10}, {0, 0}, {3, 2}, {2, 2}, {1, 1}, 8, -1},
    {"2d mixed periodic g2x1", 2, 3, {13, 9}, {-2, 5}, {2, 3}, {2, 1}, {1, 0}, 12, 1},
    {"2d open g3", 2, 5, {10, 10}, {0, 0}, {3, 3}, {3, 3}, {0, 0}, 1, 4},
    {"3d periodic g1", 3, 4, {6, 7, 5}, {0, 0, 0}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 8, -1},
    {"3d mixed g2 uneven", 3, 3, {8, 5, 9}, {1, -3, 0}, {3, 1, 2}, {2, 1, 2}, {0, 1, 1}, 16, 0},
    {"4d periodic g1", 4, 2, {4, 3, 4, 5}, {0, 0, 0, 0}, {2, 1, 2, 2}, {1, 1, 1, 1}, {1, 1, 1, 1}, 4, -1},
    {"2d single patch periodic g3", 2, 2, {5, 4}, {0, 0}, {1, 1}, {3, 3}, {1, 1}, 8, 1},
};

static int test_scenarios(void)
{
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (run_scenario(&scenarios[i])) {
            fprintf(stderr, "scenario \"%s\" failed\n", scenarios[i].name);
            return 1;
        }
    return 0;
}

static mlc_xgeom_t geom2(bool periodic)
{
    mlc_xgeom_t g = {0};
    g.ndim = 2;
    g.esize = 8;
    g.has_domain = true;
    g.domain.ndim = 2;
    g.domain.shape[0] = 10;
    g.domain.shape[1] = 10;
    g.periodic[0] = g.periodic[1] = periodic;
    return g;
}

static mlc_box_t b2(int64_t y, int64_t x, int64_t h, int64_t w)
{
    int64_t s[2] = {y, x}, e[2] = {h, w};
    return mlc_box_make(2, s, e);
}

static int test_errors(void)
{
    mlc_xgeom_t g = geom2(false);
    mlc_xindex_t idx;
    /* Overlapping provides: both boxes and ranks named. */
    mlc_xpub_t *p = malloc(3 * sizeof *p);
    CHECK(p, "malloc");
    p[0] = (mlc_xpub_t){0, 0, b2(0, 0, 5, 5)};
    p[1] = (mlc_xpub_t){1, 0, b2(5, 0, 5, 5)};
    p[2] = (mlc_xpub_t){2, 3, b2(4, 4, 2, 2)};
    CHECK_ERR_MSG(mlc_xindex_build(&g, p, 3, &idx), MLC_ERR_INVALID_ARG,
                 "rank 0 provide 0 [0,5)x[0,5) and rank 2 provide 3 [4,6)x[4,6) share [4,5)x[4,5)");
    /* Outside the domain. */
    p = malloc(sizeof *p);
    CHECK(p, "malloc");
    p[0] = (mlc_xpub_t){1, 2, b2(8, 8, 3, 1)};
    CHECK_ERR_MSG(mlc_xindex_build(&g, p, 1, &idx), MLC_ERR_INVALID_ARG,
                 "rank 1 provide 2 [8,11)x[8,9) lies outside the domain [0,10)x[0,10)");
    /* Empty provides are ignored, even overlapping ones. */
    p = malloc(2 * sizeof *p);
    CHECK(p, "malloc");
    p[0] = (mlc_xpub_t){0, 0, b2(0, 0, 10, 10)};
    p[1] = (mlc_xpub_t){1, 0, b2(3, 3, 0, 4)};
    CHECK_OK(mlc_xindex_build(&g, p, 2, &idx));
    CHECK(idx.n == 1, "empty provide dropped");
    mlc_xindex_free(&idx);
    /* A need nobody provides: named with an uncovered box; with the flag, counted. */
    p = malloc(2 * sizeof *p);
    CHECK(p, "malloc");
    p[0] = (mlc_xpub_t){0, 0, b2(0, 0, 5, 10)};
    p[1] = (mlc_xpub_t){1, 0, b2(5, 0, 5, 4)};
    CHECK_OK(mlc_xindex_build(&g, p, 2, &idx));
    mlc_box_t needs[2] = {b2(0, 0, 2, 2), b2(4, 2, 3, 4)};
    mlc_xmatch_t *m = NULL;
    size_t nm = 0;
    uint64_t missing = 0;
    CHECK_ERR_MSG(mlc_xmatch_needs(&g, &idx, needs, 2, false, &m, &nm, &missing),
                 MLC_ERR_INVALID_ARG, "need 1 [4,7)x[2,6): 4 cells no rank provides (e.g. [5,7)x[4,6))");
    CHECK_OK(mlc_xmatch_needs(&g, &idx, needs, 2, true, &m, &nm, &missing));
    CHECK(missing == 4 && nm == 3, "missing %llu matches %zu", (unsigned long long)missing, nm);
    CHECK(m[0].rank == 0 && m[1].rank == 0 && m[2].rank == 1, "grouped by rank");
    CHECK(m[0].need_id == 0 && m[1].need_id == 1, "need order kept within a rank");
    free(m);
    /* Beyond the domain on an open axis is unprovided too. */
    mlc_box_t outside[1] = {b2(-1, 0, 1, 3)};
    CHECK_ERR_MSG(mlc_xmatch_needs(&g, &idx, outside, 1, false, &m, &nm, &missing),
                 MLC_ERR_INVALID_ARG, "need 0 [-1,0)x[0,3): 3 cells");
    mlc_xindex_free(&idx);
    /* Periodic: the same need is served by the image. */
    mlc_xgeom_t gp = geom2(true);
    p = malloc(sizeof *p);
    CHECK(p, "malloc");
    p[0] = (mlc_xpub_t){3, 0, b2(0, 0, 10, 10)};
    CHECK_OK(mlc_xindex_build(&gp, p, 1, &idx));
    CHECK_OK(mlc_xmatch_needs(&gp, &idx, outside, 1, false, &m, &nm, &missing));
    CHECK(nm == 1 && m[0].src.start[0] == 9 && m[0].dst.start[0] == -1, "wrapped");
    free(m);
    /* Absurdly many images are refused. */
    mlc_box_t huge[1] = {b2(0, 0, 1000, 1000)};
    CHECK_ERR_MSG(mlc_xmatch_needs(&gp, &idx, huge, 1, false, &m, &nm, &missing),
                 MLC_ERR_INVALID_ARG, "periodic images");
    mlc_xindex_free(&idx);
    return 0;
}

/* A request naming a provide the rank does not have is caught. */
static int test_bad_request(void)
{
    mlc_xgeom_t g = geom2(false);
    mlc_xshape_t provs[1] = {{b2(0, 0, 5, 5), b2(0, 0, 5, 5)}};
    uint64_t counts[2] = {1, 0};
    int64_t rec[5] = {0, 3, 3, 4, 1}; /* provide 0, [3,7)x[3,4): beyond the region */
    mlc_xplan_t plan = {0};
    CHECK_ERR_MSG(mlc_xplan_send_side(&plan, &g, 2, counts, rec, provs, 1), MLC_ERR_INTERNAL,
                 "rank 0 asked for [3,7)x[3,4) of provide 0");
    rec[0] = 7;
    CHECK_ERR_MSG(mlc_xplan_send_side(&plan, &g, 2, counts, rec, provs, 1), MLC_ERR_INTERNAL,
                 "of provide 7 (this rank has 1 provides)");
    return 0;
}

int main(void)
{
    int failures = 0;
    XRUN(test_scenarios);
    XRUN(test_errors);
    XRUN(test_bad_request);
    return failures ? 1 : 0;
}
