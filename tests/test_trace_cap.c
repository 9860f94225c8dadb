/*
 * test_trace_cap.c - a run that records far more than max_trace_size lets a
 * trace hold, for trace_cap_check.py: test_trace_cap FILE CAP N. One span
 * "outer" around N spans "work" (each with an argument) and an instant
 * "tick" every 100 of them, then a finished dump. The file's name chooses
 * the format. Prints "recorded K": the events the trace was given.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mlprof/mlprof.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_trace_cap FILE CAP N\n");
        return 2;
    }
    long n = atol(argv[3]);
    if (mlprof_set_config("filename", argv[1]) != MLPROF_OK ||
        mlprof_set_config("max_trace_size", argv[2]) != MLPROF_OK ||
        mlprof_set_config("buffer_size", "64M") != MLPROF_OK || mlprof_set_config("stats_file", "") != MLPROF_OK) {
        fprintf(stderr, "test_trace_cap: %s\n", mlprof_last_error());
        return 1;
    }
    mlprof_domain *d = mlprof_domain_create("cap");
    mlprof_span *outer = mlprof_task_create(d, "outer");
    mlprof_span *work = mlprof_task_create(d, "work");
    mlprof_marker *tick = mlprof_marker_create(d, "tick");
    mlprof_set_state(MLPROF_STATE_RUN);
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
    int rc = mlprof_dump(1);
    if (rc != MLPROF_OK) {
        fprintf(stderr, "test_trace_cap: dump: %s\n", mlprof_last_error());
        return 1;
    }
    printf("recorded %ld dropped %llu\n", recorded, (unsigned long long)mlprof_dropped_events());
    return 0;
}
