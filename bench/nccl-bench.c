/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl-bench: the raw-NCCL side of bench/vs-gpu.sh. It measures NCCL's own
 * collectives on device buffers the way mlcomm-bench --memory device measures
 * mlcomm's nccl backend, so that the two columns differ only in the library
 * layer. Same sizes, geometry and output as bench/mpi-bench.c:
 *
 *   - for S bytes of float32, c = S/4; allreduce and broadcast move c on
 *     every rank; allgather and reduce_scatter c/p per rank, buffers hold
 *     (c/p)*p; alltoall (grouped ncclSend/ncclRecv, as mlcomm's nccl backend
 *     does it) c/p to every rank; the printed size is the larger buffer,
 *     algbw = that many bytes / time;
 *   - one segment = sizes MIN, MIN*F, ... <= MAX with ITERS timed calls each;
 *     device buffers sized for the segment's largest size, successive
 *     iterations at offsets of one size, warm-up at the largest and smallest;
 *   - per size: one call on freshly written data, a barrier (a one-element
 *     ncclAllReduce, waited for), ITERS calls enqueued on one stream and one
 *     cudaStreamSynchronize for the batch (-y: after every call, as a
 *     blocking mlcomm call waits), the slowest rank's per-iteration average;
 *   - broadcast is out of place from root 0 (mlcomm-bench's out-of-place column).
 *
 * Nothing of NCCL or CUDA is needed to build it: both are dlopen'ed with the
 * few declarations below. libnccl.so.2 (NCCL_BENCH_LIB, else MLC_NCCL_LIB,
 * overrides it) and libcudart.so.13/.12/.11 (NCCL_BENCH_CUDART, else
 * MLC_CUDART_LIB), so the test doubles of tests/gpu can stand in.
 *
 * Ranks are the processes of mlcomm-run (MLC_RANK, MLC_WORLD_SIZE,
 * MLC_LOCAL_RANK; none set: one rank). Rank r uses device
 * (local rank mod device count). The ncclUniqueId travels through a file:
 * rank 0 writes it to NCCL_BENCH_ID_FILE (default
 * ${TMPDIR:-/tmp}/nccl-bench.<MLC_JOB_ID>.id) under a temporary name and
 * renames it into place, so a reader sees all of it or nothing; the others
 * poll for it (NCCL_BENCH_TIMEOUT seconds, default 60); rank 0 removes it
 * once ncclCommInitRank has returned, which needs every rank to have read it.
 * mlcomm-run gives every job a new MLC_JOB_ID, so no stale file is read.
 *
 * Output (rank 0), one line per size, '#' lines are comments:
 *   COLL SIZE COUNT ITERS TIME_US ALGBW_GBPS BUSBW_GBPS
 *
 * Usage: nccl-bench [-c COLL[,COLL...]] [-w WARMUP] [-S SEED] [-y] SEGMENT...
 *        SEGMENT = MIN:MAX:FACTOR:ITERS (sizes take K/M/G suffixes)
 *        nccl-bench -p    load the libraries, print "devices N" (exit 4: none)
 * Exit: 0, 2 usage, 3 a CUDA/NCCL call failed, 4 no library or no device.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "peer_common.h"

#define EXIT_USAGE 2
#define EXIT_CALL 3
#define EXIT_UNAVAILABLE 4

/* ---- our own declarations of the CUDA runtime and NCCL --------------------------- */
typedef struct nccl_comm *ncclComm_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
enum { ncclSuccess = 0, ncclInProgress = 7 };
enum { ncclFloat32 = 7, ncclFloat64 = 8 };
enum { ncclSum = 0, ncclMax = 2 };
#define CUDA_MEMCPY_DEFAULT 4

/* The leading fields of ncclConfig_t (NCCL 2.17): NCCL reads `size` bytes
 * and takes its defaults for the rest. */
typedef struct {
    size_t size;
    unsigned int magic, version;
    int blocking, cgaClusterSize, minCTAs, maxCTAs;
    const char *netName;
} ncclConfig_t;
#define NCCL_CONFIG_UNDEF_INT (-2147483647 - 1)

/* X(symbol, return, parameters) */
#define CUDART_SYMBOLS(X)                                                                 \
    X(cudaGetErrorString, const char *, (int err))                                        \
    X(cudaRuntimeGetVersion, int, (int *version))                                         \
    X(cudaGetDeviceCount, int, (int *count))                                              \
    X(cudaSetDevice, int, (int device))                                                   \
    X(cudaMalloc, int, (void **ptr, size_t bytes))                                        \
    X(cudaFree, int, (void *ptr))                                                         \
    X(cudaMemcpyAsync, int, (void *dst, const void *src, size_t bytes, int kind, void *stream)) \
    X(cudaStreamCreateWithFlags, int, (void **stream, unsigned flags))                    \
    X(cudaStreamDestroy, int, (void *stream))                                             \
    X(cudaStreamSynchronize, int, (void *stream))

#define NCCL_SYMBOLS(X)                                                                   \
    X(ncclGetVersion, int, (int *version))                                                \
    X(ncclGetErrorString, const char *, (int result))                                     \
    X(ncclGetUniqueId, int, (ncclUniqueId * id))                                          \
    X(ncclCommInitRankConfig, int, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)) \
    X(ncclCommGetAsyncError, int, (ncclComm_t comm, int *err))                            \
    X(ncclCommDestroy, int, (ncclComm_t comm))                                            \
    X(ncclCommAbort, int, (ncclComm_t comm))                                              \
    X(ncclAllReduce, int, (const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st)) \
    X(ncclAllGather, int, (const void *s, void *r, size_t n, int dt, ncclComm_t c, void *st)) \
    X(ncclReduceScatter, int, (const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st)) \
    X(ncclBroadcast, int, (const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, void *st)) \
    X(ncclSend, int, (const void *s, size_t n, int dt, int peer, ncclComm_t c, void *st)) \
    X(ncclRecv, int, (void *r, size_t n, int dt, int peer, ncclComm_t c, void *st))       \
    X(ncclGroupStart, int, (void))                                                        \
    X(ncclGroupEnd, int, (void))

static struct {
#define X_SLOT(sym, ret, params) ret(*sym) params;
    CUDART_SYMBOLS(X_SLOT)
    NCCL_SYMBOLS(X_SLOT)
#undef X_SLOT
} api;

/* ---- the job -------------------------------------------------------------------------- */

typedef struct bench {
    int rank, p, local_rank, device, ndev;
    int sync_each;
    ncclComm_t comm;
    void *stream;
    float *send, *recv;  /* device */
    float *host;         /* staging for fills */
    double *scalar;      /* device: one double for the barrier and the slowest time */
    size_t buf_elems;
    unsigned long long seed;
    char id_file[512];   /* rank 0: to remove */
} bench_t;

static bench_t *current; /* for die() */

static void remove_id_file(bench_t *b)
{
    if (b->id_file[0]) unlink(b->id_file);
    b->id_file[0] = '\0';
}

/* A failed call: say which, stop NCCL so no peer waits forever, exit. */
static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "nccl-bench: rank %d: ", current ? current->rank : -1);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    if (current) {
        remove_id_file(current);
        if (current->comm && api.ncclCommAbort) api.ncclCommAbort(current->comm);
    }
    exit(code);
}

static void cuda_check(int e, const char *call)
{
    if (e != 0) die(EXIT_CALL, "%s failed: CUDA error %d: %s", call, e, api.cudaGetErrorString(e));
}
#define CUDA(call) cuda_check(api.call, #call)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A non-blocking communicator (or a call on it) may answer ncclInProgress:
 * wait until NCCL says it is done, within the job's timeout. */
static double timeout_s(void)
{
    const char *v = getenv("NCCL_BENCH_TIMEOUT");
    double t = v && v[0] ? strtod(v, NULL) : 60.0;
    return t > 0 ? t : 60.0;
}

static void nccl_check(int r, const char *call)
{
    if (r == ncclInProgress && current && current->comm) {
        double deadline = now() + timeout_s();
        int e = ncclInProgress;
        while (e == ncclInProgress) {
            int q = api.ncclCommGetAsyncError(current->comm, &e);
            if (q != ncclSuccess) e = q;
            if (e == ncclInProgress && now() > deadline)
                die(EXIT_CALL, "%s did not complete within %.0f s (NCCL_BENCH_TIMEOUT): a rank is missing?",
                    call, timeout_s());
            if (e == ncclInProgress) usleep(100);
        }
        r = e;
    }
    if (r != ncclSuccess) die(EXIT_CALL, "%s failed: NCCL error %d: %s", call, r, api.ncclGetErrorString(r));
}
#define NCCL(call) nccl_check(api.call, #call)

/* ---- loading the libraries -------------------------------------------------------------- */

typedef struct symbol {
    const char *name;
    void **slot;
} symbol_t;

/* dlopen the first env override that is set, else the first default name that opens. */
static void *open_lib(const char *what, const char *const *envs, const char *const *names, char *path,
                      size_t path_len)
{
    for (int k = 0; envs[k]; k++) {
        const char *v = getenv(envs[k]);
        if (!v || !v[0]) continue;
        void *h = dlopen(v, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "nccl-bench: %s: %s=%s cannot be opened: %s\n", what, envs[k], v, dlerror());
            exit(EXIT_UNAVAILABLE);
        }
        snprintf(path, path_len, "%s", v);
        return h;
    }
    for (int k = 0; names[k]; k++) {
        void *h = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(path, path_len, "%s", names[k]);
            return h;
        }
    }
    fprintf(stderr, "nccl-bench: %s: none of", what);
    for (int k = 0; names[k]; k++) fprintf(stderr, " %s", names[k]);
    fprintf(stderr, " can be opened (last: %s); set %s\n", dlerror(), envs[0]);
    exit(EXIT_UNAVAILABLE);
}

static void resolve(void *h, const char *what, const char *path, const symbol_t *syms, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        *syms[k].slot = dlsym(h, syms[k].name);
        if (!*syms[k].slot) {
            fprintf(stderr, "nccl-bench: %s %s lacks %s\n", what, path, syms[k].name);
            exit(EXIT_UNAVAILABLE);
        }
    }
}

static void load_libs(char *nccl_path, char *cudart_path, size_t len)
{
    static const char *const nccl_envs[] = {"NCCL_BENCH_LIB", "MLC_NCCL_LIB", NULL};
    static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so", NULL};
    static const char *const cudart_envs[] = {"NCCL_BENCH_CUDART", "MLC_CUDART_LIB", NULL};
    static const char *const cudart_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11",
                                               "libcudart.so", NULL};
#define X_SYM(sym, ret, params) {#sym, (void **)&api.sym},
    static const symbol_t cudart_syms[] = {CUDART_SYMBOLS(X_SYM)};
    static const symbol_t nccl_syms[] = {NCCL_SYMBOLS(X_SYM)};
#undef X_SYM
    void *cudart = open_lib("CUDA runtime", cudart_envs, cudart_names, cudart_path, len);
    resolve(cudart, "CUDA runtime", cudart_path, cudart_syms, sizeof cudart_syms / sizeof cudart_syms[0]);
    void *nccl = open_lib("NCCL", nccl_envs, nccl_names, nccl_path, len);
    resolve(nccl, "NCCL", nccl_path, nccl_syms, sizeof nccl_syms / sizeof nccl_syms[0]);
}

/* ---- ranks and the unique id --------------------------------------------------------------- */

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? atoi(v) : dflt;
}

static void id_file_path(char *buf, size_t len)
{
    const char *f = getenv("NCCL_BENCH_ID_FILE");
    if (f && f[0]) {
        snprintf(buf, len, "%s", f);
        return;
    }
    const char *tmp = getenv("TMPDIR"), *job = getenv("MLC_JOB_ID");
    snprintf(buf, len, "%s/nccl-bench.%s.id", tmp && tmp[0] ? tmp : "/tmp", job && job[0] ? job : "nojob");
}

/* What the file holds: a tag, the world size, the id. */
typedef struct id_record {
    char tag[16];
    int nranks;
    ncclUniqueId id;
} id_record_t;
#define ID_TAG "nccl-bench id 1"

static void publish_id(bench_t *b, const ncclUniqueId *id)
{
    char path[512], tmp[600];
    id_file_path(path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    id_record_t rec;
    memset(&rec, 0, sizeof rec);
    memcpy(rec.tag, ID_TAG, sizeof ID_TAG);
    rec.nranks = b->p;
    rec.id = *id;
    FILE *f = fopen(tmp, "wb");
    if (!f) die(EXIT_CALL, "cannot create %s: %s", tmp, strerror(errno));
    int ok = fwrite(&rec, sizeof rec, 1, f) == 1;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        die(EXIT_CALL, "cannot write the unique id to %s: %s", path, strerror(errno));
    }
    snprintf(b->id_file, sizeof b->id_file, "%s", path);
}

static void fetch_id(bench_t *b, ncclUniqueId *id)
{
    char path[512];
    id_file_path(path, sizeof path);
    double deadline = now() + timeout_s();
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            id_record_t rec;
            int ok = fread(&rec, sizeof rec, 1, f) == 1;
            fclose(f);
            if (!ok || memcmp(rec.tag, ID_TAG, sizeof ID_TAG) != 0)
                die(EXIT_CALL, "%s is not a unique id written by nccl-bench", path);
            if (rec.nranks != b->p)
                die(EXIT_CALL, "%s is for a %d-rank job, this one has %d ranks", path, rec.nranks, b->p);
            *id = rec.id;
            return;
        }
        if (now() > deadline)
            die(EXIT_CALL, "rank 0 did not publish the unique id in %s within %.0f s (NCCL_BENCH_TIMEOUT)",
                path, timeout_s());
        usleep(1000);
    }
}

static void init_comm(bench_t *b)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (b->rank == 0) {
        char path[512];
        id_file_path(path, sizeof path);
        unlink(path); /* a leftover of a crashed run with this job id */
        NCCL(ncclGetUniqueId(&id));
        if (b->p > 1) publish_id(b, &id);
    } else {
        fetch_id(b, &id);
    }
    /* Blocking, as an application that calls NCCL itself uses it. */
    ncclConfig_t config = {sizeof(ncclConfig_t), 0xcafebeefu, 21700u, 1, NCCL_CONFIG_UNDEF_INT,
                           NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL};
    int r = api.ncclCommInitRankConfig(&b->comm, b->p, id, b->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) b->comm = NULL;
    nccl_check(r, "ncclCommInitRankConfig");
    remove_id_file(b); /* every rank has joined, so every rank has read it */
}

/* ---- measuring ------------------------------------------------------------------------------- */

/* Enqueue one call on b->stream. */
static void run(const bench_t *b, coll_t c, const float *send, float *recv, const geom_t *g)
{
    size_t n = g->count;
    switch (c) {
    case COLL_allreduce: NCCL(ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, b->comm, b->stream)); break;
    case COLL_allgather: NCCL(ncclAllGather(send, recv, n, ncclFloat32, b->comm, b->stream)); break;
    case COLL_reduce_scatter:
        NCCL(ncclReduceScatter(send, recv, n, ncclFloat32, ncclSum, b->comm, b->stream));
        break;
    case COLL_broadcast: NCCL(ncclBroadcast(send, recv, n, ncclFloat32, 0, b->comm, b->stream)); break;
    case COLL_alltoall:
        NCCL(ncclGroupStart());
        for (int r = 0; r < b->p; r++) {
            NCCL(ncclSend(send + (size_t)r * n, n, ncclFloat32, r, b->comm, b->stream));
            NCCL(ncclRecv(recv + (size_t)r * n, n, ncclFloat32, r, b->comm, b->stream));
        }
        NCCL(ncclGroupEnd());
        break;
    default: break;
    }
    if (b->sync_each) CUDA(cudaStreamSynchronize(b->stream));
}

/* Device buffer <- fresh data (through the host staging buffer). */
static void fill(bench_t *b, float *dev, size_t n, unsigned long long seed)
{
    peer_fill(b->host, n, seed, b->rank);
    CUDA(cudaMemcpyAsync(dev, b->host, n * sizeof(float), CUDA_MEMCPY_DEFAULT, b->stream));
    CUDA(cudaStreamSynchronize(b->stream));
}

/* Every rank has arrived: a one-element allreduce, waited for. */
static void barrier(bench_t *b)
{
    NCCL(ncclAllReduce(b->scalar, b->scalar, 1, ncclFloat64, ncclSum, b->comm, b->stream));
    CUDA(cudaStreamSynchronize(b->stream));
}

/* The slowest rank's value of t. */
static double slowest(bench_t *b, double t)
{
    CUDA(cudaMemcpyAsync(b->scalar, &t, sizeof t, CUDA_MEMCPY_DEFAULT, b->stream));
    NCCL(ncclAllReduce(b->scalar, b->scalar, 1, ncclFloat64, ncclMax, b->comm, b->stream));
    CUDA(cudaMemcpyAsync(&t, b->scalar, sizeof t, CUDA_MEMCPY_DEFAULT, b->stream));
    CUDA(cudaStreamSynchronize(b->stream));
    return t;
}

static double measure(bench_t *b, coll_t c, size_t bytes, long iters, geom_t *gout)
{
    geom_t g = geometry(c, bytes, b->p);
    /* one call on fresh data */
    fill(b, b->send, g.send_elems, b->seed ^ bytes);
    run(b, c, b->send, b->recv, &g);
    CUDA(cudaStreamSynchronize(b->stream));
    barrier(b);
    double t0 = now();
    for (long it = 0; it < iters; it++) {
        size_t shift = peer_shift(b->buf_elems, &g, it);
        run(b, c, b->send + shift, b->recv + shift, &g);
    }
    CUDA(cudaStreamSynchronize(b->stream));
    double t = (now() - t0) / (double)iters;
    *gout = g;
    return slowest(b, t);
}

static void warm_up(bench_t *b, coll_t c, const segment_t *s, long warmup, size_t last)
{
    const size_t sizes[2] = {last, s->min};
    for (int k = 0; k < 2; k++) {
        geom_t g = geometry(c, sizes[k], b->p);
        for (long it = 0; it < warmup; it++) {
            size_t shift = peer_shift(b->buf_elems, &g, it);
            run(b, c, b->send + shift, b->recv + shift, &g);
        }
    }
    CUDA(cudaStreamSynchronize(b->stream));
}

static void run_segment(bench_t *b, coll_t c, const segment_t *s, long warmup)
{
    size_t last = last_size(s);
    geom_t big = geometry(c, last, b->p);
    size_t elems = big.size_bytes / sizeof(float);
    b->buf_elems = elems > 16 ? elems : 16;
    size_t bytes_all = b->buf_elems * sizeof(float);
    CUDA(cudaMalloc((void **)&b->send, bytes_all));
    CUDA(cudaMalloc((void **)&b->recv, bytes_all));
    b->host = malloc(bytes_all);
    if (!b->host) die(EXIT_CALL, "cannot allocate %zu bytes of host memory", bytes_all);
    /* every byte written, with this run's data */
    fill(b, b->send, b->buf_elems, b->seed);
    fill(b, b->recv, b->buf_elems, b->seed + 1);
    warm_up(b, c, s, warmup, last);
    for (size_t bytes = s->min;;) {
        geom_t g;
        double t = measure(b, c, bytes, s->iters, &g);
        if (b->rank == 0) {
            double algbw = t > 0 ? (double)g.size_bytes / t / 1e9 : 0;
            printf("%s %zu %zu %ld %.3f %.4f %.4f\n", coll_names[c], g.size_bytes, g.count, s->iters, t * 1e6,
                   algbw, algbw * busbw_factor(c, b->p));
            fflush(stdout);
        }
        if (s->factor <= 1 || bytes > s->max / s->factor) break;
        bytes *= s->factor;
    }
    CUDA(cudaFree(b->send));
    CUDA(cudaFree(b->recv));
    free(b->host);
    b->send = b->recv = NULL;
    b->host = NULL;
}

/* ---- command line ------------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr, "usage: nccl-bench [-c COLL[,COLL...]] [-w WARMUP] [-S SEED] [-y] MIN:MAX:FACTOR:ITERS...\n"
                    "       nccl-bench -p   (probe: print the device count; exit 4 without one)\n"
                    "collectives: allreduce allgather reduce_scatter broadcast alltoall (default all)\n"
                    "-y: synchronize the stream after every call (default: once per batch of ITERS)\n"
                    "libraries: NCCL_BENCH_LIB (else MLC_NCCL_LIB, libnccl.so.2), NCCL_BENCH_CUDART\n"
                    "(else MLC_CUDART_LIB, libcudart.so.13/12/11); ranks: mlcomm-run -n N nccl-bench ...\n");
}

static void version_text(int code, char *buf, size_t len)
{
    if (code >= 10000) snprintf(buf, len, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
    else snprintf(buf, len, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
}

int main(int argc, char **argv)
{
    segment_t segs[MAX_SEGMENTS];
    int nsegs = 0, selected[COLL_COUNT] = {0}, any = 0;
    long warmup = 5;
    int probe = 0;
    bench_t b;
    memset(&b, 0, sizeof b);
    b.seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            if (parse_colls(argv[++i], selected, "nccl-bench") != 0) return EXIT_USAGE;
        } else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
            warmup = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-S") == 0 && i + 1 < argc) {
            b.seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-p") == 0) {
            probe = 1;
        } else if (strcmp(argv[i], "-y") == 0) {
            b.sync_each = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage();
            return 0;
        } else if (nsegs < MAX_SEGMENTS && parse_segment(argv[i], &segs[nsegs]) == 0) {
            nsegs++;
        } else {
            fprintf(stderr, "nccl-bench: bad argument '%s'\n", argv[i]);
            usage();
            return EXIT_USAGE;
        }
    }
    if (nsegs == 0 && !probe) {
        usage();
        return EXIT_USAGE;
    }
    for (int c = 0; c < COLL_COUNT; c++) any |= selected[c];
    if (!any)
        for (int c = 0; c < COLL_COUNT; c++) selected[c] = 1;

    b.p = env_int("MLC_WORLD_SIZE", 1);
    b.rank = env_int("MLC_RANK", 0);
    b.local_rank = env_int("MLC_LOCAL_RANK", b.rank);
    if (b.p < 1 || b.rank < 0 || b.rank >= b.p || b.local_rank < 0) {
        fprintf(stderr, "nccl-bench: MLC_RANK=%d / MLC_WORLD_SIZE=%d / MLC_LOCAL_RANK=%d are not a rank of a job\n",
                b.rank, b.p, b.local_rank);
        return EXIT_USAGE;
    }
    current = &b;

    char nccl_path[512], cudart_path[512];
    load_libs(nccl_path, cudart_path, sizeof nccl_path);
    int e = api.cudaGetDeviceCount(&b.ndev);
    if (e != 0 || b.ndev < 1) {
        fprintf(stderr, "nccl-bench: rank %d: no CUDA device: cudaGetDeviceCount: %s\n", b.rank,
                e ? api.cudaGetErrorString(e) : "0 devices");
        return EXIT_UNAVAILABLE;
    }
    if (probe) {
        printf("devices %d\n", b.ndev);
        return 0;
    }
    b.device = b.local_rank % b.ndev;
    CUDA(cudaSetDevice(b.device));
    CUDA(cudaStreamCreateWithFlags(&b.stream, 0)); /* ordered with the legacy stream, as mlcomm's */
    CUDA(cudaMalloc((void **)&b.scalar, sizeof(double)));
    init_comm(&b);

    if (b.rank == 0) {
        int nv = 0, rv = 0;
        char nccl_version[32];
        NCCL(ncclGetVersion(&nv));
        CUDA(cudaRuntimeGetVersion(&rv));
        version_text(nv, nccl_version, sizeof nccl_version);
        printf("# nccl-bench: NCCL %s; %d ranks; seed %llu; CUDA runtime %d.%d; rank 0 on device %d of %d; "
               "sync %s; %s, %s\n",
               nccl_version, b.p, b.seed, rv / 1000, rv % 1000 / 10, b.device, b.ndev,
               b.sync_each ? "after every call" : "once per batch", nccl_path, cudart_path);
        fflush(stdout);
    }
    for (int c = 0; c < COLL_COUNT; c++)
        for (int k = 0; k < nsegs && selected[c]; k++) run_segment(&b, (coll_t)c, &segs[k], warmup);

    CUDA(cudaFree(b.scalar));
    NCCL(ncclCommDestroy(b.comm));
    b.comm = NULL;
    CUDA(cudaStreamDestroy(b.stream));
    return 0;
}
