/*
 * exec.c - the exec family, interposed by the preload library: a forked
 * child that recorded (its allocations, say) and then runs another program
 * has not lost a trace it should have written; its new program, preloaded
 * too, writes its own. The child's slot (children.c) is marked before the
 * exec and unmarked when the exec fails, so that its parent says what
 * happened instead of warning of a trace never written. A process that is
 * not a forked child (one that execs another program in its place: a
 * launcher script's `exec python`, a chain of programs) writes what it
 * recorded first, as at exit: its next program's trace, at the same
 * pid-named path, would otherwise replace it (under mlprof run its part is
 * set aside as a part of its own). posix_spawn and vfork run no fork
 * handler and take no slot.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "../record/produce.h"
#include "hook.h"

#define EXPORT __attribute__((visibility("default")))

typedef int execve_fn(const char *, char *const[], char *const[]);
typedef int execvp_fn(const char *, char *const[]);
typedef int execvpe_fn(const char *, char *const[], char *const[]);
typedef int fexecve_fn(int, char *const[], char *const[]);
static void *g_execve, *g_execvp, *g_execvpe, *g_fexecve;

/* The real functions, found at the start: a forked child of a threaded
 * program may call only what is safe after a fork before its exec, and a
 * symbol lookup takes locks another thread may have held at the fork. */
void mlprof__hook_exec_init(void)
{
    mlprof__hook_real_cached(&g_execve, "execve", 0);
    mlprof__hook_real_cached(&g_execvp, "execvp", 0);
    mlprof__hook_real_cached(&g_execvpe, "execvpe", 0);
    mlprof__hook_real_cached(&g_fexecve, "fexecve", 0);
}

/* Before the exec: a forked child's slot is marked; a process that is not
 * a forked child writes what it recorded (mlprof__before_exec). Whether it
 * was recording. */
static int before(void)
{
    mlprof__children_exec(1);
    return mlprof__before_exec();
}

/* The exec's result: it failed, since it returned: the mark taken back, and
 * recording on again if it was. */
static int after(int rc, int was_recording)
{
    int err = errno;
    mlprof__children_exec(0);
    mlprof__exec_failed(was_recording);
    errno = err;
    return rc;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    execve_fn *real = (execve_fn *)mlprof__hook_real_cached(&g_execve, "execve", 1);
    int was = before();
    return after(real(path, argv, envp), was);
}

EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    execvpe_fn *real = (execvpe_fn *)mlprof__hook_real_cached(&g_execvpe, "execvpe", 1);
    int was = before();
    return after(real(file, argv, envp), was);
}

EXPORT int execvp(const char *file, char *const argv[])
{
    execvp_fn *real = (execvp_fn *)mlprof__hook_real_cached(&g_execvp, "execvp", 1);
    int was = before();
    return after(real(file, argv), was);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    fexecve_fn *real = (fexecve_fn *)mlprof__hook_real_cached(&g_fexecve, "fexecve", 1);
    int was = before();
    return after(real(fd, argv, envp), was);
}

/* execl, execlp and execle: their arguments gathered into an argv */
#define GATHER(first, ap, argv, extra)                                                                          \
    size_t n_ = 1;                                                                                              \
    va_start(ap, first);                                                                                        \
    while (va_arg(ap, char *))                                                                                  \
        n_++;                                                                                                   \
    va_end(ap);                                                                                                 \
    char *argv[n_ + 1];                                                                                         \
    va_start(ap, first);                                                                                        \
    argv[0] = (char *)(first);                                                                                  \
    for (size_t i_ = 1; i_ <= n_; i_++)                                                                         \
        argv[i_] = va_arg(ap, char *);                                                                          \
    extra;                                                                                                      \
    va_end(ap)

EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, (void)0);
    return execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, (void)0);
    return execvp(file, argv);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char *const *envp;
    GATHER(arg, ap, argv, envp = va_arg(ap, char *const *));
    return execve(path, argv, envp);
}
