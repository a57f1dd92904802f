#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Job identity and the shm rendezvous, without a launcher unless stated.
# usage: job_identity_test.sh CASE JOB_RANK [MLCOMM_RUN]
#   torchrun  a torchrun-style job (MASTER_ADDR/PORT) killed early, then a
#             second job on the same address/port runs and leaves /dev/shm clean
#   foreign   the predicted name pre-created by another user (uid 65534) does
#             not block a job
#   samejob   two concurrent jobs with one MLC_JOB_ID (own parents) each run
#             alone, never pairing ranks across jobs (10 trials)
#   initkill  a rank _exits at a named init point (MLC_FAULT_INIT): every
#             survivor gets MLC_ERR_PEER_LOST naming it within 2 s, with and
#             without mlcomm-run, and /dev/shm is clean
#   initlate  under mlcomm-run, rank 0 dies after publishing the segment
#             while rank 2 has not yet started its init (it sleeps 1.5 s):
#             rank 1 reports MLC_ERR_PEER_LOST naming rank 0 within 1 s,
#             before mlcomm-run stops the job, and /dev/shm holds nothing of
#             the job after it
#   full      a full /dev/shm (a 64 KiB tmpfs in a private mount namespace):
#             every rank fails within 2 s
#   hydra     mpiexec.mpich -n 2 on the default backend, no MLC_JOB_ID
# Exit 77 = skipped (reason printed).
set -u
case_=$1
prog=$2
run=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL ($case_): $*"
    exit 1
}
skip() {
    echo "SKIP ($case_): $*"
    exit 77
}
# A clean environment for the ranks: nothing inherited names a job or ranks.
clean="env -u MLC_JOB_ID -u MLC_JOB_FD -u MLC_RANK -u MLC_WORLD_SIZE -u MLC_LOCAL_RANK -u MLC_LOCAL_SIZE
       -u MLC_BACKEND -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE
       -u TORCHELASTIC_RUN_ID -u PMI_RANK -u PMI_SIZE -u SLURM_JOB_ID -u SLURM_PROCID -u MLC_FAULT_INIT
       -u JOB_DELAY -u JOB_PRINT_ID"
left_in_shm() { # prefix: prints what /dev/shm holds of it
    for f in /dev/shm/mlc-"$1"*; do [ -e "$f" ] && echo "$f"; done
}
# run_job OUT ID N EXTRA: N ranks of job ID (MLC_JOB_ID) with extra env EXTRA
# in the background, outputs in OUT.<r>; `wait` collects them.
run_job() {
    out=$1 id=$2 n=$3 extra=$4 r=0
    while [ $r -lt "$n" ]; do
        $clean MLC_JOB_ID="$id" MLC_RANK=$r MLC_WORLD_SIZE="$n" MLC_TIMEOUT=20 $extra "$prog" >"$out.$r" 2>&1 &
        r=$((r + 1))
    done
}
case $case_ in
torchrun)
    port=$((20000 + $$ % 40000))
    id="127.0.0.1_$port"
    tv="MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MLC_TIMEOUT=20"
    # Job 1: rank 0 alone; SIGKILLed once it has named its objects in /dev/shm.
    $clean $tv RANK=0 LOCAL_RANK=0 "$prog" >"$tmp/first" 2>&1 &
    p=$!
    i=0
    while [ -z "$(left_in_shm "$id-")" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
    kill -9 $p
    wait $p 2>/dev/null
    echo "left by the killed job: $(left_in_shm "$id-" | tr '\n' ' ')"
    [ -n "$(left_in_shm "$id-")" ] || fail "the first job's rank 0 never named anything in /dev/shm"
    # Job 2 on the same address/port.
    $clean $tv RANK=0 LOCAL_RANK=0 "$prog" >"$tmp/r0" 2>&1 &
    p0=$!
    $clean $tv RANK=1 LOCAL_RANK=1 "$prog" >"$tmp/r1" 2>&1 &
    p1=$!
    wait $p0; s0=$?
    wait $p1; s1=$?
    cat "$tmp/r0" "$tmp/r1"
    [ $s0 -eq 0 ] && [ $s1 -eq 0 ] || fail "the second job failed (exit $s0, $s1)"
    [ -z "$(left_in_shm "$id-")" ] || fail "left in /dev/shm: $(left_in_shm "$id-")"
    ;;
foreign)
    [ "$(id -u)" -eq 0 ] || skip "needs root to create a file owned by another user"
    id="jobid-foreign-$$"
    f=/dev/shm/mlc-$id-0
    : >"$f" && chown 65534:65534 "$f" && chmod 600 "$f" || skip "cannot create $f owned by uid 65534"
    run_job "$tmp/job" "$id" 2 ""
    wait
    cat "$tmp"/job.*
    rm -f "$f"
    grep -q "OK sum=2 " "$tmp/job.0" && grep -q "OK sum=2 " "$tmp/job.1" ||
        fail "a name held by another user blocked the job"
    [ -z "$(left_in_shm "$id-")" ] || fail "left in /dev/shm: $(left_in_shm "$id-")"
    ;;
samejob)
    id="jobid-same-$$"
    t=1
    while [ $t -le 10 ]; do
        # Each job is started by its own parent, as two launchers would be.
        (run_job "$tmp/a$t" "$id" 2 "JOB_VALUE=1"; wait) &
        (run_job "$tmp/b$t" "$id" 2 "JOB_VALUE=1000"; wait) &
        wait
        echo "--- trial $t"
        cat "$tmp/a$t".* "$tmp/b$t".*
        if grep -q "CROSS-JOB" "$tmp/a$t".* "$tmp/b$t".*; then fail "trial $t: ranks of two jobs paired"; fi
        for f in "$tmp/a$t".* "$tmp/b$t".*; do
            grep -q " OK sum=" "$f" || fail "trial $t: a rank did not run alone: $(cat "$f")"
        done
        [ -z "$(left_in_shm "$id-")" ] || fail "trial $t: left in /dev/shm: $(left_in_shm "$id-")"
        t=$((t + 1))
    done
    ;;
initkill)
    # rank:point pairs; each run once without and once with mlcomm-run.
    for rp in 1:rendezvous 0:rendezvous 1:attach 2:attach 0:attach; do
        victim=${rp%%:*}
        for how in plain launcher; do
            id="jobid-kill-$$-$victim-${rp#*:}-$how"
            if [ $how = plain ]; then
                run_job "$tmp/k" "$id" 3 "MLC_FAULT_INIT=$rp"
                wait
            else
                [ -n "$run" ] || continue
                $clean MLC_TIMEOUT=20 MLC_FAULT_INIT=$rp JOB_PRINT_ID=1 MLC_BACKEND=shm "$run" -n 3 "$prog" \
                    >"$tmp/launcher" 2>&1
                cat "$tmp/launcher"
                # mlcomm-run names the job: check what it leaves in /dev/shm below.
                id=$(sed -n 's/^rank [0-9]*: job id \([0-9a-f]*\)$/\1/p' "$tmp/launcher" | head -n 1)
                [ -n "$id" ] || fail "$rp $how: no rank printed its job id"
                for r in 0 1 2; do grep "^rank $r[:/]" "$tmp/launcher" >"$tmp/k.$r"; done
            fi
            echo "--- MLC_FAULT_INIT=$rp ($how)"
            cat "$tmp"/k.*
            for r in 0 1 2; do
                [ $r -eq "$victim" ] && continue
                line=$(grep "FAIL" "$tmp/k.$r")
                echo "$line" | grep -q "FAIL MLC_ERR_PEER_LOST after" || fail "$rp $how: rank $r: not PEER_LOST: $line"
                echo "$line" | sed 's/^rank [^:]*: //' | grep -q "rank $victim" || fail "$rp $how: rank $r does not name rank $victim: $line"
                s=$(echo "$line" | sed -n 's/.* after \([0-9.]*\) s.*/\1/p')
                awk -v s="$s" 'BEGIN { exit !(s < 2.0) }' || fail "$rp $how: rank $r took $s s (limit 2 s)"
            done
            [ -z "$(left_in_shm "$id-")" ] || fail "$rp $how: left in /dev/shm: $(left_in_shm "$id-")"
            rm -f "$tmp"/k.*
        done
    done
    ;;
initlate)
    [ -n "$run" ] || skip "mlcomm-run not built"
    # JOB_DELAY=2:1.5: rank 2 sleeps 1.5 s before mlc_comm_init; mlcomm-run
    # stops it 1 s after rank 0's death, so it never claims its entry.
    $clean MLC_TIMEOUT=20 MLC_FAULT_INIT=0:attach JOB_DELAY=2:1.5 JOB_PRINT_ID=1 MLC_BACKEND=shm \
        "$run" -n 3 "$prog" >"$tmp/launcher" 2>&1
    cat "$tmp/launcher"
    id=$(sed -n 's/^rank 1: job id \([0-9a-f]*\)$/\1/p' "$tmp/launcher")
    [ -n "$id" ] || fail "rank 1 did not print its job id"
    line=$(grep "^rank 1[:/]" "$tmp/launcher" | grep "FAIL") || fail "rank 1 reported nothing before mlcomm-run stopped it"
    echo "$line" | grep -q "FAIL MLC_ERR_PEER_LOST after" || fail "rank 1: not PEER_LOST: $line"
    echo "$line" | sed 's/^rank [^:]*: //' | grep -q "rank 0" || fail "rank 1 does not name rank 0: $line"
    s=$(echo "$line" | sed -n 's/.* after \([0-9.]*\) s.*/\1/p')
    [ -n "$s" ] || fail "rank 1: no time in: $line"
    awk -v s="$s" 'BEGIN { exit !(s < 1.0) }' || fail "rank 1 took $s s (limit 1 s)"
    [ -z "$(left_in_shm "$id-")" ] || fail "left in /dev/shm: $(left_in_shm "$id-")"
    ;;
full)
    [ "$(id -u)" -eq 0 ] || skip "needs root for a private /dev/shm"
    command -v unshare >/dev/null || skip "unshare not found"
    unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /dev/shm' 2>/dev/null || skip "cannot mount a tmpfs in a private mount namespace"
    export prog tmp clean
    unshare -m sh -c '
        mount -t tmpfs -o size=64k tmpfs /dev/shm || exit 9
        r=0
        while [ $r -lt 3 ]; do
            $clean MLC_JOB_ID=jobid-full MLC_RANK=$r MLC_WORLD_SIZE=3 MLC_TIMEOUT=20 "$prog" >"$tmp/f.$r" 2>&1 &
            r=$((r + 1))
        done
        wait
        ls -A /dev/shm >"$tmp/left"'
    cat "$tmp"/f.*
    for r in 0 1 2; do
        line=$(grep "FAIL" "$tmp/f.$r") || fail "rank $r did not fail"
        s=$(echo "$line" | sed -n 's/.* after \([0-9.]*\) s.*/\1/p')
        awk -v s="$s" 'BEGIN { exit !(s < 2.0) }' || fail "rank $r took $s s to learn of it (limit 2 s): $line"
        echo "$line" | grep -q "reserve" || fail "rank $r does not say why: $line"
    done
    [ ! -s "$tmp/left" ] || fail "left in /dev/shm: $(cat "$tmp/left")"
    ;;
hydra)
    command -v mpiexec.mpich >/dev/null || skip "mpiexec.mpich not found"
    $clean timeout 60 mpiexec.mpich -n 2 "$prog" >"$tmp/h" 2>&1
    st=$?
    cat "$tmp/h"
    [ $st -eq 0 ] || fail "mpiexec.mpich -n 2 exited $st"
    [ "$(grep -c " OK sum=2 " "$tmp/h")" -eq 2 ] || fail "not both ranks succeeded"
    ;;
*)
    fail "unknown case"
    ;;
esac
echo PASS
