/* SPDX-License-Identifier: BSD-3-Clause */
/* Thread-local last-error message and the helper that sets it. */
#ifndef MLC_BASE_ERROR_H
#define MLC_BASE_ERROR_H
#include <stdio.h>
#include "mlcomm.h"

#if defined(__GNUC__)
#define MLC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MLC_PRINTF(a, b)
#endif

/*
 * Record `fmt` as the calling thread's last error and return `st`, so that
 * error sites read `return mlc_error(MLC_ERR_INVALID_ARG, "...", ...);`.
 * The message is also logged at debug level. Use it once, where the error is
 * decided; callers that only propagate a status do not call it again.
 */
mlc_status_t mlc_error(mlc_status_t st, const char *fmt, ...) MLC_PRINTF(2, 3);
/* Set the thread's message verbatim (used to hand a request's message to its waiter). */
void mlc_error_set_text(const char *text);
/* The thread's message of a failure st as "fn: message", so that it names the
 * public function called (unless it does already); returns st. */
mlc_status_t mlc_error_in(const char *fn, mlc_status_t st);
/* Clear the thread's message (called at the start of every public call that can fail). */
void mlc_error_clear(void);

/* A message's source or tag as messages print it: the number, or "any" for
 * MLC_ANY_SOURCE / MLC_ANY_TAG (both -1): printf("%s", mlc_any_or(src).s). */
_Static_assert(MLC_ANY_SOURCE == MLC_ANY_TAG, "one wildcard value for sources and tags");
typedef struct mlc_any_or {
    char s[12];
} mlc_any_or_t;
static inline mlc_any_or_t mlc_any_or(int value)
{
    mlc_any_or_t v;
    if (value == MLC_ANY_SOURCE) snprintf(v.s, sizeof v.s, "any");
    else snprintf(v.s, sizeof v.s, "%d", value);
    return v;
}

#endif
