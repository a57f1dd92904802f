/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_free cancels pending requests, and "their buffers are no longer
 * touched" (mlcomm.h). A receive that would match a send cancelled that way
 * must fail (MLC_ERR_PEER_LOST, naming the free), never return success with
 * bytes the sender's buffer did not hold when it sent them.
 *
 * Rendezvous: rank 0 posts a 4 MiB send (the receiver reads the sender's
 * buffer in place) on a communicator `d`, frees `d` at once, gets
 * MLC_ERR_ABORTED from the send's wait and overwrites the buffer. Only then
 * does rank 1 post the matching receive. It returned the bytes written after
 * the free. From malloc'd memory (read by single copy) and from an
 * mlc_mem_alloc block (on shm, read through the block mapped at the
 * receiver); the communicator freed or aborted (mlc_comm_abort: the same
 * must hold, and the others fail with MLC_ERR_ABORTED); a send, and a
 * nonblocking broadcast whose root does the same.
 *
 * Eager, cut half way: while rank 1 sleeps outside the library, rank 0 posts
 * small sends (copied through the pair's ring) until the ring is full, so the
 * first one it could not finish has only its head in the ring, then frees
 * `d`. The sends that finished before the free must arrive whole; the one cut
 * off returned its remainder as zeros with success. Twice: rank 1's receives
 * posted after the messages arrived, and before.
 * Reduced in place: a reduce-scatter of mlc_mem_alloc blocks reduces a
 * peer's block where it is mapped, with no copy first. Rank 1's op sleeps in
 * its first call, before it reads rank 0's data; meanwhile rank 0 reduces
 * its own block, frees the communicator (its request ends MLC_ERR_ABORTED)
 * and overwrites its buffer. Rank 1 then combined the overwritten data and
 * returned success.
 * Exit 0 = pass.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness.h"

#define COUNT ((size_t)1 << 20) /* uint32: 4 MiB */
#define LATE 0xDEADBEEFu
/* Eager messages: below the engine's eager limit, and together far more than
 * a ring holds. */
#define SMALL 4000 /* uint32 */
#define SENDS 300

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static uint32_t value(int msg, size_t i) { return (uint32_t)msg * 1000003u + (uint32_t)i + 1u; }

typedef enum { BY_FREE, BY_ABORT } how_t;

/* Rank 0 sends (or, as broadcast's root, starts a nonblocking broadcast)
 * from buf on a new communicator, frees or aborts it, waits for the request
 * (MLC_ERR_ABORTED) and overwrites buf; the other ranks receive only then.
 * They must fail, not return what was written after. */
static int rendezvous(mlc_comm_t *comm, uint32_t *buf, how_t how, bool bcast)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *d = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &d));
    const char *what = bcast ? "broadcast" : "send";
    if (r == 0) {
        for (size_t i = 0; i < COUNT; i++) buf[i] = (uint32_t)i;
        mlc_request_t *q = NULL;
        if (bcast)
            CHECK_OK(mlc_broadcast(buf, buf, COUNT, MLC_UINT32, 0, d, &q));
        else
            CHECK_OK(mlc_send(buf, COUNT, MLC_UINT32, 1, 4, d, &q));
        if (how == BY_FREE) CHECK_OK(mlc_comm_free(d));
        if (how == BY_ABORT) CHECK_OK(mlc_comm_abort(d));
        CHECK_ERR(mlc_request_wait(&q), MLC_ERR_ABORTED);
        for (size_t i = 0; i < COUNT; i++) buf[i] = LATE; /* the call was cancelled: the buffer is ours */
        CHECK_OK(mlc_barrier(comm, NULL));                /* the others receive only now */
        CHECK_OK(mlc_barrier(comm, NULL));
        if (how == BY_ABORT) mlc_comm_free(d);
    } else {
        CHECK_OK(mlc_barrier(comm, NULL));
        if (r == 1 || bcast) {
            memset(buf, 0, COUNT * sizeof *buf);
            mlc_status_t st = bcast ? mlc_broadcast(NULL, buf, COUNT, MLC_UINT32, 0, d, NULL)
                                    : mlc_recv(buf, COUNT, MLC_UINT32, 0, 4, d, NULL, NULL);
            size_t late = 0;
            for (size_t i = 0; i < COUNT; i++) late += buf[i] == LATE;
            mlc_status_t want = how == BY_FREE ? MLC_ERR_PEER_LOST : MLC_ERR_ABORTED;
            CHECK(st == want, "%s %s by rank 0 -> %s (%s); %zu of %zu elements written by rank 0 after that",
                  what, how == BY_FREE ? "freed" : "aborted", mlc_status_name(st), mlc_last_error(), late, COUNT);
            if (how == BY_FREE)
                CHECK(strstr(mlc_last_error(), "freed the communicator") != NULL, "message: %s", mlc_last_error());
        }
        CHECK_OK(mlc_barrier(comm, NULL));
        mlc_comm_free(d);
    }
    return 0;
}

/* Rank 1 receives message m (tag m) into its row of rows. */
static mlc_status_t post_recv(mlc_comm_t *d, uint32_t *rows, int m, mlc_request_t **q)
{
    return mlc_recv(rows + (size_t)m * SMALL, SMALL, MLC_UINT32, 0, m, d, NULL, q);
}

static int eager_cut(mlc_comm_t *comm, uint32_t *rows, bool post_first)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *d = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &d));
    CHECK_OK(mlc_barrier(comm, NULL));
    int whole = 0; /* rank 0's sends that were over before the free */
    mlc_request_t *q[SENDS] = {0};
    if (r == 0) {
        sleep_ms(200); /* rank 1 is asleep: nothing drains the ring */
        for (int m = 0; m < SENDS; m++) {
            for (size_t i = 0; i < SMALL; i++) rows[(size_t)m * SMALL + i] = value(m, i);
            CHECK_OK(mlc_send(rows + (size_t)m * SMALL, SMALL, MLC_UINT32, 1, m, d, &q[m]));
        }
        CHECK_OK(mlc_comm_free(d));
        for (int m = 0; m < SENDS; m++) {
            mlc_status_t st = mlc_request_wait(&q[m]);
            if (st == MLC_SUCCESS) {
                CHECK(whole == m, "send %d succeeded, but send %d did not", m, whole);
                whole++;
            } else {
                CHECK(st == MLC_ERR_ABORTED, "send %d -> %s (%s)", m, mlc_status_name(st), mlc_last_error());
            }
        }
        CHECK(whole < SENDS, "all %d sends of %d bytes finished before the free: the ring never filled", SENDS,
              SMALL * 4);
        memset(rows, 0xEE, (size_t)SENDS * SMALL * sizeof *rows); /* ours again */
    } else if (r == 1) {
        sleep_ms(1000);
        memset(rows, 0, (size_t)SENDS * SMALL * sizeof *rows);
        if (post_first)
            for (int m = 0; m < SENDS; m++) CHECK_OK(post_recv(d, rows, m, &q[m]));
    }
    CHECK_OK(mlc_broadcast(&whole, &whole, 1, MLC_INT32, 0, comm, NULL));
    if (r == 1) {
        for (int m = 0; m <= whole; m++) {
            if (!post_first) CHECK_OK(post_recv(d, rows, m, &q[m]));
            mlc_status_t st = mlc_request_wait(&q[m]);
            uint32_t *row = rows + (size_t)m * SMALL;
            if (m < whole) {
                CHECK(st == MLC_SUCCESS, "message %d, sent before the free -> %s (%s)", m, mlc_status_name(st),
                      mlc_last_error());
                for (size_t i = 0; i < SMALL; i++)
                    CHECK(row[i] == value(m, i), "message %d element %zu: %#x, sent %#x", m, i, row[i],
                          value(m, i));
                continue;
            }
            size_t zeros = 0;
            for (size_t i = 0; i < SMALL; i++) zeros += row[i] == 0;
            CHECK(st == MLC_ERR_PEER_LOST, "message %d, cut off by the free -> %s (%s); %zu of %d elements zero",
                  m, mlc_status_name(st), mlc_last_error(), zeros, SMALL);
            CHECK(strstr(mlc_last_error(), "freed the communicator") != NULL, "message: %s", mlc_last_error());
        }
    }
    CHECK_OK(mlc_barrier(comm, NULL));
    if (r != 0) mlc_comm_free(d); /* rank 1's receives of messages never sent end here */
    if (r == 1 && post_first)
        for (int m = whole + 1; m < SENDS; m++) CHECK_ERR(mlc_request_wait(&q[m]), MLC_ERR_ABORTED);
    return 0;
}

/* The receiver takes the messages as they come while rank 0 sends and frees:
 * what rank 0's requests say (success or MLC_ERR_ABORTED) must be what
 * arrived. A send the engine had finished was reported cancelled, and then
 * delivered (a program that resent it would deliver it twice). */
static int status_is_delivery(mlc_comm_t *comm, uint32_t *rows)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *d = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &d));
    mlc_request_t *q[SENDS] = {0};
    int counted = 0;
    if (r == 1)
        for (int m = 0; m < SENDS; m++) CHECK_OK(post_recv(d, rows, m, &q[m]));
    CHECK_OK(mlc_barrier(comm, NULL));
    if (r == 0) {
        for (int m = 0; m < SENDS; m++) {
            for (size_t i = 0; i < SMALL; i++) rows[(size_t)m * SMALL + i] = value(m, i);
            CHECK_OK(mlc_send(rows + (size_t)m * SMALL, SMALL, MLC_UINT32, 1, m, d, &q[m]));
        }
        CHECK_OK(mlc_comm_free(d));
        for (int m = 0; m < SENDS; m++) counted += mlc_request_wait(&q[m]) == MLC_SUCCESS;
    }
    int sent = counted;
    CHECK_OK(mlc_broadcast(&sent, &sent, 1, MLC_INT32, 0, comm, NULL));
    if (r == 1) {
        /* What arrived arrives by now; the rest never will (the free ends those receives). */
        sleep_ms(300);
        mlc_comm_free(d);
        for (int m = 0; m < SENDS; m++) counted += mlc_request_wait(&q[m]) == MLC_SUCCESS;
        CHECK(counted == sent, "rank 0's sends: %d succeeded; rank 1 received %d of them", sent, counted);
    } else if (r != 0) {
        mlc_comm_free(d);
    }
    return 0;
}

/* Rank 1's op sleeps once, on entry, before it reads `in` (rank 0's data). */
static _Thread_local bool slow_once;

static void slow_sum(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    (void)dtype, (void)ctx;
    if (slow_once) {
        slow_once = false;
        sleep_ms(400);
    }
    for (size_t i = 0; i < count; i++) ((uint32_t *)inout)[i] += ((const uint32_t *)in)[i];
}

static int in_place_reduction(mlc_comm_t *comm, uint32_t *block, uint32_t *out)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    size_t n = COUNT / (size_t)p; /* each rank's block of the result */
    mlc_op_t op;
    CHECK_OK(mlc_op_create(slow_sum, 1, NULL, &op));
    mlc_comm_t *d = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &d));
    for (size_t i = 0; i < COUNT; i++) block[i] = value(r, i);
    CHECK_OK(mlc_barrier(comm, NULL));
    if (r == 0) {
        mlc_request_t *q = NULL;
        CHECK_OK(mlc_reduce_scatter(block, out, n, MLC_UINT32, op, d, &q));
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int done = 0;
        do { /* reduce rank 0's block (rank 1 sleeps in its op meanwhile) */
            CHECK_OK(mlc_request_test(&q, &done));
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (!done && (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 150);
        CHECK(!done, "rank 0's reduce-scatter finished while rank 1 slept in its op");
        CHECK_OK(mlc_comm_free(d));
        CHECK_ERR(mlc_request_wait(&q), MLC_ERR_ABORTED);
        for (size_t i = 0; i < COUNT; i++) block[i] = LATE; /* ours again */
    } else {
        slow_once = r == 1;
        memset(out, 0, n * sizeof *out);
        mlc_status_t st = mlc_reduce_scatter(block, out, n, MLC_UINT32, op, d, NULL);
        slow_once = false;
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t want = 0;
            for (int k = 0; k < p; k++) want += value(k, (size_t)r * n + i);
            wrong += out[i] != want;
        }
        CHECK(st != MLC_SUCCESS || wrong == 0, "rank %d: reduce-scatter -> success with %zu of %zu elements wrong "
              "(rank 0 freed the communicator and overwrote its block before rank 1 read it)", r, wrong, n);
        if (r == 1)
            CHECK(st == MLC_ERR_PEER_LOST && strstr(mlc_last_error(), "freed the communicator"),
                  "rank 1 read rank 0's block after the free -> %s (%s)", mlc_status_name(st), mlc_last_error());
        mlc_comm_free(d);
    }
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_OK(mlc_op_free(op));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    if (p < 2) return MLC_TEST_SKIP;
    uint32_t *buf = malloc(COUNT * sizeof *buf);
    uint32_t *rows = malloc((size_t)SENDS * SMALL * sizeof *rows);
    CHECK(buf && rows, "malloc");
    uint32_t *block = NULL;
    CHECK_OK(mlc_mem_alloc(COUNT * sizeof *block, (void **)&block));
    int failed = 0;
    for (int k = 0; k < 8 && !failed; k++) /* {malloc, block} x {free, abort} x {send, broadcast} */
        failed = rendezvous(comm, k & 1 ? block : buf, k & 2 ? BY_ABORT : BY_FREE, k & 4);
    if (!failed) failed = in_place_reduction(comm, block, buf);
    mlc_mem_free(block);
    if (!failed) failed = eager_cut(comm, rows, false);
    if (!failed) failed = eager_cut(comm, rows, true);
    for (int k = 0; k < 3 && !failed; k++) failed = status_is_delivery(comm, rows);
    free(buf);
    free(rows);
    return mlc_test_any_failed(comm, failed);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
