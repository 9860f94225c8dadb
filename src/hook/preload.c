/*
 * preload.c - libmlprof_preload.so, what `mlprof run` puts in LD_PRELOAD:
 * the library itself (started by its constructor, configured by the
 * environment the command sets up) and the interposers. A process that
 * dies of a signal still leaves its trace: the handlers, installed where
 * the program left the default, write it and then let the signal do what it
 * would have done.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "../record/produce.h"
#include "hook.h"

static const int k_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM, SIGHUP, SIGINT, SIGQUIT};

static void on_signal(int sig)
{
    static int dying;
    if (!__atomic_exchange_n(&dying, 1, __ATOMIC_ACQ_REL)) {
        mlprof__dump_deadline(sig);
        mlprof__busy++;
        mlprof__crash_dump(sig);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
    for (size_t i = 0; i < sizeof k_signals / sizeof k_signals[0]; i++) {
        struct sigaction old;
        if (sigaction(k_signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
            continue; /* the program's own handler stays */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(k_signals[i], &sa, NULL);
    }
}

__attribute__((constructor)) static void preload_start(void)
{
    mlprof__hook_malloc_init(); /* first: mlprof's own memory bypasses the hooks */
    mlprof__ensure_init();      /* the environment's configuration; autostart */
    mlprof__hook_blas_init();
    mlprof__hook_dnnl_init();
    mlprof__hook_cuda_init();
    mlprof__hook_cudnn_init();
    mlprof__hook_exec_init();
    install_handlers();
}
