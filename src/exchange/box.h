/* SPDX-License-Identifier: BSD-3-Clause */
/* Box arithmetic on the global index space (pure: no communication). */
#ifndef MLC_EXCHANGE_BOX_H
#define MLC_EXCHANGE_BOX_H
#include <stdbool.h>
#include <stddef.h>
#include "mlcomm_exchange.h"

/* Room for "[s,e)x" per axis, in a fixed buffer for error messages. */
#define MLC_BOX_STR_LEN (MLC_EXCHANGE_MAX_DIMS * 44 + 8)

/* Number of cells (0 for an empty box). Saturates at UINT64_MAX. */
uint64_t mlc_box_volume(const mlc_box_t *b);
bool mlc_box_empty(const mlc_box_t *b);
/* Is `inner` inside `outer` (an empty inner box always is)? Same ndim assumed. */
bool mlc_box_contains(const mlc_box_t *outer, const mlc_box_t *inner);
/* out = a ∩ b; returns false (out untouched) when it is empty. */
bool mlc_box_intersect(const mlc_box_t *a, const mlc_box_t *b, mlc_box_t *out);
/* b shifted by +shift[d] on each axis. */
mlc_box_t mlc_box_shift(const mlc_box_t *b, const int64_t *shift);
/* a \ b as at most 2*ndim disjoint boxes written to out; returns how many. */
int mlc_box_subtract(const mlc_box_t *a, const mlc_box_t *b, mlc_box_t *out);
/* "[0,8)x[4,12)" into buf (always terminated); returns buf. */
const char *mlc_box_str(const mlc_box_t *b, char *buf, size_t len);
/* Check ndim, non-negative shapes and that start+shape does not overflow. */
mlc_status_t mlc_box_check(const mlc_box_t *b, int ndim, const char *what);

/* Floor division for possibly negative numerators (den > 0). */
static inline int64_t mlc_floor_div(int64_t num, int64_t den)
{
    int64_t q = num / den;
    return (num % den != 0 && num < 0) ? q - 1 : q;
}
#endif
