#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cmake --install into a scratch prefix; Debian's interpreter, started away
# from the source tree with only the installed package on its path, imports
# mlcomm, loads the installed library (not build/'s) and runs a 2-rank
# all-reduce under the installed mlcomm-run. Exit 77 without numpy.
set -euo pipefail
build=$1 python=$2
"$python" -c "import numpy" 2>/dev/null || { echo "SKIP: numpy is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
dir=$(sed -n 's/^MLC_PYTHON_INSTALL_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
pkg="$tmp/prefix/$dir"
[ -f "$pkg/mlcomm/__init__.py" ] || { echo "the package is not installed to $dir" >&2; exit 1; }
# Installed with the default prefix, the interpreter finds it with no PYTHONPATH.
"$python" -c "import site, sys; sys.exit('/usr/local/$dir' not in site.getsitepackages())" ||
    { echo "/usr/local/$dir is not on $python's path: $("$python" -c 'import site; print(site.getsitepackages())')" >&2; exit 1; }
cat >"$tmp/prog.py" <<'PY'
import numpy as np, mlcomm, mlcomm._lib as L
with mlcomm.init() as c:
    s = c.allreduce(np.ones(4) * (c.rank + 1))
    print("rank %d loaded %s sum %g" % (c.rank, L.path, s[0]))
PY
cd "$tmp"
out=$(env -u MLCOMM_LIBRARY PYTHONPATH="$pkg" "$tmp/prefix/bin/mlcomm-run" --tag-output -n 2 "$python" "$tmp/prog.py")
echo "$out"
[ "$(echo "$out" | grep -c "loaded $tmp/prefix/lib/libmlcomm.so.0 sum 3")" = 2 ] ||
    { echo "the installed package did not load the installed library on both ranks" >&2; exit 1; }
# A wrong MLCOMM_LIBRARY is named as the cause (not answered with "set it").
err=$(MLCOMM_LIBRARY=/nonexistent/libmlcomm.so PYTHONPATH="$pkg" "$python" -c "import mlcomm" 2>&1 || true)
case "$err" in
*"MLCOMM_LIBRARY names it"*"/nonexistent/libmlcomm.so: no such file"*) ;;
*) echo "a wrong MLCOMM_LIBRARY: $err" >&2; exit 1 ;;
esac
