/* test_errors.c - the error table (codes, names, messages), the per-thread
 * last error, the version queries, and the allocator and log hooks. */
#include <pthread.h>

#include "testutil.h"

static size_t allocs;
static void *count_malloc(size_t n)
{
    __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
    return malloc(n);
}
static void *count_realloc(void *p, size_t n)
{
    __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
    return realloc(p, n);
}

static char logged[512];
static void on_log(int level, const char *msg, void *user)
{
    (void)level;
    snprintf(logged, sizeof logged, "%s|%s", (const char *)user, msg);
}

static void *other_thread(void *arg)
{
    (void)arg;
    /* a fresh thread has no error, and its errors stay its own */
    CHECK(strcmp(mlprof_last_error(), "") == 0, "fresh thread: %s", mlprof_last_error());
    CHECK(mlprof_set_config("level", "99") == MLPROF_EVALUE, "bad level");
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK(mlprof_set_allocator(NULL, realloc, free) == MLPROF_EINVAL, "incomplete allocator");
    CHECK_OK(mlprof_set_allocator(count_malloc, count_realloc, free));
    mlprof_domain_create("uses the allocator");
    CHECK(allocs > 0, "allocations went through the hook: %zu", allocs);

    CHECK(mlprof_version() == MLPROF_VERSION_NUMBER, "version %u", mlprof_version());
    CHECK(strcmp(mlprof_version_string(), MLPROF_VERSION_STRING) == 0, "version string");

    static const int codes[] = {MLPROF_OK, MLPROF_EINVAL, MLPROF_EKEY, MLPROF_EVALUE, MLPROF_ESTATE,
                                MLPROF_EIO, MLPROF_ENOMEM, MLPROF_EPARSE, MLPROF_EUNSUPPORTED,
                                MLPROF_ELIMIT};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *msg = mlprof_strerror(codes[i]), *name = mlprof_err_name(codes[i]);
        CHECK(msg && *msg && strcmp(msg, "unknown error") != 0, "message for %d", codes[i]);
        CHECK(strncmp(name, "MLPROF_", 7) == 0 && strcmp(name, "MLPROF_UNKNOWN") != 0, "name %s", name);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(msg, mlprof_strerror(codes[j])) != 0, "distinct messages");
    }
    CHECK(strcmp(mlprof_err_name(MLPROF_EKEY), "MLPROF_EKEY") == 0, "EKEY's name");
    CHECK(strcmp(mlprof_strerror(12345), "unknown error") == 0, "unknown code");

    CHECK(mlprof_set_config("nope", "1") == MLPROF_EKEY, "unknown key");
    char mine[512];
    snprintf(mine, sizeof mine, "%s", mlprof_last_error());
    pthread_t th;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, NULL);
    CHECK(strcmp(mine, mlprof_last_error()) == 0, "another thread's error does not touch ours");
    CHECK(strstr(mine, "nope") != NULL, "%s", mine);

    mlprof_set_log_handler(on_log, "ctx");
    CHECK_OK(mlprof_set_config("filename", "/nonexistent-dir/x/trace.json"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_span *s = mlprof_task_create(NULL, "t");
    mlprof_begin(s);
    mlprof_end(s);
    CHECK(mlprof_dump(0) == MLPROF_EIO, "unwritable path");
    CHECK(strstr(mlprof_last_error(), "/nonexistent-dir/x/trace.json") != NULL, "%s", mlprof_last_error());
    /* what was recorded is still there: written once the path works */
    CHECK_OK(mlprof_set_config("filename", tu_path("errors.json")));
    CHECK_OK(mlprof_dump(1));
    char *trace = tu_read_file(tu_path("errors.json"));
    CHECK(trace && strstr(trace, "\"name\":\"t\""), "event kept after a failed dump");
    free(trace);
    mlprof_set_log_handler(NULL, NULL);
    (void)logged;
    return tu_finish("test_errors");
}
