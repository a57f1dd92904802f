/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which GPU a rank uses: one rule for every backend (nccl, rccl, and the
 * staged decorator of threads, shm and mpi). Asking creates no context:
 * cudaGetDevice reports the thread's device without making one.
 */
#include "base/error.h"
#include "gpurt.h"

mlc_status_t mlc_gpu_choose_device(const mlc_gpurt_t *rt, const mlc_cfg_t *cfg, int local_rank, int local_size,
                                   int ndev, int *device)
{
    if (cfg->device >= 0) {
        if (cfg->device >= ndev)
            return mlc_error(MLC_ERR_CONFIG, "MLC_DEVICE=%d: this rank sees %d %s device%s (0 to %d)", cfg->device,
                             ndev, rt->name, ndev == 1 ? "" : "s", ndev - 1);
        *device = cfg->device;
        return MLC_SUCCESS;
    }
    int cur = 0;
    if (rt->get_device(&cur) != MLC_GPU_SUCCESS) {
        rt->get_last_error();
        cur = 0;
    }
    /* A device the caller made current (torch.cuda.set_device) is respected; a
     * thread that chose none reports 0: local rank i then takes device i mod count. */
    if (cur == 0 && local_size > 1 && ndev > 1 && local_rank >= 0) cur = local_rank % ndev;
    *device = cur;
    return MLC_SUCCESS;
}
