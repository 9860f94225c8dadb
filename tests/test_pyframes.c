/*
 * test_pyframes.c - the parts of src/hw/pyframes.c that need no Python
 * (runs plain and under the sanitizers; tests/pyframes_check.py does the
 * rest inside real interpreters): decoding captured words, interleaving
 * Python frames with native ones py-spy's way, naming the eval loop, and
 * staying quiet in a process without Python.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
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

int main(void)
{
    CHECK(mlprof__pyframes_is_eval("_PyEval_EvalFrameDefault"));
    CHECK(mlprof__pyframes_is_eval("_PyEval_EvalFrameDefault.cold"));
    CHECK(!mlprof__pyframes_is_eval("PyEval_EvalCode"));
    test_interleave();
    test_decode();
    test_no_python();
    test_read();
    if (failures)
        return 1;
    printf("OK\n");
    return 0;
}
