/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory engine behind the `threads` and `shm` backends.
 *
 * A segment (heap memory for threads, a POSIX shared-memory object for shm)
 * holds, for every ordered pair of world ranks, a single-producer
 * single-consumer byte ring, plus one control block per rank (doorbell futex,
 * waiter count, pid). Messages are framed records in the rings:
 *   EAGER  header + payload, streamed through the ring (any size);
 *   RNDV   header naming the sender's buffer: the receiver copies it directly
 *          (memcpy for threads, process_vm_readv for shm) and answers ACK;
 *   ACK    completes a RNDV send.
 * Matching follows MPI: per (context, source, tag), non-overtaking, with an
 * unexpected queue, any-source and any-tag. Each communicator has two
 * contexts (user p2p, internal collective traffic), so internal traffic never
 * matches a user's receive.
 *
 * One endpoint per rank (per process for shm, per thread-rank for threads)
 * serves every communicator of that rank; its mutex serialises progress.
 */
#ifndef MLC_ENGINE_H
#define MLC_ENGINE_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "algos/exec.h"
#include "core/comm.h"
#include "core/signature.h"
#include "base/shared_mem.h"

/* "MLC" and the version of the segment's layout: bumped with every change
 * to what lives in shared memory (eng_seg_t, eng_ctl_t, eng_slot_t, ...),
 * so that a rank of a build that lays it out otherwise fails at once
 * (shm.c) instead of reading its peers' fields wrong. */
#define ENG_LAYOUT 4u
#define ENG_MAGIC (0x4d4c4300u | ENG_LAYOUT)
#define ENG_LINE 64
/* Failed communicators (aborted, mismatched calls): every rank has its
 * share of ENG_FAIL_WORDS words, one per context pair (pair modulo the
 * share, the pair itself stored in the word), so there is no limit on how
 * many fail in a job; the messages of the latest ENG_FAIL_NOTES failures
 * ride along (src/backends/engine/failure.c). Per rank, not per pair: the
 * communicators one split makes share a pair and no member. */
#define ENG_FAIL_WORDS 16384
#define ENG_FAIL_NOTES 64
#define ENG_ANY (-1)
#define ENG_JOINED 1u
#define ENG_LEFT 2u

#define ENG_CPU_WORDS 16 /* cpus 0-1023 */
typedef struct eng_ctl {
    _Alignas(ENG_LINE) atomic_uint doorbell; /* futex word; bumped by writers when waiters > 0 */
    atomic_uint waiters;                     /* threads of this rank sleeping on doorbell */
    atomic_int pid;
    atomic_uint attached;                    /* ENG_JOINED after init, ENG_LEFT once released */
    uint64_t cma_probe;                      /* a value peers read with process_vm_readv */
    uint64_t cma_probe_addr;                 /* its address in this rank's process */
    atomic_uint_fast64_t beat;               /* CLOCK_MONOTONIC ns of this rank's last wait check */
    atomic_uint light_fences;                /* 1: this rank's process registered for membarrier */
    uint64_t cpus[ENG_CPU_WORDS];            /* the cpus this rank may run on, a bit each (host_cpus.c) */
    /* Peers' single-copy reads of this rank's memory in progress (p2p.c:
     * eng_rndv_copy); an operation this rank drops waits for them to end. */
    _Alignas(ENG_LINE) atomic_uint readers;
} eng_ctl_t;

typedef struct eng_ring_hdr {
    _Alignas(ENG_LINE) atomic_uint_fast64_t head; /* bytes produced */
    /* Where the latest message cut off by a cancel ends in the stream (its
     * remainder went as zeros): its receive fails. The sender sets it before
     * the head passes that end, and only once the receiver is past the
     * previous one (p2p.c). */
    atomic_uint_fast64_t cut_end;
    _Alignas(ENG_LINE) atomic_uint_fast64_t tail; /* bytes consumed */
} eng_ring_hdr_t;

typedef struct eng_seg {
    atomic_uint magic; /* published last by the creator */
    uint32_t nranks;
    uint64_t ring_bytes;   /* power of two */
    uint64_t total_bytes;
    uint64_t ctl_off, ring_hdr_off, ring_data_off, cma_off;
    uint64_t slot_off;     /* direct-collective slots: [area][world rank] */
    uint32_t slot_areas;   /* communicators (context pairs) that get an area */
    uint64_t stage_off;    /* stages: [area][world rank], stage_bytes each */
    uint64_t stage_bytes;  /* each rank's stage: ENG_STAGE_CHUNK times a power of two (segment.c) */
    uint32_t stage_areas;  /* the first this many slot areas have stages */
    /* A single-copy read costs several memcpys on this host (the creator's
     * probe, shm/cma_probe.c): large allreduces and allgathers go through
     * the stages at every size (direct.c). Decided once, here, likewise. */
    uint32_t cma_slow;
    atomic_uint nattached;
    atomic_uint nreleased;
    atomic_uint_fast64_t failed[ENG_FAIL_WORDS]; /* (pair + 1) << 32 | -status << 24 | origin world rank */
    atomic_uint_fast64_t note_next;
    struct eng_fail_note {
        atomic_uint_fast64_t stamp; /* seqlock: odd while written, 2 * (index + 1) once complete */
        uint32_t pair;
        uint32_t leader; /* world rank of the communicator's rank 0: tells the siblings of a split apart */
        char msg[240];
    } notes[ENG_FAIL_NOTES];
} eng_seg_t;

/*
 * Direct collectives (src/backends/engine/direct.c): each communicator gets
 * a slot area its members agree on when it is made (slot_areas.c: one that
 * every rank's slot there is unused or left; none when all are taken); each
 * of its ranks owns one slot there, indexed by world rank, so communicators
 * with no member in common may share an area. Flags hold the communicator's
 * direct-collective sequence + 1.
 */
#define ENG_SLOT_DATA 8192
#define ENG_BOARD 4
/* A rank's announcement of direct op v in cache lines that only it writes:
 * v, the digest of its direct calls so far (this one's included) and, for
 * the quick path, the payload itself (direct.c): 48 bytes in v's line, up to
 * 240 in four lines. ENG_QUICK_DEPTH of them, op v in quick[v % depth]: a
 * rank that reads nothing (a broadcast root) runs up to depth - 1 ops ahead
 * of its readers. 128, not 8 or 32: with more ranks than cores, each rank
 * then runs a longer batch of small broadcasts per time slice (4 ranks on
 * 2 cores, 8-byte broadcasts: 1.0 us with 8, 0.65 with 32; 32-byte ones,
 * 128 against 32: 1.22 times faster, 8 ranks 1.43, medians of paired
 * launches; 64 was half way). It costs 30 KiB more per slot. */
#define ENG_QUICK_LINES 4
#define ENG_QUICK_DATA (ENG_QUICK_LINES * ENG_LINE - 16)
#define ENG_QUICK_DEPTH 128
typedef struct eng_quick {
    _Alignas(ENG_LINE) atomic_uint_fast64_t v;
    uint64_t digest;
    unsigned char data[ENG_QUICK_DATA];
} eng_quick_t;
_Static_assert(sizeof(eng_quick_t) == ENG_QUICK_LINES * ENG_LINE, "an announcement is whole cache lines");
/* A large in-place broadcast between processes streams through the root's
 * stage (direct.c): the root copies chunk k in while its readers copy chunk
 * k - 1 out. A single-copy read (CMA) pins every 4 KiB page it reads and
 * runs ~25% below memcpy; the stage's chunks stay in cache, so both sides
 * copy at about memcpy speed at once. A rank's stage holds up to 2 MiB of
 * chunks (eng_seg_t.stage_bytes, segment.c): a deep stage lets a writer run
 * ahead of a reader that was held up, where a shallow one made both wait
 * at every reuse (2 ranks, 2 MiB allgather: 250 us with 4 chunks, 70 with
 * 32; docs/ENGINE.md). */
#define ENG_STAGE_CHUNK ((size_t)64 << 10)
#define ENG_STAGE_MIN ((size_t)1 << 20) /* below it single-copy reads do as well */
/* A large allreduce between processes goes through the ranks' stages too
 * (direct.c): every rank reads its send buffer and writes its receive buffer
 * once, all else stays in the caches. Below this size the single-copy path
 * was faster where single copy costs about a memcpy (2 ranks, 8 MiB: 1.3 ms
 * against 1.6 staged; 32 MiB: 10 ms against 7), measured with 256 KiB
 * stages; with today's deeper ones it has not been measured on such a host
 * (where single copy is slow the stages are eager and take every size).
 * The same on every rank: it chooses the protocol. */
#define ENG_STAGE_ALLREDUCE_MIN ((size_t)16 << 20)
typedef struct eng_slot {
    _Alignas(ENG_LINE) atomic_uint_fast64_t pub; /* data / addresses of op v published */
    atomic_uint_fast64_t done1;                  /* op v: finished reading peers' send buffers */
    atomic_uint_fast64_t ready;                  /* op v: my result slice is in my receive buffer */
    atomic_uint_fast64_t done2;                  /* op v: finished with every peer's memory */
    uint64_t sig_hash;          /* mlc_sig_hash of sig, in pub's cache line: compared on the hot path */
    /* The last two calls this rank started, (call & 0xffff) << 48 | 48 bits of
     * their hash, by call parity: in the flags' cache line, so a rank that
     * reads no peer's slot compares its peers' calls for free. */
    atomic_uint_fast64_t started[2];
    uint64_t saddr, raddr;
    mlc_shmem_ref_t sref, rref; /* the shared blocks (mlc_mem_alloc) saddr and raddr lie in; size 0: none */
    uint32_t via_stage;         /* large broadcast root: streams op pub through its stage */
    uint32_t inplace;           /* op pub is in place here (ranks may differ: it is not in the signature) */
    atomic_uint used;           /* this rank has a communicator here (eng_comm_create) */
    atomic_uint left;           /* ... and freed it (liveness.c); an area is reused once every used slot has left */
    atomic_uint claim;          /* parent's context pair + 1: a split of it offered this area (slot_areas.c) */
    mlc_sig_t sig;              /* the direct call this rank published with pub (names both sides) */
    struct eng_board {          /* every call this rank started, the latest ENG_BOARD by call number */
        atomic_uint_fast64_t v; /* seqlock: 0 while written, then call + 1 */
        mlc_sig_t sig;
    } board[ENG_BOARD];
    eng_quick_t quick[ENG_QUICK_DEPTH];   /* op v announced in quick[v % ENG_QUICK_DEPTH] */
    mlc_sig_t quick_sig[ENG_QUICK_DEPTH]; /* ... and its whole signature, read only to word a mismatch */
    /* Chunk counts of op v, as progress words (direct.c: v's low 24 bits,
     * then the count): a staged broadcast's or allgather's chunks copied in
     * (its own block) / out (the others') so far, and the chunks of this
     * rank's allreduce slice in its receive buffer; each in a line of its
     * own, one writer each. */
    _Alignas(ENG_LINE) atomic_uint_fast64_t staged;
    _Alignas(ENG_LINE) atomic_uint_fast64_t unstaged;
    _Alignas(ENG_LINE) atomic_uint_fast64_t reduced;
    _Alignas(ENG_LINE) char data[ENG_SLOT_DATA];
} eng_slot_t;

/* Record header in a ring (8-byte aligned). */
/* ENG_RNDV_SHARED: a rendezvous from a shared block (mlc_mem_alloc), the
 * header followed by the block's mlc_shmem_ref_t: the receiver maps it. */
enum { ENG_EAGER = 1, ENG_RNDV = 2, ENG_ACK = 3, ENG_RNDV_SHARED = 4 };
typedef struct eng_hdr {
    uint32_t kind, ctx;
    uint64_t tag;
    uint64_t bytes;
    uint64_t addr;   /* RNDV: sender's buffer */
    uint64_t cookie; /* RNDV/ACK: the sender's op */
    mlc_sig_t sig;   /* collective context: the call this message belongs to */
} eng_hdr_t;

typedef struct eng_op eng_op_t;
typedef struct eng_ep eng_ep_t;

/* One point-to-point operation (user send/recv or a collective step). */
struct eng_op {
    eng_op_t *next;
    eng_op_t *orphan_next; /* on ep->orphans once cancelled while a peer may still touch it */
    bool is_send, done, cancelled;
    mlc_status_t status;
    char err[320];
    uint32_t ctx;
    int peer;         /* world rank; ENG_ANY for any-source */
    uint64_t tag;     /* ENG_TAG_ANY for any-tag */
    bool any_tag;
    const void *sbuf; /* send */
    void *rbuf;       /* recv */
    size_t bytes;     /* send size / recv capacity */
    size_t got;       /* recv: message size; send: bytes pushed */
    int src_world;    /* recv: who sent it */
    uint64_t rtag;    /* recv: tag of the message */
    bool hdr_written; /* send: header in the ring */
    bool rndv;        /* send: uses rendezvous */
    mlc_shmem_ref_t block; /* send: the shared block sbuf lies in (size 0: none) */
    mlc_request_t *req; /* user operation to complete, or NULL (collective step) */
    const mlc_sig_t *sig; /* collective step: its call's signature (NULL for user traffic) */
    struct eng_comm *comm;
};

/* A message that arrived before its receive was posted. */
typedef struct eng_unexp {
    struct eng_unexp *next;
    uint32_t ctx;
    int src;
    uint64_t tag;
    uint64_t bytes;
    bool rndv, complete;
    bool cut;              /* eager: its sender cancelled it half way (eng_ring_hdr_t.cut_end) */
    uint64_t addr, cookie; /* rndv */
    mlc_shmem_ref_t block; /* rndv: the sender's shared block (size 0: none) */
    mlc_sig_t sig;         /* collective context: the sender's call */
    char *data;            /* eager: malloc'd copy (complete when received == bytes) */
    uint64_t received;
} eng_unexp_t;

/* Consumer state of one inbound ring. */
typedef struct eng_inbound {
    eng_hdr_t hdr;
    bool in_msg;        /* a payload is streaming */
    uint64_t remaining; /* payload bytes still to consume */
    char *dst;          /* where they go (NULL = discard) */
    uint64_t dst_room;  /* bytes still accepted at dst */
    eng_op_t *op;       /* matched receive, completes at the end */
    eng_unexp_t *ux;    /* or the unexpected entry being filled */
} eng_inbound_t;

/* An ACK waiting for ring space. */
typedef struct eng_ack {
    struct eng_ack *next;
    int dst;
    uint64_t cookie;
} eng_ack_t;

/* How this rank's plain stores into its stage fare against streaming ones
 * (stage_store.c); per endpoint, under its lock. */
typedef struct eng_store_gauge {
    bool streaming;           /* writes stream (plain ones stalled), but for probes */
    double stream_ns_per_kib; /* the timed streamed writes (quick to fall, slow to rise); 0: none yet */
    unsigned slow_in_row;     /* plain: timed writes in a row slower than STREAM_WHEN times that */
    unsigned plain_writes;    /* plain: timed writes (one in STREAM_SAMPLE_EVERY streams) */
    unsigned fast_probes;     /* streaming: probes in a row that kept pace */
    double probe_at, probe_s; /* streaming: the next plain probe, and the time between them */
} eng_store_gauge_t;

/* Which stores a staged allreduce writes into the stages, chosen from whole
 * operations' times per size class (stage_store.c); per endpoint, under its lock. */
#define ENG_STORE_CLASSES 48 /* size classes: 2^k bytes to 2^(k+1) */
typedef struct eng_store_choice {
    double ns_per_byte[ENG_STORE_CLASSES][2]; /* [class][streamed]: quick to fall, slow to rise; 0: none yet */
    unsigned ops[ENG_STORE_CLASSES];
} eng_store_choice_t;

/* Whether this rank's yields hand its core to a peer or to another
 * process's time slice (yield_gauge.c). block_until and block_s are read
 * without the lock; the reading's fields are written by one thread at a
 * time (busy). */
typedef struct eng_yield_gauge {
    _Atomic double block_until; /* waiters sleep instead of yielding until then */
    _Atomic double block_s;     /* the length of that stretch */
    atomic_flag busy;           /* a thread is taking a reading */
    double sample_at;           /* when the job's CPU time was last read (0: not since a stretch) */
    double sample_cpu;          /* what it was then, in seconds */
    double *rank_cpu;           /* each rank's last CPU clock reading (one when ranks are threads) */
    double cpus;                /* cpus the ranks can use at once (eng_ep_count_cpus) */
} eng_yield_gauge_t;

struct eng_ep {
    pthread_mutex_t lock;
    eng_seg_t *seg;
    char *base;
    int wrank, wsize;
    bool threads;          /* ranks are threads of this process (memcpy rendezvous) */
    bool oversubscribed;   /* more ranks on this host than cpus they may use: yield or sleep while waiting */
    bool outnumbered;      /* the ranks outnumber the union of their cpus: the same on every rank (protocols) */
    eng_yield_gauge_t yield_gauge; /* whether those yields give the core away (yield_gauge.c) */
    bool cma_slow;         /* single copy costs several memcpys here (eng_seg_t) */
    size_t stream_min;     /* MLC_STREAM_MIN: larger local results are streamed (0 = never) */
    eng_store_gauge_t stage_gauge; /* writes into this rank's stages (stage_store.c) */
    eng_store_choice_t ar_stores;  /* ... by staged allreduces, from their whole times (stage_store.c) */
    bool light_fences;     /* every rank registered for membarrier: wakers need no fence (endpoint.c) */
    bool cma;              /* shm: single-copy allowed by config */
    const uint8_t *cma_ok; /* [reader * n + writer]: reader can process_vm_readv writer */
    pid_t *pids;           /* world rank -> pid (shm) */
    size_t eager_max;      /* larger messages use rendezvous when the pair allows it */
    /* queues */
    eng_op_t **sendq_head, **sendq_tail; /* per destination world rank */
    eng_inbound_t *in;                   /* per source world rank */
    eng_op_t *posted_head, *posted_tail;
    eng_unexp_t *ux_head, *ux_tail;
    atomic_int ux_count;   /* messages on that list: read without the lock (eng_p2p_quiet) */
    eng_ack_t *acks;
    eng_op_t *free_ops;
    eng_op_t *orphans;     /* cancelled ops a peer may still complete (streaming, awaiting ACK): freed with the endpoint */
    /* active collectives of every communicator on this endpoint */
    struct eng_coll *colls;
    int refs;              /* communicators using this endpoint */
    atomic_uint ctx_next;  /* next context pair to hand out */
    /* Splits under way here (split.c; lock): one at a time agrees, the one
     * whose parent has the lowest context pair first. */
    struct eng_split_wait *splits;
    const struct eng_split_wait *split_agreeing; /* the one agreeing now, or NULL */
    /* progress thread (asynchronous operations progress while the caller computes) */
    pthread_t thread;
    bool thread_started, thread_stop;
    pthread_cond_t cond;
    int async_pending;     /* async requests not yet complete */
    atomic_int user_waiting;
    /* liveness */
    uint8_t *dead;         /* world rank -> known dead (death is final) */
    double *live_at;       /* world rank -> when peer_dead was last asked */
    char (*dead_why)[112]; /* world rank -> how it ended (peer_dead's words) */
    int (*peer_dead)(eng_ep_t *ep, int wrank, char *why, size_t len); /* backend hook */
    void (*release)(eng_ep_t *ep);                                     /* backend hook */
    void *backend_data;
    struct eng_views *views; /* peers' shared blocks mapped here (peer_mem.c); NULL until the first */
};

/* Per-communicator engine state (comm->impl). */
typedef struct eng_comm {
    eng_ep_t *ep;
    eng_slot_t *slots;  /* this communicator's slot area, indexed by comm rank's world rank; NULL = none */
    char *stages;       /* its stages, stage_bytes per world rank; NULL = none */
    size_t stage_bytes; /* the segment's stage_bytes (chunks in a stage: direct.c, stage_depth) */
    uint64_t direct_seq;/* direct collectives started */
    uint64_t quick_seq; /* the latest of them that took the quick path */
    uint64_t lines_free_to; /* quick path: ops up to this one may overwrite their line (direct.c) */
    uint64_t digest;    /* of the direct collectives started (direct.c), announced with each */
    bool cma_all;       /* every pair can single-copy (threads, or CMA probed ok) */
    mlc_comm_t *comm;
    uint32_t ctx;       /* user context; ctx + 1 carries collective traffic */
    int *world_of;      /* comm rank -> world rank */
    int *comm_of;       /* world rank -> comm rank or -1 */
    eng_slot_t **member_slot; /* comm rank r -> its slot, &slots[world_of[r]] (NULL without slots) */
    mlc_sig_t done_sig; /* the last collective completed here: names both sides of a late message */
    atomic_uint_fast64_t *fail_word; /* this rank's failure word for ctx's pair (eng_fail_word) */
    atomic_int in_flight;    /* its operations in the endpoint's list, until each has completed (table.c) */
} eng_comm_t;

/* An active collective (schedule executor) or a user request being driven. */
typedef struct eng_coll {
    struct eng_coll *next;
    mlc_request_t *req;
    mlc_exec_t *exec;
    eng_comm_t *ec;
} eng_coll_t;

/* --- direct collectives ---------------------------------------------------- */
/* "direct": the selector returns this pointer, so the hot path compares pointers first. */
extern const char eng_direct_name[];
/* Name of the direct algorithm for req if it applies, else NULL. */
const char *eng_direct_choose(const mlc_request_t *req);
/* Start/advance a direct collective kept in `state` (req->priv). */
typedef struct eng_direct {
    const mlc_sig_t *sig; /* the call, published in the slot with pub and checked against each peer's */
    uint64_t sig_hash;
    uint64_t v;        /* this op's flag value */
    uint64_t digest;   /* the communicator's digest of direct calls up to this one */
    int stage;
    bool quick;        /* the quick path: payload and flag in one announcement line per rank */
    bool after_quick;  /* op v - 1 took the quick path */
    int peer;          /* next peer to visit */
    uint64_t chunk;    /* staged broadcast / allgather: next chunk to copy in (root: its
                          own); staged allreduce: next step; allreduce of shared buffers: next
                          chunk of this rank's slice to reduce */
    uint64_t out;      /* staged allgather: next chunk to copy out of every stage;
                          allreduce of shared buffers: next chunk of the current peer's slice to copy */
    int part;          /* staged allreduce: the part of that step to do next; allreduce of shared
                          buffers: the peers whose slices are copied */
    void *tmp;         /* in-place accumulation / bounce buffers */
    int store_mode;    /* staged allreduce: MLC_STAGE_STORES mode of its stage writes (eng_store_choice_pick) */
    double began;      /* staged allreduce: when it began (mlc_now) */
} eng_direct_t;
mlc_status_t eng_direct_start(mlc_request_t *req, const mlc_sig_t *sig, uint64_t hash, eng_direct_t *d);
/* 1 = complete, 0 = waiting, < 0 = error. */
int eng_direct_progress(mlc_request_t *req, eng_direct_t *d, int *moved);
void eng_direct_cancel(eng_comm_t *ec, eng_direct_t *d);

/* Wait on cond for at most 100 ms (waits re-check abort, death and deadlines). */
static inline void eng_cond_wait_slice(pthread_cond_t *cond, pthread_mutex_t *lock)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(cond, lock, &ts);
}

/* --- writes into the stages (stage_store.c; caller holds ep->lock) --------- */
/* Copy n bytes into a stage place with plain or streaming stores, as `mode`
 * (MLC_STAGE_STORES) and the gauge say; true when it streamed (the place is
 * then not in this core's cache: copy on from src, not from it). */
bool eng_stage_store(eng_store_gauge_t *g, int mode, void *place, const void *src, size_t n);
/* Its two halves, apart for tests: whether the next timed write streams,
 * and what one cost (nanoseconds per KiB, at `now`). */
bool eng_gauge_pick(eng_store_gauge_t *g, double now);
void eng_gauge_record(eng_store_gauge_t *g, bool streamed, double ns_per_kib, double now);
/* Whether stores into the stage stall now (the gauge streams, or
 * MLC_STAGE_STORES=streaming): work that would store into the stage
 * should go through a copy instead. */
bool eng_stage_stalls(const eng_store_gauge_t *g, int mode);
/* The MLC_STAGE_STORES mode for one staged allreduce of `bytes` when the
 * setting is `mode`: as set, except that auto is either auto (the gauge
 * above) or streaming, whichever made such operations faster, trying the
 * other one now and then; and what it took (record it, mode as picked). */
int eng_store_choice_pick(eng_store_choice_t *c, int mode, size_t bytes);
void eng_store_choice_record(eng_store_choice_t *c, int picked, size_t bytes, double seconds);

/* --- waiting with more ranks than cores (yield_gauge.c) ------------------ */
/* With room for the CPU readings of nranks ranks; false: out of memory. */
bool eng_yield_gauge_init(eng_yield_gauge_t *g, int nranks);
void eng_yield_gauge_free(eng_yield_gauge_t *g);
/* Yield the core, unless other processes are known to take it; a yield
 * that gave the core away for long has the gauge read the job's CPU time. */
void eng_yield(eng_ep_t *ep);
/* Whether a waiter should sleep on its doorbell at once rather than yield. */
bool eng_yield_futile(const eng_yield_gauge_t *g, double now);
/* A costly yield at `now`, the job's ranks having had job_cpu_s CPU
 * seconds so far: the gauge's rule, apart for tests (one thread at a time:
 * eng_yield holds busy). Returns the length of the stretch of sleeping it
 * began (0: none); *share (may be NULL): the share of the cpus the ranks
 * had, where a window ended. */
double eng_yield_sample(eng_yield_gauge_t *g, double now, double job_cpu_s, double *share);

/* --- the cpus the ranks may use (host_cpus.c) ------------------------------ */
/* Publish the calling thread's allowed cpus as rank wrank's, before it
 * counts as attached. */
void eng_cpus_publish(eng_seg_t *seg, int wrank);
/* The cpus in the union of what the ranks published (at least 1). */
int eng_cpus_union(const eng_seg_t *seg);
/* How many ranks (wrank included) published cpus all among wrank's; *mine:
 * how many wrank has. */
int eng_cpus_crowd(const eng_seg_t *seg, int wrank, int *mine);
/* The tightest CPU quota, in cpus (fractional), on the way from the cgroup
 * that self_cgroup names (/proc/self/cgroup) up to the root of the tree at
 * root (/sys/fs/cgroup, each v1 controller list mounted as
 * root/<list>; in a container, its own): v2 cpu.max, v1 cpu.cfs_quota_us /
 * cpu.cfs_period_us; 0: none. Apart for tests. */
double eng_cgroup_quota(const char *self_cgroup, const char *root);
/* Once every rank has published: ep->oversubscribed (more ranks confined to
 * this rank's cpus than it has, or more ranks than the cpus all may use:
 * their union, or the cgroup quota), ep->outnumbered (more ranks than their
 * union: what every rank reads alike, so protocols may follow it) and the
 * yield gauge's cpu count (rank 0 logs them at MLC_LOG_LEVEL=info). */
void eng_ep_count_cpus(eng_ep_t *ep);

/* --- segment layout ------------------------------------------------------ */
/* stages: broadcast stages (process segments; threads copy directly). */
size_t eng_seg_size(int nranks, bool stages, size_t *ring_bytes);
void eng_seg_format(eng_seg_t *seg, int nranks, bool stages, bool cma_slow, size_t ring_bytes, size_t total);
static inline eng_ctl_t *eng_ctl(eng_ep_t *ep, int r)
{
    return (eng_ctl_t *)(ep->base + ep->seg->ctl_off) + r;
}

/* --- endpoint ------------------------------------------------------------ */
mlc_status_t eng_ep_create(eng_seg_t *seg, int wrank, bool threads, eng_ep_t **out);
void eng_ep_unref(eng_ep_t *ep);
/* Wake rank r if it sleeps. */
void eng_wake(eng_ep_t *ep, int r);
/* Wake every sleeping world rank world_of[0..n) but world_of[skip] (-1: none),
 * with one fence for all (waking peers one by one fenced every time). */
void eng_wake_members(eng_ep_t *ep, const int *world_of, int n, int skip);
/* One progress pass over rings, queues and collectives; caller holds ep->lock. */
int eng_progress_locked(eng_ep_t *ep);
/* Sleep on this rank's doorbell up to max_s (returns early when woken), unless
 * ec (may be NULL) has a failure posted by another member by then. */
void eng_sleep(eng_ep_t *ep, double max_s, const struct eng_comm *ec);
/* Register this process for membarrier (once); whether it can use light fences. */
bool eng_light_fences_register(void);

/* --- liveness (liveness.c) ------------------------------------------------ */
enum { ENG_ALIVE = 0, ENG_DIED = 1, ENG_FREED = 2 };
/* Is world rank w gone? ENG_DIED (killed, or exited without freeing), ENG_FREED
 * (released its endpoint: freed its communicators), else ENG_ALIVE; `why`
 * completes "peer rank N ...". Asks the backend's peer_dead at most every few
 * ms per peer. Caller holds ep->lock. */
int eng_peer_gone(eng_ep_t *ep, int w, char *why, size_t len);
/* The same, asked again every millisecond for up to max_s while w seems
 * alive: for evidence that w may be dying (its files closed, as when a
 * block of it cannot be opened any more). Caller holds ep->lock. */
int eng_peer_gone_within(eng_ep_t *ep, int w, double max_s, char *why, size_t len);
/* --- slot areas for new communicators (slot_areas.c) ------------------------ */
#define ENG_MAX_AREAS 32 /* slot_areas never exceeds it (segment.c): one bit each */
#define ENG_NO_AREA UINT32_MAX
/* The areas this rank can give a communicator split from a parent of
 * context pair parent_ctx (every rank's slot there unused or left, and
 * claimed by no split but one of that parent), claimed: its own slot in
 * each is cleared for its next user and claimed, so that no rank outside
 * the parent finds the area free until eng_areas_settle. *claimed: an
 * area was passed over only for another parent's claim (a claim lasts one
 * agreement: split.c tries again rather than go without an area). One
 * split at a time per rank (split.c). */
uint32_t eng_areas_offer(eng_ep_t *ep, uint32_t parent_ctx, bool *claimed);
/* Area `area`'s slots, indexed by world rank. */
eng_slot_t *eng_area_slots(const eng_ep_t *ep, uint32_t area);
/* The lowest area in `free_all` (what every rank offered), ENG_NO_AREA if none. */
uint32_t eng_area_lowest(uint32_t free_all);
/* Drop this rank's claims of `offered` (the new communicator has marked its own area used by then). */
void eng_areas_settle(eng_ep_t *ep, uint32_t offered);

/* This rank frees ec: members still waiting for it there learn that it left. */
void eng_member_leave(eng_comm_t *ec);
/* Record that this rank is alive and checking (the timeout's "heard from"). */
void eng_beat(eng_ep_t *ep);
/* Fail comm with MLC_ERR_PEER_LOST if a peer it waits for is gone. Lock NOT held. */
mlc_status_t eng_health_peers(mlc_comm_t *comm);
/* Before a probe drains the rings: the comm rank of a gone peer that makes a
 * probe of `source` (comm rank or MLC_ANY_SOURCE) fail if nothing matches, or
 * -1. Lock held. */
int eng_probe_gone(eng_comm_t *ec, int source, char *why, size_t len);
/* The ranks a pending request was not heard from (timeout message). Lock NOT held. */
void eng_name_silent(const mlc_request_t *req, const eng_coll_t *e, char *buf, size_t len);
/* Does entry e wait for comm rank r? 0 no, 1 yes, 2 as one of any source. Lock held (table.c). */
int eng_entry_waits_for(const eng_coll_t *e, int r);
/* Does a direct collective wait for comm rank r at its current stage (direct.c)? */
bool eng_direct_waits_for(const mlc_request_t *req, const eng_direct_t *d, int r);

/* --- point-to-point (caller holds ep->lock) ------------------------------- */
eng_op_t *eng_op_get(eng_ep_t *ep);
void eng_op_put(eng_ep_t *ep, eng_op_t *op);
/* sig: the collective call a step belongs to (ctx + 1 traffic), NULL for user point-to-point. */
mlc_status_t eng_isend(eng_comm_t *ec, uint32_t ctx, int peer, uint64_t tag, const void *buf,
                       size_t bytes, mlc_request_t *req, const mlc_sig_t *sig, eng_op_t **out);
mlc_status_t eng_irecv(eng_comm_t *ec, uint32_t ctx, int peer, uint64_t tag, bool any_tag, void *buf,
                       size_t cap, mlc_request_t *req, const mlc_sig_t *sig, eng_op_t **out);
/* Probe the unexpected queue (after a progress pass). */
bool eng_probe(eng_comm_t *ec, int peer, int tag, mlc_msg_status_t *st);
/* Probe the collective context's unexpected queue for call `sig` of ec,
 * about to start: a message of the same call number with another signature
 * (the peer runs another algorithm because its arguments differ), or one of
 * an earlier call this rank completed without it (both ranks thought they
 * were the root), fills msg and returns true. */
bool eng_ux_mismatch(eng_comm_t *ec, const mlc_sig_t *sig, char *msg, size_t len);
/* Drop every queued operation of ec (comm free). */
void eng_cancel_comm(eng_comm_t *ec);
/* Nothing unread in the inbound rings and no unexpected message queued (no lock needed). */
bool eng_p2p_quiet(eng_ep_t *ep);
/* Copy `bytes` from world rank src's buffer (rendezvous, single copy). A
 * failure reports the failure a member of ec posted first, if one did (it
 * may have left since, which is why the read failed), else names a peer
 * that is gone, if one is, by its rank in ec (may be NULL: world ranks). */
mlc_status_t eng_rndv_copy(eng_ep_t *ep, eng_comm_t *ec, int src, uint64_t addr, void *dst, size_t bytes);
/* The same from `mapped`, src's shared block mapped here (eng_peer_view),
 * with `copy` doing the copy (NULL: memcpy): not counted, but failed
 * when src dropped the operation before or during the copy. */
mlc_status_t eng_mapped_copy(eng_ep_t *ep, eng_comm_t *ec, int src, const char *mapped, void *dst, size_t bytes,
                             void (*copy)(void *dst, const void *src, size_t n));
/* After reading `bytes` of src's mapped block in place (a reduction that
 * combines them with no copy first): failed when src dropped the operation
 * before or during the read, as eng_mapped_copy's second look. */
mlc_status_t eng_mapped_read_check(eng_ep_t *ep, eng_comm_t *ec, int src, size_t bytes);

/* --- peers' shared blocks (peer_mem.c; caller holds ep->lock) --------------- */
/* A read-only local pointer to byte `at` of world rank w's buffer [buf,
 * buf + buf_len) in its shared block ref, the block mapped and the buffer's
 * pages read once on first use; NULL with the reason in why, and errno set
 * (ENOENT: the owner no longer holds the block open, as when it is dying),
 * when it cannot be. Threads, and this rank: buf + at itself. */
const void *eng_peer_view(eng_ep_t *ep, int w, const mlc_shmem_ref_t *ref, uint64_t buf, size_t buf_len, size_t at,
                          char *why, size_t whylen);
/* Once ec's failure is posted, wait until no peer reads this rank's memory
 * by single copy: a read that began before it ends, any later one sees the
 * failure and reads nothing (p2p.c). Then buffers of ec's operations may
 * go back to the caller. */
void eng_readers_drain(eng_ep_t *ep);
/* Unmap every peer's block (endpoint release). */
void eng_peer_views_free(eng_ep_t *ep);

/* --- failed communicators (failure.c) -------------------------------------- */
/* Fail ec here (sticky) and on every other member: their waits return st
 * with msg within one wake-up. Returns the communicator's sticky status. */
mlc_status_t eng_fail_comm(eng_comm_t *ec, mlc_status_t st, const char *msg);
/* The same, with another text for the other members (note) than for this rank (msg). */
mlc_status_t eng_fail_comm_note(eng_comm_t *ec, mlc_status_t st, const char *msg, const char *note);
/* Has a member posted a failure for ec? (no side effects; every call's path
 * asks, so it is one load and a compare, inline) */
static inline bool eng_fail_posted(const eng_comm_t *ec)
{
    return atomic_load_explicit(ec->fail_word, memory_order_acquire) >> 32 == (uint64_t)(ec->ctx / 2) + 1;
}
/* World rank wrank's failure word for context pair `pair`. */
atomic_uint_fast64_t *eng_fail_word(const eng_ep_t *ep, int wrank, uint32_t pair);
/* The failure a member posted for ec (eng_fail_posted holds): fail it here
 * too and return its status. */
mlc_status_t eng_fail_adopt(eng_comm_t *ec);
/* A failure another member published for ec: fail it here too and return
 * the status, else MLC_SUCCESS. */
static inline mlc_status_t eng_fail_check(eng_comm_t *ec)
{
    return eng_fail_posted(ec) ? eng_fail_adopt(ec) : MLC_SUCCESS;
}
/* Every collective posts its call on its rank's board when it starts
 * (direct.c); a collective that keeps waiting compares the boards of its
 * peers (eng_board_mismatch): a peer that started the same call number with
 * other arguments (and so may wait for other messages, or none) fills msg
 * and returns true. Needs a slot area (ec->slots). */
void eng_board_post(eng_comm_t *ec, const mlc_sig_t *sig, uint64_t hash);
bool eng_board_mismatch(eng_comm_t *ec, const mlc_sig_t *sig, char *msg, size_t len);
/* The signature of the active collective with call number `call` whose
 * collective traffic uses context coll_ctx (and its communicator), or NULL.
 * Lock held (table.c). */
const mlc_sig_t *eng_active_sig(eng_ep_t *ep, uint32_t coll_ctx, uint64_t call, eng_comm_t **ec);
/* The active collective with the highest call number on that context, or NULL. Lock held. */
const mlc_sig_t *eng_latest_sig(eng_ep_t *ep, uint32_t coll_ctx, eng_comm_t **ec);

/* --- the backend table entries shared by threads and shm -------------------- */
/* area: its slot area (ENG_NO_AREA: none), agreed in split.c (the world's: 0). */
mlc_status_t eng_comm_create(mlc_comm_t *comm, eng_ep_t *ep, uint32_t ctx, uint32_t area, const int *world_of);
void eng_be_destroy(mlc_comm_t *comm);
void eng_be_abort(mlc_comm_t *comm);
void eng_be_forget(mlc_request_t *req);
mlc_status_t eng_be_split(mlc_comm_t *parent, int color, int key, const int *members, int n,
                          mlc_comm_t *child);
mlc_status_t eng_be_progress(mlc_comm_t *comm, int *progressed);
void eng_be_idle(mlc_comm_t *comm, double max_s);
bool eng_be_polling_futile(mlc_comm_t *comm);
mlc_status_t eng_be_health(mlc_comm_t *comm);
mlc_status_t eng_be_posted_failure(mlc_comm_t *comm);
void eng_be_post_failure(mlc_comm_t *comm, mlc_status_t st, const char *note);
void eng_be_silent_peers(mlc_comm_t *comm, int source, char *buf, size_t len);
void eng_be_pending_peers(const mlc_request_t *req, char *buf, size_t len);
mlc_status_t eng_be_iprobe(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *st);
const char *const *eng_be_algos(mlc_coll_t coll);
const char *eng_be_choose_algo(const mlc_request_t *req);
mlc_status_t eng_start_coll(mlc_request_t *req);
mlc_status_t eng_start_send(mlc_request_t *req);
mlc_status_t eng_start_recv(mlc_request_t *req);
mlc_status_t eng_start_sendrecv(mlc_request_t *req);

/* Designated initializers of the start entries every engine backend shares. */
#define ENG_START_ENTRIES                                                                      \
    [MLC_COLL_BROADCAST] = eng_start_coll, [MLC_COLL_REDUCE] = eng_start_coll,               \
    [MLC_COLL_ALLREDUCE] = eng_start_coll, [MLC_COLL_ALLGATHER] = eng_start_coll,            \
    [MLC_COLL_ALLGATHERV] = eng_start_coll, [MLC_COLL_REDUCE_SCATTER] = eng_start_coll,      \
    [MLC_COLL_ALLTOALL] = eng_start_coll, [MLC_COLL_ALLTOALLV] = eng_start_coll,             \
    [MLC_COLL_GATHER] = eng_start_coll, [MLC_COLL_GATHERV] = eng_start_coll,                 \
    [MLC_COLL_SCATTER] = eng_start_coll, [MLC_COLL_SCATTERV] = eng_start_coll,               \
    [MLC_COLL_BARRIER] = eng_start_coll, [MLC_COLL_SEND] = eng_start_send,                   \
    [MLC_COLL_RECV] = eng_start_recv, [MLC_COLL_SENDRECV] = eng_start_sendrecv

#define ENG_COMMON_ENTRIES                                                                     \
    .split = eng_be_split, .destroy = eng_be_destroy, .abort = eng_be_abort, .forget = eng_be_forget, \
    .start = {ENG_START_ENTRIES}, .iprobe = eng_be_iprobe, .progress = eng_be_progress,        \
    .idle = eng_be_idle, .polling_futile = eng_be_polling_futile, .health = eng_be_health,   \
    .posted_failure = eng_be_posted_failure, .pending_peers = eng_be_pending_peers,          \
    .algos = eng_be_algos, .choose_algo = eng_be_choose_algo, .signs_calls = true,  \
    .post_failure = eng_be_post_failure, .silent_peers = eng_be_silent_peers
#endif
