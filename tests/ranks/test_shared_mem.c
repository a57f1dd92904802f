/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared host memory (mlc_mem_alloc): on shm between processes, a large
 * broadcast, allgather, reduce_scatter or allreduce whose buffers lie in
 * such blocks reads peers' blocks in place, mapped (docs/ENGINE.md, "Shared
 * buffers"); on every backend the blocks are plain memory. Every rank
 * checks every element:
 *  - the API's errors: NULL ptr, a pointer that is no block, a double free;
 *    a zero-byte block is a page, zeroed;
 *  - each collective with every buffer in blocks, at offsets inside them,
 *    in place and out of place, sizes past the slots (one ending mid-chunk,
 *    one of several MiB), reductions of three dtype/op pairs;
 *  - one rank's buffers shared and the others' not (the ranks must still
 *    agree on one path: the staged one, or single copy);
 *  - on shm, after a call on shared buffers this process maps a peer's
 *    block (the call read it in place; this process's /proc/self/maps);
 *  - ranks that differ in being in place (not part of a call's signature);
 *  - point-to-point past the eager size from shared blocks (a ring; again
 *    with the receive posted after the message arrived, from any source,
 *    and so shorter than it: MLC_ERR_TRUNCATE): on shm with single copy the
 *    receiver maps the sender's block;
 *  - new blocks each call, freed after it: a peer must never read a freed
 *    block's stale mapping, and unmaps freed blocks; also after its owner
 *    freed more blocks between two calls than its free log holds.
 * With MLC_CMA=0 (the ctest variant "nocma") the mapped blocks are the only
 * single copy there is: a rank that cannot map a peer's block (here: out of
 * file descriptors) fails the call on every member, naming the reason,
 * instead of leaving its peers to wait.
 * Runs at 1, 2 and 3 ranks.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>
#include "harness.h"
#include "testdata.h"

#define KIB ((size_t)1 << 10)
#define BLOCK_OFF 4104 /* buffers start this far into their block: not at its base */

static int api_errors(mlc_comm_t *comm)
{
    void *p = (void *)1;
    CHECK(mlc_mem_alloc(16, NULL) == MLC_ERR_INVALID_ARG, "mlc_mem_alloc(ptr NULL) is not INVALID_ARG");
    CHECK(mlc_mem_free(NULL) == MLC_SUCCESS, "mlc_mem_free(NULL) failed: %s", mlc_last_error());
    int x = 0;
    CHECK(mlc_mem_free(&x) == MLC_ERR_INVALID_ARG, "mlc_mem_free of a stack address is not INVALID_ARG");
    CHECK(strstr(mlc_last_error(), "not a block of mlc_mem_alloc") != NULL, "message: %s", mlc_last_error());
    CHECK_OK(mlc_mem_alloc(0, &p));
    CHECK(p != NULL && ((const unsigned char *)p)[0] == 0, "a zero-byte block is not a zeroed page");
    CHECK_OK(mlc_mem_free(p));
    CHECK(mlc_mem_free(p) == MLC_ERR_INVALID_ARG, "a second mlc_mem_free of one block is not INVALID_ARG");
    return 0;
}

/* Room for `bytes` at BLOCK_OFF into a block (shared) or in guarded memory (not). */
static unsigned char *take(bool shared, size_t bytes, void **block)
{
    if (!shared) {
        *block = NULL;
        return mlc_test_alloc(bytes);
    }
    if (mlc_mem_alloc(bytes + BLOCK_OFF, block) != MLC_SUCCESS) return NULL;
    return (unsigned char *)*block + BLOCK_OFF;
}

static void give(unsigned char *buf, void *block)
{
    if (block)
        mlc_mem_free(block);
    else
        mlc_test_free(buf);
}

static const struct {
    mlc_dtype_t dt;
    mlc_op_t op;
} reductions[] = {{MLC_FLOAT32, MLC_SUM}, {MLC_INT32, MLC_MAX}, {MLC_FLOAT64, MLC_AVG}};
#define NRED (sizeof reductions / sizeof *reductions)

static int allreduce(mlc_comm_t *comm, bool shared, size_t count, int inplace, size_t k, uint32_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    mlc_dtype_t dt = reductions[k].dt;
    mlc_op_t op = reductions[k].op;
    size_t es = mlc_dtype_size(dt), n = count * es;
    void *sb, *rb;
    unsigned char *send = take(shared, n, &sb), *recv = take(shared, n, &rb), *want = mlc_test_alloc(n);
    CHECK(send && recv && want, "allocating 3 x %zu bytes: %s", n, mlc_last_error());
    unsigned char *in = inplace ? recv : send;
    mlc_tv_fill(dt, op, p, r, seed, in, 0, count);
    mlc_tv_fill_expected(dt, op, p, seed, want, 0, count);
    CHECK_OK(mlc_allreduce(in, recv, count, dt, op, comm, NULL));
    char where[160];
    CHECK(!mlc_test_memdiff(recv, want, n, es, where, sizeof where),
          "allreduce of %zu x %s %s (%s here, %s buffers): %s", count, mlc_dtype_name(dt), mlc_op_name(op),
          inplace ? "in place" : "out of place", shared ? "shared" : "private", where);
    if (!inplace) {
        mlc_tv_fill(dt, op, p, r, seed, want, 0, count);
        CHECK(!mlc_test_memdiff(send, want, n, es, where, sizeof where), "allreduce changed the send buffer: %s",
              where);
    }
    give(send, sb);
    give(recv, rb);
    mlc_test_free(want);
    return 0;
}

static int reduce_scatter(mlc_comm_t *comm, bool shared, size_t count, int inplace, size_t k, uint32_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    mlc_dtype_t dt = reductions[k].dt;
    mlc_op_t op = reductions[k].op;
    size_t es = mlc_dtype_size(dt), n = count * es;
    void *sb, *rb;
    unsigned char *send = take(shared, n * (size_t)p, &sb), *recv = take(shared, n, &rb), *want = mlc_test_alloc(n);
    CHECK(send && recv && want, "allocating %zu bytes: %s", n * (size_t)(p + 2), mlc_last_error());
    mlc_tv_fill(dt, op, p, r, seed, send, 0, count * (size_t)p);
    mlc_tv_fill_expected(dt, op, p, seed, want, (size_t)r * count, count);
    unsigned char *out = inplace ? send + (size_t)r * n : recv;
    CHECK_OK(mlc_reduce_scatter(send, out, count, dt, op, comm, NULL));
    char where[160];
    CHECK(!mlc_test_memdiff(out, want, n, es, where, sizeof where), "reduce_scatter of %zu x %s %s per rank "
          "(%s, %s buffers): %s", count, mlc_dtype_name(dt), mlc_op_name(op), inplace ? "in place" : "out of place",
          shared ? "shared" : "private", where);
    give(send, sb);
    give(recv, rb);
    mlc_test_free(want);
    return 0;
}

static int allgather(mlc_comm_t *comm, bool shared, size_t block, int inplace, uint64_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    void *sb, *rb;
    unsigned char *send = take(shared, block, &sb), *recv = take(shared, block * (size_t)p, &rb);
    CHECK(send && recv, "allocating %zu bytes: %s", block * (size_t)(p + 1), mlc_last_error());
    unsigned char *mine = inplace ? recv + (size_t)r * block : send;
    mlc_test_pattern_fill(mine, block, seed * 100 + (uint64_t)r);
    CHECK_OK(mlc_allgather(mine, recv, block, MLC_UINT8, comm, NULL));
    for (int q = 0; q < p; q++) {
        size_t bad = mlc_test_pattern_check(recv + (size_t)q * block, block, seed * 100 + (uint64_t)q);
        CHECK(bad == SIZE_MAX, "allgather of %zu bytes per rank (%s, %s buffers): rank %d's block wrong at byte %zu",
              block, inplace ? "in place" : "out of place", shared ? "shared" : "private", q, bad);
    }
    give(send, sb);
    give(recv, rb);
    return 0;
}

static int broadcast(mlc_comm_t *comm, bool shared, size_t n, int root, int inplace, uint64_t seed)
{
    int r = mlc_comm_rank(comm);
    void *sb, *rb;
    unsigned char *send = take(shared, n, &sb), *recv = take(shared, n, &rb);
    CHECK(send && recv, "allocating 2 x %zu bytes: %s", n, mlc_last_error());
    unsigned char *src = inplace ? recv : send;
    if (r == root) mlc_test_pattern_fill(src, n, seed);
    CHECK_OK(mlc_broadcast(src, recv, n, MLC_UINT8, root, comm, NULL));
    size_t bad = mlc_test_pattern_check(recv, n, seed);
    CHECK(bad == SIZE_MAX, "broadcast of %zu bytes from rank %d (%s, %s buffers) wrong at byte %zu", n, root,
          inplace ? "in place" : "out of place", shared ? "shared" : "private", bad);
    give(send, sb);
    give(recv, rb);
    return 0;
}

/* One of each collective at `count` elements, every rank's buffers shared or
 * (mixed) only rank 0's. */
static int round_of_calls(mlc_comm_t *comm, size_t count, bool mixed, uint32_t *seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    bool shared = !mixed || r == 0;
    for (size_t k = 0; k < NRED; k++)
        for (int inplace = 0; inplace < 2; inplace++) CHECK_RUN(allreduce(comm, shared, count, inplace, k, (*seed)++));
    for (int inplace = 0; inplace < 2; inplace++, (*seed)++)
        CHECK_RUN(reduce_scatter(comm, shared, count / (size_t)p + 1, inplace, *seed % NRED, *seed));
    for (int inplace = 0; inplace < 2; inplace++) CHECK_RUN(allgather(comm, shared, count * 4 / (size_t)p, inplace, (*seed)++));
    for (int inplace = 0; inplace < 2; inplace++, (*seed)++)
        CHECK_RUN(broadcast(comm, shared, count * 4 + 3, (int)(*seed % (uint32_t)p), inplace, *seed));
    return 0;
}

/* Mappings of shared blocks in this process (its own and peers'). */
static int blocks_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "memfd:mlcomm-mem")) n++;
    fclose(f);
    return n;
}

/* The inode of the shared block mapped at addr in this process (0: none). */
static uint64_t block_inode(const void *addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[512];
    uint64_t ino = 0;
    while (!ino && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, inode;
        if (strstr(line, "memfd:mlcomm-mem") && sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &inode) == 3 &&
            (uintptr_t)addr >= lo && (uintptr_t)addr < hi)
            ino = inode;
    }
    fclose(f);
    return ino;
}

/* Whether this process maps the shared block of that inode. */
static bool maps_block(uint64_t ino)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long inode;
        found = strstr(line, "memfd:mlcomm-mem") && sscanf(line, "%*s %*s %*s %*s %lu", &inode) == 1 && inode == ino;
    }
    fclose(f);
    return found;
}

/* On shm between processes, after an allreduce of shared buffers this
 * process maps the next rank's send block: the call read it in place. */
static int reads_in_place(mlc_comm_t *comm, uint32_t *seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t count = 40001, n = count * 4;
    void *sb, *rb;
    unsigned char *send = take(true, n, &sb), *recv = take(true, n, &rb);
    uint64_t *inodes = mlc_test_alloc((size_t)p * sizeof *inodes), mine = block_inode(sb);
    CHECK(send && recv && inodes, "allocating 2 x %zu bytes: %s", n, mlc_last_error());
    CHECK_OK(mlc_allgather(&mine, inodes, 1, MLC_UINT64, comm, NULL));
    mlc_tv_fill(MLC_FLOAT32, MLC_SUM, p, r, *seed, send, 0, count);
    CHECK_OK(mlc_allreduce(send, recv, count, MLC_FLOAT32, MLC_SUM, comm, NULL));
    (*seed)++;
    if (p > 1 && strcmp(mlc_comm_backend(comm), "shm") == 0)
        CHECK(mine != 0 && maps_block(inodes[(r + 1) % p]), "after an allreduce of shared buffers this process "
              "does not map rank %d's send block (inode %llu): the call did not read it in place", (r + 1) % p,
              (unsigned long long)inodes[(r + 1) % p]);
    give(send, sb);
    give(recv, rb);
    mlc_test_free(inodes);
    return 0;
}

/* *ok &= whether this process may read rank from's memory by single copy
 * (process_vm_readv; the engine names a block in a rendezvous only then).
 * Collective. */
static int can_single_copy(mlc_comm_t *comm, int from, bool *ok)
{
    static volatile uint64_t marker = 0x5ea1ed;
    int p = mlc_comm_size(comm);
    uint64_t mine[2] = {(uint64_t)getpid(), (uint64_t)(uintptr_t)&marker};
    uint64_t *all = mlc_test_alloc((size_t)p * sizeof mine);
    CHECK(all, "out of memory");
    CHECK_OK(mlc_allgather(mine, all, 2, MLC_UINT64, comm, NULL));
    uint64_t got = 0;
    struct iovec l = {&got, sizeof got}, r = {(void *)(uintptr_t)all[2 * from + 1], sizeof got};
    if (process_vm_readv((pid_t)all[2 * from], &l, 1, &r, 1, 0) != (ssize_t)sizeof got || got != marker) *ok = false;
    mlc_test_free(all);
    return 0;
}

/* A ring of sends past the eager size (16 KiB) from shared blocks, at an
 * offset inside them, a new send block each round: each rank's receive gets
 * its predecessor's data, posted first (round 0), posted once the message
 * waits (probe) from any source (1), and so, shorter than the message
 * (2: MLC_ERR_TRUNCATE, the first elements written). On shm, where this
 * process may read its predecessor's memory by single copy, the receiver
 * then maps the sender's block of that round (it read it in place); without
 * single copy such messages stream through the ring. */
static int p2p_ring(mlc_comm_t *comm, uint32_t *seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm), next = (r + 1) % p, prev = (r + p - 1) % p;
    size_t count = 300001, n = count * 4;
    const char *cma = getenv("MLC_CMA");
    bool maps = p > 1 && strcmp(mlc_comm_backend(comm), "shm") == 0 && !(cma && strcmp(cma, "0") == 0);
    CHECK_RUN(can_single_copy(comm, prev, &maps));
    void *rb;
    unsigned char *recv = take(true, n, &rb), *expect = mlc_test_alloc(n);
    uint64_t *inodes = mlc_test_alloc((size_t)p * sizeof *inodes);
    CHECK(recv && expect && inodes, "allocating 2 x %zu bytes: %s", n, mlc_last_error());
    for (int round = 0; round < 3; round++) {
        void *sb;
        unsigned char *send = take(true, n, &sb);
        CHECK(send, "allocating %zu bytes: %s", n, mlc_last_error());
        uint64_t mine = block_inode(sb);
        CHECK_OK(mlc_allgather(&mine, inodes, 1, MLC_UINT64, comm, NULL));
        mlc_tv_fill(MLC_FLOAT32, MLC_SUM, p, r, *seed, send, 0, count);
        memset(recv, 0, n);
        size_t want = round == 2 ? count - 1000 : count;
        mlc_request_t *rq = NULL, *sq = NULL;
        if (round == 0) CHECK_OK(mlc_recv(recv, want, MLC_FLOAT32, prev, 5, comm, NULL, &rq));
        CHECK_OK(mlc_send(send, count, MLC_FLOAT32, next, 5, comm, &sq));
        if (round > 0) {
            CHECK_OK(mlc_probe(prev, 5, comm, NULL)); /* arrived, unexpected */
            CHECK_OK(mlc_recv(recv, want, MLC_FLOAT32, MLC_ANY_SOURCE, 5, comm, NULL, &rq));
        }
        mlc_status_t rst = mlc_request_wait(&rq);
        CHECK_OK(mlc_request_wait(&sq));
        CHECK(rst == (round == 2 ? MLC_ERR_TRUNCATE : MLC_SUCCESS), "round %d: a receive of %zu elements of a "
              "%zu-element message returned %s", round, want, count, mlc_status_name(rst));
        mlc_tv_fill(MLC_FLOAT32, MLC_SUM, p, prev, *seed, expect, 0, count);
        CHECK(memcmp(recv, expect, want * 4) == 0, "round %d: a ring of %zu floats from shared blocks: rank %d's "
              "data arrived wrong", round, count, prev);
        (*seed)++;
        if (maps)
            CHECK(mine != 0 && maps_block(inodes[prev]), "round %d: after receiving from rank %d's shared block "
                  "this process does not map it (inode %llu): the receive did not read it in place", round, prev,
                  (unsigned long long)inodes[prev]);
        CHECK_OK(mlc_barrier(comm, NULL)); /* the sender frees its block only once it was read */
        give(send, sb);
    }
    give(recv, rb);
    mlc_test_free(expect);
    mlc_test_free(inodes);
    return 0;
}

/* At most `most` shared blocks mapped here (shm: threads share their maps). */
static int mapped_at_most(mlc_comm_t *comm, int most, const char *when)
{
    int mapped = blocks_mapped();
    if (strcmp(mlc_comm_backend(comm), "threads") != 0)
        CHECK(mapped >= 0 && mapped <= most, "%s: %d shared blocks still mapped (at most %d of the last call may be)",
              when, mapped, most);
    return 0;
}

/* MLC_CMA=0 on shm: rank 1 cannot open a file while it calls (its
 * descriptor limit lowered to the lowest free one), so it cannot map its
 * peers' blocks; every member's call fails with the reason, on a
 * communicator of its own. */
static int unmappable_fails_all(mlc_comm_t *comm, uint32_t *seed)
{
    const char *cma = getenv("MLC_CMA");
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    if (p < 2 || strcmp(mlc_comm_backend(comm), "shm") != 0 || !cma || strcmp(cma, "0") != 0) return 0;
    mlc_comm_t *sub = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &sub));
    size_t count = 40001, n = count * 4;
    void *sb, *rb;
    unsigned char *send = take(true, n, &sb), *recv = take(true, n, &rb);
    CHECK(send && recv, "allocating 2 x %zu bytes: %s", n, mlc_last_error());
    mlc_tv_fill(MLC_FLOAT32, MLC_SUM, p, r, *seed, send, 0, count);
    (*seed)++;
    struct rlimit old = {0, 0};
    if (r == 1) {
        int lowest = dup(0);
        CHECK(lowest >= 0 && getrlimit(RLIMIT_NOFILE, &old) == 0, "dup / getrlimit failed");
        close(lowest);
        struct rlimit low = old;
        low.rlim_cur = (rlim_t)lowest;
        CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit(RLIMIT_NOFILE, %d) failed", lowest);
    }
    mlc_status_t st = mlc_allreduce(send, recv, count, MLC_FLOAT32, MLC_SUM, sub, NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    if (r == 1) CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0, "restoring RLIMIT_NOFILE failed");
    CHECK(st == MLC_ERR_SYSTEM && strstr(msg, "cannot map rank"), "an allreduce where rank 1 cannot map its "
          "peers' shared blocks (MLC_CMA=0) returned %s here, not MLC_ERR_SYSTEM naming it: %s", mlc_status_name(st),
          msg);
    mlc_comm_free(sub); /* failed: its status is the failure's */
    give(send, sb);
    give(recv, rb);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    uint32_t seed = 11;
    static const size_t counts[] = {40001, (1u << 19) + 3}; /* past the 8 KiB slots, a 128 KiB chunk ending mid-way; 2-4 MiB */
    /* One rank alone: on threads a block freed twice could be another rank's by then. */
    CHECK_OK(mlc_barrier(comm, NULL));
    if (mlc_comm_rank(comm) == 0) CHECK_RUN(api_errors(comm));
    CHECK_OK(mlc_barrier(comm, NULL));
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        CHECK_RUN(round_of_calls(comm, counts[i], false, &seed));
        CHECK_RUN(round_of_calls(comm, counts[i], true, &seed));
    }
    CHECK_RUN(reads_in_place(comm, &seed));
    CHECK_RUN(p2p_ring(comm, &seed));
    /* Rank 0 in place and the others not, and the other way round: the ranks
     * must still agree on one protocol. */
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
        for (int zero_in_place = 0; zero_in_place < 2; zero_in_place++)
            CHECK_RUN(allreduce(comm, true, counts[i], (r == 0) == zero_in_place, i % NRED, seed++));
    /* New blocks every call, freed after it: peers unmap a freed block at
     * their next lookup, so only the last call's blocks (send and receive of
     * each peer) may still be mapped here. */
    for (int i = 0; i < 300; i++) CHECK_RUN(allreduce(comm, true, 4096 + (size_t)i, i & 1, (size_t)i % NRED, seed++));
    CHECK_RUN(mapped_at_most(comm, 2 * (p - 1), "after 300 calls on new blocks"));
    /* Rank 0 frees more blocks between two calls than its free log holds:
     * its peers, behind by more than the log, unmap all its blocks. */
    CHECK_RUN(allreduce(comm, true, 40001, 0, 0, seed++));
    if (r == 0)
        for (int i = 0; i < 300; i++) {
            void *b = NULL;
            CHECK_OK(mlc_mem_alloc(4096, &b));
            CHECK_OK(mlc_mem_free(b));
        }
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_RUN(allreduce(comm, true, 40001, 0, 0, seed++));
    CHECK_RUN(mapped_at_most(comm, 2 * (p - 1), "after a peer freed more blocks than its log holds"));
    CHECK_RUN(unmappable_fails_all(comm, &seed));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
