/* SPDX-License-Identifier: BSD-3-Clause */
/* The group cases every backend runs (group_cases.h). */
#include <pthread.h>
#include <stdint.h>
#include "group_cases.h"
#include "harness.h"

static int right_of(mlc_comm_t *comm) { return (mlc_comm_rank(comm) + 1) % mlc_comm_size(comm); }
static int left_of(mlc_comm_t *comm)
{
    return (mlc_comm_rank(comm) + mlc_comm_size(comm) - 1) % mlc_comm_size(comm);
}

/* The byte pattern rank r sends in case `c`. */
static uint64_t seed_of(int c, int r) { return 1000u * (uint64_t)c + (uint64_t)r; }

/* Every byte of buf is the pattern of (c, from). */
static int check_pattern(mlc_comm_t *comm, const void *buf, size_t bytes, int c, int from, const char *what)
{
    size_t bad = mlc_test_pattern_check(buf, bytes, seed_of(c, from));
    CHECK(bad == SIZE_MAX, "%s: byte %zu of %zu from rank %d is 0x%02x, expected 0x%02x", what, bad, bytes,
          from, bad == SIZE_MAX ? 0 : ((const unsigned char *)buf)[bad],
          bad == SIZE_MAX ? 0 : mlc_test_pattern_byte(seed_of(c, from), bad));
    return 0;
}

int group_ring_blocking(mlc_comm_t *comm, size_t bytes)
{
    unsigned char *s = malloc(bytes ? bytes : 1), *r = malloc(bytes ? bytes : 1);
    CHECK(s && r, "out of memory for 2 x %zu bytes", bytes);
    mlc_test_pattern_fill(s, bytes, seed_of(1, mlc_comm_rank(comm)));
    memset(r, 0, bytes);
    /* One by one this would wait for a receive nobody has posted yet. */
    CHECK_OK(mlc_group_start());
    CHECK_OK(mlc_send(s, bytes, MLC_UINT8, right_of(comm), 0, comm, NULL));
    CHECK_OK(mlc_recv(r, bytes, MLC_UINT8, left_of(comm), 0, comm, NULL, NULL));
    CHECK_OK(mlc_group_end());
    int bad = check_pattern(comm, r, bytes, 1, left_of(comm), "ring (send, then recv)");
    free(s);
    free(r);
    return bad;
}

int group_ring_recv_first(mlc_comm_t *comm, size_t bytes)
{
    size_t n = bytes / sizeof(double);
    double *s = malloc((n ? n : 1) * sizeof *s), *r = malloc((n ? n : 1) * sizeof *r);
    CHECK(s && r, "out of memory");
    for (size_t i = 0; i < n; i++) {
        s[i] = (double)mlc_comm_rank(comm) * 1e6 + (double)i;
        r[i] = -1;
    }
    mlc_msg_status_t ms = {-1, -1, 0};
    CHECK_OK(mlc_group_start());
    CHECK_OK(mlc_recv(r, n, MLC_FLOAT64, left_of(comm), 0, comm, &ms, NULL));
    CHECK_OK(mlc_send(s, n, MLC_FLOAT64, right_of(comm), 0, comm, NULL));
    CHECK_OK(mlc_group_end());
    for (size_t i = 0; i < n; i++)
        CHECK(r[i] == (double)left_of(comm) * 1e6 + (double)i, "recv first: element %zu is %g", i, r[i]);
    CHECK(ms.source == left_of(comm) && ms.bytes == n * sizeof(double), "status: source %d, %zu bytes",
          ms.source, ms.bytes);
    free(s);
    free(r);
    return 0;
}

int group_requests(mlc_comm_t *comm, size_t bytes)
{
    unsigned char *s = malloc(bytes ? bytes : 1), *r = malloc(bytes ? bytes : 1);
    CHECK(s && r, "out of memory");
    mlc_test_pattern_fill(s, bytes, seed_of(3, mlc_comm_rank(comm)));
    memset(r, 0, bytes);
    mlc_request_t *reqs[2] = {NULL, NULL};
    int done = 0;
    CHECK_OK(mlc_group_start());
    CHECK_OK(mlc_send(s, bytes, MLC_UINT8, right_of(comm), 0, comm, &reqs[0]));
    CHECK_OK(mlc_recv(r, bytes, MLC_UINT8, left_of(comm), 0, comm, NULL, &reqs[1]));
    CHECK(reqs[0] && reqs[1], "a grouped call handed out no request");
    /* Defined: waiting or testing before mlc_group_end is refused, the request kept. */
    CHECK_ERR_MSG(mlc_request_wait(&reqs[1]), MLC_ERR_INVALID_ARG, "mlc_group_end");
    CHECK(reqs[1] != NULL, "a refused wait released the request");
    CHECK_ERR_MSG(mlc_request_test(&reqs[0], &done), MLC_ERR_INVALID_ARG, "still open");
    CHECK_ERR(mlc_request_wait_all(2, reqs, NULL), MLC_ERR_INVALID_ARG);
    CHECK(reqs[0] && reqs[1], "a refused wait_all released a request");
    CHECK_OK(mlc_group_end());
    CHECK_OK(mlc_request_wait_all(2, reqs, NULL));
    int bad = check_pattern(comm, r, bytes, 3, left_of(comm), "request forms");
    free(s);
    free(r);
    return bad;
}

int group_empty_and_nested(mlc_comm_t *comm, size_t bytes)
{
    CHECK_ERR_MSG(mlc_group_end(), MLC_ERR_INVALID_ARG, "without mlc_group_start");
    CHECK_OK(mlc_group_start());
    CHECK_OK(mlc_group_end());
    CHECK_ERR(mlc_group_end(), MLC_ERR_INVALID_ARG);

    unsigned char *s = malloc(bytes ? bytes : 1), *r = malloc(bytes ? bytes : 1);
    CHECK(s && r, "out of memory");
    mlc_test_pattern_fill(s, bytes, seed_of(4, mlc_comm_rank(comm)));
    memset(r, 0, bytes);
    mlc_request_t *req = NULL;
    CHECK_OK(mlc_group_start());
    CHECK_OK(mlc_group_start());
    CHECK_OK(mlc_send(s, bytes, MLC_UINT8, right_of(comm), 0, comm, &req));
    CHECK_OK(mlc_group_end()); /* inner: the group is still open */
    CHECK_ERR(mlc_request_wait(&req), MLC_ERR_INVALID_ARG);
    CHECK_OK(mlc_group_start());
    CHECK_OK(mlc_group_end());
    CHECK_OK(mlc_recv(r, bytes, MLC_UINT8, left_of(comm), 0, comm, NULL, NULL));
    CHECK_OK(mlc_group_end());
    CHECK_OK(mlc_request_wait(&req));
    int bad = check_pattern(comm, r, bytes, 4, left_of(comm), "nested groups");
    free(s);
    free(r);
    return bad;
}

int group_two_comms(mlc_comm_t *comm, mlc_comm_t *other, size_t bytes)
{
    int me = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    unsigned char *s = malloc(bytes ? bytes : 1), *r1 = malloc(bytes ? bytes : 1), *r2 = malloc(bytes ? bytes : 1);
    CHECK(s && r1 && r2, "out of memory");
    mlc_test_pattern_fill(s, bytes, seed_of(5, me));
    memset(r1, 0, bytes);
    memset(r2, 0, bytes);
    int32_t x = me + 1, sum = 0;
    CHECK_OK(mlc_group_start());
    /* Rightwards on comm, leftwards on other, and a collective among them. */
    CHECK_OK(mlc_send(s, bytes, MLC_UINT8, right_of(comm), 0, comm, NULL));
    CHECK_OK(mlc_send(s, bytes, MLC_UINT8, left_of(comm), 0, other, NULL));
    CHECK_OK(mlc_allreduce(&x, &sum, 1, MLC_INT32, MLC_SUM, other, NULL));
    CHECK_OK(mlc_recv(r2, bytes, MLC_UINT8, right_of(comm), 0, other, NULL, NULL));
    CHECK_OK(mlc_recv(r1, bytes, MLC_UINT8, left_of(comm), 0, comm, NULL, NULL));
    CHECK_ERR_MSG(mlc_comm_free(other), MLC_ERR_INVALID_ARG, "mlc_group_end first");
    CHECK_OK(mlc_group_end());
    int bad = check_pattern(comm, r1, bytes, 5, left_of(comm), "two communicators, comm");
    bad |= check_pattern(comm, r2, bytes, 5, right_of(comm), "two communicators, other");
    CHECK(sum == p * (p + 1) / 2, "allreduce in the group: %d, expected %d", (int)sum, p * (p + 1) / 2);
    free(s);
    free(r1);
    free(r2);
    return bad;
}

int group_abort(mlc_comm_t *comm, mlc_comm_t *other)
{
    int32_t v = 0;
    CHECK_OK(mlc_barrier(comm, NULL)); /* every rank is done with other's earlier traffic */
    CHECK_OK(mlc_group_start());
    /* Nobody sends it: only the abort ends it. A peer's abort may come first. */
    mlc_status_t st = mlc_recv(&v, 1, MLC_INT32, left_of(comm), 0, other, NULL, NULL);
    CHECK(st == MLC_SUCCESS || st == MLC_ERR_ABORTED, "recv in a group: %s (%s)", mlc_status_name(st),
          mlc_last_error());
    CHECK_OK(mlc_comm_abort(other));
    mlc_status_t end = mlc_group_end();
    if (st == MLC_SUCCESS)
        CHECK(end == MLC_ERR_ABORTED && strstr(mlc_last_error(), "grouped operation 1 of 1, recv"),
              "group ended by an abort: %s (%s), expected MLC_ERR_ABORTED naming the recv",
              mlc_status_name(end), mlc_last_error());
    else
        CHECK_OK(end);
    return 0;
}

int group_all_cases(mlc_comm_t *comm, mlc_comm_t *other, size_t ring_bytes, size_t bytes)
{
    int bad = group_ring_blocking(comm, ring_bytes);
    bad |= group_ring_recv_first(comm, bytes);
    bad |= group_requests(comm, bytes);
    bad |= group_empty_and_nested(comm, bytes);
    bad |= group_two_comms(comm, other, bytes);
    bad |= group_abort(comm, other);
    return bad;
}

int group_timeout(mlc_comm_t *comm, mlc_comm_t *side)
{
    if (mlc_comm_size(comm) != 2) return MLC_TEST_SKIP;
    int32_t v[4] = {0}, verdict = 1;
    if (mlc_comm_rank(comm) == 0) {
        mlc_status_t st = MLC_SUCCESS;
        if (mlc_group_start() == MLC_SUCCESS) {
            mlc_recv(v, 4, MLC_INT32, 1, 0, comm, NULL, NULL);
            st = mlc_group_end();
        }
        const char *msg = mlc_last_error();
        printf("rank 0: group whose peer never posts -> %s: %s\n", mlc_status_name(st), msg);
        verdict = !(st == MLC_ERR_TIMEOUT && strstr(msg, "grouped operation") && strstr(msg, "recv (peer 1"));
        if (verdict) fprintf(stderr, "[rank 0] expected MLC_ERR_TIMEOUT naming \"grouped operation\" and "
                             "\"recv (peer 1\"\n");
        /* Sticky, as after any timeout. */
        if (mlc_comm_status(comm) != MLC_ERR_TIMEOUT) verdict = 1;
        CHECK_OK(mlc_send(&verdict, 1, MLC_INT32, 1, 0, side, NULL));
        return verdict;
    }
    /* Rank 1: wait for the verdict without a deadline of its own. */
    for (int flag = 0; !flag;) {
        CHECK_OK(mlc_iprobe(0, 0, side, &flag, NULL));
        if (!flag) mlc_test_sleep_ms(5);
    }
    CHECK_OK(mlc_recv(&verdict, 1, MLC_INT32, 0, 0, side, NULL, NULL));
    return verdict;
}

typedef struct exit_arg {
    mlc_comm_t *comm;
    unsigned char *s, *r;
    size_t bytes;
    int failed;
} exit_arg_t;

/* A thread that opens a group, issues its ring calls and exits without mlc_group_end. */
static void *exit_in_group(void *p)
{
    exit_arg_t *a = p;
    mlc_comm_t *comm = a->comm;
    a->failed = mlc_group_start() != MLC_SUCCESS ||
                mlc_send(a->s, a->bytes, MLC_UINT8, right_of(comm), 0, comm, NULL) != MLC_SUCCESS ||
                mlc_recv(a->r, a->bytes, MLC_UINT8, left_of(comm), 0, comm, NULL, NULL) != MLC_SUCCESS;
    return NULL;
}

int group_thread_exit(mlc_comm_t *comm, size_t bytes)
{
    mlc_comm_t *c2 = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &c2));
    exit_arg_t a = {c2, malloc(bytes), calloc(1, bytes), bytes, 0};
    CHECK(a.s && a.r, "out of memory for 2 x %zu bytes", bytes);
    mlc_test_pattern_fill(a.s, bytes, seed_of(7, mlc_comm_rank(comm)));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, exit_in_group, &a) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    CHECK(!a.failed, "issuing the grouped ring calls failed: %s", mlc_last_error());
    /* The thread's exit ended its group: the calls ran and nothing holds c2. */
    if (check_pattern(comm, a.r, bytes, 7, left_of(comm), "ring of a thread that exited in its group")) return 1;
    CHECK_OK(mlc_comm_free(c2));
    /* This thread has no group open because another one had. */
    CHECK_ERR(mlc_group_end(), MLC_ERR_INVALID_ARG);
    free(a.s);
    free(a.r);
    return 0;
}
