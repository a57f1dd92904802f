/* SPDX-License-Identifier: BSD-3-Clause */
/* Harness of the exchange unit tests (no ranks): test functions fail on their first failed check. */
#ifndef MLC_XUNIT_H
#define MLC_XUNIT_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A failed check (tests/check.h) reports and returns 1 from the test function. */
#define CHECK_RETURNS 1
#include "check.h"

/* Run one test function and count failures. */
#define XRUN(fn)                                                                     \
    do {                                                                             \
        int r_ = fn();                                                               \
        fprintf(stderr, "%-40s %s\n", #fn, r_ ? "FAIL" : "ok");                     \
        failures += r_ != 0;                                                         \
    } while (0)

/* Small deterministic generator (tests must reproduce). */
static inline uint64_t xrand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static inline int64_t xrange(uint64_t *s, int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(xrand(s) % (uint64_t)(hi - lo + 1));
}
#endif
