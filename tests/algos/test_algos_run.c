/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every algorithm x every collective it serves, run through the executor on
 * the simulated transport: p = 1..9 and 16, counts 0, 1, 7 and 1000, int32
 * and float32 with exact values, every built-in op, in place and not, roots
 * 0 and p-1; a non-commutative user op (2x2 matrix product) checked against
 * rank-order evaluation; float results with rounding checked for bitwise
 * agreement across ranks. Eager and single-copy delivery alternate, with
 * randomly delayed completions. Each simulated rank keeps one scratch
 * cache across every case, as a communicator does, and the block a case
 * takes is filled with garbage first: no algorithm may read scratch it did
 * not write.
 */
#include <stdlib.h>
#include "algos/build.h"
#include "algos/exec.h"
#include "cases.h"
#include "check.h"
#include "sim.h"

static long runs;
static mlc_scratch_t pools[16]; /* one per simulated rank, kept across cases */

/* The block rank r's next executor will take, filled with garbage. */
static void soil_scratch(int r, size_t bytes)
{
    if (bytes == 0) return;
    unsigned char *b = mlc_scratch_take(&pools[r], bytes);
    if (!b) return;
    for (size_t i = 0; i < bytes; i++) b[i] = (unsigned char)(0xa5 ^ (i * 131));
    mlc_scratch_give(&pools[r], b);
}

/* Build, execute and check one case with algorithm a; true when it passed. */
static bool run_case(const mlc_algo_t *a, const tcase_t *c)
{
    int p = c->p;
    trank_t *ranks = calloc((size_t)p, sizeof *ranks);
    mlc_exec_t **x = calloc((size_t)p, sizeof *x);
    bool *done = calloc((size_t)p, sizeof *done);
    char desc[160], why[512] = "";
    tcase_describe(c, desc, sizeof desc);
    bool ok = tcase_setup(c, ranks) == 0;
    CHECK(ok, "%s: cannot set up", desc);
    sim_opts_t o = {.rendezvous = (runs & 1) != 0, .seed = (unsigned)(runs % 3 ? runs : 0)};
    runs++;
    sim_world_t *w = sim_create(p, o);
    for (int r = 0; ok && r < p; r++) {
        mlc_sched_t s;
        mlc_status_t st = mlc_algo_build(a, &ranks[r].d, &s);
        if (st == MLC_SUCCESS) {
            soil_scratch(r, s.tmp_bytes);
            st = mlc_exec_create(&s, ranks[r].send, ranks[r].recv, c->dtype, c->op,
                                 ranks[r].avg_count, p, 7, &pools[r], &x[r]);
        }
        if (st) {
            CHECK(0, "%s/%s %s rank %d: %s: %s", mlc_algos_coll_name(a->coll), a->name, desc, r,
                  mlc_status_name(st), mlc_last_error());
            ok = false;
        }
    }
    if (ok) {
        int rc = sim_run(w, x, done, why, sizeof why);
        if (rc) {
            CHECK(0, "%s/%s %s: run failed: %s (%s)", mlc_algos_coll_name(a->coll), a->name, desc,
                  mlc_status_name(rc), mlc_last_error());
            ok = false;
        }
    }
    if (ok) sim_finish(w);
    for (int r = 0; r < p; r++) mlc_exec_destroy(x[r], &sim_transport, sim_tp(w, r));
    if (sim_errors(w)) {
        CHECK(0, "%s/%s %s: protocol: %s", mlc_algos_coll_name(a->coll), a->name, desc,
              sim_last_problem(w));
        ok = false;
    }
    if (ok && tcase_check(c, ranks, why, sizeof why) != 0) {
        CHECK(0, "%s/%s %s: %s", mlc_algos_coll_name(a->coll), a->name, desc, why);
        ok = false;
    }
    sim_destroy(w);
    tcase_free(c, ranks);
    free(ranks), free(x), free(done);
    return ok;
}

static const int procs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16};
static const size_t counts[] = {0, 1, 7, 1000};
static const mlc_op_t ops[] = {MLC_SUM, MLC_PROD, MLC_MAX, MLC_MIN, MLC_AVG};

/* The built-in matrix: sizes x dtypes x ops x in place x roots. */
static void run_builtin(const mlc_algo_t *a)
{
    bool reducing = tcase_is_reducing(a->coll), rooted = tcase_is_rooted(a->coll);
    for (size_t pi = 0; pi < sizeof procs / sizeof procs[0]; pi++) {
        int p = procs[pi];
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            for (int dt = 0; dt < 2; dt++) {
                size_t nops = reducing ? (counts[ci] == 1000 ? 2 : 5) : 1;
                for (size_t oi = 0; oi < nops; oi++) {
                    mlc_op_t op = counts[ci] == 1000 && oi == 1 ? MLC_AVG : ops[oi];
                    for (int ip = 0; ip < (tcase_has_inplace(a->coll) ? 2 : 1); ip++) {
                        int roots[2] = {0, p - 1};
                        for (int ri = 0; ri < (rooted && p > 1 ? 2 : 1); ri++) {
                            tcase_t c = {a->coll, p, roots[ri], counts[ci],
                                         dt ? MLC_FLOAT32 : MLC_INT32, op, ip != 0, TV_EXACT};
                            if (!run_case(a, &c) && check_failures > 40) return;
                        }
                    }
                }
            }
        }
    }
}

/* Non-commutative user op: order-preserving algorithms get rank order right,
 * the others refuse. */
static void run_noncommutative(const mlc_algo_t *a)
{
    if (!tcase_is_reducing(a->coll)) return;
    static const size_t ncounts[] = {1, 7, 33};
    for (size_t pi = 0; pi < sizeof procs / sizeof procs[0]; pi++) {
        int p = procs[pi];
        int roots[3] = {0, p - 1, p / 2};
        for (size_t ci = 0; ci < sizeof ncounts / sizeof ncounts[0]; ci++)
            for (int ip = 0; ip < 2; ip++)
                for (int ri = 0; ri < (a->coll == MLC_COLL_REDUCE ? 3 : 1); ri++) {
                    tcase_t c = {a->coll,           p,     roots[ri], ncounts[ci],
                                 tcase_matrix_dtype, tcase_matrix_op, ip != 0, TV_EXACT};
                    if (a->order_preserving) {
                        run_case(a, &c);
                        continue;
                    }
                    trank_t *ranks = calloc((size_t)p, sizeof *ranks);
                    tcase_setup(&c, ranks);
                    mlc_sched_t s;
                    CHECK_ERR_MSG(mlc_algo_build(a, &ranks[0].d, &s), MLC_ERR_UNSUPPORTED, a->name);
                    CHECK(s.nsteps == 0, "failed build left %zu steps", s.nsteps);
                    tcase_free(&c, ranks);
                    free(ranks);
                }
    }
}

/* Rounding floats: every rank must get the same bits. */
static void run_bitwise(const mlc_algo_t *a)
{
    if (a->coll != MLC_COLL_ALLREDUCE && a->coll != MLC_COLL_ALLGATHER) return;
    for (size_t pi = 0; pi < sizeof procs / sizeof procs[0]; pi++)
        for (int ip = 0; ip < 2; ip++) {
            tcase_t c = {a->coll, procs[pi], 0, 1000, MLC_FLOAT32, MLC_SUM, ip != 0, TV_RANDOM};
            run_case(a, &c);
        }
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL; /* e.g. "allreduce/ring" */
    CHECK_OK(tcase_init());
    for (const mlc_algo_t *a = mlc_algos; a->name; a++) {
        char full[64];
        snprintf(full, sizeof full, "%s/%s", mlc_algos_coll_name(a->coll), a->name);
        if (only && strcmp(only, full) != 0) continue;
        int before = check_failures;
        long runs_before = runs;
        run_builtin(a);
        run_noncommutative(a);
        run_bitwise(a);
        printf("%-32s %6ld runs %s\n", full, runs - runs_before,
               check_failures == before ? "ok" : "FAILED");
    }
    for (int r = 0; r < 16; r++) mlc_scratch_drain(&pools[r]);
    return check_result("test_algos_run");
}
