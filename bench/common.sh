# SPDX-License-Identifier: BSD-3-Clause
# Shell helpers the comparison scripts (vs-mpi.sh, vs-gpu.sh) share; sourced, not run.

bytes_of() { # 8 / 4K / 128M -> bytes
    local v=$1
    case $v in
    *[kK]) echo $((${v%?} << 10)) ;;
    *[mM]) echo $((${v%?} << 20)) ;;
    *[gG]) echo $((${v%?} << 30)) ;;
    *) echo $((v)) ;;
    esac
}

# run_logged WHO LOGF ENV... -- CMD...: run CMD (with ENV) under $LAUNCH_TIMEOUT,
# append the command and its output to LOGF, print the output; on failure name
# the command, show the log's tail and exit 1 (WHO: the script, for the message).
run_logged() {
    local who=$1 logf=$2
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    echo "+ ${envs[*]:+${envs[*]} }$*" >>"$logf"
    if ! env "${envs[@]}" timeout "$LAUNCH_TIMEOUT" "$@" >"$logf.tmp" 2>&1; then
        cat "$logf.tmp" >>"$logf"
        rm -f "$logf.tmp"
        echo "$who: failed: ${envs[*]:+${envs[*]} }$* (log: $logf)" >&2
        tail -20 "$logf" >&2
        exit 1
    fi
    cat "$logf.tmp" >>"$logf"
    cat "$logf.tmp"
    rm -f "$logf.tmp"
}
