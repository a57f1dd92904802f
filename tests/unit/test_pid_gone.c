/* SPDX-License-Identifier: BSD-3-Clause */
/* How a peer process that ended is described (shm/rendezvous.c,
 * shm_pid_gone): a process that ended but was not reaped yet (a zombie:
 * its launcher has not waited for it) is named with how it ended, killed
 * by which signal or exited with which code, not just "exited"; a running
 * one is not gone; a reaped one no longer exists. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/shm/rendezvous.h"
#include "unit.h"

/* A child that ends as `how` (a signal number, or -code for an exit),
 * left a zombie: waited for without reaping. */
static pid_t zombie(int how)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (how > 0) raise(how);
        _exit(-how);
    }
    siginfo_t info;
    if (pid > 0) waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT);
    return pid;
}

static void ended_as(int how, const char *want)
{
    char why[128] = "";
    pid_t pid = zombie(how);
    CHECK(pid > 0, "fork failed");
    if (pid <= 0) return;
    CHECK(shm_pid_gone(pid, why, sizeof why) == 1, "a zombie (how %d) is not gone", how);
    CHECK(strstr(why, want) != NULL, "how %d: \"%s\" does not say \"%s\"", how, why, want);
    waitpid(pid, NULL, 0);
    CHECK(shm_pid_gone(pid, why, sizeof why) == 1 && strstr(why, "no longer exists"), "reaped: \"%s\"", why);
}

int main(void)
{
    char why[128] = "";
    CHECK(shm_pid_gone(getpid(), why, sizeof why) == 0, "this process counts as gone: %s", why);
    ended_as(SIGKILL, "killed by signal 9");
    ended_as(SIGTERM, "killed by signal 15");
    ended_as(-3, "exited with code 3");
    ended_as(0, "exited with code 0");
    return unit_result("pid_gone");
}
