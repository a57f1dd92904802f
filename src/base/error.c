/* SPDX-License-Identifier: BSD-3-Clause */
/* The calling thread's last-error message (mlc_last_error) and mlc_error(). */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

#define MLC_ERRMSG_BYTES 1024

static _Thread_local char mlc_errmsg[MLC_ERRMSG_BYTES];

mlc_status_t mlc_error(mlc_status_t st, const char *fmt, ...)
{
    /* Format into a local buffer first: the arguments may include the
     * thread's current message (mlc_last_error()), which we overwrite. */
    char text[MLC_ERRMSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    memcpy(mlc_errmsg, text, sizeof text);
    MLC_DEBUG("%s: %s", mlc_status_name(st), mlc_errmsg);
    return st;
}

void mlc_error_set_text(const char *text)
{
    if (text == mlc_errmsg) return;
    if (text == NULL) text = "";
    size_t n = strnlen(text, MLC_ERRMSG_BYTES - 1);
    memmove(mlc_errmsg, text, n);
    mlc_errmsg[n] = '\0';
}

mlc_status_t mlc_error_in(const char *fn, mlc_status_t st)
{
    size_t n = strlen(fn);
    if (st == MLC_SUCCESS || (strncmp(mlc_errmsg, fn, n) == 0 && mlc_errmsg[n] == ':')) return st;
    return mlc_error(st, "%s: %s", fn, mlc_errmsg);
}

void mlc_error_clear(void) { mlc_errmsg[0] = '\0'; }

const char *mlc_last_error(void) { return mlc_errmsg; }
