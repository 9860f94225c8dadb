/*
 * observe.c - observers: plug-ins called on the recording thread around each
 * span. The table of observers changes only while stopped, and stopping
 * waits for the threads inside a recording call (the stop fence, recorder.c),
 * so the hot path reads it without a lock; the recorder calls in here only when one is
 * registered (one load and a branch otherwise). Each thread keeps a stack of
 * its open observed spans, each frame holding every observer's scratch.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "record.h"

#define MAX_OBSERVERS 8
#define MAX_DATA 256
#define FRAME_NAME 64

int mlprof__obs_count;

static struct {
    int used;
    mlprof_observer o; /* as the caller knew it, the rest zero */
    char name[64];
    size_t offset; /* of its scratch in a frame's data */
} g_obs[MAX_OBSERVERS];

static size_t g_data_size;  /* all observers' scratch in one frame */
static unsigned g_generation; /* bumped at each change of the table */

typedef struct frame {
    const void *handle; /* the span's handle, or NULL for a run-time name */
    const mlprof_domain *domain;
    const char *name;   /* a handle's name (it lives as long as the handle) */
    int frame;
    char dyn[FRAME_NAME]; /* a run-time name, copied */
    /* then g_data_size bytes of scratch, 16-aligned */
} frame;

#define FRAME_HEAD ((sizeof(frame) + 15) & ~(size_t)15)

typedef struct obs_thread {
    unsigned generation;
    int busy;       /* inside a callback: arguments it adds are not observed */
    int after_mark; /* arguments now go to a marker, not to a span */
    size_t depth, cap, stride;
    unsigned char *frames;
} obs_thread;

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

int mlprof_observer_register(const mlprof_observer *o)
{
    mlprof__ensure_init();
    /* the first version's fields, up to on_begin, must be there */
    if (!o || o->size < offsetof(mlprof_observer, on_arg) || o->size > 4096)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_observer_register: no observer, or a bad size field");
    size_t known = o->size < sizeof(mlprof_observer) ? o->size : sizeof(mlprof_observer);
    mlprof_observer copy;
    memset(&copy, 0, sizeof copy);
    memcpy(&copy, o, known);
    if (copy.span_data_size > MAX_DATA)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_observer_register: span_data_size %zu is above %d",
                            copy.span_data_size, MAX_DATA);
    mlprof__ctl_lock();
    int id;
    if (mlprof__g.state == MLPROF_STATE_RUN)
        id = mlprof__fail(MLPROF_ESTATE, "mlprof_observer_register: only while stopped");
    else
        id = mlprof__observer_register_locked(&copy);
    mlprof__ctl_unlock();
    return id;
}

int mlprof__observer_register_locked(const mlprof_observer *copy)
{
    int id = -1;
    for (int i = 0; i < MAX_OBSERVERS && id < 0; i++) {
        if (!g_obs[i].used)
            id = i;
    }
    if (id < 0)
        return mlprof__fail(MLPROF_ELIMIT, "mlprof_observer_register: %d observers already", MAX_OBSERVERS);
    g_obs[id].o = *copy;
    snprintf(g_obs[id].name, sizeof g_obs[id].name, "%s", copy->name ? copy->name : "observer");
    g_obs[id].o.name = g_obs[id].name;
    g_obs[id].offset = g_data_size;
    g_obs[id].used = 1;
    g_data_size += align16(copy->span_data_size);
    g_generation++;
    __atomic_store_n(&mlprof__obs_count, mlprof__obs_count + 1, __ATOMIC_RELEASE);
    return id;
}

int mlprof__observer_unregister_locked(int id)
{
    if (id < 0 || id >= MAX_OBSERVERS || !g_obs[id].used)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_observer_unregister: no observer %d", id);
    g_obs[id].used = 0;
    /* lay the scratch out again for those left */
    g_data_size = 0;
    for (int i = 0; i < MAX_OBSERVERS; i++) {
        if (g_obs[i].used) {
            g_obs[i].offset = g_data_size;
            g_data_size += align16(g_obs[i].o.span_data_size);
        }
    }
    g_generation++;
    __atomic_store_n(&mlprof__obs_count, mlprof__obs_count - 1, __ATOMIC_RELEASE);
    return MLPROF_OK;
}

int mlprof_observer_unregister(int id)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    int rc = mlprof__g.state == MLPROF_STATE_RUN
                 ? mlprof__fail(MLPROF_ESTATE, "mlprof_observer_unregister: only while stopped")
                 : mlprof__observer_unregister_locked(id);
    mlprof__ctl_unlock();
    return rc;
}

/* ------------------------------------------------------------ per thread */

static obs_thread *thread_state(void)
{
    mlprof__thread *t = mlprof__thread_self();
    if (!t)
        return NULL;
    obs_thread *s = t->obs;
    if (!s) {
        s = mlprof__calloc(1, sizeof *s);
        if (!s)
            return NULL;
        t->obs = s;
    }
    if (s->generation != g_generation) { /* the table changed since: start afresh */
        s->generation = g_generation;
        s->depth = 0;
        s->stride = FRAME_HEAD + g_data_size;
        mlprof__free(s->frames);
        s->frames = NULL;
        s->cap = 0;
    }
    return s;
}

static frame *frame_at(obs_thread *s, size_t i) { return (frame *)(s->frames + i * s->stride); }

static void info_of(const frame *f, size_t depth, mlprof_span_info *info)
{
    info->name = f->handle ? f->name : f->dyn;
    info->domain = f->domain ? f->domain->name : "";
    info->frame = f->frame;
    info->depth = (int)depth;
}

void mlprof__observe_begin(const void *handle, const mlprof_domain *domain, const char *name, int is_frame)
{
    obs_thread *s = thread_state();
    if (!s || s->busy)
        return;
    if (s->depth == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        unsigned char *p = mlprof__realloc(s->frames, cap * s->stride);
        if (!p)
            return;
        s->frames = p;
        s->cap = cap;
    }
    frame *f = frame_at(s, s->depth);
    f->handle = handle;
    f->domain = domain;
    f->frame = is_frame;
    if (handle) {
        f->name = name;
    } else { /* the caller's text lasts only for the call */
        size_t n = name ? strnlen(name, FRAME_NAME - 1) : 0;
        memcpy(f->dyn, name ? name : "", n);
        f->dyn[n] = '\0';
        f->name = NULL; /* frames move when the stack grows: dyn is found from f */
    }
    unsigned char *data = (unsigned char *)f + FRAME_HEAD;
    memset(data, 0, s->stride - FRAME_HEAD); /* the layout this stack was made for */
    mlprof_span_info info;
    info_of(f, s->depth, &info);
    s->depth++;
    s->after_mark = 0;
    s->busy = 1;
    for (int i = 0; i < MAX_OBSERVERS; i++) {
        if (g_obs[i].used && g_obs[i].o.on_begin)
            g_obs[i].o.on_begin(g_obs[i].o.user, &info, data + g_obs[i].offset);
    }
    s->busy = 0;
}

void mlprof__observe_end(const void *handle, const mlprof_domain *domain)
{
    obs_thread *s = thread_state();
    if (!s || s->busy)
        return;
    s->after_mark = 0;
    /* the innermost frame of this span; frames above it lost their ends */
    size_t k = s->depth;
    while (k > 0) {
        const frame *f = frame_at(s, k - 1);
        if (handle ? f->handle == handle : (!f->handle && f->domain == domain))
            break;
        k--;
    }
    if (k == 0)
        return;
    frame *f = frame_at(s, k - 1);
    mlprof_span_info info;
    info_of(f, k - 1, &info);
    unsigned char *data = (unsigned char *)f + FRAME_HEAD;
    s->busy = 1;
    for (int i = 0; i < MAX_OBSERVERS; i++) {
        if (g_obs[i].used && g_obs[i].o.on_end)
            g_obs[i].o.on_end(g_obs[i].o.user, &info, data + g_obs[i].offset);
    }
    s->busy = 0;
    s->depth = k - 1;
}

void mlprof__observe_arg(const char *key, const mlprof_arg_value *value)
{
    obs_thread *s = thread_state();
    if (!s || s->busy || s->after_mark || !s->depth)
        return;
    frame *f = frame_at(s, s->depth - 1);
    mlprof_span_info info;
    info_of(f, s->depth - 1, &info);
    unsigned char *data = (unsigned char *)f + FRAME_HEAD;
    s->busy = 1;
    for (int i = 0; i < MAX_OBSERVERS; i++) {
        if (g_obs[i].used && g_obs[i].o.on_arg)
            g_obs[i].o.on_arg(g_obs[i].o.user, &info, data + g_obs[i].offset, key ? key : "", value);
    }
    s->busy = 0;
}

void mlprof__observe_mark(void)
{
    obs_thread *s = thread_state();
    if (s && !s->busy)
        s->after_mark = 1;
}

void mlprof__observe_thread_free(mlprof__thread *t)
{
    obs_thread *s = t->obs;
    if (!s)
        return;
    mlprof__free(s->frames);
    mlprof__free(s);
    t->obs = NULL;
}
