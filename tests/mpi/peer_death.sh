#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Usage: peer_death.sh MPIEXEC TEST [MPIEXEC FLAGS...]
# Runs TEST on 3 ranks; rank 1 dies while rank 0 waits on it. Passes when the
# launcher ends the job with a failure status, and fails when the job hangs
# (90 s) or reports success.
mpiexec=$1
exe=$2
shift 2
out=$(timeout 90 "$mpiexec" "$@" -np 3 "$exe" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 124 ]; then
    echo "FAIL: the job hung after a rank died"
    exit 1
fi
if [ "$rc" -eq 0 ]; then
    echo "FAIL: the job reported success after a rank died"
    exit 1
fi
if ! printf '%s\n' "$out" | grep -q "rank 0 waiting"; then
    echo "FAIL: rank 0 never reached its wait"
    exit 1
fi
echo "PASS: the launcher ended the job (exit status $rc)"
