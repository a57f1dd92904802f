/* SPDX-License-Identifier: BSD-3-Clause */
/* The version of the library actually loaded (may differ from the header's). */
#include "mlcomm.h"

#ifndef MLC_VERSION_STRING
#define MLC_X_STR2(x) #x
#define MLC_X_STR(x) MLC_X_STR2(x)
#define MLC_VERSION_STRING \
    MLC_X_STR(MLC_VERSION_MAJOR) "." MLC_X_STR(MLC_VERSION_MINOR) "." MLC_X_STR(MLC_VERSION_PATCH)
#endif

const char *mlc_version(void) { return MLC_VERSION_STRING; }
