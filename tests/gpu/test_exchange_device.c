/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The halo exchange over arrays in device memory: 2-D, 3-D and 4-D fields
 * (several patches per rank, uneven cuts, periodic and open axes, ghost
 * widths 1-3, a rank without a patch) exchanged once over host buffers and
 * once over device copies of them; every cell must come out the same, and
 * right. Then split phase and double buffering on device buffers, and the
 * refusals: an executor that copies on the host (mpi_pack, mpi_subarray)
 * is refused for device views at provide / need / set_data /
 * set_executor, naming the view and the executor.
 *
 * Runs on the CUDA test double with FAKE_CUDA_GUARD=1 (device memory is
 * PROT_NONE to the host: any host access to a device pointer crashes, as on
 * a GPU), on threads / shm / mpi with MLC_MEMORY=cuda and on nccl (the fake
 * NCCL, one rank); the same on the double built as HIP (MLC_MEMORY=rocm,
 * and rccl). Without a runtime or device: "SKIP: <reason>", exit 77.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include "../exchange/xfield.h"
#include "../ranks/harness.h"
#include "devrt/pinned.h"
#include "mlcomm_exchange.h"

typedef struct cuda {
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_async)(void *, const void *, size_t, int, void *);
    int (*stream_sync)(void *);
    int (*device_count)(int *);
} cuda_t;
static cuda_t cu;
static int *copies2d; /* the double's count of 2-D copies (NULL on a real runtime) */
/* The double's counts of frees of memory that queued work still targets and of
 * synchronizing calls stuck work stopped (they never return on a GPU), and its
 * release of stuck work (NULL on a real runtime). */
static int *queued_frees, *stuck_waits;
static void (*unstick)(void);
static const char *rt_name = "CUDA";
static const char *skip_why;

/* The runtime mlcomm uses here: HIP for MLC_MEMORY=rocm or MLC_BACKEND=rccl, else CUDA. */
static int load_cuda(void)
{
    const char *mem = getenv("MLC_MEMORY"), *be = getenv("MLC_BACKEND");
    bool hip = (mem && strcmp(mem, "rocm") == 0) || (be && strcmp(be, "rccl") == 0);
    const char *env = getenv(hip ? "MLC_HIPRT_LIB" : "MLC_CUDART_LIB"), *pre = hip ? "hip" : "cuda";
    const char *cuda_names[] = {env && env[0] ? env : "libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};
    const char *hip_names[] = {env && env[0] ? env : "libamdhip64.so.6", "libamdhip64.so", NULL};
    const char **names = hip ? hip_names : cuda_names;
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        skip_why = hip ? "no HIP runtime library" : "no CUDA runtime library";
        return -1;
    }
    char sym[64];
#define RT_SYM(name) (snprintf(sym, sizeof sym, "%s%s", pre, name), dlsym(h, sym))
    cu.malloc_ = (int (*)(void **, size_t))RT_SYM("Malloc");
    cu.free_ = (int (*)(void *))RT_SYM("Free");
    cu.memcpy_async = (int (*)(void *, const void *, size_t, int, void *))RT_SYM("MemcpyAsync");
    cu.stream_sync = (int (*)(void *))RT_SYM("StreamSynchronize");
    cu.device_count = (int (*)(int *))RT_SYM("GetDeviceCount");
#undef RT_SYM
    copies2d = (int *)dlsym(h, "fake_cuda_memcpy2d_calls");
    queued_frees = (int *)dlsym(h, "fake_cuda_queued_frees");
    stuck_waits = (int *)dlsym(h, "fake_cuda_stuck_waits");
    *(void **)&unstick = dlsym(h, "fake_cuda_unstick");
    rt_name = hip ? "HIP" : "CUDA";
    int n = 0;
    if (!cu.malloc_ || !cu.memcpy_async || !cu.device_count || cu.device_count(&n) != 0 || n < 1) {
        skip_why = hip ? "no HIP device" : "no CUDA device";
        return -1;
    }
    return 0;
}

/* Host <-> device through the runtime (kind Default), waited for. */
static int dev_copy(void *dst, const void *src, size_t n)
{
    return cu.memcpy_async(dst, src, n, 4, NULL) || cu.stream_sync(NULL);
}

static const xlayout_t layouts[] = {
    /* ndim origin domain cuts ghost periodic esize empty_rank */
    {2, {0, 0}, {24, 19}, {3, 4}, {2, 2}, {1, 1}, 8, -1},
    {2, {3, -2}, {17, 11}, {4, 3}, {1, 2}, {1, 0}, 12, 0},
    {3, {0, 0, 0}, {9, 7, 8}, {2, 3, 2}, {1, 1, 1}, {1, 1, 1}, 8, 2},
    {3, {0, 0, 0}, {6, 8, 5}, {2, 2, 1}, {3, 2, 1}, {0, 1, 1}, 2, -1},
    /* 4-D: copies of more than three merged axes are chains of 2-D copies */
    {4, {0, 0, 0, 0}, {4, 5, 3, 6}, {2, 1, 1, 2}, {1, 1, 1, 1}, {1, 1, 0, 1}, 8, -1},
};

static size_t patch_bytes(const xfield_t *f, int i)
{
    size_t bytes = f->L.esize;
    for (int d = 0; d < f->L.ndim; d++) bytes *= (size_t)f->p[i].parent.shape[d];
    return bytes;
}

/* Declare f's patches with their data at dev[i] instead (device memory). */
static mlc_status_t declare_at(xfield_t *f, unsigned char **dev, mlc_exchange_t *ex)
{
    unsigned char **host = calloc((size_t)f->np + 1, sizeof *host);
    if (!host) return MLC_ERR_NO_MEMORY;
    for (int i = 0; i < f->np; i++) {
        host[i] = f->p[i].data;
        f->p[i].data = dev[i];
    }
    mlc_status_t st = xfield_declare(f, ex);
    for (int i = 0; i < f->np; i++) f->p[i].data = host[i];
    free(host);
    return st;
}

/* host field f -> device buffers */
static int upload(const xfield_t *f, unsigned char **dev)
{
    for (int i = 0; i < f->np; i++)
        if (dev_copy(dev[i], f->p[i].data, patch_bytes(f, i))) return -1;
    return 0;
}

/* device buffers -> host field g */
static int download(xfield_t *g, unsigned char **dev)
{
    for (int i = 0; i < g->np; i++)
        if (dev_copy(g->p[i].data, dev[i], patch_bytes(g, i))) return -1;
    return 0;
}

static unsigned char **dev_alloc(const xfield_t *f)
{
    unsigned char **dev = calloc((size_t)f->np + 1, sizeof *dev);
    for (int i = 0; dev && i < f->np; i++)
        if (cu.malloc_((void **)&dev[i], patch_bytes(f, i))) return NULL;
    return dev;
}

static void dev_free(const xfield_t *f, unsigned char **dev)
{
    for (int i = 0; dev && i < f->np; i++) cu.free_(dev[i]);
    free(dev);
}

/* The device exchange's field (downloaded into g) equals the host exchange's (f), and is right. */
static int same_as_host(mlc_comm_t *comm, const xfield_t *f, xfield_t *g, unsigned char **dev,
                        uint64_t iter, int which, const char *what)
{
    char why[256];
    CHECK(download(g, dev) == 0, "layout %d %s: copying the device field back failed", which, what);
    for (int i = 0; i < f->np; i++)
        CHECK_MEM(g->p[i].data, f->p[i].data, patch_bytes(f, i), f->L.esize,
                  "layout %d %s: patch %d differs from the host exchange", which, what, i);
    long bad = xfield_verify(g, iter, why, sizeof why);
    CHECK(bad == 0, "layout %d %s: %ld wrong cells, first: %s", which, what, bad, why);
    return 0;
}

static int run_layout(mlc_comm_t *comm, const xlayout_t *L, int which)
{
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    xfield_t f, g;
    CHECK(xfield_make(&f, L, rank, size) == 0 && xfield_make(&g, L, rank, size) == 0,
          "layout %d: out of memory", which);
    unsigned char **dev = dev_alloc(&f), **dev2 = dev_alloc(&f);
    CHECK(dev && dev2, "layout %d: cudaMalloc failed", which);
    mlc_exchange_config_t cfg = xfield_config(L);
    mlc_exchange_t *hx = NULL, *dx = NULL;
    CHECK_OK(mlc_exchange_create(comm, &cfg, &hx));
    CHECK_OK(mlc_exchange_create(comm, &cfg, &dx));
    CHECK_OK(xfield_declare(&f, hx));
    CHECK_OK(declare_at(&f, dev, dx));
    CHECK_OK(mlc_exchange_build(hx));
    CHECK_OK(mlc_exchange_build(dx));
    int before = copies2d ? *copies2d : 0;
    for (uint64_t it = 0; it < 2; it++) {
        xfield_fill(&f, it);
        CHECK(upload(&f, dev) == 0, "layout %d: upload failed", which);
        CHECK_OK(mlc_exchange_run(hx));
        CHECK_OK(mlc_exchange_run(dx));
        CHECK_RUN(same_as_host(comm, &f, &g, dev, it, which, "blocking run"));
    }
    mlc_exchange_info_t hi, di;
    CHECK_OK(mlc_exchange_info(hx, &hi));
    CHECK_OK(mlc_exchange_info(dx, &di));
    CHECK(strcmp(di.executor, "p2p") == 0, "layout %d: device views ran on executor %s", which,
          di.executor);
    CHECK(hi.send_bytes == di.send_bytes && hi.recv_bytes == di.recv_bytes &&
              hi.local_copies == di.local_copies,
          "layout %d: the device plan differs from the host plan", which);
    /* Device copies really went through the runtime's 2-D copies. */
    if (copies2d && di.local_copies + di.send_segments + di.recv_segments > 0)
        CHECK(*copies2d > before || di.local_bytes + di.send_bytes + di.recv_bytes == 0,
              "layout %d: no cudaMemcpy2DAsync was made", which);
    /* Split phase. */
    xfield_fill(&f, 7);
    CHECK(upload(&f, dev) == 0, "upload");
    CHECK_OK(mlc_exchange_run(hx));
    CHECK_OK(mlc_exchange_start(dx));
    CHECK_ERR(mlc_exchange_start(dx), MLC_ERR_BUSY);
    CHECK_OK(mlc_exchange_finish(dx));
    CHECK_RUN(same_as_host(comm, &f, &g, dev, 7, which, "split phase"));
    /* Double buffering: the same plan on other device buffers. */
    for (int i = 0; i < f.np; i++) {
        xpatch_t *x = &f.p[i];
        CHECK_OK(mlc_exchange_set_data(dx, MLC_EXCHANGE_PROVIDE, x->prov_id, dev2[i]));
        for (int h = 0; h < x->nneeds; h++)
            CHECK_OK(mlc_exchange_set_data(dx, MLC_EXCHANGE_NEED, x->need_first + h, dev2[i]));
    }
    xfield_fill(&f, 8);
    CHECK(upload(&f, dev2) == 0, "upload");
    CHECK_OK(mlc_exchange_run(hx));
    CHECK_OK(mlc_exchange_run(dx));
    CHECK_RUN(same_as_host(comm, &f, &g, dev2, 8, which, "other buffers"));
    CHECK_OK(mlc_exchange_free(dx));
    CHECK_OK(mlc_exchange_free(hx));
    dev_free(&f, dev);
    dev_free(&f, dev2);
    xfield_free(&f);
    xfield_free(&g);
    return 0;
}

/* MPI executors pack on the host (or hand MPI a datatype over host
 * addresses): device views are refused where they first appear. */
static int refusals(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0) return 0;
    const xlayout_t *L = &layouts[0];
    mlc_exchange_config_t cfg = xfield_config(L);
    enum { N = 64 };
    void *d = NULL;
    double host[N];
    CHECK(cu.malloc_(&d, N * sizeof(double)) == 0, "cudaMalloc");
    int64_t zero[2] = {0, 0}, n[2] = {8, 8};
    mlc_view_t v = {d, mlc_box_make(2, zero, n), mlc_box_make(2, zero, n)};
    const char *execs[] = {"mpi_pack", "mpi_subarray"};
    for (int k = 0; k < 2; k++) {
        mlc_exchange_t *ex = NULL;
        CHECK_OK(mlc_exchange_create(comm, &cfg, &ex));
        mlc_status_t st = mlc_exchange_set_executor(ex, execs[k]);
        if (st == MLC_ERR_UNSUPPORTED) { /* no MPI module executors in this build */
            mlc_exchange_free(ex);
            break;
        }
        CHECK_OK(st);
        CHECK_ERR(mlc_exchange_provide(ex, &v, NULL), MLC_ERR_UNSUPPORTED);
        CHECK(strstr(mlc_last_error(), "mlc_exchange_provide: view.data") &&
                  strstr(mlc_last_error(), "device memory, which executor") &&
                  strstr(mlc_last_error(), rt_name) &&
                  strstr(mlc_last_error(), execs[k]),
              "provide: unexpected message: %s", mlc_last_error());
        CHECK_ERR(mlc_exchange_need(ex, &v, NULL), MLC_ERR_UNSUPPORTED);
        /* A host view is fine; pointing it at device memory is not. */
        v.data = host;
        int id;
        CHECK_OK(mlc_exchange_need(ex, &v, &id));
        CHECK_ERR(mlc_exchange_set_data(ex, MLC_EXCHANGE_NEED, id, d), MLC_ERR_UNSUPPORTED);
        CHECK(strstr(mlc_last_error(), "need 0 data") && strstr(mlc_last_error(), execs[k]),
              "set_data: unexpected message: %s", mlc_last_error());
        /* Device views first (auto: p2p), then an executor that cannot move them. */
        CHECK_OK(mlc_exchange_set_executor(ex, "auto"));
        CHECK_OK(mlc_exchange_set_data(ex, MLC_EXCHANGE_NEED, id, d));
        CHECK_ERR(mlc_exchange_set_executor(ex, execs[k]), MLC_ERR_UNSUPPORTED);
        CHECK(strstr(mlc_last_error(), "need 0 is ") && strstr(mlc_last_error(), rt_name) &&
                  strstr(mlc_last_error(), execs[k]),
              "set_executor: unexpected message: %s", mlc_last_error());
        v.data = d;
        CHECK_OK(mlc_exchange_free(ex));
    }
    cu.free_(d);
    return 0;
}

/* GPU work that never finishes (the double's events never complete, or with
 * FAKE_CUDA_STUCK its copies never run): the exchange's wait for its copies
 * gives up after MLC_TIMEOUT with MLC_ERR_TIMEOUT naming the phase, instead
 * of blocking in the runtime forever (a stream synchronize cannot be
 * interrupted). The copies may still run later, so the exchange must never
 * free (or hand back to the pinned pool) the buffers they target, nor run
 * again: the double counts every free of memory that queued work targets. */
static int stuck_gpu(mlc_comm_t *comm)
{
    const xlayout_t *L = &layouts[0];
    const int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    xfield_t f;
    CHECK(xfield_make(&f, L, rank, size) == 0, "out of memory");
    unsigned char **dev = dev_alloc(&f);
    CHECK(dev, "cudaMalloc failed");
    mlc_exchange_config_t cfg = xfield_config(L);
    mlc_exchange_t *dx = NULL;
    CHECK_OK(mlc_exchange_create(comm, &cfg, &dx));
    CHECK_OK(declare_at(&f, dev, dx));
    CHECK_OK(mlc_exchange_build(dx));
    mlc_exchange_info_t di;
    CHECK_OK(mlc_exchange_info(dx, &di));
    CHECK(di.local_copies > 0 || di.send_peers > 0, "layout 0 at %d rank(s) has no copy to wait for", size);
    double t0 = mlc_test_now();
    CHECK_ERR(mlc_exchange_run(dx), MLC_ERR_TIMEOUT);
    CHECK(strstr(mlc_last_error(), "exchange") && strstr(mlc_last_error(), "did not finish"),
          "unexpected message: %s", mlc_last_error());
    CHECK(mlc_test_now() - t0 < 30, "the timeout took %.0f s", mlc_test_now() - t0);
    /* Its buffers may still be written: the exchange refuses to run again. */
    CHECK_ERR(mlc_exchange_run(dx), MLC_ERR_TIMEOUT);
    CHECK(strstr(mlc_last_error(), "did not finish"), "second run: unexpected message: %s", mlc_last_error());
    mlc_exchange_free(dx);
    if (queued_frees) {
        /* Pinned buffers given back to the pool are unpinned (cudaFreeHost) by a trim. */
        mlc_pinned_pool_t *pool = NULL;
        CHECK_OK(mlc_pinned_default(&pool));
        mlc_pinned_trim(pool);
        CHECK(*queued_frees == 0, "%d buffer(s) freed while GPU copies into or out of them were queued",
              *queued_frees);
    }
    if (stuck_waits)
        CHECK(*stuck_waits == 0, "%d call(s) waited for the stuck copies without a timeout", *stuck_waits);
    /* Every rank checked before the copies may run and the views go. */
    CHECK_OK(mlc_barrier(comm, NULL));
    if (unstick && getenv("FAKE_CUDA_STUCK")) unstick();
    CHECK_OK(mlc_barrier(comm, NULL));
    dev_free(&f, dev);
    xfield_free(&f);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (getenv("XDEV_EXPECT_STUCK")) return stuck_gpu(comm);
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        CHECK_RUN(run_layout(comm, &layouts[i], (int)i));
    CHECK_RUN(refusals(comm));
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
