/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * halo-mpi: the hand-written MPI halo exchange heat2d is measured against
 * (bench/vs-halo.sh). Exactly heat2d's decomposition and arithmetic: the
 * grid cut into ranks x patches-per-rank patches (the most square patch
 * grid), dealt in blocks, ghost width 1, periodic, corners included; the
 * exchange overlaps the interior update as heat2d's does. Per patch and
 * direction: a neighbour on this rank is copied directly, one on another
 * rank gets its edge packed and sent (MPI_Isend / MPI_Irecv, MPI_Waitall).
 * Prints the exchange time per step of the slowest rank (post + pack +
 * local copies, then wait + unpack, as heat2d times start and finish) and
 * heat2d's checksum, which it must match.
 *
 *   mpicc -O2 -o halo-mpi bench/halo-mpi.c
 *   mpirun -np 4 ./halo-mpi [--nx N] [--ny N] [--steps N] [--patches-per-rank N]
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct patch {
    long y0, x0, h, w; /* valid box; the array has one ghost cell around it */
    double *buf[2];
} patch_t;

static const double RATE = 0.2;
static long NX = 256, NY = 256, STEPS = 100, PPR = 1, PY, PX;

static double *cell(const patch_t *p, double *b, long y, long x)
{
    return b + (y - p->y0 + 1) * (p->w + 2) + (x - p->x0 + 1);
}

static void patch_box(long g, patch_t *p)
{
    long iy = g / PX, ix = g % PX;
    p->y0 = iy * NY / PY;
    p->x0 = ix * NX / PX;
    p->h = (iy + 1) * NY / PY - p->y0;
    p->w = (ix + 1) * NX / PX - p->x0;
}

/* heat2d's patch grid: the most square that divides total. */
static void patch_grid(long total)
{
    double best = -1;
    for (long y = 1; y <= total; y++) {
        if (total % y) continue;
        long x = total / y;
        if (y > NY || x > NX) continue;
        double cost = (double)NY / y + (double)NX / x;
        if (best < 0 || cost < best) best = cost, PY = y, PX = x;
    }
}

static double initial(long y, long x)
{
    double v = (double)((x * 37 + y * 101) % 97) / 128.0;
    if (y >= 8 && y < 24 && x >= 8 && x < 24) v += 4.0;
    return v;
}

/* heat2d's update, the same expression order (bitwise the same result). */
static void update(const patch_t *p, int cur, long y0, long y1, long x0, long x1)
{
    const long w = p->w + 2;
    for (long y = y0; y < y1; y++) {
        const double *c = cell(p, p->buf[cur], y, 0 + p->x0) - p->x0;
        double *o = cell(p, p->buf[1 - cur], y, 0 + p->x0) - p->x0;
        for (long x = x0; x < x1; x++) {
            double s = ((c[x - w] + c[x + w]) + c[x - 1]) + c[x + 1];
            o[x] = c[x] + RATE * (s - 4.0 * c[x]);
        }
    }
}

/* Rows (or columns) of a ghost strip in direction d of patch p (d = -1, 0, 1). */
static void ghost_span(long start, long len, int d, long *lo, long *n)
{
    *lo = d < 0 ? start - 1 : d > 0 ? start + len : start;
    *n = d ? 1 : len;
}
/* The source cells of that strip in the neighbour q (its far edge). */
static void source_span(long start, long len, int d, long *lo, long *n)
{
    *lo = d < 0 ? start + len - 1 : start;
    *n = d ? 1 : len;
}

static void copy_box(const patch_t *sp, double *sb, long sy, long sx, const patch_t *dp, double *db,
                     long dy, long dx, long ny, long nx)
{
    for (long r = 0; r < ny; r++)
        memcpy(cell(dp, db, dy + r, dx), cell(sp, sb, sy + r, sx), (size_t)nx * sizeof(double));
}

typedef struct dirmsg {
    int peer, tag;
    long sy, sx, dy, dx, ny, nx; /* source cells (sender) / ghost cells (receiver) */
    int patch;                    /* local patch index */
    double *buf;
} dirmsg_t;

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = atol(argv[i + 1]);
        if (!strcmp(argv[i], "--nx")) NX = v;
        else if (!strcmp(argv[i], "--ny")) NY = v;
        else if (!strcmp(argv[i], "--steps")) STEPS = v;
        else if (!strcmp(argv[i], "--patches-per-rank")) PPR = v;
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    patch_grid(PPR * size);
    patch_t *ps = calloc((size_t)PPR, sizeof *ps);
    for (long i = 0; i < PPR; i++) {
        patch_t *p = &ps[i];
        patch_box(rank * PPR + i, p);
        for (int k = 0; k < 2; k++) p->buf[k] = calloc((size_t)((p->h + 2) * (p->w + 2)), sizeof(double));
        for (long y = p->y0; y < p->y0 + p->h; y++)
            for (long x = p->x0; x < p->x0 + p->w; x++) *cell(p, p->buf[0], y, x) = initial(y, x);
    }
    /* Messages: for each local patch and direction, what it receives and what it sends. */
    int nmax = (int)PPR * 8;
    dirmsg_t *recvs = calloc((size_t)nmax, sizeof *recvs), *sends = calloc((size_t)nmax, sizeof *sends);
    dirmsg_t *locals = calloc((size_t)nmax, sizeof *locals);
    int nr = 0, ns = 0, nl = 0;
    for (long i = 0; i < PPR; i++) {
        long g = rank * PPR + i, iy = g / PX, ix = g % PX;
        for (int d = 0; d < 9; d++) {
            int ddy = d / 3 - 1, ddx = d % 3 - 1;
            if (!ddy && !ddx) continue;
            /* Receive: ghost strip (ddy, ddx) of g comes from q. */
            long qg = ((iy + ddy + PY) % PY) * PX + (ix + ddx + PX) % PX;
            patch_t q;
            patch_box(qg, &q);
            dirmsg_t m = {(int)(qg / PPR), (int)(g * 9 + d), 0, 0, 0, 0, 0, 0, (int)i, NULL};
            long n1, n2;
            source_span(q.y0, q.h, ddy, &m.sy, &n1);
            source_span(q.x0, q.w, ddx, &m.sx, &n2);
            ghost_span(ps[i].y0, ps[i].h, ddy, &m.dy, &m.ny);
            ghost_span(ps[i].x0, ps[i].w, ddx, &m.dx, &m.nx);
            if (m.peer == rank) {
                m.tag = (int)(qg - rank * PPR); /* local source patch */
                locals[nl++] = m;
            } else {
                m.buf = malloc((size_t)(m.ny * m.nx) * sizeof(double));
                recvs[nr++] = m;
            }
            /* Send: the patch r that gets ghost strip (ddy, ddx) from g. */
            long rg = ((iy - ddy + PY) % PY) * PX + (ix - ddx + PX) % PX;
            if (rg / PPR == rank) continue; /* its local copy is counted on the receiving side */
            patch_t r;
            patch_box(rg, &r);
            dirmsg_t s = {(int)(rg / PPR), (int)(rg * 9 + d), 0, 0, 0, 0, 0, 0, (int)i, NULL};
            source_span(ps[i].y0, ps[i].h, ddy, &s.sy, &s.ny);
            source_span(ps[i].x0, ps[i].w, ddx, &s.sx, &s.nx);
            s.buf = malloc((size_t)(s.ny * s.nx) * sizeof(double));
            sends[ns++] = s;
        }
    }
    MPI_Request *reqs = malloc((size_t)(nr + ns + 1) * sizeof *reqs);
    int cur = 0;
    double t_ex = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long step = 0; step < STEPS; step++) {
        double te = MPI_Wtime();
        for (int k = 0; k < nr; k++)
            MPI_Irecv(recvs[k].buf, (int)(recvs[k].ny * recvs[k].nx), MPI_DOUBLE, recvs[k].peer,
                      recvs[k].tag, MPI_COMM_WORLD, &reqs[k]);
        for (int k = 0; k < ns; k++) {
            dirmsg_t *s = &sends[k];
            const patch_t *p = &ps[s->patch];
            for (long r = 0; r < s->ny; r++)
                memcpy(s->buf + r * s->nx, cell(p, p->buf[cur], s->sy + r, s->sx),
                       (size_t)s->nx * sizeof(double));
            MPI_Isend(s->buf, (int)(s->ny * s->nx), MPI_DOUBLE, s->peer, s->tag, MPI_COMM_WORLD,
                      &reqs[nr + k]);
        }
        for (int k = 0; k < nl; k++) {
            dirmsg_t *m = &locals[k];
            copy_box(&ps[m->tag], ps[m->tag].buf[cur], m->sy, m->sx, &ps[m->patch], ps[m->patch].buf[cur],
                     m->dy, m->dx, m->ny, m->nx);
        }
        t_ex += MPI_Wtime() - te;
        for (long i = 0; i < PPR; i++) /* interior: no ghost needed */
            update(&ps[i], cur, ps[i].y0 + 1, ps[i].y0 + ps[i].h - 1, ps[i].x0 + 1, ps[i].x0 + ps[i].w - 1);
        te = MPI_Wtime();
        MPI_Waitall(nr + ns, reqs, MPI_STATUSES_IGNORE);
        for (int k = 0; k < nr; k++) {
            dirmsg_t *m = &recvs[k];
            const patch_t *p = &ps[m->patch];
            for (long r = 0; r < m->ny; r++)
                memcpy(cell(p, p->buf[cur], m->dy + r, m->dx), m->buf + r * m->nx,
                       (size_t)m->nx * sizeof(double));
        }
        t_ex += MPI_Wtime() - te;
        for (long i = 0; i < PPR; i++) { /* the ring */
            const patch_t *p = &ps[i];
            long y1 = p->y0 + p->h, x1 = p->x0 + p->w;
            for (long y = p->y0; y < y1; y++) {
                if (y == p->y0 || y == y1 - 1 || p->w <= 2) update(p, cur, y, y + 1, p->x0, x1);
                else {
                    update(p, cur, y, y + 1, p->x0, p->x0 + 1);
                    update(p, cur, y, y + 1, x1 - 1, x1);
                }
            }
        }
        cur = 1 - cur;
    }
    double times[2] = {MPI_Wtime() - t0, t_ex}, worst[2];
    MPI_Reduce(times, worst, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* heat2d's checksum: the field in global row-major order, FNV-1a 64. */
    double *field = rank == 0 ? calloc((size_t)(NX * NY), sizeof(double)) : NULL;
    double *mine = malloc((size_t)(NX * NY / size + NX + NY + PPR * NX * NY) * sizeof(double));
    long k = 0;
    for (long i = 0; i < PPR; i++)
        for (long y = ps[i].y0; y < ps[i].y0 + ps[i].h; y++)
            for (long x = ps[i].x0; x < ps[i].x0 + ps[i].w; x++) mine[k++] = *cell(&ps[i], ps[i].buf[cur], y, x);
    int *counts = malloc((size_t)size * sizeof(int)), *displs = malloc((size_t)size * sizeof(int));
    int kk = (int)k;
    MPI_Gather(&kk, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 0, off = 0; r < size; off += counts[r], r++) displs[r] = off;
    double *all = rank == 0 ? malloc((size_t)(NX * NY) * sizeof(double)) : NULL;
    MPI_Gatherv(mine, kk, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        k = 0;
        for (long g = 0; g < PY * PX; g++) {
            patch_t b;
            patch_box(g, &b);
            for (long y = b.y0; y < b.y0 + b.h; y++)
                for (long x = b.x0; x < b.x0 + b.w; x++) field[y * NX + x] = all[k++];
        }
        uint64_t h = 0xcbf29ce484222325ull;
        const unsigned char *bytes = (const unsigned char *)field;
        for (size_t i = 0; i < (size_t)(NX * NY) * sizeof(double); i++) h = (h ^ bytes[i]) * 0x100000001b3ull;
        printf("halo-mpi: %ldx%ld grid, %ld steps, %d ranks x %ld patches (%ldx%ld), %d sends/rank 0\n", NY,
               NX, STEPS, size, PPR, PY, PX, ns);
        printf("time per step: %.3f us\n", worst[0] / (double)(STEPS ? STEPS : 1) * 1e6);
        printf("exchange time per step: %.3f us\n", worst[1] / (double)(STEPS ? STEPS : 1) * 1e6);
        printf("checksum %016" PRIx64 "\n", h);
    }
    MPI_Finalize();
    return 0;
}
