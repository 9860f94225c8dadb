/*
 * run_capture.c - an unmodified program (no mlprof in it) for capture_check.py
 * to profile with mlprof run over the fake CUDA runtime: its cudaMalloc calls
 * are what the captures count.
 *
 * usage: run_capture range        10 calls, cudaProfilerStart, 5 calls,
 *                                 cudaProfilerStop, 10 calls, start, 3 calls,
 *                                 stop, 10 calls (capture_range=cudaProfilerStart)
 *        run_capture loop STOPFILE cudaMalloc and cudaFree every 2 ms until
 *                                 STOPFILE exists (mlprof run --on-demand)
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"

static void calls(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        if (cudaMalloc(&p, 256) == 0)
            cudaFree(p);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "range") == 0) {
        calls(10);
        cudaProfilerStart();
        calls(5);
        cudaProfilerStop();
        calls(10);
        cudaProfilerStart();
        calls(3);
        cudaProfilerStop();
        calls(10);
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "loop") == 0) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        struct timespec ts = {0, 2000000};
        for (long i = 0; i < 300000 && access(argv[2], F_OK) != 0; i++) {
            calls(1);
            nanosleep(&ts, NULL);
        }
        return 0;
    }
    fprintf(stderr, "usage: run_capture range | loop STOPFILE\n");
    return 2;
}
