/* SPDX-License-Identifier: BSD-3-Clause */
/* The one clock: monotonic seconds, for deadlines, idle clocks and profiles. */
#ifndef MLC_BASE_CLOCK_H
#define MLC_BASE_CLOCK_H
#ifndef MLC_BUILDING_MODULE
#pragma GCC visibility push(default) /* tools and tests read it too */
#endif

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC): never jumps. */
double mlc_now(void);

#ifndef MLC_BUILDING_MODULE
#pragma GCC visibility pop
#endif
#endif
