#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# usage: .ci/no-gpu-runtime.sh COMMAND [ARGS...]
# Runs COMMAND as on a stock machine without CUDA, HIP, NCCL or RCCL: no GPU
# runtime library can be loaded.
#  - As root with mount namespaces: in a private one (unshare -m), every such
#    library the loader could find (ld.so.cache, /usr/local/cuda*, /opt/rocm*,
#    LD_LIBRARY_PATH) gets an empty file bind-mounted over it, so dlopen
#    fails whatever name or path is asked for.
#  - Otherwise: an LD_PRELOAD shim (built here with cc) refuses dlopen of
#    those names (libcuda, libcudart, libnccl, libamdhip64, librccl). The
#    shim does not see libraries a program links directly; mlcomm links none.
# The test doubles of tests/gpu (libfake_*.so) stay loadable.
# NO_GPU_RUNTIME_SHIM=1 takes the shim even where a namespace could be made.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

hidden='^lib(cuda|cudart|nccl|amdhip64|rccl)\.so'

gpu_libs() {
    {
        ldconfig -p 2>/dev/null | awk '/=>/ {print $NF}'
        for d in /usr/local/cuda* /opt/rocm* $(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do
            [ -d "$d" ] && find -L "$d" -name 'lib*.so*' 2>/dev/null
        done
    } | while read -r f; do
        [[ $(basename "$f") =~ $hidden ]] && [ -e "$f" ] && readlink -f "$f"
    done | sort -u
}

if [ "${NO_GPU_RUNTIME_SHIM:-0}" != 1 ] && [ "$(id -u)" -eq 0 ] && unshare -m --propagation private true 2>/dev/null; then
    mapfile -t libs < <(gpu_libs)
    echo "no-gpu-runtime: mount namespace, ${#libs[@]} libraries hidden"
    # shellcheck disable=SC2016  # expanded by the inner shell
    exec unshare -m --propagation private bash -c '
        set -e
        n=$1; shift
        for ((i = 0; i < n; i++)); do mount --bind /dev/null "$1"; shift; done
        exec "$@"' _ "${#libs[@]}" "${libs[@]}" "$@"
fi

shim_dir=$(mktemp -d)
trap 'rm -rf "$shim_dir"' EXIT
cat >"$shim_dir/shim.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
/* dlopen that refuses the GPU runtimes; the failure reads as a missing file. */
void *dlopen(const char *file, int mode)
{
    static const char *const hidden[] = {"libcuda.so", "libcudart.so", "libnccl.so", "libamdhip64.so",
                                         "librccl.so", NULL};
    void *(*real)(const char *, int) = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    if (file) {
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        for (int i = 0; hidden[i]; i++)
            if (strncmp(base, hidden[i], strlen(hidden[i])) == 0) {
                char gone[512];
                snprintf(gone, sizeof gone, "/nonexistent-gpu-runtime-hidden/%s", base);
                return real(gone, mode);
            }
    }
    return real(file, mode);
}
EOF
cc -shared -fPIC -O2 -o "$shim_dir/libno-gpu-runtime.so" "$shim_dir/shim.c" -ldl
echo "no-gpu-runtime: no mount namespace here; LD_PRELOAD shim"
LD_PRELOAD="$shim_dir/libno-gpu-runtime.so${LD_PRELOAD:+:$LD_PRELOAD}" "$@"
