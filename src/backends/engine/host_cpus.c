/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whether a rank shares its cpus with more ranks than they can run at once.
 * Each rank publishes the cpus it is allowed (its sched_getaffinity) in its
 * control block before it attaches; once all have attached, a rank counts
 * as oversubscribed when
 *  - more ranks are confined to cpus among its own than it has cpus (two
 *    ranks that `taskset -c 0` put on one cpu, or two of three ranks bound
 *    to one cpu while the third has two of its own), or
 *  - the ranks outnumber the cpus they may use together: the union of their
 *    cpus, or the CPU quota of this process's cgroup (a container's --cpus,
 *    a systemd CPUQuota; fractional: 2 ranks under 1.5 cpus are
 *    oversubscribed) when that is lower.
 * Such a rank yields its cpu while it waits, or sleeps while other
 * processes take the cpus (yield_gauge.c), instead of spinning through the
 * time slice of the very peer it waits for: two ranks under `taskset -c 0`
 * took about 2 ms per 8-byte allreduce, counted right 3 us.
 *
 * Not the host's online cpus: a cpuset or taskset confines a job to fewer.
 * Not one rank's own mask alone: a rank bound to a cpu of its own (as the
 * benchmarks bind them) shares it with no peer.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "engine.h"

#define WORD_BITS 64

/* Rank r's control block, from the segment (before there is an endpoint). */
static eng_ctl_t *ctl_of(const eng_seg_t *seg, uint32_t r)
{
    return (eng_ctl_t *)((char *)seg + seg->ctl_off) + r;
}

void eng_cpus_publish(eng_seg_t *seg, int wrank)
{
    eng_ctl_t *ctl = ctl_of(seg, (uint32_t)wrank);
    uint64_t words[ENG_CPU_WORDS] = {0};
    cpu_set_t set;
    bool known = sched_getaffinity(0, sizeof set, &set) == 0; /* else more cpus than a cpu_set_t holds */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < ENG_CPU_WORDS * WORD_BITS; c++)
        if (known ? c < CPU_SETSIZE && CPU_ISSET(c, &set) : c < online) /* unknown: count them all */
            words[c / WORD_BITS] |= (uint64_t)1 << (c % WORD_BITS);
    memcpy(ctl->cpus, words, sizeof words);
}

/* quota / period in cpus; 0: no quota (none, "max", -1, nonsense). */
static double quota_cpus(long long quota, long long period)
{
    return quota > 0 && period > 0 ? (double)quota / (double)period : 0;
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

/* The quota of the cgroup at root + path and of each parent up to root. */
static double tightest_up(const char *root, const char *ctrl, char *path, bool v2)
{
    char file[4200];
    double best = 0;
    for (;;) {
        long long quota = 0, period = 0, unused;
        double cpus = 0;
        if (v2) {
            snprintf(file, sizeof file, "%s%s/cpu.max", root, path);
            if (read_pair(file, &quota, &period)) cpus = quota_cpus(quota, period);
        } else {
            snprintf(file, sizeof file, "%s/%s%s/cpu.cfs_quota_us", root, ctrl, path);
            bool q = read_pair(file, &quota, &unused);
            snprintf(file, sizeof file, "%s/%s%s/cpu.cfs_period_us", root, ctrl, path);
            if (q && read_pair(file, &period, &unused)) cpus = quota_cpus(quota, period);
        }
        if (cpus > 0 && (best == 0 || cpus < best)) best = cpus;
        char *slash = strrchr(path, '/');
        if (!slash || path[1] == 0) return best;
        if (slash == path) slash[1] = 0; /* up to "/" */
        else *slash = 0;
    }
}

double eng_cgroup_quota(const char *self_cgroup, const char *root)
{
    FILE *f = fopen(self_cgroup, "r");
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    double best = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = 0;
        char *ctrl = strchr(line, ':'), *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
        if (!path || strlen(path + 1) > 2048) continue;
        *path++ = 0;
        ctrl++;
        bool v2 = *ctrl == 0, v1 = false;
        for (char *t = ctrl; !v2 && t && *t;) { /* v1: a controller list such as "cpu,cpuacct" */
            size_t len = strcspn(t, ",");
            if (len == 3 && strncmp(t, "cpu", 3) == 0) v1 = true;
            t = t[len] ? t + len + 1 : NULL;
        }
        if (!v2 && !v1) continue;
        double q = tightest_up(root, ctrl, path, v2);
        if (q > 0 && (best == 0 || q < best)) best = q;
    }
    free(line);
    fclose(f);
    return best;
}

int eng_cpus_union(const eng_seg_t *seg)
{
    int cpus = 0;
    for (int w = 0; w < ENG_CPU_WORDS; w++) {
        uint64_t any = 0;
        for (uint32_t r = 0; r < seg->nranks; r++) any |= ctl_of(seg, r)->cpus[w];
        cpus += __builtin_popcountll(any);
    }
    return cpus > 0 ? cpus : 1;
}

int eng_cpus_crowd(const eng_seg_t *seg, int wrank, int *mine)
{
    const uint64_t *own = ctl_of(seg, (uint32_t)wrank)->cpus;
    int crowd = 0;
    *mine = 0;
    for (int w = 0; w < ENG_CPU_WORDS; w++) *mine += __builtin_popcountll(own[w]);
    for (uint32_t r = 0; r < seg->nranks; r++) {
        const uint64_t *cpus = ctl_of(seg, r)->cpus;
        bool within = true;
        for (int w = 0; w < ENG_CPU_WORDS && within; w++) within = (cpus[w] & ~own[w]) == 0;
        crowd += within;
    }
    return crowd;
}

/* The quota is this process's: read once (thread ranks count it per rank). */
static double process_quota;
static void read_process_quota(void) { process_quota = eng_cgroup_quota("/proc/self/cgroup", "/sys/fs/cgroup"); }

void eng_ep_count_cpus(eng_ep_t *ep)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_process_quota);
    int mine, crowd = eng_cpus_crowd(ep->seg, ep->wrank, &mine), all = eng_cpus_union(ep->seg);
    double usable = process_quota > 0 && process_quota < all ? process_quota : all;
    ep->oversubscribed = crowd > mine || ep->wsize > usable;
    ep->outnumbered = ep->wsize > all; /* not the quota: each process reads its own */
    /* What the ranks can use at once, for the gauge's share: not more cpus
     * than ranks (ranks that share some cpus while others have spare ones
     * count these too, so the share reads low: they sleep sooner). */
    ep->yield_gauge.cpus = usable < ep->wsize ? usable : ep->wsize;
    if (ep->wrank == 0)
        MLC_INFO("engine: rank 0: %d rank%s confined to its %d cpu%s; the %d ranks on this host may use %.3g cpu%s "
                 "(%s): waiting, it %s", crowd, crowd == 1 ? " is" : "s are", mine, mine == 1 ? "" : "s", ep->wsize,
                 usable, usable == 1 ? "" : "s", usable < all ? "the CPU quota of their cgroup" : "the cpus they are allowed",
                 ep->oversubscribed ? "yields its cpu (more ranks than cpus)" : "spins, then sleeps");
}
