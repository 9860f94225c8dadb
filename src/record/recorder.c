/*
 * recorder.c - the hot path. Each thread appends 16-byte records to its own
 * chunk: one TLS load, a clock read, a bounds check, two stores and a release
 * store of the new position that the collector reads. No lock, no allocation
 * and no system call, except on a thread's first event (registration) and when
 * a chunk is full (a lock-free pop from the pool, or a counted drop).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/membarrier.h>)
#include <linux/membarrier.h>
#else
#undef SYS_membarrier /* no header: the full fence on the hot path */
#endif
#endif

#include "capture.h"
#include "produce.h"

int mlprof_active_flag;

/* initial-exec: one %fs-relative load instead of a __tls_get_addr call */
static __thread mlprof__thread *t_self __attribute__((tls_model("initial-exec")));

/* Where the calling thread stands while t_self is NULL. */
enum { T_NEW = 0, T_REGISTERING = 1, T_GONE = 2 };
static __thread int t_state __attribute__((tls_model("initial-exec")));

static pthread_key_t g_exit_key;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

/* Events of threads that cannot record: from a signal handler that
 * interrupted their registration, or when it failed (out of memory). */
static void count_drop_unregistered(void)
{
    __atomic_add_fetch(&mlprof__g.dropped_exited, 1, __ATOMIC_RELAXED);
}

static void on_thread_exit(void *arg)
{
    mlprof__thread *t = arg;
    /* runs on the exiting thread. What it records later (another key's
     * destructor, glibc freeing the thread's dlerror buffer through the malloc
     * hook after every destructor ran) goes to a late record, which this
     * handler will not see again: the collector frees it once the kernel no
     * longer knows the thread (reapable). Gone first: any registration from
     * here on, a signal handler's included, makes a late record. (That
     * allocates: as for a thread's first event, a sampler's handler must not
     * be the one to record on a thread past this point.) */
    t_state = T_GONE;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_self = NULL;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    /* the rest of its chunk goes to the next thread that needs room, so that
     * threads that record a little and exit do not hold a chunk each until the
     * next drain; before `exited`, after which the collector may free t */
    if (t->cur)
        mlprof__pool_retire(t->cur, t->pos);
    __atomic_store_n(&t->exited, 1, __ATOMIC_RELEASE);
}

static void make_exit_key(void) { pthread_key_create(&g_exit_key, on_thread_exit); }

static mlprof__thread *register_thread(int late)
{
    /* a signal handler that interrupts this sees T_REGISTERING and records
     * nothing rather than allocate inside an allocation */
    t_state = T_REGISTERING;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    mlprof__busy++; /* what the hooks see of the libc calls below is mlprof's own */
    mlprof__ensure_init();
    mlprof__thread *t = mlprof__calloc(1, sizeof *t);
    if (!t) {
        mlprof__busy--;
        t_state = late ? T_GONE : T_NEW;
        return NULL;
    }
    t->late = late;
    t->tid = (pid_t)syscall(SYS_gettid);
    t->seq = __atomic_add_fetch(&mlprof__g.thread_seq, 1, __ATOMIC_RELAXED);
    t->scope = &mlprof__g.scope_root;
    if (!late) { /* after the destructors, glibc may have freed what a key's value needs */
        pthread_once(&g_exit_once, make_exit_key);
        pthread_setspecific(g_exit_key, t);
    }
    mlprof__thread *head = __atomic_load_n(&mlprof__g.threads, __ATOMIC_ACQUIRE);
    do {
        t->next = head;
    } while (!__atomic_compare_exchange_n(&mlprof__g.threads, &head, t, 1, __ATOMIC_RELEASE,
                                          __ATOMIC_ACQUIRE));
    t_self = t;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_state = late ? T_GONE : T_NEW;
    mlprof__busy--;
    return t;
}

mlprof__thread *mlprof__thread_self(void)
{
    mlprof__thread *t = t_self;
    if (MLPROF_LIKELY(t != NULL))
        return t;
    t = t_state != T_REGISTERING ? register_thread(t_state == T_GONE) : NULL;
    if (!t) /* the callers are about to record: what they would have is counted */
        count_drop_unregistered();
    return t;
}

/* After fork only the forking thread exists; its record starts empty. */
void mlprof__thread_after_fork(void)
{
    mlprof__thread *t = t_self;
    mlprof__g.threads = NULL;
    __atomic_store_n(&mlprof__g.dropped_exited, 0, __ATOMIC_RELAXED);
    if (!t)
        return;
    mlprof__scope_node *scope = t->scope;
    char name[64];
    memcpy(name, t->name, sizeof name);
    mlprof__observe_thread_free(t);
    memset(t, 0, sizeof *t);
    t->tid = (pid_t)syscall(SYS_gettid);
    t->scope = scope;
    memcpy(t->name, name, sizeof name);
    t->seq = mlprof__g.thread_seq = 1;
    mlprof__g.threads = t;
}

static void count_drop(mlprof__thread *t)
{
    /* an add that a signal handler's own drop cannot undo (the slow path only) */
    __atomic_add_fetch(&t->dropped, 1, __ATOMIC_RELAXED);
}

/*
 * Signals. A handler on this thread may record between any two instructions
 * of a record's reserve and publish (the sampling profiler will). Reserving
 * reads pos and publishing stores pos + size: a handler that recorded in
 * between would take the same bytes, publish them, and the interrupted record
 * would then overwrite them and publish bytes nobody wrote. Nor is a thread
 * cursor of reserved bytes enough on its own: a handler can still come between
 * its load and its store, and on this path neither may be an atomic
 * read-modify-write (a locked instruction costs as much as the whole record).
 *
 * So a record is written inside a window marked by t->busy, a plain word only
 * this thread writes: set before pos is read, cleared after pos is published.
 * A handler that finds it set has interrupted a record (or the slow path
 * between two chunks) and drops its own event, counted; one that finds it
 * clear runs to its end before the interrupted code goes on (handlers nest),
 * leaves busy clear again, and the interrupted code reads pos only after
 * setting busy, so it sees what the handler published. A handler between the
 * test and the store of busy is of the second kind. The compiler keeps the
 * order through signal fences; the CPU needs nothing, a thread being ordered
 * with itself. The windows are a few stores long (the clock is read before),
 * so few handler events are dropped; every one is counted.
 *
 * Registration (an allocation) is not for a signal handler: a handler that
 * interrupts it records nothing (counted), and a thread's first event must not
 * come from a handler that may have interrupted malloc. Observers and per-span
 * counters are not called from handlers safely either (docs/ARCHITECTURE.md).
 */
static inline void window_open(mlprof__thread *t)
{
    __atomic_store_n(&t->busy, 1, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void window_close(mlprof__thread *t)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&t->busy, 0, __ATOMIC_RELAXED);
}

/* Slow path inside the window: seal the full chunk and take a new one. On
 * failure the drop is counted and the window closed. */
static __attribute__((noinline)) mlprof__rec *reserve_switch(mlprof__thread *t, size_t bytes)
{
    mlprof__chunk *c = mlprof__pool_get(bytes); /* NULL too when no chunk holds that much */
    if (!c) {
        count_drop(t);
        window_close(t);
        return NULL;
    }
    char *data = c->data;
    if (t->cur) {
        /* seal: the end is final before the link is published */
        t->cur->final_end = t->pos;
        __atomic_store_n(&t->cur->next, c, __ATOMIC_RELEASE);
    } else {
        t->consumed = data;
        __atomic_store_n(&t->head, c, __ATOMIC_RELEASE);
        /* a thread's first chunk: in a forked child, its parent learns
         * that it recorded (children.c); one store into a mapped page */
        int *recorded = __atomic_load_n(&mlprof__child_recorded, __ATOMIC_RELAXED);
        if (MLPROF_UNLIKELY(recorded != NULL))
            __atomic_store_n(recorded, 1, __ATOMIC_RELEASE);
    }
    t->cur = c;
    t->end = c->end;
    __atomic_store_n(&t->pos, data, __ATOMIC_RELEASE);
    return (mlprof__rec *)data;
}

/* Slow path outside the window: register the thread; or this is a signal
 * handler that interrupted a record of its thread, and drops. */
static __attribute__((noinline)) mlprof__rec *reserve_slow(size_t bytes)
{
    mlprof__thread *t = t_self;
    if (t) { /* busy: the chunk is the interrupted record's */
        count_drop(t);
        return NULL;
    }
    t = mlprof__thread_self();
    if (!t)
        return NULL; /* counted */
    window_open(t);
    if (t->pos && (uintptr_t)t->end - (uintptr_t)t->pos >= bytes)
        return (mlprof__rec *)t->pos;
    return reserve_switch(t, bytes);
}

/* Room for a record of `bytes`, or NULL (counted). Opens the window that
 * publish closes; nothing to close after NULL. */
static inline mlprof__rec *reserve(mlprof__thread **tp, size_t bytes)
{
    mlprof__thread *t = t_self;
    if (MLPROF_LIKELY(t != NULL) && MLPROF_LIKELY(!__atomic_load_n(&t->busy, __ATOMIC_RELAXED))) {
        window_open(t);
        *tp = t;
        char *p = t->pos;
        if (MLPROF_LIKELY((uintptr_t)t->end - (uintptr_t)p >= bytes))
            return (mlprof__rec *)p;
        return reserve_switch(t, bytes);
    }
    mlprof__rec *r = reserve_slow(bytes);
    *tp = t_self;
    return r;
}

/* The timestamp is read before the window opens: a clock read is most of a
 * record's cost (rdtsc is slow in a virtual machine), and a handler that comes
 * during the window drops its event. The compiler may not move the read into
 * it: ts is an operand of this barrier. */
#define READ_BEFORE_WINDOW(ts) __asm__ volatile("" : "+r"(ts) : : "memory")

static inline void publish(mlprof__thread *t, size_t bytes)
{
    __atomic_store_n(&t->pos, t->pos + bytes, __ATOMIC_RELEASE);
    window_close(t);
}

/* Recording (bit 0 of the flag; bit 1 is a capture's span trigger, which
 * only span begins and ends look at: capture.h). */
static inline int active(void)
{
    return MLPROF_LIKELY(__atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED) & MLPROF__ACTIVE_RECORDING);
}

/*
 * The stop fence. A recording call that saw the active flag set may still be
 * running when another thread stops recording: an observer called after its
 * unregistration returned (its user data freed), a record published after the
 * final dump (in the next trace). So each call marks the thread inside (a
 * count, for calls that nest through observers and signal handlers) before it
 * reads the flag again, and clears the mark when done; stopping clears the
 * flag, then waits until no other thread is marked (mlprof__recorder_quiesce).
 * The mark is a store the owner alone makes, no lock and no read-modify-write.
 *
 * The store of the mark and the load of the flag must not be reordered (a
 * store-load pair, which x86 reorders too), or a thread may see the flag still
 * set while the stopper misses its mark. Where the kernel has membarrier
 * (PRIVATE_EXPEDITED), the stopper makes every running thread of the process
 * execute a full barrier after clearing the flag: a thread's mark made before
 * that barrier is seen by the stopper, and a load of the flag after it sees
 * the flag clear, so the hot path needs only a compiler barrier. Elsewhere the
 * mark is a sequentially consistent store (an xchg on x86), paired with
 * sequentially consistent operations on the flags by the stopper.
 */
static int g_fence_asym; /* membarrier is registered: the hot path's mark is a plain store */

static inline mlprof__thread *enter_on(const int *flag, unsigned *depth)
{
    mlprof__thread *t = t_self;
    if (MLPROF_UNLIKELY(!t) && !(t = mlprof__thread_self()))
        return NULL;
    unsigned n = t->inside;
    *depth = n;
    if (MLPROF_LIKELY(__atomic_load_n(&g_fence_asym, __ATOMIC_RELAXED))) {
        __atomic_store_n(&t->inside, n + 1, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    } else {
        __atomic_store_n(&t->inside, n + 1, __ATOMIC_SEQ_CST);
    }
    if (MLPROF_LIKELY(__atomic_load_n(flag, __ATOMIC_SEQ_CST) & MLPROF__ACTIVE_RECORDING))
        return t;
    __atomic_store_n(&t->inside, n, __ATOMIC_RELEASE);
    return NULL;
}

/* Marks the calling thread inside a recording call while recording is on;
 * NULL when it is not (nothing to leave then). */
static inline mlprof__thread *enter(unsigned *depth) { return enter_on(&mlprof_active_flag, depth); }

/* Restores the mark as enter found it (a fork in between may have cleared it). */
static inline void leave(mlprof__thread *t, unsigned depth)
{
    __atomic_store_n(&t->inside, depth, __ATOMIC_RELEASE);
}

void mlprof__recorder_fence_init(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    if (__atomic_load_n(&g_fence_asym, __ATOMIC_RELAXED))
        return;
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
        __atomic_store_n(&g_fence_asym, 1, __ATOMIC_RELEASE);
#endif
}

static int full_barrier_everywhere(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return 1;
    /* registered before a fork? register again and retry */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return 1;
#endif
    return 0;
}

void mlprof__recorder_quiesce(void)
{
    /* the flags are clear; now order them before the marks are read */
    if (__atomic_load_n(&g_fence_asym, __ATOMIC_ACQUIRE)) {
        if (!full_barrier_everywhere()) {
            /* cannot happen once registered; the next runs take the full fence */
            __atomic_store_n(&g_fence_asym, 0, __ATOMIC_RELEASE);
            mlprof__log(MLPROF_LOG_WARN, "membarrier failed at stop: a recording call in flight may "
                                         "end after it");
        }
    } else {
        __atomic_fetch_add(&mlprof_active_flag, 0, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&mlprof__mem_on, 0, __ATOMIC_SEQ_CST);
    }
    /* the caller's own call (an observer that stops recording) finishes after */
    mlprof__thread *self = t_self;
    for (mlprof__thread *t = __atomic_load_n(&mlprof__g.threads, __ATOMIC_ACQUIRE); t;
         t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE)) {
        if (t == self)
            continue;
        /* an exited thread marked inside was cancelled inside a callback */
        for (unsigned spins = 0; __atomic_load_n(&t->inside, __ATOMIC_ACQUIRE) != 0 &&
                                 !__atomic_load_n(&t->exited, __ATOMIC_ACQUIRE);
             spins++) {
            if (spins < 100) {
                sched_yield();
            } else {
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
            }
        }
    }
}

static inline int handle_on(const mlprof__handle *h)
{
    return h && (__atomic_load_n(&h->on, __ATOMIC_RELAXED) & 1);
}

/* A span a capture waits for (capture.h): only while a trigger is armed, so
 * that recording without one pays a test of a register and no load. */
static inline int trigger(int flag, const mlprof_span *span)
{
    return MLPROF_UNLIKELY(flag & MLPROF__ACTIVE_TRIGGER) && span &&
           (__atomic_load_n(&span->h.on, __ATOMIC_RELAXED) & MLPROF__HANDLE_TRIGGER);
}

static inline void put2(uint64_t ts, uint64_t b)
{
    READ_BEFORE_WINDOW(ts);
    mlprof__thread *t;
    mlprof__rec *r = reserve(&t, sizeof *r);
    if (MLPROF_UNLIKELY(!r))
        return;
    r->a = ts;
    r->b = b;
    publish(t, sizeof *r);
}

static inline int observed(void)
{
    return MLPROF_UNLIKELY(__atomic_load_n(&mlprof__obs_count, __ATOMIC_ACQUIRE) != 0);
}

/*
 * The usual span begin or end as one leaf function, so that nothing is
 * saved on the stack and no call is made: recording, no capture trigger
 * armed, the thread registered, the asymmetric fence, the TSC clock, no
 * observer, and room in the chunk. It does what enter, put2 and leave do
 * in that case. 1: done (the event recorded, or recording stopped under
 * it); 0: nothing done, the caller goes the whole way (once a chunk, at
 * most, after reading the clock).
 */
static inline __attribute__((always_inline)) int put_span_fast(const mlprof_span *span, unsigned kind)
{
#if defined(__x86_64__) || defined(__i386__)
    int flag = __atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED);
    mlprof__thread *t = t_self;
    if (MLPROF_UNLIKELY((flag & (MLPROF__ACTIVE_RECORDING | MLPROF__ACTIVE_TRIGGER)) != MLPROF__ACTIVE_RECORDING ||
                        !t || !handle_on((const mlprof__handle *)span) ||
                        !__atomic_load_n(&g_fence_asym, __ATOMIC_RELAXED) ||
                        mlprof__clock_mode != MLPROF__CLOCK_TSC ||
                        __atomic_load_n(&mlprof__obs_count, __ATOMIC_ACQUIRE) != 0))
        return 0;
    unsigned n = t->inside;
    __atomic_store_n(&t->inside, n + 1, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (MLPROF_UNLIKELY(!(__atomic_load_n(&mlprof_active_flag, __ATOMIC_SEQ_CST) & MLPROF__ACTIVE_RECORDING))) {
        leave(t, n);
        return 1; /* stopped meanwhile */
    }
    uint64_t ts = __builtin_ia32_rdtsc();
    READ_BEFORE_WINDOW(ts);
    if (MLPROF_UNLIKELY(__atomic_load_n(&t->busy, __ATOMIC_RELAXED))) { /* a handler inside a record: dropped */
        leave(t, n);
        return 0;
    }
    window_open(t); /* before the position is read: a handler that comes now drops its event */
    char *p = t->pos;
    if (MLPROF_UNLIKELY((uintptr_t)t->end - (uintptr_t)p < sizeof(mlprof__rec))) {
        window_close(t);
        leave(t, n);
        return 0;
    }
    mlprof__rec *r = (mlprof__rec *)p;
    r->a = ts;
    r->b = MLPROF__REC_B(kind, 0, span);
    publish(t, sizeof *r);
    leave(t, n);
    return 1;
#else
    (void)span;
    (void)kind;
    return 0;
#endif
}

static __attribute__((noinline)) void begin_slow(mlprof_span *span);
static __attribute__((noinline)) void end_slow(mlprof_span *span);

void mlprof_begin(mlprof_span *span)
{
    if (MLPROF_LIKELY(put_span_fast(span, MLPROF__REC_BEGIN)))
        return;
    begin_slow(span);
}

void mlprof_end(mlprof_span *span)
{
    if (MLPROF_LIKELY(put_span_fast(span, MLPROF__REC_END)))
        return;
    end_slow(span);
}

static void begin_slow(mlprof_span *span)
{
    mlprof__thread *in;
    unsigned depth;
    int flag = __atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED);
    if (trigger(flag, span)) {
        mlprof__capture_span_begin(span); /* may start recording: its own begin is then the first event */
        flag = __atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED);
    }
    if (!MLPROF_LIKELY(flag & MLPROF__ACTIVE_RECORDING) || !handle_on((const mlprof__handle *)span) ||
        !(in = enter(&depth)))
        return;
    put2(mlprof__clock_raw(), MLPROF__REC_B(MLPROF__REC_BEGIN, 0, span));
    if (observed()) /* after the begin: what observers add lands on the span */
        mlprof__observe_begin(span, span->h.domain, span->h.name, span->h.kind == MLPROF__SPAN_FRAME);
    leave(in, depth);
}

static void end_slow(mlprof_span *span)
{
    mlprof__thread *in;
    unsigned depth;
    int flag = __atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED);
    if (MLPROF_LIKELY(flag & MLPROF__ACTIVE_RECORDING) && handle_on((const mlprof__handle *)span) &&
        (in = enter(&depth))) {
        if (observed()) /* before the end, for the same reason */
            mlprof__observe_end(span, span->h.domain);
        put2(mlprof__clock_raw(), MLPROF__REC_B(MLPROF__REC_END, 0, span));
        leave(in, depth);
    }
    if (trigger(flag, span)) /* outside the recording call: it may stop recording */
        mlprof__capture_span_end(span);
}

/* A record followed by n bytes of text (kept to 10 bits of length). */
static void put_text(uint64_t a, unsigned kind, unsigned aux, const void *ptr, const char *text,
                     size_t len)
{
    size_t bytes = sizeof(mlprof__rec) * (1 + MLPROF__TEXT_SLOTS(len));
    READ_BEFORE_WINDOW(a);
    mlprof__thread *t;
    mlprof__rec *r = reserve(&t, bytes);
    if (!r)
        return;
    r->a = a;
    r->b = MLPROF__REC_B(kind, aux, ptr);
    if (len) /* text may be NULL then (a NULL name is an empty one) */
        memcpy(r + 1, text, len);
    publish(t, bytes);
}

/* The domain of a run-time-named event, or NULL when it does not record. */
static mlprof_domain *recording_domain(mlprof_domain *d)
{
    /* the default domain, made (under reg_lock) by the first such call only:
     * recording takes no lock; domains are never freed, a fork keeps it */
    static mlprof_domain *default_domain;
    if (!d && !(d = __atomic_load_n(&default_domain, __ATOMIC_ACQUIRE))) {
        d = mlprof_domain_create(NULL);
        __atomic_store_n(&default_domain, d, __ATOMIC_RELEASE);
    }
    return d && __atomic_load_n(&d->on, __ATOMIC_RELAXED) ? d : NULL;
}

void mlprof_begin_dynamic(mlprof_domain *domain, const char *name)
{
    mlprof__thread *in;
    unsigned depth;
    if (!active() || !(in = enter(&depth)))
        return;
    domain = recording_domain(domain);
    if (domain) {
        size_t len = name ? strnlen(name, MLPROF__NAME_MAX) : 0;
        put_text(mlprof__clock_raw(), MLPROF__REC_BEGIN_DYN, (unsigned)len, domain, name, len);
        if (observed())
            mlprof__observe_begin(NULL, domain, name, 0);
    }
    leave(in, depth);
}

void mlprof_end_dynamic(mlprof_domain *domain)
{
    mlprof__thread *in;
    unsigned depth;
    if (!active() || !(in = enter(&depth)))
        return;
    domain = recording_domain(domain);
    if (domain) {
        if (observed())
            mlprof__observe_end(NULL, domain);
        put2(mlprof__clock_raw(), MLPROF__REC_B(MLPROF__REC_END_DYN, 0, domain));
    }
    leave(in, depth);
}

static void put_counter(mlprof_counter *c, unsigned kind, uint64_t ts, uint64_t bits)
{
    READ_BEFORE_WINDOW(ts);
    mlprof__thread *t;
    mlprof__rec *r = reserve(&t, 2 * sizeof *r);
    if (!r)
        return;
    r[0].a = ts;
    r[0].b = MLPROF__REC_B(kind, 0, c);
    r[1].a = bits;
    r[1].b = MLPROF__REC_B(MLPROF__REC_VALUE, 0, 0);
    publish(t, 2 * sizeof *r);
}

void mlprof_counter_set(mlprof_counter *c, int64_t value)
{
    if (!c)
        return;
    __atomic_store_n(&c->value, value, __ATOMIC_RELAXED);
    mlprof__thread *in;
    unsigned depth;
    if (active() && handle_on((const mlprof__handle *)c) && (in = enter(&depth))) {
        put_counter(c, MLPROF__REC_COUNTER_I, mlprof__clock_raw(), (uint64_t)value);
        leave(in, depth);
    }
}

/* The clock, read after every load before it and before any instruction after
 * it begins: the time-stamp counter is read out of order otherwise. */
static inline uint64_t clock_in_order(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_lfence();
    uint64_t ts = mlprof__clock_raw();
    __builtin_ia32_lfence();
    return ts;
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint64_t ts = mlprof__clock_raw();
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return ts;
#endif
}

/*
 * A sample's time and value must be in the same order for every thread: with
 * the add first and the clock read after, a thread could add, be preempted,
 * and read a later time than another thread that added after it (a series
 * only ever incremented then went down). Reading the clock first is no better
 * (read, preempted, add after the other thread's). So the clock is read between
 * the load of the old value and the compare-and-swap that stores the new one,
 * and retried with it: of two adds, the one whose swap succeeded second loaded
 * the value the first stored, hence after the first swap, and read the clock
 * after that load, while the first read it before its swap. Times then rise
 * with values across threads (given a clock that all CPUs share, as the
 * invariant TSC and CLOCK_MONOTONIC are). With deltas of both signs a value
 * may come back (A-B-A), and the order holds only among the adds that did not
 * race so; it holds always for a counter that only grows.
 */
void mlprof_counter_add(mlprof_counter *c, int64_t delta)
{
    if (!c)
        return;
    mlprof__thread *in;
    unsigned depth;
    if (!active() || !handle_on((const mlprof__handle *)c) || !(in = enter(&depth))) {
        __atomic_add_fetch(&c->value, delta, __ATOMIC_RELAXED);
        return;
    }
    int64_t old = __atomic_load_n(&c->value, __ATOMIC_ACQUIRE), value;
    uint64_t ts;
    do {
        ts = clock_in_order();
        value = (int64_t)((uint64_t)old + (uint64_t)delta);
    } while (!__atomic_compare_exchange_n(&c->value, &old, value, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    put_counter(c, MLPROF__REC_COUNTER_I, ts, (uint64_t)value);
    leave(in, depth);
}

void mlprof_counter_set_double(mlprof_counter *c, double value)
{
    mlprof__thread *in;
    unsigned depth;
    if (!c || !active() || !handle_on((const mlprof__handle *)c) || !(in = enter(&depth)))
        return;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    put_counter(c, MLPROF__REC_COUNTER_F, mlprof__clock_raw(), bits);
    leave(in, depth);
}

int64_t mlprof_counter_value(const mlprof_counter *c)
{
    return c ? __atomic_load_n(&c->value, __ATOMIC_RELAXED) : 0;
}

static unsigned clamp_scope(int scope)
{
    return scope >= MLPROF_SCOPE_GLOBAL && scope <= MLPROF_SCOPE_THREAD ? (unsigned)scope
                                                                        : MLPROF_SCOPE_PROCESS;
}

void mlprof_mark(mlprof_marker *m, int scope)
{
    mlprof__thread *in;
    unsigned depth;
    if (!active() || !handle_on((const mlprof__handle *)m) || !(in = enter(&depth)))
        return;
    put2(mlprof__clock_raw(), MLPROF__REC_B(MLPROF__REC_MARK, clamp_scope(scope), m));
    if (observed())
        mlprof__observe_mark();
    leave(in, depth);
}

void mlprof_mark_dynamic(mlprof_domain *domain, const char *name, int scope)
{
    mlprof__thread *in;
    unsigned depth;
    if (!active() || !(in = enter(&depth)))
        return;
    domain = recording_domain(domain);
    if (domain) {
        /* aux has 10 bits: 2 for the scope, 8 for the length */
        size_t len = name ? strnlen(name, MLPROF__NAME_MAX) : 0;
        put_text(mlprof__clock_raw(), MLPROF__REC_MARK_DYN, clamp_scope(scope) << 8 | (unsigned)len,
                 domain, name, len);
        if (observed())
            mlprof__observe_mark();
    }
    leave(in, depth);
}

/* 0 when nothing is recorded: a NULL key is the caller's error, reported. */
static int put_arg(unsigned kind, uint64_t value, const char *key)
{
    if (MLPROF_UNLIKELY(!key)) {
        mlprof__fail(MLPROF_EINVAL, "%s: NULL key (the argument is not recorded)",
                     kind == MLPROF__REC_ARG_I ? "mlprof_arg_int" : "mlprof_arg_double");
        return 0;
    }
    size_t klen = strnlen(key, MLPROF__KEY_MAX);
    put_text(value, kind, (unsigned)klen, NULL, key, klen);
    return 1;
}

void mlprof_arg_int(const char *key, int64_t value)
{
    mlprof__thread *in;
    unsigned depth;
    if (!active() || !(in = enter(&depth)))
        return;
    if (put_arg(MLPROF__REC_ARG_I, (uint64_t)value, key) && observed()) {
        mlprof_arg_value v = {MLPROF_ARG_INT, value, 0, NULL};
        mlprof__observe_arg(key, &v);
    }
    leave(in, depth);
}

void mlprof_arg_double(const char *key, double value)
{
    mlprof__thread *in;
    unsigned depth;
    if (!active() || !(in = enter(&depth)))
        return;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    if (put_arg(MLPROF__REC_ARG_F, bits, key) && observed()) {
        mlprof_arg_value v = {MLPROF_ARG_DOUBLE, 0, value, NULL};
        mlprof__observe_arg(key, &v);
    }
    leave(in, depth);
}

static void arg_str(const char *key, const char *value);

void mlprof_arg_str(const char *key, const char *value)
{
    mlprof__thread *in;
    unsigned depth;
    if (!active() || !(in = enter(&depth)))
        return;
    arg_str(key, value);
    leave(in, depth);
}

static void arg_str(const char *key, const char *value)
{
    if (MLPROF_UNLIKELY(!key)) {
        mlprof__fail(MLPROF_EINVAL, "mlprof_arg_str: NULL key (the argument is not recorded)");
        return;
    }
    if (!value)
        value = ""; /* as an empty string */
    size_t klen = strnlen(key, MLPROF__KEY_MAX);
    size_t vlen = strnlen(value, MLPROF__NAME_MAX);
    size_t bytes = sizeof(mlprof__rec) * (1 + MLPROF__TEXT_SLOTS(klen + vlen));
    mlprof__thread *t;
    mlprof__rec *r = reserve(&t, bytes);
    if (!r)
        return;
    r->a = vlen;
    r->b = MLPROF__REC_B(MLPROF__REC_ARG_S, klen, 0);
    memcpy(r + 1, key, klen);
    memcpy((char *)(r + 1) + klen, value, vlen);
    publish(t, bytes);
    if (observed()) {
        mlprof_arg_value v = {MLPROF_ARG_STRING, 0, 0, value};
        mlprof__observe_arg(key, &v);
    }
}

/* ---------------------------------------------------------------- memory */

/* Two slots (time, device and scope; address, bytes, op and tag length), then
 * the tag. The scope is read here, lock-free, from the thread's own record. */
static int put_mem(int device, unsigned op, const void *addr, uint64_t bytes, const char *tag)
{
    if (MLPROF_UNLIKELY((unsigned)device > MLPROF_DEVICE_MAX))
        return mlprof__fail(MLPROF_EINVAL, "memory: bad device %d (0 to %d)", device,
                            MLPROF_DEVICE_MAX);
    /* NULL: a failed allocation or free(NULL), nothing to account */
    if (!__atomic_load_n(&mlprof__mem_on, __ATOMIC_RELAXED) || !addr)
        return MLPROF_OK;
    mlprof__thread *in;
    unsigned depth;
    if (!(in = enter_on(&mlprof__mem_on, &depth)))
        return MLPROF_OK;
    size_t tlen = tag ? strnlen(tag, MLPROF__NAME_MAX) : 0;
    size_t size = sizeof(mlprof__rec) * (2 + MLPROF__TEXT_SLOTS(tlen));
    uint64_t ts = mlprof__clock_raw();
    READ_BEFORE_WINDOW(ts);
    mlprof__thread *t;
    mlprof__rec *r = reserve(&t, size);
    if (MLPROF_UNLIKELY(!r)) {
        leave(in, depth);
        return MLPROF_OK; /* counted as a drop */
    }
    if (bytes > MLPROF__MEM_BYTES_MAX)
        bytes = MLPROF__MEM_BYTES_MAX;
    r[0].a = ts;
    r[0].b = MLPROF__REC_B(MLPROF__REC_MEM, (unsigned)device, t->scope);
    r[1].a = (uint64_t)(uintptr_t)addr;
    r[1].b = bytes | (uint64_t)tlen << 48 | (uint64_t)op << 56;
    if (tlen)
        memcpy(r + 2, tag, tlen);
    publish(t, size);
    leave(in, depth);
    return MLPROF_OK;
}

int mlprof_mem_alloc(int device, const void *addr, uint64_t bytes, const char *tag)
{
    return put_mem(device, MLPROF__MEM_ALLOC, addr, bytes, tag);
}

int mlprof_mem_free(int device, const void *addr)
{
    return put_mem(device, MLPROF__MEM_FREE, addr, 0, NULL);
}

int mlprof_mem_reserve(int device, const void *addr, uint64_t bytes)
{
    return put_mem(device, MLPROF__MEM_RESERVE, addr, bytes, NULL);
}

int mlprof_mem_release(int device, const void *addr)
{
    return put_mem(device, MLPROF__MEM_RELEASE, addr, 0, NULL);
}

int mlprof__mem_alloc_lower(int device, const void *addr, uint64_t bytes)
{
    return put_mem(device, MLPROF__MEM_ALLOC | MLPROF__MEM_LOWER, addr, bytes, NULL);
}

int mlprof__mem_free_lower(int device, const void *addr)
{
    return put_mem(device, MLPROF__MEM_FREE | MLPROF__MEM_LOWER, addr, 0, NULL);
}

/* ---------------------------------------------------------------- scopes */

static mlprof__scope_node *scope_child(mlprof__scope_node *parent, const char *name)
{
    size_t len = strnlen(name, MLPROF__NAME_MAX);
    mlprof__scope_node *head = __atomic_load_n(&parent->children, __ATOMIC_ACQUIRE);
    for (mlprof__scope_node *n = head; n; n = n->sibling) {
        if (strncmp(n->name, name, len) == 0 && n->name[len] == '\0')
            return n;
    }
    /* a new name: allocate under the registry lock, then look again */
    pthread_mutex_lock(&mlprof__g.reg_lock);
    mlprof__scope_node *found = NULL;
    for (mlprof__scope_node *n = __atomic_load_n(&parent->children, __ATOMIC_ACQUIRE); n;
         n = n->sibling) {
        if (strncmp(n->name, name, len) == 0 && n->name[len] == '\0') {
            found = n;
            break;
        }
    }
    if (!found) {
        mlprof__scope_node *n = mlprof__calloc(1, sizeof *n);
        char *full = n ? mlprof__malloc(parent->full_len + len + 2) : NULL;
        if (n && full) {
            n->parent = parent;
            n->name = mlprof__strndup(name, len);
            memcpy(full, parent->full, parent->full_len);
            memcpy(full + parent->full_len, name, len);
            full[parent->full_len + len] = ':';
            full[parent->full_len + len + 1] = '\0';
            n->full = full;
            n->full_len = parent->full_len + len + 1;
            n->sibling = parent->children;
            __atomic_store_n(&parent->children, n, __ATOMIC_RELEASE);
            found = n;
        } else {
            mlprof__free(n);
            mlprof__free(full);
        }
    }
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    return found;
}

void mlprof_scope_push(const char *name)
{
    mlprof__thread *t = mlprof__thread_self();
    if (!t || !name)
        return;
    /* a trailing ':' is the separator, as in "model:" */
    size_t len = strnlen(name, MLPROF__NAME_MAX);
    char tmp[MLPROF__NAME_MAX + 1];
    memcpy(tmp, name, len);
    while (len > 0 && tmp[len - 1] == ':')
        len--;
    tmp[len] = '\0';
    mlprof__scope_node *n = scope_child(t->scope, tmp);
    if (!n) {
        t->scope_depth_dropped++;
        return;
    }
    t->scope = n;
    unsigned depth;
    if (active() && enter(&depth)) {
        put2(mlprof__clock_raw(), MLPROF__REC_B(MLPROF__REC_SCOPE_PUSH, 0, n));
        leave(t, depth);
    }
}

void mlprof_scope_pop(void)
{
    mlprof__thread *t = mlprof__thread_self();
    if (!t)
        return;
    if (t->scope_depth_dropped) {
        t->scope_depth_dropped--;
        return;
    }
    if (!t->scope->parent)
        return;
    t->scope = t->scope->parent;
    unsigned depth;
    if (active() && enter(&depth)) {
        put2(mlprof__clock_raw(), MLPROF__REC_B(MLPROF__REC_SCOPE_POP, 0, t->scope));
        leave(t, depth);
    }
}

const char *mlprof_scope_current(void)
{
    mlprof__thread *t = mlprof__thread_self();
    return t ? t->scope->full : "";
}

void mlprof_thread_set_name(const char *name)
{
    mlprof__thread *t = mlprof__thread_self();
    if (!t || !name)
        return;
    /* a seqlock: the collector retries while the count is odd or changed
     * (read_thread_name in collect.c). Each byte of the name is a release
     * store, so the odd count stored before it is visible to a reader whose
     * acquire load reads that byte. (Release stores rather than a release
     * fence: gcc's ThreadSanitizer refuses fences; on x86 both are plain
     * moves, and a name is set rarely.) */
    __atomic_store_n(&t->name_seq, t->name_seq + 1, __ATOMIC_RELAXED);
    size_t len = strnlen(name, sizeof t->name - 1);
    for (size_t i = 0; i < len; i++)
        __atomic_store_n(&t->name[i], name[i], __ATOMIC_RELEASE);
    __atomic_store_n(&t->name[len], '\0', __ATOMIC_RELEASE);
    __atomic_add_fetch(&t->name_seq, 1, __ATOMIC_RELEASE);
}

/* The thread will record no more: its exit handler ran, or, for a late
 * record (made after that), the kernel no longer knows its id, so that no code
 * of it runs any more (an id given to a new thread only delays this). */
static int finished(mlprof__thread *t)
{
    if (__atomic_load_n(&t->exited, __ATOMIC_ACQUIRE))
        return 1;
    if (!t->late)
        return 0;
    int saved = errno;
    int gone = syscall(SYS_tgkill, getpid(), t->tid, 0) != 0 && errno == ESRCH;
    errno = saved;
    if (gone)
        __atomic_store_n(&t->exited, 1, __ATOMIC_RELEASE);
    return gone;
}

/* The thread's records are all consumed and it will record no more. */
static int reapable(mlprof__thread *t)
{
    return finished(t) &&
           (!t->cur ||
            (t->head == t->cur && t->consumed == __atomic_load_n(&t->pos, __ATOMIC_ACQUIRE)));
}

static void free_thread(mlprof__thread *t, void (*forget)(mlprof__thread *))
{
    if (t->cur)
        mlprof__pool_put(t->cur);
    __atomic_add_fetch(&mlprof__g.dropped_exited, __atomic_load_n(&t->dropped, __ATOMIC_RELAXED),
                       __ATOMIC_RELAXED);
    if (forget)
        forget(t);
    mlprof__observe_thread_free(t);
    mlprof__free(t);
}

void mlprof__threads_reap(void (*forget)(mlprof__thread *))
{
    /* This (the sole consumer, under ctl_lock) is the only remover; new
     * threads push at the head with a CAS. The head goes with a CAS too: when
     * a thread was pushed meanwhile, the old head is now behind it, and the
     * walk below takes it. (A new thread given the freed head's address and
     * pushed in between is harmless: the pusher's CAS then finds the head it
     * expects, with the link it stored.) */
    mlprof__thread *head = __atomic_load_n(&mlprof__g.threads, __ATOMIC_ACQUIRE);
    while (head && reapable(head)) {
        mlprof__thread *next = head->next;
        if (__atomic_compare_exchange_n(&mlprof__g.threads, &head, next, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            free_thread(head, forget);
            head = next;
        }
        /* else head is the new head, read again */
    }
    if (!head)
        return;
    mlprof__thread *prev = head;
    mlprof__thread *t = prev->next;
    while (t) {
        mlprof__thread *next = t->next;
        if (reapable(t)) {
            prev->next = next;
            free_thread(t, forget);
        } else {
            prev = t;
        }
        t = next;
    }
}
