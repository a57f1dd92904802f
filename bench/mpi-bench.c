/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi-bench: the raw-MPI side of bench/vs-mpi.sh. It measures MPI's own
 * collectives the way mlcomm-bench measures mlcomm's, so that the two
 * columns of the comparison differ only in the library:
 *
 *   - sizes and geometry as nccl-tests / mlcomm-bench: for S bytes of float32,
 *     c = S/4; allreduce and broadcast move c on every rank; allgather and
 *     reduce_scatter move c/p per rank, buffers hold (c/p)*p; alltoall sends
 *     c/p to every rank, both buffers hold (c/p)*p; the printed size is the
 *     larger buffer, algbw = that many bytes / time;
 *   - one segment = sizes MIN, MIN*F, ... <= MAX with ITERS timed calls each;
 *     buffers (page-aligned) are sized for the segment's largest size and
 *     successive iterations walk through them at offsets of one size (as
 *     mlcomm-bench does within one invocation), warm-up at the segment's
 *     largest and smallest size;
 *   - per size: one call on freshly written data, a barrier, ITERS timed
 *     calls, the slowest rank's average (MPI_Allreduce MAX);
 *   - buffer contents come from --seed, so successive runs see new data;
 *   - MPI starts with MPI_Init, or MPI_Init_thread at -t LEVEL (single,
 *     funneled, serialized, multiple): mlcomm's mpi backend asks for
 *     multiple unless MLC_MPI_THREAD_LEVEL says otherwise, and the overhead
 *     comparison (vs-mpi.sh --overhead) runs both sides at the same level;
 *   - the calls go to MPI_COMM_WORLD, or with -D to a duplicate of it, as a
 *     library such as mlcomm uses (under Open MPI 4.1 creating any
 *     communicator leaves libnbc's progress hook on every later call);
 *   - buffers come from posix_memalign, or with -A from MPI_Alloc_mem, the
 *     MPI's own allocator for communication memory (compared with
 *     mlcomm-bench -M shared, mlc_mem_alloc).
 *
 * Output (rank 0), one line per size, '#' lines are comments:
 *   COLL SIZE COUNT ITERS TIME_US ALGBW_GBPS BUSBW_GBPS [P50_US P99_US]
 *   (the last two with -P: every call also timed alone; per rank the
 *   nearest-rank percentiles of its call times, the highest over the ranks,
 *   bench/percentile.h; a segment of fewer than 100 calls per size starts
 *   with a '#' line saying that its p99 is the slowest call)
 *
 * Usage: mpi-bench [-c COLL[,COLL...]] [-w WARMUP] [-S SEED] [-t LEVEL] [-D] [-P] [-A] SEGMENT...
 *        SEGMENT = MIN:MAX:FACTOR:ITERS (sizes take K/M/G suffixes)
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "peer_common.h"
#include "percentile.h"

/* Where the measured calls go: MPI_COMM_WORLD, or its duplicate (-D). */
static MPI_Comm bench_comm;

typedef struct bench {
    int rank, p;
    float *send, *recv;
    size_t buf_elems;
    unsigned long long seed;
    int percentiles; /* -P: time every call alone too; print the slowest rank's p50 and p99 */
    int mpi_alloc;   /* -A: buffers from MPI_Alloc_mem */
} bench_t;

/* Page-aligned (as mlcomm-bench's: alignment moves large-message times by a
 * few percent), or the MPI's own (-A). NULL when out of memory. */
static void *take_buffer(const bench_t *b, size_t bytes)
{
    void *p = NULL;
    if (b->mpi_alloc) return MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &p) == MPI_SUCCESS ? p : NULL;
    return posix_memalign(&p, 4096, bytes) == 0 ? p : NULL;
}

static void give_buffer(const bench_t *b, void *p)
{
    if (b->mpi_alloc)
        MPI_Free_mem(p);
    else
        free(p);
}

static int run(coll_t c, const float *send, float *recv, const geom_t *g)
{
    int n = (int)g->count;
    switch (c) {
    case COLL_allreduce: return MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM, bench_comm);
    case COLL_allgather:
        return MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, bench_comm);
    case COLL_reduce_scatter:
        return MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, bench_comm);
    case COLL_broadcast: return MPI_Bcast(recv, n, MPI_FLOAT, 0, bench_comm);
    case COLL_alltoall: return MPI_Alltoall(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, bench_comm);
    default: return MPI_ERR_OTHER;
    }
}

static int call_at(const bench_t *b, coll_t c, const geom_t *g, size_t shift)
{
    /* broadcast sends from the root's recv buffer, as MPI_Bcast does */
    return run(c, b->send + shift, b->recv + shift, g);
}

/* time_s[0]: the slowest rank's average; with -P, [1] and [2]: the highest
 * p50 and p99 over the ranks of their per-call times. */
static int measure(bench_t *b, coll_t c, size_t bytes, long iters, double time_s[3], geom_t *gout)
{
    geom_t g = geometry(c, bytes, b->p);
    /* one call on fresh data */
    peer_fill(b->send, g.send_elems, b->seed ^ bytes, b->rank);
    if (c == COLL_broadcast) peer_fill(b->recv, g.recv_elems, b->seed ^ bytes, b->rank);
    double *each = b->percentiles ? malloc((size_t)iters * sizeof *each) : NULL;
    if (b->percentiles && !each) MPI_Abort(MPI_COMM_WORLD, 3);
    int rc = call_at(b, c, &g, 0);
    if (rc == MPI_SUCCESS) rc = MPI_Barrier(bench_comm);
    double t0 = MPI_Wtime(), prev = t0;
    for (long it = 0; it < iters && rc == MPI_SUCCESS; it++) {
        rc = call_at(b, c, &g, peer_shift(b->buf_elems, &g, it));
        if (each) {
            double now = MPI_Wtime();
            each[it] = now - prev;
            prev = now;
        }
    }
    double t[3] = {(MPI_Wtime() - t0) / (double)iters, 0, 0};
    if (each) {
        qsort(each, (size_t)iters, sizeof *each, peer_cmp_double);
        t[1] = bench_percentile(each, iters, 50);
        t[2] = bench_percentile(each, iters, 99);
        free(each);
    }
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(t, time_s, 3, MPI_DOUBLE, MPI_MAX, bench_comm);
    *gout = g;
    return rc;
}

static int warm_up(bench_t *b, coll_t c, const segment_t *s, long warmup, size_t last)
{
    const size_t sizes[2] = {last, s->min};
    int rc = MPI_SUCCESS;
    for (int k = 0; k < 2; k++) {
        geom_t g = geometry(c, sizes[k], b->p);
        for (long it = 0; it < warmup && rc == MPI_SUCCESS; it++)
            rc = call_at(b, c, &g, peer_shift(b->buf_elems, &g, it));
    }
    return rc;
}

static int run_segment(bench_t *b, coll_t c, const segment_t *s, long warmup)
{
    size_t last = last_size(s);
    geom_t big = geometry(c, last, b->p);
    size_t elems = big.size_bytes / sizeof(float);
    b->buf_elems = elems > 16 ? elems : 16;
    b->send = take_buffer(b, b->buf_elems * sizeof(float));
    b->recv = take_buffer(b, b->buf_elems * sizeof(float));
    int bad = !b->send || !b->recv;
    int rc = MPI_SUCCESS;
    if (bad) {
        fprintf(stderr, "mpi-bench: rank %d: cannot allocate 2 x %zu bytes\n", b->rank,
                b->buf_elems * sizeof(float));
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    /* every page written (no shared zero page), with this run's data */
    peer_fill(b->send, b->buf_elems, b->seed, b->rank);
    peer_fill(b->recv, b->buf_elems, b->seed + 1, b->rank);
    rc = warm_up(b, c, s, warmup, last);
    if (b->percentiles && b->rank == 0) bench_note_p99_sample(s->iters);
    for (size_t bytes = s->min; rc == MPI_SUCCESS;) {
        double tm[3] = {0, 0, 0};
        geom_t g;
        rc = measure(b, c, bytes, s->iters, tm, &g);
        if (rc == MPI_SUCCESS && b->rank == 0) {
            double t = tm[0], algbw = t > 0 ? (double)g.size_bytes / t / 1e9 : 0;
            printf("%s %zu %zu %ld %.3f %.4f %.4f", coll_names[c], g.size_bytes, g.count,
                   s->iters, t * 1e6, algbw, algbw * busbw_factor(c, b->p));
            if (b->percentiles) printf(" %.3f %.3f", tm[1] * 1e6, tm[2] * 1e6);
            printf("\n");
            fflush(stdout);
        }
        if (s->factor <= 1 || bytes > s->max / s->factor) break;
        bytes *= s->factor;
    }
    give_buffer(b, b->send);
    give_buffer(b, b->recv);
    b->send = b->recv = NULL;
    return rc;
}

/* X(name, MPI constant): thread levels for -t */
#define LEVEL_LIST(X)                      \
    X(single, MPI_THREAD_SINGLE)         \
    X(funneled, MPI_THREAD_FUNNELED)     \
    X(serialized, MPI_THREAD_SERIALIZED) \
    X(multiple, MPI_THREAD_MULTIPLE)

static int parse_level(const char *name, int *level)
{
#define X_LEVEL(n, v)                 \
    if (strcmp(name, #n) == 0) {      \
        *level = v;                   \
        return 0;                     \
    }
    LEVEL_LIST(X_LEVEL)
#undef X_LEVEL
    fprintf(stderr, "mpi-bench: unknown thread level '%s' (single, funneled, serialized, multiple)\n", name);
    return -1;
}

static const char *level_name(int level)
{
#define X_NAME_OF(n, v) \
    if (level == v) return #n;
    LEVEL_LIST(X_NAME_OF)
#undef X_NAME_OF
    return "?";
}

static void usage(void)
{
    fprintf(stderr, "usage: mpi-bench [-c COLL[,COLL...]] [-w WARMUP] [-S SEED] [-t LEVEL] [-D] [-P] [-A] MIN:MAX:FACTOR:ITERS...\n"
                    "collectives: allreduce allgather reduce_scatter broadcast alltoall (default all)\n"
                    "LEVEL: MPI_Init_thread at single|funneled|serialized|multiple (default: MPI_Init)\n"
                    "-D: call on a duplicate of MPI_COMM_WORLD (default: MPI_COMM_WORLD itself)\n"
                    "-P: also time every call alone: two more columns, the slowest rank's p50 and p99 (us)\n"
                    "-A: buffers from MPI_Alloc_mem (default: posix_memalign)\n");
}

/* "cpus 0-1" style list of this process's affinity, for the header. */
static void affinity_text(char *buf, size_t len)
{
    cpu_set_t set;
    size_t o = 0;
    buf[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        snprintf(buf, len, "?");
        return;
    }
    for (int c = 0; c < CPU_SETSIZE && o + 8 < len; c++)
        if (CPU_ISSET(c, &set)) o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", c);
}

int main(int argc, char **argv)
{
    segment_t segs[MAX_SEGMENTS];
    int nsegs = 0, selected[COLL_COUNT] = {0}, any = 0;
    long warmup = 5;
    unsigned long long seed = 1;
    int level = -1; /* -1: MPI_Init */
    int dup = 0, percentiles = 0, mpi_alloc = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            if (parse_colls(argv[++i], selected, "mpi-bench") != 0) return 2;
        } else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
            warmup = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-S") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-D") == 0) {
            dup = 1;
        } else if (strcmp(argv[i], "-P") == 0) {
            percentiles = 1;
        } else if (strcmp(argv[i], "-A") == 0) {
            mpi_alloc = 1;
        } else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            if (parse_level(argv[++i], &level) != 0) return 2;
        } else if (nsegs < MAX_SEGMENTS && parse_segment(argv[i], &segs[nsegs]) == 0) {
            nsegs++;
        } else {
            fprintf(stderr, "mpi-bench: bad argument '%s'\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (nsegs == 0) {
        usage();
        return 2;
    }
    for (int c = 0; c < COLL_COUNT; c++) any |= selected[c];
    if (!any)
        for (int c = 0; c < COLL_COUNT; c++) selected[c] = 1;

    int provided = -1;
    if (level < 0) {
        MPI_Init(&argc, &argv);
        MPI_Query_thread(&provided);
    } else {
        MPI_Init_thread(&argc, &argv, level, &provided);
    }
    bench_comm = MPI_COMM_WORLD;
    if (dup && MPI_Comm_dup(MPI_COMM_WORLD, &bench_comm) != MPI_SUCCESS) {
        fprintf(stderr, "mpi-bench: MPI_Comm_dup failed\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    bench_t b = {.seed = seed, .percentiles = percentiles, .mpi_alloc = mpi_alloc};
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.p);
    char aff[256];
    affinity_text(aff, sizeof aff);
    if (b.rank == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(version, &len);
        char *nl = strchr(version, '\n');
        if (nl) *nl = '\0';
        printf("# mpi-bench: %s; %d ranks; seed %llu; rank 0 on cpus %s; thread level %s (%s); %s; buffers of %s\n",
               version, b.p, seed, aff, level_name(provided), level < 0 ? "MPI_Init" : "MPI_Init_thread",
               dup ? "a duplicate of MPI_COMM_WORLD" : "MPI_COMM_WORLD", mpi_alloc ? "MPI_Alloc_mem" : "posix_memalign");
        fflush(stdout);
    }
    int rc = MPI_SUCCESS;
    for (int c = 0; c < COLL_COUNT && rc == MPI_SUCCESS; c++)
        for (int k = 0; k < nsegs && selected[c] && rc == MPI_SUCCESS; k++)
            rc = run_segment(&b, (coll_t)c, &segs[k], warmup);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpi-bench: rank %d: an MPI call failed (%d)\n", b.rank, rc);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (dup) MPI_Comm_free(&bench_comm);
    MPI_Finalize();
    return 0;
}
