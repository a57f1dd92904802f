/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A request that returned MLC_ERR_ABORTED is over: its buffers are the
 * caller's again (mlcomm.h), so nothing may touch them afterwards. Per
 * round, on a communicator `d` split for it, every rank runs nonblocking
 * allreduces of 200 KB (the engine's large path) in buffers of their own
 * mapping, while a second thread drives a sibling communicator `e` (the
 * same endpoint, whose progress would find a forgotten operation), and one
 * rank aborts `d` from a third thread at a time that varies by round. A
 * rank whose wait returns MLC_ERR_ABORTED unmaps its buffers at once. With
 * the aborted allreduce left on the endpoint, the rank's later progress
 * resumed it, reducing from and into them, and peers went on reading them
 * in place (SIGSEGV in most runs on threads, some on shm). Not on mpi, which cannot
 * cancel a collective (docs/MPI.md). Exit 0 = pass.
 */
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include "harness.h"

#define ROUNDS 20
#define COUNT 50000 /* uint32: 200 KB */

typedef struct sibling {
    mlc_comm_t *e;
    int bad;
} sibling_t;

/* Small allreduces on e while d's run and fail. */
static void *drive_sibling(void *arg)
{
    sibling_t *s = arg;
    uint32_t v[64], w[64];
    int p = mlc_comm_size(s->e);
    for (int i = 0; i < 64; i++) v[i] = (uint32_t)i;
    for (int k = 0; k < 2000 && !s->bad; k++) {
        if (mlc_allreduce(v, w, 64, MLC_UINT32, MLC_SUM, s->e, NULL) != MLC_SUCCESS || w[5] != (uint32_t)(5 * p))
            s->bad = 1;
    }
    return NULL;
}

typedef struct aborter {
    mlc_comm_t *d;
    useconds_t after_us;
} aborter_t;

static void *abort_later(void *arg)
{
    aborter_t *a = arg;
    usleep(a->after_us);
    mlc_comm_abort(a->d);
    return NULL;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    if (p < 2) return MLC_TEST_SKIP;
    size_t bytes = COUNT * sizeof(uint32_t);
    for (int round = 0; round < ROUNDS; round++) {
        mlc_comm_t *d = NULL, *e = NULL;
        CHECK_OK(mlc_comm_split(comm, 0, r, &d));
        CHECK_OK(mlc_comm_split(comm, 1, r, &e));
        sibling_t sib = {e, 0};
        aborter_t ab = {d, (useconds_t)((round * 7919) % 150000)};
        pthread_t ts, ta;
        pthread_create(&ts, NULL, drive_sibling, &sib);
        if (r == round % p) pthread_create(&ta, NULL, abort_later, &ab);
        for (;;) {
            uint32_t *in = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            uint32_t *out = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            CHECK(in != MAP_FAILED && out != MAP_FAILED, "mmap of %zu bytes", bytes);
            for (size_t i = 0; i < COUNT; i++) in[i] = (uint32_t)i;
            mlc_request_t *q = NULL;
            mlc_status_t st = mlc_allreduce(in, out, COUNT, MLC_UINT32, MLC_SUM, d, &q);
            if (st == MLC_SUCCESS) st = mlc_request_wait(&q);
            if (st == MLC_SUCCESS)
                for (size_t i = 0; i < COUNT; i += 997)
                    CHECK(out[i] == (uint32_t)(p * i), "round %d: element %zu is %u", round, i, out[i]);
            else
                CHECK(st == MLC_ERR_ABORTED, "round %d: %s (%s)", round, mlc_status_name(st), mlc_last_error());
            munmap(in, bytes); /* over, with success or not: the memory goes back */
            munmap(out, bytes);
            if (st != MLC_SUCCESS) break;
        }
        if (r == round % p) pthread_join(ta, NULL);
        pthread_join(ts, NULL);
        CHECK(!sib.bad, "round %d: the sibling communicator's allreduce failed", round);
        mlc_comm_free(d);
        mlc_comm_free(e);
        CHECK_OK(mlc_barrier(comm, NULL));
    }
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
