#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mlcomm-run names the rank that died first, never a survivor that exited
# because of it: TRIALS jobs of 4 ranks (shm), in each one rank (in turn
# 0..3) SIGKILLs itself mid-loop while its survivors exit 1 on PEER_LOST.
# usage: blame_test.sh MLCOMM_RUN BLAME_RANK [TRIALS] [MIB]
set -u
run=$1
prog=$2
trials=${3:-30}
mib=${4:-256}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bad=0
t=0
while [ "$t" -lt "$trials" ]; do
    victim=$((t % 4))
    MLC_BACKEND=shm MLC_TIMEOUT=60 timeout 120 "$run" -n 4 "$prog" "$victim" "$mib" >"$out" 2>&1
    rc=$?
    if [ "$rc" -ne 137 ] || ! grep -q "^mlcomm-run: job failed: rank $victim (pid [0-9]*) killed by signal 9" "$out"; then
        echo "trial $t: rank $victim was killed, mlcomm-run exited $rc and said:"
        cat "$out"
        bad=$((bad + 1))
    fi
    t=$((t + 1))
done
echo "$bad of $trials trials blamed the wrong rank"
[ "$bad" -eq 0 ] && echo PASS
[ "$bad" -eq 0 ]
