/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_gpu_report with the fake CUDA runtime and fake NCCL (MLC_CUDART_LIB,
 * MLC_NCCL_LIB) and HIP / RCCL pointed at missing files: every section is
 * printed, with versions, paths, devices and reasons.
 */
#include <stdlib.h>
#include <string.h>
#include "../unit/unit.h"
#include "info_gpu.h"

int main(void)
{
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    setenv("MLC_PINNED_LIMIT", "64M", 1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 2;
    mlc_gpu_report(f);
    fclose(f);
    printf("%s", text);
    static const char *const expect[] = {
        "  CUDA runtime: 13.0 (",
        "fake_cudart",
        "), driver 13.0\n",
        "  CUDA devices: 2\n",
        "    [0] Fake GPU 0, 16.0 GiB, compute capability 9.0, PCI 0000:10:00.0\n",
        "    [1] Fake GPU 1, 16.0 GiB",
        "  HIP runtime: unavailable: HIP runtime: MLC_HIPRT_LIB=/nonexistent/libamdhip64.so cannot be opened",
        "  NCCL: 2.28.9 (",
        "fake_nccl",
        "  RCCL: unavailable: RCCL library: MLC_RCCL_LIB=/nonexistent/librccl.so.1",
        "  pinned memory pool: limit 67108864 bytes (MLC_PINNED_LIMIT)\n",
        "  pinned memory pins with: cudaHostAlloc (RLIMIT_MEMLOCK ",
        "  GPUDirect RDMA: ",
        "  GPU peer access: yes (2 of 2 device pairs can access each other)\n",
        "  GPU IPC: yes (",
        "  CUDA-aware MPI: unknown (the MPI module has not reported",
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        CHECK(strstr(text, expect[i]) != NULL, "report lacks '%s'", expect[i]);
    CHECK(mlc_last_error()[0] == '\0', "report left a thread error: %s", mlc_last_error());
    free(text);
    return unit_result("gpu_report");
}
