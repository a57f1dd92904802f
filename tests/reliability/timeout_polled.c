/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Timeout of a polled request: mlc_request_test in a loop gives up as
 * mlc_request_wait does. MLC_TIMEOUT=2 comes from the environment; rank 0
 * polls (1) a receive from rank 1 that rank 1 never sends and (2) an
 * allreduce the other ranks never join, each on a communicator of its own.
 * Each poll loop must end with MLC_ERR_TIMEOUT after about 2 s (not before
 * 1.5 s, well before 20 s), with a message naming the operation, rank 1
 * (but for MPI's own allreduce, which does not say) and MLC_TIMEOUT, and the communicator failed (sticky). A third
 * communicator (`ctl`, timeout 60 s in its config) then tells the other
 * ranks, whose own barrier on the first communicator must fail with
 * MLC_ERR_TIMEOUT too (when it starts, or polled): at once on threads and shm, where rank 0's timeout is
 * posted to every member (as a blocking wait's is), by their own timeout on
 * mpi.
 *   timeout_polled --threads N   threads backend
 *   timeout_polled               one rank under mlcomm-run / mpirun
 */
#include <ctype.h>
#include <pthread.h>
#include <strings.h>
#include <time.h>
#include "harness.h"

#define POLL_LIMIT_S 20.0

/* Does msg name rank `who` after a "rank" word (e.g. "rank 1", "ranks: 0, 1")? */
static int names_rank(const char *msg, int who)
{
    for (const char *s = msg; *s; s++) {
        if (strncasecmp(s, "rank", 4) != 0) continue;
        const char *t = s + 4;
        for (int k = 0; k < 40 && *t; k++, t++)
            if (isdigit((unsigned char)*t) && !isdigit((unsigned char)t[-1]) && atoi(t) == who) return 1;
    }
    return 0;
}

/* Test *req until it completes or POLL_LIMIT_S pass; *secs = time taken.
 * The loop naps 0.2 ms between tests, as a caller with other work would:
 * the timeout must not depend on how often the request is tested (and the
 * test then holds one CPU slot, tests/reliability/CMakeLists.txt). */
static mlc_status_t poll(mlc_request_t **req, double *secs, int *done)
{
    double t0 = mlc_test_now();
    mlc_status_t st = MLC_SUCCESS;
    const struct timespec nap = {0, 200000};
    *done = 0;
    while (!*done && mlc_test_now() - t0 < POLL_LIMIT_S) {
        st = mlc_request_test(req, done);
        if (!*done) nanosleep(&nap, NULL);
    }
    *secs = mlc_test_now() - t0;
    return st;
}

/* A polled request of rank 0 that nobody answers. */
static int polled_timeout(mlc_comm_t *comm, mlc_request_t *req, const char *what)
{
    double secs;
    int done;
    mlc_status_t st = poll(&req, &secs, &done);
    const char *msg = mlc_last_error();
    printf("rank 0: polled %s -> %s after %.2f s: %s\n", what, done ? mlc_status_name(st) : "not done", secs,
           done ? msg : "");
    CHECK(done, "mlc_request_test on a %s nobody answers never reported MLC_ERR_TIMEOUT in %.0f s "
          "(MLC_TIMEOUT=2)", what, POLL_LIMIT_S);
    CHECK(st == MLC_ERR_TIMEOUT, "polled %s -> %s, expected MLC_ERR_TIMEOUT (%s)", what, mlc_status_name(st),
          msg);
    CHECK(req == NULL, "a completed request was not released");
    CHECK(secs >= 1.5, "timed out after %.2f s, before MLC_TIMEOUT=2 passed", secs);
    CHECK(strstr(msg, what) && strstr(msg, "MLC_TIMEOUT"), "the message names neither %s nor MLC_TIMEOUT: \"%s\"",
          what, msg);
    /* MPI's own collectives do not say whom they wait for. */
    if (strcmp(what, "recv") == 0 || strcmp(mlc_comm_backend(comm), "mpi") != 0)
        CHECK(names_rank(msg, 1), "the message does not name rank 1: \"%s\"", msg);
    CHECK(mlc_comm_status(comm) == MLC_ERR_TIMEOUT, "the communicator is %s after the timeout",
          mlc_status_name(mlc_comm_status(comm)));
    CHECK_ERR(mlc_barrier(comm, NULL), MLC_ERR_TIMEOUT);
    return 0;
}

static int rank0(mlc_comm_t *w1, mlc_comm_t *w2)
{
    int32_t buf[4] = {0}, sum[4];
    mlc_request_t *req = NULL;
    mlc_comm_t *comm = w1; /* for CHECK */
    CHECK_OK(mlc_recv(buf, 4, MLC_INT32, 1, 5, w1, NULL, &req));
    CHECK_RUN(polled_timeout(w1, req, "recv"));
    comm = w2;
    CHECK_OK(mlc_allreduce(buf, sum, 4, MLC_INT32, MLC_SUM, w2, &req));
    CHECK_RUN(polled_timeout(w2, req, "allreduce"));
    return 0;
}

/* Ranks 1..: w1 failed on rank 0; a barrier on it fails too, when it starts
 * (the failure already arrived) or when polled. */
static int others(mlc_comm_t *comm)
{
    mlc_request_t *req = NULL;
    double secs = 0;
    int done = 1;
    mlc_status_t st = mlc_barrier(comm, &req);
    if (st == MLC_SUCCESS) st = poll(&req, &secs, &done);
    const char *msg = mlc_last_error();
    printf("rank %d: polled barrier -> %s after %.2f s: %s\n", mlc_comm_rank(comm),
           done ? mlc_status_name(st) : "not done", secs, done ? msg : "");
    CHECK(done && st == MLC_ERR_TIMEOUT, "polled barrier after rank 0's timeout -> %s (%s)",
          done ? mlc_status_name(st) : "never done", msg);
    CHECK(strstr(msg, "MLC_TIMEOUT"), "the message does not name MLC_TIMEOUT: \"%s\"", msg);
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0)
        CHECK(secs < 1.0 && names_rank(msg, 0), "rank 0's timeout was not posted to the others (%.2f s): \"%s\"",
              secs, msg);
    CHECK(mlc_comm_status(comm) == MLC_ERR_TIMEOUT, "the communicator is %s",
          mlc_status_name(mlc_comm_status(comm)));
    return 0;
}

static int run_rank(mlc_comm_t *w1, mlc_comm_t *w2, mlc_comm_t *ctl)
{
    mlc_comm_t *comm = ctl; /* for CHECK */
    int r = mlc_comm_rank(ctl), p = mlc_comm_size(ctl);
    if (p < 2) return MLC_TEST_SKIP;
    int32_t verdict = r == 0 ? rank0(w1, w2) : 0;
    CHECK_OK(mlc_broadcast(&verdict, &verdict, 1, MLC_INT32, 0, ctl, NULL));
    if (verdict != 0) return 1;
    int32_t mine = r == 0 ? 0 : others(w1), any = 1;
    CHECK_OK(mlc_allreduce(&mine, &any, 1, MLC_INT32, MLC_MAX, ctl, NULL));
    return any != 0;
}

typedef struct targ {
    mlc_comm_t *w1, *w2, *ctl;
    int rc;
} targ_t;

static void *thread_main(void *p)
{
    targ_t *a = p;
    a->rc = run_rank(a->w1, a->w2, a->ctl);
    return NULL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    mlc_config_t patient = MLC_CONFIG_INIT;
    patient.timeout_s = 60;
    int n = argc > 2 && strcmp(argv[1], "--threads") == 0 ? atoi(argv[2]) : 0;
    int rc = 0;
    if (n > 0) {
        if (n < 2 || n > 8) return MLC_TEST_SKIP;
        mlc_comm_t *ctl[8], *w1[8], *w2[8];
        mlc_status_t st = mlc_comm_init_all(n, &patient, ctl);
        if (st == MLC_SUCCESS) st = mlc_comm_init_all(n, NULL, w1);
        if (st == MLC_SUCCESS) st = mlc_comm_init_all(n, NULL, w2);
        if (st != MLC_SUCCESS) {
            fprintf(stderr, "init: %s: %s\n", mlc_status_name(st), mlc_last_error());
            return 2;
        }
        targ_t args[8];
        pthread_t tid[8];
        for (int i = 0; i < n; i++) {
            args[i] = (targ_t){w1[i], w2[i], ctl[i], 1};
            pthread_create(&tid[i], NULL, thread_main, &args[i]);
        }
        for (int i = 0; i < n; i++) {
            pthread_join(tid[i], NULL);
            if (args[i].rc) rc = args[i].rc == MLC_TEST_SKIP && rc == 0 ? MLC_TEST_SKIP : 1;
        }
        for (int i = 0; i < n; i++) {
            mlc_comm_free(w1[i]);
            mlc_comm_free(w2[i]);
            mlc_comm_free(ctl[i]);
        }
        return rc;
    }
    mlc_comm_t *ctl = NULL, *w1 = NULL, *w2 = NULL;
    mlc_status_t st = mlc_comm_init(&patient, &ctl);
    if (st == MLC_SUCCESS) st = mlc_comm_init(NULL, &w1);
    if (st == MLC_SUCCESS) st = mlc_comm_init(NULL, &w2);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "init: %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 2;
    }
    rc = run_rank(w1, w2, ctl);
    mlc_comm_free(w1);
    mlc_comm_free(w2);
    mlc_comm_free(ctl);
    return rc;
}
