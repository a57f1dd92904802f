/* SPDX-License-Identifier: BSD-3-Clause */
/* Dense fp32 kernels, deterministic data and the one-rank reference model. */
#include "dense.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void mm_nn(const float *a, const float *b, float *c, size_t m, size_t k, size_t n, int accumulate)
{
    if (!accumulate) memset(c, 0, m * n * sizeof *c);
    for (size_t i = 0; i < m; i++) {
        float *ci = c + i * n;
        for (size_t p = 0; p < k; p++) {
            float aip = a[i * k + p];
            const float *bp = b + p * n;
            for (size_t j = 0; j < n; j++) ci[j] += aip * bp[j];
        }
    }
}

void mm_tn(const float *a, const float *b, float *c, size_t m, size_t k, size_t n, int accumulate)
{
    if (!accumulate) memset(c, 0, m * n * sizeof *c);
    for (size_t p = 0; p < k; p++) {
        const float *ap = a + p * m, *bp = b + p * n;
        for (size_t i = 0; i < m; i++) {
            float api = ap[i];
            float *ci = c + i * n;
            for (size_t j = 0; j < n; j++) ci[j] += api * bp[j];
        }
    }
}

void mm_nt(const float *a, const float *b, float *c, size_t m, size_t k, size_t n, int accumulate)
{
    for (size_t i = 0; i < m; i++) {
        const float *ai = a + i * k;
        for (size_t j = 0; j < n; j++) {
            const float *bj = b + j * k;
            float s = 0.0f;
            for (size_t p = 0; p < k; p++) s += ai[p] * bj[p];
            c[i * n + j] = accumulate ? c[i * n + j] + s : s;
        }
    }
}

/* tanh approximation of GELU (as GPT-2 / Megatron) */
static const float GELU_C = 0.7978845608f; /* sqrt(2/pi) */

float gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(GELU_C * (x + 0.044715f * x * x * x)));
}

float gelu_grad(float x)
{
    float u = GELU_C * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    float du = GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

float data_value(uint32_t id, size_t row, size_t col, size_t cols, float scale)
{
    uint64_t h = splitmix64(((uint64_t)id << 48) ^ (uint64_t)(row * cols + col));
    double u = (double)(h >> 11) / 9007199254740992.0; /* [0, 1) */
    return (float)((2.0 * u - 1.0) * scale);
}

float w1_scale(const mlp_dims_t *d) { return 1.0f / sqrtf((float)d->hidden); }
float w2_scale(const mlp_dims_t *d) { return 1.0f / sqrtf((float)d->ffn); }

static float *fill(uint32_t id, size_t rows, size_t cols, float scale)
{
    float *p = malloc(rows * cols * sizeof *p);
    if (!p) return NULL;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) p[r * cols + c] = data_value(id, r, c, cols, scale);
    return p;
}

void mlp_reference_free(mlp_reference_t *r)
{
    free(r->z);
    free(r->dx);
    free(r->dw1);
    free(r->db1);
    free(r->dw2);
    free(r->db2);
    memset(r, 0, sizeof *r);
}

int mlp_reference_compute(const mlp_dims_t *d, mlp_reference_t *out)
{
    size_t t = d->batch * d->seq, h = d->hidden, f = d->ffn;
    float *x = fill(ID_X, t, h, 1.0f), *tgt = fill(ID_TARGET, t, h, 1.0f);
    float *w1 = fill(ID_W1, h, f, w1_scale(d)), *b1 = fill(ID_B1, 1, f, 0.1f);
    float *w2 = fill(ID_W2, f, h, w2_scale(d)), *b2 = fill(ID_B2, 1, h, 0.1f);
    float *a = calloc(t * f, sizeof *a), *y = calloc(t * f, sizeof *y);
    float *dz = calloc(t * h, sizeof *dz), *dy = calloc(t * f, sizeof *dy);
    mlp_reference_t r = {malloc(t * h * sizeof(float)), malloc(t * h * sizeof(float)),
                         malloc(h * f * sizeof(float)), calloc(f, sizeof(float)),
                         malloc(f * h * sizeof(float)), calloc(h, sizeof(float))};
    int ok = x && tgt && w1 && b1 && w2 && b2 && a && y && dz && dy && r.z && r.dx && r.dw1 &&
             r.db1 && r.dw2 && r.db2;
    if (ok) {
        mm_nn(x, w1, a, t, h, f, 0);
        for (size_t i = 0; i < t; i++)
            for (size_t j = 0; j < f; j++) {
                a[i * f + j] += b1[j];
                y[i * f + j] = gelu(a[i * f + j]);
            }
        mm_nn(y, w2, r.z, t, f, h, 0);
        for (size_t i = 0; i < t; i++)
            for (size_t j = 0; j < h; j++) {
                r.z[i * h + j] += b2[j];
                dz[i * h + j] = (r.z[i * h + j] - tgt[i * h + j]) / (float)t;
                r.db2[j] += dz[i * h + j];
            }
        mm_tn(y, dz, r.dw2, f, t, h, 0);
        mm_nt(dz, w2, dy, t, h, f, 0);
        for (size_t i = 0; i < t; i++)
            for (size_t j = 0; j < f; j++) {
                dy[i * f + j] *= gelu_grad(a[i * f + j]); /* dy becomes dA */
                r.db1[j] += dy[i * f + j];
            }
        mm_tn(x, dy, r.dw1, h, t, f, 0);
        mm_nt(dy, w1, r.dx, t, f, h, 0);
    }
    free(x);
    free(tgt);
    free(w1);
    free(b1);
    free(w2);
    free(b2);
    free(a);
    free(y);
    free(dz);
    free(dy);
    if (!ok) {
        mlp_reference_free(&r);
        return -1;
    }
    *out = r;
    return 0;
}
