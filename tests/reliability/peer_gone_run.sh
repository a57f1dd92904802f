#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Drives peer_gone under mlcomm-run (liveness from the launcher's job state):
# in every scenario rank 1 leaves (SIGKILL, or mlc_comm_free and exit 0) and
# ranks 0 and 2 must each print "rank R: ok" (MLC_ERR_PEER_LOST naming rank 1,
# well before MLC_TIMEOUT=30).
# usage: peer_gone_run.sh MLCOMM_RUN PEER_GONE
set -u
run=$1
prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bad=0
for scen in probe_kill iprobe_kill split_kill freed_exit freed_exit_coll freed_alive combine_kill \
    combine_freed group_kill shared_kill shared_kill_nocma shared_send_kill shared_send_kill_nocma split_send_kill; do
    echo "=== $scen"
    MLC_BACKEND=shm MLC_TIMEOUT=30 timeout 90 "$run" -n 3 "$prog" "$scen" >"$out" 2>&1
    rc=$?
    cat "$out"
    echo "mlcomm-run exit status: $rc"
    [ "$rc" -ne 124 ] || { echo "FAIL ($scen): the job was still running after 90 s"; bad=1; }
    for r in 0 2; do
        grep -q "^rank $r: ok" "$out" || { echo "FAIL ($scen): rank $r"; bad=1; }
    done
    if grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" "$out"; then
        echo "FAIL ($scen): sanitizer report"
        bad=1
    fi
done
[ "$bad" -eq 0 ] && echo PASS
exit "$bad"
