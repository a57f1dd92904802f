/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU-direct capabilities of this machine, each with the evidence it was
 * decided on (what the C# specification's GPUDirectManager describes, for real):
 *  - RDMA: a NIC reads and writes GPU memory directly. Needs the peer-memory
 *    kernel module (nvidia_peermem, or the older nv_peer_mem) and an
 *    InfiniBand/RoCE device.
 *  - peer access: GPUs of this host read each other's memory
 *    (cudaDeviceCanAccessPeer for every pair).
 *  - CUDA-aware MPI: the MPI library takes device pointers. Only the MPI
 *    module can tell; it reports through mlc_gpudirect_set_mpi().
 *  - IPC: processes of this host map each other's device memory
 *    (cudaIpcGetMemHandle / cudaIpcOpenMemHandle present and a device).
 */
#ifndef MLC_GPU_GPUDIRECT_H
#define MLC_GPU_GPUDIRECT_H
#include "gpu/gpurt.h"
#include "mlcomm.h"

#define MLC_GPUDIRECT_EVIDENCE 512

/* Tri-state: yes, no, or not known (e.g. no runtime to ask). */
typedef enum mlc_capability { MLC_CAP_NO = 0, MLC_CAP_YES = 1, MLC_CAP_UNKNOWN = -1 } mlc_capability_t;
const char *mlc_capability_name(mlc_capability_t c);

typedef struct mlc_gpudirect {
    mlc_capability_t rdma;
    char rdma_evidence[MLC_GPUDIRECT_EVIDENCE];
    mlc_capability_t peer_access;
    char peer_evidence[MLC_GPUDIRECT_EVIDENCE];
    mlc_capability_t cuda_aware_mpi;
    char mpi_evidence[MLC_GPUDIRECT_EVIDENCE];
    mlc_capability_t ipc;
    char ipc_evidence[MLC_GPUDIRECT_EVIDENCE];
} mlc_gpudirect_t;

/*
 * Detect everything. `rt` may be NULL (no runtime: peer access and IPC are
 * UNKNOWN with the reason). `sysroot` prefixes /proc and /sys (NULL or ""
 * for the real ones; tests pass a directory tree of their own).
 */
void mlc_gpudirect_detect(const mlc_gpurt_t *rt, const char *sysroot, mlc_gpudirect_t *out);

/* Hook for the MPI module: whether its MPI is CUDA-aware and how it knows. */
void mlc_gpudirect_set_mpi(mlc_capability_t aware, const char *evidence);
#endif
