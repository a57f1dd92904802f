/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The group cases (mlc_group_start / mlc_group_end) every backend runs:
 * test_group (threads, shm, mpi) and gpu_nccl_group (nccl on the doubles).
 * Each is a collective over comm (every rank calls it) and returns 0 when
 * it passed. Tags are 0 and sources named, as NCCL needs.
 */
#ifndef MLC_TEST_GROUP_CASES_H
#define MLC_TEST_GROUP_CASES_H
#include <stddef.h>
#include "mlcomm.h"

/* Blocking mlc_send to the right neighbour then mlc_recv from the left, in
 * one group, of `bytes` each; every byte checked. */
int group_ring_blocking(mlc_comm_t *comm, size_t bytes);
/* The same with the receive first, as float64 elements. */
int group_ring_recv_first(mlc_comm_t *comm, size_t bytes);
/* Request forms: waiting before mlc_group_end is refused, after it completes. */
int group_requests(mlc_comm_t *comm, size_t bytes);
/* An empty group, nested groups, mlc_group_end without a start. */
int group_empty_and_nested(mlc_comm_t *comm, size_t bytes);
/* A group over comm and `other` (the same ranks): freeing one while the
 * group is open is refused; a collective in the group. */
int group_two_comms(mlc_comm_t *comm, mlc_comm_t *other, size_t bytes);
/* other is aborted while a group waits on it: MLC_ERR_ABORTED naming the
 * operation (other is failed afterwards). */
int group_abort(mlc_comm_t *comm, mlc_comm_t *other);
/* Every case above in turn (the big ring of ring_bytes). */
int group_all_cases(mlc_comm_t *comm, mlc_comm_t *other, size_t ring_bytes, size_t bytes);
/* A thread opens a group, issues a ring of `bytes` on a child of comm and
 * exits without mlc_group_end: its exit ends the group (the data arrives,
 * the child can be freed). */
int group_thread_exit(mlc_comm_t *comm, size_t bytes);
/* Two ranks: rank 1 never posts; rank 0's group fails with MLC_ERR_TIMEOUT
 * naming the operation (MLC_TIMEOUT of comm must be small). Rank 0 then
 * tells rank 1 over `side`, which rank 1 polls. */
int group_timeout(mlc_comm_t *comm, mlc_comm_t *side);
#endif
