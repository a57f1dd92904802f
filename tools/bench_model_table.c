/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_algo_print_model: every algorithm's predicted time for one collective
 * at p = 2, 4, ..., 16384 and a spread of sizes, then, per rank count, the
 * sizes at which the selector's choice changes (found on a fine geometric
 * grid, then exactly by bisection).
 */
#include "algos/build.h"
#include "algos/select.h"
#include "bench_model.h"

#define MLC_MODEL_PMAX 16384
#define MLC_MODEL_NMAX ((size_t)1 << 34) /* switch points are searched up to 16 GiB */

static const size_t mlc_model_sizes[] = {8, 256, 4096, 65536, 1u << 20, 16u << 20, 256u << 20};

static mlc_coll_desc_t mlc_model_desc(mlc_coll_t coll, int p, size_t bytes)
{
    mlc_coll_desc_t d = {0};
    d.coll = coll;
    d.size = p;
    d.count = bytes;
    d.esize = 1;
    d.commutative = true;
    d.has_send = d.has_recv = true;
    return d;
}

static const mlc_algo_t *mlc_model_pick(mlc_coll_t coll, int p, size_t bytes,
                                        const mlc_cost_model_t *m)
{
    mlc_coll_desc_t d = mlc_model_desc(coll, p, bytes);
    return mlc_algo_select(&d, m);
}

static void mlc_fmt_bytes(char *buf, size_t len, size_t n)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    if (u == 0)
        snprintf(buf, len, "%zu B", n);
    else
        snprintf(buf, len, "%.3g %s", v, unit[u]);
}

/* Print, for p ranks, the algorithm chosen from 0 bytes on and every size where it changes. */
static void mlc_model_switches(FILE *f, mlc_coll_t coll, int p, const mlc_cost_model_t *m)
{
    const mlc_algo_t *cur = mlc_model_pick(coll, p, 0, m);
    fprintf(f, "#   p=%-6d %s", p, cur ? cur->name : "-");
    size_t lo = 0; /* the choice at lo is cur */
    for (double x = 1; x <= (double)MLC_MODEL_NMAX; x *= 1.0442737824274138 /* 2^(1/16) */) {
        size_t hi = (size_t)x;
        if (hi <= lo) continue;
        while (mlc_model_pick(coll, p, hi, m) != cur) {
            /* The smallest size in (lo, hi] whose choice differs from cur. */
            size_t l = lo, h = hi;
            while (h - l > 1) {
                size_t mid = l + (h - l) / 2;
                if (mlc_model_pick(coll, p, mid, m) != cur)
                    h = mid;
                else
                    l = mid;
            }
            cur = mlc_model_pick(coll, p, h, m);
            char sz[32];
            mlc_fmt_bytes(sz, sizeof sz, h);
            fprintf(f, " | from %zu B (%s): %s", h, sz, cur ? cur->name : "-");
            lo = h;
        }
        lo = hi;
    }
    fprintf(f, "\n");
}

void mlc_algo_print_model(FILE *f, const mlc_cost_model_t *m, mlc_coll_t coll)
{
    if (!m) m = &mlc_cost_model_default;
    const char *cn = mlc_algos_coll_name(coll);
    const char *const *names = mlc_algo_names(coll);
    if (!names[0]) {
        fprintf(f, "# %s: no algorithms (point-to-point)\n", cn);
        return;
    }
    fprintf(f,
            "# %s: cost model alpha %.3g us, 1/beta %.3g GB/s, 1/gamma %.3g GB/s\n"
            "# predicted time in microseconds; bytes = per-rank count x element size\n",
            cn, m->alpha * 1e6, 1e-9 / m->beta, 1e-9 / m->gamma);
    fprintf(f, "# %6s %12s", "p", "bytes");
    for (size_t i = 0; names[i]; i++) fprintf(f, " %14s", names[i]);
    fprintf(f, "  %s\n", "selected");
    for (int p = 2; p <= MLC_MODEL_PMAX; p *= 2) {
        for (size_t si = 0; si < sizeof mlc_model_sizes / sizeof mlc_model_sizes[0]; si++) {
            mlc_coll_desc_t d = mlc_model_desc(coll, p, mlc_model_sizes[si]);
            fprintf(f, "  %6d %12zu", p, mlc_model_sizes[si]);
            for (size_t i = 0; names[i]; i++)
                fprintf(f, " %14.4g",
                        mlc_algo_predict(mlc_algo_find(coll, names[i]), &d, m) * 1e6);
            const mlc_algo_t *sel = mlc_algo_select(&d, m);
            fprintf(f, "  %s\n", sel ? sel->name : "-");
        }
    }
    /* Powers of two and, since folds cost extra, 3 * 2^k between them. */
    fprintf(f, "# selector switch points (bytes per rank, up to 16 GiB):\n");
    for (int p = 2; p <= MLC_MODEL_PMAX; p *= 2) {
        mlc_model_switches(f, coll, p, m);
        if (p + p / 2 < MLC_MODEL_PMAX) mlc_model_switches(f, coll, p + p / 2, m);
    }
}
