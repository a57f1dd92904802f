/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every communicator of a rank lands in that rank's trace, and the file is
 * valid JSON once they are all freed (MLC_PROFILE=trace_comms.%p.%r.json).
 *   trace_comms --threads N   threads backend (ranks are threads of this process)
 *   trace_comms               one rank under mlcomm-run / mpirun
 * Each rank holds two world communicators (W, W2: same rank, same file) and
 * three split ones: A = split(W, 0, rank) (a copy), B = split(W, rank % 2,
 * -rank) (halves, reversed: its ranks are not the world's), C = split(B, 0, 0)
 * (nested). A and B are driven from two threads at once; C runs after W and
 * W2 are freed. Each communicator runs a collective no other one runs, so
 * the rank can tell whose events it reads. Once every communicator is freed,
 * each rank parses its own file with a strict JSON parser (json_parse.c) and
 * checks: a closed array, its rank named once, every operation present with
 * the right count, all events of one communicator on one track (tid) of its
 * own, every track named. With --threads, rank 0 then makes a new
 * communicator: its events are appended to the same file, still valid.
 * The files are removed when they pass, unless TRACE_COMMS_KEEP is set.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "json_parse.h"
#include "mlcomm.h"

#define ITER 60    /* collectives on A and B each, concurrently */
#define MAX_OPS 8
#define MAX_TIDS 32

typedef struct expect {
    const char *name;
    int times;
} expect_t;

static mlc_config_t trace_config(void)
{
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.profile = "trace_comms.%p.%r.json";
    cfg.timeout_s = 60;
    return cfg;
}

static void trace_path(int rank, char *out, size_t len)
{
    snprintf(out, len, "trace_comms.%d.%d.json", (int)getpid(), rank);
}

static int failed(int rank, const char *what, mlc_status_t st)
{
    fprintf(stderr, "[rank %d] %s: %s: %s\n", rank, what, mlc_status_name(st), mlc_last_error());
    return 1;
}

#define RUN(rank, call)                                           \
    do {                                                          \
        mlc_status_t st_ = (call);                                \
        if (st_ != MLC_SUCCESS) return failed(rank, #call, st_);  \
    } while (0)

static bool is_num(const json_t *v) { return v && v->type == JSON_NUMBER; }
static bool is_str(const json_t *v) { return v && v->type == JSON_STRING; }

/* Check rank's trace file against the operations in ex[0..nex). 0 or 1. */
static int check_trace(int rank, const expect_t *ex, int nex)
{
    char path[256], err[256];
    trace_path(rank, path, sizeof path);
    size_t len = 0;
    char *text = json_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "[rank %d] cannot read its trace %s\n", rank, path);
        return 1;
    }
    json_t *root = json_parse(text, len, err, sizeof err);
    free(text);
    if (!root) {
        fprintf(stderr, "[rank %d] %s is not valid JSON (or not closed): %s\n", rank, path, err);
        return 1;
    }
    int bad = 0, named = 0, ntids = 0, counts[MAX_OPS] = {0};
    double tid_of[MAX_OPS], named_tids[MAX_TIDS];
    if (root->type != JSON_ARRAY) {
        fprintf(stderr, "[rank %d] %s is not a JSON array\n", rank, path);
        bad = 1;
    }
    for (size_t i = 0; !bad && i < root->n; i++) {
        const json_t *e = root->items[i], *ph = json_get(e, "ph"), *name = json_get(e, "name");
        const json_t *pid = json_get(e, "pid"), *tid = json_get(e, "tid"), *args = json_get(e, "args");
        if (!is_str(ph) || !is_str(name) || !is_num(pid) || !is_num(tid)) {
            fprintf(stderr, "[rank %d] %s: event %zu lacks ph, name, pid or tid\n", rank, path, i);
            bad = 1;
        } else if (pid->number != rank) {
            fprintf(stderr, "[rank %d] %s: event %zu (%s) has pid %g, not the rank\n", rank, path, i,
                    name->string, pid->number);
            bad = 1;
        } else if (strcmp(ph->string, "M") == 0 && strcmp(name->string, "process_name") == 0) {
            named++;
        } else if (strcmp(ph->string, "M") == 0 && strcmp(name->string, "thread_name") == 0) {
            for (int k = 0; k < ntids; k++)
                if (named_tids[k] == tid->number) {
                    fprintf(stderr, "[rank %d] %s: track %g is named twice\n", rank, path, tid->number);
                    bad = 1;
                }
            if (ntids < MAX_TIDS) named_tids[ntids++] = tid->number;
        } else if (strcmp(ph->string, "X") == 0) {
            const json_t *status = json_get(args, "status");
            int k = 0;
            while (k < nex && strcmp(ex[k].name, name->string) != 0) k++;
            if (k == nex) {
                fprintf(stderr, "[rank %d] %s: event %zu: '%s' was never run\n", rank, path, i, name->string);
                bad = 1;
            } else if (!is_str(status) || strcmp(status->string, "MLC_SUCCESS") != 0 ||
                       !is_num(json_get(e, "ts")) || !is_num(json_get(e, "dur"))) {
                fprintf(stderr, "[rank %d] %s: event %zu (%s) lacks ts, dur or a successful status\n", rank,
                        path, i, name->string);
                bad = 1;
            } else if (counts[k]++ == 0) {
                tid_of[k] = tid->number;
            } else if (tid_of[k] != tid->number) {
                fprintf(stderr, "[rank %d] %s: '%s' events on tracks %g and %g (one communicator, one track)\n",
                        rank, path, name->string, tid_of[k], tid->number);
                bad = 1;
            }
        }
    }
    if (!bad && named != 1) {
        fprintf(stderr, "[rank %d] %s: the rank is named %d times (process_name), expected once\n", rank, path,
                named);
        bad = 1;
    }
    for (int k = 0; k < nex && !bad; k++) {
        if (counts[k] != ex[k].times) {
            fprintf(stderr, "[rank %d] %s: %d '%s' events, ran it %d times\n", rank, path, counts[k], ex[k].name,
                    ex[k].times);
            bad = 1;
            break;
        }
        int has_name = 0;
        for (int t = 0; t < ntids; t++) has_name |= named_tids[t] == tid_of[k];
        if (!has_name) {
            fprintf(stderr, "[rank %d] %s: track %g ('%s') has no thread_name\n", rank, path, tid_of[k],
                    ex[k].name);
            bad = 1;
        }
        for (int j = 0; j < k && !bad; j++)
            if (tid_of[j] == tid_of[k]) {
                fprintf(stderr, "[rank %d] %s: '%s' and '%s' ran on different communicators, yet share track %g\n",
                        rank, path, ex[j].name, ex[k].name, tid_of[k]);
                bad = 1;
            }
    }
    json_free(root);
    if (!bad) printf("[rank %d] %s: valid JSON, %d communicators on their own tracks\n", rank, path, nex);
    return bad;
}

typedef struct drive {
    mlc_comm_t *comm;
    int rank, rc;
} drive_t;

static void *drive_allreduce(void *p)
{
    drive_t *d = p;
    float x[64] = {1}, y[64];
    for (int i = 0; i < ITER && d->rc == 0; i++) {
        mlc_status_t st = mlc_allreduce(x, y, 64, MLC_FLOAT32, MLC_SUM, d->comm, NULL);
        if (st != MLC_SUCCESS) d->rc = failed(d->rank, "allreduce on A", st);
    }
    return NULL;
}

/* One rank: W and W2 are this rank's two world communicators (freed here). */
static int rank_body(mlc_comm_t *w, mlc_comm_t *w2)
{
    int r = mlc_comm_rank(w);
    mlc_comm_t *a = NULL, *b = NULL, *c = NULL;
    RUN(r, mlc_comm_split(w, 0, r, &a));
    RUN(r, mlc_comm_split(w, r % 2, -r, &b));
    RUN(r, mlc_comm_split(b, 0, 0, &c));
    drive_t d = {a, r, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, drive_allreduce, &d) != 0) return failed(r, "pthread_create", MLC_ERR_SYSTEM);
    int32_t v[16] = {0}, sum[16], all[16 * 64];
    int rc = 0;
    for (int i = 0; i < ITER && rc == 0; i++) {
        mlc_status_t st = mlc_broadcast(v, v, 16, MLC_INT32, i % mlc_comm_size(b), b, NULL);
        if (st != MLC_SUCCESS) rc = failed(r, "broadcast on B", st);
    }
    pthread_join(t, NULL);
    if (rc || d.rc) return 1;
    for (int i = 0; i < 2; i++) RUN(r, mlc_barrier(w, NULL));
    for (int i = 0; i < 2; i++) RUN(r, mlc_reduce(v, sum, 16, MLC_INT32, MLC_SUM, 0, w2, NULL));
    RUN(r, mlc_comm_free(w));
    RUN(r, mlc_comm_free(w2));
    for (int i = 0; i < 3; i++) RUN(r, mlc_allgather(v, all, 16, MLC_INT32, c, NULL));
    RUN(r, mlc_comm_free(c));
    RUN(r, mlc_comm_free(b));
    RUN(r, mlc_comm_free(a));
    static const expect_t ex[] = {{"barrier", 2}, {"reduce", 2}, {"allreduce", ITER}, {"broadcast", ITER},
                                  {"allgather", 3}};
    return check_trace(r, ex, 5);
}

typedef struct targ {
    mlc_comm_t *w, *w2;
    int rc;
} targ_t;

static void *thread_main(void *p)
{
    targ_t *a = p;
    a->rc = rank_body(a->w, a->w2);
    return NULL;
}

/* threads only: after everything was freed, a new communicator of rank 0
 * appends to the closed file, which stays valid. */
static int reopen(void)
{
    mlc_config_t cfg = trace_config();
    mlc_comm_t *one;
    RUN(0, mlc_comm_init_all(1, &cfg, &one));
    int32_t x[4] = {0}, y[4];
    for (int i = 0; i < 2; i++) RUN(0, mlc_alltoall(x, y, 4, MLC_INT32, one, NULL));
    RUN(0, mlc_comm_free(one));
    static const expect_t ex[] = {{"barrier", 2}, {"reduce", 2}, {"allreduce", ITER}, {"broadcast", ITER},
                                  {"allgather", 3}, {"alltoall", 2}};
    return check_trace(0, ex, 6);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    mlc_config_t cfg = trace_config();
    int n = argc == 3 && strcmp(argv[1], "--threads") == 0 ? atoi(argv[2]) : 0;
    if (argc != 1 && n < 1) {
        fprintf(stderr, "usage: trace_comms [--threads N]\n");
        return 2;
    }
    int rc = 0;
    if (n > 0) {
        mlc_comm_t *w[64], *w2[64];
        targ_t args[64];
        pthread_t tid[64];
        if (n > 64) return 2;
        RUN(-1, mlc_comm_init_all(n, &cfg, w));
        RUN(-1, mlc_comm_init_all(n, &cfg, w2));
        for (int i = 0; i < n; i++) {
            args[i] = (targ_t){w[i], w2[i], 1};
            if (pthread_create(&tid[i], NULL, thread_main, &args[i]) != 0) return 2;
        }
        for (int i = 0; i < n; i++) {
            pthread_join(tid[i], NULL);
            rc |= args[i].rc;
        }
        if (rc == 0) rc = reopen();
        for (int i = 0; i < n && rc == 0 && !getenv("TRACE_COMMS_KEEP"); i++) {
            char path[256];
            trace_path(i, path, sizeof path);
            unlink(path);
        }
        return rc;
    }
    mlc_comm_t *w = NULL, *w2 = NULL;
    RUN(-1, mlc_comm_init(&cfg, &w));
    RUN(mlc_comm_rank(w), mlc_comm_init(&cfg, &w2));
    int r = mlc_comm_rank(w);
    rc = rank_body(w, w2);
    if (rc == 0 && !getenv("TRACE_COMMS_KEEP")) {
        char path[256];
        trace_path(r, path, sizeof path);
        unlink(path);
    }
    return rc;
}
