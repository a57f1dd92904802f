/* SPDX-License-Identifier: BSD-3-Clause */
/* mlcomm-bench --model: the cost model's predictions, on paper. */
#ifndef MLC_TOOLS_BENCH_MODEL_H
#define MLC_TOOLS_BENCH_MODEL_H
#include <stdbool.h>
#include <stdio.h>
#include "algos/select.h"

/* True when the command line asks for --model (anywhere in argv). */
bool mlc_bench_model_wanted(int argc, char **argv);
/* Run the --model mode; returns the exit status. */
int mlc_bench_model_main(int argc, char **argv);
/*
 * A table of every algorithm's predicted time for coll at p = 2, 4, ...,
 * 16384 and a set of sizes, then, per p, the sizes at which the selector's
 * choice changes (bench_model_table.c). m NULL = the default model.
 */
void mlc_algo_print_model(FILE *f, const mlc_cost_model_t *m, mlc_coll_t coll);
#endif
