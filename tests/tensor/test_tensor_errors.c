/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Verdicts of the tensor collectives on bad arguments: every rank returns an
 * error (none is left waiting), the message names the ranks and shapes,
 * and the communicator stays usable afterwards.
 */
#include <string.h>
#include "harness.h"
#include "mlcomm_tensor.h"

static float buf_a[256], buf_b[256];

static mlc_tensor_t f32(float *data, int ndim, size_t s0, size_t s1, size_t s2)
{
    size_t shape[3] = {s0, s1, s2};
    mlc_tensor_t t;
    mlc_tensor_init(&t, data, MLC_FLOAT32, ndim, shape);
    return t;
}

/* After an error the communicator still works: a correct all-reduce. */
static int still_works(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    float v = 1.0f, sum = 0.0f;
    mlc_tensor_t in = f32(&v, 0, 0, 0, 0), out = f32(&sum, 0, 0, 0, 0);
    CHECK_OK(mlc_tensor_allreduce(&in, &out, MLC_SUM, comm, NULL));
    CHECK(sum == (float)p, "sum %g after an error, want %d", sum, p);
    return 0;
}

static int local_errors(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    mlc_tensor_t a = f32(buf_a, 2, 2, 3, 0), b = f32(buf_b, 2, 2, 3, 0);
    /* NULL communicator and NULL descriptors */
    CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &b, MLC_SUM, NULL, NULL), MLC_ERR_INVALID_ARG, "comm");
    CHECK_ERR_MSG(mlc_tensor_allreduce(NULL, &b, MLC_SUM, comm, NULL), MLC_ERR_INVALID_ARG, "in is NULL");
    /* dim out of range, on every rank */
    mlc_tensor_t out = f32(buf_b, 2, 2 * (size_t)p, 3, 0);
    CHECK_ERR_MSG(mlc_tensor_allgather(&a, &out, 2, comm, NULL), MLC_ERR_INVALID_ARG, "dim 2");
    CHECK_ERR_MSG(mlc_tensor_allgather(&a, &out, -3, comm, NULL), MLC_ERR_INVALID_ARG, "dim -3");
    /* root out of range */
    CHECK_ERR_MSG(mlc_tensor_broadcast(&a, p, comm, NULL), MLC_ERR_INVALID_ARG, "root");
    /* out shape inconsistent with in outside dim */
    mlc_tensor_t bad = f32(buf_b, 2, 2, 4, 0);
    CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &bad, MLC_SUM, comm, NULL), MLC_ERR_INVALID_ARG,
                  "float32[2, 4]");
    /* partial overlap */
    mlc_tensor_t shifted = f32(buf_a + 1, 2, 2, 3, 0);
    CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &shifted, MLC_SUM, comm, NULL), MLC_ERR_INVALID_ARG,
                  "overlap");
    /* unknown op */
    CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &b, 9999, comm, NULL), MLC_ERR_INVALID_ARG,
                  "mlc_tensor_allreduce: unknown op 9999");
    /* descriptor helpers */
    mlc_tensor_t t;
    size_t shape[2] = {2, 2};
    CHECK_ERR(mlc_tensor_init(&t, buf_a, 12345, 2, shape), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_tensor_init(&t, buf_a, MLC_FLOAT32, MLC_TENSOR_MAX_DIMS + 1, shape),
              MLC_ERR_INVALID_ARG);
    size_t off = 0, len = 0;
    CHECK_ERR(mlc_tensor_split(10, 0, 0, &off, &len), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_tensor_request_wait(NULL), MLC_ERR_INVALID_ARG);
    /* Not inside an open group: a tensor call waits for its own collectives,
     * whose buffers would be gone by mlc_group_end. Refused at once; the
     * group (empty) ends well. */
    CHECK_OK(mlc_group_start());
    CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &b, MLC_SUM, comm, NULL), MLC_ERR_INVALID_ARG, "open group");
    CHECK_ERR_MSG(mlc_tensor_barrier(comm, NULL), MLC_ERR_INVALID_ARG, "open group");
    CHECK_OK(mlc_group_end());
    return still_works(comm);
}

/* Errors that only the ranks together can see (2 or more ranks). */
static int cross_rank_errors(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm), last = p - 1;
    char want[128];

    /* shards that differ outside dim: the message names both ranks' shapes */
    mlc_tensor_t shard = f32(buf_a, 3, 2, 1, r == last ? 5 : 4);
    mlc_tensor_t out = f32(buf_b, 3, 2, (size_t)p, r == last ? 5 : 4);
    snprintf(want, sizeof want, "rank 0 has float32[2, 1, 4], rank %d has float32[2, 1, 5]", last);
    CHECK_ERR_MSG(mlc_tensor_allgather(&shard, &out, 1, comm, NULL), MLC_ERR_MISMATCH, want);
    if (still_works(comm)) return 1;

    /* one rank's output does not hold the gathered tensor */
    shard = f32(buf_a, 2, 1, 3, 0);
    out = f32(buf_b, 2, (size_t)p + (r == last ? 1 : 0), 3, 0);
    snprintf(want, sizeof want, "rank %d's out is float32[%d, 3]", last, p + 1);
    CHECK_ERR_MSG(mlc_tensor_allgather(&shard, &out, 0, comm, NULL),
                  r == last ? MLC_ERR_INVALID_ARG : MLC_ERR_MISMATCH, want);

    /* dtypes differ */
    mlc_tensor_t a = f32(buf_a, 1, 6, 0, 0), b = f32(buf_b, 1, 6, 0, 0);
    if (r == last) a.dtype = b.dtype = MLC_INT32;
    CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &b, MLC_SUM, comm, NULL), MLC_ERR_MISMATCH, "dtypes differ");

    /* all-reduce shapes differ */
    a = f32(buf_a, 1, r == last ? 7 : 6, 0, 0);
    b = a;
    b.data = buf_b;
    snprintf(want, sizeof want, "rank 0 has float32[6], rank %d has float32[7]", last);
    CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &b, MLC_SUM, comm, NULL), MLC_ERR_MISMATCH, want);

    /* ops differ */
    a = f32(buf_a, 1, 6, 0, 0);
    b = f32(buf_b, 1, 6, 0, 0);
    CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &b, r == last ? MLC_MAX : MLC_SUM, comm, NULL),
                  MLC_ERR_MISMATCH, "op max");

    /* different operations */
    mlc_status_t st = r == last ? mlc_tensor_broadcast(&a, 0, comm, NULL)
                                : mlc_tensor_allreduce(&a, &b, MLC_SUM, comm, NULL);
    CHECK(st == MLC_ERR_MISMATCH, "allreduce vs broadcast -> %s", mlc_status_name(st));
    CHECK(strstr(mlc_last_error(), "mlc_tensor_broadcast") != NULL, "message: %s", mlc_last_error());

    /* dims differ */
    shard = f32(buf_a, 2, 2, 2, 0);
    out = f32(buf_b, 2, 2, 2, 0);
    out.shape[r == last ? 1 : 0] = 2 * (size_t)p;
    CHECK_ERR_MSG(mlc_tensor_allgather(&shard, &out, r == last ? 1 : 0, comm, NULL), MLC_ERR_MISMATCH,
                  "dim");

    /* broadcast: a rank's shape differs from root's */
    a = f32(buf_a, 2, 2, r == last ? 4 : 3, 0);
    snprintf(want, sizeof want, "root 0 has float32[2, 3], rank %d has float32[2, 4]", last);
    CHECK_ERR_MSG(mlc_tensor_broadcast(&a, 0, comm, NULL), MLC_ERR_MISMATCH, want);

    /* reduce-scatter parts that do not add up */
    mlc_tensor_t in = f32(buf_a, 2, 2 * (size_t)p, 3, 0);
    out = f32(buf_b, 2, r == 0 ? 3 : 2, 3, 0);
    CHECK_ERR_MSG(mlc_tensor_reduce_scatter(&in, &out, 0, MLC_SUM, comm, NULL), MLC_ERR_MISMATCH,
                  "add up to");

    /* a local error on one rank: that rank gets it, the others MISMATCH naming it */
    a = f32(buf_a, 1, 6, 0, 0);
    b = f32(buf_b, 1, 6, 0, 0);
    if (r == 0) a.data = NULL;
    if (r == 0) {
        CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &b, MLC_SUM, comm, NULL), MLC_ERR_INVALID_ARG,
                      "in->data is NULL");
    } else {
        CHECK_ERR_MSG(mlc_tensor_allreduce(&a, &b, MLC_SUM, comm, NULL), MLC_ERR_MISMATCH,
                      "rank 0's arguments failed");
    }
    /* the same, asynchronous: the error comes at the call, no request is handed out */
    mlc_tensor_request_t *req = NULL;
    st = mlc_tensor_allreduce(&a, &b, MLC_SUM, comm, &req);
    CHECK(st == (r == 0 ? MLC_ERR_INVALID_ARG : MLC_ERR_MISMATCH) && req == NULL,
          "async bad call -> %s, req %p", mlc_status_name(st), (void *)req);
    return still_works(comm);
}

/* The check level: set together or not at all; "local" refuses shards
 * that do not follow mlc_tensor_split (on every rank here). */
static int check_levels(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    CHECK(mlc_tensor_get_checks(comm) == MLC_TENSOR_CHECKS_FULL, "default level");
    CHECK_ERR(mlc_tensor_set_checks(NULL, MLC_TENSOR_CHECKS_LOCAL), MLC_ERR_INVALID_ARG);
    CHECK_ERR_MSG(mlc_tensor_set_checks(comm, 7), MLC_ERR_INVALID_ARG, "level 7");
    if (p >= 2) {
        mlc_tensor_checks_t mine = r == p - 1 ? MLC_TENSOR_CHECKS_LOCAL : MLC_TENSOR_CHECKS_FULL;
        CHECK_ERR_MSG(mlc_tensor_set_checks(comm, mine), MLC_ERR_MISMATCH, "\"local\"");
        CHECK(mlc_tensor_get_checks(comm) == MLC_TENSOR_CHECKS_FULL, "level changed on a mismatch");
    }
    CHECK_OK(mlc_tensor_set_checks(comm, MLC_TENSOR_CHECKS_LOCAL));
    mlc_tensor_t shard = f32(buf_a, 2, 1, 3, 0), out = f32(buf_b, 2, 2 * (size_t)p, 3, 0);
    CHECK_ERR_MSG(mlc_tensor_allgather(&shard, &out, 0, comm, NULL), MLC_ERR_INVALID_ARG,
                  "mlc_tensor_split");
    mlc_tensor_t in = f32(buf_a, 2, 2 * (size_t)p, 3, 0), part = f32(buf_b, 2, 3, 3, 0);
    CHECK_ERR_MSG(mlc_tensor_reduce_scatter(&in, &part, 0, MLC_SUM, comm, NULL), MLC_ERR_INVALID_ARG,
                  "mlc_tensor_split");
    if (still_works(comm)) return 1;
    CHECK_OK(mlc_tensor_set_checks(comm, MLC_TENSOR_CHECKS_FULL));
    return 0;
}

/* A peer that never makes the call: rank 0's all-reduce times out, and the
 * message names the call the user made (the layer's agreement on the
 * arguments runs an allgather first), not only that internal allgather.
 * Not on mpi, which cannot cancel the allgather left in flight. */
static int peer_missing(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") == 0) return 0;
    mlc_comm_t *side = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &side));
    if (mlc_comm_rank(comm) == 0) {
        CHECK_OK(mlc_comm_set_timeout(side, 1.0));
        float v = 1.0f, sum = 0.0f;
        mlc_tensor_t in = f32(&v, 0, 0, 0, 0), out = f32(&sum, 0, 0, 0, 0);
        CHECK_ERR(mlc_tensor_allreduce(&in, &out, MLC_SUM, side, NULL), MLC_ERR_TIMEOUT);
        CHECK(strncmp(mlc_last_error(), "mlc_tensor_allreduce: ", 22) == 0, "the message names the internal step "
              "first: %s", mlc_last_error());
    }
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_OK(mlc_comm_free(side));
    return still_works(comm);
}

/* A tensor barrier on one rank meets the argument check of a tensor
 * allreduce on the others: the mismatch names that check, not a bare
 * "allgather" the user never called (on a side communicator: it stays
 * failed). */
static int barrier_meets_check(mlc_comm_t *comm)
{
    /* mpi detects mismatches with MLC_CHECK=1 only */
    const char *check = getenv("MLC_CHECK");
    if (strcmp(mlc_comm_backend(comm), "mpi") == 0 && !(check && strcmp(check, "1") == 0)) return 0;
    mlc_comm_t *side = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &side));
    float v = 1.0f, sum = 0.0f;
    mlc_tensor_t in = f32(&v, 0, 0, 0, 0), out = f32(&sum, 0, 0, 0, 0);
    mlc_status_t st = mlc_comm_rank(comm) == 0 ? mlc_tensor_barrier(side, NULL)
                                                : mlc_tensor_allreduce(&in, &out, MLC_SUM, side, NULL);
    CHECK(st == MLC_ERR_MISMATCH, "barrier against allreduce: %s", mlc_status_name(st));
    CHECK(strstr(mlc_last_error(), "argument check of a tensor-layer call") != NULL,
          "the mismatch does not name the tensor layer's check: %s", mlc_last_error());
    CHECK_OK(mlc_comm_free(side));
    CHECK_OK(mlc_barrier(comm, NULL));
    /* The tensor layer's other collectives are named by their calls too. */
    const char *calls[] = {"mlc_mesh_create", "mlc_tensor_set_checks"};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &side));
        int dims[1] = {mlc_comm_size(comm)};
        mlc_mesh_t *mesh = NULL;
        if (mlc_comm_rank(comm) != 0) st = mlc_barrier(side, NULL);
        else if (k == 0) st = mlc_mesh_create(side, dims, 1, NULL, &mesh);
        else st = mlc_tensor_set_checks(side, MLC_TENSOR_CHECKS_FULL);
        CHECK(st == MLC_ERR_MISMATCH && strstr(mlc_last_error(), calls[k]) != NULL,
              "%s against a barrier: %s: %s", calls[k], mlc_status_name(st), mlc_last_error());
        CHECK(mesh == NULL, "a failed mlc_mesh_create handed out a mesh");
        CHECK_OK(mlc_comm_free(side));
        CHECK_OK(mlc_barrier(comm, NULL));
    }
    return still_works(comm);
}

static int body(mlc_comm_t *comm)
{
    int failed = local_errors(comm);
    if (!failed) failed = check_levels(comm);
    if (!failed && mlc_comm_size(comm) >= 2) failed = cross_rank_errors(comm);
    if (!failed && mlc_comm_size(comm) >= 2) failed = peer_missing(comm);
    if (!failed && mlc_comm_size(comm) >= 2) failed = barrier_meets_check(comm);
    return mlc_test_any_failed(comm, failed);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
