#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# heat2d's exchange time per step against a hand-written MPI halo exchange of
# the same decomposition (bench/halo-mpi.c). Runs, in turn
# within each round (A B A B ...): halo-mpi, heat2d on the mpi backend with
# each MPI executor (mpirun -np N), heat2d on shm (mlcomm-run -n N). Prints
# the median exchange time per step (slowest rank) of each and its ratio to
# halo-mpi. The host is shared: medians, and rerun when the ratios matter.
#
#   bench/vs-halo.sh [build-dir]      env: PAIRS (7) RANKS (4) PPR (3) STEPS (1000) NX NY (256)
set -euo pipefail
build=${1:-build}
pairs=${PAIRS:-7} ranks=${RANKS:-4} ppr=${PPR:-3} steps=${STEPS:-1000} nx=${NX:-256} ny=${NY:-256}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
here=$(cd "$(dirname "$0")" && pwd)
halo=$build/bin/halo-mpi
[[ -x $halo && $halo -nt $here/halo-mpi.c ]] || mpicc -O2 -o "$halo" "$here/halo-mpi.c"
mpirun=(mpirun --oversubscribe -np "$ranks")
args=(--nx "$nx" --ny "$ny" --steps "$steps" --patches-per-rank "$ppr")
variants=(halo heat2d-mpi_pack heat2d-mpi_subarray heat2d-shm)
declare -A times sums
run() { # variant -> "exchange_us checksum"
    local out
    case $1 in
    halo) out=$("${mpirun[@]}" "$halo" "${args[@]}") ;;
    heat2d-shm) out=$(MLC_BACKEND=shm "$build/bin/mlcomm-run" -n "$ranks" "$build/bin/heat2d" "${args[@]}") ;;
    heat2d-*) out=$(MLC_BACKEND=mpi MLC_EXCHANGE_EXEC=${1#heat2d-} "${mpirun[@]}" "$build/bin/heat2d" "${args[@]}") ;;
    esac
    echo "$(sed -n 's/^exchange time per step: \([0-9.]*\) us/\1/p' <<<"$out") $(sed -n 's/^checksum //p' <<<"$out")"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for ((p = 0; p < pairs; p++)); do
    for v in "${variants[@]}"; do
        read -r t sum < <(run "$v")
        times[$v]+="$t "
        sums[$v]=$sum
    done
done
echo "heat2d ${ny}x${nx}, $steps steps, $ranks ranks x $ppr patches; $pairs rounds, medians (shared, noisy host)"
printf '%-22s %14s %10s  %s\n' variant "exchange us/step" "vs halo" checksum
ref=$(tr ' ' '\n' <<<"${times[halo]}" | grep . | median)
for v in "${variants[@]}"; do
    m=$(tr ' ' '\n' <<<"${times[$v]}" | grep . | median)
    printf '%-22s %14.2f %10.2f  %s   (runs: %s)\n' "$v" "$m" "$(awk -v a="$m" -v b="$ref" 'BEGIN{print a/b}')" \
        "${sums[$v]}" "${times[$v]}"
done
[[ $(printf '%s\n' "${sums[@]}" | sort -u | wc -l) == 1 ]] || { echo "checksums differ" >&2; exit 1; }
