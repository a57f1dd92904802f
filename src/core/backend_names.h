/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The backends, one X(identifier) each; the order is mlcomm-info's listing
 * order. One list drives the registry (src/core/registry.c), the names
 * MLC_BACKEND accepts (the config table) and the test matrix: adding a
 * backend is one line here plus its table.
 */
#ifndef MLC_BASE_BACKEND_NAMES_H
#define MLC_BASE_BACKEND_NAMES_H

#define MLC_BACKEND_LIST(X) \
    X(threads)              \
    X(shm)                  \
    X(mpi)                  \
    X(nccl)                 \
    X(rccl)

#endif
