/* SPDX-License-Identifier: BSD-3-Clause */
/* Trace files shared by the communicators of a process (tracefile.h). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/clock.h"
#include "config.h"
#include "error.h"
#include "log.h"
#include "tracefile.h"

#define CLOSING "\n]\n"

struct mlc_tracefile {
    struct mlc_tracefile *next; /* the registry */
    pthread_mutex_t lock;       /* fd, events, tracks, pids */
    int fd;                     /* -1 while closed */
    int refs;                   /* communicators writing here (registry lock) */
    off_t reopen_at;            /* closed: its length before the ']' (-1: never closed) */
    size_t events;              /* written since the '[' */
    double t0;
    int tracks;                 /* tracks handed out */
    int *pids, npids, cap;      /* ranks named in the file */
    char path[];
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mlc_tracefile_t *registry;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void put(mlc_tracefile_t *tf, const char *text, size_t n)
{
    if (write(tf->fd, text, n) != (ssize_t)n) MLC_WARN("profiler: short write to trace file '%s'", tf->path);
}

/* Write the ']' and close; tf->lock held. */
static void close_file(mlc_tracefile_t *tf)
{
    if (tf->fd < 0) return;
    off_t end = lseek(tf->fd, 0, SEEK_END);
    put(tf, CLOSING, strlen(CLOSING));
    close(tf->fd);
    tf->fd = -1;
    tf->reopen_at = end;
}

/* At exit, every file still open gets its ']' (later events are dropped). */
static void close_all_at_exit(void)
{
    pthread_mutex_lock(&registry_lock);
    for (mlc_tracefile_t *tf = registry; tf; tf = tf->next) {
        pthread_mutex_lock(&tf->lock);
        close_file(tf);
        tf->reopen_at = -1;
        pthread_mutex_unlock(&tf->lock);
    }
    pthread_mutex_unlock(&registry_lock);
}

static void register_exit(void) { atexit(close_all_at_exit); }

/* A closed file of ours, untouched since: take its ']' off and append. */
static bool reopen(mlc_tracefile_t *tf)
{
    if (tf->reopen_at < 0) return false;
    int fd = open(tf->path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && sb.st_size == tf->reopen_at + (off_t)strlen(CLOSING) &&
        ftruncate(fd, tf->reopen_at) == 0 && lseek(fd, 0, SEEK_END) == tf->reopen_at) {
        tf->fd = fd;
        return true;
    }
    close(fd);
    return false;
}

/* Start the file afresh; tf->lock held. */
static mlc_status_t create_file(mlc_tracefile_t *tf)
{
    tf->fd = open(tf->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tf->fd < 0)
        return mlc_error(MLC_ERR_CONFIG, "MLC_PROFILE: cannot create trace file '%s': %m", tf->path);
    tf->events = 0;
    tf->npids = 0;
    put(tf, "[", 1);
    return MLC_SUCCESS;
}

mlc_status_t mlc_tracefile_open(const char *path, mlc_tracefile_t **out)
{
    pthread_once(&exit_once, register_exit);
    mlc_status_t st = MLC_SUCCESS;
    pthread_mutex_lock(&registry_lock);
    mlc_tracefile_t *tf = registry;
    while (tf && strcmp(tf->path, path) != 0) tf = tf->next;
    if (!tf) {
        size_t len = strlen(path) + 1;
        tf = calloc(1, sizeof *tf + len);
        if (!tf) {
            pthread_mutex_unlock(&registry_lock);
            return mlc_error(MLC_ERR_NO_MEMORY, "profiler: out of memory");
        }
        memcpy(tf->path, path, len);
        pthread_mutex_init(&tf->lock, NULL);
        tf->fd = -1;
        tf->reopen_at = -1;
        tf->t0 = mlc_now();
        pthread_mutex_lock(&tf->lock);
        st = create_file(tf);
        pthread_mutex_unlock(&tf->lock);
        if (st != MLC_SUCCESS) {
            pthread_mutex_destroy(&tf->lock);
            free(tf);
            pthread_mutex_unlock(&registry_lock);
            return st;
        }
        tf->next = registry;
        registry = tf;
    } else if (tf->refs == 0) {
        pthread_mutex_lock(&tf->lock);
        if (tf->fd < 0 && !reopen(tf)) st = create_file(tf);
        pthread_mutex_unlock(&tf->lock);
    }
    if (st == MLC_SUCCESS) {
        tf->refs++;
        *out = tf;
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

void mlc_tracefile_ref(mlc_tracefile_t *tf)
{
    pthread_mutex_lock(&registry_lock);
    tf->refs++;
    pthread_mutex_unlock(&registry_lock);
}

void mlc_tracefile_release(mlc_tracefile_t *tf)
{
    pthread_mutex_lock(&registry_lock);
    if (--tf->refs == 0) {
        pthread_mutex_lock(&tf->lock);
        close_file(tf);
        pthread_mutex_unlock(&tf->lock);
    }
    pthread_mutex_unlock(&registry_lock);
}

void mlc_tracefile_event(mlc_tracefile_t *tf, const char *json, size_t n)
{
    pthread_mutex_lock(&tf->lock);
    if (tf->fd >= 0) {
        /* One write per event: a killed process leaves whole events (at worst the last one cut). */
        char line[1024];
        const char *sep = tf->events++ ? ",\n" : "\n";
        if (n + 2 <= sizeof line) {
            size_t s = strlen(sep);
            memcpy(line, sep, s);
            memcpy(line + s, json, n);
            put(tf, line, s + n);
        } else {
            put(tf, sep, strlen(sep));
            put(tf, json, n);
        }
    }
    pthread_mutex_unlock(&tf->lock);
}

double mlc_tracefile_t0(const mlc_tracefile_t *tf) { return tf->t0; }

int mlc_tracefile_new_track(mlc_tracefile_t *tf)
{
    pthread_mutex_lock(&tf->lock);
    int id = tf->tracks++;
    pthread_mutex_unlock(&tf->lock);
    return id;
}

bool mlc_tracefile_claim_pid(mlc_tracefile_t *tf, int pid)
{
    bool fresh = true;
    pthread_mutex_lock(&tf->lock);
    for (int i = 0; i < tf->npids && fresh; i++) fresh = tf->pids[i] != pid;
    if (fresh) {
        if (tf->npids == tf->cap) {
            int cap = tf->cap ? 2 * tf->cap : 4;
            int *bigger = realloc(tf->pids, sizeof *bigger * (size_t)cap);
            if (bigger) {
                tf->pids = bigger;
                tf->cap = cap;
            }
        }
        if (tf->npids < tf->cap) tf->pids[tf->npids++] = pid;
    }
    pthread_mutex_unlock(&tf->lock);
    return fresh;
}
