/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counts above INT_MAX (opt-in, label "large": 2.1 GB per rank and buffer):
 * an in-place int8 allreduce, a broadcast and a send/recv of INT_MAX + 1001
 * elements, checked element by element.
 */
#include <limits.h>
#include "harness.h"

#define COUNT ((size_t)INT_MAX + 1001u)

static int8_t value(size_t i, int r) { return (int8_t)((i + (size_t)r) % 7); }

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    int8_t *buf = malloc(COUNT);
    CHECK(buf != NULL, "cannot allocate %zu bytes", COUNT);

    for (size_t i = 0; i < COUNT; i++) buf[i] = value(i, r);
    CHECK_OK(mlc_allreduce(buf, buf, COUNT, MLC_INT8, MLC_SUM, comm, NULL));
    for (size_t i = 0; i < COUNT; i++) {
        int want = 0;
        for (int q = 0; q < p; q++) want += value(i, q);
        CHECK(buf[i] == want, "allreduce element %zu is %d, expected %d", i, buf[i], want);
    }

    int root = p - 1;
    for (size_t i = 0; i < COUNT; i++) buf[i] = r == root ? value(i, 3) : 0;
    CHECK_OK(mlc_broadcast(buf, buf, COUNT, MLC_INT8, root, comm, NULL));
    for (size_t i = 0; i < COUNT; i++)
        CHECK(buf[i] == value(i, 3), "broadcast element %zu is %d", i, buf[i]);

    if (p >= 2 && r < 2) {
        mlc_msg_status_t st;
        if (r == 0) {
            for (size_t i = 0; i < COUNT; i++) buf[i] = value(i, 5);
            CHECK_OK(mlc_send(buf, COUNT, MLC_INT8, 1, 3, comm, NULL));
        } else {
            memset(buf, 0, COUNT);
            CHECK_OK(mlc_recv(buf, COUNT, MLC_INT8, 0, 3, comm, &st, NULL));
            CHECK(st.bytes == COUNT, "received %zu bytes, expected %zu", st.bytes, COUNT);
            for (size_t i = 0; i < COUNT; i++)
                CHECK(buf[i] == value(i, 5), "recv element %zu is %d", i, buf[i]);
        }
    }
    free(buf);
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
