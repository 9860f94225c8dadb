/*
 * test_formats_continuous.c - continuous dump in each format: spans recorded
 * on three threads in PHASES phases while the collector rewrites OUT_PATH
 * every 20 ms; its name chooses the format (.pftrace, .json.gz, .json).
 * formats_continuous_check.py reads the file while this runs.
 *
 * No timing is assumed: after each phase (every thread's spans ended) the
 * program writes OUT_PATH.ready ("PHASE SPANS_SO_FAR") and waits for
 * OUT_PATH.ack.PHASE, which the checker writes once a copy of the file that
 * it read holds at least those spans. The last phase ends with the final
 * dump; OUT_PATH.counts then says how many spans were recorded and how many
 * events were dropped. The main thread's span "whole run" is open at every
 * dump but the last.
 *
 * usage: test_formats_continuous OUT_PATH
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define THREADS 3
#define PHASES 4
#define PER_PHASE 1500
#define ACK_WAIT_MS 300000 /* the checker decodes a copy with protoc: minutes under a sanitizer */

static mlprof_domain *g_dom;
static pthread_barrier_t g_start, g_done;
static int g_stop;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "worker %d", id);
    mlprof_thread_set_name(name);
    mlprof_span *op = mlprof_task_create(g_dom, "op");
    mlprof_span *inner = mlprof_task_create(g_dom, "inner");
    for (int phase = 0;; phase++) {
        pthread_barrier_wait(&g_start);
        if (__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE))
            break;
        for (int i = 0; i < PER_PHASE; i++) {
            mlprof_begin(op);
            mlprof_arg_int("thread", id);
            mlprof_arg_int("i", (int64_t)phase * PER_PHASE + i);
            if (i % 10 == 0) {
                mlprof_begin(inner);
                mlprof_end(inner);
            }
            mlprof_end(op);
            if (i % 100 == 99)
                sleep_ms(1); /* the collector drains as the threads record */
        }
        pthread_barrier_wait(&g_done);
    }
    return NULL;
}

/* 1 once path exists, 0 after ACK_WAIT_MS without it. */
static int wait_for(const char *path)
{
    for (int ms = 0; ms < ACK_WAIT_MS; ms += 5) {
        if (access(path, F_OK) == 0)
            return 1;
        sleep_ms(5);
    }
    return 0;
}

static void write_text(const char *path, const char *text)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    CHECK(f != NULL, "cannot write %s", tmp);
    if (!f)
        return;
    fputs(text, f);
    CHECK(fclose(f) == 0 && rename(tmp, path) == 0, "cannot write %s", path);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_formats_continuous OUT_PATH\n");
        return 2;
    }
    const char *out = argv[1];
    CHECK_OK(mlprof_set_config("filename", out));
    CHECK_OK(mlprof_set_config("buffer_size", "16M")); /* a phase fits: nothing is dropped */
    CHECK_OK(mlprof_set_config("continuous_dump", "true"));
    CHECK_OK(mlprof_set_config("dump_period", "0.02"));
    mlprof_process_set_name("formats continuous");
    g_dom = mlprof_domain_create("cont");
    mlprof_span *whole = mlprof_task_create(g_dom, "whole run");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(whole); /* open at every dump but the last: unfinished in each tail */
    pthread_barrier_init(&g_start, NULL, THREADS + 1);
    pthread_barrier_init(&g_done, NULL, THREADS + 1);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    char path[4200], text[64];
    int acked = 1;
    for (int phase = 0; phase < PHASES && acked; phase++) {
        pthread_barrier_wait(&g_start);
        pthread_barrier_wait(&g_done);
        if (phase == PHASES - 1)
            break; /* the last phase's spans are checked in the final dump */
        snprintf(text, sizeof text, "%d %d\n", phase, (phase + 1) * PER_PHASE * THREADS);
        snprintf(path, sizeof path, "%s.ready", out);
        write_text(path, text);
        snprintf(path, sizeof path, "%s.ack.%d", out, phase);
        acked = wait_for(path);
        CHECK(acked, "no %s from the checker in %d s", path, ACK_WAIT_MS / 1000);
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_barrier_wait(&g_start);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    mlprof_end(whole);
    uint64_t dropped = mlprof_dropped_events();
    CHECK(dropped == 0, "dropped %llu events", (unsigned long long)dropped);
    CHECK_OK(mlprof_dump(1));
    snprintf(text, sizeof text, "%d %llu\n", acked ? PHASES * PER_PHASE * THREADS : -1,
             (unsigned long long)dropped);
    snprintf(path, sizeof path, "%s.counts", out);
    write_text(path, text);
    return tu_finish("formats_continuous");
}
