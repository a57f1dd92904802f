/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Check a merged trace (mlcomm-trace's output) of a trace_ops job:
 *   trace_check MERGED.json NRANKS
 * The file must parse as JSON, be {"traceEvents": [...]}, name every rank
 * 0..NRANKS-1 once (process_name; other metadata such as a communicator's
 * thread_name may come with it), and hold for every rank exactly the
 * operations of trace_ops.h: one complete ("X") event each, with bytes,
 * algorithm, sequence number and a successful status. Exit 0 or 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_parse.h"
#include "trace_ops.h"

#define MAX_RANKS 64

static const char *const op_names[] = {
#define MLC_X_NAME(name, times) #name,
    MLC_TRACE_TEST_OPS(MLC_X_NAME)
#undef MLC_X_NAME
};
static const int op_times[] = {
#define MLC_X_TIMES(name, times) times,
    MLC_TRACE_TEST_OPS(MLC_X_TIMES)
#undef MLC_X_TIMES
};
#define NOPS ((int)(sizeof op_times / sizeof op_times[0]))

static bool is_type(const json_t *v, json_type_t t) { return v && v->type == t; }

/* One "X" event: its fields, and which (rank, op) it counts for. */
static int check_event(const json_t *e, size_t index, int nranks, int counts[][NOPS])
{
    const json_t *name = json_get(e, "name"), *pid = json_get(e, "pid"), *args = json_get(e, "args");
    if (!is_type(name, JSON_STRING) || !is_type(pid, JSON_NUMBER) ||
        !is_type(json_get(e, "ts"), JSON_NUMBER) || !is_type(json_get(e, "dur"), JSON_NUMBER) ||
        !is_type(args, JSON_OBJECT)) {
        fprintf(stderr, "trace_check: event %zu lacks name, pid, ts, dur or args\n", index);
        return 1;
    }
    const json_t *status = json_get(args, "status");
    if (!is_type(json_get(args, "bytes"), JSON_NUMBER) || !is_type(json_get(args, "algo"), JSON_STRING) ||
        !is_type(json_get(args, "seq"), JSON_NUMBER) || !is_type(status, JSON_STRING) ||
        strcmp(status->string, "MLC_SUCCESS") != 0) {
        fprintf(stderr, "trace_check: event %zu (%s) lacks bytes, algo, seq or a successful status\n",
                index, name->string);
        return 1;
    }
    int rank = (int)pid->number;
    if (rank < 0 || rank >= nranks || rank != pid->number) {
        fprintf(stderr, "trace_check: event %zu (%s) has pid %g, not a rank of %d\n", index,
                name->string, pid->number, nranks);
        return 1;
    }
    for (int k = 0; k < NOPS; k++)
        if (strcmp(name->string, op_names[k]) == 0) {
            counts[rank][k]++;
            return 0;
        }
    fprintf(stderr, "trace_check: event %zu: rank %d ran no '%s' (not one of trace_ops.h's operations)\n",
            index, rank, name->string);
    return 1;
}

int main(int argc, char **argv)
{
    int nranks = argc == 3 ? atoi(argv[2]) : 0;
    if (nranks < 1 || nranks > MAX_RANKS) {
        fprintf(stderr, "usage: trace_check MERGED.json NRANKS (1..%d)\n", MAX_RANKS);
        return 2;
    }
    size_t len = 0;
    char *text = json_read_file(argv[1], &len);
    if (!text) {
        fprintf(stderr, "trace_check: cannot read %s\n", argv[1]);
        return 1;
    }
    char err[256];
    json_t *root = json_parse(text, len, err, sizeof err);
    free(text);
    if (!root) {
        fprintf(stderr, "trace_check: %s is not valid JSON: %s\n", argv[1], err);
        return 1;
    }
    int bad = 0, counts[MAX_RANKS][NOPS] = {{0}}, named[MAX_RANKS] = {0};
    const json_t *events = json_get(root, "traceEvents");
    if (!is_type(events, JSON_ARRAY)) {
        fprintf(stderr, "trace_check: no traceEvents array\n");
        bad = 1;
    }
    for (size_t i = 0; !bad && i < events->n; i++) {
        const json_t *e = events->items[i], *ph = json_get(e, "ph");
        if (!is_type(ph, JSON_STRING)) {
            fprintf(stderr, "trace_check: event %zu has no phase (ph)\n", i);
            bad = 1;
        } else if (strcmp(ph->string, "X") == 0) {
            bad = check_event(e, i, nranks, counts);
        } else if (strcmp(ph->string, "M") == 0 && is_type(json_get(e, "name"), JSON_STRING) &&
                   strcmp(json_get(e, "name")->string, "process_name") == 0) {
            const json_t *pid = json_get(e, "pid");
            if (is_type(pid, JSON_NUMBER) && pid->number >= 0 && pid->number < nranks) named[(int)pid->number]++;
        }
    }
    for (int r = 0; r < nranks && !bad; r++) {
        if (named[r] != 1) {
            fprintf(stderr, "trace_check: rank %d is named %d times (process_name), expected once\n", r,
                    named[r]);
            bad = 1;
        }
        for (int k = 0; k < NOPS; k++)
            if (counts[r][k] != op_times[k]) {
                fprintf(stderr, "trace_check: rank %d has %d '%s' events, ran it %d times\n", r,
                        counts[r][k], op_names[k], op_times[k]);
                bad = 1;
            }
    }
    json_free(root);
    if (!bad) printf("trace_check: %s: valid JSON, %d ranks, one event per operation per rank\n", argv[1], nranks);
    return bad;
}
