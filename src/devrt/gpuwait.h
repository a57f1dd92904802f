/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Waiting for the work queued on a GPU stream, through the one wait loop
 * (base/wait.h): an event recorded on the stream is polled, so the wait
 * has MLC_TIMEOUT like every other and never blocks inside the runtime.
 */
#ifndef MLC_DEVRT_GPUWAIT_H
#define MLC_DEVRT_GPUWAIT_H
#include "gpurt.h"

/* Wait until everything queued on `stream` before this call is done.
 * timeout_s <= 0: no limit. Errors: BACKEND (a runtime call failed, named),
 * TIMEOUT ("<what>: the GPU work ... did not finish in N s"). After an error
 * the work may still be queued and run later: the caller must not free or
 * reuse memory it reads or writes (exchange/exec_p2p.c keeps it for good). */
mlc_status_t mlc_gpu_stream_wait(const mlc_gpurt_t *rt, void *stream, double timeout_s, const char *what);
#endif
