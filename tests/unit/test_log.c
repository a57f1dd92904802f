/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Logging: level filtering, line format, %h/%p file names, the file opened
 * once, whole lines from concurrent threads. One process-wide logger, so
 * the steps below run in order in one process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "unit.h"

static char dir[] = "/tmp/mlc-unit-log-XXXXXX";

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++) n++;
    return n;
}

enum { THREADS = 4, LINES = 200 };

static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < LINES; i++)
        MLC_WARN("thread %d line %d %s", id, i, "padding-padding-padding-padding-padding-padding");
    return NULL;
}

int main(void)
{
    CHECK(mlc_log_level_current == MLC_LOG_WARN, "default level warn");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char host[256], pattern[512], path[1024];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    snprintf(pattern, sizeof pattern, "%s/log.%%h.%%p.%%%%.txt", dir);
    snprintf(path, sizeof path, "%s/log.%s.%ld.%%.txt", dir, host, (long)getpid());

    mlc_log_configure(MLC_LOG_INFO, pattern);
    CHECK(mlc_log_level_current == MLC_LOG_INFO, "level set by the first configuration");
    errno = 1234;
    MLC_WARN("a warning %d", 7);
    CHECK(errno == 1234, "logging keeps errno");
    MLC_INFO("some info\n"); /* a trailing newline is not doubled */
    MLC_DEBUG("hidden debug");
    mlc_error(MLC_ERR_TIMEOUT, "hidden: errors log at debug");

    /* Later configurations may only raise the level; the file stays. */
    char other[512];
    snprintf(other, sizeof other, "%s/other.txt", dir);
    mlc_log_configure(MLC_LOG_ERROR, other);
    CHECK(mlc_log_level_current == MLC_LOG_INFO, "level not lowered");
    mlc_log_configure(MLC_LOG_DEBUG, other);
    CHECK(mlc_log_level_current == MLC_LOG_DEBUG, "level raised");
    mlc_error(MLC_ERR_PEER_LOST, "rank %d vanished", 3);
    CHECK(access(other, F_OK) != 0, "second file not opened");

    char big[5000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    MLC_WARN("%s", big);

    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

    const char *text = slurp(path);
    CHECK(text != NULL, "log file %s exists", path);
    if (text != NULL) {
        char prefix[400];
        snprintf(prefix, sizeof prefix, "mlcomm[%s:%ld] WARN: a warning 7\n", host, (long)getpid());
        CHECK(strncmp(text, prefix, strlen(prefix)) == 0, "first line '%.80s'", text);
        CHECK(strstr(text, "] INFO: some info\n") != NULL, "info line");
        CHECK(strstr(text, "some info\n\n") == NULL, "no doubled newline");
        CHECK(strstr(text, "hidden") == NULL, "debug lines filtered while at info");
        CHECK(strstr(text, "] DEBUG: MLC_ERR_PEER_LOST: rank 3 vanished\n") != NULL,
              "mlc_error logs at debug");
        CHECK(strstr(text, "zzz...\n") != NULL, "long line cut with '...'");
        /* every writer line whole: prefix, text, newline, in one piece */
        int whole = 0;
        for (int id = 0; id < THREADS; id++) {
            for (int i = 0; i < LINES; i++) {
                char line[200];
                snprintf(line, sizeof line, "] WARN: thread %d line %d padding-padding-padding-"
                                            "padding-padding-padding\n", id, i);
                whole += strstr(text, line) != NULL;
            }
        }
        CHECK(whole == THREADS * LINES, "%d of %d lines whole", whole, THREADS * LINES);
        CHECK(count_lines(text, "mlcomm[") == count_lines(text, "\n"), "one prefix per line");
    }
    unlink(path);
    rmdir(dir);
    return unit_result("unit_log");
}
