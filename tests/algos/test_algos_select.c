/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The selector and the cost model: the DESIGN.md formulas, the choice being
 * the cheapest applicable algorithm (order-preserving ones only for
 * non-commutative ops, ties to the first listed), predictions that do not
 * depend on anything ranks may disagree on, and the model table with its
 * switch points.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "algos/build.h"
#include "algos/select.h"
#include "bench_model.h"
#include "check.h"


static const mlc_cost_model_t M = {1e-6, 1e-9, 5e-10};

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b) + 1e-18; }

static mlc_coll_desc_t desc(mlc_coll_t coll, int p, size_t bytes)
{
    mlc_coll_desc_t d = {.coll = coll, .size = p, .count = bytes, .esize = 1, .commutative = true,
                         .has_send = true, .has_recv = true};
    return d;
}

static double predict(mlc_coll_t coll, const char *name, int p, size_t bytes)
{
    mlc_coll_desc_t d = desc(coll, p, bytes);
    return mlc_algo_predict(mlc_algo_find(coll, name), &d, &M);
}

static void test_formulas(void)
{
    double a = M.alpha, b = M.beta, g = M.gamma;
    for (int lg = 1; lg <= 14; lg++) {
        int p = 1 << lg;
        double f = (double)(p - 1) / p;
        static const size_t sizes[] = {8, 4096, 1 << 20, (size_t)1 << 30};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            double n = (double)sizes[i];
            CHECK(near(predict(MLC_COLL_ALLREDUCE, "ring", p, sizes[i]),
                       2 * (p - 1) * a + 2 * n * f * b + n * f * g), "ring p=%d", p);
            CHECK(near(predict(MLC_COLL_ALLREDUCE, "rd", p, sizes[i]), lg * a + n * lg * (b + g)),
                  "rd p=%d", p);
            CHECK(near(predict(MLC_COLL_ALLREDUCE, "rabenseifner", p, sizes[i]),
                       2 * lg * a + 2 * n * f * b + n * f * g), "rabenseifner p=%d", p);
            CHECK(near(predict(MLC_COLL_BROADCAST, "binomial", p, sizes[i]), lg * (a + n * b)),
                  "binomial bcast p=%d", p);
        }
    }
    /* non-powers of two pay for the fold */
    CHECK(predict(MLC_COLL_ALLREDUCE, "rd", 6, 1000) > predict(MLC_COLL_ALLREDUCE, "rd", 4, 1000),
          "rd fold free");
}

/* The choice is the cheapest applicable one; order-preserving for non-commutative ops. */
static void test_select(void)
{
    static const int procs[] = {1, 2, 3, 5, 8, 12, 64, 1000, 16384};
    static const size_t sizes[] = {0, 1, 100, 10000, 1 << 20, (size_t)1 << 28};
    for (mlc_coll_t coll = 0; coll < MLC_COLL_COUNT; coll++) {
        bool p2p = coll == MLC_COLL_SEND || coll == MLC_COLL_RECV || coll == MLC_COLL_SENDRECV;
        for (size_t pi = 0; pi < sizeof procs / sizeof procs[0]; pi++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                for (int comm = 0; comm < 2; comm++) {
                    mlc_coll_desc_t d = desc(coll, procs[pi], sizes[si]);
                    d.commutative = comm != 0;
                    const mlc_algo_t *s = mlc_algo_select(&d, &M);
                    if (p2p) {
                        CHECK(s == NULL, "%s has a selection", mlc_algos_coll_name(coll));
                        continue;
                    }
                    CHECK(s != NULL && s->coll == coll, "%s p=%d: nothing selected",
                          mlc_algos_coll_name(coll), procs[pi]);
                    if (!s) continue;
                    CHECK(comm || s->order_preserving, "%s: %s for a non-commutative op",
                          mlc_algos_coll_name(coll), s->name);
                    double best = mlc_algo_predict(s, &d, &M);
                    CHECK(isfinite(best) && best >= 0, "%s/%s: prediction %g",
                          mlc_algos_coll_name(coll), s->name, best);
                    bool before = true; /* algorithms listed before s must be dearer */
                    for (const mlc_algo_t *a = mlc_algos; a->name; a++) {
                        if (a == s) before = false;
                        if (a->coll != coll || (!comm && !a->order_preserving)) continue;
                        double t = mlc_algo_predict(a, &d, &M);
                        /* Costs equal up to rounding (1e-9 relative) count as a tie. */
                        CHECK(t >= best * (1.0 - 1e-9), "%s p=%d n=%zu: %s (%g) beats the chosen %s (%g)",
                              mlc_algos_coll_name(coll), procs[pi], sizes[si], a->name, t, s->name,
                              best);
                        if (before && a != s)
                            CHECK(t > best * (1.0 - 1e-9), "%s: tie not given to the first listed (%s)",
                                  mlc_algos_coll_name(coll), a->name);
                    }
                }
    }
    /* some sanity of the shape: latency-bound small, bandwidth-bound large */
    mlc_coll_desc_t d = desc(MLC_COLL_ALLREDUCE, 6, 8);
    CHECK(!strcmp(mlc_algo_select(&d, &M)->name, "rd"), "6 ranks, 8 bytes: %s",
          mlc_algo_select(&d, &M)->name);
    d.count = (size_t)1 << 28;
    CHECK(!strcmp(mlc_algo_select(&d, &M)->name, "ring"), "6 ranks, 256 MiB: %s",
          mlc_algo_select(&d, &M)->name);
    d.commutative = false;
    CHECK(mlc_algo_select(&d, &M)->order_preserving, "non-commutative large");
    d = desc(MLC_COLL_ALLTOALLV, 8, 100);
    CHECK(!strcmp(mlc_algo_select(&d, &M)->name, "linear"), "alltoallv tie: %s",
          mlc_algo_select(&d, &M)->name);
    /* NULL model = the default */
    d = desc(MLC_COLL_ALLREDUCE, 4, 1000);
    CHECK(mlc_algo_predict(mlc_algo_find(MLC_COLL_ALLREDUCE, "ring"), &d, NULL) ==
              mlc_algo_predict(mlc_algo_find(MLC_COLL_ALLREDUCE, "ring"), &d,
                               &mlc_cost_model_default),
          "NULL model");
    CHECK(mlc_cost_model_default.alpha == 0.5e-6 && mlc_cost_model_default.beta == 1.0 / 8e9 &&
              mlc_cost_model_default.gamma == 1.0 / 10e9,
          "default model changed");
}

/* Every rank must predict the same: nothing rank-local may matter. */
static void test_agreement(void)
{
    size_t counts[7] = {3, 0, 5, 9, 1, 2, 4}, displs[7] = {0, 3, 3, 8, 17, 18, 20};
    for (const mlc_algo_t *a = mlc_algos; a->name; a++)
        for (int p = 1; p <= 7; p++) {
            mlc_coll_desc_t d0 = desc(a->coll, p, 4096);
            d0.counts = counts, d0.displs = displs, d0.counts2 = counts, d0.displs2 = displs;
            double t0 = mlc_algo_predict(a, &d0, &M);
            for (int r = 0; r < p; r++) {
                mlc_coll_desc_t d = d0;
                d.rank = r;
                d.inplace = r % 2;
                d.has_send = r != 1;
                d.has_recv = r != 2;
                CHECK(mlc_algo_predict(a, &d, &M) == t0, "%s/%s: rank %d predicts differently",
                      mlc_algos_coll_name(a->coll), a->name, r);
            }
        }
}

static char *model_text(mlc_coll_t coll, const mlc_cost_model_t *m)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    mlc_algo_print_model(f, m, coll);
    fclose(f);
    return text;
}

static void test_model_table(void)
{
    for (mlc_coll_t coll = 0; coll < MLC_COLL_COUNT; coll++) {
        char *t = model_text(coll, &M);
        const char *const *names = mlc_algo_names(coll);
        if (!names[0]) {
            CHECK(strstr(t, "no algorithms") != NULL, "%s: %s", mlc_algos_coll_name(coll), t);
        } else {
            CHECK(strstr(t, mlc_algos_coll_name(coll)) && strstr(t, "16384") &&
                      strstr(t, "switch points") && strstr(t, "p=2 "),
                  "%s table lacks parts", mlc_algos_coll_name(coll));
            for (size_t i = 0; names[i]; i++)
                CHECK(strstr(t, names[i]) != NULL, "%s table lacks %s", mlc_algos_coll_name(coll),
                      names[i]);
        }
        free(t);
    }
    /* The switch points are where the selector changes its mind. */
    char *t = model_text(MLC_COLL_ALLREDUCE, &M);
    const char *line = strstr(t, "#   p=2 ");
    CHECK(line != NULL, "no p=2 switch line");
    size_t at = 0;
    const char *from = line ? strstr(line, "from ") : NULL;
    CHECK(from && sscanf(from, "from %zu B", &at) == 1 && at > 1, "no switch at p=2: %.80s",
          line ? line : "");
    if (at > 1) {
        mlc_coll_desc_t below = desc(MLC_COLL_ALLREDUCE, 2, at - 1), above = below;
        above.count = at;
        CHECK(mlc_algo_select(&below, &M) != mlc_algo_select(&above, &M),
              "no change of choice at %zu bytes", at);
    }
    free(t);
    t = model_text(MLC_COLL_ALLREDUCE, NULL);
    CHECK(strstr(t, "alpha 0.5 us") != NULL, "default model not printed: %.120s", t);
    free(t);
}

int main(void)
{
    test_formulas();
    test_select();
    test_agreement();
    test_model_table();
    return check_result("test_algos_select");
}
