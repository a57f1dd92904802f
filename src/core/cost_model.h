/* SPDX-License-Identifier: BSD-3-Clause */
/* The selector's cost model of a communicator (measured by rank 0, shared by all). */
#ifndef MLC_CORE_COST_MODEL_H
#define MLC_CORE_COST_MODEL_H
#include "comm.h"

/* Collective over comm: fill comm->model from rank 0's measurement of this host. */
mlc_status_t mlc_model_agree(mlc_comm_t *comm);
#endif
