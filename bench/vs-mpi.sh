#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# mlcomm against raw MPI, side by side (method in docs/PERFORMANCE.md).
#
# Builds mlcomm (Release), a raw-MPI benchmark (bench/mpi-bench.c) with each
# MPI's compiler wrapper and a memcpy-bound probe, then for each rank count:
#   1. calibrates: one short run of every side over every size, to pick per
#      side and size an iteration count that keeps each size's timed loop near
#      --time-per-size seconds (each side its own count);
#   2. runs rounds: mlcomm-bench (shm backend), Open MPI, MPICH, memcpy probe,
#      in turn (A B C A B C ...), each round with new buffer contents;
#   3. prints per size the median times, the ratio peer time / mlcomm time
#      (median over rounds; > 1: mlcomm is faster), the issue's targets with
#      PASS/FAIL, and writes raw.csv, summary.csv and busbw plots (gnuplot).
#
#   bench/vs-mpi.sh --quick          a few sizes, 2 ranks, 2 rounds (a minute or two)
#   bench/vs-mpi.sh                  the full comparison (see --help for the defaults)
#   bench/vs-mpi.sh --overhead       mlcomm's mpi backend against the same MPI called
#                                    directly (the backend's overhead)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=$ROOT/bench
# shellcheck source=bench/common.sh
. "$BENCH_DIR/common.sh"

# ---- options -------------------------------------------------------------------
MODE=full
ROUNDS=""
RANKS=""
PEERS=""
COLLS=""
OV_SIZES="8 1K 64K 1M 4M 16M"
THREAD_LEVEL=multiple
OV_TIMEOUT=0
# Fixed glibc malloc thresholds for both sides of --overhead (see overhead_main).
OV_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=1073741824
MIN_BYTES=""
MAX_BYTES=""
FACTOR=""
TIME_PER_SIZE=""
MIN_ITERS=3
MAX_ITERS=""
WARMUP=2
BIND=core
MEMORY=host
BUILD_DIR=""
OUT_DIR=""
DO_BUILD=1
DO_PLOT=1
LAUNCH_TIMEOUT=900

usage() {
    cat <<EOF
usage: bench/vs-mpi.sh [options]

  --quick               sizes 8 B..8 MiB x16, 2 ranks, 2 rounds, 0.02 s per size
  --full                (default) sizes 8 B..128 MiB x4, 2, 4 and 8 ranks, 5 rounds, 0.1 s per size,
                        plus zero-byte allgather and reduce_scatter
  --overhead            mlcomm-bench with MLC_BACKEND=mpi against mpi-bench, both under the
                        same launcher, binding and MPI thread level; sizes --sizes, 2 ranks,
                        7 rounds (A B, B A, ...), 0.2 s per size, peer ompi; prints medians,
                        difference, ratio and the issue-4 targets (8 B: <= +0.2 us,
                        >= 1 MiB: <= 1.03x)
  --sizes "8 1K ..."    (--overhead) the sizes (default: $OV_SIZES)
  --thread-level L      (--overhead) MPI thread level of both sides: single, funneled,
                        serialized, multiple (default: $THREAD_LEVEL, mlcomm's default)
  --timeout S           (--overhead) mlcomm's MLC_TIMEOUT (default: $OV_TIMEOUT, no deadline: MPI's
                        blocking calls, the same calls mpi-bench makes; any other value, as
                        mlcomm's default of 600 s, makes every call nonblocking and polled)
  --tunables T|none     (--overhead) GLIBC_TUNABLES of both sides (default: $OV_TUNABLES)
  --rounds N            interleaved rounds (A B C, A B C, ...); medians over them
  --ranks "2 4"         rank counts (above the core count they are oversubscribed)
  --peers "ompi mpich"  which MPIs to compare with (ompi: mpicc/mpirun, mpich: mpicc.mpich/mpiexec.mpich;
                        default both, --overhead: ompi)
  --colls "..."         collectives (default: allreduce allgather reduce_scatter broadcast;
                        --overhead: those and alltoall)
  --min SIZE --max SIZE --factor F    the size sweep (K/M/G suffixes)
  --time-per-size S     seconds each size's timed loop aims at (iterations are
                        calibrated once, clamped to [$MIN_ITERS, 1048576]; --overhead: 200000)
  --min-iters N --max-iters N
  --memory host|shared  where the full mode's buffers live: host (default): posix_memalign on
                        every side; shared: mlcomm's from mlc_mem_alloc (peers read them in
                        place), the MPIs' from MPI_Alloc_mem, each library's own allocator
  --bind core|none      core: rank r on the (r mod ncpu)-th allowed cpu, the same
                        wrapper (bench/bind-rank.sh) for every side; none: no binding
                        anywhere (mpirun gets --bind-to none either way)
  --build-dir DIR       mlcomm build to use (default: build it in build-bench/)
  --no-build            use --build-dir as it is
  --out DIR             results (default: bench/out/, --overhead: bench/out/overhead/)
  --no-plot             skip gnuplot
EOF
}

while [ $# -gt 0 ]; do
    case $1 in
    --quick) MODE=quick ;;
    --full) MODE=full ;;
    --overhead) MODE=overhead ;;
    --sizes) OV_SIZES=$2; shift ;;
    --thread-level) THREAD_LEVEL=$2; shift ;;
    --tunables) OV_TUNABLES=$2; shift ;;
    --timeout) OV_TIMEOUT=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --ranks) RANKS=$2; shift ;;
    --peers) PEERS=$2; shift ;;
    --colls) COLLS=$2; shift ;;
    --min) MIN_BYTES=$2; shift ;;
    --max) MAX_BYTES=$2; shift ;;
    --factor) FACTOR=$2; shift ;;
    --time-per-size) TIME_PER_SIZE=$2; shift ;;
    --min-iters) MIN_ITERS=$2; shift ;;
    --max-iters) MAX_ITERS=$2; shift ;;
    --bind) BIND=$2; shift ;;
    --memory) MEMORY=$2; shift ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    --no-build) DO_BUILD=0 ;;
    --out) OUT_DIR=$2; shift ;;
    --no-plot) DO_PLOT=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "vs-mpi.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if [ "$MODE" = overhead ]; then
    : "${ROUNDS:=7}" "${RANKS:=2}" "${TIME_PER_SIZE:=0.2}" "${PEERS:=ompi}" "${MAX_ITERS:=200000}"
    : "${COLLS:=allreduce broadcast allgather reduce_scatter alltoall}"
    : "${MIN_BYTES:=8}" "${MAX_BYTES:=8}" "${FACTOR:=2}"
elif [ "$MODE" = quick ]; then
    : "${ROUNDS:=2}" "${RANKS:=2}" "${MIN_BYTES:=8}" "${MAX_BYTES:=8M}" "${FACTOR:=16}" "${TIME_PER_SIZE:=0.02}"
else
    : "${ROUNDS:=5}" "${RANKS:=2 4 8}" "${MIN_BYTES:=8}" "${MAX_BYTES:=128M}" "${FACTOR:=4}" "${TIME_PER_SIZE:=0.1}"
fi
: "${PEERS:=ompi mpich}" "${COLLS:=allreduce allgather reduce_scatter broadcast}" "${MAX_ITERS:=1048576}"
if [ -z "$OUT_DIR" ]; then
    if [ "$MODE" = overhead ]; then OUT_DIR=$BENCH_DIR/out/overhead; else OUT_DIR=$BENCH_DIR/out; fi
fi
case $BIND in core | none) ;; *) echo "vs-mpi.sh: --bind core|none, not '$BIND'" >&2; exit 2 ;; esac
case $MEMORY in host | shared) ;; *) echo "vs-mpi.sh: --memory host|shared, not '$MEMORY'" >&2; exit 2 ;; esac
case $THREAD_LEVEL in single | funneled | serialized | multiple) ;;
*) echo "vs-mpi.sh: --thread-level single|funneled|serialized|multiple, not '$THREAD_LEVEL'" >&2; exit 2 ;;
esac
for p in $PEERS; do
    case $p in ompi | mpich) ;; *) echo "vs-mpi.sh: unknown peer '$p' (ompi, mpich)" >&2; exit 2 ;; esac
done

MIN_B=$(bytes_of "$MIN_BYTES")
MAX_B=$(bytes_of "$MAX_BYTES")
SIZES=""
for ((s = MIN_B; s <= MAX_B; s *= FACTOR)); do
    SIZES="$SIZES $s"
    [ "$FACTOR" -gt 1 ] || break
done

log() { echo "[vs-mpi $(date +%H:%M:%S)] $*" >&2; }

# ---- --overhead: the mpi backend against the MPI it calls ----------------------------
# Side A: mlcomm-bench, MLC_BACKEND=mpi, under PEER's launcher (mlcomm built
# against PEER's MPI). Side B: mpi-bench built with PEER's mpicc. Both at
# MPI_THREAD_<--thread-level> (mlcomm: MLC_MPI_THREAD_LEVEL; mpi-bench: -t),
# both through bench/bind-rank.sh, the same sizes, warm-up and iteration
# counts, one process per side and size, the two back to back. Both time a
# size the same way: one call on fresh data, a barrier, N calls, the slowest
# rank's per-iteration average. Broadcast compares mlcomm's in-place column
# (MPI_Bcast has one buffer); the out-of-place one, whose root first copies
# sendbuf into recvbuf, is shown as broadcast_oop.
# Both sides get the same fixed malloc thresholds (--tunables): MPI allocates
# temporaries per call (Open MPI's reduce_scatter_block: one buffer of the
# whole input), and with glibc's dynamic thresholds whether such a buffer is
# returned to the kernel after every call depends on the program's earlier
# allocations: in mlcomm-bench it was (brk 3 times a call, page faults in the
# next call's single-copy receive: reduce_scatter at 1 MiB 2.3x slower),
# in mpi-bench it was not.
overhead_main() {
    local sizes_b="" s
    for s in $OV_SIZES; do sizes_b="$sizes_b $(bytes_of "$s")"; done
    mkdir -p "$OUT_DIR/bin" "$OUT_DIR/logs"
    OUT_DIR=$(cd "$OUT_DIR" && pwd)
    [ -n "$BUILD_DIR" ] || BUILD_DIR=$ROOT/build-bench
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    local wrap=()
    [ "$BIND" = core ] && wrap=("$BENCH_DIR/bind-rank.sh")
    declare -A bench_bin raw_bin
    local peers="" p mpicc_cmd launcher bdir cmake_mpi
    for p in $PEERS; do
        if [ "$p" = ompi ]; then mpicc_cmd=mpicc; launcher=mpirun; bdir=$BUILD_DIR; cmake_mpi=()
        else
            mpicc_cmd=mpicc.mpich; launcher=mpiexec.mpich; bdir=$BUILD_DIR-mpich
            cmake_mpi=(-DMPI_C_COMPILER=mpicc.mpich -DMPIEXEC_EXECUTABLE="$(command -v mpiexec.mpich || true)")
        fi
        if ! command -v "$mpicc_cmd" >/dev/null || ! command -v "$launcher" >/dev/null; then
            log "skipping $p: $mpicc_cmd or $launcher not found"
            continue
        fi
        if [ "$DO_BUILD" = 1 ]; then
            log "building mlcomm (Release) against $p in $bdir"
            cmake -S "$ROOT" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DMLC_BUILD_TESTS=OFF "${cmake_mpi[@]}" \
                >"$OUT_DIR/logs/cmake.$p.log"
            cmake --build "$bdir" -j2 --target mlcomm-bench mlcomm-mpi >>"$OUT_DIR/logs/cmake.$p.log"
        fi
        [ -x "$bdir/bin/mlcomm-bench" ] || { echo "vs-mpi.sh: $bdir/bin/mlcomm-bench is missing" >&2; exit 1; }
        "$mpicc_cmd" -O2 -Wall -Wextra -o "$OUT_DIR/bin/mpi-bench-$p" "$BENCH_DIR/mpi-bench.c"
        bench_bin[$p]=$bdir/bin/mlcomm-bench
        raw_bin[$p]=$OUT_DIR/bin/mpi-bench-$p
        peers="$peers $p"
    done
    [ -n "$peers" ] || { echo "vs-mpi.sh: no MPI to measure" >&2; exit 1; }

    # ov_launch PEER NP LOG PROGRAM ARGS...: under PEER's launcher, bound alike, MLC_BACKEND=mpi.
    ov_launch() {
        local peer=$1 np=$2 logf=$3
        shift 3
        local cmd
        if [ "$peer" = ompi ]; then
            cmd=(mpirun -np "$np" --bind-to none)
            [ "$np" -gt "$(nproc)" ] && cmd+=(--oversubscribe)
        else
            cmd=(mpiexec.mpich -n "$np" -bind-to none)
        fi
        cmd+=("${wrap[@]}" "$@")
        local tun=()
        [ "$OV_TUNABLES" = none ] || tun=(GLIBC_TUNABLES="$OV_TUNABLES")
        # MPI's own collective on both sides: with a deadline (--timeout) mlcomm
        # would take its own algorithms for large reduce and reduce_scatter.
        run_logged vs-mpi.sh "$logf" "${tun[@]}" MLC_BACKEND=mpi MLC_MPI_THREAD_LEVEL="$THREAD_LEVEL" \
            MLC_TIMEOUT="$OV_TIMEOUT" MLC_ALGO_REDUCE=native MLC_ALGO_REDUCE_SCATTER=native -- "${cmd[@]}"
    }
    # rows: np,round,side,coll,size,iters,time_us
    ov_mlcomm() { # PEER NP ROUND COLL SIZE ITERS
        local peer=$1 np=$2 round=$3 coll=$4 size=$5 iters=$6
        ov_launch "$peer" "$np" "$OUT_DIR/logs/mlcomm-$peer.$np.log" "${bench_bin[$peer]}" "$coll" \
            -b "$size" -e "$size" -f 2 -n "$iters" -w "$WARMUP" -c 0 |
            awk -v np="$np" -v r="$round" -v side="mlcomm-$peer" -v c="$coll" -v it="$iters" '
                !/^#/ && NF >= 11 {
                    if ($6 != "native") { print "vs-mpi.sh: mlcomm ran algorithm " $6 ", not native" > "/dev/stderr"; exit 1 }
                    if (c == "broadcast") {
                        printf "%s,%s,%s,broadcast,%s,%s,%s\n", np, r, side, $1, it, $11
                        printf "%s,%s,%s,broadcast_oop,%s,%s,%s\n", np, r, side, $1, it, $7
                    } else printf "%s,%s,%s,%s,%s,%s,%s\n", np, r, side, c, $1, it, $7
                }'
    }
    ov_raw() { # PEER NP ROUND COLL SEGMENTS...
        local peer=$1 np=$2 round=$3 coll=$4
        shift 4
        ov_launch "$peer" "$np" "$OUT_DIR/logs/$peer.$np.log" "${raw_bin[$peer]}" -c "$coll" -w "$WARMUP" \
            -t "$THREAD_LEVEL" -S "$((round * 7919 + np))" "$@" |
            awk -v np="$np" -v r="$round" -v side="$peer" '
                !/^#/ && NF >= 7 {
                    printf "%s,%s,%s,%s,%s,%s,%s\n", np, r, side, $1, $2, $4, $5
                    if ($1 == "broadcast") printf "%s,%s,%s,broadcast_oop,%s,%s,%s\n", np, r, side, $2, $4, $5
                }'
    }

    local raw=$OUT_DIR/overhead-raw.csv
    echo "np,round,side,coll,size,iters,time_us" >"$raw"
    rm -f "$OUT_DIR"/logs/*.log
    local start np coll round side it t args
    start=$(date +%s)
    log "overhead: peers [$peers ], ranks [$RANKS], colls [$COLLS], sizes [$sizes_b ], rounds $ROUNDS, thread level $THREAD_LEVEL, MLC_TIMEOUT $OV_TIMEOUT, $TIME_PER_SIZE s per size, bind $BIND"
    for p in $peers; do
        for np in $RANKS; do
            # Iteration counts from a short raw-MPI pass: per size the power of two
            # nearest below time-per-size / time, clamped; the same for both sides.
            declare -A iters_of=()
            for coll in $COLLS; do
                args=()
                for s in $sizes_b; do args+=("$s:$s:1:$([ "$s" -lt 1048576 ] && echo 64 || echo 4)"); done
                while IFS=, read -r _ _ _ _ s _ t; do
                    it=$(awk -v T="$TIME_PER_SIZE" -v t="$t" -v lo="$MIN_ITERS" -v hi="$MAX_ITERS" 'BEGIN {
                        n = t > 0 ? T / (t / 1e6) : hi; p2 = 1; while (p2 * 2 <= n) p2 *= 2
                        print (p2 < lo ? lo : (p2 > hi ? hi : p2)) }')
                    iters_of[$coll,$s]=$it
                done < <(ov_raw "$p" "$np" 0 "$coll" "${args[@]}" | grep -v ',broadcast_oop,')
                for s in $sizes_b; do
                    [ -n "${iters_of[$coll,$s]:-}" ] || { echo "vs-mpi.sh: calibrating $coll at $s bytes failed" >&2; exit 1; }
                done
                log "$p, $np ranks: $coll iterations: $(for s in $sizes_b; do printf '%s:%s ' "$s" "${iters_of[$coll,$s]}"; done)"
            done
            for ((round = 1; round <= ROUNDS; round++)); do
                log "$p, $np ranks: round $round/$ROUNDS"
                for coll in $COLLS; do
                    for s in $sizes_b; do
                        # One process per side and size, the two back to back:
                        # A B in odd rounds, B A in even ones.
                        for side in $([ $((round % 2)) = 1 ] && echo "mlcomm raw" || echo "raw mlcomm"); do
                            if [ "$side" = raw ]; then
                                ov_raw "$p" "$np" "$round" "$coll" "$s:$s:1:${iters_of[$coll,$s]}" >>"$raw"
                            else
                                ov_mlcomm "$p" "$np" "$round" "$coll" "$s" "${iters_of[$coll,$s]}" >>"$raw"
                            fi
                        done
                    done
                done
            done
        done
    done
    local elapsed=$(($(date +%s) - start))
    {
        echo "# mlcomm mpi backend vs raw MPI: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "# rounds $ROUNDS (A B, B A, ...), bind $BIND, thread level $THREAD_LEVEL, $TIME_PER_SIZE s per size, $elapsed s"
        echo "# mlcomm's MLC_TIMEOUT: $OV_TIMEOUT (0: no deadline, MPI's blocking calls; else nonblocking, polled)"
        echo "# GLIBC_TUNABLES (both sides): $OV_TUNABLES"
        echo "# mlcomm $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?') (Release)"
        for p in $peers; do
            echo "# $p: $(sed -n 's/^# mpi-bench: //p' "$OUT_DIR/logs/$p.${RANKS%% *}.log" | head -1)"
        done
        echo "# time: per-iteration average of N calls, slowest rank; columns: medians over rounds;"
        echo "# diff and ratio: mlcomm - MPI and mlcomm / MPI in each round, median over rounds; *_min: best round"
    } >"$OUT_DIR/overhead-header.txt"
    cat "$OUT_DIR/overhead-header.txt"
    awk -F, -v summary="$OUT_DIR/overhead-summary.csv" "$OVERHEAD_AWK" "$raw" | tee "$OUT_DIR/overhead-table.txt"
    log "raw: $raw  summary: $OUT_DIR/overhead-summary.csv  table: $OUT_DIR/overhead-table.txt  ($elapsed s)"
}

# The overhead table: per (peer, ranks, coll, size) the medians, the paired
# difference and ratio, and the issue-4 targets.
OVERHEAD_AWK='
function median(a, n,    i, j, x) {
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR == 1 { next }
{
    peer = $3; sub(/^mlcomm-/, "", peer); k = $1 SUBSEP peer SUBSEP $4 SUBSEP $5
    if (!(k in seen)) { seen[k] = 1; keys[++nk] = k; iters[k] = $6 }
    t[k, ($3 ~ /^mlcomm-/) ? "m" : "r", $2] = $7
    rounds[$2] = 1
}
END {
    printf "%-6s %3s  %-14s %10s %7s %11s %11s %10s %7s %11s %11s  %-11s %s\n", "peer", "np", "coll", "size",
           "iters", "mlcomm_us", "mpi_us", "diff_us", "ratio", "mlcomm_min", "mpi_min", "target", "result"
    print "peer,np,coll,size,iters,mlcomm_us,mpi_us,diff_us,ratio,mlcomm_min_us,mpi_min_us,rounds,target,result" > summary
    pass = fail = 0
    for (i = 1; i <= nk; i++) {
        k = keys[i]; split(k, f, SUBSEP)
        nm = nr = nd = 0; delete M; delete R; delete D; delete Q
        for (r in rounds) {
            if ((k, "m", r) in t) M[++nm] = t[k, "m", r]
            if ((k, "r", r) in t) R[++nr] = t[k, "r", r]
            if (((k, "m", r) in t) && ((k, "r", r) in t)) {
                nd++; D[nd] = t[k, "m", r] - t[k, "r", r]
                Q[nd] = t[k, "r", r] > 0 ? t[k, "m", r] / t[k, "r", r] : 0
            }
        }
        if (nd == 0) continue
        mm = median(M, nm); mr = median(R, nr); md = median(D, nd); mq = median(Q, nd)
        lm = M[1]; lr = R[1] # median() sorted them
        target = "-"; result = "-"
        if (f[3] != "broadcast_oop") {
            if (f[4] + 0 <= 8) { target = "<= +0.2 us"; result = md <= 0.2 ? "PASS" : "FAIL" }
            else if (f[4] + 0 >= 1048576) { target = "<= 1.03x"; result = mq <= 1.03 ? "PASS" : "FAIL" }
        }
        if (result == "PASS") pass++; else if (result == "FAIL") fail++
        printf "%-6s %3s  %-14s %10s %7s %11.3f %11.3f %+10.3f %7.3f %11.3f %11.3f  %-11s %s\n", f[2], f[1], f[3],
               f[4], iters[k], mm, mr, md, mq, lm, lr, target, result
        printf "%s,%s,%s,%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d,%s,%s\n", f[2], f[1], f[3], f[4], iters[k], mm, mr,
               md, mq, lm, lr, nd, target, result > summary
    }
    printf "targets: %d PASS, %d FAIL (broadcast_oop: information only)\n", pass, fail
}'

if [ "$MODE" = overhead ]; then
    overhead_main
    exit 0
fi

# ---- build -----------------------------------------------------------------------
mkdir -p "$OUT_DIR/bin" "$OUT_DIR/logs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
if [ -z "$BUILD_DIR" ]; then BUILD_DIR=$ROOT/build-bench; fi
if [ "$DO_BUILD" = 1 ]; then
    log "building mlcomm (Release) in $BUILD_DIR"
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMLC_BUILD_TESTS=OFF >"$OUT_DIR/logs/cmake.log"
    cmake --build "$BUILD_DIR" -j2 --target mlcomm-run mlcomm-bench >>"$OUT_DIR/logs/cmake.log"
fi
MLC_RUN=$BUILD_DIR/bin/mlcomm-run
MLC_BENCH=$BUILD_DIR/bin/mlcomm-bench
for f in "$MLC_RUN" "$MLC_BENCH"; do
    [ -x "$f" ] || { echo "vs-mpi.sh: $f is missing (build first or drop --no-build)" >&2; exit 1; }
done

CFLAGS_BENCH="-O2 -Wall -Wextra"
cc $CFLAGS_BENCH -o "$OUT_DIR/bin/memcpy-probe" "$BENCH_DIR/memcpy-probe.c" -lpthread
declare -A PEER_BIN PEER_NAME
AVAILABLE_PEERS=""
for p in $PEERS; do
    if [ "$p" = ompi ]; then mpicc_cmd=mpicc; launcher=mpirun; name="Open MPI"
    else mpicc_cmd=mpicc.mpich; launcher=mpiexec.mpich; name="MPICH"; fi
    if ! command -v "$mpicc_cmd" >/dev/null || ! command -v "$launcher" >/dev/null; then
        log "skipping $name: $mpicc_cmd or $launcher not found"
        continue
    fi
    "$mpicc_cmd" $CFLAGS_BENCH -o "$OUT_DIR/bin/mpi-bench-$p" "$BENCH_DIR/mpi-bench.c"
    PEER_BIN[$p]=$OUT_DIR/bin/mpi-bench-$p
    PEER_NAME[$p]=$name
    AVAILABLE_PEERS="$AVAILABLE_PEERS $p"
done
[ -n "$AVAILABLE_PEERS" ] || { echo "vs-mpi.sh: no MPI to compare with" >&2; exit 1; }

# ---- launching one side -----------------------------------------------------------
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WRAP=()
[ "$BIND" = core ] && WRAP=("$BENCH_DIR/bind-rank.sh")
NCPU=$(nproc)

# launch SIDE NP LOGFILE PROGRAM ARGS... : run PROGRAM as NP ranks under SIDE's launcher.
launch() {
    local side=$1 np=$2 logf=$3
    shift 3
    local cmd
    case $side in
    mlcomm) cmd=("$MLC_RUN" -n "$np" "${WRAP[@]}" "$@") ;;
    ompi)
        cmd=(mpirun -np "$np" --bind-to none)
        [ "$np" -gt "$NCPU" ] && cmd+=(--oversubscribe)
        cmd+=("${WRAP[@]}" "$@") ;;
    mpich) cmd=(mpiexec.mpich -n "$np" -bind-to none "${WRAP[@]}" "$@") ;;
    esac
    run_logged vs-mpi.sh "$logf" MLC_BACKEND=shm -- "${cmd[@]}"
}

# One CSV row per measured size: np,round,side,coll,size,iters,time_us,algbw,busbw,algo,p50_us,p99_us
# (time: the average; p50 and p99: every call timed alone, the slowest rank's,
# the same clock read per call on every side)
RAW=$OUT_DIR/raw.csv

# PERCENTILES=0 before run_mlcomm / run_peer: no call is timed alone (no p50/p99,
# "-" in their columns), so the average holds no clock reads. A size that
# rounds to zero elements per rank (8 B allgathered by 4 ranks) prints as 0 B:
# such rows are dropped, only run_zero's zero-byte rows are kept.
# run_mlcomm NP ROUND COLL ITERS MIN MAX  -> rows (one invocation of mlcomm-bench)
run_mlcomm() {
    local np=$1 round=$2 coll=$3 iters=$4 lo=$5 hi=$6
    launch mlcomm "$np" "$OUT_DIR/logs/mlcomm.$np.log" "$MLC_BENCH" "$coll" -b "$lo" -e "$hi" \
        -f "$FACTOR" -n "$iters" -w "$WARMUP" -c 0 -P "${PERCENTILES:-1}" -M "$MEMORY" |
        awk -v np="$np" -v r="$round" -v c="$coll" -v it="$iters" -v lo="$lo" '
            !/^#/ && NF >= 14 && ($1 > 0 || lo == 0) {
                # time/algbw/busbw and p50/p99 columns: out of place; broadcast
                # in place (MPI_Bcast has one buffer)
                t = c == "broadcast" ? 11 : 7; q = c == "broadcast" ? 17 : 15
                p50 = NF >= 18 ? $q : "-"; p99 = NF >= 18 ? $(q + 1) : "-"
                printf "%s,%s,mlcomm,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", np, r, c, $1, it, $t, $(t + 1), $(t + 2), $6, p50, p99
            }'
}

# run_peer PEER NP ROUND COLL SEGMENTS... -> rows (one invocation of mpi-bench)
run_peer() {
    local peer=$1 np=$2 round=$3 coll=$4 zero=0
    shift 4
    case "$1" in 0:*) zero=1 ;; esac
    launch "$peer" "$np" "$OUT_DIR/logs/$peer.$np.log" "${PEER_BIN[$peer]}" -c "$coll" \
        -w "$WARMUP" -S "$((round * 7919 + np))" $([ "${PERCENTILES:-1}" = 1 ] && echo -P) \
        $([ "$MEMORY" = shared ] && echo -A) "$@" |
        awk -v np="$np" -v r="$round" -v side="$peer" -v zero="$zero" '
            !/^#/ && NF >= 7 && ($2 > 0 || zero) {
                p50 = NF >= 9 ? $8 : "-"; p99 = NF >= 9 ? $9 : "-"
                printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,-,%s,%s\n", np, r, side, $1, $2, $4, $5, $6, $7, p50, p99
            }'
}

# run_memcpy NP ROUND -> rows (the bound for sizes of 512 KiB and up)
run_memcpy() {
    local np=$1 round=$2 big=()
    for s in $SIZES; do [ "$s" -ge 524288 ] && big+=("$s"); done
    [ ${#big[@]} -gt 0 ] || return 0
    "$OUT_DIR/bin/memcpy-probe" -p "$np" -n "$MIN_ITERS" -B 256M -S "$((round * 7919 + np))" --bind "$BIND" \
        "${big[@]}" | tee -a "$OUT_DIR/logs/memcpy.$np.log" |
        awk -v np="$np" -v r="$round" \
            '!/^#/ && NF >= 5 { printf "%s,%s,memcpy,memcpy,%s,%s,%s,%s,%s,-,-,-\n", np, r, $2, $3, $4, $5, $5 }'
}

# run_zero NP ROUND -> rows: zero-byte allgather and reduce_scatter on every
# side (full mode; 20000 calls: they should return without communicating).
# No call is timed alone here: one clock read costs about what such a call
# does, and would double the average it is judged by.
ZERO_COLLS="allgather reduce_scatter"
run_zero() {
    local np=$1 round=$2 coll p
    [ "$MODE" = full ] || return 0
    for coll in $ZERO_COLLS; do
        PERCENTILES=0 run_mlcomm "$np" "$round" "$coll" 20000 0 0
        for p in $AVAILABLE_PEERS; do PERCENTILES=0 run_peer "$p" "$np" "$round" "$coll" 0:0:1:20000; done
    done
}

# ---- calibration -> segments --------------------------------------------------------
# Calibration runs every size with a few iterations (more below 1 MiB, where
# one call is too short to time alone), split in two segments like this,
# after CAL_WARMUP calls per small size (one per large size). With 16 calls after one warm-up call it
# timed a process's start (first touches, a peer's connection setup): 0.3-4 us
# for an 8-byte call that takes 0.1 in a longer loop, so counts came out 10-40
# times short of --time-per-size and a timed loop lasted 2 ms, too short to be
# repeatable (2 ranks, 8-byte broadcast: 0.097-0.211 us over 5 rounds, against
# 0.095-0.116 timed for 0.1 s).
CAL_SMALL_ITERS=16
CAL_LARGE_ITERS=2
CAL_WARMUP=16
CAL_SEGS=()
small_hi="" large_lo=""
for s in $SIZES; do
    if [ "$s" -lt 1048576 ]; then small_hi=$s; elif [ -z "$large_lo" ]; then large_lo=$s; fi
done
[ -n "$small_hi" ] && CAL_SEGS+=("$MIN_B:$small_hi:$CAL_SMALL_ITERS")
[ -n "$large_lo" ] && CAL_SEGS+=("$large_lo:$MAX_B:$CAL_LARGE_ITERS")

# segments_for NP COLL CALFILE SIDE: "MIN:MAX:ITERS" groups of consecutive
# sizes that share one iteration count for SIDE: per size the power of two
# nearest below time-per-size / (SIDE's calibrated time), clamped. Each side
# gets its own count, so every side times a size for about the same time: a
# side whose calls are slow (MPICH oversubscribed, 0.1-8 ms per call) does not
# cut the others' loops to a handful of calls. Calibration runs twice; a
# side's time is the lower of its two, so that a burst of load during its few
# calibration calls does not shrink its counts.
segments_for() {
    local np=$1 coll=$2 cal=$3 side=$4
    awk -F, -v np="$np" -v coll="$coll" -v side="$side" -v T="$TIME_PER_SIZE" -v lo="$MIN_ITERS" \
        -v hi="$MAX_ITERS" -v sizes="$SIZES" '
        BEGIN { n = split(sizes, sz, " ") }
        $1 == np && $4 == coll && $3 == side {
            # a row is the size asked for, rounded down to whole elements per rank
            for (i = 1; i < n && sz[i] + 0 < $5 + 0; i++) {}
            t = $7 / 1e6
            if (!(i in best) || t < best[i]) best[i] = t
        }
        END {
            for (i = 1; i <= n; i++) {
                # a size with no row (zero elements per rank: dropped) runs
                # as many calls as the size before it (the first: the most)
                if (!(i in best)) { it = i > 1 ? cur : hi }
                else { t = best[i]; it = (t > 0) ? T / t : hi }
                p2 = 1; while (p2 * 2 <= it) p2 *= 2
                it = p2 < lo ? lo : p2 > hi ? hi : p2
                if (i > 1 && it == cur) { last = sz[i]; continue }
                if (i > 1) printf "%s:%s:%s\n", first, last, cur
                first = sz[i]; last = sz[i]; cur = it
            }
            printf "%s:%s:%s\n", first, last, cur
        }' "$cal"
}

echo "np,round,side,coll,size,iters,time_us,algbw_gbps,busbw_gbps,algo,p50_us,p99_us" >"$RAW"
rm -f "$OUT_DIR"/logs/*.log "$OUT_DIR"/plot.*
START=$(date +%s)
log "mode $MODE: ranks [$RANKS], rounds $ROUNDS, peers [$AVAILABLE_PEERS ], colls [$COLLS], sizes [$SIZES ], $TIME_PER_SIZE s per size, bind $BIND, memory $MEMORY"

for np in $RANKS; do
    cal=$OUT_DIR/calibration.$np.csv
    : >"$cal"
    log "$np ranks: calibrating iteration counts (two passes)"
    timed_warmup=$WARMUP
    for pass in 1 2; do
        for coll in $COLLS; do
            for seg in "${CAL_SEGS[@]}"; do
                IFS=: read -r lo hi it <<<"$seg"
                WARMUP=1
                [ "$hi" -lt 1048576 ] && WARMUP=$CAL_WARMUP
                run_mlcomm "$np" 0 "$coll" "$it" "$lo" "$hi" >>"$cal"
                for p in $AVAILABLE_PEERS; do
                    run_peer "$p" "$np" 0 "$coll" "$lo:$hi:$FACTOR:$it" >>"$cal"
                done
            done
        done
    done
    WARMUP=$timed_warmup
    declare -A SEGS=()
    for coll in $COLLS; do
        for side in mlcomm $AVAILABLE_PEERS; do
            SEGS[$side,$coll]=$(segments_for "$np" "$coll" "$cal" "$side" | tr '\n' ' ')
            log "$np ranks: $side $coll segments (min:max:iters): ${SEGS[$side,$coll]}"
        done
    done
    for ((round = 1; round <= ROUNDS; round++)); do
        log "$np ranks: round $round/$ROUNDS"
        for coll in $COLLS; do
            for seg in ${SEGS[mlcomm,$coll]}; do
                IFS=: read -r lo hi it <<<"$seg"
                run_mlcomm "$np" "$round" "$coll" "$it" "$lo" "$hi" >>"$RAW"
            done
        done
        for p in $AVAILABLE_PEERS; do
            for coll in $COLLS; do
                args=()
                for seg in ${SEGS[$p,$coll]}; do
                    IFS=: read -r lo hi it <<<"$seg"
                    args+=("$lo:$hi:$FACTOR:$it")
                done
                run_peer "$p" "$np" "$round" "$coll" "${args[@]}" >>"$RAW"
            done
        done
        run_zero "$np" "$round" >>"$RAW"
        run_memcpy "$np" "$round" >>"$RAW"
    done
done

# ---- summary, targets, plots ------------------------------------------------------------
ELAPSED=$(($(date +%s) - START))
{
    echo "# mlcomm vs MPI: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# mode $MODE, rounds $ROUNDS, bind $BIND, memory $MEMORY, $TIME_PER_SIZE s per size, $ELAPSED s"
    echo "# mlcomm $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?') (shm backend, Release build)"
    for p in $AVAILABLE_PEERS; do
        echo "# $p: $(sed -n 's/^# mpi-bench: \([^;]*\);.*/\1/p' "$OUT_DIR/logs/$p.${RANKS%% *}.log" | head -1)"
    done
} >"$OUT_DIR/header.txt"
cat "$OUT_DIR/header.txt"
awk -F, -v peers="$AVAILABLE_PEERS" -v summary="$OUT_DIR/summary.csv" -v plotdir="$OUT_DIR" \
    -f "$BENCH_DIR/summarize.awk" "$RAW" | tee "$OUT_DIR/table.txt"

if [ "$DO_PLOT" = 1 ]; then
    if command -v gnuplot >/dev/null; then
        for np in $RANKS; do
            "$BENCH_DIR/plot.sh" "$OUT_DIR" "$np" "$COLLS" "$AVAILABLE_PEERS" && log "plot: $OUT_DIR/vs-mpi-${np}ranks.svg"
        done
    else
        log "gnuplot not found: no plot"
    fi
fi
log "raw: $RAW  summary: $OUT_DIR/summary.csv  table: $OUT_DIR/table.txt  ($ELAPSED s)"
