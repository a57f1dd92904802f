/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A blocking send to this rank itself with no receive posted: MPI holds a
 * large one until its receive is posted (threads and shm buffer it), so on
 * mpi it times out (the test sets MLC_TIMEOUT=1). The message must say that
 * the send waits for this rank's own receive and what to do instead, not
 * name this rank as a peer not heard from.
 *   test_mpi_self_send      under mpirun, MLC_BACKEND=mpi
 */
#include <string.h>
#include "harness.h"

/* Static: the send MPI still holds after the timeout may read it until the end. */
static unsigned char big[64 << 20];

static int body(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0) return MLC_TEST_SKIP;
    int r = mlc_comm_rank(comm);
    mlc_comm_t *c = NULL;
    CHECK_OK(mlc_comm_split(comm, r, 0, &c)); /* this rank alone: the others do not see its failure */
    CHECK_ERR(mlc_send(big, sizeof big, MLC_UINT8, 0, 3, c, NULL), MLC_ERR_TIMEOUT);
    const char *msg = mlc_last_error();
    CHECK(strstr(msg, "itself") != NULL && strstr(msg, "mlc_sendrecv") != NULL,
          "the timeout of a send to self says it waits for its own receive: %s", msg);
    mlc_comm_free(c);
    return 0;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
