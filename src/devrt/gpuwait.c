/* SPDX-License-Identifier: BSD-3-Clause */
/* Waiting for a GPU stream through the one wait loop (see gpuwait.h). */
#include "gpuwait.h"
#include "base/error.h"
#include "base/wait.h"

typedef struct stream_wait {
    const mlc_gpurt_t *rt;
    void *event;
    int error; /* the runtime's error code once a query failed */
    int done;
} stream_wait_t;

static int query_step(void *ctx)
{
    stream_wait_t *w = ctx;
    int e = w->rt->event_query(w->event);
    if (e == MLC_GPU_ERROR_NOT_READY) return MLC_WAIT_NOTHING;
    if (e != MLC_GPU_SUCCESS) {
        w->error = e;
        return MLC_WAIT_STOP;
    }
    w->done = 1;
    return MLC_WAIT_MOVED;
}

static int query_done(void *ctx) { return ((stream_wait_t *)ctx)->done; }

static mlc_status_t failed(const mlc_gpurt_t *rt, int e, const char *call, const char *what)
{
    char buf[256];
    rt->get_last_error();
    return mlc_error(MLC_ERR_BACKEND, "%s: %s%s: %s", what, rt->prefix, call, mlc_gpurt_strerror(rt, e, buf, sizeof buf));
}

mlc_status_t mlc_gpu_stream_wait(const mlc_gpurt_t *rt, void *stream, double timeout_s, const char *what)
{
    stream_wait_t w = {.rt = rt};
    int e = rt->event_create_with_flags(&w.event, MLC_GPU_EVENT_DISABLE_TIMING);
    if (e != MLC_GPU_SUCCESS) return failed(rt, e, "EventCreateWithFlags", what);
    e = rt->event_record(w.event, stream);
    if (e != MLC_GPU_SUCCESS) {
        rt->event_destroy(w.event);
        return failed(rt, e, "EventRecord", what);
    }
    /* GPU work gives no wake-up event: spin briefly, then back off up to 1 ms. */
    mlc_wait_t loop = {.step = query_step, .done = query_done, .ctx = &w, .timeout_s = timeout_s,
                       .what = what, .spin_s = 50e-6, .yield_s = 50e-6};
    mlc_wait_status_t ws = mlc_wait_run(&loop);
    rt->event_destroy(w.event);
    if (ws == MLC_WAIT_DONE) return MLC_SUCCESS;
    if (ws == MLC_WAIT_STOPPED) return failed(rt, w.error, "EventQuery", what);
    return mlc_error(MLC_ERR_TIMEOUT, "%s: the GPU work queued on the stream did not finish in %.0f s (MLC_TIMEOUT)",
                     what, timeout_s);
}
