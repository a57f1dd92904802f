/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that loads libmlcomm with dlopen (as ctypes and P/Invoke do),
 * opens a group on a thread and closes the library must not be left with a
 * thread-exit hook pointing into the unmapped library: a thread that used a
 * group while the library was loaded, and exits after dlclose, would call it.
 * The library deletes its thread-exit key when it is unloaded.
 * MLCOMM_LIBRARY = the shared library; exit 0 = pass (a crash fails).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "mlcomm.h"

static mlc_status_t (*group_start)(void);
static mlc_status_t (*group_end)(void);

/* Hands a token from one thread to another (the "go" and "done" signals). */
typedef struct signal {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int set;
} signal_t;
static signal_t grouped = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
static signal_t may_exit = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void raise_signal(signal_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->set = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}
static void await_signal(signal_t *s)
{
    pthread_mutex_lock(&s->lock);
    while (!s->set) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static int group_status = -1;

/* Opens and ends a group (registering this thread's exit hook), then outlives the library. */
static void *grouping_thread(void *arg)
{
    (void)arg;
    group_status = group_start() == MLC_SUCCESS && group_end() == MLC_SUCCESS ? 0 : 1;
    raise_signal(&grouped);
    await_signal(&may_exit);
    return NULL;
}

static void *plain_thread(void *arg) { return arg; }

int main(void)
{
    const char *path = getenv("MLCOMM_LIBRARY");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) {
        fprintf(stderr, "cannot load MLCOMM_LIBRARY=%s: %s\n", path ? path : "(unset)", dlerror());
        return 1;
    }
    *(void **)&group_start = dlsym(lib, "mlc_group_start");
    *(void **)&group_end = dlsym(lib, "mlc_group_end");
    if (!group_start || !group_end) {
        fprintf(stderr, "missing symbols in %s\n", path);
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, grouping_thread, NULL) != 0) return 1;
    await_signal(&grouped);
    if (group_status != 0) {
        fprintf(stderr, "mlc_group_start / mlc_group_end failed on the thread\n");
        return 1;
    }
    dlclose(lib);
    /* Otherwise nothing here tests anything. */
    if (dlopen(path, RTLD_NOW | RTLD_NOLOAD)) {
        fprintf(stderr, "%s is still loaded after dlclose: cannot test its unloading\n", path);
        return 1;
    }
    /* The thread that used a group exits now, then a fresh one. */
    raise_signal(&may_exit);
    pthread_join(t, NULL);
    if (pthread_create(&t, NULL, plain_thread, NULL) != 0) return 1;
    pthread_join(t, NULL);
    printf("threads exited cleanly after dlclose\n");
    return 0;
}
