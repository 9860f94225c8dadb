/*
 * run_mem_layers.c - a correct program that reports its own memory to mlprof,
 * as examples/cnn_infer.c does, run under `mlprof run`, whose malloc
 * interposer records the same blocks: three blocks of 23456 bytes from
 * calloc reported with the tag "weights", a pool's segment of 654336 bytes
 * from malloc reserved and carved into tensors of 34567 bytes (the first at
 * the segment's start), each reported freed before free(). Then one mistake
 * of its own: a block of 45678 bytes whose report it frees twice.
 */
#include <stdio.h>
#include <stdlib.h>

#include <mlprof/mlprof.h>

#define CPU MLPROF_DEVICE_CPU
#define WEIGHTS 23456
#define SEGMENT 654336
#define TENSOR 34567
#define TWICE 45678

int main(void)
{
    char *w[3];
    for (int i = 0; i < 3; i++) {
        if (!(w[i] = calloc(WEIGHTS, 1)))
            return 1;
        mlprof_mem_alloc(CPU, w[i], WEIGHTS, "weights");
    }
    char *seg = malloc(SEGMENT);
    if (!seg)
        return 1;
    mlprof_mem_reserve(CPU, seg, SEGMENT);
    for (int round = 0; round < 4; round++) {
        mlprof_mem_alloc(CPU, seg, TENSOR, "act");
        mlprof_mem_alloc(CPU, seg + 65536, TENSOR, "act");
        seg[0] = seg[65536] = (char)round;
        mlprof_mem_free(CPU, seg + 65536);
        mlprof_mem_free(CPU, seg);
    }
    mlprof_mem_release(CPU, seg);
    free(seg);
    for (int i = 0; i < 3; i++) {
        mlprof_mem_free(CPU, w[i]);
        free(w[i]);
    }
    char *x = malloc(TWICE);
    if (!x)
        return 1;
    mlprof_mem_alloc(CPU, x, TWICE, "twice");
    mlprof_mem_free(CPU, x);
    mlprof_mem_free(CPU, x); /* the program's mistake: said, and counted once */
    free(x);
    puts("done");
    return 0;
}
