/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The nccl backend on a real GPU with the real NCCL: every collective on
 * device buffers allocated with cudaMalloc through the loader, host buffers
 * (staged), bfloat16 and avg, a user stream, an asynchronous request,
 * split. One rank when run alone; under `mlcomm-run -n N` one GPU per rank.
 * Without a GPU (or NCCL, or enough GPUs) it prints "SKIP: <reason>" and
 * exits 77. Values are small integers, so float results compare exactly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../unit/unit.h"
#include "core/backend.h"
#include "base/dtype.h"
#include "devrt/gpurt.h"

static const mlc_gpurt_t *rt;
static void *stream; /* for test copies */
static int rank, size;

static void *dalloc(size_t bytes)
{
    void *p = NULL;
    if (rt->malloc(&p, bytes ? bytes : 1) != 0) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", bytes);
        exit(1);
    }
    return p;
}

static void h2d(void *d, const void *h, size_t bytes)
{
    rt->memcpy_async(d, h, bytes, MLC_GPU_MEMCPY_DEFAULT, stream);
    rt->stream_synchronize(stream);
}

static void d2h(void *h, const void *d, size_t bytes)
{
    rt->memcpy_async(h, d, bytes, MLC_GPU_MEMCPY_DEFAULT, stream);
    rt->stream_synchronize(stream);
}

/* value of element i contributed by rank r */
static float val(int r, size_t i) { return (float)((r + 1) * 10 + (int)(i % 13)); }

static void test_allreduce(mlc_comm_t *comm)
{
    const size_t n = 4099;
    float *h = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = val(rank, i);
    float *ds = dalloc(n * sizeof(float)), *dr = dalloc(n * sizeof(float));
    h2d(ds, h, n * sizeof(float));
    CHECK_OK(mlc_allreduce(ds, dr, n, MLC_FLOAT32, MLC_SUM, comm, NULL));
    d2h(out, dr, n * sizeof(float));
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        float want = 0;
        for (int r = 0; r < size; r++) want += val(r, i);
        if (out[i] != want) {
            bad = 1;
            CHECK(0, "allreduce sum [%zu] = %g, want %g", i, out[i], want);
        }
    }
    /* avg of p*k values is exact: feed p * (i % 7) from every rank */
    for (size_t i = 0; i < n; i++) h[i] = (float)(size * (int)(i % 7));
    h2d(ds, h, n * sizeof(float));
    CHECK_OK(mlc_allreduce(ds, ds, n, MLC_FLOAT32, MLC_AVG, comm, NULL)); /* in place */
    d2h(out, ds, n * sizeof(float));
    for (size_t i = 0; i < n && !bad; i++)
        if (out[i] != (float)(size * (int)(i % 7))) {
            bad = 1;
            CHECK(0, "avg [%zu] = %g", i, out[i]);
        }
    /* bfloat16 sum of small integers */
    uint16_t *hb = malloc(n * sizeof(uint16_t)), *ob = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) hb[i] = mlc_float_to_bf16((float)(rank + (int)(i % 5)));
    uint16_t *db = dalloc(n * sizeof(uint16_t));
    h2d(db, hb, n * sizeof(uint16_t));
    CHECK_OK(mlc_allreduce(db, db, n, MLC_BFLOAT16, MLC_SUM, comm, NULL));
    d2h(ob, db, n * sizeof(uint16_t));
    for (size_t i = 0; i < n && !bad; i++) {
        float want = 0;
        for (int r = 0; r < size; r++) want += (float)(r + (int)(i % 5));
        if (mlc_bf16_to_float(ob[i]) != want) {
            bad = 1;
            CHECK(0, "bf16 [%zu] = %g want %g", i, mlc_bf16_to_float(ob[i]), want);
        }
    }
    /* int32 max, and a host buffer (staged through pinned memory) */
    int32_t hi[64], ho[64];
    for (int i = 0; i < 64; i++) hi[i] = rank * 100 + i;
    CHECK_OK(mlc_allreduce(hi, ho, 64, MLC_INT32, MLC_MAX, comm, NULL));
    for (int i = 0; i < 64; i++) CHECK(ho[i] == (size - 1) * 100 + i, "host max [%d] = %d", i, ho[i]);
    rt->free(ds);
    rt->free(dr);
    rt->free(db);
    free(h);
    free(out);
    free(hb);
    free(ob);
}

static void test_rooted_and_gathers(mlc_comm_t *comm)
{
    const size_t n = 1000;
    size_t all = n * (size_t)size;
    float *h = malloc(all * sizeof(float)), *out = malloc(all * sizeof(float));
    float *ds = dalloc(all * sizeof(float)), *dr = dalloc(all * sizeof(float));
    int root = size - 1;

    for (size_t i = 0; i < n; i++) h[i] = val(rank, i);
    h2d(ds, h, n * sizeof(float));
    CHECK_OK(mlc_broadcast(ds, dr, n, MLC_FLOAT32, root, comm, NULL));
    d2h(out, dr, n * sizeof(float));
    for (size_t i = 0; i < n; i++) CHECK(out[i] == val(root, i), "broadcast [%zu] = %g", i, out[i]);

    CHECK_OK(mlc_reduce(ds, rank == 0 ? dr : NULL, n, MLC_FLOAT32, MLC_SUM, 0, comm, NULL));
    if (rank == 0) {
        d2h(out, dr, n * sizeof(float));
        float want = 0;
        for (int r = 0; r < size; r++) want += val(r, 3);
        CHECK(out[3] == want, "reduce [3] = %g want %g", out[3], want);
    }

    CHECK_OK(mlc_allgather(ds, dr, n, MLC_FLOAT32, comm, NULL));
    d2h(out, dr, all * sizeof(float));
    for (int r = 0; r < size; r++) CHECK(out[(size_t)r * n + 7] == val(r, 7), "allgather block %d", r);

    /* reduce_scatter: every rank contributes val(rank, i) for all size*n elements */
    for (size_t i = 0; i < all; i++) h[i] = val(rank, i);
    h2d(ds, h, all * sizeof(float));
    CHECK_OK(mlc_reduce_scatter(ds, dr, n, MLC_FLOAT32, MLC_SUM, comm, NULL));
    d2h(out, dr, n * sizeof(float));
    float want = 0;
    for (int r = 0; r < size; r++) want += val(r, (size_t)rank * n + 1);
    CHECK(out[1] == want, "reduce_scatter [1] = %g want %g", out[1], want);

    /* alltoall: block j of rank r holds r*1000 + j; in place too */
    for (int j = 0; j < size; j++)
        for (size_t i = 0; i < n; i++) h[(size_t)j * n + i] = (float)(rank * 1000 + j);
    h2d(ds, h, all * sizeof(float));
    CHECK_OK(mlc_alltoall(ds, dr, n, MLC_FLOAT32, comm, NULL));
    d2h(out, dr, all * sizeof(float));
    for (int j = 0; j < size; j++) CHECK(out[(size_t)j * n + 5] == (float)(j * 1000 + rank), "alltoall block %d", j);
    CHECK_OK(mlc_alltoall(ds, ds, n, MLC_FLOAT32, comm, NULL));
    d2h(out, ds, all * sizeof(float));
    for (int j = 0; j < size; j++) CHECK(out[(size_t)j * n + 5] == (float)(j * 1000 + rank), "alltoall in place block %d", j);

    /* gather / scatter to and from the last rank */
    for (size_t i = 0; i < n; i++) h[i] = val(rank, i);
    h2d(ds, h, n * sizeof(float));
    CHECK_OK(mlc_gather(ds, rank == root ? dr : NULL, n, MLC_FLOAT32, root, comm, NULL));
    if (rank == root) {
        d2h(out, dr, all * sizeof(float));
        for (int r = 0; r < size; r++) CHECK(out[(size_t)r * n + 2] == val(r, 2), "gather block %d", r);
    }
    if (rank == root) {
        for (int r = 0; r < size; r++)
            for (size_t i = 0; i < n; i++) h[(size_t)r * n + i] = (float)(r * 7);
        h2d(ds, h, all * sizeof(float));
    }
    CHECK_OK(mlc_scatter(rank == root ? ds : NULL, dr, n, MLC_FLOAT32, root, comm, NULL));
    d2h(out, dr, n * sizeof(float));
    CHECK(out[n - 1] == (float)(rank * 7), "scatter got %g", out[n - 1]);

    /* allgatherv: rank r sends r+1 elements */
    size_t *counts = malloc((size_t)size * sizeof *counts), *displs = malloc((size_t)size * sizeof *displs);
    size_t off = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = (size_t)r + 1;
        displs[r] = off;
        off += counts[r] + 3; /* gaps */
    }
    for (size_t i = 0; i < n; i++) h[i] = (float)(rank + 100);
    h2d(ds, h, n * sizeof(float));
    CHECK_OK(mlc_allgatherv(ds, (size_t)rank + 1, dr, counts, displs, MLC_FLOAT32, comm, NULL));
    d2h(out, dr, off * sizeof(float));
    for (int r = 0; r < size; r++) CHECK(out[displs[r] + (size_t)r] == (float)(r + 100), "allgatherv block %d", r);
    free(counts);
    free(displs);

    /* sendrecv around a ring */
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    for (size_t i = 0; i < n; i++) h[i] = (float)(rank * 3);
    h2d(ds, h, n * sizeof(float));
    mlc_msg_status_t ms;
    CHECK_OK(mlc_sendrecv(ds, n, to, 0, dr, n, from, 0, MLC_FLOAT32, comm, &ms, NULL));
    d2h(out, dr, n * sizeof(float));
    CHECK(out[9] == (float)(from * 3) && ms.source == from && ms.bytes == n * sizeof(float), "sendrecv got %g from %d",
          out[9], ms.source);
    CHECK_OK(mlc_barrier(comm, NULL));
    rt->free(ds);
    rt->free(dr);
    free(h);
    free(out);
}

static void test_stream_and_async(mlc_comm_t *comm)
{
    const size_t n = 1 << 20;
    void *mine = NULL;
    CHECK(rt->stream_create_with_flags(&mine, 1) == 0, "cudaStreamCreateWithFlags");
    CHECK_OK(mlc_comm_set_stream(comm, mine));
    float *d = dalloc(n * sizeof(float));
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = 1.0f;
    h2d(d, h, n * sizeof(float));
    mlc_request_t *req = NULL;
    CHECK_OK(mlc_allreduce(d, d, n, MLC_FLOAT32, MLC_SUM, comm, &req));
    int done = 0, tests = 0;
    while (!done && tests < 1000000) {
        CHECK_OK(mlc_request_test(&req, &done));
        tests++;
    }
    CHECK(done, "async allreduce never completed");
    if (!done) CHECK_OK(mlc_request_wait(&req));
    /* The result is ready once the request completed: no extra stream sync needed. */
    rt->memcpy_async(h, d, n * sizeof(float), MLC_GPU_MEMCPY_DEFAULT, mine);
    rt->stream_synchronize(mine);
    CHECK(h[n - 1] == (float)size && h[0] == (float)size, "async result %g", h[0]);
    CHECK_OK(mlc_comm_set_stream(comm, NULL));
    rt->stream_destroy(mine);
    rt->free(d);
    free(h);
}

static void test_split(mlc_comm_t *comm)
{
    mlc_comm_t *half = NULL;
    mlc_status_t st = mlc_comm_split(comm, rank % 2, rank, &half);
    if (st == MLC_ERR_UNSUPPORTED) {
        printf("split: %s\n", mlc_last_error());
        return;
    }
    CHECK_OK(st);
    if (!half) return;
    int expect = (size + 1 - rank % 2) / 2;
    CHECK(mlc_comm_size(half) == expect && mlc_comm_rank(half) == rank / 2, "split %d of %d",
          mlc_comm_rank(half), mlc_comm_size(half));
    int32_t one = 1, total = 0;
    CHECK_OK(mlc_allreduce(&one, &total, 1, MLC_INT32, MLC_SUM, half, NULL));
    CHECK(total == expect, "split allreduce %d", total);
    CHECK_OK(mlc_comm_free(half));
}

int main(void)
{
    char why[256];
    if (!mlc_backend_nccl.available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    if (mlc_gpurt_get(MLC_GPU_CUDA, &rt) != MLC_SUCCESS) {
        printf("SKIP: %s\n", mlc_last_error());
        return 77;
    }
    int ndev = 0;
    mlc_gpurt_device_count(rt, &ndev);
    const char *ls = getenv("MLC_LOCAL_SIZE");
    int local = ls ? atoi(ls) : 1;
    if (local > ndev) {
        printf("SKIP: %d ranks on this host need %d GPUs, %d visible\n", local, local, ndev);
        return 77;
    }
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = "nccl";
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(&cfg, &comm);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlc_comm_init(nccl): %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 1;
    }
    rank = mlc_comm_rank(comm);
    size = mlc_comm_size(comm);
    rt->stream_create_with_flags(&stream, 1);
    test_allreduce(comm);
    test_rooted_and_gathers(comm);
    test_stream_and_async(comm);
    test_split(comm);
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "communicator failed: %s", mlc_status_name(mlc_comm_status(comm)));
    CHECK_OK(mlc_comm_free(comm));
    rt->stream_destroy(stream);
    return unit_result("nccl_device");
}
