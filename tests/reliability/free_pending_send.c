/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_free cancels pending requests, and "their buffers are no longer
 * touched" (mlcomm.h). Rank 0 posts a 4 MiB send (a rendezvous: the
 * receiver reads the sender's buffer) on a communicator `d`, frees `d` at
 * once, gets MLC_ERR_ABORTED from the send's wait and overwrites the
 * buffer. Only then does rank 1 post the matching receive: it must fail
 * (MLC_ERR_PEER_LOST, naming the free), not return success with the bytes
 * written after the free, as it did. Exit 0 = pass.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

#define COUNT ((size_t)1 << 20) /* uint32: 4 MiB */
#define LATE 0xDEADBEEFu

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    if (p < 2) return MLC_TEST_SKIP;
    uint32_t *buf = malloc(COUNT * sizeof *buf);
    CHECK(buf != NULL, "malloc");
    mlc_comm_t *d = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &d));
    if (r == 0) {
        for (size_t i = 0; i < COUNT; i++) buf[i] = (uint32_t)i;
        mlc_request_t *q = NULL;
        CHECK_OK(mlc_send(buf, COUNT, MLC_UINT32, 1, 4, d, &q));
        CHECK_OK(mlc_comm_free(d));
        CHECK_ERR(mlc_request_wait(&q), MLC_ERR_ABORTED);
        for (size_t i = 0; i < COUNT; i++) buf[i] = LATE; /* the send was cancelled: the buffer is ours */
        CHECK_OK(mlc_barrier(comm, NULL));                /* rank 1 receives only now */
        CHECK_OK(mlc_barrier(comm, NULL));
    } else {
        CHECK_OK(mlc_barrier(comm, NULL));
        if (r == 1) {
            memset(buf, 0, COUNT * sizeof *buf);
            mlc_status_t st = mlc_recv(buf, COUNT, MLC_UINT32, 0, 4, d, NULL, NULL);
            size_t late = 0;
            for (size_t i = 0; i < COUNT; i++) late += buf[i] == LATE;
            CHECK(st == MLC_ERR_PEER_LOST, "receive of the cancelled send -> %s (%s); %zu of %zu elements "
                  "written by rank 0 after it freed the communicator", mlc_status_name(st), mlc_last_error(),
                  late, COUNT);
            CHECK(strstr(mlc_last_error(), "freed the communicator") != NULL, "message: %s", mlc_last_error());
        }
        CHECK_OK(mlc_barrier(comm, NULL));
        mlc_comm_free(d);
    }
    free(buf);
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
