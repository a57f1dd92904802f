#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Drives kill_rank under mlcomm-run: rank 1 SIGKILLs itself mid-allreduce.
# Passes when ranks 0 and 2 report MLC_ERR_PEER_LOST (sticky, prompt, never
# TIMEOUT), mlcomm-run exits non-zero, and /dev/shm holds nothing of the job.
# Run with the selector's choice and with a schedule-based algorithm (ring),
# whose in-flight point-to-point operations take another path; then with
# 32 MiB in-place broadcasts instead, rank 1 their root and then a reader.
# usage: kill_test.sh MLCOMM_RUN KILL_RANK
set -u
run=$1
prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() {
    echo "FAIL ($algo): $*"
    exit 1
}

for algo in auto ring broadcast-1 broadcast-0; do
    case $algo in
    broadcast-*) args="broadcast ${algo#broadcast-}" allreduce=auto ;;
    *) args="" allreduce=$algo ;;
    esac
    echo "=== MLC_ALGO_ALLREDUCE=$allreduce $args"
    # shellcheck disable=SC2086 # $args is zero or two words
    MLC_ALGO_ALLREDUCE=$allreduce MLC_BACKEND=shm MLC_TIMEOUT=120 timeout 150 "$run" -n 3 "$prog" $args >"$out" 2>&1
    rc=$?
    cat "$out"
    echo "mlcomm-run exit status: $rc"

    [ "$rc" -ne 124 ] || fail "the job was still running after 150 s"
    [ "$rc" -ne 0 ] || fail "mlcomm-run exited 0 although rank 1 was killed"
    for r in 0 2; do
        grep -q "^rank $r: MLC_ERR_PEER_LOST after" "$out" || fail "rank $r did not report MLC_ERR_PEER_LOST"
    done
    if grep -q "MLC_ERR_TIMEOUT" "$out"; then fail "a rank reported MLC_ERR_TIMEOUT"; fi
    if grep -q "NOT STICKY\|TOO SLOW\|WRONG RESULT\|IN /dev/shm DURING\|completed all iterations" "$out"; then
        fail "see the rank output above"
    fi
    # The peers exit 1 anyway, so a sanitizer report would not show in their status.
    if grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" "$out"; then
        fail "sanitizer report in the rank output"
    fi
    jobid=$(sed -n 's/^jobid=//p' "$out" | head -n 1)
    [ -n "$jobid" ] || fail "rank 0 printed no job id (MLC_JOB_ID unset under mlcomm-run?)"
    for f in /dev/shm/mlc-"$jobid"-*; do
        [ -e "$f" ] && fail "left in /dev/shm: $f"
    done
    echo "ok: peers got MLC_ERR_PEER_LOST, launcher exited $rc, /dev/shm clean for job $jobid"
done
echo PASS
