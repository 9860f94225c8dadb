/*
 * pool.c - the bounded pool of event chunks. One arena of buffer_size bytes is
 * mapped at the first run and cut into equal chunks. Nothing in it is touched
 * before a thread writes there: chunks never used yet are handed out in order
 * from a cursor, and the lists of chunks live in small arrays beside the arena
 * (one link, one reference count and one offset per chunk), never in the
 * chunks themselves.
 *
 * Threads take chunks lock-free: first the unused tail of a chunk left by a
 * thread that exited (so that short-lived threads do not hold a whole chunk
 * each until the next drain), then a chunk the collector gave back, then a
 * chunk never used. When none is left, events are dropped and counted: the
 * pool never grows and never blocks.
 *
 * A chunk may so hold the records of several threads one after the other,
 * each part (a segment) behind a header of its own. The chunk counts the
 * segments not yet consumed, plus one while its tail is listed for reuse; the
 * collector's last release puts it back in the free list.
 *
 * The first write to a page costs a fault, which is dear on some virtual
 * machines: 15 to 36 us a page here, against about 1 us for the same page
 * faulted in by madvise(MADV_POPULATE_WRITE) and 5 us more at its first
 * access (the host's share). So a thread that takes a chunk never used faults
 * it in with one call, and the collector, when it runs, keeps a few chunks
 * ahead fully touched in the free list, where threads look first. The first
 * run touches nothing: a short process pays only for the pages it writes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "produce.h"
#include "record.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL */
#endif

/* chunks the collector keeps touched in the free list */
#define WARM_AHEAD 4u
/* a tail shorter than this is not reused (any record fits in it) */
#define TAIL_MIN 1024u

static char *g_arena; /* atomic: set last at the first run, NULL before */
static size_t g_chunk_size;
static uint32_t g_chunk_count;
static uint32_t *g_link; /* per chunk, atomic: the next index + 1 in its list, 0 = end */
static uint32_t *g_refs; /* per chunk, atomic: segments not yet consumed, + 1 while listed as a tail */
static uint32_t *g_tail; /* per chunk: where its free tail begins, while listed */

/* The two lists: generation << 32 | (index + 1), 0 = empty. */
static uint64_t g_free_head;  /* chunks given back by the collector */
static uint64_t g_tails_head; /* chunks whose tail an exited thread left */
static uint32_t g_free_count; /* atomic: chunks in the free list (counted before the push) */
static uint32_t g_fresh;      /* atomic: chunks below this index were handed out once */
static int g_populate_off;    /* atomic: the kernel has no MADV_POPULATE_WRITE */
/* atomic: chunks in use past which taking one wakes the collector (half the
 * pool; the ring's size in ring mode, where the collector then evicts) */
static uint32_t g_high;

static char *chunk_base(uint32_t index) { return g_arena + (size_t)index * g_chunk_size; }

static uint32_t index_of(const void *p)
{
    return (uint32_t)((size_t)((const char *)p - g_arena) / g_chunk_size);
}

static size_t choose_chunk_size(uint64_t buffer_size)
{
    /* small enough that many threads each hold one, big enough that taking a
     * new chunk (the slow path) is rare: 4 KiB to 64 KiB */
    size_t size = 4096;
    while (size < 65536 && (uint64_t)size * 2 * 256 <= buffer_size)
        size *= 2;
    return size;
}

static void list_push(uint64_t *head_p, uint32_t index)
{
    uint64_t head = __atomic_load_n(head_p, __ATOMIC_ACQUIRE);
    uint64_t next;
    do {
        __atomic_store_n(&g_link[index], (uint32_t)(head & 0xffffffffu), __ATOMIC_RELAXED);
        next = ((head >> 32) + 1) << 32 | (uint64_t)(index + 1);
    } while (!__atomic_compare_exchange_n(head_p, &head, next, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
}

/* The index popped, or UINT32_MAX when the list is empty. */
static uint32_t list_pop(uint64_t *head_p)
{
    uint64_t head = __atomic_load_n(head_p, __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t slot = (uint32_t)(head & 0xffffffffu);
        if (slot == 0)
            return UINT32_MAX;
        /* the link of a chunk another thread just popped may be stale: the
         * generation in head makes the exchange below fail then */
        uint32_t link = __atomic_load_n(&g_link[slot - 1], __ATOMIC_RELAXED);
        uint64_t next = ((head >> 32) + 1) << 32 | link;
        if (__atomic_compare_exchange_n(head_p, &head, next, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return slot - 1;
    }
}

/* Faults in chunks [from, to): one call for them all. */
static void populate(uint32_t from, uint32_t to)
{
    if (from >= to || __atomic_load_n(&g_populate_off, __ATOMIC_RELAXED))
        return;
    if (madvise(chunk_base(from), (size_t)(to - from) * g_chunk_size, MADV_POPULATE_WRITE) != 0 &&
        errno == EINVAL)
        __atomic_store_n(&g_populate_off, 1, __ATOMIC_RELAXED);
}

int mlprof__pool_init(uint64_t buffer_size)
{
    if (__atomic_load_n(&g_arena, __ATOMIC_ACQUIRE))
        return MLPROF_OK;
    size_t chunk = choose_chunk_size(buffer_size);
    size_t count = (size_t)(buffer_size / chunk);
    if (count < 1)
        count = 1;
    if (count > UINT32_MAX - 1)
        count = UINT32_MAX - 1;
    size_t bytes = count * chunk;
    /* pages are only committed when a thread first writes into its chunk */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return mlprof__fail(MLPROF_ENOMEM, "cannot map %zu bytes of event buffers (buffer_size): %s",
                            bytes, strerror(errno));
    size_t side = 3 * count * sizeof(uint32_t);
    void *s = mmap(NULL, side, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        int err = errno;
        munmap(p, bytes);
        return mlprof__fail(MLPROF_ENOMEM, "cannot map %zu bytes for the event buffers' lists: %s", side,
                            strerror(err));
    }
    g_chunk_size = chunk;
    g_chunk_count = (uint32_t)count;
    g_link = s;
    g_refs = g_link + count;
    g_tail = g_refs + count;
    __atomic_store_n(&g_free_head, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_tails_head, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_free_count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_fresh, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_high, (uint32_t)(count / 2), __ATOMIC_RELAXED);
    /* last: lock-free readers (mlprof_buffer_usage) see all of the above or nothing */
    __atomic_store_n(&g_arena, (char *)p, __ATOMIC_RELEASE);
    return MLPROF_OK;
}

int mlprof__pool_ready(void) { return __atomic_load_n(&g_arena, __ATOMIC_ACQUIRE) != NULL; }
size_t mlprof__pool_chunk_size(void) { return g_chunk_size; }
size_t mlprof__pool_chunk_count(void) { return g_chunk_count; }

/* Chunks held by threads or waiting for the collector (tails listed for
 * reuse included), from one consistent enough reading: the free count is
 * raised before a chunk is pushed, so it never exceeds the chunks handed out. */
static uint32_t chunks_in_use(void)
{
    uint32_t free_chunks = __atomic_load_n(&g_free_count, __ATOMIC_ACQUIRE);
    uint32_t fresh = __atomic_load_n(&g_fresh, __ATOMIC_ACQUIRE);
    if (fresh > g_chunk_count)
        fresh = g_chunk_count;
    return fresh > free_chunks ? fresh - free_chunks : 0;
}

size_t mlprof__pool_free_count(void) { return g_chunk_count - chunks_in_use(); }

void mlprof__pool_set_high_water(size_t chunks)
{
    if (!mlprof__pool_ready())
        return;
    if (chunks == 0 || chunks > g_chunk_count)
        chunks = g_chunk_count / 2;
    __atomic_store_n(&g_high, (uint32_t)chunks, __ATOMIC_RELAXED);
}

/* The index of a chunk never used, now the caller's; UINT32_MAX if none is left. */
static uint32_t claim_fresh(void)
{
    uint32_t i = __atomic_load_n(&g_fresh, __ATOMIC_RELAXED);
    do {
        if (i >= g_chunk_count)
            return UINT32_MAX;
    } while (!__atomic_compare_exchange_n(&g_fresh, &i, i + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
    return i;
}

static void free_push(uint32_t index)
{
    __atomic_add_fetch(&g_free_count, 1, __ATOMIC_RELEASE);
    list_push(&g_free_head, index);
}

void mlprof__pool_keep_warm(void)
{
    if (!mlprof__pool_ready())
        return;
    while (__atomic_load_n(&g_free_count, __ATOMIC_ACQUIRE) < WARM_AHEAD) {
        uint32_t i = claim_fresh();
        if (i == UINT32_MAX)
            return;
        populate(i, i + 1);
        /* the chunk is ours until it is pushed: a write to each page pays
         * what is left of its first touch here rather than on a thread */
        char *base = chunk_base(i);
        for (size_t at = 0; at < g_chunk_size; at += 4096)
            ((volatile char *)base)[at] = 0;
        free_push(i);
    }
}

/* A segment header at p, its data up to the end of chunk index. */
static mlprof__chunk *segment_at(char *p, uint32_t index)
{
    mlprof__chunk *c = (mlprof__chunk *)p;
    c->next = NULL;
    c->final_end = NULL;
    c->end = chunk_base(index) + g_chunk_size;
    return c;
}

/* The tail of a chunk an exited thread left, with room for bytes; NULL if none. */
static mlprof__chunk *take_tail(size_t bytes)
{
    uint32_t i = list_pop(&g_tails_head);
    if (i == UINT32_MAX)
        return NULL;
    uint32_t at = g_tail[i];
    if (g_chunk_size - at < sizeof(mlprof__chunk) + bytes) {
        list_push(&g_tails_head, i); /* for a smaller record */
        return NULL;
    }
    /* the listed reference becomes this segment's */
    return segment_at(chunk_base(i) + at, i);
}

static mlprof__chunk *take_whole(void)
{
    uint32_t i = list_pop(&g_free_head);
    if (i != UINT32_MAX) {
        __atomic_sub_fetch(&g_free_count, 1, __ATOMIC_RELEASE);
    } else {
        i = claim_fresh();
        if (i == UINT32_MAX)
            return NULL;
        populate(i, i + 1);     /* one call, not a fault a page */
        mlprof__wake();     /* the collector, if it runs, warms the next ones */
    }
    __atomic_store_n(&g_refs[i], 1, __ATOMIC_RELAXED);
    return segment_at(chunk_base(i), i);
}

mlprof__chunk *mlprof__pool_get(size_t bytes)
{
    /* the acquire in pool_ready orders the reads of the sizes after the first run's writes */
    if (!mlprof__pool_ready() || bytes > g_chunk_size - sizeof(mlprof__chunk))
        return NULL;
    mlprof__chunk *c = bytes + TAIL_MIN <= g_chunk_size ? take_tail(bytes) : NULL;
    if (!c)
        c = take_whole();
    if (c && chunks_in_use() > __atomic_load_n(&g_high, __ATOMIC_RELAXED))
        mlprof__wake();
    return c;
}

void mlprof__pool_put(mlprof__chunk *c)
{
    uint32_t i = index_of(c);
    if (__atomic_sub_fetch(&g_refs[i], 1, __ATOMIC_ACQ_REL) != 0)
        return; /* another segment of it is still in use, or its tail is listed */
    free_push(i);
}

void mlprof__pool_retire(mlprof__chunk *c, const char *pos)
{
    uint32_t i = index_of(c);
    size_t at = (size_t)(pos - chunk_base(i));
    at = (at + 15) & ~(size_t)15;
    if (at > g_chunk_size || g_chunk_size - at < TAIL_MIN)
        return;
    g_tail[i] = (uint32_t)at;
    __atomic_add_fetch(&g_refs[i], 1, __ATOMIC_RELAXED);
    list_push(&g_tails_head, i);
}

void mlprof__pool_reset_after_fork(void)
{
    if (!mlprof__pool_ready())
        return;
    /* the parent's pages are shared copy-on-write: fault them in again */
    g_free_head = 0;
    g_tails_head = 0;
    g_free_count = 0;
    g_fresh = 0;
}

void mlprof_buffer_usage(uint64_t *used_bytes, uint64_t *capacity_bytes)
{
    int ready = mlprof__pool_ready();
    if (used_bytes)
        *used_bytes = ready ? (uint64_t)chunks_in_use() * g_chunk_size : 0;
    if (capacity_bytes)
        *capacity_bytes = ready ? (uint64_t)g_chunk_count * g_chunk_size : 0;
}
