/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Trace files: one writer per file path in the process, shared by every
 * communicator that writes there (a rank's world communicator, the ones
 * split from it, a second world communicator of the same rank). The file
 * is a JSON array written one event per line with one write(2) each, under
 * the writer's lock, so events of communicators driven from different
 * threads never interleave. It is closed (its ']' written) when its last
 * communicator is freed, or at process exit; a communicator opened later on
 * the same path appends to it (the ']' is taken off again), so no event of
 * an earlier one is lost. A killed process leaves a valid prefix without
 * the ']' (which the Chrome / Perfetto array form allows).
 */
#ifndef MLC_CORE_TRACEFILE_H
#define MLC_CORE_TRACEFILE_H
#include <stdbool.h>
#include <stddef.h>
#include "mlcomm.h"

typedef struct mlc_tracefile mlc_tracefile_t;

/* Join the writer of path (opening or reopening the file); MLC_ERR_CONFIG
 * naming the path when it cannot be created. Release with mlc_tracefile_release. */
mlc_status_t mlc_tracefile_open(const char *path, mlc_tracefile_t **out);
/* One more communicator on tf's file. */
void mlc_tracefile_ref(mlc_tracefile_t *tf);
/* One communicator less; the last closes the file. */
void mlc_tracefile_release(mlc_tracefile_t *tf);
/* Append one event (a JSON object of n bytes, no separator). Any thread. */
void mlc_tracefile_event(mlc_tracefile_t *tf, const char *json, size_t n);
/* When the file's clock started (mlc_now seconds): event times count from it. */
double mlc_tracefile_t0(const mlc_tracefile_t *tf);
/* A track (Chrome "tid") of its own for a new communicator: 0, 1, 2, ... */
int mlc_tracefile_new_track(mlc_tracefile_t *tf);
/* true the first time `pid` is claimed in this file (its process_name is then due). */
bool mlc_tracefile_claim_pid(mlc_tracefile_t *tf, int pid);
#endif
