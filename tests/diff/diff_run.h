/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One operation of a step on this rank: its buffers, its requests (or the
 * statuses of its blocking calls) and what each must end as.
 */
#ifndef MLC_DIFF_RUN_H
#define MLC_DIFF_RUN_H
#include "diff.h"

typedef struct diff_req {
    mlc_request_t *req; /* pending; NULL once complete (or never started) */
    bool done;
    mlc_status_t want, got;
    bool check_msg;
    mlc_msg_status_t msg, msg_want;
    char what[40];
} diff_req_t;

typedef struct diff_run {
    const diff_op_t *op;
    diff_comm_t *c;
    const char *algo; /* forced for this operation, or NULL */
    diff_buf_t *bufs;
    int nbuf, capbuf;
    diff_req_t *reqs;
    int nreq, capreq;
    size_t *v; /* v-layout arrays */
    char fail[768];
} diff_run_t;

/* Prepare the buffers and start (or run, when blocking) op on this rank. */
void diff_run_start(diff_run_t *r, const diff_op_t *op, diff_comm_t *c);
/* After every request completed: statuses, message statuses, buffers. 0 = all as expected. */
int diff_run_verify(diff_run_t *r);
void diff_run_free(diff_run_t *r);
#endif
