/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_jobstate_get: maps the job state named by MLC_JOB_FD once per
 * process, NULL on any problem. Each scenario runs in a forked child (the
 * mapping is made once per process).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/jobstate.h"
#include "unit.h"

static int make_state(size_t size, uint32_t magic, uint32_t nranks)
{
    int fd = memfd_create("mlc-unit-jobstate", 0);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return -1;
    if (size >= sizeof(mlc_jobstate_t)) {
        mlc_jobstate_t *js = mmap(NULL, sizeof *js, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (js == MAP_FAILED) return -1;
        js->magic = magic;
        js->nranks = nranks;
        snprintf(js->swept_id, sizeof js->swept_id, "0123456789abcdef");
        atomic_store(&js->dead[1], MLC_JOB_DEAD_SIGNAL | 9);
        munmap(js, sizeof *js);
    }
    return fd;
}

/* Run `body` in a child with MLC_JOB_FD set to `value` (NULL: unset). */
static int in_child(const char *value, int (*body)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (value) setenv("MLC_JOB_FD", value, 1);
        else unsetenv("MLC_JOB_FD");
        _exit(body());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static int expect_null(void) { return mlc_jobstate_get() == NULL && !mlc_jobstate_sweeps("0123456789abcdef") ? 0 : 1; }

/* The launcher sweeps its own job id's names only, and a name that fills
 * the field without a NUL is no name. */
static int expect_sweeps(void)
{
    if (!mlc_jobstate_sweeps("0123456789abcdef")) return 1;
    if (mlc_jobstate_sweeps("0123456789abcde") || mlc_jobstate_sweeps("my-own-id") || mlc_jobstate_sweeps("")) return 2;
    mlc_jobstate_t *js = (mlc_jobstate_t *)mlc_jobstate_get();
    memset(js->swept_id, 'a', sizeof js->swept_id);
    char full[sizeof js->swept_id + 1];
    memset(full, 'a', sizeof js->swept_id);
    full[sizeof js->swept_id] = '\0';
    if (mlc_jobstate_sweeps(full)) return 3;
    return 0;
}

static int expect_mapped(void)
{
    const mlc_jobstate_t *js = mlc_jobstate_get();
    if (js == NULL) return 1;
    if (js->nranks != 4) return 2;
    if (atomic_load(&((mlc_jobstate_t *)js)->dead[1]) != (MLC_JOB_DEAD_SIGNAL | 9)) return 3;
    if (mlc_jobstate_get() != js) return 4; /* mapped once */
    /* shared with the launcher: a write here is seen through the fd */
    atomic_fetch_add(&((mlc_jobstate_t *)js)->epoch, 1);
    return 0;
}

int main(void)
{
    char num[32];
    int good = make_state(sizeof(mlc_jobstate_t), MLC_JOBSTATE_MAGIC, 4);
    CHECK(good >= 0, "memfd");
    snprintf(num, sizeof num, "%d", good);
    CHECK(in_child(num, expect_mapped) == 0, "valid job state mapped");
    mlc_jobstate_t *js = mmap(NULL, sizeof *js, PROT_READ, MAP_SHARED, good, 0);
    CHECK(js != MAP_FAILED && atomic_load(&js->epoch) == 1, "child's write visible");
    int sweeps = make_state(sizeof(mlc_jobstate_t), MLC_JOBSTATE_MAGIC, 4);
    snprintf(num, sizeof num, "%d", sweeps);
    CHECK(in_child(num, expect_sweeps) == 0, "mlc_jobstate_sweeps: the launcher's job id only");

    CHECK(in_child(NULL, expect_null) == 0, "unset -> NULL");
    CHECK(in_child("", expect_null) == 0, "empty -> NULL");
    CHECK(in_child("abc", expect_null) == 0, "not a number -> NULL");
    int closed = make_state(64, 0, 0);
    close(closed);
    snprintf(num, sizeof num, "%d", closed);
    CHECK(in_child(num, expect_null) == 0, "closed fd -> NULL");
    int small = make_state(64, 0, 0);
    snprintf(num, sizeof num, "%d", small);
    CHECK(in_child(num, expect_null) == 0, "too small -> NULL");
    int wrong = make_state(sizeof(mlc_jobstate_t), 0xdeadbeef, 4);
    snprintf(num, sizeof num, "%d", wrong);
    CHECK(in_child(num, expect_null) == 0, "bad magic -> NULL");
    int toomany = make_state(sizeof(mlc_jobstate_t), MLC_JOBSTATE_MAGIC, MLC_JOBSTATE_MAX_RANKS + 1);
    snprintf(num, sizeof num, "%d", toomany);
    CHECK(in_child(num, expect_null) == 0, "too many ranks -> NULL");
    int pipefd[2];
    CHECK(pipe(pipefd) == 0, "pipe");
    snprintf(num, sizeof num, "%d", pipefd[0]);
    CHECK(in_child(num, expect_null) == 0, "a pipe -> NULL");
    return unit_result("unit_jobstate");
}
