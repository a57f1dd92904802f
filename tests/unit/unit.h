/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Minimal checks for the unit tests: a failed check prints where and why and
 * counts; the test keeps going so one run shows every failure. main()
 * returns unit_result().
 */
#ifndef MLC_UNIT_H
#define MLC_UNIT_H
#include <stdio.h>
#include <string.h>
#include "mlcomm.h"

static int unit_failures;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            if (unit_failures++ < 50) {                                                   \
                fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);  \
                fprintf(stderr, __VA_ARGS__);                                             \
                fputc('\n', stderr);                                                      \
            }                                                                             \
        }                                                                                 \
    } while (0)
/* A call that must succeed. */
#define CHECK_OK(call)                                                                    \
    do {                                                                                  \
        mlc_status_t st_ = (call);                                                        \
        CHECK(st_ == MLC_SUCCESS, "%s -> %s: %s", #call, mlc_status_name(st_),            \
              mlc_last_error());                                                          \
    } while (0)
/* A call that must fail with `code`, leaving a message that contains `needle`. */
#define CHECK_ERR(call, code, needle)                                                     \
    do {                                                                                  \
        mlc_status_t st_ = (call);                                                        \
        CHECK(st_ == (code), "%s -> %s, expected %s (%s)", #call, mlc_status_name(st_),   \
              mlc_status_name(code), mlc_last_error());                                   \
        CHECK(strstr(mlc_last_error(), (needle)) != NULL,                                 \
              "%s: message '%s' does not mention '%s'", #call, mlc_last_error(), (needle)); \
    } while (0)
#define CHECK_STR(a, b)                                                                   \
    do {                                                                                  \
        const char *a_ = (a), *b_ = (b);                                                  \
        CHECK(a_ != NULL && b_ != NULL && strcmp(a_, b_) == 0, "%s is '%s', expected '%s'", \
              #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                \
    } while (0)

static inline int unit_result(const char *name)
{
    if (unit_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, unit_failures);
    else printf("%s: all checks passed\n", name);
    return unit_failures ? 1 : 0;
}
#endif
