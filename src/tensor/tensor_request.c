/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tensor requests: a small wrapper around the core requests of one tensor
 * operation. Its wait/test waits the inner requests and then runs the
 * operation's finishing step (moving gathered shards from the staging
 * buffer into place), which is why it is a type of its own and not an
 * mlc_request_t.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/error.h"
#include "tensor_internal.h"

static mlc_request_t **inner_array(mlc_tensor_request_t *r)
{
    return r->heap_inner ? r->heap_inner : r->inline_inner;
}

mlc_status_t mlc_treq_begin(mlc_tensor_request_t *stack, bool async, const char *fn,
                            mlc_tensor_request_t **out)
{
    mlc_tensor_request_t *r = stack;
    if (async) {
        r = malloc(sizeof *r);
        if (!r) return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for the request", fn);
    }
    memset(r, 0, sizeof *r);
    r->cap = MLC_TREQ_INLINE;
    r->async = async;
    r->heap = async;
    *out = r;
    return MLC_SUCCESS;
}

mlc_status_t mlc_treq_reserve(mlc_tensor_request_t *r, int n, const char *fn)
{
    if (n <= r->cap || !r->async) return MLC_SUCCESS; /* blocking calls keep no inner requests */
    r->heap_inner = calloc((size_t)n, sizeof *r->heap_inner);
    if (!r->heap_inner)
        return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for %d inner requests", fn, n);
    r->cap = n;
    return MLC_SUCCESS;
}

mlc_request_t **mlc_treq_out(mlc_tensor_request_t *r)
{
    if (!r->async) return NULL;
    /* A start that fails leaves its handle NULL (outputs are written only on
     * success), and waiting a NULL handle is a no-op. */
    return &inner_array(r)[r->ninner++];
}

void mlc_treq_note(mlc_tensor_request_t *r, mlc_status_t st)
{
    if (st == MLC_SUCCESS || r->status != MLC_SUCCESS) return;
    r->status = st;
    snprintf(r->errmsg, sizeof r->errmsg, "%s", mlc_last_error());
}

/* Free what the wrapper owns (not the wrapper). */
static void release_storage(mlc_tensor_request_t *r)
{
    free(r->staging);
    free(r->vec);
    free(r->parts);
    free(r->heap_inner);
    r->staging = NULL;
    r->vec = NULL;
    r->parts = NULL;
    r->heap_inner = NULL;
}

/* Every inner request is done: run the finishing step and release storage. */
static mlc_status_t finish(mlc_tensor_request_t *r)
{
    if (r->status == MLC_SUCCESS && r->has_unpack)
        mlc_tcopy_run(&r->unpack, r->unpack_src, r->unpack_dst);
    release_storage(r);
    if (r->status != MLC_SUCCESS) mlc_error_set_text(r->errmsg);
    return r->status;
}

static mlc_status_t complete(mlc_tensor_request_t *r)
{
    mlc_request_t **inner = inner_array(r);
    for (int i = 0; i < r->ninner; i++) {
        if (inner[i]) mlc_treq_note(r, mlc_request_wait(&inner[i]));
    }
    return finish(r);
}

mlc_status_t mlc_treq_end(mlc_tensor_request_t *r, mlc_status_t st, mlc_tensor_request_t **req)
{
    if (st != MLC_SUCCESS) {
        char msg[384];
        snprintf(msg, sizeof msg, "%s", mlc_last_error());
        r->has_unpack = false;
        complete(r); /* what was started must still be waited before its buffers go */
        if (r->heap) free(r);
        mlc_error_set_text(msg);
        return st;
    }
    if (!r->async) return complete(r);
    *req = r;
    return MLC_SUCCESS;
}

MLC_API mlc_status_t mlc_tensor_request_wait(mlc_tensor_request_t **req)
{
    mlc_error_clear();
    if (!req) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_request_wait: req is NULL");
    mlc_tensor_request_t *r = *req;
    if (!r) return MLC_SUCCESS;
    mlc_status_t st = complete(r);
    free(r);
    *req = NULL;
    return st;
}

MLC_API mlc_status_t mlc_tensor_request_test(mlc_tensor_request_t **req, int *done)
{
    mlc_error_clear();
    if (!req || !done)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_request_test: %s is NULL",
                         !req ? "req" : "done");
    mlc_tensor_request_t *r = *req;
    if (!r) {
        *done = 1;
        return MLC_SUCCESS;
    }
    mlc_request_t **inner = inner_array(r);
    bool pending = false;
    for (int i = 0; i < r->ninner; i++) {
        if (!inner[i]) continue;
        int d = 0;
        mlc_status_t st = mlc_request_test(&inner[i], &d);
        if (d) {
            mlc_treq_note(r, st);
        } else if (st != MLC_SUCCESS) {
            /* Still pending, but the communicator failed: report it now;
             * the request stays valid for a later wait. */
            *done = 0;
            return st;
        } else {
            pending = true;
        }
    }
    if (pending) {
        *done = 0;
        return MLC_SUCCESS;
    }
    mlc_status_t st = finish(r);
    free(r);
    *req = NULL;
    *done = 1;
    return st;
}

MLC_API mlc_status_t mlc_tensor_request_wait_all(size_t n, mlc_tensor_request_t **reqs,
                                                 mlc_status_t *statuses)
{
    mlc_error_clear();
    if (n > 0 && !reqs)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_request_wait_all: reqs is NULL with n = %zu",
                         n);
    mlc_status_t first = MLC_SUCCESS;
    char msg[384] = "";
    for (size_t i = 0; i < n; i++) {
        mlc_status_t st = mlc_tensor_request_wait(&reqs[i]);
        if (statuses) statuses[i] = st;
        if (st != MLC_SUCCESS && first == MLC_SUCCESS) {
            first = st;
            snprintf(msg, sizeof msg, "%s", mlc_last_error());
        }
    }
    if (first != MLC_SUCCESS) mlc_error_set_text(msg);
    else mlc_error_clear();
    return first;
}
