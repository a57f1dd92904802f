/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which ranks of the shm engine count as oversubscribed
 * (src/backends/engine/host_cpus.c), from the cpus the ranks published:
 *  - the union of their cpus: ranks on {0}, {0}, {1, 5} may use 3;
 *  - the crowd on a rank's cpus: there ranks 0 and 1 are both confined to
 *    cpu 0 (2 ranks on 1 cpu: oversubscribed), rank 2 has two of its own;
 *    unbound ranks (the same mask) crowd every rank's cpus;
 *  - a rank publishes the cpus of the thread that calls it (a thread bound
 *    to one cpu publishes that cpu alone);
 *  - the tightest CPU quota on the way from the process's cgroup to the
 *    root, in cpus, read from made-up cgroup trees: v2 (cpu.max, "max" =
 *    none, fractional) and v1 (cpu.cfs_quota_us / cpu.cfs_period_us of the
 *    controller list that holds "cpu", walking up too); a quota too large
 *    for an int is not cut to a small one; a missing tree or file is no
 *    quota; a line longer than any buffer is read whole.
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

static double quota(const char *self)
{
    char self_path[512], root[512];
    snprintf(self_path, sizeof self_path, "%s/%s", tmp, self);
    snprintf(root, sizeof root, "%s/fs", tmp);
    return eng_cgroup_quota(self_path, root);
}

static void test_cgroup_v2(void)
{
    put("v2/self", "0::/job/step\n");
    CHECK(quota("v2/self") == 0, "no cpu.max anywhere: no quota");
    put("fs/job/step/cpu.max", "max 100000\n");
    CHECK(quota("v2/self") == 0, "\"max\": no quota");
    put("fs/job/cpu.max", "150000 100000\n");
    CHECK(quota("v2/self") == 1.5, "a parent's 1.5 cpus, got %g", quota("v2/self"));
    put("fs/cpu.max", "100000 100000\n");
    CHECK(quota("v2/self") == 1, "the root's 1 cpu is the tightest, got %g", quota("v2/self"));
    put("fs/job/step/cpu.max", "50000 100000\n");
    CHECK(quota("v2/self") == 0.5, "half a cpu, got %g", quota("v2/self"));
    put("v2/top", "0::/\n");
    CHECK(quota("v2/top") == 1, "a process in the root cgroup reads its cpu.max, got %g", quota("v2/top"));
    put("v2/garbage", "garbage\n0::\n");
    CHECK(quota("v2/garbage") == 1, "a malformed line is skipped, an empty path is the root: got %g",
          quota("v2/garbage"));
    /* A path longer than a line buffer of 512: read whole (its cgroup has no
     * files here, so its parents' quota counts, not a fragment's). */
    char longline[1200] = "0::/job";
    while (strlen(longline) < 1000) strcat(longline, "/deep");
    strcat(longline, "\n");
    put("v2/long", longline);
    CHECK(quota("v2/long") == 1, "a long path: the tightest of its parents (1), got %g", quota("v2/long"));
}

static void test_cgroup_v1(void)
{
    put("v1/self", "12:memory:/x\n4:cpu,cpuacct:/job/inner\n");
    CHECK(quota("v1/self") == 0, "no cpu controller files: no quota");
    put("fs/cpu,cpuacct/job/inner/cpu.cfs_quota_us", "-1\n");
    put("fs/cpu,cpuacct/job/inner/cpu.cfs_period_us", "100000\n");
    CHECK(quota("v1/self") == 0, "-1: no quota");
    put("fs/cpu,cpuacct/job/cpu.cfs_quota_us", "300000\n");
    put("fs/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    CHECK(quota("v1/self") == 3, "a parent's 3 cpus, got %g", quota("v1/self"));
    put("fs/cpu,cpuacct/job/inner/cpu.cfs_quota_us", "4294967297000\n");
    put("fs/cpu,cpuacct/job/inner/cpu.cfs_period_us", "1000\n");
    CHECK(quota("v1/self") == 3, "a huge quota is no tighter than its parent's 3 cpus, got %g", quota("v1/self"));
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

static void set_cpus(eng_ctl_t *ctl, const int *cpus, int n)
{
    memset(ctl->cpus, 0, sizeof ctl->cpus);
    for (int i = 0; i < n; i++) ctl->cpus[cpus[i] / 64] |= (uint64_t)1 << (cpus[i] % 64);
}

static void test_union(void)
{
    size_t ring, total = eng_seg_size(3, false, &ring);
    eng_seg_t *seg = calloc(1, total);
    CHECK(seg != NULL, "out of memory");
    if (!seg) return;
    eng_seg_format(seg, 3, false, false, ring, total);
    eng_ctl_t *ctl = (eng_ctl_t *)((char *)seg + seg->ctl_off);
    set_cpus(&ctl[0], (int[]){0}, 1);
    set_cpus(&ctl[1], (int[]){0}, 1);
    set_cpus(&ctl[2], (int[]){1, 5}, 2);
    CHECK(eng_cpus_union(seg) == 3, "ranks on {0}, {0}, {1, 5}: %d cpus, want 3", eng_cpus_union(seg));
    int mine, crowd = eng_cpus_crowd(seg, 0, &mine);
    CHECK(crowd == 2 && mine == 1, "rank 0 on {0}: %d ranks on its %d cpus, want 2 on 1", crowd, mine);
    crowd = eng_cpus_crowd(seg, 2, &mine);
    CHECK(crowd == 1 && mine == 2, "rank 2 on {1, 5}: %d ranks on its %d cpus, want 1 on 2", crowd, mine);
    set_cpus(&ctl[2], (int[]){1023}, 1);
    CHECK(eng_cpus_union(seg) == 2, "cpu 1023 counts: %d, want 2", eng_cpus_union(seg));
    for (int r = 0; r < 3; r++) set_cpus(&ctl[r], (int[]){0, 1}, 2); /* unbound on 2 cpus */
    crowd = eng_cpus_crowd(seg, 1, &mine);
    CHECK(crowd == 3 && mine == 2, "three unbound ranks: %d on %d cpus, want 3 on 2", crowd, mine);
    set_cpus(&ctl[0], (int[]){0, 1}, 2);
    set_cpus(&ctl[1], (int[]){1}, 1);
    set_cpus(&ctl[2], (int[]){2}, 1);
    crowd = eng_cpus_crowd(seg, 0, &mine);
    CHECK(crowd == 2 && mine == 2, "{0, 1} beside {1}, {2}: %d ranks on its %d cpus, want 2 on 2", crowd, mine);

    /* A thread bound to one cpu (the last this process may use) publishes it alone. */
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE && c < ENG_CPU_WORDS * 64; c++)
        if (CPU_ISSET(c, &allowed)) last = c;
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
