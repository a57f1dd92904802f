/* SPDX-License-Identifier: BSD-3-Clause */
/* The monotonic clock (pure: the MPI module compiles its own copy). */
#include <time.h>
#include "base/clock.h"

double mlc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
