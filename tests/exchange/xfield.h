/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rank-test helper: a decomposed n-dimensional field. Every rank computes
 * the same patch grid over the domain (uneven cuts) and keeps the patches
 * dealt to it; valid cells hold a value derived from the global cell and an
 * iteration number, ghost cells a sentinel, so after an exchange every cell
 * can be checked against the cell it mirrors (periodic wrap included).
 */
#ifndef MLC_XFIELD_H
#define MLC_XFIELD_H
#include <stddef.h>
#include <stdint.h>
#include "mlcomm_exchange.h"

#define XF_SENTINEL 0xA5

typedef struct xlayout {
    int ndim;
    int64_t origin[4], domain[4];
    int cuts[4];     /* patches per axis */
    int ghost[4];    /* ghost width per axis */
    int periodic[4];
    size_t esize;
    int empty_rank;  /* this rank gets no patch when the job has more than one rank (-1: none) */
} xlayout_t;

typedef struct xpatch {
    mlc_box_t valid, parent;
    unsigned char *data;
    int prov_id, need_first, nneeds;
} xpatch_t;

typedef struct xfield {
    xlayout_t L;
    xpatch_t *p;
    int np;
} xfield_t;

/* The exchange config matching L (dtype: a record of esize bytes). */
mlc_exchange_config_t xfield_config(const xlayout_t *L);
/* Allocate this rank's patches (0 on success). */
int xfield_make(xfield_t *f, const xlayout_t *L, int rank, int nranks);
/* Provide each patch's valid box and need its halo (mlc_box_halo). */
mlc_status_t xfield_declare(xfield_t *f, mlc_exchange_t *ex);
/* Point every view at a second set of buffers (double buffering): swaps data. */
mlc_status_t xfield_swap(xfield_t *f, unsigned char **other, mlc_exchange_t *ex);
/* Valid cells := value(cell, iter); ghost cells := sentinel. */
void xfield_fill(xfield_t *f, uint64_t iter);
/* Count wrong cells (ghosts outside an open axis must keep the sentinel); describe the first. */
long xfield_verify(const xfield_t *f, uint64_t iter, char *why, size_t len);
void xfield_free(xfield_t *f);
/* The value a valid cell c holds at iteration iter. */
void xfield_value(const int64_t *c, int nd, uint64_t iter, size_t esize, unsigned char *out);
#endif
