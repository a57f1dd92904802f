/* SPDX-License-Identifier: BSD-3-Clause */
/* Library side of the job state: map the memfd named by MLC_JOB_FD, once. */
#include "jobstate.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "config.h"
#include "log.h"

static pthread_once_t mlc_jobstate_once = PTHREAD_ONCE_INIT;
static const mlc_jobstate_t *mlc_jobstate;
static uint64_t mlc_jobstate_id;

static void mlc_jobstate_map(void)
{
    const char *v = mlc_env_text(MLC_ENV_JOB_FD);
    if (v == NULL) return;
    long long fd;
    const mlc_env_var_t *row = &mlc_env_vars[MLC_ENV_JOB_FD];
    if (!mlc_parse_int(v, row->lo, row->hi, &fd)) { /* as comm init parses it, but only warned about here */
        MLC_WARN("MLC_JOB_FD='%s' is not a file descriptor; peer deaths will not be seen "
                 "through the launcher",
                 v);
        return;
    }
    struct stat sb;
    if (fstat((int)fd, &sb) != 0) {
        MLC_WARN("MLC_JOB_FD=%lld: fstat failed: %s; peer deaths will not be seen through the "
                 "launcher",
                 fd, strerror(errno));
        return;
    }
    if (!S_ISREG(sb.st_mode) || (size_t)sb.st_size < sizeof(mlc_jobstate_t)) {
        MLC_WARN("MLC_JOB_FD=%lld is not a job state (%lld bytes, need %zu); peer deaths will "
                 "not be seen through the launcher",
                 fd, (long long)sb.st_size, sizeof(mlc_jobstate_t));
        return;
    }
    void *p = mmap(NULL, sizeof(mlc_jobstate_t), PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
    if (p == MAP_FAILED) {
        MLC_WARN("MLC_JOB_FD=%lld: mmap failed: %s; peer deaths will not be seen through the "
                 "launcher",
                 fd, strerror(errno));
        return;
    }
    const mlc_jobstate_t *js = p;
    if (js->magic != MLC_JOBSTATE_MAGIC || js->nranks > MLC_JOBSTATE_MAX_RANKS) {
        MLC_WARN("MLC_JOB_FD=%lld: bad job state (magic 0x%08x, %u ranks); peer deaths will "
                 "not be seen through the launcher",
                 fd, (unsigned)js->magic, (unsigned)js->nranks);
        munmap(p, sizeof(mlc_jobstate_t));
        return;
    }
    mlc_jobstate = js;
    mlc_jobstate_id = ((uint64_t)sb.st_dev << 40) ^ (uint64_t)sb.st_ino ^ 0x6a6f62u;
}

const mlc_jobstate_t *mlc_jobstate_get(void)
{
    pthread_once(&mlc_jobstate_once, mlc_jobstate_map);
    return mlc_jobstate;
}

int mlc_jobstate_sweeps(const char *job_id)
{
    const mlc_jobstate_t *js = mlc_jobstate_get();
    return js != NULL && js->swept_id[0] != '\0' && memchr(js->swept_id, '\0', sizeof js->swept_id) != NULL &&
           strcmp(js->swept_id, job_id) == 0;
}

uint64_t mlc_jobstate_tag(void)
{
    return mlc_jobstate_get() ? mlc_jobstate_id : 0;
}

uint64_t mlc_proc_start_time(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields after the command name (which may hold spaces): state is field 3. */
    const char *p = strrchr(buf, ')');
    if (!p) return 0;
    p++;
    for (int field = 2; field < 22 && *p; p++)
        if (*p == ' ') field++;
    return strtoull(p, NULL, 10);
}
