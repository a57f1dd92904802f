#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Usage: init_timeout.sh MPIEXEC TEST NP [MPIEXEC FLAGS...]
# Runs TEST (test_mpi_init_timeout.c) on NP ranks, the last of which never
# initializes MPI. Passes when each of the others printed "PASS" (the
# launcher's own status is ignored: it reports the rank that never
# initialized) and the job ended within 60 s.
mpiexec=$1
exe=$2
np=$3
shift 3
out=$(timeout -k 5 60 "$mpiexec" "$@" -np "$np" "$exe" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "FAIL: the job hung"
    exit 1
fi
case "$out" in *SKIP:*) exit 77 ;; esac
passed=$(printf '%s\n' "$out" | grep -c ": PASS:")
if [ "$passed" -ne $((np - 1)) ]; then
    echo "FAIL: $passed of $((np - 1)) ranks passed"
    exit 1
fi
echo "PASS"
