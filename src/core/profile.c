/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Profiler: per-collective statistics, and with MLC_PROFILE=<file> a Chrome /
 * Perfetto trace per rank ("%r" = rank, "%p" = process id). Every
 * communicator of a rank writes to the rank's one file (tracefile.h): the
 * ones split from it join their parent's file whatever their own rank, and
 * each communicator is a track of its own (pid = the rank, tid = the
 * communicator's number in the file, named by a thread_name event such as
 * "comm 1 (split of comm 0, color 1): rank 0 of 2"), as chrome://tracing
 * shows the threads of one process.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend.h"
#include "base/error.h"
#include "base/log.h"
#include "profile.h"
#include "tracefile.h"

typedef struct mlc_profiler {
    mlc_tracefile_t *tf; /* NULL = stats only */
    int pid, tid;        /* the rank's process track, this communicator's own track */
    mlc_profile_stat_t stats[MLC_COLL_COUNT];
} mlc_profiler_t;

static void expand(const char *pattern, int rank, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = pattern; *p && o + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            o += (size_t)snprintf(out + o, len - o, "%d", rank);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(out + o, len - o, "%d", (int)getpid());
            p++;
        } else {
            out[o++] = *p;
        }
        if (o >= len) o = len - 1;
    }
    out[o] = '\0';
}

static void put_event(mlc_tracefile_t *tf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_event(mlc_tracefile_t *tf, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof line) mlc_tracefile_event(tf, line, (size_t)n);
    else MLC_WARN("profiler: a trace event was too long and is left out");
}

/* Join the trace file: the parent's, else the one MLC_PROFILE names for this rank. */
static mlc_status_t open_trace(mlc_profiler_t *p, mlc_comm_t *comm, const mlc_comm_t *parent, int color)
{
    const mlc_profiler_t *pp = parent ? parent->prof : NULL;
    if (pp && pp->tf) {
        p->tf = pp->tf;
        p->pid = pp->pid;
        mlc_tracefile_ref(p->tf);
    } else {
        char path[512];
        expand(comm->cfg.profile, comm->rank, path, sizeof path);
        mlc_status_t st = mlc_tracefile_open(path, &p->tf);
        if (st != MLC_SUCCESS) return st;
        p->pid = comm->rank;
    }
    p->tid = mlc_tracefile_new_track(p->tf);
    if (mlc_tracefile_claim_pid(p->tf, p->pid))
        put_event(p->tf, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                  "\"args\":{\"name\":\"rank %d (%s)\"}}", p->pid, p->pid, comm->be->name);
    char from[64] = "";
    if (pp && pp->tf) snprintf(from, sizeof from, " (split of comm %d, color %d)", pp->tid, color);
    put_event(p->tf, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
              "\"args\":{\"name\":\"comm %d%s: rank %d of %d\"}}", p->pid, p->tid, p->tid, from, comm->rank,
              comm->size);
    put_event(p->tf, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
              "\"args\":{\"sort_index\":%d}}", p->pid, p->tid, p->tid);
    return MLC_SUCCESS;
}

mlc_status_t mlc_prof_open(mlc_comm_t *comm, const mlc_comm_t *parent, int color)
{
    if (!comm->cfg.profile[0]) return MLC_SUCCESS;
    mlc_profiler_t *p = calloc(1, sizeof *p);
    if (!p) return mlc_error(MLC_ERR_NO_MEMORY, "profiler: out of memory");
    for (int k = 0; k < MLC_COLL_COUNT; k++) p->stats[k].coll = k;
    if (strcmp(comm->cfg.profile, "stats") != 0) {
        mlc_status_t st = open_trace(p, comm, parent, color);
        if (st != MLC_SUCCESS) {
            free(p);
            return st;
        }
    }
    comm->prof = p;
    return MLC_SUCCESS;
}

void mlc_prof_close(mlc_comm_t *comm)
{
    mlc_profiler_t *p = comm->prof;
    if (!p) return;
    if (p->tf) mlc_tracefile_release(p->tf);
    free(p);
    comm->prof = NULL;
}

void mlc_prof_record(mlc_request_t *req)
{
    mlc_profiler_t *p = req->comm->prof;
    double dt = req->t_end - req->t_start;
    mlc_profile_stat_t *s = &p->stats[req->coll];
    double gbps = dt > 0 ? (double)req->bytes / dt / 1e9 : 0;
    if (s->count == 0 || gbps < s->min_gbps) s->min_gbps = gbps;
    if (gbps > s->max_gbps) s->max_gbps = gbps;
    s->count++;
    s->bytes += req->bytes;
    s->time_s += dt;
    s->avg_gbps = s->time_s > 0 ? (double)s->bytes / s->time_s / 1e9 : 0;
    if (!p->tf) return;
    put_event(p->tf, "{\"name\":\"%s\",\"cat\":\"mlcomm\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
              "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"bytes\":%zu,\"algo\":\"%s\",\"seq\":%llu,"
              "\"status\":\"%s\"}}",
              mlc_coll_name(req->coll), p->pid, p->tid, (req->t_start - mlc_tracefile_t0(p->tf)) * 1e6, dt * 1e6,
              req->bytes, req->algo ? req->algo : "native", (unsigned long long)req->seq,
              mlc_status_name(req->status));
}

mlc_status_t mlc_profile_stats(const mlc_comm_t *comm, mlc_profile_stat_t *stats, size_t *n)
{
    mlc_error_clear();
    if (!comm || !n) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_profile_stats: %s is NULL", comm ? "n" : "comm");
    const mlc_profiler_t *p = comm->prof;
    size_t room = *n, k = 0;
    if (room > 0 && !stats) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_profile_stats: stats is NULL with *n = %zu", room);
    if (p)
        for (int c = 0; c < MLC_COLL_COUNT; c++)
            if (p->stats[c].count) {
                if (k < room) stats[k] = p->stats[c];
                k++;
            }
    *n = k;
    return MLC_SUCCESS;
}
