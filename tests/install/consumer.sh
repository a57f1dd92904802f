#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install the build into a scratch prefix and build the README's first program
# against it twice: with find_package(mlcomm) and with pkg-config.
set -euo pipefail
build=$1 src=$2 run=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
grep -q "BSD 3-Clause License" "$tmp/prefix/share/doc/mlcomm/LICENSE" ||
    { echo "LICENSE is not installed to share/doc/mlcomm" >&2; exit 1; }
# Every document the README points to, where its relative link leads.
for d in $(grep -o 'docs/[A-Z]*\.md' "$src/README.md" | sort -u); do
    [ -f "$tmp/prefix/share/doc/mlcomm/$d" ] || { echo "$d (named in the README) is not installed" >&2; exit 1; }
done
sed -n '/^```c$/,/^```$/p' "$src/README.md" | sed '1d;$d' >"$tmp/first.c"
cat >"$tmp/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(mlcomm REQUIRED)
add_executable(first first.c)
target_link_libraries(first mlcomm::mlcomm)
CM
cmake -S "$tmp" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/b" >/dev/null
"$run" -n 3 "$tmp/b/first" | grep -q "sum over 3 ranks = 3"
if command -v pkg-config >/dev/null; then
    export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
    # The README's line: the library's directory comes from the .pc file.
    cc "$tmp/first.c" $(pkg-config --cflags --libs mlcomm) \
        -Wl,-rpath,"$(pkg-config --variable=libdir mlcomm)" -o "$tmp/first2"
    "$run" -n 2 "$tmp/first2" | grep -q "sum over 2 ranks = 1"
    # Without an rpath, LD_LIBRARY_PATH as the README says.
    cc "$tmp/first.c" $(pkg-config --cflags --libs mlcomm) -o "$tmp/first3"
    LD_LIBRARY_PATH="$(pkg-config --variable=libdir mlcomm)" "$run" -n 2 "$tmp/first3" |
        grep -q "sum over 2 ranks = 1"
fi

# The examples: installed as sources, built out of tree against the prefix,
# all together and one folder alone; each answers --help and runs.
ex="$tmp/prefix/share/mlcomm/examples"
[ -f "$ex/README.md" ] || { echo "the examples are not installed to share/mlcomm/examples" >&2; exit 1; }
cmake -S "$ex" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/ex" >/dev/null
cmake -S "$src/examples/heat2d" -B "$tmp/heat2d" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/heat2d" >/dev/null
# (Output is captured before grep reads it: grep -q stops reading at the
# first match, and a writer that then gets SIGPIPE would fail the pipeline.)
for prog in "$tmp/ex/heat2d/heat2d" "$tmp/ex/tp_mlp/tp_mlp" "$tmp/heat2d/heat2d"; do
    out=$("$prog" --help) && grep -q "^usage: " <<<"$out" || { echo "$prog --help failed" >&2; exit 1; }
done
"$run" -n 2 "$tmp/ex/heat2d/heat2d" --nx 32 --ny 32 --steps 5 >/dev/null
out=$("$tmp/ex/tp_mlp/tp_mlp" --threads 2 --batch 4 --seq 4 --hidden 16 --ffn 32 --steps 1)
grep -q PASS <<<"$out" || { echo "tp_mlp did not pass: $out" >&2; exit 1; }
echo "install, find_package, pkg-config and the examples out of tree: ok"
