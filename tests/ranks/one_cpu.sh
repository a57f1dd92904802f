#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# one_cpu.sh shm|threads RANKS MLCOMM-RUN PROGRAM...: run PROGRAM on RANKS
# ranks that may all run on one cpu only (taskset to the first cpu this job
# may use), as a cpuset or taskset confines a job on a host with more cpus.
# The results must be right, and the engine must have counted one cpu for
# the ranks (its info line), so that a waiting rank yields that cpu to the
# peer it waits for instead of spinning through its time slice.
set -u
mode=$1 ranks=$2 run=$3
shift 3
command -v taskset >/dev/null || { echo "SKIP: no taskset (util-linux)"; exit 77; }
[ "$(nproc)" -gt 1 ] || { echo "SKIP: one cpu only: ranks outnumber the cpus without taskset"; exit 77; }
cpu=$(taskset -cp $$ | sed 's/.*: *//; s/[,-].*//')
logs=$(mktemp -d "${TMPDIR:-/tmp}/mlc-one-cpu.XXXXXX")
trap 'rm -rf "$logs"' EXIT
if [ "$mode" = threads ]; then
    MLC_LOG_LEVEL=info MLC_LOG_FILE="$logs/rank.%p" taskset -c "$cpu" "$@" --threads "$ranks"
else
    MLC_BACKEND=shm MLC_LOG_LEVEL=info MLC_LOG_FILE="$logs/rank.%p" taskset -c "$cpu" "$run" -n "$ranks" --timeout 120 "$@"
fi
rc=$?
[ $rc -eq 0 ] || { echo "one_cpu.sh: the job failed ($rc)"; cat "$logs"/rank.* | tail -20; exit 1; }
if ! grep -h "engine: rank 0: $ranks ranks are confined to its 1 cpu; .*(the cpus they are allowed): waiting, it yields" \
        "$logs"/rank.* | head -1 | grep .; then
    echo "one_cpu.sh: $ranks $mode ranks confined to cpu $cpu: the engine did not count one cpu for them"
    grep -h "engine:" "$logs"/rank.* | head -3
    exit 1
fi
