/*
 * map.c - an open-addressing hash map from byte strings to pointers, used by
 * the collector and the statistics (never on the recording hot path).
 */
#include <string.h>

#include "common.h"

uint64_t mlprof__hash(const void *data, size_t n)
{
    /* FNV-1a, then a final mix so that the low bits used for the index are good */
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

void mlprof__map_init(mlprof__map *m) { memset(m, 0, sizeof *m); }

void mlprof__map_free(mlprof__map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        mlprof__free(m->slots[i].key);
    mlprof__free(m->slots);
    mlprof__map_init(m);
}

static mlprof__map_entry *find(const mlprof__map *m, const char *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        mlprof__map_entry *e = &m->slots[i];
        if (!e->key)
            return e;
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0)
            return e;
    }
}

void *mlprof__map_get(const mlprof__map *m, const char *key, size_t len)
{
    if (!m->cap)
        return NULL;
    mlprof__map_entry *e = find(m, key, len, mlprof__hash(key, len));
    return e->key ? e->value : NULL;
}

static int grow(mlprof__map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    mlprof__map_entry *slots = mlprof__calloc(cap, sizeof *slots);
    if (!slots)
        return 0;
    mlprof__map old = *m;
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].key)
            *find(m, old.slots[i].key, old.slots[i].key_len, old.slots[i].hash) = old.slots[i];
    }
    mlprof__free(old.slots);
    return 1;
}

mlprof__map_entry *mlprof__map_slot(mlprof__map *m, const char *key, size_t len)
{
    if ((m->count + 1) * 4 > m->cap * 3 && !grow(m))
        return NULL;
    uint64_t h = mlprof__hash(key, len);
    mlprof__map_entry *e = find(m, key, len, h);
    if (e->key)
        return e;
    char *copy = mlprof__malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, key, len);
    copy[len] = '\0';
    e->key = copy;
    e->key_len = len;
    e->hash = h;
    e->value = NULL;
    m->count++;
    return e;
}
