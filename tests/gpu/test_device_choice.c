/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which GPU a rank uses and when it first touches one, on the CUDA double
 * (tests/gpu/fake_cudart.c counts the contexts it creates per device, and
 * live allocations, streams and events).
 *
 * DEVICE_CASE selects the case (a rank test, tests/ranks/harness.h):
 *   host_only  MLC_MEMORY=auto, 2 devices, host buffers only: collectives
 *              (one of them staged in many chunks) create no context, no
 *              allocation, no stream, no event in any process.
 *   choice     a rank's device is MLC_DEVICE, else local rank mod device count:
 *              a device-buffer call makes a context there and nowhere else
 *              (the test allocates its buffers on that device itself).
 *   probe      shm with CUDA IPC: creating the communicator and host-buffer
 *              calls map nothing; the first call with device buffers probes
 *              (PROBE_EXPECT=ok: data moves through IPC and the probe's
 *              allocation is gone; refused: it is staged, and later calls
 *              too, without trying to map again).
 * `test_device_choice bad_device` (no harness): mlc_comm_init must fail with
 * MLC_ERR_CONFIG naming MLC_DEVICE (MLC_DEVICE out of range).
 * `test_device_choice nccl_device` (one rank, nccl on the doubles): the
 * device is DEVICE_EXPECT and no other gets a context.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include "../ranks/harness.h"

#define N 256        /* int32 elements per rank */
#define NDEV_MAX 4

static struct {
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_)(void *, const void *, size_t, int, void *);
    int (*sync)(void *);
    int (*set_device)(int);
    int (*contexts)(int);
    int *live_dev, *live_host, *live_streams, *live_events, *ipc_opens;
} cu;

static int load_double(void)
{
    const char *lib = getenv("MLC_CUDART_LIB");
    void *h = lib && lib[0] ? dlopen(lib, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!h) return -1;
    cu.malloc_ = (int (*)(void **, size_t))dlsym(h, "cudaMalloc");
    cu.free_ = (int (*)(void *))dlsym(h, "cudaFree");
    cu.memcpy_ = (int (*)(void *, const void *, size_t, int, void *))dlsym(h, "cudaMemcpyAsync");
    cu.sync = (int (*)(void *))dlsym(h, "cudaStreamSynchronize");
    cu.set_device = (int (*)(int))dlsym(h, "cudaSetDevice");
    cu.contexts = (int (*)(int))dlsym(h, "fake_cuda_contexts_created");
    cu.live_dev = (int *)dlsym(h, "fake_cuda_live_device_allocs");
    cu.live_host = (int *)dlsym(h, "fake_cuda_live_host_allocs");
    cu.live_streams = (int *)dlsym(h, "fake_cuda_live_streams");
    cu.live_events = (int *)dlsym(h, "fake_cuda_live_events");
    cu.ipc_opens = (int *)dlsym(h, "fake_cuda_ipc_opens");
    return cu.contexts && cu.live_dev && cu.live_host && cu.live_streams && cu.live_events && cu.ipc_opens ? 0 : -1;
}

static int ndev(void)
{
    const char *v = getenv("FAKE_CUDA_DEVICES");
    int n = v && v[0] ? atoi(v) : 1;
    return n > NDEV_MAX ? NDEV_MAX : n;
}

static bool threads(const mlc_comm_t *comm) { return strcmp(mlc_comm_backend(comm), "threads") == 0; }

static int32_t val(int rank, size_t i) { return (int32_t)(rank * 1000 + (int)i); }

/* The devices with a context in this process, as text ("" = none). */
static const char *contexts_text(void)
{
    static char buf[64];
    buf[0] = '\0';
    for (int d = 0; d < ndev(); d++)
        if (cu.contexts(d)) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%d", buf[0] ? ", " : "", d);
    return buf;
}

static int host_collectives(mlc_comm_t *comm)
{
    int rank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int32_t send[N], sum[N], *all = malloc((size_t)p * N * sizeof *all);
    CHECK(all != NULL, "malloc");
    for (size_t i = 0; i < N; i++) send[i] = val(rank, i);
    CHECK_OK(mlc_allreduce(send, sum, N, MLC_INT32, MLC_SUM, comm, NULL));
    for (size_t i = 0; i < N; i++) {
        int32_t want = 0;
        for (int q = 0; q < p; q++) want += val(q, i);
        CHECK(sum[i] == want, "allreduce[%zu] = %d, want %d", i, sum[i], want);
    }
    /* many chunks (MLC_STAGE_CHUNK is small), blocked layout: packed through staging buffers */
    CHECK_OK(mlc_allgather(send, all, N, MLC_INT32, comm, NULL));
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < N; i++)
            CHECK(all[(size_t)q * N + i] == val(q, i), "allgather block %d [%zu] = %d", q, i, all[(size_t)q * N + i]);
    CHECK_OK(mlc_broadcast(send, send, N, MLC_INT32, 0, comm, NULL));
    for (size_t i = 0; i < N; i++) CHECK(send[i] == val(0, i), "broadcast[%zu] = %d", i, send[i]);
    free(all);
    return 0;
}

static int case_host_only(mlc_comm_t *comm)
{
    /* auto found a runtime with devices: device memory is accepted, on the rule's device. */
    CHECK(mlc_comm_memory(comm) == MLC_MEMORY_KIND_CUDA, "mlc_comm_memory = %d, want CUDA", (int)mlc_comm_memory(comm));
    CHECK(mlc_comm_device(comm) == mlc_comm_rank(comm) % ndev(), "mlc_comm_device = %d, want %d",
          mlc_comm_device(comm), mlc_comm_rank(comm) % ndev());
    CHECK_RUN(host_collectives(comm));
    CHECK(contexts_text()[0] == '\0', "a host-only job created a context on device(s) %s", contexts_text());
    CHECK(*cu.live_dev == 0 && *cu.live_host == 0, "a host-only job allocated %d device and %d pinned block(s)",
          *cu.live_dev, *cu.live_host);
    CHECK(*cu.live_streams == 0 && *cu.live_events == 0, "a host-only job created %d stream(s) and %d event(s)",
          *cu.live_streams, *cu.live_events);
    return 0;
}

/* An allgather of device buffers on `device` (made current by the test, as an application does). */
static int device_allgather(mlc_comm_t *comm, int device)
{
    int rank = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int32_t h[N], *all = malloc((size_t)p * N * sizeof *all);
    void *send, *recv;
    CHECK(all != NULL, "malloc");
    CHECK(cu.set_device(device) == 0, "cudaSetDevice(%d)", device);
    CHECK(cu.malloc_(&send, sizeof h) == 0 && cu.malloc_(&recv, (size_t)p * sizeof h) == 0, "cudaMalloc");
    for (size_t i = 0; i < N; i++) h[i] = val(rank, i);
    cu.memcpy_(send, h, sizeof h, 4, NULL);
    cu.sync(NULL);
    CHECK_OK(mlc_allgather(send, recv, N, MLC_INT32, comm, NULL));
    cu.memcpy_(all, recv, (size_t)p * sizeof h, 4, NULL);
    cu.sync(NULL);
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < N; i++)
            CHECK(all[(size_t)q * N + i] == val(q, i), "device allgather block %d [%zu] = %d", q, i,
                  all[(size_t)q * N + i]);
    cu.free_(send);
    cu.free_(recv);
    free(all);
    return 0;
}

static int case_choice(mlc_comm_t *comm)
{
    const char *forced = getenv("MLC_DEVICE");
    int rank = mlc_comm_rank(comm); /* one host: the local rank */
    int want = forced ? atoi(forced) : rank % ndev();
    CHECK(mlc_comm_memory(comm) == MLC_MEMORY_KIND_CUDA && mlc_comm_device(comm) == want,
          "mlc_comm_memory = %d, mlc_comm_device = %d; want CUDA, %d", (int)mlc_comm_memory(comm),
          mlc_comm_device(comm), want);
    if (!threads(comm)) CHECK(contexts_text()[0] == '\0', "creating the communicator made a context on %s", contexts_text());
    CHECK_RUN(device_allgather(comm, want));
    if (threads(comm)) return 0; /* every rank's contexts are in this process */
    char expect[8];
    snprintf(expect, sizeof expect, "%d", want);
    CHECK(strcmp(contexts_text(), expect) == 0, "rank %d should use device %d only; contexts on: %s", rank, want,
          contexts_text());
    return 0;
}

static int case_probe(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "shm") != 0) return 0; /* CUDA IPC is between shm processes */
    bool refused = strcmp(getenv("PROBE_EXPECT") ? getenv("PROBE_EXPECT") : "", "refused") == 0;
    int device = mlc_comm_rank(comm) % ndev();
    CHECK(*cu.live_dev == 0 && *cu.ipc_opens == 0 && contexts_text()[0] == '\0',
          "creating the communicator allocated %d device block(s), mapped %d, made contexts on '%s'", *cu.live_dev,
          *cu.ipc_opens, contexts_text());
    CHECK_RUN(host_collectives(comm));
    CHECK(*cu.ipc_opens == 0 && contexts_text()[0] == '\0', "host calls mapped %d peer allocation(s), contexts on '%s'",
          *cu.ipc_opens, contexts_text());
    CHECK_RUN(device_allgather(comm, device));
    int opens = *cu.ipc_opens;
    CHECK(opens > 0, "the first call with device buffers on every rank did not probe IPC");
    CHECK(*cu.live_dev == 0, "%d device allocation(s) left after the call (the probe's?)", *cu.live_dev);
    CHECK_RUN(device_allgather(comm, device));
    if (refused)
        CHECK(*cu.ipc_opens == opens, "after a refused probe, a later call tried IPC again (%d more opens)",
              *cu.ipc_opens - opens);
    else
        CHECK(*cu.ipc_opens > opens, "after a successful probe, the next call did not move data through IPC");
    return 0;
}

static int body(mlc_comm_t *comm)
{
    const char *c = getenv("DEVICE_CASE");
    c = c ? c : "";
    if (strcmp(c, "host_only") == 0) return case_host_only(comm);
    if (strcmp(c, "choice") == 0) return case_choice(comm);
    if (strcmp(c, "probe") == 0) return case_probe(comm);
    fprintf(stderr, "DEVICE_CASE=%s: unknown case\n", c);
    return 1;
}

/* No harness: the communicator must not come to be. */
static int bad_device(void)
{
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    const char *msg = st == MLC_SUCCESS ? "" : mlc_last_error();
    if (st != MLC_ERR_CONFIG || !strstr(msg, "MLC_DEVICE")) {
        fprintf(stderr, "mlc_comm_init with MLC_DEVICE=%s: %s (%s), want MLC_ERR_CONFIG naming MLC_DEVICE\n",
                getenv("MLC_DEVICE"), mlc_status_name(st), msg);
        if (comm) mlc_comm_free(comm);
        return 1;
    }
    printf("refused: %s\n", msg);
    return 0;
}

/* One nccl rank on the doubles: its device, and no context elsewhere. */
static int nccl_device(void)
{
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlc_comm_init: %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 1;
    }
    char expect[8];
    snprintf(expect, sizeof expect, "%s", getenv("DEVICE_EXPECT") ? getenv("DEVICE_EXPECT") : "0");
    int bad = strcmp(contexts_text(), expect) != 0;
    if (bad) fprintf(stderr, "nccl: want a context on device %s only; contexts on: '%s'\n", expect, contexts_text());
    if (mlc_comm_memory(comm) != MLC_MEMORY_KIND_CUDA || mlc_comm_device(comm) != atoi(expect)) {
        fprintf(stderr, "nccl: mlc_comm_memory = %d, mlc_comm_device = %d; want CUDA, %s\n", (int)mlc_comm_memory(comm),
                mlc_comm_device(comm), expect);
        bad = 1;
    }
    mlc_comm_free(comm);
    return bad;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (load_double() != 0) {
        printf("SKIP: needs the CUDA test double (fake_cuda_contexts_created) in MLC_CUDART_LIB\n");
        return MLC_TEST_SKIP;
    }
    if (argc > 1 && strcmp(argv[1], "bad_device") == 0) return bad_device();
    if (argc > 1 && strcmp(argv[1], "nccl_device") == 0) return nccl_device();
    return mlc_test_main(argc, argv, body);
}
