/* SPDX-License-Identifier: BSD-3-Clause */
/* mlcomm-run's handling of the ranks' output: tagged lines or files per rank. */
#include "run_output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A line longer than this is forwarded in pieces, each tagged. */
#define MLC_RUN_LINE_MAX 65536

int mlc_run_output_init(mlc_run_output_t *o, int nranks, bool tag, const char *dir, char *err,
                        size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->nranks = nranks;
    o->tag = tag && dir == NULL; /* files are named by rank: their lines stay as written */
    o->dir = dir;
    if (dir != NULL && mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "--output-dir: cannot create '%s': %s", dir, strerror(errno));
        return -1;
    }
    if (!o->tag) return 0;
    o->stream = calloc((size_t)nranks * 2, sizeof *o->stream);
    if (o->stream == NULL) {
        snprintf(err, errlen, "out of memory for the output of %d ranks", nranks);
        return -1;
    }
    for (int i = 0; i < nranks * 2; i++) o->stream[i].fd = -1;
    return 0;
}

int mlc_run_output_open(mlc_run_output_t *o, int r, int child_fd[2], char *err, size_t errlen)
{
    static const char *const ext[2] = {"out", "err"};
    child_fd[0] = child_fd[1] = -1;
    for (int k = 0; k < 2; k++) {
        if (o->dir != NULL) {
            char path[4096];
            snprintf(path, sizeof path, "%s/rank.%d.%s", o->dir, r, ext[k]);
            child_fd[k] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
            if (child_fd[k] < 0) {
                snprintf(err, errlen, "--output-dir: cannot create '%s': %s", path,
                         strerror(errno));
                mlc_run_output_spawned(child_fd);
                return -1;
            }
        } else if (o->tag) {
            int p[2];
            if (pipe2(p, O_CLOEXEC) != 0) {
                snprintf(err, errlen, "cannot make a pipe for rank %d's output: %s", r,
                         strerror(errno));
                mlc_run_output_spawned(child_fd);
                return -1;
            }
            fcntl(p[0], F_SETFL, O_NONBLOCK);
            o->stream[2 * r + k].fd = p[0];
            child_fd[k] = p[1];
        }
    }
    return 0;
}

void mlc_run_output_spawned(int child_fd[2])
{
    for (int k = 0; k < 2; k++)
        if (child_fd[k] >= 0) {
            close(child_fd[k]);
            child_fd[k] = -1;
        }
}

int mlc_run_output_pollfds(const mlc_run_output_t *o, struct pollfd *pfd, int max)
{
    int n = 0;
    if (!o->tag) return 0;
    for (int i = 0; i < o->nranks * 2 && n < max; i++)
        if (o->stream[i].fd >= 0) pfd[n++] = (struct pollfd){.fd = o->stream[i].fd, .events = POLLIN};
    return n;
}

/* Write all of buf to fd; output nobody reads (EPIPE) is dropped. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        buf += n;
        len -= (size_t)n;
    }
}

/* "[r] " + line + "\n" in one write, so lines of ranks never mix. */
static void emit(int r, int k, const char *line, size_t len)
{
    char stackbuf[4096];
    char tag[24];
    int t = snprintf(tag, sizeof tag, "[%d] ", r);
    size_t total = (size_t)t + len + 1;
    char *out = total <= sizeof stackbuf ? stackbuf : malloc(total);
    if (out == NULL) {
        write_all(k == 0 ? STDOUT_FILENO : STDERR_FILENO, tag, (size_t)t);
        write_all(k == 0 ? STDOUT_FILENO : STDERR_FILENO, line, len);
        write_all(k == 0 ? STDOUT_FILENO : STDERR_FILENO, "\n", 1);
        return;
    }
    memcpy(out, tag, (size_t)t);
    memcpy(out + t, line, len);
    out[total - 1] = '\n';
    write_all(k == 0 ? STDOUT_FILENO : STDERR_FILENO, out, total);
    if (out != stackbuf) free(out);
}

/* Emit the whole lines of stream i (all of it when final). */
static void flush_lines(mlc_run_output_t *o, int i, bool final)
{
    mlc_run_stream_t *s = &o->stream[i];
    size_t start = 0;
    for (size_t j = 0; j < s->len; j++) {
        if (s->buf[j] != '\n') continue;
        emit(i / 2, i % 2, s->buf + start, j - start);
        start = j + 1;
    }
    if (s->len - start >= MLC_RUN_LINE_MAX || (final && s->len > start)) {
        emit(i / 2, i % 2, s->buf + start, s->len - start);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

/* Read what stream i has now; closes it at end of file or error. */
static void read_stream(mlc_run_output_t *o, int i)
{
    mlc_run_stream_t *s = &o->stream[i];
    for (;;) {
        if (s->cap - s->len < 4096) {
            size_t cap = s->cap ? s->cap * 2 : 8192;
            char *b = realloc(s->buf, cap);
            if (b == NULL) {
                flush_lines(o, i, true); /* forward what we have, then try again */
                if (s->cap - s->len < 1) return;
            } else {
                s->buf = b;
                s->cap = cap;
            }
        }
        ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
        if (n < 0 && errno == EINTR) continue;
        if (n > 0) {
            s->len += (size_t)n;
            flush_lines(o, i, false);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        flush_lines(o, i, true); /* end of file or a read error */
        close(s->fd);
        s->fd = -1;
        return;
    }
}

void mlc_run_output_forward(mlc_run_output_t *o, const struct pollfd *pfd, int n)
{
    for (int p = 0; p < n; p++) {
        if (pfd[p].revents == 0) continue;
        for (int i = 0; i < o->nranks * 2; i++)
            if (o->stream[i].fd == pfd[p].fd) {
                read_stream(o, i);
                break;
            }
    }
}

void mlc_run_output_drain(mlc_run_output_t *o)
{
    if (!o->tag) return;
    for (int i = 0; i < o->nranks * 2; i++) {
        if (o->stream[i].fd < 0) continue;
        read_stream(o, i);
        /* Still open: something the rank started holds the pipe; what it
         * writes from now on is not waited for. */
        flush_lines(o, i, true);
    }
}

void mlc_run_output_free(mlc_run_output_t *o)
{
    if (o->stream != NULL)
        for (int i = 0; i < o->nranks * 2; i++) {
            if (o->stream[i].fd >= 0) close(o->stream[i].fd);
            free(o->stream[i].buf);
        }
    free(o->stream);
    o->stream = NULL;
}
