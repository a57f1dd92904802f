/* SPDX-License-Identifier: BSD-3-Clause */
/* Schedule storage: appending steps, sorting them by round, numbering messages. */
#include "sched.h"
#include <stdlib.h>
#include <string.h>
#include "base/error.h"

void mlc_sched_init(mlc_sched_t *s)
{
    s->steps = s->inline_steps;
    s->nsteps = 0;
    s->cap = sizeof s->inline_steps / sizeof s->inline_steps[0];
    s->nrounds = 0;
    s->tmp_bytes = 0;
    s->finalized = false;
}

void mlc_sched_free(mlc_sched_t *s)
{
    if (s->steps != s->inline_steps) free(s->steps);
    mlc_sched_init(s);
}

static mlc_status_t mlc_sched_grow(mlc_sched_t *s)
{
    size_t cap = s->cap * 2;
    mlc_step_t *steps = malloc(cap * sizeof *steps);
    if (!steps)
        return mlc_error(MLC_ERR_NO_MEMORY, "schedule: no memory for %zu steps", cap);
    memcpy(steps, s->steps, s->nsteps * sizeof *steps);
    if (s->steps != s->inline_steps) free(s->steps);
    s->steps = steps;
    s->cap = cap;
    return MLC_SUCCESS;
}

mlc_status_t mlc_sched_add_reduce(mlc_sched_t *s, mlc_step_kind_t kind, uint32_t round, int peer,
                                  mlc_buf_id_t buf, size_t off, mlc_buf_id_t sbuf, size_t soff,
                                  mlc_buf_id_t dbuf, size_t doff, size_t bytes, uint8_t flags)
{
    if (s->nsteps == s->cap) {
        mlc_status_t st = mlc_sched_grow(s);
        if (st) return st;
    }
    mlc_step_t *t = &s->steps[s->nsteps++];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)kind;
    t->buf = (uint8_t)buf;
    t->dbuf = (uint8_t)dbuf;
    t->sbuf = (uint8_t)sbuf;
    t->flags = flags;
    t->peer = peer;
    t->round = round;
    t->off = off;
    t->doff = doff;
    t->soff = soff;
    t->bytes = bytes;
    if (round + 1 > s->nrounds) s->nrounds = round + 1;
    s->finalized = false;
    return MLC_SUCCESS;
}

mlc_status_t mlc_sched_add(mlc_sched_t *s, mlc_step_kind_t kind, uint32_t round, int peer,
                           mlc_buf_id_t buf, size_t off, mlc_buf_id_t dbuf, size_t doff,
                           size_t bytes, uint8_t flags)
{
    return mlc_sched_add_reduce(s, kind, round, peer, buf, off, dbuf, doff, dbuf, doff, bytes,
                                flags);
}

static bool mlc_step_is_comm(const mlc_step_t *t)
{
    return t->kind == MLC_STEP_SEND || t->kind == MLC_STEP_RECV || t->kind == MLC_STEP_RECV_REDUCE;
}

/* Stable counting sort by round. */
static mlc_status_t mlc_sched_sort(mlc_sched_t *s)
{
    bool sorted = true;
    for (size_t i = 1; i < s->nsteps && sorted; i++)
        sorted = s->steps[i - 1].round <= s->steps[i].round;
    if (sorted) return MLC_SUCCESS;

    size_t *start = calloc((size_t)s->nrounds + 1, sizeof *start);
    mlc_step_t *out = malloc(s->cap * sizeof *out);
    if (!start || !out) {
        free(start);
        free(out);
        return mlc_error(MLC_ERR_NO_MEMORY, "schedule: no memory to sort %zu steps", s->nsteps);
    }
    for (size_t i = 0; i < s->nsteps; i++) start[s->steps[i].round + 1]++;
    for (uint32_t r = 0; r < s->nrounds; r++) start[r + 1] += start[r];
    for (size_t i = 0; i < s->nsteps; i++) out[start[s->steps[i].round]++] = s->steps[i];
    free(start);
    if (s->steps == s->inline_steps) {
        memcpy(s->inline_steps, out, s->nsteps * sizeof *out);
        free(out);
    } else {
        free(s->steps);
        s->steps = out;
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_sched_finalize(mlc_sched_t *s)
{
    if (s->finalized) return MLC_SUCCESS;
    mlc_status_t st = mlc_sched_sort(s);
    if (st) return st;

    /* Per-peer message counters, one pair (sends, receives) per peer. */
    int maxpeer = -1;
    for (size_t i = 0; i < s->nsteps; i++) {
        const mlc_step_t *t = &s->steps[i];
        if (!mlc_step_is_comm(t)) continue;
        if (t->peer < 0)
            return mlc_error(MLC_ERR_INTERNAL, "schedule step %zu: negative peer %d", i, t->peer);
        if (t->peer > maxpeer) maxpeer = t->peer;
    }
    uint32_t small[2 * 64];
    uint32_t *counts = small;
    size_t ncounts = 2 * (size_t)(maxpeer + 1);
    if (ncounts > sizeof small / sizeof small[0]) {
        counts = malloc(ncounts * sizeof *counts);
        if (!counts)
            return mlc_error(MLC_ERR_NO_MEMORY, "schedule: no memory to number messages");
    }
    memset(counts, 0, ncounts * sizeof *counts);
    for (size_t i = 0; i < s->nsteps; i++) {
        mlc_step_t *t = &s->steps[i];
        if (!mlc_step_is_comm(t)) {
            t->key = 0;
            continue;
        }
        uint32_t *c = &counts[2 * (size_t)t->peer + (t->kind == MLC_STEP_SEND ? 0 : 1)];
        if (*c >> MLC_SCHED_KEY_BITS) {
            st = mlc_error(MLC_ERR_UNSUPPORTED,
                           "schedule: more than %u messages to or from rank %d in one operation",
                           1u << MLC_SCHED_KEY_BITS, t->peer);
            break;
        }
        t->key = (*c)++;
    }
    if (counts != small) free(counts);
    if (!st) s->finalized = true;
    return st;
}
