/*
 * test_perfetto_formats.c - one recorded run, the same every time: spans with
 * arguments, frames, markers of each scope, counters (integer and not),
 * memory events on two devices, a second thread, all at times set by hand
 * (the test's clock). It writes the trace to OUT_PATH, whose name chooses
 * the format (.json, .json.gz, .pftrace); sink_formats_check.py runs it once
 * per format and compares the traces event by event. A dump that is not the
 * last is taken in the middle, while a frame and two spans are open, and
 * kept as OUT_PATH.mid: its tail shows them unfinished. mlprof_dump_string,
 * Chrome JSON whatever the file's format, is taken before any dump
 * (OUT_PATH.str0) and right after the one in the middle (OUT_PATH.str): the
 * same trace as JSON, and the file's stream goes on as if it were not.
 *
 * usage: test_perfetto_formats OUT_PATH
 */
#include <pthread.h>

#include "testutil.h"

static mlprof_domain *dom;

static void at(uint64_t ns) { tu_set_now(ns); }

/* Copies the file at from to to; 1 when done. */
static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    int ok = in && out;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        ok = 0;
    return ok;
}

/* mlprof_dump_string's text, written to OUT_PATH followed by suffix. */
static void save_string(const char *out, const char *suffix)
{
    char path[4096], *text = NULL;
    snprintf(path, sizeof path, "%s%s", out, suffix);
    CHECK_OK(mlprof_dump_string(&text));
    FILE *f = text ? fopen(path, "wb") : NULL;
    CHECK(f && fputs(text, f) >= 0, "%s written", path);
    if (f)
        fclose(f);
    mlprof_free(text);
}

/* The second thread: named, with spans of its own and a marker. */
static void *worker(void *arg)
{
    (void)arg;
    mlprof_thread_set_name("worker");
    mlprof_span *load = mlprof_task_create(dom, "load batch");
    mlprof_marker *ready = mlprof_marker_create(dom, "batch ready");
    at(50000);
    mlprof_begin(load);
    mlprof_arg_str("file", "shard-00017.bin");
    mlprof_arg_int("bytes", 1 << 20);
    at(58000);
    mlprof_end(load);
    at(58500);
    mlprof_mark(ready, MLPROF_SCOPE_THREAD);
    mlprof_arg_int("batch", 3);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_perfetto_formats OUT_PATH\n");
        return 2;
    }
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("filename", argv[1]));
    CHECK_OK(mlprof_set_config("json_copy", "1")); /* mlprof_dump_string of a Perfetto trace */
    CHECK_OK(mlprof_set_config("profile_memory", "true"));
    mlprof_process_set_name("formats");
    mlprof_thread_set_name("main");
    dom = mlprof_domain_create("train");
    mlprof_span *step = mlprof_task_create(dom, "step");
    mlprof_span *fwd = mlprof_task_create(dom, "forward");
    mlprof_span *epoch = mlprof_frame_create(dom, "epoch");
    mlprof_marker *mark = mlprof_marker_create(dom, "checkpoint");
    mlprof_counter *loss = mlprof_counter_create(dom, "loss");
    mlprof_counter *seen = mlprof_counter_create(dom, "samples seen");
    at(1000);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));

    at(10000);
    mlprof_begin(epoch);
    mlprof_arg_int("epoch", 1);
    for (int i = 0; i < 3; i++) {
        uint64_t t = 11000 + (uint64_t)i * 10000;
        at(t);
        mlprof_begin(step);
        mlprof_arg_int("step", i);
        mlprof_arg_double("lr", 0.125 / (i + 1));
        mlprof_arg_str("dtype", i == 1 ? "bfloat16 \"mixed\"" : "float32");
        at(t + 1000);
        mlprof_begin(fwd);
        mlprof_arg_int("flops", (int64_t)123456789012 * (i + 1));
        CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, (const void *)(uintptr_t)(0x10000 + 0x1000 * i), 4096,
                                  "activations"));
        at(t + 3000);
        CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CUDA(0), (const void *)(uintptr_t)(0x900000 + 0x100000 * i),
                                  1 << 20, "weights"));
        if (i == 0)
            save_string(argv[1], ".str0"); /* before any dump: the stream has only begun */
        if (i == 1) {
            /* a dump that is not the last: the epoch, this step and its
             * forward pass are open */
            char mid[4096];
            snprintf(mid, sizeof mid, "%s.mid", argv[1]);
            at(t + 4000);
            CHECK_OK(mlprof_dump(0));
            CHECK(copy_file(argv[1], mid), "%s copied to %s", argv[1], mid);
            save_string(argv[1], ".str");
        }
        at(t + 5000);
        mlprof_end(fwd);
        CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, (const void *)(uintptr_t)(0x10000 + 0x1000 * i)));
        at(t + 6000);
        mlprof_counter_set_double(loss, 2.5 / (i + 1));
        mlprof_counter_add(seen, 32);
        at(t + 8000);
        mlprof_end(step);
    }
    at(42000);
    mlprof_mark(mark, MLPROF_SCOPE_PROCESS);
    mlprof_arg_str("path", "/tmp/ckpt");
    at(43000);
    mlprof_mark_dynamic(dom, "all ranks", MLPROF_SCOPE_GLOBAL);
    at(44000);
    mlprof_mark_dynamic(dom, "main only", MLPROF_SCOPE_THREAD);
    at(45000);
    mlprof_end(epoch);

    pthread_t th;
    if (pthread_create(&th, NULL, worker, NULL) == 0)
        pthread_join(th, NULL);
    else
        CHECK(0, "pthread_create");

    at(60000);
    CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CUDA(0), (const void *)(uintptr_t)0x900000));
    at(70000);
    CHECK_OK(mlprof_dump(1));
    return tu_finish("perfetto_formats");
}
