/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Groups on the nccl backend with several ranks, on the test doubles
 * (fake_nccl.c runs the ranks of a communicator as threads of this process,
 * fake_cudart.c is the runtime). Each rank is a thread with its own nccl
 * communicators, made as a launcher's ranks would be (rank and size given,
 * the NCCL unique id shared over TCP: MASTER_ADDR / MASTER_PORT).
 *   gpu_nccl_group cases N   the cases of tests/ranks/group_cases.c on N ranks
 *                            (each rank's group is ONE NCCL group)
 *   gpu_nccl_group deadlock  2 ranks, outside a group both send first (blocking):
 *                            as with NCCL nothing completes: MLC_ERR_TIMEOUT
 *   gpu_nccl_group timeout   2 ranks, rank 1 never posts: the group fails with
 *                            MLC_ERR_TIMEOUT naming the grouped operation
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "core/backend.h"
#include "group_cases.h"
#include "harness.h"

enum { MAX_RANKS = 8 };

typedef struct rank_arg {
    const char *mode;
    int rank, n;
    mlc_comm_t *side; /* a threads communicator for the verdicts */
    int rc;
} rank_arg_t;

static pthread_barrier_t inits; /* one communicator's TCP rendezvous at a time */

static mlc_comm_t *nccl_comm(const char *job, int n, int r)
{
    mlc_comm_t *comm = NULL;
    mlc_boot_t boot = {r, n, r, n, job, NULL, NULL};
    const mlc_backend_t *be = mlc_backend_find("nccl");
    mlc_status_t st = be ? mlc_comm_create_with(be, NULL, &boot, &comm) : MLC_ERR_UNAVAILABLE;
    if (st != MLC_SUCCESS) fprintf(stderr, "[rank %d] nccl init: %s: %s\n", r, mlc_status_name(st), mlc_last_error());
    pthread_barrier_wait(&inits);
    return comm;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &len) == 0;
    if (fd >= 0) close(fd);
    return ok ? ntohs(a.sin_port) : -1;
}

static int deadlock(mlc_comm_t *comm)
{
    if (mlc_comm_size(comm) != 2) return MLC_TEST_SKIP;
    char s[1024] = {0}, r[1024];
    int peer = 1 - mlc_comm_rank(comm);
    mlc_status_t st = mlc_send(s, sizeof s, MLC_UINT8, peer, 0, comm, NULL);
    if (st == MLC_SUCCESS) st = mlc_recv(r, sizeof r, MLC_UINT8, peer, 0, comm, NULL, NULL);
    CHECK(st == MLC_ERR_TIMEOUT, "send then recv on both ranks outside a group: %s (%s), expected "
          "MLC_ERR_TIMEOUT (NCCL completes neither)", mlc_status_name(st), mlc_last_error());
    return 0;
}

static void *rank_main(void *p)
{
    rank_arg_t *a = p;
    a->rc = 1;
    char job[64];
    snprintf(job, sizeof job, "gpu-group-%d-a", (int)getpid());
    mlc_comm_t *comm = nccl_comm(job, a->n, a->rank);
    job[strlen(job) - 1] = 'b';
    mlc_comm_t *other = nccl_comm(job, a->n, a->rank);
    if (!comm || !other) {
        mlc_comm_free(comm);
        mlc_comm_free(other);
        return NULL;
    }
    if (strcmp(a->mode, "cases") == 0) {
        a->rc = group_all_cases(comm, other, (size_t)4 << 20, 100003);
    } else if (strcmp(a->mode, "deadlock") == 0) {
        a->rc = deadlock(comm);
    } else {
        a->rc = group_timeout(comm, a->side);
    }
    if (a->rc && a->rc != MLC_TEST_SKIP) fprintf(stderr, "[rank %d] FAILED\n", a->rank);
    mlc_comm_free(other);
    mlc_comm_free(comm);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "cases";
    int n = argc > 2 ? atoi(argv[2]) : 2;
    if (n < 1 || n > MAX_RANKS) return 2;
    int port = free_port();
    if (port <= 1) return 2;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port - 1); /* the rendezvous listens on MASTER_PORT + 1 */
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", ps, 1);
    pthread_barrier_init(&inits, NULL, (unsigned)n);
    mlc_comm_t *side[MAX_RANKS];
    if (mlc_comm_init_all(n, NULL, side) != MLC_SUCCESS) {
        fprintf(stderr, "threads init: %s\n", mlc_last_error());
        return 2;
    }
    rank_arg_t args[MAX_RANKS];
    pthread_t tid[MAX_RANKS];
    for (int r = 0; r < n; r++) {
        args[r] = (rank_arg_t){mode, r, n, side[r], 1};
        pthread_create(&tid[r], NULL, rank_main, &args[r]);
    }
    int rc = 0, skip = 0;
    for (int r = 0; r < n; r++) {
        pthread_join(tid[r], NULL);
        if (args[r].rc == MLC_TEST_SKIP) skip = 1;
        else if (args[r].rc) rc = 1;
    }
    for (int r = 0; r < n; r++) mlc_comm_free(side[r]);
    pthread_barrier_destroy(&inits);
    if (!rc && skip) return MLC_TEST_SKIP;
    printf("%s\n", rc ? "FAIL" : "PASS");
    return rc;
}
