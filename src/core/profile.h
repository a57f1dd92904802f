/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The profiler: per-collective statistics and, with MLC_PROFILE set, a
 * Chrome/Perfetto trace per rank holding every communicator of the rank,
 * each on a track of its own. Disabled, each hook is one predictable
 * branch on comm->prof.
 */
#ifndef MLC_CORE_PROFILE_H
#define MLC_CORE_PROFILE_H
#include "comm.h"

/* Open the profiler for comm when cfg.profile is set ("stats" = no trace
 * file). parent: the communicator comm was split from (with color), whose
 * trace file comm joins; NULL for a new world communicator, which opens the
 * file MLC_PROFILE names for its rank (or joins it, if already open here). */
mlc_status_t mlc_prof_open(mlc_comm_t *comm, const mlc_comm_t *parent, int color);
void mlc_prof_close(mlc_comm_t *comm);
/* Record a completed request (called once, when it completes). */
void mlc_prof_record(mlc_request_t *req);
#endif
