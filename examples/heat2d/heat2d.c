/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heat2d: explicit 2-D heat equation on a grid cut into patches, several per
 * rank, with ghost cells filled by an mlcomm exchange plan.
 *
 *   mlcomm-run -n 4 heat2d --patches-per-rank 3
 *   mpirun -np 4 heat2d --nx 512 --ny 512 --ghost 2
 *
 * With --ghost G the plan runs once every G steps: the G-1 steps in between
 * recompute a shrinking band of ghost cells instead of communicating. The
 * first step after each exchange overlaps it: cells whose stencil stays
 * inside the patch are updated between mlc_exchange_start and _finish.
 *
 * Prints `checksum <16 hex digits>`: FNV-1a of the final field's bytes in
 * global row-major order, the same for any number of ranks and patches.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mlcomm_exchange.h"

typedef struct options {
    long nx, ny, steps, ppr, ghost;
    int periodic, overlap;
} options_t;

typedef struct patch {
    mlc_box_t valid, parent;
    double *buf[2];
    int prov_id, need_first, nneeds;
} patch_t;

static const double RATE = 0.2; /* alpha*dt/dx^2, stable below 0.25 */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: heat2d [--nx N] [--ny N] [--steps N] [--patches-per-rank N] [--ghost G]\n"
               "              [--periodic 0|1] [--no-overlap]\n"
               "defaults: --nx 256 --ny 256 --steps 100 --patches-per-rank 1 --ghost 1 --periodic 1\n");
}

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "heat2d: %s needs an integer in %ld..%ld, got \"%s\"\n", flag, lo, hi,
                s ? s : "");
        return 1;
    }
    *out = v;
    return 0;
}

static int parse(int argc, char **argv, options_t *o)
{
    *o = (options_t){256, 256, 100, 1, 1, 1, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long p;
        int bad = 0;
        if (!strcmp(a, "--nx")) bad = parse_long(a, v, 1, 1L << 20, &o->nx), i++;
        else if (!strcmp(a, "--ny")) bad = parse_long(a, v, 1, 1L << 20, &o->ny), i++;
        else if (!strcmp(a, "--steps")) bad = parse_long(a, v, 0, 1L << 30, &o->steps), i++;
        else if (!strcmp(a, "--patches-per-rank")) bad = parse_long(a, v, 1, 4096, &o->ppr), i++;
        else if (!strcmp(a, "--ghost")) bad = parse_long(a, v, 1, 16, &o->ghost), i++;
        else if (!strcmp(a, "--periodic")) bad = parse_long(a, v, 0, 1, &p), o->periodic = (int)p, i++;
        else if (!strcmp(a, "--no-overlap")) o->overlap = 0;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "heat2d: unknown argument \"%s\"\n", a);
            usage(stderr);
            return 1;
        }
        if (bad) return 1;
    }
    return 0;
}

/* Patch grid py x px for `total` patches: the most square patches that fit. */
static int patch_grid(const options_t *o, long total, long *py, long *px)
{
    double best = -1;
    for (long y = 1; y <= total; y++) {
        if (total % y) continue;
        long x = total / y;
        if (y > o->ny || x > o->nx) continue;
        double cost = (double)o->ny / y + (double)o->nx / x; /* half a patch's perimeter */
        if (best < 0 || cost < best) {
            best = cost;
            *py = y;
            *px = x;
        }
    }
    if (best < 0) {
        fprintf(stderr, "heat2d: %ld patches do not fit a %ldx%ld grid\n", total, o->ny, o->nx);
        return 1;
    }
    return 0;
}

/* Global patch g: its valid box (axis 0 = y, axis 1 = x). */
static mlc_box_t patch_box(const options_t *o, long py, long px, long g)
{
    long iy = g / px, ix = g % px;
    int64_t start[2] = {iy * o->ny / py, ix * o->nx / px};
    int64_t shape[2] = {(iy + 1) * o->ny / py - start[0], (ix + 1) * o->nx / px - start[1]};
    return mlc_box_make(2, start, shape);
}

static double initial(int64_t y, int64_t x)
{
    /* A bumpy field plus a hot square; exact in binary. */
    double v = (double)((x * 37 + y * 101) % 97) / 128.0;
    if (y >= 8 && y < 24 && x >= 8 && x < 24) v += 4.0;
    return v;
}

static size_t at(const patch_t *p, int64_t y, int64_t x)
{
    return (size_t)(y - p->parent.start[0]) * (size_t)p->parent.shape[1] +
           (size_t)(x - p->parent.start[1]);
}

/* One step on rows [y0,y1), columns [x0,x1) (global), src -> dst. */
static void update(const patch_t *p, const double *src, double *dst, int64_t y0, int64_t y1,
                   int64_t x0, int64_t x1)
{
    const int64_t w = p->parent.shape[1];
    for (int64_t y = y0; y < y1; y++) {
        const double *c = src + at(p, y, 0 + p->parent.start[1]);
        double *o = dst + at(p, y, 0 + p->parent.start[1]);
        for (int64_t x = x0 - p->parent.start[1]; x < x1 - p->parent.start[1]; x++) {
            double s = ((c[x - w] + c[x + w]) + c[x - 1]) + c[x + 1];
            o[x] = c[x] + RATE * (s - 4.0 * c[x]);
        }
    }
}

/* The band a substep computes: valid grown by `grow`, kept inside the domain on open axes. */
static mlc_box_t band(const options_t *o, const patch_t *p, int64_t grow)
{
    mlc_box_t b = p->valid;
    const int64_t n[2] = {o->ny, o->nx};
    for (int d = 0; d < 2; d++) {
        int64_t lo = b.start[d] - grow, hi = b.start[d] + b.shape[d] + grow;
        if (!o->periodic) {
            lo = lo < 0 ? 0 : lo;
            hi = hi > n[d] ? n[d] : hi;
        }
        b.start[d] = lo;
        b.shape[d] = hi - lo;
    }
    return b;
}

static void update_box(const patch_t *p, int cur, const mlc_box_t *b)
{
    update(p, p->buf[cur], p->buf[1 - cur], b->start[0], b->start[0] + b->shape[0], b->start[1],
           b->start[1] + b->shape[1]);
}

/* Update `b` except the cells of `inner` (already done while the exchange ran). */
static void update_ring(const patch_t *p, int cur, const mlc_box_t *b, const mlc_box_t *in)
{
    const double *src = p->buf[cur];
    double *dst = p->buf[1 - cur];
    int64_t by1 = b->start[0] + b->shape[0], bx1 = b->start[1] + b->shape[1];
    int64_t iy0 = in->start[0], iy1 = iy0 + in->shape[0], ix0 = in->start[1], ix1 = ix0 + in->shape[1];
    for (int64_t y = b->start[0]; y < by1; y++) {
        if (y < iy0 || y >= iy1 || in->shape[1] <= 0) {
            update(p, src, dst, y, y + 1, b->start[1], bx1);
        } else {
            update(p, src, dst, y, y + 1, b->start[1], ix0);
            update(p, src, dst, y, y + 1, ix1, bx1);
        }
    }
}

static int fail(mlc_status_t st, const char *what)
{
    fprintf(stderr, "heat2d: %s: %s: %s\n", what, mlc_status_name(st), mlc_last_error());
    return 1;
}

#define TRY(call)                                        \
    do {                                                 \
        mlc_status_t st_ = (call);                       \
        if (st_) return fail(st_, #call);                \
    } while (0)

typedef struct range {
    double lo, hi;
} range_t;

static void range_op(const void *in, void *inout, void *ctx)
{
    const range_t *a = in;
    range_t *b = inout;
    if (a->lo < b->lo) b->lo = a->lo;
    if (a->hi > b->hi) b->hi = a->hi;
}

/* Gather every patch to rank 0 and hash the field in row-major order. */
static int checksum(const options_t *o, mlc_comm_t *comm, patch_t *ps, long np, long py, long px,
                    int cur)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    size_t mine = 0;
    for (long i = 0; i < np; i++) mine += (size_t)(ps[i].valid.shape[0] * ps[i].valid.shape[1]);
    double *send = malloc((mine ? mine : 1) * sizeof *send);
    size_t *counts = calloc((size_t)size, sizeof *counts), *displs = calloc((size_t)size, sizeof *displs);
    double *all = rank == 0 ? malloc((size_t)o->nx * (size_t)o->ny * sizeof *all) : NULL;
    double *field = rank == 0 ? malloc((size_t)o->nx * (size_t)o->ny * sizeof *field) : NULL;
    if (!send || !counts || !displs || (rank == 0 && (!all || !field))) {
        fprintf(stderr, "heat2d: out of memory for the checksum\n");
        return 1;
    }
    size_t k = 0;
    for (long i = 0; i < np; i++)
        for (int64_t y = ps[i].valid.start[0]; y < ps[i].valid.start[0] + ps[i].valid.shape[0]; y++)
            for (int64_t x = ps[i].valid.start[1]; x < ps[i].valid.start[1] + ps[i].valid.shape[1]; x++)
                send[k++] = ps[i].buf[cur][at(&ps[i], y, x)];
    /* Patches are dealt in blocks: rank r holds global patches r*ppr .. */
    size_t off = 0;
    for (int r = 0; r < size; r++) {
        displs[r] = off;
        for (long g = r * o->ppr; g < (r + 1) * o->ppr; g++) {
            mlc_box_t b = patch_box(o, py, px, g);
            counts[r] += (size_t)(b.shape[0] * b.shape[1]);
        }
        off += counts[r];
    }
    mlc_status_t st = mlc_gatherv(send, mine, all, counts, displs, MLC_FLOAT64, 0, comm, NULL);
    if (st) return fail(st, "mlc_gatherv");
    if (rank == 0) {
        k = 0;
        for (long g = 0; g < py * px; g++) {
            mlc_box_t b = patch_box(o, py, px, g);
            for (int64_t y = b.start[0]; y < b.start[0] + b.shape[0]; y++)
                for (int64_t x = b.start[1]; x < b.start[1] + b.shape[1]; x++)
                    field[(size_t)y * (size_t)o->nx + (size_t)x] = all[k++];
        }
        uint64_t h = 0xcbf29ce484222325ull;
        const unsigned char *bytes = (const unsigned char *)field;
        for (size_t i = 0; i < (size_t)o->nx * (size_t)o->ny * sizeof *field; i++) {
            h ^= bytes[i];
            h *= 0x100000001b3ull;
        }
        printf("checksum %016" PRIx64 "\n", h);
    }
    free(send);
    free(counts);
    free(displs);
    free(all);
    free(field);
    return 0;
}

/* Point every view of every patch at buffer `cur`. */
static int bind(mlc_exchange_t *ex, patch_t *ps, long np, int cur)
{
    for (long i = 0; i < np; i++) {
        TRY(mlc_exchange_set_data(ex, MLC_EXCHANGE_PROVIDE, ps[i].prov_id, ps[i].buf[cur]));
        for (int h = 0; h < ps[i].nneeds; h++)
            TRY(mlc_exchange_set_data(ex, MLC_EXCHANGE_NEED, ps[i].need_first + h, ps[i].buf[cur]));
    }
    return 0;
}

static int simulate(const options_t *o, mlc_comm_t *comm)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    const long total = o->ppr * size, np = o->ppr;
    const int G = (int)o->ghost;
    long py = 0, px = 0;
    if (patch_grid(o, total, &py, &px)) return 1;
    patch_t *ps = calloc((size_t)np, sizeof *ps);
    if (!ps) return 1;

    mlc_exchange_config_t cfg = MLC_EXCHANGE_CONFIG_INIT;
    cfg.ndim = 2;
    cfg.dtype = MLC_FLOAT64;
    int64_t zero[2] = {0, 0}, n[2] = {o->ny, o->nx};
    cfg.domain = mlc_box_make(2, zero, n);
    cfg.periodic[0] = cfg.periodic[1] = o->periodic;
    /* Open boundaries: ghosts outside the domain stay 0 (a cold wall). */
    if (!o->periodic) cfg.flags = MLC_EXCHANGE_ALLOW_UNPROVIDED;
    mlc_exchange_t *ex;
    TRY(mlc_exchange_create(comm, &cfg, &ex));
    int widths[2] = {G, G};
    for (long i = 0; i < np; i++) {
        patch_t *p = &ps[i];
        p->valid = patch_box(o, py, px, rank * o->ppr + i);
        p->parent = p->valid;
        for (int d = 0; d < 2; d++) {
            p->parent.start[d] -= G;
            p->parent.shape[d] += 2 * G;
        }
        size_t cells = (size_t)(p->parent.shape[0] * p->parent.shape[1]);
        p->buf[0] = calloc(cells, sizeof(double));
        p->buf[1] = calloc(cells, sizeof(double));
        if (!p->buf[0] || !p->buf[1]) return fail(MLC_ERR_NO_MEMORY, "patch buffers");
        for (int64_t y = p->valid.start[0]; y < p->valid.start[0] + p->valid.shape[0]; y++)
            for (int64_t x = p->valid.start[1]; x < p->valid.start[1] + p->valid.shape[1]; x++)
                p->buf[0][at(p, y, x)] = initial(y, x);
        mlc_view_t v = {p->buf[0], p->parent, p->valid};
        TRY(mlc_exchange_provide(ex, &v, &p->prov_id));
        mlc_box_t halo[2 * MLC_EXCHANGE_MAX_DIMS];
        int nh = 0;
        TRY(mlc_box_halo(&p->valid, widths, halo, &nh));
        p->nneeds = nh;
        for (int h = 0; h < nh; h++) {
            int id;
            v.region = halo[h];
            TRY(mlc_exchange_need(ex, &v, &id));
            if (h == 0) p->need_first = id;
        }
    }
    TRY(mlc_exchange_build(ex));

    int cur = 0;
    double t_exchange = 0, t0 = now_s();
    for (long done = 0; done < o->steps;) {
        int m = (int)(o->steps - done < G ? o->steps - done : G);
        if (bind(ex, ps, np, cur)) return 1;
        double te = now_s();
        if (o->overlap) {
            TRY(mlc_exchange_start(ex));
            t_exchange += now_s() - te;
            /* Cells whose stencil stays inside the valid box need no ghost. */
            for (long i = 0; i < np; i++) {
                mlc_box_t inner = band(o, &ps[i], -1);
                if (inner.shape[0] > 0 && inner.shape[1] > 0) update_box(&ps[i], cur, &inner);
            }
            te = now_s();
            TRY(mlc_exchange_finish(ex));
            t_exchange += now_s() - te;
            for (long i = 0; i < np; i++) {
                mlc_box_t inner = band(o, &ps[i], -1), b0 = band(o, &ps[i], m - 1);
                if (inner.shape[0] < 0) inner.shape[0] = 0;
                if (inner.shape[1] < 0) inner.shape[1] = 0;
                update_ring(&ps[i], cur, &b0, &inner);
            }
        } else {
            TRY(mlc_exchange_run(ex));
            t_exchange += now_s() - te;
            for (long i = 0; i < np; i++) {
                mlc_box_t b0 = band(o, &ps[i], m - 1);
                update_box(&ps[i], cur, &b0);
            }
        }
        cur = 1 - cur;
        /* The remaining steps of this round recompute a shrinking ghost band. */
        for (int s = 1; s < m; s++) {
            for (long i = 0; i < np; i++) {
                mlc_box_t b = band(o, &ps[i], m - 1 - s);
                update_box(&ps[i], cur, &b);
            }
            cur = 1 - cur;
        }
        done += m;
    }
    double t_total = now_s() - t0;
    /* Report the slowest rank. */
    double times[2] = {t_total, t_exchange}, worst[2];
    TRY(mlc_allreduce(times, worst, 2, MLC_FLOAT64, MLC_MAX, comm, NULL));
    /* The value range, through the global combine (ReduceStage). */
    range_t r = {1e300, -1e300}, all;
    for (long i = 0; i < np; i++)
        for (int64_t y = ps[i].valid.start[0]; y < ps[i].valid.start[0] + ps[i].valid.shape[0]; y++)
            for (int64_t x = ps[i].valid.start[1]; x < ps[i].valid.start[1] + ps[i].valid.shape[1]; x++) {
                double v = ps[i].buf[cur][at(&ps[i], y, x)];
                r.lo = v < r.lo ? v : r.lo;
                r.hi = v > r.hi ? v : r.hi;
            }
    TRY(mlc_combine(&r, &all, 1, sizeof r, range_op, 1, NULL, comm));
    mlc_exchange_info_t info;
    TRY(mlc_exchange_info(ex, &info));
    if (rank == 0) {
        printf("heat2d: %ldx%ld grid, %ld steps, %d ranks x %ld patches (%ldx%ld), ghost %d, %s, "
               "backend %s\n",
               o->ny, o->nx, o->steps, size, o->ppr, py, px, G,
               o->periodic ? "periodic" : "open", mlc_comm_backend(comm));
        printf("rank 0 plan: %d send / %d recv neighbours, %zu local copies, executor %s\n",
               info.send_peers, info.recv_peers, info.local_copies, info.executor);
        printf("range [%.17g, %.17g]\n", all.lo, all.hi);
        double steps = o->steps ? (double)o->steps : 1.0;
        printf("time per step: %.3f us\n", worst[0] / steps * 1e6);
        printf("exchange time per step: %.3f us\n", worst[1] / steps * 1e6);
    }
    int rc = checksum(o, comm, ps, np, py, px, cur);
    mlc_exchange_free(ex);
    for (long i = 0; i < np; i++) {
        free(ps[i].buf[0]);
        free(ps[i].buf[1]);
    }
    free(ps);
    return rc;
}

int main(int argc, char **argv)
{
    options_t o;
    if (parse(argc, argv, &o)) return 2;
    mlc_comm_t *comm;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st) return fail(st, "mlc_comm_init");
    int rc = simulate(&o, comm);
    mlc_comm_free(comm);
    return rc;
}
