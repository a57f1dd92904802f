/* SPDX-License-Identifier: BSD-3-Clause */
/* The job state memfd and the /dev/shm sweep of mlcomm-run. */
#include "run_job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

static int fill_random_id(char id[17], char *err, size_t errlen)
{
    unsigned char raw[8];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            snprintf(err, errlen, "getrandom failed: %s", strerror(errno));
            return -1;
        }
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        id[2 * i] = hex[raw[i] >> 4];
        id[2 * i + 1] = hex[raw[i] & 0xf];
    }
    id[16] = '\0';
    return 0;
}

int mlc_run_job_create(int nranks, mlc_run_job_t *job, char *err, size_t errlen)
{
    mlc_run_job_t j = {.fd = -1};
    if (fill_random_id(j.id, err, errlen) != 0) return -1;
    /* A memfd lives only as long as someone holds it: nothing to clean up. */
    j.fd = memfd_create("mlc-job", MFD_CLOEXEC);
    if (j.fd < 0) {
        snprintf(err, errlen, "memfd_create failed: %s", strerror(errno));
        return -1;
    }
    /* Keep the fd clear of stdin/stdout/stderr, which a rank may reopen. */
    if (j.fd <= STDERR_FILENO) {
        int fd = fcntl(j.fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        if (fd < 0) {
            snprintf(err, errlen, "cannot move the job state fd: %s", strerror(errno));
            goto fail;
        }
        close(j.fd);
        j.fd = fd;
    }
    if (ftruncate(j.fd, sizeof(mlc_jobstate_t)) != 0) {
        snprintf(err, errlen, "ftruncate of the job state (%zu bytes) failed: %s",
                 sizeof(mlc_jobstate_t), strerror(errno));
        goto fail;
    }
    void *p = mmap(NULL, sizeof(mlc_jobstate_t), PROT_READ | PROT_WRITE, MAP_SHARED, j.fd, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "mmap of the job state failed: %s", strerror(errno));
        goto fail;
    }
    j.state = p; /* a fresh memfd reads as zeros: every rank alive */
    j.state->nranks = (uint32_t)nranks;
    snprintf(j.state->swept_id, sizeof j.state->swept_id, "%s", j.id); /* mlc_run_job_sweep_shm's */
    j.state->magic = MLC_JOBSTATE_MAGIC;
    *job = j;
    return 0;
fail:
    close(j.fd);
    return -1;
}

void mlc_run_job_destroy(mlc_run_job_t *job)
{
    if (job->state) munmap(job->state, sizeof(mlc_jobstate_t));
    if (job->fd >= 0) close(job->fd);
    job->state = NULL;
    job->fd = -1;
}

void mlc_run_job_mark_dead(mlc_run_job_t *job, int rank, int wait_status)
{
    unsigned code;
    if (WIFSIGNALED(wait_status))
        code = MLC_JOB_DEAD_SIGNAL | (unsigned)WTERMSIG(wait_status);
    else if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) != 0)
        code = MLC_JOB_DEAD_EXIT | (unsigned)WEXITSTATUS(wait_status);
    else
        return;
    mlc_jobstate_t *s = job->state;
    /* dead[] first, then the counters: a rank that sees the new epoch
     * finds the flag already set. */
    atomic_store_explicit(&s->dead[rank], code, memory_order_release);
    atomic_fetch_add_explicit(&s->ndead, 1, memory_order_acq_rel);
    atomic_fetch_add_explicit(&s->epoch, 1, memory_order_acq_rel);
}

static int has_prefix(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

int mlc_run_job_sweep_shm(const mlc_run_job_t *job)
{
    /* MLC_SHM_PREFIX is a shm_open name ("/mlc-"); /dev/shm lists it without the slash. */
    char prefix[64], sem_prefix[80];
    snprintf(prefix, sizeof prefix, "%s%s-", MLC_SHM_PREFIX + 1, job->id);
    snprintf(sem_prefix, sizeof sem_prefix, "sem.%s", prefix);
    DIR *d = opendir("/dev/shm");
    if (!d) return -1;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!has_prefix(e->d_name, prefix) && !has_prefix(e->d_name, sem_prefix)) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
    }
    closedir(d);
    return removed;
}
