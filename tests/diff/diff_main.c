/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_diff: a randomized differential test. A sequence number names a random
 * sequence of steps (every collective, p2p patterns, every dtype and op,
 * counts from 0 to ~160 KB, roots, in-place forms, NULL root-only buffers,
 * nonblocking batches completed in a different order on each rank, forced
 * algorithms, split and nested split communicators). Every rank generates the
 * same steps, computes every expected result itself and compares bitwise,
 * guard bytes included; the ranks agree after each step, so all stop at the
 * same one. The same sequence must pass on threads, shm and mpi alike.
 *
 * Options (or the environment variable in brackets):
 *   --sequence S  [DIFF_SEQUENCE]  which sequence (default 1)
 *   --steps N     [DIFF_STEPS]     run steps 0..N-1 (default 200)
 *   --only K      [DIFF_ONLY]      run step K alone (steps depend on nothing before them)
 *   --keep-going  [DIFF_KEEP_GOING=1] go on after wrong data (not after a failed call)
 *   --verbose     [DIFF_VERBOSE=1] world rank 0 prints every step
 *   --hang S      [DIFF_HANG]      a step still running after S seconds (default 60) ends the process,
 *                                  naming it (so does a crash)
 *                 [DIFF_MEMORY]    malloc (default), shared or mixed: where buffers live (diff_bufs.c)
 * plus the harness's --threads N. A failure prints the sequence, step, rank,
 * the operation, the first differing element (got and expected) and the
 * command that replays it, e.g.
 *   MLC_BACKEND=mpi mpirun -np 3 build/bin/test_diff --sequence 2 --only 57
 */
#include <execinfo.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "diff_run.h"
#include "harness.h"

static uint64_t opt_sequence = 1;
static int opt_steps = 200, opt_only = -1, opt_keep_going, opt_verbose;
static double opt_hang = 60;
static char exe_path[512] = "test_diff";
static char launcher[1024] = "test_diff"; /* the command that starts this job again (print_replay) */

/* ---- watchdog: names the step a hung rank is in, then ends the process ---- */
static struct {
    atomic_int step; /* -1: not in a step */
    atomic_llong since_ms;
} watch[DIFF_MAX_RANKS];

static long long now_ms(void) { return (long long)(mlc_test_now() * 1000); }

static void *watchdog(void *arg)
{
    for (;;) {
        mlc_test_sleep_ms(250);
        for (int w = 0; w < DIFF_MAX_RANKS; w++) {
            int s = atomic_load(&watch[w].step);
            if (s >= 0 && now_ms() - atomic_load(&watch[w].since_ms) > (long long)(opt_hang * 1000)) {
                fprintf(stderr, "[diff] sequence %llu step %d: world rank %d still in it after %.0f s (hang); "
                        "replay: %s --sequence %llu --only %d --verbose (prints the step's operations)\n",
                        (unsigned long long)opt_sequence, s, w, opt_hang, launcher, (unsigned long long)opt_sequence, s);
                _exit(3);
            }
        }
    }
    return arg;
}

/* A crash (in the library or below it) names the step each rank was in. */
static void on_crash(int sig)
{
    char line[1400];
    for (int w = 0; w < DIFF_MAX_RANKS; w++) {
        int s = atomic_load(&watch[w].step);
        if (s < 0) continue;
        int n = snprintf(line, sizeof line, "[diff] sequence %llu step %d: world rank %d got signal %d in it; "
                         "replay: %s --sequence %llu --only %d --verbose\n", (unsigned long long)opt_sequence, s, w,
                         sig, launcher, (unsigned long long)opt_sequence, s);
        if (n > 0) (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    }
    void *frames[40];
    backtrace_symbols_fd(frames, backtrace(frames, 40), 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- the communicator table ---------------------------------------------- */

static int make_comms(mlc_comm_t *world, diff_comm_t *t)
{
    mlc_comm_t *comm = world; /* for CHECK */
    int p = mlc_comm_size(world), me = mlc_comm_rank(world);
    diff_split_spec_t spec[DIFF_COMMS];
    diff_gen_splits(opt_sequence, p, spec);
    memset(t, 0, sizeof(diff_comm_t) * DIFF_COMMS);
    t[0].comm = world;
    t[0].size = p;
    t[0].rank = me;
    for (int i = 0; i < p; i++) t[0].world[i] = i;
    for (int k = 1; k < DIFF_COMMS; k++) {
        diff_comm_t *par = &t[spec[k].parent];
        if (!par->comm) continue;
        int color = spec[k].color[me];
        /* Expected members: same colour, ordered by key, then by parent rank. */
        int n = 0;
        for (int m = 0; m < par->size && color != MLC_UNDEFINED; m++) {
            int w = par->world[m];
            if (spec[k].color[w] != color) continue;
            int at = n++;
            while (at > 0 && spec[k].key[t[k].world[at - 1]] > spec[k].key[w]) {
                t[k].world[at] = t[k].world[at - 1];
                at--;
            }
            t[k].world[at] = w;
        }
        mlc_comm_t *sub = NULL;
        CHECK_OK(mlc_comm_split(par->comm, color, spec[k].key[me], &sub));
        CHECK((sub == NULL) == (color == MLC_UNDEFINED), "split %d: got %s communicator with colour %d", k,
              sub ? "a" : "no", color);
        if (!sub) continue;
        t[k].comm = sub;
        t[k].size = mlc_comm_size(sub);
        t[k].rank = mlc_comm_rank(sub);
        CHECK(t[k].size == n, "split %d: size %d, expected %d", k, t[k].size, n);
        CHECK(t[k].rank < n && t[k].world[t[k].rank] == me, "split %d: rank %d, expected world rank %d there", k,
              t[k].rank, t[k].world[t[k].rank < n ? t[k].rank : 0]);
    }
    return 0;
}

/* ---- completing a step's requests in this rank's order -------------------- */

static void complete(diff_run_t *runs, int nruns, int step, int wrank)
{
    diff_req_t *pend[1024];
    int n = 0;
    for (int i = 0; i < nruns; i++)
        for (int k = 0; k < runs[i].nreq; k++)
            if (runs[i].reqs[k].req && n < 1024) pend[n++] = &runs[i].reqs[k];
    unsigned sh;
    diff_wait_t how = diff_gen_wait(opt_sequence, step, wrank, &sh);
    if (how == W_SHUFFLED)
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(diff_hash3(sh, (uint64_t)i, 1) % (uint64_t)(i + 1));
            diff_req_t *x = pend[i];
            pend[i] = pend[j];
            pend[j] = x;
        }
    if (how == W_ALL && n > 0) {
        mlc_request_t *reqs[1024];
        mlc_status_t sts[1024];
        for (int i = 0; i < n; i++) reqs[i] = pend[i]->req;
        mlc_request_wait_all((size_t)n, reqs, sts);
        for (int i = 0; i < n; i++) {
            pend[i]->req = reqs[i];
            pend[i]->got = sts[i];
            pend[i]->done = reqs[i] == NULL;
        }
        return;
    }
    if (how == W_TEST_LOOP) {
        for (int left = n; left > 0;) {
            for (int i = 0; i < n; i++) {
                if (pend[i]->done) continue;
                int done = 0;
                mlc_status_t st = mlc_request_test(&pend[i]->req, &done);
                if (done || st != MLC_SUCCESS) {
                    pend[i]->got = st;
                    pend[i]->done = true;
                    left--;
                }
            }
            if (left > 0) sched_yield(); /* thread ranks may share fewer cores */
        }
        return;
    }
    for (int i = 0; i < n; i++) {
        pend[i]->got = mlc_request_wait(&pend[i]->req);
        pend[i]->done = true;
    }
}

static const char *env_algo(mlc_coll_t coll)
{
    static const char *const suffix[] = {
#define X(name, str, env) env,
        MLC_COLL_LIST(X)
#undef X
    };
    char var[64];
    snprintf(var, sizeof var, "MLC_ALGO_%s", suffix[coll]);
    return getenv(var);
}

/* The command that replays `step` (step < 0: only remember the launcher for the watchdog). */
static void print_replay(mlc_comm_t *world, int step)
{
    const char *be = mlc_comm_backend(world);
    int p = mlc_comm_size(world);
    char env[512] = "";
    size_t used = 0;
    static const char *const vars[] = {"MLC_CMA", "MLC_TIMEOUT", "MLC_CHECK", "MLC_STAGES", "DIFF_MEMORY"};
    for (mlc_coll_t c = 0; c < MLC_COLL_SEND; c++)
        if (env_algo(c)) used += (size_t)snprintf(env + used, sizeof env - used, "MLC_ALGO_%s=%s ",
                                                   mlc_coll_name(c), env_algo(c));
    for (size_t i = 0; i < sizeof vars / sizeof *vars && used < sizeof env; i++)
        if (getenv(vars[i])) used += (size_t)snprintf(env + used, sizeof env - used, "%s=%s ", vars[i], getenv(vars[i]));
    for (char *q = env; *q && q < env + used; q++) /* MLC_ALGO_allreduce -> MLC_ALGO_ALLREDUCE */
        if (q > env + 8 && q[-1] != ' ' && strncmp(q - 9, "MLC_ALGO_", 9) == 0)
            for (char *u = q; *u && *u != '='; u++) *u = (char)(*u >= 'a' && *u <= 'z' ? *u - 32 : *u);
    char launch[600];
    if (strcmp(be, "threads") == 0) snprintf(launch, sizeof launch, "%s%s --threads %d", env, exe_path, p);
    else if (strcmp(be, "mpi") == 0) /* Open MPI's mpirun names itself in the environment */
        snprintf(launch, sizeof launch, "%sMLC_BACKEND=mpi %s -np %d %s", env,
                 getenv("OMPI_COMM_WORLD_SIZE") ? "mpirun" : "mpiexec.mpich", p, exe_path);
    else snprintf(launch, sizeof launch, "%sMLC_BACKEND=%s mlcomm-run -n %d %s", env, be, p, exe_path);
    if (step < 0) {
        snprintf(launcher, sizeof launcher, "%s", launch);
        return;
    }
    fprintf(stderr, "[diff] replay step %d alone: %s --sequence %llu --only %d\n"
            "[diff] replay every step up to it: %s --sequence %llu --steps %d\n",
            step, launch, (unsigned long long)opt_sequence, step, launch, (unsigned long long)opt_sequence, step + 1);
}

static int run_step(diff_comm_t *t, int idx, int wrank, int *worst)
{
    diff_step_t step;
    diff_gen_step(opt_sequence, idx, &step);
    diff_run_t runs[DIFF_MAX_BATCH];
    memset(runs, 0, sizeof runs); /* the operations of communicators this rank is not in have no requests */
    bool active[DIFF_MAX_BATCH] = {false};
    char desc[600];
    atomic_store(&watch[wrank].since_ms, now_ms());
    atomic_store(&watch[wrank].step, idx);
    for (int i = 0; i < step.nops; i++) {
        diff_comm_t *c = &t[step.ops[i].comm];
        if (c->comm) {
            active[i] = true;
            diff_run_start(&runs[i], &step.ops[i], c);
        }
        if (opt_verbose && wrank == 0) {
            diff_describe(&step.ops[i], c, runs[i].algo, desc, sizeof desc);
            printf("[diff] step %d%s op %d: %s%s\n", idx, step.batch ? " (batch)" : "", i, desc,
                   c->comm ? "" : " (rank 0 not a member)");
        }
    }
    complete(runs, step.nops, idx, wrank);
    int bad = 0;
    for (int i = 0; i < step.nops; i++) {
        if (!active[i]) continue;
        if (runs[i].algo) mlc_comm_set_algo(runs[i].c->comm, diff_kind_coll(step.ops[i].kind),
                                            env_algo(diff_kind_coll(step.ops[i].kind)));
        if (diff_run_verify(&runs[i])) {
            char conf[64];
            const char *algo = runs[i].algo, *name = NULL;
            mlc_coll_t coll = diff_kind_coll(step.ops[i].kind);
            if (!algo && coll < MLC_COLL_SEND &&
                mlc_comm_get_algo(runs[i].c->comm, coll, step.ops[i].count * mlc_dtype_size(step.ops[i].dtype),
                                  &name) == MLC_SUCCESS) {
                snprintf(conf, sizeof conf, "%s (as configured)", name);
                algo = conf;
            }
            diff_describe(&step.ops[i], runs[i].c, algo, desc, sizeof desc);
            fprintf(stderr, "[diff] sequence %llu step %d%s op %d: world rank %d (rank %d of comm %d): %s: %s\n",
                    (unsigned long long)opt_sequence, idx, step.batch ? " (batch)" : "", i, wrank, runs[i].c->rank,
                    step.ops[i].comm, desc, runs[i].fail);
            bad = 1;
        }
        diff_run_free(&runs[i]);
    }
    for (int k = 0; k < DIFF_COMMS; k++)
        if (t[k].comm && mlc_comm_status(t[k].comm) != MLC_SUCCESS) {
            if (!bad) fprintf(stderr, "[diff] sequence %llu step %d: world rank %d: comm %d failed (%s)\n",
                              (unsigned long long)opt_sequence, idx, wrank, k, mlc_status_name(mlc_comm_status(t[k].comm)));
            bad = 2;
        }
    atomic_store(&watch[wrank].step, -1);
    *worst = bad;
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int wrank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    CHECK(p <= DIFF_MAX_RANKS, "at most %d ranks", DIFF_MAX_RANKS);
    if (wrank == 0 || strcmp(mlc_comm_backend(comm), "threads") != 0) {
        print_replay(comm, -1);
        signal(SIGSEGV, on_crash); /* after init: MPI may have installed its own */
        signal(SIGBUS, on_crash);
        signal(SIGFPE, on_crash);
    }
    diff_comm_t t[DIFF_COMMS];
    CHECK_RUN(make_comms(comm, t));
    int first = opt_only >= 0 ? opt_only : 0, end = opt_only >= 0 ? opt_only + 1 : opt_steps;
    int failed_steps = 0, first_failed = -1, rc = 0;
    double t0 = mlc_test_now();
    for (int idx = first; idx < end; idx++) {
        int bad = 0;
        run_step(t, idx, wrank, &bad);
        int32_t mine = bad, any = 0;
        mlc_status_t st = mlc_allreduce(&mine, &any, 1, MLC_INT32, MLC_MAX, comm, NULL);
        if (st != MLC_SUCCESS) {
            fprintf(stderr, "[diff] sequence %llu step %d: world rank %d: the agreement after the step failed: %s: %s\n",
                    (unsigned long long)opt_sequence, idx, wrank, mlc_status_name(st), mlc_last_error());
            if (wrank == 0 || bad) print_replay(comm, idx);
            rc = 1;
            break;
        }
        if (any) {
            if (first_failed < 0) first_failed = idx;
            failed_steps++;
            if (wrank == 0) print_replay(comm, idx);
            if (any > 1 || !opt_keep_going) break;
        }
    }
    if (wrank == 0)
        printf("[diff] sequence %llu, steps %d..%d on %s with %d ranks: %d failed%s (%.2f s)\n",
               (unsigned long long)opt_sequence, first, end - 1, mlc_comm_backend(comm), p, failed_steps,
               first_failed >= 0 ? " (see above)" : "", mlc_test_now() - t0);
    /* A failing rank's harness aborts the communicator: wait until every rank
     * is past the last agreement first, so none of them reports the abort. */
    if (failed_steps && !rc) (void)mlc_barrier(comm, NULL);
    for (int k = DIFF_COMMS - 1; k > 0; k--) mlc_comm_free(t[k].comm);
    return rc || failed_steps ? 1 : 0;
}

static long long opt_value(int argc, char **argv, const char *name, const char *env, long long dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return atoll(argv[i + 1]);
    const char *e = getenv(env);
    return e && *e ? atoll(e) : dflt;
}

static int opt_flag(int argc, char **argv, const char *name, const char *env)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    const char *e = getenv(env);
    return e && *e && strcmp(e, "0") != 0;
}

int main(int argc, char **argv)
{
    opt_sequence = (uint64_t)opt_value(argc, argv, "--sequence", "DIFF_SEQUENCE", 1);
    opt_steps = (int)opt_value(argc, argv, "--steps", "DIFF_STEPS", 200);
    opt_only = (int)opt_value(argc, argv, "--only", "DIFF_ONLY", -1);
    opt_keep_going = opt_flag(argc, argv, "--keep-going", "DIFF_KEEP_GOING");
    opt_verbose = opt_flag(argc, argv, "--verbose", "DIFF_VERBOSE");
    opt_hang = (double)opt_value(argc, argv, "--hang", "DIFF_HANG", 60);
    ssize_t len = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
    if (len > 0) exe_path[len] = '\0';
    for (int w = 0; w < DIFF_MAX_RANKS; w++) atomic_store(&watch[w].step, -1);
    pthread_t wd;
    if (pthread_create(&wd, NULL, watchdog, NULL) != 0 || pthread_detach(wd) != 0) {
        fprintf(stderr, "diff: cannot start the watchdog thread\n");
        return 1;
    }
    if (diff_create_user_ops()) {
        fprintf(stderr, "diff: mlc_op_create: %s\n", mlc_last_error());
        return 1;
    }
    int rc = mlc_test_main(argc, argv, body);
    diff_free_user_ops();
    return rc;
}
