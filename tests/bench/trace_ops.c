/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One rank of the profiler test: run the operations of trace_ops.h (one of
 * the allreduces non-blocking) with MLC_PROFILE set by the caller.
 *   trace_ops            run them, exit 0
 *   trace_ops --kill DIR run them, then die without closing the trace:
 *                        rank 0 marks DIR/done and waits to be killed by the
 *                        launcher, the last rank SIGKILLs itself once it sees
 *                        the mark (so every rank has finished every operation)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlcomm.h"
#include "trace_ops.h"

#define COUNT 1024 /* floats per rank */

static int fail(const char *what, mlc_status_t st)
{
    fprintf(stderr, "trace_ops: %s: %s: %s\n", what, mlc_status_name(st), mlc_last_error());
    return 1;
}

/* Run `name` once; 0 or 1. */
static int run_op(mlc_comm_t *comm, const char *name, int nth, float *a, float *b)
{
    int p = mlc_comm_size(comm), rank = mlc_comm_rank(comm);
    size_t part = COUNT / (size_t)p;
    mlc_status_t st;
    if (strcmp(name, "allreduce") == 0 && nth == 0) {
        mlc_request_t *req = NULL;
        st = mlc_allreduce(a, b, COUNT, MLC_FLOAT32, MLC_SUM, comm, &req);
        if (st == MLC_SUCCESS) st = mlc_request_wait(&req);
    } else if (strcmp(name, "allreduce") == 0) {
        st = mlc_allreduce(a, b, COUNT >> nth, MLC_FLOAT32, MLC_SUM, comm, NULL);
    } else if (strcmp(name, "broadcast") == 0) {
        st = mlc_broadcast(a, b, COUNT, MLC_FLOAT32, nth % p, comm, NULL);
    } else if (strcmp(name, "allgather") == 0) {
        st = mlc_allgather(a, b, part, MLC_FLOAT32, comm, NULL);
    } else if (strcmp(name, "reduce_scatter") == 0) {
        st = mlc_reduce_scatter(a, b, part, MLC_FLOAT32, MLC_SUM, comm, NULL);
    } else if (strcmp(name, "barrier") == 0) {
        st = mlc_barrier(comm, NULL);
    } else if (strcmp(name, "sendrecv") == 0) {
        st = mlc_sendrecv(a, COUNT, (rank + 1) % p, 7, b, COUNT, (rank + p - 1) % p, 7, MLC_FLOAT32,
                          comm, NULL, NULL);
    } else {
        fprintf(stderr, "trace_ops: no way to run '%s'\n", name);
        return 1;
    }
    return st == MLC_SUCCESS ? 0 : fail(name, st);
}

int main(int argc, char **argv)
{
    const char *kill_dir = argc == 3 && strcmp(argv[1], "--kill") == 0 ? argv[2] : NULL;
    if (argc != 1 && !kill_dir) {
        fprintf(stderr, "usage: trace_ops [--kill DIR]\n");
        return 2;
    }
    mlc_comm_t *comm;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st != MLC_SUCCESS) return fail("mlc_comm_init", st);
    float *a = calloc(COUNT, sizeof *a), *b = calloc(COUNT, sizeof *b);
    int rc = a && b ? 0 : 1;
#define MLC_X_RUN(name, times) \
    for (int k = 0; k < (times) && rc == 0; k++) rc = run_op(comm, #name, k, a, b);
    MLC_TRACE_TEST_OPS(MLC_X_RUN)
#undef MLC_X_RUN
    free(a);
    free(b);
    if (rc != 0 || !kill_dir) {
        if (rc != 0) mlc_comm_abort(comm);
        mlc_comm_free(comm);
        return rc;
    }
    /* --kill: end with the trace files open. */
    char mark[4096];
    snprintf(mark, sizeof mark, "%s/done", kill_dir);
    if (mlc_comm_rank(comm) == 0) {
        FILE *f = fopen(mark, "w");
        if (!f) {
            perror("trace_ops: creating the mark");
            return 1;
        }
        fclose(f);
        sleep(60); /* the launcher kills us first */
        fprintf(stderr, "trace_ops: rank 0 was not stopped after its peer died\n");
        return 1;
    }
    if (mlc_comm_rank(comm) == mlc_comm_size(comm) - 1) {
        for (int waited = 0; access(mark, F_OK) != 0; waited++) {
            if (waited > 6000) {
                fprintf(stderr, "trace_ops: rank 0 never marked %s\n", mark);
                return 1;
            }
            usleep(10000);
        }
        raise(SIGKILL);
    }
    sleep(60);
    return 1;
}
