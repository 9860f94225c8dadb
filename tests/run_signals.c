/*
 * run_signals.c - a program that knows nothing of mlprof, for the signals
 * that stop `mlprof run` (tests/run_signal_check.py). It allocates (so that
 * its trace has something in it), says "ready PID PGID" on standard output
 * and then:
 *   wait    waits for a signal, which ends it by its default action (the
 *           preload library writes the trace first)
 *   ignore  the same with SIGTERM ignored: only SIGKILL ends it
 *   fork    forks a child that allocates and waits too ("ready PID PGID
 *           CHILD" once the child waits); on SIGTERM it waits for the child
 *           to end, then exits 143
 *   count   counts the SIGINTs it gets; after the first, says "got", reads
 *           a line from standard input and says "count N" (a signal sent to
 *           it meanwhile has been handled by then: read returns only after)
 *   exit1   exits with status 1 at once
 *   busy    eight threads allocate and free without end (their records
 *           fill the buffers faster than they are drained), then it waits
 *           as `wait` does
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t g_count, g_term;

static void on_int(int sig)
{
    (void)sig;
    g_count++;
}

static void on_term(int sig)
{
    (void)sig;
    g_term = 1;
}

static void work(void)
{
    for (int i = 0; i < 8; i++) {
        char *p = malloc(4096);
        if (!p)
            exit(1);
        memset(p, i, 4096);
        free(p);
    }
}

static void *allocate_forever(void *arg)
{
    (void)arg;
    for (;;) {
        char *volatile p = malloc(64);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "wait";
    work();
    if (strcmp(mode, "exit1") == 0) {
        printf("ready %d %d\n", (int)getpid(), (int)getpgrp());
        return 1;
    }
    if (strcmp(mode, "ignore") == 0)
        signal(SIGTERM, SIG_IGN);
    if (strcmp(mode, "count") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_int;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        printf("ready %d %d\n", (int)getpid(), (int)getpgrp());
        fflush(stdout);
        while (!g_count)
            pause();
        printf("got\n");
        fflush(stdout);
        char line[64];
        while (read(0, line, sizeof line) < 0) {
        }
        printf("count %d\n", (int)g_count);
        return 0;
    }
    if (strcmp(mode, "fork") == 0) {
        fflush(stdout);
        int ready[2];
        if (pipe(ready) != 0)
            return 1;
        pid_t child = fork();
        if (child < 0)
            return 1;
        if (child == 0) { /* ready once its work is done: a signal then finds it waiting */
            work();
            close(ready[1]);
            for (;;)
                pause();
        }
        close(ready[1]);
        char c;
        while (read(ready[0], &c, 1) < 0) {
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        printf("ready %d %d %d\n", (int)getpid(), (int)getpgrp(), (int)child);
        fflush(stdout);
        while (!g_term)
            pause();
        int st;
        while (waitpid(child, &st, 0) < 0) {
        }
        exit(128 + SIGTERM);
    }
    if (strcmp(mode, "busy") == 0) {
        for (int i = 0; i < 8; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, allocate_forever, NULL) != 0)
                return 1;
        }
    }
    printf("ready %d %d\n", (int)getpid(), (int)getpgrp());
    fflush(stdout);
    for (;;)
        pause();
}
