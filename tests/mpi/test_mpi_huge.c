/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counts above INT_MAX for real (label "large", opt-in: about 2.2 GB per
 * rank): an in-place allreduce, a broadcast and a point-to-point message of
 * 2^31 + 7 int8 elements, with no test knob.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    const size_t n = (size_t)INT_MAX + 8;
    int8_t *buf = malloc(n);
    if (!buf) return MLC_TEST_SKIP;
    const size_t probe[] = {0, 1, (size_t)INT_MAX - 1, (size_t)INT_MAX, n - 1};
    memset(buf, 1, n);
    CHECK_OK(mlc_allreduce(buf, buf, n, MLC_INT8, MLC_SUM, comm, NULL));
    for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++)
        CHECK(buf[probe[k]] == p, "allreduce [%zu] = %d", probe[k], buf[probe[k]]);
    if (r == 0)
        for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++) buf[probe[k]] = (int8_t)(k + 10);
    CHECK_OK(mlc_broadcast(r == 0 ? buf : NULL, buf, n, MLC_INT8, 0, comm, NULL));
    for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++)
        CHECK(buf[probe[k]] == (int8_t)(k + 10), "bcast [%zu] = %d", probe[k], buf[probe[k]]);
    if (p >= 2 && r < 2) {
        mlc_msg_status_t st;
        if (r == 0) {
            buf[n - 1] = 42;
            CHECK_OK(mlc_send(buf, n, MLC_INT8, 1, 3, comm, NULL));
        } else {
            buf[n - 1] = 0;
            CHECK_OK(mlc_recv(buf, n, MLC_INT8, 0, 3, comm, &st, NULL));
            CHECK(st.bytes == n && buf[n - 1] == 42, "p2p: %zu bytes, last %d", st.bytes, buf[n - 1]);
        }
    }
    free(buf);
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
