/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The operations trace_ops runs on every rank, and so the events the merged
 * trace must hold: X(name in the trace, how many times).
 */
#ifndef MLC_TEST_TRACE_OPS_H
#define MLC_TEST_TRACE_OPS_H
#define MLC_TRACE_TEST_OPS(X) \
    X(allreduce, 4)           \
    X(broadcast, 2)           \
    X(allgather, 1)           \
    X(reduce_scatter, 1)      \
    X(barrier, 1)             \
    X(sendrecv, 1)
#endif
