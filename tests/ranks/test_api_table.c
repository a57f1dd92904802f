/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every public function's bad inputs, one table: NULL handles, NULL output
 * pointers, negative or oversized counts and sizes, bad dtype / op / root /
 * tag / rank / axis / level, malformed ids and configs. Each returns its
 * error code and a message naming the problem (or, for the functions that
 * return a value instead of a status, the documented "none" value: -1, 0,
 * NULL), and nothing crashes. Then the communicator is still healthy.
 *
 * The test reads the public headers (mlcomm.h, mlcomm_tensor.h,
 * mlcomm_exchange.h) and fails when a function declared there has no entry
 * in the table below, so a new function cannot go without its bad inputs.
 * Deeper cases per family live in test_errors (collectives, p2p, abort),
 * tensor_errors and exchange_errors; this table is the census.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "harness.h"
#include "mlcomm_exchange.h"
#include "mlcomm_tensor.h"

#ifndef MLC_INCLUDE_DIR
#error "MLC_INCLUDE_DIR must name the public headers' directory"
#endif

#define MAXF 160
static const char *covered[MAXF]; /* function names with at least one checked entry */
static int ncovered;

static pthread_mutex_t cover_lock = PTHREAD_MUTEX_INITIALIZER; /* thread ranks share the list */

static void cover(const char *fn)
{
    pthread_mutex_lock(&cover_lock);
    for (int i = 0; i < ncovered; i++)
        if (strcmp(covered[i], fn) == 0) {
            pthread_mutex_unlock(&cover_lock);
            return;
        }
    if (ncovered < MAXF) covered[ncovered++] = fn;
    pthread_mutex_unlock(&cover_lock);
}

/* A call that must return `code` and leave a message. */
#define BAD(fn, call, code)                                                                  \
    do {                                                                                     \
        cover(#fn);                                                                          \
        mlc_status_t st_ = (call);                                                           \
        CHECK(st_ == (code), "%s -> %s, expected %s (%s)", #call, mlc_status_name(st_),       \
              mlc_status_name(code), mlc_last_error());                                      \
        CHECK(mlc_last_error()[0] != '\0', "%s failed without a message", #call);            \
        CHECK(strstr(mlc_last_error(), #fn ":") != NULL, "%s: the message does not name %s: %s", \
              #call, #fn, mlc_last_error());                                                 \
    } while (0)
/* A value-returning call whose bad input gives the documented "none" value. */
#define BADV(fn, cond)                                                                       \
    do {                                                                                     \
        cover(#fn);                                                                          \
        CHECK(cond, "%s does not hold", #cond);                                              \
    } while (0)

static void noop_fn(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx)
{
    (void)in, (void)inout, (void)count, (void)dt, (void)ctx;
}
static void combine_fn(const void *in, void *inout, void *ctx) { (void)in, (void)inout, (void)ctx; }

static int core_api(mlc_comm_t *comm, unsigned char *a, unsigned char *b, size_t *cnt, size_t *dsp)
{
    const mlc_status_t E = MLC_ERR_INVALID_ARG;
    int p = mlc_comm_size(comm), root = 0;
    mlc_request_t *req = NULL;
    mlc_msg_status_t ms;
    int flag = 0;
    const char *name = NULL;
    mlc_dtype_t dt;
    mlc_op_t op;

    /* Version, status texts, last error: no input that can be wrong, or the unknown value. */
    BADV(mlc_version, mlc_version() != NULL && mlc_version()[0]);
    BADV(mlc_status_string, strcmp(mlc_status_string((mlc_status_t)12345), "unknown status") == 0);
    BADV(mlc_status_name, strcmp(mlc_status_name((mlc_status_t)-12345), "MLC_ERR_UNKNOWN") == 0);
    BADV(mlc_last_error, mlc_last_error() != NULL);
    /* dtypes, ops, collective names */
    BADV(mlc_dtype_size, mlc_dtype_size((mlc_dtype_t)-1) == 0 && mlc_dtype_size((mlc_dtype_t)9999) == 0);
    BADV(mlc_dtype_name, mlc_dtype_name((mlc_dtype_t)-1) == NULL);
    BAD(mlc_dtype_from_name, mlc_dtype_from_name(NULL, &dt), E);
    BAD(mlc_dtype_from_name, mlc_dtype_from_name("float", NULL), E);
    BAD(mlc_dtype_from_name, mlc_dtype_from_name("float128", &dt), E);
    BAD(mlc_op_create, mlc_op_create(NULL, 1, NULL, &op), E);
    BAD(mlc_op_create, mlc_op_create(noop_fn, 1, NULL, NULL), E);
    BAD(mlc_op_free, mlc_op_free(MLC_SUM), E);
    BAD(mlc_op_free, mlc_op_free((mlc_op_t)-7), E);
    BADV(mlc_op_name, mlc_op_name((mlc_op_t)-7) == NULL);
    /* Outside a user op's function (and with no reason) it does nothing: later calls are unaffected. */
    BADV(mlc_op_fail, (mlc_op_fail(NULL), mlc_op_fail("not inside an op"),
                       mlc_reduce_local((int32_t[1]){1}, (int32_t[1]){2}, 1, MLC_INT32, MLC_SUM) == MLC_SUCCESS &&
                           mlc_barrier(comm, NULL) == MLC_SUCCESS));
    BAD(mlc_op_from_name, mlc_op_from_name(NULL, &op), E);
    BAD(mlc_op_from_name, mlc_op_from_name("sum", NULL), E);
    BAD(mlc_op_from_name, mlc_op_from_name("median", &op), E);
    BAD(mlc_reduce_local, mlc_reduce_local(NULL, b, 4, MLC_INT32, MLC_SUM), E);
    BAD(mlc_reduce_local, mlc_reduce_local(a, b, 4, (mlc_dtype_t)999, MLC_SUM), E);
    BAD(mlc_reduce_local, mlc_reduce_local(a, b, 4, MLC_INT32, (mlc_op_t)12345), E);
    BAD(mlc_reduce_local, mlc_reduce_local(a, b, SIZE_MAX, MLC_UINT8, MLC_SUM), E);
    BAD(mlc_reduce_local, mlc_reduce_local(a, b, SIZE_MAX / 2, MLC_INT32, MLC_SUM), E);
    BADV(mlc_coll_name, mlc_coll_name((mlc_coll_t)-1) == NULL && mlc_coll_name(MLC_COLL_COUNT) == NULL);

    /* Communicator creation and queries. */
    mlc_comm_t *c = NULL, *cs[2] = {NULL, NULL};
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.magic = 1;
    BAD(mlc_comm_init, mlc_comm_init(NULL, NULL), E);
    BAD(mlc_comm_init, mlc_comm_init(&cfg, &c), E);
    BAD(mlc_comm_init_all, mlc_comm_init_all(-1, NULL, cs), E);
    BAD(mlc_comm_init_all, mlc_comm_init_all(2, NULL, NULL), E);
    BAD(mlc_comm_init_all, mlc_comm_init_all(2, &cfg, cs), E);
    BAD(mlc_get_unique_id, mlc_get_unique_id(NULL), E);
    mlc_unique_id_t id;
    CHECK_OK(mlc_get_unique_id(&id));
    BAD(mlc_comm_init_rank, mlc_comm_init_rank(NULL, 2, 0, NULL, &c), E);
    BAD(mlc_comm_init_rank, mlc_comm_init_rank(&id, 2, 0, NULL, NULL), E);
    BAD(mlc_comm_init_rank, mlc_comm_init_rank(&id, -2, 0, NULL, &c), E);
    BAD(mlc_comm_init_rank, mlc_comm_init_rank(&id, 2, 5, NULL, &c), E);
    mlc_unique_id_t junk; /* not made by mlc_get_unique_id */
    memset(&junk, 'x', sizeof junk);
    BAD(mlc_comm_init_rank, mlc_comm_init_rank(&junk, 2, 0, NULL, &c), E);
    mlc_unique_id_t unterminated = id; /* the right prefix, no terminator anywhere */
    memset(unterminated.internal + 8, 'a', sizeof unterminated.internal - 8);
    BAD(mlc_comm_init_rank, mlc_comm_init_rank(&unterminated, 1, 0, NULL, &c), E);
    mlc_store_t half = {NULL, NULL, NULL}; /* no callbacks */
    BAD(mlc_comm_init_store, mlc_comm_init_store(NULL, 2, 0, NULL, &c), E);
    BAD(mlc_comm_init_store, mlc_comm_init_store(&half, 2, 0, NULL, &c), E);
    BAD(mlc_comm_init_store, mlc_comm_init_store(&half, 2, 0, NULL, NULL), E);
    CHECK(c == NULL && cs[0] == NULL, "a failed init wrote its output");
    BADV(mlc_comm_rank, mlc_comm_rank(NULL) == -1);
    BADV(mlc_comm_size, mlc_comm_size(NULL) == -1);
    BADV(mlc_comm_backend, mlc_comm_backend(NULL) == NULL);
    BADV(mlc_comm_timeout, mlc_comm_timeout(NULL) == -1.0);
    BADV(mlc_comm_status, mlc_comm_status(NULL) == E);
    BAD(mlc_comm_split, mlc_comm_split(NULL, 0, 0, &c), E);
    BAD(mlc_comm_split, mlc_comm_split(comm, 0, 0, NULL), E);
    BAD(mlc_comm_split, mlc_comm_split(comm, -5, 0, &c), E);
    BADV(mlc_comm_free, mlc_comm_free(NULL) == MLC_SUCCESS); /* documented no-op */
    BAD(mlc_comm_abort, mlc_comm_abort(NULL), E);
    BAD(mlc_comm_set_algo, mlc_comm_set_algo(NULL, MLC_COLL_ALLREDUCE, "ring"), E);
    BAD(mlc_comm_set_algo, mlc_comm_set_algo(comm, (mlc_coll_t)-1, "ring"), E);
    BAD(mlc_comm_set_algo, mlc_comm_set_algo(comm, MLC_COLL_ALLREDUCE, "no-such"), E);
    BAD(mlc_comm_get_algo, mlc_comm_get_algo(NULL, MLC_COLL_ALLREDUCE, 8, &name), E);
    BAD(mlc_comm_get_algo, mlc_comm_get_algo(comm, MLC_COLL_ALLREDUCE, 8, NULL), E);
    BAD(mlc_comm_get_algo, mlc_comm_get_algo(comm, MLC_COLL_COUNT, 8, &name), E);
    BAD(mlc_comm_set_stream, mlc_comm_set_stream(NULL, NULL), E);
    BAD(mlc_comm_set_timeout, mlc_comm_set_timeout(NULL, 1.0), E);
    BAD(mlc_comm_set_timeout, mlc_comm_set_timeout(comm, -1.0), E);
    BADV(mlc_comm_tag_max, mlc_comm_tag_max(NULL) == -1);
    BADV(mlc_comm_memory, mlc_comm_memory(NULL) == MLC_MEMORY_KIND_HOST);
    BADV(mlc_comm_device, mlc_comm_device(NULL) == -1);
    mlc_profile_stat_t stats[MLC_COLL_COUNT];
    size_t nstats = MLC_COLL_COUNT;
    BAD(mlc_profile_stats, mlc_profile_stats(NULL, stats, &nstats), E);
    BAD(mlc_profile_stats, mlc_profile_stats(comm, stats, NULL), E);

    /* Pinned pool, GPU-direct query, backend check. */
    mlc_pinned_pool_t *pool = NULL;
    void *pinned = NULL;
    mlc_pinned_info_t pinfo;
    BAD(mlc_pinned_pool_open, mlc_pinned_pool_open(0, NULL), E);
    CHECK(mlc_pinned_pool_open(1 << 20, &pool) == MLC_SUCCESS, "mlc_pinned_pool_open: %s", mlc_last_error());
    BADV(mlc_pinned_pool_close, mlc_pinned_pool_close(NULL) == MLC_SUCCESS); /* documented no-op */
    BAD(mlc_pinned_pool_alloc, mlc_pinned_pool_alloc(NULL, 64, &pinned), E);
    BAD(mlc_pinned_pool_alloc, mlc_pinned_pool_alloc(pool, 64, NULL), E);
    BAD(mlc_pinned_pool_alloc, mlc_pinned_pool_alloc(pool, 0, &pinned), E);
    BAD(mlc_pinned_pool_alloc, mlc_pinned_pool_alloc(pool, (size_t)2 << 20, &pinned), MLC_ERR_NO_MEMORY);
    BAD(mlc_pinned_pool_release, mlc_pinned_pool_release(NULL, a), E);
    BAD(mlc_pinned_pool_release, mlc_pinned_pool_release(pool, a), E); /* not from this pool */
    void *block = (void *)1;
    BAD(mlc_mem_alloc, mlc_mem_alloc(64, NULL), E);
    BAD(mlc_mem_alloc, mlc_mem_alloc(SIZE_MAX, &block), MLC_ERR_NO_MEMORY);
    BAD(mlc_mem_alloc, mlc_mem_alloc((size_t)1 << 62, &block), MLC_ERR_NO_MEMORY);
    CHECK(block == NULL, "a failed mlc_mem_alloc left *ptr = %p, not NULL", block);
    BAD(mlc_mem_free, mlc_mem_free(a), E); /* not a block of mlc_mem_alloc */
    BADV(mlc_mem_free, mlc_mem_free(NULL) == MLC_SUCCESS); /* documented no-op */
    BAD(mlc_pinned_pool_pin, mlc_pinned_pool_pin(NULL, a, 64), E);
    BAD(mlc_pinned_pool_pin, mlc_pinned_pool_pin(pool, NULL, 64), E);
    BAD(mlc_pinned_pool_unpin, mlc_pinned_pool_unpin(NULL, a), E);
    BAD(mlc_pinned_pool_unpin, mlc_pinned_pool_unpin(pool, a), E); /* never pinned */
    BAD(mlc_pinned_pool_info, mlc_pinned_pool_info(NULL, &pinfo), E);
    BAD(mlc_pinned_pool_info, mlc_pinned_pool_info(pool, NULL), E);
    mlc_pinned_pool_close(pool);
    BAD(mlc_gpudirect_query, mlc_gpudirect_query(NULL), E);
    BAD(mlc_backend_check, mlc_backend_check(NULL), E);
    BAD(mlc_backend_check, mlc_backend_check("no-such"), MLC_ERR_CONFIG);

    /* Requests. */
    int done = 0;
    BAD(mlc_request_wait, mlc_request_wait(NULL), E);
    BAD(mlc_request_test, mlc_request_test(NULL, &done), E);
    BAD(mlc_request_test, mlc_request_test(&req, NULL), E);
    BAD(mlc_request_wait_all, mlc_request_wait_all(2, NULL, NULL), E);

    /* Groups: an end without a start; a start takes no input (balanced here). */
    BAD(mlc_group_end, mlc_group_end(), E);
    BADV(mlc_group_start, mlc_group_start() == MLC_SUCCESS && mlc_group_end() == MLC_SUCCESS);

    /* Collectives: NULL communicator, NULL buffer, bad dtype/op/root, oversized count. */
    const size_t big = SIZE_MAX;
    BAD(mlc_broadcast, mlc_broadcast(a, b, 4, MLC_INT32, 0, NULL, NULL), E);
    BAD(mlc_broadcast, mlc_broadcast(a, b, 4, MLC_INT32, p, comm, NULL), E);
    BAD(mlc_broadcast, mlc_broadcast(a, b, big, MLC_UINT8, 0, comm, NULL), E);
    BAD(mlc_broadcast, mlc_broadcast(a, b, 1, MLC_RECORD(70000), 0, comm, NULL), E); /* records: 1..65535 bytes */
    BAD(mlc_broadcast, mlc_broadcast(a, b, 1, MLC_RECORD(0), 0, comm, NULL), E);
    BAD(mlc_reduce, mlc_reduce(a, b, 4, MLC_INT32, MLC_SUM, -1, comm, NULL), E);
    BAD(mlc_reduce, mlc_reduce(a, b, 4, MLC_INT32, (mlc_op_t)999, 0, comm, NULL), E);
    BAD(mlc_allreduce, mlc_allreduce(a, b, 4, (mlc_dtype_t)999, MLC_SUM, comm, NULL), E);
    BAD(mlc_allreduce, mlc_allreduce(NULL, b, 4, MLC_INT32, MLC_SUM, comm, NULL), E);
    BAD(mlc_allgather, mlc_allgather(a, NULL, 4, MLC_INT32, comm, NULL), E);
    BAD(mlc_allgather, mlc_allgather(a, b, big / 2, MLC_INT32, comm, NULL), E);
    BAD(mlc_allgatherv, mlc_allgatherv(a, 4, b, NULL, dsp, MLC_INT32, comm, NULL), E);
    size_t bad_dsp[64];
    memcpy(bad_dsp, dsp, sizeof *dsp * (size_t)p);
    bad_dsp[0] = big;
    BAD(mlc_allgatherv, mlc_allgatherv(a, 4, b, cnt, bad_dsp, MLC_INT32, comm, NULL), E);
    BAD(mlc_reduce_scatter, mlc_reduce_scatter(a, b, 4, MLC_INT32, (mlc_op_t)-3, comm, NULL), E);
    BAD(mlc_alltoall, mlc_alltoall(a, b, big, MLC_UINT8, comm, NULL), E);
    BAD(mlc_alltoallv, mlc_alltoallv(a, cnt, bad_dsp, b, cnt, dsp, MLC_INT32, comm, NULL), E);
    BAD(mlc_alltoallv, mlc_alltoallv(a, cnt, dsp, b, cnt, bad_dsp, MLC_INT32, comm, NULL), E);
    BAD(mlc_gather, mlc_gather(a, b, 4, MLC_INT32, p + 3, comm, NULL), E);
    BAD(mlc_gatherv, mlc_gatherv(a, 4, b, cnt, dsp, MLC_INT32, -2, comm, NULL), E);
    if (mlc_comm_rank(comm) == root)
        BAD(mlc_gatherv, mlc_gatherv(a, 4, b, cnt, bad_dsp, MLC_INT32, root, comm, NULL), E);
    BAD(mlc_scatter, mlc_scatter(a, b, 4, (mlc_dtype_t)-4, 0, comm, NULL), E);
    BAD(mlc_scatterv, mlc_scatterv(a, cnt, dsp, b, 4, MLC_INT32, p, comm, NULL), E);
    if (mlc_comm_rank(comm) == root)
        BAD(mlc_scatterv, mlc_scatterv(a, cnt, bad_dsp, b, 4, MLC_INT32, root, comm, NULL), E);
    BAD(mlc_barrier, mlc_barrier(NULL, NULL), E);

    /* Point-to-point: bad peer, tag, count; probes. */
    BAD(mlc_send, mlc_send(a, 4, MLC_INT32, p, 0, comm, NULL), E);
    BAD(mlc_send, mlc_send(a, 4, MLC_INT32, 0, -3, comm, NULL), E);
    BAD(mlc_send, mlc_send(a, big, MLC_UINT8, 0, 0, comm, NULL), E);
    BAD(mlc_recv, mlc_recv(b, 4, MLC_INT32, -7, 0, comm, NULL, NULL), E);
    BAD(mlc_recv, mlc_recv(NULL, 4, MLC_INT32, 0, 0, comm, NULL, NULL), E);
    BAD(mlc_sendrecv, mlc_sendrecv(a, 4, 0, 0, b, 4, p, 0, MLC_INT32, comm, NULL, NULL), E);
    BAD(mlc_sendrecv, mlc_sendrecv(a, 4, 0, MLC_ANY_TAG, b, 4, 0, 0, MLC_INT32, comm, NULL, NULL), E);
    BAD(mlc_probe, mlc_probe(0, 0, NULL, &ms), E);
    BAD(mlc_probe, mlc_probe(p, 0, comm, &ms), E);
    BAD(mlc_iprobe, mlc_iprobe(0, 0, comm, NULL, &ms), E);
    BAD(mlc_iprobe, mlc_iprobe(0, -9, comm, &flag, &ms), E);
    return 0;
}

static int tensor_api(mlc_comm_t *comm, unsigned char *a)
{
    const mlc_status_t E = MLC_ERR_INVALID_ARG;
    int p = mlc_comm_size(comm);
    mlc_tensor_t t, u;
    size_t shape[2] = {2, 2}, off, len;
    BAD(mlc_tensor_init, mlc_tensor_init(NULL, a, MLC_FLOAT32, 2, shape), E);
    BAD(mlc_tensor_init, mlc_tensor_init(&t, a, (mlc_dtype_t)999, 2, shape), E);
    BAD(mlc_tensor_init, mlc_tensor_init(&t, a, MLC_FLOAT32, -1, shape), E);
    BAD(mlc_tensor_init, mlc_tensor_init(&t, a, MLC_FLOAT32, MLC_TENSOR_MAX_DIMS + 1, shape), E);
    BAD(mlc_tensor_init, mlc_tensor_init(&t, a, MLC_FLOAT32, 2, NULL), E);
    size_t huge[2] = {SIZE_MAX / 2, 4}; /* numel overflows */
    BAD(mlc_tensor_init, mlc_tensor_init(&t, a, MLC_FLOAT32, 2, huge), E);
    BADV(mlc_tensor_numel, mlc_tensor_numel(NULL) == 0);
    BADV(mlc_tensor_bytes, mlc_tensor_bytes(NULL) == 0);
    BAD(mlc_tensor_split, mlc_tensor_split(10, 0, 0, &off, &len), E);
    BAD(mlc_tensor_split, mlc_tensor_split(10, 2, 2, &off, &len), E);
    BAD(mlc_tensor_split, mlc_tensor_split(10, 2, -1, &off, &len), E);
    BAD(mlc_tensor_split, mlc_tensor_split(10, 2, 0, NULL, &len), E);
    BAD(mlc_tensor_split, mlc_tensor_split(10, 2, 0, &off, NULL), E);
    BAD(mlc_tensor_request_wait, mlc_tensor_request_wait(NULL), E);
    int done;
    mlc_tensor_request_t *tr = NULL;
    BAD(mlc_tensor_request_test, mlc_tensor_request_test(NULL, &done), E);
    BAD(mlc_tensor_request_test, mlc_tensor_request_test(&tr, NULL), E);
    BAD(mlc_tensor_request_wait_all, mlc_tensor_request_wait_all(2, NULL, NULL), E);
    CHECK_OK(mlc_tensor_init(&t, a, MLC_FLOAT32, 2, shape));
    u = t;
    /* NULL communicator / tensors: refused before any exchange with the peers. */
    BAD(mlc_tensor_allgather, mlc_tensor_allgather(&t, &u, 0, NULL, NULL), E);
    BAD(mlc_tensor_reduce_scatter, mlc_tensor_reduce_scatter(&t, &u, 0, MLC_SUM, NULL, NULL), E);
    BAD(mlc_tensor_allreduce, mlc_tensor_allreduce(&t, &u, MLC_SUM, NULL, NULL), E);
    BAD(mlc_tensor_broadcast, mlc_tensor_broadcast(&t, 0, NULL, NULL), E);
    BAD(mlc_tensor_barrier, mlc_tensor_barrier(NULL, NULL), E);
    BAD(mlc_tensor_set_checks, mlc_tensor_set_checks(NULL, MLC_TENSOR_CHECKS_FULL), E);
    BADV(mlc_tensor_get_checks, mlc_tensor_get_checks(NULL) == MLC_TENSOR_CHECKS_FULL);

    /* Meshes: bad creation arguments (refused before any communication), then
     * a real one-axis mesh and bad queries on it. */
    mlc_mesh_t *mesh = NULL;
    int dims[1] = {p}, bad_dims[1] = {p + 1}, axis, coords[1], rank;
    BAD(mlc_mesh_create, mlc_mesh_create(NULL, dims, 1, NULL, &mesh), E);
    BAD(mlc_mesh_create, mlc_mesh_create(comm, NULL, 1, NULL, &mesh), E);
    BAD(mlc_mesh_create, mlc_mesh_create(comm, dims, 0, NULL, &mesh), E);
    BAD(mlc_mesh_create, mlc_mesh_create(comm, dims, MLC_MESH_MAX_DIMS + 1, NULL, &mesh), E);
    BAD(mlc_mesh_create, mlc_mesh_create(comm, dims, 1, NULL, NULL), E);
    BAD(mlc_mesh_create, mlc_mesh_create(comm, bad_dims, 1, NULL, &mesh), E);
    CHECK(mesh == NULL, "a failed mlc_mesh_create wrote its output");
    BADV(mlc_mesh_free, mlc_mesh_free(NULL) == MLC_SUCCESS); /* documented no-op */
    BADV(mlc_mesh_ndims, mlc_mesh_ndims(NULL) == -1);
    CHECK_OK(mlc_mesh_create(comm, dims, 1, NULL, &mesh));
    BADV(mlc_mesh_size, mlc_mesh_size(mesh, 1) == -1 && mlc_mesh_size(mesh, -1) == -1 &&
                            mlc_mesh_size(NULL, 0) == -1);
    BADV(mlc_mesh_coord, mlc_mesh_coord(mesh, 1) == -1 && mlc_mesh_coord(NULL, 0) == -1);
    BADV(mlc_mesh_name, mlc_mesh_name(mesh, 7) == NULL && mlc_mesh_name(NULL, 0) == NULL);
    BADV(mlc_mesh_comm, mlc_mesh_comm(mesh, -1) == NULL && mlc_mesh_comm(NULL, 0) == NULL);
    BAD(mlc_mesh_axis, mlc_mesh_axis(NULL, "x", &axis), E);
    BAD(mlc_mesh_axis, mlc_mesh_axis(mesh, NULL, &axis), E);
    BAD(mlc_mesh_axis, mlc_mesh_axis(mesh, "no-such-axis", &axis), E);
    BAD(mlc_mesh_axis, mlc_mesh_axis(mesh, mlc_mesh_name(mesh, 0), NULL), E);
    int far[1] = {p};
    BAD(mlc_mesh_rank_of, mlc_mesh_rank_of(NULL, coords, &rank), E);
    BAD(mlc_mesh_rank_of, mlc_mesh_rank_of(mesh, NULL, &rank), E);
    BAD(mlc_mesh_rank_of, mlc_mesh_rank_of(mesh, far, &rank), E);
    BAD(mlc_mesh_rank_of, mlc_mesh_rank_of(mesh, coords, NULL), E);
    BAD(mlc_mesh_coords, mlc_mesh_coords(NULL, coords), E);
    BAD(mlc_mesh_coords, mlc_mesh_coords(mesh, NULL), E);
    mlc_comm_t *g = NULL;
    int axes[2] = {0, 0}, bad_axis[1] = {3};
    BAD(mlc_mesh_group, mlc_mesh_group(NULL, axes, 1, &g), E);
    BAD(mlc_mesh_group, mlc_mesh_group(mesh, NULL, 1, &g), E);
    BAD(mlc_mesh_group, mlc_mesh_group(mesh, bad_axis, 1, &g), E);
    BAD(mlc_mesh_group, mlc_mesh_group(mesh, axes, 2, &g), E); /* an axis twice */
    BAD(mlc_mesh_group, mlc_mesh_group(mesh, axes, 1, NULL), E);
    CHECK(g == NULL, "a failed mlc_mesh_group wrote its output");
    CHECK_OK(mlc_mesh_free(mesh));

    /* Communicator factory. */
    mlc_comm_t *made[2];
    int nmade = -1;
    mlc_option_t unknown[1] = {{"no_such_key", "1"}}, threads2[1] = {{"world_size", "2"}};
    BAD(mlc_comm_create_from, mlc_comm_create_from("threads", NULL, 0, NULL, 1, NULL, &nmade), E);
    BAD(mlc_comm_create_from, mlc_comm_create_from("threads", NULL, 0, NULL, 1, made, NULL), E);
    BAD(mlc_comm_create_from, mlc_comm_create_from("threads", NULL, 0, NULL, 0, made, &nmade), E);
    BAD(mlc_comm_create_from, mlc_comm_create_from("threads", threads2, 1, NULL, 1, made, &nmade), E);
    BAD(mlc_comm_create_from, mlc_comm_create_from("no-such-backend", NULL, 0, NULL, 1, made, &nmade),
        MLC_ERR_CONFIG);
    BAD(mlc_comm_create_from, mlc_comm_create_from("threads", unknown, 1, NULL, 1, made, &nmade),
        MLC_ERR_CONFIG);
    CHECK(nmade == -1, "a failed mlc_comm_create_from wrote *ncomms");
    return 0;
}

static int exchange_api(mlc_comm_t *comm, unsigned char *a)
{
    const mlc_status_t E = MLC_ERR_INVALID_ARG;
    mlc_exchange_config_t cfg = MLC_EXCHANGE_CONFIG_INIT, bad = MLC_EXCHANGE_CONFIG_INIT;
    cfg.ndim = 1;
    cfg.dtype = MLC_FLOAT64;
    mlc_exchange_t *ex = NULL;
    bad.ndim = MLC_EXCHANGE_MAX_DIMS + 1;
    bad.dtype = MLC_FLOAT64;
    BAD(mlc_exchange_create, mlc_exchange_create(NULL, &cfg, &ex), E);
    BAD(mlc_exchange_create, mlc_exchange_create(comm, NULL, &ex), E);
    BAD(mlc_exchange_create, mlc_exchange_create(comm, &cfg, NULL), E);
    BAD(mlc_exchange_create, mlc_exchange_create(comm, &bad, &ex), E);
    bad = cfg;
    bad.dtype = (mlc_dtype_t)999;
    BAD(mlc_exchange_create, mlc_exchange_create(comm, &bad, &ex), E);
    bad = cfg;
    bad.magic = 7;
    BAD(mlc_exchange_create, mlc_exchange_create(comm, &bad, &ex), E);
    CHECK(ex == NULL, "a failed mlc_exchange_create wrote its output");
    int id = -1;
    mlc_view_t view;
    memset(&view, 0, sizeof view);
    view.data = a;
    view.parent.ndim = view.region.ndim = 1;
    view.parent.shape[0] = view.region.shape[0] = 4;
    BAD(mlc_exchange_provide, mlc_exchange_provide(NULL, &view, &id), E);
    BAD(mlc_exchange_need, mlc_exchange_need(NULL, &view, &id), E);
    BAD(mlc_exchange_set_data, mlc_exchange_set_data(NULL, MLC_EXCHANGE_PROVIDE, 0, a), E);
    BAD(mlc_exchange_clear, mlc_exchange_clear(NULL), E);
    BAD(mlc_exchange_set_topology_version, mlc_exchange_set_topology_version(NULL, 1), E);
    BAD(mlc_exchange_build, mlc_exchange_build(NULL), E);
    BAD(mlc_exchange_set_executor, mlc_exchange_set_executor(NULL, "p2p"), E);
    BAD(mlc_exchange_start, mlc_exchange_start(NULL), E);
    BAD(mlc_exchange_finish, mlc_exchange_finish(NULL), E);
    BAD(mlc_exchange_run, mlc_exchange_run(NULL), E);
    mlc_exchange_info_t info;
    BAD(mlc_exchange_info, mlc_exchange_info(NULL, &info), E);
    BADV(mlc_exchange_free, mlc_exchange_free(NULL) == MLC_SUCCESS); /* documented no-op */

    /* A real exchange and bad arguments on it (all local). */
    CHECK_OK(mlc_exchange_create(comm, &cfg, &ex));
    mlc_view_t outside = view;
    outside.region.start[0] = 3; /* region past its parent */
    BAD(mlc_exchange_provide, mlc_exchange_provide(ex, NULL, &id), E);
    BAD(mlc_exchange_provide, mlc_exchange_provide(ex, &outside, &id), E);
    BAD(mlc_exchange_need, mlc_exchange_need(ex, NULL, &id), E);
    BAD(mlc_exchange_need, mlc_exchange_need(ex, &outside, &id), E);
    BAD(mlc_exchange_set_data, mlc_exchange_set_data(ex, MLC_EXCHANGE_PROVIDE, 99, a), E);
    BAD(mlc_exchange_set_data, mlc_exchange_set_data(ex, (mlc_exchange_side_t)7, 0, a), E);
    BAD(mlc_exchange_set_executor, mlc_exchange_set_executor(ex, "no-such-executor"), E);
    BAD(mlc_exchange_info, mlc_exchange_info(ex, NULL), E);
    BAD(mlc_exchange_info, mlc_exchange_info(ex, &info), E); /* not built */
    BAD(mlc_exchange_start, mlc_exchange_start(ex), E);      /* not built */
    BAD(mlc_exchange_finish, mlc_exchange_finish(ex), E);    /* nothing started */
    CHECK_OK(mlc_exchange_free(ex));

    mlc_box_t valid = {0}, out[2 * MLC_EXCHANGE_MAX_DIMS];
    int n = 0, width[MLC_EXCHANGE_MAX_DIMS] = {1, -1};
    valid.ndim = 2;
    valid.shape[0] = valid.shape[1] = 4;
    BAD(mlc_box_halo, mlc_box_halo(NULL, width, out, &n), E);
    BAD(mlc_box_halo, mlc_box_halo(&valid, NULL, out, &n), E);
    BAD(mlc_box_halo, mlc_box_halo(&valid, width, out, &n), E); /* negative width */
    BAD(mlc_box_halo, mlc_box_halo(&valid, width, NULL, &n), E);
    valid.ndim = MLC_EXCHANGE_MAX_DIMS + 1;
    width[1] = 1;
    BAD(mlc_box_halo, mlc_box_halo(&valid, width, out, &n), E);

    double v = 1, r = 0;
    BAD(mlc_combine, mlc_combine(&v, &r, 1, sizeof v, combine_fn, 1, NULL, NULL), E);
    BAD(mlc_combine, mlc_combine(&v, &r, 1, sizeof v, NULL, 1, NULL, comm), E);
    BAD(mlc_combine, mlc_combine(NULL, &r, 1, sizeof v, combine_fn, 1, NULL, comm), E);
    BAD(mlc_combine, mlc_combine(&v, NULL, 1, sizeof v, combine_fn, 1, NULL, comm), E);
    BAD(mlc_combine, mlc_combine(&v, &r, 1, 0, combine_fn, 1, NULL, comm), E);
    BAD(mlc_combine, mlc_combine(&v, &r, SIZE_MAX, sizeof v, combine_fn, 1, NULL, comm), E);
    return 0;
}

/* Names of the functions declared in a public header (MLC_API ... mlc_x(). */
static int declared(const char *path, char names[][64], int *n, int max)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "MLC_API ", 8) != 0) continue;
        char *paren = strchr(line, '(');
        if (!paren) continue;
        char *start = paren;
        while (start > line && (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
                                (start[-1] >= '0' && start[-1] <= '9')))
            start--;
        size_t len = (size_t)(paren - start);
        if (len == 0 || len >= 64 || *n >= max) continue;
        memcpy(names[*n], start, len);
        names[*n][len] = '\0';
        (*n)++;
    }
    fclose(f);
    return 0;
}

static int census(mlc_comm_t *comm)
{
    static const char *const headers[] = {"mlcomm.h", "mlcomm_tensor.h", "mlcomm_exchange.h"};
    static char names[MAXF][64];
    int n = 0, missing = 0;
    for (size_t h = 0; h < sizeof headers / sizeof *headers; h++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", MLC_INCLUDE_DIR, headers[h]);
        CHECK(declared(path, names, &n, MAXF) == 0, "cannot read %s", path);
    }
    CHECK(n > 80, "only %d functions found in the public headers: the scan is broken", n);
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int k = 0; k < ncovered && !found; k++) found = strcmp(covered[k], names[i]) == 0;
        if (!found) {
            fprintf(stderr, "[rank %d] %s has no bad-input entry in this table\n", mlc_comm_rank(comm),
                    names[i]);
            missing++;
        }
    }
    CHECK(missing == 0, "%d of %d public functions have no bad-input entry", missing, n);
    if (mlc_comm_rank(comm) == 0)
        printf("bad inputs checked for all %d public functions (%d in the table)\n", n, ncovered);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    if (p > 64) return MLC_TEST_SKIP;
    unsigned char *a = mlc_test_alloc(4096), *b = mlc_test_alloc(4096);
    size_t cnt[64], dsp[64];
    for (int q = 0; q < p; q++) cnt[q] = 4, dsp[q] = (size_t)q * 4;
    memset(a, 0, 4096);
    int r = mlc_comm_rank(comm);
    CHECK_RUN(core_api(comm, a, b, cnt, dsp));
    CHECK_RUN(tensor_api(comm, a));
    CHECK_RUN(exchange_api(comm, a));
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "bad arguments made the communicator fail: %s",
          mlc_status_name(mlc_comm_status(comm)));
    int32_t one = 1, sum = 0;
    CHECK_OK(mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(sum == p, "allreduce after the bad calls gave %d", sum);
    /* The timeout reads back: MLC_TIMEOUT's, else the default; then what was set. */
    const char *env_timeout = getenv("MLC_TIMEOUT");
    double had = mlc_comm_timeout(comm);
    CHECK(env_timeout && *env_timeout ? had == atof(env_timeout) : had == 600.0, "timeout %g, MLC_TIMEOUT %s", had,
          env_timeout ? env_timeout : "unset");
    CHECK_ERR(mlc_comm_set_timeout(comm, 2e9), MLC_ERR_INVALID_ARG); /* past MLC_TIMEOUT's range */
    CHECK_OK(mlc_comm_set_timeout(comm, 42.5));
    CHECK(mlc_comm_timeout(comm) == 42.5, "timeout after setting 42.5: %g", mlc_comm_timeout(comm));
    CHECK_OK(mlc_comm_set_timeout(comm, had));
    if (r == 0) CHECK_RUN(census(comm));
    mlc_test_free(a);
    mlc_test_free(b);
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
