/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How many cpus the shm engine's ranks may use (src/backends/engine/host_cpus.c):
 *  - the union of the cpus the ranks published, not one rank's alone and not
 *    the host's: ranks on cpus {0}, {0}, {1, 5} may use 3;
 *  - a rank publishes the cpus of the thread that calls it (a thread bound
 *    to one cpu publishes that cpu alone);
 *  - the tightest CPU quota on the way from the process's cgroup to the root
 *    bounds it, read from made-up cgroup trees: v2 (cpu.max, "max" = none,
 *    rounded up) and v1 (cpu.cfs_quota_us / cpu.cfs_period_us of the
 *    controller list that holds "cpu"); a missing tree or file is no quota.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "backends/engine/engine.h"
#include "unit.h"

static char tmp[256];

static void put(const char *rel, const char *text)
{
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", tmp, rel);
    /* make the parent directories */
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + strlen(tmp) + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        mkdir(dir, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int quota(const char *self)
{
    char self_path[512], root[512];
    snprintf(self_path, sizeof self_path, "%s/%s", tmp, self);
    snprintf(root, sizeof root, "%s/fs", tmp);
    return eng_cgroup_quota_cpus(self_path, root);
}

static void test_cgroup_v2(void)
{
    put("v2/self", "0::/job/step\n");
    CHECK(quota("v2/self") == 0, "no cpu.max anywhere: no quota");
    put("fs/job/step/cpu.max", "max 100000\n");
    CHECK(quota("v2/self") == 0, "\"max\": no quota");
    put("fs/job/cpu.max", "150000 100000\n");
    CHECK(quota("v2/self") == 2, "a parent's 1.5 cpus count as 2, got %d", quota("v2/self"));
    put("fs/cpu.max", "100000 100000\n");
    CHECK(quota("v2/self") == 1, "the root's 1 cpu is the tightest, got %d", quota("v2/self"));
    put("fs/job/step/cpu.max", "50000 100000\n");
    CHECK(quota("v2/self") == 1, "half a cpu rounds up to 1, got %d", quota("v2/self"));
    put("v2/top", "0::/\n");
    CHECK(quota("v2/top") == 1, "a process in the root cgroup reads its cpu.max, got %d", quota("v2/top"));
    put("v2/garbage", "garbage\n0::\n");
    CHECK(quota("v2/garbage") == 1, "a malformed line is skipped, an empty path is the root: got %d",
          quota("v2/garbage"));
}

static void test_cgroup_v1(void)
{
    put("v1/self", "12:memory:/x\n4:cpu,cpuacct:/job\n");
    CHECK(quota("v1/self") == 0, "no cpu controller files: no quota");
    put("fs/cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
    put("fs/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    CHECK(quota("v1/self") == 0, "-1: no quota");
    put("fs/cpu,cpuacct/job/cpu.cfs_quota_us", "300000\n");
    CHECK(quota("v1/self") == 3, "3 cpus, got %d", quota("v1/self"));
    put("v1/cpuset", "3:cpuset:/job\n");
    CHECK(quota("v1/cpuset") == 0, "cpuset is not the cpu controller");
    CHECK(quota("v1/absent") == 0, "no /proc/self/cgroup: no quota");
}

typedef struct {
    eng_seg_t *seg;
    int cpu;
} bound_t;

static void *publish_bound(void *p)
{
    bound_t *b = p;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(b->cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return NULL;
    eng_cpus_publish(b->seg, 1);
    return p;
}

static void test_union(void)
{
    size_t ring, total = eng_seg_size(3, false, &ring);
    eng_seg_t *seg = calloc(1, total);
    CHECK(seg != NULL, "out of memory");
    if (!seg) return;
    eng_seg_format(seg, 3, false, false, ring, total);
    eng_ctl_t *ctl = (eng_ctl_t *)((char *)seg + seg->ctl_off);
    ctl[0].cpus[0] = 1u << 0;
    ctl[1].cpus[0] = 1u << 0;
    ctl[2].cpus[0] = (1u << 1) | (1u << 5);
    int q = eng_cgroup_quota_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
    int want = q > 0 && q < 3 ? q : 3;
    bool bound;
    CHECK(eng_cpus_usable(seg, &bound) == want, "ranks on {0}, {0}, {1, 5}: %d cpus, want %d (quota %d)",
          eng_cpus_usable(seg, &bound), want, q);
    CHECK(bound == (want < 3), "bounded by the quota: %d", bound);
    ctl[2].cpus[ENG_CPU_WORDS - 1] = (uint64_t)1 << 63; /* cpu 1023 */
    want = q > 0 && q < 4 ? q : 4;
    CHECK(eng_cpus_usable(seg, &bound) == want, "cpu 1023 counts: %d, want %d", eng_cpus_usable(seg, &bound), want);

    /* A thread bound to one cpu (the last this process may use) publishes it alone. */
    cpu_set_t mine;
    CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0, "sched_getaffinity");
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE && c < ENG_CPU_WORDS * 64; c++)
        if (CPU_ISSET(c, &mine)) last = c;
    bound_t b = {seg, last};
    pthread_t t;
    void *ok = NULL;
    memset(ctl[1].cpus, 0xff, sizeof ctl[1].cpus);
    CHECK(last >= 0 && pthread_create(&t, NULL, publish_bound, &b) == 0, "thread");
    if (last >= 0) pthread_join(t, &ok);
    CHECK(ok != NULL, "could not bind a thread to cpu %d", last);
    for (int w = 0; w < ENG_CPU_WORDS; w++) {
        uint64_t want_word = w == last / 64 ? (uint64_t)1 << (last % 64) : 0;
        CHECK(ctl[1].cpus[w] == want_word, "word %d: %#llx, want %#llx", w, (unsigned long long)ctl[1].cpus[w],
              (unsigned long long)want_word);
    }
    free(seg);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/mlc-unit-host-cpus.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    test_cgroup_v2();
    test_cgroup_v1();
    test_union();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return unit_result("unit_host_cpus");
}
