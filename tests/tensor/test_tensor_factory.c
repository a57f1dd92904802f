/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_create_from: the threads backend (the C# specification's "mock", real) with
 * all ranks at once and by unique id, options reaching the communicator,
 * and every refusal naming what was wrong.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "mlcomm_tensor.h"

static int failures = 0;
#define CHECK_COUNTER failures
#include "check.h"
typedef struct rank_job {
    mlc_comm_t *comm;
    const mlc_unique_id_t *uid; /* join by id when set */
    int rank, size;
    float result;
    mlc_status_t st;
} rank_job_t;

/* Each rank all-reduces (rank + 1): the result is size*(size+1)/2. */
static void *run_rank(void *p)
{
    rank_job_t *j = p;
    if (j->uid) {
        char r[8], n[8];
        snprintf(r, sizeof r, "%d", j->rank);
        snprintf(n, sizeof n, "%d", j->size);
        mlc_option_t opts[] = {{"rank", r}, {"world_size", n}, {"timeout", "60"}};
        int made = 0;
        j->st = mlc_comm_create_from("threads", opts, 3, j->uid, 1, &j->comm, &made);
        if (j->st != MLC_SUCCESS) return NULL;
    }
    float v = (float)mlc_comm_rank(j->comm) + 1.0f;
    mlc_tensor_t in, out;
    mlc_tensor_init(&in, &v, MLC_FLOAT32, 0, NULL);
    mlc_tensor_init(&out, &j->result, MLC_FLOAT32, 0, NULL);
    j->st = mlc_tensor_allreduce(&in, &out, MLC_SUM, j->comm, NULL);
    return NULL;
}

static void run_all(rank_job_t *jobs, int n)
{
    pthread_t t[8];
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, run_rank, &jobs[i]);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++) {
        CHECK(jobs[i].st == MLC_SUCCESS, "rank %d: %s", i, mlc_status_name(jobs[i].st));
        CHECK(jobs[i].result == (float)(n * (n + 1) / 2), "rank %d: sum %g", i, jobs[i].result);
    }
}

static void test_threads_all_at_once(void)
{
    mlc_comm_t *comms[3] = {NULL, NULL, NULL};
    int made = 0;
    mlc_option_t opts[] = {{"world_size", "3"}, {"timeout", "60"}, {"log_level", "warn"}};
    mlc_status_t st = mlc_comm_create_from("threads", opts, 3, NULL, 3, comms, &made);
    CHECK(st == MLC_SUCCESS, "create: %s: %s", mlc_status_name(st), mlc_last_error());
    if (st != MLC_SUCCESS) return;
    CHECK(made == 3, "made %d", made);
    rank_job_t jobs[3];
    for (int i = 0; i < 3; i++) {
        CHECK(mlc_comm_rank(comms[i]) == i && mlc_comm_size(comms[i]) == 3, "comm %d", i);
        CHECK(strcmp(mlc_comm_backend(comms[i]), "threads") == 0, "backend %s",
              mlc_comm_backend(comms[i]));
        jobs[i] = (rank_job_t){.comm = comms[i], .rank = i, .size = 3};
    }
    run_all(jobs, 3);
    for (int i = 0; i < 3; i++) mlc_comm_free(comms[i]);
}

static void test_threads_by_unique_id(void)
{
    mlc_unique_id_t id;
    CHECK(mlc_get_unique_id(&id) == MLC_SUCCESS, "unique id: %s", mlc_last_error());
    rank_job_t jobs[2];
    for (int i = 0; i < 2; i++) jobs[i] = (rank_job_t){.uid = &id, .rank = i, .size = 2};
    run_all(jobs, 2);
    for (int i = 0; i < 2; i++) mlc_comm_free(jobs[i].comm);
}

static void test_refusals(void)
{
    mlc_comm_t *comms[4] = {NULL};
    int made = -1;
    mlc_option_t unknown = {"world_sise", "2"};
    CHECK(mlc_comm_create_from("threads", &unknown, 1, NULL, 4, comms, &made) == MLC_ERR_CONFIG,
          "unknown key accepted");
    CHECK(strstr(mlc_last_error(), "\"world_sise\"") != NULL, "message %s", mlc_last_error());
    mlc_option_t bad_value = {"world_size", "many"};
    CHECK(mlc_comm_create_from("threads", &bad_value, 1, NULL, 4, comms, &made) == MLC_ERR_CONFIG,
          "bad value accepted");
    CHECK(strstr(mlc_last_error(), "many") != NULL, "message %s", mlc_last_error());
    CHECK(mlc_comm_create_from("mock", NULL, 0, NULL, 4, comms, &made) == MLC_ERR_CONFIG,
          "unknown backend accepted");
    CHECK(strstr(mlc_last_error(), "\"mock\"") != NULL, "message %s", mlc_last_error());
    mlc_option_t rank_only = {"rank", "1"};
    CHECK(mlc_comm_create_from("threads", &rank_only, 1, NULL, 4, comms, &made) == MLC_ERR_CONFIG,
          "rank without a unique id accepted");
    mlc_option_t four = {"world_size", "4"};
    CHECK(mlc_comm_create_from("threads", &four, 1, NULL, 2, comms, &made) == MLC_ERR_INVALID_ARG,
          "capacity 2 for 4 ranks accepted");
    mlc_unique_id_t id;
    mlc_get_unique_id(&id);
    CHECK(mlc_comm_create_from("threads", &four, 1, &id, 1, comms, &made) == MLC_ERR_CONFIG,
          "unique id without rank accepted");
    mlc_option_t bad_algo[] = {{"world_size", "2"}, {"algo_allreduce", "no-such-algorithm"}};
    CHECK(mlc_comm_create_from("threads", bad_algo, 2, NULL, 4, comms, &made) != MLC_SUCCESS,
          "unknown algorithm accepted");
    CHECK(mlc_comm_create_from("threads", NULL, 0, NULL, 0, comms, &made) == MLC_ERR_INVALID_ARG,
          "capacity 0 accepted");
    CHECK(made == -1 && comms[0] == NULL, "outputs written on failure");
}

int main(void)
{
    test_threads_all_at_once();
    test_threads_by_unique_id();
    test_refusals();
    if (failures) fprintf(stderr, "tensor_factory: %d failures\n", failures);
    return failures ? 1 : 0;
}
