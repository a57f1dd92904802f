#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A wider differential sweep than ctest's: sequences x rank counts x
# (MPI's own collectives, every collective forced to one of mlcomm's
# algorithms) x backends, one line per run; the logs stay in OUT.
#   tests/diff/sweep.sh [-s "11 12"] [-n "2 3 4"] [-b "threads shm openmpi mpich"] [-o OUT]
# Run from the source tree after building build/ (and build-mpich/ for mpich).
set -u
seqs="11 12 13 14 15 16" ranks="2 3 4" backends="threads shm openmpi mpich" out=/tmp/mlc-diff-sweep
while getopts "s:n:b:o:h" o; do
    case $o in
    s) seqs=$OPTARG ;; n) ranks=$OPTARG ;; b) backends=$OPTARG ;; o) out=$OPTARG ;;
    *) sed -n '3,7p' "$0"; exit 2 ;;
    esac
done
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DIFF_HANG=30
forced="MLC_ALGO_ALLREDUCE=ring MLC_ALGO_BROADCAST=binomial MLC_ALGO_ALLGATHER=ring MLC_ALGO_REDUCE_SCATTER=ring
MLC_ALGO_ALLTOALLV=pairwise MLC_ALGO_REDUCE=binomial MLC_ALGO_GATHER=binomial MLC_ALGO_SCATTER=binomial
MLC_ALGO_ALLTOALL=bruck"
pass=0 fail=0
for seq in $seqs; do
    for n in $ranks; do
        for algos in native forced; do
            aenv=""
            [ $algos = forced ] && aenv=$(echo $forced)
            for be in $backends; do
                case $be in
                threads) cmd="build/bin/test_diff --threads $n" ;;
                shm) cmd="env MLC_BACKEND=shm build/bin/mlcomm-run -n $n --timeout 120 build/bin/test_diff" ;;
                openmpi) cmd="env MLC_BACKEND=mpi mpirun.openmpi --oversubscribe -np $n build/bin/test_diff" ;;
                mpich) cmd="env MLC_BACKEND=mpi mpiexec.mpich -np $n build-mpich/bin/test_diff" ;;
                *) echo "unknown backend $be" >&2; exit 2 ;;
                esac
                log=$out/$seq.$n.$algos.$be.log
                if env $aenv DIFF_SEQUENCE=$seq timeout 150 $cmd >"$log" 2>&1; then
                    r=pass; pass=$((pass + 1))
                else
                    r="FAIL ($log)"; fail=$((fail + 1))
                fi
                echo "sequence $seq, $n ranks, $algos algorithms, $be: $r"
            done
        done
    done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
