/*
 * unwind.c - walks a copied user stack (unwind.h), by the DWARF call frame
 * information (CFI) of the loaded objects through elfutils' libdw, loaded
 * with dlopen("libdw.so.1"); where libdw cannot be loaded, by frame
 * pointers over the copy.
 *
 * Why libdw (and not libunwind, nor a .eh_frame parser of our own): it reads
 * both .eh_frame and .debug_frame, follows separate debug info (build-id
 * and .gnu_debuglink under /usr/lib/debug), falls back to the frame-pointer
 * chain for code without CFI, and the same library gives file:line from the
 * line tables and the calls inlined at an address from the scopes
 * (mlprof__unwind_srcpos, for symbols.c); it is what perf uses for
 * --call-graph dwarf. Its remote-unwinding interface takes the registers
 * and memory from callbacks, which is exactly a copied stack. libunwind's
 * remote interface would do the unwinding but not the line tables (a second
 * library), and a parser of our own would redo libdw's CFI interpreter and
 * still lack .debug_frame and debug-info lookup. Only Debian's libdw1 is
 * needed at run time: the few declarations below are written from elfutils'
 * documented libdwfl.h (0.188), so the build needs no -dev package.
 *
 * Threads: libdw's Dwfl is not thread-safe, and it is called from mlprof's
 * reader thread (stacks.c drains perf_event's samples there; the
 * timer-signal sampler's reader too) and from the thread that writes a trace
 * (symbols.c's file:line): one mutex serialises them. Never called from a
 * sampled thread or a signal handler.
 *
 * Frame pointers: each frame's saved rbp is at [rbp] and its return address
 * at [rbp+8], both read from the copy only (never from the live stack, which
 * has moved on since the sample). A chain that leaves the copy, goes down,
 * or repeats ends the walk and says why.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "unwind.h"

#include "../common/common.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ----------------------------------------------- the frame-pointer walk */

static int read_copy(const mlprof__ustack *u, uint64_t addr, uint64_t *out)
{
    uint64_t sp = u->regs[MLPROF__UREG_SP];
    if (addr < sp || addr - sp > u->stack_len || u->stack_len - (addr - sp) < sizeof *out)
        return -1;
    memcpy(out, u->stack + (addr - sp), sizeof *out);
    return 0;
}

static size_t unwind_fp(const mlprof__ustack *u, uint64_t *ips, size_t max, int *why)
{
    int stop = MLPROF__UNWIND_DONE;
    size_t n = 0;
    if (max == 0) {
        stop = MLPROF__UNWIND_TRUNCATED;
        goto out;
    }
    ips[n++] = u->regs[MLPROF__UREG_IP];
    uint64_t bp = u->regs[MLPROF__UREG_BP];
    for (;;) {
        if (bp == 0) /* the outermost frame: _start and thread starts clear rbp */
            break;
        uint64_t next, ret;
        if (read_copy(u, bp, &next) != 0 || read_copy(u, bp + 8, &ret) != 0) {
            stop = MLPROF__UNWIND_OFF_COPY;
            break;
        }
        if (ret < 4096) { /* not a code address: rbp held data (code built without frame pointers) */
            stop = MLPROF__UNWIND_NO_INFO;
            break;
        }
        if (n == max) {
            stop = MLPROF__UNWIND_TRUNCATED;
            break;
        }
        ips[n++] = ret;
        if (next != 0 && next <= bp) { /* stacks grow down: a caller's frame is above */
            stop = MLPROF__UNWIND_NO_INFO;
            break;
        }
        bp = next;
    }
out:
    if (why)
        *why = stop;
    return n;
}

/* ------------------------------------------- libdw's types, as documented */

typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Thread Dwfl_Thread;
typedef struct Dwfl_Frame Dwfl_Frame;
typedef struct Dwfl_Line Dwfl_Line;
/* Dwarf_Die and Dwarf_Attribute are filled in by the caller's memory, so
 * their layouts (libdw.h's, stable since elfutils 0.1xx) are written out */
typedef struct Dwarf_Die {
    void *addr;
    void *cu;
    void *abbrev;
    long padding_;
} Dwarf_Die;
typedef struct Dwarf_Attribute {
    unsigned int code;
    unsigned int form;
    unsigned char *valp;
    void *cu;
} Dwarf_Attribute;
typedef struct Dwarf_Line Dwarf_Line;
typedef struct Dwarf_Files Dwarf_Files;
typedef uint64_t Dwarf_Addr;
typedef uint64_t Dwarf_Word;

/* Dwfl_Callbacks: how a Dwfl finds the objects and their debug info. The
 * pointers are libdw's own standard callbacks (dwfl_linux_proc_find_elf,
 * dwfl_standard_find_debuginfo), taken with dlsym, so only their order and
 * arity matter here; their argument types are opaque to us. */
typedef struct dw_callbacks {
    int (*find_elf)(Dwfl_Module *, void **, const char *, Dwarf_Addr, char **, void **);
    int (*find_debuginfo)(Dwfl_Module *, void **, const char *, Dwarf_Addr, const char *, const char *, uint32_t,
                          char **);
    int (*section_address)(Dwfl_Module *, void **, const char *, Dwarf_Addr, const char *, uint32_t, const void *,
                           Dwarf_Addr *);
    char **debuginfo_path; /* NULL: the default, ":.debug:/usr/lib/debug" */
} dw_callbacks;

/* Dwfl_Thread_Callbacks: the threads, their registers and their memory. */
typedef struct dw_thread_callbacks {
    pid_t (*next_thread)(Dwfl *, void *dwfl_arg, void **thread_argp);
    bool (*get_thread)(Dwfl *, pid_t tid, void *dwfl_arg, void **thread_argp);
    bool (*memory_read)(Dwfl *, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg);
    bool (*set_initial_registers)(Dwfl_Thread *, void *thread_arg);
    void (*detach)(Dwfl *, void *dwfl_arg);
    void (*thread_detach)(Dwfl_Thread *, void *thread_arg);
} dw_thread_callbacks;

#define DWARF_CB_OK 0
#define DWARF_CB_ABORT 1

/* ------------------------------------------------------ the libdw state */

static struct {
    pthread_mutex_t lock;
    int dump_gave_up; /* mlprof__lock_for_dump's: the crash's dump could not have lock */
    int tried;      /* libdw was looked for */
    void *lib;      /* NULL: not loaded, why says so */
    char why[256];
    char method[96];
    dw_callbacks cb;
    Dwfl *dwfl;     /* this process's modules and the one thread below */
    pid_t pid;
    uint64_t built_ns; /* when dwfl was last built from /proc/self/maps */
    /* the walk in progress */
    const mlprof__ustack *u;
    int off_copy;   /* a read fell beyond the copy, on the stack */
    uint64_t *ips;
    size_t n, max;
    struct {
        Dwfl *(*begin)(const dw_callbacks *);
        void (*end)(Dwfl *);
        int (*errno_)(void);
        const char *(*errmsg)(int);
        void (*report_begin)(Dwfl *);
        int (*report_end)(Dwfl *, void *removed, void *arg);
        int (*linux_proc_report)(Dwfl *, pid_t);
        bool (*attach_state)(Dwfl *, void *elf, pid_t, const dw_thread_callbacks *, void *);
        bool (*state_registers)(Dwfl_Thread *, int firstreg, unsigned nregs, const Dwarf_Word *regs);
        void (*state_register_pc)(Dwfl_Thread *, Dwarf_Word pc);
        int (*getthread_frames)(Dwfl *, pid_t, int (*)(Dwfl_Frame *, void *), void *);
        bool (*frame_pc)(Dwfl_Frame *, Dwarf_Addr *, bool *isactivation);
        Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
        Dwfl_Line *(*module_getsrc)(Dwfl_Module *, Dwarf_Addr);
        const char *(*lineinfo)(Dwfl_Line *, Dwarf_Addr *, int *linep, int *colp, Dwarf_Word *, Dwarf_Word *);
        const char *(*module_addrname)(Dwfl_Module *, Dwarf_Addr);
        Dwarf_Die *(*module_nextcu)(Dwfl_Module *, Dwarf_Die *lastcu, Dwarf_Addr *bias);
        ptrdiff_t (*ranges)(Dwarf_Die *, ptrdiff_t offset, Dwarf_Addr *basep, Dwarf_Addr *startp, Dwarf_Addr *endp);
        Dwarf_Line *(*getsrc_die)(Dwarf_Die *cudie, Dwarf_Addr);
        int (*lineno)(Dwarf_Line *, int *linep);
        const char *(*linesrc)(Dwarf_Line *, Dwarf_Word *, Dwarf_Word *);
        /* the functions inlined at an address */
        Dwarf_Die *(*module_addrdie)(Dwfl_Module *, Dwarf_Addr, Dwarf_Addr *bias);
        int (*child)(Dwarf_Die *, Dwarf_Die *result);
        int (*siblingof)(Dwarf_Die *, Dwarf_Die *result);
        int (*tag)(Dwarf_Die *);
        Dwarf_Attribute *(*attr)(Dwarf_Die *, unsigned int name, Dwarf_Attribute *);
        Dwarf_Attribute *(*attr_integrate)(Dwarf_Die *, unsigned int name, Dwarf_Attribute *);
        const char *(*formstring)(Dwarf_Attribute *);
        int (*formudata)(Dwarf_Attribute *, Dwarf_Word *);
        int (*getsrcfiles)(Dwarf_Die *cudie, Dwarf_Files **, size_t *nfiles);
        const char *(*filesrc)(Dwarf_Files *, size_t idx, Dwarf_Word *mtime, Dwarf_Word *length);
    } f;
    /* modules whose debug info has no .debug_aranges (clang's default),
     * where libdw 0.188 finds no compile unit for an address: their units'
     * address ranges, sorted, made at the first lookup */
    struct cu_table {
        Dwfl_Module *mod;
        struct cu_range {
            Dwarf_Addr start, end; /* the unit's own addresses (bias off) */
            Dwarf_Die *cu;
        } *r;
        size_t n;
        Dwarf_Addr bias;
    } cus[32];
    size_t ncus;
    /* the units where srcpos looked: their functions' and inlined calls'
     * address ranges, sorted, made at the first lookup in each (one walk
     * of the unit, where dwarf_getscopes would walk it at every lookup) */
    struct inl_table {
        Dwarf_Die *cu;
        struct inl_entry {
            Dwarf_Die die;
            int32_t parent; /* the enclosing function or inlined call; -1: none */
        } *e;
        struct inl_range {
            Dwarf_Addr start, end; /* the unit's own addresses (bias off) */
            uint32_t entry, depth; /* depth 0: a function, n: n calls inlined into it */
        } *r;
        size_t ne, nr, cap_e, cap_r;
        int failed; /* out of memory while made: no inlined calls known */
    } *inl;
    size_t ninl, cap_inl, inl_last; /* inl_last: the table last used (consecutive addresses mostly share it) */
} D = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The copied stack's bytes where addr lies in the copy; stack addresses
 * beyond the copy are refused (the live stack has moved on since the sample:
 * its values would make up frames); other memory (the objects' data, which
 * CFI expressions rarely read) is read from this process with
 * process_vm_readv, which fails rather than faults on a bad address. */
#define STACK_WINDOW (8ull << 20)

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    (void)arg;
    const mlprof__ustack *u = D.u;
    uint64_t sp = u->regs[MLPROF__UREG_SP];
    if (addr >= sp && addr - sp < STACK_WINDOW) {
        if (read_copy(u, addr, result) == 0)
            return true;
        D.off_copy = 1;
        return false;
    }
    struct iovec local = {result, sizeof *result};
    struct iovec remote = {(void *)(uintptr_t)addr, sizeof *result};
    return process_vm_readv(D.pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof *result;
}

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    (void)arg;
    if (*thread_argp) /* one thread: the sample's */
        return 0;
    *thread_argp = &D;
    return D.pid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl;
    (void)arg;
    (void)tid;
    *thread_argp = &D;
    return true;
}

/* The 17 registers are numbered as DWARF numbers them (unwind.h), which is
 * what libdw's x86-64 backend takes, the return-address column (16) being
 * the pc. */
static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    (void)arg;
    if (!D.f.state_registers(thread, 0, MLPROF__UREG_COUNT, D.u->regs))
        return false;
    D.f.state_register_pc(thread, D.u->regs[MLPROF__UREG_IP]);
    return true;
}

static const dw_thread_callbacks thread_callbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

static int load_libdw(void)
{
    D.tried = 1;
    D.lib = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!D.lib) {
        const char *e = dlerror();
        snprintf(D.why, sizeof D.why, "cannot load libdw.so.1 (%s; on Debian: apt-get install libdw1)",
                 e ? e : "not found");
        return -1;
    }
    struct {
        void **slot;
        const char *name;
    } fns[] = {
        {(void **)&D.f.begin, "dwfl_begin"},
        {(void **)&D.f.end, "dwfl_end"},
        {(void **)&D.f.errno_, "dwfl_errno"},
        {(void **)&D.f.errmsg, "dwfl_errmsg"},
        {(void **)&D.f.report_begin, "dwfl_report_begin"},
        {(void **)&D.f.report_end, "dwfl_report_end"},
        {(void **)&D.f.linux_proc_report, "dwfl_linux_proc_report"},
        {(void **)&D.f.attach_state, "dwfl_attach_state"},
        {(void **)&D.f.state_registers, "dwfl_thread_state_registers"},
        {(void **)&D.f.state_register_pc, "dwfl_thread_state_register_pc"},
        {(void **)&D.f.getthread_frames, "dwfl_getthread_frames"},
        {(void **)&D.f.frame_pc, "dwfl_frame_pc"},
        {(void **)&D.f.addrmodule, "dwfl_addrmodule"},
        {(void **)&D.f.module_getsrc, "dwfl_module_getsrc"},
        {(void **)&D.f.lineinfo, "dwfl_lineinfo"},
        {(void **)&D.f.module_addrname, "dwfl_module_addrname"},
        {(void **)&D.f.module_nextcu, "dwfl_module_nextcu"},
        {(void **)&D.f.ranges, "dwarf_ranges"},
        {(void **)&D.f.getsrc_die, "dwarf_getsrc_die"},
        {(void **)&D.f.lineno, "dwarf_lineno"},
        {(void **)&D.f.linesrc, "dwarf_linesrc"},
        {(void **)&D.f.module_addrdie, "dwfl_module_addrdie"},
        {(void **)&D.f.child, "dwarf_child"},
        {(void **)&D.f.siblingof, "dwarf_siblingof"},
        {(void **)&D.f.tag, "dwarf_tag"},
        {(void **)&D.f.attr, "dwarf_attr"},
        {(void **)&D.f.attr_integrate, "dwarf_attr_integrate"},
        {(void **)&D.f.formstring, "dwarf_formstring"},
        {(void **)&D.f.formudata, "dwarf_formudata"},
        {(void **)&D.f.getsrcfiles, "dwarf_getsrcfiles"},
        {(void **)&D.f.filesrc, "dwarf_filesrc"},
        {(void **)&D.cb.find_elf, "dwfl_linux_proc_find_elf"},
        {(void **)&D.cb.find_debuginfo, "dwfl_standard_find_debuginfo"},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if ((*fns[i].slot = dlsym(D.lib, fns[i].name)) == NULL) {
            snprintf(D.why, sizeof D.why, "libdw.so.1 has no %s (elfutils before 0.158?)", fns[i].name);
            dlclose(D.lib);
            D.lib = NULL;
            return -1;
        }
    }
    return 0;
}

/* (Re)builds the Dwfl from /proc/self/maps; lock held. A Dwfl takes one
 * dwfl_attach_state in its life, so a refresh is a new Dwfl (its CFI and
 * line tables are read again as they are used). */
static void drop_cu_tables(void)
{
    for (size_t i = 0; i < D.ncus; i++)
        mlprof__free(D.cus[i].r);
    D.ncus = 0;
    for (size_t i = 0; i < D.ninl; i++) {
        mlprof__free(D.inl[i].e);
        mlprof__free(D.inl[i].r);
    }
    mlprof__free(D.inl);
    D.inl = NULL;
    D.ninl = D.cap_inl = D.inl_last = 0;
}

static int build(void)
{
    drop_cu_tables(); /* their units are the old Dwfl's */
    if (D.dwfl)
        D.f.end(D.dwfl);
    D.dwfl = NULL;
    D.built_ns = now_ns();
    D.pid = getpid();
    Dwfl *d = D.f.begin(&D.cb);
    if (!d)
        return -1;
    D.f.report_begin(d);
    int rc = D.f.linux_proc_report(d, D.pid);
    if (D.f.report_end(d, NULL, NULL) != 0 || rc != 0 || !D.f.attach_state(d, NULL, D.pid, &thread_callbacks, NULL)) {
        snprintf(D.why, sizeof D.why, "libdw cannot read this process's modules: %s", D.f.errmsg(-1));
        D.f.end(d);
        return -1;
    }
    D.dwfl = d;
    return 0;
}

/* Loads libdw and builds the Dwfl the first time; lock held. 0: ready. */
static int ready(void)
{
    if (!D.tried)
        load_libdw();
    if (D.lib && !D.dwfl && build() != 0)
        D.lib = NULL; /* why says so; never retried */
    return D.lib && D.dwfl ? 0 : -1;
}

/* A pc in no module (a library dlopen'ed since the Dwfl was built): the
 * Dwfl is built again, at most every 100 ms (JIT code is in no module
 * ever, and must not make every sample reread the maps). */
static int refreshed_for(uint64_t pc)
{
    if (D.f.addrmodule(D.dwfl, pc) || now_ns() - D.built_ns < 100000000ull)
        return 0;
    if (build() != 0) {
        D.lib = NULL; /* from now on the frame-pointer walk; why says so */
        return 0;
    }
    return D.f.addrmodule(D.dwfl, pc) != NULL;
}

static int on_frame(Dwfl_Frame *state, void *arg)
{
    (void)arg;
    Dwarf_Addr pc;
    bool activation;
    if (!D.f.frame_pc(state, &pc, &activation))
        return -1; /* ends the walk: no pc for this frame */
    if (D.n == D.max)
        return DWARF_CB_ABORT;
    D.ips[D.n++] = pc;
    return DWARF_CB_OK;
}

static size_t walk(const mlprof__ustack *u, uint64_t *ips, size_t max, int *stop)
{
    D.u = u;
    D.ips = ips;
    D.max = max;
    D.n = 0;
    D.off_copy = 0;
    int rc = D.f.getthread_frames(D.dwfl, D.pid, on_frame, NULL);
    /* a read beyond the copy ended the walk, whatever libdw says (it takes
     * a return address it cannot read for the end of the stack) */
    if (rc == DWARF_CB_ABORT)
        *stop = MLPROF__UNWIND_TRUNCATED;
    else if (D.off_copy)
        *stop = MLPROF__UNWIND_OFF_COPY;
    else
        *stop = rc == 0 ? MLPROF__UNWIND_DONE : MLPROF__UNWIND_NO_INFO;
    D.u = NULL;
    return D.n;
}

size_t mlprof__unwind(const mlprof__ustack *u, uint64_t *ips, size_t max, int *why)
{
    int stop = MLPROF__UNWIND_TRUNCATED;
    size_t n = 0;
    if (max == 0)
        goto out;
    pthread_mutex_lock(&D.lock);
    if (ready() != 0) {
        pthread_mutex_unlock(&D.lock);
        return unwind_fp(u, ips, max, why);
    }
    refreshed_for(u->regs[MLPROF__UREG_IP]);
    if (!D.dwfl) {
        pthread_mutex_unlock(&D.lock);
        return unwind_fp(u, ips, max, why);
    }
    n = walk(u, ips, max, &stop);
    /* the walk ended at a caller in no module: maybe a library loaded since */
    if (stop == MLPROF__UNWIND_NO_INFO && n > 0 && refreshed_for(ips[n - 1] - (n > 1)))
        n = walk(u, ips, max, &stop);
    pthread_mutex_unlock(&D.lock);
    if (n == 0) { /* not even the sampled pc (libdw refused the registers) */
        ips[n++] = u->regs[MLPROF__UREG_IP];
        stop = MLPROF__UNWIND_NO_INFO;
    }
out:
    if (why)
        *why = stop;
    return n;
}

const char *mlprof__unwind_method(void)
{
    if (mlprof__lock_for_dump(&D.lock, &D.dump_gave_up) != 0)
        return "unknown (libdw's lock was held at the crash)";
    int ok = ready() == 0;
    pthread_mutex_unlock(&D.lock);
    return ok ? "dwarf (libdw)" : "frame pointers";
}

const char *mlprof__unwind_why(void)
{
    if (mlprof__lock_for_dump(&D.lock, &D.dump_gave_up) != 0)
        return "libdw's lock was held at the crash";
    int ok = ready() == 0;
    pthread_mutex_unlock(&D.lock);
    return ok ? "" : D.why;
}

static int by_start(const void *a, const void *b)
{
    const struct cu_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* In n ranges sorted by their start (first: the first one's start, each
 * stride bytes after the last), the index past the last that starts at or
 * below a. */
static size_t past_start(const Dwarf_Addr *first, size_t n, size_t stride, Dwarf_Addr a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (*(const Dwarf_Addr *)((const char *)first + mid * stride) <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The compile unit whose ranges hold ip, by the module's table (made now
 * when it is not there yet); lock held. */
static Dwarf_Die *cu_of(Dwfl_Module *m, uint64_t ip, Dwarf_Addr *bias)
{
    struct cu_table *t = NULL;
    for (size_t i = 0; i < D.ncus && !t; i++)
        t = D.cus[i].mod == m ? &D.cus[i] : NULL;
    if (!t) {
        if (D.ncus == sizeof D.cus / sizeof D.cus[0])
            return NULL;
        t = &D.cus[D.ncus++];
        *t = (struct cu_table){.mod = m};
        size_t cap = 0;
        Dwarf_Addr b = 0;
        for (Dwarf_Die *cu = D.f.module_nextcu(m, NULL, &b); cu; cu = D.f.module_nextcu(m, cu, &b)) {
            Dwarf_Addr base, start, end;
            t->bias = b;
            for (ptrdiff_t off = 0; (off = D.f.ranges(cu, off, &base, &start, &end)) > 0;) {
                if (t->n == cap) {
                    size_t c = cap ? 2 * cap : 64;
                    struct cu_range *r = mlprof__realloc(t->r, c * sizeof *r);
                    if (!r)
                        break;
                    t->r = r;
                    cap = c;
                }
                if (t->n < cap)
                    t->r[t->n++] = (struct cu_range){start, end, cu};
            }
        }
        if (t->n)
            qsort(t->r, t->n, sizeof *t->r, by_start);
    }
    *bias = t->bias;
    Dwarf_Addr a = ip - t->bias;
    size_t lo = past_start(t->n ? &t->r[0].start : NULL, t->n, sizeof *t->r, a);
    /* ranges may nest across units rarely: a few before are looked at */
    for (size_t k = lo, seen = 0; k-- > 0 && seen < 8; seen++) {
        if (a >= t->r[k].start && a < t->r[k].end)
            return t->r[k].cu;
    }
    return NULL;
}

/* DWARF's numbers for what srcpos reads (DWARF 5, section 7.5) */
#define DW_TAG_inlined_subroutine 0x1d
#define DW_TAG_subprogram 0x2e
#define DW_AT_name 0x03
#define DW_AT_call_file 0x58
#define DW_AT_call_line 0x59
#define DW_AT_linkage_name 0x6e

static void copy_text(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

/* The call site of an inlined call (its DW_AT_call_file and _line, in the
 * unit's file table) into pos; lock held. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *inl, mlprof__srcpos *pos)
{
    Dwarf_Attribute a;
    Dwarf_Word file = 0, line = 0;
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    pos->file[0] = '\0';
    pos->line = 0;
    if (D.f.formudata(D.f.attr(inl, DW_AT_call_line, &a), &line) != 0 || line == 0 || line > INT32_MAX)
        return;
    if (D.f.formudata(D.f.attr(inl, DW_AT_call_file, &a), &file) != 0 || D.f.getsrcfiles(cu, &files, &nfiles) != 0 ||
        file >= nfiles)
        return;
    const char *src = D.f.filesrc(files, file, NULL, NULL);
    if (src && src[0]) {
        copy_text(pos->file, sizeof pos->file, src);
        pos->line = (int)line;
    }
}

/* An inlined call's function name (its abstract origin's): the linkage
 * name where there is one, as the symbol tables name functions. */
static const char *die_name(Dwarf_Die *d)
{
    Dwarf_Attribute a;
    const char *name = D.f.formstring(D.f.attr_integrate(d, DW_AT_linkage_name, &a));
    if (!name || !name[0])
        name = D.f.formstring(D.f.attr_integrate(d, DW_AT_name, &a));
    return name && name[0] ? name : "[inlined]";
}

/* The scopes that may hold code, and hold functions or inlined calls. */
#define DW_TAG_catch_block 0x25
#define DW_TAG_lexical_block 0x0b
#define DW_TAG_try_block 0x32
#define DW_TAG_namespace 0x39

/* Adds the functions and inlined calls under die to t, each under parent
 * (-1: none) at depth; lock held. */
static void inl_walk(struct inl_table *t, Dwarf_Die *die, int32_t parent, uint32_t depth, int level)
{
    Dwarf_Die c, next;
    if (level > 256 || D.f.child(die, &c) != 0)
        return;
    for (int more = 1; more && !t->failed; more = D.f.siblingof(&c, &next) == 0 && (c = next, 1)) {
        int tag = D.f.tag(&c);
        int32_t here = parent;
        uint32_t d = depth;
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            Dwarf_Addr base, start, end;
            int any = 0;
            for (ptrdiff_t off = 0; !t->failed && (off = D.f.ranges(&c, off, &base, &start, &end)) > 0;) {
                if (start == 0 || end <= start)
                    continue; /* code the linker dropped (a discarded COMDAT copy keeps its DIEs at 0) */
                if (!any) {
                    struct inl_entry *e = mlprof__grow(t->e, &t->cap_e, t->ne, sizeof *e, 64);
                    if (!e || t->ne >= UINT32_MAX) {
                        t->failed = 1;
                        break;
                    }
                    t->e = e;
                    int sub = tag == DW_TAG_subprogram;
                    e[t->ne] = (struct inl_entry){c, sub ? -1 : parent};
                    here = (int32_t)t->ne++;
                    d = sub || parent < 0 ? 0 : depth + 1;
                    any = 1;
                }
                struct inl_range *r = mlprof__grow(t->r, &t->cap_r, t->nr, sizeof *r, 256);
                if (!r) {
                    t->failed = 1;
                    break;
                }
                t->r = r;
                r[t->nr++] = (struct inl_range){start, end, (uint32_t)here, d};
            }
            if (!any) /* no code (a declaration, an abstract instance): none inside either */
                continue;
        } else if (tag != DW_TAG_lexical_block && tag != DW_TAG_namespace && tag != DW_TAG_try_block &&
                   tag != DW_TAG_catch_block) {
            continue; /* types, variables, parameters */
        }
        inl_walk(t, &c, here, d, level + 1);
    }
}

static int by_range(const void *a, const void *b)
{
    const struct inl_range *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->depth < y->depth ? -1 : x->depth > y->depth; /* the enclosing first */
}

/* The calls inlined at a (the unit's address), innermost first, at most
 * max: how many; lock held. */
static int inlined_at(Dwarf_Die *cu, Dwarf_Addr a, Dwarf_Die **calls, int max)
{
    struct inl_table *t = D.ninl && D.inl[D.inl_last].cu == cu ? &D.inl[D.inl_last] : NULL;
    for (size_t i = 0; i < D.ninl && !t; i++) {
        t = D.inl[i].cu == cu ? &D.inl[i] : NULL;
        D.inl_last = i;
    }
    if (!t) {
        struct inl_table *g = mlprof__grow(D.inl, &D.cap_inl, D.ninl, sizeof *g, 16);
        if (!g)
            return 0;
        D.inl = g;
        D.inl_last = D.ninl;
        t = &D.inl[D.ninl++];
        *t = (struct inl_table){.cu = cu};
        inl_walk(t, cu, -1, 0, 0);
        if (t->failed) {
            mlprof__log(MLPROF_LOG_WARN, "sampling: out of memory while reading a unit's inlined calls: "
                        "their frames are left out");
            t->nr = 0;
        }
        mlprof__sort(t->r, t->nr, sizeof *t->r, by_range);
    }
    size_t lo = past_start(t->nr ? &t->r[0].start : NULL, t->nr, sizeof *t->r, a);
    /* the innermost range holding a: back from there to the function's own
     * range (a function's inlined calls lie inside it) */
    const struct inl_range *best = NULL;
    for (size_t k = lo, seen = 0; k-- > 0 && seen < 65536; seen++) {
        const struct inl_range *r = &t->r[k];
        if (a < r->start || a >= r->end) {
            if (r->depth == 0 && r->end <= a)
                break; /* a function before a's: functions do not overlap, so none before holds a */
            continue;
        }
        if (!best || r->depth > best->depth)
            best = r;
        if (r->depth == 0)
            break;
    }
    int n = 0;
    for (int32_t e = best ? (int32_t)best->entry : -1; e >= 0 && n < max; e = t->e[e].parent) {
        if (D.f.tag(&t->e[e].die) != DW_TAG_inlined_subroutine)
            break;
        calls[n++] = &t->e[e].die;
    }
    return n;
}

int mlprof__unwind_srcpos(uint64_t ip, mlprof__srcpos *out, int max)
{
    int n = 0;
    if (max <= 0)
        return 0;
    if (mlprof__lock_for_dump(&D.lock, &D.dump_gave_up) != 0)
        return -1; /* the crash's dump: said by mlprof__unwind_busy_at_crash */
    if (ready() != 0)
        goto out;
    refreshed_for(ip);
    Dwfl_Module *m = D.dwfl ? D.f.addrmodule(D.dwfl, ip) : NULL;
    if (!m) {
        n = -1; /* in no object of libdw's view (loaded since its last look, at most 100 ms ago) */
        goto out;
    }
    /* ip's own line: by dwfl (the units' .debug_aranges), else the unit
     * found by its ranges */
    Dwfl_Line *l = D.f.module_getsrc(m, ip);
    Dwarf_Addr at, bias = 0;
    int ln = 0, col = 0;
    const char *src = l ? D.f.lineinfo(l, &at, &ln, &col, NULL, NULL) : NULL;
    Dwarf_Die *cu = D.f.module_addrdie(m, ip, &bias);
    if (!cu)
        cu = cu_of(m, ip, &bias);
    if ((!src || ln <= 0) && cu) {
        Dwarf_Line *dl = D.f.getsrc_die(cu, ip - bias);
        const char *s2 = NULL;
        int l2 = 0;
        if (dl && D.f.lineno(dl, &l2) == 0 && l2 > 0 && (s2 = D.f.linesrc(dl, NULL, NULL)) != NULL) {
            src = s2;
            ln = l2;
        }
    }
    if (!src || !src[0] || ln <= 0) { /* no line (line 0: code the compiler made); its inlined calls still count */
        src = "";
        ln = 0;
    }
    /* the calls inlined at ip, innermost first, up to the function that
     * holds them; the outermost entry gets the line of its first inlined
     * call, each inlined function that of the next, the innermost ip's own */
    Dwarf_Die *calls[64];
    int ncalls = cu ? inlined_at(cu, ip - bias, calls, 64) : 0;
    int ninl = ncalls < max - 1 ? ncalls : max - 1; /* the innermost calls are kept: ip lies in them */
    if (!ln && !ninl)
        goto out; /* nothing known */
    n = ninl + 1;
    mlprof__srcpos *inner = &out[n - 1];
    inner->name[0] = '\0';
    copy_text(inner->file, sizeof inner->file, src);
    inner->line = ln;
    for (int i = 0; i < ninl; i++) { /* out[n-1-i] is calls[i]'s function, out[n-2-i] its caller */
        call_site(cu, calls[i], &out[n - 2 - i]);
        copy_text(out[n - 1 - i].name, sizeof out[n - 1 - i].name, die_name(calls[i]));
        out[n - 2 - i].name[0] = '\0';
    }
    if (ncalls > ninl) /* more inlined calls than max: the outermost kept is one of them */
        copy_text(out[0].name, sizeof out[0].name, die_name(calls[ninl]));
out:
    pthread_mutex_unlock(&D.lock);
    return n;
}

int mlprof__unwind_symbol(uint64_t ip, char *name, size_t len)
{
    int found = 0;
    if (mlprof__lock_for_dump(&D.lock, &D.dump_gave_up) != 0)
        return 0;
    if (ready() == 0) {
        refreshed_for(ip);
        Dwfl_Module *m = D.dwfl ? D.f.addrmodule(D.dwfl, ip) : NULL;
        const char *sym = m ? D.f.module_addrname(m, ip) : NULL; /* the debug info's symbols too */
        if (sym && sym[0]) {
            snprintf(name, len, "%s", sym);
            found = 1;
        }
    }
    pthread_mutex_unlock(&D.lock);
    return found;
}

int mlprof__unwind_busy_at_crash(void)
{
    if (!__atomic_load_n(&mlprof__crashing, __ATOMIC_ACQUIRE))
        return 0;
    if (mlprof__lock_for_dump(&D.lock, &D.dump_gave_up) != 0)
        return 1;
    pthread_mutex_unlock(&D.lock);
    return 0;
}

void mlprof__unwind_after_fork(void)
{
    /* the parent's reader may have held the lock at the fork; the Dwfl
     * describes the parent (its pid): let it go without freeing (another
     * thread of the parent may have been inside it), and build anew */
    pthread_mutex_init(&D.lock, NULL);
    D.dwfl = NULL; /* built again at the next use, for this process */
    D.ncus = 0;    /* (their memory is left: the old Dwfl's units) */
    D.inl = NULL;  /* the same for the units' inlined calls */
    D.ninl = D.cap_inl = D.inl_last = 0;
}
