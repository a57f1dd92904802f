/* SPDX-License-Identifier: BSD-3-Clause */
/* Box arithmetic: intersection, subtraction, halos, printing. */
#include "box.h"
#include <inttypes.h>
#include <stdio.h>
#include "base/error.h"

/* Largest coordinate magnitude accepted: keeps start+shape and shifts far from overflow. */
#define MLC_BOX_COORD_MAX ((int64_t)1 << 60)

bool mlc_box_empty(const mlc_box_t *b)
{
    for (int d = 0; d < b->ndim; d++)
        if (b->shape[d] <= 0) return true;
    return false;
}

uint64_t mlc_box_volume(const mlc_box_t *b)
{
    if (mlc_box_empty(b)) return 0;
    uint64_t v = 1;
    for (int d = 0; d < b->ndim; d++) {
        uint64_t s = (uint64_t)b->shape[d];
        if (v > UINT64_MAX / s) return UINT64_MAX;
        v *= s;
    }
    return v;
}

bool mlc_box_contains(const mlc_box_t *outer, const mlc_box_t *inner)
{
    if (mlc_box_empty(inner)) return true;
    for (int d = 0; d < inner->ndim; d++) {
        if (inner->start[d] < outer->start[d]) return false;
        if (inner->start[d] + inner->shape[d] > outer->start[d] + outer->shape[d]) return false;
    }
    return true;
}

bool mlc_box_intersect(const mlc_box_t *a, const mlc_box_t *b, mlc_box_t *out)
{
    mlc_box_t r = {0};
    r.ndim = a->ndim;
    for (int d = 0; d < a->ndim; d++) {
        int64_t lo = a->start[d] > b->start[d] ? a->start[d] : b->start[d];
        int64_t ahi = a->start[d] + a->shape[d], bhi = b->start[d] + b->shape[d];
        int64_t hi = ahi < bhi ? ahi : bhi;
        if (hi <= lo) return false;
        r.start[d] = lo;
        r.shape[d] = hi - lo;
    }
    *out = r;
    return true;
}

mlc_box_t mlc_box_shift(const mlc_box_t *b, const int64_t *shift)
{
    mlc_box_t r = *b;
    for (int d = 0; d < b->ndim; d++) r.start[d] += shift[d];
    return r;
}

int mlc_box_subtract(const mlc_box_t *a, const mlc_box_t *b, mlc_box_t *out)
{
    mlc_box_t cut;
    if (mlc_box_empty(a)) return 0;
    if (!mlc_box_intersect(a, b, &cut)) {
        out[0] = *a;
        return 1;
    }
    /* Peel the parts of `rest` below and above `cut` axis by axis, then clip
     * `rest` to cut on that axis: the pieces are disjoint and cover a \ b. */
    mlc_box_t rest = *a;
    int n = 0;
    for (int d = 0; d < a->ndim; d++) {
        int64_t lo = rest.start[d], hi = rest.start[d] + rest.shape[d];
        int64_t clo = cut.start[d], chi = cut.start[d] + cut.shape[d];
        if (clo > lo) {
            out[n] = rest;
            out[n].shape[d] = clo - lo;
            n++;
        }
        if (chi < hi) {
            out[n] = rest;
            out[n].start[d] = chi;
            out[n].shape[d] = hi - chi;
            n++;
        }
        rest.start[d] = clo;
        rest.shape[d] = chi - clo;
    }
    return n;
}

const char *mlc_box_str(const mlc_box_t *b, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0) return buf;
    buf[0] = '\0';
    if (b->ndim <= 0 || b->ndim > MLC_EXCHANGE_MAX_DIMS) {
        snprintf(buf, len, "<box with ndim %d>", b->ndim);
        return buf;
    }
    for (int d = 0; d < b->ndim && used < len; d++) {
        int w = snprintf(buf + used, len - used, "%s[%" PRId64 ",%" PRId64 ")", d ? "x" : "",
                         b->start[d], b->start[d] + b->shape[d]);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

mlc_status_t mlc_box_check(const mlc_box_t *b, int ndim, const char *what)
{
    if (b->ndim != ndim)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s has ndim %d, the exchange has %d", what, b->ndim,
                         ndim);
    for (int d = 0; d < ndim; d++) {
        if (b->shape[d] < 0)
            return mlc_error(MLC_ERR_INVALID_ARG, "%s has shape[%d] = %" PRId64 " < 0", what, d,
                             b->shape[d]);
        if (b->start[d] < -MLC_BOX_COORD_MAX || b->start[d] > MLC_BOX_COORD_MAX ||
            b->shape[d] > MLC_BOX_COORD_MAX)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "%s axis %d: start %" PRId64 " shape %" PRId64 " beyond +-2^60", what,
                             d, b->start[d], b->shape[d]);
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_box_halo(const mlc_box_t *valid, const int *width, mlc_box_t *out, int *n)
{
    mlc_error_clear();
    if (!valid || !width || !out || !n)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_box_halo: NULL %s",
                         !valid ? "valid" : !width ? "width" : !out ? "out" : "n");
    if (valid->ndim < 1 || valid->ndim > MLC_EXCHANGE_MAX_DIMS)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_box_halo: valid.ndim %d not in 1..%d",
                         valid->ndim, MLC_EXCHANGE_MAX_DIMS);
    mlc_status_t st = mlc_box_check(valid, valid->ndim, "mlc_box_halo: valid");
    if (st) return st;
    mlc_box_t grown = *valid;
    for (int d = 0; d < valid->ndim; d++) {
        if (width[d] < 0)
            return mlc_error(MLC_ERR_INVALID_ARG, "mlc_box_halo: width[%d] = %d < 0", d, width[d]);
        grown.start[d] -= width[d];
        grown.shape[d] += 2 * (int64_t)width[d];
    }
    if (mlc_box_empty(valid)) {
        /* Nothing to surround: the halo of an empty box is empty. */
        *n = 0;
        return MLC_SUCCESS;
    }
    *n = mlc_box_subtract(&grown, valid, out);
    return MLC_SUCCESS;
}
