/*
 * The profiler: per-collective statistics and, with MLC_PROFILE set, a
 * Chrome/Perfetto trace per rank. Disabled, each hook is one predictable
 * branch on comm->prof.
 */
#ifndef MLC_CORE_PROFILE_H
#define MLC_CORE_PROFILE_H
#include "comm.h"

/* Open the profiler for comm when cfg.profile is set ("stats" = no trace file). */
mlc_status_t mlc_prof_open(mlc_comm_t *comm);
void mlc_prof_close(mlc_comm_t *comm);
/* Record a completed request (called once, when it completes). */
void mlc_prof_record(mlc_request_t *req);
#endif
