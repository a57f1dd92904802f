/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device buffers on the host backends against a GPU that runs asynchronously
 * (the CUDA double, tests/gpu/fake_cudart.c: queued work runs only when the
 * process synchronizes or polls). Each case models what an application does
 * on a real GPU: its kernels are still producing a buffer on its stream
 * (fake_cuda_enqueue_write: the bytes land when that stream gets there,
 * after `LAG` polls) when it hands the buffer to mlcomm.
 *
 * GPU_ASYNC_CASE selects the case:
 *   owner_stream  shm, CUDA IPC: peers must not read a rank's sendbuf before
 *                 the kernels on its stream (mlc_comm_set_stream) are done.
 *   realloc       shm, CUDA IPC: buffers freed and allocated again at the same
 *                 address get new handles (a caching allocator); more
 *                 allocations than the mapping cache holds.
 *   legacy        staging on the communicator's own stream must wait for the
 *                 application's kernels on the legacy default stream, and
 *                 mlc_comm_set_stream(comm, NULL) selects that stream.
 *   event_device  a communicator made on device 1, called from a thread that
 *                 never chose a device: its events and streams live on
 *                 device 1 and no context appears on device 0.
 *   direct        a CUDA-aware MPI (forced, unguarded double): device
 *                 pointers go to MPI only once the stream's work is done.
 * Without the CUDA double (its test hooks) it prints SKIP and exits 77.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include "../ranks/harness.h"

#define N 1024 /* int32 elements per rank */
#define LAG 3000 /* polls before an application kernel's write lands */

static struct {
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_async)(void *, const void *, size_t, int, void *);
    int (*stream_sync)(void *);
    int (*stream_create)(void **, unsigned);
    int (*stream_destroy)(void *);
    int (*set_device)(int);
    int (*enqueue_write)(void *, void *, const void *, size_t, int);
    int (*contexts_created)(int);
    int *ipc_opens, *ipc_live;
} cu;
static const char *skip_why;

static int load_double(void)
{
    const char *lib = getenv("MLC_CUDART_LIB");
    void *h = lib && lib[0] ? dlopen(lib, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!h) {
        skip_why = "MLC_CUDART_LIB does not name a loadable CUDA runtime";
        return -1;
    }
    cu.malloc_ = (int (*)(void **, size_t))dlsym(h, "cudaMalloc");
    cu.free_ = (int (*)(void *))dlsym(h, "cudaFree");
    cu.memcpy_async = (int (*)(void *, const void *, size_t, int, void *))dlsym(h, "cudaMemcpyAsync");
    cu.stream_sync = (int (*)(void *))dlsym(h, "cudaStreamSynchronize");
    cu.stream_create = (int (*)(void **, unsigned))dlsym(h, "cudaStreamCreateWithFlags");
    cu.stream_destroy = (int (*)(void *))dlsym(h, "cudaStreamDestroy");
    cu.set_device = (int (*)(int))dlsym(h, "cudaSetDevice");
    cu.enqueue_write = (int (*)(void *, void *, const void *, size_t, int))dlsym(h, "fake_cuda_enqueue_write");
    cu.contexts_created = (int (*)(int))dlsym(h, "fake_cuda_contexts_created");
    cu.ipc_opens = (int *)dlsym(h, "fake_cuda_ipc_opens");
    cu.ipc_live = (int *)dlsym(h, "fake_cuda_ipc_live");
    if (!cu.enqueue_write || !cu.contexts_created || !cu.ipc_live) {
        skip_why = "needs the CUDA test double (fake_cuda_enqueue_write): an application kernel cannot be modelled on a real GPU";
        return -1;
    }
    return 0;
}

static int32_t val(int rank, size_t i, int round) { return (int32_t)(rank * 100003 + (int)i * 7 + round * 11); }

static void put(void *dst, const void *src, size_t n)
{
    cu.memcpy_async(dst, src, n, 4, NULL);
    cu.stream_sync(NULL);
}
static void get(void *dst, const void *src, size_t n)
{
    cu.memcpy_async(dst, src, n, 4, NULL);
    cu.stream_sync(NULL);
}

/* sendbuf holds stale data; the application's kernel on `stream` is still writing the
 * real data (round `round`) when the call is made. */
static int late_input(mlc_comm_t *comm, void *stream, int32_t *dev, int round)
{
    int rank = mlc_comm_rank(comm);
    int32_t h[N]; /* per rank: the threads backend runs ranks as threads */
    for (size_t i = 0; i < N; i++) h[i] = -1;
    put(dev, h, sizeof h);
    for (size_t i = 0; i < N; i++) h[i] = val(rank, i, round);
    CHECK(cu.enqueue_write(stream, dev, h, sizeof h, LAG) == 0, "fake_cuda_enqueue_write");
    return 0;
}

static int check_allgather(mlc_comm_t *comm, const int32_t *recv, int round, const char *what)
{
    int p = mlc_comm_size(comm);
    int32_t *h = malloc((size_t)p * N * 4), *want = malloc((size_t)p * N * 4);
    CHECK(h && want, "malloc");
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < N; i++) want[(size_t)q * N + i] = val(q, i, round);
    get(h, recv, (size_t)p * N * 4);
    CHECK_MEM(h, want, (size_t)p * N * 4, 4, "%s", what);
    free(h);
    free(want);
    return 0;
}

static int check_sum(mlc_comm_t *comm, const int32_t *recv, int round, const char *what)
{
    int p = mlc_comm_size(comm);
    int32_t h[N], want[N];
    for (size_t i = 0; i < N; i++) {
        want[i] = 0;
        for (int q = 0; q < p; q++) want[i] += val(q, i, round);
    }
    get(h, recv, sizeof h);
    CHECK_MEM(h, want, sizeof h, 4, "%s", what);
    return 0;
}

static bool on_shm(mlc_comm_t *comm) { return strcmp(mlc_comm_backend(comm), "shm") == 0; }

static int case_owner_stream(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    void *stream, *send, *recv;
    CHECK(cu.stream_create(&stream, 0) == 0, "cudaStreamCreateWithFlags");
    CHECK_OK(mlc_comm_set_stream(comm, stream));
    CHECK(cu.malloc_(&send, N * 4) == 0 && cu.malloc_(&recv, (size_t)p * N * 4) == 0, "cudaMalloc");
    int opens = *cu.ipc_opens;
    for (int round = 0; round < 3; round++) {
        CHECK_RUN(late_input(comm, stream, send, round));
        CHECK_OK(mlc_allgather(send, recv, N, MLC_INT32, comm, NULL));
        CHECK_RUN(check_allgather(comm, recv, round, "allgather read a peer's sendbuf before its stream wrote it"));
        CHECK_RUN(late_input(comm, stream, send, round));
        CHECK_OK(mlc_allreduce(send, recv, N, MLC_INT32, MLC_SUM, comm, NULL));
        CHECK_RUN(check_sum(comm, recv, round, "allreduce read a peer's sendbuf before its stream wrote it"));
    }
    if (p > 1 && on_shm(comm)) CHECK(*cu.ipc_opens > opens, "no CUDA IPC mapping: the IPC path was not taken");
    cu.free_(send);
    cu.free_(recv);
    CHECK_OK(mlc_comm_set_stream(comm, NULL));
    cu.stream_destroy(stream);
    return 0;
}

static int case_realloc(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), rank = mlc_comm_rank(comm);
    int32_t h[N]; /* per rank: the threads backend runs ranks as threads */
    /* A caching allocator: the same addresses over and over, new handles each time. */
    for (int round = 0; round < 6; round++) {
        void *send, *recv;
        CHECK(cu.malloc_(&send, N * 4) == 0 && cu.malloc_(&recv, (size_t)p * N * 4) == 0, "cudaMalloc");
        for (size_t i = 0; i < N; i++) h[i] = val(rank, i, round);
        put(send, h, sizeof h);
        CHECK_OK(mlc_allgather(send, recv, N, MLC_INT32, comm, NULL));
        CHECK_RUN(check_allgather(comm, recv, round, "allgather after a reallocation"));
        cu.free_(send);
        cu.free_(recv);
    }
    /* More live allocations than the mapping cache keeps open. */
    enum { MANY = 100 };
    void *bufs[MANY], *recv;
    CHECK(cu.malloc_(&recv, (size_t)p * N * 4) == 0, "cudaMalloc");
    for (int k = 0; k < MANY; k++) {
        CHECK(cu.malloc_(&bufs[k], N * 4 + (size_t)k * 8) == 0, "cudaMalloc");
        for (size_t i = 0; i < N; i++) h[i] = val(rank, i, k);
        put(bufs[k], h, sizeof h);
        CHECK_OK(mlc_allgather(bufs[k], recv, N, MLC_INT32, comm, NULL));
        CHECK_RUN(check_allgather(comm, recv, k, "allgather from one of many allocations"));
    }
    if (p > 1 && on_shm(comm))
        CHECK(*cu.ipc_live <= 64 + 2 * p, "%d peer allocations still mapped: the mapping cache is not bounded",
              *cu.ipc_live);
    for (int k = 0; k < MANY; k++) cu.free_(bufs[k]);
    cu.free_(recv);
    return 0;
}

static int case_legacy(mlc_comm_t *comm)
{
    void *send, *recv, *other;
    CHECK(cu.malloc_(&send, N * 4) == 0 && cu.malloc_(&recv, N * 4) == 0, "cudaMalloc");
    /* The communicator's own stream: kernels on stream 0 come first. */
    CHECK_RUN(late_input(comm, NULL, send, 1));
    CHECK_OK(mlc_allreduce(send, recv, N, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK_RUN(check_sum(comm, recv, 1, "staging read the sendbuf before the legacy stream's kernel wrote it"));
    /* NULL is the legacy default stream, as on nccl. */
    CHECK(cu.stream_create(&other, 1) == 0, "cudaStreamCreateWithFlags");
    CHECK_OK(mlc_comm_set_stream(comm, other));
    CHECK_OK(mlc_comm_set_stream(comm, NULL));
    CHECK_RUN(late_input(comm, NULL, send, 2));
    CHECK_OK(mlc_allreduce(send, recv, N, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK_RUN(check_sum(comm, recv, 2, "mlc_comm_set_stream(comm, NULL) did not select the legacy stream"));
    cu.free_(send);
    cu.free_(recv);
    cu.stream_destroy(other);
    return 0;
}

typedef struct call {
    mlc_comm_t *comm;
    void *send, *recv;
    mlc_status_t st;
    char msg[512];
} call_t;

static void *call_allreduce(void *arg)
{
    call_t *c = arg;
    c->st = mlc_allreduce(c->send, c->recv, N, MLC_INT32, MLC_SUM, c->comm, NULL);
    snprintf(c->msg, sizeof c->msg, "%s", c->st == MLC_SUCCESS ? "" : mlc_last_error());
    return NULL;
}

static int case_event_device(mlc_comm_t *comm)
{
    int rank = mlc_comm_rank(comm);
    int32_t h[N]; /* per rank: the threads backend runs ranks as threads */
    void *stream;
    call_t c = {.comm = comm};
    /* main() made device 1 current before the communicator was created */
    CHECK(cu.stream_create(&stream, 0) == 0, "cudaStreamCreateWithFlags");
    CHECK(cu.malloc_(&c.send, N * 4) == 0 && cu.malloc_(&c.recv, N * 4) == 0, "cudaMalloc");
    for (size_t i = 0; i < N; i++) h[i] = val(rank, i, 0);
    put(c.send, h, sizeof h);
    for (int round = 0; round < 2; round++) {
        /* round 0: the communicator's own stream; 1: the application's stream on device 1 */
        if (round == 1) CHECK_OK(mlc_comm_set_stream(comm, stream));
        pthread_t t;
        CHECK(pthread_create(&t, NULL, call_allreduce, &c) == 0, "pthread_create");
        pthread_join(t, NULL);
        CHECK(c.st == MLC_SUCCESS, "allreduce from a thread without a device (round %d): %s: %s", round,
              mlc_status_name(c.st), c.msg);
        CHECK_RUN(check_sum(comm, c.recv, 0, "allreduce from another thread"));
    }
    CHECK(cu.contexts_created(0) == 0, "a context was created on device 0, which this rank never uses");
    CHECK_OK(mlc_comm_set_stream(comm, NULL));
    cu.free_(c.send);
    cu.free_(c.recv);
    cu.stream_destroy(stream);
    return 0;
}

static int case_direct(mlc_comm_t *comm)
{
    void *send, *recv;
    CHECK(cu.malloc_(&send, N * 4) == 0 && cu.malloc_(&recv, N * 4) == 0, "cudaMalloc");
    CHECK_RUN(late_input(comm, NULL, send, 3));
    CHECK_OK(mlc_allreduce(send, recv, N, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK_RUN(check_sum(comm, recv, 3, "device pointers reached MPI before the stream's kernel wrote them"));
    cu.free_(send);
    cu.free_(recv);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    const char *c = getenv("GPU_ASYNC_CASE");
    c = c ? c : "";
    if (strcmp(c, "owner_stream") == 0) return case_owner_stream(comm);
    if (strcmp(c, "realloc") == 0) return case_realloc(comm);
    if (strcmp(c, "legacy") == 0) return case_legacy(comm);
    if (strcmp(c, "event_device") == 0) return case_event_device(comm);
    if (strcmp(c, "direct") == 0) return case_direct(comm);
    fprintf(stderr, "GPU_ASYNC_CASE=%s: unknown case\n", c);
    return 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (load_double() != 0) {
        printf("SKIP: %s\n", skip_why);
        return MLC_TEST_SKIP;
    }
    const char *c = getenv("GPU_ASYNC_CASE");
    if (c && strcmp(c, "event_device") == 0 && cu.set_device(1) != 0) {
        printf("SKIP: no device 1 (FAKE_CUDA_DEVICES=2)\n");
        return MLC_TEST_SKIP;
    }
    return mlc_test_main(argc, argv, body);
}
