/*
 * stacks.c - the sampling key: call stacks of every thread of the process,
 * sampled on CPU time through perf_event (a software cpu-clock event per
 * thread that exists at the run's start, with inherit, so the threads they
 * start are sampled too). How the stacks are walked (sampling_unwind):
 *   dwarf (the default where libdw loads): each sample carries the thread's
 *     user registers and a copy of its stack from sp (PERF_SAMPLE_REGS_USER,
 *     PERF_SAMPLE_STACK_USER, sampling_stack bytes), which the reader thread
 *     unwinds by the objects' CFI as it drains (unwind.c), so code built
 *     without frame pointers keeps its callers; only the addresses are kept;
 *   fp: the kernel's user call chains (PERF_SAMPLE_CALLCHAIN), walked by
 *     frame pointers: cheap, but a caller of code without them is lost.
 * One thread of mlprof's own drains the ring buffers; it is started before
 * the events are opened, so nothing inherits onto it, and it skips the
 * threads named "mlprof ...". The samples stay in memory as raw addresses;
 * at a dump they are symbolized (symbols.c: function, and file:line where
 * debug info exists) into a tree of frames (the view, which Perfetto's
 * writer reads through the trace's meta: PerfSample packets) and written as
 * the trace's stackFrames and samples (Chrome's JSON trace format), with
 * what was lost in otherData (the kernel's lost records, walks that stopped
 * short and why). A forked child that goes on recording samples itself
 * (its own reader and events, into its own trace); the parent's events,
 * which the kernel copies onto the child, drop its samples as another
 * process's. Where perf_event is refused (sampling_source auto, said once
 * with the reason) or where sampling_source=signal asks for it, the same
 * reader drives the timer-signal sampler instead (sigsample.c: a CPU-time
 * timer and a real-time signal per thread, stacks copied by the handler
 * and unwound here by mlprof__unwind); its samples are kept in the same
 * storage and attributed the same way. A Python process gets the signal
 * source under auto: its handler also takes the thread's Python frames
 * (pyframes.c), which the reader names and puts in place of the eval
 * loop's native frames before the sample is kept.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../export/sink.h"
#include "../record/produce.h"
#include "hw_internal.h"
#include "pyframes.h"
#include "sigsample.h"
#include "stacks.h"
#include "unwind.h"

#define MAX_FDS 4096            /* events: threads at the start (the later ones inherit) x CPUs */
#define MAX_CPUS 512
#define RING_PAGES 64           /* data pages of each ring (a power of 2) with call chains */
#define RING_PAGES_MAX 2048     /* with stack copies: 8 MiB a CPU at most (see ring_pages) */
#define RING_PAGES_MIN 16       /* where the locked-memory limit refuses more */
#define DRAIN_NS 4000000ull     /* the reader's period */
#define STACK_MAX 65528u        /* the most PERF_SAMPLE_STACK_USER copies (a record's size is 16 bits) */
#define MAX_WORDS (16u << 20)   /* memory kept for samples: 128 MiB */
#define TID_SLOTS 4096          /* threads told apart as the program's or mlprof's */

typedef struct ring {
    int fd;
    void *map;    /* the header page and pages data pages */
    size_t pages;
} ring;

/* The user registers a sample carries (PERF_SAMPLE_REGS_USER, in the
 * kernel's order, lowest bit first), and each one's DWARF number (unwind.h). */
static const struct {
    int perf, dwarf;
} REGS[MLPROF__UREG_COUNT] = {
    {PERF_REG_X86_AX, 0},  {PERF_REG_X86_BX, 3},   {PERF_REG_X86_CX, 2},   {PERF_REG_X86_DX, 1},
    {PERF_REG_X86_SI, 4},  {PERF_REG_X86_DI, 5},   {PERF_REG_X86_BP, 6},   {PERF_REG_X86_SP, 7},
    {PERF_REG_X86_IP, 16}, {PERF_REG_X86_R8, 8},   {PERF_REG_X86_R9, 9},   {PERF_REG_X86_R10, 10},
    {PERF_REG_X86_R11, 11}, {PERF_REG_X86_R12, 12}, {PERF_REG_X86_R13, 13}, {PERF_REG_X86_R14, 14},
    {PERF_REG_X86_R15, 15},
};

static uint64_t regs_mask(void)
{
    uint64_t m = 0;
    for (int i = 0; i < MLPROF__UREG_COUNT; i++)
        m |= 1ull << REGS[i].perf;
    return m;
}

static struct {
    /* the samples, the counts, start and stop: held only around storing
     * them, never across an unwind, libdw, the Python frames' reads or a
     * /proc scan (a crash of the reader there would leave it held for good
     * and the crash's dump, which takes it, waiting) */
    pthread_mutex_t lock;
    /* held by the reader through each round of its work (opening, a
     * drain, closing), never while it sleeps: a fork waits for it
     * (stacks_fork_prepare), so that the reader is not inside malloc or
     * libdw as the process forks */
    pthread_mutex_t work;
    int dump_gave_up;      /* mlprof__lock_for_dump's: the crash's dump could not have lock */
    int crash_left_out;    /* the crash's dump left the samples out (said in otherData) */
    pthread_cond_t ready;
    unsigned hz;
    int dwarf;            /* stacks copied and unwound here (sampling_unwind dwarf), else the kernel's chains */
    uint32_t stack_bytes; /* PERF_SAMPLE_STACK_USER's size */
    char unwind_why[300]; /* why dwarf was asked for and not used, or "" */
    int started;          /* a reader thread to join */
    int stop;             /* atomic */
    int opened;           /* the reader said how the open went: 1 */
    int source;           /* the sampling_source key: SRC_* */
    int signal;           /* the timer-signal sampler runs (sigsample.c) */
    int used_signal;      /* it ran in this run (otherData) */
    char perf_refused[512]; /* why perf_event was refused before the signal sampler took over, or "" */
    /* Python frames (pyframes.c), through the signal sampler's hooks */
    int python;             /* a Python process: 1 while init has no answer yet, 2 frames on, -1 refused */
    char python_why[512];   /* init's answer */
    uint64_t py_ts;         /* the sample whose stack py_ips is, Python frames interleaved */
    uint32_t py_tid;
    int py_pending;
    unsigned py_gen;        /* resets seen when py_ips was tagged */
    unsigned resets;        /* atomic; bumped under lock by each reset: tags of before it name freed names */
    size_t py_n;
    uint64_t py_ips[MLPROF__STACK_DEPTH];
    pthread_t thread;
    pid_t reader_tid, pid;
    ring rings[MAX_CPUS]; /* one per CPU */
    int fds[MAX_FDS];
    size_t nrings, nfds, threads_opened, threads_refused, threads_skipped;
    size_t ring_size;         /* data pages of each ring (open_all) */
    size_t cpus_without_ring; /* CPUs whose ring was refused (open_all) */
    char refused[512]; /* why nothing could be sampled, or "" */
    int paranoid;      /* /proc/sys/kernel/perf_event_paranoid, or -99 */
    /* samples: ts, tid, n, then n addresses, leaf first */
    uint64_t *words;
    size_t nwords, cap;
    uint64_t samples, lost_kernel, lost_memory, truncated, own_samples, other_process;
    uint64_t stops[4];   /* the dwarf walks by why they ended (unwind.h's MLPROF__UNWIND_*) */
    uint64_t no_regs;    /* samples without user registers: their pc alone */
    uint64_t unwind_ns, unwound, unwound_frames; /* the reader's time in mlprof__unwind, its calls, their frames */
    struct {
        int32_t tid;
        int8_t own;
    } tids[TID_SLOTS];
} K = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_MUTEX_INITIALIZER, .ready = PTHREAD_COND_INITIALIZER, .paranoid = -99};

enum { SRC_AUTO, SRC_PERF, SRC_SIGNAL };

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
static void keep(uint64_t ts, uint32_t tid, const uint64_t *ips, uint64_t nr, int truncated)
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
    if (truncated)
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

/* The signal sampler's samples (sigsample.c's drain, on the reader, lock
 * held by it around this call only):
 * one sample each (the weight, the periods it stands for, is counted there). */
static void keep_signal(uint64_t ts, uint32_t tid, uint32_t weight, const uint64_t *ips, size_t n)
{
    (void)weight;
    /* with its Python frames (py_extra_read), unless a reset came in between
     * (it runs outside the lock): its tags would name pyframes' freed names */
    if (K.py_pending && K.py_ts == ts && K.py_tid == tid &&
        K.py_gen == __atomic_load_n(&K.resets, __ATOMIC_RELAXED)) {
        ips = K.py_ips;
        n = K.py_n;
    }
    K.py_pending = 0;
    keep(ts, tid, ips, n, n >= MLPROF__STACK_DEPTH);
}

/* The signal sampler's reader hook (on the reader, lock not held: K.py_*
 * are the reader's own), called with a sample's
 * native stack and the words mlprof__pyframes_capture wrote in its handler,
 * just before keep_signal gets the same sample: the Python frames in place
 * of the eval loop's, named now, while their code objects are alive. */
static void py_extra_read(uint64_t ts, uint32_t tid, const uint64_t *ips, size_t nips, const uint64_t *extra, size_t n)
{
    K.py_pending = 0;
    if (!n)
        return;
    K.py_gen = __atomic_load_n(&K.resets, __ATOMIC_ACQUIRE);
    K.py_n = mlprof__pyframes_tag(ips, nips, extra, n, K.py_ips, MLPROF__STACK_DEPTH);
    K.py_ts = ts;
    K.py_tid = tid;
    K.py_pending = 1;
}

/* On the reader: whether the Python frames can be read (the self-test
 * needs the interpreter initialized, which it is not yet when mlprof
 * starts from LD_PRELOAD: asked again at each drain until it answers). */
static void python_step(void)
{
    if (K.python != 1)
        return;
    int r = mlprof__pyframes_init_nowait(K.python_why, sizeof K.python_why);
    if (r > 0) {
        K.python = 2;
    } else if (r < 0) {
        K.python = -1;
        mlprof__log(MLPROF_LOG_WARN, "sampling: no Python frames: %s", K.python_why);
    }
}

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One sample with registers and a stack copy (sampling_unwind dwarf),
 * after ip, pid/tid and time: { u64 abi; u64 regs[17] (when abi is not
 * NONE); u64 size; char data[size]; u64 dyn_size (when size) }. Unwound
 * here, on the reader thread; the copy is dropped. */
static void keep_copy(uint64_t ts, uint32_t tid, uint64_t ip, const uint64_t *u, size_t words)
{
    uint64_t ips[MLPROF__STACK_DEPTH];
    mlprof__ustack us;
    memset(&us, 0, sizeof us);
    size_t at = 0;
    uint64_t abi = at < words ? u[at++] : 0;
    if (abi != PERF_SAMPLE_REGS_ABI_NONE && at + MLPROF__UREG_COUNT <= words) {
        for (int i = 0; i < MLPROF__UREG_COUNT; i++)
            us.regs[REGS[i].dwarf] = u[at + (size_t)i];
        at += MLPROF__UREG_COUNT;
        uint64_t size = at < words ? u[at++] : 0;
        if (size && size / 8 + 1 <= words - at) {
            uint64_t dyn = u[at + size / 8];
            us.stack = (const unsigned char *)(u + at);
            us.stack_len = dyn < size ? (size_t)dyn : (size_t)size;
        }
    } else {
        abi = PERF_SAMPLE_REGS_ABI_NONE;
    }
    if (abi == PERF_SAMPLE_REGS_ABI_NONE) { /* no user context: the sampled pc alone */
        pthread_mutex_lock(&K.lock);
        K.no_regs++;
        keep(ts, tid, &ip, 1, 0);
        pthread_mutex_unlock(&K.lock);
        return;
    }
    int why = MLPROF__UNWIND_DONE;
    uint64_t t0 = clock_ns();
    size_t n = mlprof__unwind(&us, ips, MLPROF__STACK_DEPTH, &why);
    uint64_t t1 = clock_ns();
    pthread_mutex_lock(&K.lock);
    K.unwind_ns += t1 - t0;
    K.unwound++;
    K.unwound_frames += n;
    K.stops[why & 3]++;
    keep(ts, tid, ips, n, why == MLPROF__UNWIND_TRUNCATED);
    pthread_mutex_unlock(&K.lock);
}

/* Reads what a ring holds (records may wrap around its end), and gives each
 * record's room back as soon as it is read: a dwarf walk takes time. */
static void drain(ring *r, int keeping)
{
    struct perf_event_mmap_page *hdr = r->map;
    const unsigned char *data = (const unsigned char *)r->map + sysconf(_SC_PAGESIZE);
    const uint64_t size = (uint64_t)r->pages * (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t head = __atomic_load_n(&hdr->data_head, __ATOMIC_ACQUIRE), tail = hdr->data_tail;
    static uint64_t recw[65536 / 8]; /* the reader's only: a record's size is 16 bits */
    unsigned char *rec = (unsigned char *)recw;
    while (tail < head) {
        struct perf_event_header eh;
        for (size_t i = 0; i < sizeof eh; i++)
            ((unsigned char *)&eh)[i] = data[(tail + i) % size];
        if (eh.size < sizeof eh || tail + eh.size > head)
            break;
        size_t n = eh.size, off = (size_t)(tail % size), first = n <= size - off ? n : (size_t)(size - off);
        memcpy(rec, data + off, first);
        memcpy(rec + first, data, n - first);
        tail += eh.size;
        __atomic_store_n(&hdr->data_tail, tail, __ATOMIC_RELEASE);
        const uint64_t *u = (const uint64_t *)(rec + sizeof eh);
        size_t words = (n - sizeof eh) / 8;
        if (eh.type == PERF_RECORD_LOST && words >= 2) {
            pthread_mutex_lock(&K.lock);
            K.lost_kernel += u[1];
            pthread_mutex_unlock(&K.lock);
        } else if (eh.type == PERF_RECORD_SAMPLE && words >= 3 && keeping) {
            /* ip; pid, tid; time; then the call chain (nr; ips[nr]) or the copy */
            uint32_t pid = (uint32_t)u[1], tid = (uint32_t)(u[1] >> 32);
            if ((pid_t)pid != K.pid || own_thread((pid_t)tid)) {
                pthread_mutex_lock(&K.lock);
                if ((pid_t)pid != K.pid)
                    K.other_process++;
                else
                    K.own_samples++;
                pthread_mutex_unlock(&K.lock);
            } else if (K.dwarf) {
                keep_copy(u[2], tid, u[0], u + 3, words - 3);
            } else if (words >= 4) {
                uint64_t nr = u[3];
                int cut = 0;
                if (nr > words - 4) { /* more than the record holds: cut */
                    nr = words - 4;
                    cut = 1;
                }
                pthread_mutex_lock(&K.lock);
                keep(u[2], tid, u + 4, nr, cut || nr >= MLPROF__STACK_DEPTH);
                pthread_mutex_unlock(&K.lock);
            }
        }
    }
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
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    if (K.dwarf) { /* registers and stack copy: walked here (unwind.c) */
        a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
        a.sample_regs_user = regs_mask();
        a.sample_stack_user = K.stack_bytes;
    } else {
        a.sample_type |= PERF_SAMPLE_CALLCHAIN;
    }
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.exclude_callchain_kernel = 1;
    a.inherit = 1;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC; /* the trace's clock */
    a.sample_max_stack = MLPROF__STACK_DEPTH;
    a.wakeup_events = 1u << 30; /* never woken: the reader polls */
    int fd = (int)syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && errno == EINVAL && !K.dwarf) { /* a kernel before sample_max_stack: its own limit */
        a.sample_max_stack = 0;
        fd = (int)syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    }
    if (fd < 0)
        *err = errno;
    return fd;
}

/* Data pages of a ring: with stack copies, room for 4 of the reader's
 * periods of samples at the rate (a CPU runs one thread at a time, so it
 * writes at most hz samples a second), as a power of 2. */
static size_t ring_pages(void)
{
    if (!K.dwarf)
        return RING_PAGES;
    uint64_t bytes = 4 * ((uint64_t)K.hz * DRAIN_NS / 1000000000u + 1) * (K.stack_bytes + 512u);
    size_t pages = RING_PAGES, page = (size_t)sysconf(_SC_PAGESIZE);
    while (pages < RING_PAGES_MAX && (uint64_t)pages * page < bytes)
        pages *= 2;
    return pages;
}

/* A number from a /proc file, or -1. */
static long long read_proc_num(const char *path)
{
    FILE *f = fopen(path, "re");
    long long v = -1;
    if (f) {
        if (fscanf(f, "%lld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* CAP_IPC_LOCK (bit 14) in this thread's effective set: its rings are not
 * limited (nor is anyone's where perf_event_paranoid is -1). */
static int can_lock_freely(void)
{
    if (K.paranoid == -1)
        return 1;
    FILE *f = fopen("/proc/thread-self/status", "re");
    char line[256];
    int yes = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long caps;
        if (sscanf(line, "CapEff: %llx", &caps) == 1) {
            yes = (caps >> 14) & 1;
            break;
        }
    }
    if (f)
        fclose(f);
    return yes;
}

/* The ring size to begin with: ring_pages(), made smaller where the
 * locked-memory budget cannot give it to every CPU. The kernel charges a
 * ring's pages (data and header) to the user, up to perf_event_mlock_kb
 * for each online CPU (shared by all the user's processes), and what
 * goes past that to the process's RLIMIT_MEMLOCK; it refuses past both
 * (EPERM). Asking each CPU its share up front gives them all a ring of
 * one size instead of the first CPUs a large one and the last none. The
 * budget as read here ignores the user's other processes: what they hold
 * shows as EPERM later, and open_all halves all rings alike. */
static size_t ring_budget_pages(long ncpu, size_t page)
{
    size_t want = ring_pages();
    if (can_lock_freely())
        return want;
    long long kb = read_proc_num("/proc/sys/kernel/perf_event_mlock_kb");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    struct rlimit rl;
    if (kb < 0 || getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return want;
    uint64_t budget = (uint64_t)kb * 1024u / page * (uint64_t)(online > 0 ? online : 1) + rl.rlim_cur / page;
    uint64_t share = budget / (uint64_t)ncpu; /* pages a CPU may lock: its ring and the header page */
    size_t pages = want;
    while (pages > RING_PAGES_MIN && 1 + (uint64_t)pages > share)
        pages /= 2;
    return pages;
}

/* Maps a ring on each of n new events (one per CPU) at one size, halving
 * it for all where any is refused for locked memory, down to
 * RING_PAGES_MIN; at the last size each keeps what it got (MAP_FAILED and
 * its errno in err[i] where none). */
static size_t map_rings(const int *fd, void **m, int *err, size_t n, size_t pages, size_t page)
{
    for (;;) {
        int refused = 0;
        for (size_t i = 0; i < n; i++) {
            m[i] = mmap(NULL, (1 + pages) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd[i], 0);
            err[i] = m[i] == MAP_FAILED ? errno : 0;
            refused |= err[i] == EPERM;
        }
        if (!refused || pages / 2 < RING_PAGES_MIN)
            return pages;
        for (size_t i = 0; i < n; i++) { /* the budget back, for smaller rings on every CPU */
            if (m[i] != MAP_FAILED)
                munmap(m[i], (1 + pages) * page);
        }
        pages /= 2;
    }
}

/* Opens an event on every thread but mlprof's own (the reader, at start),
 * on each CPU: the kernel maps no ring of an inherited event that follows
 * its task over all CPUs, so there is one ring per CPU, and every other
 * event on that CPU writes into it (PERF_EVENT_IOC_SET_OUTPUT). A CPU left
 * without a ring (the locked-memory limit) would lose its samples: under
 * auto the signal sampler takes over instead, under perf it is said. */
static void open_all(int fallback)
{
    DIR *dir = opendir("/proc/self/task");
    int err = 0, ring_err = 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpu < 1)
        ncpu = 1;
    if (ncpu > MAX_CPUS)
        ncpu = MAX_CPUS;
    K.ring_size = ring_budget_pages(ncpu, page);
    int ring_of[MAX_CPUS];   /* index in rings, or -1 */
    char no_ring[MAX_CPUS];  /* an event opened there, but its ring was refused */
    int tfd[MAX_CPUS], nfd[MAX_CPUS], nerr[MAX_CPUS];
    long ncpu_of[MAX_CPUS];
    void *nmap[MAX_CPUS];
    for (long c = 0; c < ncpu; c++)
        ring_of[c] = -1, no_ring[c] = 0;
    struct dirent *e;
    while (dir && (e = readdir(dir)) != NULL) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0 || own_thread(tid))
            continue;
        if (K.nfds + (size_t)ncpu > MAX_FDS) {
            K.threads_skipped++;
            continue;
        }
        /* the thread's events; the CPUs without a ring yet get theirs from
         * them, all of one size (map_rings), the others write into theirs */
        size_t n = 0;
        for (long c = 0; c < ncpu; c++) {
            tfd[c] = open_one(tid, (int)c, &err);
            if (tfd[c] >= 0 && ring_of[c] < 0)
                ncpu_of[n] = c, nfd[n++] = tfd[c];
        }
        if (n) {
            size_t pages = map_rings(nfd, nmap, nerr, n, K.ring_size, page);
            K.ring_size = pages; /* a later CPU's ring no larger than the others */
            for (size_t i = 0; i < n; i++) {
                long c = ncpu_of[i];
                if (nmap[i] == MAP_FAILED) {
                    err = ring_err = nerr[i];
                    no_ring[c] = 1;
                    close(tfd[c]);
                    tfd[c] = -1;
                    continue;
                }
                no_ring[c] = 0;
                ring_of[c] = (int)K.nrings;
                K.rings[K.nrings++] = (ring){tfd[c], nmap[i], pages};
            }
        }
        int any = 0;
        for (long c = 0; c < ncpu; c++) {
            int fd = tfd[c];
            if (fd < 0)
                continue;
            if (K.rings[ring_of[c]].fd != fd && ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, K.rings[ring_of[c]].fd) != 0) {
                err = errno;
                close(fd);
                continue;
            }
            K.fds[K.nfds++] = fd;
            any = 1;
        }
        K.threads_opened += any;
        K.threads_refused += !any && err != ESRCH; /* a thread that has just ended does not matter */
    }
    if (dir)
        closedir(dir);
    K.cpus_without_ring = 0;
    for (long c = 0; c < ncpu; c++)
        K.cpus_without_ring += no_ring[c];
    char lost[400] = "";
    if (K.cpus_without_ring && ring_err == EPERM) {
        struct rlimit rl;
        char lim[40] = "unlimited";
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(lim, sizeof lim, "%llu KiB", (unsigned long long)(rl.rlim_cur / 1024));
        snprintf(lost, sizeof lost, "%zu of %ld CPUs got no ring buffer, even of %zu KiB (the locked-memory limit: "
                                    "kernel.perf_event_mlock_kb %lld KiB a CPU for all this user's processes, "
                                    "then ulimit -l %s)",
                 K.cpus_without_ring, ncpu, K.ring_size * page / 1024,
                 read_proc_num("/proc/sys/kernel/perf_event_mlock_kb"), lim);
    } else if (K.cpus_without_ring) {
        snprintf(lost, sizeof lost, "%zu of %ld CPUs got no ring buffer (%s)", K.cpus_without_ring, ncpu,
                 strerror(ring_err));
    }
    if (K.nrings && K.cpus_without_ring && fallback) {
        /* sampling some CPUs only would give shares that are not the
         * program's: the signal sampler takes all of its threads instead */
        for (size_t i = 0; i < K.nrings; i++)
            munmap(K.rings[i].map, (1 + K.rings[i].pages) * page);
        for (size_t i = 0; i < K.nfds; i++)
            close(K.fds[i]);
        K.nrings = K.nfds = K.threads_opened = 0;
        snprintf(K.perf_refused, sizeof K.perf_refused, "%s", lost);
        return;
    }
    if (!K.nrings && fallback) { /* said once: the signal sampler takes over */
        snprintf(K.perf_refused, sizeof K.perf_refused, "%s (kernel.perf_event_paranoid is %d)",
                 lost[0] ? lost : dir ? mlprof__perf_why(err ? err : ESRCH) : "cannot list /proc/self/task",
                 K.paranoid);
    } else if (!K.nrings) {
        snprintf(K.refused, sizeof K.refused, "%s (kernel.perf_event_paranoid is %d)",
                 lost[0] ? lost : dir ? mlprof__perf_why(err ? err : ESRCH) : "cannot list /proc/self/task",
                 K.paranoid);
        mlprof__hw_unavailable("sampling (call stacks)", K.refused);
    } else {
        if (K.cpus_without_ring) {
            char why[sizeof lost + 128];
            snprintf(why, sizeof why, "%s: the samples of threads while they run there are lost "
                                      "(sampling_source=auto would use the timer signal instead)", lost);
            mlprof__hw_unavailable("sampling on some CPUs", why);
        }
        if (K.threads_refused || K.threads_skipped) {
            char why[300];
            snprintf(why, sizeof why, "%zu threads could not be sampled (%s), %zu skipped (more than %d events)",
                     K.threads_refused, mlprof__perf_why(err), K.threads_skipped, MAX_FDS);
            mlprof__hw_unavailable("sampling of some threads", why);
        }
    }
}

/* The timer-signal sampler instead of perf_event (on the reader). */
static void open_signal(void)
{
    char why[200];
    uint64_t stack = mlprof__g.cfg.sampling_stack;
    pthread_mutex_lock(&K.lock); /* its counts are read under the lock (otherData) */
    int rc = mlprof__sigsample_start(K.hz, K.reader_tid, (size_t)stack, why, sizeof why);
    pthread_mutex_unlock(&K.lock);
    if (rc == 0) {
        K.signal = K.used_signal = 1;
        if (K.perf_refused[0])
            mlprof__log(MLPROF_LOG_WARN,
                        "sampling (call stacks): perf_event is refused: %s; sampling with a timer signal instead "
                        "(sampling_source=signal)", K.perf_refused);
        return;
    }
    if (K.perf_refused[0])
        snprintf(K.refused, sizeof K.refused, "perf_event is refused: %.200s; the timer signal too: %.200s",
                 K.perf_refused, why);
    else
        snprintf(K.refused, sizeof K.refused, "the timer signal (sampling_source=signal): %.200s", why);
    mlprof__hw_unavailable("sampling (call stacks)", K.refused);
}

static void close_all(int after_fork)
{
    if (K.signal) {
        if (after_fork) {
            mlprof__sigsample_after_fork();
        } else {
            mlprof__sigsample_stop(recording(), keep_signal, &K.lock);
            __atomic_store_n(&mlprof__sigsample_extra, NULL, __ATOMIC_RELEASE);
            __atomic_store_n(&mlprof__sigsample_extra_read, NULL, __ATOMIC_RELEASE);
            mlprof__sigsample_report();
        }
        K.signal = 0;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < K.nfds && !after_fork; i++) /* stop first: the last drain reads everything */
        ioctl(K.fds[i], PERF_EVENT_IOC_DISABLE, 0);  /* (a child's descriptors are the parent's events) */
    for (size_t i = 0; i < K.nrings; i++) {
        if (!after_fork)
            drain(&K.rings[i], recording());
        munmap(K.rings[i].map, (1 + K.rings[i].pages) * page);
    }
    for (size_t i = 0; i < K.nfds; i++)
        close(K.fds[i]);
    K.nrings = K.nfds = 0;
}

static void *reader_main(void *arg)
{
    (void)arg;
    mlprof__busy = 1; /* mlprof's own thread: the hooks leave it alone */
    pthread_mutex_lock(&K.work);
    pthread_setname_np(pthread_self(), "mlprof stacks");
    K.reader_tid = (pid_t)syscall(SYS_gettid);
    /* a Python process: its frames can only be taken on its own threads, by
     * the timer signal's handler; auto chooses the signal for it */
    K.python = dlsym(RTLD_DEFAULT, "Py_IsInitialized") ? 1 : 0;
    K.python_why[0] = '\0';
    if (K.python && K.source == SRC_PERF) {
        snprintf(K.python_why, sizeof K.python_why, "sampling_source=perf: Python frames need the timer signal");
        K.python = -1;
    }
    if (K.python == 1) {
        __atomic_store_n(&mlprof__sigsample_extra_read, py_extra_read, __ATOMIC_RELEASE);
        __atomic_store_n(&mlprof__sigsample_extra, mlprof__pyframes_capture, __ATOMIC_RELEASE);
        python_step();
    }
    if (K.source != SRC_SIGNAL && K.python != 1 && K.python != 2)
        open_all(K.source == SRC_AUTO);
    if (!K.nrings && K.source != SRC_PERF)
        open_signal();
    pthread_mutex_lock(&K.lock);
    K.opened = 1;
    pthread_cond_broadcast(&K.ready);
    pthread_mutex_unlock(&K.lock);
    pthread_mutex_unlock(&K.work);
    while ((K.nrings || K.signal) && !__atomic_load_n(&K.stop, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, (long)DRAIN_NS};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&K.work);
        int keeping = recording();
        for (size_t i = 0; i < K.nrings; i++)
            drain(&K.rings[i], keeping);
        if (K.signal) {
            python_step();
            mlprof__sigsample_poll(keeping, keep_signal, &K.lock); /* the lock around each keep only */
        }
        pthread_mutex_unlock(&K.work);
    }
    pthread_mutex_lock(&K.work);
    close_all(0);
    pthread_mutex_unlock(&K.work);
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

static int parse_source(const char *v)
{
    return strcmp(v, "auto") == 0     ? SRC_AUTO
           : strcmp(v, "perf") == 0   ? SRC_PERF
           : strcmp(v, "signal") == 0 ? SRC_SIGNAL
                                      : -1;
}

static int parse_key(const char *key, const char *value, unsigned *mask, char *why, size_t len)
{
    *mask = 0;
    if (strcmp(key, "sampling_source") == 0) {
        if (parse_source(value) >= 0)
            return 0;
        snprintf(why, len, "expected auto (perf_event, or a timer signal per thread where perf_event is refused), "
                 "perf or signal");
        return -1;
    }
    if (strcmp(key, "sampling_unwind") == 0) {
        if (strcmp(value, "auto") && strcmp(value, "dwarf") && strcmp(value, "fp")) {
            snprintf(why, len,
                     "expected auto (dwarf where libdw loads, else fp), dwarf (each sample's stack copy, "
                     "unwound by the objects' CFI through libdw) or fp (the kernel's frame-pointer call "
                     "chains)");
            return -1;
        }
        return 0;
    }
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

static void names_free(void);

static void reset_samples(void)
{
    view_free();
    names_free();
    /* a forked child resets the trace before the modules' after_fork: the
     * lock may be held by the parent's reader, which the child has not */
    if (K.started && K.pid != mlprof__g.pid) {
        pthread_mutex_init(&K.lock, NULL);
        mlprof__pyframes_after_fork(); /* its lock too, for the reset below */
    }
    pthread_mutex_lock(&K.lock);
    mlprof__sigsample_reset();
    /* the samples' Python frames are tags naming pyframes' names: they go
     * with the samples, and so does its cache of code objects */
    mlprof__pyframes_reset();
    /* the reader tags Python frames outside the lock (py_extra_read): what it
     * tagged before this reset is dropped by keep_signal, seeing the count */
    __atomic_add_fetch(&K.resets, 1, __ATOMIC_RELEASE);
    K.nwords = 0;
    K.samples = K.lost_kernel = K.lost_memory = K.truncated = K.own_samples = K.other_process = 0;
    K.no_regs = K.unwind_ns = K.unwound = K.unwound_frames = 0;
    memset(K.stops, 0, sizeof K.stops);
    pthread_mutex_unlock(&K.lock);
}

static int stacks_start(void)
{
    unsigned hz = 0;
    parse_hz(mlprof__g.cfg.sampling, &hz);
    K.hz = hz;
    K.source = parse_source(mlprof__g.cfg.sampling_source);
    if (K.source < 0)
        K.source = SRC_AUTO;
    K.refused[0] = K.perf_refused[0] = '\0';
    K.used_signal = 0;
    K.threads_opened = K.threads_refused = K.threads_skipped = K.cpus_without_ring = K.ring_size = 0;
    if (!hz || K.started)
        return MLPROF_OK;
    /* dwarf unless fp is asked for or libdw cannot be loaded (said once) */
    const char *mode = mlprof__g.cfg.sampling_unwind;
    uint64_t stack = mlprof__g.cfg.sampling_stack;
    K.stack_bytes = (uint32_t)((stack > STACK_MAX ? STACK_MAX : stack) & ~7ull);
    K.unwind_why[0] = '\0';
    K.dwarf = strcmp(mode, "fp") != 0;
    if (K.dwarf && strcmp(mlprof__unwind_method(), "dwarf (libdw)") != 0) {
        K.dwarf = 0;
        snprintf(K.unwind_why, sizeof K.unwind_why, "%s; the kernel's frame-pointer call chains instead",
                 mlprof__unwind_why());
        mlprof__hw_unavailable("DWARF unwinding of sampled call stacks", K.unwind_why);
    }
    K.paranoid = read_paranoid();
    K.pid = getpid();
    memset(K.tids, 0, sizeof K.tids);
    __atomic_store_n(&K.stop, 0, __ATOMIC_RELEASE);
    K.opened = 0;
    if (mlprof__thread_start(&K.thread, 0, reader_main, NULL) != 0) {
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

static int g_fork_gated; /* fork_prepare took K.work (ctl_lock held from there to fork_parent) */
static void stacks_fork_prepare(void)
{
    g_fork_gated = mlprof__fork_gate(&K.work, &K.thread, "the call-stack sampler's reader");
}
static void stacks_fork_parent(void)
{
    if (g_fork_gated)
        pthread_mutex_unlock(&K.work);
    g_fork_gated = 0;
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
    pthread_mutex_init(&K.work, NULL); /* taken by the fork, for a reader the child has not */
    pthread_cond_init(&K.ready, NULL);
    mlprof__unwind_after_fork();
    mlprof__pyframes_after_fork();
    close_all(1);
    K.started = 0;
    K.hz = 0;
    mlprof__free(K.words);
    K.words = NULL;
    K.nwords = K.cap = 0;
    K.samples = K.lost_kernel = K.lost_memory = K.truncated = K.own_samples = K.other_process = 0;
    K.no_regs = K.unwind_ns = K.unwound = K.unwound_frames = 0;
    memset(K.stops, 0, sizeof K.stops);
    view_free();
    names_free();
    if (running && was)
        stacks_start();
}

static void stacks_other_data(mlprof__sb *out)
{
    if (!K.hz)
        return;
    K.crash_left_out = 0;
    if (mlprof__lock_for_dump(&K.lock, &K.dump_gave_up) != 0) {
        /* the crash's dump, the sampler's lock held (by the crashed thread):
         * neither its counts nor its samples can be read safely */
        K.crash_left_out = 1;
        const char *why = "the sampler's lock was held at the crash: the sampled stacks and their counts are "
                          "left out of this trace";
        mlprof__log(MLPROF_LOG_WARN, "sampling: %s", why);
        mlprof__sb_printf(out, ",\"sampling\":{\"hz\":%u,\"left_out_at_crash\":", K.hz);
        mlprof__sb_json_str(out, why, strlen(why));
        mlprof__sb_putc(out, '}');
        return;
    }
    mlprof__sb_printf(out, ",\"sampling\":{\"unwind\":\"%s\",\"stack_bytes\":%u",
                      K.dwarf ? "dwarf (libdw, the objects' CFI)" : "fp (the kernel's frame-pointer call chains)",
                      K.dwarf ? K.stack_bytes : 0);
    if (mlprof__unwind_busy_at_crash()) {
        const char *why = "libdw's lock was held at the crash (the crash may be inside libdw, on mlprof's "
                          "sampler thread): the frames' source lines and debug-info names are left out";
        mlprof__log(MLPROF_LOG_WARN, "sampling: %s", why);
        mlprof__sb_puts(out, ",\"source_lines_left_out_at_crash\":");
        mlprof__sb_json_str(out, why, strlen(why));
    }
    if (K.unwind_why[0]) {
        mlprof__sb_puts(out, ",\"unwind_fallback\":");
        mlprof__sb_json_str(out, K.unwind_why, strlen(K.unwind_why));
    }
    if (K.dwarf)
        mlprof__sb_printf(out,
                          ",\"unwind_stops\":{\"done\":%llu,\"truncated\":%llu,\"off_copy\":%llu,\"no_info\":%llu},"
                          "\"no_user_regs\":%llu,\"unwind_ns_per_sample\":%.0f,\"unwind_frames_per_sample\":%.1f",
                          (unsigned long long)K.stops[MLPROF__UNWIND_DONE],
                          (unsigned long long)K.stops[MLPROF__UNWIND_TRUNCATED],
                          (unsigned long long)K.stops[MLPROF__UNWIND_OFF_COPY],
                          (unsigned long long)K.stops[MLPROF__UNWIND_NO_INFO], (unsigned long long)K.no_regs,
                          K.unwound ? (double)K.unwind_ns / (double)K.unwound : 0.0,
                          K.unwound ? (double)K.unwound_frames / (double)K.unwound : 0.0);
    mlprof__sb_printf(out,
                      ",\"hz\":%u,\"source\":\"%s\",\"clock\":\"%s\",\"method\":\"%s\",\"max_depth\":%d,"
                      "\"perf_event_paranoid\":%d,\"threads_opened\":%zu,\"samples\":%llu,\"lost_kernel\":%llu,"
                      "\"lost_memory\":%llu,\"truncated_stacks\":%llu,\"mlprof_thread_samples\":%llu,"
                      "\"other_process_samples\":%llu",
                      K.hz, K.used_signal || K.source == SRC_SIGNAL ? "signal" : "perf",
                      K.used_signal || K.source == SRC_SIGNAL ? "thread user CPU-time timers" : "cpu-clock",
                      K.used_signal || K.source == SRC_SIGNAL ? "timer_signal" : "perf_event", MLPROF__STACK_DEPTH,
                      K.paranoid, K.threads_opened,
                      (unsigned long long)K.samples, (unsigned long long)K.lost_kernel,
                      (unsigned long long)K.lost_memory, (unsigned long long)K.truncated,
                      (unsigned long long)K.own_samples, (unsigned long long)K.other_process);
    if (K.ring_size && !K.used_signal && K.source != SRC_SIGNAL)
    {
        /* smaller than the rate asks where the locked-memory budget is short: more lost_kernel */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        mlprof__sb_printf(out, ",\"ring_kib\":%zu", K.ring_size * page / 1024);
        if (K.ring_size < ring_pages())
            mlprof__sb_printf(out, ",\"ring_kib_wanted\":%zu", ring_pages() * page / 1024);
    }
    if (K.cpus_without_ring) /* their samples lost (perf), or why the timer signal took over (auto) */
        mlprof__sb_printf(out, ",\"cpus_without_ring\":%zu", K.cpus_without_ring);
    if (K.used_signal || K.source == SRC_SIGNAL)
        mlprof__sigsample_other_data(out);
    if (K.python) {
        size_t cached, failed, reread;
        mlprof__pyframes_bounds_t b;
        mlprof__pyframes_stats(&cached, &failed, &reread);
        mlprof__pyframes_bounds(&b);
        mlprof__sb_printf(out, ",\"python\":{\"frames\":%s,\"version\":\"%s\",\"code_objects\":%zu,"
                               "\"code_objects_unread\":%zu,\"code_objects_reread\":%zu,"
                               "\"code_objects_evicted\":%zu,\"code_bytes\":%zu,\"names\":%zu,"
                               "\"names_bytes\":%zu,\"names_dropped\":%zu,\"why\":",
                          K.python == 2 ? "true" : "false", mlprof__pyframes_version(), cached, failed, reread,
                          b.evicted, b.code_bytes, b.names, b.names_bytes, b.names_dropped);
        mlprof__sb_json_str(out, K.python_why, strlen(K.python_why));
        mlprof__sb_putc(out, '}');
    }
    if (K.perf_refused[0]) {
        mlprof__sb_puts(out, ",\"perf_refused\":");
        mlprof__sb_json_str(out, K.perf_refused, strlen(K.perf_refused));
    }
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

/* What each code address was named at an earlier dump, so that continuous
 * dumps do not name the same frames again: a large library's symbol table
 * read and sorted, and libdw's lookups (a linear search of the symbols
 * where an object is stripped), cost a torch process about 0.3 s of CPU a
 * dump. An entry stands while its address lies in the same mapping of the
 * same file, checked against each dump's maps; all go at a reset and after
 * a fork. Under K.lock, as V. */
enum { MAX_INLINED = 16 };
typedef struct named_pos {
    size_t name, file; /* offsets in C.text; file (size_t)-1: none */
    int line;
} named_pos;
typedef struct named {
    uint64_t ip, map_start, map_end, map_offset;
    size_t name, path;  /* offsets in C.text */
    uint32_t pos, npos; /* C.pos[pos .. pos + npos) */
    uint32_t next;      /* in the hash chain */
} named;
static struct {
    named *e; /* e[0] unused */
    size_t n, cap;
    named_pos *pos;
    size_t npos, cap_pos;
    uint32_t *head;
    size_t nhead;
    mlprof__sb text;
    size_t last_path; /* the path last put in text, which the next entries mostly share */
    int full;         /* at its bound, or out of memory: new addresses are named afresh at each dump */
} C;
#define NAMED_MAX (1u << 20)
#define NAMED_TEXT_MAX ((size_t)128 << 20)

static void names_free(void)
{
    mlprof__free(C.e);
    mlprof__free(C.pos);
    mlprof__free(C.head);
    mlprof__sb_free(&C.text);
    memset(&C, 0, sizeof C);
}

void mlprof__stacks_names_drop(void)
{
    pthread_mutex_lock(&K.lock);
    names_free();
    pthread_mutex_unlock(&K.lock);
}

static size_t names_hash(uint64_t ip) { return (size_t)((ip * 0x9e3779b97f4a7c15ull) >> 20) % C.nhead; }

/* A frame's names as view_build uses them: pointers into C.text or into
 * the caller's buffers, good until the next entry is made. */
typedef struct naming {
    const char *name, *path;
    uint64_t map_start, map_end, map_offset;
    int npos;
    const char *pos_name[MAX_INLINED], *pos_file[MAX_INLINED];
    int pos_line[MAX_INLINED];
} naming;

static void naming_of(const named *e, naming *out)
{
    out->name = C.text.data + e->name;
    out->path = C.text.data + e->path;
    out->map_start = e->map_start;
    out->map_end = e->map_end;
    out->map_offset = e->map_offset;
    out->npos = (int)e->npos;
    for (uint32_t i = 0; i < e->npos; i++) {
        const named_pos *p = &C.pos[e->pos + i];
        out->pos_name[i] = C.text.data + p->name;
        out->pos_file[i] = p->file != (size_t)-1 ? C.text.data + p->file : NULL;
        out->pos_line[i] = p->line;
    }
}

/* Keeps a fresh naming in C (where it has room); 1 when kept. */
static int names_keep(uint64_t ip, const naming *f)
{
    if (C.full)
        return 0;
    if (!C.head) {
        C.nhead = 65536;
        C.head = mlprof__calloc(C.nhead, sizeof *C.head);
        C.e = mlprof__grow(NULL, &C.cap, 0, sizeof *C.e, 1024);
        if (!C.head || !C.e) {
            names_free();
            C.full = 1;
            return 0;
        }
        C.n = 1;
        C.last_path = (size_t)-1;
    }
    named *g = mlprof__grow(C.e, &C.cap, C.n, sizeof *g, 1024);
    if (g)
        C.e = g;
    size_t need = C.npos + (size_t)f->npos;
    if (need > C.cap_pos && g) {
        size_t c = C.cap_pos ? C.cap_pos : 1024;
        while (c < need)
            c *= 2;
        named_pos *p = mlprof__realloc(C.pos, c * sizeof *p);
        if (!p)
            g = NULL;
        else {
            C.pos = p;
            C.cap_pos = c;
        }
    }
    if (!g || C.n >= NAMED_MAX || C.text.len >= NAMED_TEXT_MAX || C.text.failed) {
        C.full = 1;
        return 0;
    }
    named *e = &C.e[C.n];
    *e = (named){ip, f->map_start, f->map_end, f->map_offset, C.text.len, 0, (uint32_t)C.npos, (uint32_t)f->npos, 0};
    mlprof__sb_put(&C.text, f->name, strlen(f->name) + 1);
    if (C.last_path == (size_t)-1 || strcmp(C.text.data + C.last_path, f->path) != 0) {
        C.last_path = C.text.len;
        mlprof__sb_put(&C.text, f->path, strlen(f->path) + 1);
    }
    e->path = C.last_path;
    for (int i = 0; i < f->npos; i++) {
        named_pos *p = &C.pos[C.npos++];
        p->name = C.text.len;
        mlprof__sb_put(&C.text, f->pos_name[i], strlen(f->pos_name[i]) + 1);
        p->file = (size_t)-1;
        if (f->pos_file[i]) {
            p->file = C.text.len;
            mlprof__sb_put(&C.text, f->pos_file[i], strlen(f->pos_file[i]) + 1);
        }
        p->line = f->pos_line[i];
    }
    if (C.text.failed) { /* the text is unusable now: nothing kept from here on */
        names_free();
        C.full = 1;
        return 0;
    }
    size_t h = names_hash(ip);
    e->next = C.head[h];
    C.head[h] = (uint32_t)C.n++;
    return 1;
}

/* The names of the code address ip (not a Python frame's tag): kept from
 * an earlier dump where its mapping is the same now, else looked up (and
 * kept). name and pos are the caller's room for a fresh lookup. */
static void frame_naming(mlprof__syms *syms, uint64_t ip, naming *out, char *name, size_t len, mlprof__srcpos *pos)
{
    const char *path = "";
    uint64_t start = 0, end = 0, offset = 0;
    if (!mlprof__syms_mapping(syms, ip, &path, &start, &end, &offset))
        path = "";
    for (uint32_t k = C.head ? C.head[names_hash(ip)] : 0; k; k = C.e[k].next) {
        const named *e = &C.e[k];
        if (e->ip == ip) {
            if (e->map_start == start && e->map_end == end && e->map_offset == offset &&
                strcmp(C.text.data + e->path, path) == 0) {
                naming_of(e, out);
                return;
            }
            break; /* another object there now: named afresh (the old entry stays, shadowed) */
        }
    }
    const char *object;
    mlprof__syms_name(syms, ip, name, len, &object);
    *out = (naming){.name = name, .path = path, .map_start = start, .map_end = end, .map_offset = offset};
    out->npos = mlprof__syms_srcpos(syms, ip, pos, MAX_INLINED);
    int later = out->npos < 0; /* libdw does not see its object yet: named again at the next dump */
    if (later)
        out->npos = 0;
    for (int i = 0; i < out->npos; i++) {
        out->pos_name[i] = pos[i].name;
        out->pos_file[i] = pos[i].file[0] && pos[i].line > 0 ? pos[i].file : NULL;
        out->pos_line[i] = pos[i].line;
    }
    if (!later && names_keep(ip, out))
        naming_of(&C.e[C.n - 1], out);
}

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
        V.samples[ns] = (mlprof__stack_sample_out){K.words[w], (pid_t)K.words[w + 1], id, 0};
        w += 3 + n;
    }
    /* each address's frames: the function that holds it, then the calls
     * inlined there (one frame each, the same address); leaf[k] is t's
     * frame k's innermost, what its callees and samples hang from */
    uint32_t *leaf = rc == 0 ? mlprof__malloc(t.n * sizeof *leaf) : NULL;
    size_t nf = 1, cap_f = 0, cap_at = 0;
    struct text_at {
        size_t name, object, file; /* offsets in V.text (it moves as it grows); file -1: none */
    } *at = NULL;
    V.frames = mlprof__grow(NULL, &cap_f, 0, sizeof *V.frames, 1024);
    at = mlprof__grow(NULL, &cap_at, 0, sizeof *at, 1024);
    mlprof__syms *syms = leaf && V.frames && at ? mlprof__syms_load() : NULL;
    if (!leaf || !V.frames || !at)
        rc = -1;
    else
        memset(V.frames, 0, sizeof *V.frames); /* [0]: no frame */
    int have_path = 0;
    size_t last_path_at = 0;
    mlprof__srcpos *pos = rc == 0 ? mlprof__malloc(MAX_INLINED * sizeof *pos) : NULL;
    if (!pos)
        rc = -1;
    for (size_t k = 1; rc == 0 && k < t.n; k++) {
        char name[512];
        naming nm;
        if (mlprof__pyframes_is_tag(t.f[k].ip)) { /* a Python frame: "train (main.py:12)", no mapping */
            mlprof__pyframes_tag_name(t.f[k].ip, name, sizeof name);
            nm = (naming){.name = name, .path = "python"};
        } else {
            frame_naming(syms, t.f[k].ip, &nm, name, sizeof name, pos);
        }
        mlprof__stack_frame_out base = {.map_start = nm.map_start, .map_end = nm.map_end, .map_offset = nm.map_offset};
        base.rel_pc = t.f[k].ip - base.map_start + base.map_offset; /* the offset in its file */
        /* consecutive frames mostly share their object (V.text moves as it grows: compared there) */
        if (!have_path || V.text.failed || strcmp(nm.path, V.text.data + last_path_at) != 0) {
            last_path_at = V.text.len;
            mlprof__sb_put(&V.text, nm.path, strlen(nm.path) + 1);
            have_path = 1;
        }
        uint32_t parent = t.f[k].parent ? leaf[t.f[k].parent] : 0;
        for (int i = 0; i < (nm.npos > 1 ? nm.npos : 1); i++) {
            mlprof__stack_frame_out *g = mlprof__grow(V.frames, &cap_f, nf, sizeof *g, 1024);
            struct text_at *ga = mlprof__grow(at, &cap_at, nf, sizeof *ga, 1024);
            if (g)
                V.frames = g;
            if (ga)
                at = ga;
            if (!g || !ga || nf > UINT32_MAX - 1) {
                rc = -1;
                break;
            }
            mlprof__stack_frame_out *f = &V.frames[nf];
            *f = base;
            f->parent = parent;
            f->inlined = i > 0;
            const char *fname = i > 0 || (nm.npos > 0 && nm.pos_name[0][0]) ? nm.pos_name[i] : nm.name;
            at[nf] = (struct text_at){V.text.len, last_path_at, (size_t)-1};
            mlprof__sb_put(&V.text, fname, strlen(fname) + 1);
            if (i < nm.npos && nm.pos_file[i]) {
                f->line = nm.pos_line[i];
                at[nf].file = V.text.len;
                mlprof__sb_put(&V.text, nm.pos_file[i], strlen(nm.pos_file[i]) + 1);
            }
            parent = (uint32_t)nf++;
        }
        leaf[k] = parent;
    }
    if (rc == 0 && V.text.failed)
        rc = -1;
    for (size_t k = 1; rc == 0 && k < nf; k++) {
        V.frames[k].name = V.text.data + at[k].name;
        V.frames[k].object = V.text.data + at[k].object;
        V.frames[k].file = at[k].file != (size_t)-1 ? V.text.data + at[k].file : NULL;
    }
    for (size_t i = 0; rc == 0 && i < ns; i++)
        V.samples[i].frame = V.samples[i].frame ? leaf[V.samples[i].frame] : 0;
    mlprof__syms_free(syms);
    mlprof__free(pos);
    mlprof__free(at);
    mlprof__free(leaf);
    mlprof__free(t.f);
    mlprof__free(t.head);
    if (rc != 0) {
        view_free();
        return -1;
    }
    V.out = (mlprof__stacks_out){K.pid, V.frames, nf, V.samples, ns};
    V.valid = 1;
    return 0;
}

static void stacks_trace_members(mlprof__sb *out)
{
    if (!K.hz)
        return;
    if (K.crash_left_out) /* said in otherData.sampling and on stderr */
        return;
    if (mlprof__lock_for_dump(&K.lock, &K.dump_gave_up) != 0) {
        mlprof__log(MLPROF_LOG_WARN, "sampling: the sampler's lock was held at the crash: the sampled stacks "
                    "are left out of this trace");
        return;
    }
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
        if (f->file) { /* extra members: viewers group by name (the function) still */
            mlprof__sb_puts(out, ",\"file\":");
            mlprof__sb_json_str(out, f->file, strlen(f->file));
            mlprof__sb_printf(out, ",\"line\":%d", f->line);
        }
        if (f->inlined) /* a call the compiler inlined: the same address as its parent */
            mlprof__sb_puts(out, ",\"inlined\":true");
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
    .fork_prepare = stacks_fork_prepare,
    .fork_parent = stacks_fork_parent,
    .after_fork = stacks_after_fork,
    .other_data = stacks_other_data,
    .trace_members = stacks_trace_members,
    .reset = reset_samples,
};
