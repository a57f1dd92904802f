/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What mlcomm-info prints about GPUs: runtimes (CUDA, HIP) with versions
 * and paths, every device, NCCL and RCCL with version and path, the pinned
 * memory pool's settings, and every GPU-direct capability with its
 * evidence. Loads the GPU libraries (mlcomm-info may pay for that).
 */
#ifndef MLC_GPU_REPORT_H
#define MLC_GPU_REPORT_H
#include <stdio.h>

void mlc_gpu_report(FILE *f);
#endif
