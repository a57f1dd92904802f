/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_split: uneven colours, keys that reverse the order, ties broken
 * by parent rank, MLC_UNDEFINED, collectives and p2p on subgroups while the
 * parent carries traffic with the same tags, nested splits, and many
 * split/free cycles, and two communicators driven at the same time by two
 * threads of every rank.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

/* Check the new communicator holds `members` (parent ranks, in new-rank
 * order): size, own rank, and an allgather of parent ranks. */
static int check_members(mlc_comm_t *comm, mlc_comm_t *sub, const int *members, int n)
{
    int r = mlc_comm_rank(comm);
    CHECK(sub != NULL, "split gave no communicator");
    CHECK(mlc_comm_size(sub) == n, "subgroup size %d, expected %d", mlc_comm_size(sub), n);
    int me = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == r) me = i;
    CHECK(mlc_comm_rank(sub) == me, "rank in subgroup %d, expected %d", mlc_comm_rank(sub), me);
    int32_t mine = r, *all = calloc((size_t)n, sizeof *all);
    CHECK(all, "out of memory");
    CHECK_OK(mlc_allgather(&mine, all, 1, MLC_INT32, sub, NULL));
    for (int i = 0; i < n; i++)
        CHECK(all[i] == members[i], "subgroup rank %d is parent rank %d, expected %d", i, all[i],
              members[i]);
    int32_t sum = -1, want = 0;
    for (int i = 0; i < n; i++) want += members[i];
    CHECK_OK(mlc_allreduce(&mine, &sum, 1, MLC_INT32, MLC_SUM, sub, NULL));
    CHECK(sum == want, "allreduce over the subgroup gave %d, expected %d", sum, want);
    CHECK(strcmp(mlc_comm_backend(sub), mlc_comm_backend(comm)) == 0, "subgroup backend %s",
          mlc_comm_backend(sub));
    free(all);
    return 0;
}

/* Rank 0 alone, everyone else together (ordered by parent rank). */
static int lonely_root(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    mlc_comm_t *sub = NULL;
    CHECK_OK(mlc_comm_split(comm, r == 0 ? 0 : 1, 0, &sub));
    int members[64], n = 0;
    for (int q = 0; q < p; q++)
        if ((q == 0) == (r == 0)) members[n++] = q;
    CHECK_RUN(check_members(comm, sub, members, n));
    CHECK_OK(mlc_comm_free(sub));
    return 0;
}

/* Colour r % 2 (uneven for odd p), key -r: each group in reverse order. */
static int reversed_keys(mlc_comm_t *comm, mlc_comm_t **out)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    mlc_comm_t *sub = NULL;
    CHECK_OK(mlc_comm_split(comm, r % 2, -r, &sub));
    int members[64], n = 0;
    for (int q = p - 1; q >= 0; q--)
        if (q % 2 == r % 2) members[n++] = q;
    CHECK_RUN(check_members(comm, sub, members, n));
    *out = sub;
    return 0;
}

/* The last rank opts out with MLC_UNDEFINED and gets NULL. */
static int undefined_colour(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    mlc_comm_t *sub = (mlc_comm_t *)&sub; /* not NULL: split must write NULL */
    CHECK_OK(mlc_comm_split(comm, r == p - 1 ? MLC_UNDEFINED : 7, 0, &sub));
    if (r == p - 1) {
        CHECK(sub == NULL, "MLC_UNDEFINED did not give NULL");
        return 0;
    }
    int members[64];
    for (int q = 0; q < p - 1; q++) members[q] = q;
    CHECK_RUN(check_members(comm, sub, members, p - 1));
    CHECK_OK(mlc_comm_free(sub));
    return 0;
}

/*
 * Traffic on the subgroup and on the parent at the same time, with the same
 * tags and overlapping peers: nothing crosses over.
 */
static int concurrent_traffic(mlc_comm_t *comm, mlc_comm_t *sub)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    int sp = mlc_comm_size(sub), sr = mlc_comm_rank(sub);
    int pnext = (r + 1) % p, pprev = (r + p - 1) % p;
    int snext = (sr + 1) % sp, sprev = (sr + sp - 1) % sp;
    enum { N = 2049 };
    int32_t *a = calloc(N, 4), *sa = calloc(N, 4), *pa = calloc(N, 4);
    int32_t sout = 1000 + r, pout = 2000 + r, sin = -1, pin = -1;
    CHECK(a && sa && pa, "out of memory");
    for (int i = 0; i < N; i++) a[i] = r + i;
    mlc_request_t *reqs[6];
    CHECK_OK(mlc_allreduce(a, sa, N, MLC_INT32, MLC_SUM, sub, &reqs[0]));
    CHECK_OK(mlc_allreduce(a, pa, N, MLC_INT32, MLC_SUM, comm, &reqs[1]));
    CHECK_OK(mlc_recv(&pin, 1, MLC_INT32, MLC_ANY_SOURCE, 5, comm, NULL, &reqs[2]));
    CHECK_OK(mlc_recv(&sin, 1, MLC_INT32, MLC_ANY_SOURCE, 5, sub, NULL, &reqs[3]));
    CHECK_OK(mlc_send(&sout, 1, MLC_INT32, snext, 5, sub, &reqs[4]));
    CHECK_OK(mlc_send(&pout, 1, MLC_INT32, pnext, 5, comm, &reqs[5]));
    CHECK_OK(mlc_request_wait_all(6, reqs, NULL));
    /* The sub ring's previous member, as a parent rank: allgather tells. */
    int32_t *parents = calloc((size_t)sp, 4), me = r;
    CHECK(parents, "out of memory");
    CHECK_OK(mlc_allgather(&me, parents, 1, MLC_INT32, sub, NULL));
    CHECK(sin == 1000 + parents[sprev], "subgroup message %d, expected %d", sin,
          1000 + parents[sprev]);
    CHECK(pin == 2000 + pprev, "parent message %d, expected %d", pin, 2000 + pprev);
    int64_t ssum = 0;
    for (int q = 0; q < sp; q++) ssum += parents[q];
    for (int i = 0; i < N; i++) {
        CHECK(sa[i] == (int32_t)(ssum + (int64_t)sp * i), "subgroup allreduce element %d is %d", i,
              sa[i]);
        CHECK(pa[i] == p * (p - 1) / 2 + p * i, "parent allreduce element %d is %d", i, pa[i]);
    }
    free(a);
    free(sa);
    free(pa);
    free(parents);
    return 0;
}

/* Split the subgroup again by its own rank parity. */
static int nested(mlc_comm_t *comm, mlc_comm_t *sub)
{
    int sp = mlc_comm_size(sub), sr = mlc_comm_rank(sub);
    mlc_comm_t *subsub = NULL;
    CHECK_OK(mlc_comm_split(sub, sr % 2, sr, &subsub));
    CHECK(subsub != NULL, "nested split gave no communicator");
    CHECK(mlc_comm_size(subsub) == (sr % 2 == 0 ? (sp + 1) / 2 : sp / 2), "nested size %d",
          mlc_comm_size(subsub));
    CHECK(mlc_comm_rank(subsub) == sr / 2, "nested rank %d", mlc_comm_rank(subsub));
    int32_t v = sr, sum = -1, want = 0;
    for (int q = sr % 2; q < sp; q += 2) want += q;
    CHECK_OK(mlc_allreduce(&v, &sum, 1, MLC_INT32, MLC_SUM, subsub, NULL));
    CHECK(sum == want, "nested allreduce %d, expected %d", sum, want);
    CHECK_OK(mlc_barrier(subsub, NULL));
    CHECK_OK(mlc_comm_free(subsub));
    return 0;
}

/* A failure on a split communicator names its ranks, and says which world
 * ranks (of the communicator the splits began from) they are. */
static int failure_names_world_ranks(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    mlc_comm_t *rev = NULL, *half = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, p - 1 - r, &rev)); /* rank i is world rank p-1-i */
    int rr = mlc_comm_rank(rev), colour = rr % 2;
    CHECK_OK(mlc_comm_split(rev, colour, rr, &half)); /* rank i is rev's 2i+colour */
    char want[256] = "world ranks ";
    size_t used = strlen(want);
    for (int i = 0; i < mlc_comm_size(half) && used < sizeof want; i++)
        used += (size_t)snprintf(want + used, sizeof want - used, "%s%d", i ? ", " : "", p - 1 - (2 * i + colour));
    if (mlc_comm_rank(half) == 0) CHECK_OK(mlc_comm_abort(half));
    CHECK_ERR(mlc_barrier(half, NULL), MLC_ERR_ABORTED);
    CHECK(strstr(mlc_last_error(), want) != NULL, "the message does not say \"%s\": %s", want, mlc_last_error());
    CHECK_OK(mlc_comm_free(half));
    CHECK_OK(mlc_barrier(rev, NULL));
    CHECK(mlc_comm_status(rev) == MLC_SUCCESS, "the parent failed too: %s", mlc_status_name(mlc_comm_status(rev)));
    CHECK_OK(mlc_comm_free(rev));
    return 0;
}

/* Equal keys: order by parent rank. Repeated split + free must not leak. */
static int ties_and_cycles(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    int members[64];
    for (int q = 0; q < p; q++) members[q] = q;
    for (int i = 0; i < 50; i++) {
        mlc_comm_t *dup = NULL;
        CHECK_OK(mlc_comm_split(comm, 3, 42, &dup));
        if (i % 10 == 0) CHECK_RUN(check_members(comm, dup, members, p));
        else CHECK_OK(mlc_barrier(dup, NULL));
        CHECK_OK(mlc_comm_free(dup));
    }
    return 0;
}

typedef struct worker {
    mlc_comm_t *comm;
    int salt, failed;
    char why[256];
} worker_t;

/* 200 allreduces and p2p ring exchanges on one communicator. */
static void *drive(void *arg)
{
    worker_t *w = arg;
    int p = mlc_comm_size(w->comm), r = mlc_comm_rank(w->comm);
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    int32_t v[33], sum[33], in = -1, out;
    for (int it = 0; it < 200 && !w->failed; it++) {
        for (int i = 0; i < 33; i++) v[i] = r * w->salt + i + it;
        mlc_status_t st = mlc_allreduce(v, sum, 33, MLC_INT32, MLC_SUM, w->comm, NULL);
        out = w->salt * 1000 + r;
        if (st == MLC_SUCCESS)
            st = mlc_sendrecv(&out, 1, next, 1, &in, 1, prev, 1, MLC_INT32, w->comm, NULL, NULL);
        if (st != MLC_SUCCESS) {
            snprintf(w->why, sizeof w->why, "iteration %d: %s: %s", it, mlc_status_name(st), mlc_last_error());
            w->failed = 1;
        } else if (sum[5] != w->salt * p * (p - 1) / 2 + p * (5 + it) || in != w->salt * 1000 + prev) {
            snprintf(w->why, sizeof w->why, "iteration %d: allreduce %d, ring %d", it, sum[5], in);
            w->failed = 1;
        }
    }
    return NULL;
}

/* Different communicators may be used from different threads at once. */
static int two_threads_two_comms(mlc_comm_t *comm)
{
    mlc_comm_t *a = NULL, *b = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, 0, &a));
    CHECK_OK(mlc_comm_split(comm, 0, -mlc_comm_rank(comm), &b)); /* reversed order */
    worker_t wa = {a, 3, 0, ""}, wb = {b, 7, 0, ""};
    pthread_t tid;
    CHECK(pthread_create(&tid, NULL, drive, &wa) == 0, "pthread_create");
    drive(&wb);
    pthread_join(tid, NULL);
    CHECK(!wa.failed, "communicator a (its own thread): %s", wa.why);
    CHECK(!wb.failed, "communicator b (main thread): %s", wb.why);
    CHECK_OK(mlc_comm_free(a));
    CHECK_OK(mlc_comm_free(b));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    mlc_comm_t *sub = NULL;
    if (mlc_comm_size(comm) > 64) return MLC_TEST_SKIP; /* member tables below hold 64 */
    CHECK_RUN(lonely_root(comm));
    CHECK_RUN(reversed_keys(comm, &sub));
    CHECK_RUN(undefined_colour(comm));
    CHECK_RUN(concurrent_traffic(comm, sub));
    CHECK_RUN(nested(comm, sub));
    CHECK_OK(mlc_comm_free(sub));
    CHECK_RUN(ties_and_cycles(comm));
    CHECK_RUN(failure_names_world_ranks(comm));
    CHECK_RUN(two_threads_two_comms(comm));
    CHECK(mlc_comm_free(NULL) == MLC_SUCCESS, "mlc_comm_free(NULL) failed");
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
