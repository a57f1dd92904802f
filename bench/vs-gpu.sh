#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# mlcomm on device buffers, two comparisons side by side in one run
# (method as bench/vs-mpi.sh; docs/GPU.md "Benchmarking on a GPU"):
#
#   nccl: mlcomm-bench --memory device with MLC_BACKEND=nccl against raw NCCL
#         (bench/nccl-bench.c), same ranks, sizes, iterations and warm-up;
#         target: mlcomm time / NCCL time <= 1.02 at every size >= 1 MiB;
#   shm:  mlcomm-bench --memory device on shm with CUDA IPC (MLC_CUDA_IPC=1)
#         against the same staged through pinned host memory (MLC_CUDA_IPC=0);
#         information only: both times and the ratio IPC / staged.
#
# Each round runs every pair back to back, A B in odd rounds and B A in even
# ones, one process per side and size segment; medians over rounds; ratios
# are taken within a round, then the median. Results: bench/out/gpu/
# (raw.csv, summary.csv, table.txt).
#
#   bench/vs-gpu.sh --quick     a few sizes, 3 rounds
#   bench/vs-gpu.sh             the full sweep
#   bench/vs-gpu.sh --fake      on the test doubles of tests/gpu (no GPU needed):
#                               proves the plumbing; its timings mean nothing
# Without a GPU (and without --fake) it prints SKIP and the reason, exit 0.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=$ROOT/bench
# shellcheck source=bench/common.sh
. "$BENCH_DIR/common.sh"

# ---- options ------------------------------------------------------------------------
MODE=full
FAKE=0
ROUNDS=""
NCCL_RANKS=""
SHM_RANKS=""
COMPARE="nccl shm"
COLLS=""
MIN_BYTES=""
MAX_BYTES=""
FACTOR=""
ITERS_SMALL=""
ITERS_LARGE=""
WARMUP=5
NCCL_SYNC=each
BUILD_DIR=""
OUT_DIR=""
DO_BUILD=1
LAUNCH_TIMEOUT=900
TARGET_RATIO=1.02
TARGET_MIN_BYTES=1048576

usage() {
    cat <<EOF
usage: bench/vs-gpu.sh [options]

  --quick               sizes 64 KiB..16 MiB x4, 3 rounds, 20/50 iterations
  --full                (default) sizes 8 B..256 MiB x4, 5 rounds, 100/200 iterations
  --fake                run on the test doubles (tests/gpu: fake CUDA runtime and NCCL)
                        built in --build-dir: proves the plumbing, timings mean nothing;
                        the fake NCCL runs one rank only
  --compare "nccl shm"  which comparisons (default both)
  --rounds N            interleaved rounds (A B, B A, ...); medians over them
  --ranks N             ranks of the nccl comparison (default: the GPU count; one GPU per rank)
  --shm-ranks N         ranks of the shm comparison (default 2; they may share a GPU)
  --colls "..."         collectives (default: allreduce allgather reduce_scatter broadcast alltoall)
  --min SIZE --max SIZE --factor F    the size sweep (K/M/G suffixes)
  --iters-small N       timed iterations per size below 1 MiB
  --iters-large N       timed iterations per size of 1 MiB and up
  --warmup N            warm-up iterations at a segment's largest and smallest size (default $WARMUP)
  --nccl-sync each|batch   raw NCCL waits after every call (default: nccl-bench -y, the
                        same work as a blocking mlcomm call, which completes on the GPU)
                        or once per batch of iterations (an application that never waits)
  --build-dir DIR       mlcomm build to use (default: build it in build-bench/, with the
                        test doubles when --fake)
  --no-build            use --build-dir as it is
  --out DIR             results (default: bench/out/gpu/)
EOF
}

while [ $# -gt 0 ]; do
    case $1 in
    --quick) MODE=quick ;;
    --full) MODE=full ;;
    --fake) FAKE=1 ;;
    --compare) COMPARE=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --ranks) NCCL_RANKS=$2; shift ;;
    --shm-ranks) SHM_RANKS=$2; shift ;;
    --colls) COLLS=$2; shift ;;
    --min) MIN_BYTES=$2; shift ;;
    --max) MAX_BYTES=$2; shift ;;
    --factor) FACTOR=$2; shift ;;
    --iters-small) ITERS_SMALL=$2; shift ;;
    --iters-large) ITERS_LARGE=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --nccl-sync) NCCL_SYNC=$2; shift ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    --no-build) DO_BUILD=0 ;;
    --out) OUT_DIR=$2; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "vs-gpu.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if [ "$MODE" = quick ]; then
    : "${ROUNDS:=3}" "${MIN_BYTES:=64K}" "${MAX_BYTES:=16M}" "${FACTOR:=4}" "${ITERS_SMALL:=50}" "${ITERS_LARGE:=20}"
else
    : "${ROUNDS:=5}" "${MIN_BYTES:=8}" "${MAX_BYTES:=256M}" "${FACTOR:=4}" "${ITERS_SMALL:=200}" "${ITERS_LARGE:=100}"
fi
: "${COLLS:=allreduce allgather reduce_scatter broadcast alltoall}" "${SHM_RANKS:=2}"
: "${OUT_DIR:=$BENCH_DIR/out/gpu}"
case $NCCL_SYNC in batch | each) ;; *) echo "vs-gpu.sh: --nccl-sync batch|each, not '$NCCL_SYNC'" >&2; exit 2 ;; esac
for c in $COMPARE; do
    case $c in nccl | shm) ;; *) echo "vs-gpu.sh: unknown comparison '$c' (nccl, shm)" >&2; exit 2 ;; esac
done
for c in $COLLS; do
    case $c in allreduce | allgather | reduce_scatter | broadcast | alltoall) ;;
    *) echo "vs-gpu.sh: unknown collective '$c'" >&2; exit 2 ;;
    esac
done

MIN_B=$(bytes_of "$MIN_BYTES")
MAX_B=$(bytes_of "$MAX_BYTES")
# Two segments: below 1 MiB with ITERS_SMALL, from 1 MiB with ITERS_LARGE.
SEGS=()
small_lo="" small_hi="" large_lo="" large_hi=""
for ((s = MIN_B; s <= MAX_B; s *= FACTOR)); do
    if [ "$s" -lt 1048576 ]; then : "${small_lo:=$s}"; small_hi=$s; else : "${large_lo:=$s}"; large_hi=$s; fi
    [ "$FACTOR" -gt 1 ] || break
done
[ -n "$small_lo" ] && SEGS+=("$small_lo:$small_hi:$ITERS_SMALL")
[ -n "$large_lo" ] && SEGS+=("$large_lo:$large_hi:$ITERS_LARGE")
[ ${#SEGS[@]} -gt 0 ] || { echo "vs-gpu.sh: no sizes between --min and --max" >&2; exit 2; }

log() { echo "[vs-gpu $(date +%H:%M:%S)] $*" >&2; }

mkdir -p "$OUT_DIR/bin" "$OUT_DIR/logs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
[ -n "$BUILD_DIR" ] || BUILD_DIR=$ROOT/build-bench

# ---- the raw NCCL peer, and is there a GPU? ---------------------------------------------
# NCCL_BENCH_CFLAGS: extra flags (a sanitizer build's, so the libraries it loads match)
# shellcheck disable=SC2086
cc -std=c11 -O2 -Wall -Wextra ${NCCL_BENCH_CFLAGS:-} -o "$OUT_DIR/bin/nccl-bench" "$BENCH_DIR/nccl-bench.c" -ldl
NCCL_BENCH=$OUT_DIR/bin/nccl-bench

if [ "$FAKE" = 1 ]; then
    if [ "$DO_BUILD" = 1 ]; then
        log "building mlcomm and the test doubles (Release) in $BUILD_DIR"
        cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMLC_BUILD_TESTS=ON >"$OUT_DIR/logs/cmake.log"
        cmake --build "$BUILD_DIR" -j2 --target mlcomm-run mlcomm-bench fake_cudart fake_nccl >>"$OUT_DIR/logs/cmake.log"
    fi
    FAKE_CUDART=$BUILD_DIR/tests/gpu/libfake_cudart.so
    FAKE_NCCL=$BUILD_DIR/tests/gpu/libfake_nccl.so
    for f in "$FAKE_CUDART" "$FAKE_NCCL"; do
        [ -f "$f" ] || { echo "vs-gpu.sh: --fake: $f is missing (a build with tests)" >&2; exit 1; }
    done
    export MLC_CUDART_LIB=$FAKE_CUDART MLC_NCCL_LIB=$FAKE_NCCL NCCL_BENCH_CUDART=$FAKE_CUDART NCCL_BENCH_LIB=$FAKE_NCCL
    # The fake NCCL never completes a communicator of more than one rank.
    NCCL_RANKS=1
    NGPU=1
else
    set +e
    probe=$("$NCCL_BENCH" -p 2>&1)
    rc=$?
    set -e
    if [ $rc = 4 ]; then
        echo "SKIP: no GPU to benchmark on: ${probe#nccl-bench: rank 0: }"
        exit 0
    elif [ $rc != 0 ]; then
        echo "vs-gpu.sh: probing the GPU failed: $probe" >&2
        exit 1
    fi
    NGPU=$(echo "$probe" | awk '/^devices / { print $2 }')
    if [ "$DO_BUILD" = 1 ]; then
        log "building mlcomm (Release) in $BUILD_DIR"
        cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMLC_BUILD_TESTS=OFF >"$OUT_DIR/logs/cmake.log"
        cmake --build "$BUILD_DIR" -j2 --target mlcomm-run mlcomm-bench >>"$OUT_DIR/logs/cmake.log"
    fi
fi
: "${NCCL_RANKS:=$NGPU}"
MLC_RUN=$BUILD_DIR/bin/mlcomm-run
MLC_BENCH=$BUILD_DIR/bin/mlcomm-bench
for f in "$MLC_RUN" "$MLC_BENCH"; do
    [ -x "$f" ] || { echo "vs-gpu.sh: $f is missing (build first or drop --no-build)" >&2; exit 1; }
done

# ---- one side -------------------------------------------------------------------------------
# launch LOG NP ENV... -- PROGRAM ARGS...: NP ranks under mlcomm-run with ENV; rows on stdout.
launch() {
    local logf=$1 np=$2
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    run_logged vs-gpu.sh "$logf" "${envs[@]}" -- "$MLC_RUN" -n "$np" "$@"
}

# side_env SIDE: the environment of one side. On the doubles, device memory of the
# shm sides is guarded (a host access crashes, CUDA IPC works between processes);
# the fake NCCL copies through the plain pointers when it is called, so its sides
# run unguarded and with the double's queued work run at once.
side_env() {
    local guard=() now=()
    [ "$FAKE" = 1 ] && guard=(FAKE_CUDA_GUARD=1) && now=(FAKE_CUDA_IMMEDIATE=1)
    case $1 in
    mlcomm-nccl) echo MLC_BACKEND=nccl MLC_MEMORY=cuda "${now[@]}" ;;
    nccl) echo MLC_MEMORY=cuda "${now[@]}" ;;
    shm-ipc) echo MLC_BACKEND=shm MLC_MEMORY=cuda MLC_CUDA_IPC=1 "${guard[@]}" ;;
    shm-staged) echo MLC_BACKEND=shm MLC_MEMORY=cuda MLC_CUDA_IPC=0 "${guard[@]}" ;;
    esac
}

# run_side CMP NP ROUND SIDE COLL LO HI ITERS -> CSV rows cmp,np,round,side,coll,size,iters,time_us
run_side() {
    local cmp=$1 np=$2 round=$3 side=$4 coll=$5 lo=$6 hi=$7 iters=$8
    local env_words
    read -r -a env_words <<<"$(side_env "$side")"
    if [ "$side" = nccl ]; then
        local y=()
        [ "$NCCL_SYNC" = each ] && y=(-y)
        launch "$OUT_DIR/logs/$side.$np.log" "$np" "${env_words[@]}" -- "$NCCL_BENCH" "${y[@]}" -c "$coll" \
            -w "$WARMUP" -S "$((round * 7919 + np))" "$lo:$hi:$FACTOR:$iters" |
            awk -v cmp="$cmp" -v np="$np" -v r="$round" -v side="$side" \
                '!/^#/ && NF >= 7 { printf "%s,%s,%s,%s,%s,%s,%s,%s\n", cmp, np, r, side, $1, $2, $4, $5 }'
    else
        # mlcomm-bench's out-of-place column (NCCL's broadcast is out of place too)
        launch "$OUT_DIR/logs/$side.$np.log" "$np" "${env_words[@]}" -- "$MLC_BENCH" -M device "$coll" \
            -b "$lo" -e "$hi" -f "$FACTOR" -n "$iters" -w "$WARMUP" -c 0 |
            awk -v cmp="$cmp" -v np="$np" -v r="$round" -v side="$side" -v c="$coll" -v it="$iters" \
                '!/^#/ && NF >= 11 { printf "%s,%s,%s,%s,%s,%s,%s,%s\n", cmp, np, r, side, c, $1, it, $7 }'
    fi
}

RAW=$OUT_DIR/raw.csv
echo "cmp,np,round,side,coll,size,iters,time_us" >"$RAW"
rm -f "$OUT_DIR"/logs/*.log
START=$(date +%s)
log "compare [$COMPARE], nccl ranks $NCCL_RANKS, shm ranks $SHM_RANKS, colls [$COLLS], segments [${SEGS[*]}], rounds $ROUNDS$([ "$FAKE" = 1 ] && echo ', FAKE (test doubles)')"
for ((round = 1; round <= ROUNDS; round++)); do
    log "round $round/$ROUNDS"
    for cmp in $COMPARE; do
        if [ "$cmp" = nccl ]; then a=mlcomm-nccl b=nccl np=$NCCL_RANKS; else a=shm-ipc b=shm-staged np=$SHM_RANKS; fi
        for coll in $COLLS; do
            for seg in "${SEGS[@]}"; do
                IFS=: read -r lo hi it <<<"$seg"
                for side in $([ $((round % 2)) = 1 ] && echo "$a $b" || echo "$b $a"); do
                    run_side "$cmp" "$np" "$round" "$side" "$coll" "$lo" "$hi" "$it" >>"$RAW"
                done
            done
        done
    done
done
ELAPSED=$(($(date +%s) - START))

# ---- summary and targets ---------------------------------------------------------------------
{
    echo "# mlcomm on device buffers: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), $(nproc) cpus, $ELAPSED s"
    echo "# mode $MODE, rounds $ROUNDS (A B, B A, ...), warm-up $WARMUP, raw NCCL sync $NCCL_SYNC"
    echo "# mlcomm $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?'), build $BUILD_DIR"
    for cmp in $COMPARE; do
        [ "$cmp" = nccl ] || continue
        echo "# nccl: $(sed -n 's/^# nccl-bench: \([^;]*\);.*/\1/p' "$OUT_DIR/logs/nccl.$NCCL_RANKS.log" | head -1)"
    done
    echo "# time: per-iteration average of N calls, slowest rank, median over rounds; ratio: A / B per round, median"
    echo "# nccl: A = mlcomm-bench -M device, MLC_BACKEND=nccl; B = nccl-bench (raw NCCL)"
    echo "# shm:  A = mlcomm-bench -M device on shm, CUDA IPC; B = the same, MLC_CUDA_IPC=0 (staged)"
    if [ "$FAKE" = 1 ]; then
        echo "# FAKE: test doubles of the CUDA runtime and NCCL; the timings mean NOTHING, this run only"
        echo "# proves that the plumbing works (verdicts are marked '(fake)')"
    fi
} >"$OUT_DIR/header.txt"
cat "$OUT_DIR/header.txt"
awk -F, -v summary="$OUT_DIR/summary.csv" -v fake="$FAKE" -v target="$TARGET_RATIO" \
    -v target_min="$TARGET_MIN_BYTES" '
function median(a, n,    i, j, x) {
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR == 1 { next }
{
    k = $1 SUBSEP $2 SUBSEP $5 SUBSEP $6
    if (!(k in seen)) { seen[k] = 1; keys[++nk] = k; iters[k] = $7 }
    side = ($4 == "mlcomm-nccl" || $4 == "shm-ipc") ? "a" : "b"
    t[k, side, $3] = $8
    rounds[$3] = 1
}
END {
    printf "%-5s %3s  %-14s %10s %6s %11s %11s %7s  %-12s %s\n", "cmp", "np", "coll", "size", "iters",
           "A_us", "B_us", "A/B", "target", "result"
    print "cmp,np,coll,size,iters,a_us,b_us,ratio,rounds,target,result" > summary
    pass = fail = 0
    for (i = 1; i <= nk; i++) {
        k = keys[i]; split(k, f, SUBSEP)
        na = nb = nq = 0; delete A; delete B; delete Q
        for (r in rounds) {
            if ((k, "a", r) in t) A[++na] = t[k, "a", r]
            if ((k, "b", r) in t) B[++nb] = t[k, "b", r]
            if (((k, "a", r) in t) && ((k, "b", r) in t) && t[k, "b", r] > 0) Q[++nq] = t[k, "a", r] / t[k, "b", r]
        }
        if (nq == 0) continue
        ma = median(A, na); mb = median(B, nb); mq = median(Q, nq)
        tgt = "info"; res = "-"
        if (f[1] == "nccl" && f[4] + 0 >= target_min) {
            tgt = "<= " target "x"
            res = mq <= target ? "PASS" : "FAIL"
            if (res == "PASS") pass++; else fail++
            if (fake) res = res " (fake)"
        }
        printf "%-5s %3s  %-14s %10s %6s %11.3f %11.3f %7.3f  %-12s %s\n", f[1], f[2], f[3], f[4], iters[k],
               ma, mb, mq, tgt, res
        printf "%s,%s,%s,%s,%s,%.4f,%.4f,%.4f,%d,%s,%s\n", f[1], f[2], f[3], f[4], iters[k], ma, mb, mq, nq,
               tgt, res > summary
    }
    printf "targets (nccl: mlcomm / raw NCCL <= %sx at >= 1 MiB): %d PASS, %d FAIL%s; shm: information only\n",
           target, pass, fail, fake ? " (fake: meaningless)" : ""
}' "$RAW" | tee "$OUT_DIR/table.txt"
log "raw: $RAW  summary: $OUT_DIR/summary.csv  table: $OUT_DIR/table.txt  ($ELAPSED s)"
