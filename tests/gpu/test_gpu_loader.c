/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The run-time loaders (src/base/dynlib, src/devrt/gpurt; backends/nccl/ncclapi):
 * absent library, missing required symbol, env override, the process-wide
 * load-once cache, and the helpers over a loaded runtime. Runs everywhere:
 * the "device" is the fake runtime of fake_cudart.c.
 *
 *   test_gpu_loader paths     explicit paths (fakes, a file that does not exist)
 *   test_gpu_loader env-missing   MLC_CUDART_LIB names a missing file
 *   test_gpu_loader env-fake      MLC_CUDART_LIB names the fake runtime
 *   test_gpu_loader system        default sonames: whatever this machine has
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "../unit/unit.h"
#include "backends/nccl/ncclapi.h"
#include "devrt/gpurt.h"

static void test_paths(void)
{
    char why[1024];
    mlc_gpurt_t rt;
    CHECK(mlc_gpurt_open(MLC_GPU_CUDA, "/nonexistent/libcudart.so.13", &rt, why, sizeof why) ==
              MLC_ERR_UNAVAILABLE, "missing file loaded");
    CHECK(strstr(why, "/nonexistent/libcudart.so.13") && strstr(why, "CUDA runtime"), "why: %s", why);

    CHECK(mlc_gpurt_open(MLC_GPU_CUDA, FAKE_CUDART_PARTIAL, &rt, why, sizeof why) == MLC_ERR_UNAVAILABLE,
          "partial runtime accepted");
    CHECK(strstr(why, "lacks required symbol cudaDriverGetVersion") != NULL, "why: %s", why);
    CHECK(strstr(why, "fake_cudart_partial") != NULL, "why names no file: %s", why);

    CHECK(mlc_gpurt_open(MLC_GPU_HIP, "/nonexistent/libamdhip64.so", &rt, why, sizeof why) ==
              MLC_ERR_UNAVAILABLE, "missing HIP loaded");
    CHECK(strstr(why, "HIP runtime") != NULL, "why: %s", why);

    memset(&rt, 0, sizeof rt);
    CHECK(mlc_gpurt_open(MLC_GPU_CUDA, FAKE_CUDART, &rt, why, sizeof why) == MLC_SUCCESS, "fake: %s", why);
    CHECK(rt.runtime_version == 13000, "runtime version %d", rt.runtime_version);
    CHECK(rt.event_record && rt.host_alloc && rt.ipc_get_mem_handle, "slots not filled");
    CHECK(rt.get_device_properties_legacy == NULL, "CUDA has no legacy properties slot");
    char real[PATH_MAX];
    CHECK(realpath(FAKE_CUDART, real) && strcmp(rt.lib.path, real) == 0, "path %s", rt.lib.path);
    char ver[32];
    mlc_gpurt_version_text(MLC_GPU_CUDA, rt.runtime_version, ver, sizeof ver);
    CHECK_STR(ver, "13.0");
    mlc_gpurt_version_text(MLC_GPU_HIP, 60032830, ver, sizeof ver);
    CHECK_STR(ver, "6.0.32830");

    int n = 0;
    CHECK_OK(mlc_gpurt_device_count(&rt, &n));
    CHECK(n == 1, "device count %d", n);
    setenv("FAKE_CUDA_DEVICES", "0", 1);
    CHECK_ERR_MSG(mlc_gpurt_device_count(&rt, &n), MLC_ERR_UNAVAILABLE, "cudaGetDeviceCount: cudaErrorNoDevice (100)");
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    CHECK_OK(mlc_gpurt_device_count(&rt, &n));
    CHECK(n == 2, "device count %d", n);

    /* pointer classification */
    void *dev = NULL, *host = NULL;
    CHECK(rt.malloc(&dev, 64) == 0 && rt.host_alloc(&host, 64, 0) == 0, "fake allocations");
    int local = 0, d = 7;
    mlc_gpu_mem_t mem;
    CHECK_OK(mlc_gpurt_pointer_kind(&rt, dev, &mem, &d));
    CHECK(mem == MLC_GPU_MEM_DEVICE && d == 0, "device pointer: %s dev %d", mlc_gpu_mem_name(mem), d);
    CHECK_OK(mlc_gpurt_pointer_kind(&rt, (char *)dev + 10, &mem, &d));
    CHECK(mem == MLC_GPU_MEM_DEVICE, "interior device pointer: %s", mlc_gpu_mem_name(mem));
    CHECK_OK(mlc_gpurt_pointer_kind(&rt, host, &mem, &d));
    CHECK(mem == MLC_GPU_MEM_HOST && d == -1, "pinned pointer: %s dev %d", mlc_gpu_mem_name(mem), d);
    CHECK_OK(mlc_gpurt_pointer_kind(&rt, &local, &mem, &d));
    CHECK(mem == MLC_GPU_MEM_UNREGISTERED && d == -1, "stack pointer: %s", mlc_gpu_mem_name(mem));
    rt.free(dev);
    rt.free_host(host);

    mlc_gpu_device_info_t info;
    CHECK_OK(mlc_gpurt_device_info(&rt, 1, &info));
    CHECK_STR(info.name, "Fake GPU 1");
    CHECK(info.total_mem == ((size_t)16 << 30), "total mem %zu", info.total_mem);
    CHECK(info.cc_major == 9 && info.cc_minor == 0, "cc %d.%d", info.cc_major, info.cc_minor);
    CHECK_STR(info.bus_id, "0000:11:00.0");
    CHECK_ERR_MSG(mlc_gpurt_device_info(&rt, 5, &info), MLC_ERR_BACKEND, "cudaGetDeviceProperties(5)");
    char buf[256];
    mlc_gpurt_strerror(&rt, 2, buf, sizeof buf);
    CHECK(strstr(buf, "cudaErrorMemoryAllocation (2)") != NULL, "strerror: %s", buf);
    unsetenv("FAKE_CUDA_DEVICES");
    mlc_gpurt_close(&rt);

    /* The same double as a HIP runtime: HIP names, HIP 6 layouts. */
    CHECK(mlc_gpurt_open(MLC_GPU_HIP, FAKE_HIP, &rt, why, sizeof why) == MLC_SUCCESS, "fake HIP: %s", why);
    CHECK(rt.runtime_version == 60032830 && !rt.legacy_mem_types && rt.props_mem_offset == 288,
          "HIP version %d legacy %d offset %zu", rt.runtime_version, rt.legacy_mem_types, rt.props_mem_offset);
    CHECK(rt.get_device_properties && rt.device_get_attribute == NULL, "HIP slots");
    CHECK_OK(mlc_gpurt_device_info(&rt, 0, &info));
    CHECK_STR(info.name, "Fake GPU 0");
    CHECK(info.total_mem == ((size_t)16 << 30) && info.cc_major == -1, "HIP info mem %zu cc %d", info.total_mem,
          info.cc_major);
    CHECK_OK(mlc_gpurt_device_count(&rt, &n));
    setenv("FAKE_CUDA_DEVICES", "0", 1);
    CHECK_ERR_MSG(mlc_gpurt_device_count(&rt, &n), MLC_ERR_UNAVAILABLE, "no HIP device: hipGetDeviceCount: ");
    unsetenv("FAKE_CUDA_DEVICES");
    mlc_gpurt_close(&rt);

    /* NCCL loader */
    mlc_nccl_api_t api;
    CHECK(mlc_nccl_api_open(MLC_NCCL_FLAVOR_NCCL, FAKE_CUDART, &api, why, sizeof why) == MLC_ERR_UNAVAILABLE,
          "a CUDA runtime accepted as NCCL");
    CHECK(strstr(why, "lacks required symbol ncclGetVersion") && strstr(why, "NCCL library"), "why: %s", why);
    CHECK(mlc_nccl_api_open(MLC_NCCL_FLAVOR_RCCL, "/nonexistent/librccl.so.1", &api, why, sizeof why) ==
              MLC_ERR_UNAVAILABLE, "missing RCCL loaded");
    CHECK(strstr(why, "RCCL library") != NULL, "why: %s", why);
    CHECK(mlc_nccl_api_open(MLC_NCCL_FLAVOR_NCCL, FAKE_NCCL, &api, why, sizeof why) == MLC_SUCCESS, "%s", why);
    CHECK(api.version == 22809 && api.ncclCommSplit != NULL, "version %d split %p", api.version,
          (void *)api.ncclCommSplit);
    mlc_dynlib_close(&api.lib);
    CHECK(mlc_nccl_api_open(MLC_NCCL_FLAVOR_NCCL, FAKE_NCCL_NOSPLIT, &api, why, sizeof why) == MLC_SUCCESS, "%s", why);
    CHECK(api.ncclCommSplit == NULL, "optional symbol resolved in a library without it");
    mlc_dynlib_close(&api.lib);

    mlc_nccl_version_text(22809, ver, sizeof ver);
    CHECK_STR(ver, "2.28.9");
    mlc_nccl_version_text(2708, ver, sizeof ver);
    CHECK_STR(ver, "2.7.8");
    CHECK(mlc_nccl_version_code(2, 8, 0) == 2800 && mlc_nccl_version_code(2, 10, 3) == 21003, "version codes");
}

static void test_env_missing(void)
{
    const mlc_gpurt_t *rt = NULL;
    CHECK(mlc_gpurt_peek(MLC_GPU_CUDA) == NULL, "loaded before first use");
    CHECK(mlc_gpurt_why(MLC_GPU_CUDA)[0] == '\0', "a reason before any attempt");
    CHECK_ERR_MSG(mlc_gpurt_get(MLC_GPU_CUDA, &rt), MLC_ERR_UNAVAILABLE, "MLC_CUDART_LIB=/nonexistent/libcudart.so.13");
    CHECK(rt == NULL, "output written on failure");
    /* The answer is cached: same status and reason, no new attempt. */
    CHECK_ERR_MSG(mlc_gpurt_get(MLC_GPU_CUDA, &rt), MLC_ERR_UNAVAILABLE, "cannot be opened");
    CHECK(strstr(mlc_gpurt_why(MLC_GPU_CUDA), "MLC_CUDART_LIB") != NULL, "why: %s", mlc_gpurt_why(MLC_GPU_CUDA));
    CHECK(mlc_gpurt_peek(MLC_GPU_CUDA) == NULL, "peek after a failed load");
    const mlc_nccl_api_t *api = NULL;
    CHECK_ERR_MSG(mlc_nccl_api_get(MLC_NCCL_FLAVOR_NCCL, &api), MLC_ERR_UNAVAILABLE, "MLC_NCCL_LIB=/nonexistent/libnccl.so.2");
}

static void test_env_fake(void)
{
    const mlc_gpurt_t *rt = NULL, *again = NULL;
    CHECK_OK(mlc_gpurt_get(MLC_GPU_CUDA, &rt));
    CHECK_OK(mlc_gpurt_get(MLC_GPU_CUDA, &again));
    CHECK(rt && rt == again && mlc_gpurt_peek(MLC_GPU_CUDA) == rt, "one runtime per process");
    CHECK(rt && strstr(rt->lib.path, "fake_cudart") != NULL, "path %s", rt ? rt->lib.path : "");
    CHECK(mlc_gpurt_peek(MLC_GPU_HIP) == NULL, "HIP loaded without being asked for");
    const mlc_nccl_api_t *api = NULL;
    CHECK_OK(mlc_nccl_api_get(MLC_NCCL_FLAVOR_NCCL, &api));
    CHECK(api && api == mlc_nccl_api_peek(MLC_NCCL_FLAVOR_NCCL), "NCCL cache");
}

static void test_system(void)
{
    /* Whatever this machine has: a loaded runtime with devices, or a reason. */
    const mlc_gpurt_t *rt;
    mlc_status_t st = mlc_gpurt_get(MLC_GPU_CUDA, &rt);
    if (st != MLC_SUCCESS) {
        CHECK(st == MLC_ERR_UNAVAILABLE && strstr(mlc_last_error(), "CUDA runtime"), "%s", mlc_last_error());
        printf("CUDA runtime: %s\n", mlc_last_error());
        return;
    }
    int n = 0;
    st = mlc_gpurt_device_count(rt, &n);
    if (st == MLC_SUCCESS) {
        CHECK(n > 0, "device count %d", n);
        printf("CUDA runtime %s: %d device(s)\n", rt->lib.path, n);
    } else {
        CHECK(strstr(mlc_last_error(), "cudaGetDeviceCount: ") != NULL, "%s", mlc_last_error());
        printf("CUDA runtime %s: %s\n", rt->lib.path, mlc_last_error());
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "paths";
    if (strcmp(mode, "paths") == 0) test_paths();
    else if (strcmp(mode, "env-missing") == 0) test_env_missing();
    else if (strcmp(mode, "env-fake") == 0) test_env_fake();
    else if (strcmp(mode, "system") == 0) test_system();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return unit_result(mode);
}
