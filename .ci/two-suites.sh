#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# usage: .ci/two-suites.sh BUILD_A BUILD_B [CTEST ARGS...]
# Test isolation check (optional, not part of .ci/run): runs the test suites
# of two build directories at the same time, both started from a shell that
# carries the same job identity (MLC_JOB_ID, a Slurm job, torchrun's
# MASTER_ADDR/PORT), and fails unless both pass. Each test job must make its
# own job id (tests/isolate.cmake), so neither suite sees the other's jobs or
# /dev/shm names. CTEST ARGS default to: -LE large -j2
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD_A BUILD_B [CTEST ARGS...]" >&2; exit 2; }
a=$1 b=$2
shift 2
[ $# -gt 0 ] || set -- -LE large -j2
export MLC_JOB_ID=two-suites-shared SLURM_JOB_ID=4242 SLURM_STEP_ID=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29777
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log_a=$(mktemp) log_b=$(mktemp)
trap 'rm -f "$log_a" "$log_b"' EXIT
ctest --test-dir "$a" --output-on-failure "$@" >"$log_a" 2>&1 &
pid_a=$!
ctest --test-dir "$b" --output-on-failure "$@" >"$log_b" 2>&1 &
pid_b=$!
wait "$pid_a"; rc_a=$?
wait "$pid_b"; rc_b=$?
report() { # NAME DIR STATUS LOG
    echo "== suite $1 ($2): exit status $3"
    if [ "$3" -ne 0 ]; then cat "$4"; else grep -E "tests passed|Total Test time" "$4"; fi
}
report a "$a" "$rc_a" "$log_a"
report b "$b" "$rc_b" "$log_b"
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] && echo "PASS: both suites green side by side" && exit 0
echo "FAIL: a suite failed while the other ran"
exit 1
