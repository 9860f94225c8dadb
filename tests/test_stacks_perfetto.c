/*
 * test_stacks_perfetto.c - the sampled call stacks of one run written both
 * ways: the run's JSON trace (stackFrames, samples) through mlprof_dump, and
 * the same samples (the view that dump built, src/hw/stacks.c) through
 * Perfetto's sink (src/export/perfetto.c) as the tail of a protobuf trace.
 * A trace has one format, so this is how one run yields both;
 * stacks_out_check.py decodes the protobuf with protoc and checks that
 * every sample of the JSON is in it, same thread, time and stack. The run
 * spins in pf_hot_a and pf_hot_b on the main thread and in pf_thread_fn
 * on a thread started and ended while sampling. Built with frame pointers.
 * Two more dumps, still paused: OUT.json.kept.json names the addresses from
 * what the first dump kept, and the final one (OUT.json.end.json), after
 * mlprof__stacks_names_drop, afresh; stacks_out_check.py compares them.
 * Usage: test_stacks_perfetto OUT.json OUT.pftrace
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/export/sink.h"
#include "../src/hw/stacks.h"
#include "mlprof/mlprof.h"
#include "spin.h"

volatile uint64_t sink;

void pf_hot_a(uint64_t ns);
void pf_hot_b(uint64_t ns);
void *pf_thread_fn(void *arg);

#define SPIN(ns) SPIN_CPU(ns, sink, (void)0)

__attribute__((noinline)) void pf_hot_a(uint64_t ns) { SPIN(ns); }
__attribute__((noinline)) void pf_hot_b(uint64_t ns) { SPIN(ns); }
__attribute__((noinline)) void *pf_thread_fn(void *arg)
{
    (void)arg;
    SPIN(150000000ull);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_stacks_perfetto OUT.json OUT.pftrace\n");
        return 2;
    }
    char end[4096]; /* the final dump's; the samples compared are the earlier dump's, to argv[1] */
    snprintf(end, sizeof end, "%s.end.json", argv[1]);
    if (mlprof_set_config("filename", end) != MLPROF_OK || mlprof_set_config("sampling", "1000") != MLPROF_OK ||
        mlprof_set_state(MLPROF_STATE_RUN) != MLPROF_OK) {
        fprintf(stderr, "test_stacks_perfetto: %s\n", mlprof_last_error());
        return 1;
    }
    for (int i = 0; i < 5; i++) {
        pf_hot_a(40000000ull);
        pf_hot_b(20000000ull);
    }
    pthread_t t;
    if (pthread_create(&t, NULL, pf_thread_fn, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    /* paused: the samples stop growing, so the view the dump builds is the one written */
    if (mlprof_pause() != MLPROF_OK || mlprof_dump_to(argv[1], 0) != MLPROF_OK) {
        fprintf(stderr, "test_stacks_perfetto: %s\n", mlprof_last_error());
        return 1;
    }
    const mlprof__stacks_out *v = mlprof__stacks_view();
    const mlprof__sink_ops *ops = &mlprof__perfetto_sink;
    void *st = ops->create();
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    mlprof__sink_out out = {&sb, 1};
    ops->head(st, &sb);
    ops->tail_begin(st, &out);
    mlprof__trace_meta m;
    memset(&m, 0, sizeof m);
    m.pid = getpid();
    m.process_name = "test_stacks_perfetto";
    m.host = "host";
    m.clock = "monotonic";
    m.dump_ns = 1;
    m.other_data = "\"note\":\"samples only\"";
    m.other_data_len = strlen(m.other_data);
    m.stacks = v;
    ops->tail_end(st, &out, &m);
    FILE *f = fopen(argv[2], "wb");
    int ok = f && !sb.failed && fwrite(sb.data, 1, sb.len, f) == sb.len;
    if (f && fclose(f) != 0)
        ok = 0;
    printf("%zu samples, %zu frames\n", v ? v->nsamples : 0, v ? v->nframes : 0);
    mlprof__sb_free(&sb);
    ops->destroy(st);
    if (!ok) {
        fprintf(stderr, "test_stacks_perfetto: cannot write %s\n", argv[2]);
        return 1;
    }
    char kept[4096];
    snprintf(kept, sizeof kept, "%s.kept.json", argv[1]);
    if (mlprof_dump_to(kept, 0) != MLPROF_OK) {
        fprintf(stderr, "test_stacks_perfetto: %s\n", mlprof_last_error());
        return 1;
    }
    mlprof__stacks_names_drop();
    return mlprof_dump(1) == MLPROF_OK ? 0 : 1;
}
