/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_group_end on nccl / rccl: the group's operations were validated and
 * deferred at their start (mlc_nccl_start); here every one of them, on
 * every communicator of the group, goes inside ONE NCCL group, so that
 * send/receive pairs which would wait for each other one by one complete
 * (NCCL posts a group's operations together). Then, as for any operation,
 * each is followed by its completion event. NCCL answering ncclInProgress
 * (a non-blocking communicator that cannot enqueue yet) is waited per
 * communicator with its timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_impl.h"
#include "base/error.h"

/* One deferred operation being issued. */
typedef struct group_item {
    mlc_request_t *req;
    nccl_comm_t *impl;
    const nccl_op_desc_t *d;
    nccl_issue_t c;
    mlc_status_t st;   /* its own failure (validation, staging) */
    bool issued;       /* it reached NCCL */
} group_item_t;

mlc_request_t *mlc_nccl_deferred_take(nccl_comm_t *impl)
{
    mlc_request_t *head = impl->deferred_head;
    impl->deferred_head = impl->deferred_tail = NULL;
    return head;
}

/* Complete a request that never reached the stream. */
static void fail_item(group_item_t *it, mlc_status_t st, const char *msg)
{
    char what[64];
    snprintf(what, sizeof what, "%s", mlc_coll_name(it->req->coll));
    mlc_nccl_issue_abandon(&it->c, nccl_req(it->req), what);
    mlc_request_complete(it->req, st, "%s", msg);
}

/* Describe the first operations of comm's part of the group, for messages. */
static void describe(const group_item_t *items, int n, const mlc_comm_t *comm, char *buf, size_t len)
{
    int count = 0;
    for (int i = 0; i < n; i++) count += items[i].req->comm == comm;
    size_t off = (size_t)snprintf(buf, len, "a group of %d operation%s (", count, count == 1 ? "" : "s");
    int shown = 0;
    for (int i = 0; i < n && off < len; i++) {
        const mlc_request_t *r = items[i].req;
        if (r->comm != comm) continue;
        if (shown == 3) {
            off += (size_t)snprintf(buf + off, len - off, ", ...");
            break;
        }
        bool p2p = r->coll == MLC_COLL_SEND || r->coll == MLC_COLL_RECV;
        off += (size_t)snprintf(buf + off, len - off, "%s%s", shown ? ", " : "", mlc_coll_name(r->coll));
        if (p2p && off < len)
            off += (size_t)snprintf(buf + off, len - off, " %s %d", r->coll == MLC_COLL_SEND ? "to" : "from",
                                    r->args.root);
        shown++;
    }
    if (off < len) snprintf(buf + off, len - off, ")");
}

/* Every deferred request of the communicators using `api`, in one NCCL group. */
static mlc_status_t flush_api(const mlc_nccl_api_t *api, mlc_comm_t *const *comms, int ncomms,
                              char *first_msg, size_t msg_len)
{
    int n = 0;
    for (int i = 0; i < ncomms; i++) {
        nccl_comm_t *impl = comms[i]->impl;
        if (impl->api != api) continue;
        for (mlc_request_t *r = impl->deferred_head; r; r = nccl_req(r)->next) n++;
    }
    if (n == 0) return MLC_SUCCESS;
    group_item_t *items = calloc((size_t)n, sizeof *items);
    mlc_status_t first = MLC_SUCCESS;
    if (!items) {
        first = mlc_error(MLC_ERR_NO_MEMORY, "%s: out of memory for a group of %d operations", api->name, n);
        for (int i = 0; i < ncomms; i++) {
            nccl_comm_t *impl = comms[i]->impl;
            if (impl->api != api) continue;
            pthread_mutex_lock(&impl->lock);
            mlc_request_t *r = mlc_nccl_deferred_take(impl);
            pthread_mutex_unlock(&impl->lock);
            for (mlc_request_t *next; r; r = next) {
                next = nccl_req(r)->next;
                mlc_request_complete(r, first, "%s", mlc_last_error());
            }
        }
        snprintf(first_msg, msg_len, "%s", mlc_last_error());
        return first;
    }
    /* Take the lists first: preparing a request again resets its links. */
    int k = 0;
    for (int i = 0; i < ncomms; i++) {
        nccl_comm_t *impl = comms[i]->impl;
        if (impl->api != api) continue;
        pthread_mutex_lock(&impl->lock);
        for (mlc_request_t *r = mlc_nccl_deferred_take(impl), *next; r; r = next) {
            next = nccl_req(r)->next;
            items[k].req = r;
            items[k++].impl = impl;
        }
        pthread_mutex_unlock(&impl->lock);
    }
    n = k; /* an abort in between may have taken some */

    mlc_ncclResult_t gr = api->ncclGroupStart();
    int reached = 0; /* items looked at; those after a failed enqueue are failed below */
    for (int i = 0; i < n && gr == mlc_ncclSuccess; i++) {
        reached = i + 1;
        group_item_t *it = &items[i];
        nccl_comm_t *impl = it->impl;
        it->st = mlc_nccl_prepare(impl, it->req, &it->d, &it->c);
        if (it->st != MLC_SUCCESS) {
            fail_item(it, it->st, mlc_last_error());
            continue;
        }
        int prev;
        it->st = mlc_nccl_dev_enter(impl, &prev);
        if (it->st != MLC_SUCCESS) {
            fail_item(it, it->st, mlc_last_error());
            continue;
        }
        /* The group's operations run at once: each stages into its own part
         * of the communicator's scratch (one by one, stream order lets them share it). */
        for (int j = i - 1; j >= 0; j--)
            if (items[j].impl == impl && items[j].issued) {
                it->c.scratch_off = items[j].c.scratch_off;
                break;
            }
        pthread_mutex_lock(&impl->lock);
        if (impl->nc) {
            it->c.nc = impl->nc;
            it->c.stream = impl->stream;
            mlc_ncclResult_t r = mlc_nccl_enqueue(&it->c, it->d, it->req, &it->st);
            it->issued = it->st == MLC_SUCCESS;
            if (r != mlc_ncclSuccess && r != mlc_ncclInProgress) gr = r;
        } else {
            it->st = mlc_error(MLC_ERR_ABORTED, "%s %s: communicator aborted", impl->fl->name,
                               mlc_coll_name(it->req->coll));
        }
        pthread_mutex_unlock(&impl->lock);
        mlc_nccl_dev_leave(impl, prev);
        if (it->st != MLC_SUCCESS) fail_item(it, it->st, mlc_last_error());
    }
    /* The group must be closed even when a member failed. */
    mlc_ncclResult_t ge = api->ncclGroupEnd();
    if (gr == mlc_ncclSuccess && ge != mlc_ncclInProgress) gr = ge;
    /* Never handed to NCCL: NCCL refused an earlier one of the group. */
    for (int i = reached; i < n; i++) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s %s: not issued: the NCCL group failed at its operation %d of %d (%s)",
                 items[i].impl->fl->name, mlc_coll_name(items[i].req->coll), reached, n,
                 api->ncclGetErrorString(gr));
        mlc_request_complete(items[i].req, MLC_ERR_BACKEND, "%s", msg);
        if (first == MLC_SUCCESS) {
            first = MLC_ERR_BACKEND;
            snprintf(first_msg, msg_len, "%s", msg);
        }
    }

    /* Per communicator: wait until NCCL has its part, or fail its part. */
    for (int i = 0; i < ncomms; i++) {
        mlc_comm_t *comm = comms[i];
        nccl_comm_t *impl = comm->impl;
        if (impl->api != api) continue;
        bool any = false;
        for (int j = 0; j < n; j++) any |= items[j].issued && items[j].req->comm == comm;
        if (!any) continue;
        char what[200];
        describe(items, n, comm, what, sizeof what);
        mlc_status_t st;
        if (gr != mlc_ncclSuccess) {
            st = mlc_nccl_result(impl, comm, gr, what);
        } else {
            pthread_mutex_lock(&impl->lock);
            mlc_ncclComm_t nc = impl->nc;
            pthread_mutex_unlock(&impl->lock);
            st = nc ? mlc_nccl_wait_ready(api, nc, impl, comm, what, mlc_nccl_timeout(comm))
                    : mlc_error(MLC_ERR_ABORTED, "%s %s: communicator aborted", impl->fl->name, what);
            if (st != MLC_SUCCESS && st != MLC_ERR_ABORTED) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", mlc_last_error());
                st = mlc_nccl_fail(impl, comm, st, msg);
            }
        }
        char msg[512];
        snprintf(msg, sizeof msg, "%s", st != MLC_SUCCESS ? mlc_last_error() : "");
        for (int j = 0; j < n; j++) {
            group_item_t *it = &items[j];
            if (!it->issued || it->req->comm != comm) continue;
            int e = it->c.gpu_err;
            if (st == MLC_SUCCESS) {
                pthread_mutex_lock(&impl->lock);
                if (!impl->nc) st = mlc_error(MLC_ERR_ABORTED, "%s %s: communicator aborted", impl->fl->name, what);
                else if (e == MLC_GPU_SUCCESS) e = mlc_nccl_finish_enqueue(&it->c, nccl_req(it->req), it->req);
                pthread_mutex_unlock(&impl->lock);
                if (st == MLC_SUCCESS && e == MLC_GPU_SUCCESS) continue; /* on the pending list */
                if (st == MLC_SUCCESS) {
                    char buf[256];
                    impl->rt->get_last_error();
                    it->st = mlc_error(MLC_ERR_BACKEND, "%s %s: %s%s: %s", impl->fl->name,
                                       mlc_coll_name(it->req->coll), impl->rt->prefix,
                                       it->c.gpu_fn ? it->c.gpu_fn : "?",
                                       mlc_gpurt_strerror(impl->rt, e, buf, sizeof buf));
                    fail_item(it, it->st, mlc_last_error());
                    if (first == MLC_SUCCESS) {
                        first = it->st;
                        snprintf(first_msg, msg_len, "%s", mlc_last_error());
                    }
                    continue;
                }
                snprintf(msg, sizeof msg, "%s", mlc_last_error());
            }
            it->st = st;
            fail_item(it, st, msg);
        }
        if (st != MLC_SUCCESS && first == MLC_SUCCESS) {
            first = st;
            snprintf(first_msg, msg_len, "%s", msg);
        }
    }
    for (int i = 0; i < n && first == MLC_SUCCESS; i++)
        if (items[i].st != MLC_SUCCESS && !items[i].issued) {
            first = items[i].st;
            snprintf(first_msg, msg_len, "%s", items[i].req->errmsg);
        }
    free(items);
    return first;
}

mlc_status_t mlc_nccl_group_end(mlc_comm_t *const *comms, int ncomms)
{
    mlc_status_t first = MLC_SUCCESS;
    char first_msg[512] = "";
    for (int i = 0; i < ncomms; i++) {
        const mlc_nccl_api_t *api = ((nccl_comm_t *)comms[i]->impl)->api;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = ((nccl_comm_t *)comms[j]->impl)->api == api;
        if (seen) continue;
        char msg[512] = "";
        mlc_status_t st = flush_api(api, comms, ncomms, msg, sizeof msg);
        if (st != MLC_SUCCESS && first == MLC_SUCCESS) {
            first = st;
            snprintf(first_msg, sizeof first_msg, "%s", msg);
        }
    }
    if (first != MLC_SUCCESS) return mlc_error(first, "%s", first_msg);
    return MLC_SUCCESS;
}
