/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tensor-parallel MLP of the example (Megatron style):
 *   layer 1 column-parallel: W1 [hidden, ffn] split by columns, no
 *           communication forward (its backward all-reduces dX);
 *   layer 2 row-parallel: W2 [ffn, hidden] split by rows, its partial
 *           outputs all-reduced forward.
 * Sequence-parallel variant: activations outside the two layers are split
 * along the sequence dimension (dim 1 of [batch, seq, hidden]); the
 * all-reduces become an all-gather before layer 1 and a reduce-scatter
 * after layer 2 (and the same pair in backward).
 * Data parallel on top: the batch is split over the "dp" axis of the mesh
 * and gradients are all-reduced over it.
 */
#ifndef TP_MLP_MODEL_H
#define TP_MLP_MODEL_H
#include "dense.h"
#include "mlcomm_tensor.h"

typedef struct tp_model {
    mlp_dims_t g;        /* global sizes (g.batch = whole batch over dp) */
    int sp;              /* sequence parallel */
    mlc_comm_t *tp, *dp;
    int tp_size, tp_rank, dp_size, dp_rank;
    size_t f_off, f_len; /* this rank's ffn columns */
    size_t s_off, s_len; /* this rank's sequence slice (sp), else 0, seq */
    size_t micro, mb;    /* micro-batches per step, examples per micro-batch */
    size_t b_off;        /* first global example of this dp replica */
    float *w1, *b1, *w2, *b2;     /* parameter shards */
    float *dw1, *db1, *dw2, *db2; /* their gradients */
    /* per micro-batch buffers, `micro` of each, back to back */
    float *x, *tgt;      /* inputs and targets: [mb, s_len, hidden] */
    float *xg;           /* sp: gathered inputs [mb, seq, hidden]; else NULL */
    float *a, *y;        /* [mb*seq, f_len] */
    float *zp, *dxp;     /* partial outputs / input gradients [mb, seq, hidden] */
    float *z, *dx;       /* sp: [mb, s_len, hidden]; else NULL (zp, dxp reduced in place) */
    float *dz;           /* [mb, s_len, hidden] */
    float *dzg;          /* sp: gathered [mb, seq, hidden]; else NULL */
    float *dy;           /* scratch [mb*seq, f_len] */
    mlc_tensor_request_t **req_in, **req_out;
    char errmsg[512];    /* what failed, when tp_model_step fails */
} tp_model_t;

/* Build the model shards of this rank. micro must divide the replica's batch. */
int tp_model_init(tp_model_t *m, const mlp_dims_t *global, int sp, size_t micro, mlc_comm_t *tp,
                  mlc_comm_t *dp);
void tp_model_free(tp_model_t *m);
/*
 * One training step's forward and backward over every micro-batch, then
 * the gradient all-reduce over dp. overlap = 1: each micro-batch's
 * communication is asynchronous and overlaps the next micro-batch's
 * computation; 0: every collective blocks.
 */
mlc_status_t tp_model_step(tp_model_t *m, int overlap);
/* Largest normwise relative error of outputs and gradients against ref. */
double tp_model_max_rel_err(const tp_model_t *m, const mlp_reference_t *ref);
#endif
