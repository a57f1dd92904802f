/* Private to op.c and reduce.c: looking up a live user op. */
#ifndef MLC_CORE_OP_USER_H
#define MLC_CORE_OP_USER_H
#include <stdbool.h>
#include "mlcomm.h"

/* Capacity of the process-wide user-op table. */
#define MLC_OP_USER_MAX 1024

/* fn and ctx of a live user op; false when op is not one. */
bool mlc_op_user_lookup(mlc_op_t op, mlc_user_fn_t *fn, void **ctx);
#endif
