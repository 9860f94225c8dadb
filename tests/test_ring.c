/*
 * test_ring.c - the flight recorder (mode=ring), for ring_check.py:
 * test_ring FILE N RING_SIZE BUFFER_SIZE [crash]. Records a span "outer"
 * around N spans "work" (each with its number as argument i) and an instant
 * "tick" every 100, far more than the ring holds, then dumps (or, with
 * crash, ends the outer span and dies of SIGSEGV: the preload's handler
 * writes the trace). Prints "recorded K dropped D" before the dump.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "mlprof/mlprof.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: test_ring FILE N RING_SIZE BUFFER_SIZE [crash]\n");
        return 2;
    }
    long n = atol(argv[2]);
    int crash = argc > 5;
    if (mlprof_set_config("filename", argv[1]) != MLPROF_OK || mlprof_set_config("mode", "ring") != MLPROF_OK ||
        mlprof_set_config("ring_size", argv[3]) != MLPROF_OK ||
        mlprof_set_config("buffer_size", argv[4]) != MLPROF_OK || mlprof_set_config("stats_file", "") != MLPROF_OK) {
        fprintf(stderr, "test_ring: %s\n", mlprof_last_error());
        return 1;
    }
    mlprof_domain *d = mlprof_domain_create("ring");
    mlprof_span *outer = mlprof_task_create(d, "outer");
    mlprof_span *work = mlprof_task_create(d, "work");
    mlprof_marker *tick = mlprof_marker_create(d, "tick");
    if (!crash)
        mlprof_set_state(MLPROF_STATE_RUN); /* under the preload, MLPROF_AUTOSTART did */
    long recorded = 1;
    mlprof_begin(outer);
    for (long i = 0; i < n; i++) {
        mlprof_begin(work);
        mlprof_arg_int("i", i);
        mlprof_end(work);
        recorded++;
        if (i % 100 == 0) {
            mlprof_mark(tick, MLPROF_SCOPE_THREAD);
            recorded++;
        }
    }
    mlprof_end(outer);
    printf("recorded %ld dropped %llu\n", recorded, (unsigned long long)mlprof_dropped_events());
    fflush(stdout);
    if (crash) {
        volatile int *null = NULL;
        *null = 1; /* SIGSEGV: the trace is written by the preload's handler */
    }
    int rc = mlprof_dump(1);
    if (rc != MLPROF_OK) {
        fprintf(stderr, "test_ring: dump: %s\n", mlprof_last_error());
        return 1;
    }
    return 0;
}
