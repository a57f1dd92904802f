/* SPDX-License-Identifier: BSD-3-Clause */
/* Fixture for .ci/env-reads.sh (never compiled): a read outside the config table. */
#include <stdlib.h>
const char *fixture_timeout(void) { return getenv("MLC_TIMEOUT"); }
