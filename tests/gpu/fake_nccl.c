/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test double of NCCL for machines without a GPU, on the fake CUDA runtime
 * (fake_cudart.c, linked in, so "device" buffers are checked). Loaded
 * through MLC_NCCL_LIB exactly like libnccl.so.2.
 *
 * Ranks are threads of one process: the ranks of a communicator meet in a
 * "world" named by the unique id; a communicator finishes initializing
 * (ncclCommGetAsyncError stops saying ncclInProgress) once every rank has
 * joined, so ranks in other processes never do (a timeout path). An
 * operation is posted to the world: a send is matched with the peer's
 * receive in call order, a collective waits for every rank's call; the last
 * to arrive moves the data (reductions for every type and op). Until then
 * the call answers ncclInProgress and the communicator reports "in
 * progress", as a non-blocking communicator does while it cannot enqueue,
 * so the backend waits with its timeout. Outside a group each call is
 * posted alone, in order: a blocking send and receive pair between two
 * ranks (both send first) never completes, as with NCCL. Inside
 * ncclGroupStart/End every call is posted at the outermost ncclGroupEnd,
 * together, so such pairs complete. A send to self outside a group is
 * refused (it could never complete).
 *
 * As NCCL 2.28 (ncclGetVersion >= 2.28), an argument error (ncclInvalidArgument,
 * ncclInvalidUsage) of a call on a communicator is sticky: it becomes the
 * communicator's asynchronous error. NCCL_COMM_BLOCKING=1 in the environment
 * overrides the config's blocking field, as NCCL does (fake_nccl_last_blocking
 * then says 1). Environment:
 *   FAKE_NCCL_VERSION=code     ncclGetVersion (default 22809 = 2.28.9)
 *   FAKE_NCCL_INPROGRESS=k     calls answer ncclInProgress; ncclCommGetAsyncError
 *                              says "in progress" k times before success
 *   FAKE_NCCL_ASYNC_ERROR=code after the first collective, ncclCommGetAsyncError
 *                              reports this ncclResult_t
 *   FAKE_NCCL_REFUSE=1         collectives refuse their arguments (ncclInvalidArgument),
 *                              as NCCL would one that mlcomm did not check
 * Built with -DFAKE_NO_SPLIT it does not export ncclCommSplit; with -DFAKE_HIP
 * it runs on the fake HIP runtime (an RCCL).
 *
 * Counters for tests (read with dlsym): fake_nccl_aborts, fake_nccl_destroys,
 * fake_nccl_finalizes, fake_nccl_live_comms, fake_nccl_last_dtype,
 * fake_nccl_last_op, fake_nccl_last_stream, fake_nccl_last_blocking, fake_nccl_collectives,
 * fake_nccl_last_id.
 */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_names.h"

#define API __attribute__((visibility("default")))

enum { ncclSuccess = 0, ncclSystemError = 2, ncclInvalidArgument = 4, ncclInvalidUsage = 5,
       ncclRemoteError = 6, ncclInProgress = 7 };

int fake_cuda_is_device(const void *p); /* from fake_cudart */
void fake_cuda_release_events(void);
int cudaGetDevice(int *device);

typedef struct { char internal[128]; } uid_t128;
typedef struct {
    size_t size;
    unsigned magic, version;
    int blocking;
    int cgaClusterSize, minCTAs, maxCTAs; /* NCCL 2.17 */
} config_prefix_t;


enum { OP_SEND, OP_RECV, OP_BCAST, OP_REDUCE, OP_ALLREDUCE, OP_ALLGATHER, OP_REDSCAT };
enum { MAX_RANKS = 64 };

struct fake_comm;

/* One posted operation (this rank's part of it). */
typedef struct fop {
    int kind;
    struct fake_comm *c;
    int peer;          /* p2p: the other rank */
    const void *send;
    void *recv;
    size_t count;      /* elements (p2p: bytes, dt = uint8) */
    int dt, op, root;
    struct fop *next;
} fop_t;

/* A collective some ranks have posted. */
typedef struct coll {
    unsigned long long seq;
    int posted;
    fop_t *parts[MAX_RANKS];
    struct coll *next;
} coll_t;

/* The ranks of one unique id. */
typedef struct world {
    char id[128];      /* "" for split children (one rank, private) */
    int nranks, joined, refs;
    fop_t *p2p;        /* unmatched sends and receives, in posting order */
    coll_t *colls;
    struct world *next;
} world_t;

typedef struct fake_comm {
    int nranks, rank, device;
    world_t *w;
    int inprog;        /* FAKE_NCCL_INPROGRESS countdown */
    int async_err;     /* sticky */
    int ncoll;
    int inflight;      /* posted operations not complete */
    unsigned long long coll_seq;
} fake_comm_t;

API int fake_nccl_aborts, fake_nccl_destroys, fake_nccl_finalizes, fake_nccl_live_comms;
API int fake_nccl_last_dtype = -1, fake_nccl_last_op = -1, fake_nccl_last_blocking = -1;
API int fake_nccl_collectives;
API int fake_nccl_last_min_ctas, fake_nccl_last_max_ctas; /* of the last init or split config */
API void *fake_nccl_last_stream;
API char fake_nccl_last_id[128]; /* the unique id of the last ncclCommInitRankConfig */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* worlds and everything posted */
static world_t *worlds;

static __thread char last_error[256];
static __thread int group_depth;
static __thread fop_t *group_head, *group_tail;
static __thread int group_err;

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? atoi(v) : dflt;
}

static int err(int code, const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s", msg);
    return code;
}

/* An argument error of a call on c: sticky from NCCL 2.28 on. */
static int arg_err(fake_comm_t *c, int code, const char *msg)
{
    if (c && env_int("FAKE_NCCL_VERSION", 22809) >= 22800 && !c->async_err) c->async_err = code;
    if (group_depth > 0 && !group_err) group_err = code;
    return err(code, msg);
}

static size_t type_size(int dt)
{
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return dt >= 0 && dt < 10 ? sizes[dt] : 0;
}

API const char *ncclGetErrorString(int r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (fake)";
    case ncclInvalidArgument: return "invalid argument (fake)";
    case ncclInvalidUsage: return "invalid usage (fake)";
    case ncclRemoteError: return "remote process exited or there was a network error (fake)";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result (fake)";
    }
}
API const char *ncclGetLastError(void *comm) { return last_error; }

API int ncclGetVersion(int *v)
{
    *v = env_int("FAKE_NCCL_VERSION", 22809);
    return ncclSuccess;
}

API int ncclGetUniqueId(uid_t128 *id)
{
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "fake-nccl-id-%d-%ld", (int)getpid(), random());
    return ncclSuccess;
}

static int started(fake_comm_t *c)
{
    int k = env_int("FAKE_NCCL_INPROGRESS", 0);
    if (k > 0) {
        c->inprog = k;
        return ncclInProgress;
    }
    return ncclSuccess;
}

/* Lock held: the world of id (created for the first rank); "" = a private one. */
static world_t *world_join(const char *id, int nranks)
{
    world_t *w = NULL;
    if (id[0])
        for (w = worlds; w && strncmp(w->id, id, sizeof w->id) != 0; w = w->next) {
        }
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w) return NULL;
        snprintf(w->id, sizeof w->id, "%s", id);
        w->nranks = nranks;
        w->next = worlds;
        worlds = w;
    }
    w->joined++;
    w->refs++;
    return w;
}

/* Lock held. */
static void world_leave(world_t *w)
{
    if (--w->refs > 0) return;
    for (world_t **p = &worlds; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    free(w);
}

static fake_comm_t *comm_new(int nranks, int rank, const char *id)
{
    fake_comm_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->nranks = nranks;
    c->rank = rank;
    cudaGetDevice(&c->device);
    pthread_mutex_lock(&lock);
    c->w = world_join(id, nranks);
    pthread_mutex_unlock(&lock);
    if (!c->w) {
        free(c);
        return NULL;
    }
    __atomic_add_fetch(&fake_nccl_live_comms, 1, __ATOMIC_RELAXED);
    return c;
}

API int ncclCommInitRankConfig(fake_comm_t **out, int nranks, uid_t128 id, int rank, config_prefix_t *cfg)
{
    if (!cfg || cfg->magic != 0xcafebeefu || cfg->size < sizeof *cfg)
        return err(ncclInvalidArgument, "config not initialized");
    /* As NCCL: the environment's NCCL_COMM_BLOCKING beats the config. */
    fake_nccl_last_blocking = env_int("NCCL_COMM_BLOCKING", -1) >= 0 ? env_int("NCCL_COMM_BLOCKING", 0) : cfg->blocking;
    fake_nccl_last_min_ctas = cfg->minCTAs;
    fake_nccl_last_max_ctas = cfg->maxCTAs;
    memcpy(fake_nccl_last_id, id.internal, sizeof fake_nccl_last_id);
    if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) return err(ncclInvalidArgument, "bad rank");
    if (strncmp(id.internal, "fake-nccl-id-", 13) != 0) return err(ncclInvalidArgument, "bad unique id");
    id.internal[sizeof id.internal - 1] = '\0';
    fake_comm_t *c = comm_new(nranks, rank, id.internal);
    if (!c) return err(ncclSystemError, "out of memory");
    *out = c;
    return nranks > 1 ? ncclInProgress : started(c);
}

API int ncclCommGetAsyncError(fake_comm_t *c, int *e)
{
    if (!c) return ncclInvalidArgument;
    pthread_mutex_lock(&lock);
    if (c->w->joined < c->nranks) *e = ncclInProgress;
    else if (c->async_err) *e = c->async_err;
    else if (c->inprog > 0) {
        c->inprog--;
        *e = ncclInProgress;
    } else if (c->inflight > 0) *e = ncclInProgress;
    else *e = ncclSuccess;
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

API int ncclCommFinalize(fake_comm_t *c)
{
    fake_nccl_finalizes++;
    return started(c);
}

/* Lock held: take c's operations out of the world (its kernels are gone). */
static void withdraw(fake_comm_t *c)
{
    world_t *w = c->w;
    for (fop_t **p = &w->p2p; *p;) {
        if ((*p)->c == c) {
            fop_t *f = *p;
            *p = f->next;
            free(f);
        } else {
            p = &(*p)->next;
        }
    }
    for (coll_t *k = w->colls; k; k = k->next)
        if (k->parts[c->rank] && k->parts[c->rank]->c == c) {
            free(k->parts[c->rank]);
            k->parts[c->rank] = NULL;
            k->posted--;
        }
}

static void release(fake_comm_t *c)
{
    pthread_mutex_lock(&lock);
    withdraw(c);
    world_t *w = c->w;
    /* Collectives nobody can finish any more go with the last rank. */
    if (w->refs == 1)
        while (w->colls) {
            coll_t *k = w->colls;
            w->colls = k->next;
            for (int i = 0; i < MAX_RANKS; i++) free(k->parts[i]);
            free(k);
        }
    world_leave(w);
    pthread_mutex_unlock(&lock);
    free(c);
    __atomic_sub_fetch(&fake_nccl_live_comms, 1, __ATOMIC_RELAXED);
}
API int ncclCommDestroy(fake_comm_t *c)
{
    fake_nccl_destroys++;
    release(c);
    return ncclSuccess;
}
API int ncclCommAbort(fake_comm_t *c)
{
    fake_nccl_aborts++;
    fake_cuda_release_events(); /* aborted kernels end */
    release(c);
    return ncclSuccess;
}
API int ncclCommCount(fake_comm_t *c, int *n)
{
    *n = c->nranks;
    return ncclSuccess;
}
API int ncclCommUserRank(fake_comm_t *c, int *r)
{
    *r = c->rank;
    return ncclSuccess;
}
API int ncclCommCuDevice(fake_comm_t *c, int *d)
{
    *d = c->device;
    return ncclSuccess;
}

#ifndef FAKE_NO_SPLIT
/* Children are one-rank communicators of their own (a split of several ranks is not modelled). */
API int ncclCommSplit(fake_comm_t *c, int color, int key, fake_comm_t **out, config_prefix_t *cfg)
{
    if (!cfg || cfg->magic != 0xcafebeefu) return arg_err(c, ncclInvalidArgument, "config not initialized");
    fake_nccl_last_min_ctas = cfg->minCTAs;
    fake_nccl_last_max_ctas = cfg->maxCTAs;
    if (color == -1) {
        *out = NULL;
        return started(c);
    }
    if (color < 0) return arg_err(c, ncclInvalidArgument, "bad colour");
    if (c->nranks > 1) return arg_err(c, ncclInvalidUsage, "fake NCCL: splitting a communicator of several ranks is not modelled");
    fake_comm_t *n = comm_new(1, 0, "");
    if (!n) return err(ncclSystemError, "out of memory");
    n->device = c->device;
    *out = n;
    return started(n);
}
#endif

/* Buffers must be fake device memory (what real NCCL needs). */
static int check_buf(fake_comm_t *c, const void *p, size_t bytes, const char *what)
{
    if (bytes == 0) return ncclSuccess;
    if (!p || !fake_cuda_is_device(p)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s %p is not device memory", what, p);
        return arg_err(c, ncclInvalidArgument, msg);
    }
    return ncclSuccess;
}

/* ---- the data movement ----------------------------------------------------------- */
static int is_float(int dt) { return dt >= 6; }
static int is_signed(int dt) { return dt == 0 || dt == 2 || dt == 4; }

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        float f = (float)man / 1024.0f / 16384.0f; /* subnormal: man * 2^-24 */
        return sign ? -f : f;
    }
    if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) return (uint16_t)sign;
    return (uint16_t)(sign | (uint32_t)exp << 10 | (man + 0x1000) >> 13);
}

static double load_f(int dt, const void *p, size_t i)
{
    const char *b = (const char *)p + i * type_size(dt);
    if (dt == 7) { float v; memcpy(&v, b, 4); return v; }
    if (dt == 8) { double v; memcpy(&v, b, 8); return v; }
    uint16_t h;
    memcpy(&h, b, 2);
    if (dt == 6) return half_to_float(h);
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, 4);
    return v;
}
static void store_f(int dt, void *p, size_t i, double v)
{
    char *b = (char *)p + i * type_size(dt);
    if (dt == 7) { float f = (float)v; memcpy(b, &f, 4); return; }
    if (dt == 8) { memcpy(b, &v, 8); return; }
    float f = (float)v;
    uint16_t h;
    if (dt == 6) h = float_to_half(f);
    else { uint32_t bits; memcpy(&bits, &f, 4); h = (uint16_t)(bits >> 16); }
    memcpy(b, &h, 2);
}
static int64_t load_i(int dt, const void *p, size_t i)
{
    const char *b = (const char *)p + i * type_size(dt);
    switch (dt) {
    case 0: return *(const int8_t *)b;
    case 1: return *(const uint8_t *)b;
    case 2: { int32_t v; memcpy(&v, b, 4); return v; }
    case 3: { uint32_t v; memcpy(&v, b, 4); return v; }
    default: { int64_t v; memcpy(&v, b, 8); return v; }
    }
}
static void store_i(int dt, void *p, size_t i, int64_t v)
{
    char *b = (char *)p + i * type_size(dt);
    size_t n = type_size(dt);
    uint64_t u = (uint64_t)v;
    for (size_t k = 0; k < n; k++) b[k] = (char)(u >> (8 * k)); /* little endian */
}

/* dst[i] = reduction over parts' send buffers, elements [off, off + n). */
static void reduce_into(fop_t **parts, int nranks, size_t off, size_t n, void *dst)
{
    int dt = parts[0]->dt, op = parts[0]->op;
    for (size_t i = 0; i < n; i++) {
        if (is_float(dt)) {
            double acc = load_f(dt, parts[0]->send, off + i);
            for (int r = 1; r < nranks; r++) {
                double v = load_f(dt, parts[r]->send, off + i);
                acc = op == 1 ? acc * v : op == 2 ? (v > acc ? v : acc) : op == 3 ? (v < acc ? v : acc) : acc + v;
            }
            if (op == 4) acc /= nranks;
            store_f(dt, dst, i, acc);
        } else {
            int64_t acc = load_i(dt, parts[0]->send, off + i);
            for (int r = 1; r < nranks; r++) {
                int64_t v = load_i(dt, parts[r]->send, off + i);
                int gt = is_signed(dt) ? v > acc : (uint64_t)v > (uint64_t)acc;
                acc = op == 1 ? (int64_t)((uint64_t)acc * (uint64_t)v) : op == 2 ? (gt ? v : acc)
                    : op == 3 ? (gt ? acc : v) : (int64_t)((uint64_t)acc + (uint64_t)v);
            }
            if (op == 4) acc = is_signed(dt) ? acc / nranks : (int64_t)((uint64_t)acc / (uint64_t)nranks);
            store_i(dt, dst, i, acc);
        }
    }
}

/* Lock held: every rank has posted collective k; move its data. */
static void run_coll(world_t *w, coll_t *k)
{
    int p = w->nranks;
    fop_t *f0 = k->parts[0];
    size_t es = type_size(f0->dt), n = f0->count, bytes = n * es;
    void *tmp = NULL;
    switch (f0->kind) {
    case OP_BCAST: {
        const void *src = k->parts[f0->root]->send;
        for (int r = 0; r < p; r++)
            if (k->parts[r]->recv != src) memmove(k->parts[r]->recv, src, bytes);
        break;
    }
    case OP_ALLGATHER:
        tmp = malloc(bytes * (size_t)p + 1);
        for (int r = 0; r < p; r++) memcpy((char *)tmp + (size_t)r * bytes, k->parts[r]->send, bytes);
        for (int r = 0; r < p; r++) memcpy(k->parts[r]->recv, tmp, bytes * (size_t)p);
        break;
    case OP_ALLREDUCE:
    case OP_REDUCE:
        tmp = malloc(bytes + 1);
        reduce_into(k->parts, p, 0, n, tmp);
        for (int r = 0; r < p; r++)
            if (f0->kind == OP_ALLREDUCE || r == f0->root) memcpy(k->parts[r]->recv, tmp, bytes);
        break;
    case OP_REDSCAT:
        tmp = malloc(bytes * (size_t)p + 1);
        reduce_into(k->parts, p, 0, n * (size_t)p, tmp);
        for (int r = 0; r < p; r++) memcpy(k->parts[r]->recv, (char *)tmp + (size_t)r * bytes, bytes);
        break;
    }
    free(tmp);
    for (int r = 0; r < p; r++) {
        k->parts[r]->c->inflight--;
        free(k->parts[r]);
        k->parts[r] = NULL;
    }
}

/* Lock held: f joins the world; whatever it completes moves now. */
static void post(fop_t *f)
{
    fake_comm_t *c = f->c;
    world_t *w = c->w;
    c->inflight++;
    if (f->kind == OP_SEND || f->kind == OP_RECV) {
        /* The earliest opposite operation between the same two ranks. */
        fop_t **p = &w->p2p;
        while (*p && !((*p)->kind != f->kind && (*p)->c->rank == f->peer && (*p)->peer == c->rank)) p = &(*p)->next;
        if (!*p) {
            f->next = NULL;
            fop_t **tail = &w->p2p;
            while (*tail) tail = &(*tail)->next;
            *tail = f;
            return;
        }
        fop_t *m = *p;
        *p = m->next;
        fop_t *s = f->kind == OP_SEND ? f : m, *r = f->kind == OP_SEND ? m : f;
        if (s->count != r->count) {
            s->c->async_err = r->c->async_err = ncclInvalidUsage;
            snprintf(last_error, sizeof last_error, "send of %zu bytes matched a receive of %zu", s->count, r->count);
        } else if (s->count) {
            memmove(r->recv, s->send, s->count);
        }
        s->c->inflight--;
        r->c->inflight--;
        free(s);
        free(r);
        return;
    }
    coll_t *k = w->colls;
    while (k && k->seq != c->coll_seq) k = k->next;
    if (!k) {
        k = calloc(1, sizeof *k);
        k->seq = c->coll_seq;
        k->next = w->colls;
        w->colls = k;
    }
    c->coll_seq++;
    k->parts[c->rank] = f;
    if (++k->posted < w->nranks) return;
    run_coll(w, k);
    for (coll_t **q = &w->colls; *q; q = &(*q)->next)
        if (*q == k) {
            *q = k->next;
            break;
        }
    free(k);
}

/* Post f now, or at the outermost ncclGroupEnd. The answer of the call. */
static int submit(fop_t *f)
{
    if (group_depth > 0) {
        f->next = NULL;
        if (group_tail) group_tail->next = f;
        else group_head = f;
        group_tail = f;
        return ncclSuccess;
    }
    fake_comm_t *c = f->c;
    pthread_mutex_lock(&lock);
    post(f);
    int busy = c->inflight > 0;
    pthread_mutex_unlock(&lock);
    return busy ? ncclInProgress : started(c);
}

static int collective(int kind, fake_comm_t *c, const void *send, void *recv, size_t n, int dt, int op,
                      int root, void *stream, size_t send_elems, size_t recv_elems)
{
    if (!c) return err(ncclInvalidArgument, "NULL communicator");
    if (c->w->joined < c->nranks) return arg_err(c, ncclInvalidUsage, "communicator not initialized");
    if (type_size(dt) == 0) return arg_err(c, ncclInvalidArgument, "bad datatype");
    if (op < -1 || op > 4) return arg_err(c, ncclInvalidArgument, "bad op");
    if (root < 0 || root >= c->nranks) return arg_err(c, ncclInvalidArgument, "bad root");
    if (env_int("FAKE_NCCL_REFUSE", 0)) return arg_err(c, ncclInvalidArgument, "refused (FAKE_NCCL_REFUSE)");
    int r = kind == OP_BCAST && c->rank != root ? ncclSuccess
                                                : check_buf(c, send, send_elems * type_size(dt), "sendbuff");
    if (r == ncclSuccess && (kind != OP_REDUCE || c->rank == root))
        r = check_buf(c, recv, recv_elems * type_size(dt), "recvbuff");
    if (r != ncclSuccess) return r;
    fake_nccl_last_dtype = dt;
    fake_nccl_last_op = op;
    fake_nccl_last_stream = stream;
    fake_nccl_collectives++;
    if (++c->ncoll == 1 && !c->async_err) c->async_err = env_int("FAKE_NCCL_ASYNC_ERROR", 0);
    fop_t *f = calloc(1, sizeof *f);
    if (!f) return err(ncclSystemError, "out of memory");
    *f = (fop_t){kind, c, -1, send, recv, n, dt, op, root, NULL};
    return submit(f);
}

API int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, fake_comm_t *c, void *st)
{
    return collective(OP_BCAST, c, s, r, n, dt, -1, root, st, n, n);
}
API int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, fake_comm_t *c, void *st)
{
    return collective(OP_REDUCE, c, s, r, n, dt, op, root, st, n, n);
}
API int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, fake_comm_t *c, void *st)
{
    return collective(OP_ALLREDUCE, c, s, r, n, dt, op, 0, st, n, n);
}
API int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, fake_comm_t *c, void *st)
{
    return collective(OP_REDSCAT, c, s, r, n, dt, op, 0, st, n * (size_t)(c ? c->nranks : 1), n);
}
API int ncclAllGather(const void *s, void *r, size_t n, int dt, fake_comm_t *c, void *st)
{
    return collective(OP_ALLGATHER, c, s, r, n, dt, -1, 0, st, n, n * (size_t)(c ? c->nranks : 1));
}

API int ncclGroupStart(void)
{
    if (group_depth++ == 0) {
        group_head = group_tail = NULL;
        group_err = ncclSuccess;
    }
    return ncclSuccess;
}

static int p2p(int kind, void *buf, size_t n, int dt, int peer, fake_comm_t *c, void *st)
{
    if (!c) return err(ncclInvalidArgument, "NULL communicator");
    if (c->w->joined < c->nranks) return arg_err(c, ncclInvalidUsage, "communicator not ready");
    if (type_size(dt) == 0) return arg_err(c, ncclInvalidArgument, "bad datatype");
    if (peer < 0 || peer >= c->nranks) return arg_err(c, ncclInvalidArgument, "peer out of range");
    size_t bytes = n * type_size(dt);
    int r = check_buf(c, buf, bytes, kind == OP_SEND ? "sendbuff" : "recvbuff");
    if (r != ncclSuccess) return r;
    if (group_depth == 0 && peer == c->rank) return arg_err(c, ncclInvalidUsage, "p2p to self outside a group would hang");
    fake_nccl_last_dtype = dt;
    fake_nccl_last_stream = st;
    fop_t *f = calloc(1, sizeof *f);
    if (!f) return err(ncclSystemError, "out of memory");
    *f = (fop_t){kind, c, peer, buf, buf, bytes, 1, -1, 0, NULL};
    return submit(f);
}
API int ncclSend(const void *b, size_t n, int dt, int peer, fake_comm_t *c, void *st)
{
    return p2p(OP_SEND, (void *)b, n, dt, peer, c, st);
}
API int ncclRecv(void *b, size_t n, int dt, int peer, fake_comm_t *c, void *st)
{
    return p2p(OP_RECV, b, n, dt, peer, c, st);
}

API int ncclGroupEnd(void)
{
    if (group_depth == 0) return err(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0) return ncclSuccess;
    fop_t *list = group_head;
    group_head = group_tail = NULL;
    if (group_err != ncclSuccess) {
        /* A member failed: NCCL issues none of them. */
        while (list) {
            fop_t *next = list->next;
            free(list);
            list = next;
        }
        return group_err;
    }
    if (!list) return ncclSuccess;
    int busy = 0, any_p2p = 0, ncomms = 0;
    fake_comm_t *comms[16];
    pthread_mutex_lock(&lock);
    for (fop_t *f = list; f;) {
        fop_t *next = f->next;
        any_p2p |= f->kind == OP_SEND || f->kind == OP_RECV;
        int j = 0;
        while (j < ncomms && comms[j] != f->c) j++;
        if (j == ncomms && ncomms < 16) comms[ncomms++] = f->c;
        post(f);
        f = next;
    }
    for (int j = 0; j < ncomms; j++) busy |= comms[j]->inflight > 0;
    pthread_mutex_unlock(&lock);
    if (any_p2p) fake_nccl_collectives++;
    return busy ? ncclInProgress : started(comms[0]);
}
