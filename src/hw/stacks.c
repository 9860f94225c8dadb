/*
 * stacks.c - the sampling key: call stacks of every thread of the process,
 * sampled on CPU time through perf_event (a software cpu-clock event per
 * thread that exists at the run's start, with inherit, so the threads they
 * start are sampled too; user call chains, which the kernel walks by frame
 * pointers). One thread of mlprof's own drains the ring buffers; it is
 * started before the events are opened, so nothing inherits onto it, and it
 * skips the threads named "mlprof ...". The samples stay in memory as raw
 * addresses; at a dump they are symbolized (symbols.c) into a tree of
 * frames (the view, which Perfetto's writer reads through the trace's meta:
 * PerfSample packets) and written as the trace's stackFrames and samples
 * (Chrome's JSON trace format), with what was lost in otherData. A forked
 * child that goes on recording samples itself (its own reader and events,
 * into its own trace); the parent's events, which the kernel copies onto
 * the child, drop its samples as another process's. No timer-signal
 * fallback: where perf_event is refused, that is said and nothing is
 * sampled.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../export/sink.h"
#include "../record/produce.h"
#include "hw_internal.h"
#include "stacks.h"

#define MAX_FDS 4096            /* events: threads at the start (the later ones inherit) x CPUs */
#define MAX_CPUS 512
#define RING_PAGES 64           /* data pages of each ring (a power of 2) */
#define DRAIN_NS 4000000ull     /* the reader's period */
#define MAX_WORDS (16u << 20)   /* memory kept for samples: 128 MiB */
#define TID_SLOTS 4096          /* threads told apart as the program's or mlprof's */

typedef struct ring {
    int fd;
    void *map; /* the header page and RING_PAGES data pages */
} ring;

static struct {
    pthread_mutex_t lock; /* the samples, the counts, start and stop */
    pthread_cond_t ready;
    unsigned hz;
    int started;          /* a reader thread to join */
    int stop;             /* atomic */
    int opened;           /* the reader said how the open went: 1 */
    pthread_t thread;
    pid_t reader_tid, pid;
    ring rings[MAX_CPUS]; /* one per CPU */
    int fds[MAX_FDS];
    size_t nrings, nfds, threads_opened, threads_refused, threads_skipped;
    char refused[256]; /* why nothing could be sampled, or "" */
    int paranoid;      /* /proc/sys/kernel/perf_event_paranoid, or -99 */
    /* samples: ts, tid, n, then n addresses, leaf first */
    uint64_t *words;
    size_t nwords, cap;
    uint64_t samples, lost_kernel, lost_memory, truncated, own_samples, other_process;
    struct {
        int32_t tid;
        int8_t own;
    } tids[TID_SLOTS];
} K = {.lock = PTHREAD_MUTEX_INITIALIZER, .ready = PTHREAD_COND_INITIALIZER, .paranoid = -99};

static int read_paranoid(void)
{
    int v = -99;
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -99;
        fclose(f);
    }
    return v;
}

/* Whether tid is one of mlprof's own threads (by its name), remembered. */
static int own_thread(pid_t tid)
{
    if (tid == K.reader_tid)
        return 1;
    size_t h = (size_t)tid * 2654435761u % TID_SLOTS;
    for (size_t k = 0; k < TID_SLOTS; k++, h = (h + 1) % TID_SLOTS) {
        if (K.tids[h].tid == tid)
            return K.tids[h].own;
        if (K.tids[h].tid == 0) {
            char path[64], comm[32] = "";
            snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
            FILE *f = fopen(path, "re");
            if (f) {
                if (!fgets(comm, sizeof comm, f))
                    comm[0] = '\0';
                fclose(f);
            }
            K.tids[h].tid = tid;
            K.tids[h].own = strncmp(comm, "mlprof", 6) == 0;
            return K.tids[h].own;
        }
    }
    return 0; /* table full: counted as the program's */
}

/* Keeps one sample (lock held). */
static void keep(uint64_t ts, uint32_t tid, const uint64_t *ips, uint64_t nr)
{
    uint64_t user[MLPROF__STACK_DEPTH];
    size_t n = 0;
    for (uint64_t i = 0; i < nr && n < MLPROF__STACK_DEPTH; i++) {
        if (ips[i] >= (uint64_t)PERF_CONTEXT_MAX) /* a context marker: user, kernel */
            continue;
        if (ips[i] < 4096) /* where a frame-pointer walk ran off (code without frame pointers): the chain ends */
            break;
        user[n++] = ips[i];
    }
    if (!n)
        return;
    if (nr >= MLPROF__STACK_DEPTH)
        K.truncated++;
    if (K.nwords + 3 + n > K.cap) {
        size_t cap = K.cap ? 2 * K.cap : 1u << 16;
        uint64_t *w = cap <= MAX_WORDS ? mlprof__realloc(K.words, cap * sizeof *w) : NULL;
        if (!w) {
            K.lost_memory++;
            return;
        }
        K.words = w;
        K.cap = cap;
    }
    uint64_t *w = K.words + K.nwords;
    w[0] = ts;
    w[1] = tid;
    w[2] = n;
    memcpy(w + 3, user, n * sizeof *user);
    K.nwords += 3 + n;
    K.samples++;
}

/* Reads what a ring holds (records may wrap around its end). */
static void drain(ring *r, int keeping)
{
    struct perf_event_mmap_page *hdr = r->map;
    const unsigned char *data = (const unsigned char *)r->map + sysconf(_SC_PAGESIZE);
    const uint64_t size = (uint64_t)RING_PAGES * (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t head = __atomic_load_n(&hdr->data_head, __ATOMIC_ACQUIRE), tail = hdr->data_tail;
    static unsigned char rec[8 * (MLPROF__STACK_DEPTH + 64)];
    pthread_mutex_lock(&K.lock);
    while (tail < head) {
        struct perf_event_header eh;
        for (size_t i = 0; i < sizeof eh; i++)
            ((unsigned char *)&eh)[i] = data[(tail + i) % size];
        if (eh.size < sizeof eh || tail + eh.size > head)
            break;
        size_t n = eh.size <= sizeof rec ? eh.size : sizeof rec;
        for (size_t i = 0; i < n; i++)
            rec[i] = data[(tail + i) % size];
        tail += eh.size;
        const uint64_t *u = (const uint64_t *)(rec + sizeof eh);
        if (eh.type == PERF_RECORD_LOST && n >= sizeof eh + 16) {
            K.lost_kernel += u[1];
        } else if (eh.type == PERF_RECORD_SAMPLE && n >= sizeof eh + 32 && keeping) {
            /* ip; pid, tid; time; nr; ips[nr] */
            uint32_t pid = (uint32_t)u[1], tid = (uint32_t)(u[1] >> 32);
            uint64_t nr = u[3];
            if (nr > (n - sizeof eh - 32) / 8) { /* more than the record holds: cut */
                nr = (n - sizeof eh - 32) / 8;
                K.truncated++;
            }
            if ((pid_t)pid != K.pid)
                K.other_process++;
            else if (own_thread((pid_t)tid))
                K.own_samples++;
            else
                keep(u[2], tid, u + 4, nr);
        }
    }
    pthread_mutex_unlock(&K.lock);
    __atomic_store_n(&hdr->data_tail, tail, __ATOMIC_RELEASE);
}

static int recording(void)
{
    return __atomic_load_n(&mlprof__g.state, __ATOMIC_ACQUIRE) == MLPROF_STATE_RUN &&
           !__atomic_load_n(&mlprof__g.paused, __ATOMIC_ACQUIRE);
}

static int open_one(pid_t tid, int cpu, int *err)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.freq = 1;
    a.sample_freq = K.hz;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.exclude_callchain_kernel = 1;
    a.inherit = 1;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC; /* the trace's clock */
    a.sample_max_stack = MLPROF__STACK_DEPTH;
    a.wakeup_events = 1u << 30; /* never woken: the reader polls */
    int fd = (int)syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && errno == EINVAL) { /* a kernel before sample_max_stack: its own limit */
        a.sample_max_stack = 0;
        fd = (int)syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    }
    if (fd < 0)
        *err = errno;
    return fd;
}

/* Opens an event on every thread but mlprof's own (the reader, at start),
 * on each CPU: the kernel maps no ring of an inherited event that follows
 * its task over all CPUs, so there is one ring per CPU, and every other
 * event on that CPU writes into it (PERF_EVENT_IOC_SET_OUTPUT). */
static void open_all(void)
{
    DIR *dir = opendir("/proc/self/task");
    int err = 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpu < 1)
        ncpu = 1;
    if (ncpu > MAX_CPUS)
        ncpu = MAX_CPUS;
    int ring_of[MAX_CPUS]; /* index in rings, or -1 */
    for (long c = 0; c < ncpu; c++)
        ring_of[c] = -1;
    struct dirent *e;
    while (dir && (e = readdir(dir)) != NULL) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0 || own_thread(tid))
            continue;
        if (K.nfds + (size_t)ncpu > MAX_FDS) {
            K.threads_skipped++;
            continue;
        }
        int any = 0;
        for (long c = 0; c < ncpu; c++) {
            int fd = open_one(tid, (int)c, &err);
            if (fd < 0)
                continue;
            if (ring_of[c] >= 0) {
                if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, K.rings[ring_of[c]].fd) != 0) {
                    err = errno;
                    close(fd);
                    continue;
                }
            } else {
                void *m = mmap(NULL, (1 + RING_PAGES) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (m == MAP_FAILED) {
                    err = errno;
                    close(fd);
                    continue;
                }
                ring_of[c] = (int)K.nrings;
                K.rings[K.nrings++] = (ring){fd, m};
            }
            K.fds[K.nfds++] = fd;
            any = 1;
        }
        K.threads_opened += any;
        K.threads_refused += !any && err != ESRCH; /* a thread that has just ended does not matter */
    }
    if (dir)
        closedir(dir);
    if (!K.nrings) {
        snprintf(K.refused, sizeof K.refused, "%s (kernel.perf_event_paranoid is %d)",
                 dir ? mlprof__perf_why(err ? err : ESRCH) : "cannot list /proc/self/task", K.paranoid);
        mlprof__hw_unavailable("sampling (call stacks)", K.refused);
    } else if (K.threads_refused || K.threads_skipped) {
        char why[300];
        snprintf(why, sizeof why, "%zu threads could not be sampled (%s), %zu skipped (more than %d events)",
                 K.threads_refused, mlprof__perf_why(err), K.threads_skipped, MAX_FDS);
        mlprof__hw_unavailable("sampling of some threads", why);
    }
}

static void close_all(int after_fork)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < K.nfds && !after_fork; i++) /* stop first: the last drain reads everything */
        ioctl(K.fds[i], PERF_EVENT_IOC_DISABLE, 0);  /* (a child's descriptors are the parent's events) */
    for (size_t i = 0; i < K.nrings; i++) {
        if (!after_fork)
            drain(&K.rings[i], recording());
        munmap(K.rings[i].map, (1 + RING_PAGES) * page);
    }
    for (size_t i = 0; i < K.nfds; i++)
        close(K.fds[i]);
    K.nrings = K.nfds = 0;
}

static void *reader_main(void *arg)
{
    (void)arg;
    mlprof__busy = 1; /* mlprof's own thread: the hooks leave it alone */
    pthread_setname_np(pthread_self(), "mlprof stacks");
    K.reader_tid = (pid_t)syscall(SYS_gettid);
    open_all();
    pthread_mutex_lock(&K.lock);
    K.opened = 1;
    pthread_cond_broadcast(&K.ready);
    pthread_mutex_unlock(&K.lock);
    while (K.nrings && !__atomic_load_n(&K.stop, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, (long)DRAIN_NS};
        nanosleep(&ts, NULL);
        int keeping = recording();
        for (size_t i = 0; i < K.nrings; i++)
            drain(&K.rings[i], keeping);
    }
    close_all(0);
    return NULL;
}

/* ----------------------------------------------------------- lifecycle */

static int parse_hz(const char *v, unsigned *hz)
{
    if (!v[0] || strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
        return *hz = 0, 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < 1 || n > 20000)
        return -1;
    *hz = (unsigned)n;
    return 0;
}

static int parse_key(const char *key, const char *value, unsigned *mask, char *why, size_t len)
{
    *mask = 0;
    if (strcmp(key, "sampling") != 0)
        return 1;
    unsigned hz;
    if (parse_hz(value, &hz) != 0) {
        snprintf(why, len, "expected samples per second from 1 to 20000, or 0/off, got \"%s\"", value);
        return -1;
    }
    return 0;
}

static void view_free(void);

static void reset_samples(void)
{
    view_free();
    pthread_mutex_lock(&K.lock);
    K.nwords = 0;
    K.samples = K.lost_kernel = K.lost_memory = K.truncated = K.own_samples = K.other_process = 0;
    pthread_mutex_unlock(&K.lock);
}

static int stacks_start(void)
{
    unsigned hz = 0;
    parse_hz(mlprof__g.cfg.sampling, &hz);
    K.hz = hz;
    K.refused[0] = '\0';
    K.threads_opened = K.threads_refused = K.threads_skipped = 0;
    if (!hz || K.started)
        return MLPROF_OK;
    K.paranoid = read_paranoid();
    K.pid = getpid();
    memset(K.tids, 0, sizeof K.tids);
    __atomic_store_n(&K.stop, 0, __ATOMIC_RELEASE);
    K.opened = 0;
    if (pthread_create(&K.thread, NULL, reader_main, NULL) != 0) {
        snprintf(K.refused, sizeof K.refused, "cannot start its thread");
        mlprof__hw_unavailable("sampling (call stacks)", K.refused);
        return MLPROF_OK;
    }
    K.started = 1;
    pthread_mutex_lock(&K.lock); /* the events are open (or refused) before the program goes on */
    while (!K.opened)
        pthread_cond_wait(&K.ready, &K.lock);
    pthread_mutex_unlock(&K.lock);
    return MLPROF_OK;
}

static void stacks_stop(void) { __atomic_store_n(&K.stop, 1, __ATOMIC_RELEASE); }

/* Called after every state change: waits only for a reader asked to stop. */
static void stacks_join(void)
{
    if (!K.started || !__atomic_load_n(&K.stop, __ATOMIC_ACQUIRE))
        return;
    pthread_join(K.thread, NULL);
    K.started = 0;
}

static void stacks_quiesce(void)
{
    stacks_stop();
    stacks_join();
}

static void stacks_after_fork(int running)
{
    /* the reader is the parent's, and so are the events: the kernel copied
     * them onto this process too (inherit), still writing into the
     * parent's rings, which drop its samples as another process's. Let go
     * of the parent's descriptors and samples; a child that goes on
     * recording samples itself: its own reader and events, its own trace */
    int was = K.started;
    pthread_mutex_init(&K.lock, NULL);
    pthread_cond_init(&K.ready, NULL);
    close_all(1);
    K.started = 0;
    K.hz = 0;
    mlprof__free(K.words);
    K.words = NULL;
    K.nwords = K.cap = 0;
    K.samples = K.lost_kernel = K.lost_memory = K.truncated = K.own_samples = K.other_process = 0;
    view_free();
    if (running && was)
        stacks_start();
}

static void stacks_other_data(mlprof__sb *out)
{
    if (!K.hz)
        return;
    pthread_mutex_lock(&K.lock);
    mlprof__sb_printf(out,
                      ",\"sampling\":{\"hz\":%u,\"clock\":\"cpu-clock\",\"method\":\"perf_event\",\"max_depth\":%d,"
                      "\"perf_event_paranoid\":%d,\"threads_opened\":%zu,\"samples\":%llu,\"lost_kernel\":%llu,"
                      "\"lost_memory\":%llu,\"truncated_stacks\":%llu,\"mlprof_thread_samples\":%llu,"
                      "\"other_process_samples\":%llu",
                      K.hz, MLPROF__STACK_DEPTH, K.paranoid, K.threads_opened,
                      (unsigned long long)K.samples, (unsigned long long)K.lost_kernel,
                      (unsigned long long)K.lost_memory, (unsigned long long)K.truncated,
                      (unsigned long long)K.own_samples, (unsigned long long)K.other_process);
    if (K.refused[0]) {
        mlprof__sb_puts(out, ",\"refused\":");
        mlprof__sb_json_str(out, K.refused, strlen(K.refused));
    }
    mlprof__sb_putc(out, '}');
    pthread_mutex_unlock(&K.lock);
}

/* ------------------------------------------------------ the trace's part */

typedef struct frame {
    uint64_t ip;     /* as sampled (a return address, but at the leaf) */
    uint32_t parent; /* 0: a root */
    uint32_t next;   /* in the hash chain */
} frame;

typedef struct frames {
    frame *f; /* f[0] unused: ids start at 1 */
    size_t n, cap;
    uint32_t *head;
    size_t nhead;
} frames;

static uint32_t frame_id(frames *t, uint32_t parent, uint64_t ip)
{
    size_t h = (size_t)((ip * 0x9e3779b97f4a7c15ull) ^ (parent * 0x85ebca6bu)) % t->nhead;
    for (uint32_t k = t->head[h]; k; k = t->f[k].next) {
        if (t->f[k].ip == ip && t->f[k].parent == parent)
            return k;
    }
    frame *g = mlprof__grow(t->f, &t->cap, t->n, sizeof *g, 1024);
    if (!g)
        return 0;
    t->f = g;
    uint32_t id = (uint32_t)t->n++;
    g[id] = (frame){ip, parent, t->head[h]};
    t->head[h] = id;
    return id;
}

/* The samples as the sinks get them (sink.h's mlprof__stacks_out): built at
 * each dump, kept until the next one, a reset or a fork. */
static struct {
    mlprof__stacks_out out;
    mlprof__stack_frame_out *frames;
    mlprof__stack_sample_out *samples;
    mlprof__sb text; /* the frames' names and objects */
    int valid;
} V;

static void view_free(void)
{
    mlprof__free(V.frames);
    mlprof__free(V.samples);
    mlprof__sb_free(&V.text);
    memset(&V, 0, sizeof V);
}

const mlprof__stacks_out *mlprof__stacks_view(void) { return V.valid ? &V.out : NULL; }

/* Builds V from the samples kept (K.lock held): the frame tree, each frame
 * named and placed in its mapping. 0, or -1 out of memory. */
static int view_build(void)
{
    view_free();
    frames t = {0};
    t.nhead = 65536;
    t.head = mlprof__calloc(t.nhead, sizeof *t.head);
    V.samples = mlprof__malloc((K.samples ? K.samples : 1) * sizeof *V.samples);
    t.cap = 1024;
    t.f = mlprof__malloc(t.cap * sizeof *t.f);
    int rc = t.head && V.samples && t.f ? 0 : -1;
    t.n = 1;
    size_t ns = 0;
    for (size_t w = 0; w < K.nwords && rc == 0; ns++) {
        uint64_t n = K.words[w + 2];
        uint32_t id = 0;
        /* root first; a caller's address is a return address, past its
         * call: the call itself is looked up (the leaf's is exact) */
        for (uint64_t i = n; i-- > 0 && rc == 0;)
            rc = (id = frame_id(&t, id, K.words[w + 3 + i] - (i > 0))) ? 0 : -1;
        V.samples[ns] = (mlprof__stack_sample_out){K.words[w], (pid_t)K.words[w + 1], id};
        w += 3 + n;
    }
    V.frames = rc == 0 ? mlprof__calloc(t.n, sizeof *V.frames) : NULL;
    if (!V.frames)
        rc = -1;
    mlprof__syms *syms = rc == 0 ? mlprof__syms_load() : NULL;
    /* the text's offsets first (it moves as it grows), pointers after */
    size_t *name_at = rc == 0 ? mlprof__malloc(2 * t.n * sizeof *name_at) : NULL;
    if (!name_at)
        rc = -1;
    const char *last_path = NULL;
    size_t last_path_at = 0;
    for (size_t k = 1; rc == 0 && k < t.n; k++) {
        char name[512];
        const char *object, *path = "";
        mlprof__stack_frame_out *f = &V.frames[k];
        mlprof__syms_name(syms, t.f[k].ip, name, sizeof name, &object);
        if (!mlprof__syms_mapping(syms, t.f[k].ip, &path, &f->map_start, &f->map_end, &f->map_offset))
            path = "";
        f->rel_pc = t.f[k].ip - f->map_start + f->map_offset; /* the offset in its file */
        f->parent = t.f[k].parent;
        name_at[2 * k] = V.text.len;
        mlprof__sb_put(&V.text, name, strlen(name) + 1);
        if (path != last_path) { /* consecutive frames mostly share their object */
            last_path = path;
            last_path_at = V.text.len;
            mlprof__sb_put(&V.text, path, strlen(path) + 1);
        }
        name_at[2 * k + 1] = last_path_at;
    }
    if (rc == 0 && V.text.failed)
        rc = -1;
    for (size_t k = 1; rc == 0 && k < t.n; k++) {
        V.frames[k].name = V.text.data + name_at[2 * k];
        V.frames[k].object = V.text.data + name_at[2 * k + 1];
    }
    mlprof__syms_free(syms);
    mlprof__free(name_at);
    mlprof__free(t.f);
    mlprof__free(t.head);
    if (rc != 0) {
        view_free();
        return -1;
    }
    V.out = (mlprof__stacks_out){K.pid, V.frames, t.n, V.samples, ns};
    V.valid = 1;
    return 0;
}

static void stacks_trace_members(mlprof__sb *out)
{
    if (!K.hz)
        return;
    pthread_mutex_lock(&K.lock);
    int rc = view_build();
    pthread_mutex_unlock(&K.lock);
    if (rc != 0) {
        mlprof__log(MLPROF_LOG_WARN, "sampling: out of memory: the samples are not in the trace");
        return;
    }
    const mlprof__stacks_out *v = &V.out;
    mlprof__sb_puts(out, "\"stackFrames\":{");
    for (size_t k = 1; k < v->nframes; k++) {
        const mlprof__stack_frame_out *f = &v->frames[k];
        const char *slash = strrchr(f->object, '/'), *object = slash ? slash + 1 : f->object[0] ? f->object : "?";
        mlprof__sb_printf(out, "%s\"%zu\":{\"category\":", k > 1 ? ",\n" : "\n", k);
        mlprof__sb_json_str(out, object, strlen(object));
        mlprof__sb_puts(out, ",\"name\":");
        mlprof__sb_json_str(out, f->name, strlen(f->name));
        if (f->parent)
            mlprof__sb_printf(out, ",\"parent\":\"%u\"", f->parent);
        mlprof__sb_putc(out, '}');
    }
    mlprof__sb_puts(out, "},\n\"samples\":[");
    for (size_t i = 0; i < v->nsamples; i++) {
        const mlprof__stack_sample_out *sm = &v->samples[i];
        mlprof__sb_printf(out, "%s{\"cpu\":0,\"pid\":%d,\"tid\":%d,\"ts\":", i ? ",\n" : "\n", (int)v->pid,
                          (int)sm->tid);
        mlprof__sb_us(out, sm->ts_ns);
        mlprof__sb_printf(out, ",\"name\":\"cpu-clock\",\"sf\":\"%u\",\"weight\":1}", sm->frame);
    }
    mlprof__sb_puts(out, "],\n");
}

const mlprof__module mlprof__stacks_module = {
    .name = "stacks",
    .parse_key = parse_key,
    .start = stacks_start,
    .stop = stacks_stop,
    .join = stacks_join,
    .quiesce = stacks_quiesce,
    .after_fork = stacks_after_fork,
    .other_data = stacks_other_data,
    .trace_members = stacks_trace_members,
    .reset = reset_samples,
};
