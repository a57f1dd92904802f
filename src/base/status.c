/* SPDX-License-Identifier: BSD-3-Clause */
/* Status codes: names and descriptions, both from MLC_STATUS_LIST. */
#include "mlcomm.h"

const char *mlc_status_string(mlc_status_t status)
{
    switch (status) {
#define MLC_X_CASE(name, value, text) \
    case name:                        \
        return text;
        MLC_STATUS_LIST(MLC_X_CASE)
#undef MLC_X_CASE
    }
    return "unknown status";
}

const char *mlc_status_name(mlc_status_t status)
{
    switch (status) {
#define MLC_X_CASE(name, value, text) \
    case name:                        \
        return #name;
        MLC_STATUS_LIST(MLC_X_CASE)
#undef MLC_X_CASE
    }
    return "MLC_ERR_UNKNOWN";
}
