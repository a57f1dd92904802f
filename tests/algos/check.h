/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Checks for the algos tests: a failed check prints where and why and
 * counts; the test goes on so one run shows every failure (the first 40).
 * main() returns check_result().
 */
#ifndef MLC_ALGOS_CHECK_H
#define MLC_ALGOS_CHECK_H
#include <stdio.h>
#include <string.h>
#include "mlcomm.h"

extern int check_failures;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            if (check_failures++ < 40) {                                                  \
                fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);  \
                fprintf(stderr, __VA_ARGS__);                                             \
                fputc('\n', stderr);                                                      \
            }                                                                             \
        }                                                                                 \
    } while (0)
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

static inline int check_result(const char *name)
{
    if (check_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
    return check_failures ? 1 : 0;
}
#endif
