/*
 * test_pyframes.c - the parts of src/hw/pyframes.c that need no Python
 * (runs plain and under the sanitizers; tests/pyframes_check.py does the
 * rest inside real interpreters): decoding captured words, interleaving
 * Python frames with native ones py-spy's way, naming the eval loop,
 * staying quiet in a process without Python, and the bounds of the reader's
 * cache and names (code objects made here, laid out as 3.11's).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#endif

#include "../src/hw/pyframes.h"

static int failures;

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                                        \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

/* out as a string: native frames as their index, Python frames as p<index> */
static void show(const int32_t *out, size_t n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && o + 8 < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s%d", i ? " " : "", out[i] < 0 ? "p" : "",
                              out[i] < 0 ? -1 - out[i] : out[i]);
}

static void test_interleave(void)
{
    char s[256];
    int32_t out[32];
    /* 3.11: leaf native frames 0-1 (a C function and the call into it),
     * eval (2) running p0 p1 (p1 the entry), native 3, eval (4) running p2
     * p3 (entry), natives 5-6 (main, _start) */
    unsigned char ev[] = {0, 0, 1, 0, 1, 0, 0};
    mlprof__pyframe py[] = {{1, 0, 0}, {2, 0, 1}, {3, 0, 0}, {4, 0, 1}};
    size_t n = mlprof__pyframes_interleave(ev, 7, py, 4, out, 32);
    show(out, n, s, sizeof s);
    CHECK(strcmp(s, "0 1 p0 p1 3 p2 p3 5 6") == 0);
    /* the native stack cut short (no outer eval frame): the rest at the root */
    n = mlprof__pyframes_interleave(ev, 3, py, 4, out, 32);
    show(out, n, s, sizeof s);
    CHECK(strcmp(s, "0 1 p0 p1 p2 p3") == 0);
    /* more eval frames than runs of Python frames: the extra ones stay */
    unsigned char ev2[] = {1, 1, 0};
    mlprof__pyframe one[] = {{1, 0, 1}};
    n = mlprof__pyframes_interleave(ev2, 3, one, 1, out, 32);
    show(out, n, s, sizeof s);
    CHECK(strcmp(s, "p0 1 2") == 0);
    /* no Python frames: the native stack as it is */
    n = mlprof__pyframes_interleave(ev, 7, py, 0, out, 32);
    show(out, n, s, sizeof s);
    CHECK(strcmp(s, "0 1 2 3 4 5 6") == 0);
    /* a run with no entry frame at its end (a truncated capture) takes the rest */
    mlprof__pyframe open_run[] = {{1, 0, 0}, {2, 0, 0}};
    n = mlprof__pyframes_interleave(ev, 7, open_run, 2, out, 32);
    show(out, n, s, sizeof s);
    CHECK(strcmp(s, "0 1 p0 p1 3 4 5 6") == 0);
    /* never more than max */
    n = mlprof__pyframes_interleave(ev, 7, py, 4, out, 3);
    CHECK(n == 3);
}

static void test_decode(void)
{
    uint64_t w[] = {MLPROF__PYFRAMES_MAGIC | 1ull << 31 | 2, 0x1000, (uint64_t)(uint32_t)-2 | 1ull << 32, 0x2000, 40,
                    99};
    mlprof__pyframe f[4];
    size_t used;
    int trunc;
    size_t n = mlprof__pyframes_decode(w, 6, f, 4, &used, &trunc);
    CHECK(n == 2 && used == 5 && trunc == 1);
    CHECK(f[0].code == 0x1000 && f[0].offset == -2 && f[0].entry == 1);
    CHECK(f[1].code == 0x2000 && f[1].offset == 40 && f[1].entry == 0);
    /* fewer words than the header promises, or no header: nothing */
    CHECK(mlprof__pyframes_decode(w, 4, f, 4, &used, NULL) == 0 && used == 0);
    uint64_t junk[] = {7, 8, 9};
    CHECK(mlprof__pyframes_decode(junk, 3, f, 4, &used, NULL) == 0 && used == 0);
    /* room for one: the rest said truncated, all words still used */
    n = mlprof__pyframes_decode(w, 6, f, 1, &used, &trunc);
    CHECK(n == 1 && used == 5 && trunc == 1);
}

static void test_no_python(void)
{
    char why[256];
    uint64_t w[16];
    CHECK(mlprof__pyframes_init(why, sizeof why) == 0);
    CHECK(strstr(why, "not a Python process") != NULL);
    CHECK(mlprof__pyframes_capture(w, 16) == 0);
    CHECK(strcmp(mlprof__pyframes_version(), "") == 0);
    char name[64], file[64];
    int line;
    CHECK(mlprof__pyframes_resolve(0x1000, 0, name, sizeof name, file, sizeof file, &line) == -1);
    CHECK(strcmp(name, "?") == 0 && line == -1);
    /* without Python frames the reader's interleaving is the native stack */
    uint64_t ips[] = {0x401000, 0x402000, 0x403000}, out[8];
    CHECK(mlprof__pyframes_tag(ips, 3, NULL, 0, out, 8) == 3 && memcmp(out, ips, sizeof ips) == 0);
    CHECK(!mlprof__pyframes_is_tag(0x401000) && mlprof__pyframes_is_tag(MLPROF__PYFRAMES_TAG | 0x18));
    mlprof__pyframes_tag_name(MLPROF__PYFRAMES_TAG | 0x18, name, sizeof name);
    CHECK(strcmp(name, "?") == 0); /* a tag never made */
}

/* Reads a live buffer and a page unmapped: the bytes, then -1 (no fault). */
static int check_reads(void)
{
    int bad = 0;
    char src[5000], dst[5000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (char)(i * 7);
    bad |= mlprof__pyframes_read((uint64_t)(uintptr_t)src, dst, sizeof dst) != 0 || memcmp(src, dst, sizeof src) != 0;
    long page = sysconf(_SC_PAGESIZE);
    void *gone = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gone == MAP_FAILED)
        return 1;
    munmap(gone, (size_t)page);
    bad |= mlprof__pyframes_read((uint64_t)(uintptr_t)gone, dst, 64) != -1;
    /* and a good read after a failed one gets its own bytes */
    bad |= mlprof__pyframes_read((uint64_t)(uintptr_t)src + 1, dst, 100) != 0 || memcmp(src + 1, dst, 100) != 0;
    return bad;
}

static void test_read(void)
{
    CHECK(check_reads() == 0);
#if defined(__x86_64__)
    /* where a seccomp filter refuses process_vm_readv (EPERM): the pipe's way */
    pid_t pid = fork();
    if (pid == 0) {
        struct sock_filter code[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
            _exit(77);
        if (syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0) != -1 || errno != EPERM)
            _exit(3); /* the filter does not refuse it: nothing tested */
        _exit(check_reads() == 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        printf("skip: the pipe's way (no seccomp filter here)\n");
    else
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
#endif
}

/* A code object, as the reader reads 3.11's (ob_type at 8, co_firstlineno
 * at 72, co_filename at 112, co_qualname at 128, co_linetable at 136), and
 * its name, a compact ASCII str (length at 16, state at 32, characters at 48). */
typedef struct fake_code {
    uint64_t co[26];
    uint64_t name[12];
} fake_code;

static char fake_type[16];

static void fake_str(uint64_t *o, const char *s)
{
    memset(o, 0, 12 * sizeof *o);
    o[2] = strlen(s);
    o[4] = 1u << 2 | 1u << 5 | 1u << 6; /* kind 1, compact, ascii */
    memcpy((char *)o + 48, s, strlen(s) + 1);
}

static void fake_code_init(fake_code *c, int i, const uint64_t *file, const uint64_t *table)
{
    char nm[32];
    memset(c, 0, sizeof *c);
    snprintf(nm, sizeof nm, "f_%d", i);
    fake_str(c->name, nm);
    c->co[1] = (uint64_t)(uintptr_t)fake_type;
    int32_t first = 100 + i;
    memcpy((char *)c->co + 72, &first, 4);
    c->co[112 / 8] = (uint64_t)(uintptr_t)file;
    c->co[128 / 8] = (uint64_t)(uintptr_t)c->name;
    c->co[136 / 8] = (uint64_t)(uintptr_t)table;
}

static int resolves(const fake_code *c, int i)
{
    char name[64], file[64], want[32];
    int line;
    snprintf(want, sizeof want, "f_%d", i);
    return mlprof__pyframes_resolve((uint64_t)(uintptr_t)c, -1, name, sizeof name, file, sizeof file, &line) == 0 &&
           strcmp(name, want) == 0 && strcmp(file, "/gen/x.py") == 0 && line == 100 + i;
}

static void test_bounds(void)
{
    enum { NCODE = MLPROF__PYFRAMES_NAMES_MAX + 100 };
    mlprof__pyframes_fake_python(11, fake_type);
    uint64_t file[12];
    fake_str(file, "/gen/x.py");
    uint64_t *small = calloc(1, 32 + 64), *big = calloc(1, 32 + (64u << 10)), *huge = calloc(1, 32 + (2u << 20));
    fake_code *c = calloc(NCODE, sizeof *c);
    if (!c || !small || !big || !huge) {
        printf("skip: test_bounds: out of memory\n");
        free(c), free(small), free(big), free(huge);
        return;
    }
    small[2] = 64;
    big[2] = 64u << 10;
    huge[2] = 2u << 20;
    for (int i = 0; i < NCODE; i++)
        fake_code_init(&c[i], i, file, small);
    mlprof__pyframes_reset();

    /* more code objects than both generations hold, one of them met all
     * along (a hot function): each resolves, the cache stays bounded, the
     * hot one is never evicted (evictions: all the others but those cached) */
    enum { N1 = 3 * MLPROF__PYFRAMES_GEN_ENTRIES + 7 };
    mlprof__pyframes_bounds_t b;
    int bad = 0;
    size_t most = 0;
    for (int i = 1; i < N1; i++) {
        bad += !resolves(&c[i], i) + !resolves(&c[0], 0);
        mlprof__pyframes_bounds(&b);
        most = b.code_objects > most ? b.code_objects : most;
    }
    CHECK(bad == 0);
    CHECK(most <= 2 * MLPROF__PYFRAMES_GEN_ENTRIES);
    mlprof__pyframes_bounds(&b);
    CHECK(b.evicted > 0 && b.evicted == (size_t)N1 - b.code_objects);
    printf("cache: %d code objects, at most %zu cached, %zu evicted\n", N1, most, b.evicted);

    /* the bytes bound: line tables of 64 KiB, and one of 2 MiB (not kept: a
     * name without a line) */
    mlprof__pyframes_reset();
    mlprof__pyframes_bounds(&b);
    CHECK(b.code_objects == 0 && b.evicted == 0 && b.code_bytes == 0);
    size_t most_bytes = 0;
    for (int i = 0; i < 200; i++) {
        c[i].co[136 / 8] = (uint64_t)(uintptr_t)(i == 50 ? huge : big);
        bad += !resolves(&c[i], i);
        mlprof__pyframes_bounds(&b);
        most_bytes = b.code_bytes > most_bytes ? b.code_bytes : most_bytes;
    }
    CHECK(bad == 0);
    CHECK(most_bytes <= 2 * (MLPROF__PYFRAMES_GEN_BYTES + (64u << 10) + 64));
    CHECK(b.evicted > 0 && b.evicted == 200 - b.code_objects);
    printf("cache: 200 line tables of 64 KiB: at most %zu bytes cached, %zu evicted\n", most_bytes, b.evicted);
    for (int i = 0; i < 200; i++)
        c[i].co[136 / 8] = (uint64_t)(uintptr_t)small;

    /* tag names: handed out, kept until the reset, then "?"; bounded, the
     * frames past the bound named so and counted */
    uint64_t ips[] = {0x401000}, out[4], w[3];
    w[0] = MLPROF__PYFRAMES_MAGIC | 1;
    w[2] = (uint32_t)-1 | 1ull << 32;
    char name[128];
    uint64_t first_tag = 0;
    size_t full = 0;
    for (int i = 0; i < NCODE; i++) {
        w[1] = (uint64_t)(uintptr_t)&c[i];
        if (mlprof__pyframes_tag(ips, 1, w, 3, out, 4) != 2 || !mlprof__pyframes_is_tag(out[1])) {
            bad++;
            continue;
        }
        if (i == 0)
            first_tag = out[1];
        mlprof__pyframes_tag_name(out[1], name, sizeof name);
        char want[64];
        snprintf(want, sizeof want, "f_%d (x.py:%d)", i, 100 + i);
        if (i < MLPROF__PYFRAMES_NAMES_MAX)
            bad += strcmp(name, want) != 0;
        else
            full += strstr(name, "was full") != NULL;
    }
    CHECK(bad == 0);
    CHECK(full == NCODE - MLPROF__PYFRAMES_NAMES_MAX);
    mlprof__pyframes_bounds(&b);
    CHECK(b.names == MLPROF__PYFRAMES_NAMES_MAX && b.names_dropped == full);
    CHECK(b.names_bytes <= MLPROF__PYFRAMES_NAMES_BYTES);
    CHECK(b.code_objects <= 2 * MLPROF__PYFRAMES_GEN_ENTRIES);
    mlprof__pyframes_tag_name(first_tag, name, sizeof name); /* still its name, the cache long past it */
    CHECK(strcmp(name, "f_0 (x.py:100)") == 0);
    printf("names: %zu kept (%zu bytes), %zu frames past the bound\n", b.names, b.names_bytes, b.names_dropped);
    mlprof__pyframes_reset();
    mlprof__pyframes_bounds(&b);
    CHECK(b.names == 0 && b.names_dropped == 0 && b.code_objects == 0);
    mlprof__pyframes_tag_name(first_tag, name, sizeof name); /* a tag from before the reset */
    CHECK(strcmp(name, "?") == 0);
    w[1] = (uint64_t)(uintptr_t)&c[7];
    CHECK(mlprof__pyframes_tag(ips, 1, w, 3, out, 4) == 2 && out[1] != first_tag);
    mlprof__pyframes_tag_name(out[1], name, sizeof name);
    CHECK(strcmp(name, "f_7 (x.py:107)") == 0);
    mlprof__pyframes_reset();
    free(c);
    free(small);
    free(big);
    free(huge);
}

int main(void)
{
    CHECK(mlprof__pyframes_is_eval("_PyEval_EvalFrameDefault"));
    CHECK(mlprof__pyframes_is_eval("_PyEval_EvalFrameDefault.cold"));
    CHECK(!mlprof__pyframes_is_eval("PyEval_EvalCode"));
    test_interleave();
    test_decode();
    test_no_python();
    test_read();
    test_bounds(); /* last: it makes this process look like a Python one */
    if (failures)
        return 1;
    printf("OK\n");
    return 0;
}
