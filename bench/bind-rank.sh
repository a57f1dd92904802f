#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Bind this rank to one cpu, then run the program. Rank r gets the
# (r mod n)-th of the n cpus this process may use: the same rule for every
# launcher, so mlcomm-run's ranks and mpirun's / mpiexec's ranks sit on
# cores the same way.
#   bind-rank.sh PROGRAM [ARGS...]
rank=${MLC_RANK:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}}
if [ -z "$rank" ]; then
    echo "bind-rank.sh: no rank in the environment (MLC_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK)" >&2
    exit 2
fi
# Cpus_allowed_list looks like "0-3,6": expand it to one cpu per word.
allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
cpus=""
for part in $(echo "$allowed" | tr ',' ' '); do
    lo=${part%-*}
    hi=${part#*-}
    while [ "$lo" -le "$hi" ]; do
        cpus="$cpus $lo"
        lo=$((lo + 1))
    done
done
set -- $cpus -- "$@"
n=0
for c in $cpus; do n=$((n + 1)); done
shift $((rank % n))
cpu=$1
while [ "$1" != "--" ]; do shift; done
shift
exec taskset -c "$cpu" "$@"
