/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Groups (mlc_group_start / mlc_group_end) on threads, shm and mpi: the
 * cases of group_cases.c. GROUP_TEST selects:
 *   (unset)   every case; the ring moves GROUP_RING_BYTES (default 64 MiB)
 *             per rank in blocking calls, send before recv on every rank;
 *             then a thread that exits with its group open
 *   timeout   2 ranks, MLC_TIMEOUT small: a group whose peer never posts
 */
#include <stdlib.h>
#include "group_cases.h"
#include "harness.h"

static int body(mlc_comm_t *comm)
{
    const char *which = getenv("GROUP_TEST");
    const char *ring = getenv("GROUP_RING_BYTES");
    size_t ring_bytes = ring ? (size_t)strtoull(ring, NULL, 0) : (size_t)64 << 20;
    mlc_comm_t *other = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &other));
    int rc = which && strcmp(which, "timeout") == 0 ? group_timeout(comm, other)
                                                    : group_all_cases(comm, other, ring_bytes, 100003);
    if (rc == 0 && !which) rc = group_thread_exit(comm, 1 << 20);
    mlc_comm_free(other);
    return rc;
}

MLC_TEST_MAIN(body)
