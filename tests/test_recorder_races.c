/*
 * test_recorder_races.c - the recorder against threads that record while
 * another stops, dumps, clears or changes the clock (issue 16, defects 1, 8,
 * 9 and 10). One part per run, named by argv[2]; check_trace.py runs each and
 * reads the traces the counter and in-flight parts write.
 *
 * The races are made wide on purpose, through the public API: observer
 * callbacks and a custom clock that sleep on the recording threads, so that
 * a thread is inside a recording call at nearly every stop.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static int g_quit;

static void pause_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------ defect 9: the clock */

static void part_clock(void)
{
    mlprof_domain *d = mlprof_domain_create("clock");
    mlprof_span *s = mlprof_task_create(d, "work");
    CHECK_OK(mlprof_set_config("filename", tu_path("clock.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(s);
    mlprof_end(s);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));

    /* stopped, the span not dumped: its raw time must keep its clock */
    CHECK(mlprof_set_clock(tu_clock, NULL) == MLPROF_ESTATE, "set_clock with records not dumped: %s",
          mlprof_last_error());
    CHECK(strstr(mlprof_last_error(), "mlprof_set_clock") != NULL, "the message names the call: %s",
          mlprof_last_error());
    char cur[32];
    CHECK_OK(mlprof_get_config("clock", cur, sizeof cur));
    const char *other = strcmp(cur, "monotonic") == 0 ? "tsc" : "monotonic";
    CHECK(mlprof_set_config("clock", other) == MLPROF_ESTATE, "clock key with records not dumped");
    CHECK(strstr(mlprof_last_error(), "\"clock\"") != NULL, "the message names the key: %s", mlprof_last_error());
    const char *keys[] = {"level", "clock"}, *values[] = {"2", other};
    CHECK(mlprof_set_configs(2, keys, values) == MLPROF_ESTATE, "clock among other keys");
    char level[8];
    CHECK_OK(mlprof_get_config("level", level, sizeof level));
    CHECK(strcmp(level, "1") == 0, "all or none: level stays %s", level);

    /* dumped: the clock may change */
    CHECK_OK(mlprof_dump(1));
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_clock(NULL, NULL));
    CHECK_OK(mlprof_set_config("clock", other));
    CHECK_OK(mlprof_set_config("clock", cur));

    /* cleared: likewise */
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(s);
    mlprof_end(s);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK(mlprof_set_clock(tu_clock, NULL) == MLPROF_ESTATE, "again not dumped");
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_clock(NULL, NULL));
}

/* ------------------------------------- defect 10: counter_add's order */

#define ADDERS 4
#define ADDS 25000

static mlprof_counter *g_adds;
static unsigned g_clock_calls; /* atomic */

/* The time, read after a yield to the other threads now and then: a thread
 * that added before it reads the clock is then often overtaken. */
static uint64_t yielding_clock(void *user)
{
    (void)user;
    if (__atomic_add_fetch(&g_clock_calls, 1, __ATOMIC_RELAXED) % 4 == 0)
        sched_yield();
    return mono_ns();
}

static void *adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < ADDS; i++)
        mlprof_counter_add(g_adds, 1);
    return NULL;
}

static void count_run(const char *file)
{
    CHECK_OK(mlprof_set_config("filename", tu_path(file)));
    int64_t before = mlprof_counter_value(g_adds);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_t th[ADDERS];
    for (int i = 0; i < ADDERS; i++)
        pthread_create(&th[i], NULL, adder, NULL);
    for (int i = 0; i < ADDERS; i++)
        pthread_join(th[i], NULL);
    CHECK(mlprof_counter_value(g_adds) - before == (int64_t)ADDERS * ADDS, "the sum %lld",
          (long long)(mlprof_counter_value(g_adds) - before));
    CHECK(mlprof_dropped_events() == 0, "%llu drops", (unsigned long long)mlprof_dropped_events());
    CHECK_OK(mlprof_dump(1));
}

static void part_counter(void)
{
    mlprof_domain *d = mlprof_domain_create("count");
    g_adds = mlprof_counter_create(d, "adds");
    /* the built-in clock (the TSC where invariant), then one that yields */
    count_run("counter.json");
    CHECK_OK(mlprof_set_clock(yielding_clock, NULL));
    count_run("counter_yield.json");
    printf("samples=%d\n", ADDERS * ADDS);
}

/* --------------------------- defect 1: observers after their unregister */

#define OBS_THREADS 2
#define OBS_CYCLES 30

typedef struct obs_user {
    int alive;   /* atomic: registered, not yet unregistered */
    size_t size; /* its span_data_size */
} obs_user;

static int g_in_callback; /* atomic: callbacks running now */
static int g_late;        /* atomic: callbacks of an unregistered observer */

static void callback(obs_user *u, void *data)
{
    __atomic_add_fetch(&g_in_callback, 1, __ATOMIC_ACQ_REL);
    if (!__atomic_load_n(&u->alive, __ATOMIC_ACQUIRE))
        __atomic_add_fetch(&g_late, 1, __ATOMIC_RELAXED);
    memset(data, 0x5a, u->size); /* all of its scratch: ASan sees a frame laid out for less */
    pause_us(50);
    if (!__atomic_load_n(&u->alive, __ATOMIC_ACQUIRE))
        __atomic_add_fetch(&g_late, 1, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&g_in_callback, 1, __ATOMIC_ACQ_REL);
}

static void obs_begin(void *user, const mlprof_span_info *span, void *data)
{
    (void)span;
    callback(user, data);
}

static void obs_end(void *user, const mlprof_span_info *span, void *data)
{
    (void)span;
    callback(user, data);
}

static mlprof_span *g_obs_span;

static void *observed_worker(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&g_quit, __ATOMIC_ACQUIRE)) {
        if (mlprof_get_state() != MLPROF_STATE_RUN) {
            pause_us(20);
            continue;
        }
        mlprof_begin(g_obs_span);
        mlprof_end(g_obs_span);
    }
    return NULL;
}

static void part_observers(void)
{
    mlprof_domain *d = mlprof_domain_create("obs");
    g_obs_span = mlprof_task_create(d, "observed");
    CHECK_OK(mlprof_set_config("filename", tu_path("observers_race.json")));
    pthread_t th[OBS_THREADS];
    for (int i = 0; i < OBS_THREADS; i++)
        pthread_create(&th[i], NULL, observed_worker, NULL);
    static obs_user users[OBS_CYCLES];
    int still_inside = 0;
    for (int k = 0; k < OBS_CYCLES; k++) {
        obs_user *u = &users[k];
        u->size = k % 2 ? 256 : 16; /* each layout unlike the one before */
        __atomic_store_n(&u->alive, 1, __ATOMIC_RELEASE);
        mlprof_observer o = {sizeof o, "racer", u->size, u, obs_begin, NULL, obs_end};
        int id = mlprof_observer_register(&o);
        CHECK(id >= 0, "register: %s", mlprof_last_error());
        CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
        pause_us(3000);
        CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
        /* no callback may run once the stop returned */
        if (__atomic_load_n(&g_in_callback, __ATOMIC_ACQUIRE) != 0)
            still_inside++;
        if (id >= 0)
            CHECK_OK(mlprof_observer_unregister(id));
        __atomic_store_n(&u->alive, 0, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&g_quit, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < OBS_THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(still_inside == 0, "in %d of %d cycles a callback ran after mlprof_set_state(STOP) returned",
          still_inside, OBS_CYCLES);
    CHECK(__atomic_load_n(&g_late, __ATOMIC_ACQUIRE) == 0, "%d callbacks of unregistered observers",
          __atomic_load_n(&g_late, __ATOMIC_ACQUIRE));
    CHECK_OK(mlprof_clear());
}

/* ------------------------- defect 8: records in flight at stop or clear */

#define FLIGHT_THREADS 2
#define FLIGHT_CYCLES 32

static __thread int t_slow_clock;

/* The time, then a pause on the recording threads: the clock is read after
 * the active flag and before the record is published, so each of their
 * records is in flight for the pause. */
static uint64_t slow_clock(void *user)
{
    (void)user;
    uint64_t ns = mono_ns();
    if (t_slow_clock)
        pause_us(100);
    return ns;
}

static mlprof_marker *g_flight_mark;
static mlprof_span *g_flight_span;

static void *flight_worker(void *arg)
{
    (void)arg;
    t_slow_clock = 1;
    while (!__atomic_load_n(&g_quit, __ATOMIC_ACQUIRE)) {
        if (mlprof_get_state() != MLPROF_STATE_RUN) {
            pause_us(20);
            continue;
        }
        mlprof_mark(g_flight_mark, MLPROF_SCOPE_THREAD);
        mlprof_begin(g_flight_span);
        mlprof_end(g_flight_span);
    }
    return NULL;
}

static void part_inflight(void)
{
    CHECK_OK(mlprof_set_clock(slow_clock, NULL));
    mlprof_domain *d = mlprof_domain_create("flight");
    g_flight_mark = mlprof_marker_create(d, "flight_mark");
    g_flight_span = mlprof_task_create(d, "flight_span");
    FILE *bounds = fopen(tu_path("inflight_bounds.txt"), "w");
    CHECK(bounds != NULL, "bounds file");
    if (!bounds)
        return;
    pthread_t th[FLIGHT_THREADS];
    for (int i = 0; i < FLIGHT_THREADS; i++)
        pthread_create(&th[i], NULL, flight_worker, NULL);
    int traces = 0;
    for (int k = 0; k < FLIGHT_CYCLES; k++) {
        char name[64];
        snprintf(name, sizeof name, "inflight_%d.json", traces);
        CHECK_OK(mlprof_set_config("filename", tu_path(name)));
        /* every event of this trace is recorded after this time */
        uint64_t start = mlprof_now_ns();
        CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
        pause_us(2000);
        switch (k % 4) {
        case 0: /* stop, then the final dump */
            CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
            CHECK_OK(mlprof_dump(1));
            break;
        case 1: /* the final dump stops */
            CHECK_OK(mlprof_dump(1));
            break;
        case 2: /* stop, then clear: the next trace starts empty */
            CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
            CHECK_OK(mlprof_clear());
            break;
        default: /* clear while running: the trace holds only what follows */
            start = mlprof_now_ns();
            CHECK_OK(mlprof_clear());
            pause_us(2000);
            CHECK_OK(mlprof_dump(1));
            break;
        }
        if (k % 4 != 2) {
            fprintf(bounds, "%s %llu\n", name, (unsigned long long)start);
            traces++;
        }
        pause_us(1000);
    }
    fclose(bounds);
    __atomic_store_n(&g_quit, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < FLIGHT_THREADS; i++)
        pthread_join(th[i], NULL);
    printf("traces=%d\n", traces);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    const char *part = argc > 2 ? argv[2] : "";
    if (strcmp(part, "clock") == 0)
        part_clock();
    else if (strcmp(part, "counter") == 0)
        part_counter();
    else if (strcmp(part, "observers") == 0)
        part_observers();
    else if (strcmp(part, "inflight") == 0)
        part_inflight();
    else
        CHECK(0, "unknown part \"%s\" (clock, counter, observers, inflight)", part);
    return tu_finish(part);
}
