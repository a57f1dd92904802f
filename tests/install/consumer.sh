#!/usr/bin/env bash
# Install the build into a scratch prefix and build the README's first program
# against it twice: with find_package(mlcomm) and with pkg-config.
set -euo pipefail
build=$1 src=$2 run=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
grep -q "BSD 3-Clause License" "$tmp/prefix/share/doc/mlcomm/LICENSE" ||
    { echo "LICENSE is not installed to share/doc/mlcomm" >&2; exit 1; }
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
    cc "$tmp/first.c" $(pkg-config --cflags --libs mlcomm) -Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/first2"
    "$run" -n 2 "$tmp/first2" | grep -q "sum over 2 ranks = 1"
fi
echo "install, find_package and pkg-config: ok"
