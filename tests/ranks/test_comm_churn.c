/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that makes and frees communicators all its life (a group per
 * step, a split per layer) keeps what its first ones had. Each round splits
 * the test's communicator (halves from 3 ranks on, every other round: the
 * children are disjoint), keeps up to KEEP of them alive at once, and frees
 * the oldest; ROUNDS rounds in all, far more than the engine has slot areas.
 * On every child:
 * - the engine's own algorithm takes small and large allreduces (on threads
 *   and shm: it needs a slot area; the 33rd communicator had none),
 * - results are exact (an area reused must hold nothing of its last user),
 * - a member that frees the child and lives on is reported
 *   (MLC_ERR_PEER_LOST, "freed the communicator") long before MLC_TIMEOUT:
 *   without a slot area there was no mark for it, and the wait timed out
 *   (threads and shm).
 * Two races on the way a new communicator gets its area:
 * - a fast rank finishes its part of a call on C (a broadcast root), frees
 *   C and makes D, while a slower member of C has not yet set C up: D took
 *   C's area and the slower member read D's data as C's (from 3 ranks);
 * - two threads of each rank split two parents at once: the communicators
 *   got one context, and their calls mixed each other's data; then some
 *   got no area (another parent's claims hid every free one).
 * And a split of a communicator another rank aborted names mlc_comm_split
 * as the call that failed; a split held up on one rank by another thread's
 * split, which waits for its members, fails with MLC_ERR_BUSY after its
 * parent's timeout on every member, says what held it, and leaves the
 * parent usable (threads and shm).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backends/engine/engine.h"
#include "harness.h"

#define ROUNDS 80
#define KEEP 4
#define LARGE (256 * 1024) /* floats: 1 MiB, the engine's single-copy path */

static bool on_engine(mlc_comm_t *comm)
{
    const char *b = mlc_comm_backend(comm);
    return strcmp(b, "shm") == 0 || strcmp(b, "threads") == 0;
}

/* Allreduces of 1 and LARGE floats on comm, each rank's values from its rank and the round. */
static int use_child(mlc_comm_t *comm, int round, float *in, float *out)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    const char *algo = NULL;
    if (on_engine(comm)) {
        for (int k = 0; k < 2; k++) {
            size_t bytes = k ? LARGE * sizeof(float) : sizeof(float);
            CHECK_OK(mlc_comm_get_algo(comm, MLC_COLL_ALLREDUCE, bytes, &algo));
            CHECK(algo && strcmp(algo, "direct") == 0, "round %d: an allreduce of %zu bytes on a new communicator "
                  "takes '%s', not the engine's own 'direct'", round, bytes, algo ? algo : "(null)");
        }
    }
    for (int k = 0; k < 2; k++) {
        size_t n = k ? LARGE : 1;
        for (size_t i = 0; i < n; i++) in[i] = (float)((r + 1) * 100 + round) + (float)(i % 7);
        memset(out, 0, n * sizeof *out);
        CHECK_OK(mlc_allreduce(in, out, n, MLC_FLOAT32, MLC_SUM, comm, NULL));
        for (size_t i = 0; i < n; i++) {
            float want = (float)(100 * p * (p + 1) / 2 + p * round) + (float)p * (float)(i % 7);
            CHECK(out[i] == want, "round %d: allreduce of %zu floats, element %zu: %g, want %g", round, n, i,
                  (double)out[i], (double)want);
        }
    }
    return 0;
}

/* The last rank frees a fresh child at once; the others' allreduce on it must fail promptly. */
static int member_freed(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &child));
    if (r == p - 1) {
        CHECK_OK(mlc_comm_free(child));
    } else {
        float a = 1, b = 0;
        mlc_status_t st = mlc_allreduce(&a, &b, 1, MLC_FLOAT32, MLC_SUM, child, NULL);
        CHECK(st == MLC_ERR_PEER_LOST && strstr(mlc_last_error(), "freed the communicator"),
              "after %d communicators: an allreduce waiting for a member that freed the communicator -> %s (%s), "
              "expected MLC_ERR_PEER_LOST", ROUNDS, mlc_status_name(st), mlc_last_error());
        CHECK_OK(mlc_comm_free(child));
    }
    CHECK_OK(mlc_barrier(comm, NULL));
    return 0;
}

/* Rank 0, root of a broadcast on C = {0, 1}, frees C at once and makes D =
 * {0, 2} from P = {0, 2}; rank 1 must get rank 0's C data. */
#define FAST_REPS 40
static int fast_peer(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    for (int rep = 0; rep < FAST_REPS; rep++) {
        mlc_comm_t *P = NULL, *C = NULL, *D = NULL;
        CHECK_OK(mlc_comm_split(comm, r == 0 || r == 2 ? 0 : MLC_UNDEFINED, r, &P));
        CHECK_OK(mlc_comm_split(comm, r < 2 ? 0 : 1, r, &C));
        uint64_t c_data = 0xC000000000000000ull + (uint64_t)rep, d_data = 0xD000000000000000ull + (uint64_t)rep;
        if (r == 0 || r == 1) {
            uint64_t x = r == 0 ? c_data : 0;
            CHECK_OK(mlc_broadcast(&x, &x, 1, MLC_UINT64, 0, C, NULL));
            CHECK(x == c_data, "rep %d: broadcast on C = {0, 1} gave %#llx, rank 0 sent %#llx (%s)", rep,
                  (unsigned long long)x, (unsigned long long)c_data,
                  x == d_data ? "its data for D, made after it freed C" : "neither C's nor D's");
        }
        CHECK_OK(mlc_comm_free(C));
        if (P) {
            CHECK_OK(mlc_comm_split(P, 0, r, &D));
            for (int k = 0; k < 3; k++) {
                uint64_t y = r == 0 ? d_data : 0;
                CHECK_OK(mlc_broadcast(&y, &y, 1, MLC_UINT64, 0, D, NULL));
                CHECK(y == d_data, "rep %d: broadcast on D gave %#llx", rep, (unsigned long long)y);
            }
            CHECK_OK(mlc_comm_free(D));
            CHECK_OK(mlc_comm_free(P));
        }
        CHECK_OK(mlc_barrier(comm, NULL));
    }
    return 0;
}

/* Two threads of each rank: each splits its own parent, allreduces, frees, again and again. */
#define THREAD_SPLITS 100
typedef struct {
    mlc_comm_t *parent;
    int which, failed;
} splitter_t;

static int split_again(splitter_t *t)
{
    mlc_comm_t *comm = t->parent;
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    for (int i = 0; i < THREAD_SPLITS; i++) {
        mlc_comm_t *child = NULL;
        CHECK_OK(mlc_comm_split(comm, 0, r, &child));
        const char *algo = NULL;
        CHECK_OK(mlc_comm_get_algo(child, MLC_COLL_ALLREDUCE, 8, &algo));
        CHECK(!on_engine(child) || (algo && strcmp(algo, "direct") == 0), "thread %d, split %d: the new "
              "communicator takes '%s', not 'direct' (no slot area, with at most 3 alive)", t->which, i,
              algo ? algo : "(null)");
        uint64_t x = (uint64_t)(t->which + 1) * 1000000u + (uint64_t)i, y = 0;
        for (int k = 0; k < 2; k++) {
            CHECK_OK(mlc_allreduce(&x, &y, 1, MLC_UINT64, MLC_SUM, child, NULL));
            CHECK(y == x * (uint64_t)p, "thread %d, split %d: allreduce gave %llu, want %llu (another thread's "
                  "communicator's data?)", t->which, i, (unsigned long long)y, (unsigned long long)(x * (uint64_t)p));
        }
        CHECK_OK(mlc_comm_free(child));
    }
    return 0;
}

static void *splitter(void *arg)
{
    splitter_t *t = arg;
    t->failed = split_again(t);
    return NULL;
}

static int concurrent_splits(mlc_comm_t *comm)
{
    splitter_t t[2] = {{NULL, 0, 1}, {NULL, 1, 1}};
    for (int k = 0; k < 2; k++) CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &t[k].parent));
    pthread_t th[2];
    for (int k = 0; k < 2; k++) CHECK(pthread_create(&th[k], NULL, splitter, &t[k]) == 0, "pthread_create");
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) CHECK_OK(mlc_comm_free(t[k].parent));
    CHECK(!t[0].failed && !t[1].failed, "a splitting thread failed (above)");
    return 0;
}

/* A member stalled inside a split's agreement (descheduled, stopped) holds
 * up the other splits of its ranks. Made here without a stall: rank 0's
 * thread runs the engine's agreement for a split of A (the older parent, so
 * it goes first) directly, past the allgather of colours that a split runs
 * first, and so waits in it for the other members, who split B first. Rank
 * 0's own split of B is held up by it; after B's timeout every member's
 * split of B fails with MLC_ERR_BUSY, naming what held it up, and B stays
 * usable; then the others join A's agreement. If rank 0's thread had not
 * yet begun when rank 0 split B, that split succeeds everywhere and the
 * case tries again. */
#define HELD_TIMEOUT_S 1.0

typedef struct {
    mlc_comm_t *parent;
    mlc_status_t st;
    atomic_int started;
} held_t;

/* The engine's agreement of a split of `parent`, making no child. */
static mlc_status_t agree_only(mlc_comm_t *parent) { return eng_be_split(parent, 0, 0, NULL, 0, NULL); }

static void *agree_in_thread(void *arg)
{
    held_t *h = arg;
    atomic_store(&h->started, 1);
    h->st = agree_only(h->parent);
    return NULL;
}

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* What a held-up split of B (`comm`) returned: 1 on a failed check. */
static int check_held(mlc_comm_t *comm, mlc_status_t st, mlc_comm_t *child, double took, const char *m)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    if (st == MLC_SUCCESS) {
        CHECK_OK(mlc_comm_free(child));
        return 0;
    }
    CHECK(st == MLC_ERR_BUSY && child == NULL, "held-up split of B -> %s (%s)", mlc_status_name(st), m);
    CHECK(took > 0.5 * HELD_TIMEOUT_S && took < HELD_TIMEOUT_S + 10, "it failed after %.2f s, B's timeout is %g s",
          took, HELD_TIMEOUT_S);
    CHECK(strncmp(m, "mlc_comm_split: the members could not agree for 1 s (MLC_TIMEOUT): ", 67) == 0 &&
              strstr(m, "nothing was made, and the communicator split stays usable"),
          "message: %s", m);
    char why[128];
    if (r == 0)
        snprintf(why, sizeof why, "another thread's split of a communicator of %d ranks went first", p);
    else
        snprintf(why, sizeof why, "splits on other members held it up");
    CHECK(strstr(m, why), "rank %d's message does not say \"%s\": %s", r, why, m);
    return 0;
}

/* One try on B (`comm`): *busy = its split failed with MLC_ERR_BUSY as it
 * should (else it succeeded: try again). 1 on a failed check; rank 0's
 * thread is joined first either way (it holds `h`). */
static int held_split_once(mlc_comm_t *A, mlc_comm_t *comm, int *busy)
{
    int r = mlc_comm_rank(comm);
    held_t h = {A, MLC_SUCCESS, 0};
    pthread_t th;
    if (r == 0) {
        CHECK(pthread_create(&th, NULL, agree_in_thread, &h) == 0, "pthread_create");
        while (!atomic_load(&h.started)) nap_ms(1);
        nap_ms(200); /* its agreement on A is under way, waiting for the others */
    }
    mlc_comm_t *child = NULL;
    double t0 = mlc_test_now();
    mlc_status_t st = mlc_comm_split(comm, 0, r, &child);
    double took = mlc_test_now() - t0;
    char m[512];
    snprintf(m, sizeof m, "%s", mlc_last_error());
    *busy = st == MLC_ERR_BUSY;
    int failed = check_held(comm, st, child, took, m);
    if (r == 0) {
        pthread_join(th, NULL);
        CHECK(h.st == MLC_SUCCESS, "rank 0's thread: agreement on A -> %s", mlc_status_name(h.st));
    } else {
        CHECK_OK(agree_only(A));
    }
    return failed;
}

static int held_split(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm), busy = 0;
    mlc_comm_t *A = NULL, *B = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &A));
    CHECK_OK(mlc_comm_split(comm, 0, r, &B));
    CHECK_OK(mlc_comm_set_timeout(B, HELD_TIMEOUT_S));
    for (int tries = 0; tries < 3 && !busy; tries++)
        if (held_split_once(A, B, &busy)) return 1;
    CHECK(busy, "rank 0's thread never went first in 3 tries");
    CHECK(mlc_comm_status(B) == MLC_SUCCESS, "B failed: %s", mlc_status_name(mlc_comm_status(B)));
    int one = 1, sum = 0;
    CHECK_OK(mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, B, NULL));
    CHECK(sum == p, "allreduce on B after the held-up split: %d, not %d", sum, p);
    CHECK_OK(mlc_comm_free(A));
    CHECK_OK(mlc_comm_free(B));
    return 0;
}

/* A split of a communicator another rank aborted names the split, not the
 * collectives it runs inside ("mlc_allreduce: communicator has failed
 * earlier" to a caller that never called mlc_allreduce). */
static int split_of_aborted(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *P = NULL, *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &P));
    if (r == 0) CHECK_OK(mlc_comm_abort(P));
    CHECK_OK(mlc_barrier(comm, NULL));
    mlc_status_t st = mlc_comm_split(P, 0, r, &child);
    const char *m = mlc_last_error();
    CHECK(st == MLC_ERR_ABORTED && child == NULL, "split of an aborted communicator -> %s (%s)", mlc_status_name(st), m);
    CHECK(strncmp(m, "mlc_comm_split: ", 16) == 0 || strstr(m, " inside mlc_comm_split: ") != NULL,
          "the message does not name mlc_comm_split as the call: %s", m);
    mlc_comm_free(P);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    float *in = malloc(LARGE * sizeof *in), *out = malloc(LARGE * sizeof *out);
    CHECK(in && out, "malloc");
    mlc_comm_t *alive[KEEP] = {0};
    int failed = 0;
    for (int i = 0; i < ROUNDS && !failed; i++) {
        int color = p >= 3 && i % 2 ? r % 2 : 0;
        mlc_comm_t **slot = &alive[i % KEEP];
        if (*slot) CHECK_OK(mlc_comm_free(*slot));
        *slot = NULL;
        CHECK_OK(mlc_comm_split(comm, color, r, slot));
        failed = use_child(*slot, i, in, out);
        /* The older children still work. */
        for (int k = 0; k < KEEP && !failed; k++)
            if (alive[k] && k != i % KEEP) failed = use_child(alive[k], i, in, out);
    }
    for (int k = 0; k < KEEP; k++)
        if (alive[k]) mlc_comm_free(alive[k]);
    if (!failed && p >= 2 && on_engine(comm)) failed = member_freed(comm); /* mpi: MPI.md, no such mark */
    failed = mlc_test_any_failed(comm, failed);
    if (!failed) failed = concurrent_splits(comm);
    if (!failed && p >= 3) failed = fast_peer(comm);
    if (!failed && p >= 2) failed = split_of_aborted(comm);
    if (!failed && p >= 2 && on_engine(comm)) failed = held_split(comm); /* mpi: MPI orders its own splits */
    free(in);
    free(out);
    return mlc_test_any_failed(comm, failed);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
