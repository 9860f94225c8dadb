/* test_continuous.c - continuous dump: a complete trace is on disk every
 * dump_period while a 64 KiB buffer records 12 times what it holds, dropping
 * nothing. check_trace.py reads the file while this runs.
 *
 * The recording thread waits while more than half of the buffer is in use:
 * how soon the background thread drains depends on the scheduler (under
 * ThreadSanitizer on a loaded machine it can be 100 ms late), what it drains
 * does not. */
#include <time.h>

#include "testutil.h"

#define ROUNDS 500
#define PER_ROUND 50

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("continuous.json")));
    CHECK_OK(mlprof_set_config("buffer_size", "64K"));
    CHECK_OK(mlprof_set_config("continuous_dump", "true"));
    CHECK_OK(mlprof_set_config("dump_period", "0.1"));
    mlprof_span *s = mlprof_task_create(mlprof_domain_create("cont"), "op");
    mlprof_span *outer = mlprof_task_create(mlprof_domain_create("cont"), "whole_run");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(outer);
    struct timespec ms = {0, 2000000}, one = {0, 1000000};
    int waited_ms = 0;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t used, capacity;
        mlprof_buffer_usage(&used, &capacity);
        while (used * 2 > capacity && waited_ms < 60000) {
            nanosleep(&one, NULL);
            waited_ms++;
            mlprof_buffer_usage(&used, &capacity);
        }
        for (int i = 0; i < PER_ROUND; i++) {
            mlprof_begin(s);
            mlprof_end(s);
        }
        nanosleep(&ms, NULL);
    }
    mlprof_end(outer);
    CHECK(waited_ms < 60000, "the buffer was not drained in a minute");
    printf("waited for the drain: %d ms\n", waited_ms);
    CHECK(mlprof_dropped_events() == 0, "dropped %llu", (unsigned long long)mlprof_dropped_events());
    CHECK_OK(mlprof_dump(1));
    return tu_finish("test_continuous");
}
