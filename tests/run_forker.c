/*
 * run_forker.c - a program that knows nothing of mlprof, for `mlprof run`:
 * it allocates, forks a child that allocates and exits, and forks another
 * that allocates and execs this program again (with "exec"), which
 * allocates too. The first child also frees ten blocks its parent
 * allocated just before the fork (a forked child's frees of its parent's
 * blocks are frees of known blocks, not of addresses never allocated). The
 * test finds all three processes in the run's one trace. With "chain" it
 * allocates and execs itself ("exec") in its place: both programs' traces
 * are the run's, one process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void work(size_t bytes, int blocks)
{
    for (int i = 0; i < blocks; i++) {
        char *p = malloc(bytes);
        if (!p)
            exit(1);
        memset(p, i, bytes);
        free(p);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "chain") == 0) { /* allocates, then becomes "exec" in its place */
        work(700, 7);
        printf("chain %d\n", (int)getpid());
        fflush(stdout);
        execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
        return 127;
    }
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        work(3000, 30);
        printf("exec child %d\n", (int)getpid());
        return 0;
    }
    work(1000, 10);
    char *inherited[10];
    for (int i = 0; i < 10; i++)
        if (!(inherited[i] = malloc(1000)))
            return 1;
    fflush(stdout);
    pid_t a = fork();
    if (a == 0) {
        for (int i = 0; i < 10; i++)
            free(inherited[i]);
        work(2000, 20);
        printf("fork child %d\n", (int)getpid());
        exit(0);
    }
    pid_t b = fork();
    if (b == 0) {
        work(500, 5); /* recorded, then the exec: its parent says so, with no warning */
        execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 10; i++)
        free(inherited[i]);
    int sa = 0, sb = 0;
    waitpid(a, &sa, 0);
    waitpid(b, &sb, 0);
    printf("parent %d\n", (int)getpid());
    return WIFEXITED(sa) && WEXITSTATUS(sa) == 0 && WIFEXITED(sb) && WEXITSTATUS(sb) == 0 ? 0 : 1;
}
