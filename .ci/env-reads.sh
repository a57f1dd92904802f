#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The library reads and writes the environment only through the config table
# (src/base/config.c: mlc_env_text, mlc_env_int, mlc_env_size, mlc_env_seconds,
# mlc_env_export). Any other getenv/setenv/unsetenv/putenv/clearenv/environ
# under src/ is listed here and fails.
#
#   .ci/env-reads.sh [ROOT]   ROOT defaults to this repository; exit 1 on a hit
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
[ -d "$root/src" ] || { echo "env-reads: no src/ under $root" >&2; exit 2; }
hits=$(grep -rnE '\b(secure_getenv|getenv|setenv|unsetenv|putenv|clearenv)[[:space:]]*\(|\benviron\b' \
           --include='*.c' --include='*.h' "$root/src" | grep -vE '^[^:]*/src/base/config\.c:' || true)
if [ -n "$hits" ]; then
    echo "env-reads: the environment is read or written outside the config table (src/base/config.c);"
    echo "add a row to MLC_ENV_LIST (src/base/config.h) and use mlc_env_text/int/size/seconds/export:"
    echo "$hits"
    exit 1
fi
echo "env-reads: only the config table touches the environment"
