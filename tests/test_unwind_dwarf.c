/*
 * test_unwind_dwarf.c - mlprof__unwind (src/hw/unwind.c) from inside, with
 * no perf_event needed: a chain outer -> middle -> inner, built without
 * frame pointers, takes its own registers (getcontext) and a copy of its
 * stack from sp, as a sampler would, and walks the copy:
 *   1. by libdw's CFI: inner, middle, outer, then main (or the thread's
 *      function), and on to the outermost frame (_start, or the thread's
 *      start), said as MLPROF__UNWIND_DONE; on the main thread and on a
 *      thread of its own;
 *   2. the leaf's file:line: this file, the line of the getcontext call;
 *      middle's: its call of inner;
 *   3. at most 2 frames: 2, said as TRUNCATED; an empty copy: the leaf alone,
 *      said as OFF_COPY (the caller's return address is beyond the copy);
 *   4. calls the compiler inlined (deep into shallow into host): an address
 *      in deep gives three positions, host's call of shallow, shallow's call
 *      of deep and deep's own line, each named; at most 2: deep's and
 *      shallow's (the innermost kept, the outer one named); a function with
 *      nothing inlined (middle's call of inner): one; an address in
 *      anonymous memory: -1 (not known now).
 * Skipped (77), saying why, where libdw cannot be loaded.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "../src/hw/stacks.h"
#include "../src/hw/unwind.h"
#include "testutil.h"

#define COPY 16384

static unsigned char g_copy[COPY];
static mlprof__ustack g_u;
static int g_leaf_line, g_call_line;
volatile int g_sink;

/* The bytes of the stack, read one by one without the sanitizer's checks:
 * other frames' redzones lie in them, and a memcpy would be checked. */
__attribute__((noinline, no_sanitize_address)) static void copy_stack(unsigned char *dst, uint64_t sp, size_t n)
{
    const volatile unsigned char *src = (const volatile unsigned char *)(uintptr_t)sp;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* Where this thread's stack ends (the copy must not read beyond it). */
static uint64_t stack_top(void)
{
    pthread_attr_t a;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstack(&a, &addr, &size);
        pthread_attr_destroy(&a);
    }
    return (uint64_t)(uintptr_t)addr + size;
}

__attribute__((noinline)) int inner(int x);
__attribute__((noinline)) int middle(int x);
__attribute__((noinline)) int outer(int x);

__attribute__((noinline)) int inner(int x)
{
    ucontext_t uc;
    g_leaf_line = __LINE__ + 1;
    getcontext(&uc);
    const greg_t *g = uc.uc_mcontext.gregs;
    static const int dwarf_of[][2] = {
        {REG_RAX, 0}, {REG_RDX, 1}, {REG_RCX, 2}, {REG_RBX, 3}, {REG_RSI, 4}, {REG_RDI, 5},
        {REG_RBP, 6}, {REG_RSP, 7}, {REG_R8, 8},  {REG_R9, 9},  {REG_R10, 10}, {REG_R11, 11},
        {REG_R12, 12}, {REG_R13, 13}, {REG_R14, 14}, {REG_R15, 15}, {REG_RIP, 16},
    };
    for (size_t i = 0; i < sizeof dwarf_of / sizeof dwarf_of[0]; i++)
        g_u.regs[dwarf_of[i][1]] = (uint64_t)g[dwarf_of[i][0]];
    uint64_t sp = g_u.regs[MLPROF__UREG_SP], top = stack_top();
    size_t n = top > sp && top - sp < COPY ? (size_t)(top - sp) : COPY;
    copy_stack(g_copy, sp, n);
    g_u.stack = g_copy;
    g_u.stack_len = n;
    return x + g_sink;
}

__attribute__((noinline)) int middle(int x)
{
    g_call_line = __LINE__ + 1;
    int y = inner(x + 1);
    return y + g_sink; /* not a tail call */
}

__attribute__((noinline)) int outer(int x)
{
    int y = middle(x + 1);
    return y + g_sink;
}

/* 4: where's return address lies in deep, inlined into shallow, inlined
 * into host */
static int g_deep_line, g_shallow_line, g_host_line;
__attribute__((noinline)) static uint64_t where(void) { return (uint64_t)__builtin_return_address(0); }

static inline __attribute__((always_inline)) uint64_t deep(void)
{
    g_deep_line = __LINE__ + 1;
    return where();
}

static inline __attribute__((always_inline)) uint64_t shallow(void)
{
    g_shallow_line = __LINE__ + 1;
    uint64_t r = deep();
    g_sink++;
    return r;
}

__attribute__((noinline)) uint64_t host(void);
__attribute__((noinline)) uint64_t host(void)
{
    g_host_line = __LINE__ + 1;
    uint64_t r = shallow();
    g_sink++; /* not a tail call */
    return r;
}

static void check_inlined(void)
{
    uint64_t ip = host() - 1; /* the call, not what follows it */
    mlprof__srcpos pos[4];
    int n = mlprof__unwind_srcpos(ip, pos, 4);
    printf("inlined:");
    for (int i = 0; i < n; i++)
        printf(" %s@%d", i ? pos[i].name : "(host)", pos[i].line);
    printf("\n");
    CHECK(n == 3, "%d positions for a call inlined twice, not 3", n);
    const char *names[] = {"", "shallow", "deep"};
    const int lines[] = {g_host_line, g_shallow_line, g_deep_line};
    for (int i = 0; i < n && i < 3; i++) {
        CHECK(strcmp(pos[i].name, names[i]) == 0, "position %d is named \"%s\", not \"%s\"", i, pos[i].name,
              names[i]);
        CHECK(strstr(pos[i].file, "test_unwind_dwarf.c") && pos[i].line == lines[i], "position %d is %s:%d, not line %d",
              i, pos[i].file, pos[i].line, lines[i]);
    }
    /* an address in no object (anonymous memory, as JIT code is): not
     * known now, so that a caller does not keep the answer. The middle of 8
     * MiB: a page placed right after a library can lie inside libdw's span
     * of it (its segments' alignment rounded up; seen under ASan) */
    size_t big = (size_t)8 << 20;
    char *anon = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int got = anon != MAP_FAILED ? mlprof__unwind_srcpos((uint64_t)(uintptr_t)(anon + big / 2), pos, 4) : -2;
    CHECK(got == -1, "an address in anonymous memory is not said to be unknown now (-1): %d", got);
    if (anon != MAP_FAILED)
        munmap(anon, big);
    n = mlprof__unwind_srcpos(ip, pos, 2);
    CHECK(n == 2 && strcmp(pos[0].name, "shallow") == 0 && pos[0].line == g_shallow_line &&
              strcmp(pos[1].name, "deep") == 0 && pos[1].line == g_deep_line,
          "at most 2: %d positions, %s@%d %s@%d", n, pos[0].name, pos[0].line, pos[1].name, pos[1].line);
}

/* The walk of g_u, named; checks the chain inner, middle, outer, caller. */
static void check_walk(const char *caller, const char *outermost)
{
    uint64_t ips[64];
    int why = -1;
    size_t n = mlprof__unwind(&g_u, ips, 64, &why);
    mlprof__syms *syms = mlprof__syms_load();
    char names[64][256];
    for (size_t i = 0; i < n; i++) {
        const char *object;
        mlprof__syms_name(syms, ips[i] - (i > 0), names[i], sizeof names[i], &object);
    }
    printf("%s:", caller);
    for (size_t i = 0; i < n; i++)
        printf(" %s", names[i]);
    printf(" (why %d)\n", why);
    CHECK(n >= 5, "%zu frames", n);
    const char *want[] = {"inner", "middle", "outer", caller};
    for (size_t i = 0; i < 4 && i < n; i++)
        CHECK(strcmp(names[i], want[i]) == 0, "frame %zu is %s, not %s", i, names[i], want[i]);
    CHECK(why == MLPROF__UNWIND_DONE, "the walk stopped with %d, not DONE", why);
    int found = 0;
    for (size_t i = 0; i < n; i++)
        found |= strstr(names[i], outermost) != NULL;
    CHECK(found, "no frame %s at the end", outermost);

    mlprof__srcpos pos[4];
    /* the leaf's pc is getcontext's return address here: its call is looked up
     * (clang gives the instruction after a call line 0 at times) */
    CHECK(mlprof__unwind_srcpos(ips[0] - 1, pos, 4) == 1, "no file:line for the leaf, or inlined calls");
    CHECK(strstr(pos[0].file, "test_unwind_dwarf.c") && pos[0].line == g_leaf_line && !pos[0].name[0],
          "the leaf is at %s:%d (%s), not line %d", pos[0].file, pos[0].line, pos[0].name, g_leaf_line);
    pos[0].line = 0;
    CHECK(n > 1 && mlprof__unwind_srcpos(ips[1] - 1, pos, 4) == 1 && pos[0].line == g_call_line,
          "middle's call is at line %d, not %d", pos[0].line, g_call_line);

    why = -1;
    CHECK(mlprof__unwind(&g_u, ips, 2, &why) == 2 && why == MLPROF__UNWIND_TRUNCATED, "max 2: why %d", why);
    mlprof__ustack empty = g_u;
    empty.stack_len = 0;
    why = -1;
    n = mlprof__unwind(&empty, ips, 64, &why);
    CHECK(n == 1 && why == MLPROF__UNWIND_OFF_COPY, "an empty copy: %zu frames, why %d", n, why);
    mlprof__syms_free(syms);
}

__attribute__((noinline)) static void *thread_main(void *arg)
{
    (void)arg;
    g_sink += outer(1);
    check_walk("thread_main", "clone");
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    if (strcmp(mlprof__unwind_method(), "dwarf (libdw)") != 0) {
        printf("SKIP: %s\n", mlprof__unwind_why());
        return 77;
    }
    g_sink += outer(1);
    check_walk("main", "_start");
    check_inlined();
    pthread_t t;
    int rc = pthread_create(&t, NULL, thread_main, NULL);
    if (rc == 0)
        pthread_join(t, NULL); /* before any check here: the thread counts its own */
    CHECK(rc == 0, "pthread_create: %d", rc);
    return tu_finish("test_unwind_dwarf");
}
