/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging per MLC_LOG_LEVEL / MLC_LOG_FILE. */
#ifndef MLC_CORE_LOG_H
#define MLC_CORE_LOG_H
#include "error.h"

/* Process-wide level and sink; set from the first communicator's config
 * (later communicators may only raise the verbosity). */
extern int mlc_log_level_current;
void mlc_log_configure(int level, const char *file_pattern);
void mlc_log_write(int level, const char *fmt, ...) MLC_PRINTF(2, 3);
/* The level test is inline so a disabled log line costs one branch. Code
 * outside libmlcomm (the MPI module, src/core/mpi_module.h) defines where
 * the level and the writer are found before including this header. */
#ifndef MLC_LOG_LEVEL_NOW
#define MLC_LOG_LEVEL_NOW mlc_log_level_current
#define MLC_LOG_WRITE mlc_log_write
#endif
#define MLC_LOG(level, ...)                                                 \
    do {                                                                    \
        if ((level) <= MLC_LOG_LEVEL_NOW) MLC_LOG_WRITE(level, __VA_ARGS__); \
    } while (0)
#define MLC_WARN(...) MLC_LOG(MLC_LOG_WARN, __VA_ARGS__)
#define MLC_INFO(...) MLC_LOG(MLC_LOG_INFO, __VA_ARGS__)
#define MLC_DEBUG(...) MLC_LOG(MLC_LOG_DEBUG, __VA_ARGS__)
#define MLC_TRACE(...) MLC_LOG(MLC_LOG_TRACE, __VA_ARGS__)
#endif
