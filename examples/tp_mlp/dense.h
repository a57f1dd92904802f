/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Dense fp32 building blocks of the example: row-major matrix products, the
 * GELU activation, deterministic data, and the reference model computed on
 * one rank.
 */
#ifndef TP_MLP_DENSE_H
#define TP_MLP_DENSE_H
#include <stddef.h>
#include <stdint.h>

/* C[M,N] (+)= A[M,K] * B[K,N] */
void mm_nn(const float *a, const float *b, float *c, size_t m, size_t k, size_t n, int accumulate);
/* C[M,N] (+)= A[K,M]^T * B[K,N] */
void mm_tn(const float *a, const float *b, float *c, size_t m, size_t k, size_t n, int accumulate);
/* C[M,N] (+)= A[M,K] * B[N,K]^T */
void mm_nt(const float *a, const float *b, float *c, size_t m, size_t k, size_t n, int accumulate);

float gelu(float x);
float gelu_grad(float x);

/*
 * Deterministic values in [-scale, scale): element (row, col) of the
 * logical tensor `id` with `cols` columns, so that any rank can generate
 * any slice of it.
 */
float data_value(uint32_t id, size_t row, size_t col, size_t cols, float scale);

/* The MLP's sizes. Tokens are [batch, seq, hidden]. */
typedef struct mlp_dims {
    size_t batch, seq, hidden, ffn;
} mlp_dims_t;

/* Logical tensor ids for data_value. */
enum { ID_X = 1, ID_TARGET, ID_W1, ID_B1, ID_W2, ID_B2 };
/* Scales of the generated values. */
float w1_scale(const mlp_dims_t *d);
float w2_scale(const mlp_dims_t *d);

/*
 * The whole model on one rank, for the global batch:
 *   A = X W1 + b1, Y = gelu(A), Z = Y W2 + b2,
 *   loss = sum((Z - T)^2) / (2 * tokens), and its gradients.
 */
typedef struct mlp_reference {
    float *z, *dx;      /* [batch*seq, hidden] */
    float *dw1, *db1;   /* [hidden, ffn], [ffn] */
    float *dw2, *db2;   /* [ffn, hidden], [hidden] */
} mlp_reference_t;

int mlp_reference_compute(const mlp_dims_t *d, mlp_reference_t *out);
void mlp_reference_free(mlp_reference_t *r);
#endif
