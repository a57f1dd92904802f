#!/usr/bin/env bash
# Every source file names its license in an SPDX line near its top:
#   C (*.c, *.h, *.h.in)            /* SPDX-License-Identifier: BSD-3-Clause */
#   CMake, shell, awk, *.in, .ci/run  # SPDX-License-Identifier: BSD-3-Clause
# (after the #! line where there is one). Documentation and data (*.md, *.svg,
# *.csv, LICENSE, .gitignore, suppression lists) carry none.
#
#   .ci/spdx.sh [SRC]        list the source files that lack the line; exit 1 if any
#   .ci/spdx.sh --fix [SRC]  add the line where it is missing (idempotent)
#
# SRC defaults to this repository. Files are those git tracks or would track
# (untracked, not ignored); without git, every file outside build*/ and .git.
set -euo pipefail
fix=0
if [ "${1:-}" = "--fix" ]; then
    fix=1
    shift
fi
src=${1:-"$(dirname "$0")/.."}
cd "$src"
id="SPDX-License-Identifier: BSD-3-Clause"

list_files() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files --cached --others --exclude-standard
    else
        find . -path ./.git -prune -o -path './build*' -prune -o -type f -print | sed 's|^\./||'
    fi
}

# The comment style of a source file into $style, empty for a file that
# carries none. (Builtins only, here and below: a fork per file made the
# check take 10 s on a slow-forking machine.)
style_of() {
    case "$1" in
    *.c | *.h | *.h.in) style=c ;;
    *.sh | *.awk | *.cmake | *.cmake.in | *.pc.in | CMakeLists.txt | */CMakeLists.txt | .ci/run) style=hash ;;
    *) style="" ;;
    esac
}

# Whether the first 3 lines of file $1 hold the SPDX line.
has_id() {
    local line n=0
    while [ $n -lt 3 ] && { IFS= read -r line || [ -n "$line" ]; }; do # a last line without newline too
        [[ $line == *"$id"* ]] && return 0
        n=$((n + 1))
    done <"$1"
    return 1
}

missing=0
while IFS= read -r f; do
    [ -f "$f" ] || continue # listed by git but deleted in the work tree
    style_of "$f"
    [ -n "$style" ] || continue
    has_id "$f" && continue
    if [ "$fix" = 0 ]; then
        echo "$f: no '$id' line in its first 3 lines"
        missing=$((missing + 1))
        continue
    fi
    if [ "$style" = c ]; then
        line="/* $id */"
    else
        line="# $id"
    fi
    tmp=$(mktemp "$f.spdx.XXXXXX")
    if [ "$(head -c 2 "$f")" = "#!" ]; then
        { head -n 1 "$f"; echo "$line"; tail -n +2 "$f"; } >"$tmp"
    else
        { echo "$line"; cat "$f"; } >"$tmp"
    fi
    chmod --reference="$f" "$tmp"
    mv "$tmp" "$f"
done < <(list_files)

if [ "$missing" -gt 0 ]; then
    echo "$missing source file(s) lack the SPDX line: run .ci/spdx.sh --fix" >&2
    exit 1
fi
