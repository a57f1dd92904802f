/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two ranks each wait in a collective on a different communicator, so each
 * waits for a peer that is itself waiting (in another call). The first to
 * time out says so in words: "none (waiting for 1, which wait in another
 * call)", never a list that starts with a comma. The other fails with that
 * posted timeout, or with PEER_LOST when the first has already exited.
 */
#include <string.h>
#include "harness.h"

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    if (mlc_comm_size(comm) != 2) return MLC_TEST_SKIP;
    /* The engine names silent peers this way; MPI asks its peers differently. */
    if (strcmp(mlc_comm_backend(comm), "mpi") == 0) return MLC_TEST_SKIP;
    mlc_comm_t *other = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &other));
    int x = 1, y = 0;
    mlc_status_t st = mlc_allreduce(&x, &y, 1, MLC_INT32, MLC_SUM, r == 0 ? comm : other, NULL);
    const char *msg = mlc_last_error();
    CHECK(st == MLC_ERR_TIMEOUT || st == MLC_ERR_PEER_LOST,
          "crossed allreduces: %s (%s), expected MLC_ERR_TIMEOUT (or PEER_LOST after the peer left)",
          mlc_status_name(st), msg);
    CHECK(strstr(msg, "for , ") == NULL && strstr(msg, "(, ") == NULL, "a rank list starts with a comma: %s", msg);
    CHECK(strstr(msg, "none (waiting for ") == NULL || strstr(msg, "none (waiting for 1,") != NULL ||
              strstr(msg, "none (waiting for 0,") != NULL,
          "the waited-for rank is not named first: %s", msg);
    mlc_comm_free(other);
    return 0;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
