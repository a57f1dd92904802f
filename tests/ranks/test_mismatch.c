/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Mismatched calls: every collective x every argument that can differ
 * between ranks (count, dtype, op, root, the collective itself), with
 * payloads that take the slot path and payloads that take the large path
 * (plus every case once more with the ring algorithm forced where it
 * exists). Rank 1 is the odd one out. Each case runs on a fresh
 * communicator (a mismatch fails its communicator for good) and must:
 *  - fail with MLC_ERR_MISMATCH on every rank, with a message naming the
 *    collective; a rank whose part of the call completed before any rank
 *    compared (a gather leaf, a scatter root, a rank whose arguments agree
 *    with the root's) must then fail its next call on the communicator with
 *    MLC_ERR_MISMATCH;
 *  - never write outside any receive buffer (guard bytes around each).
 * On mpi and nccl the check runs with MLC_CHECK=1 (set by ctest).
 * Prints one line per case: the matrix of outcomes.
 */
#include <stdbool.h>
#include "harness.h"

#define GUARD 4096
#define GUARD_BYTE 0xa5

typedef enum { D_COUNT, D_DTYPE, D_OP, D_ROOT, D_COLL, D_RECORD, D_USER_OP } diff_t;
static const char *const diff_names[] = {"count", "dtype", "op", "root", "collective", "record", "user op"};

/* D_RECORD: the odd rank passes MLC_RECORD(8) for the others' float32 (the
 * record's low byte is float32's number). D_USER_OP: the others reduce with
 * user op A, the odd rank with B; every rank creates both (on threads each
 * rank its own pair: one function makes one op however many handles). */
static void op_sum(const void *in, void *inout, size_t n, mlc_dtype_t dt, void *ctx)
{
    (void)dt, (void)ctx;
    for (size_t i = 0; i < n; i++) ((float *)inout)[i] += ((const float *)in)[i];
}
static void op_max(const void *in, void *inout, size_t n, mlc_dtype_t dt, void *ctx)
{
    (void)dt, (void)ctx;
    for (size_t i = 0; i < n; i++)
        if (((const float *)in)[i] > ((float *)inout)[i]) ((float *)inout)[i] = ((const float *)in)[i];
}
static _Thread_local mlc_op_t user_a, user_b;

typedef struct {
    mlc_coll_t coll;
    diff_t diff;
} case_t;

/* Which differences apply to which collective. */
static bool applies(mlc_coll_t c, diff_t d)
{
    bool rooted = c == MLC_COLL_BROADCAST || c == MLC_COLL_REDUCE || c == MLC_COLL_GATHER ||
                  c == MLC_COLL_GATHERV || c == MLC_COLL_SCATTER || c == MLC_COLL_SCATTERV;
    bool reduces = c == MLC_COLL_REDUCE || c == MLC_COLL_ALLREDUCE || c == MLC_COLL_REDUCE_SCATTER;
    switch (d) {
    case D_COUNT:
    case D_DTYPE: return c != MLC_COLL_BARRIER;
    case D_OP: return reduces;
    case D_ROOT: return rooted;
    case D_COLL: return true;
    case D_RECORD: return !reduces && c != MLC_COLL_BARRIER;
    case D_USER_OP: return reduces;
    }
    return false;
}

/* Buffers with guard zones on both sides. */
typedef struct {
    unsigned char *raw;
    size_t bytes;
} gbuf_t;

static void *gbuf(gbuf_t *g, size_t bytes)
{
    g->bytes = bytes;
    g->raw = malloc(bytes + 2 * GUARD);
    if (!g->raw) return NULL;
    memset(g->raw, GUARD_BYTE, bytes + 2 * GUARD);
    return g->raw + GUARD;
}

static bool gbuf_intact(const gbuf_t *g)
{
    for (size_t i = 0; i < GUARD; i++)
        if (g->raw[i] != GUARD_BYTE || g->raw[GUARD + g->bytes + i] != GUARD_BYTE) return false;
    return true;
}

/* Run coll with base count n (this rank's arguments, after the case's twist). */
static mlc_status_t call(mlc_comm_t *c, mlc_coll_t coll, size_t n, mlc_dtype_t dt, mlc_op_t op, int root,
                         gbuf_t *sg, gbuf_t *rg)
{
    int p = mlc_comm_size(c), r = mlc_comm_rank(c);
    size_t es = mlc_dtype_size(dt), total = n * (size_t)p;
    void *s = gbuf(sg, total * es), *d = gbuf(rg, total * es);
    size_t counts[8], displs[8];
    if (!s || !d || p > 8) return MLC_ERR_NO_MEMORY;
    memset(s, 1, total * es);
    for (int i = 0; i < p; i++) {
        counts[i] = n;
        displs[i] = (size_t)i * n;
    }
    switch (coll) {
    case MLC_COLL_BROADCAST: return mlc_broadcast(s, d, n, dt, root, c, NULL);
    case MLC_COLL_REDUCE: return mlc_reduce(s, d, n, dt, op, root, c, NULL);
    case MLC_COLL_ALLREDUCE: return mlc_allreduce(s, d, n, dt, op, c, NULL);
    case MLC_COLL_ALLGATHER: return mlc_allgather(s, d, n, dt, c, NULL);
    case MLC_COLL_ALLGATHERV: return mlc_allgatherv(s, counts[r], d, counts, displs, dt, c, NULL);
    case MLC_COLL_REDUCE_SCATTER: return mlc_reduce_scatter(s, d, n, dt, op, c, NULL);
    case MLC_COLL_ALLTOALL: return mlc_alltoall(s, d, n, dt, c, NULL);
    case MLC_COLL_ALLTOALLV: return mlc_alltoallv(s, counts, displs, d, counts, displs, dt, c, NULL);
    case MLC_COLL_GATHER: return mlc_gather(s, d, n, dt, root, c, NULL);
    case MLC_COLL_GATHERV: return mlc_gatherv(s, n, d, counts, displs, dt, root, c, NULL);
    case MLC_COLL_SCATTER: return mlc_scatter(s, d, n, dt, root, c, NULL);
    case MLC_COLL_SCATTERV: return mlc_scatterv(s, counts, displs, d, n, dt, root, c, NULL);
    case MLC_COLL_BARRIER: return mlc_barrier(c, NULL);
    default: return MLC_ERR_INVALID_ARG;
    }
}

static int join(mlc_comm_t *comm, mlc_comm_t **out)
{
    mlc_unique_id_t id;
    memset(&id, 0, sizeof id);
    if (mlc_comm_rank(comm) == 0) CHECK_OK(mlc_get_unique_id(&id));
    CHECK_OK(mlc_broadcast(&id, &id, sizeof id, MLC_UINT8, 0, comm, NULL));
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = mlc_comm_backend(comm);
    CHECK_OK(mlc_comm_init_rank(&id, mlc_comm_size(comm), mlc_comm_rank(comm), &cfg, out));
    return 0;
}

/* One case on a fresh communicator; outcome letters: M = mismatch on the
 * call, L = mismatch on the next call (a sender that had completed). */
static int run_case(mlc_comm_t *comm, const case_t *k, size_t n, const char *algo, char *outcome)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *c = NULL;
    CHECK_RUN(join(comm, &c));
    /* Every rank is out of init before any starts the case: a rank that
     * fails the new communicator would otherwise fail a slower rank's init. */
    CHECK_OK(mlc_barrier(comm, NULL));
    if (algo) (void)mlc_comm_set_algo(c, k->coll, algo); /* not every collective has it */
    bool odd = r == 1;
    mlc_coll_t coll = k->coll;
    size_t cnt = n;
    mlc_dtype_t dt = MLC_FLOAT32;
    mlc_op_t op = MLC_SUM;
    int root = 0;
    if (odd) {
        switch (k->diff) {
        case D_COUNT: cnt = n * 2 + 1; break;
        case D_DTYPE: dt = MLC_INT32; break;
        case D_OP: op = MLC_MAX; break;
        case D_ROOT: root = 1; break;
        case D_COLL: coll = coll == MLC_COLL_ALLREDUCE ? MLC_COLL_BROADCAST : MLC_COLL_ALLREDUCE; break;
        case D_RECORD: dt = MLC_RECORD(8); break;
        case D_USER_OP: op = user_b; break;
        }
    } else if (k->diff == D_USER_OP) {
        op = user_a;
    }
    gbuf_t sg = {0}, rg = {0};
    mlc_status_t st = call(c, coll, cnt, dt, op, root, &sg, &rg);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    bool intact = (!sg.raw || gbuf_intact(&sg)) && (!rg.raw || gbuf_intact(&rg));
    free(sg.raw);
    free(rg.raw);
    *outcome = 'M';
    if (st == MLC_SUCCESS) {
        st = mlc_barrier(c, NULL);
        snprintf(msg, sizeof msg, "%s", mlc_last_error());
        *outcome = 'L';
    }
    CHECK(intact, "%s/%s n=%zu%s%s: a receive buffer's guard bytes were overwritten", mlc_coll_name(k->coll),
          diff_names[k->diff], n, algo ? " algo=" : "", algo ? algo : "");
    CHECK(st == MLC_ERR_MISMATCH, "%s/%s n=%zu%s%s: %s, expected MLC_ERR_MISMATCH (%s)", mlc_coll_name(k->coll),
          diff_names[k->diff], n, algo ? " algo=" : "", algo ? algo : "", mlc_status_name(st), msg);
    /* The message names a collective of the case (after 'L', the next call's may be named instead). */
    CHECK(strstr(msg, mlc_coll_name(k->coll)) != NULL || strstr(msg, mlc_coll_name(coll)) != NULL ||
              (*outcome == 'L' && strstr(msg, " vs rank ") != NULL),
          "%s/%s: the message does not name the collective: %s", mlc_coll_name(k->coll), diff_names[k->diff],
          msg);
    if (r == 0 && n == 4 && !algo) fprintf(stderr, "  rank 0 says: %s\n", msg);
    mlc_comm_free(c);
    return 0;
}

/* Every rank a broadcast root of its own (nobody reads, nobody compares),
 * then a call that takes the slot path (4000 bytes): it must fail with
 * MLC_ERR_MISMATCH on every rank, naming the broadcasts. */
static int unread_then_slot(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *c = NULL;
    CHECK_RUN(join(comm, &c));
    CHECK_OK(mlc_barrier(comm, NULL));
    float b[4] = {0}, x[1000] = {0}, y[1000];
    mlc_status_t st = mlc_broadcast(b, b, 4, MLC_FLOAT32, r, c, NULL);
    if (st == MLC_SUCCESS) st = mlc_allreduce(x, y, 1000, MLC_FLOAT32, MLC_SUM, c, NULL);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    CHECK(st == MLC_ERR_MISMATCH, "every rank a broadcast root, then a 4000-byte allreduce: %s, expected "
          "MLC_ERR_MISMATCH (%s)", mlc_status_name(st), msg);
    CHECK(strstr(msg, "broadcast") != NULL, "the message does not name the broadcasts: %s", msg);
    mlc_comm_free(c);
    return 0;
}

/* A loop of broadcasts from rank 0 in which the last rank passes 100
 * elements (800 bytes: the slot path) and the others 1 (the quick path,
 * where the root runs up to 127 ops ahead of its readers): every rank must
 * fail with MLC_ERR_MISMATCH within the loop (160 ops: the root wraps its
 * announcement ring), none wait until MLC_TIMEOUT. */
static int paths_apart_loop(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    mlc_comm_t *c = NULL;
    CHECK_RUN(join(comm, &c));
    CHECK_OK(mlc_barrier(comm, NULL));
    uint64_t b[100] = {0};
    size_t n = r == p - 1 ? 100 : 1;
    mlc_status_t st = MLC_SUCCESS;
    for (int i = 0; i < 160 && st == MLC_SUCCESS; i++) st = mlc_broadcast(b, b, n, MLC_UINT64, 0, c, NULL);
    if (st == MLC_SUCCESS) st = mlc_barrier(c, NULL);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    CHECK(st == MLC_ERR_MISMATCH, "160 broadcasts, the last rank on another path: %s, expected MLC_ERR_MISMATCH (%s)",
          mlc_status_name(st), msg);
    mlc_comm_free(c);
    return 0;
}

/* A loop of broadcasts in which the lower half of the ranks names root 0 and
 * the upper half root p/2 (each half agrees within itself): some rank must
 * fail the first broadcast, and every rank the loop or the barrier after it. */
static int two_roots_loop(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    if (p < 4) return 0; /* each half needs a reader */
    mlc_comm_t *c = NULL;
    CHECK_RUN(join(comm, &c));
    CHECK_OK(mlc_barrier(comm, NULL));
    int root = r < p / 2 ? 0 : p / 2, failed_at = 8;
    uint32_t v = (uint32_t)r;
    mlc_status_t st = MLC_SUCCESS;
    for (int i = 0; i < 8 && st == MLC_SUCCESS; i++) {
        st = mlc_broadcast(&v, &v, 1, MLC_UINT32, root, c, NULL);
        if (st != MLC_SUCCESS) failed_at = i;
    }
    if (st == MLC_SUCCESS) st = mlc_barrier(c, NULL);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    CHECK(st == MLC_ERR_MISMATCH, "broadcasts from root 0 and root %d: %s, expected MLC_ERR_MISMATCH (%s)", p / 2,
          mlc_status_name(st), msg);
    int first = failed_at;
    CHECK_OK(mlc_allreduce(&failed_at, &first, 1, MLC_INT32, MLC_MIN, comm, NULL));
    CHECK(first == 0, "broadcasts from root 0 and root %d: no rank failed the first one (first failure: call %d)",
          p / 2, first);
    mlc_comm_free(c);
    return 0;
}

/* Rank 0 splits the communicator while the others call collectives with the
 * very signatures of the split's own (an allgather of 2 int32, then an
 * allreduce of 1 uint32 with max): nobody may succeed with the other's data.
 * Rank 0's split fails with MLC_ERR_MISMATCH naming mlc_comm_split and
 * returns no communicator; every other rank fails its allgather, or its
 * allreduce, or the barrier after them. (The mpi backend compares calls
 * only with MLC_CHECK, which this test sets: there the split's own
 * collective is compared like a user's call, its signature naming the
 * split.) */
static int split_against_user(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *c = NULL;
    CHECK_RUN(join(comm, &c));
    CHECK_OK(mlc_barrier(comm, NULL));
    mlc_status_t st;
    char msg[600];
    if (r == 0) {
        mlc_comm_t *sub = NULL;
        st = mlc_comm_split(c, 3, 0, &sub);
        snprintf(msg, sizeof msg, "%s", mlc_last_error());
        CHECK(st == MLC_ERR_MISMATCH, "rank 0 split while the others all-gathered 2 int32: %s, expected "
              "MLC_ERR_MISMATCH (%s)", mlc_status_name(st), msg);
        CHECK(strstr(msg, "mlc_comm_split") != NULL, "the message does not name mlc_comm_split: %s", msg);
        CHECK(sub == NULL, "a failed split handed out a communicator");
    } else {
        int32_t mine[2] = {3, 0}, all[2 * 8];
        uint32_t v = 1, m = 0;
        st = mlc_allgather(mine, all, 2, MLC_INT32, c, NULL);
        if (st == MLC_SUCCESS) st = mlc_allreduce(&v, &m, 1, MLC_UINT32, MLC_MAX, c, NULL);
        if (st == MLC_SUCCESS) st = mlc_barrier(c, NULL);
        snprintf(msg, sizeof msg, "%s", mlc_last_error());
        CHECK(st == MLC_ERR_MISMATCH, "an allgather of 2 int32 while rank 0 split: %s, expected "
              "MLC_ERR_MISMATCH (%s)", mlc_status_name(st), msg);
    }
    mlc_comm_free(c);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    if (p < 2 || p > 8) return MLC_TEST_SKIP;
    static const size_t sizes[] = {4, 20000}; /* slot-sized and large (80 KB) */
    const char *algos[] = {NULL, "ring"};
    int failed = 0, cases = 0;
    CHECK_OK(mlc_op_create(op_sum, 1, NULL, &user_a));
    CHECK_OK(mlc_op_create(op_max, 1, NULL, &user_b));
    for (int c = 0; c < MLC_COLL_SEND; c++)
        for (int d = D_COUNT; d <= D_USER_OP; d++) {
            case_t k = {(mlc_coll_t)c, (diff_t)d};
            if (!applies(k.coll, k.diff)) continue;
            for (size_t si = 0; si < 2; si++)
                for (int ai = 0; ai < 2; ai++) {
                    const char *names[32];
                    bool has = false;
                    if (algos[ai]) {
                        int na = mlc_test_algos(comm, k.coll, names, 32);
                        for (int i = 0; i < na; i++) has |= strcmp(names[i], algos[ai]) == 0;
                        if (!has) continue;
                    }
                    char outcome = '?';
                    int bad = run_case(comm, &k, sizes[si], algos[ai], &outcome);
                    /* Every rank's outcome, so rank 0 prints the row. */
                    char row[8] = {0};
                    char mine = bad ? 'F' : outcome;
                    CHECK_OK(mlc_allgather(&mine, row, 1, MLC_UINT8, comm, NULL));
                    if (r == 0)
                        printf("mismatch %-15s %-10s n=%-6zu %-5s ranks: %.*s\n", mlc_coll_name(k.coll),
                               diff_names[k.diff], sizes[si], algos[ai] ? algos[ai] : "auto", p, row);
                    failed |= bad;
                    cases++;
                    if (mlc_test_any_failed(comm, bad)) return 1;
                }
        }
    /* The cases a single call plus a barrier cannot show. */
    static int (*const sequences[])(mlc_comm_t *) = {unread_then_slot, paths_apart_loop, two_roots_loop,
                                                     split_against_user};
    for (size_t i = 0; i < sizeof sequences / sizeof *sequences; i++) {
        int bad = sequences[i](comm);
        failed |= bad;
        if (mlc_test_any_failed(comm, bad)) return 1;
    }
    if (r == 0) printf("mismatch: %d cases on %d ranks (%s): M = the call failed with MLC_ERR_MISMATCH, "
                       "L = the call completed and the next call failed\n", cases, p, mlc_comm_backend(comm));
    CHECK_OK(mlc_op_free(user_a));
    CHECK_OK(mlc_op_free(user_b));
    return failed;
}

MLC_TEST_MAIN(body)
