/* SPDX-License-Identifier: BSD-3-Clause */
/* Fixture for unit.includes.refuses: base may not include core. */
#include "core/comm.h"
