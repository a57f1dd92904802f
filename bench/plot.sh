#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Busbw against size, one panel per collective, from summarize.awk's
# plot.<np>.<coll>.dat files: plot.sh OUT_DIR NP "COLLS" "PEERS"
set -euo pipefail
out=$1 np=$2 colls=($3) peers=($4)
declare -A title=([ompi]="Open MPI" [mpich]="MPICH")
n=${#colls[@]}
rows=$(((n + 1) / 2))
{
    echo "set terminal svg size 1100,$((rows * 380)) dynamic font 'sans,11'"
    echo "set output '$out/vs-mpi-${np}ranks.svg'"
    echo "set multiplot layout $rows,2 title 'mlcomm (shm) vs MPI, $np ranks: busbw, median of rounds (higher is better)' noenhanced"
    echo "set logscale x 2"
    echo "set logscale y 10"
    echo "set format y '%g'"
    echo "set format x '%.0b%B'"
    echo "set xlabel 'size (bytes)'"
    echo "set ylabel 'busbw (GB/s)'"
    echo "set key top left"
    echo "set grid"
    echo "set datafile missing 'NaN'"
    for coll in "${colls[@]}"; do
        dat=$out/plot.$np.$coll.dat
        echo "set title '$coll' noenhanced"
        cmd="plot '$dat' using 1:2 with linespoints lw 2 title 'mlcomm'"
        col=3
        for p in "${peers[@]}"; do
            cmd="$cmd, '' using 1:$col with linespoints title '${title[$p]:-$p}'"
            col=$((col + 1))
        done
        # the memcpy bound, where it was measured (sizes of 512 KiB and up)
        if [ "$coll" = allreduce ] && awk -v c="$col" '!/^#/ && $c != "NaN" { f = 1 } END { exit !f }' "$dat"; then
            cmd="$cmd, '' using 1:$col with lines dt 2 lc rgb 'gray40' title 'memcpy bound'"
        fi
        echo "$cmd"
    done
    echo "unset multiplot"
} >"$out/plot.$np.gp"
gnuplot "$out/plot.$np.gp"
