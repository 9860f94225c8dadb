/*
 * pool.c - the bounded pool of event chunks. One arena of buffer_size bytes is
 * mapped at the first run and cut into equal chunks; threads take chunks from
 * a lock-free free list (an index stack tagged with a generation against ABA)
 * and the collector gives them back after draining. When the list is empty,
 * events are dropped and counted: the pool never grows and never blocks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "../collect/collect.h"
#include "record.h"

static char *g_arena;
static size_t g_arena_bytes;
static size_t g_chunk_size;
static size_t g_chunk_count;
static uint64_t g_free_head; /* atomic: generation << 32 | (index + 1), 0 = empty */
static size_t g_free_count;  /* atomic, approximate */

#define NIL_INDEX 0u

static mlprof__chunk *chunk_at(uint32_t index)
{
    return (mlprof__chunk *)(g_arena + (size_t)index * g_chunk_size);
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

static void push_index(uint32_t index)
{
    mlprof__chunk *c = chunk_at(index);
    uint64_t head = __atomic_load_n(&g_free_head, __ATOMIC_ACQUIRE);
    uint64_t next;
    do {
        __atomic_store_n(&c->free_next, head & 0xffffffffu, __ATOMIC_RELAXED);
        next = ((head >> 32) + 1) << 32 | (uint64_t)(index + 1);
    } while (!__atomic_compare_exchange_n(&g_free_head, &head, next, 1, __ATOMIC_RELEASE,
                                          __ATOMIC_ACQUIRE));
    __atomic_add_fetch(&g_free_count, 1, __ATOMIC_RELAXED);
}

int mlprof__pool_init(uint64_t buffer_size)
{
    if (g_arena)
        return MLPROF_OK;
    size_t chunk = choose_chunk_size(buffer_size);
    size_t count = (size_t)(buffer_size / chunk);
    if (count < 1)
        count = 1;
    size_t bytes = count * chunk;
    /* pages are only committed when a thread first writes into its chunk */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return mlprof__fail(MLPROF_ENOMEM, "cannot map %zu bytes of event buffers (buffer_size): %s",
                            bytes, strerror(errno));
    g_arena = p;
    g_arena_bytes = bytes;
    g_chunk_size = chunk;
    g_chunk_count = count;
    g_free_head = 0;
    g_free_count = 0;
    for (size_t i = count; i-- > 0;) {
        chunk_at((uint32_t)i)->index = (uint32_t)i;
        push_index((uint32_t)i);
    }
    return MLPROF_OK;
}

int mlprof__pool_ready(void) { return g_arena != NULL; }
size_t mlprof__pool_chunk_size(void) { return g_chunk_size; }
size_t mlprof__pool_chunk_count(void) { return g_chunk_count; }
size_t mlprof__pool_free_count(void) { return __atomic_load_n(&g_free_count, __ATOMIC_RELAXED); }

mlprof__chunk *mlprof__pool_get(void)
{
    if (!g_arena)
        return NULL;
    uint64_t head = __atomic_load_n(&g_free_head, __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t slot = (uint32_t)(head & 0xffffffffu);
        if (slot == NIL_INDEX)
            return NULL;
        mlprof__chunk *c = chunk_at(slot - 1);
        /* reading free_next of a chunk another thread just popped is harmless:
         * the generation in head makes the exchange below fail then */
        uint64_t link = __atomic_load_n(&c->free_next, __ATOMIC_RELAXED);
        uint64_t next = ((head >> 32) + 1) << 32 | link;
        if (__atomic_compare_exchange_n(&g_free_head, &head, next, 1, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            size_t left = __atomic_sub_fetch(&g_free_count, 1, __ATOMIC_RELAXED);
            if (left * 2 < g_chunk_count)
                mlprof__collect_poke();
            c->next = NULL;
            c->final_end = NULL;
            return c;
        }
    }
}

void mlprof__pool_put(mlprof__chunk *c) { push_index(c->index); }

void mlprof__pool_reset_after_fork(void)
{
    if (!g_arena)
        return;
    g_free_head = 0;
    g_free_count = 0;
    for (size_t i = g_chunk_count; i-- > 0;)
        push_index((uint32_t)i);
}

void mlprof_buffer_usage(uint64_t *used_bytes, uint64_t *capacity_bytes)
{
    size_t free_chunks = mlprof__pool_free_count();
    if (used_bytes)
        *used_bytes = (uint64_t)(g_chunk_count - free_chunks) * g_chunk_size;
    if (capacity_bytes)
        *capacity_bytes = (uint64_t)g_chunk_count * g_chunk_size;
}
