/* SPDX-License-Identifier: BSD-3-Clause */
/* How a single-copy read compares with memcpy on this host (cma_probe.c). */
#ifndef MLC_SHM_CMA_PROBE_H
#define MLC_SHM_CMA_PROBE_H

/* A single copy of 1 MiB counts as slow from this many memcpys: then
 * staging (two copies through shared memory that stay in the caches) is
 * the faster way for large allreduces and allgathers. */
#define SHM_CMA_SLOW_RATIO 1.6

/* The time of a 1 MiB process_vm_readv over a 1 MiB memcpy (the fastest of
 * a few each); 0 where process_vm_readv fails. */
double shm_cma_cost(void);

#endif
