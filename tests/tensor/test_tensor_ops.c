/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tensor collectives over the whole matrix: operation x dim x dtype x
 * blocking/async x even/uneven shards x subgroup layout, on 1..4 ranks.
 *
 * Layouts: the world; the split by rank parity (groups of unequal size for
 * odd rank counts); and, on 4 ranks, both axes of a 2 x 2 mesh (runs of
 * consecutive ranks, and strided ranks). Every element's expected value is
 * computed from the WORLD ranks of the group's members as the layout
 * defines them, so an operation that leaked outside its group (the C# specification's
 * ProcessGroup forwarding to the global communicator) fails the check.
 * Values are small integers: exact in every dtype, also after reduction.
 */
#include <sched.h>
#include <stdint.h>
/* Checks count into the test's context (`c`) and go on; the first 12 are shown. */
#define CHECK_COUNTER (c->failures)
#define CHECK_WHO() fprintf(stderr, "[rank %d] ", mlc_comm_rank(c->world))
#define CHECK_MAX_REPORTS 12
#include "harness.h"
#include "mlcomm_tensor.h"
#include "tvalues.h"

#define NDIM 3
#define SENTINEL 100.0

typedef struct layout {
    char name[32];
    mlc_comm_t *comm;
    int members[64]; /* world rank of each group rank */
    int owned;       /* free comm at the end */
} layout_t;

typedef struct ctx {
    mlc_comm_t *world;
    int failures;
    int cases;
    int local_checks; /* MLC_TENSOR_CHECKS_LOCAL: uneven shards follow mlc_tensor_split */
} ctx_t;

static const mlc_dtype_t all_dtypes[] = {
#define X_DT(name, str, size) name,
    MLC_DTYPE_LIST(X_DT)
#undef X_DT
};
#define N_DTYPES ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* The value world rank w holds at flat index key: 1..11 (exact everywhere). */
static double val(int w, size_t key) { return (double)((w * 5 + (int)(key % 1000) * 3) % 11 + 1); }
/* Values for prod: 1 or 2, so a product over 4 ranks fits every dtype. */
static double val_prod(int w, size_t key) { return (double)(1 + (w + (int)key) % 2); }

static size_t flat(const size_t *shape, const size_t *idx)
{
    return (idx[0] * shape[1] + idx[1]) * shape[2] + idx[2];
}

static mlc_tensor_t make(void *data, mlc_dtype_t dt, const size_t *shape, int ndim)
{
    mlc_tensor_t t;
    mlc_tensor_init(&t, data, dt, ndim, shape);
    return t;
}

static void *alloc_filled(mlc_dtype_t dt, size_t n, double v)
{
    void *p = calloc(n ? n : 1, mlc_dtype_size(dt));
    for (size_t i = 0; p && i < n; i++) tv_set(dt, p, i, v);
    return p;
}

/* Complete a request: wait, or poll with test (both paths are exercised). */
static mlc_status_t finish(mlc_tensor_request_t **req, int poll)
{
    if (!poll) return mlc_tensor_request_wait(req);
    int done = 0;
    mlc_status_t st = MLC_SUCCESS;
    while (!done && st == MLC_SUCCESS) {
        st = mlc_tensor_request_test(req, &done);
        if (!done) sched_yield();
    }
    return st;
}

/* Run one call blocking (async 0) or asynchronously and complete it. */
#define RUN(c, async, call_with_req, what)                                                     \
    do {                                                                                       \
        mlc_tensor_request_t *req_ = NULL;                                                     \
        mlc_tensor_request_t **slot_ = (async) ? &req_ : NULL;                                 \
        mlc_status_t st_ = call_with_req;                                                      \
        if (st_ == MLC_SUCCESS && (async)) st_ = finish(&req_, (c)->cases % 2);                 \
        CHECK(st_ == MLC_SUCCESS, "%s -> %s: %s", what, mlc_status_name(st_),                  \
            mlc_last_error());                                                                 \
        (c)->cases++;                                                                          \
    } while (0)

/* ---- all-gather --------------------------------------------------------- */
static void case_allgather(ctx_t *c, const layout_t *L, mlc_dtype_t dt, int dim, int uneven,
                           int async, int neg_dim)
{
    int gp = mlc_comm_size(L->comm), g = mlc_comm_rank(L->comm);
    size_t d[64], off[64], total = 0;
    for (int q = 0; q < gp; q++) {
        size_t split_off;
        d[q] = uneven ? (size_t)(q % 2) + 1 : 2; /* any lengths, when the ranks compare */
        if (uneven && c->local_checks) mlc_tensor_split(2 * (size_t)gp + 1, gp, q, &split_off, &d[q]);
        off[q] = total;
        total += d[q];
    }
    size_t sshape[NDIM] = {2, 3, 4}, oshape[NDIM] = {2, 3, 4};
    sshape[dim] = d[g];
    oshape[dim] = total;
    size_t sn = sshape[0] * sshape[1] * sshape[2], on = oshape[0] * oshape[1] * oshape[2];
    void *sbuf = alloc_filled(dt, sn, 0), *obuf = alloc_filled(dt, on, SENTINEL);
    size_t idx[NDIM];
    for (idx[0] = 0; idx[0] < sshape[0]; idx[0]++)
        for (idx[1] = 0; idx[1] < sshape[1]; idx[1]++)
            for (idx[2] = 0; idx[2] < sshape[2]; idx[2]++) {
                size_t k = flat(sshape, idx);
                tv_set(dt, sbuf, k, val(L->members[g], k));
            }
    mlc_tensor_t shard = make(sbuf, dt, sshape, NDIM), out = make(obuf, dt, oshape, NDIM);
    char what[128];
    snprintf(what, sizeof what, "allgather %s dim %d %s %s on %.31s", mlc_dtype_name(dt), dim,
             uneven ? "uneven" : "even", async ? "async" : "blocking", L->name);
    RUN(c, async, mlc_tensor_allgather(&shard, &out, neg_dim ? dim - NDIM : dim, L->comm, slot_),
        what);
    int bad = 0;
    for (idx[0] = 0; idx[0] < oshape[0]; idx[0]++)
        for (idx[1] = 0; idx[1] < oshape[1]; idx[1]++)
            for (idx[2] = 0; idx[2] < oshape[2]; idx[2]++) {
                size_t j = idx[dim];
                int q = 0;
                while (j >= off[q] + d[q]) q++;
                size_t local[NDIM] = {idx[0], idx[1], idx[2]}, qshape[NDIM] = {2, 3, 4};
                local[dim] = j - off[q];
                qshape[dim] = d[q];
                double want = val(L->members[q], flat(qshape, local));
                double got = tv_get(dt, obuf, flat(oshape, idx));
                if (got != want && bad++ == 0)
                    CHECK(0, "%s: out[%zu,%zu,%zu] = %g, want %g (from group rank %d)", what,
                        idx[0], idx[1], idx[2], got, want, q);
            }
    free(sbuf);
    free(obuf);
}

/* In place: the shard is this rank's slot of the output (dim 0). */
static void case_allgather_in_place(ctx_t *c, const layout_t *L, mlc_dtype_t dt, int async)
{
    int gp = mlc_comm_size(L->comm), g = mlc_comm_rank(L->comm);
    size_t per = 2 * 5, oshape[2] = {2 * (size_t)gp, 5}, sshape[2] = {2, 5};
    void *obuf = alloc_filled(dt, per * (size_t)gp, SENTINEL);
    unsigned char *mine = (unsigned char *)obuf + (size_t)g * per * mlc_dtype_size(dt);
    for (size_t k = 0; k < per; k++) tv_set(dt, mine, k, val(L->members[g], k));
    mlc_tensor_t shard = make(mine, dt, sshape, 2), out = make(obuf, dt, oshape, 2);
    char what[128];
    snprintf(what, sizeof what, "allgather in place %s %s on %.31s", mlc_dtype_name(dt),
             async ? "async" : "blocking", L->name);
    RUN(c, async, mlc_tensor_allgather(&shard, &out, 0, L->comm, slot_), what);
    for (int q = 0; q < gp; q++)
        for (size_t k = 0; k < per; k++) {
            double got = tv_get(dt, obuf, (size_t)q * per + k), want = val(L->members[q], k);
            if (got != want) {
                CHECK(0, "%s: block %d [%zu] = %g, want %g", what, q, k, got, want);
                q = gp;
                break;
            }
        }
    free(obuf);
}

/* ---- reduce-scatter ------------------------------------------------------- */
static double combine(mlc_op_t op, double a, double b)
{
    switch (op) {
    case MLC_PROD: return a * b;
    case MLC_MAX: return a > b ? a : b;
    case MLC_MIN: return a < b ? a : b;
    default: return a + b; /* sum, avg */
    }
}

/* The expected reduction over the group of the value at key. */
static double expect_reduce(const layout_t *L, int gp, mlc_dtype_t dt, mlc_op_t op, size_t key)
{
    double acc = 0;
    for (int q = 0; q < gp; q++) {
        double v = op == MLC_PROD ? val_prod(L->members[q], key) : val(L->members[q], key);
        acc = q ? combine(op, acc, v) : v;
    }
    if (op != MLC_AVG) return acc;
    if (dt == MLC_FLOAT32) return (double)((float)acc / (float)gp);
    if (dt == MLC_FLOAT64) return acc / gp;
    return (double)((long long)acc / gp); /* integers truncate toward zero */
}

static void case_reduce_scatter(ctx_t *c, const layout_t *L, mlc_dtype_t dt, int dim, int uneven,
                                mlc_op_t op, int async, int overlap)
{
    int gp = mlc_comm_size(L->comm), g = mlc_comm_rank(L->comm);
    size_t total = 2 * (size_t)gp + (uneven ? 1 : 0), off, len;
    mlc_tensor_split(total, gp, g, &off, &len);
    size_t ishape[NDIM] = {2, 3, 4}, oshape[NDIM] = {2, 3, 4};
    ishape[dim] = total;
    oshape[dim] = len;
    size_t in_n = ishape[0] * ishape[1] * ishape[2], on = oshape[0] * oshape[1] * oshape[2];
    /* overlap: out lives inside in's buffer (the input is packed first) */
    void *ibuf = alloc_filled(dt, in_n + (overlap ? on : 0), 0);
    void *obuf = overlap ? ibuf : alloc_filled(dt, on, SENTINEL);
    for (size_t k = 0; k < in_n; k++)
        tv_set(dt, ibuf, k, op == MLC_PROD ? val_prod(L->members[g], k) : val(L->members[g], k));
    mlc_tensor_t in = make(ibuf, dt, ishape, NDIM), out = make(obuf, dt, oshape, NDIM);
    char what[160];
    snprintf(what, sizeof what, "reduce_scatter %s %s dim %d %s %s%s on %.31s", mlc_dtype_name(dt),
             mlc_op_name(op), dim, uneven ? "uneven" : "even", async ? "async" : "blocking",
             overlap ? " overlapping" : "", L->name);
    RUN(c, async, mlc_tensor_reduce_scatter(&in, &out, dim, op, L->comm, slot_), what);
    size_t idx[NDIM];
    int bad = 0;
    for (idx[0] = 0; idx[0] < oshape[0]; idx[0]++)
        for (idx[1] = 0; idx[1] < oshape[1]; idx[1]++)
            for (idx[2] = 0; idx[2] < oshape[2]; idx[2]++) {
                size_t src[NDIM] = {idx[0], idx[1], idx[2]};
                src[dim] += off;
                double want = expect_reduce(L, gp, dt, op, flat(ishape, src));
                double got = tv_get(dt, obuf, flat(oshape, idx));
                if (got != want && bad++ == 0)
                    CHECK(0, "%s: out[%zu,%zu,%zu] = %g, want %g", what, idx[0], idx[1],
                        idx[2], got, want);
            }
    free(ibuf);
    if (!overlap) free(obuf);
}

/* In place: out is this rank's block of in (dim 0, even parts). */
static void case_reduce_scatter_in_place(ctx_t *c, const layout_t *L, mlc_dtype_t dt, int async)
{
    int gp = mlc_comm_size(L->comm), g = mlc_comm_rank(L->comm);
    size_t per = 3 * 4, ishape[2] = {3 * (size_t)gp, 4}, oshape[2] = {3, 4};
    size_t in_n = per * (size_t)gp;
    void *ibuf = alloc_filled(dt, in_n, 0);
    for (size_t k = 0; k < in_n; k++) tv_set(dt, ibuf, k, val(L->members[g], k));
    void *mine = (unsigned char *)ibuf + (size_t)g * per * mlc_dtype_size(dt);
    mlc_tensor_t in = make(ibuf, dt, ishape, 2), out = make(mine, dt, oshape, 2);
    char what[128];
    snprintf(what, sizeof what, "reduce_scatter in place %s %s on %.31s", mlc_dtype_name(dt),
             async ? "async" : "blocking", L->name);
    RUN(c, async, mlc_tensor_reduce_scatter(&in, &out, 0, MLC_SUM, L->comm, slot_), what);
    for (size_t k = 0; k < per; k++) {
        double want = expect_reduce(L, gp, dt, MLC_SUM, (size_t)g * per + k);
        double got = tv_get(dt, mine, k);
        if (got != want) {
            CHECK(0, "%s: [%zu] = %g, want %g", what, k, got, want);
            break;
        }
    }
    free(ibuf);
}

/* ---- all-reduce and broadcast --------------------------------------------- */
static void case_allreduce(ctx_t *c, const layout_t *L, mlc_dtype_t dt, mlc_op_t op, int async,
                           int in_place)
{
    int gp = mlc_comm_size(L->comm), g = mlc_comm_rank(L->comm);
    size_t shape[2] = {3, 5}, n = 15;
    void *ibuf = alloc_filled(dt, n, 0);
    void *obuf = in_place ? ibuf : alloc_filled(dt, n, SENTINEL);
    for (size_t k = 0; k < n; k++)
        tv_set(dt, ibuf, k, op == MLC_PROD ? val_prod(L->members[g], k) : val(L->members[g], k));
    mlc_tensor_t in = make(ibuf, dt, shape, 2), out = make(obuf, dt, shape, 2);
    char what[128];
    snprintf(what, sizeof what, "allreduce %s %s %s%s on %.31s", mlc_dtype_name(dt), mlc_op_name(op),
             async ? "async" : "blocking", in_place ? " in place" : "", L->name);
    RUN(c, async, mlc_tensor_allreduce(&in, &out, op, L->comm, slot_), what);
    for (size_t k = 0; k < n; k++) {
        double want = expect_reduce(L, gp, dt, op, k), got = tv_get(dt, obuf, k);
        if (got != want) {
            CHECK(0, "%s: [%zu] = %g, want %g", what, k, got, want);
            break;
        }
    }
    free(ibuf);
    if (!in_place) free(obuf);
}

static void case_broadcast(ctx_t *c, const layout_t *L, mlc_dtype_t dt, int root, int async)
{
    int g = mlc_comm_rank(L->comm);
    size_t shape[NDIM] = {4, 3, 2}, n = 24;
    void *buf = alloc_filled(dt, n, SENTINEL);
    if (g == root)
        for (size_t k = 0; k < n; k++) tv_set(dt, buf, k, val(L->members[g], k));
    mlc_tensor_t t = make(buf, dt, shape, NDIM);
    char what[128];
    snprintf(what, sizeof what, "broadcast %s root %d %s on %.31s", mlc_dtype_name(dt), root,
             async ? "async" : "blocking", L->name);
    RUN(c, async, mlc_tensor_broadcast(&t, root, L->comm, slot_), what);
    for (size_t k = 0; k < n; k++) {
        double want = val(L->members[root], k), got = tv_get(dt, buf, k);
        if (got != want) {
            CHECK(0, "%s: [%zu] = %g, want %g", what, k, got, want);
            break;
        }
    }
    free(buf);
}

/* ---- the matrix over one layout --------------------------------------------- */
static void run_layout(ctx_t *c, const layout_t *L)
{
    int gp = mlc_comm_size(L->comm);
    for (int t = 0; t < N_DTYPES; t++) {
        mlc_dtype_t dt = all_dtypes[t];
        for (int async = 0; async <= 1; async++) {
            for (int dim = 0; dim < NDIM; dim++)
                for (int uneven = 0; uneven <= 1; uneven++) {
                    case_allgather(c, L, dt, dim, uneven, async, dim == 2 && uneven);
                    case_reduce_scatter(c, L, dt, dim, uneven, MLC_SUM, async, 0);
                }
            case_allgather_in_place(c, L, dt, async);
            case_reduce_scatter_in_place(c, L, dt, async);
            case_allreduce(c, L, dt, MLC_SUM, async, async);
            case_broadcast(c, L, dt, 0, async);
            case_broadcast(c, L, dt, gp - 1, async);
        }
    }
    /* the other ops, on one integer and one float type */
    static const mlc_op_t ops[] = {MLC_PROD, MLC_MAX, MLC_MIN, MLC_AVG};
    static const mlc_dtype_t op_types[] = {MLC_INT32, MLC_FLOAT32};
    for (int o = 0; o < 4; o++)
        for (int t = 0; t < 2; t++) {
            case_allreduce(c, L, op_types[t], ops[o], o % 2, 0);
            for (int dim = 0; dim < NDIM; dim++)
                case_reduce_scatter(c, L, op_types[t], dim, dim == 1, ops[o], (o + dim) % 2, 0);
        }
    /* output inside the input's buffer: packed first, any dim */
    for (int dim = 0; dim < NDIM; dim++)
        case_reduce_scatter(c, L, MLC_FLOAT32, dim, dim == 2, MLC_SUM, dim % 2, 1);
}

/* The same operations with checks "local" (no argument exchange). */
static void run_layout_local_checks(ctx_t *c, const layout_t *L)
{
    mlc_status_t st = mlc_tensor_set_checks(L->comm, MLC_TENSOR_CHECKS_LOCAL);
    CHECK(st == MLC_SUCCESS, "set_checks local on %s: %s", L->name, mlc_last_error());
    if (st != MLC_SUCCESS) return;
    CHECK(mlc_tensor_get_checks(L->comm) == MLC_TENSOR_CHECKS_LOCAL, "get_checks");
    c->local_checks = 1;
    static const mlc_dtype_t types[] = {MLC_INT8, MLC_BFLOAT16, MLC_FLOAT32, MLC_UINT64};
    int gp = mlc_comm_size(L->comm);
    for (int t = 0; t < 4; t++)
        for (int async = 0; async <= 1; async++) {
            for (int dim = 0; dim < NDIM; dim++)
                for (int uneven = 0; uneven <= 1; uneven++) {
                    case_allgather(c, L, types[t], dim, uneven, async, 0);
                    case_reduce_scatter(c, L, types[t], dim, uneven, MLC_SUM, async, dim == 1);
                }
            case_allgather_in_place(c, L, types[t], async);
            case_reduce_scatter_in_place(c, L, types[t], async);
            case_allreduce(c, L, types[t], MLC_MAX, async, async);
            case_broadcast(c, L, types[t], gp - 1, async);
        }
    c->local_checks = 0;
    st = mlc_tensor_set_checks(L->comm, MLC_TENSOR_CHECKS_FULL);
    CHECK(st == MLC_SUCCESS, "set_checks full on %s: %s", L->name, mlc_last_error());
}

/* ---- layouts ------------------------------------------------------------------ */
static int add_split_layout(ctx_t *c, mlc_comm_t *world, layout_t *L)
{
    int w = mlc_comm_rank(world), color = w % 2;
    snprintf(L->name, sizeof L->name, "parity group %d", color);
    mlc_status_t st = mlc_comm_split(world, color, w, &L->comm);
    CHECK(st == MLC_SUCCESS, "mlc_comm_split -> %s: %s", mlc_status_name(st), mlc_last_error());
    if (st != MLC_SUCCESS) return -1;
    int gp = mlc_comm_size(L->comm), want = (mlc_comm_size(world) - color + 1) / 2;
    CHECK(gp == want, "parity group %d has %d ranks, want %d", color, gp, want);
    CHECK(mlc_comm_rank(L->comm) == w / 2, "parity rank %d, want %d", mlc_comm_rank(L->comm),
        w / 2);
    for (int g = 0; g < gp; g++) L->members[g] = 2 * g + color;
    L->owned = 1;
    return 0;
}

static int body(mlc_comm_t *world)
{
    ctx_t ctx = {world, 0, 0}, *c = &ctx;
    int p = mlc_comm_size(world), w = mlc_comm_rank(world);
    layout_t layouts[4];
    int n = 0;
    memset(layouts, 0, sizeof layouts);
    snprintf(layouts[n].name, sizeof layouts[n].name, "world");
    layouts[n].comm = world;
    for (int g = 0; g < p; g++) layouts[n].members[g] = g;
    n++;
    if (p >= 2 && add_split_layout(c, world, &layouts[n]) == 0) n++;
    mlc_mesh_t *mesh = NULL;
    if (p == 4) {
        int dims[2] = {2, 2};
        const char *names[2] = {"dp", "tp"};
        mlc_status_t st = mlc_mesh_create(world, dims, 2, names, &mesh);
        CHECK(st == MLC_SUCCESS, "mlc_mesh_create -> %s: %s", mlc_status_name(st),
            mlc_last_error());
        if (st == MLC_SUCCESS) {
            int dp = w / 2, tp = w % 2;
            layout_t *L = &layouts[n++];
            snprintf(L->name, sizeof L->name, "mesh tp group %d", dp); /* consecutive ranks */
            L->comm = mlc_mesh_comm(mesh, 1);
            for (int g = 0; g < 2; g++) L->members[g] = dp * 2 + g;
            L = &layouts[n++];
            snprintf(L->name, sizeof L->name, "mesh dp group %d", tp); /* strided ranks */
            L->comm = mlc_mesh_comm(mesh, 0);
            for (int g = 0; g < 2; g++) L->members[g] = g * 2 + tp;
        }
    }
    for (int i = 0; i < n; i++) {
        run_layout(c, &layouts[i]);
        run_layout_local_checks(c, &layouts[i]);
    }
    for (int i = 0; i < n; i++)
        if (layouts[i].owned) mlc_comm_free(layouts[i].comm);
    mlc_mesh_free(mesh);
    if (w == 0) printf("tensor_ops: %d cases per rank on %d layouts, %d failures\n", c->cases, n,
                       c->failures);
    return mlc_test_any_failed(world, c->failures != 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
