/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Run under `mlcomm-run -n 3` with MLC_BACKEND=shm and MLC_TIMEOUT=120:
 * allreduce 32 MiB in a loop; in iteration 3 rank 1 SIGKILLs itself from a
 * helper thread while its allreduce is in progress. With the argument
 * `broadcast ROOT` the loop is of 32 MiB in-place broadcasts from ROOT
 * instead (streamed through the root's stage: rank 1 dies as the root, or
 * as a reader the root waits for). The other ranks must
 * fail with MLC_ERR_PEER_LOST (not TIMEOUT) promptly and print it as
 *   rank R: MLC_ERR_PEER_LOST after S s in iteration I: <message>
 * and the error must be sticky. Rank 0 prints the job id (jobid=...) so the
 * driver (kill_test.sh) can check /dev/shm afterwards, and after the first
 * allreduce lists what /dev/shm holds of the job (segments are unlinked as
 * soon as every rank has attached, so nothing survives even a SIGKILL of
 * the whole job, launcher included).
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include "harness.h"

#define COUNT (8u * 1024u * 1024u) /* floats: 32 MiB */
#define KILL_ITERATION 3
#define ITERATIONS 40
#define PROMPT_S 20.0 /* far below MLC_TIMEOUT=120: peer death, not a timeout */

static atomic_int in_call;

/* Print every /dev/shm entry named mlc-<job id>-*; returns how many. */
static int list_job_segments(const char *job)
{
    char prefix[160];
    int n = 0;
    snprintf(prefix, sizeof prefix, "mlc-%s-", job);
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            printf("rank 0: IN /dev/shm DURING THE RUN: %s\n", e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

static void *killer(void *arg)
{
    while (!atomic_load(&in_call)) mlc_test_sleep_ms(1);
    mlc_test_sleep_ms(3); /* inside the allreduce */
    raise(SIGKILL);
    return arg;
}

int main(int argc, char **argv)
{
    int bcast_root = argc == 3 && strcmp(argv[1], "broadcast") == 0 ? atoi(argv[2]) : -1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st != MLC_SUCCESS) {
        printf("init: %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 2;
    }
    int r = mlc_comm_rank(comm);
    if (mlc_comm_size(comm) != 3) {
        printf("rank %d: needs 3 ranks, got %d\n", r, mlc_comm_size(comm));
        return 2;
    }
    if (r == 0) printf("jobid=%s\n", getenv("MLC_JOB_ID") ? getenv("MLC_JOB_ID") : "");
    float *send = malloc(COUNT * sizeof(float)), *recv = malloc(COUNT * sizeof(float));
    if (!send || !recv) return 2;
    for (size_t i = 0; i < COUNT; i++) send[i] = (float)(i % 5);
    pthread_t tid;
    for (int it = 0; it < ITERATIONS; it++) {
        if (r == 1 && it == KILL_ITERATION) {
            pthread_create(&tid, NULL, killer, NULL);
            atomic_store(&in_call, 1);
        }
        if (bcast_root >= 0 && r != bcast_root) send[7] = -1.0f; /* the broadcast must bring it back */
        double t0 = mlc_test_now();
        if (bcast_root >= 0)
            st = mlc_broadcast(r == bcast_root ? send : NULL, send, COUNT, MLC_FLOAT32, bcast_root, comm, NULL);
        else
            st = mlc_allreduce(send, recv, COUNT, MLC_FLOAT32, MLC_SUM, comm, NULL);
        double dt = mlc_test_now() - t0;
        if (st != MLC_SUCCESS) {
            printf("rank %d: %s after %.2f s in iteration %d: %s\n", r, mlc_status_name(st), dt, it,
                   mlc_last_error());
            mlc_status_t again = mlc_barrier(comm, NULL);
            if (again != st) printf("rank %d: NOT STICKY: the next call returned %s\n", r,
                                    mlc_status_name(again));
            if (dt > PROMPT_S) printf("rank %d: TOO SLOW: %.1f s to notice\n", r, dt);
            mlc_comm_free(comm);
            free(send);
            free(recv);
            return 1;
        }
        float got = bcast_root >= 0 ? send[7] : recv[7], want = (bcast_root >= 0 ? 1.0f : 3.0f) * (float)(7 % 5);
        if (got != want) {
            printf("rank %d: WRONG RESULT %g in iteration %d\n", r, got, it);
            mlc_comm_free(comm);
            free(send);
            free(recv);
            return 1;
        }
        if (r == 0 && it == 0 && getenv("MLC_JOB_ID"))
            printf("rank 0: %d job segments in /dev/shm after the first allreduce\n",
                   list_job_segments(getenv("MLC_JOB_ID")));
    }
    printf("rank %d: completed all iterations\n", r);
    mlc_comm_free(comm);
    free(send);
    free(recv);
    return 0;
}
