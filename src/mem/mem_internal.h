/*
 * mem_internal.h - the memory profiler's state, shared by the accounting
 * (mem.c), the report and the CSV (mem_report.c) and the picture (mem_svg.c).
 */
#ifndef MLPROF_MEM_INTERNAL_H
#define MLPROF_MEM_INTERNAL_H

#include "../record/record.h"
#include "mem.h"

#define MEM_LIVE UINT64_MAX /* seq_free of a block not freed yet */

/* One block, live or freed. */
typedef struct mem_block {
    uint64_t addr, bytes;
    uint64_t t_alloc, t_free;     /* ns; t_free is meaningful once freed */
    uint64_t seq_alloc, seq_free; /* operation numbers; seq_free MEM_LIVE while live */
    const mlprof__scope_node *scope;
    const char *tag; /* interned, or NULL */
    const char *op;  /* interned: the innermost span open at the allocation, or NULL */
    int32_t tid;
    uint16_t device;
    uint8_t pooled;   /* inside a reserved segment: not counted in "allocated" again */
    uint8_t implicit; /* freed by an allocation over it (its free was missed) */
    uint8_t lower;    /* seen by an interposer (MLPROF__MEM_LOWER): malloc's, cudaMalloc's */
    uint8_t taken;    /* a lower block the program's own alloc or reserve at its address took over */
} mem_block;

/* A segment reserved by a pool. */
typedef struct mem_segment {
    uint64_t addr, bytes;
    uint64_t t_reserve, t_release; /* t_release 0 while held */
} mem_segment;

/* One operation of a device's memory trace (mlprof_mem_trace), with the
 * device's figures after it and what it is attributed to. */
typedef struct mem_trace_op {
    uint64_t ns, bytes;
    uint64_t used, allocated;        /* after it */
    const mlprof__scope_node *scope; /* the thread's scope then */
    const char *op;                  /* interned: the innermost span open then, or NULL */
    const char *tag;                 /* interned: the block's tag, or NULL */
    uint8_t kind;                    /* MLPROF__MEM_* */
} mem_trace_op;

/* The timeline kept for the picture: fixed buckets whose width doubles when
 * time runs past the last one, each holding the highest values seen in it. */
#define MEM_BUCKETS 1024
typedef struct mem_bucket {
    uint64_t used, allocated;           /* maxima in the bucket */
    uint64_t last_used, last_allocated; /* at its last operation */
    uint8_t set;
} mem_bucket;

typedef struct mem_device {
    char name[32];
    char series_used[64];
    char series_alloc[64];
    uint64_t used, allocated, reserved, direct;
    uint64_t peak_used, peak_allocated;
    uint64_t win_peak;           /* highest used since mlprof__mem_window_open */
    uint64_t peak_seq;           /* operation number of the peak of used */
    uint64_t peak_ns, peak_alloc_ns;
    pid_t peak_tid;              /* the thread whose operation made the peak of used */
    uint64_t alloc_at_peak;      /* allocated bytes at the peak of used */
    /* a peak of used made by an interposer's block, waiting for the next
     * operation: the program's own report of that block (take_over) makes it
     * no peak, since the block was never used apart from that report */
    int cand;
    uint64_t cand_used, cand_alloc, cand_seq, cand_ns, cand_addr;
    pid_t cand_tid;
    uint64_t live_blocks;
    uint64_t allocs, frees, reserves, releases;
    uint64_t unknown_frees, double_frees, unknown_releases, implicit_frees;
    uint64_t ops;                /* for the sample rate */
    int sample_pending;          /* a change not yet written to the trace */
    uint64_t last_ns;
    pid_t last_tid;
    int pooled;                  /* a segment was reserved at some point */
    int peak_set_incomplete;     /* freed blocks live at the peak were dropped */
    mem_segment *segs;           /* every segment, in reserve order */
    size_t nsegs, segcap;
    size_t *held;                /* indices of held segments, sorted by address */
    size_t nheld, heldcap;
    mem_bucket buckets[MEM_BUCKETS];
    uint64_t bucket_t0, bucket_w; /* start and width (ns) of the buckets */
    /* the memory trace since the start or the last reset: a ring of the last
     * operations (memory_history at most), oldest at trace_head */
    mem_trace_op *trace;
    size_t trace_cap, trace_head, trace_n;
    uint64_t trace_total; /* operations since then, kept or not */
} mem_device;

/* Per (device, scope): what that part of the program allocated. */
typedef struct mem_scope_stat {
    const mlprof__scope_node *scope;
    int device;
    uint64_t allocs, frees, bytes_total;
    uint64_t live, peak; /* bytes now, and the scope's own highest */
    uint64_t at_peak;    /* bytes live at the device's peak (filled by the report) */
    uint64_t leaked_blocks, leaked_bytes; /* filled by the report */
} mem_scope_stat;

typedef struct mem_state {
    mem_device *devs[MLPROF_DEVICE_MAX + 1];
    mem_block *blocks; /* live and freed, in allocation order */
    size_t nblocks, cap;
    size_t nfreed;     /* freed blocks in the array */
    uint64_t seq;      /* operations accounted */
    uint64_t last_ns;  /* time of the last operation accounted */
    uint64_t late;     /* operations that came after later ones were accounted */
    int win_open;      /* the op profiler's workspace window is open */
    uint64_t history_dropped;
    uint64_t warned_problems, warned_late, warned_dropped;
    mlprof__map names; /* interned tags and op names */
    mlprof__map scopes; /* (device, scope) -> mem_scope_stat */
} mem_state;

extern mem_state mlprof__mem;

/* The next device after *i (start at -1) that has accounted an operation
 * since the last reset; NULL after the last. */
mem_device *mlprof__mem_next_used(int *i);
/* The device's state, created on first use (NULL: out of memory). */
mem_device *mlprof__mem_device(int device);
/* "model:conv1:", or "(no scope)" at the top. */
const char *mlprof__mem_scope_name(const mlprof__scope_node *scope);
/* Whether block b was live at operation number seq. */
static inline int mlprof__mem_live_at(const mem_block *b, uint64_t seq)
{
    return b->seq_alloc <= seq && b->seq_free > seq;
}
/* What went wrong on a device, in words ("1 free of an unknown address, 2
 * double frees"); nothing when all is well. Returns the number of problems. */
uint64_t mlprof__mem_problems(mlprof__sb *out, const mem_device *d);
/* The operations of a device's memory trace in time order: the i-th kept
 * (0 <= i < d->trace_n). */
static inline const mem_trace_op *mlprof__mem_trace_at(const mem_device *d, size_t i)
{
    return &d->trace[(d->trace_head + i) % d->trace_cap];
}
/* The time recording began (ns), the origin of relative times. */
uint64_t mlprof__mem_origin(void);

#endif /* MLPROF_MEM_INTERNAL_H */
