/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device buffers on the host backends (threads, shm, mpi): every operation
 * with its buffers in device memory, in host memory, mixed within a call,
 * mixed between ranks, in place, blocking and nonblocking, across many
 * staging chunks (MLC_STAGE_CHUNK small).
 *
 * The GPU runtime is the one mlcomm loads (MLC_CUDART_LIB or the system's
 * libcudart); the test opens the same library for cudaMalloc and copies.
 * Here it runs on the test double (tests/gpu/fake_cudart.c) with
 * FAKE_CUDA_GUARD=1: its device memory cannot be touched from the host, so
 * any path that reads or writes a device pointer directly crashes the test.
 * Without a usable runtime or device it prints "SKIP: <reason>" and exits 77,
 * checked before mlc_comm_init (which, asked for MLC_MEMORY=cuda with no
 * runtime, rightly fails with MLC_ERR_UNAVAILABLE).
 *
 * MLC_MEMORY=rocm: the same on the HIP runtime (MLC_HIPRT_LIB).
 *
 * DEVBUF_EXPECT_IPC=1: on shm with more than one rank, device data moved
 * through CUDA IPC (the double maps peers' memory across processes), and
 * allreduce and reduce_scatter took that path too.
 *
 * DEVBUF_EXPECT_DIRECT=1 (with MLC_MPI_CUDA_AWARE=1 on the unguarded
 * double): on the mpi backend, calls MPI can take on device memory must
 * reach it without a staging copy, the others must still be staged.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include "../ranks/harness.h"

typedef struct cuda {
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_async)(void *, const void *, size_t, int, void *);
    int (*stream_sync)(void *);
    int (*stream_create)(void **, unsigned);
    int (*stream_destroy)(void *);
    int (*device_count)(int *);
    int (*set_device)(int);
} cuda_t;
static cuda_t cu;
static int *copies;   /* the double's count of cudaMemcpyAsync calls (NULL on a real runtime) */
static int *ipc_opens; /* ... and of cudaIpcOpenMemHandle calls */
static const char *skip_why;

/* The runtime MLC_MEMORY names (rocm: HIP, else CUDA), as mlcomm loads it. */
static int load_cuda(void)
{
    const char *mem = getenv("MLC_MEMORY");
    bool hip = mem && strcmp(mem, "rocm") == 0;
    const char *env = getenv(hip ? "MLC_HIPRT_LIB" : "MLC_CUDART_LIB"), *pre = hip ? "hip" : "cuda";
    const char *cuda_names[] = {env && env[0] ? env : "libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};
    const char *hip_names[] = {env && env[0] ? env : "libamdhip64.so.6", "libamdhip64.so", NULL};
    const char **names = hip ? hip_names : cuda_names;
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        static char why[512];
        const char *err = dlerror();
        snprintf(why, sizeof why, "no %s runtime library (%s)", hip ? "HIP" : "CUDA", err ? err : names[0]);
        skip_why = why;
        return -1;
    }
    char sym[64];
#define RT_SYM(name) (snprintf(sym, sizeof sym, "%s%s", pre, name), dlsym(h, sym))
    cu.malloc_ = (int (*)(void **, size_t))RT_SYM("Malloc");
    cu.free_ = (int (*)(void *))RT_SYM("Free");
    cu.memcpy_async = (int (*)(void *, const void *, size_t, int, void *))RT_SYM("MemcpyAsync");
    cu.stream_sync = (int (*)(void *))RT_SYM("StreamSynchronize");
    cu.stream_create = (int (*)(void **, unsigned))RT_SYM("StreamCreateWithFlags");
    cu.stream_destroy = (int (*)(void *))RT_SYM("StreamDestroy");
    cu.device_count = (int (*)(int *))RT_SYM("GetDeviceCount");
    cu.set_device = (int (*)(int))RT_SYM("SetDevice");
#undef RT_SYM
    copies = (int *)dlsym(h, "fake_cuda_memcpy_calls");
    ipc_opens = (int *)dlsym(h, "fake_cuda_ipc_opens");
    int n = 0;
    if (!cu.malloc_ || !cu.memcpy_async || !cu.device_count || cu.device_count(&n) != 0 || n < 1) {
        skip_why = hip ? "no HIP device" : "no CUDA device";
        return -1;
    }
    const char *lr = getenv("MLC_LOCAL_RANK");
    if (lr && cu.set_device(atoi(lr) % n) != 0) {
        skip_why = "setting the device failed";
        return -1;
    }
    return 0;
}

/* A buffer in device or host memory, filled and read through host copies. */
typedef struct buf {
    char *p;
    bool dev;
    size_t bytes;
} buf_t;

static int buf_alloc(buf_t *b, size_t bytes, bool dev)
{
    b->dev = dev;
    b->bytes = bytes;
    if (dev) return cu.malloc_((void **)&b->p, bytes ? bytes : 1);
    b->p = malloc(bytes ? bytes : 1);
    return b->p ? 0 : -1;
}
static void buf_free(buf_t *b)
{
    if (!b->p) return;
    if (b->dev) cu.free_(b->p);
    else free(b->p);
    b->p = NULL;
}
static void put(char *dst, bool dev, const void *src, size_t n)
{
    if (dev) {
        cu.memcpy_async(dst, src, n, 4, NULL);
        cu.stream_sync(NULL);
    } else {
        memcpy(dst, src, n);
    }
}
static void get(void *dst, const char *src, bool dev, size_t n)
{
    if (dev) {
        cu.memcpy_async(dst, src, n, 4, NULL);
        cu.stream_sync(NULL);
    } else {
        memcpy(dst, src, n);
    }
}

/* Where this rank's buffers live in one case. */
typedef enum { W_DEV, W_SEND_HOST, W_RECV_HOST, W_RANK_MIXED, W_INPLACE_DEV, W_INPLACE_HOST, W_COUNT } where_t;
static const char *const where_names[] = {"device", "send host", "recv host", "ranks mixed", "in place device",
                                          "in place host"};

static bool send_dev(where_t w, int rank)
{
    return w == W_DEV || w == W_RECV_HOST || w == W_INPLACE_DEV || (w == W_RANK_MIXED && rank % 2);
}
static bool recv_dev(where_t w, int rank)
{
    return w == W_DEV || w == W_SEND_HOST || w == W_INPLACE_DEV || (w == W_RANK_MIXED && rank % 2);
}
static bool inplace(where_t w) { return w == W_INPLACE_DEV || w == W_INPLACE_HOST; }

static int32_t val(int r, size_t i) { return (int32_t)(r * 7 + (int)(i % 13) + 1); }
static int32_t val2(int r, int b, size_t i) { return (int32_t)(r * 100 + b * 10 + (int)(i % 7)); }

#define N 1000 /* elements per rank: many chunks of MLC_STAGE_CHUNK bytes */

/* One uniform-count collective in one placement; results checked on the host. */
static int run_coll(mlc_comm_t *comm, mlc_coll_t coll, where_t w, int root, bool async)
{
    int rank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    size_t c = N, es = sizeof(int32_t), P = (size_t)p;
    bool sd = send_dev(w, rank), rd = recv_dev(w, rank), ip = inplace(w);
    /* send/recv sizes in elements */
    size_t sn = c, rn = c;
    if (coll == MLC_COLL_ALLGATHER || coll == MLC_COLL_GATHER) rn = c * P;
    if (coll == MLC_COLL_REDUCE_SCATTER || coll == MLC_COLL_SCATTER) sn = c * P;
    if (coll == MLC_COLL_ALLTOALL) sn = rn = c * P;
    bool am_root = rank == root;
    bool rooted = coll == MLC_COLL_BROADCAST || coll == MLC_COLL_REDUCE || coll == MLC_COLL_GATHER ||
                  coll == MLC_COLL_SCATTER;
    if (ip && rooted && !am_root) ip = false; /* in place is the root's form */
    if (ip) sd = rd = (w == W_INPLACE_DEV);

    int32_t *hs = calloc(sn, es), *hr = calloc(rn, es), *want = calloc(rn, es);
    CHECK(hs && hr && want, "out of memory");
    /* inputs */
    for (size_t i = 0; i < sn; i++) {
        if (coll == MLC_COLL_SCATTER || coll == MLC_COLL_ALLTOALL) hs[i] = val2(rank, (int)(i / c), i % c);
        else hs[i] = val(rank, i);
    }
    buf_t S = {0}, R = {0};
    CHECK(buf_alloc(&R, rn * es, rd) == 0, "alloc recv");
    /* recv starts as a sentinel: what the call must not write stays so */
    for (size_t i = 0; i < rn; i++) hr[i] = -777;
    const void *sendp;
    void *recvp = R.p;
    if (ip) {
        /* the send data sits where the in-place form says */
        switch (coll) {
        case MLC_COLL_ALLGATHER:
            memcpy(hr + (size_t)rank * c, hs, c * es);
            put(R.p, rd, hr, rn * es);
            sendp = R.p + (size_t)rank * c * es;
            break;
        case MLC_COLL_GATHER:
            memcpy(hr + (size_t)root * c, hs, c * es);
            put(R.p, rd, hr, rn * es);
            sendp = R.p + (size_t)root * c * es;
            break;
        case MLC_COLL_REDUCE_SCATTER:
        case MLC_COLL_SCATTER:
            buf_free(&R);
            CHECK(buf_alloc(&S, sn * es, sd) == 0, "alloc send");
            put(S.p, sd, hs, sn * es);
            sendp = S.p;
            recvp = S.p + (size_t)(coll == MLC_COLL_SCATTER ? root : rank) * c * es;
            break;
        default:
            memcpy(hr, hs, sn * es); /* allreduce, reduce, broadcast, alltoall: sn == rn */
            put(R.p, rd, hr, rn * es);
            sendp = R.p;
            break;
        }
    } else {
        put(R.p, rd, hr, rn * es);
        CHECK(buf_alloc(&S, sn * es, sd) == 0, "alloc send");
        put(S.p, sd, hs, sn * es);
        sendp = S.p;
    }
    /* expected */
    bool check = true;
    for (size_t i = 0; i < rn; i++) {
        switch (coll) {
        case MLC_COLL_ALLREDUCE:
        case MLC_COLL_REDUCE:
            want[i] = 0;
            for (int r = 0; r < p; r++) want[i] += val(r, i);
            break;
        case MLC_COLL_BROADCAST: want[i] = val(root, i); break;
        case MLC_COLL_ALLGATHER:
        case MLC_COLL_GATHER: want[i] = val((int)(i / c), i % c); break;
        case MLC_COLL_REDUCE_SCATTER:
            want[i] = 0;
            for (int r = 0; r < p; r++) want[i] += val(r, (size_t)rank * c + i);
            break;
        case MLC_COLL_SCATTER: want[i] = val2(root, rank, i); break;
        case MLC_COLL_ALLTOALL: want[i] = val2((int)(i / c), rank, i % c); break;
        default: break;
        }
    }
    if ((coll == MLC_COLL_REDUCE || coll == MLC_COLL_GATHER) && !am_root) check = false;
    mlc_request_t *req = NULL, **preq = async ? &req : NULL;
    mlc_status_t st;
    switch (coll) {
    case MLC_COLL_ALLREDUCE: st = mlc_allreduce(sendp, recvp, c, MLC_INT32, MLC_SUM, comm, preq); break;
    case MLC_COLL_REDUCE:
        st = mlc_reduce(sendp, am_root ? recvp : NULL, c, MLC_INT32, MLC_SUM, root, comm, preq);
        break;
    case MLC_COLL_BROADCAST: st = mlc_broadcast(am_root ? sendp : NULL, recvp, c, MLC_INT32, root, comm, preq); break;
    case MLC_COLL_ALLGATHER: st = mlc_allgather(sendp, recvp, c, MLC_INT32, comm, preq); break;
    case MLC_COLL_GATHER: st = mlc_gather(sendp, am_root ? recvp : NULL, c, MLC_INT32, root, comm, preq); break;
    case MLC_COLL_REDUCE_SCATTER: st = mlc_reduce_scatter(sendp, recvp, c, MLC_INT32, MLC_SUM, comm, preq); break;
    case MLC_COLL_SCATTER: st = mlc_scatter(am_root ? sendp : NULL, recvp, c, MLC_INT32, root, comm, preq); break;
    case MLC_COLL_ALLTOALL: st = mlc_alltoall(sendp, recvp, c, MLC_INT32, comm, preq); break;
    default: st = MLC_ERR_INTERNAL; break;
    }
    CHECK(st == MLC_SUCCESS, "%s (%s): %s", mlc_coll_name(coll), where_names[w], mlc_last_error());
    if (async) CHECK_OK(mlc_request_wait(&req));
    size_t outn = (coll == MLC_COLL_REDUCE_SCATTER || coll == MLC_COLL_SCATTER) ? c : rn;
    if (check) {
        get(hr, recvp, rd, outn * es);
        CHECK_MEM(hr, want, outn * es, es, "%s (%s, root %d%s)", mlc_coll_name(coll), where_names[w], root,
                  async ? ", nonblocking" : "");
    }
    buf_free(&S);
    buf_free(&R);
    free(hs);
    free(hr);
    free(want);
    return 0;
}

/* Point-to-point around a ring; the receive buffer is larger than the message. */
static int run_p2p(mlc_comm_t *comm, where_t w)
{
    int rank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    if (p < 2 || inplace(w)) return 0;
    size_t n = N, es = 4;
    bool sd = send_dev(w, rank), rd = recv_dev(w, rank);
    int32_t hs[N], hr[N + 16], want[N + 16];
    for (size_t i = 0; i < n; i++) hs[i] = val(rank, i);
    for (size_t i = 0; i < n + 16; i++) hr[i] = -5;
    buf_t S, R;
    CHECK(buf_alloc(&S, n * es, sd) == 0 && buf_alloc(&R, (n + 16) * es, rd) == 0, "alloc");
    put(S.p, sd, hs, n * es);
    put(R.p, rd, hr, (n + 16) * es);
    int to = (rank + 1) % p, from = (rank + p - 1) % p;
    mlc_request_t *rq;
    mlc_msg_status_t ms;
    CHECK_OK(mlc_recv(R.p, n + 16, MLC_INT32, MLC_ANY_SOURCE, 9, comm, &ms, &rq));
    CHECK_OK(mlc_send(S.p, n, MLC_INT32, to, 9, comm, NULL));
    CHECK_OK(mlc_request_wait(&rq));
    CHECK(ms.source == from && ms.tag == 9 && ms.bytes == n * es, "status %d/%d/%zu", ms.source, ms.tag, ms.bytes);
    get(hr, R.p, rd, (n + 16) * es);
    for (size_t i = 0; i < n + 16; i++) want[i] = i < n ? val(from, i) : -5;
    CHECK_MEM(hr, want, (n + 16) * es, es, "recv (%s): past the message must stay untouched", where_names[w]);
    /* sendrecv the other way round */
    put(R.p, rd, want + n, 16 * es); /* any content */
    CHECK_OK(mlc_sendrecv(S.p, 7, from, 3, R.p, n + 16, to, 3, MLC_INT32, comm, &ms, NULL));
    CHECK(ms.bytes == 7 * es && ms.source == to, "sendrecv status %d/%zu", ms.source, ms.bytes);
    get(hr, R.p, rd, 7 * es);
    for (size_t i = 0; i < 7; i++) want[i] = val(to, i);
    CHECK_MEM(hr, want, 7 * es, es, "sendrecv (%s)", where_names[w]);
    buf_free(&S);
    buf_free(&R);
    return 0;
}

/* The v-collectives (staged whole): rank r contributes r+1+N/4 elements. */
static int run_vcoll(mlc_comm_t *comm, where_t w)
{
    int rank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    if (inplace(w)) return 0;
    size_t es = 4, counts[8], displs[8], total = 0;
    for (int r = 0; r < p; r++) {
        counts[r] = (size_t)r + 1 + N / 4;
        displs[r] = total + 3; /* gaps between blocks must stay untouched */
        total += counts[r] + 3;
    }
    bool sd = send_dev(w, rank), rd = recv_dev(w, rank);
    size_t me = counts[rank];
    int32_t *hs = malloc(total * es), *hr = malloc(total * es), *want = malloc(total * es);
    CHECK(hs && hr && want, "oom");
    buf_t S, R;
    CHECK(buf_alloc(&S, total * es, sd) == 0 && buf_alloc(&R, total * es, rd) == 0, "alloc");
    /* allgatherv */
    for (size_t i = 0; i < me; i++) hs[i] = val(rank, i);
    for (size_t i = 0; i < total; i++) want[i] = hr[i] = -9;
    for (int r = 0; r < p; r++)
        for (size_t i = 0; i < counts[r]; i++) want[displs[r] + i] = val(r, i);
    put(S.p, sd, hs, me * es);
    put(R.p, rd, hr, total * es);
    CHECK_OK(mlc_allgatherv(S.p, me, R.p, counts, displs, MLC_INT32, comm, NULL));
    get(hr, R.p, rd, total * es);
    CHECK_MEM(hr, want, total * es, es, "allgatherv (%s)", where_names[w]);
    /* gatherv to the last rank */
    int root = p - 1;
    for (size_t i = 0; i < total; i++) hr[i] = -9;
    put(R.p, rd, hr, total * es);
    CHECK_OK(mlc_gatherv(S.p, me, rank == root ? R.p : NULL, counts, displs, MLC_INT32, root, comm, NULL));
    if (rank == root) {
        get(hr, R.p, rd, total * es);
        CHECK_MEM(hr, want, total * es, es, "gatherv (%s)", where_names[w]);
    }
    /* scatterv from rank 0: the allgatherv result is the root's send layout */
    put(S.p, sd, want, total * es);
    put(R.p, rd, hr, me * es);
    CHECK_OK(mlc_scatterv(rank == 0 ? S.p : NULL, counts, displs, R.p, me, MLC_INT32, 0, comm, NULL));
    get(hr, R.p, rd, me * es);
    CHECK_MEM(hr, want + displs[rank], me * es, es, "scatterv (%s)", where_names[w]);
    /* alltoallv: rank sends counts[dst] of val2(rank, dst) to every dst, receives counts[rank] from each */
    size_t sc[8], sdp[8], rc[8], rdp[8], soff = 0, roff = 0;
    for (int r = 0; r < p; r++) {
        sc[r] = counts[r] % 5 + 1;
        sdp[r] = soff;
        soff += sc[r];
        rc[r] = counts[rank] % 5 + 1;
        rdp[r] = roff + 1;
        roff += rc[r] + 1;
    }
    for (int r = 0; r < p; r++)
        for (size_t i = 0; i < sc[r]; i++) hs[sdp[r] + i] = val2(rank, r, i);
    for (size_t i = 0; i < roff; i++) want[i] = hr[i] = -9;
    for (int r = 0; r < p; r++)
        for (size_t i = 0; i < rc[r]; i++) want[rdp[r] + i] = val2(r, rank, i);
    put(S.p, sd, hs, soff * es);
    put(R.p, rd, hr, roff * es);
    CHECK_OK(mlc_alltoallv(S.p, sc, sdp, R.p, rc, rdp, MLC_INT32, comm, NULL));
    get(hr, R.p, rd, roff * es);
    CHECK_MEM(hr, want, roff * es, es, "alltoallv (%s)", where_names[w]);
    buf_free(&S);
    buf_free(&R);
    free(hs);
    free(hr);
    free(want);
    return 0;
}

/* Several staged operations in flight at once, waited in reverse order. */
static int run_overlap(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    enum { K = 3 };
    buf_t b[K];
    mlc_request_t *rq[K];
    int32_t h[N], want[N];
    for (int k = 0; k < K; k++) {
        CHECK(buf_alloc(&b[k], N * 4, true) == 0, "alloc");
        for (size_t i = 0; i < N; i++) h[i] = (int32_t)(k + 1) * val(mlc_comm_rank(comm), i);
        put(b[k].p, true, h, N * 4);
        CHECK_OK(mlc_allreduce(b[k].p, b[k].p, N, MLC_INT32, MLC_SUM, comm, &rq[k]));
    }
    /* Calls that need no staging queue behind them (the same order on every rank). */
    int32_t one = 1, sum = 0;
    mlc_request_t *bar, *small;
    CHECK_OK(mlc_barrier(comm, &bar));
    CHECK_OK(mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, comm, &small));
    CHECK_OK(mlc_request_wait(&small));
    CHECK(sum == p, "host allreduce behind staged ones: %d, expected %d", sum, p);
    CHECK_OK(mlc_request_wait(&bar));
    for (int k = K - 1; k >= 0; k--) {
        CHECK_OK(mlc_request_wait(&rq[k]));
        get(h, b[k].p, true, N * 4);
        for (size_t i = 0; i < N; i++) {
            want[i] = 0;
            for (int r = 0; r < p; r++) want[i] += (int32_t)(k + 1) * val(r, i);
        }
        CHECK_MEM(h, want, N * 4, 4, "overlapped allreduce %d", k);
        buf_free(&b[k]);
    }
    return 0;
}

/* Reductions beyond sum on device buffers, with blocks that do not divide evenly. */
static int run_reduce_ops(mlc_comm_t *comm)
{
    int rank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    enum { C = N + 1 };
    static const mlc_op_t ops[] = {MLC_MAX, MLC_AVG};
    int32_t *h = calloc((size_t)C * (size_t)p, 4), *want = calloc(C, 4); /* threads: ranks share statics */
    CHECK(h && want, "out of memory");
    buf_t S, R;
    CHECK(buf_alloc(&S, (size_t)C * (size_t)p * 4, true) == 0 && buf_alloc(&R, C * 4, true) == 0, "alloc");
    for (size_t i = 0; i < (size_t)C * (size_t)p; i++) h[i] = val(rank, i);
    put(S.p, true, h, (size_t)C * (size_t)p * 4);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        for (int rs = 0; rs < 2; rs++) {
            /* allreduce of C elements; reduce_scatter: block `rank` of C per rank */
            size_t at = rs ? (size_t)rank * C : 0;
            for (size_t i = 0; i < C; i++) {
                int64_t sum = 0, max = INT32_MIN;
                for (int r = 0; r < p; r++) {
                    sum += val(r, at + i);
                    if (val(r, at + i) > max) max = val(r, at + i);
                }
                want[i] = (int32_t)(ops[k] == MLC_MAX ? max : sum / p);
            }
            if (rs) CHECK_OK(mlc_reduce_scatter(S.p, R.p, C, MLC_INT32, ops[k], comm, NULL));
            else CHECK_OK(mlc_allreduce(S.p, R.p, C, MLC_INT32, ops[k], comm, NULL));
            get(h, R.p, true, C * 4);
            CHECK_MEM(h, want, C * 4, 4, "%s with op %d on device buffers", rs ? "reduce_scatter" : "allreduce",
                      (int)ops[k]);
        }
    }
    buf_free(&S);
    buf_free(&R);
    free(h);
    free(want);
    return 0;
}

/* On shm, allreduce and reduce_scatter on device buffers go through CUDA IPC (a new
 * communicator maps its peers' memory anew: the double counts the mappings). */
static int run_ipc_reductions(mlc_comm_t *comm)
{
    const char *ipc = getenv("DEVBUF_EXPECT_IPC");
    int rank = mlc_comm_rank(comm);
    if (!ipc || strcmp(ipc, "1") != 0 || mlc_comm_size(comm) < 2 || strcmp(mlc_comm_backend(comm), "shm") != 0)
        return 0;
    CHECK(ipc_opens != NULL, "DEVBUF_EXPECT_IPC needs the CUDA double");
    static const mlc_coll_t colls[] = {MLC_COLL_ALLREDUCE, MLC_COLL_REDUCE_SCATTER};
    for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++) {
        mlc_comm_t *fresh;
        CHECK_OK(mlc_comm_split(comm, 0, rank, &fresh));
        int before = __atomic_load_n(ipc_opens, __ATOMIC_RELAXED);
        CHECK_RUN(run_coll(fresh, colls[k], W_DEV, 0, false));
        CHECK(__atomic_load_n(ipc_opens, __ATOMIC_RELAXED) > before, "%s on device buffers was not moved through GPU IPC",
              mlc_coll_name(colls[k]));
        CHECK_OK(mlc_comm_free(fresh));
    }
    return 0;
}

/* With a CUDA-aware MPI, allreduce goes to MPI as it is; broadcast is staged. */
static int run_direct(mlc_comm_t *comm)
{
    const char *want = getenv("DEVBUF_EXPECT_DIRECT");
    if (!want || strcmp(want, "1") != 0 || strcmp(mlc_comm_backend(comm), "mpi") != 0) return 0;
    CHECK(copies != NULL, "DEVBUF_EXPECT_DIRECT needs the CUDA double");
    buf_t b;
    int32_t h[N];
    CHECK(buf_alloc(&b, N * 4, true) == 0, "alloc");
    for (size_t i = 0; i < N; i++) h[i] = val(mlc_comm_rank(comm), i);
    put(b.p, true, h, N * 4);
    int before = __atomic_load_n(copies, __ATOMIC_RELAXED);
    CHECK_OK(mlc_allreduce(b.p, b.p, N, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(__atomic_load_n(copies, __ATOMIC_RELAXED) == before, "allreduce was staged (%d copies) on a CUDA-aware MPI",
          __atomic_load_n(copies, __ATOMIC_RELAXED) - before);
    CHECK_OK(mlc_broadcast(b.p, b.p, N, MLC_INT32, 0, comm, NULL));
    CHECK(__atomic_load_n(copies, __ATOMIC_RELAXED) > before, "broadcast was not staged");
    buf_free(&b);
    return 0;
}

/*
 * Rank 0 sends staged (its copy may still be running) and enters a blocking
 * allreduce; rank 1 first receives, then joins. Rank 0's wait must keep
 * advancing the send (MPI's own blocking wait would not).
 */
static int run_send_then_coll(mlc_comm_t *comm)
{
    int rank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    if (p < 2) return 0;
    buf_t b;
    int32_t h[N], want[N];
    CHECK(buf_alloc(&b, N * 4, true) == 0, "alloc");
    for (size_t i = 0; i < N; i++) want[i] = h[i] = val(0, i);
    if (rank == 0) put(b.p, true, h, N * 4);
    mlc_request_t *rq = NULL;
    if (rank == 0) CHECK_OK(mlc_send(b.p, N, MLC_INT32, 1, 5, comm, &rq));
    if (rank == 1) CHECK_OK(mlc_recv(b.p, N, MLC_INT32, 0, 5, comm, NULL, NULL));
    int32_t one = 1, sum = 0;
    CHECK_OK(mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(sum == p, "allreduce %d", sum);
    if (rank == 0) CHECK_OK(mlc_request_wait(&rq));
    if (rank == 1) {
        get(h, b.p, true, N * 4);
        CHECK_MEM(h, want, N * 4, 4, "staged send overtaken by a blocking allreduce");
    }
    buf_free(&b);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    CHECK_RUN(run_direct(comm));
    /* Staging copies may run on the caller's stream. */
    void *stream = NULL;
    CHECK(cu.stream_create(&stream, 1) == 0, "cudaStreamCreateWithFlags");
    CHECK_OK(mlc_comm_set_stream(comm, stream));
    static const mlc_coll_t colls[] = {MLC_COLL_ALLREDUCE, MLC_COLL_REDUCE, MLC_COLL_BROADCAST,
                                       MLC_COLL_ALLGATHER, MLC_COLL_GATHER, MLC_COLL_REDUCE_SCATTER,
                                       MLC_COLL_SCATTER, MLC_COLL_ALLTOALL};
    for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++)
        for (int w = 0; w < W_COUNT; w++) {
            CHECK_RUN(run_coll(comm, colls[k], (where_t)w, p - 1, false));
            CHECK_RUN(run_coll(comm, colls[k], (where_t)w, 0, w == W_DEV));
        }
    for (int w = 0; w < W_COUNT; w++) {
        CHECK_RUN(run_p2p(comm, (where_t)w));
        CHECK_RUN(run_vcoll(comm, (where_t)w));
    }
    CHECK_RUN(run_overlap(comm));
    CHECK_RUN(run_reduce_ops(comm));
    CHECK_RUN(run_ipc_reductions(comm));
    CHECK_RUN(run_send_then_coll(comm));
    /* A split inherits device buffers. */
    mlc_comm_t *half;
    CHECK_OK(mlc_comm_split(comm, mlc_comm_rank(comm) % 2, 0, &half));
    CHECK_RUN(run_coll(half, MLC_COLL_ALLREDUCE, W_DEV, 0, true));
    CHECK_OK(mlc_comm_free(half));
    CHECK_OK(mlc_comm_set_stream(comm, NULL));
    CHECK_RUN(run_coll(comm, MLC_COLL_ALLGATHER, W_DEV, 0, false));
    const char *ipc = getenv("DEVBUF_EXPECT_IPC");
    if (ipc && strcmp(ipc, "1") == 0 && p > 1 && strcmp(mlc_comm_backend(comm), "shm") == 0)
        CHECK(ipc_opens && *ipc_opens > 0, "no peer memory was mapped through GPU IPC");
    cu.stream_destroy(stream);
    return 0;
}

/* The runtime is loaded before any communicator exists: without one there is
 * nothing to test, and mlc_comm_init would refuse MLC_MEMORY=cuda. */
int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (load_cuda() != 0) {
        printf("SKIP: %s\n", skip_why);
        return MLC_TEST_SKIP;
    }
    return mlc_test_main(argc, argv, body);
}
