/*
 * mem.c - the memory profiler's accounting. Operations arrive from the
 * collector in the order threads were drained; they wait in a queue until the
 * watermark passes them, then are applied sorted by time: allocations and
 * frees update the device's used and allocated bytes, their peaks, the
 * per-scope rows, the live-block table and the block history, and queue
 * timeline samples (counter events) for the collector to hand to the sinks.
 *
 * The live-block table is keyed by (device, layer, address). A freed block
 * leaves a tombstone with its address, so that a second free of it is told
 * apart from a free of an address never seen (both are counted, neither is
 * fatal).
 *
 * Two layers may report one address. Under mlprof run the malloc (and
 * cudaMalloc) interposer records every block the system hands out (a lower
 * block, MLPROF__MEM_LOWER), and the program may report the same block
 * itself (mlprof_mem_alloc, with a tag) or reserve it as a pool's segment
 * (mlprof_mem_reserve). So the table is keyed by the layer too: each layer's
 * frees match its own allocations, and a double free is one layer's second
 * free. The program's alloc or reserve at the address of a live lower block
 * takes that block over: the lower block ends there (not counted twice in
 * used, not a missed free) and its slot becomes SLOT_TAKEN until the
 * interposer's free of it, which then matches quietly.
 */
#include <stdlib.h>
#include <string.h>

#include "../record/produce.h"
#include "mem_internal.h"

mem_state mlprof__mem;

/* The array with room for element n: items itself, or a larger copy (and
 * *cap grown); NULL when out of memory (items is left as it was). */
static void *room_for(void *items, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? *cap * 2 : first;
    void *p = mlprof__realloc(items, c * size);
    if (p)
        *cap = c;
    return p;
}

/* ------------------------------------------------------------- the queue */

typedef struct mem_op {
    uint64_t ns;
    uint64_t order; /* arrival: ties keep each thread's program order */
    uint64_t addr, bytes;
    const mlprof__scope_node *scope;
    const char *tag, *opname;
    int32_t tid;
    uint16_t device;
    uint8_t kind;
    uint8_t lower; /* MLPROF__MEM_LOWER: from an interposer */
} mem_op;

static struct {
    mem_op *ops;
    size_t n, cap;
    uint64_t order;
} Q;

static const char *intern(const char *s, size_t len)
{
    if (!s || !len)
        return NULL;
    mlprof__map_entry *e = mlprof__map_slot(&mlprof__mem.names, s, len);
    return e ? e->key : NULL;
}

void mlprof__mem_push(uint64_t ns, int device, unsigned op, uint64_t addr, uint64_t bytes,
                      const mlprof__scope_node *scope, const char *tag, size_t tag_len,
                      const char *opname, size_t opname_len, pid_t tid)
{
    mem_op *ops = room_for(Q.ops, &Q.cap, Q.n, sizeof *ops, 1024);
    if (!ops) {
        mlprof__log(MLPROF_LOG_ERROR, "memory profiler: out of memory; an operation is lost");
        return;
    }
    Q.ops = ops;
    mem_op *o = &Q.ops[Q.n++];
    o->ns = ns;
    o->order = Q.order++;
    o->addr = addr;
    o->bytes = bytes;
    o->scope = scope;
    o->tag = MLPROF__MEM_KIND(op) == MLPROF__MEM_ALLOC ? intern(tag, tag_len) : NULL;
    o->opname = intern(opname, opname_len); /* a free's too: the memory trace shows it */
    o->tid = (int32_t)tid;
    o->device = (uint16_t)device;
    o->kind = (uint8_t)MLPROF__MEM_KIND(op);
    o->lower = (op & MLPROF__MEM_LOWER) != 0;
}

static int op_cmp(const void *pa, const void *pb)
{
    const mem_op *a = pa, *b = pb;
    if (a->ns != b->ns)
        return a->ns < b->ns ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* ------------------------------------------------------------ devices */

mem_device *mlprof__mem_device(int device)
{
    if (device < 0 || device > MLPROF_DEVICE_MAX)
        return NULL;
    mem_device *d = mlprof__mem.devs[device];
    if (d)
        return d;
    d = mlprof__calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (device == MLPROF_DEVICE_CPU)
        snprintf(d->name, sizeof d->name, "cpu");
    else if (device <= MLPROF_DEVICE_CUDA(63))
        snprintf(d->name, sizeof d->name, "cuda:%d", device - MLPROF_DEVICE_CUDA(0));
    else
        snprintf(d->name, sizeof d->name, "device %d", device);
    snprintf(d->series_used, sizeof d->series_used, "memory used (%s)", d->name);
    snprintf(d->series_alloc, sizeof d->series_alloc, "memory allocated (%s)", d->name);
    mlprof__mem.devs[device] = d;
    return d;
}

int mlprof__mem_set_device_name(int device, const char *name)
{
    if (device < 0 || device > MLPROF_DEVICE_MAX)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_mem_device_name: bad device %d (0 to %d)", device,
                            MLPROF_DEVICE_MAX);
    if (!name || !*name)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_mem_device_name: empty name");
    mem_device *d = mlprof__mem_device(device);
    if (!d)
        return mlprof__fail(MLPROF_ENOMEM, "mlprof_mem_device_name: out of memory");
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->series_used, sizeof d->series_used, "memory used (%s)", d->name);
    snprintf(d->series_alloc, sizeof d->series_alloc, "memory allocated (%s)", d->name);
    return MLPROF_OK;
}

const char *mlprof__mem_scope_name(const mlprof__scope_node *scope)
{
    return scope && scope->full_len ? scope->full : "(no scope)";
}

uint64_t mlprof__mem_origin(void)
{
    uint64_t t0 = __atomic_load_n(&mlprof__g.run_ns, __ATOMIC_RELAXED);
    for (int i = 0; i <= MLPROF_DEVICE_MAX; i++) {
        const mem_device *d = mlprof__mem.devs[i];
        if (d && d->bucket_w && (!t0 || d->bucket_t0 < t0))
            t0 = d->bucket_t0;
    }
    return t0;
}

/* ---------------------------------------------------------- the timeline */

static void timeline_note(mem_device *d, uint64_t ns)
{
    if (!d->bucket_w) {
        d->bucket_t0 = ns;
        d->bucket_w = 1000; /* 1 us: doubled as time goes on */
    }
    uint64_t rel = ns > d->bucket_t0 ? ns - d->bucket_t0 : 0;
    while (rel / d->bucket_w >= MEM_BUCKETS) {
        for (size_t i = 0; i < MEM_BUCKETS / 2; i++) {
            mem_bucket a = d->buckets[2 * i], b = d->buckets[2 * i + 1];
            mem_bucket m = b.set ? b : a; /* the later one's last values */
            if (a.set && b.set) {
                m.used = a.used > b.used ? a.used : b.used;
                m.allocated = a.allocated > b.allocated ? a.allocated : b.allocated;
            }
            d->buckets[i] = m;
        }
        memset(d->buckets + MEM_BUCKETS / 2, 0, sizeof d->buckets / 2);
        d->bucket_w *= 2;
    }
    mem_bucket *b = &d->buckets[rel / d->bucket_w];
    if (!b->set || d->used > b->used)
        b->used = d->used;
    if (!b->set || d->allocated > b->allocated)
        b->allocated = d->allocated;
    b->last_used = d->used;
    b->last_allocated = d->allocated;
    b->set = 1;
}

/* ------------------------------------------------------ live-block table */

typedef struct live_slot {
    uint64_t addr;
    size_t idx;      /* into mlprof__mem.blocks while live */
    uint16_t device;
    uint8_t lower;   /* the layer: the interposer's blocks (1) or the program's (0) */
    uint8_t state;   /* 0 empty, 1 live, 2 freed (a tombstone), 3 taken over */
} live_slot;

/* SLOT_TAKEN: a lower block that the program's own alloc or reserve took
 * over; it has ended, its interposer's free has not come yet. */
enum { SLOT_EMPTY = 0, SLOT_LIVE = 1, SLOT_FREED = 2, SLOT_TAKEN = 3 };

static struct {
    live_slot *slots;
    size_t cap, used; /* used: slots not empty */
    size_t freed;
    size_t taken;
} L;

static size_t slot_hash(int device, int lower, uint64_t addr)
{
    uint64_t x = addr ^ ((uint64_t)device << 52) ^ ((uint64_t)lower << 51);
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return (size_t)x;
}

/* The slot of (device, layer, addr), or the empty slot where it would go. */
static live_slot *slot_find(int device, int lower, uint64_t addr)
{
    if (!L.cap)
        return NULL;
    size_t mask = L.cap - 1;
    for (size_t i = slot_hash(device, lower, addr) & mask;; i = (i + 1) & mask) {
        live_slot *s = &L.slots[i];
        if (s->state == SLOT_EMPTY || (s->addr == addr && s->device == device && s->lower == lower))
            return s;
    }
}

/* Rebuilds the table from the live blocks, with room to grow; tombstones are
 * kept unless they outnumber the live blocks by far (then old double frees
 * are reported as unknown frees) or forget_freed; taken-over slots always. */
static int slots_rebuild(size_t want_live, int forget_freed)
{
    live_slot *old = L.slots;
    size_t old_cap = L.cap;
    size_t keep_freed = !forget_freed && L.freed <= want_live + 65536 ? L.freed : 0;
    size_t cap = 1024;
    while (cap * 5 < (want_live + keep_freed + L.taken + 1) * 10)
        cap *= 2;
    live_slot *slots = mlprof__calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    L.slots = slots;
    L.cap = cap;
    L.used = L.freed = 0;
    for (size_t i = 0; i < old_cap; i++) {
        int keep = old[i].state == SLOT_LIVE || old[i].state == SLOT_TAKEN || (old[i].state == SLOT_FREED && keep_freed);
        if (keep) {
            live_slot *s = slot_find(old[i].device, old[i].lower, old[i].addr);
            *s = old[i];
            L.used++;
            L.freed += s->state == SLOT_FREED;
        }
    }
    mlprof__free(old);
    return 0;
}

/* After the block array was compacted: point the live slots at the new indices. */
static void slots_reindex(void)
{
    for (size_t i = 0; i < mlprof__mem.nblocks; i++) {
        const mem_block *b = &mlprof__mem.blocks[i];
        if (b->seq_free != MEM_LIVE)
            continue;
        live_slot *s = slot_find(b->device, b->lower, b->addr);
        if (s && s->state == SLOT_LIVE)
            s->idx = i;
    }
}

/* ---------------------------------------------------------- the history */

static mem_scope_stat *scope_stat(int device, const mlprof__scope_node *scope)
{
    char key[sizeof(int) + sizeof scope];
    memcpy(key, &device, sizeof device);
    memcpy(key + sizeof device, &scope, sizeof scope);
    mlprof__map_entry *e = mlprof__map_slot(&mlprof__mem.scopes, key, sizeof key);
    if (!e)
        return NULL;
    if (!e->value) {
        mem_scope_stat *st = mlprof__calloc(1, sizeof *st);
        if (!st)
            return NULL;
        st->scope = scope;
        st->device = device;
        e->value = st;
    }
    return e->value;
}

/* Drops freed blocks when more than memory_history are kept: first those
 * freed before their device's peak (they are not in its live set), oldest
 * first; then, if that is not enough, the oldest of the rest. */
static void history_trim(void)
{
    mem_state *M = &mlprof__mem;
    uint64_t limit = mlprof__g.cfg.memory_history ? mlprof__g.cfg.memory_history : 1;
    if (M->nfreed <= limit)
        return;
    size_t target = (size_t)(limit - limit / 4);
    size_t excess = M->nfreed - target;
    for (int pass = 0; pass < 2 && excess; pass++) {
        size_t w = 0;
        for (size_t i = 0; i < M->nblocks; i++) {
            mem_block *b = &M->blocks[i];
            int drop = 0;
            if (excess && b->seq_free != MEM_LIVE) {
                const mem_device *d = M->devs[b->device];
                drop = pass == 1 || b->seq_free <= d->peak_seq;
                if (drop && pass == 1 && b->seq_free > d->peak_seq)
                    M->devs[b->device]->peak_set_incomplete = 1;
            }
            if (drop) {
                excess--;
                M->nfreed--;
                M->history_dropped++;
            } else {
                M->blocks[w++] = *b;
            }
        }
        M->nblocks = w;
    }
    slots_reindex();
}

static mem_block *block_new(void)
{
    mem_state *M = &mlprof__mem;
    mem_block *blocks = room_for(M->blocks, &M->cap, M->nblocks, sizeof *blocks, 4096);
    if (!blocks)
        return NULL;
    M->blocks = blocks;
    mem_block *b = &M->blocks[M->nblocks++];
    memset(b, 0, sizeof *b);
    return b;
}

/* ------------------------------------------------------------ segments */

static const mem_segment *held_segment_at(const mem_device *d, uint64_t addr, size_t *pos)
{
    size_t lo = 0, hi = d->nheld;
    while (lo < hi) { /* first held segment starting after addr */
        size_t mid = (lo + hi) / 2;
        if (d->segs[d->held[mid]].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (pos)
        *pos = lo;
    if (lo == 0)
        return NULL;
    const mem_segment *s = &d->segs[d->held[lo - 1]];
    return addr - s->addr < s->bytes || addr == s->addr ? s : NULL;
}

static void segment_release(mem_device *d, size_t hpos, uint64_t ns)
{
    mem_segment *s = &d->segs[d->held[hpos]];
    s->t_release = ns ? ns : 1;
    d->reserved -= s->bytes;
    memmove(d->held + hpos, d->held + hpos + 1, (d->nheld - hpos - 1) * sizeof *d->held);
    d->nheld--;
}

static void apply_reserve(mem_device *d, const mem_op *o)
{
    size_t pos;
    const mem_segment *s = held_segment_at(d, o->addr, &pos);
    if (s && s->addr == o->addr) { /* its release was missed */
        d->implicit_frees++;
        segment_release(d, pos - 1, o->ns);
        held_segment_at(d, o->addr, &pos);
    }
    mem_segment *segs = room_for(d->segs, &d->segcap, d->nsegs, sizeof *segs, 16);
    if (segs)
        d->segs = segs;
    size_t *held = segs ? room_for(d->held, &d->heldcap, d->nheld, sizeof *held, 16) : NULL;
    if (!held) {
        mlprof__log(MLPROF_LOG_ERROR, "memory profiler: out of memory; a segment is lost");
        return;
    }
    d->held = held;
    mem_segment *n = &d->segs[d->nsegs];
    n->addr = o->addr;
    n->bytes = o->bytes;
    n->t_reserve = o->ns;
    n->t_release = 0;
    memmove(d->held + pos + 1, d->held + pos, (d->nheld - pos) * sizeof *d->held);
    d->held[pos] = d->nsegs++;
    d->nheld++;
    d->reserved += o->bytes;
    d->reserves++;
    d->pooled = 1;
}

static void apply_release(mem_device *d, const mem_op *o, uint64_t *bytes)
{
    size_t pos;
    const mem_segment *s = held_segment_at(d, o->addr, &pos);
    if (!s || s->addr != o->addr) {
        d->unknown_releases++;
        return;
    }
    *bytes = s->bytes;
    segment_release(d, pos - 1, o->ns);
    d->releases++;
}

/* ------------------------------------------------- allocations and frees */

static void block_gone(mem_device *d, mem_block *b, uint64_t seq, uint64_t ns, live_slot *s)
{
    b->seq_free = seq;
    b->t_free = ns;
    d->used -= b->bytes;
    if (!b->pooled)
        d->direct -= b->bytes;
    d->live_blocks--;
    mem_scope_stat *st = scope_stat(b->device, b->scope);
    if (st) {
        st->live -= b->bytes;
        st->frees++;
    }
    s->state = SLOT_FREED;
    L.freed++;
    mlprof__mem.nfreed++;
}

/* The program reports (alloc or reserve) the address of a live block the
 * interposer recorded: that block ends here, handed over to the program's own
 * report, and its slot waits for the interposer's free (SLOT_TAKEN). */
static void take_over(mem_device *d, const mem_op *o, uint64_t seq)
{
    live_slot *s = o->lower ? NULL : slot_find(o->device, 1, o->addr);
    if (!s || s->state != SLOT_LIVE)
        return;
    mem_block *b = &mlprof__mem.blocks[s->idx];
    b->taken = 1;
    block_gone(d, b, seq, o->ns, s);
    d->frees++;
    s->state = SLOT_TAKEN;
    L.freed--;
    L.taken++;
}

static void apply_alloc(mem_device *d, const mem_op *o, uint64_t seq)
{
    mem_state *M = &mlprof__mem;
    if ((L.used + 1) * 10 > L.cap * 7 && slots_rebuild(M->nblocks - M->nfreed + 1, 0) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "memory profiler: out of memory; an allocation is lost");
        return;
    }
    live_slot *s = slot_find(o->device, o->lower, o->addr);
    if (s->state == SLOT_LIVE) { /* its free was missed: it ends here */
        mem_block *old = &M->blocks[s->idx];
        old->implicit = 1;
        d->implicit_frees++;
        block_gone(d, old, seq, o->ns, s);
    }
    take_over(d, o, seq);
    mem_block *b = block_new();
    if (!b) {
        mlprof__log(MLPROF_LOG_ERROR, "memory profiler: out of memory; an allocation is lost");
        return;
    }
    b->addr = o->addr;
    b->bytes = o->bytes;
    b->t_alloc = o->ns;
    b->seq_alloc = seq;
    b->seq_free = MEM_LIVE;
    b->scope = o->scope;
    b->tag = o->tag;
    b->op = o->opname;
    b->tid = o->tid;
    b->device = o->device;
    b->lower = o->lower;
    b->pooled = held_segment_at(d, o->addr, NULL) != NULL;
    if (s->state == SLOT_EMPTY)
        L.used++;
    else if (s->state == SLOT_FREED)
        L.freed--;
    else if (s->state == SLOT_TAKEN) /* the interposer missed the free of the block taken over */
        L.taken--;
    s->addr = o->addr;
    s->device = o->device;
    s->lower = o->lower;
    s->state = SLOT_LIVE;
    s->idx = (size_t)(b - M->blocks);
    d->used += b->bytes;
    if (!b->pooled)
        d->direct += b->bytes;
    d->live_blocks++;
    d->allocs++;
    mem_scope_stat *st = scope_stat(o->device, o->scope);
    if (st) {
        st->allocs++;
        st->bytes_total += b->bytes;
        st->live += b->bytes;
        if (st->live > st->peak)
            st->peak = st->live;
    }
}

/* Frees the block of o's layer at o->addr; *bytes and *tag say what was
 * freed (0 and NULL for an unknown or double free, and for the interposer's
 * free of a block taken over, which ended then). */
static void apply_free(mem_device *d, const mem_op *o, uint64_t seq, uint64_t *bytes, const char **tag)
{
    live_slot *s = slot_find(o->device, o->lower, o->addr);
    if (!s || s->state == SLOT_EMPTY) {
        d->unknown_frees++;
        return;
    }
    if (s->state == SLOT_FREED) {
        d->double_frees++;
        return;
    }
    if (s->state == SLOT_TAKEN) { /* a tombstone from now on: a second free is a double free */
        s->state = SLOT_FREED;
        L.taken--;
        L.freed++;
        return;
    }
    mem_block *b = &mlprof__mem.blocks[s->idx];
    *bytes = b->bytes;
    *tag = b->tag;
    block_gone(d, b, seq, o->ns, s);
    d->frees++;
    history_trim();
}

static void emit_sample(mem_device *d, mlprof__produced *out)
{
    mlprof__produce_counter(out, d->last_tid, "memory", d->series_used, d->last_ns, 1, (int64_t)d->used, 0);
    if (d->pooled)
        mlprof__produce_counter(out, d->last_tid, "memory", d->series_alloc, d->last_ns, 1, (int64_t)d->allocated,
                                0);
    d->sample_pending = 0;
}

/* A slot for the next operation of the device's trace: the ring grows up to
 * memory_history operations, then the oldest gives way; NULL when out of
 * memory (the operation is counted as not kept). */
static mem_trace_op *trace_slot(mem_device *d)
{
    uint64_t limit = mlprof__g.cfg.memory_history ? mlprof__g.cfg.memory_history : 1;
    d->trace_total++;
    if (d->trace_n == d->trace_cap && d->trace_head == 0 && d->trace_cap < limit) {
        size_t cap = d->trace_cap ? d->trace_cap * 2 : 256;
        if (cap > limit)
            cap = (size_t)limit;
        mem_trace_op *t = mlprof__realloc(d->trace, cap * sizeof *t);
        if (t) {
            d->trace = t;
            d->trace_cap = cap;
        }
    }
    if (d->trace_cap == 0)
        return NULL;
    if (d->trace_n < d->trace_cap)
        return &d->trace[(d->trace_head + d->trace_n++) % d->trace_cap];
    mem_trace_op *oldest = &d->trace[d->trace_head];
    d->trace_head = (d->trace_head + 1) % d->trace_cap;
    return oldest;
}

static void peak_used_at(mem_device *d, uint64_t used, uint64_t allocated, uint64_t seq, uint64_t ns, pid_t tid)
{
    if (used <= d->peak_used)
        return;
    d->peak_used = used;
    d->peak_seq = seq;
    d->peak_ns = ns;
    d->peak_tid = tid;
    d->alloc_at_peak = allocated;
}

/* The waiting peak of an interposer's block counts (the program did not take the block over next). */
static void cand_commit(mem_device *d)
{
    if (d->cand) {
        peak_used_at(d, d->cand_used, d->cand_alloc, d->cand_seq, d->cand_ns, d->cand_tid);
        if (mlprof__mem.win_open && d->cand_used > d->win_peak) /* the op profiler's window, alike */
            d->win_peak = d->cand_used;
    }
    d->cand = 0;
}

static void apply_one(const mem_op *o, mlprof__produced *out)
{
    mem_state *M = &mlprof__mem;
    mem_device *d = mlprof__mem_device(o->device);
    if (!d)
        return;
    if (d->cand) {
        int taken = !o->lower && (o->kind == MLPROF__MEM_ALLOC || o->kind == MLPROF__MEM_RESERVE) &&
                    o->addr == d->cand_addr;
        if (!taken)
            cand_commit(d);
        d->cand = 0;
    }
    if (o->ns < M->last_ns)
        M->late++;
    else
        M->last_ns = o->ns;
    uint64_t seq = ++M->seq;
    uint64_t bytes = 0;
    const char *tag = NULL;
    switch (o->kind) {
    case MLPROF__MEM_ALLOC:
        apply_alloc(d, o, seq);
        bytes = o->bytes;
        tag = o->tag;
        break;
    case MLPROF__MEM_FREE:
        apply_free(d, o, seq, &bytes, &tag);
        break;
    case MLPROF__MEM_RESERVE:
        take_over(d, o, seq); /* a segment the program took from malloc */
        apply_reserve(d, o);
        bytes = o->bytes;
        break;
    default:
        apply_release(d, o, &bytes);
        break;
    }
    d->allocated = d->reserved + d->direct;
    mem_trace_op *t = trace_slot(d);
    if (t)
        *t = (mem_trace_op){o->ns, bytes, d->used, d->allocated, o->scope, o->opname, tag, o->kind};
    int lower_alloc = o->lower && o->kind == MLPROF__MEM_ALLOC;
    if (M->win_open && d->used > d->win_peak && !lower_alloc)
        d->win_peak = d->used;
    if (lower_alloc && (d->used > d->peak_used || (M->win_open && d->used > d->win_peak))) {
        d->cand = 1; /* the next operation says whether it counts */
        d->cand_used = d->used;
        d->cand_alloc = d->allocated;
        d->cand_seq = seq;
        d->cand_ns = o->ns;
        d->cand_addr = o->addr;
        d->cand_tid = o->tid;
    } else {
        peak_used_at(d, d->used, d->allocated, seq, o->ns, o->tid);
    }
    if (d->allocated > d->peak_allocated) {
        d->peak_allocated = d->allocated;
        d->peak_alloc_ns = o->ns;
    }
    d->last_ns = o->ns;
    d->last_tid = o->tid;
    timeline_note(d, o->ns);
    d->sample_pending = 1;
    int rate = mlprof__g.cfg.memory_sample_rate;
    if (rate > 0 && ++d->ops % (uint64_t)rate == 0 && out)
        emit_sample(d, out);
}

void mlprof__mem_apply(uint64_t upto_ns, mlprof__produced *out)
{
    if (!Q.n)
        return;
    /* one thread's operations arrive in order: sort only what is not */
    for (size_t k = 1; k < Q.n; k++) {
        if (op_cmp(&Q.ops[k - 1], &Q.ops[k]) > 0) {
            mlprof__sort(Q.ops, Q.n, sizeof *Q.ops, op_cmp);
            break;
        }
    }
    size_t i = 0;
    while (i < Q.n && Q.ops[i].ns <= upto_ns)
        apply_one(&Q.ops[i++], out);
    memmove(Q.ops, Q.ops + i, (Q.n - i) * sizeof *Q.ops);
    Q.n -= i;
    /* what is reported next holds every peak so far (a block taken over
     * after this counts, conservatively) */
    for (int k = 0; k <= MLPROF_DEVICE_MAX; k++)
        if (mlprof__mem.devs[k])
            cand_commit(mlprof__mem.devs[k]);
}

mem_device *mlprof__mem_next_used(int *i)
{
    while (++*i <= MLPROF_DEVICE_MAX) {
        mem_device *d = mlprof__mem.devs[*i];
        if (d && d->last_ns)
            return d;
    }
    return NULL;
}

int mlprof__mem_any(void)
{
    int i = -1;
    return mlprof__mem_next_used(&i) != NULL;
}

/* ------------------------------------------------------- trace outputs */

void mlprof__mem_trace_tail(mlprof__produced *out)
{
    mem_device *d;
    for (int i = -1; (d = mlprof__mem_next_used(&i)) != NULL;) {
        if (d->sample_pending && mlprof__g.cfg.memory_sample_rate > 0) {
            emit_sample(d, out);
            d->sample_pending = 1; /* the tail is rewritten at every dump */
        }
        if (!d->peak_ns)
            continue;
        char name[96];
        int n = snprintf(name, sizeof name, "memory peak (%s)", d->name);
        mlprof__sb args;
        mlprof__sb_init(&args);
        mlprof__sb_printf(&args, "\"used\":%llu,\"allocated_then\":%llu,\"peak_allocated\":%llu",
                          (unsigned long long)d->peak_used, (unsigned long long)d->alloc_at_peak,
                          (unsigned long long)d->peak_allocated);
        /* process-wide, but drawn on the track of the thread that made the
         * peak: that track is named; the process's own tid may have none */
        if (n > 0 && args.data && !args.failed)
            mlprof__produce_instant(out, d->peak_tid ? d->peak_tid : mlprof__g.pid, MLPROF_SCOPE_PROCESS, "memory",
                                    name, d->peak_ns, args.data);
        mlprof__sb_free(&args);
    }
}

void mlprof__mem_other_data(mlprof__sb *out)
{
    if (!mlprof__mem_any())
        return;
    mlprof__sb_printf(out, ",\"memory\":{\"late_events\":%llu,\"history_dropped\":%llu,\"devices\":{",
                      (unsigned long long)mlprof__mem.late,
                      (unsigned long long)mlprof__mem.history_dropped);
    int first = 1;
    const mem_device *d;
    for (int i = -1; (d = mlprof__mem_next_used(&i)) != NULL;) {
        if (!first)
            mlprof__sb_putc(out, ',');
        first = 0;
        mlprof__sb_json_str(out, d->name, strlen(d->name));
        mlprof__sb_printf(out,
                          ":{\"device\":%d,\"peak_used\":%llu,\"peak_allocated\":%llu,\"unknown_frees\":%llu"
                          ",\"double_frees\":%llu,\"unknown_releases\":%llu,\"implicit_frees\":%llu}",
                          i, (unsigned long long)d->peak_used, (unsigned long long)d->peak_allocated,
                          (unsigned long long)d->unknown_frees, (unsigned long long)d->double_frees,
                          (unsigned long long)d->unknown_releases,
                          (unsigned long long)d->implicit_frees);
    }
    mlprof__sb_puts(out, "}}");
}

void mlprof__mem_warn(void)
{
    mem_state *M = &mlprof__mem;
    uint64_t problems = 0;
    for (int i = 0; i <= MLPROF_DEVICE_MAX; i++) {
        const mem_device *d = M->devs[i];
        if (d)
            problems += d->unknown_frees + d->double_frees + d->unknown_releases + d->implicit_frees;
    }
    if (problems > M->warned_problems) {
        for (int i = 0; i <= MLPROF_DEVICE_MAX; i++) {
            const mem_device *d = M->devs[i];
            mlprof__sb sb;
            mlprof__sb_init(&sb);
            if (d && mlprof__mem_problems(&sb, d))
                mlprof__log(MLPROF_LOG_WARN, "memory (%s): %s", d->name, sb.data);
            mlprof__sb_free(&sb);
        }
    }
    if (M->late > M->warned_late)
        mlprof__log(MLPROF_LOG_WARN,
                    "memory: %llu operations arrived after later ones were accounted (a thread was "
                    "preempted while recording); the peak may be off by their size",
                    (unsigned long long)M->late);
    if (M->history_dropped > M->warned_dropped)
        mlprof__log(MLPROF_LOG_WARN,
                    "memory: %llu freed blocks were not kept (memory_history=%llu); the CSV and the "
                    "picture miss them, the totals and peaks do not",
                    (unsigned long long)M->history_dropped,
                    (unsigned long long)mlprof__g.cfg.memory_history);
    M->warned_problems = problems;
    M->warned_late = M->late;
    M->warned_dropped = M->history_dropped;
}

/* ------------------------------------------------------------ resetting */

void mlprof__mem_reset(void)
{
    mem_state *M = &mlprof__mem;
    size_t w = 0;
    for (size_t i = 0; i < M->nblocks; i++) {
        if (M->blocks[i].seq_free == MEM_LIVE)
            M->blocks[w++] = M->blocks[i];
    }
    M->nblocks = w;
    M->nfreed = 0;
    slots_reindex();
    for (int i = 0; i <= MLPROF_DEVICE_MAX; i++) {
        mem_device *d = M->devs[i];
        if (!d)
            continue;
        d->cand = 0;
        d->peak_used = d->used;
        d->peak_allocated = d->allocated;
        d->alloc_at_peak = d->allocated;
        d->peak_seq = M->seq;
        d->peak_ns = d->peak_alloc_ns = 0;
        d->allocs = d->frees = d->reserves = d->releases = 0;
        d->unknown_frees = d->double_frees = d->unknown_releases = d->implicit_frees = 0;
        d->ops = 0;
        d->sample_pending = 0;
        d->last_ns = 0;
        d->peak_set_incomplete = 0;
        memset(d->buckets, 0, sizeof d->buckets);
        d->bucket_w = 0;
        d->trace_head = d->trace_n = 0;
        d->trace_total = 0;
        /* segments released are history; held ones stay, renumbered in address order */
        mem_segment *segs = d->nheld ? mlprof__malloc(d->nheld * sizeof *segs) : NULL;
        if (segs || !d->nheld) {
            for (size_t h = 0; h < d->nheld; h++) {
                segs[h] = d->segs[d->held[h]];
                d->held[h] = h;
            }
            if (d->nheld)
                memcpy(d->segs, segs, d->nheld * sizeof *segs);
            d->nsegs = d->nheld;
            mlprof__free(segs);
        }
    }
    for (size_t i = 0; i < M->scopes.cap; i++) {
        mem_scope_stat *st = M->scopes.slots[i].key ? M->scopes.slots[i].value : NULL;
        if (st) {
            st->allocs = st->frees = st->bytes_total = 0;
            st->peak = st->live;
        }
    }
    M->late = M->history_dropped = 0;
    M->warned_problems = M->warned_late = M->warned_dropped = 0;
}

void mlprof__mem_window_open(void)
{
    mem_state *M = &mlprof__mem;
    for (int i = 0; i <= MLPROF_DEVICE_MAX; i++) {
        if (M->devs[i])
            M->devs[i]->win_peak = M->devs[i]->used;
    }
    M->win_open = 1; /* a device first seen in the window starts at 0, its win_peak too */
}

void mlprof__mem_window_close(int device, uint64_t *used, uint64_t *peak)
{
    mem_state *M = &mlprof__mem;
    M->win_open = 0;
    const mem_device *d = device >= 0 && device <= MLPROF_DEVICE_MAX ? M->devs[device] : NULL;
    *used = d ? d->used : 0;
    *peak = d ? d->win_peak : 0;
}

int mlprof__mem_used(int device, uint64_t *used)
{
    const mem_device *d = device >= 0 && device <= MLPROF_DEVICE_MAX ? mlprof__mem.devs[device] : NULL;
    *used = d ? d->used : 0;
    return d != NULL;
}

int mlprof__mem_info(int device, mlprof_mem_info *info, size_t size)
{
    if (device < 0 || device > MLPROF_DEVICE_MAX)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_mem_info_get: bad device %d (0 to %d)", device,
                            MLPROF_DEVICE_MAX);
    if (!info)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_mem_info_get: info is NULL");
    mlprof_mem_info v;
    memset(&v, 0, sizeof v);
    const mem_device *d = mlprof__mem.devs[device];
    if (d) {
        v.used = d->used;
        v.peak_used = d->peak_used;
        v.allocated = d->allocated;
        v.peak_allocated = d->peak_allocated;
        v.peak_used_ns = d->peak_ns;
        v.live_blocks = d->live_blocks;
        v.allocs = d->allocs;
        v.frees = d->frees;
        v.reserves = d->reserves;
        v.releases = d->releases;
        v.unknown_frees = d->unknown_frees;
        v.double_frees = d->double_frees;
        v.unknown_releases = d->unknown_releases;
        v.implicit_frees = d->implicit_frees;
    }
    memcpy(info, &v, size < sizeof v ? size : sizeof v);
    return MLPROF_OK;
}

/* ------------------------------------------------------------ the API */

int mlprof_mem_info_get(int device, mlprof_mem_info *info, size_t size)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    mlprof__drain_now();
    int rc = mlprof__mem_info(device, info, size);
    mlprof__ctl_unlock();
    return rc;
}

int mlprof_mem_reset(void)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    mlprof__drain_now(); /* the memory in use now is what the peaks start from */
    mlprof__mem_reset();
    mlprof__ctl_unlock();
    return MLPROF_OK;
}

int mlprof_mem_trace(int device, char **out)
{
    mlprof__ensure_init();
    if (!out)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_mem_trace: out is NULL");
    *out = NULL;
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    mlprof__ctl_lock();
    mlprof__drain_now();
    int rc = mlprof__mem_trace_text(device, &sb);
    mlprof__ctl_unlock();
    if (rc == MLPROF_OK && !(*out = mlprof__sb_take(&sb)))
        rc = mlprof__fail(MLPROF_ENOMEM, "mlprof_mem_trace: out of memory");
    mlprof__sb_free(&sb);
    return rc;
}

int mlprof_mem_device_name(int device, const char *name)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    int rc = mlprof__mem_set_device_name(device, name);
    mlprof__ctl_unlock();
    return rc;
}

/* ------------------------------------------------- the lifecycle entry */

static void memory_op(uint64_t ns, int device, unsigned op, uint64_t addr, uint64_t bytes, const void *scope,
                      const char *tag, size_t tag_len, const char *op_name, size_t op_len, pid_t tid)
{
    mlprof__mem_push(ns, device, op, addr, bytes, scope, tag, tag_len, op_name, op_len, tid);
}

static void account(const mlprof__drain_info *d)
{
    mlprof__mem_apply(d->upto_ns, d->discard ? NULL : d->events);
}

/* Recording starts again (ctl_lock held): what the program allocated and
 * freed while it was off was not seen, so an address freed before may have
 * been allocated again since, and its tombstone would call the next free
 * of it a double free. The operations recorded before the gap are
 * accounted first (a drain), then the tombstones go: such a free is an
 * unknown one, which says why it may be. */
static void resume(void)
{
    if (!L.freed)
        return;
    mlprof__drain_now();
    mem_state *M = &mlprof__mem;
    if (L.freed)
        slots_rebuild(M->nblocks - M->nfreed + 1, 1); /* out of memory: the tombstones stay */
}

const mlprof__module mlprof__mem_module = {
    .name = "memory",
    .memory_op = memory_op,
    .account = account,
    .resume = resume,
    .tail = mlprof__mem_trace_tail,
    .other_data = mlprof__mem_other_data,
    .report = mlprof__mem_warn,
    .clear = mlprof__mem_reset,
};
