/* SPDX-License-Identifier: BSD-3-Clause */
/* Fixture for unit.includes.refuses. */
