/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The measurement loop of mlcomm-bench, as nccl-tests does it: warm up at the
 * largest and smallest size, then for every size and algorithm one row with
 * an out-of-place and an in-place measurement, each: one synchronising call,
 * a barrier, `iters` timed calls at rotating buffer offsets, the slowest
 * rank's average, then (with -c 1) one call on fresh data that is verified.
 * With -P 1 each timed call is also timed alone: every rank sorts its own
 * call times, and the row shows the highest nearest-rank p50 and p99 over
 * the ranks (bench/percentile.h; below 100 calls the header says that p99
 * is the slowest call) (the
 * tail a caller of the slowest rank sees; the clock reads add ~20 ns a call
 * to the average).
 *
 * Buffers are host or device memory (bench_mem.h). Everything the host
 * writes or reads (check data, sentinels, results) goes through host mirrors
 * of the two buffers, copied in before and out after the verified call; for
 * host memory the mirrors are the buffers themselves.
 */
#include "base/clock.h"
#include "bench_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/percentile.h"
#include "algos/sched.h"
#include "base/config.h"
#include "base/error.h"

typedef enum outcome { OUT_OK, OUT_UNSUPPORTED, OUT_ERROR } outcome_t;

typedef struct bench {
    const mlc_bench_opts_t *o;
    const mlc_bench_coll_t *coll;
    mlc_comm_t *comm;
    int rank, p;
    size_t esize;
    const char *forced;        /* algorithm of the current rows; NULL = selector */
    const mlc_bench_mem_t *mem;
    unsigned char *send, *recv; /* buf_bytes each, in mem */
    unsigned char *hsend, *hrecv; /* their host mirrors (the buffers themselves for host memory) */
    size_t buf_bytes;
    size_t *vspace;             /* 2 * p: alltoallv's counts and displacements */
    uint64_t wrong_total;
    double busbw_sum;
    int busbw_n;
} bench_t;

/* ---- control traffic (never under the forced algorithm) ------------------- */

static mlc_status_t ctl_allreduce(bench_t *b, void *buf, size_t n, mlc_dtype_t dt, mlc_op_t op)
{
    bool swap = b->forced && b->coll->coll == MLC_COLL_ALLREDUCE;
    mlc_status_t st = swap ? mlc_comm_set_algo(b->comm, MLC_COLL_ALLREDUCE, NULL) : MLC_SUCCESS;
    if (st == MLC_SUCCESS) st = mlc_allreduce(buf, buf, n, dt, op, b->comm, NULL);
    if (swap) {
        mlc_status_t st2 = mlc_comm_set_algo(b->comm, MLC_COLL_ALLREDUCE, b->forced);
        if (st == MLC_SUCCESS) st = st2;
    }
    return st;
}

/* Report a failed call on this rank and abort comm so that no peer waits for us. */
static int fail(bench_t *b, const char *what, size_t bytes, mlc_status_t st)
{
    fprintf(stderr, "mlcomm-bench: rank %d: %s (%zu bytes%s%s) failed: %s: %s\n", b->rank, what,
            bytes, b->forced ? ", algo " : "", b->forced ? b->forced : "", mlc_status_name(st),
            mlc_last_error());
    mlc_comm_abort(b->comm);
    return MLC_BENCH_EXIT_ERROR;
}

/* Every rank learns the worst outcome of a call: UNSUPPORTED on every rank
 * skips the measurement; an error anywhere stops the run. */
static outcome_t agree(bench_t *b, mlc_status_t st, const char *what, size_t bytes, int *exit_code)
{
    double mine = st == MLC_SUCCESS ? OUT_OK : st == MLC_ERR_UNSUPPORTED ? OUT_UNSUPPORTED : OUT_ERROR;
    if (mine == OUT_ERROR) {
        *exit_code = fail(b, what, bytes, st);
        return OUT_ERROR;
    }
    double worst = mine;
    mlc_status_t cst = ctl_allreduce(b, &worst, 1, MLC_FLOAT64, MLC_MAX);
    if (cst != MLC_SUCCESS) {
        *exit_code = fail(b, "agreeing on a result (allreduce)", sizeof worst, cst);
        return OUT_ERROR;
    }
    return (outcome_t)worst;
}

/* ---- one call ------------------------------------------------------------- */

typedef struct placed {
    mlc_bench_call_t call;
    const void *result; /* where this rank's result lands */
    void *input;        /* where this rank's input lives */
} placed_t;

static placed_t place(const bench_t *b, const mlc_bench_geom_t *g, bool inplace, size_t shift)
{
    unsigned char *recv = b->recv + shift;
    placed_t pl = {.call = {b->comm, b->rank, b->p, NULL, recv, g->count, b->o->dtype, b->o->op,
                            b->o->root, b->vspace}};
    if (inplace) {
        pl.input = recv + (size_t)b->rank * g->send_inplace * b->esize;
        pl.call.recv = recv + (size_t)b->rank * g->recv_inplace * b->esize;
    } else {
        pl.input = b->send + shift;
    }
    pl.call.send = pl.input;
    pl.result = pl.call.recv;
    return pl;
}

/* Offset of iteration `iter`: successive iterations walk through the buffers. */
static size_t shift_of(const bench_t *b, const mlc_bench_geom_t *g, int iter)
{
    if (g->size_bytes == 0) return 0;
    size_t steps = b->buf_bytes / g->size_bytes;
    return g->size_bytes * ((size_t)iter % steps);
}

/* ---- host mirrors ----------------------------------------------------------- */

static bool on_device(const bench_t *b) { return b->hsend != b->send; }

/* Where the host sees buffer address p: the same offset in its mirror. */
static unsigned char *host_of(const bench_t *b, const void *p)
{
    const unsigned char *q = p;
    if (q >= b->send && q < b->send + b->buf_bytes) return b->hsend + (q - b->send);
    return b->hrecv + (q - b->recv);
}

/* Mirror -> buffer for `bytes` at p (nothing to do for host memory). */
static mlc_status_t to_buffer(const bench_t *b, const void *p, size_t bytes)
{
    return on_device(b) ? mlc_bench_mem_upload(b->mem, (void *)p, host_of(b, p), bytes) : MLC_SUCCESS;
}

/* Buffer -> mirror. */
static mlc_status_t from_buffer(const bench_t *b, const void *p, size_t bytes)
{
    return on_device(b) ? mlc_bench_mem_download(b->mem, host_of(b, p), p, bytes) : MLC_SUCCESS;
}

/* Sentinels over the result, fresh input (they may overlap: in place), then
 * both regions copied from the mirror, which holds the final bytes of each. */
static int prepare_check(bench_t *b, const mlc_bench_geom_t *g, bool inplace, uint64_t seed,
                         mlc_bench_gen_t *gen, placed_t *pl)
{
    *pl = place(b, g, inplace, 0);
    mlc_bench_gen_init(gen, b->o->dtype, b->coll->reduces ? b->o->op : -1, b->p, seed);
    size_t result_bytes = g->recv_count * b->esize, input_bytes = g->send_count * b->esize;
    memset(host_of(b, pl->result), MLC_BENCH_SENTINEL_BYTE, result_bytes);
    mlc_bench_fill(gen, b->rank, 0, host_of(b, pl->input), g->send_count);
    mlc_status_t st = to_buffer(b, pl->result, result_bytes);
    if (st == MLC_SUCCESS) st = to_buffer(b, pl->input, input_bytes);
    return st == MLC_SUCCESS ? 0 : fail(b, "copying check data to the device", result_bytes + input_bytes, st);
}

/* ---- one measurement ------------------------------------------------------ */

typedef struct measured {
    outcome_t outcome;
    double time_s;   /* slowest rank's average */
    double p50_s, p99_s; /* with -P 1: the highest over the ranks of each rank's percentile */
    uint64_t wrong;  /* over every rank */
} measured_t;

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The timed loop with every call timed alone: the average, and this rank's p50 and p99. */
static mlc_status_t timed_calls_each(bench_t *b, const mlc_bench_geom_t *g, bool inplace, measured_t *m)
{
    int n = b->o->iters;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return mlc_error(MLC_ERR_NO_MEMORY, "%d call times", n);
    mlc_status_t st = MLC_SUCCESS;
    double t0 = mlc_now(), prev = t0;
    for (int it = 0; it < n && st == MLC_SUCCESS; it++) {
        placed_t pl = place(b, g, inplace, shift_of(b, g, it));
        st = b->coll->run(&pl.call);
        double now = mlc_now();
        t[it] = now - prev;
        prev = now;
    }
    m->time_s = (prev - t0) / n;
    qsort(t, (size_t)n, sizeof *t, by_value);
    m->p50_s = bench_percentile(t, n, 50);
    m->p99_s = bench_percentile(t, n, 99);
    free(t);
    return st;
}

static int measure(bench_t *b, const mlc_bench_geom_t *g, bool inplace, uint64_t seed,
                   measured_t *m)
{
    const char *name = b->coll->name;
    int code = 0;
    mlc_bench_gen_t gen;
    placed_t pl;
    *m = (measured_t){OUT_OK, 0, 0, 0, 0};

    /* Synchronising call, on real data. */
    code = prepare_check(b, g, inplace, seed, &gen, &pl);
    if (code) return code;
    m->outcome = agree(b, b->coll->run(&pl.call), name, g->size_bytes, &code);
    if (m->outcome != OUT_OK) return code;

    mlc_status_t st = mlc_barrier(b->comm, NULL);
    if (st != MLC_SUCCESS) return fail(b, "barrier", 0, st);
    if (b->o->percentiles) {
        st = timed_calls_each(b, g, inplace, m);
        if (st != MLC_SUCCESS) return fail(b, name, g->size_bytes, st);
    } else {
        double t0 = mlc_now();
        for (int it = 0; it < b->o->iters; it++) {
            pl = place(b, g, inplace, shift_of(b, g, it));
            st = b->coll->run(&pl.call);
            if (st != MLC_SUCCESS) return fail(b, name, g->size_bytes, st);
        }
        m->time_s = (mlc_now() - t0) / b->o->iters;
    }
    double times[3] = {m->time_s, m->p50_s, m->p99_s};
    st = ctl_allreduce(b, times, 3, MLC_FLOAT64, MLC_MAX);
    if (st != MLC_SUCCESS) return fail(b, "collecting times (allreduce)", sizeof times, st);
    m->time_s = times[0];
    m->p50_s = times[1];
    m->p99_s = times[2];

    if (b->o->check) {
        code = prepare_check(b, g, inplace, seed + 1, &gen, &pl);
        if (code) return code;
        st = b->coll->run(&pl.call);
        if (st != MLC_SUCCESS) return fail(b, name, g->size_bytes, st);
        st = from_buffer(b, pl.result, g->recv_count * b->esize);
        if (st != MLC_SUCCESS) return fail(b, "copying the result from the device", g->recv_count * b->esize, st);
        double wrong = (double)mlc_bench_count_wrong(b->coll, &gen, g, b->rank, b->o->root,
                                                     host_of(b, pl.result));
        st = ctl_allreduce(b, &wrong, 1, MLC_FLOAT64, MLC_SUM);
        if (st != MLC_SUCCESS) return fail(b, "counting wrong values (allreduce)", 8, st);
        m->wrong = (uint64_t)wrong;
    }
    return 0;
}

/* ---- printing (rank 0) ---------------------------------------------------- */

/* Seconds as microseconds in 7 columns, with the digits that mean something:
 * sub-microsecond calls differ in the third decimal. */
static void format_us(char *out, size_t len, double s)
{
    double us = s * 1e6;
    snprintf(out, len, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : us >= 1.0 ? "%7.2f" : "%7.3f", us);
}

static void print_measured(bench_t *b, const mlc_bench_geom_t *g, const measured_t *m, bool na)
{
    if (na || m->outcome != OUT_OK) {
        printf("  %7s  %6s  %6s  %6s", na ? "N/A" : "unsupp", "N/A", "N/A", "N/A");
        return;
    }
    char t[32];
    format_us(t, sizeof t, m->time_s);
    double algbw = m->time_s > 0 ? (double)g->algbw_bytes / 1e9 / m->time_s : 0;
    double busbw = algbw * b->coll->busbw_factor(b->p);
    b->busbw_sum += busbw;
    b->busbw_n++;
    if (b->o->check)
        printf("  %7s  %6.2f  %6.2f  %6llu", t, algbw, busbw, (unsigned long long)m->wrong);
    else
        printf("  %7s  %6.2f  %6.2f  %6s", t, algbw, busbw, "N/A");
}

/* With -P 1: p50 and p99 of both placements, after the usual columns. */
static void print_percentiles(const measured_t m[2], const bool na[2])
{
    for (int k = 0; k < 2; k++) {
        char p50[32] = "N/A", p99[32] = "N/A";
        if (!na[k] && m[k].outcome == OUT_OK) {
            format_us(p50, sizeof p50, m[k].p50_s);
            format_us(p99, sizeof p99, m[k].p99_s);
        }
        printf("  %7s  %7s", p50, p99);
    }
}

static void print_header(bench_t *b, const char *ranks_are, const char *hosts)
{
    const mlc_bench_opts_t *o = b->o;
    printf("# mlcomm-bench %s: mlcomm %s, backend %s, %d rank%s (%s), %s\n", b->coll->name,
           mlc_version(), mlc_comm_backend(b->comm), b->p, b->p == 1 ? "" : "s", ranks_are,
           b->mem->text);
    printf("# dtype %s, op %s, root %d, algo %s\n", mlc_dtype_name(o->dtype),
           b->coll->reduces ? mlc_op_name(o->op) : "none", b->coll->rooted ? o->root : -1,
           o->algo ? o->algo : "auto (the selector's choice)");
    if (o->step_factor > 1)
        printf("# minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d "
               "validation: %d\n", o->min_bytes, o->max_bytes, o->step_factor, o->warmup,
               o->iters, o->check);
    else
        printf("# minBytes %zu maxBytes %zu step: %zu(bytes) warmup iters: %d iters: %d "
               "validation: %d\n", o->min_bytes, o->max_bytes, o->step_bytes, o->warmup,
               o->iters, o->check);
    printf("#\n# Using ranks\n%s#\n", hosts);
    if (o->percentiles) bench_note_p99_sample(o->iters);
    /* Group titles centred over their four columns ("  %7s  %6s  %6s  %6s"). */
    const int lead = 68, group = 33;
    const char *titles[2] = {"out-of-place", "in-place"};
    printf("#%*s", lead - 1, "");
    for (int k = 0; k < 2; k++) {
        int len = (int)strlen(titles[k]), left = (group - len) / 2;
        printf("%*s%s%*s", left, "", titles[k], k ? 0 : group - len - left, "");
    }
    if (o->percentiles) printf("  %-16s  %-16s", "  out-of-place", "    in-place");
    printf("\n");
    printf("# %10s  %12s  %8s  %6s  %6s  %14s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "size",
           "count", "type", "redop", "root", "algo", "time", "algbw", "busbw", "#wrong", "time",
           "algbw", "busbw", "#wrong");
    if (o->percentiles) printf("  %7s  %7s  %7s  %7s", "p50", "p99", "p50", "p99");
    printf("\n# %10s  %12s  %8s  %6s  %6s  %14s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)",
           "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
           "(GB/s)", "");
    if (o->percentiles) printf("  %7s  %7s  %7s  %7s", "(us)", "(us)", "(us)", "(us)");
    printf("\n");
    fflush(stdout);
}

/* "#  Rank  0 Pid  1234 on host\n" for every rank (collective). */
#define HOST_RECORD 64
static int describe_ranks(bench_t *b, char **text)
{
    unsigned char mine[HOST_RECORD] = {0};
    int pid = (int)getpid();
    memcpy(mine, &pid, sizeof pid);
    gethostname((char *)mine + sizeof pid, HOST_RECORD - sizeof pid - 1);
    unsigned char *all = malloc((size_t)b->p * HOST_RECORD);
    char *out = malloc((size_t)b->p * (HOST_RECORD + 32) + 1);
    if (!all || !out) {
        free(all);
        free(out);
        return fail(b, "allocating the rank table", (size_t)b->p * HOST_RECORD, MLC_ERR_NO_MEMORY);
    }
    mlc_status_t st = mlc_allgather(mine, all, HOST_RECORD, MLC_UINT8, b->comm, NULL);
    if (st != MLC_SUCCESS) {
        free(all);
        free(out);
        return fail(b, "exchanging rank descriptions (allgather)", HOST_RECORD, st);
    }
    size_t used = 0;
    out[0] = '\0';
    for (int r = 0; r < b->p; r++) {
        int rpid;
        memcpy(&rpid, all + (size_t)r * HOST_RECORD, sizeof rpid);
        used += (size_t)sprintf(out + used, "#  Rank %2d Pid %6d on %s\n", r, rpid,
                                (char *)all + (size_t)r * HOST_RECORD + sizeof rpid);
    }
    free(all);
    *text = out;
    return 0;
}

/* ---- the sweep ------------------------------------------------------------ */

static int warm_up(bench_t *b)
{
    const size_t sizes[2] = {b->o->max_bytes, b->o->min_bytes};
    for (int k = 0; k < 2 && b->o->warmup > 0; k++) {
        mlc_bench_geom_t g;
        b->coll->geometry(sizes[k] / b->esize, b->esize, b->p, &g);
        mlc_status_t st = MLC_SUCCESS;
        for (int it = 0; it < b->o->warmup && st == MLC_SUCCESS; it++) {
            placed_t pl = place(b, &g, false, shift_of(b, &g, it));
            st = b->coll->run(&pl.call);
        }
        int code = 0;
        /* An algorithm that cannot run a size says so in its row. */
        if (agree(b, st, b->coll->name, g.size_bytes, &code) == OUT_ERROR) return code;
    }
    return 0;
}

/* Force `algo` (NULL: leave the selector alone). The check is local and the
 * same on every rank, so every rank stops together on a bad name. */
static int force_algo(bench_t *b, const char *algo)
{
    b->forced = algo;
    if (!algo) return 0;
    mlc_status_t st = mlc_comm_set_algo(b->comm, b->coll->coll, algo);
    if (st == MLC_SUCCESS) return 0;
    if (b->rank == 0)
        fprintf(stderr, "mlcomm-bench: -a %s: %s: %s\n", algo, mlc_status_name(st), mlc_last_error());
    return MLC_BENCH_EXIT_USAGE;
}

/* One row: size `size` under the current algorithm, out of place and in place. */
static int row(bench_t *b, size_t size, int algo_index)
{
    mlc_bench_geom_t g;
    b->coll->geometry(size / b->esize, b->esize, b->p, &g);
    const char *algo = NULL;
    if (mlc_comm_get_algo(b->comm, b->coll->coll, g.count * b->esize, &algo) != MLC_SUCCESS)
        algo = "-";
    if (b->rank == 0)
        printf("%12zu  %12zu  %8s  %6s  %6d  %14s", g.size_bytes, g.count,
               mlc_dtype_name(b->o->dtype), b->coll->reduces ? mlc_op_name(b->o->op) : "none",
               b->coll->rooted ? b->o->root : -1, algo ? algo : "native");
    measured_t m[2] = {{OUT_OK, 0, 0, 0, 0}, {OUT_OK, 0, 0, 0, 0}};
    bool na[2] = {false, !b->coll->has_inplace};
    for (int inplace = 0; inplace < 2; inplace++) {
        /* fresh data per size, algorithm and placement */
        uint64_t seed = size * 1000003u + (uint64_t)algo_index * 7919u + (uint64_t)inplace * 2;
        if (!na[inplace]) {
            int code = measure(b, &g, inplace, seed, &m[inplace]);
            if (code) {
                if (b->rank == 0) printf("\n");
                return code;
            }
            b->wrong_total += m[inplace].wrong;
        }
        if (b->rank == 0) print_measured(b, &g, &m[inplace], na[inplace]);
    }
    if (b->rank == 0 && b->o->percentiles) print_percentiles(m, na);
    if (b->rank == 0) {
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

/* Every size; with several algorithms, one row per algorithm at each size. */
static int sweep(bench_t *b, const char *const *algos, int nalgos)
{
    int code = 0;
    for (int k = 0; k < nalgos && code == 0; k++) {
        code = force_algo(b, algos[k]);
        if (code == 0) code = warm_up(b);
    }
    size_t size = b->o->min_bytes;
    do {
        for (int k = 0; k < nalgos && code == 0; k++) {
            if (nalgos > 1) code = force_algo(b, algos[k]);
            if (code == 0) code = row(b, size, k);
        }
    } while (code == 0 && mlc_bench_next_size(b->o, &size));
    return code;
}

static void release(bench_t *b)
{
    if (on_device(b)) {
        free(b->hsend);
        free(b->hrecv);
    }
    mlc_bench_mem_free(b->mem, b->send);
    mlc_bench_mem_free(b->mem, b->recv);
    free(b->vspace);
    b->send = b->recv = b->hsend = b->hrecv = NULL;
    b->vspace = NULL;
}

/* Both buffers in b->mem and, for device memory, their host mirrors. */
static mlc_status_t allocate_local(bench_t *b)
{
    void *s = NULL, *r = NULL, *hs = NULL, *hr = NULL;
    mlc_status_t st = mlc_bench_mem_alloc(b->mem, b->buf_bytes, &s);
    if (st == MLC_SUCCESS) st = mlc_bench_mem_alloc(b->mem, b->buf_bytes, &r);
    if (st == MLC_SUCCESS && (b->vspace = calloc(2 * (size_t)b->p, sizeof *b->vspace)) == NULL)
        st = mlc_error(MLC_ERR_NO_MEMORY, "cannot allocate alltoallv's counts for %d ranks", b->p);
    if (st == MLC_SUCCESS && b->mem->kind == MLC_BENCH_MEM_DEVICE &&
        (posix_memalign(&hs, 4096, b->buf_bytes) != 0 || posix_memalign(&hr, 4096, b->buf_bytes) != 0))
        st = mlc_error(MLC_ERR_NO_MEMORY, "cannot allocate 2 x %zu bytes of host mirrors", b->buf_bytes);
    if (st != MLC_SUCCESS) {
        free(hs);
        free(hr);
        free(b->vspace);
        b->vspace = NULL;
        mlc_bench_mem_free(b->mem, s);
        mlc_bench_mem_free(b->mem, r);
        return st;
    }
    b->send = s;
    b->recv = r;
    b->hsend = hs ? hs : s;
    b->hrecv = hr ? hr : r;
    /* Touch every page now, not inside a timed loop. */
    memset(b->hsend, 0, b->buf_bytes);
    memset(b->hrecv, 0, b->buf_bytes);
    st = to_buffer(b, b->send, b->buf_bytes);
    if (st == MLC_SUCCESS) st = to_buffer(b, b->recv, b->buf_bytes);
    if (st != MLC_SUCCESS) release(b);
    return st;
}

static int allocate(bench_t *b)
{
    mlc_bench_geom_t g;
    b->coll->geometry(b->o->max_bytes / b->esize, b->esize, b->p, &g);
    b->buf_bytes = g.size_bytes > 64 ? g.size_bytes : 64;
    mlc_status_t mine = allocate_local(b);
    if (mine != MLC_SUCCESS)
        fprintf(stderr, "mlcomm-bench: rank %d: cannot allocate 2 x %zu bytes of %s: %s\n", b->rank,
                b->buf_bytes, b->mem->text, mlc_last_error());
    double any_bad = mine != MLC_SUCCESS;
    mlc_status_t st = ctl_allreduce(b, &any_bad, 1, MLC_FLOAT64, MLC_MAX);
    if (st != MLC_SUCCESS || any_bad) {
        release(b);
        if (st != MLC_SUCCESS) return fail(b, "agreeing on buffers (allreduce)", 8, st);
        return MLC_BENCH_EXIT_ERROR;
    }
    return 0;
}

/* The algorithm names rows are run with: {NULL} for the selector's choice. */
static const char **algo_list(const bench_t *b, int *n)
{
    bool all = b->o->algo && strcmp(b->o->algo, "all") == 0;
    int count = 0;
    for (const mlc_algo_t *a = mlc_algos; all && a->name; a++) count += a->coll == b->coll->coll;
    const char **names = calloc(count > 0 ? (size_t)count : 1, sizeof *names);
    if (!names) return NULL;
    if (count > 0) {
        *n = 0;
        for (const mlc_algo_t *a = mlc_algos; a->name; a++)
            if (a->coll == b->coll->coll) names[(*n)++] = a->name;
        return names;
    }
    if (all && b->rank == 0)
        printf("# %s has no scheduled algorithms: the backend's own is measured\n", b->coll->name);
    names[0] = all ? NULL : b->o->algo;
    *n = 1;
    return names;
}

int mlc_bench_rank(const mlc_bench_opts_t *o, const mlc_bench_mem_t *mem, mlc_comm_t *comm,
                   const char *ranks_are)
{
    bench_t b = {.o = o, .coll = o->coll, .comm = comm, .mem = mem, .rank = mlc_comm_rank(comm),
                 .p = mlc_comm_size(comm), .esize = mlc_bench_dtype_size(o->dtype)};
    if (b.coll->rooted && o->root >= b.p) {
        if (b.rank == 0)
            fprintf(stderr, "mlcomm-bench: --root %d is not a rank of this %d-rank job\n", o->root,
                    b.p);
        return MLC_BENCH_EXIT_USAGE;
    }
    char *hosts = NULL;
    int code = describe_ranks(&b, &hosts);
    if (code) return code;
    if (b.rank == 0) print_header(&b, ranks_are, hosts);
    free(hosts);
    code = allocate(&b);
    if (code) return code;

    int nalgos = 0;
    const char **algos = algo_list(&b, &nalgos);
    if (!algos) {
        code = fail(&b, "allocating the algorithm list", 0, MLC_ERR_NO_MEMORY);
        goto out;
    }
    code = sweep(&b, algos, nalgos);
    if (code == 0 && b.rank == 0) {
        printf("# Out of bounds values : %llu %s\n", (unsigned long long)b.wrong_total,
               b.wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n", b.busbw_n ? b.busbw_sum / b.busbw_n : 0.0);
        fflush(stdout);
    }
    if (code == 0 && b.wrong_total) code = MLC_BENCH_EXIT_WRONG;
    free(algos);
out:
    release(&b);
    return code;
}
