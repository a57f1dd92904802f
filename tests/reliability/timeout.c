/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Timeout: 2 ranks; rank 1 never joins an allreduce on the `work`
 * communicator (MLC_TIMEOUT=2 from the environment). Rank 0 must get
 * MLC_ERR_TIMEOUT with a message naming the operation and rank 1, and the
 * communicator must then be failed: every later call returns MLC_ERR_TIMEOUT
 * at once. A second communicator (`ctl`, timeout 60 s set in its config,
 * which beats the environment) carries rank 0's verdict to rank 1. First,
 * a communicator split from ctl with mlc_comm_set_timeout(1.5) times out
 * after its own 1.5 s.
 *   timeout --threads 2   threads backend
 *   timeout               one rank under mlcomm-run / mpirun
 */
#include <ctype.h>
#include <strings.h>
#include <pthread.h>
#include <time.h>
#include "harness.h"

/* Does msg name rank `who` after a "rank" word (e.g. "rank 1", "ranks: 0, 1")? */
static int names_rank(const char *msg, int who)
{
    for (const char *s = msg; *s; s++) {
        if (strncasecmp(s, "rank", 4) != 0) continue;
        const char *t = s + 4;
        for (int k = 0; k < 40 && *t; k++, t++) {
            if (isdigit((unsigned char)*t) && !isdigit((unsigned char)t[-1])) {
                if (atoi(t) == who) return 1;
            }
        }
    }
    return 0;
}

static int rank0(mlc_comm_t *work, mlc_comm_t *comm)
{
    float x[16] = {0}, y[16];
    mlc_status_t st = mlc_allreduce(x, y, 16, MLC_FLOAT32, MLC_SUM, work, NULL);
    const char *msg = mlc_last_error();
    printf("rank 0: allreduce -> %s: %s\n", mlc_status_name(st), msg);
    CHECK(st == MLC_ERR_TIMEOUT, "allreduce without rank 1 -> %s, expected MLC_ERR_TIMEOUT",
          mlc_status_name(st));
    CHECK(strstr(msg, "allreduce") != NULL, "timeout message does not name the operation: \"%s\"",
          msg);
    CHECK(names_rank(msg, 1), "timeout message does not name rank 1: \"%s\"", msg);
    /* Sticky: the communicator is failed; every call returns TIMEOUT at once. */
    CHECK(mlc_comm_status(work) == MLC_ERR_TIMEOUT, "mlc_comm_status is %s",
          mlc_status_name(mlc_comm_status(work)));
    int32_t v = 0;
    mlc_request_t *req = NULL;
    CHECK_ERR(mlc_barrier(work, NULL), MLC_ERR_TIMEOUT);
    CHECK_ERR(mlc_allreduce(x, y, 16, MLC_FLOAT32, MLC_SUM, work, &req), MLC_ERR_TIMEOUT);
    CHECK(req == NULL, "failed async call wrote its request");
    CHECK_ERR(mlc_send(&v, 1, MLC_INT32, 0, 1, work, NULL), MLC_ERR_TIMEOUT);
    CHECK_ERR(mlc_recv(&v, 1, MLC_INT32, 1, 1, work, NULL, NULL), MLC_ERR_TIMEOUT);
    CHECK_ERR(mlc_broadcast(&v, &v, 1, MLC_INT32, 0, work, NULL), MLC_ERR_TIMEOUT);
    return 0;
}

/* mlc_comm_set_timeout: a communicator split from ctl (60 s) gets 1.5 s of
 * its own; rank 0's barrier there, which rank 1 never joins, times out after
 * those 1.5 s, and ctl keeps its 60 s. Bad values are refused. Then a split
 * rank 1 never joins times out naming mlc_comm_split. */
static int own_timeout(mlc_comm_t *ctl)
{
    mlc_comm_t *comm = ctl, *quick = NULL; /* comm: for CHECK */
    CHECK_OK(mlc_comm_split(ctl, 0, 0, &quick));
    CHECK_ERR(mlc_comm_set_timeout(NULL, 1), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_set_timeout(quick, -1), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_set_timeout(quick, 0.0 / 0.0), MLC_ERR_INVALID_ARG);
    CHECK_OK(mlc_comm_set_timeout(quick, 1.5));
    if (mlc_comm_rank(ctl) == 0) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        mlc_status_t st = mlc_barrier(quick, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        CHECK(st == MLC_ERR_TIMEOUT && took > 1.0 && took < 30,
              "barrier on a communicator with mlc_comm_set_timeout(1.5) -> %s after %.1f s", mlc_status_name(st),
              took);
        CHECK(strstr(mlc_last_error(), "made no progress for 1.5 s") != NULL, "the message misstates the timeout: %s",
              mlc_last_error());
    }
    CHECK_OK(mlc_barrier(ctl, NULL)); /* ctl is unharmed and kept its own timeout */
    mlc_comm_free(quick);
    /* A probe of any source and tag that nothing answers names its wildcards as such. */
    mlc_comm_t *lone = NULL;
    CHECK_OK(mlc_comm_split(ctl, 0, 0, &lone));
    CHECK_OK(mlc_comm_set_timeout(lone, 0.5));
    if (mlc_comm_rank(ctl) == 0) {
        CHECK_ERR(mlc_probe(MLC_ANY_SOURCE, MLC_ANY_TAG, lone, NULL), MLC_ERR_TIMEOUT);
        CHECK(strstr(mlc_last_error(), "probe (source any, tag any) saw no message for 0.5 s") != NULL &&
                  strstr(mlc_last_error(), "failed earlier") == NULL && strstr(mlc_last_error(), "unknown") == NULL,
              "the probe's timeout: %s", mlc_last_error());
    }
    CHECK_OK(mlc_barrier(ctl, NULL));
    mlc_comm_free(lone);
    /* A split that rank 1 never joins: its own collective's timeout names the split. */
    mlc_comm_t *slow = NULL, *never = NULL;
    CHECK_OK(mlc_comm_split(ctl, 0, 0, &slow));
    CHECK_OK(mlc_comm_set_timeout(slow, 1.5));
    if (mlc_comm_rank(ctl) == 0) {
        CHECK_ERR(mlc_comm_split(slow, 0, 0, &never), MLC_ERR_TIMEOUT);
        CHECK(strstr(mlc_last_error(), "inside mlc_comm_split") != NULL, "the split's timeout: %s", mlc_last_error());
    }
    CHECK_OK(mlc_barrier(ctl, NULL));
    mlc_comm_free(slow);
    return 0;
}

/* The verdict travels to rank 1 over ctl; both return it. */
static int run_rank(mlc_comm_t *work, mlc_comm_t *ctl)
{
    mlc_comm_t *comm = ctl; /* for CHECK */
    int32_t verdict = 1;
    CHECK(mlc_comm_size(work) == 2, "needs exactly 2 ranks, got %d", mlc_comm_size(work));
    CHECK_RUN(own_timeout(ctl));
    if (mlc_comm_rank(work) == 0) {
        verdict = rank0(work, ctl);
        CHECK_OK(mlc_send(&verdict, 1, MLC_INT32, 1, 9, ctl, NULL));
    } else {
        CHECK_OK(mlc_recv(&verdict, 1, MLC_INT32, 0, 9, ctl, NULL, NULL));
    }
    CHECK_OK(mlc_barrier(ctl, NULL));
    return verdict;
}

typedef struct targ {
    mlc_comm_t *work, *ctl;
    int rc;
} targ_t;

static void *thread_main(void *p)
{
    targ_t *a = p;
    a->rc = run_rank(a->work, a->ctl);
    return NULL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    mlc_config_t patient = MLC_CONFIG_INIT;
    patient.timeout_s = 60;
    int threads = argc > 2 && strcmp(argv[1], "--threads") == 0;
    int rc = 0;
    if (threads) {
        if (atoi(argv[2]) != 2) return MLC_TEST_SKIP;
        mlc_comm_t *ctl[2], *work[2];
        mlc_status_t st = mlc_comm_init_all(2, &patient, ctl);
        if (st == MLC_SUCCESS) st = mlc_comm_init_all(2, NULL, work);
        if (st != MLC_SUCCESS) {
            fprintf(stderr, "init: %s: %s\n", mlc_status_name(st), mlc_last_error());
            return 2;
        }
        targ_t args[2] = {{work[0], ctl[0], 1}, {work[1], ctl[1], 1}};
        pthread_t tid[2];
        for (int i = 0; i < 2; i++) pthread_create(&tid[i], NULL, thread_main, &args[i]);
        for (int i = 0; i < 2; i++) {
            pthread_join(tid[i], NULL);
            if (args[i].rc) rc = 1;
        }
        for (int i = 0; i < 2; i++) {
            mlc_comm_free(work[i]);
            mlc_comm_free(ctl[i]);
        }
        return rc;
    }
    mlc_comm_t *ctl = NULL, *work = NULL;
    mlc_status_t st = mlc_comm_init(&patient, &ctl);
    if (st == MLC_SUCCESS) st = mlc_comm_init(NULL, &work);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "init: %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 2;
    }
    rc = run_rank(work, ctl) ? 1 : 0;
    mlc_comm_free(work);
    mlc_comm_free(ctl);
    return rc;
}
