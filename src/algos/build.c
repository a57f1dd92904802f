/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the schedule builders (see build.h). */
#include "build.h"

void mlc_bld_send(mlc_bld_t *b, uint32_t round, int peer, mlc_buf_id_t buf, size_t off,
                  size_t bytes)
{
    if (b->st) return;
    b->st = mlc_sched_add(b->s, MLC_STEP_SEND, round, peer, buf, off, buf, off, bytes, 0);
}

void mlc_bld_recv(mlc_bld_t *b, uint32_t round, int peer, mlc_buf_id_t buf, size_t off,
                  size_t bytes)
{
    if (b->st) return;
    b->st = mlc_sched_add(b->s, MLC_STEP_RECV, round, peer, buf, off, buf, off, bytes, 0);
}

void mlc_bld_recv_reduce(mlc_bld_t *b, uint32_t round, int peer, mlc_buf_id_t land, size_t loff,
                         mlc_buf_id_t sbuf, size_t soff, mlc_buf_id_t dbuf, size_t doff,
                         size_t bytes, uint8_t flags)
{
    if (b->st) return;
    b->st = mlc_sched_add_reduce(b->s, MLC_STEP_RECV_REDUCE, round, peer, land, loff, sbuf, soff,
                                 dbuf, doff, bytes, flags);
}

void mlc_bld_copy(mlc_bld_t *b, uint32_t round, mlc_buf_id_t src, size_t soff, mlc_buf_id_t dbuf,
                  size_t doff, size_t bytes)
{
    if (b->st || (src == dbuf && soff == doff)) return;
    b->st = mlc_sched_add(b->s, MLC_STEP_COPY, round, -1, src, soff, dbuf, doff, bytes, 0);
}

void mlc_bld_reduce(mlc_bld_t *b, uint32_t round, mlc_buf_id_t buf, size_t off, mlc_buf_id_t sbuf,
                    size_t soff, mlc_buf_id_t dbuf, size_t doff, size_t bytes, uint8_t flags)
{
    if (b->st) return;
    b->st = mlc_sched_add_reduce(b->s, MLC_STEP_REDUCE, round, -1, buf, off, sbuf, soff, dbuf,
                                 doff, bytes, flags);
}

void mlc_fold_init(mlc_fold_t *f, int rank, int size, int keep)
{
    f->lg = mlc_log2_floor(size);
    f->p2 = 1 << f->lg;
    f->rem = size - f->p2;
    f->keep = keep;
    if (rank < 2 * f->rem) {
        int pair = rank / 2;
        int survivor = (keep == 2 * pair + 1) ? 2 * pair + 1 : 2 * pair;
        f->partner = rank ^ 1;
        f->vrank = rank == survivor ? pair : -1;
    } else {
        f->partner = -1;
        f->vrank = rank - f->rem;
    }
}

int mlc_fold_real(const mlc_fold_t *f, int v)
{
    if (v >= f->rem) return v + f->rem;
    return f->keep == 2 * v + 1 ? 2 * v + 1 : 2 * v;
}

int mlc_fold_virt(const mlc_fold_t *f, int r)
{
    return r < 2 * f->rem ? r / 2 : r - f->rem;
}

void mlc_ring_allgather(mlc_bld_t *b, uint32_t r0, int pos, int p, int shift, int d0,
                        const mlc_blocks_t *B, mlc_buf_id_t own_buf, size_t own_off)
{
    int right = (pos + 1) % p + shift, left = (pos - 1 + p) % p + shift;
    right %= p;
    left %= p;
    for (int s = 0; s < p - 1; s++) {
        uint32_t round = r0 + (uint32_t)s;
        int sb = mlc_mod(pos + d0 - s, p), rb = mlc_mod(pos + d0 - s - 1, p);
        if (s == 0)
            mlc_bld_send(b, round, right, own_buf, own_off, mlc_blocks_len(B, sb));
        else
            mlc_bld_send(b, round, right, MLC_BUF_RECV, mlc_blocks_off(B, sb), mlc_blocks_len(B, sb));
        mlc_bld_recv(b, round, left, MLC_BUF_RECV, mlc_blocks_off(B, rb), mlc_blocks_len(B, rb));
    }
}
