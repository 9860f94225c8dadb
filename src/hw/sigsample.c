/*
 * sigsample.c - the timer-signal sampler (sigsample.h), for where perf_event
 * is refused (kernel.perf_event_paranoid, a container's seccomp profile).
 *
 * Each thread of the program gets a POSIX timer on its own CPU-time clock
 * that sends a real-time signal of mlprof's to that very thread
 * (SIGEV_THREAD_ID). The handler, in the sampled thread, copies the
 * interrupted registers and the top of its stack into a slot of a ring
 * allocated before the first timer is armed, and returns; the reader (the
 * "mlprof stacks" thread of stacks.c) drains the ring every few
 * milliseconds, unwinds each copy (unwind.h) and keeps the addresses where
 * perf_event's samples go. The same poll finds the threads started since
 * (/proc/self/task) and gives them a timer, and deletes the timers of the
 * threads that ended.
 *
 * The clock of a thread named by its tid is the kernel's ABI for thread CPU
 * clocks (include/linux/posix-timers.h; glibc's pthread_getcpuclockid makes
 * the SCHED one the same way): ((~tid) << 3) | CPUCLOCK_PERTHREAD_MASK (4) |
 * CPUCLOCK_VIRT (1), the thread's user CPU time. User time, as perf_event's
 * exclude_kernel samples, and for exec's sake: a timer on all of the CPU
 * time (CPUCLOCK_SCHED) can expire while the thread is inside execve, and
 * its signal, still pending, would reach the new program at SIG_DFL and
 * kill it; user time expires at a tick taken in user mode, and the signal
 * is delivered on that very return to user mode.
 * The kernel checks CPU-time timers at its tick (CONFIG_HZ, often 250):
 * above that rate a signal comes once per tick with the periods it missed as
 * its overrun: fewer samples than the rate asks, each handed on with the
 * periods it stands for (1 + overrun, summed as "weight" in otherData).
 *
 * The signal: the highest real-time signal from SIGRTMAX-2 down whose
 * disposition is SIG_DFL at the start (a program's handler is never
 * replaced); the handler stays installed after a run (a signal still pending
 * then would kill the process at SIG_DFL) and does nothing outside one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sigsample.h"

#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "stacks.h"
#include "unwind.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define NSLOTS 256 /* samples the ring holds between two drains (a power of 2) */
#define MAX_WEIGHT 100000u

enum { SLOT_FREE = 0, SLOT_WRITING = 1, SLOT_READY = 2 };

typedef struct slot {
    int state; /* SLOT_*: a handler takes a free slot, the reader gives it back */
    uint32_t tid;
    uint32_t weight;
    uint32_t stack_len;
    uint32_t nextra;
    uint64_t ts;
    uint64_t regs[MLPROF__UREG_COUNT];
    uint64_t extra[MLPROF__SIGSAMPLE_EXTRA];
    unsigned char stack[MLPROF__SIGSAMPLE_STACK];
} slot;

size_t (*mlprof__sigsample_extra)(uint64_t *out, size_t max);
void (*mlprof__sigsample_extra_read)(uint64_t ts, uint32_t tid, const uint64_t *ips, size_t nips,
                                     const uint64_t *extra, size_t n);

/* What the handler touches: atomics only, and the ring. */
static struct {
    slot *ring;    /* mapped once, never unmapped (a late handler may still write) */
    unsigned next; /* the next slot to try */
    int active;    /* the handler samples */
    int inside;    /* handlers running now */
    pid_t pid;     /* whose memory process_vm_readv reads: this process */
    size_t stack_bytes; /* copied at each sample (sampling_stack, at most MLPROF__SIGSAMPLE_STACK) */
    uint64_t taken, lost_ring, copy_failed;
    uint64_t handler_ns;     /* the handlers' time, from the timestamp to the slot's publication: the cost per sample */
    uint64_t handler_min_ns; /* the shortest (a handler preempted on a loaded machine counts the wait too) */
} H;

typedef struct thr {
    pid_t tid;
    int timer;  /* the kernel's timer id, or -1 */
    int own;    /* one of mlprof's threads: no timer */
    int checks; /* its name is read at its first two polls (a new thread is named after it starts) */
    int seen;
} thr;

/* The reader's (one thread at a time). The counts other_data reads change
 * under the caller's lock (poll's and stop's lock argument), taken only
 * around those stores: never across an unwind, a /proc scan or the Python
 * frames' reads, where a crash of the reader would leave it held and the
 * crash's dump waiting on it. */
static struct {
    int signo;
    unsigned hz;
    pid_t self;
    int armed;
    int lost_signal; /* the program installed a handler of its own for signo during the run */
    thr *t;
    size_t n, cap;
    size_t threads_sampled, threads_failed, threads_blocked;
    int failed_errno;
    uint64_t cut, unwind_failed, weight, signals;
    int said;
    char note[160]; /* how the signal was chosen, when it was not the first choice */
} R;

/* ------------------------------------------------------------- handler */

/* Copies up to MLPROF__SIGSAMPLE_STACK bytes from sp; process_vm_readv on
 * this process returns what it read before an unmapped page instead of
 * faulting (the end of the stack's mapping). One remote element per page:
 * its partial results are per element. */
static size_t copy_stack(unsigned char *to, uint64_t sp)
{
    size_t left = __atomic_load_n(&H.stack_bytes, __ATOMIC_RELAXED), n = 0;
    struct iovec local = {to, left};
    struct iovec remote[MLPROF__SIGSAMPLE_STACK / 4096 + 1];
    uint64_t at = sp;
    while (left && n < sizeof remote / sizeof remote[0]) {
        size_t chunk = 4096 - (size_t)(at & 4095);
        if (chunk > left)
            chunk = left;
        remote[n].iov_base = (void *)(uintptr_t)at;
        remote[n].iov_len = chunk;
        n++;
        at += chunk;
        left -= chunk;
    }
    ssize_t got = process_vm_readv(H.pid, &local, 1, remote, n, 0);
    if (got < 0) {
        __atomic_add_fetch(&H.copy_failed, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return (size_t)got;
}

static void handler(int sig, siginfo_t *si, void *context)
{
    (void)sig;
    int saved = errno;
    __atomic_add_fetch(&H.inside, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&H.active, __ATOMIC_SEQ_CST) || si->si_code != SI_TIMER)
        goto out;
#if defined(__x86_64__)
    const ucontext_t *uc = context;
    unsigned i = __atomic_fetch_add(&H.next, 1, __ATOMIC_RELAXED) % NSLOTS;
    slot *s = &H.ring[i];
    int expect = SLOT_FREE;
    if (!__atomic_compare_exchange_n(&s->state, &expect, SLOT_WRITING, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&H.lost_ring, 1, __ATOMIC_RELAXED); /* the reader is behind: never wait */
        goto out;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* the trace's clock, as perf_event's samples */
    s->ts = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    s->tid = (uint32_t)si->si_value.sival_int;
    unsigned over = si->si_overrun > 0 ? (unsigned)si->si_overrun : 0;
    s->weight = 1 + (over < MAX_WEIGHT ? over : MAX_WEIGHT);
    /* DWARF's order (unwind.h) from the kernel's sigcontext */
    static const int map[MLPROF__UREG_COUNT] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                                REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                                REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
    for (int r = 0; r < MLPROF__UREG_COUNT; r++)
        s->regs[r] = (uint64_t)uc->uc_mcontext.gregs[map[r]];
    s->stack_len = (uint32_t)copy_stack(s->stack, s->regs[MLPROF__UREG_SP]);
    size_t (*extra)(uint64_t *, size_t) = __atomic_load_n(&mlprof__sigsample_extra, __ATOMIC_ACQUIRE);
    size_t ne = extra ? extra(s->extra, MLPROF__SIGSAMPLE_EXTRA) : 0;
    s->nextra = (uint32_t)(ne < MLPROF__SIGSAMPLE_EXTRA ? ne : MLPROF__SIGSAMPLE_EXTRA);
    uint64_t ts = s->ts;
    __atomic_store_n(&s->state, SLOT_READY, __ATOMIC_RELEASE);
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t took = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec - ts;
    __atomic_add_fetch(&H.handler_ns, took, __ATOMIC_RELAXED);
    uint64_t least = __atomic_load_n(&H.handler_min_ns, __ATOMIC_RELAXED);
    while ((least == 0 || took < least) &&
           !__atomic_compare_exchange_n(&H.handler_min_ns, &least, took, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    __atomic_add_fetch(&H.taken, 1, __ATOMIC_RELAXED);
#else
    (void)context;
#endif
out:
    __atomic_sub_fetch(&H.inside, 1, __ATOMIC_SEQ_CST);
    errno = saved;
}

/* ------------------------------------------------------------- threads */

static int thread_cpu_clock(pid_t tid) { return (int)(((unsigned)~tid << 3) | 4u | 1u); }

/* The start of a small /proc file, NUL-terminated, read without stdio: the
 * reader thread rescans the threads all along, and an allocation there
 * could be cut by a fork in another thread (a sanitizer's allocator, whose
 * lock the child then never gets back, waits for good). 0 when unreadable. */
static size_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return n;
}

static int own_name(pid_t tid)
{
    char path[64], comm[32];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    return read_small(path, comm, sizeof comm) && strncmp(comm, "mlprof", 6) == 0;
}

/* Whether tid blocks signo (its SigBlk in /proc): its timer's signals would
 * stay pending and it would never be sampled (counted, said). */
static int blocks_signal(pid_t tid, int signo)
{
    char path[64], status[4096];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    if (!read_small(path, status, sizeof status))
        return 0;
    const char *line = strstr(status, "\nSigBlk:");
    if (!line)
        return 0;
    unsigned long long mask = strtoull(line + 8, NULL, 16);
    return signo <= 64 && (mask >> (signo - 1)) & 1;
}

static int arm(int timer, int on)
{
    long ns = on ? (long)(1000000000u / R.hz) : 0;
    struct itimerspec its = {{ns / 1000000000, ns % 1000000000}, {ns / 1000000000, ns % 1000000000}};
    return (int)syscall(SYS_timer_settime, timer, 0, &its, NULL);
}

/* A timer for tid, armed (-1 with errno). */
static int timer_for(pid_t tid)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = R.signo;
    sev.sigev_value.sival_int = (int)tid; /* the handler's si_value: which thread it samples */
    sev.sigev_notify_thread_id = tid;
    int timer = -1;
    if (syscall(SYS_timer_create, thread_cpu_clock(tid), &sev, &timer) != 0)
        return -1;
    if (R.armed && arm(timer, 1) != 0) {
        int e = errno;
        syscall(SYS_timer_delete, timer);
        errno = e;
        return -1;
    }
    return timer;
}

static void lock(pthread_mutex_t *m)
{
    if (m)
        pthread_mutex_lock(m);
}

static void unlock(pthread_mutex_t *m)
{
    if (m)
        pthread_mutex_unlock(m);
}

/* The counts in locals, added under lk at the end (NULL: the caller holds it). */
static void rescan(pthread_mutex_t *lk)
{
    size_t sampled = 0, failed = 0, blocked = 0;
    int failed_errno = 0;
    /* the folder read with getdents64 into the stack, not opendir (which
     * allocates: see read_small) */
    int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return;
    for (size_t i = 0; i < R.n; i++)
        R.t[i].seen = 0;
    char ents[4096] __attribute__((aligned(8)));
    long got = 0, at = 0;
    for (;;) {
        if (at >= got) {
            got = syscall(SYS_getdents64, dir, ents, sizeof ents);
            at = 0;
            if (got <= 0)
                break;
        }
        /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
        unsigned short reclen;
        memcpy(&reclen, ents + at + 16, sizeof reclen);
        const char *name = ents + at + 19;
        at += reclen ? reclen : got; /* a zero length would loop: leave the buffer */
        pid_t tid = (pid_t)atoi(name);
        if (tid <= 0 || tid == R.self)
            continue;
        size_t i;
        for (i = 0; i < R.n && R.t[i].tid != tid; i++)
            ;
        if (i == R.n) {
            thr *g = mlprof__grow(R.t, &R.cap, R.n, sizeof *g, 64);
            if (!g) {
                failed++;
                failed_errno = ENOMEM;
                continue;
            }
            R.t = g;
            R.t[R.n++] = (thr){tid, -1, 0, 0, 0};
        }
        thr *t = &R.t[i];
        t->seen = 1;
        if (t->checks >= 2 || t->own)
            continue;
        t->checks++;
        if (own_name(tid)) {
            t->own = 1;
            if (t->timer >= 0)
                syscall(SYS_timer_delete, t->timer);
            t->timer = -1;
            continue;
        }
        if (t->checks > 1) {
            /* not at the first: glibc blocks every signal in a thread being
             * started, and in its creator around the clone */
            if (t->timer >= 0)
                blocked += (size_t)blocks_signal(tid, R.signo);
            continue;
        }
        t->timer = timer_for(tid);
        if (t->timer >= 0) {
            sampled++;
            continue;
        }
        int err = errno;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
        if (access(path, F_OK) == 0) { /* not a thread that has just ended */
            failed++;
            failed_errno = err;
        }
    }
    close(dir);
    if (sampled || failed || blocked) {
        lock(lk);
        R.threads_sampled += sampled;
        R.threads_failed += failed;
        R.threads_blocked += blocked;
        if (failed)
            R.failed_errno = failed_errno;
        unlock(lk);
    }
    size_t k = 0;
    for (size_t i = 0; i < R.n; i++) {
        if (!R.t[i].seen) {
            if (R.t[i].timer >= 0)
                syscall(SYS_timer_delete, R.t[i].timer);
            continue;
        }
        R.t[k++] = R.t[i];
    }
    R.n = k;
}

static void set_armed(int on)
{
    if (R.armed == on)
        return;
    R.armed = on;
    for (size_t i = 0; i < R.n; i++) {
        if (R.t[i].timer >= 0)
            arm(R.t[i].timer, on);
    }
}

/* ------------------------------------------------------------- the ring */

/* Each sample unwound (and its extra words read) outside lk; lk around its
 * counts and keep. */
static void drain(int keeping, mlprof__sigsample_keep_fn keep, pthread_mutex_t *lk)
{
    static uint64_t ips[MLPROF__STACK_DEPTH];
    unsigned start = __atomic_load_n(&H.next, __ATOMIC_RELAXED); /* oldest first, roughly */
    for (unsigned k = 0; k < NSLOTS; k++) {
        slot *s = &H.ring[(start + k) % NSLOTS];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != SLOT_READY)
            continue;
        if (keeping) {
            mlprof__ustack u;
            memcpy(u.regs, s->regs, sizeof u.regs);
            u.stack = s->stack;
            u.stack_len = s->stack_len;
            int why = 0;
            size_t n = mlprof__unwind(&u, ips, MLPROF__STACK_DEPTH, &why);
            if (mlprof__sigsample_extra_read)
                mlprof__sigsample_extra_read(s->ts, s->tid, ips, n, s->extra, s->nextra);
            lock(lk);
            if (why == MLPROF__UNWIND_OFF_COPY && s->stack_len == H.stack_bytes)
                R.cut++;
            else if (why == MLPROF__UNWIND_NO_INFO || why == MLPROF__UNWIND_OFF_COPY)
                R.unwind_failed++;
            R.signals++;
            R.weight += s->weight;
            keep(s->ts, s->tid, s->weight, ips, n);
            unlock(lk);
        }
        __atomic_store_n(&s->state, SLOT_FREE, __ATOMIC_RELEASE);
    }
}

/* Empties the ring of what it holds: READY slots only. A handler may be
 * writing a slot (SLOT_WRITING) right now (a reset from another thread while
 * sampling, a late handler of the last run); freeing that one would let a
 * second handler claim it and mix two threads' registers and stacks in one
 * sample. It turns READY when its handler is done and is drained then. */
static void free_ready_slots(void)
{
    for (unsigned i = 0; i < NSLOTS; i++) {
        int expect = SLOT_READY;
        __atomic_compare_exchange_n(&H.ring[i].state, &expect, SLOT_FREE, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
}

/* ------------------------------------------------------------- lifecycle */

static int ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == handler;
}

/* The signal: ours from an earlier run, or the first at SIG_DFL from SIGRTMAX-2 down. */
static int choose_signal(char *why, size_t len)
{
    int first = SIGRTMAX - 2, taken = 0;
    for (int sig = first; sig >= SIGRTMIN; sig--) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) != 0)
            continue;
        if (ours(&old))
            return sig;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
            taken++;
            continue;
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigfillset(&sa.sa_mask); /* nothing else runs inside it */
        if (sigaction(sig, &sa, NULL) != 0)
            continue;
        if (taken)
            snprintf(R.note, sizeof R.note,
                     "SIGRTMIN+%d: the program has handlers on %d real-time signals from SIGRTMAX-2 down, left "
                     "as they are", sig - SIGRTMIN, taken);
        return sig;
    }
    snprintf(why, len, "every real-time signal from SIGRTMIN to SIGRTMAX-2 has a handler of the program's (%d); "
             "none is taken from it", taken);
    return -1;
}

int mlprof__sigsample_start(unsigned hz, pid_t self_tid, size_t stack_bytes, char *why, size_t len)
{
#if !defined(__x86_64__)
    (void)hz, (void)self_tid, (void)stack_bytes;
    snprintf(why, len, "the timer-signal sampler reads x86-64 registers only");
    return -1;
#else
    if (!hz)
        return snprintf(why, len, "no rate"), -1;
    if (!H.ring) {
        void *m = mmap(NULL, NSLOTS * sizeof(slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return snprintf(why, len, "no memory for its ring (%zu bytes): %s", NSLOTS * sizeof(slot),
                            strerror(errno)), -1;
        H.ring = m;
    }
    free_ready_slots();
    R.note[0] = '\0';
    R.signo = choose_signal(why, len);
    if (R.signo < 0)
        return -1;
    R.hz = hz;
    R.self = self_tid;
    __atomic_store_n(&H.stack_bytes, stack_bytes < MLPROF__SIGSAMPLE_STACK ? stack_bytes : MLPROF__SIGSAMPLE_STACK,
                     __ATOMIC_RELAXED);
    R.lost_signal = 0;
    H.pid = getpid();
    __atomic_store_n(&H.active, 1, __ATOMIC_SEQ_CST);
    R.armed = 1;
    rescan(NULL); /* the caller holds the lock around start */
    if (!R.threads_sampled) {
        int e = R.failed_errno;
        mlprof__sigsample_stop(0, NULL, NULL);
        snprintf(why, len, "no thread got a CPU-time timer (%s)", e ? strerror(e) : "no thread");
        return -1;
    }
    return 0;
#endif
}

void mlprof__sigsample_poll(int recording, mlprof__sigsample_keep_fn keep, pthread_mutex_t *lk)
{
    if (!R.hz)
        return;
    struct sigaction cur;
    if (!R.lost_signal && sigaction(R.signo, NULL, &cur) == 0 && !ours(&cur)) {
        /* the program installed its own handler: it gets the signal, and the
         * timers stop (never sending it signals it did not ask for) */
        lock(lk);
        R.lost_signal = 1;
        unlock(lk);
        for (size_t i = 0; i < R.n; i++) {
            if (R.t[i].timer >= 0)
                syscall(SYS_timer_delete, R.t[i].timer);
            R.t[i].timer = -1;
        }
        char msg[200];
        snprintf(msg, sizeof msg, "the program installed a handler of its own for signal %d (SIGRTMIN+%d), "
                 "the sampler's: sampling stops there", R.signo, R.signo - SIGRTMIN);
        mlprof__log(MLPROF_LOG_WARN, "sampling (call stacks): %s", msg);
    }
    if (!R.lost_signal) {
        set_armed(recording);
        rescan(lk);
    }
    drain(recording, keep, lk);
}

void mlprof__sigsample_stop(int recording, mlprof__sigsample_keep_fn keep, pthread_mutex_t *lk)
{
    for (size_t i = 0; i < R.n; i++) {
        if (R.t[i].timer >= 0)
            syscall(SYS_timer_delete, R.t[i].timer);
    }
    R.n = 0;
    __atomic_store_n(&H.active, 0, __ATOMIC_SEQ_CST);
    /* a handler that saw active before it was cleared finishes its slot */
    for (int k = 0; k < 1000 && __atomic_load_n(&H.inside, __ATOMIC_SEQ_CST); k++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    if (keep && H.ring)
        drain(recording, keep, lk);
    R.armed = 0;
}

void mlprof__sigsample_after_fork(void)
{
    /* the child has none of the parent's timers; its own are made by its
     * reader, if the child samples */
    mlprof__free(R.t);
    R.t = NULL;
    R.n = R.cap = 0;
    R.hz = 0;
    __atomic_store_n(&H.active, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&H.inside, 0, __ATOMIC_SEQ_CST);
    mlprof__sigsample_reset();
    /* the child's only thread is this one: a slot another thread of the
     * parent was writing at the fork would stay SLOT_WRITING for good */
    for (unsigned i = 0; H.ring && i < NSLOTS; i++)
        __atomic_store_n(&H.ring[i].state, SLOT_FREE, __ATOMIC_RELAXED);
}

void mlprof__sigsample_reset(void)
{
    __atomic_store_n(&H.taken, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&H.lost_ring, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&H.copy_failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&H.handler_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&H.handler_min_ns, 0, __ATOMIC_RELAXED);
    R.threads_sampled = R.threads_failed = R.threads_blocked = 0;
    R.failed_errno = 0;
    R.cut = R.unwind_failed = R.weight = R.signals = 0;
    R.said = 0;
    if (H.ring)
        free_ready_slots();
}

void mlprof__sigsample_other_data(mlprof__sb *out)
{
    if (R.signo <= 0) /* refused: said in "refused" */
        return;
    uint64_t taken = __atomic_load_n(&H.taken, __ATOMIC_RELAXED),
             handler_ns = __atomic_load_n(&H.handler_ns, __ATOMIC_RELAXED);
    mlprof__sb_printf(out,
                      ",\"signal\":%d,\"signal_name\":\"SIGRTMIN+%d\","
                      "\"signal_unwind\":\"%s\",\"stack_copy_bytes\":%zu,\"signals_taken\":%llu,\"signals_kept\":%llu,"
                      "\"weight\":%llu,\"lost_ring\":%llu,\"stack_copy_failed\":%llu,\"cut_by_copy\":%llu,"
                      "\"unwind_stopped\":%llu,\"threads_sampled\":%zu,\"threads_without_timer\":%zu,"
                      "\"threads_blocking_signal\":%zu,\"handler_ns_per_sample\":%llu,\"handler_ns_min\":%llu",
                      R.signo, R.signo - SIGRTMIN, mlprof__unwind_method(), H.stack_bytes,
                      (unsigned long long)taken, (unsigned long long)R.signals, (unsigned long long)R.weight,
                      (unsigned long long)__atomic_load_n(&H.lost_ring, __ATOMIC_RELAXED),
                      (unsigned long long)__atomic_load_n(&H.copy_failed, __ATOMIC_RELAXED),
                      (unsigned long long)R.cut, (unsigned long long)R.unwind_failed, R.threads_sampled,
                      R.threads_failed, R.threads_blocked, (unsigned long long)(taken ? handler_ns / taken : 0),
                      (unsigned long long)__atomic_load_n(&H.handler_min_ns, __ATOMIC_RELAXED));
    if (R.threads_failed) {
        const char *e = strerror(R.failed_errno);
        mlprof__sb_puts(out, ",\"timer_error\":");
        mlprof__sb_json_str(out, e, strlen(e));
    }
    if (R.lost_signal)
        mlprof__sb_puts(out, ",\"signal_taken_by_program\":true");
    if (R.note[0]) {
        mlprof__sb_puts(out, ",\"signal_note\":");
        mlprof__sb_json_str(out, R.note, strlen(R.note));
    }
}

void mlprof__sigsample_report(void)
{
    uint64_t lost = __atomic_load_n(&H.lost_ring, __ATOMIC_RELAXED),
             failed = __atomic_load_n(&H.copy_failed, __ATOMIC_RELAXED);
    if (R.said || (!lost && !failed && !R.cut && !R.threads_failed && !R.threads_blocked))
        return;
    R.said = 1;
    mlprof__log(MLPROF_LOG_WARN,
                "sampling (timer signal): %llu samples lost (ring full), %llu stack copies failed, %llu walks left "
                "the %zu-byte stack copy (cut), %zu threads without a timer%s%s, %zu threads blocking signal %d",
                (unsigned long long)lost, (unsigned long long)failed, (unsigned long long)R.cut,
                H.stack_bytes, R.threads_failed, R.threads_failed ? ": " : "",
                R.threads_failed ? strerror(R.failed_errno) : "", R.threads_blocked, R.signo);
}
