/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The nccl backend end to end through the public API, on the test doubles
 * of the CUDA runtime and NCCL (fake_cudart.c, fake_nccl.c): one-rank
 * communicators, so every collective's mapping, staging of host buffers,
 * stream handling, requests, split, abort, timeouts and failure handling run
 * their real code. The fake NCCL accepts device memory only, so a host
 * buffer that reaches it unstaged fails the test.
 *
 *   gpu_nccl_fake [ops]        every operation, host and device buffers
 *   gpu_nccl_fake inprogress   NCCL answers ncclInProgress everywhere
 *   gpu_nccl_fake async_error  an asynchronous NCCL error fails the communicator
 *   gpu_nccl_fake timeout      an operation that never completes: TIMEOUT, then abort
 *   gpu_nccl_fake init_timeout two processes, unique id over shm and over TCP,
 *                              an NCCL init that never completes
 *   gpu_nccl_fake nosplit      an NCCL without ncclCommSplit
 *   gpu_nccl_fake rccl         the rccl backend: the same doubles as HIP and RCCL
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../unit/unit.h"
#include "core/backend.h"
#include "devrt/gpurt.h"
#include "devrt/pinned.h"
#include "backends/nccl/ncclapi.h"

static const mlc_gpurt_t *rt;
static void *fake_nccl_lib, *fake_cuda_lib;
static const char *backend = "nccl";   /* or "rccl" */
static const char *runtime_lib = FAKE_CUDART;
static mlc_gpu_kind_t gpu_kind = MLC_GPU_CUDA;

static int *ncounter(const char *name)
{
    int *p = dlsym(fake_nccl_lib, name);
    if (!p) {
        fprintf(stderr, "fake NCCL lacks %s\n", name);
        exit(2);
    }
    return p;
}
static int *ccounter(const char *name)
{
    int *p = dlsym(fake_cuda_lib, name);
    if (!p) {
        fprintf(stderr, "fake CUDA lacks %s\n", name);
        exit(2);
    }
    return p;
}

static mlc_comm_t *make_comm(double timeout)
{
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = backend;
    if (timeout > 0) cfg.timeout_s = timeout;
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(&cfg, &comm);
    CHECK(st == MLC_SUCCESS, "mlc_comm_init(nccl): %s: %s", mlc_status_name(st), mlc_last_error());
    return st == MLC_SUCCESS ? comm : NULL;
}

static void load_fakes(void)
{
    const char *nccl = getenv(gpu_kind == MLC_GPU_HIP ? "MLC_RCCL_LIB" : "MLC_NCCL_LIB");
    fake_cuda_lib = dlopen(runtime_lib, RTLD_NOW | RTLD_NOLOAD);
    fake_nccl_lib = nccl ? dlopen(nccl, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!fake_cuda_lib || !fake_nccl_lib) {
        fprintf(stderr, "the fake libraries were not loaded by the backend\n");
        exit(2);
    }
    if (mlc_gpurt_get(gpu_kind, &rt) != MLC_SUCCESS) exit(2);
}

static float *dev_floats(size_t n)
{
    void *p = NULL;
    if (rt->malloc(&p, n * sizeof(float)) != 0) exit(2);
    return p;
}

static void fill(float *x, size_t n, float base)
{
    for (size_t i = 0; i < n; i++) x[i] = base + (float)i;
}

static int same(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* ---- every operation -------------------------------------------------------------- */
static void test_collectives(mlc_comm_t *comm, bool host)
{
    const size_t n = 1000;
    const char *kind = host ? "host" : "device";
    float *s = host ? malloc(4 * n * sizeof(float)) : dev_floats(4 * n);
    float *r = host ? malloc(4 * n * sizeof(float)) : dev_floats(4 * n);
    float ref[4000];
    int *dtype = ncounter("fake_nccl_last_dtype"), *op = ncounter("fake_nccl_last_op");

    fill(s, n, 1);
    memset(r, 0xee, n * sizeof(float));
    CHECK_OK(mlc_allreduce(s, r, n, MLC_FLOAT32, MLC_SUM, comm, NULL));
    fill(ref, n, 1);
    CHECK(same(r, ref, n), "%s allreduce result", kind);
    CHECK(*dtype == 7 && *op == 0, "float32 sum mapped to dtype %d op %d", *dtype, *op);
    CHECK_OK(mlc_allreduce(s, r, n, MLC_BFLOAT16, MLC_AVG, comm, NULL));
    CHECK(*dtype == 9 && *op == 4, "bfloat16 avg mapped to dtype %d op %d", *dtype, *op);
    CHECK_OK(mlc_allreduce(s, r, n, MLC_UINT64, MLC_MIN, comm, NULL));
    CHECK(*dtype == 5 && *op == 3, "uint64 min mapped to dtype %d op %d", *dtype, *op);
    CHECK_OK(mlc_allreduce(r, r, n / 2, MLC_FLOAT16, MLC_PROD, comm, NULL)); /* in place */
    CHECK(*dtype == 6 && *op == 1, "float16 prod mapped to dtype %d op %d", *dtype, *op);

    fill(s, n, 10);
    memset(r, 0, n * sizeof(float));
    CHECK_OK(mlc_broadcast(s, r, n, MLC_FLOAT32, 0, comm, NULL));
    fill(ref, n, 10);
    CHECK(same(r, ref, n), "%s broadcast", kind);
    CHECK_OK(mlc_broadcast(r, r, n, MLC_FLOAT32, 0, comm, NULL));
    CHECK(same(r, ref, n), "%s broadcast in place", kind);

    fill(s, n, 20);
    CHECK_OK(mlc_reduce(s, r, n, MLC_FLOAT32, MLC_MAX, 0, comm, NULL));
    fill(ref, n, 20);
    CHECK(same(r, ref, n) && *op == 2, "%s reduce (op %d)", kind, *op);

    fill(s, n, 30);
    CHECK_OK(mlc_allgather(s, r, n, MLC_FLOAT32, comm, NULL));
    fill(ref, n, 30);
    CHECK(same(r, ref, n), "%s allgather", kind);
    CHECK_OK(mlc_allgather(r, r, n, MLC_FLOAT32, comm, NULL)); /* in place: rank 0's block */
    CHECK(same(r, ref, n), "%s allgather in place", kind);

    fill(s, n, 40);
    CHECK_OK(mlc_reduce_scatter(s, r, n, MLC_FLOAT32, MLC_SUM, comm, NULL));
    fill(ref, n, 40);
    CHECK(same(r, ref, n), "%s reduce_scatter", kind);

    /* alltoall, also in place (sends from a scratch copy) */
    fill(s, n, 50);
    CHECK_OK(mlc_alltoall(s, r, n, MLC_FLOAT32, comm, NULL));
    fill(ref, n, 50);
    CHECK(same(r, ref, n), "%s alltoall", kind);
    fill(r, n, 55);
    CHECK_OK(mlc_alltoall(r, r, n, MLC_FLOAT32, comm, NULL));
    fill(ref, n, 55);
    CHECK(same(r, ref, n), "%s alltoall in place", kind);

    /* v-forms with a gap in the receive buffer that must survive */
    size_t cnt[1] = {100}, sd[1] = {5}, rd[1] = {300};
    fill(s, n, 60);
    fill(r, n, -1000);
    CHECK_OK(mlc_alltoallv(s, cnt, sd, r, cnt, rd, MLC_FLOAT32, comm, NULL));
    float gap[1000];
    fill(gap, n, -1000);
    fill(ref, n, 65);
    CHECK(same(r + 300, ref, 100), "%s alltoallv block", kind);
    CHECK(same(r, gap, 300) && same(r + 400, gap + 400, n - 400), "%s alltoallv overwrote the gaps", kind);
    fill(r, n, -1000);
    CHECK_OK(mlc_allgatherv(s, 100, r, cnt, rd, MLC_FLOAT32, comm, NULL));
    fill(ref, n, 60);
    CHECK(same(r + 300, ref, 100) && same(r, gap, 300), "%s allgatherv", kind);
    fill(r, n, -1000);
    CHECK_OK(mlc_gatherv(s, 100, r, cnt, rd, MLC_FLOAT32, 0, comm, NULL));
    CHECK(same(r + 300, ref, 100) && same(r + 400, gap + 400, 600), "%s gatherv", kind);
    CHECK_OK(mlc_scatterv(s, cnt, sd, r, 100, MLC_FLOAT32, 0, comm, NULL));
    fill(ref, n, 65);
    CHECK(same(r, ref, 100), "%s scatterv", kind);
    fill(s, n, 70);
    CHECK_OK(mlc_gather(s, r, n, MLC_FLOAT32, 0, comm, NULL));
    fill(ref, n, 70);
    CHECK(same(r, ref, n), "%s gather", kind);
    CHECK_OK(mlc_scatter(s, r, n, MLC_FLOAT32, 0, comm, NULL));
    CHECK(same(r, ref, n), "%s scatter", kind);

    /* point to point: a sendrecv with myself */
    fill(s, n, 80);
    mlc_msg_status_t ms = {-1, -1, 0};
    CHECK_OK(mlc_sendrecv(s, n, 0, 0, r, n, 0, MLC_ANY_TAG, MLC_FLOAT32, comm, &ms, NULL));
    fill(ref, n, 80);
    CHECK(same(r, ref, n), "%s sendrecv", kind);
    CHECK(ms.source == 0 && ms.tag == 0 && ms.bytes == n * sizeof(float), "status %d %d %zu", ms.source,
          ms.tag, ms.bytes);

    /* records move as bytes, cannot be reduced */
    CHECK_OK(mlc_broadcast(s, r, 10, MLC_RECORD(12), 0, comm, NULL));
    CHECK(*dtype == 1, "records should move as uint8, got dtype %d", *dtype);
    mlc_status_t st = mlc_allreduce(s, r, 10, MLC_RECORD(12), MLC_SUM, comm, NULL);
    CHECK(st == MLC_ERR_INVALID_ARG || st == MLC_ERR_UNSUPPORTED, "reducing records: %s", mlc_status_name(st));
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_OK(mlc_allreduce(s, r, 0, MLC_FLOAT32, MLC_SUM, comm, NULL));

    if (host) {
        free(s);
        free(r);
    } else {
        rt->free(s);
        rt->free(r);
    }
}

static void user_sum(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx) {}

static void test_refusals(mlc_comm_t *comm)
{
    float *d = dev_floats(64);
    CHECK_ERR_MSG(mlc_send(d, 4, MLC_FLOAT32, 0, 5, comm, NULL), MLC_ERR_UNSUPPORTED, "tag 5");
    CHECK_ERR_MSG(mlc_recv(d, 4, MLC_FLOAT32, MLC_ANY_SOURCE, 0, comm, NULL, NULL), MLC_ERR_UNSUPPORTED,
                  "MLC_ANY_SOURCE");
    CHECK_ERR_MSG(mlc_recv(d, 4, MLC_FLOAT32, 0, 3, comm, NULL, NULL), MLC_ERR_UNSUPPORTED, "NCCL has no tags");
    mlc_msg_status_t ms;
    int flag;
    CHECK_ERR_MSG(mlc_iprobe(0, 0, comm, &flag, &ms), MLC_ERR_UNSUPPORTED, "probe is not possible");
    mlc_op_t op;
    CHECK_OK(mlc_op_create(user_sum, 1, NULL, &op));
    CHECK_ERR_MSG(mlc_allreduce(d, d, 4, MLC_FLOAT32, op, comm, NULL), MLC_ERR_UNSUPPORTED, "user-defined");
    mlc_op_free(op);
    /* A device buffer of another device. */
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    void *other = NULL;
    rt->set_device(1);
    rt->malloc(&other, 64);
    rt->set_device(0);
    CHECK_ERR_MSG(mlc_allreduce(other, d, 4, MLC_FLOAT32, MLC_SUM, comm, NULL), MLC_ERR_INVALID_ARG,
                  "device 1 but the communicator uses device 0");
    rt->free(other);
    unsetenv("FAKE_CUDA_DEVICES");
    /* To itself outside a group a send (or receive) never completes on NCCL,
     * the other half being queued behind it: refused before NCCL sees it,
     * for NCCL 2.28 keeps a refused call as the communicator's error. */
    mlc_request_t *req = NULL;
    CHECK_ERR_MSG(mlc_send(d, 4, MLC_FLOAT32, 0, 0, comm, NULL), MLC_ERR_INVALID_ARG, "mlc_group_start");
    CHECK_ERR_MSG(mlc_recv(d, 4, MLC_FLOAT32, 0, 0, comm, NULL, &req), MLC_ERR_INVALID_ARG, "mlc_group_start");
    CHECK(req == NULL, "a refused call handed out a request");
    /* In a group both halves are posted together. */
    float *e = dev_floats(4);
    CHECK_OK(mlc_group_start());
    CHECK_OK(mlc_send(d, 4, MLC_FLOAT32, 0, 0, comm, NULL));
    CHECK_OK(mlc_recv(e, 4, MLC_FLOAT32, 0, 0, comm, NULL, NULL));
    CHECK_OK(mlc_group_end());
    rt->free(e);
    /* The communicator is still healthy after refused calls. */
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "refusals failed the communicator");
    CHECK_OK(mlc_allreduce(d, d, 4, MLC_FLOAT32, MLC_SUM, comm, NULL));
    rt->free(d);
}

static void test_async_and_stream(mlc_comm_t *comm)
{
    const size_t n = 256;
    float *s = malloc(n * sizeof(float)), *r = malloc(n * sizeof(float)), ref[256];
    fill(s, n, 3);
    fill(ref, n, 3);
    memset(r, 0, n * sizeof(float));
    setenv("FAKE_CUDA_EVENT_POLLS", "4", 1);
    mlc_request_t *req = NULL;
    CHECK_OK(mlc_allreduce(s, r, n, MLC_FLOAT32, MLC_SUM, comm, &req));
    int done = 0;
    CHECK_OK(mlc_request_test(&req, &done));
    CHECK(!done && req != NULL, "completed before its event");
    CHECK(r[5] == 0.0f, "host result delivered before the event completed");
    int tests = 1;
    while (!done && tests < 100) {
        CHECK_OK(mlc_request_test(&req, &done));
        tests++;
    }
    CHECK(done && req == NULL && tests >= 4, "done %d after %d tests", done, tests);
    CHECK(same(r, ref, n), "async host allreduce result");
    /* wait after a few outstanding */
    mlc_request_t *reqs[3];
    for (int i = 0; i < 3; i++) CHECK_OK(mlc_allreduce(s, r, n, MLC_FLOAT32, MLC_SUM, comm, &reqs[i]));
    CHECK_OK(mlc_request_wait_all(3, reqs, NULL));
    unsetenv("FAKE_CUDA_EVENT_POLLS");

    void **last_stream = dlsym(fake_nccl_lib, "fake_nccl_last_stream");
    void *mine = NULL;
    CHECK(rt->stream_create_with_flags(&mine, 1) == 0, "stream");
    CHECK_OK(mlc_comm_set_stream(comm, mine));
    CHECK_OK(mlc_allreduce(s, r, n, MLC_FLOAT32, MLC_SUM, comm, NULL));
    CHECK(*last_stream == mine, "operation not on the stream set (%p, expected %p)", *last_stream, mine);
    CHECK_OK(mlc_comm_set_stream(comm, NULL));
    CHECK_OK(mlc_allreduce(s, r, n, MLC_FLOAT32, MLC_SUM, comm, NULL));
    CHECK(*last_stream == NULL, "set_stream(NULL) should mean the default stream");
    rt->stream_destroy(mine);
    free(s);
    free(r);
}

static void test_split_and_algo(mlc_comm_t *comm)
{
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 3, 0, &child));
    CHECK(child && mlc_comm_size(child) == 1 && mlc_comm_rank(child) == 0, "child");
    if (child) {
        float *d = dev_floats(8);
        CHECK_OK(mlc_allreduce(d, d, 8, MLC_FLOAT32, MLC_SUM, child, NULL));
        rt->free(d);
        CHECK_OK(mlc_comm_free(child));
    }
    child = (mlc_comm_t *)1;
    CHECK_OK(mlc_comm_split(comm, MLC_UNDEFINED, 0, &child));
    CHECK(child == NULL, "MLC_UNDEFINED gave a communicator");

    /* allreduce may be forced to ring or tree, but only before NCCL starts. */
    float x = 1;
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLREDUCE, "ring"));
    CHECK_ERR_MSG(mlc_allreduce(&x, &x, 1, MLC_FLOAT32, MLC_SUM, comm, NULL), MLC_ERR_UNSUPPORTED,
                  "cannot be switched per call");
    CHECK_ERR_MSG(mlc_comm_set_algo(comm, MLC_COLL_BROADCAST, "ring"), MLC_ERR_INVALID_ARG, "no broadcast algorithm");
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLREDUCE, NULL));
    CHECK_OK(mlc_allreduce(&x, &x, 1, MLC_FLOAT32, MLC_SUM, comm, NULL));
}

static void test_pinned_limit(mlc_comm_t *comm)
{
    /* MLC_PINNED_LIMIT=16M (ctest): a 32 MiB host buffer cannot be staged. */
    size_t n = 8u << 20;
    float *big = calloc(n, sizeof(float));
    CHECK_ERR_MSG(mlc_allreduce(big, big, n, MLC_FLOAT32, MLC_SUM, comm, NULL), MLC_ERR_NO_MEMORY,
                  "pinned memory limit reached");
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "a staging refusal failed the communicator");
    free(big);
    mlc_pinned_pool_t *pool;
    mlc_pinned_stats_t st;
    CHECK_OK(mlc_pinned_default(&pool));
    mlc_pinned_get_stats(pool, &st);
    CHECK(st.hits > 0 && st.bytes_in_use == 0, "staging blocks: %llu hits, %zu in use",
          (unsigned long long)st.hits, st.bytes_in_use);
}

static void test_abort(void)
{
    int aborts = *ncounter("fake_nccl_aborts");
    mlc_comm_t *comm = make_comm(0);
    if (!comm) return;
    setenv("FAKE_CUDA_EVENT_NEVER", "1", 1);
    float *d = dev_floats(16);
    mlc_request_t *req;
    CHECK_OK(mlc_allreduce(d, d, 16, MLC_FLOAT32, MLC_SUM, comm, &req));
    int done = 1;
    CHECK_OK(mlc_request_test(&req, &done));
    CHECK(!done, "an operation that never ends completed");
    CHECK_OK(mlc_comm_abort(comm));
    CHECK_ERR_MSG(mlc_request_wait(&req), MLC_ERR_ABORTED, "");
    CHECK(*ncounter("fake_nccl_aborts") == aborts + 1, "ncclCommAbort not called");
    CHECK_ERR_MSG(mlc_allreduce(d, d, 16, MLC_FLOAT32, MLC_SUM, comm, NULL), MLC_ERR_ABORTED, "");
    CHECK_OK(mlc_comm_free(comm));
    CHECK(*ncounter("fake_nccl_aborts") == aborts + 1, "aborted twice");
    unsetenv("FAKE_CUDA_EVENT_NEVER");
    rt->free(d);
}

/* A request pending when its communicator is freed stays valid: it ends ABORTED. */
static void test_free_pending(void)
{
    mlc_comm_t *comm = make_comm(0);
    if (!comm) return;
    setenv("FAKE_CUDA_EVENT_NEVER", "1", 1);
    float *d = dev_floats(16);
    mlc_request_t *req, *req2;
    CHECK_OK(mlc_allreduce(d, d, 16, MLC_FLOAT32, MLC_SUM, comm, &req));
    CHECK_OK(mlc_broadcast(d, d, 16, MLC_FLOAT32, 0, comm, &req2));
    CHECK_OK(mlc_comm_free(comm));
    CHECK_ERR_MSG(mlc_request_wait(&req), MLC_ERR_ABORTED, "freed");
    int done = 0;
    CHECK_ERR_MSG(mlc_request_test(&req2, &done), MLC_ERR_ABORTED, "freed");
    CHECK(done && !req && !req2, "handles not released");
    unsetenv("FAKE_CUDA_EVENT_NEVER");
    rt->free(d);
}

static void test_backend_table(void)
{
    char why[256] = "";
    CHECK(mlc_backend_nccl.available(why, sizeof why) == 1, "nccl not available on the doubles: %s", why);
    CHECK(mlc_backend_rccl.available(why, sizeof why) == 0 && strstr(why, "MLC_RCCL_LIB"), "rccl: %s", why);
    mlc_cfg_t cfg;
    CHECK_OK(mlc_config_resolve(NULL, &cfg));
    CHECK(!mlc_backend_nccl.accepts(&cfg), "auto must not pick nccl for host memory");
    cfg.memory = MLC_MEMORY_CUDA;
    CHECK(mlc_backend_nccl.accepts(&cfg) && !mlc_backend_rccl.accepts(&cfg), "memory kinds");
    /* auto with CUDA memory picks nccl */
    mlc_config_t c = MLC_CONFIG_INIT;
    c.memory = MLC_MEMORY_CUDA;
    mlc_comm_t *comm = NULL;
    CHECK_OK(mlc_comm_init(&c, &comm));
    CHECK(comm && strcmp(mlc_comm_backend(comm), "nccl") == 0, "auto chose %s", comm ? mlc_comm_backend(comm) : "-");
    mlc_comm_free(comm);
}

/* An argument NCCL refuses although mlcomm let it through: before NCCL 2.28
 * the call fails alone; from 2.28 on NCCL keeps the refusal as the
 * communicator's error, so the communicator fails at once, saying so. */
static void test_refused_by_nccl(void)
{
    float *d = dev_floats(4);
    setenv("FAKE_NCCL_VERSION", "22700", 1);
    mlc_comm_t *comm = make_comm(0);
    if (comm) {
        setenv("FAKE_NCCL_REFUSE", "1", 1);
        CHECK_ERR_MSG(mlc_allreduce(d, d, 4, MLC_FLOAT32, MLC_SUM, comm, NULL), MLC_ERR_INVALID_ARG, "refused");
        unsetenv("FAKE_NCCL_REFUSE");
        CHECK_OK(mlc_allreduce(d, d, 4, MLC_FLOAT32, MLC_SUM, comm, NULL));
        mlc_comm_free(comm);
    }
    setenv("FAKE_NCCL_VERSION", "22809", 1);
    comm = make_comm(0);
    if (comm) {
        setenv("FAKE_NCCL_REFUSE", "1", 1);
        CHECK_ERR_MSG(mlc_allreduce(d, d, 4, MLC_FLOAT32, MLC_SUM, comm, NULL), MLC_ERR_ABORTED,
                      "cannot be used again");
        unsetenv("FAKE_NCCL_REFUSE");
        CHECK(mlc_comm_status(comm) == MLC_ERR_ABORTED, "status %s", mlc_status_name(mlc_comm_status(comm)));
        mlc_comm_free(comm);
    }
    unsetenv("FAKE_NCCL_VERSION");
    rt->free(d);
}

/* A group whose first operation NCCL refuses: the operations after it were
 * never handed to NCCL, and must end with an error saying so at
 * mlc_group_end, not stay pending until the timeout. */
static void test_group_refused(void)
{
    float *d = dev_floats(4), *e = dev_floats(4);
    setenv("FAKE_NCCL_VERSION", "22700", 1); /* a refusal that does not end the communicator */
    mlc_comm_t *comm = make_comm(0);
    if (comm) {
        mlc_request_t *r[2] = {NULL, NULL};
        CHECK_OK(mlc_group_start());
        setenv("FAKE_NCCL_REFUSE", "1", 1);
        CHECK_OK(mlc_allreduce(d, d, 4, MLC_FLOAT32, MLC_SUM, comm, &r[0]));
        CHECK_OK(mlc_allreduce(e, e, 4, MLC_FLOAT32, MLC_SUM, comm, &r[1]));
        mlc_status_t st = mlc_group_end();
        unsetenv("FAKE_NCCL_REFUSE");
        CHECK(st != MLC_SUCCESS, "group_end of a refused group succeeded");
        for (int i = 0; i < 2; i++) {
            int done = 0;
            mlc_status_t rs = mlc_request_test(&r[i], &done);
            CHECK(done && rs != MLC_SUCCESS, "grouped allreduce %d after a refused one: done %d, %s", i, done,
                  mlc_status_name(rs));
            if (!done) mlc_comm_abort(comm), mlc_request_wait(&r[i]);
        }
        mlc_comm_free(comm);
    }
    unsetenv("FAKE_NCCL_VERSION");
    rt->free(d);
    rt->free(e);
}

/* NCCL_COMM_BLOCKING=1 makes NCCL ignore the config's non-blocking mode:
 * every NCCL call could then block beyond MLC_TIMEOUT and mlc_comm_abort.
 * Refused at init, naming the variable; 0 is fine. */
static void test_comm_blocking(void)
{
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = backend;
    mlc_comm_t *comm = NULL;
    setenv("NCCL_COMM_BLOCKING", "1", 1);
    mlc_status_t st = mlc_comm_init(&cfg, &comm);
    CHECK(st == MLC_ERR_CONFIG && strstr(mlc_last_error(), "NCCL_COMM_BLOCKING=1"),
          "init with NCCL_COMM_BLOCKING=1: %s: %s (NCCL made it blocking: %d)", mlc_status_name(st),
          mlc_last_error(), *ncounter("fake_nccl_last_blocking"));
    if (comm) mlc_comm_free(comm);
    comm = NULL;
    setenv("NCCL_COMM_BLOCKING", "0", 1);
    CHECK_OK(mlc_comm_init(&cfg, &comm));
    CHECK(*ncounter("fake_nccl_last_blocking") == 0, "NCCL_COMM_BLOCKING=0: blocking %d",
          *ncounter("fake_nccl_last_blocking"));
    if (comm) mlc_comm_free(comm);
    unsetenv("NCCL_COMM_BLOCKING");
}

static void test_ops(void)
{
    int live_events = *ccounter("fake_cuda_live_events"), live_streams = *ccounter("fake_cuda_live_streams");
    int live_dev = *ccounter("fake_cuda_live_device_allocs");
    int finals = *ncounter("fake_nccl_finalizes"), destroys = *ncounter("fake_nccl_destroys");
    int aborts = *ncounter("fake_nccl_aborts");
    mlc_comm_t *comm = make_comm(0);
    if (!comm) return;
    CHECK(*ncounter("fake_nccl_last_blocking") == 0, "NCCL communicator must be non-blocking");
    CHECK(mlc_comm_size(comm) == 1 && strcmp(mlc_comm_backend(comm), backend) == 0, "comm");
    test_collectives(comm, false);
    test_collectives(comm, true);
    test_refusals(comm);
    test_async_and_stream(comm);
    test_split_and_algo(comm);
    test_pinned_limit(comm);
    CHECK_OK(mlc_comm_free(comm));
    /* A clean free finalizes and destroys, and gives back every GPU resource. */
    CHECK(*ncounter("fake_nccl_finalizes") == finals + 2 && *ncounter("fake_nccl_destroys") == destroys + 2,
          "finalize/destroy not called for comm and child");
    CHECK(*ncounter("fake_nccl_aborts") == aborts, "a clean free aborted");
    CHECK(*ncounter("fake_nccl_live_comms") == 0, "NCCL communicators leaked");
    CHECK(*ccounter("fake_cuda_live_events") == live_events, "events leaked: %d", *ccounter("fake_cuda_live_events") - live_events);
    CHECK(*ccounter("fake_cuda_live_streams") == live_streams, "streams leaked");
    CHECK(*ccounter("fake_cuda_live_device_allocs") == live_dev, "device memory leaked: %d",
          *ccounter("fake_cuda_live_device_allocs") - live_dev);
    test_abort();
    test_free_pending();
    test_refused_by_nccl();
    test_group_refused();
    test_comm_blocking();
    if (gpu_kind == MLC_GPU_CUDA) test_backend_table();
}

/* ---- failure modes ------------------------------------------------------------------ */
static void test_inprogress(void)
{
    setenv("FAKE_NCCL_INPROGRESS", "3", 1);
    int finals = *ncounter("fake_nccl_finalizes");
    mlc_comm_t *comm = make_comm(0);
    if (!comm) return;
    test_collectives(comm, false);
    test_collectives(comm, true);
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, 0, &child));
    CHECK_OK(mlc_comm_free(child));
    CHECK_OK(mlc_comm_free(comm));
    CHECK(*ncounter("fake_nccl_finalizes") == finals + 2, "finalize not completed");
    CHECK(*ncounter("fake_nccl_live_comms") == 0, "NCCL communicators leaked");
}

static void test_async_error(void)
{
    setenv("FAKE_NCCL_ASYNC_ERROR", "6", 1); /* ncclRemoteError after the first collective */
    int aborts = *ncounter("fake_nccl_aborts");
    mlc_comm_t *comm = make_comm(0);
    if (!comm) return;
    float *d = dev_floats(16);
    CHECK_OK(mlc_allreduce(d, d, 16, MLC_FLOAT32, MLC_SUM, comm, NULL));
    setenv("FAKE_CUDA_EVENT_NEVER", "1", 1); /* the next one waits: health notices the error */
    CHECK_ERR_MSG(mlc_allreduce(d, d, 16, MLC_FLOAT32, MLC_SUM, comm, NULL), MLC_ERR_PEER_LOST,
                  "remote process exited");
    CHECK(mlc_comm_status(comm) == MLC_ERR_PEER_LOST, "status %s", mlc_status_name(mlc_comm_status(comm)));
    CHECK(*ncounter("fake_nccl_aborts") == aborts + 1, "NCCL communicator not aborted");
    CHECK_ERR_MSG(mlc_barrier(comm, NULL), MLC_ERR_PEER_LOST, "remote process exited");
    CHECK_OK(mlc_comm_free(comm));
    rt->free(d);
}

static void test_timeout(void)
{
    int aborts = *ncounter("fake_nccl_aborts");
    mlc_comm_t *comm = make_comm(1.0);
    if (!comm) return;
    setenv("FAKE_CUDA_EVENT_NEVER", "1", 1);
    float *d = dev_floats(16);
    CHECK_ERR_MSG(mlc_allreduce(d, d, 16, MLC_FLOAT32, MLC_SUM, comm, NULL), MLC_ERR_TIMEOUT, "MLC_TIMEOUT");
    CHECK(strstr(mlc_last_error(), "NCCL does not report"), "message: %s", mlc_last_error());
    CHECK(mlc_comm_status(comm) == MLC_ERR_TIMEOUT, "status %s", mlc_status_name(mlc_comm_status(comm)));
    CHECK_OK(mlc_comm_free(comm));
    CHECK(*ncounter("fake_nccl_aborts") == aborts + 1, "a timed-out communicator must be aborted on free");
    rt->free(d);
}

/* Two processes; rank 1 is a child. Returns the child's pid in *child (rank 0) or 0. */
static int fork_rank(pid_t *child)
{
    *child = fork();
    return *child == 0 ? 1 : 0;
}

/* Both ranks reach NCCL init with rank 0's id, which then never completes. */
static int init_two(const char *how, int port)
{
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t child;
    int rank = fork_rank(&child);
    char job[64];
    snprintf(job, sizeof job, "gpu-init-%s-%d", how, (int)(rank ? getppid() : getpid()));
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = "nccl";
    cfg.timeout_s = 2.0;
    if (strcmp(how, "tcp") == 0) {
        char p[16], r[8];
        snprintf(p, sizeof p, "%d", port - 1);
        snprintf(r, sizeof r, "%d", rank);
        setenv("RANK", r, 1);
        setenv("LOCAL_RANK", r, 1);
        setenv("WORLD_SIZE", "2", 1);
        setenv("LOCAL_WORLD_SIZE", "2", 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", p, 1);
        setenv("MLC_JOB_ID", job, 1);
    } else {
        cfg.rank = cfg.local_rank = rank;
        cfg.world_size = cfg.local_size = 2;
        cfg.job_id = job;
    }
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(&cfg, &comm);
    fake_nccl_lib = dlopen(getenv("MLC_NCCL_LIB"), RTLD_NOW | RTLD_NOLOAD);
    if (!fake_nccl_lib) _exit(3);
    char *id = dlsym(fake_nccl_lib, "fake_nccl_last_id");
    int ok = st == MLC_ERR_TIMEOUT && strstr(mlc_last_error(), "ncclCommInitRank still in progress") &&
             *ncounter("fake_nccl_aborts") == 1 && *ncounter("fake_nccl_live_comms") == 0 && id[0];
    if (!ok) fprintf(stderr, "%s rank %d: %s: %s\n", how, rank, mlc_status_name(st), mlc_last_error());
    if (rank == 1) {
        ssize_t w = write(fds[1], id, 128);
        _exit(ok && w == 128 ? 0 : 1);
    }
    char theirs[128];
    ssize_t got = read(fds[0], theirs, sizeof theirs);
    int status = 0;
    waitpid(child, &status, 0);
    close(fds[0]);
    close(fds[1]);
    CHECK(ok, "%s: rank 0 did not see the NCCL init time out", how);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank 1 failed", how);
    CHECK(got == 128 && memcmp(theirs, id, 128) == 0 && strncmp(id, "fake-nccl-id-", 13) == 0,
          "%s: the ranks used different unique ids", how);
    return 0;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

static void test_nosplit(void)
{
    mlc_comm_t *comm = make_comm(0);
    if (!comm) return;
    mlc_comm_t *child = NULL;
    CHECK_ERR_MSG(mlc_comm_split(comm, 0, 0, &child), MLC_ERR_UNSUPPORTED, "ncclCommSplit");
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "an unsupported split failed the communicator");
    CHECK_OK(mlc_comm_free(comm));
}

/* Expect mlc_comm_init to fail with MLC_ERR_CONFIG and a message holding every needle. */
static void init_fails(const char *const *needles)
{
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = backend;
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(&cfg, &comm);
    CHECK(st == MLC_ERR_CONFIG && comm == NULL, "mlc_comm_init: %s: %s", mlc_status_name(st), mlc_last_error());
    for (int i = 0; needles[i]; i++)
        CHECK(strstr(mlc_last_error(), needles[i]) != NULL, "message lacks '%s': %s", needles[i], mlc_last_error());
    if (comm) mlc_comm_free(comm);
}

static const char *env_or_unset(const char *name)
{
    const char *v = getenv(name);
    return v ? v : "(unset)";
}

/*
 * Channels go to NCCL per communicator (ncclConfig_t minCTAs = maxCTAs, also
 * for split children); NCCL_ALGO and NCCL_BUFFSIZE, which NCCL reads from the
 * process environment once, are set before the first communicator and a later
 * one asking for another value fails naming both.
 */
static void test_tuning(void)
{
    setenv("MLC_NCCL_NCHANNELS", "4", 1);
    setenv("MLC_NCCL_BUFFSIZE", "8M", 1);
    setenv("MLC_ALGO_ALLREDUCE", "tree", 1);
    mlc_comm_t *a = make_comm(0); /* the process's first NCCL communicator */
    if (!a) return;
    load_fakes();
    int *min_ctas = ncounter("fake_nccl_last_min_ctas"), *max_ctas = ncounter("fake_nccl_last_max_ctas");
    CHECK(*min_ctas == 4 && *max_ctas == 4, "channels in the config: %d..%d", *min_ctas, *max_ctas);
    CHECK_STR(env_or_unset("NCCL_MIN_NCHANNELS"), "(unset)");
    CHECK_STR(env_or_unset("NCCL_MAX_NCHANNELS"), "(unset)");
    CHECK_STR(env_or_unset("NCCL_BUFFSIZE"), "8388608");
    CHECK_STR(env_or_unset("NCCL_ALGO"), "allreduce:tree");

    /* Another channel count is another communicator's business; its split child keeps it. */
    setenv("MLC_NCCL_NCHANNELS", "8", 1);
    mlc_comm_t *b = make_comm(0);
    CHECK(*min_ctas == 8 && *max_ctas == 8, "second communicator's channels: %d..%d", *min_ctas, *max_ctas);
    mlc_comm_t *child = NULL;
    if (b) CHECK_OK(mlc_comm_split(b, 0, 0, &child));
    CHECK(*min_ctas == 8 && *max_ctas == 8, "split child's channels: %d..%d", *min_ctas, *max_ctas);
    if (child) mlc_comm_free(child);
    if (b) mlc_comm_free(b);

    /* Unset: NCCL decides. Not asking for a buffer size or an algorithm accepts the process's. */
    unsetenv("MLC_NCCL_NCHANNELS");
    unsetenv("MLC_NCCL_BUFFSIZE");
    unsetenv("MLC_ALGO_ALLREDUCE");
    mlc_comm_t *c = make_comm(0);
    CHECK(*min_ctas == MLC_NCCL_CONFIG_UNDEF_INT && *max_ctas == MLC_NCCL_CONFIG_UNDEF_INT,
          "unset channels: %d..%d", *min_ctas, *max_ctas);
    if (c) mlc_comm_free(c);

    /* Another process-wide value: refused, naming both. */
    setenv("MLC_NCCL_BUFFSIZE", "16M", 1);
    init_fails((const char *const[]){"MLC_NCCL_BUFFSIZE", "NCCL_BUFFSIZE=16777216", "8388608", NULL});
    unsetenv("MLC_NCCL_BUFFSIZE");
    setenv("MLC_ALGO_ALLREDUCE", "ring", 1);
    init_fails((const char *const[]){"MLC_ALGO_ALLREDUCE", "NCCL_ALGO=allreduce:ring", "allreduce:tree", NULL});
    unsetenv("MLC_ALGO_ALLREDUCE");
    CHECK_STR(env_or_unset("NCCL_BUFFSIZE"), "8388608");
    mlc_comm_free(a);
}

/* The first communicator asked for nothing: a later one's buffer size would never reach NCCL. */
static void test_tuning_late(void)
{
    mlc_comm_t *a = make_comm(0);
    if (!a) return;
    setenv("MLC_NCCL_BUFFSIZE", "8M", 1);
    init_fails((const char *const[]){"NCCL_BUFFSIZE=8388608", "unset (NCCL's default)", NULL});
    CHECK_STR(env_or_unset("NCCL_BUFFSIZE"), "(unset)");
    unsetenv("MLC_NCCL_BUFFSIZE");
    mlc_comm_free(a);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ops";
    if (strcmp(mode, "nosplit") == 0) setenv("MLC_NCCL_LIB", FAKE_NCCL_NOSPLIT, 1);
    if (strcmp(mode, "rccl") == 0) {
        backend = "rccl";
        runtime_lib = FAKE_HIP;
        gpu_kind = MLC_GPU_HIP;
        setenv("MLC_HIPRT_LIB", FAKE_HIP, 1);
        setenv("MLC_RCCL_LIB", FAKE_RCCL, 1);
        setenv("MLC_PINNED_LIMIT", "16M", 1);
    }
    if (strcmp(mode, "init_timeout") == 0) {
        /* Load in each process (after fork) so counters start at 0. */
        int port = free_port();
        if (port <= 1) return 2;
        pid_t pid = fork();
        if (pid == 0) {
            int rc = init_two("shm", 0);
            _exit(rc || check_failures ? 1 : 0);
        }
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "shm bootstrap case failed");
        pid = fork();
        if (pid == 0) {
            int rc = init_two("tcp", port);
            _exit(rc || check_failures ? 1 : 0);
        }
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tcp bootstrap case failed");
        return unit_result(mode);
    }
    if (strcmp(mode, "tuning") == 0 || strcmp(mode, "tuning_late") == 0) {
        if (strcmp(mode, "tuning") == 0) test_tuning();
        else test_tuning_late();
        return unit_result(mode);
    }
    /* Load the doubles through the backend, as an application would. */
    mlc_comm_t *first = make_comm(0);
    if (!first) return unit_result(mode);
    mlc_comm_free(first);
    load_fakes();
    if (strcmp(mode, "ops") == 0 || strcmp(mode, "rccl") == 0) test_ops();
    else if (strcmp(mode, "inprogress") == 0) test_inprogress();
    else if (strcmp(mode, "async_error") == 0) test_async_error();
    else if (strcmp(mode, "timeout") == 0) test_timeout();
    else if (strcmp(mode, "nosplit") == 0) test_nosplit();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return unit_result(mode);
}
