/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How a single-copy read (process_vm_readv) compares with memcpy on this
 * host. The kernel pins every page it reads: on most hosts that costs about
 * 25% over memcpy, but under some hypervisors each page costs far more (an
 * AMD EPYC guest here: 2-3x memcpy at 1 MiB, 4-5x at 8 MiB, 7-9x at 64 KiB).
 * The segment's creator measures it once (shm.c); where it is slow the
 * engine moves large allreduces and allgathers through the shared stages
 * (docs/ENGINE.md). It reads this process's own memory: no peer, no
 * permission needed, about a millisecond.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "base/clock.h"
#include "cma_probe.h"

#define PROBE_BYTES ((size_t)1 << 20)
#define PROBE_ROUNDS 5 /* the fastest of each: one descheduling must not decide */

double shm_cma_cost(void)
{
    char *a = malloc(PROBE_BYTES), *b = malloc(PROBE_BYTES);
    double copy = 0, cma = 0;
    if (!a || !b) goto out;
    memset(a, 1, PROBE_BYTES);
    memset(b, 2, PROBE_BYTES);
    for (int i = 0; i < PROBE_ROUNDS; i++) {
        double t0 = mlc_now();
        memcpy(b, a, PROBE_BYTES);
        __asm__ volatile("" ::"r"(b) : "memory"); /* the copy is not elided */
        double t1 = mlc_now();
        struct iovec local = {b, PROBE_BYTES}, remote = {a, PROBE_BYTES};
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)PROBE_BYTES) {
            cma = 0;
            goto out;
        }
        double t2 = mlc_now();
        if (i == 0 || t1 - t0 < copy) copy = t1 - t0;
        if (i == 0 || t2 - t1 < cma) cma = t2 - t1;
    }
out:
    free(a);
    free(b);
    return cma > 0 && copy > 0 ? cma / copy : 0;
}
