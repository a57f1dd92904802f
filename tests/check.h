/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The assertion macros of every test folder. A failed check prints
 *   [who]file:line: what failed: message
 * on stderr and then follows the including test's failure policy.
 *
 * Policy hooks, defined (or not) before this header is included:
 *   CHECK_RETURNS v       a failed check returns v from the function it is in
 *                         (rank bodies: 1, so the harness aborts the rank).
 *   otherwise             a failed check counts and the test goes on, so one
 *                         run shows every failure:
 *     CHECK_COUNTER       the int lvalue that counts (default check_failures,
 *                         declared here; check_result() reports it);
 *     CHECK_MAX_REPORTS   how many failures are printed (default 50); every
 *                         one is counted.
 *   CHECK_WHO()           a statement that prints a prefix naming who failed,
 *                         e.g. "[rank 2] " (default: nothing).
 *   CHECK_TAIL()          a statement that prints after the message, e.g. the
 *                         last error (default: nothing).
 *
 * Macros:
 *   CHECK(cond, fmt, ...)            cond holds, else fmt explains why not
 *   CHECK_OK(call)                   call returns MLC_SUCCESS
 *   CHECK_ERR(call, code)            call fails with code and leaves a message
 *   CHECK_ERR_MSG(call, code, text)  ... and the message contains text
 *   CHECK_MSG(text)                  mlc_last_error() contains text
 *   CHECK_STR(a, b)                  two strings are equal (neither NULL)
 *   CHECK_RUN(call)                  a helper that reported its own failure
 *                                    (returned non-zero) fails this check too
 */
#ifndef MLC_TEST_CHECK_H
#define MLC_TEST_CHECK_H
#include <stdio.h>
#include <string.h>
#include "mlcomm.h"

#ifndef CHECK_WHO
#define CHECK_WHO() ((void)0)
#endif
#ifndef CHECK_TAIL
#define CHECK_TAIL() ((void)0)
#endif

#ifdef CHECK_RETURNS
#define CHECK_REPORT_() 1
#define CHECK_STOP_() return (CHECK_RETURNS)
#else
#ifndef CHECK_COUNTER
static int check_failures;
#define CHECK_COUNTER check_failures
/* main()'s exit code: 0 when every check passed; names the count if not. */
static inline int check_result(const char *name)
{
    if (check_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
    else printf("%s: all checks passed\n", name);
    return check_failures ? 1 : 0;
}
#endif
#ifndef CHECK_MAX_REPORTS
#define CHECK_MAX_REPORTS 50
#endif
#define CHECK_REPORT_() ((CHECK_COUNTER)++ < (CHECK_MAX_REPORTS))
#define CHECK_STOP_() ((void)0)
#endif

/* Report a failure (what: a plain string, then a printf message) and apply
 * the policy. The building block of every check here and in the harnesses. */
#define CHECK_FAILED(what, ...)                                                           \
    do {                                                                                  \
        if (CHECK_REPORT_()) {                                                            \
            CHECK_WHO();                                                                  \
            fprintf(stderr, "%s:%d: %s", __FILE__, __LINE__, (what));                     \
            fprintf(stderr, __VA_ARGS__);                                                 \
            CHECK_TAIL();                                                                 \
            fputc('\n', stderr);                                                          \
        }                                                                                 \
        CHECK_STOP_();                                                                    \
    } while (0)

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) CHECK_FAILED("CHECK(" #cond ") failed: ", __VA_ARGS__);              \
    } while (0)
/* A call that must succeed. */
#define CHECK_OK(call)                                                                    \
    do {                                                                                  \
        mlc_status_t st_ = (call);                                                        \
        CHECK(st_ == MLC_SUCCESS, "%s -> %s: %s", #call, mlc_status_name(st_),            \
              mlc_last_error());                                                          \
    } while (0)
/* A call that must fail with `code` and leave a non-empty message. */
#define CHECK_ERR(call, code)                                                             \
    do {                                                                                  \
        mlc_status_t st_ = (call);                                                        \
        CHECK(st_ == (code), "%s -> %s, expected %s (%s)", #call, mlc_status_name(st_),   \
              mlc_status_name(code), mlc_last_error());                                   \
        CHECK(mlc_last_error()[0] != '\0', "%s failed without a message", #call);         \
    } while (0)
/* The last error message mentions `text`. */
#define CHECK_MSG(text)                                                                   \
    CHECK(strstr(mlc_last_error(), (text)) != NULL, "message \"%s\" lacks \"%s\"",        \
          mlc_last_error(), (text))
/* A call that must fail with `code`, leaving a message that contains `text`. */
#define CHECK_ERR_MSG(call, code, text)                                                   \
    do {                                                                                  \
        mlc_status_t st_ = (call);                                                        \
        CHECK(st_ == (code), "%s -> %s, expected %s (%s)", #call, mlc_status_name(st_),   \
              mlc_status_name(code), mlc_last_error());                                   \
        CHECK(strstr(mlc_last_error(), (text)) != NULL,                                   \
              "%s: message \"%s\" lacks \"%s\"", #call, mlc_last_error(), (text));        \
    } while (0)
#define CHECK_STR(a, b)                                                                   \
    do {                                                                                  \
        const char *a_ = (a), *b_ = (b);                                                  \
        CHECK(a_ != NULL && b_ != NULL && strcmp(a_, b_) == 0, "%s is '%s', expected '%s'", \
              #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                \
    } while (0)
/* Run a helper that returns non-zero on failure (it has reported why). */
#define CHECK_RUN(call)                                                                   \
    do {                                                                                  \
        if ((call) != 0) CHECK_FAILED("", "in %s", #call);                                \
    } while (0)
#endif
