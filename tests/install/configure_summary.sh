#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `cmake` ends with a summary of what it found: configure this source tree
# without MPI (as on a machine that has none) and, when this build has the
# MPI module, with it; check what the summary says each time.
set -uo pipefail
src=$1 have_mpi=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # LOG REGEX...
    local log=$1
    shift
    for re in "$@"; do
        grep -Eq -- "$re" "$log" || { echo "configure summary lacks /$re/" >&2; fail=1; }
    done
}
cmake -S "$src" -B "$tmp/nompi" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >"$tmp/nompi.log" 2>&1 ||
    { cat "$tmp/nompi.log" >&2; exit 1; }
check "$tmp/nompi.log" "^-- mlcomm [0-9.]+ configured:$" "^--   backends +threads, shm: yes" \
    "^--   MPI +no: no MPI C compiler found \(apt-get install openmpi-bin libopenmpi-dev.*the mpi backend and its tests are not built" \
    "^--   GPU +.*no headers or libraries needed at build time" \
    "^--   tests +yes: rank tests on threads and shm with [0-9 ]+ ranks: ctest"
if [ "$have_mpi" = 1 ]; then
    cmake -S "$src" -B "$tmp/mpi" >"$tmp/mpi.log" 2>&1 || { cat "$tmp/mpi.log" >&2; exit 1; }
    check "$tmp/mpi.log" "^--   MPI +yes: (Open MPI|MPICH) [0-9.]+ \(MPI [0-9.]+\): libmlcomm-mpi.so with .*mpiexec" \
        "^--   tests +yes: rank tests on threads and shm with [0-9 ]+ ranks, mpi with [0-9 ]+ \(ctest -L mpi\)"
fi
[ "$fail" = 0 ] && echo "configure summary: ok"
exit "$fail"
