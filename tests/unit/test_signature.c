/* SPDX-License-Identifier: BSD-3-Clause */
/* Call signatures: the hash the shared-memory engine compares between ranks
 * must differ whenever mlc_sig_same says two calls differ in one field, and
 * for the mismatches real programs make in two fields at once. */
#include "core/signature.h"
#include "unit.h"

static mlc_sig_t base_sig(void)
{
    mlc_sig_t s = {.call = 17, .seq = 5, .count = 1000, .vhash = 0, .mine = 1000,
                   .root = MLC_SIG_NONE, .op = MLC_SUM, .coll = MLC_COLL_ALLREDUCE, .dtype = MLC_FLOAT32};
    return s;
}

/* Two signatures that mlc_sig_same tells apart hash apart. */
static void check_apart(const mlc_sig_t *a, const mlc_sig_t *b, const char *what)
{
    CHECK(!mlc_sig_same(a, b), "%s: the signatures differ", what);
    CHECK(mlc_sig_hash(a) != mlc_sig_hash(b), "%s: hashes %016llx and %016llx must differ", what,
          (unsigned long long)mlc_sig_hash(a), (unsigned long long)mlc_sig_hash(b));
}

static void test_one_field(void)
{
    const mlc_sig_t a = base_sig();
    for (uint64_t c = 0; c < 4096; c++) {
        if (c == a.count) continue;
        mlc_sig_t b = a;
        b.count = c;
        check_apart(&a, &b, "count");
    }
    for (int k = 0; k < 64; k++) {
        mlc_sig_t b = a;
        b.count = a.count ^ (1ull << k);
        check_apart(&a, &b, "one count bit");
        b = a;
        b.vhash = 1ull << k | 1;
        check_apart(&a, &b, "vhash");
    }
    for (int r = -2; r < 64; r++) {
        if (r == a.root) continue;
        mlc_sig_t b = a;
        b.root = r;
        check_apart(&a, &b, "root");
    }
    for (int op = MLC_SIG_USER_OP; op < MLC_OP_BUILTIN_COUNT; op++) {
        if (op == a.op) continue;
        mlc_sig_t b = a;
        b.op = (int16_t)op;
        check_apart(&a, &b, "op");
    }
    for (int c = 0; c < MLC_COLL_SEND; c++) {
        if ((uint32_t)c == a.coll) continue;
        mlc_sig_t b = a;
        b.coll = (uint8_t)c;
        check_apart(&a, &b, "collective");
    }
    for (int d = 0; d < 256; d++) {
        if (d == a.dtype) continue;
        mlc_sig_t b = a;
        b.dtype = (uint8_t)d;
        check_apart(&a, &b, "dtype");
    }
    /* What mlc_sig_same ignores (the user-visible sequence number, this
     * rank's own count) does not change the hash either. */
    mlc_sig_t b = a;
    b.seq = 99;
    b.mine = 3;
    CHECK(mlc_sig_same(&a, &b) && mlc_sig_hash(&a) == mlc_sig_hash(&b), "seq and mine are not compared");
}

/* Two fields at once, as programs get them wrong: the same bytes as another
 * element type (count x2 with a type of half the size), root and op both
 * changed, another collective with another count, every root against every
 * count on a broadcast. */
static void test_two_fields(void)
{
    const mlc_sig_t a = base_sig();
    for (int d = 0; d < 32; d++)
        for (uint64_t c = 1; c < 1u << 16; c <<= 1) {
            mlc_sig_t b = a;
            b.dtype = (uint8_t)d;
            b.count = c;
            if (!mlc_sig_same(&a, &b)) check_apart(&a, &b, "dtype and count");
        }
    for (int r = -1; r < 16; r++)
        for (int op = MLC_SIG_USER_OP; op < MLC_OP_BUILTIN_COUNT; op++) {
            mlc_sig_t b = a;
            b.root = r;
            b.op = (int16_t)op;
            if (!mlc_sig_same(&a, &b)) check_apart(&a, &b, "root and op");
        }
    for (int c = 0; c < MLC_COLL_SEND; c++)
        for (uint64_t n = 0; n < 2048; n++) {
            mlc_sig_t b = a;
            b.coll = (uint8_t)c;
            b.count = n;
            if (!mlc_sig_same(&a, &b)) check_apart(&a, &b, "collective and count");
        }
    mlc_sig_t bc = a;
    bc.coll = MLC_COLL_BROADCAST;
    bc.op = MLC_SIG_NONE;
    bc.root = 0;
    for (int r = 0; r < 64; r++)
        for (uint64_t n = 1; n < 4096; n++) {
            mlc_sig_t b = bc;
            b.root = r;
            b.count = n;
            if (!mlc_sig_same(&bc, &b)) check_apart(&bc, &b, "broadcast root and count");
        }
}

/* The copy that avoids store-forwarding stalls copies every field. */
static void test_copy(void)
{
    mlc_sig_t a = {.call = 1ull << 40 | 3, .seq = 2, .count = 77, .vhash = 0x1234567890abcdefull, .mine = 9,
                   .root = -7, .op = MLC_SIG_USER_OP, .coll = MLC_COLL_GATHERV, .dtype = 200};
    mlc_sig_t b;
    memset(&b, 0xa5, sizeof b);
    mlc_sig_copy(&b, &a);
    CHECK(memcmp(&a, &b, sizeof a) == 0, "mlc_sig_copy copies all %zu bytes", sizeof a);
}

/* mlc_sig_of on a bare communicator (what it reads: size and seq_base). */
static mlc_sig_t sig_of(mlc_coll_t coll, mlc_dtype_t dt, mlc_op_t op)
{
    static mlc_comm_t comm; /* zeroed */
    comm.size = 2;
    mlc_args_t a;
    memset(&a, 0, sizeof a);
    a.count = 4;
    a.dtype = dt;
    a.esize = mlc_dtype_size(dt);
    a.op = op;
    mlc_sig_t s;
    mlc_sig_of(&comm, coll, &a, 3, &s);
    return s;
}

static void fn_sum(const void *in, void *inout, size_t n, mlc_dtype_t dt, void *ctx)
{
    (void)in, (void)inout, (void)n, (void)dt, (void)ctx;
}
static void fn_max(const void *in, void *inout, size_t n, mlc_dtype_t dt, void *ctx)
{
    (void)in, (void)inout, (void)n, (void)dt, (void)ctx;
}

/* The whole dtype counts: records of any size, against built-in types of the
 * same low bits and against each other; and the description names them. */
static void test_records(void)
{
    static const int32_t sizes[] = {1, 4, 8, 64, 256, 264, 320, 65535};
    static const mlc_dtype_t builtins[] = {MLC_INT8, MLC_FLOAT32, MLC_FLOAT64, MLC_UINT64};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        mlc_sig_t r = sig_of(MLC_COLL_ALLGATHER, MLC_RECORD(sizes[i]), MLC_SUM);
        for (size_t j = 0; j < sizeof builtins / sizeof *builtins; j++) {
            mlc_sig_t b = sig_of(MLC_COLL_ALLGATHER, builtins[j], MLC_SUM);
            check_apart(&r, &b, "record against a built-in dtype");
        }
        for (size_t j = 0; j < i; j++) {
            mlc_sig_t o = sig_of(MLC_COLL_ALLGATHER, MLC_RECORD(sizes[j]), MLC_SUM);
            check_apart(&r, &o, "records of two sizes");
        }
    }
    char text[256];
    mlc_sig_t r = sig_of(MLC_COLL_BROADCAST, MLC_RECORD(320), MLC_SUM);
    mlc_sig_describe(&r, text, sizeof text);
    CHECK(strstr(text, "record(320)") != NULL, "a record is described by its size: %s", text);
}

/* User ops: two different functions differ; two ops of one function (as
 * ranks that share a process create them, one each) are the same op. */
static void test_user_ops(void)
{
    mlc_op_t a, b, a2;
    CHECK(mlc_op_create(fn_sum, 1, NULL, &a) == MLC_SUCCESS && mlc_op_create(fn_max, 1, NULL, &b) == MLC_SUCCESS &&
              mlc_op_create(fn_sum, 1, NULL, &a2) == MLC_SUCCESS,
          "mlc_op_create: %s", mlc_last_error());
    mlc_sig_t sa = sig_of(MLC_COLL_ALLREDUCE, MLC_FLOAT32, a), sb = sig_of(MLC_COLL_ALLREDUCE, MLC_FLOAT32, b);
    mlc_sig_t sa2 = sig_of(MLC_COLL_ALLREDUCE, MLC_FLOAT32, a2), ssum = sig_of(MLC_COLL_ALLREDUCE, MLC_FLOAT32, MLC_SUM);
    check_apart(&sa, &sb, "two user ops of different functions");
    check_apart(&sa, &ssum, "a user op and a built-in op");
    CHECK(mlc_sig_same(&sa, &sa2) && mlc_sig_hash(&sa) == mlc_sig_hash(&sa2),
          "two user ops of one function are the same op");
    mlc_op_t n;
    CHECK(mlc_op_create(fn_max, 0, NULL, &n) == MLC_SUCCESS, "mlc_op_create: %s", mlc_last_error());
    mlc_sig_t sn = sig_of(MLC_COLL_ALLREDUCE, MLC_FLOAT32, n);
    check_apart(&sb, &sn, "a commutative and a non-commutative op of one function");
    mlc_op_free(a);
    mlc_op_free(b);
    mlc_op_free(a2);
    mlc_op_free(n);
}

int main(void)
{
    test_one_field();
    test_two_fields();
    test_copy();
    test_records();
    test_user_ops();
    return unit_result("unit_signature");
}
