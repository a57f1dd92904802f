/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test double of NCCL for machines without a GPU: one-rank communicators on
 * the fake CUDA runtime (fake_cudart.c, linked in, so "device" buffers are
 * checked). Data moves at call time; completion is the fake runtime's
 * event. Loaded through MLC_NCCL_LIB exactly like libnccl.so.2.
 *
 * Communicators of more than one rank never finish initializing (so a
 * timeout path can be tested). Environment:
 *   FAKE_NCCL_VERSION=code     ncclGetVersion (default 22809 = 2.28.9)
 *   FAKE_NCCL_INPROGRESS=k     calls answer ncclInProgress; ncclCommGetAsyncError
 *                              says "in progress" k times before success
 *   FAKE_NCCL_ASYNC_ERROR=code after the first collective, ncclCommGetAsyncError
 *                              reports this ncclResult_t
 * Built with -DFAKE_NO_SPLIT it does not export ncclCommSplit; with -DFAKE_HIP
 * it runs on the fake HIP runtime (an RCCL).
 *
 * Counters for tests (read with dlsym): fake_nccl_aborts, fake_nccl_destroys,
 * fake_nccl_finalizes, fake_nccl_live_comms, fake_nccl_last_dtype,
 * fake_nccl_last_op, fake_nccl_last_stream, fake_nccl_last_blocking, fake_nccl_collectives,
 * fake_nccl_last_id.
 */
#include <stdint.h>
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

typedef struct pending_p2p {
    int is_send;
    void *buf;
    size_t bytes;
} pending_p2p_t;

typedef struct fake_comm {
    int nranks, rank, device;
    int never_ready;
    int inprog;
    int async_err;
    int ncoll;
} fake_comm_t;

API int fake_nccl_aborts, fake_nccl_destroys, fake_nccl_finalizes, fake_nccl_live_comms;
API int fake_nccl_last_dtype = -1, fake_nccl_last_op = -1, fake_nccl_last_blocking = -1;
API int fake_nccl_collectives;
API int fake_nccl_last_min_ctas, fake_nccl_last_max_ctas; /* of the last init or split config */
API void *fake_nccl_last_stream;
API char fake_nccl_last_id[128]; /* the unique id of the last ncclCommInitRankConfig */

static __thread char last_error[256];
static __thread int group_depth;
static __thread pending_p2p_t group_ops[256];
static __thread int group_n;
static __thread fake_comm_t *group_comm;
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
    snprintf(id->internal, sizeof id->internal, "fake-nccl-id-%ld", random());
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

API int ncclCommInitRankConfig(fake_comm_t **out, int nranks, uid_t128 id, int rank, config_prefix_t *cfg)
{
    if (!cfg || cfg->magic != 0xcafebeefu || cfg->size < sizeof *cfg)
        return err(ncclInvalidArgument, "config not initialized");
    fake_nccl_last_blocking = cfg->blocking;
    fake_nccl_last_min_ctas = cfg->minCTAs;
    fake_nccl_last_max_ctas = cfg->maxCTAs;
    memcpy(fake_nccl_last_id, id.internal, sizeof fake_nccl_last_id);
    if (nranks < 1 || rank < 0 || rank >= nranks) return err(ncclInvalidArgument, "bad rank");
    if (strncmp(id.internal, "fake-nccl-id-", 13) != 0) return err(ncclInvalidArgument, "bad unique id");
    fake_comm_t *c = calloc(1, sizeof *c);
    if (!c) return err(ncclSystemError, "out of memory");
    c->nranks = nranks;
    c->rank = rank;
    c->never_ready = nranks > 1;
    cudaGetDevice(&c->device);
    __atomic_add_fetch(&fake_nccl_live_comms, 1, __ATOMIC_RELAXED);
    *out = c;
    return c->never_ready ? ncclInProgress : started(c);
}

API int ncclCommGetAsyncError(fake_comm_t *c, int *e)
{
    if (!c) return ncclInvalidArgument;
    if (c->never_ready) *e = ncclInProgress;
    else if (c->inprog > 0) {
        c->inprog--;
        *e = ncclInProgress;
    } else {
        *e = c->async_err;
    }
    return ncclSuccess;
}

API int ncclCommFinalize(fake_comm_t *c)
{
    fake_nccl_finalizes++;
    return started(c);
}
static void release(fake_comm_t *c)
{
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
API int ncclCommSplit(fake_comm_t *c, int color, int key, fake_comm_t **out, config_prefix_t *cfg)
{
    if (!cfg || cfg->magic != 0xcafebeefu) return err(ncclInvalidArgument, "config not initialized");
    fake_nccl_last_min_ctas = cfg->minCTAs;
    fake_nccl_last_max_ctas = cfg->maxCTAs;
    if (color == -1) {
        *out = NULL;
        return started(c);
    }
    if (color < 0) return err(ncclInvalidArgument, "bad colour");
    fake_comm_t *n = calloc(1, sizeof *n);
    if (!n) return err(ncclSystemError, "out of memory");
    n->nranks = 1;
    n->device = c->device;
    __atomic_add_fetch(&fake_nccl_live_comms, 1, __ATOMIC_RELAXED);
    *out = n;
    return started(n);
}
#endif

/* Buffers must be fake device memory (what real NCCL needs). */
static int check_buf(const void *p, size_t bytes, const char *what)
{
    if (bytes == 0) return ncclSuccess;
    if (!p || !fake_cuda_is_device(p)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s %p is not device memory", what, p);
        return err(ncclInvalidArgument, msg);
    }
    return ncclSuccess;
}

static int collective(fake_comm_t *c, const void *send, void *recv, size_t bytes, int dt, int op,
                      void *stream, int check_send)
{
    if (!c) return err(ncclInvalidArgument, "NULL communicator");
    if (c->never_ready) return err(ncclInvalidUsage, "communicator not initialized");
    if (type_size(dt) == 0) return err(ncclInvalidArgument, "bad datatype");
    if (op < -1 || op > 4) return err(ncclInvalidArgument, "bad op");
    int r = check_send ? check_buf(send, bytes, "sendbuff") : ncclSuccess;
    if (r == ncclSuccess) r = check_buf(recv, bytes, "recvbuff");
    if (r != ncclSuccess) return r;
    fake_nccl_last_dtype = dt;
    fake_nccl_last_op = op;
    fake_nccl_last_stream = stream;
    fake_nccl_collectives++;
    /* One rank: every reduction (sum, prod, max, min, avg) is the identity. */
    if (recv && send && recv != send) memmove(recv, send, bytes);
    if (++c->ncoll == 1) c->async_err = env_int("FAKE_NCCL_ASYNC_ERROR", 0);
    return started(c);
}

API int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, fake_comm_t *c, void *st)
{
    if (root != 0) return err(ncclInvalidArgument, "bad root");
    return collective(c, s, r, n * type_size(dt), dt, -1, st, 1);
}
API int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, fake_comm_t *c, void *st)
{
    if (root != 0) return err(ncclInvalidArgument, "bad root");
    return collective(c, s, r, n * type_size(dt), dt, op, st, 1);
}
API int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, fake_comm_t *c, void *st)
{
    return collective(c, s, r, n * type_size(dt), dt, op, st, 1);
}
API int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, fake_comm_t *c, void *st)
{
    return collective(c, s, r, n * type_size(dt), dt, op, st, 1);
}
API int ncclAllGather(const void *s, void *r, size_t n, int dt, fake_comm_t *c, void *st)
{
    return collective(c, s, r, n * type_size(dt), dt, -1, st, 1);
}

API int ncclGroupStart(void)
{
    if (group_depth++ == 0) {
        group_n = 0;
        group_comm = NULL;
        group_err = ncclSuccess;
    }
    return ncclSuccess;
}

static int p2p(int is_send, void *buf, size_t n, int dt, int peer, fake_comm_t *c, void *st)
{
    if (!c || c->never_ready) return err(ncclInvalidUsage, "communicator not ready");
    if (peer != 0) return err(ncclInvalidArgument, "peer out of range");
    size_t bytes = n * type_size(dt);
    int r = check_buf(buf, bytes, is_send ? "sendbuff" : "recvbuff");
    if (r != ncclSuccess) return r;
    if (group_depth == 0) return err(ncclInvalidUsage, "p2p to self outside a group would hang");
    if (group_n == 256) return err(ncclInvalidUsage, "too many operations in a group");
    group_ops[group_n++] = (pending_p2p_t){is_send, buf, bytes};
    group_comm = c;
    fake_nccl_last_dtype = dt;
    fake_nccl_last_stream = st;
    return ncclSuccess;
}
API int ncclSend(const void *b, size_t n, int dt, int peer, fake_comm_t *c, void *st)
{
    return p2p(1, (void *)b, n, dt, peer, c, st);
}
API int ncclRecv(void *b, size_t n, int dt, int peer, fake_comm_t *c, void *st)
{
    return p2p(0, b, n, dt, peer, c, st);
}

API int ncclGroupEnd(void)
{
    if (group_depth == 0) return err(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0) return ncclSuccess;
    /* Match the k-th send with the k-th receive (all to self on one rank). */
    int si = 0, ri = 0;
    for (;;) {
        while (si < group_n && !group_ops[si].is_send) si++;
        while (ri < group_n && group_ops[ri].is_send) ri++;
        if (si == group_n || ri == group_n) break;
        if (group_ops[si].bytes != group_ops[ri].bytes) return err(ncclInvalidUsage, "send/recv size mismatch");
        memmove(group_ops[ri].buf, group_ops[si].buf, group_ops[si].bytes);
        si++;
        ri++;
    }
    if (si != group_n || ri != group_n) {
        for (; si < group_n; si++) if (group_ops[si].is_send) return err(ncclInvalidUsage, "unmatched send");
        for (; ri < group_n; ri++) if (!group_ops[ri].is_send) return err(ncclInvalidUsage, "unmatched recv");
    }
    fake_comm_t *c = group_comm;
    group_n = 0;
    group_comm = NULL;
    if (!c) return ncclSuccess;
    fake_nccl_collectives++;
    return started(c);
}
