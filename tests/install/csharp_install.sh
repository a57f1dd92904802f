#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# usage: csharp_install.sh BUILD MONO DONEWHEN_EXE
# cmake --install into a scratch prefix; a C# program run away from the
# build tree, with only the installed assembly's folder on MONO_PATH (no
# MLCOMM_LIBRARY, no LD_LIBRARY_PATH), loads the installed library through
# the links beside the assembly and runs 2 ranks under the installed
# mlcomm-run.
set -euo pipefail
build=$1 mono=$2 done_exe=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cs="$tmp/prefix/lib/mlcomm/csharp"
for f in MLFramework.Communication.dll libmlcomm.so.0; do
    [ -e "$cs/$f" ] || { echo "$cs/$f is missing after the install" >&2; exit 1; }
done
mkdir "$tmp/app" && cp "$done_exe" "$tmp/app/"
cd "$tmp/app"
env -u MLCOMM_LIBRARY -u LD_LIBRARY_PATH MONO_PATH="$cs" \
    "$tmp/prefix/bin/mlcomm-run" -n 2 --timeout 120 "$mono" "$tmp/app/$(basename "$done_exe")" shm
