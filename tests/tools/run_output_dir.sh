#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# mlcomm-run --output-dir DIR: rank N's stdout and stderr land in
# DIR/rank.N.out and DIR/rank.N.err (DIR created), nothing on the terminal.
set -euo pipefail
run=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
term=$("$run" -n 3 --output-dir "$tmp/logs" sh -c 'echo "out $MLC_RANK"; echo "err $MLC_RANK" >&2' 2>&1)
[ -z "$term" ] || { echo "output reached the terminal: $term" >&2; exit 1; }
for r in 0 1 2; do
    [ "$(cat "$tmp/logs/rank.$r.out")" = "out $r" ] || { echo "rank.$r.out is wrong" >&2; exit 1; }
    [ "$(cat "$tmp/logs/rank.$r.err")" = "err $r" ] || { echo "rank.$r.err is wrong" >&2; exit 1; }
done
# A directory that cannot be made is a launcher error naming it.
msg=$("$run" -n 1 --output-dir /proc/nonexistent/x true 2>&1) && { echo "accepted a bad dir" >&2; exit 1; }
grep -q "output-dir: cannot create '/proc/nonexistent/x'" <<<"$msg" || { echo "bad message: $msg" >&2; exit 1; }
echo "--output-dir: ok"
