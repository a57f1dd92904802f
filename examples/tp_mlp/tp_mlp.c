/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tp_mlp: a two-layer MLP trained one step with tensor parallelism
 * (column-parallel then row-parallel linear layer, Megatron style), plain
 * and sequence-parallel, on a dp x tp mesh. Outputs and gradients are
 * compared with the same model computed on one rank: max_rel_err is the
 * largest normwise relative error (max |got - ref| / max |ref| per tensor)
 * over outputs, input gradients and every parameter gradient, on every
 * rank; PASS when it is at most 1e-5 (fp32). The step is also timed with
 * each micro-batch's communication blocking and overlapped with the next
 * micro-batch's computation.
 *
 *   mlcomm-run -n 4 tp_mlp            one process per rank
 *   tp_mlp --threads 4                one thread per rank (threads backend)
 * Options: --tp N --batch B --seq S --hidden H --ffn F --micro M --steps K
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model.h"

#define TOLERANCE 1e-5

typedef struct options {
    int threads; /* 0: one rank of a launched job */
    int tp;      /* 0: choose */
    mlp_dims_t dims;
    size_t micro;
    int steps;
} options_t;

typedef struct variant_result {
    double err;                  /* max over ranks and over both modes */
    double ms_plain, ms_overlap; /* median step time, slowest rank */
} variant_result_t;

typedef struct rank_args {
    mlc_comm_t *world;
    const options_t *opt;
    int rc;
} rank_args_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Fail the job's communicators so that no peer waits for this rank. */
static void abort_job(mlc_comm_t *world, mlc_mesh_t *mesh)
{
    for (int a = 0; a < mlc_mesh_ndims(mesh); a++) mlc_comm_abort(mlc_mesh_comm(mesh, a));
    mlc_comm_abort(world);
}

/* Report a failed call on this rank and fail the job. */
static int fail(mlc_comm_t *world, mlc_mesh_t *mesh, const char *what, mlc_status_t st)
{
    fprintf(stderr, "tp_mlp [rank %d]: %s: %s: %s\n", mlc_comm_rank(world), what,
            mlc_status_name(st), mlc_last_error());
    abort_job(world, mesh);
    return 1;
}

/* Max of a double over the world (every rank gets it). */
static mlc_status_t world_max(mlc_comm_t *world, double *v)
{
    mlc_tensor_t t = {.data = v, .dtype = MLC_FLOAT64, .ndim = 0, .device = MLC_DEVICE_HOST};
    return mlc_tensor_allreduce(&t, &t, MLC_MAX, world, NULL);
}

/* One timed step, started together on every rank. */
static mlc_status_t timed_step(tp_model_t *m, mlc_comm_t *world, int overlap, double *ms)
{
    mlc_status_t st = mlc_barrier(world, NULL);
    if (st != MLC_SUCCESS) return st;
    double t0 = now_s();
    st = tp_model_step(m, overlap);
    *ms = 1e3 * (now_s() - t0);
    return st;
}

static int run_variant(mlc_comm_t *world, mlc_mesh_t *mesh, const options_t *opt, int sp,
                       const mlp_reference_t *ref, variant_result_t *out)
{
    tp_model_t m;
    if (tp_model_init(&m, &opt->dims, sp, opt->micro, mlc_mesh_comm(mesh, 1),
                      mlc_mesh_comm(mesh, 0)) != 0) {
        fprintf(stderr, "tp_mlp: cannot build the model (batch %zu, dp %d, %zu micro-batches)\n",
                opt->dims.batch, mlc_mesh_size(mesh, 0), opt->micro);
        abort_job(world, mesh);
        return 1;
    }
    int rc = 0;
    double err = 0.0, ms;
    /* Correctness of both modes. */
    for (int overlap = 0; overlap <= 1 && rc == 0; overlap++) {
        mlc_status_t st = tp_model_step(&m, overlap);
        if (st != MLC_SUCCESS) {
            fprintf(stderr, "tp_mlp [rank %d]: step: %s\n", mlc_comm_rank(world), m.errmsg);
            abort_job(world, mesh);
            rc = 1;
            break;
        }
        double e = tp_model_max_rel_err(&m, ref);
        if (!(e <= err)) err = e;
    }
    /* Timing: A B A B ... after one warm-up pair; medians. */
    int n = opt->steps;
    double *plain = calloc((size_t)n, sizeof *plain), *over = calloc((size_t)n, sizeof *over);
    if (rc == 0 && (!plain || !over)) rc = fail(world, mesh, "calloc", MLC_ERR_NO_MEMORY);
    for (int k = -1; k < n && rc == 0; k++) {
        mlc_status_t st = timed_step(&m, world, 0, &ms);
        if (st == MLC_SUCCESS && k >= 0) plain[k] = ms;
        if (st == MLC_SUCCESS) st = timed_step(&m, world, 1, &ms);
        if (st == MLC_SUCCESS && k >= 0) over[k] = ms;
        if (st != MLC_SUCCESS) {
            fprintf(stderr, "tp_mlp [rank %d]: timed step: %s\n", mlc_comm_rank(world), m.errmsg);
            abort_job(world, mesh);
            rc = 1;
        }
    }
    if (rc == 0) {
        out->err = err;
        out->ms_plain = median(plain, n);
        out->ms_overlap = median(over, n);
        mlc_status_t st = world_max(world, &out->err);
        if (st == MLC_SUCCESS) st = world_max(world, &out->ms_plain);
        if (st == MLC_SUCCESS) st = world_max(world, &out->ms_overlap);
        if (st != MLC_SUCCESS) rc = fail(world, mesh, "reducing the results", st);
    }
    free(plain);
    free(over);
    tp_model_free(&m);
    return rc;
}

static int run_rank(mlc_comm_t *world, const options_t *opt)
{
    int size = mlc_comm_size(world), rank = mlc_comm_rank(world);
    int tp = opt->tp ? opt->tp : (size >= 4 && size % 2 == 0 ? 2 : size);
    if (size % tp != 0) {
        if (rank == 0) fprintf(stderr, "tp_mlp: --tp %d does not divide %d ranks\n", tp, size);
        return 2;
    }
    int dims[2] = {size / tp, tp};
    const char *names[2] = {"dp", "tp"};
    mlc_mesh_t *mesh = NULL;
    mlc_status_t st = mlc_mesh_create(world, dims, 2, names, &mesh);
    if (st != MLC_SUCCESS) return fail(world, NULL, "mlc_mesh_create", st);

    mlp_reference_t ref;
    if (mlp_reference_compute(&opt->dims, &ref) != 0) {
        mlc_mesh_free(mesh);
        return fail(world, NULL, "reference model", MLC_ERR_NO_MEMORY);
    }
    static const char *const variant_names[2] = {"tensor parallel", "sequence parallel"};
    variant_result_t res[2];
    int rc = 0;
    for (int sp = 0; sp <= 1 && rc == 0; sp++) rc = run_variant(world, mesh, opt, sp, &ref, &res[sp]);
    if (rc == 0 && rank == 0) {
        const mlp_dims_t *d = &opt->dims;
        printf("tp_mlp: %d ranks (backend %s) = dp %d x tp %d; batch %zu, seq %zu, hidden %zu, "
               "ffn %zu, %zu micro-batches\n",
               size, mlc_comm_backend(world), dims[0], dims[1], d->batch, d->seq, d->hidden, d->ffn,
               opt->micro);
        double worst = 0.0;
        for (int sp = 0; sp <= 1; sp++) {
            const variant_result_t *r = &res[sp];
            int pass = r->err <= TOLERANCE;
            printf("  %-17s max_rel_err %.3e  %s   step time: no overlap %.3f ms, overlap %.3f ms "
                   "(%.2fx)\n",
                   variant_names[sp], r->err, pass ? "PASS" : "FAIL", r->ms_plain, r->ms_overlap,
                   r->ms_overlap > 0 ? r->ms_plain / r->ms_overlap : 0.0);
            if (!(r->err <= worst)) worst = r->err;
        }
        printf("tp_mlp: %s max_rel_err %.3e (fp32 tolerance %.0e)\n",
               worst <= TOLERANCE ? "PASS" : "FAIL", worst, TOLERANCE);
    }
    if (rc == 0 && !(res[0].err <= TOLERANCE && res[1].err <= TOLERANCE)) rc = 1;
    mlp_reference_free(&ref);
    mlc_mesh_free(mesh);
    return rc;
}

static void *rank_thread(void *p)
{
    rank_args_t *a = p;
    a->rc = run_rank(a->world, a->opt);
    return NULL;
}

/* --threads N: every rank a thread of this process, made by the factory. */
static int run_threads(const options_t *opt)
{
    char n[16];
    snprintf(n, sizeof n, "%d", opt->threads);
    mlc_option_t options[] = {{"world_size", n}};
    mlc_comm_t **comms = calloc((size_t)opt->threads, sizeof *comms);
    pthread_t *tids = calloc((size_t)opt->threads, sizeof *tids);
    rank_args_t *args = calloc((size_t)opt->threads, sizeof *args);
    int made = 0, rc = 0;
    if (!comms || !tids || !args) return 2;
    mlc_status_t st = mlc_comm_create_from("threads", options, 1, NULL, opt->threads, comms, &made);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "tp_mlp: mlc_comm_create_from: %s: %s\n", mlc_status_name(st),
                mlc_last_error());
        return 2;
    }
    for (int i = 0; i < made; i++) {
        args[i] = (rank_args_t){comms[i], opt, 0};
        pthread_create(&tids[i], NULL, rank_thread, &args[i]);
    }
    for (int i = 0; i < made; i++) {
        pthread_join(tids[i], NULL);
        if (args[i].rc > rc) rc = args[i].rc;
    }
    for (int i = 0; i < made; i++) mlc_comm_free(comms[i]);
    free(comms);
    free(tids);
    free(args);
    return rc;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || v == 0) return -1;
    *out = (size_t)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tp_mlp [--threads N] [--tp N] [--batch B] [--seq S] [--hidden H] [--ffn F]\n"
               "              [--micro M] [--steps K]\n"
               "A Megatron-style tensor-parallel MLP, plain and sequence-parallel, checked\n"
               "against the same model computed on one rank.\n"
               "  --threads N   run N ranks as threads of this process (else one rank per\n"
               "                process: mlcomm-run -n 4 tp_mlp)\n"
               "  --tp N        tensor-parallel group size (default 2 when the size is an even\n"
               "                number from 4, else every rank)\n"
               "  --batch B --seq S --hidden H --ffn F   shapes (default 16 30 128 512)\n"
               "  --micro M     micro-batches (default 4)\n"
               "  --steps K     timed steps (default 5)\n");
}

/* Returns 0 to run, 1 after --help, -1 on a usage error (message printed). */
static int parse_args(int argc, char **argv, options_t *o)
{
    *o = (options_t){.threads = 0,
                     .tp = 0,
                     .dims = {.batch = 16, .seq = 30, .hidden = 128, .ffn = 512},
                     .micro = 4,
                     .steps = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t x = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0) {
            fprintf(stderr, "tp_mlp: unexpected argument '%s'\n", a);
            usage(stderr);
            return -1;
        }
        if (!v || parse_size(v, &x) != 0 || x > 1u << 20) {
            fprintf(stderr, "tp_mlp: %s needs a positive number up to %u\n", a, 1u << 20);
            return -1;
        }
        i++;
        if (strcmp(a, "--threads") == 0) o->threads = (int)x;
        else if (strcmp(a, "--tp") == 0) o->tp = (int)x;
        else if (strcmp(a, "--batch") == 0) o->dims.batch = x;
        else if (strcmp(a, "--seq") == 0) o->dims.seq = x;
        else if (strcmp(a, "--hidden") == 0) o->dims.hidden = x;
        else if (strcmp(a, "--ffn") == 0) o->dims.ffn = x;
        else if (strcmp(a, "--micro") == 0) o->micro = x;
        else if (strcmp(a, "--steps") == 0) o->steps = (int)x;
        else {
            fprintf(stderr, "tp_mlp: unknown option %s\n", a);
            usage(stderr);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    options_t opt;
    int prc = parse_args(argc, argv, &opt);
    if (prc != 0) return prc > 0 ? 0 : 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (opt.threads > 0) return run_threads(&opt);
    mlc_comm_t *world = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &world);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "tp_mlp: mlc_comm_init: %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 2;
    }
    int rc = run_rank(world, &opt);
    mlc_comm_free(world);
    return rc;
}
