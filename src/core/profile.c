/*
 * Profiler: per-collective statistics, and with MLC_PROFILE=<file> a Chrome /
 * Perfetto trace per rank ("%r" = rank). The trace uses the JSON-array form
 * written one event per line with write(2): the format allows a missing
 * closing bracket, so the file stays loadable even if the rank is killed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend.h"
#include "error.h"
#include "log.h"
#include "profile.h"

typedef struct mlc_profiler {
    int fd; /* trace file, -1 = stats only */
    double t0;
    bool first;
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

mlc_status_t mlc_prof_open(mlc_comm_t *comm)
{
    if (!comm->cfg.profile[0]) return MLC_SUCCESS;
    mlc_profiler_t *p = calloc(1, sizeof *p);
    if (!p) return mlc_error(MLC_ERR_NO_MEMORY, "profiler: out of memory");
    p->fd = -1;
    p->t0 = mlc_now();
    p->first = true;
    for (int k = 0; k < MLC_COLL_COUNT; k++) p->stats[k].coll = k;
    if (strcmp(comm->cfg.profile, "stats") != 0) {
        char path[512];
        expand(comm->cfg.profile, comm->rank, path, sizeof path);
        p->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (p->fd < 0) {
            free(p);
            return mlc_error(MLC_ERR_CONFIG, "MLC_PROFILE=%s: cannot create trace file '%s': %m",
                             comm->cfg.profile, path);
        }
        char head[256];
        int n = snprintf(head, sizeof head,
                         "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                         "\"args\":{\"name\":\"rank %d (%s)\"}}",
                         comm->rank, comm->rank, comm->be->name);
        if (write(p->fd, head, (size_t)n) != n) MLC_WARN("profiler: short write to trace");
    }
    comm->prof = p;
    return MLC_SUCCESS;
}

void mlc_prof_close(mlc_comm_t *comm)
{
    mlc_profiler_t *p = comm->prof;
    if (!p) return;
    if (p->fd >= 0) {
        if (write(p->fd, "\n]\n", 3) != 3) MLC_WARN("profiler: short write to trace");
        close(p->fd);
    }
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
    if (p->fd < 0) return;
    char line[512];
    int n = snprintf(line, sizeof line,
                     ",\n{\"name\":\"%s\",\"cat\":\"mlcomm\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,"
                     "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"bytes\":%zu,\"algo\":\"%s\",\"seq\":%llu,"
                     "\"status\":\"%s\"}}",
                     mlc_coll_name(req->coll), req->comm->rank, (req->t_start - p->t0) * 1e6, dt * 1e6,
                     req->bytes, req->algo ? req->algo : "native", (unsigned long long)req->seq,
                     mlc_status_name(req->status));
    if (n > 0 && write(p->fd, line, (size_t)n) != n) MLC_WARN("profiler: short write to trace");
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
