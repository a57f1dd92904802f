/* SPDX-License-Identifier: BSD-3-Clause */
/* Strict parsers for numbers from the environment and tools. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "config.h"

/* strtoll/strtod accept leading blanks; a strict parser does not. */
static bool mlc_starts_like_number(const char *s)
{
    return s != NULL && (isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '+' || s[0] == '.');
}

bool mlc_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (!mlc_starts_like_number(s)) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool mlc_parse_double(const char *s, double lo, double hi, double *out)
{
    if (!mlc_starts_like_number(s)) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

bool mlc_parse_size(const char *s, size_t *out)
{
    if (s == NULL || !isdigit((unsigned char)s[0])) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s) return false;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return false;
    }
    if (*end != '\0') return false;
    if (v > (SIZE_MAX >> shift)) return false;
    *out = (size_t)v << shift;
    return true;
}
