/*
 * unwind.h - a thread's user call stack, from what was copied at the sample:
 * its registers and the bytes of its stack from the stack pointer up. Both
 * samplers hand it the same thing: perf_event's samples (REGS_USER and
 * STACK_USER) and the timer-signal sampler's handler (the interrupted
 * context and a copy of its stack). Unwinding happens later, on mlprof's
 * reader thread, never in the sampled thread. All the functions below are
 * serialised by one lock (libdw is not thread-safe); none may be called
 * from a signal handler.
 */
#ifndef MLPROF_HW_UNWIND_H
#define MLPROF_HW_UNWIND_H

#include <stddef.h>
#include <stdint.h>

/* The registers, numbered as DWARF numbers them on x86-64 (the numbering
 * CFI uses): rax rdx rcx rbx rsi rdi rbp rsp r8..r15, then the return
 * address column, the sampled instruction pointer. */
enum {
    MLPROF__UREG_BP = 6,
    MLPROF__UREG_SP = 7,
    MLPROF__UREG_IP = 16,
    MLPROF__UREG_COUNT = 17
};

typedef struct mlprof__ustack {
    uint64_t regs[MLPROF__UREG_COUNT];
    const unsigned char *stack; /* the copy: stack[0] was at regs[MLPROF__UREG_SP] */
    size_t stack_len;
} mlprof__ustack;

/* Why a walk ended. */
enum {
    MLPROF__UNWIND_DONE = 0,      /* at the outermost frame */
    MLPROF__UNWIND_TRUNCATED = 1, /* max frames written */
    MLPROF__UNWIND_OFF_COPY = 2,  /* a frame lies beyond the copied bytes */
    MLPROF__UNWIND_NO_INFO = 3    /* no way to find the caller (no unwind info, a corrupt frame) */
};

/* Writes the return addresses, leaf first (ips[0] is the sampled ip), and
 * returns how many; *why (may be NULL) says why it stopped. */
size_t mlprof__unwind(const mlprof__ustack *u, uint64_t *ips, size_t max, int *why);

/* How mlprof__unwind walks: "dwarf (libdw)" where libdw.so.1 loads (the
 * objects' CFI), else "frame pointers"; mlprof__unwind_why says why libdw is
 * not used ("" when it is). The first call loads libdw. */
const char *mlprof__unwind_method(void);
const char *mlprof__unwind_why(void);

/* Where a code address is in the source, from the debug info of its object
 * (libdw's line tables and scopes), one entry per function: the function
 * that holds ip first (name "": the symbol table names it), then each call
 * the compiler inlined there, the innermost last (name: the inlined
 * function's). Each entry's file and line are where that function is at
 * ip: the line of the inlined call it makes, the innermost ip's own line.
 * A call site the debug info does not give, or code at line 0, has file ""
 * and line 0. The count (at most max; the innermost calls kept where there
 * are more), 0 where nothing is known (no libdw, no debug info), -1 where
 * nothing is known now but may be later (the address is in no object of
 * libdw's view, which looks again at most every 100 ms; the crash's dump
 * without libdw's lock): a caller keeping the answer should not keep that.
 * For symbols.c, after the run. */
typedef struct mlprof__srcpos {
    char name[256];
    char file[512];
    int line;
} mlprof__srcpos;
int mlprof__unwind_srcpos(uint64_t ip, mlprof__srcpos *out, int max);
/* The function at ip by libdw, which also reads the symbols of separate
 * debug info (/usr/lib/debug): for addresses the object's own symbol tables
 * do not cover (a stripped library's local functions). 0: none. */
int mlprof__unwind_symbol(uint64_t ip, char *name, size_t len);
/* In the crash's dump (mlprof__crashing): 1 when libdw's lock could not be
 * had within mlprof__lock_for_dump's bound (the crash is inside libdw, on
 * the sampler's thread): the source lines and debug-info names are left
 * out then (srcpos and symbol answer 0); 0 otherwise, and outside a crash. */
int mlprof__unwind_busy_at_crash(void);

/* In a forked child: the unwinder's lock and view of the process are the
 * parent's; they are renewed here. */
void mlprof__unwind_after_fork(void);

#endif /* MLPROF_HW_UNWIND_H */
