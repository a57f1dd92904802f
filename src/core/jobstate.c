/* Library side of the job state: map the memfd named by MLC_JOB_FD, once. */
#include "jobstate.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "config.h"
#include "log.h"

static pthread_once_t mlc_jobstate_once = PTHREAD_ONCE_INIT;
static const mlc_jobstate_t *mlc_jobstate;

static void mlc_jobstate_map(void)
{
    const char *v = getenv("MLC_JOB_FD");
    if (v == NULL || v[0] == '\0') return;
    long long fd;
    if (!mlc_parse_int(v, 0, INT_MAX, &fd)) {
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
}

const mlc_jobstate_t *mlc_jobstate_get(void)
{
    pthread_once(&mlc_jobstate_once, mlc_jobstate_map);
    return mlc_jobstate;
}
