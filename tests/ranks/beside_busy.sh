#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# beside_busy.sh RANKS MLCOMM-RUN PROGRAM...: run PROGRAM on RANKS shm ranks
# beside one busy loop per cpu (other processes competing for the cores).
# The results must be right and the job must end well within its timeout.
# Where the ranks outnumber the cpus, a rank that waits must also have seen
# the competition and slept instead of yielding (the engine's debug line);
# elsewhere only the results are checked.
set -u
ranks=$1 run=$2
shift 2
cpus=$(nproc)
logs=$(mktemp -d "${TMPDIR:-/tmp}/mlc-beside-busy.XXXXXX")
loops=""
for i in $(seq "$cpus"); do
    sh -c 'while :; do :; done' &
    loops="$loops $!"
done
trap 'kill $loops 2>/dev/null; rm -rf "$logs"' EXIT
MLC_BACKEND=shm MLC_LOG_LEVEL=debug MLC_LOG_FILE="$logs/rank.%p" "$run" -n "$ranks" "$@"
rc=$?
[ $rc -eq 0 ] || { echo "beside_busy.sh: the job failed ($rc)"; cat "$logs"/rank.* | grep -v DEBUG | tail -20; exit 1; }
if [ "$ranks" -le "$cpus" ]; then
    echo "beside_busy.sh: $ranks ranks on $cpus cpus are not oversubscribed: results checked only"
    exit 0
fi
if ! grep -h "compete for the cores" "$logs"/rank.* | head -3 | grep .; then
    echo "beside_busy.sh: $ranks ranks on $cpus cpus beside $cpus busy loops: no rank saw the competition"
    exit 1
fi
