/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA double itself (fake_cudart.c) behaves as CUDA where mlcomm's
 * correctness depends on it, and mlcomm's runtime handling where the
 * runtime loads but cannot work:
 *   gpu_double [semantics] queued work runs at synchronization or polls;
 *                          legacy / blocking / non-blocking ordering; lags;
 *                          events and cudaStreamWaitEvent; primary contexts;
 *                          cudaErrorAlreadyMapped, HostMemoryAlreadyRegistered,
 *                          events recorded on another device's stream
 *   gpu_double no_device   (FAKE_CUDA_DEVICES=0 or FAKE_CUDA_DRIVER_TOO_OLD=1)
 *                          every call fails with the sticky error; MLC_MEMORY=cuda
 *                          fails at init with the reason; the pinned pool pins
 *                          with mlock instead of the runtime
 *   gpu_double nccl_thread (the nccl backend on the doubles, 2 devices) a
 *                          communicator of device 1 called from a thread that
 *                          never chose a device leaves no context on device 0
 *   gpu_double soname      (LD_LIBRARY_PATH: libcudart.so.13 answering
 *                          "insufficient driver", libcudart.so.12 working) the
 *                          loader takes .so.12
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define CHECK_RETURNS 1
#include "check.h"
#include "devrt/gpurt.h"
#include "devrt/pinned.h"
#include "mlcomm.h"

static void *lib;
static struct {
    int (*GetDeviceCount)(int *);
    int (*GetDevice)(int *);
    int (*SetDevice)(int);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*MemcpyAsync)(void *, const void *, size_t, int, void *);
    int (*StreamCreateWithFlags)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*StreamSynchronize)(void *);
    int (*StreamQuery)(void *);
    int (*StreamWaitEvent)(void *, void *, unsigned);
    int (*EventCreateWithFlags)(void **, unsigned);
    int (*EventRecord)(void *, void *);
    int (*EventQuery)(void *);
    int (*EventDestroy)(void *);
    int (*HostRegister)(void *, size_t, unsigned);
    int (*HostUnregister)(void *);
    int (*PointerGetAttributes)(void *, const void *);
} cu;
#define F(name) cu.name
#define LOAD(name) (*(void **)&cu.name = dlsym(lib, "cuda" #name))

static int load(void)
{
    lib = dlopen(FAKE_CUDART, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL, "dlopen %s: %s", FAKE_CUDART, dlerror());
    LOAD(GetDeviceCount), LOAD(GetDevice), LOAD(SetDevice), LOAD(Malloc), LOAD(Free), LOAD(MemcpyAsync);
    LOAD(StreamCreateWithFlags), LOAD(StreamDestroy), LOAD(StreamSynchronize), LOAD(StreamQuery);
    LOAD(StreamWaitEvent), LOAD(EventCreateWithFlags), LOAD(EventRecord), LOAD(EventQuery), LOAD(EventDestroy);
    LOAD(HostRegister), LOAD(HostUnregister), LOAD(PointerGetAttributes);
    CHECK(cu.PointerGetAttributes && cu.StreamQuery, "the double lacks a function");
    return 0;
}

/* Unguarded "device" memory is host memory: the test reads it directly. */
static int semantics(void)
{
    CHECK_RUN(load());
    int (*contexts)(int) = (int (*)(int))dlsym(lib, "fake_cuda_contexts_created");
    int (*write)(void *, void *, const void *, size_t, int) =
        (int (*)(void *, void *, const void *, size_t, int))dlsym(lib, "fake_cuda_enqueue_write");
    CHECK(contexts && write, "test hooks missing");
    /* Asking creates no context; choosing a device does (CUDA 12+). */
    int n = 0, dev = -1;
    CHECK(F(GetDeviceCount)(&n) == 0 && n == 2, "2 devices (FAKE_CUDA_DEVICES=2): %d", n);
    CHECK(F(GetDevice)(&dev) == 0 && dev == 0, "default device %d", dev);
    CHECK(contexts(0) == 0 && contexts(1) == 0, "a context before any call that needs one");
    CHECK(F(SetDevice)(1) == 0 && contexts(1) == 1 && contexts(0) == 0, "cudaSetDevice(1) makes device 1's context");
    char *a, *b, *c;
    CHECK(F(Malloc)((void **)&a, 64) == 0 && F(Malloc)((void **)&b, 64) == 0 && F(Malloc)((void **)&c, 64) == 0, "cudaMalloc");
    memset(a, 1, 64);
    memset(b, 2, 64);
    memset(c, 3, 64);
    void *blk, *nonblk, *blk2;
    CHECK(F(StreamCreateWithFlags)(&blk, 0u) == 0 && F(StreamCreateWithFlags)(&nonblk, 1u) == 0 &&
              F(StreamCreateWithFlags)(&blk2, 0u) == 0, "streams");
    /* Queued work waits for a synchronization. */
    CHECK(F(MemcpyAsync)(b, a, (size_t)64, 4, blk) == 0, "copy");
    CHECK(b[0] == 2, "a queued copy ran at once");
    CHECK(F(StreamSynchronize)(blk) == 0 && b[0] == 1, "cudaStreamSynchronize did not run the copy");
    /* A kernel on the legacy stream (still running: 1000 polls) holds back a blocking stream, not a non-blocking one. */
    char seven[64], nine[64];
    memset(seven, 7, 64);
    memset(nine, 9, 64);
    CHECK(write(NULL, a, seven, 64, 1000) == 0, "enqueue write");
    CHECK(F(MemcpyAsync)(b, a, (size_t)64, 4, blk) == 0 && F(MemcpyAsync)(c, a, (size_t)64, 4, nonblk) == 0,
          "copies");
    void *ev;
    CHECK(F(EventCreateWithFlags)(&ev, 2u) == 0 && F(EventRecord)(ev, nonblk) == 0, "event");
    CHECK(F(EventQuery)(ev) == 0 && c[0] == 1, "the non-blocking stream waited for the legacy stream");
    CHECK(F(StreamQuery)(blk) == 600 && b[0] == 1, "the blocking stream overtook the legacy stream");
    CHECK(F(StreamSynchronize)(blk) == 0 && b[0] == 7, "synchronizing the blocking stream did not run the legacy kernel before it");
    /* ... and the legacy stream waits for a blocking stream's earlier work. */
    CHECK(write(blk2, c, nine, 64, 1000) == 0, "enqueue write");
    CHECK(F(MemcpyAsync)(b, c, (size_t)64, 4, NULL) == 0, "legacy copy");
    CHECK(F(StreamQuery)(NULL) == 600 && b[0] == 7, "the legacy stream overtook a blocking stream");
    CHECK(F(StreamSynchronize)(NULL) == 0 && b[0] == 9, "legacy stream sync");
    /* Polls let lagging work through: the third poll runs work with a lag of 3. */
    memset(seven, 5, 64);
    CHECK(write(nonblk, a, seven, 64, 3) == 0 && F(EventRecord)(ev, nonblk) == 0, "lagging write");
    int polls = 0;
    while (F(EventQuery)(ev) == 600 && polls < 100) polls++;
    CHECK(polls == 2 && a[0] == 5, "a lag of 3 polls answered \"not ready\" %d times", polls);
    /* cudaStreamWaitEvent orders one stream after another's event. */
    CHECK(write(nonblk, a, nine, 64, 1000) == 0 && F(EventRecord)(ev, nonblk) == 0, "write + record");
    CHECK(F(StreamWaitEvent)(blk, ev, 0u) == 0 && F(MemcpyAsync)(b, a, (size_t)64, 4, blk) == 0, "wait + copy");
    CHECK(F(StreamQuery)(blk) == 600, "a stream did not wait for the event");
    CHECK(F(StreamSynchronize)(blk) == 0 && b[0] == 9, "cudaStreamWaitEvent: synchronizing ran the copy before the event");
    /* An event of device 1 cannot be recorded on a stream of device 0. */
    void *s0;
    CHECK(F(SetDevice)(0) == 0 && F(StreamCreateWithFlags)(&s0, 0u) == 0, "stream on device 0");
    CHECK(F(EventRecord)(ev, s0) == 400, "an event recorded on another device's stream");
    CHECK(F(EventRecord)(ev, NULL) == 400, "an event of device 1 recorded on device 0's legacy stream");
    /* Overlapping host registrations are refused. */
    char *host = malloc(8192);
    CHECK(F(HostRegister)(host, (size_t)4096, 0u) == 0, "cudaHostRegister");
    CHECK(F(HostRegister)(host + 2048, (size_t)4096, 0u) == 712, "an overlapping cudaHostRegister");
    CHECK(F(HostUnregister)(host) == 0, "cudaHostUnregister");
    free(host);
    F(EventDestroy)(ev);
    F(StreamDestroy)(blk);
    F(StreamDestroy)(blk2);
    F(StreamDestroy)(nonblk);
    F(StreamDestroy)(s0);
    F(Free)(a);
    F(Free)(b);
    F(Free)(c);
    return 0;
}

/* The runtime loads, the device is missing: every call says so, init refuses, pinning falls back. */
static int no_device(void)
{
    int want = getenv("FAKE_CUDA_DRIVER_TOO_OLD") ? 35 : 100;
    const char *name = want == 35 ? "cudaErrorInsufficientDriver" : "cudaErrorNoDevice";
    CHECK_RUN(load());
    void *p = NULL;
    int n = 0;
    CHECK(F(GetDeviceCount)(&n) == want, "cudaGetDeviceCount");
    CHECK(F(Malloc)(&p, (size_t)64) == want, "cudaMalloc");
    static char attr[256];
    CHECK(F(PointerGetAttributes)(attr, &n) == want, "cudaPointerGetAttributes");
    CHECK(F(StreamCreateWithFlags)(&p, 0u) == want, "cudaStreamCreateWithFlags");

    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    CHECK(st == MLC_ERR_UNAVAILABLE, "MLC_MEMORY=cuda without a device: mlc_comm_init -> %s (%s)", mlc_status_name(st),
          st == MLC_SUCCESS ? "init succeeded" : mlc_last_error());
    CHECK(strstr(mlc_last_error(), name) && strstr(mlc_last_error(), "MLC_MEMORY=cuda"),
          "the reason is not given: %s", mlc_last_error());
    if (comm) mlc_comm_free(comm);

    /* The runtime is loaded: the pool must still pin with mlock. */
    const mlc_gpurt_t *rt;
    CHECK(mlc_gpurt_get(MLC_GPU_CUDA, &rt) == MLC_SUCCESS, "the runtime itself loads: %s", mlc_last_error());
    mlc_pinned_pool_t *pool;
    void *blk = NULL;
    CHECK_OK(mlc_pinned_pool_create(1 << 20, MLC_PINNED_AUTO, &pool));
    st = mlc_pinned_alloc(pool, 4096, &blk);
    CHECK(st == MLC_SUCCESS, "pinned memory with a runtime but no device: %s: %s", mlc_status_name(st), mlc_last_error());
    memset(blk, 1, 4096);
    int *total = (int *)dlsym(rt->lib.handle, "fake_cuda_host_allocs_total");
    CHECK(total && *total == 0, "cudaHostAlloc was used without a device");
    mlc_pinned_free(pool, blk);
    mlc_pinned_pool_destroy(pool);
    return 0;
}

typedef struct call {
    mlc_comm_t *comm;
    void *buf;
    mlc_status_t st;
} call_t;
static void *call_allreduce(void *arg)
{
    call_t *c = arg;
    c->st = mlc_allreduce(c->buf, c->buf, 64, MLC_INT32, MLC_SUM, c->comm, NULL);
    return NULL;
}

/* The thread's device is given back only if it had one: a context on GPU 0 costs memory
 * on a GPU another process may own. */
static int nccl_thread(void)
{
    CHECK_RUN(load());
    int (*contexts)(int) = (int (*)(int))dlsym(lib, "fake_cuda_contexts_created");
    CHECK(contexts != NULL, "test hook missing");
    CHECK(F(SetDevice)(1) == 0, "cudaSetDevice(1) (FAKE_CUDA_DEVICES=2)");
    call_t c = {0};
    CHECK_OK(mlc_comm_init(NULL, &c.comm));
    CHECK(strcmp(mlc_comm_backend(c.comm), "nccl") == 0, "backend %s", mlc_comm_backend(c.comm));
    CHECK(F(Malloc)(&c.buf, 256) == 0, "cudaMalloc");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, call_allreduce, &c) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(c.st == MLC_SUCCESS, "allreduce from a thread without a device: %s", mlc_status_name(c.st));
    CHECK(contexts(0) == 0, "a context was created on device 0, which this process never uses");
    F(Free)(c.buf);
    CHECK_OK(mlc_comm_free(c.comm));
    return 0;
}

static int soname(void)
{
    /* The doubles under the runtime's sonames (LD_LIBRARY_PATH); a shim that refuses
     * those names (.ci/no-gpu-runtime.sh) leaves nothing to test. */
    void *h12 = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!h12 || !dlsym(h12, "fake_cuda_contexts_created")) {
        printf("SKIP: libcudart.so.12 is not the test double here (%s)\n", h12 ? "another library" : dlerror());
        return 77;
    }
    const mlc_gpurt_t *rt;
    int n = 0;
    CHECK_OK(mlc_gpurt_get(MLC_GPU_CUDA, &rt));
    mlc_status_t st = mlc_gpurt_device_count(rt, &n);
    CHECK(st == MLC_SUCCESS, "the runtime loaded from %s has no device: %s", rt->lib.path, mlc_last_error());
    CHECK(strstr(rt->lib.path, "libcudart.so.12") != NULL, "loaded %s, not libcudart.so.12", rt->lib.path);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "semantics";
    if (strcmp(mode, "semantics") == 0) return semantics();
    if (strcmp(mode, "no_device") == 0) return no_device();
    if (strcmp(mode, "soname") == 0) return soname();
    if (strcmp(mode, "nccl_thread") == 0) return nccl_thread();
    fprintf(stderr, "usage: %s semantics|no_device|soname|nccl_thread\n", argv[0]);
    return 2;
}
