/* SPDX-License-Identifier: BSD-3-Clause */
/* mlcomm-bench --model: the cost model's predictions, on paper. */
#ifndef MLC_TOOLS_BENCH_MODEL_H
#define MLC_TOOLS_BENCH_MODEL_H
#include <stdbool.h>

/* True when the command line asks for --model (anywhere in argv). */
bool mlc_bench_model_wanted(int argc, char **argv);
/* Run the --model mode; returns the exit status. */
int mlc_bench_model_main(int argc, char **argv);
#endif
