/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm-bench's verifier, without any transport: for every collective,
 * dtype, op and a few rank counts, compute each rank's result from the
 * ranks' inputs with a plain reference (reduction in double, every result
 * checked to be exactly representable), then check that the bench's
 * closed-form expectation agrees (0 wrong), and that it catches one changed
 * element and a result never written (the sentinel). Also the nccl-tests
 * geometry and bus-bandwidth factors, the size sweep and option parsing,
 * and the nearest-rank percentiles of -P.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_colls.h"
#include "bench_data.h"
#include "bench_opts.h"
#include "../../bench/percentile.h"

static int failures;
#define CHECK_COUNTER failures
#define CHECK_MAX_REPORTS 20
#include "check.h"

static bool is_float(mlc_dtype_t d)
{
    return d == MLC_FLOAT16 || d == MLC_BFLOAT16 || d == MLC_FLOAT32 || d == MLC_FLOAT64;
}

static double apply_op(mlc_op_t op, double a, double b)
{
    switch (op) {
    case MLC_PROD: return a * b;
    case MLC_MAX: return a > b ? a : b;
    case MLC_MIN: return a < b ? a : b;
    default: return a + b;
    }
}

/* The reduction over ranks of inputs[r][index], as the collective defines it. */
static double reference_reduce(const mlc_bench_gen_t *g, void *const *inputs, size_t index)
{
    double acc = mlc_bench_load(g->dtype, inputs[0], index);
    for (int r = 1; r < g->nranks; r++)
        acc = apply_op(g->op, acc, mlc_bench_load(g->dtype, inputs[r], index));
    if (g->op == MLC_AVG) acc = is_float(g->dtype) ? acc / g->nranks : trunc(acc / g->nranks);
    return acc;
}

/* Rank `rank`'s result element j by the collective's definition. */
static double reference(const mlc_bench_coll_t *c, const mlc_bench_gen_t *g,
                        const mlc_bench_geom_t *geo, void *const *inputs, int rank, int root,
                        size_t j)
{
    int p = g->nranks;
    switch (c->coll) {
    case MLC_COLL_ALLREDUCE:
    case MLC_COLL_REDUCE:
        return reference_reduce(g, inputs, j);
    case MLC_COLL_REDUCE_SCATTER:
        return reference_reduce(g, inputs, (size_t)rank * geo->count + j);
    case MLC_COLL_BROADCAST:
        return mlc_bench_load(g->dtype, inputs[root], j);
    case MLC_COLL_ALLGATHER:
        return mlc_bench_load(g->dtype, inputs[j / geo->count], j % geo->count);
    case MLC_COLL_ALLTOALL:
    case MLC_COLL_ALLTOALLV: /* the same counts through the v-interface */
        return mlc_bench_load(g->dtype, inputs[j / geo->count],
                              (size_t)rank * geo->count + j % geo->count);
    case MLC_COLL_GATHER: /* the root's result */
        return mlc_bench_load(g->dtype, inputs[j / geo->count], j % geo->count);
    case MLC_COLL_SCATTER:
        return mlc_bench_load(g->dtype, inputs[root], (size_t)rank * geo->count + j);
    case MLC_COLL_SENDRECV:
        return mlc_bench_load(g->dtype, inputs[(rank - 1 + p) % p], j);
    default:
        return NAN;
    }
}

static void check_case(const mlc_bench_coll_t *c, mlc_dtype_t dt, mlc_op_t op, int p,
                       size_t elems, uint64_t seed)
{
    mlc_bench_gen_t g;
    mlc_bench_gen_init(&g, dt, op, p, seed);
    mlc_bench_geom_t geo;
    c->geometry(elems, g.esize, p, &geo);
    int root = p - 1;
    void *inputs[8];
    for (int r = 0; r < p; r++) {
        inputs[r] = malloc(geo.send_count * g.esize + 1);
        mlc_bench_fill(&g, r, 0, inputs[r], geo.send_count);
    }
    unsigned char *result = malloc(geo.recv_count * g.esize + 1);
    const char *dn = mlc_dtype_name(dt), *on = op >= 0 ? mlc_op_name(op) : "none";
    for (int rank = 0; rank < p; rank++) {
        bool defined = !c->root_result || rank == root;
        for (size_t j = 0; defined && j < geo.recv_count; j++) {
            double v = reference(c, &g, &geo, inputs, rank, root, j);
            CHECK(mlc_bench_store(dt, result, j, v),
                  "%s %s %s p=%d: result %g at %zu is not exact in the dtype", c->name, dn, on,
                  p, v, j);
        }
        size_t wrong = mlc_bench_count_wrong(c, &g, &geo, rank, root, result);
        CHECK(wrong == 0, "%s %s %s p=%d n=%zu rank %d: %zu wrong in a correct result", c->name,
              dn, on, p, elems, rank, wrong);
        if (!defined || geo.recv_count == 0) continue;
        /* One changed element is one wrong value. */
        size_t k = geo.recv_count / 2;
        double old = mlc_bench_load(dt, result, k);
        mlc_bench_store(dt, result, k, old == 1 ? 2 : 1);
        wrong = mlc_bench_count_wrong(c, &g, &geo, rank, root, result);
        CHECK(wrong == 1, "%s %s %s p=%d rank %d: %zu wrong after changing one element",
              c->name, dn, on, p, rank, wrong);
        /* An unwritten result never passes. */
        memset(result, MLC_BENCH_SENTINEL_BYTE, geo.recv_count * g.esize);
        wrong = mlc_bench_count_wrong(c, &g, &geo, rank, root, result);
        CHECK(wrong == geo.recv_count, "%s %s %s p=%d rank %d: sentinel gave %zu of %zu wrong",
              c->name, dn, on, p, rank, wrong, geo.recv_count);
    }
    /* Ranks' data differ wherever the dtype leaves room, so a mix-up shows. */
    if (p > 1 && op != MLC_PROD && geo.send_count > 0 && g.rank_term)
        CHECK(mlc_bench_load(dt, inputs[0], 0) != mlc_bench_load(dt, inputs[1], 0),
              "%s %s: ranks 0 and 1 have the same data", c->name, dn);
    for (int r = 0; r < p; r++) free(inputs[r]);
    free(result);
}

static void check_all_cases(void)
{
    const int ranks[] = {1, 2, 3, 4, 7};
    const size_t sizes[] = {0, 1, 7, 64, 1000};
    for (int ci = 0; mlc_bench_colls[ci]; ci++) {
        const mlc_bench_coll_t *c = mlc_bench_colls[ci];
        for (mlc_dtype_t dt = 0; dt < MLC_DTYPE_COUNT; dt++)
            for (mlc_op_t op = c->reduces ? 0 : -1; op < (c->reduces ? MLC_OP_BUILTIN_COUNT : 0); op++)
                for (size_t pi = 0; pi < sizeof ranks / sizeof ranks[0]; pi++)
                    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                        check_case(c, dt, op, ranks[pi], sizes[si], 1000 * si + pi);
    }
}

/* nccl-tests' table for S = 1024 float32 elements on 4 ranks. */
static void check_geometry(void)
{
    static const struct {
        const char *name;
        size_t count, send, recv, size_bytes, algbw_bytes;
        double factor;
    } want[] = {
        {"allreduce", 1024, 1024, 1024, 4096, 4096, 1.5},
        {"broadcast", 1024, 1024, 1024, 4096, 4096, 1.0},
        {"reduce", 1024, 1024, 1024, 4096, 4096, 1.0},
        {"sendrecv", 1024, 1024, 1024, 4096, 4096, 1.0},
        {"allgather", 256, 256, 1024, 4096, 4096, 0.75},
        {"reduce_scatter", 256, 1024, 256, 4096, 4096, 0.75},
        {"alltoall", 256, 1024, 1024, 4096, 4096, 0.75},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const mlc_bench_coll_t *c = mlc_bench_coll_find(want[k].name);
        CHECK(c != NULL, "no collective %s", want[k].name);
        if (!c) continue;
        mlc_bench_geom_t g;
        c->geometry(1024, 4, 4, &g);
        CHECK(g.count == want[k].count && g.send_count == want[k].send &&
                  g.recv_count == want[k].recv && g.size_bytes == want[k].size_bytes &&
                  g.algbw_bytes == want[k].algbw_bytes,
              "%s: count %zu send %zu recv %zu size %zu algbw bytes %zu", want[k].name, g.count,
              g.send_count, g.recv_count, g.size_bytes, g.algbw_bytes);
        CHECK(c->busbw_factor(4) == want[k].factor, "%s: busbw factor %g, want %g",
              want[k].name, c->busbw_factor(4), want[k].factor);
    }
    /* In-place offsets as NCCL's in-place forms. */
    mlc_bench_geom_t g;
    mlc_bench_coll_find("allgather")->geometry(1024, 4, 4, &g);
    CHECK(g.send_inplace == 256 && g.recv_inplace == 0, "allgather in place");
    mlc_bench_coll_find("reduce_scatter")->geometry(1024, 4, 4, &g);
    CHECK(g.send_inplace == 0 && g.recv_inplace == 256, "reduce_scatter in place");
    /* Sizes that do not divide by p round down, as nccl-tests. */
    mlc_bench_coll_find("allgather")->geometry(10, 4, 4, &g);
    CHECK(g.count == 2 && g.recv_count == 8 && g.size_bytes == 32, "allgather of 10 on 4");
}

static int sweep_length(const char *const *argv, int argc)
{
    mlc_bench_opts_t o;
    if (mlc_bench_parse(argc, (char **)argv, &o) != 0) return -1;
    int n = 1;
    size_t s = o.min_bytes;
    while (mlc_bench_next_size(&o, &s) && n < 1000) n++;
    return n;
}

static void check_options(void)
{
    const char *a1[] = {"b", "allreduce", "-b", "8", "-e", "1M", "-f", "4"};
    CHECK(sweep_length(a1, 8) == 9, "8..1M by 4: %d sizes", sweep_length(a1, 8));
    const char *a2[] = {"b", "-b", "1K", "-e", "4K", "-i", "1K", "allgather"};
    CHECK(sweep_length(a2, 8) == 4, "1K..4K by 1K: %d sizes", sweep_length(a2, 8));
    const char *a3[] = {"b", "-b0", "--maxbytes=4", "--stepfactor", "2", "sendrecv"};
    CHECK(sweep_length(a3, 6) == 4, "0..4 by 2: %d sizes (0 1 2 4)", sweep_length(a3, 6));
    mlc_bench_opts_t o;
    const char *a4[] = {"b", "-t", "3", "reduce", "-d", "bfloat16", "-o", "max", "-r", "2", "-a", "all",
                        "-c", "0", "-n", "7", "-w", "0"};
    CHECK(mlc_bench_parse(18, (char **)a4, &o) == 0 && o.threads == 3 && o.dtype == MLC_BFLOAT16 &&
              o.op == MLC_MAX && o.root == 2 && strcmp(o.algo, "all") == 0 && o.check == 0 &&
              o.iters == 7 && o.warmup == 0 && strcmp(o.coll->name, "reduce") == 0,
          "options of a4 not parsed as given");
    const char *bad[][4] = {
        {"b", "allreduce", "-c", "2"},      {"b", "nosuchcoll", NULL, NULL},
        {"b", "allreduce", "-b", "1x"},     {"b", "allreduce", "-d", "float128"},
        {"b", "allreduce", "--bogus", "1"}, {"b", "-b", "2M", "-e"},
        {"b", NULL, NULL, NULL},            {"b", "allreduce", "allgather", NULL},
    };
    fprintf(stderr, "(the usage errors below are expected)\n");
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int argc = 0;
        while (argc < 4 && bad[k][argc]) argc++;
        CHECK(mlc_bench_parse(argc, (char **)bad[k], &o) == -1, "bad case %zu accepted", k);
    }
    const char *a5[] = {"b", "allreduce", "-b", "2M", "-e", "1M"};
    CHECK(mlc_bench_parse(6, (char **)a5, &o) == -1, "min > max accepted");
}

/* Nearest rank: value ceil(q n / 100) of n sorted; p99 is the maximum below 100 values. */
static void check_percentiles(void)
{
    double v[1000];
    for (int i = 0; i < 1000; i++) v[i] = i + 1; /* value = its rank */
    const struct { long n; int q; double want; } cases[] = {
        {1, 50, 1},    {1, 99, 1},     {2, 50, 1},     {3, 50, 2},     {4, 50, 2},
        {99, 99, 99},  {100, 99, 99},  {101, 99, 100}, {200, 99, 198}, {1000, 99, 990},
        {1000, 50, 500}, {7, 100, 7},  {10, 10, 1},    {11, 10, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        CHECK(bench_percentile(v, cases[k].n, cases[k].q) == cases[k].want, "p%d of %ld values: %g, want %g",
              cases[k].q, cases[k].n, bench_percentile(v, cases[k].n, cases[k].q), cases[k].want);
    CHECK(bench_percentile_min_values(99) == 100, "p99 needs %ld values", bench_percentile_min_values(99));
    CHECK(bench_percentile_min_values(50) == 2, "p50 needs %ld values", bench_percentile_min_values(50));
    /* The smallest n whose p99 is below the maximum is that minimum. */
    CHECK(bench_percentile(v, 99, 99) == 99 && bench_percentile(v, 100, 99) < 100, "p99 at 99 and 100 values");
}

int main(void)
{
    check_percentiles();
    check_geometry();
    check_options();
    check_all_cases();
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
