/* SPDX-License-Identifier: BSD-3-Clause */
#include "gpu/gpu_report.h"
#include <stdlib.h>
#include <sys/resource.h>
#include "backends/nccl/ncclapi.h"
#include "config.h"
#include "error.h"
#include "gpu/gpudirect.h"
#include "gpu/gpurt.h"
#include "gpu/pinned.h"

static void report_runtime(FILE *f, mlc_gpu_kind_t kind)
{
    const mlc_gpurt_t *rt;
    const char *name = mlc_gpu_kind_name(kind);
    if (mlc_gpurt_get(kind, &rt) != MLC_SUCCESS) {
        fprintf(f, "  %s runtime: unavailable: %s\n", name, mlc_last_error());
        return;
    }
    char rver[32], dver[32], buf[256];
    mlc_gpurt_version_text(kind, rt->runtime_version, rver, sizeof rver);
    int dv = 0;
    int e = rt->driver_get_version(&dv);
    if (e == MLC_GPU_SUCCESS && dv > 0) mlc_gpurt_version_text(kind, dv, dver, sizeof dver);
    else snprintf(dver, sizeof dver, "none");
    if (e != MLC_GPU_SUCCESS) rt->get_last_error();
    fprintf(f, "  %s runtime: %s (%s), driver %s\n", name, rver, rt->lib.path, dver);
    int n = 0;
    e = rt->get_device_count(&n);
    if (e != MLC_GPU_SUCCESS) {
        rt->get_last_error();
        fprintf(f, "  %s devices: none (%sGetDeviceCount: %s)\n", name, rt->prefix,
                mlc_gpurt_strerror(rt, e, buf, sizeof buf));
        return;
    }
    fprintf(f, "  %s devices: %d\n", name, n);
    for (int d = 0; d < n; d++) {
        mlc_gpu_device_info_t info;
        if (mlc_gpurt_device_info(rt, d, &info) != MLC_SUCCESS) {
            fprintf(f, "    [%d] %s\n", d, mlc_last_error());
            continue;
        }
        fprintf(f, "    [%d] %s, %.1f GiB", d, info.name, (double)info.total_mem / (1024.0 * 1024 * 1024));
        if (info.cc_major >= 0) fprintf(f, ", compute capability %d.%d", info.cc_major, info.cc_minor);
        if (info.bus_id[0]) fprintf(f, ", PCI %s", info.bus_id);
        fprintf(f, "\n");
    }
}

static void report_nccl(FILE *f, mlc_nccl_flavor_t flavor, const char *name)
{
    const mlc_nccl_api_t *api;
    if (mlc_nccl_api_get(flavor, &api) != MLC_SUCCESS) {
        fprintf(f, "  %s: unavailable: %s\n", name, mlc_last_error());
        return;
    }
    char ver[32];
    mlc_nccl_version_text(api->version, ver, sizeof ver);
    fprintf(f, "  %s: %s (%s)%s\n", name, ver, api->lib.path,
            api->ncclCommSplit ? "" : "; no ncclCommSplit: mlc_comm_split unsupported");
}

static void report_pinned(FILE *f)
{
    size_t limit;
    bool set;
    if (mlc_env_size(MLC_ENV_PINNED_LIMIT, &limit, &set) != MLC_SUCCESS)
        fprintf(f, "  pinned memory pool: %s\n", mlc_last_error());
    else fprintf(f, "  pinned memory pool: limit %zu bytes%s\n", limit, set ? " (MLC_PINNED_LIMIT)" : " (default)");
    const char *how = mlc_gpurt_peek(MLC_GPU_CUDA) ? "cudaHostAlloc" : mlc_gpurt_peek(MLC_GPU_HIP) ? "hipHostMalloc" : "mmap + mlock";
    struct rlimit rl;
    char lim[64] = "unknown";
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        if (rl.rlim_cur == RLIM_INFINITY) snprintf(lim, sizeof lim, "unlimited");
        else snprintf(lim, sizeof lim, "%llu bytes", (unsigned long long)rl.rlim_cur);
    }
    fprintf(f, "  pinned memory pins with: %s (RLIMIT_MEMLOCK %s)\n", how, lim);
}

static void report_gpudirect(FILE *f)
{
    const mlc_gpurt_t *rt = mlc_gpurt_peek(MLC_GPU_CUDA);
    if (!rt) rt = mlc_gpurt_peek(MLC_GPU_HIP);
    mlc_gpudirect_t g;
    mlc_gpudirect_detect(rt, NULL, &g);
    fprintf(f, "  GPUDirect RDMA: %s (%s)\n", mlc_capability_name(g.rdma), g.rdma_evidence);
    fprintf(f, "  GPU peer access: %s (%s)\n", mlc_capability_name(g.peer_access), g.peer_evidence);
    fprintf(f, "  GPU IPC: %s (%s)\n", mlc_capability_name(g.ipc), g.ipc_evidence);
    fprintf(f, "  CUDA-aware MPI: %s (%s)\n", mlc_capability_name(g.cuda_aware_mpi), g.mpi_evidence);
}

void mlc_gpu_report(FILE *f)
{
    for (int k = 0; k < MLC_GPU_KIND_COUNT; k++) report_runtime(f, (mlc_gpu_kind_t)k);
    report_nccl(f, MLC_NCCL_FLAVOR_NCCL, "NCCL");
    report_nccl(f, MLC_NCCL_FLAVOR_RCCL, "RCCL");
    report_pinned(f);
    report_gpudirect(f);
    mlc_error_clear();
}
