/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which host this process runs on, as the bootstrap compares it: ranks with
 * equal identities share a host (shared memory, one /dev/shm). MLC_HOST_ID
 * overrides it (tests make several "hosts" on one machine); by default it is
 * the host name and the kernel's boot id, so two containers of one machine
 * with different names count as different hosts (their /dev/shm may differ).
 */
#ifndef MLC_BASE_HOST_H
#define MLC_BASE_HOST_H
#include <stddef.h>

/* The identity (compared) and a name for messages (MLC_HOST_ID or the host name). */
void mlc_host_identity(char *id, size_t id_len, char *name, size_t name_len);
#endif
