/* SPDX-License-Identifier: BSD-3-Clause */
/* Checks for the exchange unit tests (no ranks): report and fail the test function. */
#ifndef MLC_XUNIT_H
#define MLC_XUNIT_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlcomm.h"

#define XCHECK(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: XCHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fprintf(stderr, "\n");                                                   \
            return 1;                                                                \
        }                                                                            \
    } while (0)
#define XCHECK_OK(call)                                                              \
    do {                                                                             \
        mlc_status_t st_ = (call);                                                   \
        XCHECK(st_ == MLC_SUCCESS, "%s -> %s: %s", #call, mlc_status_name(st_),      \
               mlc_last_error());                                                    \
    } while (0)
/* A call that must fail with `code`, leaving a message that contains `text`. */
#define XCHECK_ERR(call, code, text)                                                 \
    do {                                                                             \
        mlc_status_t st_ = (call);                                                   \
        XCHECK(st_ == (code), "%s -> %s, expected %s (%s)", #call, mlc_status_name(st_), \
               mlc_status_name(code), mlc_last_error());                             \
        XCHECK(strstr(mlc_last_error(), (text)) != NULL,                             \
               "%s: message \"%s\" lacks \"%s\"", #call, mlc_last_error(), (text));  \
    } while (0)

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
