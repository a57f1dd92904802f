/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank dies while rank 0 waits on it (MLC_TIMEOUT=0: the wait sits in
 * MPI). Open MPI 4.1 and MPICH have no fault tolerance: the launcher sees
 * the death and ends the job. peer_death.sh checks that the job ends, not
 * hangs, with a failure status, after rank 0 started waiting.
 */
#include <stdint.h>
#include <unistd.h>
#include "harness.h"

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    if (mlc_comm_size(comm) < 2) return MLC_TEST_SKIP;
    int32_t x[4];
    CHECK_OK(mlc_barrier(comm, NULL));
    if (r == 1) {
        sleep(1); /* let rank 0 get into its wait */
        _exit(9);
    }
    if (r == 0) {
        printf("rank 0 waiting\n");
        fflush(stdout);
        mlc_status_t st = mlc_recv(x, 4, MLC_INT32, 1, 1, comm, NULL, NULL);
        printf("rank 0 returned %s\n", mlc_status_name(st));
        return 1;
    }
    /* other ranks wait too */
    mlc_recv(x, 4, MLC_INT32, 1, 1, comm, NULL, NULL);
    return 1;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
