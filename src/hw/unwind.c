/*
 * unwind.c - walks a copied user stack (unwind.h). Frame pointers: each
 * frame's saved rbp is at [rbp] and its return address at [rbp+8], both
 * read from the copy only (never from the live stack, which has moved on
 * since the sample). A chain that leaves the copy, goes down, or repeats
 * ends the walk and says why.
 */
#include "unwind.h"

#include <string.h>

static int read_copy(const mlprof__ustack *u, uint64_t addr, uint64_t *out)
{
    uint64_t sp = u->regs[MLPROF__UREG_SP];
    if (addr < sp || addr - sp > u->stack_len || u->stack_len - (addr - sp) < sizeof *out)
        return -1;
    memcpy(out, u->stack + (addr - sp), sizeof *out);
    return 0;
}

size_t mlprof__unwind(const mlprof__ustack *u, uint64_t *ips, size_t max, int *why)
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

const char *mlprof__unwind_method(void) { return "frame pointers"; }
