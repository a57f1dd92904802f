/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm-bench --model: print the selector's cost model for every algorithm
 * at p = 2 ... 16384 and the sizes where the selector switches
 * (mlc_algo_print_model), from the default alpha/beta/gamma, from given
 * ones, or from ones measured on this job (--measure, 2+ ranks):
 *   alpha  half the round trip of an 8-byte ping-pong between ranks 0 and 1;
 *   beta   (half the round trip of a 4 MiB ping-pong - alpha) / 4 MiB;
 *   gamma  one local float32 sum (mlc_reduce_local) over 256 KiB, per byte.
 * Each is the median of 5 repetitions. Given values override measured ones.
 */
#include "base/clock.h"
#include "bench_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos/select.h"
#include "config.h"

#define PROG "mlcomm-bench --model"
#define MODEL_REPS 5
#define PING_SMALL 8
#define PING_LARGE ((size_t)4 << 20)
#define REDUCE_BYTES ((size_t)256 << 10)

typedef struct model_opts {
    double alpha_us, beta_gbps, gamma_gbps; /* < 0: not given */
    bool measure;
    bool colls[MLC_COLL_COUNT];
    bool any_coll;
} model_opts_t;

bool mlc_bench_model_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--model") == 0) return true;
    return false;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mlcomm-bench --model [--alpha US] [--beta GB/S] [--gamma GB/S] [--measure] [COLL...]\n"
            "\n"
            "Print the cost model's predicted time of every algorithm of each collective\n"
            "(default: every collective that has algorithms) at p = 2 ... 16384, and the\n"
            "sizes where the selector switches. alpha is the latency per message (us), beta\n"
            "and gamma are given as bandwidths (copy and reduce, GB/s). Unset values come\n"
            "from --measure, else from the library's defaults.\n"
            "  --measure   measure alpha, beta (ping-pong between ranks 0 and 1) and gamma\n"
            "              (local float32 sum) on this job: mlcomm-run -n 2 mlcomm-bench --model --measure\n");
}

static bool parse_positive(const char *flag, const char *v, double *out)
{
    if (!v || !mlc_parse_double(v, 1e-12, 1e12, out)) {
        fprintf(stderr, PROG ": %s needs a positive number, not '%s'\n", flag, v ? v : "(nothing)");
        return false;
    }
    return true;
}

/* 0: parsed; 1: help printed; -1: usage error. */
static int parse(int argc, char **argv, model_opts_t *o)
{
    *o = (model_opts_t){.alpha_us = -1, .beta_gbps = -1, .gamma_gbps = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--model") == 0) continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--measure") == 0) {
            o->measure = true;
        } else if (strcmp(a, "--alpha") == 0) {
            if (!parse_positive(a, v, &o->alpha_us)) return -1;
            i++;
        } else if (strcmp(a, "--beta") == 0) {
            if (!parse_positive(a, v, &o->beta_gbps)) return -1;
            i++;
        } else if (strcmp(a, "--gamma") == 0) {
            if (!parse_positive(a, v, &o->gamma_gbps)) return -1;
            i++;
        } else {
            mlc_coll_t c = 0;
            while (c < MLC_COLL_COUNT && strcmp(mlc_coll_name(c), a) != 0) c++;
            if (c == MLC_COLL_COUNT) {
                fprintf(stderr, PROG ": '%s' is neither an option nor a collective\n", a);
                usage(stderr);
                return -1;
            }
            o->colls[c] = o->any_coll = true;
        }
    }
    return 0;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Half the round trip of `bytes` between ranks 0 and 1 (the slower of the two views). */
static mlc_status_t ping_pong(mlc_comm_t *comm, void *buf, size_t bytes, int iters, double *half_rtt)
{
    int rank = mlc_comm_rank(comm), peer = 1 - rank;
    mlc_status_t st = mlc_barrier(comm, NULL);
    double t0 = mlc_now();
    for (int it = 0; it < iters && st == MLC_SUCCESS && rank < 2; it++) {
        if (rank == 0) {
            st = mlc_send(buf, bytes, MLC_UINT8, peer, 1, comm, NULL);
            if (st == MLC_SUCCESS) st = mlc_recv(buf, bytes, MLC_UINT8, peer, 1, comm, NULL, NULL);
        } else {
            st = mlc_recv(buf, bytes, MLC_UINT8, peer, 1, comm, NULL, NULL);
            if (st == MLC_SUCCESS) st = mlc_send(buf, bytes, MLC_UINT8, peer, 1, comm, NULL);
        }
    }
    double t = rank < 2 ? (mlc_now() - t0) / iters / 2 : 0;
    if (st == MLC_SUCCESS) st = mlc_allreduce(&t, half_rtt, 1, MLC_FLOAT64, MLC_MAX, comm, NULL);
    return st;
}

/* Seconds per byte of one local float32 sum over REDUCE_BYTES (in cache). */
static double reduce_time_per_byte(float *in, float *inout)
{
    size_t n = REDUCE_BYTES / sizeof(float);
    for (size_t i = 0; i < n; i++) in[i] = (float)(i % 7), inout[i] = (float)(i % 5);
    const int iters = 200;
    mlc_reduce_local(in, inout, n, MLC_FLOAT32, MLC_SUM); /* warm */
    double t0 = mlc_now();
    for (int it = 0; it < iters; it++) mlc_reduce_local(in, inout, n, MLC_FLOAT32, MLC_SUM);
    return (mlc_now() - t0) / iters / (double)REDUCE_BYTES;
}

static int measure(mlc_comm_t *comm, mlc_cost_model_t *m)
{
    int rank = mlc_comm_rank(comm);
    unsigned char *buf = calloc(1, PING_LARGE);
    float *a = malloc(REDUCE_BYTES), *b = malloc(REDUCE_BYTES);
    double alpha[MODEL_REPS], big[MODEL_REPS], gamma[MODEL_REPS];
    mlc_status_t st = buf && a && b ? MLC_SUCCESS : MLC_ERR_NO_MEMORY;
    double dummy;
    if (st == MLC_SUCCESS) st = ping_pong(comm, buf, PING_SMALL, 100, &dummy); /* warm up */
    if (st == MLC_SUCCESS) st = ping_pong(comm, buf, PING_LARGE, 2, &dummy);
    for (int k = 0; k < MODEL_REPS && st == MLC_SUCCESS; k++) {
        st = ping_pong(comm, buf, PING_SMALL, 500, &alpha[k]);
        if (st == MLC_SUCCESS) st = ping_pong(comm, buf, PING_LARGE, 10, &big[k]);
        gamma[k] = reduce_time_per_byte(a, b);
    }
    free(buf);
    free(a);
    free(b);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, PROG ": rank %d: measuring failed: %s: %s\n", rank, mlc_status_name(st),
                mlc_last_error());
        mlc_comm_abort(comm);
        return 3;
    }
    m->alpha = median(alpha, MODEL_REPS);
    double per_byte = (median(big, MODEL_REPS) - m->alpha) / (double)PING_LARGE;
    /* a large message faster than alpha would be noise: keep beta positive */
    m->beta = per_byte > 1e-15 ? per_byte : 1e-15;
    m->gamma = median(gamma, MODEL_REPS);
    return 0;
}

int mlc_bench_model_main(int argc, char **argv)
{
    model_opts_t o;
    int rc = parse(argc, argv, &o);
    if (rc != 0) return rc > 0 ? 0 : 2;
    mlc_cost_model_t m = mlc_cost_model_default;
    mlc_comm_t *comm = NULL;
    const char *source = "the library's defaults";
    char measured[160];
    if (o.measure) {
        mlc_status_t st = mlc_comm_init(NULL, &comm);
        if (st != MLC_SUCCESS) {
            fprintf(stderr, PROG ": mlc_comm_init failed: %s: %s\n", mlc_status_name(st), mlc_last_error());
            return 3;
        }
        if (mlc_comm_size(comm) < 2) {
            fprintf(stderr, PROG ": --measure needs 2 or more ranks (e.g. mlcomm-run -n 2 mlcomm-bench --model --measure)\n");
            mlc_comm_free(comm);
            return 2;
        }
        rc = measure(comm, &m);
        if (rc != 0) {
            mlc_comm_free(comm);
            return rc;
        }
        snprintf(measured, sizeof measured, "measured on %d ranks of backend %s", mlc_comm_size(comm),
                 mlc_comm_backend(comm));
        source = measured;
    }
    bool print = !comm || mlc_comm_rank(comm) == 0;
    if (o.alpha_us > 0) m.alpha = o.alpha_us * 1e-6;
    if (o.beta_gbps > 0) m.beta = 1.0 / (o.beta_gbps * 1e9);
    if (o.gamma_gbps > 0) m.gamma = 1.0 / (o.gamma_gbps * 1e9);
    if (print) {
        printf("# mlcomm %s cost model: alpha %.3g us, 1/beta %.3g GB/s, 1/gamma %.3g GB/s (%s%s)\n",
               mlc_version(), m.alpha * 1e6, 1e-9 / m.beta, 1e-9 / m.gamma, source,
               o.alpha_us > 0 || o.beta_gbps > 0 || o.gamma_gbps > 0 ? ", some given" : "");
        for (mlc_coll_t c = 0; c < MLC_COLL_COUNT; c++) {
            bool has_algos = mlc_algo_names(c)[0] != NULL;
            if (o.any_coll ? o.colls[c] : has_algos) {
                printf("\n");
                mlc_algo_print_model(stdout, &m, c);
            }
        }
        fflush(stdout);
    }
    if (comm) mlc_comm_free(comm);
    return 0;
}
