/* SPDX-License-Identifier: BSD-3-Clause */
/* The tensor-parallel (and sequence-parallel) MLP: shards, step, check. */
#include "model.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A [b, s, h] fp32 host tensor. */
static mlc_tensor_t t3(float *p, size_t b, size_t s, size_t h)
{
    mlc_tensor_t t = {.data = p, .dtype = MLC_FLOAT32, .ndim = 3, .device = MLC_DEVICE_HOST};
    t.shape[0] = b;
    t.shape[1] = s;
    t.shape[2] = h;
    return t;
}

static mlc_tensor_t t1(float *p, size_t n)
{
    mlc_tensor_t t = {.data = p, .dtype = MLC_FLOAT32, .ndim = 1, .device = MLC_DEVICE_HOST};
    t.shape[0] = n;
    return t;
}

/* Sizes of one micro-batch's buffers (elements). */
static size_t local_tokens(const tp_model_t *m) { return m->mb * m->s_len; }
static size_t full_tokens(const tp_model_t *m) { return m->mb * m->g.seq; }
#define PER(m, buf, i, n) ((m)->buf + (i) * (n))
#define X(m, i) PER(m, x, i, local_tokens(m) * (m)->g.hidden)
#define TGT(m, i) PER(m, tgt, i, local_tokens(m) * (m)->g.hidden)
#define XG(m, i) PER(m, xg, i, full_tokens(m) * (m)->g.hidden)
#define A(m, i) PER(m, a, i, full_tokens(m) * (m)->f_len)
#define Y(m, i) PER(m, y, i, full_tokens(m) * (m)->f_len)
#define ZP(m, i) PER(m, zp, i, full_tokens(m) * (m)->g.hidden)
#define DXP(m, i) PER(m, dxp, i, full_tokens(m) * (m)->g.hidden)
#define Z(m, i) PER(m, z, i, local_tokens(m) * (m)->g.hidden)
#define DX(m, i) PER(m, dx, i, local_tokens(m) * (m)->g.hidden)
#define DZ(m, i) PER(m, dz, i, local_tokens(m) * (m)->g.hidden)
#define DZG(m, i) PER(m, dzg, i, full_tokens(m) * (m)->g.hidden)
/* The layer inputs/outputs that are full-sequence in plain TP and split in SP. */
#define XIN(m, i) ((m)->sp ? XG(m, i) : X(m, i))
#define DZIN(m, i) ((m)->sp ? DZG(m, i) : DZ(m, i))
#define ZOUT(m, i) ((m)->sp ? Z(m, i) : ZP(m, i))
#define DXOUT(m, i) ((m)->sp ? DX(m, i) : DXP(m, i))

void tp_model_free(tp_model_t *m)
{
    float *bufs[] = {m->w1, m->b1, m->w2, m->b2, m->dw1, m->db1, m->dw2, m->db2, m->x, m->tgt,
                     m->xg, m->a, m->y, m->zp, m->dxp, m->z, m->dx, m->dz, m->dzg, m->dy};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(m->req_in);
    free(m->req_out);
    memset(m, 0, sizeof *m);
}

static float *alloc_floats(size_t n, int *ok)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) *ok = 0;
    return p;
}

int tp_model_init(tp_model_t *m, const mlp_dims_t *global, int sp, size_t micro, mlc_comm_t *tp,
                  mlc_comm_t *dp)
{
    memset(m, 0, sizeof *m);
    m->g = *global;
    m->sp = sp;
    m->tp = tp;
    m->dp = dp;
    m->tp_size = mlc_comm_size(tp);
    m->tp_rank = mlc_comm_rank(tp);
    m->dp_size = mlc_comm_size(dp);
    m->dp_rank = mlc_comm_rank(dp);
    size_t replica_batch = global->batch / (size_t)m->dp_size;
    if (global->batch % (size_t)m->dp_size || micro == 0 || replica_batch % micro) return -1;
    m->micro = micro;
    m->mb = replica_batch / micro;
    m->b_off = (size_t)m->dp_rank * replica_batch;
    mlc_tensor_split(global->ffn, m->tp_size, m->tp_rank, &m->f_off, &m->f_len);
    if (sp) mlc_tensor_split(global->seq, m->tp_size, m->tp_rank, &m->s_off, &m->s_len);
    else m->s_len = global->seq;

    size_t h = global->hidden, f = m->f_len, s = global->seq;
    size_t loc = local_tokens(m) * h, full = full_tokens(m) * h, act = full_tokens(m) * f;
    int ok = 1;
    m->w1 = alloc_floats(h * f, &ok);
    m->b1 = alloc_floats(f, &ok);
    m->w2 = alloc_floats(f * h, &ok);
    m->b2 = alloc_floats(h, &ok);
    m->dw1 = alloc_floats(h * f, &ok);
    m->db1 = alloc_floats(f, &ok);
    m->dw2 = alloc_floats(f * h, &ok);
    m->db2 = alloc_floats(h, &ok);
    m->x = alloc_floats(micro * loc, &ok);
    m->tgt = alloc_floats(micro * loc, &ok);
    m->a = alloc_floats(micro * act, &ok);
    m->y = alloc_floats(micro * act, &ok);
    m->zp = alloc_floats(micro * full, &ok);
    m->dxp = alloc_floats(micro * full, &ok);
    m->dz = alloc_floats(micro * loc, &ok);
    m->dy = alloc_floats(act, &ok);
    if (sp) {
        m->xg = alloc_floats(micro * full, &ok);
        m->dzg = alloc_floats(micro * full, &ok);
        m->z = alloc_floats(micro * loc, &ok);
        m->dx = alloc_floats(micro * loc, &ok);
    }
    m->req_in = calloc(micro, sizeof *m->req_in);
    m->req_out = calloc(micro, sizeof *m->req_out);
    if (!ok || !m->req_in || !m->req_out) {
        tp_model_free(m);
        return -1;
    }
    /* This rank's slices of the same logical tensors the reference uses. */
    for (size_t k = 0; k < h; k++)
        for (size_t j = 0; j < f; j++)
            m->w1[k * f + j] = data_value(ID_W1, k, m->f_off + j, global->ffn, w1_scale(global));
    for (size_t j = 0; j < f; j++) m->b1[j] = data_value(ID_B1, 0, m->f_off + j, global->ffn, 0.1f);
    for (size_t j = 0; j < f; j++)
        for (size_t k = 0; k < h; k++)
            m->w2[j * h + k] = data_value(ID_W2, m->f_off + j, k, h, w2_scale(global));
    for (size_t k = 0; k < h; k++) m->b2[k] = data_value(ID_B2, 0, k, h, 0.1f);
    for (size_t i = 0; i < micro; i++)
        for (size_t e = 0; e < m->mb; e++)
            for (size_t t = 0; t < m->s_len; t++) {
                size_t row = (m->b_off + i * m->mb + e) * s + m->s_off + t;
                size_t at = (e * m->s_len + t) * h;
                for (size_t k = 0; k < h; k++) {
                    X(m, i)[at + k] = data_value(ID_X, row, k, h, 1.0f);
                    TGT(m, i)[at + k] = data_value(ID_TARGET, row, k, h, 1.0f);
                }
            }
    return 0;
}

/* ---- one micro-batch ---------------------------------------------------- */

/* sp: gather the inputs along the sequence before layer 1 */
static mlc_status_t fwd_in(tp_model_t *m, size_t i, mlc_tensor_request_t **req)
{
    if (!m->sp) return MLC_SUCCESS;
    mlc_tensor_t shard = t3(X(m, i), m->mb, m->s_len, m->g.hidden);
    mlc_tensor_t full = t3(XG(m, i), m->mb, m->g.seq, m->g.hidden);
    return mlc_tensor_allgather(&shard, &full, 1, m->tp, req);
}

static void fwd_compute(tp_model_t *m, size_t i)
{
    size_t t = full_tokens(m), h = m->g.hidden, f = m->f_len;
    float *a = A(m, i), *y = Y(m, i);
    mm_nn(XIN(m, i), m->w1, a, t, h, f, 0);
    for (size_t r = 0; r < t; r++)
        for (size_t j = 0; j < f; j++) {
            a[r * f + j] += m->b1[j];
            y[r * f + j] = gelu(a[r * f + j]);
        }
    mm_nn(y, m->w2, ZP(m, i), t, f, h, 0);
}

/* layer 2's partial outputs: all-reduce (tp) or reduce-scatter along the sequence (sp) */
static mlc_status_t fwd_out(tp_model_t *m, size_t i, mlc_tensor_request_t **req)
{
    mlc_tensor_t part = t3(ZP(m, i), m->mb, m->g.seq, m->g.hidden);
    if (!m->sp) return mlc_tensor_allreduce(&part, &part, MLC_SUM, m->tp, req);
    mlc_tensor_t mine = t3(Z(m, i), m->mb, m->s_len, m->g.hidden);
    return mlc_tensor_reduce_scatter(&part, &mine, 1, MLC_SUM, m->tp, req);
}

/* bias, and the loss gradient dZ = (Z - T) / tokens */
static void fwd_finish(tp_model_t *m, size_t i)
{
    size_t h = m->g.hidden, rows = local_tokens(m);
    float scale = 1.0f / (float)(m->g.batch * m->g.seq);
    float *z = ZOUT(m, i), *dz = DZ(m, i), *tgt = TGT(m, i);
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < h; k++) {
            z[r * h + k] += m->b2[k];
            dz[r * h + k] = (z[r * h + k] - tgt[r * h + k]) * scale;
        }
}

/* sp: gather dZ along the sequence before layer 2's backward */
static mlc_status_t bwd_in(tp_model_t *m, size_t i, mlc_tensor_request_t **req)
{
    if (!m->sp) return MLC_SUCCESS;
    mlc_tensor_t shard = t3(DZ(m, i), m->mb, m->s_len, m->g.hidden);
    mlc_tensor_t full = t3(DZG(m, i), m->mb, m->g.seq, m->g.hidden);
    return mlc_tensor_allgather(&shard, &full, 1, m->tp, req);
}

static void bwd_compute(tp_model_t *m, size_t i)
{
    size_t t = full_tokens(m), h = m->g.hidden, f = m->f_len, rows = local_tokens(m);
    const float *dz = DZIN(m, i), *a = A(m, i);
    float *dy = m->dy;
    mm_tn(Y(m, i), dz, m->dw2, f, t, h, 1);
    for (size_t r = 0; r < rows; r++) /* sp: this rank's tokens only; summed over tp later */
        for (size_t k = 0; k < h; k++) m->db2[k] += DZ(m, i)[r * h + k];
    mm_nt(dz, m->w2, dy, t, h, f, 0);
    for (size_t r = 0; r < t; r++)
        for (size_t j = 0; j < f; j++) {
            dy[r * f + j] *= gelu_grad(a[r * f + j]); /* now dA */
            m->db1[j] += dy[r * f + j];
        }
    mm_tn(XIN(m, i), dy, m->dw1, h, t, f, 1);
    mm_nt(dy, m->w1, DXP(m, i), t, f, h, 0);
}

/* layer 1's partial input gradients: all-reduce (tp) or reduce-scatter (sp) */
static mlc_status_t bwd_out(tp_model_t *m, size_t i, mlc_tensor_request_t **req)
{
    mlc_tensor_t part = t3(DXP(m, i), m->mb, m->g.seq, m->g.hidden);
    if (!m->sp) return mlc_tensor_allreduce(&part, &part, MLC_SUM, m->tp, req);
    mlc_tensor_t mine = t3(DX(m, i), m->mb, m->s_len, m->g.hidden);
    return mlc_tensor_reduce_scatter(&part, &mine, 1, MLC_SUM, m->tp, req);
}

/* sp: db2 was summed over this rank's tokens only; dp: sum gradients over replicas */
static mlc_status_t grad_sync(tp_model_t *m, int overlap)
{
    mlc_status_t st;
    if (m->sp) {
        mlc_tensor_t db2 = t1(m->db2, m->g.hidden);
        if ((st = mlc_tensor_allreduce(&db2, &db2, MLC_SUM, m->tp, NULL))) return st;
    }
    if (m->dp_size == 1) return MLC_SUCCESS;
    mlc_tensor_t g[4] = {t1(m->dw1, m->g.hidden * m->f_len), t1(m->db1, m->f_len),
                         t1(m->dw2, m->f_len * m->g.hidden), t1(m->db2, m->g.hidden)};
    mlc_tensor_request_t *reqs[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < 4; k++) {
        st = mlc_tensor_allreduce(&g[k], &g[k], MLC_SUM, m->dp, overlap ? &reqs[k] : NULL);
        if (st != MLC_SUCCESS) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", mlc_last_error());
            mlc_tensor_request_wait_all(4, reqs, NULL);
            fprintf(stderr, "tp_mlp: gradient all-reduce: %s\n", msg);
            return st;
        }
    }
    return mlc_tensor_request_wait_all(4, reqs, NULL);
}

/* Run phase `in` / `compute` / `out` over every micro-batch: micro-batch i's
 * `out` communication (and i+1's `in`) run while micro-batch i+1 computes. */
typedef mlc_status_t (*comm_fn)(tp_model_t *, size_t, mlc_tensor_request_t **);
typedef void (*compute_fn)(tp_model_t *, size_t);

static mlc_status_t run_phase(tp_model_t *m, int overlap, comm_fn in, compute_fn compute,
                              comm_fn out, compute_fn finish)
{
    mlc_status_t st;
    size_t n = m->micro;
#define SLOT(arr, i) (overlap ? &(arr)[i] : NULL)
    if ((st = in(m, 0, SLOT(m->req_in, 0)))) return st;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && (st = in(m, i + 1, SLOT(m->req_in, i + 1)))) return st;
        if ((st = mlc_tensor_request_wait(&m->req_in[i]))) return st;
        compute(m, i);
        if ((st = out(m, i, SLOT(m->req_out, i)))) return st;
    }
#undef SLOT
    for (size_t i = 0; i < n; i++) {
        if ((st = mlc_tensor_request_wait(&m->req_out[i]))) return st;
        if (finish) finish(m, i);
    }
    return MLC_SUCCESS;
}

mlc_status_t tp_model_step(tp_model_t *m, int overlap)
{
    size_t h = m->g.hidden, f = m->f_len;
    memset(m->dw1, 0, h * f * sizeof(float));
    memset(m->db1, 0, f * sizeof(float));
    memset(m->dw2, 0, f * h * sizeof(float));
    memset(m->db2, 0, h * sizeof(float));
    mlc_status_t st = run_phase(m, overlap, fwd_in, fwd_compute, fwd_out, fwd_finish);
    if (st == MLC_SUCCESS) st = run_phase(m, overlap, bwd_in, bwd_compute, bwd_out, NULL);
    if (st == MLC_SUCCESS) st = grad_sync(m, overlap);
    if (st != MLC_SUCCESS) {
        snprintf(m->errmsg, sizeof m->errmsg, "%s: %s", mlc_status_name(st), mlc_last_error());
        /* what was started must finish before its buffers are reused */
        mlc_tensor_request_wait_all(m->micro, m->req_in, NULL);
        mlc_tensor_request_wait_all(m->micro, m->req_out, NULL);
    }
    return st;
}

/* ---- the check against the one-rank model -------------------------------- */

/* max that lets a NaN through (fmax would drop it and hide a broken result) */
static double worse(double a, double b) { return (a >= b || a != a) ? a : b; }

static float max_abs(const float *p, size_t n)
{
    float mx = 0.0f;
    for (size_t i = 0; i < n; i++) mx = fmaxf(mx, fabsf(p[i]));
    return mx > 0.0f ? mx : 1.0f;
}

/* Normwise relative error of rows x cols values against ref (row stride ref_ld, column offset). */
static double block_err(const float *got, const float *ref, size_t rows, size_t cols, size_t ref_ld,
                        size_t ref_col, float scale)
{
    double err = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            err = worse(err, fabs((double)got[r * cols + c] - (double)ref[r * ref_ld + ref_col + c]));
    return err / scale;
}

/* Outputs or input gradients of every micro-batch vs the reference's token rows. */
static double token_err(const tp_model_t *m, float *(*buf)(const tp_model_t *, size_t),
                        const float *ref)
{
    size_t h = m->g.hidden, s = m->g.seq;
    float scale = max_abs(ref, m->g.batch * s * h);
    double err = 0.0;
    for (size_t i = 0; i < m->micro; i++)
        for (size_t e = 0; e < m->mb; e++) {
            size_t row = (m->b_off + i * m->mb + e) * s + m->s_off;
            const float *got = buf(m, i) + e * m->s_len * h;
            err = worse(err, block_err(got, ref + row * h, m->s_len, h, h, 0, scale));
        }
    return err;
}

static float *z_of(const tp_model_t *m, size_t i) { return ZOUT(m, i); }
static float *dx_of(const tp_model_t *m, size_t i) { return DXOUT(m, i); }

double tp_model_max_rel_err(const tp_model_t *m, const mlp_reference_t *ref)
{
    size_t h = m->g.hidden, ffn = m->g.ffn, f = m->f_len;
    double err = token_err(m, z_of, ref->z);
    err = worse(err, token_err(m, dx_of, ref->dx));
    err = worse(err, block_err(m->dw1, ref->dw1, h, f, ffn, m->f_off, max_abs(ref->dw1, h * ffn)));
    err = worse(err, block_err(m->db1, ref->db1, 1, f, ffn, m->f_off, max_abs(ref->db1, ffn)));
    err = worse(err, block_err(m->dw2, ref->dw2 + m->f_off * h, f, h, h, 0,
                              max_abs(ref->dw2, ffn * h)));
    err = worse(err, block_err(m->db2, ref->db2, 1, h, h, 0, max_abs(ref->db2, h)));
    return err;
}
