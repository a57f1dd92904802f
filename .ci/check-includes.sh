#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Includes point down only: every `#include "..."` in src/ names a file of
# its own folder or of a layer below it (docs/DESIGN.md, "Layers"). Exits 1
# listing each include that points up or sideways, or that names no file.
#
#   .ci/check-includes.sh [ROOT]   ROOT defaults to this repository
set -euo pipefail
root=$(cd "${1:-"$(dirname "$0")/.."}" && pwd)
[ -d "$root/src" ] || { echo "check-includes: no src/ under $root" >&2; exit 2; }
cd "$root/src"

# The helpers set a variable instead of printing: a subshell per include
# made the check take 10 s on a slow-forking machine.

# The layer of a path under src/ into $layer: its folder, backends and
# exchange by subfolder.
layer_of() {
    case "$1" in
    backends/*/*) layer="${1%/*}" ;;
    exchange/mpi/*) layer=exchange/mpi ;;
    */*) layer="${1%%/*}" ;;
    *) layer="?" ;;
    esac
}

# What layer $1 may include besides itself (and the public headers), into $ok.
allowed() {
    case "$1" in
    base) ok="" ;;
    devrt) ok="base" ;;
    algos) ok="base" ;;
    core) ok="base devrt algos" ;;
    backends/engine) ok="base algos core" ;;
    backends/threads | backends/shm) ok="base algos core backends/engine" ;;
    backends/mpi) ok="base devrt algos core" ;;
    backends/nccl) ok="base devrt core" ;;
    backends/staged) ok="base devrt core" ;;
    exchange) ok="base devrt core" ;;
    exchange/mpi) ok="base core exchange backends/mpi" ;;
    tensor) ok="base core" ;;
    *) ok="-" ;;
    esac
}

# Path $1 (relative to src/, may hold . and ..) without them, into $norm.
normalize() {
    local part parts out=() IFS=/
    read -ra parts <<<"$1" # no word splitting of $1 into globs
    for part in "${parts[@]}"; do
        case "$part" in
        "" | .) ;;
        ..)
            if [ ${#out[@]} -gt 0 ] && [ "${out[${#out[@]} - 1]}" != .. ]; then
                unset 'out[${#out[@]}-1]'
            else
                out+=(..) # above src/
            fi
            ;;
        *) out+=("$part") ;;
        esac
    done
    norm="${out[*]}"
}

bad=0
# Internal headers are included with quotes, so the check below sees them.
angled=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(base|devrt|algos|core|backends|exchange|tensor)/' \
         --include='*.[ch]' . || true)
if [ -n "$angled" ]; then
    echo "$angled: an internal header included with <...>; use \"...\"" >&2
    bad=1
fi
while IFS= read -r file; do
    layer_of "$file"
    from=$layer
    allowed "$from"
    if [ "$ok" = "-" ]; then
        echo "$file: not in a known layer folder" >&2
        bad=1
        continue
    fi
    dir=.
    [[ $file == */* ]] && dir=${file%/*}
    while IFS= read -r inc; do
        if [ -f "$dir/$inc" ]; then
            target="$dir/$inc"
        elif [ -f "$inc" ]; then
            target="$inc"
        elif [ -f "$root/include/$inc" ]; then
            continue # the public API
        else
            echo "$file: #include \"$inc\" names no file of its folder, of src/ or of include/" >&2
            bad=1
            continue
        fi
        normalize "$target"
        layer_of "$norm"
        to=$layer
        [ "$to" = "$from" ] && continue
        case " $ok " in
        *" $to "*) ;;
        *)
            echo "$file: #include \"$inc\" points from $from to $to, which is not below it" >&2
            bad=1
            ;;
        esac
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find . -name '*.[ch]' | sed 's|^\./||' | sort)

if [ "$bad" -ne 0 ]; then
    echo "check-includes: includes must point down (docs/DESIGN.md, Layers)" >&2
    exit 1
fi
echo "check-includes: every include in src/ points down"
