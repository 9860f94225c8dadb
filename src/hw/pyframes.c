/*
 * pyframes.c - the Python frames of a sampled thread (pyframes.h).
 *
 * Capture runs in a signal handler on the sampled thread: it finds the
 * thread's PyThreadState through PyGILState_GetThisThreadState (in 3.10 to
 * 3.12 a read of the runtime's gilstate and a pthread_getspecific, no lock,
 * no allocation) and follows its frame chain with plain loads, using the
 * struct offsets of that CPython version. It reads only the frames (which
 * live on the thread's own data stack, in generators, or in frame objects,
 * and which only this thread changes), never the code objects: those are
 * read later, on the reader thread, through process_vm_readv, so a code
 * object freed since the sample reads as a failed read and not as a fault.
 *
 * The offsets are facts from each version's headers (Include/cpython/
 * pystate.h, code.h, frameobject.h, Include/internal/pycore_frame.h),
 * for LP64 release builds (measured on x86-64 with offsetof against each
 * version's installed headers). mlprof__pyframes_init checks them against the running interpreter
 * before anything is captured: it calls a Python function that calls back
 * into C, captures there, and compares frame for frame with what
 * PyEval_GetFrame and PyFrame_GetBack say (code objects, lines, names,
 * files). An unknown version, or one that fails, is refused with a message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "pyframes.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define read_mem mlprof__pyframes_read

/* ------------------------------------------------------------- layouts */

typedef struct layout {
    int minor;          /* 3.minor */
    int ts_frame;       /* 3.10: PyThreadState.frame (the current PyFrameObject); else -1 */
    int ts_cframe;      /* 3.11, 3.12: PyThreadState.cframe; else -1 */
    int cf_current;     /* _PyCFrame.current_frame; 3.13: PyThreadState.current_frame */
    int fr_code;        /* the frame's code object */
    int fr_previous;    /* the caller's frame (f_back in 3.10) */
    int fr_instr;       /* 3.11, 3.12: prev_instr, 3.13: instr_ptr (pointers: the code unit each version's
                         * _PyInterpreterFrame_LASTI counts from); 3.10: f_lasti (an int, in code units) */
    int fr_is_entry;    /* 3.11: is_entry (a bool); else -1 */
    int fr_owner;       /* 3.12+: owner (a char); else -1 */
    int owner_cstack;   /* 3.12+: FRAME_OWNED_BY_CSTACK */
    int co_firstlineno; /* int */
    int co_filename;    /* str */
    int co_name;        /* str: co_qualname from 3.11 */
    int co_linetable;   /* bytes */
    int co_code;        /* 3.11+: co_code_adaptive, the instructions, inside the code object */
    int ascii_size;     /* sizeof(PyASCIIObject): where an ASCII compact str's characters start */
    int compact_size;   /* sizeof(PyCompactUnicodeObject): the same for the other compact ones */
} layout;

/* Common to all four: PyObject.ob_type at 8, PyVarObject.ob_size at 16,
 * PyBytesObject.ob_sval at 32, PyASCIIObject.length at 16 and .state at 32. */
static const layout LAYOUTS[] = {
    {10, 24, -1, -1, 32, 24, 96, -1, -1, -1, 40, 104, 112, 120, -1, 48, 72},
    {11, -1, 56, 8, 32, 48, 56, 68, 69, -1, 72, 112, 128, 136, 184, 48, 72},
    {12, -1, 56, 0, 0, 8, 56, -1, 70, 3, 68, 112, 128, 136, 192, 40, 56},
    {13, -1, -1, 72, 0, 8, 56, -1, 70, 3, 68, 112, 128, 136, 200, 40, 56},
};

/* The Python C API, found with dlsym in the running process. */
typedef void *(*fn_ptr)(void);
static struct {
    int (*is_initialized)(void);
    const char *(*get_version)(void);
    void *(*this_thread_state)(void);
    int (*gil_ensure)(void);
    void (*gil_release)(int);
    int (*gil_check)(void);
    void *(*run_string)(const char *, int, void *, void *);
    void *(*dict_new)(void);
    int (*dict_set)(void *, const char *, void *);
    void *(*dict_get)(void *, const char *);
    void *(*builtins)(void);
    void *(*cfunction_new)(void *, void *, void *);
    void *(*call)(void *, ...);
    void *(*get_frame)(void);
    void *(*frame_code)(void *);
    void *(*frame_back)(void *);
    int (*frame_line)(void *);
    void *(*getattr)(void *, const char *);
    const char *(*as_utf8)(void *);
    void (*incref)(void *);
    void (*decref)(void *);
    void (*err_clear)(void);
    void *none;
    void *code_type;
} Py;

/* Set once init succeeded; read by the handler (acquire). */
static const layout *g_layout;
static char g_version[16];
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_init_why[512];

const char *mlprof__pyframes_version(void) { return __atomic_load_n(&g_layout, __ATOMIC_ACQUIRE) ? g_version : ""; }

/* ------------------------------------------------------------- capture */

static int g_vm_readv = -1; /* process_vm_readv works here: 1; refused (seccomp): 0; not yet known: -1 */

/* One load of the walk. In the self-test, with a layout not yet trusted,
 * through read_mem (a wrong offset reads as a failed walk, never as a
 * fault). In the handler (safe 2), through process_vm_readv alone (a system
 * call, async-signal-safe, no lock): the interrupted thread may be halfway
 * through pushing or popping a frame, and a frame's memory may just have
 * been unmapped (a data-stack chunk): a plain load there would kill the
 * program (seen once on a loaded machine). Where process_vm_readv is
 * refused, plain loads, as before the check. */
static inline __attribute__((always_inline)) int load(int safe, const char *p, size_t size, uint64_t *v)
{
    if (safe == 2 && __atomic_load_n(&g_vm_readv, __ATOMIC_RELAXED) == 1) {
        *v = 0;
        struct iovec local = {v, size}, remote = {(void *)(uintptr_t)p, size};
        return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)size ? 0 : -1;
    }
    if (safe == 1) {
        *v = 0;
        return read_mem((uint64_t)(uintptr_t)p, v, size);
    }
    *v = size == 8 ? *(const uint64_t *)p : size == 4 ? *(const uint32_t *)p : *(const unsigned char *)p;
    return 0;
}

#define LOAD(p, size, v)                                                                                               \
    do {                                                                                                               \
        if (load(safe, (p), (size), &(v)) != 0)                                                                        \
            goto broken;                                                                                               \
    } while (0)

static inline __attribute__((always_inline)) size_t capture_with(const layout *L, uint64_t *out, size_t max,
                                                                 int safe)
{
    if (!L || max < 3 || !Py.this_thread_state)
        return 0;
    const char *ts = Py.this_thread_state();
    if (!ts)
        return 0; /* a thread Python never saw */
    uint64_t v, f, truncated = 0;
    size_t cap = (max - 1) / 2, n = 0;
    if (L->ts_frame >= 0) {
        LOAD(ts + L->ts_frame, 8, f);
    } else if (L->ts_cframe < 0) { /* 3.13: the current frame in the thread state itself */
        LOAD(ts + L->cf_current, 8, f);
    } else {
        LOAD(ts + L->ts_cframe, 8, v);
        if (!v)
            return 0;
        LOAD((const char *)(uintptr_t)v + L->cf_current, 8, f);
    }
    for (int depth = 0; f; depth++) {
        const char *fp = (const char *)(uintptr_t)f;
        if ((f & 7) != 0 || depth >= MLPROF__PYFRAMES_MAX) /* not a frame, or a cycle */
            goto broken;
        if (L->fr_owner >= 0 && L->owner_cstack >= 0) {
            LOAD(fp + L->fr_owner, 1, v);
            if ((signed char)v == L->owner_cstack) {
                /* 3.12's entry shim: the frame before it ran in this eval call */
                if (n)
                    out[2 + 2 * (n - 1)] |= 1ull << 32;
                LOAD(fp + L->fr_previous, 8, f);
                continue;
            }
        }
        if (n == cap) {
            truncated = 1;
            break;
        }
        uint64_t code, entry = 1;
        int64_t off;
        LOAD(fp + L->fr_code, 8, code);
        if (L->co_code < 0) { /* 3.10: f_lasti counts code units; every frame has its own eval call */
            LOAD(fp + L->fr_instr, 4, v);
            off = 2 * (int64_t)(int32_t)(uint32_t)v;
        } else {
            LOAD(fp + L->fr_instr, 8, v);
            off = (int64_t)(v - (code + (uint64_t)L->co_code));
            entry = 0;
            if (L->fr_is_entry >= 0) {
                LOAD(fp + L->fr_is_entry, 1, v);
                entry = v != 0;
            }
        }
        if (off < INT32_MIN || off > INT32_MAX)
            off = -1;
        out[1 + 2 * n] = code;
        out[2 + 2 * n] = (uint64_t)(uint32_t)(int32_t)off | entry << 32;
        n++;
        LOAD(fp + L->fr_previous, 8, f);
    }
    if (0) {
broken: /* a pointer that is no frame's: what was walked so far, said cut */
        truncated = 1;
    }
    if (!n)
        return 0;
    out[0] = MLPROF__PYFRAMES_MAGIC | truncated << 31 | n;
    return 1 + 2 * n;
}

size_t mlprof__pyframes_capture(uint64_t *out, size_t max)
{
    return capture_with(__atomic_load_n(&g_layout, __ATOMIC_ACQUIRE), out, max, 2);
}

size_t mlprof__pyframes_decode(const uint64_t *words, size_t nwords, mlprof__pyframe *out, size_t max,
                               size_t *used, int *truncated)
{
    *used = 0;
    if (truncated)
        *truncated = 0;
    if (nwords < 1 || (words[0] & 0xffffff0000000000ull) != MLPROF__PYFRAMES_MAGIC)
        return 0;
    size_t n = (size_t)(words[0] & 0x7fffffffu);
    if (n > (nwords - 1) / 2)
        return 0;
    *used = 1 + 2 * n;
    if (truncated)
        *truncated = (words[0] >> 31) & 1;
    size_t k = 0;
    for (size_t i = 0; i < n && k < max; i++, k++) {
        out[k].code = words[1 + 2 * i];
        out[k].offset = (int32_t)(uint32_t)words[2 + 2 * i];
        out[k].entry = (int)((words[2 + 2 * i] >> 32) & 1);
    }
    if (k < n && truncated)
        *truncated = 1;
    return k;
}

/* ------------------------------------------------------- reading safely */

int mlprof__pyframes_read(uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got == (ssize_t)len)
        return 0;
    if (got >= 0 || (errno != ENOSYS && errno != EPERM))
        return -1;
    /* process_vm_readv refused (a seccomp filter): write() through a pipe
     * says EFAULT instead of faulting on memory that is gone */
    static pthread_mutex_t pipe_lock = PTHREAD_MUTEX_INITIALIZER;
    static int fds[2] = {-1, -1};
    int rc = 0;
    pthread_mutex_lock(&pipe_lock);
    if (fds[0] < 0 && pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        fds[0] = -1;
        rc = -1;
    }
    for (size_t done = 0; rc == 0 && done < len;) {
        size_t chunk = len - done > 4096 ? 4096 : len - done;
        ssize_t w = write(fds[1], (const char *)(uintptr_t)addr + done, chunk);
        if (w <= 0 || read(fds[0], (char *)buf + done, (size_t)w) != w)
            rc = -1;
        else
            done += (size_t)w;
    }
    if (rc != 0 && fds[0] >= 0) { /* what a write cut short left in the pipe: not the next read's */
        char junk[256];
        while (read(fds[0], junk, sizeof junk) > 0)
            ;
    }
    pthread_mutex_unlock(&pipe_lock);
    return rc;
}

static int read_u64(uint64_t addr, uint64_t *v) { return read_mem(addr, v, sizeof *v); }

/* A str object as UTF-8 (compact ones: all that code objects hold). */
static int read_str(const layout *L, uint64_t s, char *out, size_t len)
{
    unsigned char h[80];
    out[0] = '\0';
    if (!s || read_mem(s, h, (size_t)L->compact_size) != 0)
        return -1;
    int64_t n;
    uint32_t state;
    memcpy(&n, h + 16, sizeof n);
    memcpy(&state, h + 32, sizeof state);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || n < 0 || (kind != 1 && kind != 2 && kind != 4))
        return -1;
    if (n > 1024)
        n = 1024; /* a name or a path: enough of it */
    unsigned char raw[4096];
    if (read_mem(s + (uint64_t)(ascii ? L->ascii_size : L->compact_size), raw, (size_t)n * kind) != 0)
        return -1;
    size_t o = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t c = kind == 1 ? raw[i] : kind == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
                                                     : (uint32_t)(raw[4 * i] | raw[4 * i + 1] << 8 |
                                                                  raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24);
        unsigned char u[4];
        size_t k;
        if (c < 0x80)
            u[0] = (unsigned char)c, k = 1;
        else if (c < 0x800)
            u[0] = (unsigned char)(0xc0 | c >> 6), u[1] = (unsigned char)(0x80 | (c & 63)), k = 2;
        else if (c < 0x10000)
            u[0] = (unsigned char)(0xe0 | c >> 12), u[1] = (unsigned char)(0x80 | (c >> 6 & 63)),
            u[2] = (unsigned char)(0x80 | (c & 63)), k = 3;
        else
            u[0] = (unsigned char)(0xf0 | (c >> 18 & 7)), u[1] = (unsigned char)(0x80 | (c >> 12 & 63)),
            u[2] = (unsigned char)(0x80 | (c >> 6 & 63)), u[3] = (unsigned char)(0x80 | (c & 63)), k = 4;
        if (o + k + 1 > len)
            break;
        memcpy(out + o, u, k);
        o += k;
    }
    out[o] = '\0';
    return 0;
}

/* ---------------------------------------------------------- line tables */

/* 3.10's co_linetable: (bytes advanced, lines advanced) pairs, unsigned
 * and signed bytes; a line delta of -128 marks code with no line. */
static int line_310(const unsigned char *t, size_t len, int first, int32_t off)
{
    if (off < 0)
        return first;
    int line = first, end = 0;
    for (size_t i = 0; i + 1 < len; i += 2) {
        int start = end;
        end += t[i];
        int ld = (signed char)t[i + 1];
        int here = -1;
        if (ld != -128) {
            line += ld;
            here = line;
        }
        if (start <= off && off < end)
            return here;
    }
    return -1;
}

/* 3.11 and 3.12's location table (Objects/locations.md): entries start with
 * a byte with its top bit set, code (bits 3-6) and length in code units
 * minus one (bits 0-2); the line delta comes from the code: 15 no
 * location, 14 long form and 13 no columns (a signed varint follows),
 * 10-12 one line forms (delta code-10), 0-9 short forms (same line). */
static unsigned varint(const unsigned char *t, size_t len, size_t *i)
{
    unsigned v = 0, shift = 0;
    while (*i < len) {
        unsigned char b = t[(*i)++];
        v |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64) || shift > 24)
            break;
    }
    return v;
}

static int line_311(const unsigned char *t, size_t len, int first, int32_t off)
{
    if (off < 0)
        return first;
    int line = first;
    int32_t end = 0;
    size_t i = 0;
    while (i < len) {
        unsigned char b = t[i];
        int code = (b >> 3) & 15;
        int32_t start = end;
        end += ((b & 7) + 1) * 2;
        size_t j = i + 1;
        if (code == 13 || code == 14) {
            unsigned u = varint(t, len, &j);
            line += (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
        } else if (code >= 10 && code <= 12) {
            line += code - 10;
        }
        if (start <= off && off < end)
            return code == 15 ? -1 : line;
        for (i = i + 1; i < len && !(t[i] & 128); i++) /* the next entry */
            ;
    }
    return -1;
}

/* ---------------------------------------------------------------- cache */

typedef struct code_info {
    uint64_t code; /* 0: a free slot */
    int ok;
    int moved; /* in the old generation: taken into the young one (its memory with it) */
    int firstlineno;
    char *name, *file;
    unsigned char *table;
    size_t table_len;
    size_t bytes;         /* what name, file and table take (the generation's budget) */
    uint64_t sig[4];      /* ob_type, co_filename, co_name, co_linetable as read: changed, another code object */
    uint64_t checked_ns;  /* when they were last read */
} code_info;

/* A code object freed and another made at its address (code run by exec,
 * lambdas, imports) must not keep the first one's name: an entry is read
 * again when it was last checked longer ago than this, a little less than
 * the reader's period, so each drain checks the code objects it meets once
 * (one process_vm_readv each). What it cannot see: a code object freed and
 * its address reused between a sample and the drain that names it. */
#define RECHECK_NS 2000000ull

/* Programs that keep making code (torch.fx's "<eval_with_key>.N", exec'd
 * strings) would grow a plain cache for the life of the process. Two
 * generations instead, each a fixed table: entries go into the young one;
 * when it is full (entries or bytes) the old one is freed (its entries
 * counted as evicted) and the young one becomes old. A code object met in
 * the old one moves to the young one, so the ones still sampled stay and a
 * hit in the young one costs what it did. */
#define GEN_SLOTS (2 * MLPROF__PYFRAMES_GEN_ENTRIES) /* open addressing, at most half full */
#define TABLE_MAX (1u << 20) /* a longer line table is not kept: the frame gets no line */

typedef struct gen {
    code_info *slots; /* GEN_SLOTS, or NULL before the first use */
    size_t used, bytes;
} gen;

static struct {
    pthread_mutex_t lock;
    gen g[2]; /* young, old */
    size_t failed, reloaded, evicted;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER};

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Reads the fixed part of a code object (one read): 0, or -1 when it is
 * gone or is no code object. */
static int read_sig(const layout *L, uint64_t c, uint64_t sig[4], int32_t *first)
{
    unsigned char co[160]; /* past co_linetable in all layouts */
    if (read_mem(c, co, (size_t)L->co_linetable + 8) != 0)
        return -1;
    memcpy(&sig[0], co + 8, 8);
    memcpy(&sig[1], co + L->co_filename, 8);
    memcpy(&sig[2], co + L->co_name, 8);
    memcpy(&sig[3], co + L->co_linetable, 8);
    memcpy(first, co + L->co_firstlineno, 4);
    return sig[0] == (uint64_t)(uintptr_t)Py.code_type ? 0 : -1;
}

static void free_code(code_info *ci)
{
    free(ci->name);
    free(ci->file);
    free(ci->table);
    ci->name = ci->file = NULL;
    ci->table = NULL;
    ci->table_len = ci->bytes = 0;
}

/* Reads one code object into ci (ci->code set; what it held freed). */
static void load_code(const layout *L, code_info *ci)
{
    uint64_t size = 0;
    int32_t first;
    char buf[4096];
    free_code(ci);
    ci->ok = 0;
    ci->checked_ns = mono_ns();
    memset(ci->sig, 0, sizeof ci->sig);
    if (read_sig(L, ci->code, ci->sig, &first) != 0 || read_u64(ci->sig[3] + 16, &size) != 0)
        return;
    ci->firstlineno = first;
    if (size <= TABLE_MAX) { /* else no table: the name without a line */
        ci->table = malloc(size ? size : 1);
        if (!ci->table)
            return;
        if (read_mem(ci->sig[3] + 32, ci->table, size) != 0)
            return;
        ci->table_len = size;
    }
    ci->name = read_str(L, ci->sig[2], buf, sizeof buf) == 0 ? dup_str(buf) : NULL;
    ci->file = read_str(L, ci->sig[1], buf, sizeof buf) == 0 ? dup_str(buf) : NULL;
    ci->ok = ci->name && ci->file;
    ci->bytes = ci->table_len + (ci->name ? strlen(ci->name) + 1 : 0) + (ci->file ? strlen(ci->file) + 1 : 0);
}

static code_info *probe_gen(gen *g, uint64_t code)
{
    size_t h = (size_t)(code * 0x9e3779b97f4a7c15ull >> 20) & (GEN_SLOTS - 1);
    while (g->slots[h].code && g->slots[h].code != code)
        h = (h + 1) & (GEN_SLOTS - 1);
    return &g->slots[h];
}

/* Frees what a generation holds; its table stays (all free slots). */
static size_t gen_empty(gen *g)
{
    size_t n = 0;
    for (size_t i = 0; g->slots && i < GEN_SLOTS; i++) {
        n += g->slots[i].code && !g->slots[i].moved;
        free_code(&g->slots[i]);
    }
    if (g->slots)
        memset(g->slots, 0, GEN_SLOTS * sizeof *g->slots);
    g->used = g->bytes = 0;
    return n;
}

static code_info *lookup(const layout *L, uint64_t code)
{
    gen *y = &C.g[0], *o = &C.g[1];
    if (!y->slots && !(y->slots = calloc(GEN_SLOTS, sizeof *y->slots)))
        return NULL;
    code_info *ci = probe_gen(y, code);
    if (!ci->code) {
        if (y->used >= MLPROF__PYFRAMES_GEN_ENTRIES || y->bytes >= MLPROF__PYFRAMES_GEN_BYTES) {
            C.evicted += gen_empty(o); /* the old generation goes, the young one becomes old */
            gen t = *o;
            *o = *y;
            *y = t;
            if (!y->slots && !(y->slots = calloc(GEN_SLOTS, sizeof *y->slots)))
                return NULL;
            ci = probe_gen(y, code);
        }
        code_info *was = o->slots ? probe_gen(o, code) : NULL;
        ci->code = code;
        y->used++;
        if (was && was->code && !was->moved) { /* still in use: moves, checked below as any other */
            ci->ok = was->ok;
            ci->firstlineno = was->firstlineno;
            ci->name = was->name;
            ci->file = was->file;
            ci->table = was->table;
            ci->table_len = was->table_len;
            ci->bytes = was->bytes;
            memcpy(ci->sig, was->sig, sizeof ci->sig);
            ci->checked_ns = was->checked_ns;
            was->moved = 1; /* code kept: later probes of the old table go past it */
            was->name = was->file = NULL;
            was->table = NULL;
            o->bytes -= was->bytes;
            o->used--;
            was->bytes = 0;
            y->bytes += ci->bytes;
        } else {
            load_code(L, ci);
            y->bytes += ci->bytes;
            C.failed += !ci->ok;
            return ci;
        }
    }
    if (mono_ns() - ci->checked_ns > RECHECK_NS) { /* still the same code object? */
        uint64_t sig[4];
        int32_t first;
        if (read_sig(L, code, sig, &first) != 0 || memcmp(sig, ci->sig, sizeof sig) != 0 || first != ci->firstlineno) {
            y->bytes -= ci->bytes;
            load_code(L, ci);
            y->bytes += ci->bytes;
            C.reloaded++;
            C.failed += !ci->ok;
        } else {
            ci->checked_ns = mono_ns();
        }
    }
    return ci;
}

static int resolve_with(const layout *L, uint64_t code, int32_t offset, char *name, size_t name_len, char *file,
                        size_t file_len, int *line)
{
    snprintf(name, name_len, "?");
    snprintf(file, file_len, "?");
    *line = -1;
    if (!L)
        return -1;
    pthread_mutex_lock(&C.lock);
    code_info *ci = lookup(L, code);
    int ok = ci && ci->ok;
    if (ok) {
        snprintf(name, name_len, "%s", ci->name);
        snprintf(file, file_len, "%s", ci->file);
        *line = L->co_code < 0 ? line_310(ci->table, ci->table_len, ci->firstlineno, offset)
                               : line_311(ci->table, ci->table_len, ci->firstlineno, offset);
    }
    pthread_mutex_unlock(&C.lock);
    return ok ? 0 : -1;
}

int mlprof__pyframes_resolve(uint64_t code, int32_t offset, char *name, size_t name_len, char *file,
                             size_t file_len, int *line)
{
    return resolve_with(__atomic_load_n(&g_layout, __ATOMIC_ACQUIRE), code, offset, name, name_len, file, file_len,
                        line);
}

/* Forgets what the cache holds (C.lock held): after a failed self-test
 * (read with a layout found wrong), and at mlprof's reset. */
static void cache_clear_locked(void)
{
    for (int i = 0; i < 2; i++) {
        gen_empty(&C.g[i]);
        free(C.g[i].slots);
        C.g[i].slots = NULL;
    }
    C.failed = C.reloaded = C.evicted = 0;
}

static void cache_clear(void)
{
    pthread_mutex_lock(&C.lock);
    cache_clear_locked();
    pthread_mutex_unlock(&C.lock);
}

void mlprof__pyframes_stats(size_t *cached, size_t *failed, size_t *reread)
{
    pthread_mutex_lock(&C.lock);
    *cached = C.g[0].used + C.g[1].used;
    *failed = C.failed;
    *reread = C.reloaded;
    pthread_mutex_unlock(&C.lock);
}

void mlprof__pyframes_label(const mlprof__pyframe *f, char *out, size_t len)
{
    char name[512], file[1024];
    int line;
    if (mlprof__pyframes_resolve(f->code, f->offset, name, sizeof name, file, sizeof file, &line) != 0) {
        snprintf(out, len, "? (python code 0x%llx, gone)", (unsigned long long)f->code);
        return;
    }
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (line >= 0)
        snprintf(out, len, "%s (%s:%d)", name, base, line);
    else
        snprintf(out, len, "%s (%s)", name, base);
}

int mlprof__pyframes_is_eval(const char *symbol)
{
    /* .cold and other suffixes a compiler adds to a split function count too */
    return strncmp(symbol, "_PyEval_EvalFrameDefault", 24) == 0 || strncmp(symbol, "PyEval_EvalFrameEx", 18) == 0;
}

size_t mlprof__pyframes_interleave(const unsigned char *is_eval, size_t nnative, const mlprof__pyframe *py,
                                   size_t npy, int32_t *out, size_t max)
{
    size_t n = 0, p = 0;
    for (size_t i = 0; i < nnative && n < max; i++) {
        if (!is_eval[i] || p == npy) {
            out[n++] = (int32_t)i;
            continue;
        }
        do { /* the frames this call of the eval loop ran, leaf first */
            out[n++] = -1 - (int32_t)p;
        } while (!py[p++].entry && p < npy && n < max);
    }
    while (p < npy && n < max) /* the native stack ended first */
        out[n++] = -1 - (int32_t)p++;
    return n;
}

/* ----------------------------------------------------------------- tags */

/* The names tags stand for, interned (reader side, under C.lock). A
 * stored sample keeps its Python frames as tags (ids here), named only when
 * the trace is written: the names live until mlprof's reset clears them
 * with the samples, and stay bounded meanwhile (a name past the bound is
 * NAMES_FULL, counted). The epoch, in each tag, makes a tag made before a
 * reset name "?" and not whichever name took its id since. */
#define NAMES_FULL (UINT32_MAX - 1)
#define NAMES_NONE UINT32_MAX /* out of memory: "?" */
static struct {
    char **name;
    size_t n, cap, bytes, dropped;
    uint32_t *head; /* hash of the name: index + 1 */
    size_t nhead;
    uint64_t epoch; /* 16 bits of it in each tag */
} N;

static uint64_t eval_start, eval_end; /* _PyEval_EvalFrameDefault's extent, or 0 */

static uint32_t intern_locked(const char *s)
{
    if (N.n * 2 >= N.nhead) {
        size_t nh = N.nhead ? 2 * N.nhead : 1024;
        uint32_t *h = calloc(nh, sizeof *h);
        if (!h)
            return NAMES_NONE;
        for (size_t i = 0; i < N.n; i++) {
            size_t k = 2166136261u;
            for (const char *p = N.name[i]; *p; p++)
                k = (k ^ (unsigned char)*p) * 16777619u;
            while (h[k & (nh - 1)])
                k++;
            h[k & (nh - 1)] = (uint32_t)i + 1;
        }
        free(N.head);
        N.head = h;
        N.nhead = nh;
    }
    size_t k = 2166136261u;
    for (const char *p = s; *p; p++)
        k = (k ^ (unsigned char)*p) * 16777619u;
    for (; N.head[k & (N.nhead - 1)]; k++) {
        uint32_t i = N.head[k & (N.nhead - 1)] - 1;
        if (strcmp(N.name[i], s) == 0)
            return i;
    }
    size_t len = strlen(s) + 1;
    if (N.n >= MLPROF__PYFRAMES_NAMES_MAX || N.bytes + len > MLPROF__PYFRAMES_NAMES_BYTES) {
        N.dropped++;
        return NAMES_FULL;
    }
    if (N.n == N.cap) {
        size_t cap = N.cap ? 2 * N.cap : 256;
        char **g = realloc(N.name, cap * sizeof *g);
        if (!g)
            return NAMES_NONE;
        N.name = g;
        N.cap = cap;
    }
    char *d = dup_str(s);
    if (!d)
        return NAMES_NONE;
    N.name[N.n] = d;
    N.bytes += len;
    N.head[k & (N.nhead - 1)] = (uint32_t)N.n + 1;
    return (uint32_t)N.n++;
}

static uint64_t tag_of(const mlprof__pyframe *f)
{
    char label[600];
    mlprof__pyframes_label(f, label, sizeof label);
    pthread_mutex_lock(&C.lock);
    uint64_t id = intern_locked(label), epoch = N.epoch & 0xffff;
    pthread_mutex_unlock(&C.lock);
    return MLPROF__PYFRAMES_TAG | epoch << 36 | id << 4 | 8;
}

int mlprof__pyframes_is_tag(uint64_t ip) { return (ip & MLPROF__PYFRAMES_TAG_MASK) == MLPROF__PYFRAMES_TAG; }

void mlprof__pyframes_tag_name(uint64_t ip, char *out, size_t len)
{
    uint64_t id = (ip >> 4) & 0xffffffffu, epoch = (ip >> 36) & 0xffff;
    pthread_mutex_lock(&C.lock);
    int mine = mlprof__pyframes_is_tag(ip) && epoch == (N.epoch & 0xffff);
    snprintf(out, len, "%s",
             !mine                ? "?"
             : id == NAMES_FULL   ? "? (mlprof's table of Python frame names was full)"
             : id < N.n           ? N.name[id]
                                  : "?");
    pthread_mutex_unlock(&C.lock);
}

void mlprof__pyframes_reset(void)
{
    pthread_mutex_lock(&C.lock);
    cache_clear_locked();
    for (size_t i = 0; i < N.n; i++)
        free(N.name[i]);
    free(N.name);
    free(N.head);
    N.name = NULL;
    N.head = NULL;
    N.n = N.cap = N.bytes = N.dropped = N.nhead = 0;
    N.epoch++;
    pthread_mutex_unlock(&C.lock);
}

void mlprof__pyframes_bounds(mlprof__pyframes_bounds_t *b)
{
    pthread_mutex_lock(&C.lock);
    b->code_objects = C.g[0].used + C.g[1].used;
    b->code_bytes = C.g[0].bytes + C.g[1].bytes;
    b->evicted = C.evicted;
    b->names = N.n;
    b->names_bytes = N.bytes;
    b->names_dropped = N.dropped;
    pthread_mutex_unlock(&C.lock);
}

void mlprof__pyframes_fake_python(int minor, const void *code_type)
{
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++) {
        if (LAYOUTS[i].minor == minor) {
            Py.code_type = (void *)(uintptr_t)code_type;
            __atomic_store_n(&g_layout, &LAYOUTS[i], __ATOMIC_RELEASE);
        }
    }
}

size_t mlprof__pyframes_tag(const uint64_t *ips, size_t nips, const uint64_t *extra, size_t nextra, uint64_t *out,
                            size_t max)
{
    mlprof__pyframe py[MLPROF__PYFRAMES_MAX];
    size_t used;
    size_t np = mlprof__pyframes_decode(extra, nextra, py, MLPROF__PYFRAMES_MAX, &used, NULL);
    unsigned char is_eval[MLPROF__PYFRAMES_MAX];
    int32_t order[2 * MLPROF__PYFRAMES_MAX];
    if (nips > MLPROF__PYFRAMES_MAX)
        nips = MLPROF__PYFRAMES_MAX;
    for (size_t i = 0; i < nips; i++) {
        uint64_t a = ips[i] - (i > 0); /* a caller's return address: the call is before it */
        is_eval[i] = np && eval_start && a >= eval_start && a < eval_end;
    }
    size_t no = mlprof__pyframes_interleave(is_eval, nips, py, np, order, sizeof order / sizeof order[0]);
    size_t n = 0;
    for (size_t k = 0; k < no && n < max; k++)
        out[n++] = order[k] >= 0 ? ips[order[k]] : tag_of(&py[-1 - order[k]]);
    return n;
}

/* ------------------------------------------------------------ self-test */

/* PyMethodDef, field for field. */
typedef struct method_def {
    const char *name;
    void *(*fn)(void *, void *);
    int flags;
    const char *doc;
} method_def;

static struct {
    const layout *L;
    char why[256];
    int done;
} T;

static int test_fail(const char *fmt, const char *a, const char *b, int x, int y)
{
    snprintf(T.why, sizeof T.why, fmt, a, b, x, y);
    return -1;
}

/* Compares the frames captured here with the interpreter's own view. */
static int compare_here(void)
{
    const layout *L = T.L;
    uint64_t words[1 + 2 * 64];
    mlprof__pyframe fr[64];
    size_t used;
    size_t nw = capture_with(L, words, sizeof words / sizeof words[0], 1);
    size_t n = mlprof__pyframes_decode(words, nw, fr, 64, &used, NULL);
    if (n < 2)
        return test_fail("found %s%s%d frames of the 2 or more expected", "", "", (int)n, 0);
    void *f = Py.get_frame(); /* borrowed */
    if (f)
        Py.incref(f);
    size_t i = 0;
    int rc = 0;
    for (; f && i < n && rc == 0; i++) {
        void *code = Py.frame_code(f);
        int line = Py.frame_line(f);
        char name[512], file[1024];
        int got_line;
        void *qn = Py.getattr(code, L->minor >= 11 ? "co_qualname" : "co_name");
        void *fnm = Py.getattr(code, "co_filename");
        const char *want_name = qn ? Py.as_utf8(qn) : NULL, *want_file = fnm ? Py.as_utf8(fnm) : NULL;
        if ((uint64_t)(uintptr_t)code != fr[i].code)
            rc = test_fail("frame %s%s%d: another code object than the interpreter's (%d frames seen)", "", "",
                           (int)i, (int)n);
        else if (resolve_with(L, fr[i].code, fr[i].offset, name, sizeof name, file, sizeof file, &got_line) != 0)
            rc = test_fail("frame %s%s%d: its code object could not be read (of %d)", "", "", (int)i, (int)n);
        else if (!want_name || !want_file || strcmp(name, want_name) != 0 || strcmp(file, want_file) != 0)
            rc = test_fail("read \"%.60s\" in \"%.80s\" where the interpreter has another name or file (frame %d of %d)",
                           name, file, (int)i, (int)n);
        else if (got_line != line)
            rc = test_fail("%s%sline %d where the interpreter says %d", "", "", got_line, line);
        if (!qn || !fnm)
            Py.err_clear();
        if (qn)
            Py.decref(qn);
        if (fnm)
            Py.decref(fnm);
        Py.decref(code);
        void *back = Py.frame_back(f);
        Py.decref(f);
        f = back;
    }
    if (f)
        Py.decref(f);
    if (rc == 0 && i != n)
        rc = test_fail("%s%scaptured %d frames where the interpreter has %d", "", "", (int)n, (int)i);
    /* _mlprof_probe_b (leaf, called from Python) and _mlprof_probe_a (called from C) */
    if (rc == 0 && L->minor >= 11 && (fr[0].entry || !fr[1].entry))
        rc = test_fail("%s%sentry frames misread (leaf %d, its caller %d; expected 0 and 1)", "", "", fr[0].entry,
                       fr[1].entry);
    return rc;
}

static void *probe(void *self, void *unused)
{
    (void)self;
    (void)unused;
    if (compare_here() == 0)
        T.done = 1;
    Py.incref(Py.none);
    return Py.none;
}

static const char PROBE_SRC[] = "def _mlprof_probe_b(f):\n"
                                "    return f()\n"
                                "\n"
                                "def _mlprof_probe_a(f):\n"
                                "    x = 1\n"
                                "    return _mlprof_probe_b(f)\n";

static int self_test(const layout *L, char *why, size_t len)
{
    static method_def def = {"_mlprof_probe", probe, 0x0004 /* METH_NOARGS */, NULL};
    int g = Py.gil_ensure();
    int rc = -1;
    void *globals = Py.dict_new(), *res = NULL, *fn = NULL;
    T.L = L;
    T.done = 0;
    snprintf(T.why, sizeof T.why, "the probe did not run");
    if (globals && Py.dict_set(globals, "__builtins__", Py.builtins()) == 0)
        res = Py.run_string(PROBE_SRC, 257 /* Py_file_input */, globals, globals);
    void *a = res ? Py.dict_get(globals, "_mlprof_probe_a") : NULL; /* borrowed */
    fn = a ? Py.cfunction_new(&def, NULL, NULL) : NULL;
    void *r = fn ? Py.call(a, fn, NULL) : NULL;
    if (!r)
        Py.err_clear();
    if (T.done)
        rc = 0;
    else
        snprintf(why, len, "Python %s frames: the self-test failed: %.200s", g_version, T.why);
    if (r)
        Py.decref(r);
    if (fn)
        Py.decref(fn);
    if (res)
        Py.decref(res);
    if (globals)
        Py.decref(globals);
    Py.gil_release(g);
    return rc;
}

/* The self-test where the caller does not hold the GIL (mlprof's reader):
 * on a thread of its own, waited for a while, so that an interpreter that
 * never lets go of the GIL, or one finalizing (where PyGILState_Ensure ends
 * the calling thread), costs that thread and not the caller. */
#define SELF_TEST_WAIT_S 10

static struct {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    int state; /* 0 running, 1 finished, 2 abandoned by the waiter */
    int rc;
    const layout *L;
    char why[400];
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *self_test_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "mlprof pyinit"); /* mlprof's own: never sampled */
    char why[400];
    int rc = self_test(R.L, why, sizeof why);
    pthread_mutex_lock(&R.lock);
    if (R.state == 0) {
        R.rc = rc;
        memcpy(R.why, why, sizeof why);
        R.state = 1;
        pthread_cond_broadcast(&R.done_cond);
    }
    pthread_mutex_unlock(&R.lock);
    return NULL;
}

static int find_api(char *why, size_t len)
{
    static const struct {
        void **slot;
        const char *name;
    } fns[] = {
        {(void **)&Py.get_version, "Py_GetVersion"},
        {(void **)&Py.this_thread_state, "PyGILState_GetThisThreadState"},
        {(void **)&Py.gil_ensure, "PyGILState_Ensure"},
        {(void **)&Py.gil_release, "PyGILState_Release"},
        {(void **)&Py.gil_check, "PyGILState_Check"},
        {(void **)&Py.run_string, "PyRun_String"},
        {(void **)&Py.dict_new, "PyDict_New"},
        {(void **)&Py.dict_set, "PyDict_SetItemString"},
        {(void **)&Py.dict_get, "PyDict_GetItemString"},
        {(void **)&Py.builtins, "PyEval_GetBuiltins"},
        {(void **)&Py.cfunction_new, "PyCFunction_NewEx"},
        {(void **)&Py.call, "PyObject_CallFunctionObjArgs"},
        {(void **)&Py.get_frame, "PyEval_GetFrame"},
        {(void **)&Py.frame_code, "PyFrame_GetCode"},
        {(void **)&Py.frame_back, "PyFrame_GetBack"},
        {(void **)&Py.frame_line, "PyFrame_GetLineNumber"},
        {(void **)&Py.getattr, "PyObject_GetAttrString"},
        {(void **)&Py.as_utf8, "PyUnicode_AsUTF8"},
        {(void **)&Py.incref, "Py_IncRef"},
        {(void **)&Py.decref, "Py_DecRef"},
        {(void **)&Py.err_clear, "PyErr_Clear"},
        {&Py.none, "_Py_NoneStruct"},
        {&Py.code_type, "PyCode_Type"},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        *fns[i].slot = dlsym(RTLD_DEFAULT, fns[i].name);
        if (!*fns[i].slot) {
            snprintf(why, len, "this Python has no %s (a Python before 3.9?): no Python frames", fns[i].name);
            return -1;
        }
    }
    return 0;
}

/* Finds the API, the version's layout and the eval loop: 1 (a layout to
 * test in *out), 0 (not a Python process, or not initialized yet: why
 * says), -1 (refused). */
static int prepare(const layout **out, char *why, size_t len)
{
    *(void **)&Py.is_initialized = dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (!Py.is_initialized) {
        snprintf(why, len, "not a Python process");
        return 0;
    }
    if (!Py.is_initialized()) {
        snprintf(why, len, "the Python interpreter is not initialized yet");
        return 0;
    }
    if (find_api(why, len) != 0)
        return -1;
    const char *v = Py.get_version();
    int major = 0, minor = 0;
    if (sscanf(v, "%d.%d", &major, &minor) != 2)
        major = 0;
    /* a test's way to see a version mlprof does not know refused */
    const char *brk = getenv("MLPROF_PYFRAMES_BREAK_LAYOUT");
    if (brk && brk[0] == '2')
        minor = 99;
    snprintf(g_version, sizeof g_version, "%d.%d", major, minor);
    const layout *L = NULL;
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++) {
        if (major == 3 && LAYOUTS[i].minor == minor)
            L = &LAYOUTS[i];
    }
    if (!L) {
        snprintf(why, len, "Python %s (%s): no Python frames (mlprof reads the frames of 3.10 to 3.13)", g_version, v);
        return -1;
    }
    /* a test's way to see a wrong layout refused (and not crash): the
     * caller link read 16 bytes off */
    static layout broken;
    if (brk && brk[0] == '1') {
        broken = *L;
        broken.fr_previous += 16;
        L = &broken;
    }
    /* the eval loop's extent, so the reader knows its frames by address */
    void *ev = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    if (ev && dladdr1(ev, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
        eval_start = (uint64_t)(uintptr_t)ev;
        eval_end = eval_start + sym->st_size;
    }
    *out = L;
    return 1;
}

enum { I_UNTRIED, I_LATER, I_NOPY, I_RUNNING, I_OK, I_REFUSED };
static int g_state;
static struct timespec g_started; /* when the self-test's thread started */

static void finish(const layout *L, int rc, const char *test_why)
{
    if (rc != 0) {
        cache_clear();
        snprintf(g_init_why, sizeof g_init_why, "%s", test_why);
        g_state = I_REFUSED;
        return;
    }
    /* trusted from now on: the handler's loads may start; checked ones
     * where process_vm_readv works */
    uint64_t probe = 0, here = 42;
    struct iovec local = {&probe, sizeof probe}, remote = {&here, sizeof here};
    __atomic_store_n(&g_vm_readv, process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof probe,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&g_layout, L, __ATOMIC_RELEASE);
    snprintf(g_init_why, sizeof g_init_why, "Python %s frames", g_version);
    g_state = I_OK;
}

static int start_test_thread(const layout *L)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&R.done_cond, &ca);
    pthread_condattr_destroy(&ca);
    R.state = 0;
    R.L = L;
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    /* made by mlprof's reader, it has the reader's mask: the program's
     * signals go to the program's threads */
    int rc = pthread_create(&t, &a, self_test_main, NULL);
    pthread_attr_destroy(&a);
    clock_gettime(CLOCK_MONOTONIC, &g_started);
    return rc == 0 ? 0 : -1;
}

/* One step of init (g_init_lock held); wait: for a self-test running on
 * its own thread, up to SELF_TEST_WAIT_S after its start. */
static void step(int wait)
{
    if (g_state == I_UNTRIED || (g_state == I_LATER && Py.is_initialized && Py.is_initialized())) {
        const layout *L = NULL;
        int r = prepare(&L, g_init_why, sizeof g_init_why);
        if (r < 0) {
            g_state = I_REFUSED;
        } else if (r == 0) {
            g_state = Py.is_initialized ? I_LATER : I_NOPY;
        } else if (Py.gil_check()) { /* the caller holds the GIL (a Python thread): here, now */
            char why[400];
            finish(L, self_test(L, why, sizeof why), why);
        } else if (start_test_thread(L) != 0) {
            snprintf(g_init_why, sizeof g_init_why, "Python %s frames: cannot start the self-test's thread",
                     g_version);
            g_state = I_REFUSED;
        } else {
            snprintf(g_init_why, sizeof g_init_why, "Python %s frames: the self-test is running", g_version);
            g_state = I_RUNNING;
        }
    }
    if (g_state != I_RUNNING)
        return;
    struct timespec until = g_started, now;
    until.tv_sec += SELF_TEST_WAIT_S;
    pthread_mutex_lock(&R.lock);
    while (wait && R.state == 0) {
        if (pthread_cond_timedwait(&R.done_cond, &R.lock, &until) == ETIMEDOUT)
            break;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (R.state == 1) {
        finish(R.L, R.rc, R.why);
    } else if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec)) {
        R.state = 2; /* the thread's answer, if it ever comes, is dropped */
        snprintf(g_init_why, sizeof g_init_why,
                 "Python %s frames: the self-test did not get the GIL within %d s (a thread holding it, or the "
                 "interpreter finalizing)", g_version, SELF_TEST_WAIT_S);
        g_state = I_REFUSED;
    }
    pthread_mutex_unlock(&R.lock);
}

static int init(char *why, size_t len, int wait)
{
    pthread_mutex_lock(&g_init_lock);
    step(wait);
    int r = g_state == I_OK ? 1 : g_state == I_REFUSED ? -1 : 0;
    snprintf(why, len, "%s", g_init_why);
    pthread_mutex_unlock(&g_init_lock);
    return r;
}

int mlprof__pyframes_init(char *why, size_t len) { return init(why, len, 1); }

int mlprof__pyframes_init_nowait(char *why, size_t len) { return init(why, len, 0); }

void mlprof__pyframes_after_fork(void)
{
    pthread_mutex_init(&C.lock, NULL);
    pthread_mutex_init(&g_init_lock, NULL);
    pthread_mutex_init(&R.lock, NULL);
}
