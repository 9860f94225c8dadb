/*
 * no_perf.c - runs a command where perf_event_open is refused, as a
 * container's seccomp profile refuses it: a seccomp filter makes the system
 * call fail with EACCES, every other call goes through. For the tests of
 * the timer-signal sampler (stacks_check.py). With --no-vm-readv,
 * process_vm_readv is refused too (EPERM, as where ptrace is not allowed):
 * the sampler's stack copies fail. Usage: no_perf [--no-vm-readv] CMD
 * [ARGS...]; status 77 (said) where seccomp filters cannot be installed.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int no_readv = argc > 1 && strcmp(argv[1], "--no-vm-readv") == 0;
    argv += no_readv;
    argc -= no_readv;
    if (argc < 2) {
        fprintf(stderr, "usage: no_perf [--no-vm-readv] CMD [ARGS...]\n");
        return 2;
    }
#if defined(__x86_64__)
    struct sock_filter code[] = {
        /* another architecture's calls (x32, i386) are let through untouched */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 1, 0),
        /* -1: a number no call has, where process_vm_readv is let through */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, no_readv ? __NR_process_vm_readv : (unsigned)-1, 1, 2),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        fprintf(stderr, "no_perf: cannot install a seccomp filter: %s\n", strerror(errno));
        return 77;
    }
#else
    fprintf(stderr, "no_perf: x86-64 only\n");
    return 77;
#endif
    execvp(argv[1], argv + 1);
    fprintf(stderr, "no_perf: %s: %s\n", argv[1], strerror(errno));
    return 127;
}
