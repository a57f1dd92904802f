/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How many cpus the ranks on this host may run on: the union of the cpus
 * each rank is allowed (its sched_getaffinity, which it publishes in its
 * control block before it attaches), bounded by the CPU quota of its
 * cgroup (a container's --cpus, a systemd CPUQuota). With more ranks than
 * that, a waiting rank yields its core, or sleeps while other processes
 * take it (yield_gauge.c), instead of spinning on it: two ranks that
 * `taskset -c 0` put on one cpu spun away each other's time slices, about
 * 2 ms per 8-byte allreduce.
 *
 * Not the host's online cpus alone: a cpuset or taskset confines a job to
 * fewer. Not one rank's own mask: a rank bound to a cpu of its own (as
 * benchmarks bind them) shares it with no peer.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "engine.h"

#define WORD_BITS 64

void eng_cpus_publish(eng_seg_t *seg, int wrank)
{
    eng_ctl_t *ctl = (eng_ctl_t *)((char *)seg + seg->ctl_off) + wrank;
    uint64_t words[ENG_CPU_WORDS] = {0};
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < ENG_CPU_WORDS * WORD_BITS && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) words[c / WORD_BITS] |= (uint64_t)1 << (c % WORD_BITS);
    } else { /* more cpus than a cpu_set_t holds: count them all */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < n && c < ENG_CPU_WORDS * WORD_BITS; c++)
            words[c / WORD_BITS] |= (uint64_t)1 << (c % WORD_BITS);
    }
    memcpy(ctl->cpus, words, sizeof words);
}

/* ceil(quota / period) of a "quota period" pair; 0: no quota. */
static int quota_cpus(long long quota, long long period)
{
    if (quota <= 0 || period <= 0) return 0;
    return (int)((quota + period - 1) / period);
}

/* A file's first two numbers ("max" reads as none); false: unreadable. */
static bool read_pair(const char *path, long long *a, long long *b)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char first[32] = "";
    *a = *b = 0;
    int got = fscanf(f, "%31s %lld", first, b);
    fclose(f);
    if (got < 1) return false;
    *a = strcmp(first, "max") == 0 ? -1 : atoll(first);
    return true;
}

int eng_cgroup_quota_cpus(const char *self_cgroup, const char *root)
{
    FILE *f = fopen(self_cgroup, "r");
    if (!f) return 0;
    char line[512], dir[1200];
    int best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *ctrl = strchr(line, ':'), *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
        if (!path) continue;
        *path++ = 0;
        ctrl++;
        bool v2 = *ctrl == 0, v1 = false;
        for (char *t = ctrl; !v2 && t && *t;) { /* v1: a controller list such as "cpu,cpuacct" */
            size_t len = strcspn(t, ",");
            if (len == 3 && strncmp(t, "cpu", 3) == 0) v1 = true;
            t = t[len] ? t + len + 1 : NULL;
        }
        if (!v2 && !v1) continue;
        for (;;) {
            long long quota = 0, period = 0;
            int cpus = 0;
            if (v2) {
                snprintf(dir, sizeof dir, "%s%s/cpu.max", root, path);
                if (read_pair(dir, &quota, &period)) cpus = quota_cpus(quota, period);
            } else {
                long long unused;
                snprintf(dir, sizeof dir, "%s/%s%s/cpu.cfs_quota_us", root, ctrl, path);
                bool q = read_pair(dir, &quota, &unused);
                snprintf(dir, sizeof dir, "%s/%s%s/cpu.cfs_period_us", root, ctrl, path);
                if (q && read_pair(dir, &period, &unused)) cpus = quota_cpus(quota, period);
            }
            if (cpus > 0 && (best == 0 || cpus < best)) best = cpus;
            char *slash = strrchr(path, '/');
            if (!slash || path[1] == 0) break;
            if (slash == path) slash[1] = 0; /* up to "/" */
            else *slash = 0;
        }
    }
    fclose(f);
    return best;
}

int eng_cpus_usable(const eng_seg_t *seg, bool *quota_bound)
{
    const eng_ctl_t *ctl = (const eng_ctl_t *)((const char *)seg + seg->ctl_off);
    int cpus = 0;
    for (int w = 0; w < ENG_CPU_WORDS; w++) {
        uint64_t any = 0;
        for (uint32_t r = 0; r < seg->nranks; r++) any |= ctl[r].cpus[w];
        cpus += __builtin_popcountll(any);
    }
    if (cpus == 0) cpus = 1;
    int quota = eng_cgroup_quota_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
    *quota_bound = quota > 0 && quota < cpus;
    return *quota_bound ? quota : cpus;
}

void eng_ep_count_cpus(eng_ep_t *ep)
{
    bool quota_bound;
    int cpus = eng_cpus_usable(ep->seg, &quota_bound);
    ep->oversubscribed = ep->wsize > cpus;
    ep->yield_gauge.ncpus = cpus;
    if (ep->wrank == 0)
        MLC_INFO("engine: %d ranks on this host may run on %d cpu%s (%s): waiting ranks %s", ep->wsize, cpus,
                 cpus == 1 ? "" : "s", quota_bound ? "the CPU quota of their cgroup" : "the cpus they are allowed",
                 ep->oversubscribed ? "yield their cpu (more ranks than cpus)" : "spin, then sleep");
}
