#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# expect.sh STATUS N REGEX_1 .. REGEX_N COMMAND [ARGS...]
# Run COMMAND; pass when it exits with STATUS and every REGEX (grep -E) matches
# a line of its standard output + error. A REGEX starting with '!' must match
# no line.
set -u
want=$1 n=$2
shift 2
regexes=("${@:1:n}")
shift "$n"
out=$("$@" 2>&1)
rc=$?
fail=0
if [ "$rc" != "$want" ]; then
    echo "expect.sh: '$*' exited $rc, expected $want" >&2
    fail=1
fi
for re in "${regexes[@]}"; do
    if [ "${re:0:1}" = "!" ]; then
        if grep -Eq -- "${re:1}" <<<"$out"; then
            echo "expect.sh: output matches '${re:1}' but must not" >&2
            fail=1
        fi
    elif ! grep -Eq -- "$re" <<<"$out"; then
        echo "expect.sh: no line of the output matches '$re'" >&2
        fail=1
    fi
done
if [ "$fail" != 0 ]; then
    echo "---- output of '$*':" >&2
    printf '%s\n' "$out" >&2
fi
exit "$fail"
