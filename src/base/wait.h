/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one wait loop every blocking path uses (requests, probe, the MPI
 * module, the exchange's MPI executors, NCCL readiness, shm init).
 *
 * It polls a step until a done predicate holds: busy for spin_s after
 * anything moved, then with sched_yield for yield_s, then it blocks (the
 * caller's event hook, e.g. the engine's doorbell futex) or sleeps with a
 * doubling backoff, re-checking at least every slice_s; a step that says
 * MLC_WAIT_BLOCK_NOW skips the polling. The timeout means one
 * thing everywhere (MLC_TIMEOUT): timeout_s seconds in which no step moved
 * anything. Pure code without process state: the MPI module compiles its own
 * copy.
 */
#ifndef MLC_BASE_WAIT_H
#define MLC_BASE_WAIT_H

/* What a step reports. */
enum {
    MLC_WAIT_STOP = -1,          /* stop waiting (the step recorded why) */
    MLC_WAIT_NOTHING = 0,        /* nothing moved */
    MLC_WAIT_MOVED = 1,          /* this step moved something: restart the clock, spin again */
    MLC_WAIT_MOVED_ELSEWHERE = 2, /* something the wait depends on moved (another thread): restart the clock only */
    MLC_WAIT_BLOCK_NOW = 3        /* nothing moved, and polling again would hold a core others need: block now */
};

typedef enum mlc_wait_status {
    MLC_WAIT_DONE = 0,  /* the done predicate holds */
    MLC_WAIT_STOPPED,   /* a step or the check said stop */
    MLC_WAIT_TIMEOUT    /* nothing moved for timeout_s: the caller names `what` in its error */
} mlc_wait_status_t;

typedef struct mlc_wait {
    int (*step)(void *ctx);  /* required: one poll; returns MLC_WAIT_STOP/NOTHING/MOVED/MOVED_ELSEWHERE */
    int (*done)(void *ctx);  /* required: nonzero when the wait is over (asked after every step) */
    /* Optional: the slow checks (remote abort, peer death), run before every
     * block or sleep; nonzero stops the wait (done is asked first). */
    int (*check)(void *ctx);
    /* Optional: wait up to max_s for an event, returning early when woken;
     * returns 0 when it did not wait (the loop then sleeps with backoff). */
    int (*block)(void *ctx, double max_s);
    void *ctx;
    double timeout_s; /* fail after this long without progress; <= 0: never */
    const char *what; /* names the wait (for the caller's messages and mlc_wait_describe) */
    /* Tuning; 0 picks the default. */
    double spin_s;      /* busy polling after progress (2 ms); negative: none */
    double yield_s;     /* then polling with sched_yield (0.5 ms); negative: none */
    double slice_s;     /* longest single block or sleep (0.1 s) */
    double sleep_min_s; /* backoff sleeps without a block hook: from (2 us) ... */
    double sleep_max_s; /* ... doubling up to (1 ms) */
    unsigned spin_check; /* steps between clock reads while spinning (64) */
    /* Out: seconds since anything last moved, when the loop returned. */
    double idle_s;
} mlc_wait_t;

mlc_wait_status_t mlc_wait_run(mlc_wait_t *w);

/* "what made no progress for N s (MLC_TIMEOUT)" into buf, for timeout messages. */
const char *mlc_wait_describe(const mlc_wait_t *w, char *buf, unsigned long len);

#endif
