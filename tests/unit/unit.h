/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests (no ranks) use the checks of tests/check.h with its default
 * policy: a failed check prints where and why and counts; the test keeps
 * going so one run shows every failure. main() returns unit_result().
 */
#ifndef MLC_UNIT_H
#define MLC_UNIT_H
#include "check.h"

static inline int unit_result(const char *name)
{
    return check_result(name);
}
#endif
