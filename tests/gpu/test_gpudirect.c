/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU-direct detection against a fake /proc and /sys tree and the fake CUDA
 * runtime (MLC_CUDART_LIB), plus the CUDA-aware-MPI hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../unit/unit.h"
#include "devrt/gpudirect.h"

static char root[256];

static void mkdirs(const char *rel)
{
    char path[512], *p;
    snprintf(path, sizeof path, "%s%s", root, rel);
    for (p = path + strlen(root) + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    }
    mkdir(path, 0700);
}

static void write_file(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s", root, rel);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/mlc-gpudirect-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 2;
    }
    mlc_gpudirect_t g;

    /* Nothing at all, no runtime. */
    mlc_gpudirect_detect(NULL, root, &g);
    CHECK(g.rdma == MLC_CAP_NO, "rdma %s", mlc_capability_name(g.rdma));
    CHECK(strstr(g.rdma_evidence, "no peer-memory module") && strstr(g.rdma_evidence, "no InfiniBand"),
          "evidence: %s", g.rdma_evidence);
    CHECK(g.peer_access == MLC_CAP_UNKNOWN && strstr(g.peer_evidence, "no GPU runtime"), "%s", g.peer_evidence);
    CHECK(g.ipc == MLC_CAP_UNKNOWN, "ipc %s", mlc_capability_name(g.ipc));
    CHECK(g.cuda_aware_mpi == MLC_CAP_UNKNOWN && strstr(g.mpi_evidence, "MPI module has not reported"),
          "%s", g.mpi_evidence);

    /* An InfiniBand device but no peer-memory module: still no. */
    mkdirs("/sys/class/infiniband/mlx5_0");
    mkdirs("/proc");
    write_file("/proc/modules", "ib_core 1 0 - Live 0x0\nnvidia 2 0 - Live 0x0\n");
    mlc_gpudirect_detect(NULL, root, &g);
    CHECK(g.rdma == MLC_CAP_NO && strstr(g.rdma_evidence, "mlx5_0"), "%s", g.rdma_evidence);

    /* nvidia_peermem in /proc/modules + a device: yes. A prefix match must not count. */
    write_file("/proc/modules", "nvidia_peermem_x 1 0 - Live 0x0\n");
    mlc_gpudirect_detect(NULL, root, &g);
    CHECK(g.rdma == MLC_CAP_NO, "a module name prefix was taken for nvidia_peermem");
    write_file("/proc/modules", "ib_core 1 0 - Live 0x0\nnvidia_peermem 16384 0 - Live 0x0\n");
    mlc_gpudirect_detect(NULL, root, &g);
    CHECK(g.rdma == MLC_CAP_YES, "rdma %s: %s", mlc_capability_name(g.rdma), g.rdma_evidence);
    CHECK(strstr(g.rdma_evidence, "nvidia_peermem loaded (/proc/modules)"), "%s", g.rdma_evidence);

    /* The older nv_peer_mem, seen only in /sys/module. */
    write_file("/proc/modules", "");
    mkdirs("/sys/module/nv_peer_mem");
    mlc_gpudirect_detect(NULL, root, &g);
    CHECK(g.rdma == MLC_CAP_YES && strstr(g.rdma_evidence, "nv_peer_mem loaded (/sys/module)"), "%s",
          g.rdma_evidence);

    /* Peer access and IPC through the (fake) CUDA runtime. */
    const mlc_gpurt_t *rt;
    CHECK_OK(mlc_gpurt_get(MLC_GPU_CUDA, &rt));
    setenv("FAKE_CUDA_DEVICES", "1", 1);
    mlc_gpudirect_detect(rt, root, &g);
    CHECK(g.peer_access == MLC_CAP_NO && strstr(g.peer_evidence, "no pair"), "%s", g.peer_evidence);
    CHECK(g.ipc == MLC_CAP_YES && strstr(g.ipc_evidence, "1 device"), "%s", g.ipc_evidence);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    mlc_gpudirect_detect(rt, root, &g);
    CHECK(g.peer_access == MLC_CAP_YES && strstr(g.peer_evidence, "2 of 2 device pairs"), "%s", g.peer_evidence);
    setenv("FAKE_CUDA_PEER", "0", 1);
    mlc_gpudirect_detect(rt, root, &g);
    CHECK(g.peer_access == MLC_CAP_NO && strstr(g.peer_evidence, "0->1 no"), "%s", g.peer_evidence);
    setenv("FAKE_CUDA_DEVICES", "0", 1);
    mlc_gpudirect_detect(rt, root, &g);
    CHECK(g.peer_access == MLC_CAP_UNKNOWN && strstr(g.peer_evidence, "cudaErrorNoDevice"), "%s", g.peer_evidence);
    CHECK(g.ipc == MLC_CAP_NO && strstr(g.ipc_evidence, "no device"), "%s", g.ipc_evidence);
    unsetenv("FAKE_CUDA_DEVICES");
    unsetenv("FAKE_CUDA_PEER");

    /* The MPI module's report is passed through. */
    mlc_gpudirect_set_mpi(MLC_CAP_YES, "MPIX_Query_cuda_support() = 1");
    mlc_gpudirect_detect(rt, root, &g);
    CHECK(g.cuda_aware_mpi == MLC_CAP_YES && strcmp(g.mpi_evidence, "MPIX_Query_cuda_support() = 1") == 0,
          "%s", g.mpi_evidence);

    /* The real machine: must not crash, every field decided with evidence. */
    mlc_gpudirect_detect(rt, NULL, &g);
    CHECK(g.rdma_evidence[0] && g.peer_evidence[0] && g.ipc_evidence[0], "empty evidence on this machine");
    printf("this machine: RDMA %s (%s)\n", mlc_capability_name(g.rdma), g.rdma_evidence);
    cleanup();
    return unit_result("gpudirect");
}
