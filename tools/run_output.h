/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where the ranks' standard output and error go (mlcomm-run):
 *   inherited  the launcher's own (the default; lines of ranks interleave);
 *   tagged     through a pipe per rank and stream, each line prefixed with
 *              "[RANK] " and written whole (--tag-output, -l);
 *   files      DIR/rank.N.out and DIR/rank.N.err (--output-dir DIR).
 */
#ifndef MLC_TOOLS_RUN_OUTPUT_H
#define MLC_TOOLS_RUN_OUTPUT_H
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct mlc_run_stream {
    int fd;       /* read end of the rank's pipe, -1 when closed or not piped */
    char *buf;    /* the line read so far */
    size_t len, cap;
} mlc_run_stream_t;

typedef struct mlc_run_output {
    int nranks;
    bool tag;
    const char *dir;          /* NULL: no files */
    mlc_run_stream_t *stream; /* 2 per rank (stdout, stderr) when tagging */
} mlc_run_output_t;

/* Returns 0, or -1 with a message in err (directory not creatable, out of memory). */
int mlc_run_output_init(mlc_run_output_t *o, int nranks, bool tag, const char *dir, char *err,
                        size_t errlen);
/* The descriptors rank r's stdout and stderr become (-1: inherit), opened
 * close-on-exec; after the spawn, mlc_run_output_spawned closes them here.
 * Returns 0, or -1 with a message in err. */
int mlc_run_output_open(mlc_run_output_t *o, int r, int child_fd[2], char *err, size_t errlen);
void mlc_run_output_spawned(int child_fd[2]);
/* Fill pfd with the open pipes (at most max); returns how many. */
int mlc_run_output_pollfds(const mlc_run_output_t *o, struct pollfd *pfd, int max);
/* Forward what the pipes in pfd[0..n) have, whole lines only. */
void mlc_run_output_forward(mlc_run_output_t *o, const struct pollfd *pfd, int n);
/* Forward everything left (the ranks have ended), partial last lines too. */
void mlc_run_output_drain(mlc_run_output_t *o);
void mlc_run_output_free(mlc_run_output_t *o);
#endif
