/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Logging: one process-wide level and sink. Each line is formatted whole and
 * written with one write(2) under a mutex, so lines from different threads
 * (and, with O_APPEND, different processes) never interleave.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int mlc_log_level_current = MLC_LOG_WARN;

static pthread_mutex_t mlc_log_lock = PTHREAD_MUTEX_INITIALIZER;
static int mlc_log_fd = STDERR_FILENO;
static bool mlc_log_configured;   /* the first configuration sets the level */
static bool mlc_log_file_opened;  /* the file is opened once */

static const char *const mlc_log_level_tags[] = {
#define MLC_X_TAG(name, str) #name,
    MLC_LOG_LEVEL_LIST(MLC_X_TAG)
#undef MLC_X_TAG
};

/* "MLC_LOG_WARN" -> "WARN" */
static const char *mlc_log_tag(int level)
{
    if (level < 0 || level >= MLC_LOG_LEVEL_COUNT) return "LOG";
    return mlc_log_level_tags[level] + sizeof("MLC_LOG_") - 1;
}

static void mlc_hostname(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0) snprintf(buf, len, "unknown");
    buf[len - 1] = '\0';
}

/* Expand %h (host name), %p (pid) and %% in a file name pattern. */
static bool mlc_log_expand(const char *pattern, char *out, size_t len)
{
    char host[256];
    mlc_hostname(host, sizeof host);
    size_t n = 0;
    for (const char *p = pattern; *p; p++) {
        char piece[300];
        if (p[0] == '%' && p[1] == 'h') {
            snprintf(piece, sizeof piece, "%s", host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            snprintf(piece, sizeof piece, "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            snprintf(piece, sizeof piece, "%%");
            p++;
        } else {
            piece[0] = *p;
            piece[1] = '\0';
        }
        size_t k = strlen(piece);
        if (n + k >= len) return false;
        memcpy(out + n, piece, k);
        n += k;
    }
    out[n] = '\0';
    return true;
}

void mlc_log_configure(int level, const char *file_pattern)
{
    if (level < 0) level = 0;
    if (level >= MLC_LOG_LEVEL_COUNT) level = MLC_LOG_LEVEL_COUNT - 1;
    int warn_errno = 0;
    char path[4096] = "";

    pthread_mutex_lock(&mlc_log_lock);
    /* The first communicator sets the level; later ones may only raise it. */
    if (!mlc_log_configured || level > mlc_log_level_current)
        __atomic_store_n(&mlc_log_level_current, level, __ATOMIC_RELAXED);
    mlc_log_configured = true;
    if (!mlc_log_file_opened && file_pattern != NULL && file_pattern[0] != '\0') {
        mlc_log_file_opened = true;
        if (!mlc_log_expand(file_pattern, path, sizeof path)) {
            warn_errno = ENAMETOOLONG;
        } else {
            int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd < 0)
                warn_errno = errno;
            else
                mlc_log_fd = fd;
        }
    }
    pthread_mutex_unlock(&mlc_log_lock);

    if (warn_errno != 0)
        MLC_WARN("cannot open log file '%s' (from MLC_LOG_FILE '%s'): %s; logging to stderr",
                 path, file_pattern, strerror(warn_errno));
}

void mlc_log_write(int level, const char *fmt, ...)
{
    int saved_errno = errno; /* callers may log between a failure and strerror(errno) */
    char line[2048];
    char host[64];
    mlc_hostname(host, sizeof host);
    int n = snprintf(line, sizeof line, "mlcomm[%s:%ld] %s: ", host, (long)getpid(),
                     mlc_log_tag(level));
    if (n < 0) goto out;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;

    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + len, sizeof line - len, fmt, ap);
    va_end(ap);
    if (m < 0) goto out;
    len += (size_t)m;
    if (len > sizeof line - 2) { /* truncated: mark it, keep room for '\n' */
        len = sizeof line - 2;
        memcpy(line + len - 3, "...", 3);
    }
    while (len > 0 && line[len - 1] == '\n') len--;
    line[len++] = '\n';

    pthread_mutex_lock(&mlc_log_lock);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(mlc_log_fd, line + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    pthread_mutex_unlock(&mlc_log_lock);
out:
    errno = saved_errno;
}
