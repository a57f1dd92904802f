/* SPDX-License-Identifier: BSD-3-Clause */
/* fork + exec of one rank, with an exec-status pipe so that a program that
 * cannot be started is reported as such, not as a rank that exited 127. */
#include "run_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void set_env_int(const char *name, int value)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", value);
    setenv(name, buf, 1);
}

/* In the child, before exec. Only returns on failure (with errno). */
static void become_rank(const mlc_run_rank_env_t *env, char *const argv[],
                        const sigset_t *child_mask, pid_t launcher)
{
    /* A new session: own process group, no controlling terminal. */
    if (setsid() < 0) return;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return;
    /* The launcher may have died before prctl took effect. */
    if (getppid() != launcher) _exit(128 + SIGKILL);
    if (fcntl(env->job_fd, F_SETFD, 0) != 0) return;
    /* dup2 clears close-on-exec on the copy. */
    if (env->out_fd >= 0 && dup2(env->out_fd, STDOUT_FILENO) < 0) return;
    if (env->err_fd >= 0 && dup2(env->err_fd, STDERR_FILENO) < 0) return;
    /* Published here, not by the launcher after fork returns, so the
     * program never sees its slot still empty. */
    atomic_store_explicit(env->pid_slot, (int)getpid(), memory_order_release);
    set_env_int("MLC_RANK", env->rank);
    set_env_int("MLC_WORLD_SIZE", env->nranks);
    set_env_int("MLC_LOCAL_RANK", env->rank);
    set_env_int("MLC_LOCAL_SIZE", env->nranks);
    set_env_int("MLC_JOB_FD", env->job_fd);
    setenv("MLC_JOB_ID", env->job_id, 1);
    /* torch's variables too, so that init_process_group's default env://
     * works under mlcomm-run as under torchrun (mlcomm reads MLC_* first);
     * a MASTER_ADDR / MASTER_PORT the caller set is kept. */
    set_env_int("RANK", env->rank);
    set_env_int("WORLD_SIZE", env->nranks);
    set_env_int("LOCAL_RANK", env->rank);
    set_env_int("LOCAL_WORLD_SIZE", env->nranks);
    if (env->master_port > 0 && !getenv("MASTER_ADDR") && !getenv("MASTER_PORT")) {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        set_env_int("MASTER_PORT", env->master_port);
    }
    /* The launcher blocks the signals it handles through a signalfd. */
    sigprocmask(SIG_SETMASK, child_mask, NULL);
    execvp(argv[0], argv);
}

int mlc_run_spawn(const mlc_run_rank_env_t *env, char *const argv[], const sigset_t *child_mask,
                  pid_t *pid, int *exec_errno)
{
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC) != 0) return -1;
    pid_t launcher = getpid();
    pid_t child = fork();
    if (child < 0) {
        int saved = errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        errno = saved;
        return -1;
    }
    if (child == 0) {
        close(status_pipe[0]);
        become_rank(env, argv, child_mask, launcher);
        int err = errno;
        ssize_t unused = write(status_pipe[1], &err, sizeof err);
        (void)unused;
        _exit(127);
    }
    close(status_pipe[1]);
    /* EOF (exec closed the pipe) means the program runs; an int is its errno. */
    int err = 0;
    ssize_t n;
    do {
        n = read(status_pipe[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    close(status_pipe[0]);
    if (n == (ssize_t)sizeof err) {
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
        }
        *exec_errno = err;
        return -2;
    }
    *pid = child;
    return 0;
}
